//! The commit protocol: a write transaction's pages become the newest committed snapshot.
//!
//! 1. Prepare: the freelist chain is built, and the meta page that names everything.
//! 2. Write the pages (into space no preserved snapshot can reach); sync if durable.
//! 3. Write the meta page to the slot that does not hold the last durable commit; sync if
//!    durable.
//! 4. Publish the snapshot to readers in this process, then in others (the lock file).
//!
//! Stage 2 turns 2 and 3 into "append to a log, group sync", with pages checkpointed later;
//! the B-tree and the page access do not change (docs/design/durability.md, ARCHITECTURE.md).

mod route;

use super::log::NoRoom;
use super::published::Published;
use super::upper::overlay::COUNTS;
use super::{Disk, Shared, WriterState};
use crate::error::{Error, Result};
use crate::layout::log::{KIND_COMMIT, KIND_MARK};
use crate::options::Durability;
use crate::pager::{Access, Carry, Meta, Snapshot, TableHeader, WritePages};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// A commit made through the log (`commit_logged`).
pub(crate) struct LoggedCommit {
    /// The commit's id (the base's when there was nothing to commit).
    pub(crate) txn: u64,
    /// For `Durability::Immediate`: the log position to sync to, and the snapshot to publish
    /// once it is durable. The committer lets the write lock go first, so that the next
    /// transaction runs while the log is synced and commits waiting together share one sync
    /// (`finish_immediate`).
    pub(crate) wait: Option<(u64, Arc<Published>)>,
}

/// Commits the writer's batch (`WriterState::batch`) and the entry counts of the tables it
/// changed through the log, on top of commit `base`: one log record, appended to the log and
/// inserted into the overlay. A `None` or `Bounded` commit is written to the log file and
/// published at once; an `Immediate` one becomes the writer's `pending` commit, published by its committer
/// once the log is synced (`finish_immediate`, after the write lock is let go). Returns
/// `None`, with nothing done, when the log has no room for the record: the caller then
/// commits by writing pages. A failed write or sync of the log poisons the handle
/// (fail-stop).
/// How many of a logged commit's writes have their overlay slot prefetched before the record
/// is encoded and appended (`Overlay::prefetch_slot`).
const PREFETCH_WRITES: usize = 4;

pub(crate) fn commit_logged(
    shared: &Shared,
    guard: &mut WriterState,
    base: &Arc<Published>,
    durability: Durability,
    force: bool,
) -> Result<Option<LoggedCommit>> {
    let log = log_of(shared)?;
    let immediate = durability == Durability::Immediate || force;
    // The buffer is the writer's, kept from commit to commit (put back below; a commit that
    // fails leaves a fresh one).
    let mut counts = std::mem::take(&mut guard.counts);
    counts.clear();
    for (name, state) in guard.tables.changed_unordered() {
        let id = base.catalog.table_id(&base.snap, name.as_bytes())?;
        let id = id.ok_or_else(|| Error::Internal(format!("table {name} has no number")))?;
        counts.push((id.to_be_bytes(), state.hdr.entries.to_le_bytes()));
    }
    if guard.batch.is_empty() && counts.is_empty() {
        guard.counts = counts;
        // Nothing to commit; a durable commit still makes the earlier ones durable (and
        // publishes the base, if it is a commit still waiting for its sync).
        let wait = immediate.then(|| (log.end(), base.clone()));
        return Ok(Some(LoggedCommit {
            txn: base.txn(),
            wait,
        }));
    }
    let txn = base.txn() + 1;
    if let Some(o) = &base.overlay {
        // A few slots are enough: a larger batch's later inserts overlap the earlier ones.
        for (table, key, ..) in guard.batch.iter().take(PREFETCH_WRITES) {
            o.prefetch_slot(table, key);
        }
    }
    let WriterState { batch, record, .. } = &mut *guard;
    batch.encode(
        |id| {
            base.catalog
                .name(&base.snap, id)?
                .ok_or_else(|| Error::Internal(format!("no table numbered {id}")))
        },
        record,
    )?;
    let end = match log.append(KIND_COMMIT, txn, record) {
        Ok(end) => end,
        // The log file could not grow (a full disk): this commit fails, nothing was written.
        Err(NoRoom::Grow(e)) => return Err(e),
        Err(NoRoom::Full | NoRoom::TooLarge) => return Ok(None),
    };
    if !immediate {
        // Handed to the file now, so that a process crash keeps it; published below, after
        // any `Immediate` commit before it is durable.
        let written = publish_pending(shared, guard).and_then(|()| log.write());
        if let Err(e) = written {
            guard.poisoned = true;
            return Err(e);
        }
    }
    let overlay = match &base.overlay {
        Some(o) => o.clone(),
        None => shared.new_overlay(),
    };
    let records = guard.batch.iter();
    let count_records = counts
        .iter()
        .map(|(k, v)| (COUNTS, &k[..], Some(&v[..]), false));
    overlay.insert_marked(txn, records.chain(count_records));
    guard.counts = counts;
    let published = Published::logged(base, overlay, txn);
    if immediate {
        guard.pending = Some((published.clone(), end));
        return Ok(Some(LoggedCommit {
            txn,
            wait: Some((end, published)),
        }));
    }
    publish(shared, published, end);
    Ok(Some(LoggedCommit { txn, wait: None }))
}

