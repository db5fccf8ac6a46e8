//! Frames: the tree's pages in anonymous memory of the engine's own, for a writing handle
//! whose file fits in the frames' share of memory (docs/design/buffer-pool.md).
//!
//! One reservation of address space (`MAP_NORESERVE`), page `id` at `base + id * page_bytes`,
//! and beside it a state byte a page: `EMPTY` (the frame's bytes mean nothing), `LOADING` (a
//! thread is reading the page from the file into it) or `READY` (the frame holds the page as
//! the file does, or as the writer is writing it). The reservation never moves, so a slice a
//! reader borrowed stays valid as long as the `Frames` lives, as a slice of a mapping does.
//!
//! The rules that keep the frames and the file the same, for every page a snapshot can reach:
//! - a reader finds a page `READY` or loads it with `read_at` (`Frames::bytes`);
//! - the writer changes only pages no snapshot reaches (copy-on-write into free space), and
//!   says which way it places each one: in its frame (`Frames::placed`, `READY` at once: the
//!   writer writes the whole page there) or in a buffer of its own that goes to the file
//!   (`Frames::forget_page`, `EMPTY`, so that a reader loads it from the file once it is
//!   committed, or `Frames::fill` copies it in);
//! - every page the writer wrote in its frame is written to the file before any meta page
//!   names it (`WritePages::write_out`): with `write_at`, or from the frame with
//!   `Storage::write_behind`, whose writes the meta page's `write_at` (or a sync) waits for;
//!   a frame being written behind is not changed until the storage has drained it, and the
//!   frames drain their storage before they let their memory go.
//!
//! So the file holds every committed page, and other processes, followers and a snapshot read
//! through a mapping of the file read the same bytes as the frames.
//!
//! The keeper (`Access::keep_frames`) puts each 2 MiB chunk of frames in one huge page by
//! copying it into a huge page of its own and moving that over the chunk
//! (`Frames::move_to_huge_page`). A copy is good only if nothing wrote the chunk while it was
//! made, so the writer marks each chunk it writes in a transaction (`Frames::writing`, a count
//! per chunk that is odd until the transaction ends, `Frames::written`), and the keeper moves
//! its copy in only where the count has not changed, holding `moving` (which the writer takes
//! to mark a chunk) while it does.

use crate::error::{Error, Result};
use crate::storage::Storage;
use std::io;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

/// The frame's bytes mean nothing: a reader loads the page from the file.
pub(crate) const EMPTY: u8 = 0;
/// A thread is reading the page from the file into the frame; others wait for it.
const LOADING: u8 = 1;
/// The frame holds the page.
pub(crate) const READY: u8 = 2;

/// Alignment of the reservation: the size of a huge page on x86-64 and arm64 (4 KiB base
/// pages), so that every 2 MiB of frames can be one huge page.
const HUGE_BYTES: usize = 2 << 20;

pub(crate) struct Frames {
    /// The reservation's start, aligned to `HUGE_BYTES`.
    base: NonNull<u8>,
    /// Frames covered: `pages * page_bytes` bytes from `base`.
    pages: u64,
    page_bytes: usize,
    /// The whole mapping as `mmap` returned it (the aligned part lies within), for `munmap`.
    raw: Mapping,
    /// One state byte a page.
    state: Box<[AtomicU8]>,
    /// The data file, which loads read from.
    storage: Arc<dyn Storage>,
    /// A count a chunk (`HUGE_BYTES` of frames): odd while a write transaction may write the
    /// chunk's frames (from the first it wrote there to its end), even otherwise; it changes
    /// with each, so a copy of the chunk made while it stayed even and unchanged is whole.
    chunk_writes: Box<[AtomicU32]>,
    /// The chunks the current write transaction made odd (the writer's alone).
    touched: Mutex<Vec<u32>>,
    /// Held by the writer while it marks a chunk as written, and by the keeper while it moves
    /// a huge page over one: a chunk the keeper moves is not written meanwhile.
    moving: AtomicBool,
    /// Chunks moved into huge pages (`move_to_huge_page`).
    moved: AtomicU64,
}

// SAFETY: the frames are plain memory owned by `Frames`; concurrent access follows the state
// bytes' protocol (module comment): a frame is written only by the one thread that moved its
// state to `LOADING`, or by the writer while no snapshot reaches its page, and read only once
// `READY` is seen with `Acquire` ordering (or by the writer, its own pages).
unsafe impl Send for Frames {}
unsafe impl Sync for Frames {}

impl Frames {
    /// Reserves frames for `bytes` of the file (rounded up to whole pages). `None` where the
    /// system refuses the reservation: the caller maps the file instead.
    pub(crate) fn new(storage: Arc<dyn Storage>, page_bytes: usize, bytes: u64) -> Option<Frames> {
        // Whole huge pages, so that the keeper can put every part of the frames in one.
        let bytes = bytes.checked_next_multiple_of(HUGE_BYTES as u64)?;
        let pages = bytes.div_ceil(page_bytes as u64);
        let len = usize::try_from(pages).ok()?.checked_mul(page_bytes)?;
        // Zeroed (`EMPTY`) by the allocator, which takes fresh zero pages from the system for
        // a large array: no page of it is touched until its frames are.
        let zeroed: Box<[u8]> = vec![EMPTY; usize::try_from(pages).ok()?].into_boxed_slice();
        // SAFETY: `AtomicU8` has the size, alignment and bit validity of `u8`.
        let state = unsafe { Box::from_raw(Box::into_raw(zeroed) as *mut [AtomicU8]) };
        let (raw, base) = map_aligned(len).ok()?;
        let chunks = len / HUGE_BYTES;
        Some(Frames {
            base,
            pages,
            page_bytes,
            raw,
            state,
            storage,
            chunk_writes: (0..chunks).map(|_| AtomicU32::new(0)).collect(),
            touched: Mutex::new(Vec::new()),
            moving: AtomicBool::new(false),
            moved: AtomicU64::new(0),
        })
    }

    /// The writer is about to write (or change the state of) pages `[id, end)`: their chunks
    /// are marked written until the transaction ends (`written`). Pages past the frames are
    /// left out.
    #[inline]
    fn writing(&self, id: u64, end: u64) {
        let end = end.min(self.pages);
        if id >= end {
            return;
        }
        let cp = self.chunk_pages();
        for c in id / cp..=(end - 1) / cp {
            if self.chunk_writes[c as usize].load(Ordering::Relaxed) & 1 == 0 {
                self.mark(c as usize);
            }
        }
    }

