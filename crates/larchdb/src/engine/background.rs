//! All of a handle's background work, in one owner. Every thread the engine starts after open
//! is started here (`Background::spawn`, `Background::drop_beside`): named, at its priority, and
//! refused once the handle is closing. `Background::stop`, called once by the close
//! (`Database`'s drop), is the one stop signal: it stops and joins every thread, in order.
//!
//! | thread | started | its work | stopped |
//! |---|---|---|---|
//! | `larch-checkpoint` | a due checkpoint (`checkpoint::start`) | merges a frozen overlay into the tree | joined by `checkpoint::finish`: a write transaction, the idle thread, `stop` |
//! | `larch-checkpoint-sync` | a checkpoint the log's room needs durable (`commit::Settling`) | syncs the data file | joined by `commit::settle`, or `stop` |
//! | `larch-bounded-sync` | the first `Durability::Bounded` commit (`flusher`) | syncs bounded commits in time | `stop`, after a last flush |
//! | `larch-idle-checkpoint` | the first commit through the log (`idle`) | checkpoints once the writer goes idle | `stop`, after its step |
//! | `larch-log-grow` | the log's first growth ahead of its end (`log::Grower`) | zeroes the log file ahead of appends | `stop`, or the log's drop |
//! | `larch-retire` | a snapshot's last overlay let go (`commit::retire`) | frees a large overlay off the reader's path | joined by `stop` |
//!
//! One thread belongs to the handle rather than to a state: a writing handle's watcher of the
//! lock file's doorbell (`larch-handoff`, engine/owner.rs), which hands the file to a writer in
//! another process and ends there; the close stops it first (`owner::Handle::stop`).
//!
//! Two more are scoped to the call that starts them and joined before it returns: the log read
//! back (`larch-log-read`, `log::Log::read_back`: an open's replay, or a follower's catch-up
//! from a new tree) and a large file's free set loaded beside an open's replay
//! (`larch-free-load`, `open::replay_beside_free_set`).
//!
//! Errors: a thread whose result someone waits for hands it back through its join (a panic
//! there is an error of the work it did: `checkpoint::finish`, `commit::Settling::wait`); the
//! threads no one waits for fail the handle instead (a failed sync poisons it: its commits
//! fail from then on), or, for the idle checkpointer and the grower, leave their work to the
//! writer, which does it itself and reports what fails. A thread that cannot be started leaves its work to its caller, on
//! the caller's thread, and so does every thread asked for once the handle is closing.

use super::{checkpoint, Shared};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::thread::JoinHandle;

/// The owner of a handle's background threads (`Shared::background`).
#[derive(Default)]
pub(crate) struct Background {
    /// The stop signal: set once by `stop`; no thread starts after it.
    stopping: AtomicBool,
    /// Threads no one waits for (`drop_beside`), joined by `stop`. Those that ended are let go
    /// as new ones start, so this holds only the few running.
    detached: Mutex<Vec<JoinHandle<()>>>,
}

impl Background {
    /// Whether the handle is closing: no thread starts from here on.
    fn stopping(&self) -> bool {
        self.stopping.load(Ordering::Acquire)
    }