/// The second half of an `Immediate` commit through the log, run by its committer after it
/// let the write lock go: waits until the log is synced up to `end` (the first committer
/// waiting syncs for all: group commit), then publishes `published` unless a newer commit was
/// published meanwhile. A failed sync fails every later commit of the handle (the log is
/// fail-stop; `WriteTxn::new` sees it).
///
/// `gather`: the caller does not hold the write lock, so a leader may wait for committers
/// that hold it or wait for it (not when a commit under the lock waits for a pending one).
pub(crate) fn finish_immediate(
    shared: &Shared,
    end: u64,
    published: Arc<Published>,
    gather: bool,
) -> Result<()> {
    let log = log_of(shared)?;
    // Committers about to append: waiting for the write lock, or holding it.
    let more = || {
        gather
            && (shared.writers_waiting.load(Ordering::Relaxed) > 0
                || shared.writer.try_lock().is_err())
    };
    log.sync_to_gathering(end, &more)?;
    publish(shared, published, end);
    Ok(())
}

/// Makes `published`, a commit through the log whose record ends at `end`, the snapshot new
/// readers start from, unless a newer one is published already (commits waiting for a shared
/// sync publish in any order); and, in the lock file, the commit read-only handles in other
/// processes read up to (`LockTable::publish_log`: every record before `end` is in the file by
/// now, written before a `None` commit publishes, synced before an `Immediate` one does).
fn publish(shared: &Shared, published: Arc<Published>, end: u64) {
    let mut rs = shared.read_state();
    if rs.current.txn() < published.txn() {
        if let Some(lock) = shared.lock.as_ref() {
            lock.publish_log(published.txn(), end);
            if let Some(log) = shared.log.as_ref() {
                lock.set_log_synced(log.durable_end());
            }
        }
        shared.set_current(&mut rs, published);
    }
}

/// Waits until the writer's `pending` commit (an `Immediate` commit whose committer waits for
/// the log's sync) is durable and publishes it, if it is not published yet. Called by every
/// commit about to publish, so that readers never see an `Immediate` commit before it is
/// durable: a later commit's snapshot would show it.
pub(crate) fn publish_pending(shared: &Shared, guard: &mut WriterState) -> Result<()> {
    let Some((p, end)) = guard.pending.as_ref() else {
        return Ok(());
    };
    if shared.current_txn.load(Ordering::Acquire) >= p.txn() {
        guard.pending = None;
        return Ok(());
    }
    let (p, end) = (p.clone(), *end);
    if let Err(e) = finish_immediate(shared, end, p, false) {
        guard.poisoned = true;
        return Err(e);
    }
    guard.pending = None;
    Ok(())
}

