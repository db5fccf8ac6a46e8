//! The state behind a database handle, shared by the handle and its transactions, and the
//! write path, one room per mechanism. Transactions depend on this, not on `Database`, which
//! sits above them. ARCHITECTURE.md ("The write path, on one page") follows a commit, a
//! checkpoint and an open through these files.
//!
//! ```text
//! mod.rs         Shared, WriterState, Disk
//! published.rs   Published: a tree and the overlays above it, what readers start from
//! readers.rs     the reader registry: the published snapshot, live readers, the shared table
//! txn.rs         the engine's half of a write transaction: its batch or its pages
//! commit/        how a commit goes (route.rs), through the log (logged.rs), by pages
//!                (pages.rs), synced off the writer's path (settle.rs)
//! upper/         the layers above the tree: the overlay, a transaction's batch, the layered
//!                read and the Range merge
//! log/           the write-ahead log: append, ring, file, group commit, open, read back
//! checkpoint.rs  checkpoints on a thread of their own: freeze, merge, put in place
//! admission/     what a write transaction waits for before it starts: one policy
//! background.rs  the owner of every background thread: started and stopped there
//! flusher.rs     the thread that makes `Durability::Bounded` commits durable in time
//! idle.rs        the thread that checkpoints the overlay once the writer goes idle
//! open.rs        an open, in numbered steps; replay.rs the log replayed onto a tree
//! owner.rs       a handle's states, and the file handed between writers in several processes
//! recovery.rs    what an open that gave damage up reports, and the copies it keeps aside
//! catalog.rs     table names and headers, the per-snapshot cache, table states
//! savepoint.rs   the undo records of a write transaction's savepoints
//! ```

pub(crate) mod admission;
pub(crate) mod background;
pub(crate) mod catalog;
pub(crate) mod checkpoint;
pub(crate) mod commit;
pub(crate) mod counts;
pub(crate) mod flusher;
pub(crate) mod idle;
pub(crate) mod log;
pub(crate) mod open;
pub(crate) mod owner;
pub(crate) mod published;
pub(crate) mod readers;
pub(crate) mod recovery;
pub(crate) mod replay;
pub(crate) mod savepoint;
pub(crate) mod txn;
pub(crate) mod upper;

use crate::btree::Scratch;
use crate::options::Options;
use crate::pager::Carry;
use crate::storage::{LockTable, Storage};
use catalog::TableStates;
use log::GroupLog;
use readers::ReadState;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard};
use upper::batch::Batch;

/// What writing pages needs: the free space and the meta slots. The writer's, except while a
/// checkpoint runs on its own thread (`checkpoint::Running`), which owns it meanwhile: the
/// commits made through the log in that time write no page.
pub(crate) struct Disk {
    /// Free set, page-buffer pool and writable mapping, lent to each write transaction.
    /// `None` only while a transaction holds them.
    pub(crate) carry: Option<Carry>,
    /// Meta slot holding the last durable commit; commits write the other one.
    pub(crate) durable_slot: u64,
    pub(crate) last_durable_txn: u64,
    /// A checkpoint written without a sync, whose sync runs on a thread of its own
    /// (`commit::settle`).
    pub(crate) settling: Option<commit::Settling>,
    /// The newest meta page written without a sync, and its slot (`None` once one is synced).
    pub(crate) unsynced: Option<(crate::pager::Meta, u64)>,
    /// The last checkpoint's merge read its leaves from the device, by faults or by hints
    /// (the tree is beyond memory): the next one reads them ahead (`checkpoint::merge_waits`).
    pub(crate) merge_waited: bool,
    /// Readers of the handle waited on the device during the last checkpoint's merge: the
    /// next one beside readers starts its pages' writeback a few at a time
    /// (`WritePages::pace_writeback`).
    pub(crate) readers_waited: bool,
}