    /// Starts thread `name` running `work`, `nice` steps below the application's threads
    /// (`Options::background_nice`; 0 for a thread at the application's priority). `None` when
    /// it cannot be started or the handle is closing: the caller then does the work itself.
    pub(crate) fn spawn<T: Send + 'static>(
        &self,
        name: &str,
        nice: u8,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Option<JoinHandle<T>> {
        if self.stopping() {
            return None;
        }
        let lowering = super::background_nice(nice);
        std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                lowering.apply();
                work()
            })
            .ok()
    }

    /// Drops `value` on a thread of its own, `larch-retire` (a large overlay's memory freed
    /// off the caller's path), which no one waits for but `stop`. Dropped here instead when no
    /// thread can be started or the handle is closing.
    pub(crate) fn drop_beside<T: Send + 'static>(&self, value: T) {
        let mut detached = self.lock_detached();
        detached.retain(|h| !h.is_finished());
        // A thread that cannot be started drops its closure, and `value` with it, here.
        let retire = move || {
            drop(value);
            give_back_freed();
        };
        if let Some(h) = self.spawn("larch-retire", 0, retire) {
            detached.push(h);
        }
    }

    /// Stops every background thread of `shared` and joins it: the close (`Database`'s drop),
    /// once. In order: the flusher makes the `Bounded` commits not yet durable durable; the
    /// idle checkpointer ends its step; a checkpoint running on its own thread is put in place
    /// (it holds the handle's disk state; if it failed, the log still holds what it was
    /// writing, for the next open); a checkpoint's sync is waited for; the log's grower ends;
    /// the retired snapshots are dropped. From here on, whatever the close still does runs on
    /// its own thread.
    pub(crate) fn stop(&self, shared: &Shared) {
        {
            // Under the lock `drop_beside` takes: no thread is left to run after the joins
            // below.
            let _detached = self.lock_detached();
            self.stopping.store(true, Ordering::Release);
        }
        shared.flusher.stop();
        shared.idle.stop();
        let mut guard = shared.writer.lock().unwrap_or_else(|e| e.into_inner());
        let _ = checkpoint::finish(shared, &mut guard, true);
        if let Some(settling) = guard.disk.as_mut().and_then(|d| d.settling.as_mut()) {
            settling.join();
        }
        drop(guard);
        if let Some(log) = shared.log.as_ref() {
            log.stop_grower();
        }
        let detached = std::mem::take(&mut *self.lock_detached());
        for h in detached {
            let _ = h.join();
        }
    }

    fn lock_detached(&self) -> MutexGuard<'_, Vec<JoinHandle<()>>> {
        // No code panics while holding this lock; recover the state if a panic ever did.
        self.detached.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl crate::engine::log::Spawn for Background {
    fn spawn_thread(
        &self,
        name: &str,
        nice: u8,
        work: Box<dyn FnOnce() + Send>,
    ) -> Option<JoinHandle<()>> {
        self.spawn(name, nice, work)
    }
}

/// Stops one of a handle's long-lived threads (the flusher, the idle checkpointer): `mark`
/// sets the thread's stop flag under its state's lock and takes its join handle; the thread
/// is then woken (it checks the flag under the same lock before it waits, so the wake cannot
/// be lost) and joined.
pub(crate) fn stop_thread(
    wake: &std::sync::Condvar,
    mark: impl FnOnce() -> Option<JoinHandle<()>>,
) {
    let thread = mark();
    wake.notify_one();
    if let Some(t) = thread {
        let _ = t.join();
    }
}

/// Hands the memory the allocator holds free back to the system (`malloc_trim`), at most once
/// per `GIVE_BACK_EVERY_MILLIS`, after a retired snapshot is dropped. glibc's allocator keeps
/// what a thread freed in that thread's arena, and once a large block is freed it serves
/// blocks up to that size from the arenas instead of mappings of their own, so the overlays'
/// chunks and the checkpoints' buffers, allocated and freed on different threads, stayed in
/// the process as free memory: seed 001's table at small scale (its step command, 1, 2 and 4
/// readers) peaked at 85-126 MB of anonymous memory and a 242-283 MB process without this,
/// 54-69 MB and 208-225 MB with it (LMDB's process: 193-200 MB). The trim takes each arena's
/// lock, and the pages it gives back fault in again when used: every 50 ms the writer ran at
/// 223-259K a second at 1 reader against 308K in an earlier run without, every 500 ms the
/// README's one-put rows lost 10-20%, every 2 s they stayed within the runs' noise
/// (fillrandom 717-769K against 772-811K, alternated). Elsewhere, nothing.
fn give_back_freed() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        use std::sync::atomic::AtomicU64;
        use std::time::{SystemTime, UNIX_EPOCH};
        static LAST: AtomicU64 = AtomicU64::new(0);
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let last = LAST.load(Ordering::Relaxed);
        if now.saturating_sub(last) < GIVE_BACK_EVERY_MILLIS
            || LAST
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
        {
            return;
        }
        // SAFETY: `malloc_trim` takes no pointer and may be called from any thread.
        unsafe {
            libc::malloc_trim(0);
        }
    }
}

/// How often, at most, retiring a snapshot gives the allocator's free memory back
/// (`give_back_freed`).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const GIVE_BACK_EVERY_MILLIS: u64 = 2000;
