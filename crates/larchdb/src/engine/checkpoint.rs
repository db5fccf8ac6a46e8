//! Checkpoints on a thread of their own (docs/design/write-path.md, "Design: concurrent
//! checkpoints").
//!
//! 1. `start`, by the writer between two transactions, when the log has grown by
//!    `Options::checkpoint_bytes`: the published snapshot's overlay is *frozen* (the commits
//!    after it go to a new one; O(1), nothing is copied), and a thread is handed the tree, the
//!    frozen overlay, its newest commit F, the log position L_F its record ends at, and the
//!    disk state (`Disk`: free space, meta slots), which the commits made through the log
//!    meanwhile never touch.
//! 2. The thread merges the frozen overlay into the tree as commit F's tree (its pages and
//!    meta page carry F, the meta page names L_F, so that replay after a crash starts there
//!    with the commits after F) and writes it, unsynced, as a checkpoint of the writer's
//!    would be (`commit::write_commit`); when the log's room calls for a durable checkpoint
//!    (`commit::durable_checkpoint_due`), the thread syncs and settles it before it ends.
//! 3. `finish`, by the writer between two transactions (or waiting, before a change that
//!    writes pages): the new tree is published under the active overlay, and the disk state
//!    comes back. Readers never wait: until then they read the old tree under both overlays.
//!
//! The entry counts that blind writes made too large in the frozen overlay
//! (`WriteTable::set`) are exact in the new tree; the active overlay's counts were derived
//! from the frozen ones, so `finish` corrects them with a commit of its own (one id, no log
//! record: replay derives counts from the records, not from the overlay).

use super::commit::{
    publish_pending, publish_written, settle_keeping_log, write_commit, LogAt, Written,
};
use super::published::Published;
use super::upper::overlay::{Overlay, COUNTS};
use super::{catalog, Disk, Shared, WriterState};
use crate::btree::{self, Scratch};
use crate::error::{Error, Result};
use crate::options::Durability;
use crate::pager::{TableHeader, WritePages};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;

/// A checkpoint running on its own thread (`WriterState::checkpoint`).
pub(crate) struct Running {
    thread: Option<JoinHandle<Option<Outcome>>>,
    /// The outcome, when it ran on the writer's thread (no thread could be started).
    done: Option<Outcome>,
    /// The log position the checkpoint's commit ends at: replay starts there once it is in.
    position: u64,
    /// The log bytes it covers, and when it started: how long checkpoints take paces the
    /// writer (`admission::Pacer::observe`).
    bytes: u64,
    started: std::time::Instant,
    /// Whether the writer pays for its CPU time (`admission::share::Share`): it started beside this
    /// handle's readers, with the overlays under half the memory budget (it then also runs
    /// lowered: `admission::share::checkpoint_nice`).
    pub(crate) share: bool,
    /// Its thread's CPU clock (`None` where it runs on the writer's thread, or the clock
    /// cannot be had).
    cpu_clock: Option<libc::clockid_t>,
}

/// What the thread hands back: the disk state, always, and the checkpoint or its failure.
struct Outcome {
    disk: Disk,
    written: Result<Checkpointed>,
    /// When the thread finished writing (and syncing) it.
    ended: std::time::Instant,
    /// The CPU time the thread had used then (`None` where it cannot be read).
    cpu: Option<std::time::Duration>,
}

struct Checkpointed {
    written: Written,
    /// Tables whose entry count the checkpoint found different from the frozen overlay's.
    recounted: Vec<Recount>,
    /// Whether it was made durable (synced) before it ended.
    durable: bool,
}

