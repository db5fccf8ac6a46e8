//! Writes that do not wait: a file's `Storage::write_behind`, `O_DIRECT` writes submitted on
//! an io_uring ring of the file's own, many in flight, and drained before anything that must
//! follow them (docs/design/buffer-pool.md, "Writes behind the frames").
//!
//! `O_DIRECT` bypasses the page cache: the bytes go from the caller's memory (the frames) to
//! the device, with no second copy in the kernel and no folio dirtied. It needs the memory,
//! the offset and the length aligned to what the file system asks (`statx`'s
//! `STATX_DIOALIGN`); a file system without direct I/O (tmpfs), a kernel or sandbox without
//! io_uring, or a write that is not aligned, is written with `pwrite` instead, at once.

use std::fs::File;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

/// Writes in flight at most: enough to keep a device's queue full (the prototype's 96 gave
/// 2.6 us of CPU a page, docs/design/buffer-pool.md). Past it a write first reaps until half
/// are done.
const IN_FLIGHT_MAX: usize = 64;

/// The ring's entries: every write in flight fits.
const RING_ENTRIES: u32 = 128;

/// A file's writes behind: the ring, set up at the first write that asks for it.
pub(crate) struct Behind {
    /// `None` until the first `write` tries to set the ring up; `Some(None)` where it could
    /// not be (the writes then go through `pwrite`).
    ring: Mutex<Option<Option<Ring>>>,
    /// Writes in flight, read without the lock by `drain` (nothing to wait for: the hot case).
    in_flight: AtomicUsize,
    /// The first failed write: every drain from then on returns it.
    failed: Mutex<Option<(Option<i32>, String)>>,
    /// `failed` is set: read without its lock by every drain.
    has_failed: AtomicBool,
}

struct Ring {
    ring: io_uring::IoUring,
    /// The file opened again with `O_DIRECT`, for writing.
    direct: File,
    /// Alignment the file system asks of the memory, and of offsets and lengths.
    mem_align: usize,
    offset_align: u64,
}

/// Whether a write may go behind: aligned as the ring's file asks.
fn aligned(ring: &Ring, buf: *const u8, len: usize, offset: u64) -> bool {
    (buf as usize).is_multiple_of(ring.mem_align)
        && (len as u64).is_multiple_of(ring.offset_align)
        && offset.is_multiple_of(ring.offset_align)
        && len > 0
        && u32::try_from(len).is_ok()
}

impl Behind {
    pub(crate) fn new() -> Behind {
        Behind {
            ring: Mutex::new(None),
            in_flight: AtomicUsize::new(0),
            failed: Mutex::new(None),
            has_failed: AtomicBool::new(false),
        }
    }

    /// Starts `writes` (each the address and length of its bytes, and the offset in `file`)
    /// on the ring, submitted together (one system call, and the device told once for the
    /// lot where the block layer can); returns `Ok(false)` (nothing done) where they cannot go
    /// behind: no ring, or one of them not aligned.
    ///
    /// # Safety
    /// As `Storage::write_behind`: the bytes stay valid and unchanged until the next `drain`.
    pub(crate) unsafe fn write(
        &self,
        file: &File,
        writes: &[(*const u8, usize, u64)],
    ) -> io::Result<bool> {
        self.check()?;
        let mut slot = self.ring.lock().unwrap_or_else(|e| e.into_inner());
        let ring = slot.get_or_insert_with(|| Ring::new(file).ok());
        let Some(ring) = ring
            .as_mut()
            .filter(|r| writes.iter().all(|&(b, l, o)| aligned(r, b, l, o)))
        else {
            return Ok(false);
        };
        use std::os::fd::AsRawFd;
        let fd = io_uring::types::Fd(ring.direct.as_raw_fd());
        for &(buf, len, offset) in writes {
            if self.in_flight.load(Ordering::Relaxed) >= IN_FLIGHT_MAX {
                // Submits what is queued too.
                self.reap(ring, IN_FLIGHT_MAX / 2)?;
            }
            let entry = io_uring::opcode::Write::new(fd, buf, len as u32)
                .offset(offset)
                .build()
                .user_data(len as u64);
            // SAFETY: the caller keeps the `len` bytes at `buf` valid and unchanged until the
            // drain that reaps this write.
            if unsafe { ring.ring.submission().push(&entry) }.is_err() {
                // Full (cannot be, with at most IN_FLIGHT_MAX in flight): make room, retry.
                self.reap(ring, 0)?;
                // SAFETY: as above.
                unsafe { ring.ring.submission().push(&entry) }
                    .map_err(|_| io::Error::other("io_uring submission queue full"))?;
            }
            self.in_flight.fetch_add(1, Ordering::Relaxed);
        }
        loop {
            match ring.ring.submit() {
                Ok(_) => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(self.fail(e)),
            }
        }
        Ok(true)
    }

