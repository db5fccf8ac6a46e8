//! Writers in more than one process: which state a handle is on, and the database file handed
//! from one process's writing handle to another's (docs/design/concurrency.md, "Writers in
//! more than one process").
//!
//! The exclusive `flock` on the database file is the one writer's lock. A
//! writing handle whose file another process holds opens as a follower (a read-only state that
//! follows that writer's log, `replay::Follower`); its first write transaction asks for the
//! file and waits for it. The holder gives the file back when it is quiescent and someone
//! waits: after its running transaction, a durable checkpoint (so the next holder replays
//! nothing) and its background threads' last work. Each holding period is a state of its own,
//! opened by the ordinary open path once the lock is held, so a holder killed mid-transaction
//! is the open's crash recovery, and nothing of a state is reused after its file went to
//! another process.
//!
//! ```text
//!   follower --begin_write: ring, wait for the flock--> writer (a fresh open)
//!   writer --a writer waits, once quiescent: checkpoint, readers to a slot, unlock--> follower
//! ```
//!
//! Asking: a waiting handle holds an OFD read lock on the lock file's waiting byte (dropped
//! by the kernel with the process, so a killed waiter leaves no request) and rings the
//! doorbell, a futex word in the lock file. The holder's watcher thread (`larch-handoff`)
//! sleeps on that word and looks for a waiting byte's lock when it rings. Within one process,
//! one writing handle per file: a second is `Error::DatabaseLocked`, so that a thread cannot
//! wait for a file its own transaction holds.

use super::log::LogSource;
use super::Shared;
use crate::error::{Error, Result};
use crate::options::{Durability, Options};
use crate::storage::{FileLock, FileStorage, LockTable, Storage};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock, Weak};
use std::thread::JoinHandle;

/// A `Database`'s hold on its states: the one its transactions start on now, and, for a
/// writing handle on a file, the turn of ownership.
pub(crate) struct Handle {
    /// The state new transactions start on: a writer while this handle holds the file, a
    /// follower while another process does, or a read-only handle's state.
    current: RwLock<Arc<Shared>>,
    /// Held while the file changes hands (`take`, `give_back`) and by the handle's operations
    /// that need the file for several steps (`Database::compact`): no handover in between.
    turn: Mutex<()>,
    /// The file, for a writing handle that can hand it over (`None`: a read-only handle, or
    /// storage opened without a path, which one handle owns for its life).
    file: Option<WritingFile>,
    /// The watcher of the file's doorbell, while this handle holds the file.
    watcher: Mutex<Option<JoinHandle<()>>>,
    /// Set by the close: the watcher stops.
    closing: AtomicBool,
    /// What every state of this handle counts into (`Stats::commits` is the handle's).
    counters: Arc<super::Counters>,
}

/// A writing handle's file.
struct WritingFile {
    path: PathBuf,
    /// The options of the writer states it opens (`recover` off: a takeover that meets damage
    /// fails instead).
    options: Options,
    /// Its place in this process's registry of writing handles, freed with the handle.
    _registered: Registered,
}

impl Handle {
    /// The handle on `shared`, a state of its own for its life (a read-only handle, storage
    /// without a path).
    pub(crate) fn fixed(shared: Shared) -> Arc<Handle> {
        Handle::new(shared, None)
    }

    fn new(mut shared: Shared, file: Option<WritingFile>) -> Arc<Handle> {
        let counters = shared.counters.clone();
        let writes = !shared.options.read_only;
        let handle = Arc::new_cyclic(|me: &Weak<Handle>| {
            shared.handle = me.clone();
            let shared = Arc::new(shared);
            shared.flusher.set_owner(Arc::downgrade(&shared));
            Handle {
                current: RwLock::new(shared),
                turn: Mutex::new(()),
                file,
                watcher: Mutex::new(None),
                closing: AtomicBool::new(false),
                counters,
            }
        });
        if writes && handle.file.is_some() {
            handle.watch();
        }
        handle
    }