/// A table's number, and two entry counts: the one said before (by the overlay, or the
/// tree before a merge) and the tree's exact one.
type Recount = (u64, u64, u64);

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
/// with nothing done, when the published snapshot has no overlay (the caller checkpoints
/// inline). Requires: no checkpoint running; called between two transactions.
pub(crate) fn start(shared: &Arc<Shared>, guard: &mut WriterState) -> Result<bool> {
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
    let (frozen, yields) = {
        let mut rs = shared.read_state();
        if rs.current.overlay.is_none() || rs.current.frozen.is_some() {
            return Ok(false);
        }
        let frozen = rs.current.frozen();
        // Beside readers a checkpoint yields the CPU to them, unless the writer will soon
        // wait for it: its overlays hold half the memory budget already (a lowered checkpoint
        // beside busy readers would keep a stopped writer waiting for tens of seconds).
        let yields = !rs.readers.is_empty() && !super::admission::budget::pressed(shared);
        shared.note_upper(&frozen);
        rs.current = frozen.clone();
        (frozen, yields)
    };
    // The write lock is held and every commit published: the log ends with commit F's record.
    let position = log.end();
    let bytes = log.since(guard.checkpoint_position);
    let started = std::time::Instant::now();
    let Some(disk) = guard.disk.take() else {
        return Ok(false);
    };
    // The disk state is sent once the thread runs: a thread that cannot be started leaves
    // it here, and the checkpoint is written on this thread instead.
    let (send, receive) = mpsc::channel::<Disk>();
    let owner = shared.clone();
    let job = frozen.clone();
    let nice = super::admission::share::checkpoint_nice(&shared.options, yields);
    let spawned = shared.background.spawn("larch-checkpoint", nice, move || {
        let disk = receive.recv().ok()?;
        // Off the writer's thread: the table the last merged overlay left is emptied
        // for a later overlay (`overlay::Spare`).
        owner.spare.prepare();
        Some(run(&owner, disk, &job, position))
    });
    let (thread, disk) = match spawned {
        Some(thread) => match send.send(disk) {
            Ok(()) => (Some(thread), None),
            Err(mpsc::SendError(disk)) => (None, Some(disk)),
        },
        None => (None, Some(disk)),
    };
    let cpu_clock = thread.as_ref().and_then(thread_clock);
    guard.checkpoint = Some(Running {
        thread,
        done: disk.map(|disk| run(shared, disk, &frozen, position)),
        position,
        bytes,
        started,
        share: yields,
        cpu_clock,
    });
    Ok(true)
}