/// State owned by whoever holds the write lock.
pub(crate) struct WriterState {
    /// `None` while a checkpoint thread holds it (`checkpoint`).
    pub(crate) disk: Option<Disk>,
    /// The newest commit that left only a mark in the log (`LogAt::Mark`), while it may not
    /// be durable yet: a commit that must be durable makes it durable first
    /// (`commit::settle_marks`). Kept here, not in `disk`: it is read while a checkpoint
    /// thread holds that.
    pub(crate) marked: Option<u64>,
    /// Set by a failed sync or meta write: no more writes through this handle.
    pub(crate) poisoned: bool,
    /// The tables write transactions open (see `TableStates`).
    pub(crate) tables: TableStates,
    /// The B-tree's working buffers, kept from one transaction to the next.
    pub(crate) scratch: Scratch,
    /// A logged transaction's writes (see `WriteTxn`), and the buffer its log record is
    /// encoded into; kept from one transaction to the next.
    pub(crate) batch: Batch,
    pub(crate) record: Vec<u8>,
    /// The log record packed (`log::pack`), when it is; kept up to `PACKED_KEPT_BYTES`.
    pub(crate) packed: Vec<u8>,
    /// A large value's run as it is written (`commit::runs::write_runs`), and the runs the
    /// commit wrote (first page, pages).
    pub(crate) run_buffer: Vec<u8>,
    pub(crate) run_pages: Vec<(u64, u64)>,
    /// Commits left before the next try at packing a record, after one that did not pack
    /// (`commit::logged::PACK_SKIP`).
    pub(crate) pack_skip: u32,
    /// The transaction's commit record may be packed (`commit::logged::packing_pays`, asked
    /// by `make_room` as the transaction starts).
    pub(crate) pack_next: bool,
    /// A logged commit's entry counts (table number, entries: `counts::CountLog`); kept
    /// from one commit to the next.
    pub(crate) counts: Vec<(u64, u64)>,
    /// The log position of the last checkpoint: the log since is replayed at open.
    pub(crate) checkpoint_position: u64,
    /// The checkpoint running on its own thread, if any (`checkpoint`).
    pub(crate) checkpoint: Option<checkpoint::Running>,
    /// A checkpoint whose writing failed before any of it could be read back, to be written
    /// again by the next `checkpoint::start` (`checkpoint::Retry`).
    pub(crate) retry: Option<checkpoint::Retry>,
    /// The published tree's cuts into slices, found by the checkpoint that wrote it
    /// (`checkpoint::TreeCuts`).
    pub(crate) tree_cuts: Option<checkpoint::TreeCuts>,
    /// The newest commit made through the log whose committer lets the write lock go and
    /// waits for the log's sync before publishing it (`Durability::Immediate`: group commit),
    /// with the log position its record ends at. The next write transaction starts from it
    /// when it is newer than the published snapshot; a commit that publishes (a `None`
    /// commit, a checkpoint) first waits until it is durable, so that readers never see an
    /// `Immediate` commit before it is durable (`commit::publish_pending`).
    pub(crate) pending: Option<(Arc<published::Published>, u64)>,
    /// How long checkpoints take, and the writer's debt (`admission`).
    pub(crate) pacer: admission::Pacer,
    /// The running write transaction's live savepoints and undo records (emptied as each one
    /// starts): kept here rather than in `WriteTxn`, which is moved several times as it is
    /// made and returned (its moves were 5-7% of a one-put commit's time).
    pub(crate) savepoints: savepoint::Savepoints,
}

impl WriterState {
    /// The disk state, for a change that writes pages: a checkpoint thread that holds it has
    /// been waited for (`checkpoint::finish`) before.
    pub(crate) fn disk(&mut self) -> crate::error::Result<&mut Disk> {
        self.disk.as_mut().ok_or_else(|| {
            crate::error::Error::Internal("pages written while a checkpoint runs".into())
        })
    }
}