    /// The state new transactions start on.
    pub(crate) fn current(&self) -> Arc<Shared> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The state whose writer this handle holds the file for, taking the file first if
    /// another process has it (waiting for it if `wait`, else `Error::WriteBusy`), with the
    /// turn held: the file stays this handle's until the guard is dropped.
    pub(crate) fn writer(
        self: &Arc<Handle>,
        wait: bool,
    ) -> Result<(MutexGuard<'_, ()>, Arc<Shared>)> {
        let turn = match self.turn.try_lock() {
            Ok(turn) => turn,
            // Another thread of this handle waits for the file, or it changes hands.
            Err(std::sync::TryLockError::WouldBlock) if !wait => return Err(Error::WriteBusy),
            Err(std::sync::TryLockError::WouldBlock) => {
                self.turn.lock().unwrap_or_else(|e| e.into_inner())
            }
            Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
        };
        let current = self.current();
        if !current.options.read_only {
            return Ok((turn, current));
        }
        let Some(file) = self.file.as_ref() else {
            return Err(Error::ReadOnly);
        };
        let writer = self.take(file, &current, wait)?;
        Ok((turn, writer))
    }

    /// Waits for the file (or, unless `wait`, finds it free), and opens a writer state on it
    /// in place of the follower `follower`. Called with the turn held.
    fn take(
        self: &Arc<Handle>,
        file: &WritingFile,
        follower: &Arc<Shared>,
        wait: bool,
    ) -> Result<Arc<Shared>> {
        let storage = FileStorage::open_with(&file.path, false, false, FileLock::None)?;
        match wait {
            true => {
                let lock = follower.lock.as_ref().ok_or(Error::ReadOnly)?;
                lock.mark_waiting(true)?;
                lock.ring();
                let locked = storage.lock_exclusive();
                let _ = lock.mark_waiting(false);
                locked?;
            }
            false => {
                if !storage.try_lock_exclusive(false)? {
                    return Err(Error::WriteBusy);
                }
            }
        }
        let lock = LockTable::open(&file.path)?;
        let log = LogSource::File(crate::storage::log_path(&file.path));
        let shared = Shared::open(Arc::new(storage), file.options.clone(), Some(lock), log)?;
        let shared = self.adopt(shared, follower.handle.clone());
        // Before anything reads the state: the rest of a replay past the memory budget.
        shared.finish_replay()?;
        self.install(shared.clone(), follower);
        self.watch();
        Ok(shared)
    }

    /// `shared` as a state of this handle (`me`): counting into the handle's counters, its
    /// flusher owned by it.
    fn adopt(&self, mut shared: Shared, me: Weak<Handle>) -> Arc<Shared> {
        shared.counters = self.counters.clone();
        shared.handle = me;
        let shared = Arc::new(shared);
        shared.flusher.set_owner(Arc::downgrade(&shared));
        shared
    }

    /// Makes `next` the state new transactions start on, in place of `old`: `old`'s readers
    /// move to it as they renew.
    fn install(&self, next: Arc<Shared>, old: &Shared) {
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = next;
        old.retired.store(true, Ordering::Release);
    }

    /// Starts the watcher of the doorbell (the handle holds the file).
    fn watch(self: &Arc<Handle>) {
        let me = Arc::downgrade(self);
        let mut watcher = self.watcher.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(old) = watcher.take() {
            // It ended with the file's last handover (it made it), or is ending.
            let _ = old.join();
        }
        *watcher = std::thread::Builder::new()
            .name("larch-handoff".into())
            .spawn(move || watch(me))
            .ok();
    }

    /// Whether this writing handle's file is held by a writer in another process now.
    pub(crate) fn held_elsewhere(&self) -> bool {
        self.file.is_some() && self.current().options.read_only
    }

    /// Stops the watcher, for the close: after it, the current state stays.
    pub(crate) fn stop(&self) {
        self.closing.store(true, Ordering::SeqCst);
        let watcher = self
            .watcher
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(w) = watcher {
            // Wakes it (and any other process's watcher, which finds nothing to do).
            if let Some(lock) = self.current().lock.as_ref() {
                lock.ring();
            }
            let _ = w.join();
        }
    }

