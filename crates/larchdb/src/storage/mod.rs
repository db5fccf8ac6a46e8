//! The storage seam: every byte the engine reads from or writes to its file passes through
//! [`Storage`]. Backends: [`FileStorage`] (a real file, memory-mapped for reads, with writes
//! behind on an io_uring ring of its own, `behind.rs`) and, with the
//! `test-support` feature, `FaultStorage` (in memory, for tests: simulated crashes drop
//! unsynced writes, and the Nth write or sync can fail). A raw block device backend comes in
//! stage 3. Beside a file, the lock file (`lock.rs`) holds the reader table that processes
//! share.

mod behind;
#[cfg(any(test, feature = "test-support"))]
mod fault;
mod file;
mod lock;

#[cfg(any(test, feature = "test-support"))]
pub use fault::{CrashMode, FaultKind, FaultStorage};
pub use file::{FileLock, FileStorage};
pub(crate) use lock::LockTable;
pub use lock::{lock_path, log_path};

/// Syncs the directory `dir`, so that the names created or renamed in it survive a power loss.
pub(crate) fn sync_dir(dir: &std::path::Path) -> crate::error::Result<()> {
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| crate::error::Error::io_at("sync", dir, e))
}

use std::io;

/// Byte-addressed storage with explicit durability.
///
/// Contract: a `write_at` is visible to later `read_at` calls (and to any mapping returned by
/// `map`) at once; it survives a power loss only once a later `sync` has returned `Ok`.
/// Writes may reach the device in any order before that. Implementations are `Send + Sync`;
/// the engine serialises writes, and reads may run concurrently with them on other ranges.
pub trait Storage: Send + Sync + 'static {
    /// Fills `buf` from `offset`. Reading past the end is an `UnexpectedEof` error.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
    /// Writes all of `buf` at `offset`, growing the storage if needed.
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()>;

    /// `write_at` of bytes no write behind (`write_behind`) is under way to: it need not
    /// wait for those (`drain`). A large value's run, written by its committer into pages
    /// reserved for it (docs/design/large-values.md).
    fn write_apart(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.write_at(buf, offset)
    }
    /// Writes `bufs`, one after the other, from `offset`: one `write_at` of their
    /// concatenation, without gathering them first where the backend can (`pwritev`).
    fn write_vectored_at(&self, bufs: &[&[u8]], offset: u64) -> io::Result<()> {
        let mut at = offset;
        for b in bufs {
            self.write_at(b, at)?;
            at += b.len() as u64;
        }
        Ok(())
    }
    /// Makes `len` bytes from `offset` read as zeros, as a `write_at` of zeros would (and as
    /// durable as one: after the next `sync`), keeping the storage's length and, where the
    /// backend allocates space, the range's space allocated. Requires: the range is below the
    /// current length. The default writes zeros.
    fn zero_range(&self, offset: u64, len: u64) -> io::Result<()> {
        write_zeros(self, offset, len)
    }
    /// Makes every earlier write durable.
    fn sync(&self) -> io::Result<()>;
    /// Starts `writes` (each the address and length of its bytes, and its offset) and returns
    /// without waiting for them, where the backend can (a file: `O_DIRECT` writes through an
    /// io_uring ring, many in flight, submitted together); elsewhere writes them as `write_at`
    /// does. A write started so is on the storage once `drain` returns `Ok`, and every other
    /// call that writes (`write_at`, `write_vectored_at`, `zero_range`, `set_len`,
    /// `allocate`) or syncs drains first: a meta field written or a sync made after it always
    /// follows it. What `read_at` or a mapping reads of its range before the drain is
    /// unspecified. A failed write fails the drain that meets it and every call that drains
    /// after it (the storage keeps the error).
    ///
    /// # Safety
    /// Each write's address points to its length of readable bytes, which stay valid and
    /// unchanged until the next drain returns; two writes to the same bytes of the storage are
    /// not in flight at once (a drain between them).
    unsafe fn write_behind(&self, writes: &[(*const u8, usize, u64)]) -> io::Result<()> {
        for &(buf, len, offset) in writes {
            // SAFETY: the caller's requirement: `len` readable bytes at `buf`.
            self.write_at(unsafe { std::slice::from_raw_parts(buf, len) }, offset)?;
        }
        Ok(())
    }
    /// Waits for every write `write_behind` started; the first that failed is returned (and
    /// by every drain after it). The default has none in flight.
    fn drain(&self) -> io::Result<()> {
        Ok(())
    }
    /// True if `write_behind` returns before its bytes are written: the caller's memory is
    /// then read after it returns, and owned buffers are better copied to where they stay
    /// unchanged first. The default writes at once.
    fn writes_behind(&self) -> bool {
        false
    }
    /// Starts writing `len` bytes from `offset` to the device, if the backend holds them in a
    /// cache, without waiting and without making them durable (a `sync` still does that).
    /// The default does nothing.
    fn start_writeback(&self, _offset: u64, _len: u64) -> io::Result<()> {
        Ok(())
    }
    /// Waits until the writes to the device that `start_writeback` started for `len` bytes
    /// from `offset` are done. An error is a failed write, which a later `sync` may not report
    /// again (Linux reports a file's write error once per open file): the caller treats it as
    /// a failed `sync`. The default does nothing.
    fn wait_writeback(&self, _offset: u64, _len: u64) -> io::Result<()> {
        Ok(())
    }
    /// Lets go of the backend's cached copy of `len` bytes from `offset`, where it keeps one
    /// beside the caller's own (a file: the page cache's clean pages of the range that no
    /// mapping holds, `POSIX_FADV_DONTNEED`; its dirty pages are started on their way to the
    /// device and stay). Only a hint about memory: what a later read returns is the same. The
    /// default does nothing: a backend without a cache.
    fn drop_cached(&self, _offset: u64, _len: u64) -> io::Result<()> {
        Ok(())
    }
    /// Makes the storage's name durable: for a file, syncs the directory that holds it, so
    /// that a power loss right after the file was created cannot lose the file itself (a
    /// file's own sync does not make its directory entry durable). The engine calls it after
    /// it creates a database or a log. The default does nothing: a backend without a name.
    fn sync_name(&self) -> io::Result<()> {
        Ok(())
    }
    /// Current length in bytes.
    fn len(&self) -> io::Result<u64>;
    /// Returns true when the storage is empty.
    fn is_empty(&self) -> io::Result<bool> {
        Ok(self.len()? == 0)
    }
    /// Shrinks or grows the storage.
    fn set_len(&self, len: u64) -> io::Result<()>;
    /// A read-only shared mapping of `len` bytes from offset 0, if the backend supports one.
    /// `len` may exceed the current length; bytes past the end must not be touched.
    fn map(&self, _len: u64) -> Option<io::Result<memmap2::Mmap>> {
        None
    }
    /// Makes the storage at least `len` bytes long with its space allocated, so that writes
    /// through a mapping below `len` cannot fail for lack of space. Returns `Ok(false)` if
    /// the backend cannot guarantee that (then the engine writes with `write_at`).
    fn allocate(&self, _len: u64) -> io::Result<bool> {
        Ok(false)
    }
    /// A readable and writable shared mapping of `len` bytes from offset 0, if the backend
    /// supports one. The engine writes through it only below a length it has `allocate`d or
    /// written (the log file, grown with zeros), and
    /// reads snapshots through the same mapping (one mapping, as LMDB's MDB_WRITEMAP).
    fn map_mut(&self, _len: u64) -> Option<io::Result<memmap2::MmapRaw>> {
        None
    }
    /// Identifies the current boot of the machine holding the data. A commit written without a
    /// sync is trusted after a process crash only if the boot id has not changed since (the
    /// kernel's page cache survived, so everything written before the meta page is there too).
    /// `None` means unknown: unsynced commits are never trusted.
    fn boot_id(&self) -> Option<[u8; 16]>;
    /// Releases the advisory lock the storage holds on its file, if it holds one (a writing
    /// handle closed while its read transactions live on lets the next writer in; its readers
    /// are then protected by the lock file's reader table). The default holds none.
    fn unlock(&self) -> io::Result<()> {
        Ok(())
    }
}

