//! Checkpoints when the writer goes idle (`Options::idle_checkpoint_millis`): a thread of a
//! handle that writes the log which, once no commit has been made through the log for that
//! long, merges what the overlay holds into the tree (a checkpoint on the checkpoint thread,
//! `checkpoint::start`) and publishes the new tree as soon as it is written
//! (`checkpoint::finish`), instead of leaving both to the next write transaction.
//!
//! Why: reads through an overlay cost more than reads of the tree alone (a probe of its hash
//! table per point read; a scan merges its sorted runs: readseq, readreverse and seekrandom
//! took 2.3-2.5x LMDB's time right after a 1M-record one-put load), and a checkpoint the
//! log's growth calls for only comes with more writes. After a burst of writes, readers get
//! the tree's speed back within the idle period plus the checkpoint's own time
//! (docs/design/write-path.md, "Idle checkpoints").
//!
//! Once every record is merged, it gives the log's file back (`give_back_log`): an open
//! database at rest holds about what a closed one does on disk.
//!
//! Nothing depends on it for correctness: the checkpoint it starts is the same as one the
//! log's growth starts, written without a sync, and the log's restart is the compaction's. It
//! never waits for the write lock: it takes it with `try_lock` and gives up while a
//! transaction is open (the writer is not idle; its next commit arms the thread again). The
//! commit path pays one atomic increment and one load.

use super::commit;
use super::txn::Txn;
use super::{checkpoint, Shared, WriterState};
use crate::options::Durability;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

/// How often a checkpoint the thread started is looked at, to publish it once written. After
/// a burst of writes the thread merges every slice that holds records, one checkpoint after
/// the other (18-22 after 1M one-put writes, about 11 ms each), and reads probe the overlays
/// until the last: with this at 5 ms and one look a period (`QUIET_STEPS`), the last came
/// 385 ms after the last commit, against 330 ms (docs/design/performance.md, "The idle drain
/// looks sooner").
const POLL: Duration = Duration::from_millis(1);

/// How often `give_back_log` looks at the last checkpoint's sync.
const SETTLE_POLL: Duration = Duration::from_millis(5);

/// How many times `give_back_log` looks at the last checkpoint's sync, `SETTLE_POLL` apart,
/// before it leaves the log's file to the next idle period.
const SETTLE_POLLS: u32 = 400;

/// How many times a period the armed thread looks at the commits' count: the writer is found
/// idle between one period and one period and a step after its last commit, where a look
/// once a period found it between one and two periods after.
const QUIET_STEPS: u32 = 4;

/// Checkpoints started in one idle period, at most, beyond one for each slice the overlays
/// are cut into (`Shared::slices`): the last merges the entry counts the ones before
/// corrected (`checkpoint::install` leaves them in the active overlays).
const CHECKPOINTS_PER_PERIOD: u64 = 2;

/// The idle checkpointer's state, in `Shared`.
#[derive(Default)]
pub(crate) struct Idle {
    /// Commits made through the log so far: the thread compares two readings a period apart.
    commits: AtomicU64,
    /// The thread is waiting for the writer to go quiet: commits need not wake it.
    armed: AtomicBool,
    state: Mutex<State>,
    wake: Condvar,
}

