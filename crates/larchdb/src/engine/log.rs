//! The write-ahead log of stage 2 (docs/design/write-path.md): records appended in order to a
//! file of equal segments used round robin, synced on demand, read back at open from the last
//! checkpoint's position. The byte layout is `layout::log`.
//!
//! Appending only buffers; `write` hands the buffered bytes to the storage and `sync` makes them
//! durable. Every record carries the position up to which the log was synced when it was
//! appended, so that reading back can tell a tail that was never synced (a torn or missing
//! record followed only by records that do not vouch for it: the end of the log) from damage
//! (a bad record that a later record says was synced before it: `Error::CorruptedLog`). One
//! case cannot be told apart: damage inside the last group synced, with nothing appended after
//! that sync. It reads as the end of the log.
//!
//! A handle opened with `Options::log` commits through it (`engine::commit::commit_logged`).

use crate::bytes::{get_u32, get_u64, put_u32, put_u64};
use crate::error::{Error, Result};
use crate::layout::log::*;
use crate::pager::shift::crc32c;
use crate::storage::{FileLock, FileStorage, Storage};
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// Where a handle's log is.
pub(crate) enum LogSource {
    /// Nowhere: a storage opened without one.
    None,
    /// A file beside the database (`storage::log_path`), opened when needed.
    File(PathBuf),
    /// A storage the caller gave.
    Storage(Arc<dyn Storage>),
}

impl LogSource {
    /// The log's storage, if there is one (or, for a file, if it exists or may be created).
    pub(crate) fn open(&self, read_only: bool, create: bool) -> Result<Option<Arc<dyn Storage>>> {
        match self {
            LogSource::None => Ok(None),
            LogSource::Storage(s) => Ok(Some(s.clone())),
            LogSource::File(path) => {
                if !create && !path.exists() {
                    return Ok(None);
                }
                let file = FileStorage::open_with(path, read_only, create, FileLock::None)?;
                Ok(Some(Arc::new(file)))
            }
        }
    }
}

/// A checkpoint comes after the log has grown by at least this share of the data file
/// (`Log::plan`).
const CHECKPOINT_FILE_FRACTION: u64 = 32;
/// The ring has room for at least this share of the data file (`Log::plan`).
const RING_FILE_FRACTION: u64 = 3;
/// The ring has room for at least this many checkpoints (`Log::plan`).
const RING_CHECKPOINTS: u64 = 4;

/// Smallest segment: a few records' worth.
pub(crate) const SEGMENT_BYTES_MIN: u64 = 64 << 10;
/// Bytes of zeros the log file grows by at a time (`Extent`).
const ZERO_CHUNK_BYTES: u64 = 1 << 20;
/// Bytes of zeros a `write_at` while the file grows (`Extent::cover`).
const ZERO_WRITE_BYTES: usize = 4096;
/// Buffers of segments read before that reading back keeps for reuse (`Log::read_spare`):
/// the one the last records applied came from, and one more.
const READ_SPARE_BUFFERS: usize = 2;

/// How a writer's open reads its log back and closes its tail (`Log::open_into`).
pub(crate) struct Reopen {
    /// The oldest position still needed: the last durable checkpoint's (at most the position
    /// read from).
    pub(crate) keep_from: u64,
    /// The commit the records are replayed onto: a mark of a newer commit ends the log
    /// (`KIND_MARK`).
    pub(crate) tree_txn: u64,
    /// The machine may have restarted since the log was last written (a power loss may have
    /// kept some of its unsynced writes and not others), so the slots past its end may hold
    /// records written after it (`close_tail`).
    pub(crate) restarted: bool,
    /// What reading back must reach.
    pub(crate) expect: Expect,
    /// Give up what cannot be reached instead of failing (`Options::recover`): reading back
    /// ends at the first bad record even where later ones vouch for it, and the slots past
    /// the end are cleared (`Shortfall`).
    pub(crate) recover: bool,
}

/// What an open knows the log held, from outside it: reading back must reach it, or the log
/// lost records (`Log::shortfall`).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Expect {
    /// A log position that the lock file says the log was synced past when it was last
    /// written (`LockTable::log_synced`; 0 if it says nothing).
    pub(crate) synced_to: u64,
    /// A commit the records must reach: a newer meta slot that the open could not use names
    /// it (0: none).
    pub(crate) reach_txn: u64,
    /// The open passed over a meta slot it could not use, whose commit it does not know (a
    /// damaged one): a log that ends at a mark cannot prove that slot did not hold the mark's
    /// commit, made durable.
    pub(crate) doubtful: bool,
}

/// What a log read back to its end did not reach, found before the open changes anything
/// (`Log::shortfall`): why the end cannot be the last acknowledged commit, and what lies past
/// it.
#[derive(Debug)]
pub(crate) struct Shortfall {
    /// Where reading back ended, and the last commit it read.
    pub(crate) end: u64,
    pub(crate) last_txn: u64,
    /// Why more was acknowledged than was read.
    pub(crate) reasons: Vec<String>,
    /// The records found past the end (none may be left: a cut file).
    pub(crate) beyond: Beyond,
}

impl Shortfall {
    /// The error an open that may not give this up fails with.
    pub(crate) fn refusal(&self) -> Error {
        Error::WouldLoseData {
            damage: self.reasons.join("; "),
            lost: format!("opening at the log's end would give up {}", self.lost()),
        }
    }

    /// What opening at the end gives up, in words.
    pub(crate) fn lost(&self) -> String {
        let found = match self.beyond.txns {
            Some(_) => format!("; {} lie past it", self.beyond.describe()),
            None => String::new(),
        };
        format!(
            "every commit after commit {} (the log's end at position {}){found}",
            self.last_txn, self.end
        )
    }
}

/// The records of a log file that lie past a position (`Log::beyond`), and what the file's
/// segments say about the log's history there.
#[derive(Debug, Default, Clone)]
pub(crate) struct Beyond {
    /// Intact records found, their bytes, and the lowest and highest commit among them.
    pub(crate) records: u64,
    pub(crate) bytes: u64,
    pub(crate) txns: Option<(u64, u64)>,
    /// The lowest position among them.
    pub(crate) first: Option<u64>,
    /// The highest position one of them says the log was synced to when it was appended.
    pub(crate) vouched: u64,
    /// The highest position a segment in the file says was released by a durable
    /// checkpoint: a slot is written again only once its previous cycle is older than the
    /// last durable checkpoint's position, so a segment at `base` in a later cycle means a
    /// durable checkpoint at or past `base - cycle` (`Log::reusable`, `Log::restart`).
    pub(crate) released: u64,
}

impl Beyond {
    /// Notes `rec`, of `size` bytes, which says the log was synced to `synced`.
    fn note(&mut self, rec: &Record, synced: u64, size: u64) {
        self.vouched = self.vouched.max(synced);
        if rec.kind != KIND_PAD {
            self.count(rec, size);
        }
    }

    /// Counts `rec` among the records found.
    fn count(&mut self, rec: &Record, size: u64) {
        self.records += 1;
        self.bytes += size;
        self.first = Some(self.first.map_or(rec.position, |f| f.min(rec.position)));
        self.txns = Some(match self.txns {
            Some((lo, hi)) => (lo.min(rec.txn), hi.max(rec.txn)),
            None => (rec.txn, rec.txn),
        });
    }

    /// The records found, in words.
    pub(crate) fn describe(&self) -> String {
        match self.txns {
            Some((lo, hi)) => format!(
                "{} record(s) of commits {lo} to {hi}, {} bytes",
                self.records, self.bytes
            ),
            None => "no intact record".into(),
        }
    }
}

/// A record read back from the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Record {
    /// Where it starts.
    pub(crate) position: u64,
    pub(crate) kind: u8,
    pub(crate) txn: u64,
    pub(crate) body: Bytes,
}

/// Where reading the log back puts the records it reads, in log order.
pub(crate) trait ReadBack {
    /// About how many bytes of log are to come (`Log::span_hint`), before the first record.
    fn expect(&mut self, _bytes: u64) {}
    /// The next record (a commit; pads are not handed over). An error stops the reading.
    fn record(&mut self, rec: Record) -> Result<()>;
    /// Every record has been handed over, and the log read back whole: whatever is held is
    /// to be dealt with now, before an open closes the log's tail (an error fails the open
    /// with nothing written).
    fn done(&mut self) -> Result<()> {
        Ok(())
    }
}

/// Records the thread that reads the log back hands to the one that consumes them at a time
/// (`Log::read_beside`), and the batches it may be ahead by: a few thousand records, far
/// less than a segment's, so that the segment buffers are reused as when one thread does
/// both (`READ_SPARE_BUFFERS`).
const HANDOVER_BATCH: usize = 1024;
const HANDOVER_DEPTH: usize = 4;

/// What the reading thread sends the consuming one.
enum Handed {
    Expect(u64),
    Records(Vec<Record>),
}

/// The reading thread's end of `Log::read_beside`: records batched and sent.
struct Handover {
    to: std::sync::mpsc::SyncSender<Handed>,
    batch: Vec<Record>,
}

impl Handover {
    fn send(&mut self) -> Result<()> {
        if self.batch.is_empty() {
            return Ok(());
        }
        let batch = std::mem::replace(&mut self.batch, Vec::with_capacity(HANDOVER_BATCH));
        // The consumer is gone only after it failed, and reports its own error.
        self.to
            .send(Handed::Records(batch))
            .map_err(|_| Error::internal("the log's records are no longer wanted"))
    }
}

impl ReadBack for Handover {
    fn expect(&mut self, bytes: u64) {
        let _ = self.to.send(Handed::Expect(bytes));
    }

    fn record(&mut self, rec: Record) -> Result<()> {
        self.batch.push(rec);
        if self.batch.len() == HANDOVER_BATCH {
            self.send()?;
        }
        Ok(())
    }
}

/// Every record, kept.
impl ReadBack for Vec<Record> {
    fn record(&mut self, rec: Record) -> Result<()> {
        self.push(rec);
        Ok(())
    }
}

/// Bytes read back from the log: a range of a buffer read whole (a segment, or while
/// following, up to the published end), shared by every record read from it, so that reading
/// a record back costs no allocation or copy of its own (a copy per header and per body, with
/// their frees: `malloc` and `free` were 16% of a 1M-record replay's samples).
#[derive(Clone)]
pub(crate) struct Bytes {
    buf: Arc<Vec<u8>>,
    start: usize,
    len: usize,
}

impl Bytes {
    /// Keeps the first `len` bytes.
    #[cfg(test)]
    pub(crate) fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }
}

impl From<Vec<u8>> for Bytes {
    fn from(v: Vec<u8>) -> Bytes {
        Bytes {
            start: 0,
            len: v.len(),
            buf: Arc::new(v),
        }
    }
}

impl std::ops::Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.buf[self.start..self.start + self.len]
    }
}

impl PartialEq for Bytes {
    fn eq(&self, other: &Bytes) -> bool {
        **self == **other
    }
}

impl Eq for Bytes {}

impl std::fmt::Debug for Bytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Bytes({} bytes)", self.len)
    }
}

/// Why `append` took nothing.
#[derive(Debug)]
pub(crate) enum NoRoom {
    /// The next segment still holds records newer than the last checkpoint: checkpoint first.
    Full,
    /// The record is larger than a segment can hold; such a transaction is committed by
    /// writing its pages instead.
    TooLarge,
    /// The file could not grow to hold the record (`Extent`), a full disk most likely:
    /// nothing was appended, and the log is as it was.
    Grow(Error),
}

/// The log of one database, open for appending.
pub(crate) struct Log {
    /// Where the log's bytes go: the file, its geometry, its map and its written length
    /// (`Log::write` writes through it; a group commit's leader through a clone).
    sink: Sink,
    /// Position of the next byte to append.
    end: u64,
    /// Record bytes appended by this handle: the end moves by jumps and pads too
    /// (`Pressure::appended`).
    appended: u64,
    /// `left_bytes` as last walked, and the end then: good while the end stays in that
    /// segment and nothing is released or planned (appends there take from it byte for
    /// byte; where the walk stopped at the ring's room, the figure then reads low, never
    /// below what the ring leaves), so that pacing, which asks before every write
    /// transaction, walks the ring only once a segment.
    left_at: std::cell::Cell<Option<(u64, u64)>>,
    /// Bytes from `written` to `end`, not yet handed to the storage.
    buf: Vec<u8>,
    written: u64,
    /// Position up to which the log is durable.
    synced: u64,
    /// The oldest position still needed (the last checkpoint's): a segment slot can be reused
    /// once every position it holds is older.
    keep_from: u64,
    /// A write or sync failed: what reached the disk is unknown, so nothing more is claimed
    /// durable (fail-stop, as the page file's commits).
    failed: bool,
    /// The log was read back to an end inside a segment and the file had no room for the
    /// rest of that segment (a full disk at open): the next append pads it first, as at any
    /// segment's end (`close_tail`), and fails as a full disk until the file can grow.
    tail_open: bool,
    /// Grows the file ahead of the appends (started at the first append, where there is a
    /// map), and the length last asked of it.
    grower: Option<Grower>,
    grow_asked: u64,
    /// How far the grower's priority is lowered (`Options::background_nice`).
    grower_nice: u8,
    /// Slots the log goes round before it starts again at the first (`plan`): at most
    /// `segments`. A log of the current version whose end reaches a slot past it, with the first
    /// slot free, jumps to the next cycle's first position (a pad record naming the jump), so
    /// the file's size follows what the database needs, not the geometry's largest log.
    ring: u64,
    /// The log bytes a checkpoint comes after (`plan`).
    checkpoint_bytes: u64,
    /// Jumps made since the oldest position still needed: (position jumped from, to). The
    /// positions between hold no bytes (`distance`).
    jumps: Vec<(u64, u64)>,
    /// The file's version allows jumps (version 1 logs never jump: an older build would read a
    /// jump as the end of the log).
    jumps_allowed: bool,
    /// The file's version allows marks (`KIND_MARK`; an older build would read one as the
    /// end of the log).
    marks_allowed: bool,
    /// Reading back ends at a mark of a commit newer than this (the tree the records are
    /// replayed onto, for an open; `None`: marks are handed over like commits).
    marks_after: Option<u64>,
    /// The jumps inside `buf`, for the next `Flush`.
    jump_flush: Vec<(usize, u64)>,
    /// The bytes last read while reading back (their first position, and the bytes: a whole
    /// segment, or, while following, up to the published end); emptied when reading is done.
    read_cache: std::cell::RefCell<Option<(u64, Arc<Vec<u8>>)>>,
    /// Buffers `read_cache` held before, reused for the next segment once no record read
    /// from them is left (`ReadBack` consumers that apply each record as it comes): reading
    /// back a log of hundreds of megabytes then takes two segments' memory, not the log's in
    /// fresh pages (at 10M records, the kernel's zeroing of those pages was a fifth of a
    /// crashed open, docs/design/write-path.md, session 51).
    read_spare: std::cell::RefCell<Vec<Arc<Vec<u8>>>>,
    /// Buffers `read` allocated afresh (tests).
    #[cfg(test)]
    read_fresh: std::cell::Cell<usize>,
    /// While following a writer (`follow`): the published end, past which nothing is read.
    read_limit: Option<u64>,
    /// Reading back: the last commit read (marks included), and what lies past the end
    /// where it stopped (`beyond`).
    read_txn: u64,
    past_end: Beyond,
    /// Reading back ended at a mark of a commit newer than the tree (`KIND_MARK`).
    ended_at_mark: bool,
    /// Reading back gives up what it cannot reach instead of failing (`Reopen::recover`).
    recovering: bool,
    /// The position after the last record or pad appended (not moved by `restart`): what a
    /// sync makes durable (`GroupLog::durable_end`).
    appended_end: u64,
}

/// Appended bytes taken from the log to be written: positions `[position, end)`, less the
/// positions jumped over: at each `(offset, to)` of `jumps`, the bytes from `offset` on go at
/// position `to`.
pub(crate) struct Flush {
    position: u64,
    bytes: Vec<u8>,
    end: u64,
    jumps: Vec<(usize, u64)>,
}

/// What writing a `Flush` needs: the log's own (`Log::write` borrows it), cloned out so
/// that a group commit's leader or the grower can write while other committers append.
#[derive(Clone)]
struct Sink {
    storage: Arc<dyn Storage>,
    segment_bytes: u64,
    segments: u64,
    /// The whole log file mapped for writing, where the storage offers a mapping: records are
    /// copied into the page cache through it instead of a `pwrite` each (a one-put commit's
    /// `pwrite` cost more than the rest of its commit). Stores go only below the file's
    /// written length (`extent`), whose every block was written with zeros first, so a store
    /// through the map never allocates (no SIGBUS past the end of the file or on a full disk),
    /// and a sync of the file makes what was stored durable like a written page.
    map: Option<Arc<LogMap>>,
    extent: Arc<Extent>,
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
struct Extent {
    /// The file's full length: header and every segment.
    total: u64,
    /// Bytes of the file written (zeros or records): records may be written below.
    len: std::sync::atomic::AtomicU64,
    /// Bytes the file grows by at a time: `ZERO_CHUNK_BYTES`, or a segment if smaller.
    chunk: u64,
    /// Held while the length changes: by the appender (`cover`, `shrink`) and by the grower
    /// (`grow_run`), so that neither writes zeros past what the other just claimed or cut.
    resize: Mutex<()>,
}

impl Extent {
    fn new(total: u64, len: u64, segment_bytes: u64) -> Arc<Extent> {
        Arc::new(Extent {
            total,
            chunk: ZERO_CHUNK_BYTES.min(segment_bytes),
            len: std::sync::atomic::AtomicU64::new(len.min(total)),
            resize: Mutex::new(()),
        })
    }