/// Everything a handle and its transactions share. One per `Database`, behind an `Arc`
/// (read transactions keep it alive).
pub(crate) struct Shared {
    pub(crate) storage: Arc<dyn Storage>,
    pub(crate) options: Options,
    pub(crate) page_bytes: u32,
    pub(crate) read: Mutex<ReadState>,
    /// Txn id of `read.current`, readable without the lock (for `ReadTxn::renew`).
    pub(crate) current_txn: AtomicU64,
    /// The commit of `read.current`'s tree, readable without the lock: a checkpoint publishes
    /// a new tree under the same txn id, and `ReadTxn::renew` moves to it (`Shared::newer_than`).
    pub(crate) current_tree_txn: AtomicU64,
    /// `read.shape`, readable without the lock: a reader whose snapshot has this shape moves
    /// to the commit `current_txn` names by taking its number alone (`ReadTxn::renew`).
    pub(crate) current_shape: AtomicU64,
    pub(crate) writer: Mutex<WriterState>,
    pub(crate) boot_id: Option<[u8; 16]>,
    /// The lock file's reader table, for handles on a real file (see `storage/lock.rs`).
    /// A read-only handle owns a slot in it; the writer reads every slot.
    pub(crate) lock: Option<LockTable>,
    /// The writing handle was closed while read transactions of it lived on: it gave up the
    /// database's lock and registers its readers in the lock file's table like a read-only
    /// handle (`Database`'s drop).
    pub(crate) closed: std::sync::atomic::AtomicBool,
    /// The write-ahead log, for a writing handle opened with `Options::log`.
    pub(crate) log: Option<Arc<GroupLog>>,
    /// The pages checkpoints reserved for the runs of large values the writer writes at
    /// commit (`commit::runs`).
    pub(crate) runs: Mutex<commit::RunSpace>,
    /// The runs log records name that a replay may read again: only those wait once freed
    /// (`NamedRuns`, `WritePages::defer_runs`).
    pub(crate) named_runs: Arc<Mutex<crate::pager::freelist::NamedRuns>>,
    /// Their pages (`NamedRuns::pages_kept`), read without its lock (`commit::runs_due`).
    pub(crate) named_run_pages: Arc<AtomicU64>,
    /// Pages of the large values that went into the log for want of a reservation with room,
    /// since the writer last moved to a new one (`RunSpace::promote`, or since a checkpoint
    /// that took none): changed under `runs`' lock, read without it (`commit::runs_due`).
    pub(crate) runs_missed: AtomicU64,
    /// Set by the close once the log holds nothing: the last commit's meta page then says the
    /// database has no log (`commit::seal_meta`), so that the data file alone is the whole
    /// database (`Database`'s drop).
    pub(crate) log_detached: std::sync::atomic::AtomicBool,
    /// Threads waiting for the write lock (`Database::begin_write`): a group commit's leader
    /// lets them append before it syncs (`GroupLog::sync_to_gathering`).
    pub(crate) writers_waiting: std::sync::atomic::AtomicUsize,
    /// The writer waits for the running checkpoint (`checkpoint::finish`): an idle
    /// checkpoint's merge rests no more (`share::IdleRest`).
    pub(crate) checkpoint_awaited: Arc<std::sync::atomic::AtomicBool>,
    /// The writer asleep for admission under the write lock, woken by a thread that comes to
    /// wait for the lock (`lock_writer`).
    pub(crate) share_sleeper: admission::ShareSleeper,
    /// The thread (`readers::reader_thread`) whose write transaction is open, or 0: a second
    /// `begin_write` on that thread is refused rather than waiting for itself
    /// (`txn::ThisThreadWrites`).
    pub(crate) writing_thread: std::sync::atomic::AtomicU64,
    /// The memory the overlays may hold (`admission::budget`, from `Options::memory_budget`).
    pub(crate) memory_budget: u64,
    /// The bytes a logged transaction's batch holds at most before it turns to writing pages
    /// (`admission::budget::resolve_batch`).
    pub(crate) batch_bytes_max: usize,
    /// The memory the published snapshot's active and frozen overlays hold
    /// (`Overlay::bytes`), and the slices of the active ones, as of their last publication
    /// (`Shared::note_upper`).
    pub(crate) upper: [AtomicU64; 3],
    /// The memory the published snapshot's overlays hold (the active and the frozen, without
    /// the count log), as of its publication: what the handle's overlays hold beyond it is
    /// what readers of older snapshots keep (`Shared::pinned_bytes`).
    pub(crate) published_overlays: AtomicU64,
    /// The budget for writes alone beyond memory (`admission::budget::after_merge`).
    pub(crate) alone_budget: u64,
    /// The budget admission holds the overlays in now (`admission::budget::now`): from
    /// `memory_budget` up to `alone_budget`.
    pub(crate) budget_now: AtomicU64,
    /// The checkpoints in a row that found the writes alone beyond memory
    /// (`admission::budget::after_merge`).
    pub(crate) alone_streak: std::sync::atomic::AtomicU32,
    /// The owner of every background thread: started through it, stopped by it at close.
    pub(crate) background: Arc<background::Background>,
    /// The thread that makes `Durability::Bounded` commits durable.
    pub(crate) flusher: flusher::Flusher,
    /// The thread that checkpoints the overlay once the writer goes idle.
    pub(crate) idle: idle::Idle,
    /// Memory dropped overlays leave for the next (`upper::overlay::Spare`).
    pub(crate) spare: Arc<upper::overlay::Spare>,
    /// What the handle's write transactions did, for `Stats::commits`: the handle's, shared by
    /// each of its states (`owner::Handle`).
    pub(crate) counters: Arc<Counters>,
    /// The handle this state belongs to (`owner::Handle`): a reader of a state that is no
    /// longer current moves to the current one as it renews.
    pub(crate) handle: std::sync::Weak<owner::Handle>,
    /// The handle's new transactions start on another state (`owner`): the file went to a
    /// writer in another process, or came back to this one.
    pub(crate) retired: std::sync::atomic::AtomicBool,
    /// The file is being given to a writer in another process: a write transaction that
    /// starts waits for its turn after it (`Database::begin_write`).
    pub(crate) handing: std::sync::atomic::AtomicBool,
    /// What an open with `Options::recover` gave up, if it gave up anything.
    pub(crate) recovery: Option<recovery::Recovery>,
    /// The log position and commit of the first record an open's replay left for its
    /// rounds: the log held more than the overlays' share of the memory budget
    /// (`Shared::finish_replay`, which every path that makes a writing handle's state runs
    /// before anything reads it).
    pub(crate) replay_from: Mutex<Option<(u64, u64)>>,
}

