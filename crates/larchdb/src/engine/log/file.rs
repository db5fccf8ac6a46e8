//! The log's file: its extent (grown ahead of the records, zeroed, shrunk), the writable
//! mapping records are stored through, the writes of a flush, and the grower thread.

use super::*;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Bytes of zeros the log file grows by at a time (`Extent`).
pub(super) const ZERO_CHUNK_BYTES: u64 = 1 << 20;

/// Bytes of zeros a `write_at` while the file grows (`Extent::cover`).
pub(super) const ZERO_WRITE_BYTES: usize = 4096;

/// What writing a `Flush` needs: the log's own (`Log::write` borrows it), cloned out so
/// that a group commit's leader or the grower can write while other committers append.
#[derive(Clone)]
pub(super) struct Sink {
    pub(super) storage: Arc<dyn Storage>,
    pub(super) segment_bytes: u64,
    pub(super) segments: u64,
    /// The whole log file mapped for writing, where the storage offers a mapping: records are
    /// copied into the page cache through it instead of a `pwrite` each (a one-put commit's
    /// `pwrite` cost more than the rest of its commit). Stores go only below the file's
    /// written length (`extent`), whose every block was written with zeros first, so a store
    /// through the map never allocates (no SIGBUS past the end of the file or on a full disk),
    /// and a sync of the file makes what was stored durable like a written page.
    pub(super) map: Option<Arc<LogMap>>,
    pub(super) extent: Arc<Extent>,
}

/// How far the log file is written: it grows with zeros, a chunk at a time, as the log first
/// reaches each part of it, up to its geometry's full length; after that it never changes
/// size. So a new log costs a file header instead of its whole size in zeros, and, once the
/// log has gone round, a record's own sync never has to change the file's size or extents
/// (write-path.md, "The device"). The zeros are not synced: a record's sync carries the size
/// change with it (`fdatasync` writes what reading the data back needs) once a chunk, and
/// unsynced zeros that a crash drops read back as the end of the file, which is the same as
/// zeros (measured: syncing each chunk made one-put `None` commits 2.8-2.9 us against
/// 1.9 us without, larch-bench fillrandom 1M: a sync for each MiB of the 128 MiB log in a
/// 2.9 s run, 3,450-3,990 voluntary context switches against 15-215).
pub(super) struct Extent {
    /// The file's full length: header and every segment.
    pub(super) total: u64,
    /// Bytes of the file written (zeros or records): records may be written below.
    pub(super) len: std::sync::atomic::AtomicU64,
    /// Bytes the file grows by at a time: `ZERO_CHUNK_BYTES`, or a segment if smaller.
    pub(super) chunk: u64,
    /// Held while the length changes: by the appender (`cover`, `shrink`) and by the grower
    /// (`grow_run`), so that neither writes zeros past what the other just claimed or cut.
    pub(super) resize: Mutex<()>,
}

impl Extent {
    pub(super) fn new(total: u64, len: u64, segment_bytes: u64) -> Arc<Extent> {
        Arc::new(Extent {
            total,
            chunk: ZERO_CHUNK_BYTES.min(segment_bytes),
            len: std::sync::atomic::AtomicU64::new(len.min(total)),
            resize: Mutex::new(()),
        })
    }

