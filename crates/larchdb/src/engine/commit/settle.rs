//! Settling: a checkpoint made durable on a thread of its own, off the writer's path (the
//! log's records it needs, its pages, then its meta page: `Settling`), and the pages of a
//! `None` batch's mark made durable before a commit that must be durable (`settle_marks`).

use super::*;
use crate::engine::Counters;
use std::sync::atomic::AtomicU64;
use std::time::Instant;

/// A checkpoint written without a sync (`Durability::None`; the automatic checkpoints of a
/// handle that writes the log) that the log's room calls to be made durable
/// (`durable_checkpoint_due`), or a slice's (every one, `engine::checkpoint`; the others are
/// never synced): a thread syncs the log as far as the checkpoint needs it, then the data
/// file, then writes its meta page again as durable and syncs that (`make_durable`), while
/// the writer goes on with logged commits, which do not touch the file, and the checkpoint
/// thread with the next slice's merge. `settle` collects it before the next commit that
/// writes a meta page (which goes to the other slot, once this one is durable), and as soon
/// as the thread is done at the start of any write transaction; a whole checkpoint written on
/// a thread of its own is settled by that thread before it ends.
///
/// Until then, the handle counts the last durable checkpoint as the one a power loss returns
/// to: the log is kept from its position, and the pages it reaches are not reused
/// (`last_durable_txn`). (Once the thread has written the new meta page, a power loss returns
/// to the new checkpoint instead, whose records and pages were synced first: keeping the old
/// one's is only the safe side.)
/// A process crash meanwhile keeps the new checkpoint (its meta page is trusted in the same
/// boot, durability.md); the next open replays from it and keeps the log from the durable
/// one's position (the other meta slot's), as this handle did, so that it settles later,
/// when the log needs the room, instead of syncing at open whatever the crashed process left
/// in the page cache.
pub(crate) struct Settling {
    pub(super) meta: Meta,
    pub(super) slot: u64,
    pub(super) sync: Option<std::thread::JoinHandle<Result<Meta>>>,
    /// The result when the work ran in the writer's thread (no thread could be started).
    pub(super) done: Option<Result<Meta>>,
    /// Where `wait` adds the time it waited (`Counters::checkpoint_sync_wait_micros`).
    pub(super) waited: Arc<AtomicU64>,
}

impl Settling {
    /// Starts making the checkpoint `meta` (in `slot`) durable: the log synced up to
    /// `log_to` where the checkpoint needs records after the position it names (a slice's:
    /// `LogAt::Slice`), the data file synced, then the meta page written again as durable and
    /// synced (`make_durable`), all on a thread of its own, so that the thread that wrote the
    /// checkpoint goes on to the next meanwhile.
    ///
    /// `paced`: the runs of pages (first page, pages) the checkpoint wrote, when it ran beside
    /// readers that waited on the device: their writeback is started a few at a time
    /// (`write_back_paced`) before the data file's sync, which then finds little left to do.
    pub(super) fn start(
        shared: &Shared,
        meta: Meta,
        slot: u64,
        log_to: Option<u64>,
        paced: Option<Vec<(u64, u64)>>,
    ) -> Settling {
        let storage = shared.storage.clone();
        let log = log_to.and(shared.log.clone());
        let took = shared.counters.checkpoint_sync_micros.clone();
        let page_bytes = shared.page_bytes as u64;
        let work = move || -> Result<Meta> {
            let started = Instant::now();
            let durable = (|| {
                if let (Some(log), Some(to)) = (log.as_deref(), log_to) {
                    log.sync_to(to)?;
                }
                if let Some(runs) = paced.as_deref() {
                    write_back_paced(&*storage, runs, page_bytes)?;
                }
                storage.sync()?;
                make_durable(&*storage, meta, slot)
            })();
            Counters::add_micros(&took, started);
            durable
        };
        let spawned = shared
            .background
            .spawn("larch-checkpoint-sync", 0, work.clone());
        let (sync, done) = match spawned {
            Some(handle) => (Some(handle), None),
            None => (None, Some(work())),
        };
        Settling {
            meta,
            slot,
            sync,
            done,
            waited: shared.counters.checkpoint_sync_wait_micros.clone(),
        }
    }

    /// The checkpoint being made durable.
    pub(crate) fn txn(&self) -> u64 {
        self.meta.txn
    }

    /// Whether the work has finished (settling then waits for nothing).
    pub(crate) fn synced(&self) -> bool {
        self.sync.as_ref().is_none_or(|h| h.is_finished())
    }

    /// Waits for the thread to end, keeping its result for `wait` (the close:
    /// `Background::stop`).
    pub(crate) fn join(&mut self) {
        if let Some(h) = self.sync.take() {
            self.done = Some(h.join().unwrap_or_else(|_| {
                Err(Error::Internal(
                    "the checkpoint's sync thread panicked".into(),
                ))
            }));
        }
    }

    /// The durable meta page, once the work is done.
    pub(super) fn wait(&mut self) -> Result<Meta> {
        let started = Instant::now();
        self.join();
        Counters::add_micros(&self.waited, started);
        self.done.take().unwrap_or_else(|| {
            Err(Error::Internal(
                "a checkpoint's sync collected twice".into(),
            ))
        })
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

/// Starts making the newest commit written without a sync durable, on a thread of its own,
/// unless one is being made so already: a slice of a checkpoint by slices, whose sync then
/// overlaps the next slice's merge (`engine::checkpoint`). That next slice waits for it before
/// its own meta page (`write_commit` settles first). `paced`: as `Settling::start`.
pub(crate) fn start_settling(
    shared: &Shared,
    disk: &mut Disk,
    log_to: Option<u64>,
    paced: Option<Vec<(u64, u64)>>,
) {
    if disk.settling.is_none() {
        if let Some((meta, slot)) = disk.unsynced {
            disk.settling = Some(Settling::start(shared, meta, slot, log_to, paced));
        }
    }
}

/// Starts the writeback of `runs` (first page, pages; ascending) a few pages at a time
/// (`storage::Paced`), so that the data file's sync after it finds little left to hand the
/// device at once (pages the checkpoint added after its runs were taken). A failed wait is a
/// failed sync.
fn write_back_paced(
    storage: &dyn crate::storage::Storage,
    runs: &[(u64, u64)],
    page_bytes: u64,
) -> Result<()> {
    let mut paced = crate::storage::Paced::default();
    for &(page, pages) in runs {
        paced.start(storage, page * page_bytes, pages * page_bytes)?;
    }
    Ok(())
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
    let meta = match s.wait() {
        Ok(m) => m,
        Err(e) => {
            *poisoned = true;
            return Err(e);
        }
    };
    disk.durable_slot = s.slot;
    disk.last_durable_txn = meta.txn;
    shared.runs_durable(meta.txn);
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
    shared.runs_durable(meta.txn);
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