/// Counts of what a handle's write transactions did since it was opened
/// ([`crate::CommitStats`]). Relaxed atomics: each is a count of its own, read for
/// monitoring, not a synchronisation.
#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) commits: AtomicU64,
    pub(crate) failed_commits: AtomicU64,
    pub(crate) aborts: AtomicU64,
    pub(crate) logged_commits: AtomicU64,
    pub(crate) page_commits: AtomicU64,
    pub(crate) marked_commits: AtomicU64,
    pub(crate) packed_commits: AtomicU64,
    pub(crate) runs_written: AtomicU64,
    pub(crate) run_write_nanos: AtomicU64,
    pub(crate) marks_settled: AtomicU64,
    pub(crate) switched_to_pages: AtomicU64,
    pub(crate) cold_pages_spilled: AtomicU64,
    pub(crate) replay_rounds: AtomicU64,
    pub(crate) replay_runs_revived: AtomicU64,
    pub(crate) undo_spills: AtomicU64,
    pub(crate) checkpoints: AtomicU64,
    pub(crate) checkpoint_slices: AtomicU64,
    pub(crate) durable_checkpoints: AtomicU64,
    pub(crate) paced_micros: AtomicU64,
    pub(crate) share_micros: AtomicU64,
    pub(crate) log_full_waits: AtomicU64,
    pub(crate) log_full_wait_micros: AtomicU64,
    pub(crate) read_ahead_pages: AtomicU64,
    pub(crate) read_ahead_requests: AtomicU64,
    pub(crate) checkpoint_merge_micros: AtomicU64,
    /// Added by the checkpoints' sync threads, and by the commits that wait for them
    /// (`commit::Settling`).
    pub(crate) checkpoint_sync_micros: std::sync::Arc<AtomicU64>,
    pub(crate) checkpoint_sync_wait_micros: std::sync::Arc<AtomicU64>,
    /// Major page faults the checkpoints' threads took while the handle's readers were open
    /// (`admission::share::FaultTally`): the writer's share of the device counts the other
    /// threads' only.
    pub(crate) background_faults: std::sync::Arc<AtomicU64>,
}

