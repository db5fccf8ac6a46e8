//! A real file. Reads go through a shared read-only mapping (zero-copy, LMDB-style); the
//! writer writes through `pwrite` or through a writable mapping of space it reserved with
//! `fallocate` first, so a full disk is an `ENOSPC` error and never a SIGBUS.

use super::behind::Behind;
use super::Storage;
use crate::error::{with_context, Error, Result};
use std::fs::{File, OpenOptions, TryLockError};
use std::io;
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

/// How often, and how far apart, a busy lock is retried before `DatabaseLocked`: 100 ms in all.
const LOCK_RETRIES: u32 = 20;
const LOCK_RETRY_MS: u64 = 5;

/// Which advisory `flock` a [`FileStorage`] holds on the database file for its lifetime.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileLock {
    /// Exclusive: the writing handle. A second writer (in this process or another) gets
    /// [`Error::DatabaseLocked`].
    Exclusive,
    /// Shared: a read-only handle that cannot use the shared reader table (its lock file could
    /// not be opened); it excludes writers, as in format v1.
    Shared,
    /// None: a read-only handle registered in the shared reader table, which may run beside
    /// a writer in another process.
    None,
}

/// The database file. Holds an advisory `flock` for its lifetime (see [`FileLock`]). The
/// kernel drops the lock when the process dies, so a lock left by a killed process never
/// blocks the next open.
///
/// Its errors name the operation and the file (as [`Error::Io`]'s `op` and `path` once they
/// reach the engine's error type).
pub struct FileStorage {
    file: File,
    path: PathBuf,
    boot_id: Option<[u8; 16]>,
    /// `write_behind`'s ring and the writes in flight on it.
    behind: Behind,
}

impl FileStorage {
    /// Opens (creating if `create`) the file at `path` and takes its lock: exclusive when
    /// writable, shared when read-only.
    ///
    /// ```
    /// use larchdb::storage::{FileStorage, Storage};
    /// use larchdb::Error;
    /// # let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("db");
    /// let storage = FileStorage::open(&path, false, true)?;
    /// assert_eq!(storage.len()?, 0); // created, empty
    /// // The exclusive lock keeps a second writer out.
    /// assert!(matches!(FileStorage::open(&path, false, true), Err(Error::DatabaseLocked)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open(path: &Path, read_only: bool, create: bool) -> Result<FileStorage> {
        let lock = if read_only {
            FileLock::Shared
        } else {
            FileLock::Exclusive
        };
        Self::open_with(path, read_only, create, lock)
    }

    /// Opens (creating if `create` and writable) the file at `path` with the given lock.
    ///
    /// ```
    /// use larchdb::{storage::{FileLock, FileStorage, Storage}, Error};
    /// # let dir = tempfile::tempdir()?;
    /// # let path = dir.path().join("db");
    /// let writer = FileStorage::open_with(&path, false, true, FileLock::Exclusive)?;
    /// writer.write_at(b"hello", 0)?;
    /// // Beside the exclusive lock, a shared one is refused; a handle without a lock opens.
    /// let shared = FileStorage::open_with(&path, true, false, FileLock::Shared);
    /// assert!(matches!(shared, Err(Error::DatabaseLocked)));
    /// let reader = FileStorage::open_with(&path, true, false, FileLock::None)?;
    /// let mut buf = [0u8; 5];
    /// reader.read_at(&mut buf, 0)?;
    /// assert_eq!(&buf, b"hello");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open_with(
        path: &Path,
        read_only: bool,
        create: bool,
        lock: FileLock,
    ) -> Result<FileStorage> {
        let file = OpenOptions::new()
            .read(true)
            .write(!read_only)
            .create(create && !read_only)
            .truncate(false)
            .open(path)
            .map_err(|e| Error::io_at("open", path, e))?;
        let meta = file.metadata().map_err(|e| Error::io_at("stat", path, e))?;
        if meta.is_dir() {
            return Err(Error::io_at(
                "open",
                path,
                io::Error::new(io::ErrorKind::IsADirectory, "path is a directory"),
            ));
        }
        // A lock can be held for a moment by a descriptor this process already closed: a child
        // being spawned by another thread holds copies of all descriptors between fork and
        // exec. So a busy lock is retried briefly before it is reported.
        let mut tries = 0;
        loop {
            let locked = match lock {
                FileLock::Shared => file.try_lock_shared(),
                FileLock::Exclusive => file.try_lock(),
                FileLock::None => break,
            };
            match locked {
                Ok(()) => break,
                Err(TryLockError::WouldBlock) if tries < LOCK_RETRIES => {
                    tries += 1;
                    std::thread::sleep(std::time::Duration::from_millis(LOCK_RETRY_MS));
                }
                Err(TryLockError::WouldBlock) => return Err(Error::DatabaseLocked),
                Err(TryLockError::Error(e)) => return Err(Error::io_at("lock", path, e)),
            }
        }
        Ok(FileStorage {
            file,
            path: path.to_path_buf(),
            boot_id: read_boot_id(),
            behind: Behind::new(),
        })
    }

    /// Takes the exclusive lock on a file opened with [`FileLock::None`] without waiting:
    /// false if another open file description holds a lock on it. A lock busy for a moment
    /// (see `open_with`) is retried first when `retry`.
    pub(crate) fn try_lock_exclusive(&self, retry: bool) -> Result<bool> {
        let mut tries = 0;
        loop {
            match self.file.try_lock() {
                Ok(()) => return Ok(true),
                Err(TryLockError::WouldBlock) if retry && tries < LOCK_RETRIES => {
                    tries += 1;
                    std::thread::sleep(std::time::Duration::from_millis(LOCK_RETRY_MS));
                }
                Err(TryLockError::WouldBlock) => return Ok(false),
                Err(TryLockError::Error(e)) => return Err(Error::io_at("lock", &self.path, e)),
            }
        }
    }

    /// Takes the exclusive lock on a file opened with [`FileLock::None`], waiting while
    /// another open file description holds one.
    pub(crate) fn lock_exclusive(&self) -> Result<()> {
        self.file
            .lock()
            .map_err(|e| Error::io_at("lock", &self.path, e))
    }

    /// The file's device and inode: which file it is, whatever path opened it.
    pub(crate) fn file_id(&self) -> Result<(u64, u64)> {
        use std::os::unix::fs::MetadataExt;
        let meta = self
            .file
            .metadata()
            .map_err(|e| Error::io_at("stat", &self.path, e))?;
        Ok((meta.dev(), meta.ino()))
    }

    /// `e`, naming `op` and this file.
    fn context(&self, op: &'static str, e: io::Error) -> io::Error {
        with_context(op, &self.path, e)
    }
}