    #[cold]
    fn mark(&self, c: usize) {
        self.lock_moving();
        self.chunk_writes[c].fetch_add(1, Ordering::Relaxed);
        self.moving.store(false, Ordering::Release);
        self.touched
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(c as u32);
    }

    /// Takes `moving`: the keeper holds it for one `mremap`.
    fn lock_moving(&self) {
        while self
            .moving
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            std::hint::spin_loop();
        }
    }

    /// The write transaction ended: it writes none of the frames any more.
    pub(crate) fn written(&self) {
        let mut touched = self.touched.lock().unwrap_or_else(|e| e.into_inner());
        for c in touched.drain(..) {
            self.chunk_writes[c as usize].fetch_add(1, Ordering::Release);
        }
    }

    /// The memory the frames hold: the bytes of the pages ready in them (loaded or written),
    /// and of the chunks moved into huge pages (`Database::stats`).
    pub(crate) fn held_bytes(&self) -> (u64, u64) {
        let ready = self
            .state
            .iter()
            .filter(|s| s.load(Ordering::Relaxed) == READY)
            .count() as u64;
        (
            ready * self.page_bytes as u64,
            self.moved_chunks() * HUGE_BYTES as u64,
        )
    }

    /// The chunks moved into huge pages so far (`move_to_huge_page`).
    pub(crate) fn moved_chunks(&self) -> u64 {
        self.moved.load(Ordering::Relaxed)
    }

    /// Maps fresh memory in for the frames of `[at, at + len)` (those within the frames), in
    /// one call (`MADV_POPULATE_WRITE`) rather than a page fault a frame as the writer first
    /// touches each. Only a hint; what the frames hold does not change.
    pub(crate) fn populate(&self, at: usize, len: usize) {
        let end = at.saturating_add(len).min(self.len() as usize);
        if at >= end {
            return;
        }
        #[cfg(target_os = "linux")]
        // SAFETY: within the frames' reservation; populating changes no byte of memory that
        // is mapped already, and maps zeroed pages where none is.
        unsafe {
            libc::madvise(
                self.base.as_ptr().add(at) as *mut libc::c_void,
                end - at,
                libc::MADV_POPULATE_WRITE,
            );
        }
    }

    /// The pages the frames cover.
    pub(crate) fn pages(&self) -> u64 {
        self.pages
    }

    /// Bytes covered.
    pub(crate) fn len(&self) -> u64 {
        self.pages * self.page_bytes as u64
    }

    pub(crate) fn base(&self) -> NonNull<u8> {
        self.base
    }

    pub(crate) fn state_ptr(&self) -> NonNull<AtomicU8> {
        NonNull::from(&*self.state).cast()
    }

    /// The pages `[id, id + pages)`, loaded from the file where not ready. Requires: the
    /// caller reads committed pages (a snapshot's) or the writer's own.
    pub(crate) fn bytes(&self, id: u64, pages: u64) -> Result<&[u8]> {
        let end = id
            .checked_add(pages)
            .filter(|&end| end <= self.pages)
            .ok_or_else(|| Error::corrupted(id, "page beyond the frames"))?;
        for p in id..end {
            self.load(p)?;
        }
        // SAFETY: within the frames (checked above), every page `READY`: a frame that is
        // ready is written only by the writer, and only while no snapshot reaches its page
        // (module comment), so no `&mut` to these bytes exists while this slice lives.
        Ok(unsafe {
            std::slice::from_raw_parts(
                self.base.as_ptr().add(id as usize * self.page_bytes),
                pages as usize * self.page_bytes,
            )
        })
    }

    /// Makes page `id` ready: loads it from the file if its frame is empty, or waits for the
    /// thread loading it.
    fn load(&self, id: u64) -> Result<()> {
        let state = &self.state[id as usize];
        loop {
            match state.load(Ordering::Acquire) {
                READY => return Ok(()),
                LOADING => std::thread::yield_now(),
                _ => {
                    if state
                        .compare_exchange(EMPTY, LOADING, Ordering::Acquire, Ordering::Acquire)
                        .is_err()
                    {
                        continue;
                    }
                    // SAFETY: this thread moved the page to `LOADING`: no other thread reads
                    // or writes the frame until it is `READY` (or `EMPTY` again).
                    let frame = unsafe {
                        std::slice::from_raw_parts_mut(
                            self.base.as_ptr().add(id as usize * self.page_bytes),
                            self.page_bytes,
                        )
                    };
                    let at = id * self.page_bytes as u64;
                    return match self.storage.read_at(frame, at) {
                        Ok(()) => {
                            state.store(READY, Ordering::Release);
                            Ok(())
                        }
                        Err(e) => {
                            state.store(EMPTY, Ordering::Release);
                            Err(if e.kind() == io::ErrorKind::UnexpectedEof {
                                Error::corrupted(id, "page beyond the end of the file")
                            } else {
                                Error::from_io(e)
                            })
                        }
                    };
                }
            }
        }
    }

    /// A pointer to bytes `[at, at + len)` for the writer, with every page in it ready
    /// (loaded first where empty); `None` if out of range or a load fails. The writer turns it
    /// into a slice (`WriteMap::slice_mut`) under the contract that no snapshot reads it.
    pub(crate) fn writable(&self, at: usize, len: usize) -> Option<*mut u8> {
        let end = at.checked_add(len)?;
        if end as u64 > self.len() {
            return None;
        }
        let (first, last) = (at / self.page_bytes, end.div_ceil(self.page_bytes));
        self.writing(first as u64, last as u64);
        for p in first..last {
            self.load(p as u64).ok()?;
        }
        // SAFETY: within the frames (checked above).
        Some(unsafe { self.base.as_ptr().add(at) })
    }

    /// The writer placed pages `[id, id + n)` in their frames: it writes them whole there
    /// before it reads them, so they are ready without a load. Requires: no snapshot reaches
    /// them (they were free).
    pub(crate) fn placed(&self, id: u64, n: u64) {
        self.set(id, n, READY);
    }

    /// The writer placed pages `[id, id + n)` in buffers of its own, which go to the file,
    /// or has just written them to the file from there: whatever their frames hold is stale
    /// (a load that read the file before the write, the keeper's, is thrown away; one under
    /// way is waited for), and a reader loads them from the file. Requires: no snapshot
    /// reaches them.
    pub(crate) fn forget_page(&self, id: u64, n: u64) {
        self.set(id, n, EMPTY);
    }

    /// Pages `[id, id + n)` were just written to the file by a thread beside the write
    /// transaction (the committer's runs, docs/design/large-values.md), while a checkpoint
    /// may be writing other frames: whatever their frames hold is stale, and a reader loads
    /// them from the file. Unlike `forget_page` this marks no chunk as written (the count's
    /// parity and `touched` belong to the write transaction): under `moving`, each chunk's
    /// count moves on by two, so that a copy the keeper made across the write is thrown away,
    /// and the pages are set empty. Requires: no snapshot reaches them.
    pub(crate) fn forget_written_apart(&self, id: u64, n: u64) {
        let end = id.saturating_add(n).min(self.pages);
        if id >= end {
            return;
        }
        let cp = self.chunk_pages();
        self.lock_moving();
        for c in id / cp..=(end - 1) / cp {
            self.chunk_writes[c as usize].fetch_add(2, Ordering::Release);
        }
        for p in id..end {
            let state = &self.state[p as usize];
            // A reader's load under way (the keeper claims pages only under `moving`, held
            // here) read the file before or during the write: waited for, then thrown away.
            let mut now = state.load(Ordering::Acquire);
            loop {
                if now == LOADING {
                    std::thread::yield_now();
                    now = state.load(Ordering::Acquire);
                    continue;
                }
                match state.compare_exchange_weak(now, EMPTY, Ordering::AcqRel, Ordering::Acquire) {
                    Ok(_) => break,
                    Err(seen) => now = seen,
                }
            }
        }
        self.moving.store(false, Ordering::Release);
    }

    /// Sets the state of pages `[id, id + n)` (those within the frames) for the writer,
    /// after any load of them under way: the keeper loads free pages too (`warm`), and its
    /// copy must not land on bytes the writer wrote. With `to` `LOADING` (a claim), a page
    /// already ready stays so: a free page's ready frame is loaded by no one.
    fn set(&self, id: u64, n: u64, to: u8) {
        let end = id.saturating_add(n).min(self.pages);
        self.writing(id, end);
        for p in id.min(end)..end {
            let state = &self.state[p as usize];
            let mut now = state.load(Ordering::Acquire);
            loop {
                // Already so: no locked instruction (it would wait for the writer's stores
                // to the pages it just wrote).
                if (now == to && to != LOADING) || (now == READY && to == LOADING) {
                    break;
                }
                if now == LOADING {
                    std::thread::yield_now();
                    now = state.load(Ordering::Acquire);
                    continue;
                }
                match state.compare_exchange_weak(now, to, Ordering::AcqRel, Ordering::Acquire) {
                    Ok(_) => break,
                    Err(seen) => now = seen,
                }
            }
        }
    }

    /// Chunk `c`'s count of write transactions (`chunk_writes`): unchanged while the writer
    /// leaves the chunk alone.
    pub(crate) fn chunk_count(&self, c: u64) -> u32 {
        self.chunk_writes[c as usize].load(Ordering::Acquire)
    }

    /// The pages of one huge page of frames: what the keeper warms and moves at a step.
    pub(crate) fn chunk_pages(&self) -> u64 {
        (HUGE_BYTES / self.page_bytes).max(1) as u64
    }

    /// The frames' whole chunks (one huge page each).
    pub(crate) fn chunks(&self) -> u64 {
        self.len() / HUGE_BYTES as u64
    }

    /// The frames' chunks (`chunk_pages` pages each) that hold pages of the file as long as
    /// it is now.
    pub(crate) fn chunks_in_file(&self) -> u64 {
        let file_pages = self.storage.len().unwrap_or(0) / self.page_bytes as u64;
        file_pages.min(self.pages).div_ceil(self.chunk_pages())
    }

    /// Loads the empty pages of chunk `c` that lie in the file from it, consecutive ones in
    /// one read: the keeper reads a file that fits in the frames whole, in large reads, before
    /// the readers ask for its pages one at a time. A read that fails leaves its pages empty
    /// (a reader that needs one loads it and meets the error) and is returned. Then the page
    /// cache's copy of the chunk is let go (`drop_cached`).
    pub(crate) fn warm(&self, c: u64) -> io::Result<()> {
        let file_pages = self.storage.len()? / self.page_bytes as u64;
        let start = c * self.chunk_pages();
        let end = (start + self.chunk_pages()).min(file_pages).min(self.pages);
        let mut p = start;
        while p < end {
            // A run of pages this thread moved from empty to loading.
            let first = p;
            while p < end
                && self.state[p as usize]
                    .compare_exchange(EMPTY, LOADING, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
            {
                p += 1;
            }
            if p == first {
                p += 1;
                continue;
            }
            let (at, len) = (
                first as usize * self.page_bytes,
                (p - first) as usize * self.page_bytes,
            );
            // SAFETY: the run's pages are `LOADING`, moved there by this thread: nothing else
            // reads or writes their frames until they leave it.
            let run = unsafe { std::slice::from_raw_parts_mut(self.base.as_ptr().add(at), len) };
            let r = self.storage.read_at(run, at as u64);
            let to = if r.is_ok() { READY } else { EMPTY };
            for q in first..p {
                self.state[q as usize].store(to, Ordering::Release);
            }
            r?;
        }
        self.drop_cached(start, end);
        Ok(())
    }

    /// Lets the page cache's copy of pages `[start, end)` go (`Storage::drop_cached`): the
    /// frames hold them, and a second copy in the kernel would be memory a cgroup charges
    /// beside them (a reopened file read in whole by the keeper, readers' loads and the
    /// kernel's read-ahead around them, a load's pages written with `pwrite`). The dirty ones
    /// stay until written back. Only a hint: a failure changes nothing but memory.
    fn drop_cached(&self, start: u64, end: u64) {
        if end > start {
            let page = self.page_bytes as u64;
            let _ = self.storage.drop_cached(start * page, (end - start) * page);
        }
    }

    /// Puts chunk `c` in one huge page, so that a random read across the frames misses the
    /// TLB far less often (docs/design/buffer-pool.md, "Huge pages without the first touch's
    /// cost"): a new huge page is made and touched (`Stage`), the chunk copied into it while
    /// readers go on reading the old pages, and the copy moved over the chunk with `mremap`
    /// (a reader that reaches the chunk meanwhile waits for the move of one page table entry,
    /// where `MADV_COLLAPSE` would hold it for the whole copy). Addresses and bytes stay as
    /// they were, so slices readers borrowed stay valid.
    ///
    /// `Moved::Busy` where the chunk was busy (the writer wrote it, or a page was being
    /// loaded, while the copy was made): the caller tries again later, and `stage` keeps the
    /// huge page made for it. `Moved::Never` where the kernel would not move the copy (no
    /// mapping left for one more: `vm.max_map_count`). An error where no huge page could be
    /// made (`EINVAL`: no transparent huge pages; `EAGAIN` or `ENOMEM`: none free now). A
    /// moved chunk's copy in the page cache is let go (`drop_cached`).
    pub(crate) fn move_to_huge_page(&self, c: u64, stage: &mut Option<Stage>) -> io::Result<Moved> {
        let at = c as usize * HUGE_BYTES;
        if at + HUGE_BYTES > self.len() as usize {
            return Ok(Moved::Yes);
        }
        let seen = self.chunk_writes[c as usize].load(Ordering::Acquire);
        if seen & 1 == 1 {
            return Ok(Moved::Busy);
        }
        let cp = self.chunk_pages();
        let first = c * cp;
        let mut ready = Vec::with_capacity(cp as usize);
        for p in first..first + cp {
            match self.state[p as usize].load(Ordering::Acquire) {
                READY => ready.push(true),
                EMPTY => ready.push(false),
                _ => return Ok(Moved::Busy),
            }
        }
        let buf = match stage {
            Some(s) => s.0,
            None => stage.insert(Stage::new()?).0,
        };
        // The chunk's empty pages that lie in the file and were read from it into the copy:
        // they are ready once it is moved in.
        let mut empty: Vec<(u64, bool)> = Vec::new();
        let file_pages = self.storage.len().unwrap_or(0) / self.page_bytes as u64;
        let mut i = 0;
        while i < cp as usize {
            let mut j = i + 1;
            while j < cp as usize && ready[j] == ready[i] {
                j += 1;
            }
            let (p, run) = (first + i as u64, (j - i) as u64);
            let (off, len) = (i * self.page_bytes, (j - i) * self.page_bytes);
            if ready[i] {
                // SAFETY: both ranges lie within the chunk's frames and the stage (`HUGE_BYTES`
                // each) and are copied through raw pointers (no reference to the frames is
                // made). The chunk's ready frames do not change while its count stays even; a
                // writer that writes the chunk during the copy changes the count first, and
                // the copy is then thrown away (checked below, as a sequence lock's reader
                // does).
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        self.base.as_ptr().add(at + off),
                        buf.as_ptr().add(off),
                        len,
                    )
                };
            } else {
                // An empty frame's bytes mean nothing (never touched, for a load's pages the
                // writer left on the file): the page is read from the file instead. The file's
                // page changes only in a write transaction that marks the chunk first, so a
                // read made while the count stayed even and unchanged is the page.
                let in_file = file_pages.saturating_sub(p).min(run);
                let read = in_file > 0 && {
                    let n = in_file as usize * self.page_bytes;
                    // SAFETY: within the stage (the run lies within the chunk), which only
                    // this thread reads or writes.
                    let to = unsafe { std::slice::from_raw_parts_mut(buf.as_ptr().add(off), n) };
                    self.storage.read_at(to, p * self.page_bytes as u64).is_ok()
                };
                empty.extend((p..p + run).map(|q| (q, read && q < p + in_file)));
            }
            i = j;
        }
        self.lock_moving();
        let moved = (|| {
            if self.chunk_writes[c as usize].load(Ordering::Acquire) != seen {
                return Moved::Busy;
            }
            // The empty pages claimed, so that no reader loads one into the old pages while
            // they are replaced; one a reader loaded during the copy makes the copy stale.
            let claimed = self.claim_empty(empty.iter().map(|&(p, _)| p));
            let r = if claimed < empty.len() {
                Moved::Busy
            } else {
                // SAFETY: the chunk is neither written (the count, under `moving`) nor loaded
                // (its empty pages claimed) while its pages are replaced by the copy.
                let to = unsafe { self.base.as_ptr().add(at) };
                match stage.take() {
                    // SAFETY: as above; `to` is aligned to `HUGE_BYTES` (the base is, and so
                    // is `at`) and the chunk lies within the frames' mapping (checked at the
                    // start).
                    Some(s) => match unsafe { s.move_to(to) } {
                        Ok(()) => {
                            self.moved.fetch_add(1, Ordering::Relaxed);
                            Moved::Yes
                        }
                        Err(_) => Moved::Never,
                    },
                    None => Moved::Busy,
                }
            };
            // Pages read from the file are ready in the huge page; the rest stay empty (and
            // all of them where the copy was not moved in).
            for &(p, read) in &empty[..claimed] {
                let to = if read && r == Moved::Yes {
                    READY
                } else {
                    EMPTY
                };
                self.state[p as usize].store(to, Ordering::Release);
            }
            r
        })();
        self.moving.store(false, Ordering::Release);
        if moved == Moved::Yes {
            self.drop_cached(first, (first + cp).min(file_pages));
        }
        Ok(moved)
    }

    /// Claims `pages`, in order, for a change to their frames' memory (a move or a give-back,
    /// under `moving`): each empty one is marked loading, so that no reader loads it
    /// meanwhile, up to the first that is not empty. The count claimed; the caller stores
    /// each claimed page's state back.
    fn claim_empty(&self, pages: impl IntoIterator<Item = u64>) -> usize {
        pages
            .into_iter()
            .take_while(|&p| {
                self.state[p as usize]
                    .compare_exchange(EMPTY, LOADING, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
            })
            .count()
    }

    /// Puts chunk `c`, which lies past the file's end, in one huge page of fresh memory before
    /// the writer reaches it, in place: its range is advised `MADV_HUGEPAGE` and populated for
    /// writing (`MADV_POPULATE_WRITE`, which maps a zeroed huge page where the range holds no
    /// page yet), then checked to be one huge page (`MADV_COLLAPSE`, at once where it is).
    /// Nothing any thread reads changes: populating maps memory only where none is, and a
    /// collapse keeps the bytes and the addresses (a writer that reached the chunk first only
    /// makes it slower), so neither the writer nor the readers wait for the keeper. `Ok(true)`
    /// where the chunk is in a huge page (it counts as moved); `Ok(false)` past the frames or
    /// where the kernel had no huge page for it (left for a move); an error where it has
    /// none at all (`EINVAL`: no transparent huge pages).
    pub(crate) fn prepare_huge_page(&self, c: u64) -> io::Result<bool> {
        let at = c as usize * HUGE_BYTES;
        if at + HUGE_BYTES > self.len() as usize {
            return Ok(false);
        }
        #[cfg(target_os = "linux")]
        {
            // SAFETY: within the frames' reservation (checked above).
            let ptr = unsafe { self.base.as_ptr().add(at) } as *mut libc::c_void;
            for advice in [
                libc::MADV_HUGEPAGE,
                libc::MADV_POPULATE_WRITE,
                libc::MADV_COLLAPSE,
            ] {
                // SAFETY: advice over `HUGE_BYTES` of the reservation; none of the three
                // changes a byte any thread reads (above).
                if unsafe { libc::madvise(ptr, HUGE_BYTES, advice) } != 0 {
                    let e = io::Error::last_os_error();
                    return match e.raw_os_error() {
                        Some(libc::EINVAL) => Err(e),
                        _ => Ok(false),
                    };
                }
            }
            self.moved.fetch_add(1, Ordering::Relaxed);
            Ok(true)
        }
        #[cfg(not(target_os = "linux"))]
        Err(io::Error::from(io::ErrorKind::Unsupported))
    }

    /// Lets go the memory of chunk `c`, one the keeper put in a huge page ahead of the writer
    /// (`prepare_huge_page`, past the file's end) that the file did not grow into: where no
    /// write transaction writes it and every page of it is empty, its memory is dropped
    /// (`MADV_DONTNEED`: an empty frame's bytes mean nothing; the next touch maps fresh
    /// memory) and it is no longer asked for in huge pages (`MADV_NOHUGEPAGE`: a writer's
    /// first touch would otherwise zero a whole huge page), and it counts as moved no more.
    /// False where the chunk is busy or holds a page (it is left as it is).
    pub(crate) fn give_back(&self, c: u64) -> bool {
        let at = c as usize * HUGE_BYTES;
        if at + HUGE_BYTES > self.len() as usize {
            return false;
        }
        let cp = self.chunk_pages();
        let first = c * cp;
        self.lock_moving();
        let given = (|| {
            if self.chunk_writes[c as usize].load(Ordering::Acquire) & 1 == 1 {
                return false;
            }
            // Every page claimed, so that no reader loads one into the chunk while its
            // memory goes; one ready or being loaded keeps the chunk.
            let claimed = self.claim_empty(first..first + cp) as u64;
            let given = claimed == cp && {
                #[cfg(target_os = "linux")]
                // SAFETY: `HUGE_BYTES` of the frames' reservation (checked above), whose pages
                // are all claimed (no reader reads or loads them) and which no write
                // transaction writes (its count is even, and the writer marks a chunk under
                // `moving`, held here, before it writes there); an empty frame's bytes are
                // never read.
                unsafe {
                    let ptr = self.base.as_ptr().add(at) as *mut libc::c_void;
                    libc::madvise(ptr, HUGE_BYTES, libc::MADV_NOHUGEPAGE) == 0
                        && libc::madvise(ptr, HUGE_BYTES, libc::MADV_DONTNEED) == 0
                }
                #[cfg(not(target_os = "linux"))]
                false
            };
            for p in first..first + claimed {
                self.state[p as usize].store(EMPTY, Ordering::Release);
            }
            given
        })();
        self.moving.store(false, Ordering::Release);
        if given {
            self.moved.fetch_sub(1, Ordering::Relaxed);
        }
        given
    }

    /// Copies `bytes`, the whole of pages from `id` that the writer just wrote to the file
    /// from a buffer of its own, into their frames, and makes them ready. Pages past the
    /// frames are left out. Requires: no snapshot reaches them yet.
    pub(crate) fn fill(&self, id: u64, bytes: &[u8]) {
        self.fill_all(&[(id, bytes)]);
    }

    /// `fill` for each of `pages` (first page, bytes), every page claimed before any is
    /// copied: a claim of a page not ready is a locked instruction, which waits for the
    /// stores before it to land, and after a copy those are a page's worth of stores to
    /// memory not in the cache (11% of a checkpoint's thread in YCSB A of 1 KB records, the
    /// claims one by one between the copies).
    pub(crate) fn fill_all(&self, pages: &[(u64, &[u8])]) {
        let cut = |id: u64, bytes: &[u8]| {
            let n = (bytes.len() / self.page_bytes) as u64;
            n.min(self.pages.saturating_sub(id))
        };
        // Claimed first where not ready: a keeper's load of them under way would land its copy
        // after this one. The writer waits for a load under way while it holds the claims
        // before it, which cannot deadlock: no other thread waits while it holds a claim (a
        // reader's load claims one page and reads it; the keeper's warm and moves pass over a
        // page another thread holds).
        for &(id, bytes) in pages {
            let n = cut(id, bytes);
            if n > 0 {
                self.set(id, n, LOADING);
            }
        }
        for &(id, bytes) in pages {
            let n = cut(id, bytes);
            if n == 0 {
                continue;
            }
            // SAFETY: within the frames (`n` cut to them); the pages are the writer's alone
            // (requirement) and `LOADING` or ready (claimed above), so nothing reads or writes
            // these frames meanwhile.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    bytes.as_ptr(),
                    self.base.as_ptr().add(id as usize * self.page_bytes),
                    n as usize * self.page_bytes,
                );
            }
            for p in id..id + n {
                self.state[p as usize].store(READY, Ordering::Release);
            }
        }
    }

    /// Whether page `id` is ready (tests).
    #[cfg(test)]
    pub(crate) fn is_ready(&self, id: u64) -> bool {
        self.state
            .get(id as usize)
            .is_some_and(|s| s.load(Ordering::Acquire) == READY)
    }
}