/// The log position a commit that writes pages names for replay (`Meta::log_position`): the
/// records before it are in its tree.
pub(crate) enum LogAt<'a> {
    /// The log's end when the meta page is written: the writer's commits, which hold the
    /// write lock (nothing is appended meanwhile).
    End,
    /// A given position: a checkpoint written on its own thread, while the writer appends.
    At(u64),
    /// A logged transaction that writes pages itself (`WriteTxn::commit_forced`, a large
    /// sequential batch): its writes, `body`, are appended to the log as commit `pages.txn`'s
    /// record once its pages are written and before its meta page is, so that the log holds
    /// them before any meta page names a position past them (a power loss returns to the last
    /// durable checkpoint and replays them from the log). Made durable as `durability` says
    /// through the log alone: the pages are a checkpoint, synced when the log needs the room
    /// (`Settling`). A log with no room for the record makes the commit durable by its pages
    /// instead, as a commit the log does not hold must be.
    Append {
        body: &'a [u8],
        durability: Durability,
    },
    /// A `Durability::None` transaction that writes pages itself, whose writes are not put
    /// in the log: a mark (`KIND_MARK`, no body) is appended in their place, where `Append`
    /// puts the record. A power loss that takes the pages (not synced) ends the log at the
    /// mark: the open replays up to it and drops what follows, the commits after it made on
    /// top of those pages, none of which was promised durable, since every commit that must
    /// be durable makes the mark's pages durable first (`settle_marks`). Saves the log the
    /// batch's bytes, half of what a sequential load writes, and their copy. A commit that
    /// changes what the log does not hold (a table created or dropped, properties, a batch
    /// the log has no room for) leaves one too, its meta page durable: an open from an older
    /// tree then ends the log there instead of replaying the commits after it onto a tree
    /// without it (`WriteTxn::commit_txn`).
    Mark,
}

/// Commits `pages` with `catalog` as the new catalog root. On failure the transaction leaves
/// nothing visible; a failure after the pages started reaching the disk poisons the handle.
pub(crate) fn commit(
    shared: &Shared,
    guard: &mut WriterState,
    pages: WritePages,
    catalog: TableHeader,
    durability: Durability,
    log_at: LogAt<'_>,
) -> Result<()> {
    // A logged commit still waiting for its sync is in this commit's tree: durable first.
    let pending = publish_pending(shared, guard);
    let WriterState {
        disk,
        poisoned,
        checkpoint_position,
        ..
    } = &mut *guard;
    let Some(disk) = disk.as_mut() else {
        // Never: a transaction waits for a checkpoint thread before it starts its pages.
        *poisoned = true;
        return Err(Error::Internal("a commit while a checkpoint runs".into()));
    };
    if let Err(e) = pending {
        return Err(fail_commit(disk, poisoned, pages, e, true));
    }
    let written = write_commit(shared, disk, poisoned, pages, catalog, durability, log_at)?;
    if shared.log.is_some() {
        // Everything in the log before the checkpoint's position is in the tree now; the log
        // is released up to it once the checkpoint is durable (a power loss returns to the
        // last durable one, and replays the log from its position).
        *checkpoint_position = written.meta.log_position;
    }
    let txn = written.meta.txn;
    publish_written(shared, disk, written, Published::new, txn);
    Ok(())
}

/// A commit whose pages and meta page are written (`write_commit`), not yet published.
pub(crate) struct Written {
    pub(crate) meta: Meta,
    /// The snapshot of its tree.
    pub(crate) snap: Snapshot,
    /// For a durable commit: the bytes of the file it needs; the space after them is durably
    /// unused, and given back once the commit is published.
    trim: Option<u64>,
    /// For a durable commit on a handle that writes the log: the log position before which
    /// nothing is needed any more, released once the commit is published (`publish_written`).
    release_log: Option<u64>,
}