    fn len(&self) -> u64 {
        self.len.load(std::sync::atomic::Ordering::Acquire)
    }

    fn lock(&self) -> MutexGuard<'_, ()> {
        // The lock guards no data of its own; a panic while holding it changes nothing.
        self.resize.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Makes the file at least `end` bytes long (at most its full length), writing zeros up
    /// to the next chunk boundary. Nothing past the current length belongs to any record, so
    /// the zeros overwrite nothing; the file is shortened only by `shrink`. Called only by
    /// the log's appender (`Log::append`, `Log::close_tail`, under `&mut Log`); the grower
    /// (`Grower`) usually has the bytes written already, and the lock keeps the two apart.
    fn cover(&self, storage: &dyn Storage, map: Option<&LogMap>, end: u64) -> Result<()> {
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
    fn zero_to(&self, storage: &dyn Storage, map: Option<&LogMap>, target: u64) -> Result<()> {
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
    fn shrink(&self, storage: &dyn Storage, len: u64) {
        use std::sync::atomic::Ordering;
        let _resizing = self.lock();
        if self.len.load(Ordering::Acquire) <= len {
            return;
        }
        self.len.store(len, Ordering::Release);
        let _ = storage.set_len(len);
    }
}

/// Bytes of zeros the grower writes under one hold of the `resize` lock: an appender that
/// needs the file longer at once waits for at most this much.
const GROW_PIECE_BYTES: u64 = 64 << 10;

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
struct Grower {
    state: Arc<(Mutex<GrowState>, Condvar)>,
    thread: Option<std::thread::JoinHandle<()>>,
}

#[derive(Default)]
struct GrowState {
    /// The file length wanted (0: none; taken by the thread).
    want: u64,
    /// Counts `forget`s: a round asked for before one stops.
    epoch: u64,
    stop: bool,
}

impl Grower {
    /// Starts the thread for the log written through `sink`; `None` if it cannot start.
    fn start(sink: Sink, nice: super::Lowering) -> Option<Grower> {
        let state: Arc<(Mutex<GrowState>, Condvar)> = Arc::default();
        let theirs = state.clone();
        let thread = std::thread::Builder::new()
            .name("larch-log-grow".into())
            .spawn(move || {
                nice.apply();
                grow_run(&sink, &theirs)
            })
            .ok()?;
        Some(Grower {
            state,
            thread: Some(thread),
        })
    }

    fn lock(&self) -> MutexGuard<'_, GrowState> {
        // No code panics while holding this lock; recover the state if a panic ever did.
        self.state.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Asks for the file to be `want` bytes long (or more).
    fn ask(&self, want: u64) {
        let mut st = self.lock();
        if want > st.want {
            st.want = want;
            self.state.1.notify_one();
        }
    }

    /// Forgets what was asked (the log is about to be cut: growing it again is not wanted).
    fn forget(&self) {
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

/// The grower's thread: waits to be asked, then grows the file a piece at a time up to what
/// was asked. A failed write (a full disk) stops this round; the appender meets the error
/// itself if it needs the room.
fn grow_run(sink: &Sink, state: &(Mutex<GrowState>, Condvar)) {
    let lock = || state.0.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        let (want, epoch) = {
            let mut st = lock();
            while st.want == 0 && !st.stop {
                st = state.1.wait(st).unwrap_or_else(|e| e.into_inner());
            }
            if st.stop {
                return;
            }
            (std::mem::take(&mut st.want), st.epoch)
        };
        let extent = &sink.extent;
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
struct LogMap(memmap2::MmapRaw);

impl LogMap {
    /// Maps `len` bytes of `storage` (the log file's full length, though the file may be
    /// shorter yet: stores stay below `Extent::len`), if it can be mapped.
    fn of(storage: &dyn Storage, len: u64) -> Option<Arc<LogMap>> {
        let map = storage.map_mut(len)?.ok()?;
        (map.len() as u64 >= len).then(|| Arc::new(LogMap(map)))
    }

    /// Makes the pages of file offsets `[from, to)` present and writable in the mapping
    /// (`MADV_POPULATE_WRITE`, Linux 5.14), so that the stores that follow do not fault one
    /// page at a time. Only a hint: an older kernel refuses it and the stores fault instead.
    fn populate(&self, from: u64, to: u64) {
        #[cfg(target_os = "linux")]
        {
            let to = to.min(self.0.len() as u64);
            if from < to {
                let _ = self.0.advise_range(
                    memmap2::Advice::PopulateWrite,
                    from as usize,
                    (to - from) as usize,
                );
            }
        }
        #[cfg(not(target_os = "linux"))]
        let _ = (from, to);
    }

    /// Copies `bytes` to file offset `at`. Requires: within the mapping (checked).
    fn store(&self, bytes: &[u8], at: u64) -> Result<()> {
        let end = at.checked_add(bytes.len() as u64);
        if end.is_none_or(|e| e > self.0.len() as u64) {
            return Err(Error::Internal(format!("log store past the map at {at}")));
        }
        // SAFETY: the range is inside the mapping (checked above). Only the log's writer
        // stores into it, one flush at a time (the `GroupLog` leader, or `Log::write` under
        // the group's lock), into positions no reader of this process reads; other processes
        // read the log only through `read_at` at open, when no writer exists.
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                self.0.as_mut_ptr().add(at as usize),
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
    fn offset(&self, position: u64) -> u64 {
        file_offset(self.segment_bytes, self.segments, position)
    }

    /// Writes the flush's bytes where their positions lie, one write per segment they cover:
    /// through the map if `mapped` and there is one, else with `write_at`. Writes that are
    /// synced next go through `write_at`: a sync write-protects the pages stored through a
    /// map, and the next store to each faults (measured: durable one-put commits at 1,500/s
    /// through the map against 9,100-10,100/s with `pwrite`, larch-bench fillsync 5K and
    /// 20K).
    fn write(&self, f: &Flush, mapped: bool) -> Result<()> {
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
                Some(map) => map.store(bytes, self.offset(position))?,
                None => self.storage.write_at(bytes, self.offset(position))?,
            }
            done += n;
        }
        Ok(())
    }
}

/// The CRC-32C of a record at `position`: its position, its header from byte 4, its body.
fn record_crc(position: u64, header: &[u8], body: &[u8]) -> u32 {
    let mut crc = crc_fast::Digest::new(crc_fast::CrcAlgorithm::Crc32Iscsi);
    crc.update(&position.to_le_bytes());
    crc.update(&header[REC_CRC_AT + 4..RECORD_HEADER_BYTES]);
    crc.update(body);
    crc.finalize() as u32
}

/// `n` rounded up to the record alignment.
fn aligned(n: u64) -> u64 {
    n.div_ceil(RECORD_ALIGN as u64) * RECORD_ALIGN as u64
}

fn segment_header(base: u64) -> [u8; SEGMENT_HEADER_BYTES] {
    let mut h = [0u8; SEGMENT_HEADER_BYTES];
    h[SEG_MAGIC_AT..SEG_MAGIC_AT + 8].copy_from_slice(&SEGMENT_MAGIC);
    put_u64(&mut h, SEG_BASE_AT, base);
    let crc = crc32c(&h[..SEG_CRC_AT]);
    put_u32(&mut h, SEG_CRC_AT, crc);
    h
}

impl Log {
    /// Creates a log of `segments` segments of `segment_bytes` on an empty `storage`: its file
    /// header, written and synced, and its name synced; the file grows as records reach it
    /// (`Extent`). The first record goes at position `start`, a multiple of `segment_bytes`.
    pub(crate) fn create(
        storage: Arc<dyn Storage>,
        segment_bytes: u64,
        segments: u64,
        start: u64,
    ) -> Result<Log> {
        if segment_bytes < SEGMENT_BYTES_MIN
            || !segment_bytes.is_multiple_of(RECORD_ALIGN as u64)
            || segments < 2
            || !start.is_multiple_of(segment_bytes)
        {
            return Err(Error::InvalidOptions(format!(
                "log of {segments} segments of {segment_bytes} bytes from {start}: at least 2 \
                 segments of at least {SEGMENT_BYTES_MIN} bytes, starting at a segment"
            )));
        }
        let total = segments
            .checked_mul(segment_bytes)
            .and_then(|b| b.checked_add(FILE_HEADER_BYTES))
            .ok_or_else(|| Error::InvalidOptions("log too large".into()))?;
        let mut h = [0u8; FILE_HEADER_BYTES as usize];
        h[FILE_MAGIC_AT..FILE_MAGIC_AT + 8].copy_from_slice(&FILE_MAGIC);
        put_u32(&mut h, FILE_VERSION_AT, FILE_VERSION);
        put_u64(&mut h, FILE_SEGMENT_BYTES_AT, segment_bytes);
        put_u64(&mut h, FILE_SEGMENTS_AT, segments);
        let crc = crc32c(&h[..FILE_CRC_AT]);
        put_u32(&mut h, FILE_CRC_AT, crc);
        storage.write_at(&h, 0)?;
        storage.sync()?;
        // The file may be new: its name, too, must survive a power loss.
        storage.sync_name()?;
        Ok(Log {
            sink: Sink {
                map: LogMap::of(&*storage, total),
                extent: Extent::new(total, FILE_HEADER_BYTES, segment_bytes),
                storage,
                segment_bytes,
                segments,
            },
            grower: None,
            grow_asked: 0,
            grower_nice: 0,
            read_cache: Default::default(),
            read_spare: Default::default(),
            #[cfg(test)]
            read_fresh: Default::default(),
            left_at: Default::default(),
            read_limit: None,
            read_txn: 0,
            past_end: Beyond::default(),
            ended_at_mark: false,
            recovering: false,
            ring: segments,
            checkpoint_bytes: u64::MAX,
            jumps: Vec::new(),
            jumps_allowed: true,
            marks_allowed: true,
            marks_after: None,
            jump_flush: Vec::new(),
            end: start,
            appended_end: start,
            appended: 0,
            buf: Vec::new(),
            written: start,
            synced: start,
            keep_from: start,
            failed: false,
            tail_open: false,
        })
    }

    /// Opens the log on `storage` and reads back every record from position `from` (the last
    /// checkpoint's) to the end of the log. Appending continues after the last record; the
    /// records from `keep_from` (the last durable checkpoint's position, at most `from`) are
    /// kept until `release_to` lets them go. Reopened as after a power loss
    /// (`Reopen::restarted`), onto a tree older than any mark.
    #[cfg(test)]
    pub(crate) fn open(
        storage: Arc<dyn Storage>,
        from: u64,
        keep_from: u64,
    ) -> Result<(Log, Vec<Record>)> {
        let mut records = Vec::new();
        let reopen = Reopen {
            keep_from,
            tree_txn: 0,
            restarted: true,
            expect: Expect::default(),
            recover: false,
        };
        let (log, _) = Log::open_into(storage, from, reopen, &mut records)?;
        Ok((log, records))
    }

    /// `open`, handing each record to `into` as it is read (`ReadBack`) instead of returning
    /// them all: a replay that applies them as they come reads a log of any size in two
    /// segments' memory.
    pub(crate) fn open_into(
        storage: Arc<dyn Storage>,
        from: u64,
        reopen: Reopen,
        into: &mut dyn ReadBack,
    ) -> Result<(Log, Option<Shortfall>)> {
        if reopen.keep_from > from {
            return Err(corrupted(
                reopen.keep_from,
                format!("the durable checkpoint's position is after the newest one's, {from}"),
            ));
        }
        Log::open_inner(storage, from, reopen, into)
    }

    /// Reads the log back from `from` as its writer, and closes its tail for appending. A log
    /// that ends short of what it was known to hold (`shortfall`) fails the open with
    /// `Error::WouldLoseData` before anything is written, unless `reopen.recover` gives that
    /// up: then what lies past the end is cleared, and returned.
    fn open_inner(
        storage: Arc<dyn Storage>,
        from: u64,
        reopen: Reopen,
        into: &mut dyn ReadBack,
    ) -> Result<(Log, Option<Shortfall>)> {
        let mut log = Log::read_beside(
            storage,
            from,
            true,
            Some(reopen.tree_txn),
            reopen.recover,
            into,
        )?;
        into.done()?;
        let short = log.shortfall(from, reopen.tree_txn, reopen.expect);
        if let Some(short) = &short {
            if !reopen.recover {
                return Err(short.refusal());
            }
            log.clear_beyond()?;
        }
        log.keep_from = reopen.keep_from;
        log.close_tail(reopen.restarted)?;
        Ok((log, short))
    }

    /// The log in `storage` read back from `from` (`Log::at`, `read_back`) on a thread of its
    /// own, the records handed to `into` on this one as they come, in batches: reading,
    /// checking and parsing records (a quarter of a 10M-record crashed open) overlap
    /// replaying them. The reader runs at most `HANDOVER_DEPTH` batches ahead; what it read
    /// when `into` fails is dropped, and its own error comes after every record before the
    /// damage was handed over, as on one thread. A thread that cannot be started leaves the
    /// reading to this one.
    fn read_beside(
        storage: Arc<dyn Storage>,
        from: u64,
        mapped: bool,
        marks_after: Option<u64>,
        recovering: bool,
        into: &mut dyn ReadBack,
    ) -> Result<Log> {
        let read = |storage: Arc<dyn Storage>, into: &mut dyn ReadBack| -> Result<Log> {
            let mut log = Log::at(storage, from, mapped)?;
            log.marks_after = marks_after;
            log.recovering = recovering;
            let read = log.read_back(from, into);
            log.drop_read_buffers();
            read.map(|()| log)
        };
        std::thread::scope(|s| {
            let (to, handed) = std::sync::mpsc::sync_channel(HANDOVER_DEPTH);
            let reading = storage.clone();
            let spawned = std::thread::Builder::new()
                .name("larch-log-read".into())
                .spawn_scoped(s, move || {
                    let mut hand = Handover {
                        to,
                        batch: Vec::with_capacity(HANDOVER_BATCH),
                    };
                    let log = read(reading, &mut hand)?;
                    hand.send()?;
                    Ok(log)
                });
            let Ok(reader) = spawned else {
                return read(storage, into);
            };
            let consumed = handed.iter().try_for_each(|h| match h {
                Handed::Expect(bytes) => {
                    into.expect(bytes);
                    Ok(())
                }
                Handed::Records(batch) => batch.into_iter().try_for_each(|r| into.record(r)),
            });
            // A reader waiting to hand more over is told they are not wanted.
            drop(handed);
            let read = reader
                .join()
                .unwrap_or_else(|_| Err(Error::internal("the log's reader panicked")));
            consumed?;
            read
        })
    }

    /// The log in `storage`, its header checked, positioned at `from`, nothing read yet;
    /// mapped if `mapped` (a writer's).
    fn at(storage: Arc<dyn Storage>, from: u64, mapped: bool) -> Result<Log> {
        let mut h = [0u8; FILE_CRC_AT + 4];
        storage.read_at(&mut h, 0).map_err(|e| read_error(e, 0))?;
        if h[FILE_MAGIC_AT..FILE_MAGIC_AT + 8] != FILE_MAGIC {
            return Err(corrupted(0, "no log file header"));
        }
        if get_u32(&h, FILE_CRC_AT) != crc32c(&h[..FILE_CRC_AT]) {
            return Err(corrupted(0, "log file header checksum mismatch"));
        }
        let version = get_u32(&h, FILE_VERSION_AT);
        if !(FILE_VERSION_NO_JUMPS..=FILE_VERSION).contains(&version) {
            return Err(Error::UnsupportedVersion {
                found: version,
                supported: FILE_VERSION,
            });
        }
        let segment_bytes = get_u64(&h, FILE_SEGMENT_BYTES_AT);
        let segments = get_u64(&h, FILE_SEGMENTS_AT);
        let expected = segments
            .checked_mul(segment_bytes)
            .and_then(|b| b.checked_add(FILE_HEADER_BYTES));
        // The file grows as the log reaches it (`Extent`): any length from the header to the
        // geometry's full length.
        let len = storage.len()?;
        let total = match expected {
            Some(total)
                if segment_bytes >= SEGMENT_BYTES_MIN
                    && segment_bytes.is_multiple_of(RECORD_ALIGN as u64)
                    && segments >= 2
                    && (FILE_HEADER_BYTES..=total).contains(&len) =>
            {
                total
            }
            _ => return Err(corrupted(0, "log geometry does not match the file")),
        };
        if !from.is_multiple_of(RECORD_ALIGN as u64) {
            return Err(corrupted(
                from,
                "checkpoint position is not a record boundary",
            ));
        }
        Ok(Log {
            read_cache: Default::default(),
            read_spare: Default::default(),
            #[cfg(test)]
            read_fresh: Default::default(),
            left_at: Default::default(),
            read_limit: None,
            read_txn: 0,
            past_end: Beyond::default(),
            ended_at_mark: false,
            recovering: false,
            sink: Sink {
                map: if mapped {
                    LogMap::of(&*storage, total)
                } else {
                    None
                },
                extent: Extent::new(total, len, segment_bytes),
                storage,
                segment_bytes,
                segments,
            },
            grower: None,
            grow_asked: 0,
            grower_nice: 0,
            ring: segments,
            checkpoint_bytes: u64::MAX,
            jumps: Vec::new(),
            jumps_allowed: version > FILE_VERSION_NO_JUMPS,
            marks_allowed: version > FILE_VERSION_NO_MARKS,
            marks_after: None,
            jump_flush: Vec::new(),
            end: from,
            appended_end: from,
            appended: 0,
            buf: Vec::new(),
            written: from,
            synced: from,
            keep_from: from,
            failed: false,
            tail_open: false,
        })
    }

    /// Reads back every record from position `from` like `open`, writing nothing (for a
    /// read-only handle); returns them and the position after the last.
    #[cfg(test)]
    pub(crate) fn read_records(storage: Arc<dyn Storage>, from: u64) -> Result<(Vec<Record>, u64)> {
        let mut records = Vec::new();
        let end = Log::read_records_into(storage, from, None, None, &mut records)?;
        Ok((records, end))
    }

    /// `read_records`, handing each record to `into` as it is read; a mark of a commit newer
    /// than `marks_after` ends the log, as at a writer's open (`Reopen::tree_txn`).
    ///
    /// With `expect` (a read-only handle alone with the database: no writer is appending),
    /// a log that ends short of it fails with `Error::WouldLoseData`, as a writer's open
    /// does (`Log::shortfall`).
    pub(crate) fn read_records_into(
        storage: Arc<dyn Storage>,
        from: u64,
        marks_after: Option<u64>,
        expect: Option<Expect>,
        into: &mut dyn ReadBack,
    ) -> Result<u64> {
        let log = Log::read_beside(storage, from, false, marks_after, false, into)?;
        into.done()?;
        if let Some(expect) = expect {
            let tree_txn = marks_after.unwrap_or(0);
            if let Some(short) = log.shortfall(from, tree_txn, expect) {
                return Err(short.refusal());
            }
        }
        Ok(log.end)
    }

    /// A reader of the log in `storage` for a read-only handle that follows a writer in
    /// another process (`Log::follow`); reads nothing yet.
    pub(crate) fn follower(storage: Arc<dyn Storage>) -> Result<Log> {
        Log::at(storage, 0, false)
    }

    /// For a reader that follows a writer in another process: the commit records from
    /// position `from` (where an earlier read ended, or a checkpoint's position) to `to`, a
    /// position the writer published after writing every record before it
    /// (`LockTable::publish_log`). Reads only those bytes (not whole segments, as reading
    /// back at open does), and takes nothing on trust: a record that is not there, or not
    /// whole, is `Error::CorruptedLog`. That happens when the writer reused the log's room
    /// because a newer checkpoint made it free, which the caller checks before it reports
    /// damage (every record's checksum covers its position, so a record of a later cycle in
    /// the same place never passes for the one expected).
    pub(crate) fn follow(&mut self, from: u64, to: u64) -> Result<Vec<Record>> {
        if !from.is_multiple_of(RECORD_ALIGN as u64) {
            return Err(corrupted(from, "position is not a record boundary"));
        }
        // The file has grown since the last look, most likely.
        let len = self.sink.storage.len()?.min(self.sink.extent.total);
        self.sink
            .extent
            .len
            .store(len, std::sync::atomic::Ordering::Release);
        self.read_limit = Some(to);
        let read = self.follow_inner(from, to);
        self.read_limit = None;
        self.drop_read_buffers();
        read
    }

    fn follow_inner(&mut self, from: u64, to: u64) -> Result<Vec<Record>> {
        let mut records = Vec::new();
        let mut pos = from;
        while pos < to {
            if pos.is_multiple_of(self.sink.segment_bytes) {
                if !self.segment_valid(pos)? {
                    return Err(corrupted(pos, "published segment is not there"));
                }
                pos += SEGMENT_HEADER_BYTES as u64;
                continue;
            }
            match self.record_at(pos)? {
                Some((rec, ..)) if rec.kind == KIND_PAD => pos = self.after_pad(&rec)?,
                Some((rec, _, size)) => {
                    pos += size;
                    records.push(rec);
                }
                None if self.sink.segment_bytes - pos % self.sink.segment_bytes
                    < RECORD_HEADER_BYTES as u64 =>
                {
                    pos = self.next_segment(pos);
                }
                None => return Err(corrupted(pos, "published record is not there")),
            }
        }
        if pos != to {
            return Err(corrupted(
                pos,
                format!("records run past the published end {to}"),
            ));
        }
        Ok(records)
    }

    /// Position of the next byte to append: the end of the log.
    pub(crate) fn end(&self) -> u64 {
        self.end
    }

    /// Bytes appended since the oldest position still needed (`release_to`).
    fn kept_bytes(&self) -> u64 {
        self.distance(self.keep_from, self.end)
    }

    /// Bytes the log can keep going round its ring: all but one of its slots (the segment
    /// being appended to may start anywhere in its slot).
    fn room_bytes(&self) -> u64 {
        (self.ring - 1) * self.sink.segment_bytes
    }

    /// Log bytes from position `a` to position `b` (`a <= b`), less the positions jumped
    /// over. Only jumps after the oldest position still needed are known (`release_to`), so
    /// from an older `a` the count can only be too high.
    fn distance(&self, a: u64, b: u64) -> u64 {
        let skipped: u64 = self
            .jumps
            .iter()
            .filter(|&&(from, to)| a <= from && to <= b)
            .map(|&(from, to)| to - from)
            .sum();
        b.saturating_sub(a).saturating_sub(skipped)
    }

    /// Sizes the ring and the checkpoints for a data file of `file_bytes`, with checkpoints
    /// of at least `checkpoint_bytes_min` (docs/design/write-path.md, "The log follows the
    /// tree"): a checkpoint every `file_bytes / CHECKPOINT_FILE_FRACTION` bytes of log, so
    /// that a checkpoint brings as many records to each leaf whatever the tree's size, and
    /// room for `RING_FILE_FRACTION`'s share of the file (and for `RING_CHECKPOINTS`
    /// checkpoints), so that durable checkpoints, each a sync of everything the checkpoints
    /// before it dirtied, come as rarely per record in a large tree as in a small one, while
    /// the file of a small database's log stays small. Both are bounded by the geometry.
    pub(crate) fn plan(&mut self, file_bytes: u64, checkpoint_bytes_min: u64) {
        self.left_at.set(None);
        let all_room = (self.sink.segments - 1) * self.sink.segment_bytes;
        let checkpoint = (file_bytes / CHECKPOINT_FILE_FRACTION)
            .max(checkpoint_bytes_min)
            .min((all_room / RING_CHECKPOINTS).max(checkpoint_bytes_min));
        let room = (file_bytes / RING_FILE_FRACTION).max(RING_CHECKPOINTS * checkpoint);
        self.checkpoint_bytes = checkpoint;
        self.ring = (room.div_ceil(self.sink.segment_bytes) + 1).clamp(2, self.sink.segments);
    }

    /// Position up to which the log is durable.
    #[cfg(test)]
    pub(crate) fn synced(&self) -> u64 {
        self.synced
    }

    /// Appends a record of `kind` for commit `txn`; returns the log's end after it. Buffers
    /// only: `write` and `sync` make it reach the storage.
    pub(crate) fn append(
        &mut self,
        kind: u8,
        txn: u64,
        body: &[u8],
    ) -> std::result::Result<u64, NoRoom> {
        let size = aligned((RECORD_HEADER_BYTES + body.len()) as u64);
        // A log that may jump keeps room for a pad record at the end of every segment, where
        // a jump is named.
        let reserve = if self.jumps_allowed {
            RECORD_HEADER_BYTES as u64
        } else {
            0
        };
        let room_max = self.sink.segment_bytes - SEGMENT_HEADER_BYTES as u64 - reserve;
        if size > room_max || body.len() > u32::MAX as usize {
            return Err(NoRoom::TooLarge);
        }
        // Where the record goes: here, or at the start of the next segment.
        let mut at = self.end;
        let rest = self.sink.segment_bytes - at % self.sink.segment_bytes;
        let skip = !at.is_multiple_of(self.sink.segment_bytes)
            && (size + reserve > rest || self.tail_open);
        if skip {
            at += rest;
        }
        // Past the ring, the log starts again at the first slot, if it is free: the pad that
        // ends this segment names the jump (so a segment that ends without room for a pad
        // goes on to the next slot, and the jump waits for the next segment's end).
        let cycle = self.sink.segments * self.sink.segment_bytes;
        let jump = (skip && rest >= RECORD_HEADER_BYTES as u64 && self.jumps_allowed)
            .then(|| (at / cycle + 1) * cycle)
            .filter(|&to| (at % cycle) / self.sink.segment_bytes >= self.ring && self.reusable(to));
        let boundary = at;
        if let Some(to) = jump {
            at = to;
        }
        let new_segment = at.is_multiple_of(self.sink.segment_bytes);
        if new_segment && !self.reusable(at) {
            return Err(NoRoom::Full);
        }
        // The file must hold the record (and the pad before it) before it is appended
        // (`Extent::cover`), so that a full disk fails this commit alone instead of a later
        // write of records already committed.
        let header = if new_segment {
            SEGMENT_HEADER_BYTES as u64
        } else {
            0
        };
        let pad_end = skip.then(|| self.offset(self.end) + rest);
        let record_end = self.offset(at) + header + size;
        for end in pad_end.into_iter().chain([record_end]) {
            if let Err(e) =
                self.sink
                    .extent
                    .cover(&*self.sink.storage, self.sink.map.as_deref(), end)
            {
                return Err(NoRoom::Grow(e));
            }
        }
        self.grow_ahead(record_end);
        if skip {
            self.pad(rest, jump.unwrap_or(0));
            self.tail_open = false;
        }
        if let Some(to) = jump {
            // The slots after this one hold only positions older than the first slot's, which
            // are no longer needed: the file gives them back.
            self.shrink(self.offset(boundary - 1) + 1);
            self.jumps.push((boundary, to));
            self.jump_flush.push((self.buf.len(), to));
            self.end = to;
        }
        if new_segment {
            self.buf.extend_from_slice(&segment_header(at));
            self.end = at + SEGMENT_HEADER_BYTES as u64;
        }
        let position = self.end;
        let start = self.buf.len();
        self.buf.resize(start + RECORD_HEADER_BYTES, 0);
        self.buf.extend_from_slice(body);
        self.buf.resize(start + size as usize, 0);
        let rec = &mut self.buf[start..];
        put_u32(rec, REC_LEN_AT, body.len() as u32);
        rec[REC_KIND_AT] = kind;
        put_u64(rec, REC_TXN_AT, txn);
        put_u64(rec, REC_SYNCED_AT, self.synced);
        let crc = record_crc(position, rec, body);
        put_u32(rec, REC_CRC_AT, crc);
        self.end = position + size;
        self.appended_end = self.end;
        self.appended += size;
        Ok(self.end)
    }

    /// Asks the grower for the file to reach two chunks past `end` once less than one chunk
    /// is left past it (so each chunk is asked for once), starting it if need be.
    fn grow_ahead(&mut self, end: u64) {
        let chunk = self.sink.extent.chunk;
        if self.sink.map.is_none() || self.sink.extent.len() >= end.saturating_add(chunk) {
            return;
        }
        // Two chunks past `end`, rounded up to a chunk's end: the same for every record in
        // a chunk, so that a grower still writing the last chunk asked for is not asked
        // again (a lock and a wake) at every append.
        let want = end
            .saturating_add(2 * chunk)
            .div_ceil(chunk)
            .saturating_mul(chunk)
            .min(self.sink.extent.total);
        if want <= self.grow_asked || want <= self.sink.extent.len() {
            return;
        }
        if self.grower.is_none() {
            let nice = super::background_nice(self.grower_nice);
            self.grower = Grower::start(self.sink.clone(), nice);
        }
        if let Some(g) = &self.grower {
            g.ask(want);
            self.grow_asked = want;
        }
    }

    /// Lowers the priority of the thread that grows the file by `nice`
    /// (`Options::background_nice`), from its start.
    pub(crate) fn set_grower_nice(&mut self, nice: u8) {
        self.grower_nice = nice;
    }

    /// Stops growing the file before it is cut to `len`.
    fn shrink(&mut self, len: u64) {
        if let Some(g) = &self.grower {
            g.forget();
        }
        self.grow_asked = 0;
        self.sink.extent.shrink(&*self.sink.storage, len);
    }

    /// Fills the `rest` bytes left in the current segment: a pad record where one fits, zeros
    /// otherwise (reading back skips a remainder too small for a record header). The pad
    /// record's txn field is the position the log goes on at, if it jumps (0: the next
    /// segment).
    fn pad(&mut self, rest: u64, jump: u64) {
        let position = self.end;
        let start = self.buf.len();
        self.buf.resize(start + rest as usize, 0);
        if rest >= RECORD_HEADER_BYTES as u64 {
            let body_len = rest as usize - RECORD_HEADER_BYTES;
            let rec = &mut self.buf[start..];
            put_u32(rec, REC_LEN_AT, body_len as u32);
            rec[REC_KIND_AT] = KIND_PAD;
            put_u64(rec, REC_TXN_AT, jump);
            put_u64(rec, REC_SYNCED_AT, self.synced);
            let crc = record_crc(
                position,
                &rec[..RECORD_HEADER_BYTES],
                &rec[RECORD_HEADER_BYTES..],
            );
            put_u32(rec, REC_CRC_AT, crc);
        }
        self.end = position + rest;
        self.appended_end = self.end;
    }

    /// Whether the segment starting at `at` may be written: its slot's previous segment holds
    /// only positions older than `keep_from`.
    fn reusable(&self, at: u64) -> bool {
        let cycle = self.sink.segments * self.sink.segment_bytes;
        at < cycle || at - cycle + self.sink.segment_bytes <= self.keep_from
    }

    /// Bytes that can be appended before the log is full (`NoRoom::Full`), as `append` would
    /// place them: the rest of the segment at the end, then each segment after it whose slot
    /// is reusable, jumping to the next cycle's first slot past the ring as `append` does.
    /// Less than `room_bytes() - kept_bytes()` while the ring has just grown and the slots
    /// after the end still hold the records of the cycle before. Headers and pads are not
    /// counted: an estimate, high by at most a record header per segment.
    fn left_bytes(&self) -> u64 {
        let seg = self.sink.segment_bytes;
        if let Some((end, left)) = self.left_at.get() {
            if end / seg == self.end / seg && end <= self.end {
                return left.saturating_sub(self.end - end);
            }
        }
        let left = self.walk_left(seg);
        self.left_at.set(Some((self.end, left)));
        left
    }

    /// `left_bytes`, walked.
    fn walk_left(&self, seg: u64) -> u64 {
        let cycle = self.sink.segments * seg;
        let mut at = self.end;
        let mut left = 0;
        if !at.is_multiple_of(seg) {
            left += seg - at % seg;
            at += seg - at % seg;
        }
        // Room past the ring's is not needed: pacing looks no further.
        let enough = self.room_bytes();
        for _ in 0..self.sink.segments {
            if left >= enough {
                break;
            }
            if self.jumps_allowed && (at % cycle) / seg >= self.ring {
                let to = (at / cycle + 1) * cycle;
                if self.reusable(to) {
                    at = to;
                }
            }
            if !self.reusable(at) {
                break;
            }
            left += seg;
            at += seg;
        }
        left
    }

    /// Records before `position` are no longer needed (a checkpoint covers them): their
    /// segments may be reused.
    pub(crate) fn release_to(&mut self, position: u64) {
        self.left_at.set(None);
        debug_assert!(position <= self.end);
        self.keep_from = self.keep_from.max(position.min(self.end));
        let keep_from = self.keep_from;
        self.jumps.retain(|&(_, to)| to > keep_from);
    }

    /// When no record is kept (every one is in a durable checkpoint: `release_to` reached the
    /// end) and nothing is buffered, moves the end to the next cycle's first position, as a
    /// jump would: the next record goes in the first slot, and the file needs nothing past
    /// its header (`cut`). Returns the new end, or `None` (changing nothing) when records are
    /// kept, when the log is already at a cycle's first position with its file cut, or for a
    /// log whose version does not allow jumps (an older build would read the jump as the end
    /// of the log: it is left as it is).
    pub(crate) fn restart(&mut self) -> Option<u64> {
        self.left_at.set(None);
        if !self.idle() || self.is_cut() || !self.jumps_allowed || self.failed {
            return None;
        }
        let cycle = self.sink.segments * self.sink.segment_bytes;
        let to = (self.end / cycle + 1) * cycle;
        self.end = to;
        self.written = to;
        self.synced = self.synced.max(to);
        self.keep_from = to;
        self.tail_open = false;
        self.jumps.clear();
        Some(to)
    }

    /// Every record is in a durable checkpoint (`release_to` reached the end) and every
    /// appended byte was handed to the storage.
    fn idle(&self) -> bool {
        self.keep_from >= self.end && self.written == self.end && self.buf.is_empty()
    }

    /// The end is a cycle's first position and the file is cut to its header (`restart`, then
    /// `cut`).
    fn is_cut(&self) -> bool {
        let cycle = self.sink.segments * self.sink.segment_bytes;
        self.end.is_multiple_of(cycle) && self.sink.extent.len() <= FILE_HEADER_BYTES
    }

    /// Gives back every byte of the file after its header. Requires: the log was `restart`ed
    /// and a durable commit names its new end as the position to replay from (before that, a
    /// power loss returns to a commit that may still need the records; cutting the file early
    /// would read as the end of the log, losing nothing only because `restart` requires every
    /// record to be in a durable checkpoint).
    pub(crate) fn cut(&mut self) {
        let cycle = self.sink.segments * self.sink.segment_bytes;
        if self.end.is_multiple_of(cycle) && self.written == self.end && !self.failed {
            self.shrink(FILE_HEADER_BYTES);
        }
    }

    /// Takes the appended bytes not yet handed out, for writing.
    fn take(&mut self) -> Flush {
        let f = Flush {
            position: self.written,
            bytes: std::mem::take(&mut self.buf),
            end: self.end,
            jumps: std::mem::take(&mut self.jump_flush),
        };
        self.written = self.end;
        f
    }

    /// Hands every appended byte to the storage (not synced).
    pub(crate) fn write(&mut self) -> Result<()> {
        if self.failed {
            return Err(Error::Poisoned);
        }
        let mut f = self.take();
        let r = self.sink.write(&f, true);
        self.failed = r.is_err();
        // Keep the buffer's allocation for the next appends.
        f.bytes.clear();
        self.buf = f.bytes;
        r
    }

    /// Makes every appended record durable: `write`, then one sync of the storage.
    #[cfg(test)]
    pub(crate) fn sync(&mut self) -> Result<()> {
        self.write()?;
        if self.synced < self.written {
            if let Err(e) = self.sink.storage.sync() {
                self.failed = true;
                return Err(Error::from_io(e));
            }
            self.synced = self.written;
        }
        Ok(())
    }

    /// The file offset of `position`.
    fn offset(&self, position: u64) -> u64 {
        self.sink.offset(position)
    }

    /// Reads the bytes of segment `seg` at file offset `at` into `buf`. The file may have
    /// become shorter since this handle measured it: a read-only handle reads while the
    /// writer, in another process, cuts the file after a jump (`Extent::shrink`), and the
    /// slots it cuts hold only positions no longer needed. What is gone reads as zeros, as
    /// bytes never written do: the end of the log. A read that fails short of the file's
    /// current end is damage, as before.
    fn read_segment(&self, buf: &mut [u8], at: u64, seg: u64) -> Result<()> {
        match self.sink.storage.read_at(buf, at) {
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                let now = self.sink.storage.len()?;
                let there = now.saturating_sub(at).min(buf.len() as u64) as usize;
                if there == buf.len() {
                    return Err(read_error(e, seg));
                }
                buf.fill(0);
                if there == 0 {
                    return Ok(());
                }
                self.sink
                    .storage
                    .read_at(&mut buf[..there], at)
                    .map_err(|e| read_error(e, seg))
            }
            r => r.map_err(|e| read_error(e, seg)),
        }
    }

    /// The next segment's first position after `position`.
    fn next_segment(&self, position: u64) -> u64 {
        (position / self.sink.segment_bytes + 1) * self.sink.segment_bytes
    }

    /// A buffer of `len` bytes to read into: a spare one no record holds any more, whatever it
    /// holds, or a new one, zeroed (the flag).
    fn read_buffer(&self, len: usize) -> (Vec<u8>, bool) {
        let mut spare = self.read_spare.borrow_mut();
        let free = spare.iter().position(|b| Arc::strong_count(b) == 1);
        match free.map(|i| Arc::try_unwrap(spare.remove(i))) {
            Some(Ok(mut buf)) => {
                buf.resize(len, 0);
                (buf, false)
            }
            _ => {
                #[cfg(test)]
                self.read_fresh.set(self.read_fresh.get() + 1);
                (vec![0u8; len], true)
            }
        }
    }

    /// Empties the read cache and its spares (reading is done).
    fn drop_read_buffers(&mut self) {
        *self.read_cache.get_mut() = None;
        self.read_spare.get_mut().clear();
    }

    /// Reads `len` bytes at `position` (within one segment). Reading back goes through the
    /// segment holding `position`, read whole once (`read_cache`): the scan for later records
    /// that vouch for a bad one looks at every 8-byte boundary of a segment, one syscall each
    /// without it. Bytes past the end of the file (not reached yet) read as zeros: never
    /// written.
    fn read(&self, position: u64, len: usize) -> Result<Bytes> {
        let seg = position - position % self.sink.segment_bytes;
        let seg_end = seg + self.sink.segment_bytes;
        let mut cache = self.read_cache.borrow_mut();
        let hit = cache
            .as_ref()
            .filter(|(start, b)| {
                *start <= position && position + len as u64 <= start + b.len() as u64
            })
            .cloned();
        let (start, buf) = match hit {
            Some(cached) => cached,
            None => {
                // Reading back: the whole segment. Following a writer: from `position` to the
                // published end (or what was asked, if more), within the segment.
                let (start, end) = match self.read_limit {
                    None => (seg, seg_end),
                    Some(limit) => (position, limit.max(position + len as u64).min(seg_end)),
                };
                let len = (end - start) as usize;
                let (mut buf, zeroed) = self.read_buffer(len);
                let at = self.offset(start);
                let n = self.sink.extent.len().saturating_sub(at).min(end - start) as usize;
                if !zeroed {
                    buf[n..].fill(0);
                }
                if n > 0 {
                    self.read_segment(&mut buf[..n], at, seg)?;
                }
                let buf = Arc::new(buf);
                if let Some((_, old)) = cache.replace((start, buf.clone())) {
                    let mut spare = self.read_spare.borrow_mut();
                    if spare.len() == READ_SPARE_BUFFERS {
                        spare.remove(0);
                    }
                    spare.push(old);
                }
                (start, buf)
            }
        };
        let at = position.saturating_sub(start) as usize;
        match buf.get(at..at + len) {
            Some(_) => Ok(Bytes {
                buf,
                start: at,
                len,
            }),
            None => Err(corrupted(position, "read past the end of a segment")),
        }
    }

    /// Whether the segment starting at `position` was entered in this cycle of its slot.
    fn segment_valid(&self, position: u64) -> Result<bool> {
        Ok(segment_header_names(
            &self.read(position, SEGMENT_HEADER_BYTES)?,
            position,
        ))
    }

    /// The record at `position`, if a valid one starts there: (kind, txn, synced, body, size).
    fn record_at(&self, position: u64) -> Result<Option<(Record, u64, u64)>> {
        let room = self.sink.segment_bytes - position % self.sink.segment_bytes;
        if room < RECORD_HEADER_BYTES as u64 {
            return Ok(None);
        }
        let h = self.read(position, RECORD_HEADER_BYTES)?;
        let len = get_u32(&h, REC_LEN_AT) as u64;
        let kind = h[REC_KIND_AT];
        let size = aligned(RECORD_HEADER_BYTES as u64 + len);
        // Cheap rejections first (zeros, garbage): the body is read only for a plausible header.
        let known = matches!(kind, KIND_COMMIT | KIND_PAD)
            || (kind == KIND_MARK && self.marks_allowed && len == 0);
        if !known || h[REC_KIND_AT + 1..REC_TXN_AT].iter().any(|&b| b != 0) || size > room {
            return Ok(None);
        }
        let body = self.read(position + RECORD_HEADER_BYTES as u64, len as usize)?;
        if get_u32(&h, REC_CRC_AT) != record_crc(position, &h, &body) {
            return Ok(None);
        }
        let record = Record {
            position,
            kind,
            txn: get_u64(&h, REC_TXN_AT),
            body,
        };
        Ok(Some((record, get_u64(&h, REC_SYNCED_AT), size)))
    }

    /// Reads every record from `from` to the end of the log, handing each to `into` in order,
    /// and leaves `end` after the last. The records are handed over before the end is known:
    /// a log whose end turns out to be damage (`beyond`) is an error after them.
    fn read_back(&mut self, from: u64, into: &mut dyn ReadBack) -> Result<()> {
        into.expect(self.span_hint(from));
        let mut pos = from;
        loop {
            if pos.is_multiple_of(self.sink.segment_bytes) {
                if !self.segment_valid(pos)? {
                    break;
                }
                pos += SEGMENT_HEADER_BYTES as u64;
            }
            match self.record_at(pos)? {
                Some((rec, ..))
                    if rec.kind == KIND_MARK && self.marks_after.is_some_and(|t| rec.txn > t) =>
                {
                    // The log ends here for a tree older than the mark: no bad record, so
                    // nothing after it is asked to vouch for one. What follows is noted for
                    // what it says of released segments (`Log::shortfall`); records after a
                    // mark may have been synced with it, and are dropped by design.
                    self.past_end = self.beyond(pos)?.0;
                    self.ended_at_mark = true;
                    self.end = pos;
                    self.written = pos;
                    self.synced = pos;
                    return Ok(());
                }
                Some((rec, _, size)) => {
                    if rec.kind == KIND_PAD {
                        let next = self.after_pad(&rec)?;
                        if rec.txn != 0 {
                            self.jumps.push((self.next_segment(rec.position), next));
                        }
                        pos = next;
                    } else {
                        pos += size;
                        self.read_txn = self.read_txn.max(rec.txn);
                        into.record(rec)?;
                    }
                }
                // A remainder too small for a record: the writer went on to the next segment.
                None if self.sink.segment_bytes - pos % self.sink.segment_bytes
                    < RECORD_HEADER_BYTES as u64 =>
                {
                    pos = self.next_segment(pos);
                }
                None => break,
            }
        }
        let (beyond, near) = self.beyond(pos)?;
        self.past_end = beyond;
        if near > pos && !self.recovering {
            return Err(corrupted(
                pos,
                format!("bad record, but a later record says the log was synced to {near}"),
            ));
        }
        // Appending resumes at the end; a new segment after a partial one starts cleanly.
        self.end = pos;
        self.written = pos;
        self.synced = pos;
        Ok(())
    }

    /// About how many bytes of log reading back from `from` will cover, for sizing what the
    /// records go into: up to the end of the last segment in the run of segments entered in
    /// this cycle from `from`'s (their headers alone are read). High by less than a segment
    /// (the last one's unwritten rest); low where the writer jumped to the next cycle.
    fn span_hint(&self, from: u64) -> u64 {
        let seg = self.sink.segment_bytes;
        let first = from - from % seg;
        let mut at = first;
        let mut h = [0u8; SEGMENT_HEADER_BYTES];
        while at - first < self.sink.segments * seg {
            let valid = self.sink.storage.read_at(&mut h, self.offset(at)).is_ok()
                && segment_header_names(&h, at);
            if !valid {
                break;
            }
            at += seg;
        }
        at.saturating_sub(from)
    }

    /// After reading back: if the log ended inside a segment, zeroes the rest of that segment
    /// where the file holds it and syncs, so that no record of the lost tail, intact but never
    /// vouched for, can ever be read back as part of the log, and appending resumes at the
    /// end, in the same segment. The tail is closed in place: a reopen moves the log to no
    /// other slot and claims no space from the file system (a pad to the segment's end grew
    /// the file by a segment a restart, and on a nearly full disk took the space that freeing
    /// some had given back).
    ///
    /// If the machine may have `restarted`, the records of the lost tail may also lie in the
    /// segments after this one: a power loss keeps any subset of the unsynced writes, and
    /// their segment headers name the same positions the log is about to reach again. Read
    /// back after the records appended from now on, they would be commits that the power loss
    /// took away coming back after later ones. So every slot after the end that holds no
    /// record still needed (`reusable`) is zeroed too (`zero_past_end`). After a process
    /// crash nothing was written past the end.
    ///
    /// Syncs in any case: the records read back may be in the page cache only (a process
    /// crash), and the next record appended says the log was synced up to them.
    ///
    /// Where the zeros cannot be written (a full disk where the file's blocks were not all
    /// written yet), the tail is left to the first append (`tail_open`), which pads it as
    /// at any segment's end and fails as a full disk until the file can grow, so that a
    /// database on a full disk still opens and reads.
    fn close_tail(&mut self, restarted: bool) -> Result<()> {
        if restarted {
            self.zero_past_end()?;
        }
        let seg = self.sink.segment_bytes;
        let rest = seg - self.end % seg;
        if rest != seg {
            let from = self.offset(self.end);
            let to = (from + rest).min(self.sink.storage.len()?);
            if to > from {
                // Zeros written, not a range zeroed in place (`zero_range`): every block below
                // the file's written length stays written, so that the records stored there
                // through the map later never need the file system to convert a block
                // (`Extent`).
                match crate::storage::write_zeros(&*self.sink.storage, from, to - from)
                    .map_err(Error::from_io)
                {
                    Ok(()) => {}
                    Err(Error::DiskFull) => self.tail_open = true,
                    Err(e) => return Err(e),
                }
            }
        }
        self.sink.storage.sync()?;
        self.synced = self.written;
        Ok(())
    }

    /// Zeroes the slots after the end, in ring order, up to the first one holding records
    /// still needed (`reusable`), where the file reaches them; the end's own slot too when
    /// the end is its first position (a segment whose header was lost may still hold
    /// records).
    fn zero_past_end(&self) -> Result<()> {
        let seg = self.sink.segment_bytes;
        let len = self.sink.storage.len()?;
        let first = if self.end.is_multiple_of(seg) { 0 } else { 1 };
        for j in first..self.sink.segments {
            let at = (self.end / seg + j) * seg;
            if !self.reusable(at) {
                break;
            }
            let offset = self.offset(at);
            let n = len.saturating_sub(offset).min(seg);
            if n > 0 {
                self.sink.storage.zero_range(offset, n)?;
            }
        }
        Ok(())
    }

    /// Where the log goes on after the pad record `pad`: the next segment, or the first
    /// position of the next cycle if the pad names a jump there (any other is damage: the pad
    /// passed its checksum, so the writer wrote it).
    fn after_pad(&self, pad: &Record) -> Result<u64> {
        let next = self.next_segment(pad.position);
        if pad.txn == 0 {
            return Ok(next);
        }
        let cycle = self.sink.segments * self.sink.segment_bytes;
        let to = (pad.position / cycle + 1) * cycle;
        if !self.jumps_allowed || pad.txn != to || to == next {
            return Err(corrupted(
                pad.position,
                format!("pad record jumps to {}, not to the next cycle", pad.txn),
            ));
        }
        Ok(to)
    }

    /// What lies past `end`, where reading back stopped: every intact record after it in its
    /// own segment (looked for at every record boundary, since the record at `end` is bad and
    /// its length cannot be trusted) and in every slot of the file whose segment starts past
    /// `end`'s; and, from every slot's segment header, how far the log was released
    /// (`Beyond::released`). Also returns the highest position a record says was synced among
    /// those of this cycle (`end`'s segment and the slots after it before the ring comes
    /// round): past `end`, the bad record at `end` was durable, and is damage, not a torn
    /// tail. A log that ended cleanly costs a segment header's read per slot.
    fn beyond(&self, end: u64) -> Result<(Beyond, u64)> {
        let seg = self.sink.segment_bytes;
        let cycle = self.sink.segments * seg;
        let first = end - end % seg;
        let mut b = Beyond::default();
        let mut near = 0;
        let mut pos = aligned(end + 1);
        // Where the file holds the segment: past it, zeros (never written).
        let held = (self.sink.extent.len().saturating_sub(self.offset(first))).min(seg);
        let bytes = self.read(first, held as usize)?;
        while pos < first + held {
            // Zeros hold no record: on to the first boundary whose header could hold a byte
            // that is not zero (the rest of a segment is mostly zeros, or the file's slack).
            let at = (pos - first) as usize;
            let Some(k) = bytes[at..].iter().position(|&x| x != 0) else {
                break;
            };
            let start = (at + k).saturating_sub(RECORD_HEADER_BYTES - 1) as u64;
            pos = pos.max(first + start / RECORD_ALIGN as u64 * RECORD_ALIGN as u64);
            match self.record_at(pos)? {
                Some((rec, synced, size)) => {
                    b.note(&rec, synced, size);
                    near = near.max(synced);
                    if rec.kind == KIND_PAD {
                        break;
                    }
                    pos += size;
                }
                None => pos += RECORD_ALIGN as u64,
            }
        }
        for base in self.segment_bases()? {
            if base >= cycle {
                b.released = b.released.max(base - cycle);
            }
            if base <= first {
                continue;
            }
            let mut pos = base + SEGMENT_HEADER_BYTES as u64;
            while let Some((rec, synced, size)) = self.record_at(pos)? {
                b.note(&rec, synced, size);
                if base < first + cycle {
                    near = near.max(synced);
                }
                if rec.kind == KIND_PAD {
                    break;
                }
                pos += size;
            }
        }
        Ok((b, near))
    }

    /// Why reading back to `self.end` from the checkpoint's position `from` stopped short of
    /// what the log was known to hold (`Reopen`), if it did: a record past the end says the
    /// log was synced past it, the lock file does, a segment says a durable checkpoint newer
    /// than `from` released the log's room, or a newer meta page names a later commit.
    fn shortfall(&self, from: u64, tree_txn: u64, expect: Expect) -> Option<Shortfall> {
        let end = self.end;
        let last_txn = self.read_txn.max(tree_txn);
        let b = &self.past_end;
        let mut reasons = Vec::new();
        // Synced bytes past the end are lost bytes, unless the end is a mark: the records
        // after a mark were made on pages a power loss may take, and a sync that covered them
        // (a group commit's, gathering them) promised none of them; a commit that had to be
        // durable made the mark's pages durable first, and so the tree would not be older.
        let mark = self.ended_at_mark;
        if mark && expect.doubtful {
            reasons.push(format!(
                "the log ends at position {end} at a mark of a commit newer than the meta page \
                 opened from, and the other meta slot, which may have held that commit made \
                 durable, is damaged"
            ));
        }
        if b.vouched > end && !mark {
            reasons.push(format!(
                "the log's records end at position {end}, and a record past it says the log \
                 was synced to {}",
                b.vouched
            ));
        }
        if expect.synced_to > end && !mark {
            reasons.push(format!(
                "the log's records end at position {end}, and the lock file says the log was \
                 synced to {} (the log was cut short, or its last records are damaged)",
                expect.synced_to
            ));
        }
        if b.released > from {
            reasons.push(format!(
                "the log's segments show a durable checkpoint at or past position {}, newer \
                 than the meta page opened from (position {from}): a newer meta page was lost",
                b.released
            ));
        }
        if expect.reach_txn > last_txn {
            reasons.push(format!(
                "a newer meta page names commit {}, and the log reaches only commit {last_txn}",
                expect.reach_txn
            ));
        }
        (!reasons.is_empty()).then(|| Shortfall {
            end,
            last_txn,
            reasons,
            beyond: b.clone(),
        })
    }

    /// Every intact record in the file's segments (each slot's segment read from its header
    /// to its first bad record), for a log that no commit names: those of commits after
    /// `after_txn` are counted, and every record's claim of how far the log was synced is
    /// noted. Records of commits newer than `after_txn` at a position the log was synced past
    /// were durable: commits the database acknowledged and does not hold (`engine::open`).
    /// Reads every segment the file holds.
    pub(crate) fn survey(storage: Arc<dyn Storage>, after_txn: u64) -> Result<Beyond> {
        let log = Log::at(storage, 0, false)?;
        let mut b = Beyond::default();
        for base in log.segment_bases()? {
            let mut pos = base + SEGMENT_HEADER_BYTES as u64;
            while let Some((rec, synced, size)) = log.record_at(pos)? {
                b.vouched = b.vouched.max(synced);
                if rec.kind == KIND_PAD {
                    break;
                }
                if rec.txn > after_txn {
                    b.count(&rec, size);
                }
                pos += size;
            }
        }
        Ok(b)
    }

    /// For an open that gives up what lies past the end (`Reopen::recover`): zeroes every
    /// slot whose segment starts past the end's, so that nothing there is read back later or
    /// vouches for what was given up (the rest of the end's own segment is closed by
    /// `close_tail`), and syncs.
    fn clear_beyond(&self) -> Result<()> {
        let seg = self.sink.segment_bytes;
        let first = self.end - self.end % seg;
        let file_len = self.sink.storage.len()?;
        for base in self.segment_bases()? {
            if base > first {
                let at = self.offset(base);
                self.sink.storage.zero_range(at, seg.min(file_len - at))?;
            }
        }
        self.sink.storage.sync()?;
        Ok(())
    }

    /// The first position of each segment the file's slots hold, in slot order: every slot
    /// whose header is intact and names a position of that slot (a slot never written, or
    /// past the file's end, holds none).
    fn segment_bases(&self) -> Result<Vec<u64>> {
        let seg = self.sink.segment_bytes;
        let file_len = self.sink.extent.len();
        let mut bases = Vec::new();
        let mut h = [0u8; SEGMENT_HEADER_BYTES];
        for slot in 0..self.sink.segments {
            let at = FILE_HEADER_BYTES + slot * seg;
            if at + SEGMENT_HEADER_BYTES as u64 > file_len
                || !read_header(&*self.sink.storage, &mut h, at)?
            {
                break;
            }
            let base = get_u64(&h, SEG_BASE_AT);
            if segment_header_names(&h, base) && base.is_multiple_of(seg) && self.offset(base) == at
            {
                bases.push(base);
            }
        }
        Ok(bases)
    }
}

/// Reads the segment header at file offset `at` into `h`; `false` where the file ends before
/// it (a writer in another process may cut the file while a reader looks: what is gone holds
/// nothing).
fn read_header(storage: &dyn Storage, h: &mut [u8], at: u64) -> Result<bool> {
    match storage.read_at(h, at) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(false),
        Err(e) => Err(read_error(e, at)),
    }
}

/// The file offset of log position `position`.
fn file_offset(segment_bytes: u64, segments: u64, position: u64) -> u64 {
    let slot = (position / segment_bytes) % segments;
    FILE_HEADER_BYTES + slot * segment_bytes + position % segment_bytes
}

/// The most times a group commit's leader yields to committers about to append before it
/// syncs (`GroupLog::sync_to_gathering`).
const GATHER_YIELDS_MAX: u32 = 16;

/// How full the log is (`GroupLog::pressure`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Pressure {
    /// Record bytes appended by this handle so far.
    pub(crate) appended: u64,
    /// Bytes kept since the last durable checkpoint's position.
    pub(crate) kept: u64,
    /// Bytes the ring can keep.
    pub(crate) room: u64,
    /// Bytes that can be appended before the log is full (`Log::left_bytes`).
    pub(crate) left: u64,
    /// A segment's bytes: a record goes in once there is a segment's room left.
    pub(crate) segment: u64,
    /// The segments of the log's geometry: its ring may be smaller, but the log goes past
    /// the ring into free slots rather than fail (`Log::append`).
    pub(crate) segments: u64,
    /// The log bytes a checkpoint comes after (`Log::plan`).
    pub(crate) checkpoint: u64,
}

impl Pressure {
    /// Bytes that can be appended before the ring is full: what the log kept leaves of the
    /// ring, or less when the slots after the end still hold the records of the cycle before
    /// (just after the ring grew).
    pub(crate) fn room_left(&self) -> u64 {
        self.room.saturating_sub(self.kept).min(self.left)
    }
}

/// The log shared by committing threads, for group commit: a commit appends its record under
/// the writer's lock, lets the lock go, and waits in `sync_to_gathering` until its record is
/// durable. The
/// first waiter becomes the leader: it takes every record appended so far, writes and syncs
/// them without holding the log, and wakes the others; those whose records it covered return,
/// the rest elect the next leader, which takes what was appended meanwhile. So one sync serves
/// every commit that was waiting, and the next transaction runs while the log is flushed
/// (RocksDB's write group, without its pipelining). A failed write or sync fails every waiter
/// and every later call (`Error::Poisoned`).
pub(crate) struct GroupLog {
    state: std::sync::Mutex<GroupState>,
    flushed: std::sync::Condvar,
    /// The end of the last record (or pad) a sync made durable: what the lock file records
    /// for the next open to reach (`LockTable::set_log_synced`), read without the lock.
    durable_end: std::sync::atomic::AtomicU64,
}

struct GroupState {
    log: Log,
    /// A leader is writing and syncing.
    leading: bool,
    /// A leader took appended bytes (`Log::take`) and is writing them without the lock: the
    /// file does not hold every byte before `Log::written` yet.
    writing: bool,
    /// Syncs made for commits (`Stats::commits`, and tests).
    syncs: u64,
}

impl GroupLog {
    pub(crate) fn new(log: Log) -> GroupLog {
        // Everything read back at open was synced before the log was handed over
        // (`close_tail`); a new log's start holds nothing.
        let synced = log.synced;
        GroupLog {
            state: std::sync::Mutex::new(GroupState {
                log,
                leading: false,
                writing: false,
                syncs: 0,
            }),
            flushed: std::sync::Condvar::new(),
            durable_end: std::sync::atomic::AtomicU64::new(synced),
        }
    }