impl Drop for Frames {
    fn drop(&mut self) {
        // Writes behind from these frames still in flight read them until drained (a failure
        // is kept by the storage for its next drain).
        let _ = self.storage.drain();
        // SAFETY: the mapping `mmap` returned in `new`; no slice of it outlives `self` (a
        // borrowed page's lifetime is tied to the `Access` that owns the frames).
        unsafe {
            libc::munmap(self.raw.0.as_ptr(), self.raw.1);
        }
    }
}

/// What `Frames::move_to_huge_page` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Moved {
    /// The chunk is in a huge page.
    Yes,
    /// The chunk was busy: try again later.
    Busy,
    /// The kernel would not move it: move no more.
    Never,
}

/// A mapping as `mmap` returned it: its start and length.
type Mapping = (NonNull<libc::c_void>, usize);

/// A fresh anonymous private mapping (`MAP_NORESERVE`: nothing is touched) of `len` bytes
/// and `HUGE_BYTES` more: the whole mapping (for `munmap`), and the address within it, aligned
/// to `HUGE_BYTES`, where `len` bytes start.
fn map_aligned(len: usize) -> io::Result<(Mapping, NonNull<u8>)> {
    let raw_len = len
        .checked_add(HUGE_BYTES)
        .ok_or_else(|| io::Error::from(io::ErrorKind::OutOfMemory))?;
    // SAFETY: a fresh anonymous private mapping; no existing memory is touched.
    let raw = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            raw_len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if raw == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    let raw = NonNull::new(raw).ok_or_else(|| io::Error::from(io::ErrorKind::OutOfMemory))?;
    let offset = (raw.as_ptr() as usize).next_multiple_of(HUGE_BYTES) - raw.as_ptr() as usize;
    // SAFETY: `offset < HUGE_BYTES`, so `base..base + len` lies within the mapping.
    let base = unsafe { NonNull::new_unchecked((raw.as_ptr() as *mut u8).add(offset)) };
    Ok(((raw, raw_len), base))
}

