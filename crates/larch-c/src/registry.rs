//! Handles for C: a handle is a slot number and the slot's generation, never a pointer to
//! freed memory. A call with a handle whose object was freed (its slot's generation moved
//! on) gets `LARCH_EBADHANDLE` instead of reading freed memory, which is what "use after
//! free is an error code where it can be detected" asks of transactions and cursors; only a
//! slot reused 2^32 times could answer a stale handle. Each registry has its own kind, which
//! every handle it gives out carries, so a handle of one kind (a cursor) passed where another
//! is expected (a transaction) never names a live slot there, whatever the two slots' histories.
//!
//! Lookups take no lock: the slots are in chunks that, once allocated, stay until the
//! process exits, so a slot's address never changes, and a handle's slot is read with two
//! atomic loads (the chunk, the generation). Adding and removing take a mutex (the free
//! list). An object is used by one thread at a time (the C API's rule for transactions and
//! cursors, as LMDB's); a database handle's object is shared, which its type allows (`Sync`).

use std::sync::atomic::{AtomicPtr, AtomicU32, Ordering};
use std::sync::Mutex;

/// Slots per chunk.
const CHUNK_SLOTS: usize = 1024;
/// Chunks at most: about four million live handles of one kind.
const CHUNKS_MAX: usize = 4096;
/// The bits of a handle above the slot number that carry the registry's kind.
const KIND_SHIFT: u32 = 56;
const _: () = assert!(CHUNK_SLOTS * CHUNKS_MAX < 1 << (KIND_SHIFT - 32));

struct Slot<T> {
    /// Odd while the slot holds an object; the handle carries the value it had then.
    generation: AtomicU32,
    object: AtomicPtr<T>,
}

pub(crate) struct Registry<T> {
    /// Nonzero, and different for each registry of the process.
    kind: u8,
    chunks: Box<[AtomicPtr<Slot<T>>]>,
    free: Mutex<Free>,
}

#[derive(Default)]
struct Free {
    /// Slots freed, reused last-freed first.
    list: Vec<u32>,
    /// Slots ever handed out.
    used: u32,
}

/// A handle as C sees it: `kind << 56 | (slot + 1) << 32 | generation`, never 0 (the
/// generation of a live slot is odd).
pub(crate) type Handle = u64;

impl<T> Registry<T> {
    /// A registry whose handles carry `kind`: each registry of the process has its own.
    pub(crate) fn new(kind: u8) -> Registry<T> {
        Registry {
            kind,
            chunks: (0..CHUNKS_MAX)
                .map(|_| AtomicPtr::new(std::ptr::null_mut()))
                .collect(),
            free: Mutex::new(Free::default()),
        }
    }

    fn slot(&self, index: u32) -> Option<&Slot<T>> {
        let (chunk, at) = (index as usize / CHUNK_SLOTS, index as usize % CHUNK_SLOTS);
        let base = self.chunks.get(chunk)?.load(Ordering::Acquire);
        if base.is_null() {
            return None;
        }
        // SAFETY: a chunk, once published, holds CHUNK_SLOTS slots and is never freed.
        Some(unsafe { &*base.add(at) })
    }

    /// Stores `object` and returns its handle; `None` if every slot is taken.
    pub(crate) fn insert(&self, object: Box<T>) -> Option<Handle> {
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        let index = match free.list.pop() {
            Some(i) => i,
            None => {
                let i = free.used;
                if i as usize >= CHUNK_SLOTS * CHUNKS_MAX {
                    return None;
                }
                let chunk = &self.chunks[i as usize / CHUNK_SLOTS];
                if chunk.load(Ordering::Acquire).is_null() {
                    let slots: Box<[Slot<T>]> = (0..CHUNK_SLOTS)
                        .map(|_| Slot {
                            generation: AtomicU32::new(0),
                            object: AtomicPtr::new(std::ptr::null_mut()),
                        })
                        .collect();
                    chunk.store(Box::into_raw(slots).cast::<Slot<T>>(), Ordering::Release);
                }
                free.used += 1;
                i
            }
        };
        let slot = self.slot(index)?;
        slot.object.store(Box::into_raw(object), Ordering::Release);
        let generation = slot.generation.load(Ordering::Relaxed).wrapping_add(1) | 1;
        slot.generation.store(generation, Ordering::Release);
        Some(((self.kind as u64) << KIND_SHIFT) | ((index as u64 + 1) << 32) | generation as u64)
    }

    /// The slot number of a handle of this registry's kind.
    fn index(&self, handle: Handle) -> Option<u32> {
        if handle >> KIND_SHIFT != self.kind as u64 {
            return None;
        }
        let index = ((handle >> 32) & ((1 << (KIND_SHIFT - 32)) - 1)).checked_sub(1)?;
        u32::try_from(index).ok()
    }

    /// The slot number and slot of a live handle of this registry's kind.
    fn live(&self, handle: Handle) -> Option<(u32, &Slot<T>)> {
        let index = self.index(handle)?;
        let slot = self.slot(index)?;
        let generation = handle as u32;
        (generation & 1 == 1 && slot.generation.load(Ordering::Acquire) == generation)
            .then_some((index, slot))
    }

    /// The object of a live handle.
    ///
    /// # Safety
    /// No other reference to the object is used while this one is (the C API's rule: a
    /// transaction or cursor is used by one thread at a time), unless `T` is `Sync` and the
    /// references are shared ones; the object is not removed while the reference lives.
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn get(&self, handle: Handle) -> Option<&mut T> {
        let (_, slot) = self.live(handle)?;
        let object = slot.object.load(Ordering::Acquire);
        // SAFETY: a live slot's object is a leaked Box; exclusivity is the caller's.
        (!object.is_null()).then(|| unsafe { &mut *object })
    }

    /// Takes a live handle's object out: the handle (and any copy of it) is stale from now on.
    pub(crate) fn remove(&self, handle: Handle) -> Option<Box<T>> {
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        let (index, slot) = self.live(handle)?;
        let object = slot.object.swap(std::ptr::null_mut(), Ordering::AcqRel);
        slot.generation
            .store((handle as u32).wrapping_add(1) & !1, Ordering::Release);
        free.list.push(index);
        // SAFETY: the slot held a leaked Box, taken out once (the generation moved on).
        (!object.is_null()).then(|| unsafe { Box::from_raw(object) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handle_of_one_kind_is_never_live_in_another() {
        let (txns, cursors) = (Registry::<u32>::new(2), Registry::<u32>::new(3));
        // Same slot, same generation in both: the handles differ by their kind alone.
        let t = txns.insert(Box::new(7)).unwrap();
        let c = cursors.insert(Box::new(9)).unwrap();
        assert_eq!(t & ((1 << KIND_SHIFT) - 1), c & ((1 << KIND_SHIFT) - 1));
        assert_ne!(t, c);
        // SAFETY: nothing else uses the objects.
        unsafe {
            assert!(txns.get(c).is_none());
            assert!(cursors.get(t).is_none());
            assert_eq!(txns.get(t).copied(), Some(7));
        }
        assert!(txns.remove(c).is_none());
        assert_eq!(cursors.remove(c).map(|b| *b), Some(9));
        // Stale, made up, and a slot number past the kind's bits.
        assert!(cursors.remove(c).is_none());
        assert!(txns.remove(0).is_none());
        assert!(txns.remove(t | (1 << (KIND_SHIFT - 1))).is_none());
        assert_eq!(txns.remove(t).map(|b| *b), Some(7));
    }
}