/// Reads the kernel's boot id (a UUID) as 16 bytes.
fn read_boot_id() -> Option<[u8; 16]> {
    let text = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let hex: Vec<u8> = text.trim().bytes().filter(|b| *b != b'-').collect();
    if hex.len() != 32 {
        return None;
    }
    let mut id = [0u8; 16];
    for (i, pair) in hex.chunks(2).enumerate() {
        let s = std::str::from_utf8(pair).ok()?;
        id[i] = u8::from_str_radix(s, 16).ok()?;
    }
    Some(id)
}

impl Storage for FileStorage {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.file
            .read_exact_at(buf, offset)
            .map_err(|e| self.context("read", e))
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.drain()?;
        self.file
            .write_all_at(buf, offset)
            .map_err(|e| self.context("write", e))
    }

    fn write_apart(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.file
            .write_all_at(buf, offset)
            .map_err(|e| self.context("write", e))
    }

    fn write_vectored_at(&self, bufs: &[&[u8]], offset: u64) -> io::Result<()> {
        self.drain()?;
        self.write_vectored(bufs, offset)
            .map_err(|e| self.context("write", e))
    }

    fn zero_range(&self, offset: u64, len: u64) -> io::Result<()> {
        // One call where the file system can turn the range into unwritten extents (ext4,
        // XFS): no data written, the space kept allocated. Elsewhere (tmpfs), zeros written.
        self.drain()?;
        match self.fallocate_zero(offset, len) {
            Ok(true) => Ok(()),
            Ok(false) => super::write_zeros(self, offset, len),
            Err(e) => Err(self.context("zero", e)),
        }
    }

    fn sync(&self) -> io::Result<()> {
        self.drain()?;
        self.file.sync_data().map_err(|e| self.context("sync", e))
    }

    unsafe fn write_behind(&self, writes: &[(*const u8, usize, u64)]) -> io::Result<()> {
        // SAFETY: the caller's requirement, passed on.
        match unsafe { self.behind.write(&self.file, writes) } {
            Ok(true) => Ok(()),
            Ok(false) => {
                for &(buf, len, offset) in writes {
                    // SAFETY: the caller's requirement: `len` readable bytes at `buf`.
                    self.write_at(unsafe { std::slice::from_raw_parts(buf, len) }, offset)?;
                }
                Ok(())
            }
            Err(e) => Err(self.context("write behind", e)),
        }
    }

    fn drain(&self) -> io::Result<()> {
        self.behind
            .drain()
            .map_err(|e| self.context("write behind", e))
    }

    fn writes_behind(&self) -> bool {
        self.behind.is_up(&self.file)
    }

    fn start_writeback(&self, offset: u64, len: u64) -> io::Result<()> {
        self.sync_range(offset, len, "start writeback", SYNC_RANGE_WRITE)
    }

    fn wait_writeback(&self, offset: u64, len: u64) -> io::Result<()> {
        self.sync_range(offset, len, "wait for writeback", SYNC_RANGE_WAIT)
    }

    fn drop_cached(&self, offset: u64, len: u64) -> io::Result<()> {
        #[cfg(target_os = "linux")]
        {
            // A length of 0 would mean up to the file's end.
            let (Ok(off), Ok(n)) = (libc::off_t::try_from(offset), libc::off_t::try_from(len))
            else {
                return Ok(());
            };
            if n == 0 {
                return Ok(());
            }
            // SAFETY: the descriptor is this storage's open file; the call reads no memory.
            let rc = unsafe {
                libc::posix_fadvise(self.file.as_raw_fd(), off, n, libc::POSIX_FADV_DONTNEED)
            };
            // The call returns its error rather than setting errno.
            if rc != 0 {
                return Err(self.context("drop cached pages", io::Error::from_raw_os_error(rc)));
            }
        }
        #[cfg(not(target_os = "linux"))]
        let _ = (offset, len);
        Ok(())
    }

    fn sync_name(&self) -> io::Result<()> {
        let dir = match self.path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| with_context("sync", dir, e))
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self
            .file
            .metadata()
            .map_err(|e| self.context("stat", e))?
            .len())
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.drain()?;
        self.file
            .set_len(len)
            .map_err(|e| self.context("resize", e))
    }

    fn map(&self, len: u64) -> Option<io::Result<memmap2::Mmap>> {
        self.map_ro(len)
            .map(|r| r.map_err(|e| self.context("map", e)))
    }

    fn allocate(&self, len: u64) -> io::Result<bool> {
        self.drain()?;
        let before = self.file.metadata().map(|m| m.len());
        self.fallocate(len).map_err(|e| {
            // A file system that runs out of space part of the way (ext4) keeps the blocks
            // the call did allocate, and the length they reach: given back, so that a full
            // disk's last space is not held by a file that failed to grow (nothing is
            // written past the length before the call). Measured on a 24 MB ext4 image: the
            // data file's failed growth took the 6 MB freed beside it, and every commit
            // after failed as a full disk (tests/disk_full.rs).
            if let Ok(before) = before {
                if self.file.metadata().is_ok_and(|m| m.len() > before) {
                    let _ = self.file.set_len(before);
                }
            }
            self.context("allocate", e)
        })
    }

    fn map_mut(&self, len: u64) -> Option<io::Result<memmap2::MmapRaw>> {
        self.map_rw(len)
            .map(|r| r.map_err(|e| self.context("map", e)))
    }

    fn boot_id(&self) -> Option<[u8; 16]> {
        self.boot_id
    }

    fn unlock(&self) -> io::Result<()> {
        self.file.unlock().map_err(|e| self.context("unlock", e))
    }
}