    /// Gives the file back to the writer that waits for it, once the state `writer` is
    /// quiescent: its running transaction ended, a durable checkpoint written, its background
    /// threads' work done. Its readers keep their snapshots through a slot of the lock file, as
    /// a closed writer's do; new transactions start on a follower. Returns whether the file
    /// was given back (not if the handle is closing or `writer` is no longer current).
    fn give_back(&self, file: &WritingFile) -> Result<bool> {
        let _turn = self.turn.lock().unwrap_or_else(|e| e.into_inner());
        let writer = self.current();
        if self.closing.load(Ordering::SeqCst) || writer.options.read_only {
            return Ok(false);
        }
        // Write transactions that start from here wait for the turn (`Database::begin_write`).
        writer.handing.store(true, Ordering::Release);
        let handed = self.hand_over(file, &writer);
        if !matches!(handed, Ok(true)) {
            writer.handing.store(false, Ordering::Release);
        }
        handed
    }

    fn hand_over(&self, file: &WritingFile, writer: &Arc<Shared>) -> Result<bool> {
        // Every commit into the tree, durably, so that the next holder replays nothing (and a
        // commit made `Durability::None` here is durable once the file is another's). If that
        // fails (a failed sync stops this state's writes), the next holder's open replays the
        // log, as after a crash: the file is given back all the same.
        let checkpointed = checkpoint_on(writer, Durability::Immediate).is_ok();
        writer.background.stop(writer);
        let follower = open_follower_state(&file.path, &file.options)?;
        let follower = self.adopt(follower, writer.handle.clone());
        let mut guard = writer.writer.lock().unwrap_or_else(|e| e.into_inner());
        // Readers of the writer state keep their pages through a slot, as after a close.
        if !writer.keep_readers_in_slot() {
            // No slot for them: the file stays here until they end.
            return Ok(false);
        }
        self.install(follower, writer);
        // After a durable checkpoint and with its log intact, the log's end is where the next
        // holder appends, with nothing past it to clear at its open (`Reopen::handed_at`).
        if let (Some(log), Some(lock), true) = (&writer.log, &writer.lock, checkpointed) {
            if !log.failed() && !guard.poisoned {
                lock.set_handed_at(log.end());
            }
        }
        if let Err(e) = writer.storage.unlock() {
            // The lock goes with the state's descriptor, once its readers end; it writes
            // nothing more meanwhile.
            guard.poisoned = true;
            return Err(Error::io_at("unlock", &file.path, e));
        }
        Ok(true)
    }
}

/// The watcher's loop: waits for the doorbell, and gives the file back when a writer waits.
/// Ends when the handle closes, or once it gave the file back (the next `take` starts
/// another).
fn watch(handle: Weak<Handle>) {
    loop {
        let Some(h) = handle.upgrade() else { return };
        let current = h.current();
        let (Some(file), Some(lock)) = (h.file.as_ref(), current.lock.as_ref()) else {
            return;
        };
        // The bell before the close's mark: a close that rings after this load changes the
        // count the wait below compares (it returns at once), and one that rang before it
        // marked the close first (`Handle::stop`; both `SeqCst`).
        let seen = lock.bell();
        if h.closing.load(Ordering::SeqCst) || current.options.read_only {
            return;
        }
        if lock.writer_waiting() {
            match h.give_back(file) {
                Ok(true) => return,
                // Closing, readers without a slot, or a follower that did not open: the file
                // stays here, and the waiter waits; tried again shortly.
                _ => {
                    drop(h);
                    std::thread::sleep(std::time::Duration::from_millis(100));
                    continue;
                }
            }
        }
        drop(h);
        lock.wait_for_bell(seen);
    }
}

/// The state a writing handle on the file at `path` opens with: a writer if the file is free,
/// else a follower of the writer that holds it. Registered in this process's writing handles
/// first (a second is `Error::DatabaseLocked`). `open` opens the writer state on the locked
/// storage.
pub(crate) fn open_writing(
    path: &Path,
    options: &Options,
    open: impl FnOnce(Arc<dyn Storage>, LockTable) -> Result<Shared>,
) -> Result<Arc<Handle>> {
    let storage = FileStorage::open_with(path, false, options.create, FileLock::None)?;
    let registered = Registered::claim(&storage)?;
    let file = WritingFile {
        path: path.to_path_buf(),
        options: options.clone().recover(false),
        _registered: registered,
    };
    // A holder that is creating the database has not written it yet: the follower's open
    // finds an empty file and tries again, for a while.
    let mut tries = 0;
    loop {
        if storage.try_lock_exclusive(tries == 0)? {
            let lock = LockTable::open(path)?;
            let shared = open(Arc::new(storage), lock)?;
            return Ok(Handle::new(shared, Some(file)));
        }
        // Another process holds the file: follow it until a write transaction asks for it.
        match open_follower_state(path, options) {
            Err(Error::NotADatabase) if tries < CREATING_TRIES => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            opened => return Ok(Handle::new(opened?, Some(file))),
        }
    }
}

