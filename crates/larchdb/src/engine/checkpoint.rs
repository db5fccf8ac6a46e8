//! Checkpoints on a thread of their own (docs/design/write-path.md, "Design: concurrent
//! checkpoints"; docs/design/footprint.md, "An overlay per slice").
//!
//! 1. `start`, by the writer between two transactions, when a checkpoint is due: one of the
//!    published snapshot's active overlays is *frozen* (O(1), nothing is copied). With one
//!    slice that is the whole overlay, and the commits after it go to a new one. With several
//!    (`upper::slices`), it is the overlay of the slice holding the most records (or, when the
//!    log needs room back, the oldest records), and that slice gets a new overlay, cut in
//!    smaller slices where it covers much of the tree (`recut`); the other slices keep theirs.
//!    A thread is handed the tree, the frozen overlay, the newest commit F, the log position
//!    L_F its record ends at, and the disk state (`Disk`: free space, meta slots), which the
//!    commits made through the log meanwhile never touch.
//! 2. The thread merges the frozen overlay into the tree as commit F's tree (its pages and
//!    meta page carry F) and writes it, unsynced, as a checkpoint of the writer's would be
//!    (`commit::write_commit`). Its meta page names the log position replay starts from after
//!    a crash: L_F, or, where other slices still hold records, the oldest position one of them
//!    needs (replay then applies records the tree already holds, to the same values). A
//!    checkpoint of one slice among several is made durable (its sync on a thread of its own,
//!    `commit::start_settling`), so that the copies of the leaves it rewrote are reused by the
//!    next; a whole one, when the log's room calls for it (`commit::durable_checkpoint_due`),
//!    and so is a slice's where the log keeps a room of its own (`Options::log_room_bytes`,
//!    `settle_now`).
//! 3. `finish`, by the writer between two transactions (or waiting, before a change that
//!    writes pages): the new tree is published under the active overlays, and the disk state
//!    comes back. Readers never wait: until then they read the old tree under the frozen
//!    overlay.
//!
//! The entry counts of the tables the overlays' commits changed are versions in the
//! snapshot's count log (`counts::CountLog`), read before the tree's: each table's count
//! after a commit, whichever slices hold its records. Blind writes (`WriteTable::set`) counted
//! their keys as new; the merge notes which of the frozen overlay's keys the tree had
//! (`Entry::in_tree`), and `finish` publishes the new tree with a count log made from the
//! newest counts less those keys (the same commit: a reader of the snapshot before subtracts
//! the same keys through the frozen overlay's notes).

use super::admission::share::{device_read_bytes, major_faults, IdleRest, LowestRaise, Who};
use super::commit::{
    self, publish_pending, publish_written, settle_keeping_log, write_commit, LogAt, Written,
};
use super::counts::CountLog;
use super::published::Published;
use super::readers::{reader_thread, ReadState};
use super::upper::overlay::{Gathered, Overlay, TableRecord};
use super::upper::slices::{At, Slices};
use super::{catalog, Disk, Shared, WriterState};
use crate::btree::{self, Scratch};
use crate::error::{Error, Result};
use crate::options::Durability;
use crate::pager::{PageSource, TableHeader, WritePages};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;

/// A checkpoint running on its own thread (`WriterState::checkpoint`).
pub(crate) struct Running {
    thread: Option<JoinHandle<Option<Outcome>>>,
    /// The outcome, when it ran on the writer's thread (no thread could be started).
    done: Option<Outcome>,
    /// What it writes, kept for a `Retry` (the snapshot comes back with the outcome: held
    /// here, the frozen overlay would be freed on the writer's thread at `finish`, not by
    /// `commit::retire`).
    job: Job,
    /// The log position the frozen overlay's records end at.
    position: u64,
    /// The log bytes since the last checkpoint started, and when this one started: how long
    /// checkpoints take paces the writer (`admission::Pacer::observe`).
    bytes: u64,
    started: std::time::Instant,
    /// Whether it merges one slice among several.
    slice: bool,
    /// Whether the writer pays for its CPU time (`admission::share::Share`): it started beside this
    /// handle's readers, with the overlays under half the memory budget (it then also runs
    /// lowered: `admission::share::checkpoint_nice`).
    pub(crate) share: bool,
    /// Its thread's CPU clock (`None` where it runs on the writer's thread, or the clock
    /// cannot be had).
    cpu_clock: Option<libc::clockid_t>,
}

/// A checkpoint whose writing failed for a full disk before any of it could be read back:
/// while its pages were written, before its meta page, which leaves the disk state as it was
/// (`commit::fail_commit`). Its frozen overlay stays published, read above the tree as while
/// it was being written, and the next `start` writes it again: the same job over the same
/// snapshot. The error goes to a transaction that needs the checkpoint done; the handle goes
/// on (logged commits, while the log has room), and checkpoints, and so writes that need one,
/// come back once space is.
pub(crate) struct Retry {
    snapshot: Arc<Published>,
    job: Job,
    slice: bool,
}

/// What the thread hands back: the disk state, always, and the checkpoint or its failure.
struct Outcome {
    disk: Disk,
    written: Result<Checkpointed>,
    /// The snapshot it wrote, where it failed for a full disk and left the disk state as it
    /// was (nothing of the checkpoint can be read back): it is written again (`Retry`)
    /// instead of stopping the handle. Any other failure stops it (an I/O error: fail-stop,
    /// durability.md).
    retry: Option<Arc<Published>>,
    /// When the thread finished writing (and syncing) it.
    ended: std::time::Instant,
    /// The CPU time the thread had used then (`None` where it cannot be read).
    cpu: Option<std::time::Duration>,
}

struct Checkpointed {
    written: Written,
    /// The tables whose counts `install` corrects.
    counts: Vec<Recount>,
    /// Whether it was made durable (synced) before it ended.
    durable: bool,
    /// The cuts of the tree it wrote.
    cuts: Option<TreeCuts>,
}

