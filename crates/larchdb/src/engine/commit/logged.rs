//! A commit through the log: its record appended to the log and inserted into the overlay,
//! published at once (`None`, `Bounded`) or once the group sync it waits for is done
//! (`Immediate`, `finish_immediate`).

use super::*;
use crate::engine::log::{pack, Pressure, PACK_BYTES_MIN};
use crate::engine::upper::slices::Slices;
use crate::engine::Counters;
use crate::layout::log::KIND_PACKED;

/// Commits a record that did not pack smaller (`log::pack`) skips before the next try: values
/// that do not compress cost a try every `PACK_SKIP` commits, not every commit. A 200K-record
/// YCSB load of values that do not compress lost 7-13% trying each.
const PACK_SKIP: u32 = 32;

/// Without the pacing binding, a commit's record is packed only while the log holds more than
/// `1 / PACK_KEPT_FRACTION` of its ring's room (`packing_pays`).
const PACK_KEPT_FRACTION: u64 = 2;

/// Whether the next commit's record is worth packing (decided by `make_room` as the
/// transaction starts: `WriterState::pack_next`), the log being as `p` says; `log_binds`:
/// the log's room held the writer back at the pacer's last reading (`Pacer::log_binds`);
/// `waiting`: another writer waits for the write lock.
///
/// Packing costs the writer CPU under the write lock, the time of any writer waiting for it
/// too, and gives back the log's room: fewer bytes a record, so less pacing, and more records
/// each checkpoint merges. So a record is packed where the room holds the writer back, or
/// where the log holds more than half its room and no other writer waits: the room will bind
/// soon, and the packing costs no one else. Measured (docs/design/performance.md, "Packed
/// commits"): YCSB's load, A and F kept the 1.4-1.6x packing every record gave them, and
/// pmemkv's two-thread `fillseq` of 1 KB values, whose second thread's puts are not appends,
/// went from 336-351K puts a second packing every record back to 486-509K (its checkpoints
/// keep up, and each writer waited on the lock the other's packing held). Packing only where
/// the pacing binds lost a sixth of the load (the ring filled unpacked first); packing past
/// half the room whoever waits made 456-471K on that `fillseq`.
pub(crate) fn packing_pays(p: Pressure, log_binds: bool, waiting: bool) -> bool {
    log_binds || (!waiting && p.room_left() < p.room / PACK_KEPT_FRACTION)
}

/// Capacity the writer's packed record (`WriterState::packed`) keeps from one commit to the
/// next: a large transaction's does not stay for the handle's life.
const PACKED_KEPT_BYTES: usize = 1 << 20;

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

/// Commits the writer's batch (`WriterState::batch`) through the log, on top of commit
/// `base`: one log record, appended to the log and inserted into the overlay, and the entry
/// counts of the tables it changed set in the snapshot it publishes. A `None` or `Bounded` commit is written to the log file and
/// published at once; an `Immediate` one becomes the writer's `pending` commit, published by its committer
/// once the log is synced (`finish_immediate`, after the write lock is let go). Returns
/// `None`, with nothing done, when the log has no room for the record: the caller then
/// commits by writing pages. A failed write or sync of the log poisons the handle
/// (fail-stop).
/// How many of a logged commit's writes have their overlay slot prefetched before the record
/// is encoded and appended (`Overlay::prefetch_slot`).
pub(super) const PREFETCH_WRITES: usize = 4;

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
        counts.push((id, state.hdr.entries));
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
    let fresh_overlay;
    let overlay = match &base.overlay {
        Some(o) => o,
        None => {
            fresh_overlay = super::super::checkpoint::new_slices(shared, base)?;
            &fresh_overlay
        }
    };
    // A few slots are enough: a larger batch's later inserts overlap the earlier ones.
    for (table, key, ..) in guard.batch.iter().take(PREFETCH_WRITES) {
        overlay.prefetch_slot(table, key);
    }
    // Values too large for a leaf go into runs of their own where there is room
    // (`runs::write_runs`): not for a commit that must be durable now, whose group's one sync
    // would become two (docs/design/large-values.md).
    // The runs this commit writes, and only those, are what a failure below gives back
    // (`runs::runs_unused`): an earlier commit's are named by its record.
    guard.run_pages.clear();
    if !immediate && log.runs_allowed() {
        match super::runs::write_runs(shared, guard, base, txn) {
            // Marked before the record is appended: a sync that takes it syncs them first.
            Ok(true) => log.runs_written(log.end()),
            Ok(false) => {}
            Err(e) => {
                guard.poisoned = true;
                return Err(e);
            }
        }
    }
    let pending_none = guard.pending.is_none();
    let WriterState {
        batch,
        record,
        packed,
        pack_skip,
        pack_next,
        ..
    } = &mut *guard;
    let encoded = batch.encode(
        |id| {
            base.catalog
                .name(&base.snap, id)?
                .ok_or_else(|| Error::Internal(format!("no table numbered {id}")))
        },
        record,
    );
    if let Err(e) = encoded {
        // No record names the runs written for it.
        super::runs::runs_unused(shared, guard);
        return Err(e);
    }
    // Appends at a table's end are merged by cheap sequential checkpoints that keep up with
    // the log: packing them would cost the writer's CPU and give the room nothing back (a
    // one-put `fillseq` of 1 KB values lost 28%). Nor is a record packed while the log's room
    // has no need of it (`packing_pays`).
    let appends = batch.appended() >= batch.len();
    let packs = match *pack_skip {
        0 if *pack_next && !appends && log.packed_allowed() && record.len() >= PACK_BYTES_MIN => {
            let packs = pack(record, packed);
            if !packs {
                *pack_skip = PACK_SKIP;
            }
            packs
        }
        0 => false,
        _ => {
            *pack_skip -= 1;
            false
        }
    };
    let (kind, body) = match packs {
        true => (KIND_PACKED, &packed[..]),
        false => (KIND_COMMIT, &record[..]),
    };
    // A commit that is not `Immediate` is handed to the file with its append, so that a
    // process crash keeps it; and published below, after any `Immediate` commit before it is
    // durable (waited for first, then, unless there is none: the common case takes the
    // group's lock once).
    let write_now = !immediate && pending_none;
    // The record goes at or after `start` (a pad may come first).
    let appended = log.append_written(kind, txn, body, write_now);
    if packed.capacity() > PACKED_KEPT_BYTES {
        *packed = Vec::new();
    }
    let (start, end) = match appended {
        Ok(at) => at,
        Err(AppendFailed::Write(e)) => {
            guard.poisoned = true;
            return Err(e);
        }
        // The log file could not grow (a full disk): this commit fails, nothing was written,
        // and no record names the runs written for it.
        Err(AppendFailed::NoRoom(NoRoom::Grow(e))) => {
            super::runs::runs_unused(shared, guard);
            return Err(e);
        }
        Err(AppendFailed::NoRoom(NoRoom::Full | NoRoom::TooLarge)) => {
            // The batch goes to pages with its values: no record names the runs written.
            super::runs::runs_unused(shared, guard);
            return Ok(None);
        }
    };
    if packs {
        Counters::add(&shared.counters.packed_commits);
    }
    if !immediate && !write_now {
        let written = publish_pending(shared, guard).and_then(|()| log.write());
        if let Err(e) = written {
            guard.poisoned = true;
            return Err(e);
        }
    }
    overlay.insert_marked(txn, guard.batch.iter(), start);
    // The counts go on in the base's log, unless it has no room for a table (or there is
    // none): a new log then, from its newest counts.
    let fresh_log;
    let log = match base.counts() {
        // SAFETY: this writer holds the write lock, and `base` is the newest snapshot.
        Some(l) if counts.iter().all(|&(t, n)| unsafe { l.push(t, txn, n) }) => l,
        l => {
            fresh_log = Arc::new(CountLog::after(l.map(|l| &**l), counts.iter().copied()));
            &fresh_log
        }
    };
    guard.counts = counts;
    if immediate {
        let published = Published::logged(base, overlay.clone(), txn, Some(log.clone()));
        guard.pending = Some((published.clone(), end));
        return Ok(Some(LoggedCommit {
            txn,
            wait: Some((end, published)),
        }));
    }
    publish_logged(shared, base, overlay, txn, log, end);
    Ok(Some(LoggedCommit { txn, wait: None }))
}

