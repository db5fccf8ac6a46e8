//! Opening: the database file and its lock file, the meta slot to start from, and the free set
//! that commit records, checked as it is loaded. The chosen meta slot is a complete committed
//! state (docs/design/durability.md); if it says commits after it are in the log
//! (`Options::log`), the log's records from its position are replayed into the overlay.

use super::upper::batch;
use super::catalog::{self, CatalogCache, TableStates};
use super::commit;
use super::log::{Expect, GroupLog, Log, ReadBack, Record, Reopen, Shortfall};
use super::upper::overlay::{Lookup, Overlay, Visible, COUNTS};
use super::readers::{newest_protected, Published, ReadState};
use super::recovery::{GivenUp, Recovery};
use super::{Disk, Shared, WriterState};
use crate::btree;
use crate::error::{Error, Result};
use crate::layout::log::{KIND_COMMIT, KIND_MARK};
use crate::options::Options;
use crate::pager::{
    choose_meta, create, newer_pages, Access, Carry, Chosen, Doubt, FreeSet, Meta, Snapshot,
    TableHeader, WriteMap,
};
use crate::storage::{FileLock, FileStorage, LockTable, Storage};
use std::collections::hash_map::{Entry, HashMap};
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

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

/// Opens the database file at `path` and, beside it, its lock file, as `options` ask: a
/// writing handle locks the database exclusively; a read-only handle claims a slot of the lock
/// file's reader table, or, where the lock file cannot be opened for writing (a read-only
/// directory), takes a shared lock on the database, which excludes writers.
pub(crate) fn open_file(
    path: &Path,
    options: &Options,
) -> Result<(Arc<dyn Storage>, Option<LockTable>)> {
    options.validate()?;
    let (storage, lock) = if options.read_only {
        // The database first, so that a missing one creates no lock file.
        let storage = FileStorage::open_with(path, true, false, FileLock::None)?;
        match LockTable::open(path) {
            Ok(lock) => {
                lock.claim_slot()?;
                (storage, Some(lock))
            }
            Err(e) if cannot_write(&e) => {
                drop(storage);
                (FileStorage::open(path, true, false)?, None)
            }
            Err(e) => return Err(e),
        }
    } else {
        let storage = FileStorage::open(path, false, options.create)?;
        (storage, Some(LockTable::open(path)?))
    };
    Ok((Arc::new(storage), lock))
}

/// Whether an error means the lock file cannot be created or written here (a read-only
/// directory or file system, a full disk), so a read-only handle falls back to the v1 shared
/// lock.
fn cannot_write(e: &Error) -> bool {
    match e {
        Error::DiskFull => true,
        Error::Io { source: e, .. } => {
            e.kind() == std::io::ErrorKind::PermissionDenied
                || e.kind() == std::io::ErrorKind::ReadOnlyFilesystem
                || e.raw_os_error() == Some(libc::EROFS)
        }
        _ => false,
    }
}

/// A file at least this large has its free set loaded beside the log's replay at open (a
/// thread's start costs more than a small file's free set takes to load).
const FREE_SET_BESIDE_BYTES: u64 = 64 << 20;

/// Whether the free set of a file of `bytes` is loaded beside the log's replay. The crate's
/// own tests load every free set beside it, and the integration tests' small files load
/// theirs inline, so that both ways run.
fn free_set_beside(bytes: u64) -> bool {
    cfg!(test) || bytes >= FREE_SET_BESIDE_BYTES
}