impl Counters {
    pub(crate) fn add(counter: &AtomicU64) {
        counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// Adds the time since `since`, in microseconds, to `counter`.
    pub(crate) fn add_micros(counter: &AtomicU64, since: std::time::Instant) {
        let micros = u64::try_from(since.elapsed().as_micros()).unwrap_or(u64::MAX);
        counter.fetch_add(micros, std::sync::atomic::Ordering::Relaxed);
    }
}

impl Shared {
    /// `RunSpace::named`, under its lock.
    pub(crate) fn runs_named(&self) -> (Option<commit::Extents>, commit::Extents) {
        self.runs.lock().unwrap_or_else(|e| e.into_inner()).named()
    }

    /// A reader of the newest snapshot, begun by `begin`, and the pages of large values
    /// neither in its tree nor free (`verify_owning`): the runs its overlays name (`runs`
    /// of the reader), those merges freed and deferred (`FreeSet::defer`), and the
    /// reservations' remainders no meta page names any more, freed by the next checkpoint. A
    /// running checkpoint, which holds the deferred runs, is finished first, and none starts
    /// until they are taken: they are of the snapshot read.
    pub(crate) fn read_with_runs_held<R>(
        self: &Arc<Self>,
        begin: impl FnOnce() -> crate::error::Result<R>,
        runs: impl FnOnce(&R) -> Vec<(u64, u64)>,
    ) -> crate::error::Result<(R, Vec<(u64, u64)>)> {
        if self.log.is_none() || self.options.read_only {
            let r = begin()?;
            let held = runs(&r);
            return Ok((r, held));
        }
        let mut guard = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        // A checkpoint that found the disk full is retried by a later commit, which reports
        // it if it fails again: the snapshot checked is the one before it.
        match checkpoint::finish(self, &mut guard, true) {
            Ok(_) | Err(crate::error::Error::DiskFull) => {}
            Err(e) => return Err(e),
        }
        let r = begin()?;
        let mut held = runs(&r);
        if let Some(carry) = guard.disk.as_ref().and_then(|d| d.carry.as_ref()) {
            held.extend(carry.free.deferred_runs());
        }
        drop(guard);
        let space = self.runs.lock().unwrap_or_else(|e| e.into_inner());
        held.extend(space.leftovers.iter().copied());
        Ok((r, held))
    }

    /// Commit `durable` is durable: the writer may move to its reservation
    /// (`RunSpace::promote`).
    pub(crate) fn runs_durable(&self, durable: u64) {
        let mut space = self.runs.lock().unwrap_or_else(|e| e.into_inner());
        self.promote_runs(&mut space, durable);
        drop(space);
        let mut named = self.named_runs.lock().unwrap_or_else(|e| e.into_inner());
        named.durable(durable);
    }