impl Written {
    /// Releases the log before `position` too once the commit is published (a checkpoint
    /// settled before it was published, `settle_keeping_log`).
    pub(crate) fn release_after(&mut self, position: Option<u64>) {
        self.release_log = self.release_log.max(position);
    }
}

/// Writes `pages`, with `catalog` as the catalog root, as commit `pages.txn`: the pages, then
/// the meta page (naming the log position `log_at` says as the log's start for replay), synced
/// when durable. Runs with `disk` owned by the caller: the writer under the write lock, or a
/// checkpoint thread (`checkpoint`). On failure nothing is visible; a failure after the pages
/// started reaching the disk sets `poisoned`.
pub(crate) fn write_commit(
    shared: &Shared,
    disk: &mut Disk,
    poisoned: &mut bool,
    mut pages: WritePages,
    catalog: TableHeader,
    durability: Durability,
    log_at: LogAt<'_>,
) -> Result<Written> {
    let meta = match pages.prepare_commit(catalog) {
        Ok(m) => m,
        Err(e) => return Err(fail_commit(disk, poisoned, pages, e, false)),
    };
    // The meta slot about to be written may be the one a checkpoint still settling holds.
    if let Err(e) = settle(shared, disk, poisoned) {
        return Err(fail_commit(disk, poisoned, pages, e, true));
    }
    let slot = 1 - disk.durable_slot;
    // Invariant 3 (ARCHITECTURE.md): never the slot of the last durable commit.
    debug_assert!(slot < 2 && slot != disk.durable_slot);
    let page_bytes = shared.page_bytes as u64;
    let storage = &*shared.storage;

    // 1. The commit's pages, to space no preserved snapshot can reach. A failure here leaves
    //    nothing visible, so the transaction is simply rolled back.
    let needed = meta.page_count * page_bytes;
    if let Err(e) = pages.write_out(storage) {
        return Err(fail_commit(disk, poisoned, pages, e, false));
    }
    // The log position the meta page names; a transaction that writes pages and the log
    // appends its record now (`LogAt::Append`).
    let end = || shared.log.as_ref().map_or(0, |l| l.end());
    let appended = match log_at {
        LogAt::End => Ok(Some(end())),
        LogAt::At(position) => Ok(Some(position)),
        LogAt::Append {
            body,
            durability: logged,
        } => append_direct(shared, pages.txn, KIND_COMMIT, body, logged),
        LogAt::Mark => append_direct(shared, pages.txn, KIND_MARK, &[], Durability::None),
    };
    let (durability, log_position) = match appended {
        Ok(Some(position)) => (durability, position),
        // No room in the log for the record: the commit is made durable by its pages.
        Ok(None) => (Durability::Immediate, end()),
        // Appended and not written or synced: the log is failed (every later commit fails),
        // and the record may be in the file. Otherwise the log file could not grow: nothing
        // was appended.
        Err(e) => {
            let failed = shared.log.as_ref().is_some_and(|l| l.failed());
            return Err(fail_commit(disk, poisoned, pages, e, failed));
        }
    };
    let meta = seal_meta(shared, disk, &pages, meta, durability, log_position);
    // 2. Sync them, then write and sync the meta page. A failure from here on may leave the
    //    disk in an unknown state (an fsync error can drop dirty pages), so the handle stops
    //    writing: fail-stop, as PostgreSQL does after the fsync-gate findings.
    let sync = meta.durable;
    let mut write_meta = || -> Result<()> {
        if sync {
            storage.sync()?;
        }
        pages.write_meta(&meta.encode(slot), slot * page_bytes, storage)?;
        if sync {
            storage.sync()?;
        }
        Ok(())
    };
    if let Err(e) = write_meta() {
        return Err(fail_commit(disk, poisoned, pages, e, true));
    }
    if sync {
        disk.durable_slot = slot;
        disk.last_durable_txn = meta.txn;
        disk.unsynced = None;
    } else {
        disk.unsynced = Some((meta, slot));
    }
    if let Some(log) = shared.log.as_ref() {
        log.plan(needed, shared.options.checkpoint_bytes);
        if !sync && durable_checkpoint_due(shared, log.pressure()) {
            disk.settling = Some(Settling::start(shared, meta, slot));
        }
    }
    let carry = pages.finish();
    // 3. The snapshot readers will start from.
    let snap = snapshot_of(shared, &carry, meta, needed);
    disk.carry = Some(carry);
    match snap {
        Ok(snap) => Ok(Written {
            meta,
            snap,
            trim: sync.then_some(needed),
            release_log: sync.then_some(meta.log_position),
        }),
        Err(e) => {
            // The commit is on disk but cannot be read through a new mapping; stop here
            // rather than publish a snapshot that cannot be read. Reopening reads it.
            *poisoned = true;
            Err(e)
        }
    }
}