/// How many times an open beside a holder that is creating the database tries again, 10 ms
/// apart.
const CREATING_TRIES: u32 = 200;

/// A read-only state following the writer of the file at `path` in another process (what a
/// writing handle reads while it does not hold the file), not yet part of a handle.
fn open_follower_state(path: &Path, options: &Options) -> Result<Shared> {
    let storage = FileStorage::open_with(path, true, false, FileLock::None)?;
    let lock = LockTable::open(path)?;
    lock.claim_slot()?;
    let options = options.clone().read_only(true).recover(false);
    let log = LogSource::File(crate::storage::log_path(path));
    Shared::open(Arc::new(storage), options, Some(lock), log)
}

/// `Database::checkpoint` on `shared`, which the caller holds the file for: every commit
/// written into the tree, `durability` as asked.
pub(crate) fn checkpoint_on(shared: &Arc<Shared>, durability: Durability) -> Result<()> {
    let mut guard = shared.lock_writer();
    super::checkpoint::merge_slices(shared, &mut guard)?;
    super::txn::Txn::new(shared, guard)?.checkpoint(durability)
}

/// Moves the log to the first slot of a new cycle and gives its file back but the header
/// (`Log::restart`, `Log::cut`), when every record is in a durable checkpoint: a durable
/// commit names the new start as the position to replay from, and only then is the file cut
/// (before it, a power loss returns to a commit that names the old position). `or_commit`:
/// the durable commit is made even where the log cannot restart (the compaction's, which
/// gives back the end of the data file with it). Returns whether the log restarted
/// (`Ok(false)`, with nothing done, where it cannot and `or_commit` is false). The write lock
/// is let go. Requires: called between two transactions (the compaction's last step, and the
/// idle thread's once the idle checkpoints have merged every record: `idle::give_back_log`).
pub(crate) fn restart_log(
    shared: &Arc<Shared>,
    guard: std::sync::MutexGuard<'_, super::WriterState>,
    or_commit: bool,
) -> Result<bool> {
    // Under the write lock: no commit appends to the log meanwhile.
    let restarted = shared.log.as_ref().and_then(|l| l.restart()).is_some();
    if !restarted && !or_commit {
        return Ok(false);
    }
    let written =
        super::txn::Txn::new(shared, guard).and_then(|w| w.checkpoint(Durability::Immediate));
    if let Err(e) = written {
        // The log goes on from its new start, which no durable meta page names yet: a commit
        // appended there would be read back by no open. Stopped instead; a reopen goes on
        // from the last durable commit.
        if restarted {
            shared.lock_writer().poisoned = true;
        }
        return Err(e);
    }
    if let Some(log) = shared.log.as_ref() {
        // Only if no commit went to the log since (`Log::cut` checks).
        log.cut();
    }
    Ok(restarted)
}

/// The files this process has a writing handle on, by device and inode, with the process id
/// that registered each: a child forked from a process keeps its parent's entries in its copy
/// of memory, where they belong to no handle of its own.
static WRITING: Mutex<Vec<(u64, u64, u32)>> = Mutex::new(Vec::new());

/// A file's place in `WRITING`, freed when dropped.
struct Registered((u64, u64, u32));

impl Registered {
    fn claim(storage: &FileStorage) -> Result<Registered> {
        let (dev, ino) = storage.file_id()?;
        let pid = std::process::id();
        let mut writing = WRITING.lock().unwrap_or_else(|e| e.into_inner());
        writing.retain(|&(.., owner)| owner == pid);
        if writing.iter().any(|&(d, i, _)| (d, i) == (dev, ino)) {
            return Err(Error::DatabaseLocked);
        }
        writing.push((dev, ino, pid));
        Ok(Registered((dev, ino, pid)))
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        let mut writing = WRITING.lock().unwrap_or_else(|e| e.into_inner());
        writing.retain(|id| *id != self.0);
    }
}