/// Publishes a `None` or `Bounded` commit `txn`, in `overlay` on top of `base`'s tree with the
/// entry counts `log` (`Published::logged`), as `publish` does. The snapshot it replaces, when
/// of the same shape as this one, is kept (`ReadState::spare`) and, once no reader holds it,
/// becomes the next commit's snapshot with only its id changed: no allocation, and none of
/// its parts' counts taken and given back, at every one-put commit.
fn publish_logged(
    shared: &Shared,
    base: &Published,
    overlay: &Arc<Slices>,
    txn: u64,
    log: &Arc<CountLog>,
    end: u64,
) {
    // Declared before the lock, so dropped after it is let go.
    let _stale;
    let mut rs = shared.read_state();
    if rs.current.txn() >= txn {
        return;
    }
    let reused = rs
        .spare
        .take()
        .map(|mut spare| match Arc::get_mut(&mut spare) {
            Some(p) if p.same_parts(base, overlay, log) => {
                p.set_txn(txn);
                Ok(spare)
            }
            _ => Err(spare),
        });
    let published = match reused {
        Some(Ok(spare)) => spare,
        stale => {
            _stale = stale;
            Published::logged(base, overlay.clone(), txn, Some(log.clone()))
        }
    };
    publish_in_lock_file(shared, txn, end);
    let shape = rs.shape;
    let old = shared.set_current(&mut rs, published);
    if rs.shape == shape {
        // Of the new snapshot's shape: it holds nothing the current one does not.
        rs.spare = Some(old);
    } else {
        drop(rs);
        drop(old);
    }
}

/// The second half of an `Immediate` commit through the log, run by its committer after it
/// let the write lock go: waits until the log is synced up to `end` (the first committer
/// waiting syncs for all: group commit), then publishes `published` unless a newer commit was
/// published meanwhile. A failed sync fails every later commit of the handle (the log is
/// fail-stop; `Txn::new` sees it).
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
pub(super) fn publish(shared: &Shared, published: Arc<Published>, end: u64) {
    let mut rs = shared.read_state();
    if rs.current.txn() < published.txn() {
        publish_in_lock_file(shared, published.txn(), end);
        shared.set_current(&mut rs, published);
    }
}

/// Tells read-only handles in other processes, through the lock file, that commit `txn`'s
/// record ends at `end` and how far the log is synced (`LockTable::publish_log`). Under the
/// read-state lock, before the commit is published here.
fn publish_in_lock_file(shared: &Shared, txn: u64, end: u64) {
    if let Some(lock) = shared.lock.as_ref() {
        lock.publish_log(txn, end);
        if let Some(log) = shared.log.as_ref() {
            lock.set_log_synced(log.durable_end());
        }
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