    /// Waits for every write in flight; the first failure among every write so far, if any.
    pub(crate) fn drain(&self) -> io::Result<()> {
        if self.in_flight.load(Ordering::Relaxed) > 0 {
            let mut slot = self.ring.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(Some(ring)) = slot.as_mut() {
                self.reap(ring, 0)?;
            }
        }
        self.check()
    }

    /// True if writes to `file` go behind: the ring is up (set up now if no write asked for
    /// it yet).
    pub(crate) fn is_up(&self, file: &File) -> bool {
        let mut slot = self.ring.lock().unwrap_or_else(|e| e.into_inner());
        slot.get_or_insert_with(|| Ring::new(file).ok()).is_some()
    }

    /// Reaps completions until at most `left` writes are in flight.
    fn reap(&self, ring: &mut Ring, left: usize) -> io::Result<()> {
        while self.in_flight.load(Ordering::Relaxed) > left {
            match ring.ring.submit_and_wait(1) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(self.fail(e)),
            }
            for done in ring.ring.completion() {
                self.in_flight.fetch_sub(1, Ordering::Relaxed);
                let asked = done.user_data();
                let got = done.result();
                if got < 0 {
                    self.fail(io::Error::from_raw_os_error(-got));
                } else if got as u64 != asked {
                    self.fail(io::Error::new(
                        io::ErrorKind::WriteZero,
                        format!("direct write of {asked} bytes wrote {got}"),
                    ));
                }
            }
        }
        self.check()
    }

    /// Keeps the first failure (every later drain returns it) and returns `e`.
    fn fail(&self, e: io::Error) -> io::Error {
        let mut failed = self.failed.lock().unwrap_or_else(|e| e.into_inner());
        failed.get_or_insert_with(|| (e.raw_os_error(), e.to_string()));
        self.has_failed.store(true, Ordering::Release);
        e
    }

    fn check(&self) -> io::Result<()> {
        if !self.has_failed.load(Ordering::Acquire) {
            return Ok(());
        }
        match &*self.failed.lock().unwrap_or_else(|e| e.into_inner()) {
            None => Ok(()),
            Some((Some(code), _)) => Err(io::Error::from_raw_os_error(*code)),
            Some((None, what)) => Err(io::Error::other(format!(
                "an earlier write behind failed: {what}"
            ))),
        }
    }
}

impl Ring {
    /// The ring and the file opened again with `O_DIRECT` (through `/proc/self/fd`, so the
    /// same file whatever became of its name); an error where either is refused or the file
    /// system reports no direct I/O.
    fn new(file: &File) -> io::Result<Ring> {
        use std::os::fd::AsRawFd;
        use std::os::unix::fs::OpenOptionsExt;
        let (mem_align, offset_align) = dio_align(file)?;
        let direct = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_DIRECT)
            .open(format!("/proc/self/fd/{}", file.as_raw_fd()))?;
        let ring = io_uring::IoUring::new(RING_ENTRIES)?;
        Ok(Ring {
            ring,
            direct,
            mem_align,
            offset_align,
        })
    }
}