/// What the checkpoint found of the entry count of a table the frozen overlay had blind
/// writes of (`Checkpointed::counts`).
#[derive(Clone, Copy)]
struct Recount {
    table: u64,
    /// Keys that the frozen overlay's blind writes counted as new and the tree had.
    overcounted: u64,
}

/// What a checkpoint merges and names (`start` to `write`).
#[derive(Clone)]
struct Job {
    /// The log position the frozen overlay's records end at.
    position: u64,
    /// The log position its meta page names: `position`, or where the oldest record another
    /// slice holds may be.
    at: u64,
    /// Whether it merges one slice among several, or a whole overlay where slices are asked
    /// for.
    sliced: bool,
    /// Whether it is made durable on a thread of its own as soon as it is written
    /// (`commit::start_settling`).
    settle: bool,
    /// The handle's read transactions open as it started: it shares the CPU and the device
    /// with them (`launch`, `share::DeviceShare`).
    beside: usize,
    /// The thread that started it (`reader_thread`): its read transactions are not counted
    /// among those beside (`ReadState::beside`).
    starter: u64,
    /// Started by the idle checkpointer: beside readers that take every core its merge rests
    /// (`share::IdleRest`).
    idle: bool,
    /// Whether a later start may still cut a slice (fewer than `2k` of them: slices are never
    /// joined), so that the checkpoint finds the cuts of the tree it writes (`TreeCuts`).
    cuts_wanted: bool,
    /// Set by `launch` under the write lock: the writer's reservation for large values from
    /// its cursor (`Meta::reserve_tail`), and the reservation of a checkpoint not yet durable,
    /// which the writer may move to before this one's meta page (`commit::RunSpace`).
    runs_tail: super::commit::Extents,
    runs_pending: Option<super::commit::Extents>,
    /// The oldest commit the slices it does not merge hold, if any: where a replay from its
    /// meta page starts (`at`), in commits.
    horizon: Option<u64>,
}

impl Running {
    /// When it started.
    pub(crate) fn started(&self) -> std::time::Instant {
        self.started
    }

    /// Whether the checkpoint is written (`finish` then waits for nothing).
    pub(crate) fn finished(&self) -> bool {
        self.thread.as_ref().is_none_or(|t| t.is_finished())
    }

    /// The CPU time its thread has used so far, while the thread runs: `None` once it has
    /// ended (its clock then names no thread; `finish` has the total from the thread), or
    /// where the clock cannot be read.
    pub(crate) fn cpu(&self) -> Option<std::time::Duration> {
        if self.finished() {
            return None;
        }
        self.cpu_clock.and_then(clock_time)
    }
}

/// The CPU clock of a thread that runs (Linux; `None` elsewhere).
fn thread_clock<T>(thread: &JoinHandle<T>) -> Option<libc::clockid_t> {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::thread::JoinHandleExt;
        let mut clock: libc::clockid_t = 0;
        // SAFETY: the thread is not joined (its handle is borrowed), so its pthread_t is
        // valid; `clock` is a valid place for the result.
        let rc = unsafe { libc::pthread_getcpuclockid(thread.as_pthread_t(), &mut clock) };
        (rc == 0).then_some(clock)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = thread;
        None
    }
}

