//! The overlay's memory: the slot arrays of its hash table, the arena its entries and versions
//! are carved from, and the spare memory a dropped overlay leaves for the next (`Spare`).

use super::*;

/// Open addressing over slots, linear probing, at most three quarters full (`overfull`);
/// never has a removal. Beside the slots (an entry's address each), a control byte per slot
/// (`control`): 0 while the slot is empty, else `fingerprint` of its entry's hash, stored
/// after the slot itself. A probe reads the control bytes, eight times denser than the
/// slots, and reads a slot and its entry only where its byte matches the key's fingerprint
/// (one in 128 of the occupied slots it passes, for another key): a key that is not in the
/// overlay, which is what most reads beside a writer look for, costs the miss on a table of
/// bytes that stays in the cache far longer than the slots do.
pub(super) struct Slots {
    pub(super) slots: Zeroed<Slot>,
    pub(super) control: Zeroed<AtomicU8>,
}

impl Slots {
    /// The memory a table holds: its slots and their control bytes.
    pub(super) fn bytes(&self) -> usize {
        self.slots.len() * (size_of::<Slot>() + size_of::<AtomicU8>())
    }

    pub(super) fn new(n: usize) -> Slots {
        // SAFETY: a slot of all zero bytes is a valid empty slot (a null pointer), as is a
        // zero control byte.
        unsafe {
            Slots {
                slots: Zeroed::new(n, || Slot {
                    entry: AtomicPtr::new(ptr::null_mut()),
                }),
                control: Zeroed::new(n, || AtomicU8::new(0)),
            }
        }
    }

    /// Empties every slot.
    pub(super) fn clear(&mut self) {
        // SAFETY: the table is borrowed exclusively, and a slot of all zero bytes is a valid
        // empty slot (a null pointer), as is a zero control byte.
        unsafe {
            ptr::write_bytes(self.slots.as_mut_ptr(), 0, self.slots.len());
            ptr::write_bytes(self.control.as_mut_ptr(), 0, self.control.len());
        }
    }

    /// Fills empty slot `at` with `entry`, of hash `hash`: the slot first, then its control
    /// byte with a release store, so that a probe that reads the byte with an acquire load
    /// finds the slot written.
    pub(super) fn fill(&self, at: usize, hash: u64, entry: *mut Entry) {
        self.slots[at].entry.store(entry, Ordering::Release);
        self.control[at].store(fingerprint(hash), Ordering::Release);
    }
}

/// `n` values of `T` whose bytes start all zero: from the heap while small, else an anonymous
/// mapping of their own (`ZEROED_MAP_BYTES`), which the kernel zeroes as it is first touched
/// and takes back whole when it is dropped. What the overlays hold (their arenas' chunks and
/// their slot tables) lives in these, not in the allocator's arenas: glibc gives each thread
/// that allocates an arena of its own, and memory freed into one serves only the threads of
/// that arena, so an application whose writes come from one thread and then another kept the
/// overlays' memory of each: a 1M random `overwrite` after a `fillrandom` on another of the
/// benchmark's threads peaked at 70-78 MB of anonymous memory, against 42 MB for the same
/// overwrite in a process of its own and 47 MB with `MALLOC_ARENA_MAX=1` (50-53 MB in
/// mappings). A mapping also goes back to the kernel when dropped, where freed heap memory
/// below the arena's top stays resident. The arenas' full-size chunks are the spare's slabs'
/// (`Slabs`), which give their memory back the same way without a mapping each.
pub(super) struct Zeroed<T> {
    ptr: std::ptr::NonNull<T>,
    len: usize,
    /// The mapping, where the values are in one; else they are a boxed slice.
    map: Option<memmap2::MmapMut>,
}

/// Bytes from which `Zeroed` values get a mapping of their own: a chunk of an overlay's arena
/// and larger (a mapping costs a system call and a fault a page, as fresh heap memory does).
const ZEROED_MAP_BYTES: usize = CHUNK_BYTES;

/// A chunk of an overlay's arena.
pub(super) enum Chunk {
    /// `CHUNK_WORDS` words of one of the spare's slabs (`Slabs`). Its memory is the slab's:
    /// given back to the kernel by `Spare::keep`, and unmapped with the spare, never by a drop.
    Slab(std::ptr::NonNull<MaybeUninit<u64>>),
    /// Memory of its own: a record larger than a chunk, an arena without a spare, or a chunk
    /// made where no slab could be mapped.
    Own(Zeroed<MaybeUninit<u64>>),
}