    /// The end of the last record a sync made durable: at least where the log was read back
    /// to at open.
    pub(crate) fn durable_end(&self) -> u64 {
        self.durable_end.load(std::sync::atomic::Ordering::Acquire)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, GroupState> {
        // No code panics while holding this lock; recover the state if a panic ever did.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `Log::append`, under the group's lock.
    pub(crate) fn append(
        &self,
        kind: u8,
        txn: u64,
        body: &[u8],
    ) -> std::result::Result<u64, NoRoom> {
        self.lock().log.append(kind, txn, body)
    }

    /// Returns once every record before `position` is durable, syncing them (and whatever
    /// else was appended) if no other committer is already doing so.
    pub(crate) fn sync_to(&self, position: u64) -> Result<()> {
        self.sync_to_gathering(position, &|| false)
    }

    /// `sync_to`, where a committer that becomes the leader first lets the committers that
    /// `more` says are about to append do so (yielding its core to them, for at most
    /// `GATHER_YIELDS_MAX` turns), so that its sync covers their records too: without it, on
    /// few cores, the first committer woken after a sync leads the next one alone while the
    /// others are still taking the write lock in turn.
    pub(crate) fn sync_to_gathering(&self, position: u64, more: &dyn Fn() -> bool) -> Result<()> {
        let mut st = self.lock();
        loop {
            if st.log.failed {
                return Err(Error::Poisoned);
            }
            if st.log.synced >= position {
                return Ok(());
            }
            if st.leading {
                st = self.flushed.wait(st).unwrap_or_else(|e| e.into_inner());
                continue;
            }
            st.leading = true;
            let mut turns = 0;
            while more() && turns < GATHER_YIELDS_MAX {
                drop(st);
                std::thread::yield_now();
                st = self.lock();
                turns += 1;
            }
            let flush = st.log.take();
            let appended_end = st.log.appended_end;
            let sink = st.log.sink.clone();
            st.writing = true;
            drop(st);
            let written = sink.write(&flush, false);
            // The bytes are in the file (or failed): a `write` waiting for them may go on
            // while this leader syncs.
            st = self.lock();
            st.writing = false;
            self.flushed.notify_all();
            let r = match written {
                Ok(()) => {
                    drop(st);
                    let r = sink.storage.sync().map_err(Error::from_io);
                    st = self.lock();
                    r
                }
                Err(e) => Err(e),
            };
            st.leading = false;
            match r {
                Ok(()) => {
                    st.log.synced = st.log.synced.max(flush.end);
                    st.syncs += 1;
                    self.durable_end
                        .fetch_max(appended_end, std::sync::atomic::Ordering::AcqRel);
                }
                Err(e) => {
                    st.log.failed = true;
                    self.flushed.notify_all();
                    return Err(e);
                }
            }
            self.flushed.notify_all();
        }
    }

    /// Makes every record appended so far durable (`Durability::Bounded`'s flush).
    pub(crate) fn sync_end(&self) -> Result<()> {
        self.sync_to(self.end())
    }

    /// Bytes appended and not yet durable.
    pub(crate) fn unsynced_bytes(&self) -> u64 {
        let st = self.lock();
        st.log.distance(st.log.synced, st.log.end)
    }

    /// `Log::plan`.
    pub(crate) fn plan(&self, file_bytes: u64, checkpoint_bytes_min: u64) {
        self.lock().log.plan(file_bytes, checkpoint_bytes_min)
    }

    /// Whether the log has grown since `position` (the last checkpoint's) by the bytes a
    /// checkpoint comes after (`Log::plan`).
    pub(crate) fn checkpoint_due(&self, position: u64) -> bool {
        let st = self.lock();
        st.log.distance(position, st.log.end) >= st.log.checkpoint_bytes
    }

    /// Log bytes from `position` (a checkpoint's) to the end: what a checkpoint started now
    /// covers.
    pub(crate) fn since(&self, position: u64) -> u64 {
        let st = self.lock();
        st.log.distance(position, st.log.end)
    }

    /// How full the log is, for pacing the writer (`engine::pace`): the bytes appended, kept
    /// since the last durable checkpoint and left, the ring's room and a segment's bytes.
    pub(crate) fn pressure(&self) -> Pressure {
        let st = self.lock();
        Pressure {
            appended: st.log.appended,
            kept: st.log.kept_bytes(),
            room: st.log.room_bytes(),
            left: st.log.left_bytes(),
            segment: st.log.sink.segment_bytes,
            segments: st.log.sink.segments,
            checkpoint: st.log.checkpoint_bytes,
        }
    }

    /// Whether the log's version allows marks (`KIND_MARK`).
    pub(crate) fn marks_allowed(&self) -> bool {
        self.lock().log.marks_allowed
    }

    /// Whether a write or sync of the log failed (every later commit fails).
    pub(crate) fn failed(&self) -> bool {
        self.lock().log.failed
    }

    /// Syncs made so far for commits (`sync_to`: `Immediate` commits and `Bounded`'s
    /// flushes).
    pub(crate) fn syncs(&self) -> u64 {
        self.lock().syncs
    }

    /// `Log::end`.
    pub(crate) fn end(&self) -> u64 {
        self.lock().log.end()
    }

    /// `Log::write`: hands every appended record to the storage, without a sync (a process
    /// crash then loses none of them). A leader of a sync may have taken some of them
    /// (`sync_to_gathering`) and be writing them without the lock: this waits until its
    /// write is done, so that on return every record appended so far is in the file. The
    /// caller publishes that end to readers in other processes (`LockTable::publish_log`),
    /// and a commit that is not `Immediate` returns, promising that a process crash keeps
    /// it; and this write's own bytes, stored after the leader's, never reach the file
    /// ahead of the records before them (a crash between the two would leave a hole before
    /// valid records, which reads back as damage).
    pub(crate) fn write(&self) -> Result<()> {
        let mut st = self.lock();
        while st.writing && !st.log.failed {
            st = self.flushed.wait(st).unwrap_or_else(|e| e.into_inner());
        }
        st.log.write()
    }

    /// `Log::release_to`.
    pub(crate) fn release_to(&self, position: u64) {
        self.lock().log.release_to(position)
    }

    /// The log file's length.
    pub(crate) fn file_bytes(&self) -> Result<u64> {
        Ok(self.lock().log.sink.storage.len()?)
    }

    /// `Log::restart`, unless a leader is writing.
    pub(crate) fn restart(&self) -> Option<u64> {
        let mut st = self.lock();
        if st.leading {
            return None;
        }
        st.log.restart()
    }

    /// `Log::cut`, unless a leader is writing.
    pub(crate) fn cut(&self) {
        let mut st = self.lock();
        if !st.leading {
            st.log.cut();
        }
    }

    /// Whether the log holds nothing: every record is in a durable checkpoint, and the file
    /// is cut to its header (`restart` and `cut` after a durable commit naming the new end).
    pub(crate) fn holds_nothing(&self) -> bool {
        let st = self.lock();
        !st.leading && !st.log.failed && st.log.idle() && st.log.is_cut()
    }
}

/// Whether `h`, a segment header's bytes, is intact and starts the segment at `position`
/// (not one of an earlier cycle of its slot).
fn segment_header_names(h: &[u8], position: u64) -> bool {
    h[SEG_MAGIC_AT..SEG_MAGIC_AT + 8] == SEGMENT_MAGIC
        && get_u64(h, SEG_BASE_AT) == position
        && get_u32(h, SEG_CRC_AT) == crc32c(&h[..SEG_CRC_AT])
}

fn corrupted(position: u64, reason: impl Into<String>) -> Error {
    Error::CorruptedLog {
        position,
        reason: reason.into(),
    }
}

fn read_error(e: std::io::Error, position: u64) -> Error {
    if e.kind() == std::io::ErrorKind::UnexpectedEof {
        corrupted(position, "log shorter than its geometry")
    } else {
        Error::from_io(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::{CrashMode, FaultKind, FaultStorage};
    use rand::{Rng, SeedableRng};

    const SEG: u64 = SEGMENT_BYTES_MIN;

    fn body(i: u64, len: usize) -> Vec<u8> {
        (0..len).map(|j| (i as usize * 31 + j) as u8).collect()
    }

    fn storage() -> (FaultStorage, Arc<dyn Storage>) {
        let s = FaultStorage::new();
        let a: Arc<dyn Storage> = Arc::new(s.clone());
        (s, a)
    }

    fn reopen(contents: Vec<u8>, from: u64) -> Result<(Log, Vec<Record>)> {
        let s = FaultStorage::new();
        s.set_contents(contents);
        Log::open(Arc::new(s), from, from)
    }

    /// Reopens a copy of `s` from `from` and checks that it reads back the records of `all`
    /// from there on.
    fn assert_reads_back(s: &FaultStorage, all: &[Record], from: u64, round: usize) {
        let (_, back) = reopen(s.contents(), from).unwrap();
        let expected: Vec<Record> = all.iter().filter(|r| r.position >= from).cloned().collect();
        assert_eq!(back, expected, "round {round}, from {from}");
    }

    /// Appends `n` commit records of random sizes; returns them as they must read back.
    fn append_some(log: &mut Log, rng: &mut impl Rng, txn: &mut u64, n: usize) -> Vec<Record> {
        let mut out = Vec::new();
        for _ in 0..n {
            *txn += 1;
            let len = if rng.gen_bool(0.1) {
                rng.gen_range(2000..20_000)
            } else {
                rng.gen_range(0..300)
            };
            let b = body(*txn, len);
            let before = log.end();
            let end = log.append(KIND_COMMIT, *txn, &b).expect("room");
            let size = aligned((RECORD_HEADER_BYTES + len) as u64);
            out.push(Record {
                position: end - size,
                kind: KIND_COMMIT,
                txn: *txn,
                body: b.into(),
            });
            assert!(end - size >= before);
        }
        out
    }

    /// Records come back in order from any checkpoint position, across segment boundaries and
    /// wrap-arounds of the file, and appending goes on after a reopen.
    #[test]
    fn records_come_back_in_order_across_segments_and_wraps() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        let (s, a) = storage();
        let mut log = Log::create(a, SEG, 3, 0).unwrap();
        let mut txn = 0;
        let mut all: Vec<Record> = Vec::new();
        let mut checkpoint = 0u64;
        for round in 0..60 {
            all.extend(append_some(&mut log, &mut rng, &mut txn, 25));
            log.sync().unwrap();
            assert_reads_back(&s, &all, checkpoint, round);
            // A checkpoint covers everything but the last few records.
            checkpoint = all[all.len().saturating_sub(5)].position;
            log.release_to(checkpoint);
        }
        assert!(
            log.end() > 4 * 3 * SEG,
            "the log wrapped around several times"
        );
        // Reopened, the log appends after its end and reads back the old and the new.
        let (mut log, back) = reopen(s.contents(), checkpoint).unwrap();
        assert_eq!(back.len(), 5);
        let more = append_some(&mut log, &mut rng, &mut txn, 3);
        log.sync().unwrap();
        assert!(more[0].position > back.last().unwrap().position);
    }

    /// Reading back hands each record over as it is read: a consumer that lets go of them
    /// gets every record, in order, from two segment buffers reused (`read_spare`), where one
    /// that keeps them all takes a buffer per segment; the bytes announced first cover the
    /// records, by less than a segment more.
    #[test]
    fn records_handed_over_as_read_reuse_the_segment_buffers() {
        struct Each {
            seen: Vec<Record>,
            expected: u64,
        }
        impl ReadBack for Each {
            fn expect(&mut self, bytes: u64) {
                self.expected = bytes;
            }
            fn record(&mut self, rec: Record) -> Result<()> {
                // A copy: the segment buffer is let go.
                self.seen.push(Record {
                    body: rec.body.to_vec().into(),
                    ..rec
                });
                Ok(())
            }
        }
        let mut rng = rand::rngs::StdRng::seed_from_u64(9);
        let (s, a) = storage();
        let mut log = Log::create(a, SEG, 32, 0).unwrap();
        let mut txn = 0;
        let all = append_some(&mut log, &mut rng, &mut txn, 600);
        log.sync().unwrap();
        let segments = log.end().div_ceil(SEG) as usize;
        assert!(segments >= 8, "{segments} segments");
        let from = all[10].position;
        let read = |into: &mut dyn ReadBack| {
            let c = FaultStorage::new();
            c.set_contents(s.contents());
            let mut log = Log::at(Arc::new(c), from, false).unwrap();
            log.read_back(from, into).unwrap();
            (log.read_fresh.get(), log.end())
        };
        let mut each = Each {
            seen: Vec::new(),
            expected: 0,
        };
        let (fresh, end) = read(&mut each);
        assert_eq!(each.seen, all[10..]);
        assert!(fresh <= READ_SPARE_BUFFERS + 1, "{fresh} buffers");
        assert!(
            each.expected >= end - from && each.expected < end - from + SEG,
            "{} expected, {} read",
            each.expected,
            end - from
        );
        let mut kept = Vec::new();
        let (fresh, _) = read(&mut kept);
        assert_eq!(kept, all[10..]);
        assert!(
            fresh >= segments - 1,
            "{fresh} buffers for {segments} segments"
        );
    }

    /// Reading back runs on a thread of its own (`Log::read_beside`): a consumer that fails
    /// stops it, its own error is the one returned, and an open whose consumer fails, while
    /// records come or once all are read (`ReadBack::done`), closes no tail: nothing is
    /// written to the log.
    #[test]
    fn a_consumer_that_fails_stops_the_reading_and_the_open_writes_nothing() {
        struct FailAt {
            seen: usize,
            at: Option<usize>,
        }
        impl ReadBack for FailAt {
            fn record(&mut self, _rec: Record) -> Result<()> {
                if Some(self.seen) == self.at {
                    return Err(Error::internal("consumer failed"));
                }
                self.seen += 1;
                Ok(())
            }
            fn done(&mut self) -> Result<()> {
                match self.at {
                    None => Err(Error::internal("consumer failed at the end")),
                    Some(_) => Ok(()),
                }
            }
        }
        let (s, a) = storage();
        let mut log = Log::create(a, SEG, 64, 0).unwrap();
        // More records than the reader may run ahead by, over several segments, the last
        // one partly written (an open closes it).
        let mut all = Vec::new();
        for txn in 1..=(3 * HANDOVER_BATCH * HANDOVER_DEPTH) as u64 {
            let b = body(txn, txn as usize % 90);
            let end = log.append(KIND_COMMIT, txn, &b).unwrap();
            all.push(Record {
                position: end - aligned((RECORD_HEADER_BYTES + b.len()) as u64),
                kind: KIND_COMMIT,
                txn,
                body: b.into(),
            });
        }
        assert!(log.end() > 8 * SEG, "{} bytes", log.end());
        log.sync().unwrap();
        assert!(
            !log.end().is_multiple_of(SEG),
            "the tail is inside a segment"
        );
        let contents = s.contents();
        let open = |at: Option<usize>| {
            let c = FaultStorage::new();
            c.set_contents(contents.clone());
            let mut fail = FailAt { seen: 0, at };
            let reopen = Reopen {
                keep_from: 0,
                tree_txn: 0,
                restarted: true,
                expect: Expect::default(),
                recover: false,
            };
            let opened = Log::open_into(Arc::new(c.clone()), 0, reopen, &mut fail).map(|_| ());
            (opened, fail.seen, c.contents() == contents)
        };
        for at in [0, 1, HANDOVER_BATCH, all.len() / 2, all.len() - 1] {
            let (opened, seen, unchanged) = open(Some(at));
            match opened {
                Err(Error::Internal(m)) if m.contains("consumer failed") => {}
                other => panic!("failing at record {at}: {other:?}"),
            }
            assert_eq!(seen, at);
            assert!(
                unchanged,
                "failing at record {at}, the open wrote to the log"
            );
        }
        let (opened, seen, unchanged) = open(None);
        assert!(
            matches!(&opened, Err(Error::Internal(m)) if m.contains("at the end")),
            "{opened:?}"
        );
        assert_eq!(seen, all.len());
        assert!(unchanged, "failing at the end, the open wrote to the log");
        // The same open with a consumer that takes everything closes the tail.
        let c = FaultStorage::new();
        c.set_contents(contents.clone());
        let (log, back) = Log::open(Arc::new(c.clone()), 0, 0).unwrap();
        assert_eq!(back, all);
        // Closed in place: the records stay as they were, and the rest of their segment is
        // zeros.
        let end = log.offset(log.end()) as usize;
        let after = c.contents();
        assert_eq!(after[..end], contents[..end]);
        assert!(after[end..end + 4096].iter().all(|&b| b == 0));
    }

    /// A follower reads exactly the records between two published ends, across segments and
    /// wraps, reading the file as it grows; a record that is no longer there (the room reused
    /// by a later cycle) or damaged is an error, never skipped or read as another.
    #[test]
    fn a_follower_reads_the_records_between_published_ends() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(5);
        let (s, a) = storage();
        let mut log = Log::create(a.clone(), SEG, 4, 0).unwrap();
        let mut follower = Log::follower(a.clone()).unwrap();
        let (mut txn, mut from) = (0, 0);
        for round in 0..40 {
            let n = rng.gen_range(1..20);
            let batch = append_some(&mut log, &mut rng, &mut txn, n);
            log.write().unwrap();
            let to = log.end();
            let got = follower.follow(from, to).unwrap();
            assert_eq!(got, batch, "round {round}");
            from = to;
            log.release_to(batch[0].position);
        }
        assert!(log.end() > 4 * SEG, "the log wrapped around");
        assert!(follower.follow(from, from).unwrap().is_empty());
        // An end past what was written: the records are not there.
        assert!(matches!(
            follower.follow(from, from + 4096),
            Err(Error::CorruptedLog { .. })
        ));
        // A flipped byte in the last batch's first record.
        let batch = append_some(&mut log, &mut rng, &mut txn, 3);
        log.write().unwrap();
        let at = file_offset(SEG, 4, batch[0].position) as usize + RECORD_HEADER_BYTES;
        let mut c = s.contents();
        c[at] ^= 1;
        s.set_contents(c);
        let mut fresh = Log::follower(a).unwrap();
        assert!(matches!(
            fresh.follow(from, log.end()),
            Err(Error::CorruptedLog { .. })
        ));
    }

    /// A log whose ring is smaller than its geometry (`plan`) starts again at its first slot
    /// when that is free, naming the jump in the pad that ends the segment: the file stays
    /// at the ring's size (and shrinks back after the ring was larger), records read back in
    /// order across jumps, the kept bytes leave out the positions jumped over, and damage
    /// that records after a jump vouch for is corruption.
    #[test]
    fn the_log_jumps_back_to_its_first_slot_and_the_file_follows_the_ring() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        let (s, a) = storage();
        let segments = 8;
        let cycle = segments * SEG;
        let mut log = Log::create(a, SEG, segments, 0).unwrap();
        log.plan(0, SEG / 2);
        assert_eq!((log.ring, log.checkpoint_bytes), (3, SEG / 2));
        let slots_in_file =
            |s: &FaultStorage| (s.contents().len() as u64 - FILE_HEADER_BYTES).div_ceil(SEG);
        let mut txn = 0;
        let mut all: Vec<Record> = Vec::new();
        let mut checkpoint = 0u64;
        let mut largest = 0;
        for round in 0..120 {
            // Rounds 40-59: the database is large, and the ring is the whole geometry.
            let file_bytes = if (40..60).contains(&round) {
                u64::MAX / 64
            } else {
                0
            };
            log.plan(file_bytes, SEG / 2);
            all.extend(append_some(&mut log, &mut rng, &mut txn, 10));
            log.sync().unwrap();
            assert_reads_back(&s, &all, checkpoint, round);
            assert!(log.kept_bytes() <= log.end() - checkpoint);
            assert!(log.kept_bytes() < segments * SEG, "round {round}");
            checkpoint = all[all.len().saturating_sub(3)].position;
            log.release_to(checkpoint);
            largest = largest.max(slots_in_file(&s));
            if round == 39 {
                assert!(
                    largest <= 4,
                    "a ring of 3 slots used {largest} slots of the file"
                );
            }
        }
        assert!(
            log.end() > 4 * cycle,
            "the log jumped several times: {}",
            log.end()
        );
        assert!(largest > 4, "the large ring used more slots: {largest}");
        assert!(
            slots_in_file(&s) <= 4,
            "the file shrank back: {}",
            slots_in_file(&s)
        );

        // A damaged record before a jump, with a record after the jump that says it was
        // synced: corruption, not the end of the log.
        let jumped = all
            .windows(2)
            .rposition(|w| w[1].position / cycle > w[0].position / cycle)
            .expect("a jump between two records");
        let before = &all[jumped];
        assert!(
            before.position % cycle < (segments - 1) * SEG,
            "the last cycle change is a jump, not the log going round all its slots"
        );
        let mut bad = s.contents();
        bad[log.offset(before.position + 9) as usize] ^= 1;
        let from = all[jumped.saturating_sub(2)].position;
        match reopen(bad, from) {
            Err(Error::CorruptedLog { position, .. }) => assert_eq!(position, before.position),
            other => panic!("damage before a jump: {:?}", other.map(|(_, b)| b.len())),
        }
    }

    /// `left_bytes`, which paces the writer, is what can be appended before the log is full:
    /// filling the log with 1 KB records after each estimate appends that much, less at most
    /// a record and a segment header per segment, through rings that grow and shrink and
    /// checkpoints released at random points (the ring's room less the bytes kept, the first
    /// estimate, is wrong both ways here: this test fails on it).
    #[test]
    fn left_bytes_is_what_can_be_appended_before_the_log_is_full() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(5);
        let (_s, a) = storage();
        let segments = 8;
        let mut log = Log::create(a, SEG, segments, 0).unwrap();
        let b = body(1, 1000);
        let size = aligned((RECORD_HEADER_BYTES + b.len()) as u64);
        let slack = segments * (size + SEGMENT_HEADER_BYTES as u64 + RECORD_HEADER_BYTES as u64);
        let mut txn = 0;
        let mut positions = Vec::new();
        for round in 0..60 {
            let file_bytes = if rng.gen_bool(0.3) { u64::MAX / 64 } else { 0 };
            log.plan(file_bytes, SEG / 2);
            let left = log.left_bytes();
            let capped = left >= log.room_bytes();
            let mut appended = 0;
            loop {
                txn += 1;
                match log.append(KIND_COMMIT, txn, &b) {
                    Ok(end) => {
                        appended += size;
                        positions.push(end);
                        // The cached figure is the walked one, or, where the walk stopped at
                        // the ring's room, never less than what the ring leaves.
                        let (cached, walked) = (log.left_bytes(), log.walk_left(SEG));
                        assert!(
                            cached == walked
                                || (walked >= log.room_bytes()
                                    && cached + log.kept_bytes() >= log.room_bytes()),
                            "round {round}: {cached} cached, {walked} walked"
                        );
                    }
                    Err(NoRoom::Full) => break,
                    Err(e) => panic!("round {round}: {e:?}"),
                }
                if capped && appended > left {
                    break;
                }
            }
            assert!(
                appended + slack >= left,
                "round {round}: {left} said left, {appended} appended"
            );
            if !capped {
                assert!(
                    appended <= left + size,
                    "round {round}: {left} said left, {appended} appended"
                );
            }
            log.write().unwrap();
            // A checkpoint covers a random share of what is kept.
            assert_eq!(log.left_bytes(), log.walk_left(SEG));
            let keep = positions.len() - rng.gen_range(1..=positions.len().min(200));
            log.release_to(positions[keep]);
            assert_eq!(log.left_bytes(), log.walk_left(SEG));
            positions.drain(..keep);
        }
    }