impl Shared {
    /// The state of a handle on `storage`, starting from its newest trustworthy commit (a new
    /// database is created first if the storage is empty and `options` allow).
    pub(crate) fn open(
        storage: Arc<dyn Storage>,
        options: Options,
        lock: Option<LockTable>,
        log_source: LogSource,
    ) -> Result<Shared> {
        options.validate()?;
        let boot_id = storage.boot_id();
        let mut losses = Losses {
            recover: options.recover,
            given_up: Vec::new(),
            log_given_up: false,
        };
        if storage.len()? == 0 {
            // An empty file becomes a database only when creating one was asked for.
            if options.read_only || !options.create {
                return Err(Error::NotADatabase);
            }
            // Unless a log beside it holds commits: the database they were made on is gone.
            if let Some(found) = orphan_log(&log_source)? {
                losses.give_up(
                    format!("the data file is empty or was missing, and its log holds {found}"),
                    "creating a new database would give up every commit in the log".into(),
                )?;
                losses.log_given_up = true;
            }
            create(&*storage, options.page_bytes, boot_id)?;
        }
        let file_bytes = storage.len()?;
        let Chosen {
            mut meta,
            slot,
            doubt,
        } = choose_start(&*storage, file_bytes, boot_id, &options, &lock)?;
        // A handle that writes, or a read-only one alone with the database (no writer can be
        // writing a meta page it reads), must prove it loses nothing by passing over a meta
        // slot it could not use: the log's replay proves it where the chosen commit names the
        // log (`Expect::reach_txn`); without a log, the file's pages must hold nothing newer.
        let must_prove = !options.read_only || lock.as_ref().is_some_and(LockTable::alone);
        let mut expect = Expect {
            synced_to: lock
                .as_ref()
                .filter(|_| must_prove)
                .map_or(0, LockTable::log_synced),
            reach_txn: 0,
            doubtful: false,
        };
        match doubt.filter(|_| must_prove) {
            Some(d) if meta.log => {
                expect.reach_txn = d.txn().unwrap_or(0);
                expect.doubtful = d.txn().is_none();
            }
            Some(d @ Doubt::Short { txn, .. }) => losses.give_up(
                d.damage(),
                format!(
                    "opening at commit {} would give up commit {txn} and any before it after \
                     commit {}",
                    meta.txn, meta.txn
                ),
            )?,
            Some(d @ Doubt::Damaged { .. }) => {
                let (n, newest) = newer_pages(&*storage, meta.page_bytes, file_bytes, meta.txn)?;
                if n > 0 {
                    losses.give_up(
                        d.damage(),
                        format!(
                            "the file holds {n} intact page(s) written by commits after commit \
                             {} (up to commit {newest}), which the damaged slot may have held: \
                             opening at commit {} would give up those commits",
                            meta.txn, meta.txn
                        ),
                    )?;
                }
            }
            None => {}
        }
        // Where the log must be kept from: the newest commit's position, or, if that is a
        // checkpoint not yet synced (trusted because the machine did not restart), the last
        // durable checkpoint's, as the handle that wrote it kept it: a power loss returns to
        // that one and replays from there. The checkpoint is made durable later, when the
        // log needs the room (`commit::Settling`), instead of syncing here whatever the crashed
        // process left in the page cache (at 10M records, over a second of an open that
        // replays in 0.1 s). Without a usable durable slot, it is made durable now.
        let mut keep_from = meta.log_position;
        if meta.log && !meta.durable && !options.read_only {
            match durable_log_position(&*storage, &meta, slot) {
                Some(position) => keep_from = position,
                None => {
                    storage.sync()?;
                    meta = commit::make_durable(&*storage, meta, slot)?;
                }
            }
        }
        let access = Arc::new(Access::for_pages(
            &storage,
            meta.page_count * meta.page_bytes as u64,
            None,
            options.readahead,
        )?);
        let tree = Published::new(Snapshot::new(meta, access, options.verify_checksums));
        // The machine may have restarted since the newest commit was written (a power loss),
        // unless both carry the same boot id: the log's tail is then closed as after one
        // (`Log::close_tail`).
        let restarted = boot_id != Some(meta.boot_id);
        // The free set is read from the tree's pages, which replaying the log does not
        // change: in a large file it is loaded on a thread of its own while the log is
        // replayed (cold, its chain of pages is read one page at a time: 90 ms of a 10M
        // database's crashed open, docs/design/write-path.md, session 53).
        let (replayed, loaded) = std::thread::scope(|s| {
            let beside = free_set_beside(meta.page_count * meta.page_bytes as u64);
            let loader = beside
                .then(|| {
                    std::thread::Builder::new()
                        .name("larch-free-load".into())
                        .spawn_scoped(s, || tree.snap.load_free_set())
                        .ok()
                })
                .flatten();
            let replayed = (|| -> Result<_> {
                let mut replay = Replay::new(&tree);
                let log = open_log(
                    &log_source,
                    &meta,
                    keep_from,
                    restarted,
                    expect,
                    &options,
                    &mut losses,
                    &mut replay,
                )?;
                Ok((log, replay.finish()?))
            })();
            let loaded = loader.map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(Error::Internal(
                        "the free set's loading thread panicked".into(),
                    ))
                })
            });
            (replayed, loaded)
        });
        let (mut log, mut current) = replayed?;
        if let Some(log) = log.as_mut() {
            log.plan(
                meta.page_count * meta.page_bytes as u64,
                options.checkpoint_bytes,
            );
        }
        // A small file's, or one whose loading thread could not be started: loaded here.
        let free = match loaded {
            Some(free) => free?,
            None => tree.snap.load_free_set()?,
        };
        let (durable_slot, last_durable_txn) = if meta.durable {
            (slot, meta.txn)
        } else {
            (1 - slot, meta.last_durable_txn)
        };
        let free = usable_free_set(free, &meta, last_durable_txn, &options, &lock)?;
        let carry = Carry::new(
            free,
            WriteMap::new(
                storage.clone(),
                meta.page_bytes as usize,
                file_bytes,
                !options.read_only,
                options.readahead,
            ),
        );
        let writer = WriterState {
            disk: Some(Disk {
                carry: Some(carry),
                durable_slot,
                last_durable_txn,
                settling: None,
                unsynced: (!meta.durable).then_some((meta, slot)),
            }),
            // A commit not synced, trusted after a process crash: the log between the durable
            // checkpoint's position and its own, which a power loss replays, may hold a mark
            // (`LogAt::Mark`). Not read to find out: the first commit that must be durable
            // makes this one durable first, as after a mark.
            marked: (!meta.durable && meta.log).then_some(meta.txn),
            poisoned: false,
            tables: TableStates::default(),
            scratch: Default::default(),
            batch: Default::default(),
            record: Vec::new(),
            counts: Vec::new(),
            checkpoint_position: log.as_ref().map_or(0, |l| l.end()),
            checkpoint: None,
            pending: None,
            pacer: Default::default(),
            savepoints: Default::default(),
        };
        let mut follow = None;
        if options.read_only {
            // A read-only handle reads the log after the tree itself: up to the end a writer
            // published, if one is publishing, and then follows it if it can be beside one
            // (registered in the lock file).
            let mut f = super::readers::Follower::new(log_source);
            let bound = lock.as_ref().and_then(LockTable::log_bound);
            // Alone with the database, its log must reach what was known of it, as at a
            // writer's open (a read-only handle gives nothing up: it fails instead).
            f.expect = must_prove.then_some(expect);
            current = match f.catch_up(&tree, meta.log_position, bound, true) {
                Ok(p) => p,
                // The writer reused the log's room after a newer checkpoint while this open
                // read it: start from the tree; the first read moves to the newer one.
                Err(Error::CorruptedLog { .. })
                    if lock.as_ref().is_some_and(|l| l.published() > meta.txn) =>
                {
                    f.applied = meta.log_position;
                    tree.clone()
                }
                Err(e) => return Err(e),
            };
            if let Some(lock) = lock.as_ref() {
                // The slot protected the tree while the free set was checked and the log's
                // tables and deletions were looked up in it; readers register on their own.
                lock.set_reader(0);
                follow = Some(f);
            }
        } else if let Some(lock) = lock.as_ref() {
            // Read-only handles in other processes read the log up to here, or none of it
            // from a writer that does not write it.
            match log.as_ref() {
                Some(log) => {
                    lock.publish_log(current.txn(), log.end());
                    // Read back and synced to its end (`Log::close_tail`).
                    lock.set_log_synced(log.end());
                    // Lower than the last claim, for a new log or a tail given up: made
                    // durable before any record is appended.
                    if !meta.log || !losses.given_up.is_empty() {
                        lock.sync_log_synced()?;
                    }
                }
                None => {
                    lock.publish_log(0, 0);
                    lock.set_log_synced(0);
                }
            }
        }
        let recovery = (!losses.given_up.is_empty()).then(|| Recovery {
            opened_txn: current.txn(),
            given_up: losses.given_up,
            kept: None,
        });
        Ok(Shared {
            page_bytes: meta.page_bytes,
            current_txn: AtomicU64::new(current.txn()),
            current_tree_txn: AtomicU64::new(current.tree_txn()),
            current_shape: AtomicU64::new(super::readers::SHAPE_FIRST),
            read: Mutex::new(ReadState::new(current, follow)),
            writer: Mutex::new(writer),
            storage,
            options,
            boot_id,
            lock,
            closed: std::sync::atomic::AtomicBool::new(false),
            log_detached: std::sync::atomic::AtomicBool::new(false),
            log: log.map(GroupLog::new),
            writers_waiting: Default::default(),
            flusher: Default::default(),
            idle: Default::default(),
            spare: Default::default(),
            counters: Default::default(),
            recovery,
        })
    }
}