/// Bytes of writeback a `Paced` keeps under way at most: 8 pages of 4 KiB. Seed 000's readers
/// beside its writer (docs/design/performance.md, "A checkpoint's writeback in small steps
/// beside readers"): at 128 KiB their read P99 was 0.5-0.77 ms, at 64 KiB 0.40-0.55, at 32 KiB
/// 0.30-0.39, at 16 KiB 0.26-0.32 with the writer 10-15% slower beside 2 readers.
pub(crate) const PACED_IN_FLIGHT_BYTES: u64 = 32 << 10;

/// Writeback started a range at a time with at most `PACED_IN_FLIGHT_BYTES` under way (a
/// longer range goes alone): before a range is started, the oldest ones started are waited
/// for until it fits. A checkpoint's pages beside readers that wait on the device go this
/// way, so that a reader's read waits behind a few of them in the device's queue, not behind
/// the whole checkpoint that a `sync` hands over at once (docs/design/performance.md, "A
/// checkpoint's writeback in small steps beside readers"). A failed wait is a failed sync.
#[derive(Default)]
pub(crate) struct Paced {
    flight: std::collections::VecDeque<(u64, u64)>,
    in_flight: u64,
}

impl Paced {
    /// Starts the writeback of `len` bytes from `offset`, after waiting for older ranges
    /// until it fits.
    pub(crate) fn start(&mut self, storage: &dyn Storage, offset: u64, len: u64) -> io::Result<()> {
        while self.in_flight > 0 && self.in_flight + len > PACED_IN_FLIGHT_BYTES {
            let Some((at, n)) = self.flight.pop_front() else {
                break;
            };
            self.in_flight -= n;
            storage.wait_writeback(at, n)?;
        }
        storage.start_writeback(offset, len)?;
        self.flight.push_back((offset, len));
        self.in_flight += len;
        Ok(())
    }
}