    /// On a real file (with a map), the grower writes the file ahead of the records, so that
    /// appends find their pages written; every record still reads back, the bytes ahead read
    /// as the end of the log, and the file shrinks back when the log jumps.
    #[test]
    fn a_log_on_a_file_grows_ahead_of_its_records() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let file = crate::storage::FileStorage::open(&path, false, true).unwrap();
        let a: Arc<dyn Storage> = Arc::new(file);
        let segments = 40;
        let mut log = Log::create(a.clone(), SEG, segments, 0).unwrap();
        assert!(log.sink.map.is_some(), "a file offers a map");
        log.plan(0, SEG);
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let (mut txn, mut all) = (0, Vec::new());
        let mut ahead = false;
        for round in 0..60 {
            all.extend(append_some(&mut log, &mut rng, &mut txn, 10));
            log.write().unwrap();
            let need = log.offset(log.end());
            assert!(
                log.sink.extent.len() >= need,
                "round {round}: records past the extent"
            );
            // The grower runs on its own thread: give it a moment to get ahead.
            for _ in 0..200 {
                if log.sink.extent.len()
                    >= need + log.sink.extent.chunk.min(log.sink.extent.total - need)
                {
                    ahead = true;
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            // Bytes are written before the length that claims them is published.
            let extent = log.sink.extent.len();
            assert!(
                a.len().unwrap() >= extent,
                "round {round}: file shorter than its extent"
            );
        }
        assert!(ahead, "the grower wrote the file ahead of the records");
        assert!(log.grower.is_some());
        log.sync().unwrap();
        let back = Log::read_records(a.clone(), 0).unwrap();
        assert_eq!(
            back.0, all,
            "every record reads back; the zeros ahead are the end"
        );
        // Everything is checkpointed: the log restarts and the file is cut to its header,
        // whatever the grower was asked for before.
        log.release_to(log.end());
        assert!(log.restart().is_some());
        log.cut();
        drop(log);
        assert_eq!(
            a.len().unwrap(),
            FILE_HEADER_BYTES,
            "the grower did not grow it again"
        );
    }

    /// The `Storage` methods a test wrapper around a `FaultStorage` (`self.inner`) does not
    /// change: sync, length and boot id go to the inner storage.
    macro_rules! storage_rest_to_inner {
        () => {
            fn sync(&self) -> std::io::Result<()> {
                self.inner.sync()
            }
            fn len(&self) -> std::io::Result<u64> {
                self.inner.len()
            }
            fn set_len(&self, len: u64) -> std::io::Result<()> {
                self.inner.set_len(len)
            }
            fn boot_id(&self) -> Option<[u8; 16]> {
                self.inner.boot_id()
            }
        };
    }

    /// A storage that cuts its file to `cut_to` just before the first read at or past
    /// `cut_to`, as a writer in another process cuts the log after a jump while a read-only
    /// handle reads it back.
    struct CutWhileReading {
        inner: FaultStorage,
        cut_to: u64,
        cut: std::sync::atomic::AtomicBool,
    }

    impl Storage for CutWhileReading {
        fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
            if offset >= self.cut_to && !self.cut.swap(true, std::sync::atomic::Ordering::SeqCst) {
                self.inner.set_len(self.cut_to)?;
            }
            self.inner.read_at(buf, offset)
        }
        fn write_at(&self, buf: &[u8], offset: u64) -> std::io::Result<()> {
            self.inner.write_at(buf, offset)
        }
        storage_rest_to_inner!();
    }