/// The damage an open got past (`Options::recover`), or, without `recover`, the refusal.
struct Losses {
    recover: bool,
    given_up: Vec<GivenUp>,
    /// The whole log was given up already (its data file is gone): not reported again when
    /// a new log replaces it.
    log_given_up: bool,
}

impl Losses {
    /// Opening past `damage` gives up `lost`: noted if the open may give it up, else
    /// `Error::WouldLoseData`. Called before the open changes anything because of it.
    fn give_up(&mut self, damage: String, lost: String) -> Result<()> {
        if !self.recover {
            return Err(Error::WouldLoseData { damage, lost });
        }
        self.given_up.push(GivenUp { damage, lost });
        Ok(())
    }

    /// A log that ended short of what was known of it, given up (`Log::open_into` returns it
    /// only when the open may give it up).
    fn gave_up_log(&mut self, short: Shortfall) {
        self.given_up.push(GivenUp {
            damage: short.reasons.join("; "),
            lost: format!("opening at the log's end gave up {}", short.lost()),
        });
    }
}

/// What the log beside an empty or missing data file holds, if anything: the intact records
/// of its segments, or the log itself where its header is damaged (nothing can say what it
/// holds then).
fn orphan_log(source: &LogSource) -> Result<Option<String>> {
    let Some(storage) = source.open(true, false)? else {
        return Ok(None);
    };
    let len = storage.len()?;
    if len <= crate::layout::log::FILE_HEADER_BYTES {
        return Ok(None);
    }
    match Log::survey(storage, 0) {
        Ok(found) if found.records == 0 => Ok(None),
        Ok(found) => Ok(Some(found.describe())),
        Err(e) => Ok(Some(format!("{len} bytes that cannot be read ({e})"))),
    }
}

/// The log a handle opens with, its records replayed into `replay` as they are read: those
/// after the meta page's position if it says the log is in use, whatever `options.log` says.
/// A writing handle opened with `options.log` keeps the log for its commits; it starts a new
/// one if the meta page does not name one (any file there is stale). A read-only handle only
/// reads (and replays nothing here). A record that fails to replay stops the reading before
/// the tail is closed: a failed open writes nothing to the log.
#[allow(clippy::too_many_arguments)]
fn open_log(
    source: &LogSource,
    meta: &Meta,
    keep_from: u64,
    restarted: bool,
    expect: Expect,
    options: &Options,
    losses: &mut Losses,
    replay: &mut Replay<'_>,
) -> Result<Option<Log>> {
    // A storage opened without a log (`Database::open_storage`) writes pages, whatever
    // `options.log` says: there is nowhere to put a log.
    let writes_log = options.log && !options.read_only && !matches!(source, LogSource::None);
    if (!meta.log && !writes_log) || options.read_only {
        // A read-only handle reads the log itself (`readers::Follower`).
        return Ok(None);
    }
    let storage = source.open(false, writes_log)?;
    // Missing only when the handle does not write the log (a log it writes is created), so
    // the meta page names it.
    let Some(storage) = storage else {
        return Err(no_log(meta));
    };
    let mut log = if meta.log {
        let reopen = Reopen {
            keep_from,
            tree_txn: meta.txn,
            restarted,
            expect,
            recover: options.recover,
        };
        let (log, short) = Log::open_into(storage, meta.log_position, reopen, replay)?;
        if let Some(short) = short {
            losses.gave_up_log(short);
        }
        log
    } else {
        // A new log (`writes_log`): whatever the file held belongs to no commit the
        // database has, unless it holds durable commits newer than the database's: a meta
        // page that named the log was lost.
        stale_log(&storage, meta, losses)?;
        storage.set_len(0)?;
        Log::create(storage, options.log_segment_bytes, options.log_segments, 0)?
    };
    log.set_grower_nice(options.background_nice);
    Ok(writes_log.then_some(log))
}