impl Chunk {
    /// `words` words of memory of its own.
    fn own(words: usize) -> Chunk {
        // SAFETY: any bytes are a valid `MaybeUninit<u64>`.
        Chunk::Own(unsafe { Zeroed::new(words, MaybeUninit::uninit) })
    }

    /// Its length in words.
    pub(super) fn len(&self) -> usize {
        match self {
            Chunk::Slab(_) => CHUNK_WORDS,
            Chunk::Own(z) => z.len(),
        }
    }

    fn as_mut_ptr(&mut self) -> *mut MaybeUninit<u64> {
        match self {
            Chunk::Slab(p) => p.as_ptr(),
            Chunk::Own(z) => z.as_mut_ptr(),
        }
    }
}

// SAFETY: a chunk owns its words (a slab's chunk is held by one arena or spare list at a
// time), as a `Box<[MaybeUninit<u64>]>` would.
unsafe impl Send for Chunk {}

/// A chunk's bytes.
const CHUNK_BYTES: usize = CHUNK_WORDS * size_of::<u64>();

/// Chunks a slab holds: one mapping of 2 MiB.
pub(super) const SLAB_CHUNKS: usize = 32;

/// The mappings the spare carves full-size chunks from (`Spare::chunk`), kept until the spare
/// is dropped with its handle, and their chunks that hold no memory: never touched, or given
/// back (`MADV_DONTNEED`) once no overlay needed them. A mapping a chunk cost each new chunk a
/// system call that takes the process's mapping lock for writing, and each chunk freed
/// another (`munmap`); that lock waits for every thread that holds it for reading, such as the
/// frames' keeper for the length of a huge page's population (`MADV_POPULATE_WRITE`). Over
/// YCSB's load of 200K records of 1 KB, the writer made 1,180-1,218 `mmap` calls and 738-777
/// `munmap` calls and waited 95 ms of the load's 935 ms in `mmap` for that lock.
/// `MADV_DONTNEED` takes it for reading only, and a slab's chunk taken again costs no call.
#[derive(Default)]
pub(super) struct Slabs {
    pub(super) maps: Vec<memmap2::MmapMut>,
    pub(super) empty: Vec<std::ptr::NonNull<MaybeUninit<u64>>>,
}

// SAFETY: the pointers are into `maps`, which the struct owns; moving it between threads moves
// nothing they point to.
unsafe impl Send for Slabs {}

impl Slabs {
    /// A chunk that holds no memory: an empty one, or the first of a slab mapped now (the
    /// others become empty ones). `None` where the mapping fails.
    fn take(&mut self) -> Option<Chunk> {
        if let Some(p) = self.empty.pop() {
            return Some(Chunk::Slab(p));
        }
        let mut map = memmap2::MmapMut::map_anon(SLAB_CHUNKS * CHUNK_BYTES).ok()?;
        let base = map.as_mut_ptr().cast::<MaybeUninit<u64>>();
        // Pushed last first, so that they are taken in address order.
        for i in (1..SLAB_CHUNKS).rev() {
            // SAFETY: chunk `i` lies within the mapping, which holds `SLAB_CHUNKS` of them.
            let p = unsafe { base.add(i * CHUNK_WORDS) };
            self.empty.extend(std::ptr::NonNull::new(p));
        }
        let first = std::ptr::NonNull::new(base)?;
        self.maps.push(map);
        Some(Chunk::Slab(first))
    }
}

/// Gives the memory of slab chunks `chunks` back to the kernel (`MADV_DONTNEED`: the next
/// touch maps zeroed pages), a call for each run of adjacent chunks. Returns them, sorted.
fn give_back(
    mut chunks: Vec<std::ptr::NonNull<MaybeUninit<u64>>>,
) -> Vec<std::ptr::NonNull<MaybeUninit<u64>>> {
    chunks.sort_unstable();
    let mut i = 0;
    while i < chunks.len() {
        let start = chunks[i].as_ptr();
        let mut n = 1;
        // SAFETY (of the `add`s): each address is a chunk's start within a slab, and a chunk
        // past it is at most one past the slab's end.
        while i + n < chunks.len()
            && chunks[i + n].as_ptr() == unsafe { start.add(n * CHUNK_WORDS) }
        {
            n += 1;
        }
        // SAFETY: the range is `n` chunks of mapped slabs (adjacent chunks of two slabs are two
        // mappings side by side) that no arena holds: their bytes may be discarded. A failure
        // leaves the memory resident, which the chunk's next user overwrites anyway.
        unsafe {
            libc::madvise(start.cast(), n * CHUNK_BYTES, libc::MADV_DONTNEED);
        }
        i += n;
    }
    chunks
}

