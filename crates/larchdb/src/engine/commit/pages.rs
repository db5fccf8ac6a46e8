//! A commit that writes pages: the pages, then the meta page, synced when durable, then
//! published; the log position the meta page names, and what a durable commit releases.

use super::*;

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
    // Large values go to runs from reservations that checkpoints take, and so does a commit
    // of pages (a checkpoint on the writer's thread, `checkpoint_thread(false)`, or a
    // transaction that writes pages): `runs::reserve`.
    let mut pages = pages;
    let named = shared.runs_named();
    let (reserved, freed) = match runs::reserve(shared, &mut pages, named) {
        Ok(r) => r,
        Err(e) => return Err(fail_commit(disk, poisoned, pages, e, false)),
    };
    let txn = pages.txn;
    let cold_spilled = pages.cold_spilled();
    let written = match write_commit(shared, disk, poisoned, pages, catalog, durability, log_at) {
        Ok(w) => w,
        Err(e) => {
            runs::keep_leftovers(shared, freed);
            return Err(e);
        }
    };
    shared
        .counters
        .cold_pages_spilled
        .fetch_add(cold_spilled, std::sync::atomic::Ordering::Relaxed);
    if let Some(extents) = reserved {
        let mut space = shared.runs.lock().unwrap_or_else(|e| e.into_inner());
        space.offer(txn, extents);
        // A durable commit: the writer moves to it now (`write_commit` promoted before).
        shared.promote_runs(&mut space, disk.last_durable_txn);
    }
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
    pub(super) trim: Option<u64>,
    /// For a durable commit on a handle that writes the log: the log position before which
    /// nothing is needed any more, released once the commit is published (`publish_written`).
    pub(super) release_log: Option<u64>,
    /// The runs of pages (first page, pages) the commit freed: pages of the tree it replaces
    /// (`forget_replaced`).
    freed: Vec<(u64, u64)>,
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
    // A meta page that names the log's end, or the position past this commit's own record
    // or mark (a commit of pages applied the overlays' records first), holds every commit
    // before it: a replay from it reads only later ones, and the overflow runs deferred that
    // earlier commits wrote are freed by this one (`WritePages::defer_runs`).
    if matches!(log_at, LogAt::End | LogAt::Append { .. } | LogAt::Mark) {
        let horizon = pages.txn + 1;
        pages.defer_horizon(horizon);
    }
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
    // Its pages go behind where a sync follows them (`seal_meta`'s rule; one that finds no
    // room in the log below, made durable by its pages, writes them through the page cache).
    let synced = durability == Durability::Immediate;
    if let Err(e) = pages.write_out(storage, synced) {
        return Err(fail_commit(disk, poisoned, pages, e, false));
    }
    // The log position the meta page names; a transaction that writes pages and the log
    // appends its record now (`LogAt::Append`).
    let end = || shared.log.as_ref().map_or(0, |l| l.end());
    let log_to = match log_at {
        LogAt::At { log_to, .. } => log_to,
        _ => None,
    };
    let appended = match log_at {
        LogAt::End => Ok(Some(end())),
        LogAt::At { position, .. } => Ok(Some(position)),
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
            if let (Some(log), Some(to)) = (shared.log.as_ref(), log_to) {
                log.sync_to(to)?;
            }
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
        shared.runs_durable(meta.txn);
        disk.unsynced = None;
    } else {
        disk.unsynced = Some((meta, slot));
    }
    if let Some(log) = shared.log.as_ref() {
        let sliced = crate::engine::checkpoint::sliced(&shared.options, needed, shared.page_bytes);
        let overlays = crate::engine::admission::budget::ring_overlay_bytes(shared);
        log.plan(needed, shared.options.checkpoint_bytes, sliced, overlays);
        if !sync && durable_checkpoint_due(shared, log.pressure()) {
            disk.settling = Some(Settling::start(shared, meta, slot, log_to, None));
        }
    }
    let freed = pages.take_freed();
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
            freed,
        }),
        Err(e) => {
            // The commit is on disk but cannot be read through a new mapping; stop here
            // rather than publish a snapshot that cannot be read. Reopening reads it.
            *poisoned = true;
            Err(e)
        }
    }
}