/// Checks that the log file in `storage`, which the commit `meta` does not name, holds no
/// durable record of a commit newer than `meta`'s, before a new log replaces it: one is a
/// commit the database acknowledged and does not hold (a lost or damaged meta page named the
/// log). Records that were never synced may be there after a power loss took the meta page
/// that would have named them; nothing was promised of them.
fn stale_log(storage: &Arc<dyn Storage>, meta: &Meta, losses: &mut Losses) -> Result<()> {
    let len = storage.len()?;
    if len <= crate::layout::log::FILE_HEADER_BYTES || losses.log_given_up {
        return Ok(());
    }
    let found = match Log::survey(storage.clone(), meta.txn) {
        Ok(found) => found,
        Err(e) => {
            return losses.give_up(
                format!(
                    "the database's newest intact meta page (commit {}) names no log, and the \
                     log file beside it ({len} bytes) cannot be read ({e})",
                    meta.txn
                ),
                "starting a new log would give up whatever it holds".into(),
            )
        }
    };
    match found.first {
        Some(first) if first < found.vouched => losses.give_up(
            format!(
                "the database's newest intact meta page (commit {}) names no log, and the log \
                 beside it holds durable records of later commits",
                meta.txn
            ),
            format!(
                "starting a new log would give up {} (a meta page that named the log was lost)",
                found.describe()
            ),
        ),
        _ => Ok(()),
    }
}

/// The error for a commit `meta` that names a log where there is none.
pub(crate) fn no_log(meta: &Meta) -> Error {
    Error::CorruptedLog {
        position: meta.log_position,
        reason: "the last commit says commits after it are in the log, and there is no log".into(),
    }
}

/// The log position of the last durable checkpoint, when the newest commit `meta` (in `slot`)
/// is a checkpoint not yet synced: the other slot's meta page, if it is the durable commit
/// `meta` names, through the log, at or before `meta`'s position.
fn durable_log_position(storage: &dyn Storage, meta: &Meta, slot: u64) -> Option<u64> {
    let other = 1 - slot;
    let mut page = vec![0u8; meta.page_bytes as usize];
    storage
        .read_at(&mut page, other * meta.page_bytes as u64)
        .ok()?;
    let durable = Meta::decode(&page, other).ok()?;
    (durable.durable
        && durable.log
        && durable.txn == meta.last_durable_txn
        && durable.log_position <= meta.log_position)
        .then_some(durable.log_position)
}

/// Records decoded this far ahead of the one being replayed, their keys' overlay slots
/// prefetched: the cache miss of each key's first probe (a large overlay's slot array is read
/// at random) was the largest part of replay (19% of a 1M-record open's samples), and the
/// lookahead overlaps it (docs/design/write-path.md, session 23).
const REPLAY_LOOKAHEAD: usize = 16;
/// Keys of one record prefetched at most (a large batch's later keys are not).
const REPLAY_PREFETCH_KEYS: usize = 4;

/// A commit record decoded for replay: its txn, and each table's number and header (as of
/// the checkpoint) with its records.
type Decoded<'r> = (u64, Vec<(u64, TableHeader, Vec<Visible<'r>>)>);

/// Decodes commit records for replay, in log order: checks that their txns rise, resolves
/// the tables they name (by name, once each) and prefetches their first keys' slots in
/// `overlay`.
struct Decoder<'s> {
    snap: &'s Snapshot,
    catalog: &'s CatalogCache,
    tables: HashMap<&'s [u8], (u64, TableHeader)>,
    /// The table the last record named first (most records name the one table most
    /// commits write): found without hashing its name.
    last: Option<(&'s [u8], u64, TableHeader)>,
    txn: u64,
}

impl<'s> Decoder<'s> {
    fn decode(&mut self, rec: &'s Record, overlay: &Overlay) -> Result<Decoded<'s>> {
        if rec.txn <= self.txn {
            return Err(Error::CorruptedLog {
                position: rec.position,
                reason: format!("commit {} after commit {}", rec.txn, self.txn),
            });
        }
        self.txn = rec.txn;
        let mut out = Vec::new();
        for t in batch::decode(&rec.body, rec.position)? {
            let (id, hdr) = match self.last {
                Some((name, id, hdr)) if name == t.name => (id, hdr),
                _ => {
                    let (id, hdr) = self.table(rec, t.name)?;
                    self.last = Some((t.name, id, hdr));
                    (id, hdr)
                }
            };
            for &(key, _) in t.records.iter().take(REPLAY_PREFETCH_KEYS) {
                overlay.prefetch_slot(id, key);
            }
            out.push((id, hdr, t.records));
        }
        Ok((rec.txn, out))
    }

    /// The number and header (as of the checkpoint) of the table `name`, which `rec` writes:
    /// looked up in the tree once per name.
    fn table(&mut self, rec: &Record, name: &'s [u8]) -> Result<(u64, TableHeader)> {
        match self.tables.entry(name) {
            Entry::Occupied(e) => Ok(*e.get()),
            Entry::Vacant(e) => {
                let snap = self.snap;
                let found = match std::str::from_utf8(name).ok() {
                    Some(n) => catalog::lookup(snap, &snap.meta.catalog, n)?,
                    None => None,
                };
                let (Some((hdr, _)), Some(id)) = (found, self.catalog.table_id(snap, name)?) else {
                    return Err(Error::CorruptedLog {
                        position: rec.position,
                        reason: format!(
                            "commit {} writes table {:?}, which the checkpoint does not have",
                            rec.txn,
                            String::from_utf8_lossy(name)
                        ),
                    });
                };
                Ok(*e.insert((id, hdr)))
            }
        }
    }
}

/// The snapshot a handle starts from: `tree`, with the log's records after it replayed into
/// an overlay (`Replay`, given every record at once).
#[cfg(test)]
pub(crate) fn replay(tree: &Arc<Published>, records: Vec<Record>) -> Result<Arc<Published>> {
    let mut r = Replay::new(tree);
    r.expect_records(records.len());
    for rec in records {
        r.record(rec)?;
    }
    r.finish()
}

/// Records held before they are applied, at most: they are decoded together, so that each
/// is resolved and its slots prefetched `REPLAY_LOOKAHEAD` ahead of the one applied. A chunk
/// of one-put commits spans a few hundred KiB of log, so the segment buffers behind it are
/// reused as reading goes on (`Log::read_spare`).
const REPLAY_CHUNK: usize = 4096;

/// Replays the log's records after `tree` into an overlay, as they are read back
/// (`log::ReadBack`), and gives the snapshot a handle starts from (`finish`). Each record is
/// one commit; the tables it names must be in the tree's catalog (tables are created and
/// deleted only by commits that write pages), and the entry counts are rebuilt as the
/// commits were made. A count changed is written once per chunk, at the last commit applied,
/// not at each commit that changed it as a live commit does: no reader ever reads at a
/// commit inside a replay (the handle publishes its last one), and a version of `COUNTS` per
/// one-put commit was a second insert and a sixth of the overlay's memory.
///
/// Records are decoded, checked for order and resolved to table numbers `REPLAY_LOOKAHEAD`
/// ahead of the one applied, and their slots prefetched; a record that fails there is queued
/// as its error, so the first failure in log order is the one returned.
///
/// `tree` may already have an overlay of records replayed before (a read-only handle
/// following a writer in another process, `Shared::follow_log`): the records go on into it,
/// after its newest commit, and the entry counts go on from it. Only the handle that made that
/// overlay may pass it: an overlay has one writer.
pub(crate) struct Replay<'t> {
    tree: &'t Arc<Published>,
    /// Made at the first chunk, sized for the records expected.
    overlay: Option<Arc<Overlay>>,
    /// Records read and not applied yet.
    chunk: Vec<Record>,
    /// Bytes of log expected (`ReadBack::expect`), or records (`expect_records`).
    expected_bytes: u64,
    expected_records: Option<usize>,
    /// By table number: its entry count so far (hashed with foldhash: std's SipHash of a
    /// number per record showed in the profile).
    counts: HashMap<u64, u64, foldhash::fast::RandomState>,
    /// The commit the tree is, and the last commit applied.
    start: u64,
    txn: u64,
}