/// The log of a handle whose commit goes through it.
fn log_of(shared: &Shared) -> Result<&super::log::GroupLog> {
    shared
        .log
        .as_ref()
        .ok_or_else(|| Error::Internal("a logged commit without a log".into()))
}

/// Appends commit `txn`'s record of `kind`, `body`, to the log and makes it reach the file,
/// synced if `durability` is `Immediate` (`LogAt::Append`, `LogAt::Mark`). Returns the log's
/// end after it, or `None` when the log has no room for it (nothing appended).
fn append_direct(
    shared: &Shared,
    txn: u64,
    kind: u8,
    body: &[u8],
    durability: Durability,
) -> Result<Option<u64>> {
    let log = log_of(shared)?;
    let end = match log.append(kind, txn, body) {
        Ok(end) => end,
        Err(NoRoom::Grow(e)) => return Err(e),
        Err(NoRoom::Full | NoRoom::TooLarge) => return Ok(None),
    };
    if durability == Durability::Immediate {
        log.sync_to(end)?;
    } else {
        log.write()?;
    }
    Ok(Some(end))
}

/// Publishes a written commit as commit `txn` (the commit's own id, or for a checkpoint
/// written on its own thread, the newest commit, whose overlay `published` puts above the
/// new tree): to new readers of this handle, then to readers in other processes (after the
/// meta page is in the file, so that a reader that sees the id finds the page), then gives
/// space at the end of the file back, once it is durably unused.
pub(crate) fn publish_written(
    shared: &Shared,
    disk: &mut Disk,
    written: Written,
    published: impl FnOnce(Snapshot) -> Arc<Published>,
    txn: u64,
) {
    let meta_txn = written.meta.txn;
    let old = {
        let mut rs = shared.read_state();
        debug_assert!(txn >= rs.current.txn(), "commits publish in order");
        let new = published(written.snap);
        debug_assert_eq!(new.txn(), txn);
        shared.set_current(&mut rs, new)
    };
    retire(old);
    if let Some(lock) = shared.lock.as_ref() {
        lock.publish(meta_txn);
    }
    // Only now may the log's room before this commit be reused: a read-only handle in another
    // process reads the log from its tree's position for as long as `published` names that
    // tree, so the room goes only once a newer tree is published (docs/design/concurrency.md,
    // "Readers in other processes and the log").
    if let (Some(position), Some(log)) = (written.release_log, shared.log.as_ref()) {
        log.release_to(position);
    }
    if let (Some(needed), Some(carry)) = (written.trim, disk.carry.as_mut()) {
        carry.wmap.trim(needed);
    }
}

/// Drops the snapshot a checkpoint replaced, or one a reader let go of
/// (`ReadTxn::renew`). When it was the last to hold the overlay the checkpoint merged
/// (hundreds of megabytes of arena after a burst of large records), freeing it takes tens of
/// milliseconds: a thread of its own does it, off the writer's or the reader's thread and
/// outside the read state's lock.
pub(crate) fn retire(old: Arc<Published>) {
    let last = |o: &Option<Arc<super::upper::overlay::Overlay>>| {
        o.as_ref().is_some_and(|o| Arc::strong_count(o) == 1)
    };
    if Arc::strong_count(&old) > 1 || !(last(&old.frozen) || last(&old.overlay)) {
        return;
    }
    // A thread that cannot be started drops its closure, and `old` with it, here.
    let _ = std::thread::Builder::new()
        .name("larch-retire".into())
        .spawn(move || drop(old));
}