    /// A read-only handle reading the log back while the file is cut under it reads what was
    /// cut as the end of the log, not as damage (mutation-checked: without `read_segment`'s
    /// second look at the file's length it is `CorruptedLog`), as it reads a file that was
    /// that short when it opened it.
    #[test]
    fn a_log_cut_while_it_is_read_back_ends_where_it_was_cut() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(13);
        let (s, a) = storage();
        let mut log = Log::create(a, SEG, 4, 0).unwrap();
        let mut txn = 0;
        let mut all = Vec::new();
        while log.end() < 2 * SEG + SEG / 2 {
            all.extend(append_some(&mut log, &mut rng, &mut txn, 10));
        }
        log.sync().unwrap();
        drop(log);
        let cut_to = FILE_HEADER_BYTES + SEG;
        let inner = FaultStorage::new();
        inner.set_contents(s.contents());
        let cutting = CutWhileReading {
            inner,
            cut_to,
            cut: Default::default(),
        };
        let back = Log::read_records(Arc::new(cutting), 0).unwrap();
        let first: Vec<Record> = all.iter().filter(|r| r.position < SEG).cloned().collect();
        assert!(!first.is_empty() && first.len() < all.len());
        assert_eq!(back.0, first, "the records before the cut, then the end");
        // Cut before the handle measured it, the file is short of nothing it expects.
        let mut short = s.contents();
        short.truncate(cut_to as usize);
        assert_eq!(reopen(short, 0).unwrap().1, first);
    }