/// Appends commit `txn`'s record of `kind`, `body`, to the log and makes it reach the file,
/// synced if `durability` is `Immediate` (`LogAt::Append`, `LogAt::Mark`). Returns the log's
/// end after it, or `None` when the log has no room for it (nothing appended).
pub(super) fn append_direct(
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
    forget_replaced(&old, &written.freed);
    retire(shared, old);
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

/// Below this many pages, what a commit freed is left mapped until the free set releases it
/// (`Shared::release_pending`): a page commit frees a few pages and reuses them at once.
const FORGET_AT_PUBLISH_PAGES: u64 = 1024;

/// Drops the pages a commit freed (`freed`, pages of `old`'s tree) from the process's resident
/// set as soon as it is published, on the publishing thread: readers move to the new tree at
/// once and map its pages as fast as they read them (the kernel maps a fault's neighbours
/// too), so with the old tree's pages left mapped until the free set released them, or even
/// for the few milliseconds a thread of its own took to start, a checkpoint that rewrote the
/// tree held both trees resident: the process's peak was two trees and the log. Measured on
/// 1M records with 4 readers: 0.2-17 ms a checkpoint (a system call per run, about 300 runs
/// for a rewritten tree). A reader still on the old tree maps again what it reads, and the
/// free set's release drops those (`FreeSet::take_unread`).
fn forget_replaced(old: &Published, freed: &[(u64, u64)]) {
    let pages: u64 = freed.iter().map(|r| r.1).sum();
    if pages >= FORGET_AT_PUBLISH_PAGES {
        old.snap
            .access()
            .forget_runs(old.snap.meta.page_bytes as usize, freed);
    }
}

/// Drops the snapshot a checkpoint replaced, or one a reader let go of
/// (`ReadTxn::renew`). When it was the last to hold the overlay the checkpoint merged
/// (hundreds of megabytes of arena after a burst of large records), freeing it takes tens of
/// milliseconds: a thread of its own does it, off the writer's or the reader's thread and
/// outside the read state's lock.
pub(crate) fn retire(shared: &Shared, old: Arc<Published>) {
    fn last<T>(o: &Option<Arc<T>>) -> bool {
        o.as_ref().is_some_and(|o| Arc::strong_count(o) == 1)
    }
    if Arc::strong_count(&old) > 1 || !(last(&old.frozen) || last(&old.overlay)) {
        return;
    }
    shared.background.drop_beside(old);
}

/// Whether a checkpoint written without a sync must be made durable (`Settling`): when the
/// log kept since the last durable checkpoint, plus another checkpoint's worth, would not fit
/// in the log's ring (`Log::plan`: it grows with the data file, so that a large tree is
/// synced as rarely per record as a small one). Until then checkpoints stay unsynced: the
/// pages one writes are freed by the next and reused by the one after (no durable commit can
/// reach them), so the same file pages are dirtied again and again in the page cache and
/// written back once, by the next durable checkpoint, instead of once per checkpoint
/// (docs/design/write-path.md, "Unsynced and durable checkpoints, and the log's release").
///
/// With checkpoints on a thread of their own (`Options::checkpoint_thread`), the writer keeps
/// appending while a checkpoint is written and while it is synced (a sync of everything the
/// unsynced checkpoints dirtied: hundreds of milliseconds at 1M commits a second), so the
/// margin is two checkpoints' worth: with one, the log filled during the sync and the commit
/// that found it full wrote pages (a durable checkpoint of its own) on the writer's thread.
///
/// The room is what is left of the ring after the log kept, or less just after the ring grew
/// (`Pressure::room_left`); and less than a segment of it always calls for a durable
/// checkpoint: the writer waits for one to give room back (`admission::make_room`), which only
/// a durable one does.
pub(crate) fn durable_checkpoint_due(shared: &Shared, p: crate::engine::log::Pressure) -> bool {
    log_short(p, shared.options.checkpoint_thread) || runs_due(shared, &p)
}

/// Whether the runs that records a replay may read name (`NamedRuns`), with the large values
/// that went into the log for want of a reservation (`Shared::runs_missed`), hold the runs'
/// interval (`Pressure::runs`: a 32nd of the file, at least an eighth of the smallest
/// checkpoint, at most a checkpoint's log bytes): a durable checkpoint is then due, of the
/// slice holding the oldest records.
///
/// A run freed while a record names it waits until no replay reads that record, and the
/// log's room counts the record (about 50 bytes), not its value: with the overlays in slices
/// the oldest one waited for the log's room, about a million records, and every run freed
/// until then waited with it; 10,000 values of 4,000 bytes overwritten 100,000 times grew the
/// open file to 86,678 pages (docs/design/large-values.md, "The open file of a small
/// database"). The values that missed a reservation count because only a checkpoint takes
/// the next one: a writer without one names no runs, and would wait for the log's bytes.
pub(crate) fn runs_due(shared: &Shared, p: &crate::engine::log::Pressure) -> bool {
    use std::sync::atomic::Ordering::Relaxed;
    let pages = shared.named_run_pages.load(Relaxed) + shared.runs_missed.load(Relaxed);
    pages.saturating_mul(u64::from(shared.page_bytes)) >= p.runs
}

/// `durable_checkpoint_due`, for a handle whose checkpoints run on a thread of their own
/// (`Options::checkpoint_thread`) or not, where the handle is not at hand (a checkpoint's
/// thread).
pub(crate) fn log_short(p: crate::engine::log::Pressure, checkpoint_thread: bool) -> bool {
    let margin = if checkpoint_thread {
        crate::engine::log::RESERVE_CHECKPOINTS
    } else {
        1
    };
    let reserve = (margin * p.checkpoint).max(p.segment);
    p.room_left() < reserve
}

/// The pages unsynced commits may keep pinned for the last durable one before one is made
/// durable: `Options::pinned_bytes_max`, or a quarter of a file of `page_count` pages if more.
pub(crate) fn pinned_bytes_bound(shared: &Shared, page_count: u64) -> u64 {
    let page_bytes = shared.page_bytes as u64;
    shared
        .options
        .pinned_bytes_max
        .max(page_count * page_bytes / 4)
}

/// Completes the meta page `prepare_commit` built: whether the commit is synced, and what it
/// records as durable. Unsynced commits cannot reuse pages the last durable commit reaches;
/// on a handle without the log, once those add up, this commit is made durable so that they
/// can be released.
pub(super) fn seal_meta(
    shared: &Shared,
    disk: &Disk,
    pages: &WritePages,
    mut meta: Meta,
    durability: Durability,
    log_position: u64,
) -> Meta {
    let page_bytes = shared.page_bytes as u64;
    let pinned_bytes = pages.free.pinned_pages() * page_bytes;
    let pinned_bytes_max = pinned_bytes_bound(shared, meta.page_count);
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
pub(super) fn snapshot_of(
    shared: &Shared,
    carry: &Carry,
    meta: Meta,
    needed: u64,
) -> Result<Snapshot> {
    let writer_map = carry
        .wmap
        .access()
        .filter(|a| a.mapped_bytes().is_some_and(|m| m >= needed));
    let access = match writer_map {
        Some(a) => a.clone(),
        None => {
            let held = shared.read_state().current.snap.access().clone();
            Access::covering(
                &held,
                &shared.storage,
                needed,
                crate::engine::admission::budget::readahead(&shared.options),
            )?
        }
    };
    Ok(Snapshot::new(meta, access, shared.options.verify_checksums))
}

/// Cleans up after a commit that failed: the free set is reloaded from the last committed
/// snapshot (which it equals by construction: each commit persists exactly its free set), so
/// the half-prepared commit leaves no trace. With `poison`, the handle refuses further writes.
pub(super) fn fail_commit(
    disk: &mut Disk,
    poisoned: &mut bool,
    mut pages: WritePages,
    e: Error,
    poison: bool,
) -> Error {
    let base = pages.base.clone();
    let (mut deferred, own) = pages.take_deferred();
    let mut carry = pages.finish();
    carry.chain = None;
    // The overflow runs deferred are in no free set on the file: kept (`FreeSet::defer`),
    // but for those this transaction deferred, which its base tree references still.
    deferred.extend(carry.free.take_deferred());
    if !own.is_empty() {
        let own: std::collections::HashSet<(u64, u64)> =
            own.iter().map(|r| (r.start, r.born)).collect();
        deferred.retain(|r| !own.contains(&(r.start, r.born)));
    }
    match base.load_free_set() {
        Ok(free) => carry.free = free,
        Err(_) => *poisoned = true,
    }
    carry.free.defer(deferred);
    disk.carry = Some(carry);
    if poison {
        *poisoned = true;
    }
    e
}