/// Whether a checkpoint written without a sync must be made durable (`Settling`): when the
/// log kept since the last durable checkpoint, plus another checkpoint's worth, would not fit
/// in the log's ring (`Log::plan`: it grows with the data file, so that a large tree is
/// synced as rarely per record as a small one). Until then checkpoints stay unsynced: the
/// pages one writes are freed by the next and reused by the one after (no durable commit can
/// reach them), so the same file pages are dirtied again and again in the page cache and
/// written back once, by the next durable checkpoint, instead of once per checkpoint (docs/design/write-path.md, session 10).
///
/// With checkpoints on a thread of their own (`Options::checkpoint_thread`), the writer keeps
/// appending while a checkpoint is written and while it is synced (a sync of everything the
/// unsynced checkpoints dirtied: hundreds of milliseconds at 1M commits a second), so the
/// margin is two checkpoints' worth: with one, the log filled during the sync and the commit
/// that found it full wrote pages (a durable checkpoint of its own) on the writer's thread.
///
/// The room is what is left of the ring after the log kept, or less just after the ring grew
/// (`Pressure::room_left`); and less than a segment of it always calls for a durable
/// checkpoint: the writer waits for one to give room back (`pace::before_write`), which only
/// a durable one does.
pub(crate) fn durable_checkpoint_due(shared: &Shared, p: super::log::Pressure) -> bool {
    let margin = if shared.options.checkpoint_thread {
        2
    } else {
        1
    };
    let reserve = (margin * p.checkpoint).max(p.segment);
    p.room_left() < reserve
}

/// Completes the meta page `prepare_commit` built: whether the commit is synced, and what it
/// records as durable. Unsynced commits cannot reuse pages the last durable commit reaches;
/// on a handle without the log, once those add up, this commit is made durable so that they
/// can be released.
fn seal_meta(
    shared: &Shared,
    disk: &Disk,
    pages: &WritePages,
    mut meta: Meta,
    durability: Durability,
    log_position: u64,
) -> Meta {
    let page_bytes = shared.page_bytes as u64;
    let pinned_bytes = pages.free.pinned_pages() * page_bytes;
    let pinned_bytes_max = shared
        .options
        .pinned_bytes_max
        .max(meta.page_count * page_bytes / 4);
    // A handle that writes the log makes a checkpoint durable later, on a thread of its own
    // (`Settling`), once the log would otherwise run out of room (`durable_checkpoint_due`):
    // the pages it pins are bounded by the log's room.
    let sync = durability == Durability::Immediate
        || (pinned_bytes > pinned_bytes_max && shared.log.is_none());
    meta.durable = sync;
    meta.log = shared.log.is_some()
        && !shared
            .log_detached
            .load(std::sync::atomic::Ordering::Relaxed);
    meta.log_position = if meta.log { log_position } else { 0 };
    meta.boot_id = shared.boot_id_or_zero();
    meta.last_durable_txn = if sync {
        meta.txn
    } else {
        disk.last_durable_txn
    };
    debug_assert!(meta.last_durable_txn <= meta.txn);
    meta
}

/// The snapshot of commit `meta`, read through the writer's mapping where there is one (it
/// covers every page this commit wrote), else the current read mapping, grown if needed.
fn snapshot_of(shared: &Shared, carry: &Carry, meta: Meta, needed: u64) -> Result<Snapshot> {
    let writer_map = carry
        .wmap
        .access()
        .filter(|a| a.mapped_bytes().is_some_and(|m| m >= needed));
    let access = match writer_map {
        Some(a) => a.clone(),
        None => {
            let held = shared.read_state().current.snap.access().clone();
            Access::covering(&held, &shared.storage, needed, shared.options.readahead)?
        }
    };
    Ok(Snapshot::new(meta, access, shared.options.verify_checksums))
}