impl<T> Zeroed<T> {
    /// `n` values, each `zero()` on the heap.
    ///
    /// # Safety
    /// All-zero bytes are a valid `T`, the value `zero` makes.
    pub(super) unsafe fn new(n: usize, zero: impl FnMut() -> T) -> Zeroed<T> {
        let bytes = n.saturating_mul(size_of::<T>());
        const { assert!(align_of::<T>() <= 4096) };
        if bytes >= ZEROED_MAP_BYTES {
            // A mapping is page-aligned, so aligned for `T`.
            if let Ok(mut map) = memmap2::MmapMut::map_anon(bytes) {
                if let Some(ptr) = std::ptr::NonNull::new(map.as_mut_ptr().cast::<T>()) {
                    return Zeroed {
                        ptr,
                        len: n,
                        map: Some(map),
                    };
                }
            }
        }
        let mut zero = zero;
        let boxed: Box<[T]> = (0..n).map(|_| zero()).collect();
        let len = boxed.len();
        let ptr = std::ptr::NonNull::from(Box::leak(boxed)).cast::<T>();
        Zeroed {
            ptr,
            len,
            map: None,
        }
    }
}

impl<T> std::ops::Deref for Zeroed<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // SAFETY: `ptr` points to `len` initialised values (zero, then written through
        // `DerefMut` or the values' own interior mutability), owned by `self`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T> std::ops::DerefMut for Zeroed<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as in `deref`, borrowed exclusively.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl<T> Drop for Zeroed<T> {
    fn drop(&mut self) {
        // SAFETY: the values are `T`s owned here (dropped in place; a mapping is then
        // unmapped with `map`); without a mapping they are the boxed slice `new` leaked.
        unsafe {
            std::ptr::drop_in_place(std::ptr::slice_from_raw_parts_mut(
                self.ptr.as_ptr(),
                self.len,
            ));
            if self.map.is_none() {
                let slice = std::ptr::slice_from_raw_parts_mut(
                    self.ptr.as_ptr().cast::<MaybeUninit<T>>(),
                    self.len,
                );
                drop(Box::from_raw(slice));
            }
        }
    }
}

// SAFETY: `Zeroed<T>` owns its values as a `Box<[T]>` would.
unsafe impl<T: Send> Send for Zeroed<T> {}
// SAFETY: as above.
unsafe impl<T: Sync> Sync for Zeroed<T> {}

/// Memory an overlay leaves, when it is dropped, for the next overlays of its handle: its
/// arena's full-size chunks and its slot table. A new overlay starts with the table (sized
/// for as many entries as an earlier overlay held, so it rarely grows) and takes chunks from
/// here before making new ones. Measured on 1M fillseq of one-put commits: the writer
/// spent 12% of its time in first touches of fresh memory (page faults, and the zeroing of
/// each new table) and in rehashing as a fresh table doubled from 1,024 slots.
///
/// A table must be emptied before it is used again, which costs its size (32 MiB for 2M
/// slots): the thread that drops an overlay (often the writer, as it publishes) only leaves
/// the table here, and the next checkpoint's thread empties it (`prepare`) before a later
/// overlay takes it. Holds at most one overlay's chunks or a `SPARE_CHUNKS_SHARE`th of the live
/// overlays' if more, two tables, one checkpoint's gathering vectors, and no more bytes of
/// chunks and tables than its cap (`with_cap`: an eighth of the memory budget); freed with
/// the handle. The chunks are its slabs' (`Slabs`), the larger tables mappings of their own
/// (`Zeroed`).
#[derive(Default)]
pub(crate) struct Spare {
    /// Bytes of chunks and tables it may keep (0: no cap).
    cap: usize,
    pub(super) chunks: Mutex<Vec<Chunk>>,
    /// The mappings full-size chunks are carved from, and their chunks that hold no memory.
    pub(super) slabs: Mutex<Slabs>,
    /// Full-size chunks the overlays drawing on this spare hold (`Arena::alloc` counts them,
    /// `keep` uncounts them).
    live: AtomicUsize,
    /// Bytes the overlays drawing on this spare hold (`Overlay::bytes`), alive or not in the
    /// published snapshot: each counts its growth at a commit and uncounts all of it when
    /// dropped (`held`).
    held: AtomicUsize,
    /// An emptied table, for the next overlay whose table outgrows its own (`Overlay::grow`).
    pub(super) slots: Mutex<Option<Box<Slots>>>,
    /// A table left by a dropped overlay, not emptied yet.
    pub(super) dirty: Mutex<Option<Box<Slots>>>,
    /// The last checkpoint's gathering vectors, emptied, for the next (`Overlay::gather`).
    pub(super) gathering: Mutex<GatherBuffers>,
}