impl<'t> Replay<'t> {
    pub(crate) fn new(tree: &'t Arc<Published>) -> Replay<'t> {
        Replay {
            tree,
            overlay: tree.overlay.clone(),
            chunk: Vec::new(),
            expected_bytes: 0,
            expected_records: None,
            counts: HashMap::default(),
            start: tree.txn(),
            txn: tree.txn(),
        }
    }

    /// Sizes the overlay for `n` records instead of estimating them from the bytes expected.
    pub(crate) fn expect_records(&mut self, n: usize) {
        self.expected_records = Some(n);
    }

    /// Whether a record has gone into the overlay (an error after that leaves it partly
    /// applied).
    pub(crate) fn applied(&self) -> bool {
        self.txn != self.start
    }

    /// The snapshot with every record applied: `tree` itself if there were none.
    pub(crate) fn finish(mut self) -> Result<Arc<Published>> {
        self.flush()?;
        match self.overlay {
            Some(overlay) if self.txn != self.start => {
                Ok(Published::logged(self.tree, overlay, self.txn))
            }
            _ => Ok(self.tree.clone()),
        }
    }

    /// The overlay the records go into, made for the records expected if there is none: the
    /// chunk's records, scaled by the bytes expected to the bytes they span when more are to
    /// come (growing the table rehashes every entry, and leaves the slots prefetched for the
    /// old table wrong).
    fn overlay(&mut self, more: bool) -> Arc<Overlay> {
        if let Some(o) = &self.overlay {
            return o.clone();
        }
        let n = self.chunk.len();
        let expected = match (self.expected_records, self.chunk.first(), self.chunk.last()) {
            (Some(records), ..) => records,
            (None, Some(first), Some(last)) if more && last.position > first.position => {
                let spanned = last.position - first.position;
                let scaled = (n as u128 * self.expected_bytes as u128 / spanned as u128) as usize;
                scaled.max(n)
            }
            _ => n,
        };
        let o = Arc::new(Overlay::with_capacity(expected));
        self.overlay = Some(o.clone());
        o
    }

    /// Applies the records held, in order (the first failure ends it: the records before it
    /// are in the overlay).
    pub(crate) fn flush(&mut self) -> Result<()> {
        if self.chunk.is_empty() {
            return Ok(());
        }
        let more = self.chunk.len() == REPLAY_CHUNK;
        let overlay = self.overlay(more);
        let chunk = std::mem::take(&mut self.chunk);
        let r = self.apply(&chunk, &overlay);
        // The chunk's allocation is kept; its records (and the segment buffers they share)
        // are let go.
        self.chunk = chunk;
        self.chunk.clear();
        r
    }

    fn apply(&mut self, records: &[Record], overlay: &Overlay) -> Result<()> {
        let snap = &*self.tree.snap;
        let start = self.start;
        let mut decoder = Decoder {
            snap,
            catalog: &self.tree.catalog,
            tables: HashMap::new(),
            last: None,
            txn: self.txn,
        };
        let mut commits = records.iter();
        let mut ahead: VecDeque<Result<Decoded<'_>>> = VecDeque::with_capacity(REPLAY_LOOKAHEAD);
        // A record's writes, in a buffer reused from record to record.
        let mut writes = Vec::new();
        // The counts a record changed, then each table's count as of the last commit applied
        // (written once the chunk is applied, or fails part way).
        let mut record_counts = Vec::new();
        let mut changed: Vec<(u64, u64)> = Vec::new();
        let mut txn = self.txn;
        let mut apply = || -> Result<()> {
            loop {
                while ahead.len() < REPLAY_LOOKAHEAD && !matches!(ahead.back(), Some(Err(_))) {
                    let Some(rec) = commits.next() else { break };
                    ahead.push_back(decoder.decode(rec, overlay));
                }
                let Some(next) = ahead.pop_front() else { break };
                let (rec_txn, decoded) = next?;
                writes.clear();
                for (id, hdr, records) in decoded {
                    let n = self.counts.entry(id).or_insert_with(|| {
                        // Where an earlier replay left the count, if it changed it.
                        match overlay.get(COUNTS, &id.to_be_bytes(), start) {
                            Lookup::Value(v) => {
                                v.try_into().map_or(hdr.entries, u64::from_le_bytes)
                            }
                            _ => hdr.entries,
                        }
                    });
                    let before = *n;
                    for (key, value) in records {
                        // A put of a key the overlay does not have is counted as new without
                        // looking in the tree, and marked, as a blind write of a live commit is
                        // (`Overlay::blind_in_tree` corrects the count when it is asked for): a
                        // tree lookup a record made replay several times slower. A deletion looks.
                        let (existed, blind) = match (overlay.get(id, key, txn), value) {
                            (Lookup::Value(_), _) => (true, false),
                            (Lookup::Deleted, _) => (false, false),
                            (Lookup::Absent, Some(_)) => (false, true),
                            (Lookup::Absent, None) => {
                                (btree::get(snap, &hdr, key)?.is_some(), false)
                            }
                        };
                        match (existed, value) {
                            (false, Some(_)) => *n += 1,
                            (true, None) => *n = n.saturating_sub(1),
                            _ => {}
                        }
                        writes.push((id, key, value, blind));
                    }
                    if *n != before {
                        record_counts.push((id, *n));
                    }
                }
                overlay.insert_marked(rec_txn, writes.drain(..));
                for (id, n) in record_counts.drain(..) {
                    match changed.iter_mut().find(|(t, _)| *t == id) {
                        Some(c) => c.1 = n,
                        None => changed.push((id, n)),
                    }
                }
                txn = rec_txn;
                self.txn = txn;
            }
            Ok(())
        };
        let applied = apply();
        let counts: Vec<_> = changed
            .iter()
            .map(|(id, n)| (id.to_be_bytes(), n.to_le_bytes()))
            .collect();
        if !counts.is_empty() {
            overlay.insert_marked(
                self.txn,
                counts
                    .iter()
                    .map(|(k, v)| (COUNTS, &k[..], Some(&v[..]), false)),
            );
        }
        applied
    }
}

impl ReadBack for Replay<'_> {
    fn expect(&mut self, bytes: u64) {
        self.expected_bytes = bytes;
    }