    /// A log of the version before jumps never jumps (an older build would read a jump as
    /// the end of the log), and still reads back.
    #[test]
    fn a_version_1_log_goes_round_all_its_slots() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(12);
        let (s, a) = storage();
        let segments = 6;
        drop(Log::create(a, SEG, segments, 0).unwrap());
        let mut header = s.contents();
        put_u32(&mut header, FILE_VERSION_AT, FILE_VERSION_NO_JUMPS);
        let crc = crc32c(&header[..FILE_CRC_AT]);
        put_u32(&mut header, FILE_CRC_AT, crc);
        s.set_contents(header);
        let (mut log, back) = Log::open(Arc::new(s.clone()), 0, 0).unwrap();
        assert!(back.is_empty() && !log.jumps_allowed);
        log.plan(0, SEG / 2);
        let mut txn = 0;
        let mut all = Vec::new();
        for _ in 0..40 {
            all.extend(append_some(&mut log, &mut rng, &mut txn, 10));
            log.sync().unwrap();
            let checkpoint = all[all.len() - 3].position;
            log.release_to(checkpoint);
        }
        assert!(log.end() > segments * SEG, "went round");
        assert!(log.jumps.is_empty());
        assert!(all.windows(2).all(|w| w[1].position - w[0].position < SEG));
        assert_eq!(
            s.contents().len() as u64,
            FILE_HEADER_BYTES + segments * SEG
        );
    }