/// The vectors a checkpoint gathers a frozen overlay's records in (`Overlay::gather`), kept
/// empty from one checkpoint to the next by the spare. Allocated afresh at each checkpoint,
/// and as large as a slice's records, they were 243 of the 516 blocks of 128 KiB and more
/// that a 1M random one-put overwrite allocated (`perf probe` on `malloc`).
#[derive(Default)]
pub(super) struct GatherBuffers {
    pub(super) sort: Vec<[usize; 10]>,
    pub(super) records: Vec<[usize; 7]>,
    pub(super) entries: Vec<usize>,
}

impl GatherBuffers {
    /// The bytes their allocations hold.
    fn bytes(&self) -> usize {
        self.sort.capacity() * size_of::<[usize; 10]>()
            + self.records.capacity() * size_of::<[usize; 7]>()
            + self.entries.capacity() * size_of::<usize>()
    }
}

/// `v`'s allocation, emptied, as a vector of `U`, a type of `T`'s size and alignment: how a
/// vector whose elements borrow one overlay is kept for the next overlay's.
pub(super) fn recycle<T, U>(mut v: Vec<T>) -> Vec<U> {
    const {
        assert!(size_of::<T>() == size_of::<U>() && align_of::<T>() == align_of::<U>());
    }
    v.clear();
    let mut v = std::mem::ManuallyDrop::new(v);
    // SAFETY: `v` is empty and will not be dropped; its allocation was made for `capacity`
    // elements of `T`, which is the layout of as many elements of `U` (same size and
    // alignment, asserted above), so the new vector may own and free it.
    unsafe { Vec::from_raw_parts(v.as_mut_ptr().cast::<U>(), 0, v.capacity()) }
}

impl Spare {
    /// A spare that keeps at most `cap` bytes of chunks and tables.
    pub(crate) fn with_cap(cap: usize) -> Spare {
        Spare {
            cap,
            ..Spare::default()
        }
    }

    /// The bytes every overlay drawing on this spare holds (`Overlay::bytes`), from the
    /// active ones to those only readers still hold.
    pub(crate) fn held(&self) -> usize {
        self.held.load(Ordering::Relaxed)
    }

    /// An overlay drawing on this spare went from holding `before` bytes to `after` (0: it
    /// is dropped).
    pub(super) fn note_held(&self, before: usize, after: usize) {
        if after > before {
            self.held.fetch_add(after - before, Ordering::Relaxed);
        } else if before > after {
            self.held.fetch_sub(before - after, Ordering::Relaxed);
        }
    }