impl Drop for FileStorage {
    /// Waits for the writes behind still in flight: their memory (the frames) may go next.
    fn drop(&mut self) {
        let _ = self.behind.drain();
    }
}

/// `sync_file_range`'s flags for `FileStorage::sync_range`: start the writeback of the range's
/// dirty pages, or wait for the writeback under way there.
#[cfg(target_os = "linux")]
const SYNC_RANGE_WRITE: u32 = libc::SYNC_FILE_RANGE_WRITE;
#[cfg(target_os = "linux")]
const SYNC_RANGE_WAIT: u32 = libc::SYNC_FILE_RANGE_WAIT_BEFORE;
#[cfg(not(target_os = "linux"))]
const SYNC_RANGE_WRITE: u32 = 0;
#[cfg(not(target_os = "linux"))]
const SYNC_RANGE_WAIT: u32 = 0;

/// The system calls behind `Storage for FileStorage`, which adds the context to their errors.
impl FileStorage {
    /// `sync_file_range(flags)` over `len` bytes from `offset` (Linux; elsewhere nothing: the
    /// next `sync` writes everything).
    fn sync_range(&self, offset: u64, len: u64, what: &'static str, flags: u32) -> io::Result<()> {
        #[cfg(target_os = "linux")]
        {
            let (Ok(off), Ok(n)) = (i64::try_from(offset), i64::try_from(len)) else {
                return Ok(());
            };
            // SAFETY: the descriptor is this storage's open file; the call reads no memory.
            let rc = unsafe { libc::sync_file_range(self.file.as_raw_fd(), off, n, flags) };
            if rc != 0 {
                return Err(self.context(what, io::Error::last_os_error()));
            }
        }
        #[cfg(not(target_os = "linux"))]
        let _ = (offset, len, what, flags);
        Ok(())
    }