/// Cleans up after a commit that failed: the free set is reloaded from the last committed
/// snapshot (which it equals by construction: each commit persists exactly its free set), so
/// the half-prepared commit leaves no trace. With `poison`, the handle refuses further writes.
fn fail_commit(
    disk: &mut Disk,
    poisoned: &mut bool,
    pages: WritePages,
    e: Error,
    poison: bool,
) -> Error {
    let base = pages.base.clone();
    let mut carry = pages.finish();
    carry.chain = None;
    match base.load_free_set() {
        Ok(free) => carry.free = free,
        Err(_) => *poisoned = true,
    }
    disk.carry = Some(carry);
    if poison {
        *poisoned = true;
    }
    e
}

/// A checkpoint written without a sync (`Durability::None`; the automatic checkpoints of a
/// handle that writes the log) that the log's room calls to be made durable
/// (`durable_checkpoint_due`; the others are never synced): a thread syncs the file while the writer
/// goes on with logged commits, which do not touch the file. `settle` completes it before
/// the next commit that writes pages (whose meta page goes to the slot this one holds), and
/// as soon as the sync is done at the start of any write transaction; a checkpoint written on
/// a thread of its own (`checkpoint`) is settled by that thread before it ends.
///
/// Until then, the last durable checkpoint stays the one a power loss returns to: the log is
/// kept from its position, and the pages it reaches are not reused (`last_durable_txn`).
/// A process crash meanwhile keeps the new checkpoint (its meta page is trusted in the same
/// boot, durability.md); the next open replays from it and keeps the log from the durable
/// one's position (the other meta slot's), as this handle did, so that it settles later,
/// when the log needs the room, instead of syncing at open whatever the crashed process left
/// in the page cache.
pub(crate) struct Settling {
    meta: Meta,
    slot: u64,
    sync: Option<std::thread::JoinHandle<std::io::Result<()>>>,
    /// The sync's result when it ran in the writer's thread (no thread could be started).
    done: Option<std::io::Result<()>>,
}

impl Settling {
    fn start(shared: &Shared, meta: Meta, slot: u64) -> Settling {
        let storage = shared.storage.clone();
        let spawned = std::thread::Builder::new()
            .name("larch-checkpoint-sync".into())
            .spawn(move || storage.sync());
        let (sync, done) = match spawned {
            Ok(handle) => (Some(handle), None),
            Err(_) => (None, Some(shared.storage.sync())),
        };
        Settling {
            meta,
            slot,
            sync,
            done,
        }
    }

    /// The checkpoint being made durable.
    pub(crate) fn txn(&self) -> u64 {
        self.meta.txn
    }

    /// Whether the sync has finished (settling then waits for nothing).
    pub(crate) fn synced(&self) -> bool {
        self.sync.as_ref().is_none_or(|h| h.is_finished())
    }

    fn wait(&mut self) -> std::io::Result<()> {
        match self.sync.take() {
            Some(h) => h
                .join()
                .unwrap_or_else(|_| Err(std::io::Error::other("the sync thread panicked"))),
            None => self
                .done
                .take()
                .unwrap_or_else(|| Err(std::io::Error::other("the sync was collected twice"))),
        }
    }
}

impl Drop for Settling {
    fn drop(&mut self) {
        // A handle closed meanwhile: the sync finishes before the file is released (its
        // result does not matter, the checkpoint's meta page says it was not synced).
        if let Some(h) = self.sync.take() {
            let _ = h.join();
        }
    }
}

/// Completes the checkpoint `guard.settling` names, if any: waits for its sync, writes its
/// meta page again as durable and syncs that, then releases the log before it. A failure
/// poisons the handle (fail-stop, as every failed sync). Requires: that checkpoint is
/// published (`settle_keeping_log` otherwise).
pub(crate) fn settle(shared: &Shared, disk: &mut Disk, poisoned: &mut bool) -> Result<()> {
    if let (Some(position), Some(log)) = (
        settle_keeping_log(shared, disk, poisoned)?,
        shared.log.as_ref(),
    ) {
        log.release_to(position);
    }
    Ok(())
}

