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
//! - every page the writer wrote in its frame is written to the file (`write_at`) before any
//!   meta page names it (`WritePages::write_out`).
//!
//! So the file holds every committed page, and other processes, followers and a snapshot read
//! through a mapping of the file read the same bytes as the frames.

use crate::error::{Error, Result};
use crate::storage::Storage;
use std::io;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

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
    raw: (NonNull<libc::c_void>, usize),
    /// One state byte a page.
    state: Box<[AtomicU8]>,
    /// The data file, which loads read from.
    storage: Arc<dyn Storage>,
    /// When the writer last wrote pages out (`noted_write`), in milliseconds from `epoch`:
    /// the keeper works while it is quiet.
    written_at: std::sync::atomic::AtomicU64,
    epoch: std::time::Instant,
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
        // Whole huge pages, so that the keeper can collapse every part of the frames.
        let bytes = bytes.checked_next_multiple_of(HUGE_BYTES as u64)?;
        let pages = bytes.div_ceil(page_bytes as u64);
        let len = usize::try_from(pages).ok()?.checked_mul(page_bytes)?;
        let raw_len = len.checked_add(HUGE_BYTES)?;
        // Zeroed (`EMPTY`) by the allocator, which takes fresh zero pages from the system for
        // a large array: no page of it is touched until its frames are.
        let zeroed: Box<[u8]> = vec![EMPTY; usize::try_from(pages).ok()?].into_boxed_slice();
        // SAFETY: `AtomicU8` has the size, alignment and bit validity of `u8`.
        let state = unsafe { Box::from_raw(Box::into_raw(zeroed) as *mut [AtomicU8]) };
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
            return None;
        }
        let raw = NonNull::new(raw)?;
        let offset = (raw.as_ptr() as usize).next_multiple_of(HUGE_BYTES) - raw.as_ptr() as usize;
        // SAFETY: `offset < HUGE_BYTES`, so `base..base + len` lies within the mapping.
        let base = unsafe { NonNull::new_unchecked((raw.as_ptr() as *mut u8).add(offset)) };
        Some(Frames {
            base,
            pages,
            page_bytes,
            raw: (raw, raw_len),
            state,
            storage,
            written_at: std::sync::atomic::AtomicU64::new(0),
            epoch: std::time::Instant::now(),
        })
    }

    /// The writer wrote pages out (a commit's write-out, a merge's spill).
    #[inline]
    pub(crate) fn noted_write(&self) {
        let now = self.epoch.elapsed().as_millis() as u64;
        self.written_at.store(now, Ordering::Relaxed);
    }

    /// How long ago the writer last wrote pages out.
    pub(crate) fn quiet_for(&self) -> std::time::Duration {
        let now = self.epoch.elapsed().as_millis() as u64;
        let then = self.written_at.load(Ordering::Relaxed);
        std::time::Duration::from_millis(now.saturating_sub(then))
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

    /// The writer placed pages `[id, id + n)` in buffers of its own, which go to the file:
    /// whatever their frames hold is stale. Requires: no snapshot reaches them.
    pub(crate) fn forget_page(&self, id: u64, n: u64) {
        self.set(id, n, EMPTY);
    }

    /// Sets the state of pages `[id, id + n)` (those within the frames) for the writer,
    /// after any load of them under way: the keeper loads free pages too (`warm`), and its
    /// copy must not land on bytes the writer wrote.
    fn set(&self, id: u64, n: u64, to: u8) {
        let end = id.saturating_add(n).min(self.pages);
        for p in id.min(end)..end {
            let state = &self.state[p as usize];
            let mut now = state.load(Ordering::Acquire);
            loop {
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

    /// The pages of one huge page of frames: what the keeper warms and collapses at a step.
    pub(crate) fn chunk_pages(&self) -> u64 {
        (HUGE_BYTES / self.page_bytes).max(1) as u64
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
    /// (a reader that needs one loads it and meets the error) and is returned.
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
        Ok(())
    }

    /// Asks the kernel to place chunk `c` in one huge page (`MADV_COLLAPSE`, Linux 6.1 and
    /// later): it copies the chunk's pages into a new huge page and maps it in their place,
    /// so the addresses and the bytes stay as they were for readers holding slices of it,
    /// and a random read across the frames then misses the TLB a fifth as often
    /// (docs/design/buffer-pool.md, "Huge pages without the first touch's cost"). Only a
    /// hint: `EINVAL` where the kernel cannot (too old, or transparent huge pages off), and
    /// `EAGAIN` or `ENOMEM` where no huge page is free now.
    pub(crate) fn collapse(&self, c: u64) -> io::Result<()> {
        let at = c as usize * HUGE_BYTES;
        if at + HUGE_BYTES > self.len() as usize {
            return Ok(());
        }
        #[cfg(target_os = "linux")]
        {
            // SAFETY: the range lies within the frames' mapping (checked above); the advice
            // changes how the memory is backed, never its contents.
            let r = unsafe {
                libc::madvise(
                    self.base.as_ptr().add(at) as *mut libc::c_void,
                    HUGE_BYTES,
                    libc::MADV_COLLAPSE,
                )
            };
            if r != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        }
        #[cfg(not(target_os = "linux"))]
        Err(io::Error::from(io::ErrorKind::Unsupported))
    }

    /// Copies `bytes`, the whole of pages from `id` that the writer just wrote to the file
    /// from a buffer of its own, into their frames, and makes them ready. Pages past the
    /// frames are left out. Requires: no snapshot reaches them yet.
    pub(crate) fn fill(&self, id: u64, bytes: &[u8]) {
        let n = (bytes.len() / self.page_bytes) as u64;
        let n = n.min(self.pages.saturating_sub(id));
        if n == 0 {
            return;
        }
        let len = n as usize * self.page_bytes;
        // Claimed first: a keeper's load of them under way would land its copy after this one.
        self.set(id, n, LOADING);
        // SAFETY: within the frames (`n` cut to them); the pages are the writer's alone
        // (requirement) and `LOADING`, so nothing reads or writes these frames meanwhile.
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                self.base.as_ptr().add(id as usize * self.page_bytes),
                len,
            );
        }
        for p in id..id + n {
            self.state[p as usize].store(READY, Ordering::Release);
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
        // SAFETY: the mapping `mmap` returned in `new`; no slice of it outlives `self` (a
        // borrowed page's lifetime is tied to the `Access` that owns the frames).
        unsafe {
            libc::munmap(self.raw.0.as_ptr(), self.raw.1);
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
        // A run across pages.
        assert_eq!(f.bytes(0, 2).unwrap()[4096], 7);
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
}