#[derive(Default)]
struct State {
    stop: bool,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Idle {
    fn lock(&self) -> MutexGuard<'_, State> {
        // No code panics while holding this lock; recover the state if a panic ever did.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A commit through the log left records in the overlay. Arms the thread (starting it on
    /// the first such commit) unless it is armed already, which is the case while commits
    /// keep coming: then this is an increment and a load.
    pub(crate) fn note(&self, shared: &Arc<Shared>) {
        if shared.options.idle_checkpoint_millis == 0 || !shared.options.checkpoint_thread {
            return;
        }
        // Both sequentially consistent, as the thread's disarm and its look at the count:
        // either this commit sees the thread disarmed (and arms it), or the thread sees this
        // commit (and stays armed).
        self.commits.fetch_add(1, SeqCst);
        if self.armed.load(SeqCst) {
            return;
        }
        let mut st = self.lock();
        if st.stop {
            return;
        }
        self.armed.store(true, SeqCst);
        if st.thread.is_none() {
            let owner = shared.clone();
            let nice = shared.options.background_nice;
            let spawned = shared
                .background
                .spawn("larch-idle-checkpoint", nice, move || run(owner));
            // A thread that cannot be started leaves the overlay to the log's checkpoints, as
            // with the option off (and stays armed: commits do not try again).
            if let Some(h) = spawned {
                st.thread = Some(h);
            }
        }
        self.wake.notify_one();
    }

    /// Stops the thread (the handle is closing), after the step it is in: a checkpoint it
    /// started is left to the close, which waits for it.
    pub(crate) fn stop(&self) {
        super::background::stop_thread(&self.wake, || {
            let mut st = self.lock();
            st.stop = true;
            st.thread.take()
        });
    }

    /// Sleeps for `d`, or less if the handle closes: returns whether it is closing.
    fn sleep(&self, d: Duration) -> bool {
        let st = self.lock();
        if st.stop {
            return true;
        }
        let (st, _) = self
            .wake
            .wait_timeout_while(st, d, |st| !st.stop)
            .unwrap_or_else(|e| e.into_inner());
        st.stop
    }

    /// Waits until a commit arms the thread: returns whether the handle is closing instead.
    fn wait_armed(&self) -> bool {
        let mut st = self.lock();
        while !self.armed.load(SeqCst) && !st.stop {
            st = self.wake.wait(st).unwrap_or_else(|e| e.into_inner());
        }
        st.stop
    }

    /// Waits (armed) until a whole period passes with no commit, looking `QUIET_STEPS` times
    /// a period, then disarms: returns whether the handle is closing instead.
    fn wait_quiet(&self, period: Duration) -> bool {
        let step = period / QUIET_STEPS;
        let mut seen = self.commits.load(SeqCst);
        // The steps slept since a look found the count changed.
        let mut quiet = 0;
        loop {
            if self.sleep(step) {
                return true;
            }
            let now = self.commits.load(SeqCst);
            if now != seen {
                seen = now;
                quiet = 0;
                continue;
            }
            quiet += 1;
            if quiet < QUIET_STEPS {
                continue;
            }
            // Disarmed before the count is looked at again: a commit after this look finds
            // the thread disarmed and arms it; one before it is seen here.
            self.armed.store(false, SeqCst);
            let now = self.commits.load(SeqCst);
            if now == seen {
                return false;
            }
            self.armed.store(true, SeqCst);
            seen = now;
            quiet = 0;
        }
    }
}

/// The thread: waits for the writer to go quiet, checkpoints, waits to be armed again.
fn run(shared: Arc<Shared>) {
    let idle = &shared.idle;
    let period = Duration::from_millis(shared.options.idle_checkpoint_millis);
    loop {
        if idle.wait_quiet(period) || checkpoint_idle(&shared) || idle.wait_armed() {
            return;
        }
    }
}

/// Publishes a checkpoint that is written and not yet in place, and starts one for what the
/// overlay holds, then publishes that one once written; gives up as soon as the write lock
/// is taken (a transaction is open: the writer is at work again). Returns whether the handle
/// is closing.
fn checkpoint_idle(shared: &Arc<Shared>) -> bool {
    let mut started = 0;
    // Every slice that holds records, so that reads after a burst of writes find the tree
    // alone (a read probes its slice's overlay; a scan sorts it).
    let most = shared.slices() + CHECKPOINTS_PER_PERIOD;
    loop {
        let Some(mut guard) = shared.try_lock_writer() else {
            return false;
        };
        if guard.poisoned {
            return false;
        }
        // A failure poisons the handle (its next transaction reports it).
        if checkpoint::finish(shared, &mut guard, false).is_err() {
            return false;
        }
        if guard.checkpoint.is_none() {
            if started >= most {
                return false;
            }
            match checkpoint::start(shared, &mut guard, true) {
                Ok(true) => started += 1,
                // Nothing to merge: the log's file may go back.
                Ok(false) => {
                    drop(guard);
                    return give_back_log(shared);
                }
                // A failure that poisoned the handle.
                Err(_) => return false,
            }
        }
        drop(guard);
        if shared.idle.sleep(POLL) {
            return true;
        }
    }
}

/// Gives the log's file back but its header once the idle checkpoints have merged every
/// record (`owner::restart_log`: a durable commit names a new cycle's first slot as the
/// position to replay from, then the file is cut), where it holds more than a segment: an
/// open database at rest then takes about what a closed one does on disk, where the ring's
/// file stayed at its full size (docs/design/write-path.md, "The log's file at rest"). The
/// next writes grow the file again with zeros as they reach it, as a new log's do; a writer
/// that commits a little at a time leaves a segment's file, which stays. Gives up as soon as
/// the write lock is taken or a record is in an overlay (the writer is at work again).
/// Returns whether the handle is closing.
fn give_back_log(shared: &Arc<Shared>) -> bool {
    let Some(log) = shared.log.as_ref() else {
        return false;
    };
    // Only a cut makes the file shorter (this thread's, or a compaction's, after which the
    // log cannot restart and nothing is done): looked at once, not at each poll.
    if !log.file_bytes().is_ok_and(|b| b > log.pressure().segment) {
        return false;
    }
    // The last checkpoint's sync is waited for without the lock, so that a writer never
    // waits for it here; then it is collected, and the log released up to it.
    for _ in 0..SETTLE_POLLS {
        let Some(mut guard) = shared.try_lock_writer() else {
            return false;
        };
        if guard.poisoned || guard.checkpoint.is_some() || guard.retry.is_some() {
            return false;
        }
        let base = shared.writer_base();
        if holds_records(&base) {
            return false;
        }
        let WriterState { disk, poisoned, .. } = &mut *guard;
        let Some(disk) = disk.as_mut() else {
            return false;
        };
        if disk.settling.as_ref().is_some_and(|s| !s.synced()) {
            drop(guard);
            if shared.idle.sleep(SETTLE_POLL) {
                return true;
            }
            continue;
        }
        if commit::settle(shared, disk, poisoned).is_err() {
            return false;
        }
        // Records still kept (the last checkpoint was written without a sync: a whole
        // overlay's): one durable commit first, after which the log keeps nothing.
        let durable = disk.last_durable_txn == base.snap.meta.txn;
        drop(base);
        if !durable {
            if Txn::new(shared, guard)
                .and_then(|w| w.checkpoint(Durability::Immediate))
                .is_err()
            {
                return false;
            }
            let Some(again) = shared.try_lock_writer() else {
                return false;
            };
            guard = again;
            let base = shared.writer_base();
            if guard.poisoned || holds_records(&base) {
                return false;
            }
        }
        // A failure poisons the handle (its next transaction reports it).
        let _ = super::owner::restart_log(shared, guard, false);
        return false;
    }
    false
}

/// Whether an overlay of `base` holds a record (a slice is the fullest only if it holds
/// one), or one is frozen for a checkpoint.
fn holds_records(base: &super::published::Published) -> bool {
    base.frozen.is_some() || base.overlay.as_ref().is_some_and(|o| o.fullest().is_some())
}