    pub(super) fn len(&self) -> u64 {
        self.len.load(std::sync::atomic::Ordering::Acquire)
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, ()> {
        // The lock guards no data of its own; a panic while holding it changes nothing.
        self.resize.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Makes the file at least `end` bytes long (at most its full length), writing zeros up
    /// to the next chunk boundary. Nothing past the current length belongs to any record, so
    /// the zeros overwrite nothing; the file is shortened only by `shrink`. Called only by
    /// the log's appender (`Log::append`, `Log::close_tail`, under `&mut Log`); the grower
    /// (`Grower`) usually has the bytes written already, and the lock keeps the two apart.
    pub(super) fn cover(
        &self,
        storage: &dyn Storage,
        map: Option<&LogMap>,
        end: u64,
    ) -> Result<()> {
        if self.len() >= end {
            return Ok(());
        }
        let _resizing = self.lock();
        let target = end
            .div_ceil(self.chunk)
            .saturating_mul(self.chunk)
            .min(self.total);
        let from = self.len();
        let grown = self.zero_to(storage, map, target);
        if grown.is_err() && self.len() > from {
            // The zeros that were written hold no record (records go only below `from`):
            // given back, so that a full disk keeps no space for a record it refused.
            self.len.store(from, std::sync::atomic::Ordering::Release);
            let _ = storage.set_len(from);
        }
        grown
    }

    /// Writes zeros from the current length to `target` (if it is further), makes the pages
    /// writable through `map` ahead of the stores, and records the new length; on failure the
    /// length covers what was written. Requires: the `resize` lock.
    pub(super) fn zero_to(
        &self,
        storage: &dyn Storage,
        map: Option<&LogMap>,
        target: u64,
    ) -> Result<()> {
        let from = self.len();
        let mut at = from;
        // One block a write: a larger write lets the kernel cache the file in large folios
        // (Linux 6.x, ext4), and every later record re-dirties a whole folio, charged to the
        // process as that many bytes written (measured: larch-bench fillsync_mt on 8 threads,
        // /proc/<pid>/io write_bytes 7.6 GB for 40,000 commits with 1 MiB writes of zeros,
        // 49 MB with 4 KiB ones; /proc/diskstats showed the device writing about 118 MB in
        // the 1 MiB run).
        let zeros = [0u8; ZERO_WRITE_BYTES];
        let mut written = Ok(());
        while at < target {
            let n = (target - at).min(zeros.len() as u64) as usize;
            if let Err(e) = storage.write_at(&zeros[..n], at) {
                written = Err(e.into());
                break;
            }
            at += n as u64;
        }
        if at > from {
            if let Some(m) = map {
                m.populate(from, at);
            }
            self.len.store(at, std::sync::atomic::Ordering::Release);
        }
        written
    }

    /// Gives back the file's bytes from `len` on (no record needs them: `Log::append`'s
    /// jump), if it is longer; on failure the file keeps them, which changes nothing else. The
    /// length is lowered before the file is cut, so that no store through the map reaches
    /// the bytes cut.
    pub(super) fn shrink(&self, storage: &dyn Storage, len: u64) {
        use std::sync::atomic::Ordering;
        let _resizing = self.lock();
        if self.len.load(Ordering::Acquire) <= len {
            return;
        }
        self.len.store(len, Ordering::Release);
        let _ = storage.set_len(len);
    }
}

/// What starts the log's grower thread: the handle's background owner
/// (`engine::background::Background`), which names it, sets its priority and stops it at
/// close. `None` when it is not started (the handle is closing, or no thread can be).
pub(crate) trait Spawn: Send + Sync {
    fn spawn_thread(
        &self,
        name: &str,
        nice: u8,
        work: Box<dyn FnOnce() + Send>,
    ) -> Option<std::thread::JoinHandle<()>>;
}

/// Bytes of zeros the grower writes under one hold of the `resize` lock: an appender that
/// needs the file longer at once waits for at most this much.
pub(super) const GROW_PIECE_BYTES: u64 = 64 << 10;

/// Grows the log file ahead of the appender, on a thread of the handle, so that a commit
/// finds its record's pages written and mapped (`Extent::zero_to`) instead of writing them
/// itself. A log that grows (a new database, a tree that outgrows its ring) otherwise paid a
/// `pwrite` of zeros and a page fault through the map for every 4 KiB it reached: 11% and
/// 6.5% of the writer's time in a 1M fillseq of one-put commits. Only a log with a map has one: without
/// it records are written with `pwrite`, which grows the file anyway, and the simulated
/// storages of the tests keep their single order of operations.
///
/// Nothing depends on it: `Extent::cover` still grows the file when the grower is behind or
/// failed (a full disk then fails the commit that needs the room, as before).
pub(super) struct Grower {
    pub(super) state: Arc<(Mutex<GrowState>, Condvar)>,
    pub(super) thread: Option<std::thread::JoinHandle<()>>,
}

#[derive(Default)]
pub(super) struct GrowState {
    /// The file length wanted (0: none; taken by the thread).
    pub(super) want: u64,
    /// Counts `forget`s: a round asked for before one stops.
    pub(super) epoch: u64,
    /// File offsets `[from, to)` to make present in the map (`LogMap::populate`; taken by the
    /// thread): a segment the log goes round to, whose pages left the mapping when the log
    /// last moved past it (`LogMap::enter`).
    pub(super) populate: Option<(u64, u64)>,
    pub(super) stop: bool,
}

impl Grower {
    /// Starts the thread for the log written through `sink`; `None` if it cannot start, or
    /// the handle is closing.
    pub(super) fn start(sink: Sink, background: &dyn Spawn, nice: u8) -> Option<Grower> {
        let state: Arc<(Mutex<GrowState>, Condvar)> = Arc::default();
        let theirs = state.clone();
        let work = Box::new(move || grow_run(&sink, &theirs));
        let thread = background.spawn_thread("larch-log-grow", nice, work)?;
        Some(Grower {
            state,
            thread: Some(thread),
        })
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, GrowState> {
        // No code panics while holding this lock; recover the state if a panic ever did.
        self.state.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Asks for the file to be `want` bytes long (or more).
    pub(super) fn ask(&self, want: u64) {
        let mut st = self.lock();
        if want > st.want {
            st.want = want;
            self.state.1.notify_one();
        }
    }

    /// Asks for file offsets `[from, to)` to be made present in the map, replacing an earlier
    /// request not yet taken.
    pub(super) fn populate(&self, from: u64, to: u64) {
        let mut st = self.lock();
        st.populate = Some((from, to));
        self.state.1.notify_one();
    }

    /// Forgets what was asked (the log is about to be cut: growing it again is not wanted).
    pub(super) fn forget(&self) {
        let mut st = self.lock();
        st.want = 0;
        st.epoch += 1;
    }
}

impl Drop for Grower {
    fn drop(&mut self) {
        self.lock().stop = true;
        self.state.1.notify_one();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The grower's thread: waits to be asked, makes present the segment asked for, then grows
/// the file a piece at a time up to what was asked. A failed write (a full disk) stops this
/// round; the appender meets the error itself if it needs the room.
pub(super) fn grow_run(sink: &Sink, state: &(Mutex<GrowState>, Condvar)) {
    let lock = || state.0.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        let (want, epoch, populate) = {
            let mut st = lock();
            while st.want == 0 && st.populate.is_none() && !st.stop {
                st = state.1.wait(st).unwrap_or_else(|e| e.into_inner());
            }
            if st.stop {
                return;
            }
            (std::mem::take(&mut st.want), st.epoch, st.populate.take())
        };
        let extent = &sink.extent;
        if let (Some((from, to)), Some(map)) = (populate, sink.map.as_deref()) {
            // Only what the file holds: the mapping past its end has no pages.
            map.populate(from, to.min(extent.len()));
        }
        let want = want.min(extent.total);
        loop {
            let _resizing = extent.lock();
            let at = extent.len();
            let st = lock();
            if at >= want || st.stop || st.epoch != epoch {
                break;
            }
            drop(st);
            let target = (at + GROW_PIECE_BYTES).min(want);
            if extent
                .zero_to(&*sink.storage, sink.map.as_deref(), target)
                .is_err()
            {
                break;
            }
        }
    }
}

/// A writable mapping of the log file.
pub(super) struct LogMap {
    map: memmap2::MmapRaw,
    /// File offset of the segment stored into last (`u64::MAX`: none yet). Only that segment's
    /// pages stay in the process's resident set: once stores move on to another segment, the
    /// one before is dropped from the mapping (`enter`), so the log's part of the process
    /// size is a segment (and the grower's chunks ahead), not the whole ring.
    segment: AtomicU64,
    /// Whether a store or a populate may have mapped pages in since the last `forget`: a
    /// log synced after records written with `pwrite` alone (durable commits) maps nothing,
    /// and its `forget` before each sync would be a system call for nothing. Like `forget`
    /// itself, only a hint: a store past the range of a `forget` that clears the flag
    /// meanwhile leaves its page mapped until the next store sets it again, and a sync then
    /// write-protects that page, as it would without `forget`.
    touched: AtomicBool,
}

impl LogMap {
    /// Maps `len` bytes of `storage` (the log file's full length, though the file may be
    /// shorter yet: stores stay below `Extent::len`), if it can be mapped.
    pub(super) fn of(storage: &dyn Storage, len: u64) -> Option<Arc<LogMap>> {
        let map = storage.map_mut(len)?.ok()?;
        (map.len() as u64 >= len).then(|| {
            Arc::new(LogMap {
                map,
                segment: AtomicU64::new(u64::MAX),
                touched: AtomicBool::new(false),
            })
        })
    }

    /// Before a store into the segment at file offset `at` (of `bytes`): if the last store
    /// went to another segment, drops that one's pages from the process's resident set
    /// (`MADV_DONTNEED`). The page cache keeps them, dirty ones included (a shared file
    /// mapping loses nothing), and nothing in this process reads the log through the map.
    pub(super) fn enter(&self, at: u64, bytes: u64) {
        // Read first: a swap at every store is a locked instruction, which waits for the
        // stores before it (the overlay's, the record's) to drain.
        if self.segment.load(Ordering::Relaxed) == at {
            return;
        }
        let before = self.segment.swap(at, Ordering::Relaxed);
        if before == at || before == u64::MAX {
            return;
        }
        let len = bytes.min((self.map.len() as u64).saturating_sub(before));
        if len > 0 {
            // SAFETY: a shared file mapping (see above); no slice of the log's mapping is
            // borrowed outside `store`, which the caller runs after this, one flush at a time.
            let _ = unsafe {
                self.map.unchecked_advise_range(
                    memmap2::UncheckedAdvice::DontNeed,
                    before as usize,
                    len as usize,
                )
            };
        }
    }

    /// Drops the pages of file offsets `[from, to)` (page-aligned: the partial pages at the
    /// ends are kept) from the mapping, as `enter` does for a segment left: pages stored into
    /// and about to be synced, which no store reaches again before the log comes round. A
    /// sync write-protects every page it writes back that a writable mapping maps, and on a
    /// machine of few cores each costs a TLB flush on the others (an interrupt each: with
    /// checkpoints by slices, which sync the log past the records they merge, a fifth of a
    /// random overwrite load's samples); one `MADV_DONTNEED` for the range costs one.
    pub(super) fn forget(&self, from: u64, to: u64) {
        // Read first, as in `enter`: a swap is a locked instruction.
        if !self.touched.load(Ordering::Relaxed) || !self.touched.swap(false, Ordering::Relaxed) {
            return;
        }
        const PAGE: u64 = 4096;
        let from = from.div_ceil(PAGE) * PAGE;
        let to = (to / PAGE * PAGE).min(self.map.len() as u64);
        if from >= to {
            return;
        }
        // SAFETY: as in `enter`: a shared file mapping, and no slice of it is borrowed outside
        // `store`; the pages dropped are wholly below the log's end, where no store goes.
        let _ = unsafe {
            self.map.unchecked_advise_range(
                memmap2::UncheckedAdvice::DontNeed,
                from as usize,
                (to - from) as usize,
            )
        };
    }

    /// Makes the pages of file offsets `[from, to)` present in the mapping
    /// (`MADV_POPULATE_READ`, Linux 5.14), so that the stores that follow do not fault one
    /// page at a time for the page cache's lookup: each first store still takes the write
    /// fault that marks its page dirty (`page_mkwrite`). Making them writable too
    /// (`MADV_POPULATE_WRITE`) would dirty pages no store has reached, which the next sync
    /// writes; measured ahead of the writer, it took two thirds of a YCSB run's faults away
    /// and none of its time (docs/design/performance.md, "Checkpoints made cheaper, and the
    /// device's idle window"). Only a hint: an older kernel refuses it and the stores fault.
    pub(super) fn populate(&self, from: u64, to: u64) {
        #[cfg(target_os = "linux")]
        {
            let to = to.min(self.map.len() as u64);
            if from < to {
                self.touch();
                let _ = self.map.advise_range(
                    memmap2::Advice::PopulateRead,
                    from as usize,
                    (to - from) as usize,
                );
            }
        }
        #[cfg(not(target_os = "linux"))]
        let _ = (from, to);
    }

    /// Notes that pages may be mapped in (`touched`).
    fn touch(&self) {
        if !self.touched.load(Ordering::Relaxed) {
            self.touched.store(true, Ordering::Relaxed);
        }
    }

    /// Copies `bytes` to file offset `at`. Requires: within the mapping (checked).
    pub(super) fn store(&self, bytes: &[u8], at: u64) -> Result<()> {
        let end = at.checked_add(bytes.len() as u64);
        if end.is_none_or(|e| e > self.map.len() as u64) {
            return Err(Error::Internal(format!("log store past the map at {at}")));
        }
        self.touch();
        // SAFETY: the range is inside the mapping (checked above). Only the log's writer
        // stores into it, one flush at a time (the `GroupLog` leader, or `Log::write` under
        // the group's lock), into positions no reader of this process reads; other processes
        // read the log only through `read_at` at open, when no writer exists.
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                self.map.as_mut_ptr().add(at as usize),
                bytes.len(),
            );
        }
        Ok(())
    }
}

// SAFETY: the mapping is plain memory shared with the kernel's page cache; access is
// serialised as `store` describes.
unsafe impl Send for LogMap {}

unsafe impl Sync for LogMap {}

impl Sink {
    /// The file offset of `position`.
    pub(super) fn offset(&self, position: u64) -> u64 {
        file_offset(self.segment_bytes, self.segments, position)
    }

    /// Before a sync of the log up to `end`: drops the pages stored into through the map in
    /// `end`'s segment, up to `end` (`LogMap::forget`); the segments before were dropped as
    /// stores left them (`LogMap::enter`).
    pub(super) fn forget_stored(&self, end: u64) {
        if let Some(map) = self.map.as_deref() {
            let in_segment = end % self.segment_bytes;
            let start = self.offset(end - in_segment);
            map.forget(start, start + in_segment);
        }
    }

    /// Writes the flush's bytes where their positions lie, one write per segment they cover:
    /// through the map if `mapped` and there is one, else with `write_at`. Writes that are
    /// synced next go through `write_at`: a sync write-protects the pages stored through a
    /// map, and the next store to each faults (measured: durable one-put commits at 1,500/s
    /// through the map against 9,100-10,100/s with `pwrite`, larch-bench fillsync 5K and
    /// 20K).
    pub(super) fn write(&self, f: &Flush, mapped: bool) -> Result<()> {
        let mut done = 0usize;
        let (mut base, mut base_done) = (f.position, 0usize);
        let mut jumps = f.jumps.iter().peekable();
        while done < f.bytes.len() {
            if let Some(&&(offset, to)) = jumps.peek() {
                if offset == done {
                    (base, base_done) = (to, done);
                    jumps.next();
                }
            }
            let position = base + (done - base_done) as u64;
            let in_segment = position % self.segment_bytes;
            let until = jumps.peek().map_or(f.bytes.len(), |&&(offset, _)| offset);
            let n = ((self.segment_bytes - in_segment) as usize).min(until - done);
            let bytes = &f.bytes[done..done + n];
            // Every byte handed out was covered when it was appended (`Log::append`,
            // `close_tail`): a store past the file's end would fault.
            if self.extent.len() < self.offset(position) + n as u64 {
                return Err(Error::Internal(format!(
                    "log write at {position} past the file's written length"
                )));
            }
            match self.map.as_deref().filter(|_| mapped) {
                Some(map) => {
                    map.enter(self.offset(position - in_segment), self.segment_bytes);
                    map.store(bytes, self.offset(position))?
                }
                None => self.storage.write_at(bytes, self.offset(position))?,
            }
            done += n;
        }
        Ok(())
    }
}