/// Completes the running checkpoint, if any, when it is written, or with `wait`, once it is:
/// publishes its tree under the active overlay and takes the disk state back. Called by the
/// writer between two transactions, or by a transaction about to write pages (`wait`). A
/// failed checkpoint poisons the handle: the log still holds every commit since the last
/// one, and a reopen replays them.
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
        (Some(t), _) => t.join().ok().flatten(),
        (None, done) => done,
    };
    let Some(Outcome {
        disk,
        written,
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
    guard.pacer.observe(running.bytes, elapsed, durable);
    if running.share {
        // The rest of its CPU time is owed; not where it ran on the writer's thread (the
        // writer spent that time itself, and the clock read there is the writer's).
        guard
            .pacer
            .share
            .ended(cpu.filter(|_| running.cpu_clock.is_some()));
    }
    // From here on, a failure leaves the disk state the new tree's and the published snapshot
    // the old one's: the handle stops writing (the log still holds every commit).
    let installed = written.and_then(|c| install(shared, guard, c, running.position));
    match installed {
        Ok(()) => super::Counters::add(&shared.counters.checkpoints),
        Err(_) => guard.poisoned = true,
    }
    installed
}

/// Publishes the checkpoint the thread wrote under the active overlay (`finish`).
fn install(
    shared: &Shared,
    guard: &mut WriterState,
    checkpointed: Checkpointed,
    position: u64,
) -> Result<()> {
    // Published before the snapshot changes (`start` did so for the commits it wrote; these
    // came after).
    publish_pending(shared, guard)?;
    // The snapshot the checkpoint replaces is let go before it is replaced, so that the
    // frozen overlay it holds is freed off this thread (`commit::retire`).
    let (mut txn, mut overlay, recounts) = {
        let current = shared.writer_base();
        let recounts = recounts(&current, &checkpointed.recounted)?;
        (current.txn(), current.overlay.clone(), recounts)
    };
    guard.checkpoint_position = position;
    // The states describe the old tree's pages.
    guard.tables.tree_changed();
    if !recounts.is_empty() {
        txn += 1;
        let o = overlay.get_or_insert_with(|| shared.new_overlay());
        let records = recounts
            .iter()
            .map(|(k, v)| (COUNTS, &k[..], Some(&v[..]), false));
        o.insert_marked(txn, records);
    }
    let disk = guard.disk()?;
    let published = |snap| Published::checkpointed(snap, overlay, txn);
    publish_written(shared, disk, checkpointed.written, published, txn);
    Ok(())
}

/// The count records that correct the newest commit's entry counts by what the checkpoint
/// found: each table's count as of `current`, plus the tree's exact count at the checkpoint,
/// less what the frozen overlay said.
fn recounts(current: &Published, recounted: &[Recount]) -> Result<Vec<([u8; 8], [u8; 8])>> {
    let mut out = Vec::with_capacity(recounted.len());
    for &(table, said, exact) in recounted {
        let now = current
            .overlays()
            .count(table, current.txn())
            .unwrap_or(said);
        let corrected = (now + exact).checked_sub(said).ok_or_else(|| {
            Error::Internal(format!(
                "table {table}: entry count {now} is less than the {said} the checkpoint \
                 corrected to {exact}"
            ))
        })?;
        out.push((table.to_be_bytes(), corrected.to_le_bytes()));
    }
    Ok(out)
}

/// The thread's work: `Outcome` always carries the disk state back.
fn run(shared: &Shared, mut disk: Disk, job: &Published, position: u64) -> Outcome {
    let written = write(shared, &mut disk, job, position);
    Outcome {
        disk,
        written,
        ended: std::time::Instant::now(),
        cpu: own_cpu(),
    }
}

/// Writes the checkpoint of `job` (the published snapshot as frozen by `start`): its frozen
/// overlay merged into its tree, as commit `job.txn()`.
fn write(shared: &Shared, disk: &mut Disk, job: &Published, position: u64) -> Result<Checkpointed> {
    let Some(frozen) = job.frozen.as_deref() else {
        return Err(Error::Internal(
            "a checkpoint with no frozen overlay".into(),
        ));
    };
    let Some(mut carry) = disk.carry.take() else {
        return Err(Error::Poisoned);
    };
    // As `Txn::start_pages`. Readers are registered by their tree's commit, so one that
    // holds this checkpoint's base tree keeps what it frees, whatever its snapshot's commit.
    if let Err(e) = shared.release_pending(&mut carry, disk.last_durable_txn, true) {
        disk.carry = Some(carry);
        return Err(e);
    }
    let pinned = disk
        .settling
        .as_ref()
        .map_or(disk.last_durable_txn, |s| s.txn());
    let f = job.txn();
    let mut pages = WritePages::new(job.snap.clone(), f, pinned, carry, btree::check_node);
    let mut scratch = Scratch::default();
    let catalog = job.snap.meta.catalog;
    let merged = merge_overlay(&mut pages, &mut scratch, catalog, frozen, f);
    let (catalog, counts) = match merged {
        Ok(m) => m,
        Err(e) => {
            disk.carry = Some(pages.abort());
            return Err(e);
        }
    };
    let recounted = counts
        .into_iter()
        .filter_map(|(table, before, exact)| {
            let said = frozen.count(table, f).unwrap_or(before);
            (said != exact).then_some((table, said, exact))
        })
        .collect();
    let mut poisoned = false;
    let mut written = write_commit(
        shared,
        disk,
        &mut poisoned,
        pages,
        catalog,
        Durability::None,
        LogAt::At(position),
    )?;
    // A checkpoint the log's room calls to be made durable (`commit::Settling`) is made so
    // here, off the writer's thread: the writer goes on appending meanwhile, and the log's
    // room comes back as soon as the checkpoint is published (`install`), not at the next
    // checkpoint. Not before: read-only handles in other processes read the log from the
    // published tree's position.
    let settled = settle_keeping_log(shared, disk, &mut poisoned)?;
    written.release_after(settled);
    Ok(Checkpointed {
        written,
        recounted,
        durable: settled.is_some(),
    })
}

/// Merges the records of `overlay` visible at commit `txn` into the tree, table by table in
/// key order (`btree::merge_sorted`), and writes each changed table's header into the catalog
/// rooted at `catalog`. Returns the new catalog root and, for each table merged, its number,
/// its entry count before and after.
pub(crate) fn merge_overlay(
    pages: &mut WritePages,
    scratch: &mut Scratch,
    catalog: TableHeader,
    overlay: &Overlay,
    txn: u64,
) -> Result<(TableHeader, Vec<Recount>)> {
    let names = catalog::list(&*pages, catalog)?;
    let mut catalog = catalog;
    let mut counts = Vec::new();
    let all = overlay.all(txn);
    let mut value = Vec::new();
    for run in all.chunk_by(|a, b| a.0 == b.0) {
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
        btree::merge_sorted(pages, scratch, &mut hdr, run.len(), |i| {
            (run[i].1, run[i].2)
        })?;
        if hdr != before {
            value.clear();
            value.extend_from_slice(&hdr.encode());
            value.extend_from_slice(&props);
            btree::put(pages, scratch, &mut catalog, name.as_bytes(), &value, None)?;
        }
        counts.push((table, before.entries, hdr.entries));
    }
    Ok((catalog, counts))
}