    fn done(&mut self) -> Result<()> {
        self.flush()
    }

    fn record(&mut self, rec: Record) -> Result<()> {
        if rec.kind == KIND_MARK && rec.txn > self.start {
            // A commit that wrote its pages: its writes are in a newer tree, not in the log.
            // An open never gets here (its reading ends at the mark: `Reopen::tree_txn`,
            // `Log::read_records_into`); a follower beside a writer moves to that tree,
            // which is published before any record after the mark.
            return Err(Error::CorruptedLog {
                position: rec.position,
                reason: format!(
                    "commit {} wrote its pages; the records after it need its tree",
                    rec.txn
                ),
            });
        }
        if rec.kind != KIND_COMMIT {
            return Ok(());
        }
        self.chunk.push(rec);
        if self.chunk.len() == REPLAY_CHUNK {
            self.flush()?;
        }
        Ok(())
    }
}

/// The commit to open from. A read-only handle registered in the reader table chooses it
/// through the reader protocol (a writer in another process may be committing), so that the
/// free set checked next cannot be reused meanwhile; its slot is then unused.
fn choose_start(
    storage: &dyn Storage,
    file_bytes: u64,
    boot_id: Option<[u8; 16]>,
    options: &Options,
    lock: &Option<LockTable>,
) -> Result<Chosen> {
    let chosen = choose_meta(storage, file_bytes, boot_id)?;
    match lock.as_ref().filter(|_| options.read_only) {
        Some(lock) => {
            let meta = newest_protected(storage, boot_id, lock, true, 0)?;
            Ok(Chosen {
                // The slot passed over is in doubt only beside the commit it was passed over
                // for (alone with the database, the two are the same).
                doubt: chosen.doubt.filter(|_| meta.txn == chosen.meta.txn),
                meta,
                slot: 0,
            })
        }
        None => Ok(chosen),
    }
}