/// The calling thread's CPU time so far.
fn own_cpu() -> Option<std::time::Duration> {
    clock_time(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// The time of `clock`, or `None` if it cannot be read (a thread's clock once the thread has
/// ended: an error return, not undefined behaviour).
fn clock_time(clock: libc::clockid_t) -> Option<std::time::Duration> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    if rc != 0 {
        return None;
    }
    let secs = u64::try_from(ts.tv_sec).ok()?;
    let nanos = u32::try_from(ts.tv_nsec).ok()?;
    Some(std::time::Duration::new(secs, nanos))
}

/// Starts a checkpoint on a thread of its own, if there is anything to write: returns false,
/// with nothing done, when no overlay of the published snapshot holds a record (the caller
/// checkpoints inline). `durable`: a slice's checkpoint is made durable whatever the log's
/// room (the idle checkpointer's: an idle writer leaves nothing to a power loss). Requires: no
/// checkpoint running; called between two transactions.
pub(crate) fn start(shared: &Arc<Shared>, guard: &mut WriterState, durable: bool) -> Result<bool> {
    debug_assert!(guard.checkpoint.is_none(), "one checkpoint at a time");
    // Every commit the checkpoint writes is published first: readers must not see an
    // `Immediate` commit before it is durable (the new tree would show it).
    publish_pending(shared, guard)?;
    let (Some(log), Some(disk)) = (shared.log.as_ref(), guard.disk.as_ref()) else {
        return Ok(false);
    };
    if disk.carry.is_none() {
        return Err(Error::Poisoned);
    }
    if let Some(retry) = guard.retry.take() {
        launch(shared, guard, retry.snapshot, retry.job, retry.slice);
        return Ok(true);
    }
    let base = shared.writer_base();
    let Some(active) = base.overlay.clone() else {
        return Ok(false);
    };
    if base.frozen.is_some() {
        return Err(Error::Internal(
            "a checkpoint started over a frozen overlay".into(),
        ));
    }
    let k = shared.options.slices_for(base.snap.meta.page_count);
    // The slice holding the most records; the one holding the oldest where the log needs
    // room back (it is kept from there).
    let by_log = commit::durable_checkpoint_due(shared, log.pressure());
    let chosen = match by_log {
        true => active.oldest().or_else(|| active.fullest()),
        false => active.fullest(),
    };
    let Some(i) = chosen else {
        return Ok(false);
    };
    // The write lock is held and every commit published: the log ends with commit F's record.
    let position = log.end();
    let cuts = if k > 1 {
        // The tree's cuts as the checkpoint that wrote it found them, off the write lock
        // (`TreeCuts`), or found here.
        let found;
        let all = match guard
            .tree_cuts
            .as_ref()
            .filter(|c| c.of(&base.snap.meta, k))
        {
            Some(c) => &c.cuts,
            None => {
                found = tree_cuts(&*base.snap, base.snap.meta.catalog, k)?;
                &found
            }
        };
        recut(all, active.bounds(i), active.slices().len(), k)
    } else {
        Vec::new()
    };
    let slice = active.slices().len() > 1 || !cuts.is_empty();
    let (rest, at, horizon) = if slice {
        let rest = active.frozen_at(i, cuts, || shared.new_overlay());
        let at = rest.oldest_from().map_or(position, |f| f.min(position));
        let horizon = rest.oldest_first_txn();
        (Some(Arc::new(rest)), at, horizon)
    } else {
        (None, position, None)
    };
    // A whole overlay is made durable as a slice is where slices are asked for (the first
    // checkpoint after an open, before the overlay is cut).
    let sliced = slice || k > 1;
    let job = Job {
        position,
        at,
        sliced,
        settle: sliced && (durable || by_log || settle_now(shared, disk, &base.snap.meta)),
        // Set by `launch`, as it starts.
        beside: 0,
        starter: 0,
        idle: durable,
        cuts_wanted: k > 1 && active.slices().len() < 2 * k,
        runs_tail: Vec::new(),
        runs_pending: None,
        horizon,
    };
    let frozen_overlay = active.slices()[i].overlay.clone();
    let (frozen, replaced) = {
        let mut rs = shared.read_state();
        if !Arc::ptr_eq(&rs.current, &base) {
            // Published meanwhile by a committer that let the write lock go (an `Immediate`
            // commit's, older than the base: a no-op, but a new snapshot all the same): the
            // choice above is of the base's overlays; no checkpoint this time.
            return Ok(false);
        }
        freeze(shared, &mut rs, rest, frozen_overlay)
    };
    drop(replaced);
    drop(base);
    launch(shared, guard, frozen, job, slice);
    Ok(true)
}

/// A round of an open's replay (`Shared::finish_replay`): the published overlay, which holds
/// every record before log position `at` and none after, merged into the tree as a durable
/// checkpoint whose meta page names `at`, and published. `start` would name the log's end,
/// past records not replayed yet. `first` is the commit of the record at `at`: a replay from
/// the round's meta page reads no older one (its horizon, `Job::horizon`), though it may be
/// older than the tree (a log kept for slices). Requires: nothing appended to the log since
/// the open.
pub(crate) fn replay_round(
    shared: &Arc<Shared>,
    guard: &mut WriterState,
    at: u64,
    first: u64,
) -> Result<()> {
    finish(shared, guard, true)?;
    publish_pending(shared, guard)?;
    if guard.disk.as_ref().is_none_or(|d| d.carry.is_none()) {
        return Err(Error::Poisoned);
    }
    let base = shared.writer_base();
    let Some(active) = base.overlay.clone() else {
        return Err(Error::internal("a replay round with no overlay"));
    };
    let Some(overlay) = active.single().cloned() else {
        return Err(Error::internal("a replay round over several slices"));
    };
    if base.frozen.is_some() {
        return Err(Error::internal("a replay round over a frozen overlay"));
    }
    let job = Job {
        position: at,
        at,
        sliced: true,
        settle: true,
        beside: 0,
        starter: 0,
        idle: false,
        cuts_wanted: false,
        runs_tail: Vec::new(),
        runs_pending: None,
        horizon: Some(first),
    };
    // The log is kept from the oldest record a slice needed, so a round may hold only records
    // of commits older than the tree (of slices its checkpoint did not merge): `freeze` then
    // gives the tree a commit of no records first. The records after `at` are replayed onto
    // it whatever their ids (`Replay`: a record of a commit older than the tree is applied
    // all the same).
    let (frozen, before) = freeze(shared, &mut shared.read_state(), None, overlay);
    drop((before, base));
    launch(shared, guard, frozen, job, false);
    finish(shared, guard, true)
}

/// The snapshots `freeze` replaced, let go by the caller once the read state's lock is.
type Replaced = (Option<Arc<Published>>, Arc<Published>);

/// Publishes the current snapshot with `frozen` frozen under the active overlays `rest`, and
/// returns it with the snapshots it replaced. Each tree a reader may hold needs an id of its
/// own (readers are registered by it): a checkpoint right after another, with no commit
/// between, or of an overlay replayed onto a tree the log is read from before, gets a commit
/// of no records first. Requires: `rs` is the handle's read state.
fn freeze(
    shared: &Shared,
    rs: &mut ReadState,
    rest: Option<Arc<Slices>>,
    frozen: Arc<Overlay>,
) -> (Arc<Published>, Replaced) {
    let replaced = (rs.current.txn() == rs.current.tree_txn()).then(|| {
        let renumbered = rs.current.renumbered(rs.current.txn() + 1);
        shared.set_current(rs, renumbered)
    });
    // A new shape: a reader on the snapshot before reads the frozen slice's records through
    // the slices it has, which the commits after this one no longer go to (they go to the new
    // parts), so it must not take their ids alone (`Shared::txn_in_shape`).
    let frozen = rs.current.frozen(rest, frozen);
    let before = shared.set_current(rs, frozen.clone());
    (frozen, (replaced, before))
}

/// Runs `job` over `frozen` (the published snapshot with its frozen overlay) on a thread of
/// its own, which takes the disk state; on the writer's thread where none can be started.
fn launch(
    shared: &Arc<Shared>,
    guard: &mut WriterState,
    frozen: Arc<Published>,
    job: Job,
    slice: bool,
) {
    // The handle's read transactions open now, which it shares the CPU and the device with:
    // those of other threads than the one starting it (the writer, or the idle thread).
    let starter = reader_thread();
    let beside = shared.read_state().beside(starter);
    let (runs_pending, runs_tail) = shared.runs_named();
    let job = Job {
        beside,
        starter,
        runs_tail,
        runs_pending,
        ..job
    };
    // Beside readers a checkpoint yields the CPU to them, unless the writer will soon wait
    // for it: its overlays hold half the memory budget already (a lowered checkpoint beside
    // busy readers would keep a stopped writer waiting for tens of seconds). Its share of the
    // device holds whatever the budget (`share::DeviceShare`): each of its sleeps is short.
    let yields = beside > 0 && !super::admission::budget::pressed(shared);
    let bytes = shared
        .log
        .as_ref()
        .map_or(0, |log| log.since(guard.checkpoint_position));
    let started = std::time::Instant::now();
    let Some(disk) = guard.disk.take() else {
        guard.retry = Some(Retry {
            snapshot: frozen,
            job,
            slice,
        });
        return;
    };
    // The disk state is sent once the thread runs: a thread that cannot be started leaves
    // it here, and the checkpoint is written on this thread instead.
    let (send, receive) = mpsc::channel::<Disk>();
    let owner = shared.clone();
    let job_snapshot = frozen.clone();
    let inline = frozen;
    let nice = super::admission::share::checkpoint_nice(&shared.options, yields, beside);
    let thread_job = job.clone();
    let spawned = shared.background.spawn("larch-checkpoint", nice, move || {
        let disk = receive.recv().ok()?;
        // Off the writer's thread: the table the last merged overlay left is emptied
        // for a later overlay (`overlay::Spare`).
        owner.spare.prepare();
        Some(run(&owner, disk, job_snapshot, thread_job))
    });
    let (thread, disk) = match spawned {
        Some(thread) => match send.send(disk) {
            Ok(()) => (Some(thread), None),
            Err(mpsc::SendError(disk)) => (None, Some(disk)),
        },
        None => (None, Some(disk)),
    };
    let cpu_clock = thread.as_ref().and_then(thread_clock);
    let position = job.position;
    guard.checkpoint = Some(Running {
        thread,
        done: disk.map(|disk| run(shared, disk, inline, job.clone())),
        job,
        position,
        bytes,
        started,
        slice,
        share: yields,
        cpu_clock,
    });
}

/// Whether a slice's checkpoint starting now is made durable as soon as it is written, the
/// log's room aside: always, unless `Options::log_room_bytes` asks for a room of its own;
/// then only once the pages the last durable tree pins (copies the checkpoints since made
/// of its pages) exceed a quarter of the data file, or `Options::pinned_bytes_max` if more,
/// so that the file holds at most that much more than one tree.
fn settle_now(shared: &Shared, disk: &Disk, meta: &crate::pager::Meta) -> bool {
    if shared.options.log_room_bytes == 0 {
        return true;
    }
    let page_bytes = shared.page_bytes as u64;
    let pinned = disk.carry.as_ref().map_or(0, |c| c.free.pinned_pages()) * page_bytes;
    pinned > commit::pinned_bytes_bound(shared, meta.page_count)
}

/// Completes the running checkpoint, if any, when it is written, or with `wait`, once it is:
/// publishes its tree under the active overlays and takes the disk state back. Called by the
/// writer between two transactions, or by a transaction about to write pages (`wait`). A
/// checkpoint that failed for a full disk with nothing of it written is kept to be written
/// again (`Retry`: its error returned only with `wait`); any other failure poisons the
/// handle: the log still holds every commit since the last checkpoint, and a reopen replays
/// them.
pub(crate) fn finish(shared: &Shared, guard: &mut WriterState, wait: bool) -> Result<()> {
    let Some(running) = guard.checkpoint.as_ref() else {
        return Ok(());
    };
    if !wait && !running.finished() {
        return Ok(());
    }
    let Some(mut running) = guard.checkpoint.take() else {
        return Ok(());
    };
    let outcome = match (running.thread.take(), running.done.take()) {
        (Some(t), _) => {
            // An idle checkpoint's merge stops resting (`share::IdleRest`).
            shared.checkpoint_awaited.store(true, Ordering::Relaxed);
            let joined = t.join().ok().flatten();
            shared.checkpoint_awaited.store(false, Ordering::Relaxed);
            joined
        }
        (None, done) => done,
    };
    let Some(Outcome {
        disk,
        written,
        retry,
        ended,
        cpu,
    }) = outcome
    else {
        // The thread panicked (or never received the disk state), and the state is lost.
        guard.poisoned = true;
        return Err(Error::Internal("the checkpoint thread panicked".into()));
    };
    guard.disk = Some(disk);
    let elapsed = ended.saturating_duration_since(running.started);
    let durable = written.as_ref().is_ok_and(|c| c.durable);
    if written.is_ok() {
        guard.pacer.observe(running.bytes, elapsed, durable);
    }
    if running.share {
        // The rest of its CPU time is owed; not where it ran on the writer's thread (the
        // writer spent that time itself, and the clock read there is the writer's).
        guard
            .pacer
            .share
            .ended(cpu.filter(|_| running.cpu_clock.is_some()));
    }
    let written = match written {
        Err(e) if retry.is_some() => {
            guard.retry = retry.map(|snapshot| Retry {
                snapshot,
                job: running.job,
                slice: running.slice,
            });
            // Only a caller that needs the checkpoint done hears of it; the others (a
            // transaction beginning, the idle thread) go on, and the next start retries.
            return if wait { Err(e) } else { Ok(()) };
        }
        w => w,
    };
    // From here on, a failure leaves the disk state the new tree's and the published snapshot
    // the old one's: the handle stops writing (the log still holds every commit).
    let installed = written.and_then(|c| install(shared, guard, c, &running));
    match installed {
        Ok(()) => {
            super::Counters::add(&shared.counters.checkpoints);
            if running.job.settle || durable {
                super::Counters::add(&shared.counters.durable_checkpoints);
            }
            if running.slice {
                super::Counters::add(&shared.counters.checkpoint_slices);
            }
        }
        Err(_) => guard.poisoned = true,
    }
    installed
}

/// Publishes the checkpoint the thread wrote under the active overlays (`finish`), with the
/// entry counts corrected by what its merge found of the frozen overlay's blind writes.
fn install(
    shared: &Shared,
    guard: &mut WriterState,
    checkpointed: Checkpointed,
    running: &Running,
) -> Result<()> {
    // Published before the snapshot changes (`start` did so for the commits it wrote; these
    // came after).
    publish_pending(shared, guard)?;
    // The snapshot the checkpoint replaces is let go before it is replaced, so that the
    // frozen overlay it holds is freed off this thread (`commit::retire`).
    let (txn, overlay, counts) = {
        let current = shared.writer_base();
        // With no overlay left, the new tree holds every commit, and its counts are exact.
        let counts = match current.overlay {
            Some(_) => Some(Arc::new(recounted(&current, &checkpointed.counts)?)),
            None => None,
        };
        (current.txn(), current.overlay.clone(), counts)
    };
    guard.checkpoint_position = running.position;
    guard.tree_cuts = checkpointed.cuts;
    // The states describe the old tree's pages.
    guard.tables.tree_changed();
    let disk = guard.disk.as_mut().ok_or_else(|| {
        Error::Internal("a checkpoint put in place without the disk state".into())
    })?;
    let published = |snap| Published::checkpointed(snap, overlay, None, txn, counts);
    publish_written(shared, disk, checkpointed.written, published, txn);
    Ok(())
}

/// The entry counts the new tree is published with under the active overlays: `current`'s
/// (the newest commit's), each table of `counts` less the keys the frozen overlay's blind
/// writes counted as new and the tree had.
fn recounted(current: &Published, counts: &[Recount]) -> Result<CountLog> {
    let mut changed = Vec::with_capacity(counts.len());
    for c in counts.iter().filter(|c| c.overcounted > 0) {
        let Some(newest) = current.count(c.table) else {
            return Err(Error::Internal(format!(
                "table {}: blind writes in the overlays, and no entry count",
                c.table
            )));
        };
        let exact = newest.checked_sub(c.overcounted).ok_or_else(|| {
            Error::Internal(format!(
                "table {}: entry count {newest} is less than the {} keys blind writes counted \
                 as new and the tree had",
                c.table, c.overcounted
            ))
        })?;
        changed.push((c.table, exact));
    }
    Ok(CountLog::after(current.counts().map(|l| &**l), changed))
}

/// While the active overlays are cut in several slices, merges them one at a time, each a
/// checkpoint of its own made durable, until none holds a record: what a checkpoint of
/// everything (`Database::checkpoint`, the close's compaction) does first, so that its own
/// merge, of what is left, does not rewrite every leaf the overlays reach at once (seed 001's
/// data file held two trees for a moment at the close). A bound of twice the slices, and two,
/// on the rounds.
pub(crate) fn merge_slices(shared: &Arc<Shared>, guard: &mut WriterState) -> Result<()> {
    if !shared.options.checkpoint_thread || guard.poisoned || shared.log.is_none() {
        return Ok(());
    }
    finish(shared, guard, true)?;
    let slices = shared
        .writer_base()
        .overlay
        .as_ref()
        .map_or(0, |o| o.slices().len());
    if slices < 2 {
        return Ok(());
    }
    for _ in 0..2 * slices + 2 {
        if !start(shared, guard, true)? {
            break;
        }
        finish(shared, guard, true)?;
    }
    Ok(())
}

/// The thread's work: `Outcome` always carries the disk state back.
fn run(shared: &Arc<Shared>, mut disk: Disk, snapshot: Arc<Published>, job: Job) -> Outcome {
    let mut poisoned = false;
    let written = write(shared, &mut disk, &snapshot, job, &mut poisoned);
    Outcome {
        disk,
        retry: (matches!(written, Err(Error::DiskFull)) && !poisoned).then_some(snapshot),
        written,
        ended: std::time::Instant::now(),
        cpu: own_cpu(),
    }
}

/// Writes the checkpoint of `snapshot` (the published snapshot as frozen by `start`): its
/// frozen overlay merged into its tree, as commit `snapshot.txn()`. Sets `poisoned` where a
/// failure may have left part of it where it can be read back (a meta page, a sync).
fn write(
    shared: &Arc<Shared>,
    disk: &mut Disk,
    snapshot: &Published,
    mut job: Job,
    poisoned: &mut bool,
) -> Result<Checkpointed> {
    let Some(frozen) = snapshot.frozen.as_deref() else {
        *poisoned = true;
        return Err(Error::Internal(
            "a checkpoint with no frozen overlay".into(),
        ));
    };
    let Some(mut carry) = disk.carry.take() else {
        *poisoned = true;
        return Err(Error::Poisoned);
    };
    // As `Txn::start_pages`. Readers are registered by their tree's commit, so one that
    // holds this checkpoint's base tree keeps what it frees, whatever its snapshot's commit.
    if let Err(e) = shared.release_pending(&mut carry, disk.last_durable_txn, true) {
        disk.carry = Some(carry);
        *poisoned = true;
        return Err(e);
    }
    let pinned = disk
        .settling
        .as_ref()
        .map_or(disk.last_durable_txn, |s| s.txn());
    let f = snapshot.txn();
    let mut pages = WritePages::new(snapshot.snap.clone(), f, pinned, carry, btree::check_node);
    if job.settle {
        pages.synced_soon();
    }
    if disk.merge_waited || READ_AHEAD_ALWAYS.load(Ordering::Relaxed) > 0 {
        pages.read_ahead();
    }
    let pace_always = PACE_WRITEBACK_ALWAYS.load(Ordering::Relaxed) > 0;
    if (job.beside > 0 && disk.readers_waited) || pace_always {
        pages.pace_writeback();
    }
    if job.beside > 0 {
        let background = shared.counters.background_faults.clone();
        let mut share = super::admission::share::DeviceShare::new(job.beside, background);
        let (log, thread) = (shared.log.clone(), shared.options.checkpoint_thread);
        let short = move || {
            log.as_ref()
                .is_some_and(|log| commit::log_short(log.pressure(), thread))
        };
        let mut rest = job
            .idle
            .then(|| IdleRest::new(shared.checkpoint_awaited.clone()));
        let mut lowest = LowestRaise::new(shared, job.starter);
        pages.between_leaves(Box::new(move || {
            share.leaf(&short);
            if let Some(r) = rest.as_mut() {
                r.leaf();
            }
            if let Some(l) = lowest.as_mut() {
                l.leaf();
            }
        }));
    }
    let mut scratch = Scratch::default();
    let (read, faults) = (device_read_bytes(Who::Thread), major_faults(Who::Thread));
    let process_faults = if job.beside > 0 {
        major_faults(Who::Process)
    } else {
        None
    };
    let merge_started = std::time::Instant::now();
    if shared.log.is_some() {
        // A replay from this checkpoint reads the records of the slices it leaves, from the
        // oldest commit one holds, or none older than its own.
        pages.defer_runs(job.horizon.unwrap_or(f + 1), shared.named_runs.clone());
    }
    let named = (job.runs_pending.take(), std::mem::take(&mut job.runs_tail));
    let (reserved, freed_leftovers) = match super::commit::runs::reserve(shared, &mut pages, named)
    {
        Ok(r) => r,
        Err(e) => {
            disk.carry = Some(pages.abort());
            return Err(e);
        }
    };
    // A checkpoint that fails frees none of them: the next one does.
    let keep_leftovers = |freed| super::commit::runs::keep_leftovers(shared, freed);
    let merged = (|| {
        let g = frozen.gather(f, None, None);
        let replaced = replaced_runs(&pages, snapshot.snap.meta.catalog, frozen)?;
        let catalog = merge_noted(&mut pages, &mut scratch, snapshot.snap.meta.catalog, &g)?;
        for (run, pages_of) in replaced {
            pages.free_run(run, pages_of)?;
        }
        let counts = counted(frozen, f)?;
        Ok((catalog, counts, g.records.len()))
    })();
    let (catalog, counts, records) = match merged {
        Ok(m) => m,
        Err(e) => {
            // A failed wait for the writeback may not be reported by a sync again.
            if pages.writeback_failed() {
                *poisoned = true;
            }
            disk.carry = Some(pages.abort());
            keep_leftovers(freed_leftovers);
            return Err(e);
        }
    };
    let (asked, requests) = pages.asked_ahead();
    let c = &shared.counters;
    super::Counters::add_micros(&c.checkpoint_merge_micros, merge_started);
    c.read_ahead_pages.fetch_add(asked, Ordering::Relaxed);
    c.read_ahead_requests.fetch_add(requests, Ordering::Relaxed);
    let page_bytes = pages.page_bytes() as u64;
    let pages_read = match (read, device_read_bytes(Who::Thread)) {
        (Some(before), Some(after)) => Some(after.saturating_sub(before) / page_bytes),
        _ => None,
    };
    let own_faults = faults
        .zip(major_faults(Who::Thread))
        .map(|(b, a)| a.saturating_sub(b));
    disk.merge_waited = merge_waits(pages_read, records) || merge_waits(own_faults, records);
    // Beside readers that waited on the device meanwhile (the process's other threads took
    // major faults), a slice's writeback goes a few pages at a time (`Settling::start`).
    let readers_waited = match (process_faults, major_faults(Who::Process), own_faults) {
        (Some(before), Some(after), Some(own)) => after.saturating_sub(before) > own,
        _ => false,
    };
    disk.readers_waited = readers_waited;
    // Before this checkpoint's own plan of the log (`write_commit`), which sizes the ring for
    // what the overlays may hold.
    let alone = job.sliced && disk.merge_waited && job.beside == 0;
    let retired = shared.upper_bytes().1;
    super::admission::budget::after_merge(shared, alone, retired);
    let paced = (job.settle && (readers_waited || pace_always)).then(|| pages.dirty_runs());
    // A power loss may return to this checkpoint once it is durable, and replay the records
    // from the position it names: where that is before the frozen overlay's end (other slices
    // hold records from there), those records must be durable before it is (they may be
    // commits that did not ask to be, and the tree already holds some of them: without the
    // rest, the state after the power loss would be no commit's).
    let log_to = (job.at < job.position).then_some(job.position);
    let at = LogAt::At {
        position: job.at,
        log_to,
    };
    let mut written =
        match write_commit(shared, disk, poisoned, pages, catalog, Durability::None, at) {
            Ok(w) => w,
            Err(e) => {
                keep_leftovers(freed_leftovers);
                return Err(e);
            }
        };
    if let Some(extents) = reserved {
        let mut space = shared.runs.lock().unwrap_or_else(|e| e.into_inner());
        space.offer(f, extents);
    }
    let cuts = job
        .cuts_wanted
        .then(|| TreeCuts::found(shared, &written))
        .flatten();
    if job.settle {
        // A slice's checkpoint is made durable, so that the pages it freed are reused by the
        // next instead of pinned by the last durable tree: the log's sync to `log_to`, the
        // data file's, then its meta page's as durable run on a thread of their own while the
        // writer and the next checkpoint's merge go on; that checkpoint waits for them before
        // its own meta page.
        commit::start_settling(shared, disk, log_to, paced);
        return Ok(Checkpointed {
            written,
            counts,
            durable: false,
            cuts,
        });
    }
    // A checkpoint the log's room calls to be made durable (`commit::Settling`) is made so
    // here, off the writer's thread: the writer goes on appending meanwhile, and the log's
    // room comes back as soon as the checkpoint is published (`install`), not at the next
    // checkpoint. Not before: read-only handles in other processes read the log from the
    // published tree's position.
    let settled = settle_keeping_log(shared, disk, poisoned)?;
    written.release_after(settled);
    Ok(Checkpointed {
        written,
        counts,
        durable: settled.is_some(),
        cuts,
    })
}

/// Whether a merge of `records` records that read `pages` pages from the device
/// (`share::device_read_bytes`), or took `pages` major faults (`share::major_faults`), needed
/// the device for its leaves: more than one in `MERGE_WAIT_RECORDS` records. The next
/// checkpoint then reads its leaves ahead (`WritePages::read_ahead`). The caller asks both:
/// the pages read count those its hints read as well as its faults, and by major faults
/// alone, a merge that read ahead faulted too little to keep the read-ahead for the next one,
/// which then faulted on every leaf, and the one after read ahead again (tupl's updates
/// beyond memory: half the checkpoints read a leaf at a time, 140 us a leaf against 40); the
/// faults still count where the kernel does not account the reads to the thread (no task I/O
/// accounting, a file system that reads without block I/O). Under `MADV_NORMAL` (a file that
/// fits in half the memory, `pager::Readahead`) a fault reads the pages around it too, so a
/// cold cache turns the read-ahead on at fewer faults; it stops once the pages are cached. In
/// memory nothing is read and the read-ahead stops (a descent a record, a system call a run of
/// leaves).
fn merge_waits(pages: Option<u64>, records: usize) -> bool {
    pages.is_some_and(|p| p.saturating_mul(MERGE_WAIT_RECORDS) > records as u64)
}

/// See `merge_waits`.
const MERGE_WAIT_RECORDS: u64 = 64;

/// Every checkpoint paces its pages' writeback, readers or not, while this is above 0: the
/// tests that ask for it (`testing::pace_writeback_every_checkpoint`), so that the paced path
/// runs without readers waiting on a device. A count, so that tests running at once in one
/// process do not turn it off under each other.
pub(crate) static PACE_WRITEBACK_ALWAYS: AtomicUsize = AtomicUsize::new(0);

/// Every checkpoint's merge reads ahead, whatever the last one read, while this is above 0:
/// the tests that ask for it (`testing::read_ahead_every_merge`), so that the read-ahead's path
/// runs on trees in memory.
pub(crate) static READ_AHEAD_ALWAYS: AtomicUsize = AtomicUsize::new(0);

/// What `install` needs of each table the frozen overlay (of commit `f`) has blind writes
/// of, the merge done (`Recount`).
fn counted(frozen: &Overlay, f: u64) -> Result<Vec<Recount>> {
    let mut out = Vec::new();
    for table in frozen.blind_tables() {
        // Every blind key the frozen overlay holds was merged, and the merge noted whether the
        // tree had it.
        let overcounted = frozen.blind_in_tree(table, f, |_| {
            Err(Error::Internal(
                "a blind write's key the checkpoint did not note".into(),
            ))
        })?;
        out.push(Recount { table, overcounted });
    }
    Ok(out)
}

/// Whether a handle with `options` cuts its overlays in slices over a data file of
/// `file_bytes` (`Options::slices_for`), with the checkpoint thread that merges them.
pub(crate) fn sliced(options: &crate::Options, file_bytes: u64, page_bytes: u32) -> bool {
    let pages = file_bytes / u64::from(page_bytes.max(1));
    options.checkpoint_thread && options.slices_for(pages) > 1
}

/// New active overlays for the commits after `base`: cut as `recut` cuts a slice that covers
/// the whole key space, where the options and the file's size call for slices
/// (`Options::slices_for`), so that the first checkpoint after a commit that wrote pages (or
/// after a whole one) merges one slice and not the whole tree.
pub(crate) fn new_slices(shared: &Shared, base: &Published) -> Result<Arc<Slices>> {
    let meta = &base.snap.meta;
    let k = shared.options.slices_for(meta.page_count);
    let cuts = if k > 1 && shared.options.checkpoint_thread {
        recut(
            &tree_cuts(&*base.snap, meta.catalog, k)?,
            (None, None),
            1,
            k,
        )
    } else {
        Vec::new()
    };
    Ok(Arc::new(Slices::new(cuts, || shared.new_overlay())))
}

/// Where the slice `bounds` (one of `slices`) is cut when its overlay is frozen
/// (`Slices::frozen_at`), or when new overlays are made (`new_slices`: the whole key space,
/// one slice): at the cuts of the tree (`tree_cuts`, for `k`) within it, when it holds two of
/// them or more. So a slice covering about 1/k of the leaves or less stays whole, a larger one
/// (the one slice of a new database, the last one of a growing tree) is cut, and there are at
/// most about `2k` slices.
fn recut(
    cuts: &[(u64, Box<[u8]>)],
    (start, end): (Option<At<'_>>, Option<At<'_>>),
    slices: usize,
    k: usize,
) -> Vec<(u64, Box<[u8]>)> {
    if slices >= 2 * k {
        return Vec::new();
    }
    let inside = |c: &&(u64, Box<[u8]>)| {
        let at = (c.0, &c.1[..]);
        start.is_none_or(|s| at > s) && end.is_none_or(|e| at < e)
    };
    let within: Vec<_> = cuts.iter().filter(inside).cloned().collect();
    if within.len() < 2 {
        return Vec::new();
    }
    within
}

/// The keys that cut the tree `snap` into about `k` key ranges of equal leaves, ascending:
/// each table gets its share of the `k` by its entries, and one with two ranges or more
/// starts one (its empty key) and is cut at its `btree::cuts`.
fn tree_cuts<S: PageSource + ?Sized>(
    snap: &S,
    catalog: TableHeader,
    k: usize,
) -> Result<Vec<(u64, Box<[u8]>)>> {
    let names = catalog::list(snap, catalog)?;
    let mut headers = Vec::with_capacity(names.len());
    for name in &names {
        headers.push(catalog::lookup(snap, &catalog, name)?.map(|(hdr, _)| hdr));
    }
    let total: u64 = headers
        .iter()
        .flatten()
        .map(|h| h.entries)
        .sum::<u64>()
        .max(1);
    let mut cuts: Vec<(u64, Box<[u8]>)> = Vec::new();
    for (table, hdr) in headers.iter().enumerate() {
        let Some(hdr) = hdr else {
            continue;
        };
        let parts = (k as u64 * hdr.entries).div_ceil(total) as usize;
        if parts < 2 {
            continue;
        }
        cuts.push((table as u64, Box::default()));
        for key in btree::cuts(snap, hdr, parts)? {
            cuts.push((table as u64, key.into_boxed_slice()));
        }
    }
    Ok(cuts)
}

/// A tree's cuts (`tree_cuts`), found by the checkpoint that wrote the tree, on its own
/// thread, for the next checkpoint's start (`WriterState::tree_cuts`): found there, under the
/// write lock, they took a median 118 us of each start, which every waiting writer waited
/// for (YCSB A with four clients at 200K records of 1 KB: 140 starts in 2 s).
pub(crate) struct TreeCuts {
    /// The tree's commit and catalog root.
    txn: u64,
    catalog: TableHeader,
    k: usize,
    cuts: Vec<(u64, Box<[u8]>)>,
}

impl TreeCuts {
    /// The cuts of the tree of `written`, the slices being asked for (`None` otherwise, or
    /// where the tree cannot be read: the start finds them).
    fn found(shared: &Shared, written: &Written) -> Option<TreeCuts> {
        let meta = &written.meta;
        let k = shared.options.slices_for(meta.page_count);
        let cuts = (k > 1).then(|| tree_cuts(&written.snap, meta.catalog, k).ok())??;
        Some(TreeCuts {
            txn: meta.txn,
            catalog: meta.catalog,
            k,
            cuts,
        })
    }

    /// Whether these are the cuts of the tree `meta` names, for `k`.
    fn of(&self, meta: &crate::pager::Meta, k: usize) -> bool {
        self.txn == meta.txn && self.catalog == meta.catalog && self.k == k
    }
}

/// Merges the records `all` (sorted by table and key; an overlay's at a commit,
/// `Slices::all`) into the tree, table by table in key order (`btree::merge_sorted`), and
/// writes each changed table's header into the catalog rooted at `catalog`. Returns the new
/// catalog root.
pub(crate) fn merge_records(
    pages: &mut WritePages,
    scratch: &mut Scratch,
    catalog: TableHeader,
    all: &[TableRecord<'_>],
) -> Result<TableHeader> {
    merge_noting(pages, scratch, catalog, all, None)
}

/// `merge_records` of a frozen overlay's gathered records, noting on each record's entry
/// whether its key was in the tree (`Gathered::note_in_tree`): the keys its blind writes
/// counted as new and the tree had are counted from those notes (`counted`), since the tree
/// now has them all.
fn merge_noted(
    pages: &mut WritePages,
    scratch: &mut Scratch,
    catalog: TableHeader,
    g: &Gathered<'_>,
) -> Result<TableHeader> {
    let mut found = vec![false; g.records.len()];
    let merged = merge_noting(pages, scratch, catalog, &g.records, Some(&mut found))?;
    for (i, &was) in found.iter().enumerate() {
        g.note_in_tree(i, was);
    }
    Ok(merged)
}

fn merge_noting(
    pages: &mut WritePages,
    scratch: &mut Scratch,
    catalog: TableHeader,
    all: &[TableRecord<'_>],
    mut found: Option<&mut [bool]>,
) -> Result<TableHeader> {
    let names = catalog::list(&*pages, catalog)?;
    let mut catalog = catalog;
    let mut value = Vec::new();
    let mut at = 0;
    for run in all.chunk_by(|a, b| a.0 == b.0) {
        let range = at..at + run.len();
        at = range.end;
        let table = run[0].0;
        let name = names.get(table as usize).ok_or_else(|| {
            Error::Internal(format!("overlay names table {table}, not in the catalog"))
        })?;
        let Some((before, entry)) = catalog::lookup(&*pages, &catalog, name)? else {
            return Err(Error::Internal(format!(
                "table {name} is not in the catalog"
            )));
        };
        let props = TableHeader::properties(entry).to_vec();
        let mut hdr = before;
        let record = |i: usize| (run[i].1, run[i].2);
        let run_of = |i: usize| run[i].3;
        let found = found.as_deref_mut().map(|f| &mut f[range]);
        btree::merge_sorted_runs(pages, scratch, &mut hdr, run.len(), record, &run_of, found)?;
        if hdr != before {
            value.clear();
            value.extend_from_slice(&hdr.encode());
            value.extend_from_slice(&props);
            btree::put(pages, scratch, &mut catalog, name.as_bytes(), &value, None)?;
        }
    }
    Ok(catalog)
}

/// The runs of versions a newer version of the same key replaced in `frozen`, to be freed by
/// its merge (docs/design/large-values.md, "The merge"), with their pages: all but those the
/// tree's cell for the key references (a record a replay applied again, merged before the
/// crash and replaced since), which the merge frees as the cell's.
pub(crate) fn replaced_runs(
    pages: &WritePages,
    catalog: TableHeader,
    frozen: &Overlay,
) -> Result<Vec<(crate::pager::PageRef, u64)>> {
    let replaced = frozen.replaced_runs();
    if replaced.is_empty() {
        return Ok(Vec::new());
    }
    let names = catalog::list(pages, catalog)?;
    let mut headers: std::collections::HashMap<u64, TableHeader> = Default::default();
    let mut out = Vec::with_capacity(replaced.len());
    for (table, key, run, len) in replaced {
        let hdr = match headers.get(&table) {
            Some(h) => *h,
            None => {
                let name = names.get(table as usize).ok_or_else(|| {
                    Error::Internal(format!("overlay names table {table}, not in the catalog"))
                })?;
                let h = catalog::lookup(pages, &catalog, name)?.map(|(h, _)| h);
                let h = h.unwrap_or_default();
                headers.insert(table, h);
                h
            }
        };
        if btree::cell_run(pages, &hdr, key)? == Some(run) {
            continue;
        }
        out.push((
            run,
            crate::layout::overflow::pages_for(len, pages.page_bytes()),
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_merge_reads_ahead_after_one_that_waited_on_the_device() {
        // One page read (or fault) in 64 records is not enough; more is.
        assert!(!merge_waits(Some(1), 64));
        assert!(merge_waits(Some(2), 64));
        assert!(merge_waits(Some(1000), 1000));
        // No reads, no records, or counts that cannot be read: no read-ahead.
        assert!(!merge_waits(Some(0), 1000));
        assert!(!merge_waits(Some(0), 0));
        assert!(!merge_waits(None, 10));
        assert!(merge_waits(Some(u64::MAX), 10), "no overflow");
    }
}
