//! The overlay's memory: the slot arrays of its hash table, the arena its entries and versions
//! are carved from, and the spare memory a dropped overlay leaves for the next (`Spare`).

use super::*;

/// Open addressing over slots, linear probing; never has a removal. Beside the slots, a
/// control byte per slot (`control`): 0 while the slot is empty, else `fingerprint` of its
/// entry's hash, stored after the slot itself. A probe reads the control bytes, sixteen
/// times denser than the slots, and reads a slot only where its byte matches the key's
/// fingerprint (one in 128 of the occupied slots it passes, for another key): a key that is
/// not in the overlay, which is what most reads beside a writer look for, costs the miss on
/// a table of bytes that stays in the cache far longer than the slots do.
pub(super) struct Slots {
    pub(super) slots: Box<[Slot]>,
    pub(super) control: Box<[AtomicU8]>,
}

impl Slots {
    /// The memory a table holds: its slots and their control bytes.
    pub(super) fn bytes(&self) -> usize {
        self.slots.len() * (size_of::<Slot>() + size_of::<AtomicU8>())
    }

    pub(super) fn new(n: usize) -> Slots {
        Slots {
            slots: (0..n)
                .map(|_| Slot {
                    hash: AtomicU64::new(0),
                    entry: AtomicPtr::new(ptr::null_mut()),
                })
                .collect(),
            control: (0..n).map(|_| AtomicU8::new(0)).collect(),
        }
    }

    /// Empties every slot.
    pub(super) fn clear(&mut self) {
        // SAFETY: the table is borrowed exclusively, and a slot of all zero bytes is a valid
        // empty slot (a zero hash and a null pointer), as is a zero control byte.
        unsafe {
            ptr::write_bytes(self.slots.as_mut_ptr(), 0, self.slots.len());
            ptr::write_bytes(self.control.as_mut_ptr(), 0, self.control.len());
        }
    }

    /// Fills empty slot `at` with `entry`, of hash `hash`: the slot first, then its control
    /// byte with a release store, so that a probe that reads the byte with an acquire load
    /// finds the slot written.
    pub(super) fn fill(&self, at: usize, hash: u64, entry: *mut Entry) {
        let slot = &self.slots[at];
        slot.hash.store(hash, Ordering::Relaxed);
        slot.entry.store(entry, Ordering::Release);
        self.control[at].store(fingerprint(hash), Ordering::Release);
    }
}

/// Memory an overlay leaves, when it is dropped, for the next overlays of its handle: its
/// arena's full-size chunks and its slot table. A new overlay starts with the table (sized
/// for as many entries as an earlier overlay held, so it rarely grows) and takes chunks from
/// here before asking the allocator. Measured on 1M fillseq of one-put commits: the writer
/// spent 12% of its time in first touches of fresh memory (page faults, and the zeroing of
/// each new table) and in rehashing as a fresh table doubled from 1,024 slots.
///
/// A table must be emptied before it is used again, which costs its size (32 MiB for 2M
/// slots): the thread that drops an overlay (often the writer, as it publishes) only leaves
/// the table here, and the next checkpoint's thread empties it (`prepare`) before a later
/// overlay takes it. Holds at most one overlay's chunks and two tables, and no more bytes
/// than its cap (`with_cap`: an eighth of the memory budget);
/// freed with the handle.
#[derive(Default)]
pub(crate) struct Spare {
    /// Bytes of chunks and tables it may keep (0: no cap).
    cap: usize,
    pub(super) chunks: Mutex<Vec<Box<[MaybeUninit<u64>]>>>,
    /// An emptied table, for the next overlay whose table outgrows its own (`Overlay::grow`).
    pub(super) slots: Mutex<Option<Box<Slots>>>,
    /// A table left by a dropped overlay, not emptied yet.
    pub(super) dirty: Mutex<Option<Box<Slots>>>,
}

impl Spare {
    /// A spare that keeps at most `cap` bytes of chunks and tables.
    pub(crate) fn with_cap(cap: usize) -> Spare {
        Spare {
            cap,
            ..Spare::default()
        }
    }

    pub(super) fn chunk(&self) -> Option<Box<[MaybeUninit<u64>]>> {
        self.chunks.lock().unwrap_or_else(|e| e.into_inner()).pop()
    }

    /// Its emptied table, if it has `slots` slots or more.
    pub(super) fn slots_at_least(&self, slots: usize) -> Option<Box<Slots>> {
        let mut kept = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        kept.take_if(|t| t.slots.len() >= slots)
    }

    /// Empties the table a dropped overlay left, for the next overlay to take (off the
    /// writer's thread: a checkpoint's, before it writes).
    pub(crate) fn prepare(&self) {
        let dirty = self.dirty.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(mut table) = dirty {
            table.clear();
            *self.slots.lock().unwrap_or_else(|e| e.into_inner()) = Some(table);
        }
    }