    /// The file grows with the log, a chunk at a time, instead of being written whole when
    /// the log is created; whatever length it has past the last record, from the header on,
    /// reads back the same records; a full disk while growing fails the write.
    #[test]
    fn the_file_grows_as_the_log_reaches_it() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let (s, a) = storage();
        let mut log = Log::create(a, SEG, 8, 0).unwrap();
        let total = FILE_HEADER_BYTES + 8 * SEG;
        assert_eq!(s.contents().len() as u64, FILE_HEADER_BYTES);
        assert_eq!(s.durable_contents().len() as u64, FILE_HEADER_BYTES);
        let (_, back) = reopen(s.contents(), 0).unwrap();
        assert!(back.is_empty(), "a new log reads back empty");
        let mut txn = 0;
        let mut all = Vec::new();
        let mut lens = Vec::new();
        while log.end() < 5 * SEG {
            all.extend(append_some(&mut log, &mut rng, &mut txn, 3));
            log.sync().unwrap();
            let len = s.contents().len() as u64;
            let end = FILE_HEADER_BYTES + log.end();
            assert!(
                len >= end && len < end + SEG,
                "file {len} bytes for a log ending at byte {end}"
            );
            assert_eq!(len % SEG, 0, "grown a chunk at a time");
            lens.push(len);
        }
        assert!(lens.windows(2).all(|w| w[0] <= w[1]) && lens[0] < lens[lens.len() - 1]);
        assert!(*lens.last().unwrap() < total);
        // Cut anywhere past the last record: the same records.
        let full = s.contents();
        let records_end = (FILE_HEADER_BYTES + log.end()) as usize;
        for cut in (records_end..=full.len()).step_by(4096).chain([full.len()]) {
            let (_, back) = reopen(full[..cut].to_vec(), 0).unwrap();
            assert_eq!(back, all, "cut at {cut}");
        }
        // Reopened, appending grows the file on from where it was.
        let s2 = FaultStorage::new();
        s2.set_contents(full);
        let (mut log, _) = Log::open(Arc::new(s2.clone()), 0, 0).unwrap();
        let grown_from = s2.contents().len() as u64;
        while log.end() < 7 * SEG {
            all.extend(append_some(&mut log, &mut rng, &mut txn, 3));
        }
        log.sync().unwrap();
        let len = s2.contents().len() as u64;
        assert!(
            len > grown_from && len.is_multiple_of(SEG) && len < total,
            "{len}"
        );
        let (_, back) = reopen(s2.durable_contents(), 0).unwrap();
        assert_eq!(back, all, "after growing on from a reopen");
        // A full disk while growing: the append that needs the room is refused with nothing
        // appended, and the log goes on once there is room.
        let (s, a) = storage();
        let mut log = Log::create(a, SEG, 8, 0).unwrap();
        s.set_space_limit(Some(FILE_HEADER_BYTES + 2 * SEG));
        let mut kept = Vec::new();
        let refused = loop {
            txn += 1;
            let end = log.end();
            match log.append(KIND_COMMIT, txn, &body(txn, 500)) {
                Ok(_) => kept.push(txn),
                Err(NoRoom::Grow(e)) => {
                    assert_eq!(log.end(), end, "nothing appended");
                    break e;
                }
                Err(e) => panic!("{e:?}"),
            }
        };
        assert!(matches!(refused, Error::DiskFull), "{refused:?}");
        log.sync().unwrap();
        s.set_space_limit(None);
        log.append(KIND_COMMIT, txn, &body(txn, 500)).unwrap();
        kept.push(txn);
        log.sync().unwrap();
        let (_, back) = reopen(s.durable_contents(), 0).unwrap();
        assert_eq!(back.iter().map(|r| r.txn).collect::<Vec<_>>(), kept);
    }

    /// A log read back to an end inside a segment, on a disk with no room for the rest of
    /// that segment: it opens claiming no space (a database on a full disk still opens and
    /// reads), appends go on at the end within the file's length, one that needs the file to
    /// grow is refused as a full disk with nothing appended and nothing kept of the space it
    /// tried, and once there is room the log goes on where it was, in the same segment.
    #[test]
    fn a_tail_on_a_full_disk_opens_in_place_and_goes_on_once_there_is_room() {
        const BIG: u64 = 4 << 20;
        let (s, a) = storage();
        let mut log = Log::create(a, BIG, 4, 0).unwrap();
        let mut txn = 0;
        let mut all = Vec::new();
        while log.end() < BIG / 3 {
            txn += 1;
            let body = body(txn, 3000);
            let position = log.end();
            log.append(KIND_COMMIT, txn, &body).unwrap();
            all.push(txn);
            assert!(position < BIG);
        }
        log.sync().unwrap();
        let contents = s.durable_contents();
        assert!(
            (contents.len() as u64) < FILE_HEADER_BYTES + BIG,
            "the segment is not all there"
        );
        let full = FaultStorage::new();
        full.set_contents(contents.clone());
        full.set_space_limit(Some(contents.len() as u64));
        let (mut log, back) = Log::open(Arc::new(full.clone()), 0, 0).unwrap();
        assert_eq!(back.iter().map(|r| r.txn).collect::<Vec<_>>(), all);
        assert_eq!(
            full.len().unwrap(),
            contents.len() as u64,
            "the open claimed no space"
        );
        let reopened_at = log.end();
        assert!(
            !reopened_at.is_multiple_of(BIG),
            "the tail stays inside the segment"
        );
        let refused_at = loop {
            txn += 1;
            let end = log.end();
            match log.append(KIND_COMMIT, txn, &body(txn, 3000)) {
                Ok(_) => all.push(txn),
                Err(NoRoom::Grow(Error::DiskFull)) => break end,
                Err(other) => panic!("expected a full disk, got {other:?}"),
            }
        };
        assert_eq!(log.end(), refused_at, "nothing appended");
        assert_eq!(
            full.len().unwrap(),
            contents.len() as u64,
            "nothing kept of the space tried"
        );
        full.set_space_limit(None);
        log.append(KIND_COMMIT, txn, &body(txn, 3000)).unwrap();
        all.push(txn);
        log.sync().unwrap();
        let (_, back) = reopen(full.durable_contents(), 0).unwrap();
        assert_eq!(back.iter().map(|r| r.txn).collect::<Vec<_>>(), all);
        let first_after = back.iter().find(|r| r.position >= reopened_at).unwrap();
        assert_eq!(
            first_after.position, reopened_at,
            "the first record after the reopen goes where the log ended"
        );
    }

    #[test]
    fn a_full_log_and_a_record_larger_than_a_segment_are_refused() {
        let (_, a) = storage();
        let mut log = Log::create(a, SEG, 2, 0).unwrap();
        assert!(matches!(
            log.append(KIND_COMMIT, 1, &vec![0u8; SEG as usize]),
            Err(NoRoom::TooLarge)
        ));
        let mut txn = 0;
        let mut refused = false;
        for _ in 0..1000 {
            txn += 1;
            match log.append(KIND_COMMIT, txn, &[7u8; 1000]) {
                Ok(_) => {}
                Err(NoRoom::Full) => {
                    refused = true;
                    break;
                }
                Err(e) => panic!("{e:?}"),
            }
        }
        assert!(refused, "two segments hold fewer than 1000 records of 1 KB");
        assert!(log.end() <= 2 * SEG);
        // Once a checkpoint covers the first segment, its slot is reused.
        log.release_to(SEG);
        assert!(log.append(KIND_COMMIT, txn, &[7u8; 1000]).is_ok());
    }

    /// A crash while unsynced records were being written, torn at every 512-byte boundary:
    /// the log reads back the synced records and the complete unsynced ones before the tear,
    /// never an error, and a reopened log appends after them.
    #[test]
    fn a_torn_tail_is_the_end_of_the_log_at_every_sector() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(2);
        let (s, a) = storage();
        let mut log = Log::create(a, SEG, 8, 0).unwrap();
        let mut txn = 0;
        // Start near the end of a segment, so the tail crosses into the next one.
        let mut synced = append_some(&mut log, &mut rng, &mut txn, 50);
        while log.end() % SEG < SEG - 3000 {
            synced.extend(append_some(&mut log, &mut rng, &mut txn, 1));
        }
        log.sync().unwrap();
        let before = s.contents();
        let tail_from = log.end();
        let tail = append_some(&mut log, &mut rng, &mut txn, 12);
        log.write().unwrap();
        let after = s.contents();
        let (lo, hi) = (log.offset(tail_from), log.offset(log.end()));
        let mut cut = lo - lo % 512;
        let mut cases = 0;
        while cut <= hi.max(lo) + 512 {
            let mut torn = before.clone();
            // The unsynced bytes reached the disk up to `cut` (in file order; the tail may
            // wrap into a lower slot, which then stays as it was).
            for off in lo..cut.min(after.len() as u64) {
                torn[off as usize] = after[off as usize];
            }
            let (_, back) = reopen(torn, 0).unwrap_or_else(|e| panic!("cut {cut}: {e}"));
            let complete = tail
                .iter()
                .take_while(|r| {
                    let end = r.position + aligned((RECORD_HEADER_BYTES + r.body.len()) as u64);
                    let (a, b) = (log.offset(r.position), log.offset(end - 1));
                    a >= lo && b < cut
                })
                .count();
            let expected: Vec<Record> = synced.iter().chain(&tail[..complete]).cloned().collect();
            assert_eq!(back, expected, "cut at {cut}");
            cases += 1;
            cut += 512;
        }
        assert!(cases > 8);
    }

    /// Unsynced writes that reach the disk in any order, any subset, the last one torn
    /// (`CrashMode::KeepRandom`): the synced records always come back, then a prefix of the
    /// unsynced ones, never an error.
    #[test]
    fn a_power_loss_keeps_the_synced_records_whatever_reached_the_disk() {
        for seed in 0..40u64 {
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            let (s, a) = storage();
            let mut log = Log::create(a, SEG, 8, 0).unwrap();
            let mut txn = 0;
            let mut synced: Vec<Record> = Vec::new();
            let mut unsynced: Vec<Record> = Vec::new();
            let rounds = rng.gen_range(1..6);
            for _ in 0..rounds {
                let n = rng.gen_range(1..30);
                unsynced.extend(append_some(&mut log, &mut rng, &mut txn, n));
                if rng.gen_bool(0.7) {
                    log.sync().unwrap();
                    synced.append(&mut unsynced);
                } else {
                    log.write().unwrap();
                }
            }
            let crashed = s.crash(CrashMode::KeepRandom { seed });
            let (mut log, back) = Log::open(Arc::new(crashed.clone()), 0, 0)
                .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
            assert!(
                back.len() >= synced.len(),
                "seed {seed}: synced records lost"
            );
            assert_eq!(&back[..synced.len()], &synced[..], "seed {seed}");
            assert_eq!(
                &back[synced.len()..],
                &unsynced[..back.len() - synced.len()]
            );
            // Appending after the recovered end: what reads back is the recovered log and the
            // new records, never a record of the lost tail that happened to reach the disk.
            // The commits go on from the last one recovered, as an open numbers them.
            txn = back.last().map_or(0, |r| r.txn);
            let more = append_some(&mut log, &mut rng, &mut txn, 4);
            log.sync().unwrap();
            let (_, again) = Log::open(Arc::new(crashed), 0, 0).unwrap();
            let expected: Vec<Record> = back.iter().chain(&more).cloned().collect();
            assert_eq!(again, expected, "seed {seed}: after appending");
        }
    }

    /// A crash kept two unsynced records but not the one before them. The recovered log ends
    /// before the missing one; a record appended after recovery, even one that lands exactly
    /// where the missing one was, never brings the two back.
    #[test]
    fn records_of_a_lost_tail_are_never_read_back_after_new_appends() {
        let (s, a) = storage();
        let mut log = Log::create(a, SEG, 4, 0).unwrap();
        for txn in 1..=3 {
            log.append(KIND_COMMIT, txn, &[txn as u8; 100]).unwrap();
        }
        log.sync().unwrap();
        let synced = s.contents();
        let b1 = log.end();
        for txn in 4..=6 {
            log.append(KIND_COMMIT, txn, &[txn as u8; 100]).unwrap();
        }
        log.write().unwrap();
        let all = s.contents();
        // B2 and B3 reached the disk, B1 did not.
        let size = aligned((RECORD_HEADER_BYTES + 100) as u64);
        let mut crashed = synced.clone();
        let (from, to) = (
            log.offset(b1 + size) as usize,
            log.offset(b1 + 3 * size) as usize,
        );
        crashed[from..to].copy_from_slice(&all[from..to]);
        let c = FaultStorage::new();
        c.set_contents(crashed);
        let (mut log, back) = Log::open(Arc::new(c.clone()), 0, 0).unwrap();
        assert_eq!(back.iter().map(|r| r.txn).collect::<Vec<_>>(), [1, 2, 3]);
        log.append(KIND_COMMIT, 4, &[9u8; 100]).unwrap();
        log.sync().unwrap();
        let (_, again) = Log::open(Arc::new(c), 0, 0).unwrap();
        let txns: Vec<(u64, u8)> = again.iter().map(|r| (r.txn, r.body[0])).collect();
        assert_eq!(txns, [(1, 1), (2, 2), (3, 3), (4, 9)]);
    }

    /// A lost tail that runs into the next segment, whose later pages reached the disk (a
    /// power loss keeps any subset of the unsynced writes): the segment's header names the
    /// position the log reaches again after the reopen, so its stale records, intact, would
    /// read back after the pad that closes the tail, and after the records appended from
    /// there. They never do: neither at the next open, nor after new appends (of the same
    /// size, so that the new records end where stale ones begin). The same when the tail is
    /// a segment's first position, its header lost and the rest of the segment kept.
    #[test]
    fn stale_records_after_a_lost_tail_are_never_read_back() {
        for header_lost in [false, true] {
            let (s, a) = storage();
            let mut log = Log::create(a, SEG, 4, 0).unwrap();
            let mut txn = 0;
            let mut append = |log: &mut Log| {
                txn += 1;
                (
                    txn,
                    log.append(KIND_COMMIT, txn, &[txn as u8; 100]).unwrap(),
                )
            };
            // Synced halfway through the first segment, then written into the second.
            let mut synced_txn = 0;
            while log.end() < SEG / 2 {
                synced_txn = append(&mut log).0;
            }
            log.sync().unwrap();
            let synced = s.contents();
            let mut in_first = synced_txn;
            while log.end() < SEG + SEG / 2 {
                let (t, end) = append(&mut log);
                if end <= SEG {
                    in_first = t;
                }
            }
            log.write().unwrap();
            let all = s.contents();
            // What the power loss kept of the unsynced writes: the second segment, and with
            // `header_lost` the whole first segment but not the second's first page.
            let mut crashed = synced;
            crashed.resize(all.len(), 0);
            let mut keep = |from: u64, to: u64| {
                let (from, to) = (from as usize, (to as usize).min(all.len()));
                crashed[from..to].copy_from_slice(&all[from..to]);
            };
            let (first, second) = (log.offset(0), log.offset(SEG));
            let n = if header_lost {
                keep(first, first + SEG);
                keep(second + 4096, second + SEG);
                in_first
            } else {
                keep(second, second + SEG);
                synced_txn
            };
            let c = FaultStorage::new();
            c.set_contents(crashed);
            let open = |c: &FaultStorage| {
                let (log, back) = Log::open(Arc::new(c.clone()), 0, 0).unwrap();
                (log, back.iter().map(|r| r.txn).collect::<Vec<_>>())
            };
            let what = format!("header lost: {header_lost}");
            let (_, back) = open(&c);
            assert_eq!(back, (1..=n).collect::<Vec<_>>(), "{what}");
            // Opened again before anything is appended, then after 40 appends (past the
            // second segment's first page).
            let (mut log, again) = open(&c);
            assert_eq!(again, (1..=n).collect::<Vec<_>>(), "{what}");
            for t in n + 1..=n + 40 {
                log.append(KIND_COMMIT, t, &[0xEE; 100]).unwrap();
            }
            log.sync().unwrap();
            let (_, again) = open(&c);
            assert_eq!(again, (1..=n + 40).collect::<Vec<_>>(), "{what}");
        }
    }

    /// A mark (`KIND_MARK`) ends the log for a tree older than its commit, wherever the
    /// records after it were synced to (no damage is called for: a sync that covered them
    /// promised none of them), and the tail closed there takes the next appends; a tree at or
    /// after the mark reads it (handed over, for the replay to skip) and the records after it.
    /// Only beside a damaged meta slot, which may have held the mark's commit made durable, is
    /// the open refused (and a recovering one gives the records after the mark up).
    #[test]
    fn a_mark_ends_the_log_for_an_older_tree_only() {
        let (s, a) = storage();
        let mut log = Log::create(a, SEG, 4, 0).unwrap();
        for txn in 1..=10 {
            log.append(KIND_COMMIT, txn, &body(txn, 100)).unwrap();
        }
        log.append(KIND_MARK, 11, &[]).unwrap();
        for txn in 12..=700 {
            log.append(KIND_COMMIT, txn, &body(txn, 100)).unwrap();
            if txn == 20 {
                // Synced past the mark: the records after vouch for it.
                log.sync().unwrap();
            }
        }
        log.write().unwrap();
        assert!(
            log.end() > SEG,
            "the records after the mark reach the next segment"
        );
        let contents = s.contents();
        let open = |tree_txn: u64| {
            let c = FaultStorage::new();
            c.set_contents(contents.clone());
            let mut back = Vec::new();
            let reopen = Reopen {
                keep_from: 0,
                tree_txn,
                restarted: true,
                expect: Expect::default(),
                recover: false,
            };
            let (log, short) = Log::open_into(Arc::new(c.clone()), 0, reopen, &mut back).unwrap();
            assert!(short.is_none());
            (c, log, back)
        };
        // Beside a damaged meta slot, a tree older than the mark is refused, and a recovering
        // open gives up what follows the mark.
        let c = FaultStorage::new();
        c.set_contents(contents.clone());
        let doubtful = Expect {
            doubtful: true,
            ..Expect::default()
        };
        let reopen = |recover| Reopen {
            keep_from: 0,
            tree_txn: 5,
            restarted: true,
            expect: doubtful,
            recover,
        };
        let refused = Log::open_into(Arc::new(c.clone()), 0, reopen(false), &mut Vec::new());
        assert!(matches!(refused, Err(Error::WouldLoseData { .. })));
        assert!(c.contents() == contents, "a refused open writes nothing");
        let short = Log::open_into(Arc::new(c), 0, reopen(true), &mut Vec::new())
            .unwrap()
            .1;
        assert_eq!(short.expect("given up").beyond.txns, Some((12, 700)));
        // A tree older than the mark: the log ends at it.
        let (c, mut log, back) = open(5);
        assert_eq!(
            back.iter().map(|r| r.txn).collect::<Vec<_>>(),
            (1..=10).collect::<Vec<_>>()
        );
        // The tail closed in place: appending goes on at the mark's position, in its segment.
        assert!(log.end() < SEG);
        log.append(KIND_COMMIT, 11, &body(11, 50)).unwrap();
        log.sync().unwrap();
        let (_, again) = Log::open(Arc::new(c), 0, 0).unwrap();
        assert_eq!(
            again.iter().map(|r| r.txn).collect::<Vec<_>>(),
            (1..=11).collect::<Vec<_>>()
        );
        // The mark's own tree, or a newer one: the records after the mark are read.
        for tree_txn in [11, 12] {
            let (_, _, back) = open(tree_txn);
            let kinds: Vec<(u64, u8)> = back.iter().map(|r| (r.txn, r.kind)).collect();
            assert_eq!(kinds.len(), 700, "tree {tree_txn}");
            assert_eq!(kinds[10], (11, KIND_MARK), "tree {tree_txn}");
            assert!(back[10].body.is_empty());
        }
    }

    /// A bit flipped in a synced record that a later record vouches for is `CorruptedLog` at
    /// that record, never a shorter log; in the last group synced, with nothing after it, it
    /// reads as the end of the log (the one case the format cannot tell apart).
    #[test]
    fn a_bit_flip_in_a_synced_record_is_corruption() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let (s, a) = storage();
        let mut log = Log::create(a, SEG, 3, 0).unwrap();
        let mut txn = 0;
        let early = append_some(&mut log, &mut rng, &mut txn, 40);
        log.sync().unwrap();
        let last = append_some(&mut log, &mut rng, &mut txn, 1);
        log.sync().unwrap();
        let good = s.contents();
        for r in &early {
            let size = aligned((RECORD_HEADER_BYTES + r.body.len()) as u64);
            for _ in 0..3 {
                let at = log.offset(r.position + rng.gen_range(0..size));
                let bit = rng.gen_range(0..8);
                let mut bad = good.clone();
                bad[at as usize] ^= 1 << bit;
                match reopen(bad, 0) {
                    Err(Error::CorruptedLog { position, .. }) => {
                        assert_eq!(position, r.position)
                    }
                    Ok((_, back))
                        if at
                            >= log.offset(r.position)
                                + RECORD_HEADER_BYTES as u64
                                + r.body.len() as u64 =>
                    {
                        // The flip hit the record's padding, which nothing covers.
                        assert_eq!(back.len(), 41);
                    }
                    other => panic!("flip at {at}: {:?}", other.map(|(_, b)| b.len())),
                }
            }
        }
        let r = &last[0];
        let mut bad = good.clone();
        bad[log.offset(r.position + 20) as usize] ^= 4;
        let (_, back) = reopen(bad, 0).unwrap();
        assert_eq!(back, early, "the last synced group reads as the end");
    }

    #[test]
    fn io_errors_on_write_and_sync_are_reported() {
        for (kind, nth) in [
            (FaultKind::Eio, 1),
            (FaultKind::Enospc, 1),
            (FaultKind::Eio, 2),
        ] {
            let (s, a) = storage();
            let mut log = Log::create(a, SEG, 2, 0).unwrap();
            log.append(KIND_COMMIT, 1, b"one").unwrap();
            s.fail_after(nth, kind, false);
            let e = log.sync().unwrap_err();
            match kind {
                FaultKind::Eio => assert!(matches!(e, Error::Io { .. }), "{e}"),
                FaultKind::Enospc => assert!(matches!(e, Error::DiskFull), "{e}"),
            }
            assert_eq!(
                log.synced(),
                0,
                "nothing is claimed durable after a failure"
            );
        }
    }

    /// Eight threads commit durably at once: every commit returns only once its record is
    /// synced, fewer syncs than commits are made, and every record reads back in order.
    #[test]
    fn committers_share_syncs_and_none_returns_before_its_record_is_durable() {
        const THREADS: u64 = 8;
        const EACH: u64 = 150;
        let (s, a) = storage();
        let log = Log::create(a, SEG, 64, 0).unwrap();
        // A sync that takes time, as a device's does: committers arrive while it runs (an
        // in-memory sync is so quick that on a loaded 2-core machine the threads sometimes
        // never overlapped, and every commit synced alone: 1200 syncs for 1200 commits).
        s.set_sync_delay(Some(std::time::Duration::from_micros(300)));
        let group = Arc::new(GroupLog::new(log));
        let writer = Arc::new(std::sync::Mutex::new(0u64));
        let threads: Vec<_> = (0..THREADS)
            .map(|t| {
                let (group, writer, s) = (group.clone(), writer.clone(), s.clone());
                std::thread::spawn(move || {
                    for i in 0..EACH {
                        // The writer's lock covers the append only, as in a commit.
                        let (txn, end) = {
                            let mut last = writer.lock().unwrap();
                            *last += 1;
                            let body = [t as u8, i as u8].repeat(20);
                            (*last, group.append(KIND_COMMIT, *last, &body).unwrap())
                        };
                        group.sync_to(end).unwrap();
                        // Durable: a power loss now keeps it.
                        let (_, back) = reopen_durable(&s);
                        assert!(
                            back.iter().any(|r| r.txn == txn),
                            "commit {txn} not durable"
                        );
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let commits = THREADS * EACH;
        let syncs = group.syncs();
        assert!(syncs < commits, "{syncs} syncs for {commits} commits");
        let (_, back) = reopen(s.contents(), 0).unwrap();
        let txns: Vec<u64> = back.iter().map(|r| r.txn).collect();
        assert_eq!(txns, (1..=commits).collect::<Vec<_>>());
    }

    /// A storage whose writes before file offset `below` wait while `held` is set (after
    /// saying so in `waiting`), as a group commit leader's write stalls on a busy device.
    struct HeldWrites {
        inner: FaultStorage,
        below: std::sync::atomic::AtomicU64,
        held: std::sync::atomic::AtomicBool,
        waiting: std::sync::atomic::AtomicBool,
    }

    impl Storage for HeldWrites {
        fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
            self.inner.read_at(buf, offset)
        }
        fn write_at(&self, buf: &[u8], offset: u64) -> std::io::Result<()> {
            use std::sync::atomic::Ordering::SeqCst;
            while offset < self.below.load(SeqCst) && self.held.load(SeqCst) {
                self.waiting.store(true, SeqCst);
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            self.inner.write_at(buf, offset)
        }
        storage_rest_to_inner!();
    }

    /// A sync's leader takes the records appended so far and writes them without the lock;
    /// a `write` meanwhile (a commit that is not `Immediate`, about to publish its end to
    /// readers in other processes and return) waits until they are in the file, and writes
    /// its own record after them. Mutation-checked: without the wait in `GroupLog::write`,
    /// `write` returned with the first record not in the file (`follow_log`'s reader beside
    /// a `Bounded` flusher met it as "published record is not there").
    #[test]
    fn a_write_returns_only_once_a_leaders_records_before_it_are_in_the_file() {
        use std::sync::atomic::Ordering::SeqCst;
        let s = FaultStorage::new();
        let held = Arc::new(HeldWrites {
            inner: s.clone(),
            below: 0.into(),
            held: true.into(),
            waiting: false.into(),
        });
        let log = Log::create(held.clone(), SEG, 4, 0).unwrap();
        let group = Arc::new(GroupLog::new(log));
        let first = group.append(KIND_COMMIT, 1, &[1; 100]).unwrap();
        // Writes of the bytes before the second record wait.
        held.below.store(file_offset(SEG, 4, first), SeqCst);
        let leader = {
            let group = group.clone();
            std::thread::spawn(move || group.sync_to(first).unwrap())
        };
        while !held.waiting.load(SeqCst) {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        // The leader holds record 1, unwritten. Record 2 is appended and written.
        let second = group.append(KIND_COMMIT, 2, &[2; 100]).unwrap();
        let writer = {
            let group = group.clone();
            std::thread::spawn(move || group.write().unwrap())
        };
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(
            !writer.is_finished(),
            "write returned before the leader's records were in the file"
        );
        held.held.store(false, SeqCst);
        writer.join().unwrap();
        // What the file holds now, as a reader in another process (or a reopen after a
        // process crash) sees it: both records.
        let (_, back) = reopen(s.contents(), 0).unwrap();
        assert_eq!(back.iter().map(|r| r.txn).collect::<Vec<_>>(), [1, 2]);
        assert!(back[1].position < second);
        leader.join().unwrap();
    }

    /// What a power loss would keep of `s` now: its synced contents.
    fn reopen_durable(s: &FaultStorage) -> (Log, Vec<Record>) {
        reopen(s.durable_contents(), 0).unwrap()
    }

    #[test]
    fn a_failed_group_sync_fails_the_waiters_and_every_later_commit() {
        let (s, a) = storage();
        let group = GroupLog::new(Log::create(a, SEG, 4, 0).unwrap());
        let end = group.append(KIND_COMMIT, 1, b"one").unwrap();
        s.fail_after(2, FaultKind::Eio, false);
        assert!(matches!(group.sync_to(end), Err(Error::Io { .. })));
        let end = group.append(KIND_COMMIT, 2, b"two").unwrap();
        assert!(matches!(group.sync_to(end), Err(Error::Poisoned)));
    }

    #[test]
    fn a_damaged_or_foreign_log_file_is_refused() {
        let (s, a) = storage();
        Log::create(a, SEG, 2, 0).unwrap();
        let good = s.contents();
        let mut bad = good.clone();
        bad[20] ^= 1;
        assert!(matches!(reopen(bad, 0), Err(Error::CorruptedLog { .. })));
        let mut short = good.clone();
        short.truncate(FILE_HEADER_BYTES as usize - 8);
        assert!(matches!(reopen(short, 0), Err(Error::CorruptedLog { .. })));
        let mut long = good.clone();
        long.resize((FILE_HEADER_BYTES + 2 * SEG + 4096) as usize, 0);
        assert!(matches!(reopen(long, 0), Err(Error::CorruptedLog { .. })));
        assert!(matches!(
            reopen(vec![0u8; 8192], 0),
            Err(Error::CorruptedLog { .. })
        ));
        let (_, a) = storage();
        assert!(matches!(
            Log::create(a, 1000, 2, 0),
            Err(Error::InvalidOptions(_))
        ));
    }
}