    /// `RunSpace::promote`, `space` being `runs` locked: where the writer moves to a new
    /// reservation, the values that missed one no longer call for a checkpoint
    /// (`commit::runs_due`).
    pub(crate) fn promote_runs(&self, space: &mut commit::RunSpace, durable: u64) {
        if space.promote(durable) {
            self.runs_missed
                .store(0, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// The counters' values now.
    pub(crate) fn commit_stats(&self) -> crate::CommitStats {
        let c = &self.counters;
        let get = |a: &AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
        crate::CommitStats {
            commits: get(&c.commits),
            failed_commits: get(&c.failed_commits),
            aborts: get(&c.aborts),
            logged_commits: get(&c.logged_commits),
            page_commits: get(&c.page_commits),
            marked_commits: get(&c.marked_commits),
            packed_commits: get(&c.packed_commits),
            runs_written: get(&c.runs_written),
            run_write_micros: get(&c.run_write_nanos) / 1000,
            marks_settled: get(&c.marks_settled),
            switched_to_pages: get(&c.switched_to_pages),
            cold_pages_spilled: get(&c.cold_pages_spilled),
            replay_rounds: get(&c.replay_rounds),
            replay_runs_revived: get(&c.replay_runs_revived),
            undo_spills: get(&c.undo_spills),
            checkpoints: get(&c.checkpoints),
            checkpoint_slices: get(&c.checkpoint_slices),
            durable_checkpoints: get(&c.durable_checkpoints),
            log_syncs: self.log.as_ref().map_or(0, |l| l.syncs()),
            paced_micros: get(&c.paced_micros),
            share_micros: get(&c.share_micros),
            log_full_waits: get(&c.log_full_waits),
            log_full_wait_micros: get(&c.log_full_wait_micros),
            read_ahead_pages: get(&c.read_ahead_pages),
            read_ahead_requests: get(&c.read_ahead_requests),
            checkpoint_merge_micros: get(&c.checkpoint_merge_micros),
            checkpoint_sync_micros: get(&c.checkpoint_sync_micros),
            checkpoint_sync_wait_micros: get(&c.checkpoint_sync_wait_micros),
        }
    }
}

impl Shared {
    /// Takes the write lock, counted in `writers_waiting` while it waits.
    pub(crate) fn lock_writer(&self) -> MutexGuard<'_, WriterState> {
        use std::sync::atomic::Ordering;
        // A free lock is taken without the count: a group sync's leader sees its holder
        // through `try_lock` (`finish_immediate`), so the count's two locked adds are needed
        // only by a writer that waits.
        if let Some(guard) = self.try_lock_writer() {
            return guard;
        }
        self.writers_waiting.fetch_add(1, Ordering::Relaxed);
        self.share_sleeper.writer_waits();
        let guard = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        self.writers_waiting.fetch_sub(1, Ordering::Relaxed);
        guard
    }

    /// The write lock, unless another thread holds it (`None`, at once).
    pub(crate) fn try_lock_writer(&self) -> Option<MutexGuard<'_, WriterState>> {
        match self.writer.try_lock() {
            Ok(guard) => Some(guard),
            // A panic while holding it leaves the state as it was: recovered.
            Err(std::sync::TryLockError::Poisoned(e)) => Some(e.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        }
    }

    /// The handle's current state, if this one was replaced (`retired`) and the handle is
    /// open.
    pub(crate) fn successor(&self) -> Option<Arc<Shared>> {
        if !self.retired.load(std::sync::atomic::Ordering::Acquire) {
            return None;
        }
        Some(self.handle.upgrade()?.current())
    }

    /// For a writer state that stops writing (the close, or the file given to another
    /// process) while its read transactions live on: registers them in the lock file's reader
    /// table, as a read-only handle does, so that the next writer keeps the pages their
    /// snapshots reach (it reads the table before it reuses pages). Returns false if they
    /// could not be (no lock file, or no free slot): the file must then stay locked until the
    /// last of them ends.
    pub(crate) fn keep_readers_in_slot(&self) -> bool {
        let rs = self.read_state();
        let Some(oldest) = rs.oldest_reader() else {
            return true;
        };
        let Some(lock) = self.lock.as_ref() else {
            return false;
        };
        if lock.claim_slot().is_err() {
            return false;
        }
        lock.set_reader(oldest);
        // From here the readers' registrations update the slot (`Shared::shared_reader`).
        self.closed
            .store(true, std::sync::atomic::Ordering::Release);
        true
    }

    /// At close: the readers that live on kept in a slot (`keep_readers_in_slot`), and the
    /// database's lock released, so that another writer can open it while they read. Without
    /// a slot for them the lock stays until the last of them ends (it goes with the state).
    pub(crate) fn hand_over_to_readers(&self) {
        if self.lock.is_some() && self.keep_readers_in_slot() {
            let _ = self.storage.unlock();
        }
    }

    /// A new overlay for this handle's commits, with the memory the last one left.
    pub(crate) fn new_overlay(&self) -> Arc<upper::overlay::Overlay> {
        Arc::new(upper::overlay::Overlay::with_spare(Some(
            self.spare.clone(),
        )))
    }

    pub(crate) fn read_state(&self) -> MutexGuard<'_, ReadState> {
        // No code panics while holding this lock; recover the state if a panic ever did.
        self.read.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The memory the active and the frozen overlay hold, as of their last publication.
    pub(crate) fn upper_bytes(&self) -> (u64, u64) {
        let get = |a: &AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
        (get(&self.upper[0]), get(&self.upper[1]))
    }

    /// The memory the handle's overlays hold beyond the published snapshot's: overlays a
    /// checkpoint merged into the tree, or a recut replaced, that readers of older snapshots
    /// still hold (each reader keeps the overlays of the snapshot it started from, until it
    /// ends or renews). Counted from the spare's tally (`Spare::held`), which the overlay an
    /// open replays into is not part of.
    pub(crate) fn pinned_bytes(&self) -> u64 {
        let published = self
            .published_overlays
            .load(std::sync::atomic::Ordering::Relaxed);
        (self.spare.held() as u64).saturating_sub(published)
    }

    /// Whether the active overlays are cut in several slices, as of their last publication.
    pub(crate) fn sliced(&self) -> bool {
        self.slices() > 1
    }

    /// How many slices the active overlays are cut into, as of their last publication (0:
    /// none).
    pub(crate) fn slices(&self) -> u64 {
        self.upper[2].load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Notes the memory `p`'s overlays hold: `p` is becoming the published snapshot.
    pub(crate) fn note_upper(&self, p: &published::Published) {
        let set = |a: &AtomicU64, v: usize| a.store(v as u64, std::sync::atomic::Ordering::Relaxed);
        let counts = p.counts().map_or(0, |c| c.bytes());
        let active = p.overlay.as_ref().map_or(0, |o| o.bytes());
        let frozen = p.frozen.as_ref().map_or(0, |o| o.bytes());
        set(&self.upper[0], active + counts);
        set(&self.upper[1], frozen);
        set(&self.published_overlays, active + frozen);
        set(
            &self.upper[2],
            p.overlay.as_ref().map_or(0, |o| o.slices().len()),
        );
    }

    /// The boot id commits record (zero if unknown).
    pub(crate) fn boot_id_or_zero(&self) -> [u8; 16] {
        self.boot_id.unwrap_or([0; 16])
    }
}

std::thread_local! {
    /// How many nice steps this thread, one of the engine's background threads, runs below
    /// the application thread that started the chain of threads it comes from
    /// (`Lowering::apply`); 0 on every other thread.
    static LOWERED: std::cell::Cell<u8> = const { std::cell::Cell::new(0) };
}

/// How a background thread about to be started from the calling thread sets its priority
/// (`Lowering::apply`, its first call): `nice` steps below the application's threads in all
/// (`Options::background_nice`, or for a checkpoint beside readers
/// `admission::share::checkpoint_nice`). A thread inherits its starter's nice value, so
/// one started from a lowered background thread (the idle checkpointer starting a
/// checkpoint's thread) lowers itself only by the steps it lacks. Called on the starting
/// thread.
pub(crate) fn background_nice(nice: u8) -> Lowering {
    let inherited = LOWERED.with(|l| l.get());
    Lowering { inherited, nice }
}

/// Raises the calling background thread, lowered by more steps than `nice`
/// (`Lowering::apply`), back to `nice` steps below the application's threads: true where it
/// did. Only a thread allowed to (`CAP_SYS_NICE`, or `RLIMIT_NICE` up to there) can; for
/// others, and off Linux, nothing changes and false is returned.
pub(crate) fn raise_to(nice: u8) -> bool {
    let lowered = LOWERED.with(|l| l.get());
    if lowered <= nice {
        return false;
    }
    #[cfg(target_os = "linux")]
    {
        let steps = libc::c_int::from(lowered - nice);
        // SAFETY: `nice` changes only the calling thread's scheduling priority; `errno` is
        // the calling thread's, cleared first because -1 is also a valid new nice value.
        let raised = unsafe {
            *libc::__errno_location() = 0;
            libc::nice(-steps) != -1 || *libc::__errno_location() == 0
        };
        if raised {
            LOWERED.with(|l| l.set(nice));
        }
        raised
    }
    #[cfg(not(target_os = "linux"))]
    false
}

/// Whether a background thread started from the calling thread could raise itself to `to`
/// steps below the application's threads after lowering itself further (`raise_to`): where
/// `RLIMIT_NICE` reaches that nice value (a limit of `r` allows nice values down to `20 - r`;
/// the default 0 allows none lower than the thread has), or where a thread can raise itself
/// at all (`raise_works`: `CAP_SYS_NICE`). A checkpoint that could not come back runs no
/// lower than it could come back to (`admission::share::checkpoint_nice`). False off Linux,
/// or where the values cannot be read.
pub(crate) fn may_raise_to(to: u8) -> bool {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: `getpriority` reads the calling thread's nice value and `getrlimit` the
        // process's limit into a local; `errno` is the calling thread's, cleared first
        // because -1 is also a valid nice value.
        let (nice, limit) = unsafe {
            *libc::__errno_location() = 0;
            let nice = libc::getpriority(libc::PRIO_PROCESS, 0);
            if nice == -1 && *libc::__errno_location() != 0 {
                return false;
            }
            let mut limit = std::mem::zeroed::<libc::rlimit>();
            if libc::getrlimit(libc::RLIMIT_NICE, &mut limit) != 0 {
                return false;
            }
            (nice, limit.rlim_cur)
        };
        let target = i64::from(nice) - i64::from(lowered()) + i64::from(to);
        let floor = if limit == libc::RLIM_INFINITY {
            i64::MIN
        } else {
            20 - i64::try_from(limit).unwrap_or(i64::MAX)
        };
        target >= floor || raise_works()
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = to;
        false
    }
}

/// Whether a thread of this process can raise its priority at all (`CAP_SYS_NICE`, or an
/// `RLIMIT_NICE` above the thread's own), tried once a process: a thread started for it
/// lowers itself a step and raises itself back. Tried rather than read from the capability
/// sets: `CAP_SYS_NICE` in a user namespace other than the first (a rootless container's
/// root) shows in `/proc`'s `CapEff` but does not let a thread raise itself.
#[cfg(target_os = "linux")]
fn raise_works() -> bool {
    static WORKS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *WORKS.get_or_init(|| {
        std::thread::Builder::new()
            .name("larch-nice-probe".into())
            .spawn(|| {
                // SAFETY: `nice` changes only the calling thread's (this short-lived thread's)
                // scheduling priority; `errno` is the calling thread's, cleared first because
                // -1 is also a valid nice value.
                unsafe {
                    libc::nice(1);
                    *libc::__errno_location() = 0;
                    libc::nice(-1) != -1 || *libc::__errno_location() == 0
                }
            })
            .ok()
            .and_then(|probe| probe.join().ok())
            .unwrap_or(false)
    })
}

/// How many steps the calling thread runs below the application's threads
/// (`Lowering::apply`): 0 for an application's thread.
pub(crate) fn lowered() -> u8 {
    LOWERED.with(|l| l.get())
}

/// A new background thread's priority (`background_nice`).
#[derive(Clone, Copy)]
pub(crate) struct Lowering {
    /// The steps its starter was lowered by, which it inherits.
    inherited: u8,
    /// The steps it is to run at.
    nice: u8,
}

impl Lowering {
    /// Lowers the calling thread's CPU priority to the steps wanted. Linux only, where the nice
    /// value is the thread's own (`nice(2)` changes the calling thread); elsewhere it names
    /// the whole process, so nothing is done. Best effort: a thread whose priority cannot be
    /// changed runs at its own, which costs only the readers' share of the CPU. A thread
    /// already below the steps wanted stays there: an unprivileged thread cannot raise it.
    pub(crate) fn apply(self) {
        let steps = self.nice.saturating_sub(self.inherited);
        LOWERED.with(|l| l.set(self.inherited.max(self.nice)));
        #[cfg(target_os = "linux")]
        if steps > 0 {
            // SAFETY: `nice` changes only the calling thread's scheduling priority; its return
            // value (the new nice value, or -1 with errno set) is not needed.
            unsafe {
                libc::nice(libc::c_int::from(steps));
            }
        }
        #[cfg(not(target_os = "linux"))]
        let _ = steps;
    }
}