    fn write_vectored(&self, bufs: &[&[u8]], offset: u64) -> io::Result<()> {
        // `pwritev` takes at most IOV_MAX (1024) buffers and may write less than asked.
        const IOV_MAX: usize = 1024;
        let mut at = offset;
        for chunk in bufs.chunks(IOV_MAX) {
            // Empty buffers are left out: a call of only those would write nothing and read
            // as a failure below.
            let mut iov: Vec<libc::iovec> = chunk
                .iter()
                .filter(|b| !b.is_empty())
                .map(|b| libc::iovec {
                    iov_base: b.as_ptr() as *mut libc::c_void,
                    iov_len: b.len(),
                })
                .collect();
            let mut first = 0;
            while first < iov.len() {
                let rest = &iov[first..];
                let off = libc::off_t::try_from(at)
                    .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "offset too large"))?;
                // SAFETY: every iovec points into a live slice of `bufs` (or a tail of one),
                // which outlives the call; the count is at most IOV_MAX.
                let n = unsafe {
                    libc::pwritev(
                        self.file.as_raw_fd(),
                        rest.as_ptr(),
                        rest.len() as libc::c_int,
                        off,
                    )
                };
                if n < 0 {
                    let e = io::Error::last_os_error();
                    if e.kind() == io::ErrorKind::Interrupted {
                        continue;
                    }
                    return Err(e);
                }
                if n == 0 {
                    return Err(io::Error::new(
                        io::ErrorKind::WriteZero,
                        "pwritev wrote nothing",
                    ));
                }
                let mut n = n as usize;
                at += n as u64;
                // Skip the buffers written whole; shorten the one written in part.
                while first < iov.len() && n >= iov[first].iov_len {
                    n -= iov[first].iov_len;
                    first += 1;
                }
                if n > 0 {
                    let v = &mut iov[first];
                    // SAFETY: n < iov_len, so the advanced pointer stays inside the buffer.
                    v.iov_base = unsafe { (v.iov_base as *mut u8).add(n) } as *mut libc::c_void;
                    v.iov_len -= n;
                }
            }
        }
        Ok(())
    }

    fn map_ro(&self, len: u64) -> Option<io::Result<memmap2::Mmap>> {
        let len = match usize::try_from(len) {
            Ok(len) => len,
            Err(_) => {
                return Some(Err(io::Error::new(
                    io::ErrorKind::OutOfMemory,
                    "map too large",
                )))
            }
        };
        // SAFETY: the mapping is read-only and shared. The engine never truncates below a page
        // that a live snapshot can reach and never reads past the length it has written, so no
        // access touches a page beyond end of file. The only other process that may modify the
        // file is the one writer (the exclusive flock admits no second), and it writes only
        // pages that no registered snapshot, in any process, can reach (the shared reader
        // table, docs/design/concurrency.md); a reader checks what it reads (header, txn,
        // checksum where asked) and treats the bytes as untrusted input.
        Some(unsafe { memmap2::MmapOptions::new().len(len).map(&self.file) })
    }

    fn fallocate(&self, len: u64) -> io::Result<bool> {
        self.fallocate_mode(0, 0, len)
    }

    /// `fallocate(FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE)`: `Ok(false)` where the file
    /// system does not support it.
    fn fallocate_zero(&self, offset: u64, len: u64) -> io::Result<bool> {
        let mode = libc::FALLOC_FL_ZERO_RANGE | libc::FALLOC_FL_KEEP_SIZE;
        self.fallocate_mode(mode, offset, len)
    }

    /// `fallocate` with `mode` over `len` bytes from `offset`: `Ok(false)` where the file
    /// system does not support it.
    fn fallocate_mode(&self, mode: libc::c_int, offset: u64, len: u64) -> io::Result<bool> {
        let (Ok(offset), Ok(len)) = (libc::off_t::try_from(offset), libc::off_t::try_from(len))
        else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "range too large",
            ));
        };
        // SAFETY: fallocate only reads its integer arguments; the descriptor is owned by
        // `self.file` and open for writing.
        let rc = unsafe { libc::fallocate(self.file.as_raw_fd(), mode, offset, len) };
        if rc == 0 {
            return Ok(true);
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS) | Some(libc::EINVAL) => Ok(false),
            _ => Err(e),
        }
    }

    fn map_rw(&self, len: u64) -> Option<io::Result<memmap2::MmapRaw>> {
        let len = match usize::try_from(len) {
            Ok(len) => len,
            Err(_) => {
                return Some(Err(io::Error::new(
                    io::ErrorKind::OutOfMemory,
                    "map too large",
                )))
            }
        };
        // A raw mapping hands out pointers, not slices: `pager::access` turns them into
        // slices under its own contract. Only the engine's single writer writes through it,
        // only to pages no snapshot can reach, and only below a length it has allocated with
        // `allocate` or written (the log: zeros ahead of its records), so no write lands past
        // end of file or meets ENOSPC as a SIGBUS. The exclusive flock keeps other writers
        // out; readers in other processes read only pages that registered snapshots reach,
        // which this writer never writes.
        Some(memmap2::MmapOptions::new().len(len).map_raw(&self.file))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `zero_range` zeroes exactly its range (here through `FALLOC_FL_ZERO_RANGE`, elsewhere
    /// written) and keeps the file's length; what is around it is untouched, and a write into
    /// the zeroed range afterwards lands as any other.
    #[test]
    fn zero_range_zeroes_only_its_range() {
        let dir = tempfile::tempdir().unwrap();
        let s = FileStorage::open(&dir.path().join("f"), false, true).unwrap();
        s.write_at(&[0xAB; 5 * 4096], 0).unwrap();
        s.zero_range(4096, 2 * 4096 + 100).unwrap();
        assert_eq!(s.len().unwrap(), 5 * 4096);
        let mut back = vec![0u8; 5 * 4096];
        s.read_at(&mut back, 0).unwrap();
        let zeroed = 4096..3 * 4096 + 100;
        for (i, b) in back.iter().enumerate() {
            let want = if zeroed.contains(&i) { 0 } else { 0xAB };
            assert_eq!(*b, want, "byte {i}");
        }
        s.write_at(&[7; 10], 5000).unwrap();
        s.read_at(&mut back[..10], 5000).unwrap();
        assert_eq!(&back[..10], &[7; 10]);
    }

    /// A growth the disk has no room for fails and leaves the file as it was: its length, and
    /// the free space, which a file system that ran out part of the way (ext4) would have
    /// kept in the file; what is left can still be allocated.
    #[test]
    fn a_failed_allocate_gives_back_what_it_took() {
        let Some(fs) = crate::testing::LoopFs::new(16) else {
            eprintln!("allocate: SKIPPED: no ext4 loop file system (needs root)");
            return;
        };
        let free = || {
            let path = std::ffi::CString::new(fs.dir.as_os_str().as_encoded_bytes()).unwrap();
            // SAFETY: a valid C string, and a zeroed statvfs the call fills in.
            let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
            assert_eq!(unsafe { libc::statvfs(path.as_ptr(), &mut st) }, 0);
            st.f_bavail * st.f_frsize
        };
        let s = FileStorage::open(&fs.dir.join("f"), false, true).unwrap();
        s.write_at(&[1; 4096], 0).unwrap();
        let before = free();
        let e = s.allocate(64 << 20).unwrap_err();
        assert!(crate::error::is_disk_full(&e), "{e}");
        assert_eq!(s.len().unwrap(), 4096);
        let after = free();
        assert!(
            after + (256 << 10) >= before,
            "the failed allocate kept {} of {} bytes free",
            before - after,
            before
        );
        assert!(s.allocate(4096 + before / 2).unwrap());
    }

    /// `write_vectored_at` writes every buffer, in order, across more buffers than one
    /// `pwritev` takes (IOV_MAX) and at an offset past the end (the file grows).
    #[test]
    fn vectored_writes_land_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let s = FileStorage::open(&dir.path().join("f"), false, true).unwrap();
        let bufs: Vec<Vec<u8>> = (0..2500u32)
            .map(|i| vec![(i % 251) as u8; 1 + (i as usize * 7) % 300])
            .collect();
        let slices: Vec<&[u8]> = bufs.iter().map(|b| &b[..]).collect();
        let offset = 12_345;
        s.write_vectored_at(&slices, offset).unwrap();
        let want: Vec<u8> = bufs.concat();
        assert_eq!(s.len().unwrap(), offset + want.len() as u64);
        let mut got = vec![0u8; want.len()];
        s.read_at(&mut got, offset).unwrap();
        assert!(got == want, "the bytes differ");
        // No buffers: nothing written.
        s.write_vectored_at(&[], 0).unwrap();
        assert_eq!(s.len().unwrap(), offset + want.len() as u64);
    }
}
