//! Settling: a checkpoint's pages made durable by a sync on a thread of its own, off the
//! writer's path (`Settling`), and the pages of a `None` batch's mark made durable before a
//! commit that must be durable (`settle_marks`).

use super::*;

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
    pub(super) meta: Meta,
    pub(super) slot: u64,
    pub(super) sync: Option<std::thread::JoinHandle<std::io::Result<()>>>,
    /// The sync's result when it ran in the writer's thread (no thread could be started).
    pub(super) done: Option<std::io::Result<()>>,
}

impl Settling {
    pub(super) fn start(shared: &Shared, meta: Meta, slot: u64) -> Settling {
        let storage = shared.storage.clone();
        let spawned = shared
            .background
            .spawn("larch-checkpoint-sync", 0, move || storage.sync());
        let (sync, done) = match spawned {
            Some(handle) => (Some(handle), None),
            None => (None, Some(shared.storage.sync())),
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

    /// Waits for the sync's thread to end, keeping its result for `wait` (the close:
    /// `Background::stop`).
    pub(crate) fn join(&mut self) {
        if let Some(h) = self.sync.take() {
            self.done = Some(
                h.join()
                    .unwrap_or_else(|_| Err(std::io::Error::other("the sync thread panicked"))),
            );
        }
    }

    /// The sync's result, once it is done.
    pub(super) fn wait(&mut self) -> std::io::Result<()> {
        self.join();
        self.done
            .take()
            .unwrap_or_else(|| Err(std::io::Error::other("the sync was collected twice")))
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
/// its own meta page (`write_commit` settles first).
pub(crate) fn start_settling(shared: &Shared, disk: &mut Disk) {
    if disk.settling.is_none() {
        if let Some((meta, slot)) = disk.unsynced {
            disk.settling = Some(Settling::start(shared, meta, slot));
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