    /// Keeps what a dropped overlay owned: its full-size chunks (at most as many as it had:
    /// the spare never holds more than one overlay's), and its table, to be emptied by
    /// `prepare`, if at least 1 in `SPARE_SLOTS_FILL` of its slots was used (emptying a table
    /// costs its size: one that held few entries is freed instead, and the next overlay
    /// starts small again).
    pub(super) fn keep(
        &self,
        chunks: Vec<Box<[MaybeUninit<u64>]>>,
        table: Option<Box<Slots>>,
        entries: usize,
    ) {
        let chunk_bytes = CHUNK_WORDS * size_of::<u64>();
        let cap = if self.cap == 0 { usize::MAX } else { self.cap };
        let full: Vec<_> = chunks
            .into_iter()
            .filter(|c| c.len() == CHUNK_WORDS)
            .collect();
        let n = full.len().min(cap / chunk_bytes);
        let kept_bytes = {
            let mut kept = self.chunks.lock().unwrap_or_else(|e| e.into_inner());
            kept.extend(full);
            kept.truncate(n);
            kept.len() * chunk_bytes
        };
        // The tables it holds (an emptied one, and this one) within what the chunks leave.
        let held = self
            .slots
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map_or(0, |t| t.bytes());
        if let Some(table) = table.filter(|t| {
            entries * SPARE_SLOTS_FILL >= t.slots.len()
                && kept_bytes.saturating_add(held).saturating_add(t.bytes()) <= cap
        }) {
            *self.dirty.lock().unwrap_or_else(|e| e.into_inner()) = Some(table);
        }
    }
}

/// A dropped overlay's table is kept for the next one if it has at most this many slots per
/// entry it held (a table is at most half full: it has 2 to this many).
pub(super) const SPARE_SLOTS_FILL: usize = 8;

/// Where entries and versions live: chunks of memory handed out front to back and freed only
/// with the overlay, so that a commit's records cost no allocation of their own (boxing each
/// key, value and version cost a quarter of a one-put commit's time, with their frees when a
/// checkpoint dropped the overlay).
#[derive(Default)]
pub(super) struct Arena {
    pub(super) chunks: Vec<Box<[MaybeUninit<u64>]>>,
    /// Words used in the last chunk.
    pub(super) used: usize,
    /// Bytes of the chunks held.
    pub(super) held: usize,
    /// Where full-size chunks come from first, and go back to with the overlay.
    pub(super) spare: Option<Arc<Spare>>,
}

/// A chunk's words (64 KiB). One size for every chunk of every overlay: an overlay holds at
/// most one chunk's worth more than its records, and every chunk a dropped overlay leaves can
/// serve the next (`Spare`). Chunks that doubled up to 1 MiB left each slice's overlay up to
/// half a megabyte it never filled: with the overlays cut in 27 slices, 420 bytes held a
/// record of 116 (1M random one-put overwrites).
pub(super) const CHUNK_WORDS: usize = 8 << 10;

impl Arena {
    /// `bytes` of memory, 8-byte aligned, valid until the arena is dropped.
    pub(super) fn alloc(&mut self, bytes: usize) -> *mut u8 {
        let words = bytes.div_ceil(8);
        let room = self.chunks.last().map_or(0, |c| c.len() - self.used);
        if words > room {
            // A larger record gets a chunk of its own size, which no later overlay takes.
            let spare = (words <= CHUNK_WORDS)
                .then(|| self.spare.as_ref().and_then(|s| s.chunk()))
                .flatten();
            let chunk = spare.unwrap_or_else(|| Box::new_uninit_slice(CHUNK_WORDS.max(words)));
            self.held += chunk.len() * size_of::<u64>();
            self.chunks.push(chunk);
            self.used = 0;
        }
        let Some(chunk) = self.chunks.last_mut() else {
            unreachable!("a chunk was pushed above")
        };
        // SAFETY: `used + words <= chunk.len()`, checked or made so above.
        let p = unsafe { chunk.as_mut_ptr().add(self.used) } as *mut u8;
        self.used += words;
        p
    }
}

/// What the overlay owns, and the writer's lock: the arena, and the tables (each boxed so
/// that its address does not change while the vector grows), dropped with the overlay.
#[allow(clippy::vec_box)]
#[derive(Default)]
pub(super) struct Owned {
    pub(super) arena: Arena,
    pub(super) tables: Vec<Box<Slots>>,
    /// Bytes of the tables held (`Slots::bytes`).
    pub(super) table_bytes: usize,
    /// Every entry, in the order they were made: what the scan index (`Overlay::index`) sorts
    /// from where it left off.
    pub(super) order: Vec<*const Entry>,
}

impl Drop for Owned {
    fn drop(&mut self) {
        if let Some(spare) = self.arena.spare.take() {
            // The current table is the last: each one grown is pushed after the one it replaced.
            spare.keep(
                std::mem::take(&mut self.arena.chunks),
                self.tables.pop(),
                self.order.len(),
            );
        }
    }
}