    /// The gathering vectors the last checkpoint left (empty ones if none).
    pub(super) fn gathering(&self) -> GatherBuffers {
        std::mem::take(&mut *self.gathering.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Keeps a checkpoint's gathering vectors, emptied, for the next, if they fit in a
    /// quarter of the cap (they are as large as the largest slice's records: within the
    /// memory budget, as its overlay was).
    pub(super) fn keep_gathering(&self, buffers: GatherBuffers) {
        if self.cap == 0 || buffers.bytes() <= self.cap / 4 {
            *self.gathering.lock().unwrap_or_else(|e| e.into_inner()) = buffers;
        }
    }

    /// A full-size chunk: one a dropped overlay left, else a slab's (`Slabs::take`); `None`
    /// where no slab could be mapped.
    pub(super) fn chunk(&self) -> Option<Chunk> {
        let kept = self.chunks.lock().unwrap_or_else(|e| e.into_inner()).pop();
        kept.or_else(|| self.slabs.lock().unwrap_or_else(|e| e.into_inner()).take())
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

    /// Keeps what a dropped overlay owned: its full-size chunks (up to as many as it had, or a
    /// `SPARE_CHUNKS_SHARE`th of the chunks the live overlays hold if more), and its table, to
    /// be emptied by `prepare`, if at least 1 in `SPARE_SLOTS_FILL` of its slots was used
    /// (emptying a table
    /// costs its size: one that held few entries is freed instead, and the next overlay
    /// starts small again).
    pub(super) fn keep(&self, chunks: Vec<Chunk>, table: Option<Box<Slots>>, entries: usize) {
        let cap = if self.cap == 0 { usize::MAX } else { self.cap };
        let full: Vec<_> = chunks
            .into_iter()
            .filter(|c| c.len() == CHUNK_WORDS)
            .collect();
        let uncount = |live: usize| Some(live.saturating_sub(full.len()));
        let live = self
            .live
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, uncount)
            .map_or(0, |before| before.saturating_sub(full.len()));
        let n = full
            .len()
            .max(live / SPARE_CHUNKS_SHARE)
            .min(cap / CHUNK_BYTES);
        let (kept_bytes, over) = {
            let mut kept = self.chunks.lock().unwrap_or_else(|e| e.into_inner());
            kept.extend(full);
            let keep = n.min(kept.len());
            let over = kept.split_off(keep);
            (kept.len() * CHUNK_BYTES, over)
        };
        // Beyond what is kept, a slab's chunks go back to the kernel (and stay the slab's, for
        // a later chunk), others are freed.
        let slab_chunks: Vec<_> = over
            .into_iter()
            .filter_map(|c| match c {
                Chunk::Slab(p) => Some(p),
                Chunk::Own(_) => None,
            })
            .collect();
        if !slab_chunks.is_empty() {
            let empty = give_back(slab_chunks);
            let mut slabs = self.slabs.lock().unwrap_or_else(|e| e.into_inner());
            // Taken last first: the lowest addresses first.
            slabs.empty.extend(empty.into_iter().rev());
        }
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

/// The spare keeps chunks up to this share of the live overlays' (or one dropped overlay's,
/// if more). With random keys every slice's overlay grows while one is merged: the dropped
/// overlay's chunks alone did not cover what the others took before the next checkpoint, and
/// the rest came fresh: a 1M random `fillrandom` then `overwrite` took 170K page faults
/// against 131K with chunks from the allocator, which reuses every chunk freed, and ran 5-9%
/// slower in three alternated runs; with this share, 149K and the same rates.
const SPARE_CHUNKS_SHARE: usize = 4;

/// A dropped overlay's table is kept for the next one if it has at most this many slots per
/// entry it held (a table is at most three quarters full: it has 4/3 to this many).
pub(super) const SPARE_SLOTS_FILL: usize = 8;

/// Where entries and versions live: chunks of memory handed out front to back and freed only
/// with the overlay, so that a commit's records cost no allocation of their own (boxing each
/// key, value and version cost a quarter of a one-put commit's time, with their frees when a
/// checkpoint dropped the overlay).
#[derive(Default)]
pub(super) struct Arena {
    pub(super) chunks: Vec<Chunk>,
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
            let chunk = spare.unwrap_or_else(|| Chunk::own(CHUNK_WORDS.max(words)));
            if let Some(s) = self.spare.as_ref().filter(|_| chunk.len() == CHUNK_WORDS) {
                s.live.fetch_add(1, Ordering::Relaxed);
            }
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
    /// By table number: the entries made by blind writes (`WriteTable::set` of a key neither
    /// the transaction nor the overlay had), whose entry counts assumed the key was new
    /// (`Overlay::blind_in_tree`).
    pub(super) blind: HashMap<u64, BlindList>,
    /// Bytes of the blind writes' lists of entries (`blind`), as the writer grew them.
    pub(super) blind_bytes: usize,
    /// The runs of versions a newer version of the same key replaced in this overlay, with
    /// their entries: written by commits, named only by those versions, freed by the merge
    /// of this overlay (docs/design/large-values.md, "The merge").
    pub(super) replaced_runs: Vec<(*const Entry, PageRef, usize)>,
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
