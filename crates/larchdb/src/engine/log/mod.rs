//! The write-ahead log: records appended in order to a file of equal segments used as a ring,
//! synced on demand (group commit), read back from the last checkpoint's position by an open
//! and by a follower. Its bytes are specified in docs/design/file-format.md ("Log file"); the
//! constants are `layout::log`.
//!
//! Appending only buffers; `write` hands the buffered bytes to the storage and `sync` makes them
//! durable. Every record carries the position up to which the log was synced when it was
//! appended, so that reading back can tell a tail that was never synced (a torn or missing
//! record followed only by records that do not vouch for it: the end of the log) from damage
//! (a bad record that a later record says was synced before it: `Error::CorruptedLog`). One
//! case cannot be told apart: damage inside the last group synced, with nothing appended after
//! that sync. It reads as the end of the log.
//!
//! ```text
//! mod.rs       Log (the state), Record, LogSource; checksums and header encodings
//! append.rs    appending, padding to a segment's end, write and sync
//! ring.rs      positions in the ring of segments, room left, release, restart
//! file.rs      the file: its extent, the mapping, a flush's writes, the grower thread
//! group.rs     GroupLog: the log shared by committers, group syncs, pressure
//! open.rs      opening: where the records end, the tail closed in place
//! read.rs      reading back on a thread of its own (ReadBack), a follower's reads
//! evidence.rs  what an open would lose: records and segments past the end, the watermark
//! tests.rs     unit tests
//! ```

use crate::bytes::{get_u32, get_u64, put_u32, put_u64};
use crate::error::{Error, Result};
use crate::layout::log::*;
use crate::pager::shift::crc32c;
use crate::storage::{FileLock, FileStorage, Storage};
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

mod append;
mod evidence;
mod file;
mod group;
mod open;
mod read;
mod ring;

pub(crate) use self::append::{pack, PACK_BYTES_MIN};
pub(crate) use self::evidence::{Beyond, Expect, Shortfall};
pub(crate) use self::file::Spawn;
pub(crate) use self::group::{AppendFailed, GroupLog, Pressure};
pub(crate) use self::open::Reopen;
pub(crate) use self::read::{ReadBack, RunCheck};
pub(crate) use self::ring::{overlay_bytes, RESERVE_CHECKPOINTS};
use self::{append::*, file::*, read::*};

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

/// Smallest segment: a few records' worth.
pub(crate) const SEGMENT_BYTES_MIN: u64 = 64 << 10;

/// A record read back from the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Record {
    /// Where it starts.
    pub(crate) position: u64,
    pub(crate) kind: u8,
    pub(crate) txn: u64,
    pub(crate) body: Bytes,
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
    /// What starts the grower's thread (the handle's background owner, `set_background`; none:
    /// the appender grows the file itself), and how far its priority is lowered
    /// (`Options::background_nice`).
    background: Option<Arc<dyn Spawn>>,
    grower_nice: u8,
    /// Slots the log goes round before it starts again at the first (`plan`): at most
    /// `segments`. A log of the current version whose end reaches a slot past it, with the first
    /// slot free, jumps to the next cycle's first position (a pad record naming the jump), so
    /// the file's size follows what the database needs, not the geometry's largest log.
    ring: u64,
    /// The log bytes a checkpoint comes after (`plan`).
    checkpoint_bytes: u64,
    /// The bytes of large values' runs a durable checkpoint comes after (`plan`).
    runs_interval_bytes: u64,
    /// The least room `plan` gives the ring (`Options::log_room_bytes`; 0: what the
    /// checkpoints call for).
    room_min: u64,
    /// Jumps made since the oldest position still needed: (position jumped from, to). The
    /// positions between hold no bytes (`distance`).
    jumps: Vec<(u64, u64)>,
    /// The file's version allows jumps (version 1 logs never jump: an older build would read a
    /// jump as the end of the log).
    jumps_allowed: bool,
    /// The file's version allows marks (`KIND_MARK`; an older build would read one as the
    /// end of the log).
    marks_allowed: bool,
    /// The file's version allows packed commits (`KIND_PACKED`; an older build would read one
    /// as the end of the log).
    packed_allowed: bool,
    /// The file's version allows commit records that name runs (`OP_PUT_RUN`; an older build
    /// would read one as damage).
    pub(crate) runs_allowed: bool,
    /// Asked of each commit record read back (`read::RunCheck`).
    pub(crate) run_check: Option<read::RunCheck>,
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
    /// crashed open).
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
    /// Reading back ended at a commit record whose runs do not check out (`run_check`).
    ended_at_run: bool,
    /// Reading back gives up what it cannot reach instead of failing (`Reopen::recover`).
    recovering: bool,
    /// The end the last writer handed the file over at (`Reopen::handed_at`): reading back
    /// that stops there looks for nothing past it.
    handed_at: Option<u64>,
    /// The position after the last record or pad appended (not moved by `restart`): what a
    /// sync makes durable (`GroupLog::durable_end`).
    appended_end: u64,
}

/// The CRC-32C of a record at `position`: its position, its header from byte 4, its body.
fn record_crc(position: u64, header: &[u8], body: &[u8]) -> u32 {
    crate::pager::shift::crc32c_parts(&[
        &position.to_le_bytes(),
        &header[REC_CRC_AT + 4..RECORD_HEADER_BYTES],
        body,
    ])
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

impl Log {
    /// A log of file `version` written through `sink`, whose records end at `end` (a new log's
    /// start, or the position reading back starts from): nothing buffered, read or asked of the
    /// grower yet, the whole ring in use until `plan` sizes it.
    fn with_sink(sink: Sink, end: u64, version: u32) -> Log {
        let segments = sink.segments;
        Log {
            sink,
            grower: None,
            grow_asked: 0,
            background: None,
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
            ended_at_run: false,
            recovering: false,
            handed_at: None,
            ring: segments,
            checkpoint_bytes: u64::MAX,
            runs_interval_bytes: u64::MAX,
            room_min: 0,
            jumps: Vec::new(),
            jumps_allowed: version > FILE_VERSION_NO_JUMPS,
            marks_allowed: version > FILE_VERSION_NO_MARKS,
            packed_allowed: version > FILE_VERSION_NO_PACKED,
            runs_allowed: version > FILE_VERSION_NO_RUNS,
            run_check: None,
            marks_after: None,
            jump_flush: Vec::new(),
            end,
            appended_end: end,
            appended: 0,
            buf: Vec::new(),
            written: end,
            synced: end,
            keep_from: end,
            failed: false,
            tail_open: false,
        }
    }
}

#[cfg(test)]
mod tests;