/// Writes `len` zeros from `offset` with `write_at`, 64 KiB at a time (`Storage::zero_range`).
pub(crate) fn write_zeros<S: Storage + ?Sized>(s: &S, offset: u64, len: u64) -> io::Result<()> {
    static ZEROS: [u8; 64 << 10] = [0; 64 << 10];
    let mut at = offset;
    let end = offset.saturating_add(len);
    while at < end {
        let n = (end - at).min(ZEROS.len() as u64) as usize;
        s.write_at(&ZEROS[..n], at)?;
        at += n as u64;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// Records the writebacks started and waited for; fails the waits if asked.
    #[derive(Default)]
    struct Recorder {
        calls: Mutex<Vec<(char, u64, u64)>>,
        fail_waits: bool,
    }

    impl Storage for Recorder {
        fn read_at(&self, _: &mut [u8], _: u64) -> io::Result<()> {
            Ok(())
        }
        fn write_at(&self, _: &[u8], _: u64) -> io::Result<()> {
            Ok(())
        }
        fn sync(&self) -> io::Result<()> {
            Ok(())
        }
        fn len(&self) -> io::Result<u64> {
            Ok(0)
        }
        fn set_len(&self, _: u64) -> io::Result<()> {
            Ok(())
        }
        fn boot_id(&self) -> Option<[u8; 16]> {
            None
        }
        fn start_writeback(&self, offset: u64, len: u64) -> io::Result<()> {
            self.calls.lock().unwrap().push(('s', offset, len));
            Ok(())
        }
        fn wait_writeback(&self, offset: u64, len: u64) -> io::Result<()> {
            self.calls.lock().unwrap().push(('w', offset, len));
            if self.fail_waits {
                return Err(io::Error::from_raw_os_error(5));
            }
            Ok(())
        }
    }

    #[test]
    fn paced_writeback_keeps_a_bounded_amount_under_way_and_waits_oldest_first() {
        let r = Recorder::default();
        let mut paced = Paced::default();
        let page = 4096;
        // Runs of 1, 3 and 4 pages, one longer than the bound, then small ones and one as
        // long as the bound.
        let bound = PACED_IN_FLIGHT_BYTES / page;
        let runs = [
            (0, 1),
            (10, 3),
            (20, 4),
            (100, bound + 5),
            (200, 1),
            (300, 2),
            (400, bound),
        ];
        for (p, n) in runs {
            paced.start(&r, p * page, n * page).unwrap();
        }
        let calls = r.calls.lock().unwrap().clone();
        let mut started = std::collections::VecDeque::new();
        let mut in_flight = 0u64;
        for (kind, at, len) in calls.iter().copied() {
            match kind {
                's' => {
                    assert!(
                        in_flight == 0 || in_flight + len <= PACED_IN_FLIGHT_BYTES,
                        "started {len} bytes at {at} beside {in_flight} under way"
                    );
                    started.push_back((at, len));
                    in_flight += len;
                }
                _ => {
                    assert_eq!(started.pop_front(), Some((at, len)), "waits oldest first");
                    in_flight -= len;
                }
            }
        }
        let starts: Vec<(u64, u64)> = calls
            .iter()
            .filter(|c| c.0 == 's')
            .map(|c| (c.1 / page, c.2 / page))
            .collect();
        assert_eq!(starts, runs, "every run started once, in order");
        // The long run went alone: everything started before it was waited for first.
        let long = ('s', 100 * page, (bound + 5) * page);
        let at_long = calls.iter().position(|c| *c == long).unwrap();
        let waited_before: u64 = calls[..at_long]
            .iter()
            .filter(|c| c.0 == 'w')
            .map(|c| c.2)
            .sum();
        assert_eq!(waited_before, 8 * page);
    }

    #[test]
    fn a_failed_wait_is_returned() {
        let r = Recorder {
            fail_waits: true,
            ..Recorder::default()
        };
        let mut paced = Paced::default();
        paced.start(&r, 0, PACED_IN_FLIGHT_BYTES).unwrap();
        let e = paced.start(&r, PACED_IN_FLIGHT_BYTES, 4096).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(5));
    }
}
