//! `Durability::Bounded`: a thread of the handle that makes bounded commits durable within
//! `Options::bounded_millis` of the oldest one not yet durable, or at once when their log
//! records reach `Options::bounded_bytes`. Started by the first bounded commit, stopped (after
//! a last flush) when the `Database` closes. Nothing depends on it for correctness: a bounded
//! commit is written and published like a `None` commit; the thread only syncs sooner.

use super::Shared;
use crate::error::Result;
use crate::options::Durability;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, Weak};
use std::time::{Duration, Instant};

/// The flusher's state, in `Shared`.
#[derive(Default)]
pub(crate) struct Flusher {
    state: Mutex<State>,
    wake: Condvar,
    /// The handle's own `Shared`, for starting the thread from a commit (set at open).
    owner: OnceLock<Weak<Shared>>,
}

#[derive(Default)]
struct State {
    /// When the oldest bounded commit not yet durable was made.
    oldest: Option<Instant>,
    /// Their log records reached `bounded_bytes`: flush now.
    urgent: bool,
    stop: bool,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Flusher {
    fn lock(&self) -> MutexGuard<'_, State> {
        // No code panics while holding this lock; recover the state if a panic ever did.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Names the `Shared` this flusher belongs to (once, when the handle is opened).
    pub(crate) fn set_owner(&self, owner: Weak<Shared>) {
        let _ = self.owner.set(owner);
    }

    /// A bounded commit was made through the log: `note`, urgent when the log records not yet
    /// durable reached `Options::bounded_bytes`.
    pub(crate) fn note_logged(&self, shared: &Arc<Shared>) -> Result<()> {
        let urgent = shared
            .log
            .as_ref()
            .is_some_and(|l| l.unsynced_bytes() >= shared.options.bounded_bytes);
        self.note(shared, urgent)
    }

    /// A bounded commit was made; `urgent` when the log records not yet durable reached
    /// `bounded_bytes`. Starts the thread if it is not running (if it cannot be started, the
    /// commit is made durable here instead).
    pub(crate) fn note(&self, shared: &Arc<Shared>, urgent: bool) -> Result<()> {
        let mut st = self.lock();
        if st.stop {
            return Ok(());
        }
        // The thread waits for a first commit, then for its deadline: only a first commit or
        // newly reached urgency changes what it waits for (a wake-up per commit would cost a
        // context switch each).
        let wake = st.oldest.is_none() || (urgent && !st.urgent);
        st.oldest.get_or_insert_with(Instant::now);
        st.urgent |= urgent;
        if st.thread.is_none() {
            let owner = self.owner.get().and_then(Weak::upgrade);
            let spawned = owner.and_then(|o| {
                shared
                    .background
                    .spawn("larch-bounded-sync", 0, move || run(o))
            });
            match spawned {
                Some(h) => st.thread = Some(h),
                None => {
                    st.oldest = None;
                    st.urgent = false;
                    drop(st);
                    return flush(shared);
                }
            }
        }
        if wake {
            self.wake.notify_one();
        }
        Ok(())
    }

    /// Stops the thread after a last flush of what is pending (the handle is closing).
    pub(crate) fn stop(&self) {
        super::background::stop_thread(&self.wake, || {
            let mut st = self.lock();
            st.stop = true;
            st.thread.take()
        });
    }
}

/// The thread: waits for a bounded commit, then until its deadline (or urgency), flushes.
fn run(shared: Arc<Shared>) {
    let f = &shared.flusher;
    let bound = Duration::from_millis(shared.options.bounded_millis);
    loop {
        let mut st = f.lock();
        loop {
            match st.oldest {
                None if st.stop => return,
                None => st = f.wake.wait(st).unwrap_or_else(|e| e.into_inner()),
                Some(oldest) => {
                    // A bound too far to express as an instant waits for urgency or the close.
                    let due = oldest.checked_add(bound);
                    let now = Instant::now();
                    if st.urgent || st.stop || due.is_some_and(|d| now >= d) {
                        break;
                    }
                    st = match due {
                        Some(d) => {
                            let woken = f.wake.wait_timeout(st, d - now);
                            woken.unwrap_or_else(|e| e.into_inner()).0
                        }
                        None => f.wake.wait(st).unwrap_or_else(|e| e.into_inner()),
                    };
                }
            }
        }
        st.oldest = None;
        st.urgent = false;
        drop(st);
        // A failure poisons the handle (its commits fail from then on); nothing to report here.
        let _ = flush(&shared);
    }
}

/// Makes every commit made so far durable: a sync of the log on a handle that writes one,
/// else an empty durable commit.
fn flush(shared: &Arc<Shared>) -> Result<()> {
    match shared.log.as_ref() {
        Some(log) => log.sync_end(),
        None => {
            let guard = shared.writer.lock().unwrap_or_else(|e| e.into_inner());
            // Not the application's commit: not counted as one (`Stats::commits`).
            super::txn::Txn::new(shared, guard)?.commit(Durability::Immediate, false)
        }
    }
}