/// A huge page of anonymous memory of its own, touched, for `Frames::move_to_huge_page`.
pub(crate) struct Stage(NonNull<u8>);

// SAFETY: a mapping of its own that only its owner reads or writes.
unsafe impl Send for Stage {}

impl Stage {
    /// A new mapping of `HUGE_BYTES`, aligned to them, asked for in a huge page and touched
    /// (the zeroing, and on a virtual machine the host's first touch, happen here, on the
    /// keeper's thread), then checked to be one (`MADV_COLLAPSE` on a range already in a huge
    /// page succeeds at once; else it makes one, or says why it cannot).
    #[cfg(target_os = "linux")]
    fn new() -> io::Result<Stage> {
        let ((raw, raw_len), base) = map_aligned(HUGE_BYTES)?;
        let (raw, at) = (raw.as_ptr() as usize, base.as_ptr() as usize);
        // SAFETY: the parts of the fresh mapping around the aligned huge page, which nothing
        // uses, are unmapped; the page itself is this stage's alone.
        unsafe {
            if at > raw {
                libc::munmap(raw as *mut libc::c_void, at - raw);
            }
            if raw + raw_len > at + HUGE_BYTES {
                libc::munmap(
                    (at + HUGE_BYTES) as *mut libc::c_void,
                    raw + raw_len - at - HUGE_BYTES,
                );
            }
        }
        // Unmapped when dropped, on an error below too.
        let stage = Stage(base);
        let ptr = at as *mut libc::c_void;
        // SAFETY: advice over the stage's own page, and one write into it.
        unsafe {
            if libc::madvise(ptr, HUGE_BYTES, libc::MADV_HUGEPAGE) != 0 {
                return Err(io::Error::last_os_error());
            }
            std::ptr::write_volatile(base.as_ptr(), 0);
            if libc::madvise(ptr, HUGE_BYTES, libc::MADV_COLLAPSE) != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(stage)
    }

    #[cfg(not(target_os = "linux"))]
    fn new() -> io::Result<Stage> {
        Err(io::Error::from(io::ErrorKind::Unsupported))
    }

    /// Moves the stage's page over `HUGE_BYTES` at `to` (the old pages there are unmapped).
    ///
    /// # Safety
    /// `to` is aligned to `HUGE_BYTES`, and `[to, to + HUGE_BYTES)` lies within a mapping of
    /// this process that nothing writes meanwhile.
    #[cfg(target_os = "linux")]
    unsafe fn move_to(self, to: *mut u8) -> io::Result<()> {
        let from = self.0.as_ptr() as *mut libc::c_void;
        // SAFETY: `from` is the stage's own mapping of `HUGE_BYTES`; `to` as required.
        let r = unsafe {
            libc::mremap(
                from,
                HUGE_BYTES,
                HUGE_BYTES,
                libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED,
                to as *mut libc::c_void,
            )
        };
        if r == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        // Moved: nothing of the stage is left to unmap.
        std::mem::forget(self);
        Ok(())
    }

    #[cfg(not(target_os = "linux"))]
    unsafe fn move_to(self, _to: *mut u8) -> io::Result<()> {
        Err(io::Error::from(io::ErrorKind::Unsupported))
    }
}

impl Drop for Stage {
    fn drop(&mut self) {
        // SAFETY: the stage's own mapping, not moved (`move_to` forgets a moved one).
        unsafe {
            libc::munmap(self.0.as_ptr() as *mut libc::c_void, HUGE_BYTES);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::FileStorage;

    fn storage_with(pages: &[u8], page_bytes: usize) -> (tempfile::TempDir, Arc<dyn Storage>) {
        let dir = tempfile::tempdir().unwrap();
        let s = FileStorage::open(&dir.path().join("f"), false, true).unwrap();
        for (i, &b) in pages.iter().enumerate() {
            s.write_at(&vec![b; page_bytes], (i * page_bytes) as u64)
                .unwrap();
        }
        (dir, Arc::new(s))
    }

    #[test]
    fn a_page_is_loaded_once_and_the_writers_pages_are_never_loaded() {
        let (_d, s) = storage_with(&[1, 2, 3, 4], 4096);
        let f = Frames::new(s.clone(), 4096, 8 * 4096).unwrap();
        assert_eq!(f.base().as_ptr() as usize % HUGE_BYTES, 0);
        assert_eq!(f.bytes(2, 1).unwrap()[0], 3);
        assert!(f.is_ready(2) && !f.is_ready(1));
        // The file changes under a ready frame: the frame is what the engine wrote last.
        s.write_at(&[9u8; 4096], 2 * 4096).unwrap();
        assert_eq!(f.bytes(2, 1).unwrap()[0], 3);
        // A page the writer placed in its frame is ready as it wrote it.
        f.placed(1, 1);
        let p = f.writable(4096, 4096).unwrap();
        // SAFETY: test: the page is the writer's; nothing else reads it.
        unsafe { *p = 7 };
        assert_eq!(f.bytes(1, 1).unwrap()[0], 7);
        // One it placed in a buffer of its own is loaded from the file again.
        f.forget_page(2, 1);
        assert_eq!(f.bytes(2, 1).unwrap()[0], 9);
        f.fill(3, &[5u8; 4096]);
        assert_eq!(f.bytes(3, 1).unwrap()[..4096], [5u8; 4096]);
        // Copied over a ready frame (a free page's, reused).
        f.fill(3, &[6u8; 4096]);
        assert_eq!(f.bytes(3, 1).unwrap()[..4096], [6u8; 4096]);
        // A run across pages.
        assert_eq!(f.bytes(0, 2).unwrap()[4096], 7);
    }

    #[test]
    fn pages_filled_together_are_each_ready_with_their_bytes_and_none_past_the_frames() {
        let (_d, s) = storage_with(&[1, 2, 3], 4096);
        let f = Frames::new(s, 4096, 4 * 4096).unwrap();
        let last = f.pages() - 1;
        // Page 0 ready (loaded), 1 empty, a run of two from 2, and a run of two from the
        // frames' last page, whose second page lies past them.
        assert_eq!(f.bytes(0, 1).unwrap()[0], 1);
        let (one, two, run) = ([4u8; 4096], [5u8; 4096], [6u8; 2 * 4096]);
        let mut end = vec![7u8; 2 * 4096];
        end[4096..].fill(8);
        f.fill_all(&[(0, &one), (1, &two), (2, &run), (last, &end)]);
        assert_eq!(f.bytes(0, 1).unwrap()[..], one);
        assert_eq!(f.bytes(1, 1).unwrap()[..], two);
        assert!(f.is_ready(2) && f.is_ready(3));
        assert_eq!(f.bytes(2, 2).unwrap()[..], run);
        assert!(f.is_ready(last));
        assert_eq!(f.bytes(last, 1).unwrap()[..], end[..4096]);
        assert!(!f.is_ready(last + 1));
    }

    #[test]
    fn a_page_past_the_file_or_the_frames_is_an_error_and_stays_empty() {
        let (_d, s) = storage_with(&[1, 2], 4096);
        let f = Frames::new(s, 4096, 4 * 4096).unwrap();
        assert!(matches!(f.bytes(3, 1), Err(Error::Corrupted { .. })));
        assert!(!f.is_ready(3));
        assert!(matches!(f.bytes(4, 1), Err(Error::Corrupted { .. })));
        assert!(f.writable(4 * 4096, 1).is_none());
        assert!(f.bytes(0, 2).is_ok());
    }

    #[test]
    fn a_chunk_moves_to_a_huge_page_with_its_bytes_unless_the_writer_is_writing_it() {
        let page = 4096;
        let (_d, s) = storage_with(&[1, 2, 3, 4], page);
        let f = Frames::new(s, page, 2 * HUGE_BYTES as u64).unwrap();
        f.bytes(0, 3).unwrap();
        f.placed(8, 1);
        // The writer writes page 8 in this transaction: chunk 0 is busy until it ends.
        let p = f.writable(8 * page, page).unwrap();
        // SAFETY: test: the page is the writer's; nothing else reads it.
        unsafe { *p = 8 };
        let mut stage = None;
        match f.move_to_huge_page(0, &mut stage) {
            Ok(moved) => assert_eq!(moved, Moved::Busy, "moved while the writer writes it"),
            // No transparent huge pages here: nothing more to check.
            Err(_) => return,
        }
        f.written();
        assert_eq!(f.move_to_huge_page(0, &mut stage).unwrap(), Moved::Yes);
        assert!(stage.is_none());
        // The empty page within the file (3) was read from it into the huge page; those past
        // it stay empty.
        assert_eq!(f.held_bytes(), (5 * page as u64, HUGE_BYTES as u64));
        assert!(f.is_ready(3) && !f.is_ready(4));
        // The same bytes at the same addresses.
        assert_eq!(
            f.bytes(0, 4).unwrap()[..],
            [&[1u8; 4096][..], &[2; 4096], &[3; 4096], &[4; 4096]].concat()
        );
        assert_eq!(f.bytes(8, 1).unwrap()[0], 8);
        // The writer writes in the moved chunk as before.
        f.placed(9, 1);
        let p = f.writable(9 * page, page).unwrap();
        // SAFETY: as above.
        unsafe { *p = 9 };
        f.written();
        assert_eq!(f.bytes(9, 1).unwrap()[0], 9);
        // The chunk past the file moves too (its pages stay empty).
        assert_eq!(f.move_to_huge_page(1, &mut stage).unwrap(), Moved::Yes);
        assert!(!f.is_ready(512));
    }

    #[test]
    fn a_chunk_past_the_file_put_in_a_huge_page_ahead_takes_the_pages_the_file_grows_into() {
        let page = 4096;
        let (_d, s) = storage_with(&[1, 2], page);
        let f = Frames::new(s.clone(), page, 2 * HUGE_BYTES as u64).unwrap();
        assert_eq!(f.chunks_in_file(), 1);
        // No transparent huge pages here, or none free: nothing more to check.
        if !f.prepare_huge_page(1).unwrap_or(false) {
            return;
        }
        // Past the frames: left out.
        assert!(!f.prepare_huge_page(2).unwrap());
        // Nothing was read or copied: the chunk holds no page yet.
        assert_eq!(f.held_bytes(), (0, HUGE_BYTES as u64));
        assert!(!f.is_ready(512) && !f.is_ready(513));
        // The file grows into the chunk: the writer writes page 512 in its frame (and to the
        // file), and page 513 from a buffer of its own to the file alone, as a load does.
        f.placed(512, 1);
        let p = f.writable(512 * page, page).unwrap();
        // SAFETY: test: the page is the writer's; nothing else reads it.
        unsafe { std::ptr::write_bytes(p, 8, page) };
        s.write_at(&[8u8; 4096], 512 * page as u64).unwrap();
        f.forget_page(513, 1);
        s.write_at(&[9u8; 4096], 513 * page as u64).unwrap();
        f.written();
        assert_eq!(f.chunks_in_file(), 2);
        // Read in once the file stops growing: the page left on the file is loaded into the
        // huge page, the one written in its frame stays as it is.
        f.warm(1).unwrap();
        assert!(f.is_ready(513) && !f.is_ready(514));
        assert_eq!(f.bytes(512, 2).unwrap(), [[8u8; 4096], [9; 4096]].concat());
        assert_eq!(f.moved_chunks(), 1);
        assert_eq!(f.held_bytes(), (2 * page as u64, HUGE_BYTES as u64));
        // A chunk that holds a page is not given back.
        assert!(!f.give_back(1));
        assert_eq!(f.bytes(512, 2).unwrap(), [[8u8; 4096], [9; 4096]].concat());
    }

    #[test]
    fn a_chunk_put_in_a_huge_page_ahead_is_given_back_only_while_empty_and_not_written() {
        let page = 4096;
        let (_d, s) = storage_with(&[1], page);
        let f = Frames::new(s, page, 3 * HUGE_BYTES as u64).unwrap();
        for c in [1, 2] {
            if !f.prepare_huge_page(c).unwrap_or(false) {
                return;
            }
        }
        assert_eq!(f.moved_chunks(), 2);
        // A write transaction that writes chunk 2 keeps it until it ends.
        f.placed(1024, 1);
        let p = f.writable(1024 * page, page).unwrap();
        // SAFETY: test: the page is the writer's; nothing else reads it.
        unsafe { *p = 5 };
        assert!(!f.give_back(2));
        f.written();
        // Ready now: kept, with its byte.
        assert!(!f.give_back(2));
        assert_eq!(f.bytes(1024, 1).unwrap()[0], 5);
        // Chunk 1 holds nothing: given back, counted as moved no more, and written as any
        // other afterwards.
        assert!(f.give_back(1));
        assert_eq!(f.moved_chunks(), 1);
        assert_eq!(f.held_bytes(), (page as u64, HUGE_BYTES as u64));
        f.placed(600, 1);
        let p = f.writable(600 * page, page).unwrap();
        // SAFETY: as above.
        unsafe { *p = 6 };
        f.written();
        assert_eq!(f.bytes(600, 1).unwrap()[0], 6);
        assert!(!f.is_ready(601));
        // And moved like any other chunk.
        let mut stage = None;
        assert_eq!(f.move_to_huge_page(1, &mut stage).unwrap(), Moved::Yes);
        assert_eq!(f.bytes(600, 1).unwrap()[0], 6);
    }

    #[test]
    fn a_page_written_beside_the_transaction_is_read_from_the_file_and_marks_no_chunk() {
        let page = 4096;
        let (_d, s) = storage_with(&[1, 2, 3], page);
        let f = Frames::new(s.clone(), page, HUGE_BYTES as u64).unwrap();
        // The keeper read page 2 in while it was free; the committer writes a run there
        // while a checkpoint's transaction writes page 1 of the same chunk.
        f.warm(0).unwrap();
        assert!(f.is_ready(2));
        f.forget_page(1, 1);
        let marked = f.chunk_count(0);
        assert_eq!(marked & 1, 1);
        s.write_at(&[9u8; 4096], 2 * page as u64).unwrap();
        f.forget_written_apart(2, 1);
        // Still the transaction's: odd, and its end makes it even.
        assert_eq!(f.chunk_count(0), marked + 2);
        assert!(!f.is_ready(2));
        assert_eq!(f.bytes(2, 1).unwrap()[..4096], [9u8; 4096]);
        f.written();
        assert_eq!(f.chunk_count(0) & 1, 0);
        // Such a write moves the count on and keeps it even: a copy the keeper made across
        // it fails the check under `moving`, and one made after it moves in with the page as
        // the file holds it.
        let mut stage = None;
        let seen = f.chunk_count(0);
        s.write_at(&[10u8; 4096], 3 * page as u64).unwrap();
        f.forget_written_apart(3, 1);
        assert_ne!(f.chunk_count(0), seen);
        assert_eq!(f.chunk_count(0) & 1, 0);
        match f.move_to_huge_page(0, &mut stage) {
            Ok(moved) => assert_eq!(moved, Moved::Yes),
            Err(_) => return,
        }
        assert_eq!(f.bytes(3, 1).unwrap()[..4096], [10u8; 4096]);
    }

    #[test]
    fn a_page_left_on_the_file_is_read_from_it_though_the_keeper_loaded_it_before_the_write() {
        let page = 4096;
        let (_d, s) = storage_with(&[1, 2, 3], page);
        let f = Frames::new(s.clone(), page, HUGE_BYTES as u64).unwrap();
        // The writer takes free page 1 in a buffer of its own; the keeper reads the chunk in
        // before the writer writes the page to the file.
        f.forget_page(1, 1);
        f.warm(0).unwrap();
        assert!(f.is_ready(1));
        s.write_at(&[7u8; 4096], page as u64).unwrap();
        f.forget_page(1, 1);
        f.written();
        assert!(!f.is_ready(1));
        assert_eq!(f.bytes(1, 1).unwrap()[..4096], [7u8; 4096]);
        // A copy made while the writer wrote the chunk is not moved in; the next is, with the
        // page as the file holds it now.
        let mut stage = None;
        f.forget_page(2, 1);
        let seen = f.chunk_count(0);
        s.write_at(&[8u8; 4096], 2 * page as u64).unwrap();
        match f.move_to_huge_page(0, &mut stage) {
            Ok(moved) => assert_eq!(moved, Moved::Busy),
            Err(_) => return,
        }
        f.forget_page(2, 1);
        f.written();
        assert_ne!(f.chunk_count(0), seen);
        assert_eq!(f.move_to_huge_page(0, &mut stage).unwrap(), Moved::Yes);
        assert!(f.is_ready(2));
        assert_eq!(f.bytes(0, 3).unwrap()[2 * page..], [8u8; 4096]);
    }

    /// The pages of the file at `path`'s first `len` bytes that the page cache holds
    /// (`mincore` over a mapping that is never touched, so it maps none of them).
    fn cached_pages(path: &std::path::Path, len: usize) -> usize {
        use std::os::fd::AsRawFd;
        let file = std::fs::File::open(path).unwrap();
        // SAFETY: a fresh read-only shared mapping of the file, unmapped below; nothing reads
        // through it.
        let at = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        assert_ne!(at, libc::MAP_FAILED);
        let mut vec = vec![0u8; len.div_ceil(4096)];
        // SAFETY: `vec` has a byte for each page of the mapping.
        let rc = unsafe { libc::mincore(at, len, vec.as_mut_ptr()) };
        // SAFETY: the mapping made above.
        unsafe { libc::munmap(at, len) };
        assert_eq!(rc, 0);
        vec.iter().filter(|&&b| b & 1 == 1).count()
    }

    #[test]
    fn pages_the_keeper_read_in_leave_no_copy_in_the_page_cache() {
        let page = 4096;
        let (d, s) = storage_with(&[1, 2, 3, 4, 5, 6, 7, 8], page);
        let path = d.path().join("f");
        // Written back (clean), and read, so that the page cache holds the whole file.
        s.sync().unwrap();
        s.read_at(&mut vec![0u8; 8 * page], 0).unwrap();
        let before = cached_pages(&path, 8 * page);
        if before == 0 {
            // A file system whose pages the kernel does not cache (none here): nothing to see.
            return;
        }
        let f = Frames::new(s, page, HUGE_BYTES as u64).unwrap();
        // A reader's load of one page, and the keeper's of the rest.
        assert_eq!(f.bytes(2, 1).unwrap()[0], 3);
        f.warm(0).unwrap();
        assert_eq!(
            cached_pages(&path, 8 * page),
            0,
            "{before} pages cached before"
        );
        assert_eq!(f.bytes(0, 8).unwrap()[7 * page], 8);
    }
}