/// The alignment direct I/O on `file` asks of memory and of offsets (`statx`,
/// `STATX_DIOALIGN`, Linux 6.1); an error where the file system offers none.
fn dio_align(file: &File) -> io::Result<(usize, u64)> {
    use std::os::fd::AsRawFd;
    // SAFETY: `statx` fills the zeroed struct; the empty path with `AT_EMPTY_PATH` names the
    // descriptor itself.
    let mut st: libc::statx = unsafe { std::mem::zeroed() };
    let rc = unsafe {
        libc::statx(
            file.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH,
            libc::STATX_DIOALIGN,
            &mut st,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    if st.stx_mask & libc::STATX_DIOALIGN == 0 || st.stx_dio_offset_align == 0 {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "the file system offers no direct I/O",
        ));
    }
    Ok((
        st.stx_dio_mem_align as usize,
        st.stx_dio_offset_align as u64,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileExt;

    /// 4 KiB-aligned buffers of `pages` pages.
    fn aligned_pages(pages: usize, fill: u8) -> (std::alloc::Layout, *mut u8) {
        let layout = std::alloc::Layout::from_size_align(pages * 4096, 4096).unwrap();
        // SAFETY: a non-zero size.
        let p = unsafe { std::alloc::alloc(layout) };
        assert!(!p.is_null());
        // SAFETY: `pages * 4096` bytes just allocated.
        unsafe { std::ptr::write_bytes(p, fill, pages * 4096) };
        (layout, p)
    }

    #[test]
    fn writes_behind_land_by_the_drain_and_unaligned_ones_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(dir.path().join("f"))
            .unwrap();
        file.set_len(1 << 20).unwrap();
        let behind = Behind::new();
        let (layout, p) = aligned_pages(200, 0);
        for i in 0..200 {
            // SAFETY: within the allocation.
            unsafe { std::ptr::write_bytes(p.add(i * 4096), i as u8 + 1, 4096) };
        }
        let mut went_behind = 0;
        for i in 0..200u64 {
            // Pages in reverse order, each its own write; 200 > IN_FLIGHT_MAX, so some reap.
            let i = 199 - i;
            // SAFETY: the page stays unchanged until the drain below.
            let page = [(
                unsafe { p.add(i as usize * 4096) } as *const u8,
                4096,
                i * 4096,
            )];
            if unsafe { behind.write(&file, &page) }.unwrap() {
                went_behind += 1;
            }
        }
        behind.drain().unwrap();
        assert_eq!(behind.in_flight.load(Ordering::Relaxed), 0);
        let up = behind.is_up(&file);
        if !up {
            eprintln!("writes behind: SKIPPED: no io_uring or no direct I/O here");
        }
        // A file system with direct I/O (this one, unless tmpfs) took every write behind.
        assert_eq!(went_behind, if up { 200 } else { 0 });
        let mut page = vec![0u8; 4096];
        for i in 0..200u64 {
            if up {
                file.read_exact_at(&mut page, i * 4096).unwrap();
                assert!(page.iter().all(|&b| b == i as u8 + 1), "page {i}");
            }
        }
        if up {
            // Unaligned memory, offset or length: not taken, left to the caller.
            // SAFETY: within the allocation.
            let q = p as *const u8;
            let odd = unsafe { behind.write(&file, &[(q.add(1), 4096, 0)]) }.unwrap();
            let off = unsafe { behind.write(&file, &[(q, 4096, 100)]) }.unwrap();
            let short = unsafe { behind.write(&file, &[(q, 100, 0)]) }.unwrap();
            // One unaligned among aligned ones: none taken.
            let mixed = unsafe { behind.write(&file, &[(q, 4096, 0), (q, 100, 4096)]) }.unwrap();
            assert!(!odd && !off && !short && !mixed);
        }
        // SAFETY: allocated above with `layout`.
        unsafe { std::alloc::dealloc(p, layout) };
    }

    #[test]
    fn a_failed_write_fails_every_drain_after_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        file.set_len(1 << 20).unwrap();
        let behind = Behind::new();
        let (layout, p) = aligned_pages(1, 7);
        // SAFETY: the page stays unchanged until the drains below.
        let q = p as *const u8;
        let took = unsafe { behind.write(&file, &[(q, 4096, 0)]) }.unwrap();
        behind.drain().unwrap();
        if took {
            // A write past the largest offset a file may have fails with EFBIG (or EINVAL).
            let far = i64::MAX as u64 & !4095;
            // SAFETY: as above.
            let r = unsafe { behind.write(&file, &[(q, 4096, far)]) };
            let e = r.and_then(|_| behind.drain()).unwrap_err();
            assert!(e.raw_os_error().is_some(), "{e}");
            // Kept: the next drain and write fail the same way, with nothing in flight.
            assert_eq!(behind.drain().unwrap_err().raw_os_error(), e.raw_os_error());
            // SAFETY: as above.
            assert!(unsafe { behind.write(&file, &[(q, 4096, 0)]) }.is_err());
        }
        // SAFETY: allocated above with `layout`.
        unsafe { std::alloc::dealloc(p, layout) };
    }
}