/// The free set a writing handle starts with: what the commit recorded, with every pending
/// page no reader and no durable snapshot needs released. Readers in other processes may hold
/// snapshots: the commit is published as the newest first, then their slots are read (in this
/// order; see concurrency.md). A read-only handle never writes: its free set was only checked.
fn usable_free_set(
    mut free: FreeSet,
    meta: &Meta,
    last_durable_txn: u64,
    options: &Options,
    lock: &Option<LockTable>,
) -> Result<FreeSet> {
    if options.read_only {
        return Ok(FreeSet::default());
    }
    let mut oldest = None;
    if let Some(lock) = lock.as_ref() {
        lock.publish(meta.txn);
        oldest = lock.oldest_reader().0;
    }
    free.release(oldest, last_durable_txn)?;
    Ok(free)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::FaultStorage;
    use crate::Database;

    /// A database with table `t` whose log holds `n` one-put commits after its last
    /// checkpoint: the tree as of that checkpoint, and the log's records after it.
    fn logged(n: u32) -> (Arc<Published>, Vec<Record>) {
        let (tree, log) = logged_log(n);
        let (records, _) = Log::read_records(log, tree.snap.meta.log_position).unwrap();
        (tree, records)
    }

    /// `logged`, with the log itself instead of its records.
    fn logged_log(n: u32) -> (Arc<Published>, Arc<dyn Storage>) {
        let data = FaultStorage::new();
        let log = FaultStorage::new();
        let options = Options::default()
            .log(true)
            .checkpoint_thread(false)
            .compact_on_close(false);
        let db =
            Database::open_storage_with_log(Arc::new(data.clone()), Arc::new(log.clone()), options)
                .unwrap();
        let mut w = db.begin_write().unwrap();
        w.create_table("t").unwrap();
        w.commit().unwrap();
        db.checkpoint().unwrap();
        for i in 0..n {
            let mut w = db.begin_write().unwrap();
            w.table("t").unwrap().put(&i.to_be_bytes(), b"v").unwrap();
            w.commit().unwrap();
        }
        drop(db);
        let storage: Arc<dyn Storage> = Arc::new(data);
        let Chosen { meta, .. } =
            choose_meta(&*storage, storage.len().unwrap(), storage.boot_id()).unwrap();
        let access = Access::for_pages(
            &storage,
            meta.page_count * meta.page_bytes as u64,
            None,
            false,
        )
        .unwrap();
        let tree = Published::new(Snapshot::new(meta, Arc::new(access), false));
        (tree, Arc::new(log))
    }

    /// A read-only handle's follower whose replay into its overlay fails after some records
    /// went in stays stuck at that position: reading from there again would apply them a
    /// second time. One that failed before any record went in is not stuck, and a new tree
    /// clears it.
    #[test]
    fn a_follower_that_applied_part_of_a_failed_replay_stays_stuck() {
        use super::super::readers::Follower;
        let (tree, log) = logged_log(100);
        let from = tree.snap.meta.log_position;
        // A commit record after the others that passes its checksum and cannot be decoded.
        let (mut writer, _) = Log::open(log.clone(), from, from).unwrap();
        let (records, _) = Log::read_records(log.clone(), from).unwrap();
        writer
            .append(KIND_COMMIT, records.last().unwrap().txn + 1, &[1, 2, 3])
            .unwrap();
        writer.sync().unwrap();
        let (all, _) = Log::read_records(log.clone(), from).unwrap();
        assert_eq!(all.len(), records.len() + 1);
        let bad = all.last().unwrap().position;
        let damaged = |r: Result<Arc<Published>>| match r {
            Err(Error::CorruptedLog { position, reason }) if !reason.contains("earlier read") => {
                assert_eq!(position, bad, "{reason}");
            }
            other => panic!("expected the bad record, got {:?}", other.map(|p| p.txn())),
        };
        let stuck = |r: Result<Arc<Published>>, at: u64| match r {
            Err(Error::CorruptedLog { position, reason }) if reason.contains("earlier read") => {
                assert_eq!(position, at);
            }
            other => panic!(
                "expected the follower stuck, got {:?}",
                other.map(|p| p.txn())
            ),
        };
        let table = tree
            .catalog
            .table_id(&tree.snap, b"t")
            .unwrap()
            .expect("table t");
        let mut f = Follower::new(LogSource::Storage(log.clone()));
        // The first half, up to an end a writer published.
        let half = records[50].position;
        let base = f.catch_up(&tree, from, Some(half), true).unwrap();
        assert_eq!(base.txn(), records[49].txn);
        let overlay = base.overlay.clone().expect("an overlay");
        let entries = overlay.len();
        // The rest and the bad record: the rest goes into the shared overlay, then it fails.
        damaged(f.catch_up(&base, half, None, false));
        let applied = overlay.len();
        assert!(applied > entries, "the records before the bad one went in");
        // From the same place again: stuck, nothing applied a second time.
        stuck(f.catch_up(&base, half, None, false), half);
        assert_eq!(overlay.len(), applied);
        // The snapshot's readers still see the first half only.
        let key = 60u32.to_be_bytes();
        assert!(matches!(
            overlay.get(table, &key, base.txn()),
            Lookup::Absent
        ));
        // A new tree clears it: the replay is tried again, up to every good record.
        let whole = f.catch_up(&tree, from, Some(bad), true).unwrap();
        assert_eq!(whole.txn(), records.last().unwrap().txn);
        // Failing at the first record read, nothing went in: not stuck, the same damage is
        // reported again.
        let entries = whole.overlay.as_ref().expect("an overlay").len();
        for _ in 0..2 {
            damaged(f.catch_up(&whole, bad, None, false));
        }
        assert_eq!(whole.overlay.as_ref().unwrap().len(), entries);
    }

    fn failed_at(result: Result<Arc<Published>>) -> u64 {
        match result {
            Err(Error::CorruptedLog { position, .. }) => position,
            Err(e) => panic!("expected CorruptedLog, got {e:?}"),
            Ok(_) => panic!("expected CorruptedLog, replay succeeded"),
        }
    }

    /// Every commit is replayed, past the lookahead's window.
    #[test]
    fn replay_brings_every_commit() {
        let n = 3 * REPLAY_LOOKAHEAD as u32;
        let (tree, records) = logged(n);
        let commits: Vec<_> = records.iter().filter(|r| r.kind == KIND_COMMIT).collect();
        assert_eq!(commits.len(), n as usize);
        let last = commits.last().unwrap().txn;
        let current = replay(&tree, records).unwrap();
        assert_eq!(current.txn(), last);
        assert_every_key(&tree, &current, n);
    }

    /// A sequential `None` batch leaves a mark only in a log whose version allows marks: in
    /// a version-2 log (an older build's, which would read a mark as the log's end) it
    /// appends its record, as before marks; in a new log, a mark.
    #[test]
    fn a_version_2_log_gets_the_batch_record_not_a_mark() {
        use crate::bytes::put_u32;
        use crate::layout::log::{FILE_CRC_AT, FILE_VERSION_AT, FILE_VERSION_NO_MARKS};
        for version_2 in [false, true] {
            let (data, log) = (FaultStorage::new(), FaultStorage::new());
            let options = || {
                Options::default()
                    .log(true)
                    .checkpoint_thread(false)
                    .idle_checkpoint_millis(0)
                    .compact_on_close(false)
            };
            let open = || {
                Database::open_storage_with_log(
                    Arc::new(data.clone()),
                    Arc::new(log.clone()),
                    options(),
                )
                .unwrap()
            };
            let db = open();
            let mut w = db.begin_write().unwrap();
            w.create_table("t").unwrap();
            w.commit().unwrap();
            db.put(b"x", b"y").unwrap();
            drop(db);
            // Where this build's records end (the table's commit left a mark, which a
            // version-2 log cannot hold: an older build wrote none).
            let (_, first_end) = Log::read_records(Arc::new(log.clone()), 0).unwrap();
            if version_2 {
                let mut c = log.contents();
                put_u32(&mut c, FILE_VERSION_AT, FILE_VERSION_NO_MARKS);
                let crc = crate::pager::shift::crc32c(&c[..FILE_CRC_AT]);
                put_u32(&mut c, FILE_CRC_AT, crc);
                log.set_contents(c);
            }
            let db = open();
            let mut w = db.begin_write().unwrap();
            {
                let mut t = w.table("t").unwrap();
                for i in 0..100u32 {
                    t.append(&i.to_be_bytes(), &[7; 40]).unwrap();
                }
            }
            w.commit_with(crate::Durability::None).unwrap();
            let txn = db.begin_read().unwrap().id();
            assert_eq!(
                db.stats().unwrap().commits.marked_commits,
                u64::from(!version_2)
            );
            drop(db);
            let (records, _) = Log::read_records(Arc::new(log.clone()), first_end).unwrap();
            let batch = records
                .iter()
                .find(|r| r.txn == txn)
                .expect("the batch's record");
            let want = if version_2 { KIND_COMMIT } else { KIND_MARK };
            assert_eq!(batch.kind, want, "version 2: {version_2}");
        }
    }

    /// A mark of a commit newer than the tree stops a replay with `CorruptedLog` at the mark
    /// (a follower then moves to the newer tree); one the tree holds is passed over.
    #[test]
    fn a_mark_newer_than_the_tree_stops_a_replay() {
        let (tree, records) = logged(40);
        let mark = |txn: u64, position: u64| Record {
            position,
            kind: KIND_MARK,
            txn,
            body: Vec::new().into(),
        };
        let last = records.last().unwrap().clone();
        let mut with_newer = records[..20].to_vec();
        let at = with_newer.last().unwrap().position + 64;
        with_newer.push(mark(with_newer.last().unwrap().txn + 1, at));
        with_newer.extend(records[20..].iter().cloned());
        match replay(&tree, with_newer) {
            Err(Error::CorruptedLog { position, .. }) => assert_eq!(position, at),
            other => panic!(
                "a newer mark was replayed past: {:?}",
                other.map(|p| p.txn())
            ),
        }
        let mut with_older = vec![mark(tree.txn(), 0)];
        with_older.extend(records.iter().cloned());
        assert_eq!(replay(&tree, with_older).unwrap().txn(), last.txn);
    }

    /// The overlay of `current`, replayed over `tree` from `logged(n)`'s log: every key of
    /// table `t` with its value, and the entry count. Returns the overlay.
    fn assert_every_key<'c>(tree: &Published, current: &'c Published, n: u32) -> &'c Overlay {
        let Some(overlay) = current.overlay.as_deref() else {
            panic!("no overlay after a replay")
        };
        let last = current.txn();
        let id = tree.catalog.table_id(&tree.snap, b"t").unwrap().unwrap();
        for i in 0..n {
            assert!(
                matches!(overlay.get(id, &i.to_be_bytes(), last), Lookup::Value(b"v")),
                "key {i}"
            );
        }
        assert_eq!(overlay.count(id, last), Some(n as u64));
        overlay
    }

    /// Replayed as the log is read back, a chunk of records at a time: every commit of
    /// several chunks comes back, with the entry count, into an overlay sized for them from
    /// the bytes announced; damage in a later chunk is reported at its record.
    #[test]
    fn replay_as_read_goes_on_across_chunks() {
        let n = 2 * REPLAY_CHUNK as u32 + 5;
        let (tree, log) = logged_log(n);
        let from = tree.snap.meta.log_position;
        let mut r = Replay::new(&tree);
        Log::read_records_into(log.clone(), from, None, None, &mut r).unwrap();
        let current = r.finish().unwrap();
        let overlay = assert_every_key(&tree, &current, n);
        // Sized from the first chunk's bytes, the table did not grow.
        assert_eq!(overlay.tables(), 1);
        let (records, _) = Log::read_records(log, from).unwrap();
        let k = REPLAY_CHUNK + 7;
        let mut damaged = records.clone();
        damaged[k].body.truncate(3);
        assert_eq!(failed_at(replay(&tree, damaged)), records[k].position);
    }

    /// Records are decoded ahead of the one applied; whatever fails first in the log's order
    /// is what replay reports, whether a commit out of order or a body that does not decode,
    /// and whichever comes later within the window.
    #[test]
    fn replay_reports_the_first_damaged_record() {
        let (tree, records) = logged(3 * REPLAY_LOOKAHEAD as u32);
        let k = REPLAY_LOOKAHEAD + 4;
        fn out_of_order(r: &mut [Record], i: usize) {
            r[i].txn = r[i - 1].txn;
        }
        fn undecodable(r: &mut [Record], i: usize) {
            r[i].body.truncate(3);
        }
        type Damage = fn(&mut [Record], usize);
        let cases: [(Damage, Damage); 2] =
            [(out_of_order, undecodable), (undecodable, out_of_order)];
        for (first, later) in cases {
            let mut damaged = records.clone();
            first(&mut damaged, k);
            later(&mut damaged, k + 3);
            assert_eq!(failed_at(replay(&tree, damaged)), records[k].position);
            // Alone, the later damage is what is reported.
            let mut damaged = records.clone();
            later(&mut damaged, k + 3);
            assert_eq!(failed_at(replay(&tree, damaged)), records[k + 3].position);
        }
    }
}