/// `settle`, for a checkpoint not published yet: returns the log position to release once it
/// is (`Written::release_after`).
pub(crate) fn settle_keeping_log(
    shared: &Shared,
    disk: &mut Disk,
    poisoned: &mut bool,
) -> Result<Option<u64>> {
    let Some(mut s) = disk.settling.take() else {
        return Ok(None);
    };
    let synced = s.wait().map_err(Error::from);
    let meta = synced.and_then(|()| make_durable(&*shared.storage, s.meta, s.slot));
    let meta = match meta {
        Ok(m) => m,
        Err(e) => {
            *poisoned = true;
            return Err(e);
        }
    };
    disk.durable_slot = s.slot;
    disk.last_durable_txn = meta.txn;
    if disk.unsynced.is_some_and(|(m, _)| m.txn <= meta.txn) {
        disk.unsynced = None;
    }
    Ok(Some(meta.log_position))
}

/// Whether the commit `guard.marked` names, which left only a mark in the log
/// (`LogAt::Mark`), may not be durable yet; forgets it once it is. Unknown (true) while a
/// checkpoint thread holds the disk state.
pub(crate) fn mark_unsettled(guard: &mut WriterState) -> bool {
    let Some(marked) = guard.marked else {
        return false;
    };
    match guard.disk.as_ref() {
        Some(disk) if marked <= disk.last_durable_txn => {
            guard.marked = None;
            false
        }
        _ => true,
    }
}

/// Makes the newest commit that wrote pages durable if a mark may not be (`mark_unsettled`):
/// called under the write lock, with no checkpoint being written, before a commit that must
/// be durable appends its record, so that a sync of the log that makes that record durable
/// never leaves a mark before it whose pages a power loss may take (the open would end the
/// log at the mark and drop the record). Syncs the data file, writes the newest meta page
/// again as durable and syncs that (as `settle` does for a checkpoint), then releases the
/// log before it. A failure poisons the handle.
pub(crate) fn settle_marks(shared: &Shared, guard: &mut WriterState) -> Result<()> {
    let WriterState { disk, poisoned, .. } = &mut *guard;
    let disk = disk.as_mut().ok_or(Error::Poisoned)?;
    settle(shared, disk, poisoned)?;
    if !mark_unsettled(guard) {
        return Ok(());
    }
    let WriterState {
        disk,
        poisoned,
        marked,
        ..
    } = &mut *guard;
    let disk = disk.as_mut().ok_or(Error::Poisoned)?;
    let Some((meta, slot)) = disk.unsynced else {
        return Err(Error::Internal(
            "a mark with no meta page to make durable".into(),
        ));
    };
    let durable = shared
        .storage
        .sync()
        .map_err(Error::from)
        .and_then(|()| make_durable(&*shared.storage, meta, slot));
    let meta = match durable {
        Ok(m) => m,
        Err(e) => {
            *poisoned = true;
            return Err(e);
        }
    };
    disk.durable_slot = slot;
    disk.last_durable_txn = meta.txn;
    disk.unsynced = None;
    *marked = None;
    if let Some(log) = shared.log.as_ref() {
        log.release_to(meta.log_position);
    }
    Ok(())
}

/// Writes `meta`, whose pages are synced, again in `slot` as a durable commit, and syncs it.
/// Returns the durable meta.
pub(crate) fn make_durable(
    storage: &dyn crate::storage::Storage,
    meta: Meta,
    slot: u64,
) -> Result<Meta> {
    let mut meta = meta;
    meta.durable = true;
    meta.last_durable_txn = meta.txn;
    storage.write_at(&meta.encode(slot), slot * meta.page_bytes as u64)?;
    storage.sync()?;
    Ok(meta)
}
