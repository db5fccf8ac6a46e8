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
//!
//! With `Options::checkpoint_slices`, step 2 may merge one key range of the frozen overlay
//! (`Slicing`): step 3 then publishes the new tree under the frozen overlay still, and the
//! next slice starts as soon as it is in place, until the last one.

use super::commit::{
    self, publish_pending, publish_written, settle_keeping_log, write_commit, LogAt, Written,
};
use super::published::Published;
use super::upper::overlay::{Gathered, Overlay, TableRecord, COUNTS};
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
    /// The log position the frozen overlay's records end at: replay starts there once the
    /// whole overlay is in the tree.
    position: u64,
    /// What it merges: the whole frozen overlay or its first slice, or a later slice.
    part: Part,
    /// The log bytes it covers, and when it started: how long checkpoints take paces the
    /// writer (`admission::Pacer::observe`).
    bytes: u64,
    started: std::time::Instant,
    /// When the frozen overlay's first slice started (`started` if this is it).
    since: std::time::Instant,
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
    /// Tables whose entry count the checkpoint found different from the frozen overlay's
    /// (the last or only part of a frozen overlay).
    recounted: Vec<Recount>,
    /// Whether it was made durable (synced) before it ended.
    durable: bool,
    /// A slice that leaves others of the frozen overlay to merge.
    partial: Option<Partial>,
}

/// A slice's checkpoint that leaves others to merge (`Checkpointed::partial`).
struct Partial {
    /// The slices after it, when it was the first (the plan).
    plan: Option<Slicing>,
    /// The tables whose entry count in the tree it changed, with the count before.
    changed: Vec<(u64, u64)>,
}

/// What a checkpoint merges (`Running::part`).
#[derive(Clone)]
enum Part {
    /// A frozen overlay just frozen, whose records start at log position `from`: all of it,
    /// or, where the options and the file's size say to cut it (`Options::slices_for`), its
    /// first slice.
    First { from: u64 },
    /// A later slice of a frozen overlay cut by the first (`Slicing`).
    Slice(Slice),
}

/// One key range of a frozen overlay to merge (`Part::Slice`).
#[derive(Clone)]
struct Slice {
    /// From this (table, key) on; to the next cut (exclusive), or the end if `None`.
    start: (u64, Vec<u8>),
    end: Option<(u64, Vec<u8>)>,
    /// Where the frozen overlay's records start in the log: what a slice that is not the last
    /// names as the log position.
    from: u64,
    /// The tables of the frozen overlay and their entry counts before its first slice: the
    /// last slice corrects the counts by them.
    base_counts: Arc<Vec<(u64, u64)>>,
}

/// A checkpoint by slices part way (`WriterState::slicing`; docs/design/footprint.md): the
/// published snapshot's frozen overlay is in the tree for the slices before `next`, and the
/// checkpoints of the others follow one another as soon as each is in place.
///
/// Each slice's tree is a commit of its own (an id no log record has: `Published::renumbered`),
/// so that the pages one slice frees are kept for the readers of the tree before it; and each
/// is made durable (its sync overlapping the next slice's merge), so that those pages are
/// reused by the slices after it (otherwise the last durable tree would keep every leaf the
/// slices rewrote, as a whole-overlay checkpoint does).
/// Until the last slice, the meta page names the log position where the frozen overlay's
/// records start, and replay applies them all again (the merged slices' to the same values).
pub(crate) struct Slicing {
    /// When the first slice started: the writer is paced by how long a whole frozen overlay
    /// takes to reach the tree (its log is kept until the last slice), not by one slice.
    started: std::time::Instant,
    /// Where each slice after the first starts, ascending (table, key).
    cuts: Vec<(u64, Vec<u8>)>,
    /// The next slice to merge: it starts at `cuts[next - 1]`.
    next: usize,
    from: u64,
    base_counts: Arc<Vec<(u64, u64)>>,
}

impl Slicing {
    /// The next slice's job; with `rest`, every slice left, as one.
    fn job(&self, rest: bool) -> Option<Slice> {
        Some(Slice {
            start: self.cuts.get(self.next.checked_sub(1)?)?.clone(),
            end: if rest {
                None
            } else {
                self.cuts.get(self.next).cloned()
            },
            from: self.from,
            base_counts: self.base_counts.clone(),
        })
    }
}

/// A table's number, and two entry counts: the one said before (by the overlay, or the
/// tree before a merge) and the tree's exact one.
type Recount = (u64, u64, u64);

impl Running {
    /// When the frozen overlay it merges began to be merged: for a checkpoint by slices,
    /// when its first slice started (`Slicing`).
    pub(crate) fn frozen_since(&self) -> std::time::Instant {
        self.since
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
    // The frozen overlay's memory comes back only with its last slice: once the overlays hold
    // half the memory budget, the slices left are merged as one, so that a writer the budget
    // stops waits for one merge, not for each slice's (4 KiB values beyond memory: half a
    // second a slice, and a writer stopped for seconds).
    let rest = super::admission::budget::pressed(shared);
    let next = match guard.slicing.as_ref() {
        Some(s) => Some(
            s.job(rest)
                .ok_or_else(|| Error::Internal("a checkpoint by slices past its last".into()))?,
        ),
        None => None,
    };
    let (frozen, yields, replaced) = {
        let mut rs = shared.read_state();
        // Beside readers a checkpoint yields the CPU to them, unless the writer will soon
        // wait for it: its overlays hold half the memory budget already (a lowered checkpoint
        // beside busy readers would keep a stopped writer waiting for tens of seconds).
        let yields = !rs.readers.is_empty() && !super::admission::budget::pressed(shared);
        if next.is_some() {
            if rs.current.frozen.is_none() {
                return Err(Error::Internal(
                    "a checkpoint by slices without its frozen overlay".into(),
                ));
            }
            // The slice's tree gets an id of its own: the published snapshot becomes a
            // commit of no records with that id (`Slicing`).
            let txn = rs.current.txn() + 1;
            let renumbered = rs.current.renumbered(txn);
            let job = renumbered.slice_job(txn);
            (job, yields, Some(shared.set_current(&mut rs, renumbered)))
        } else {
            if rs.current.overlay.is_none() || rs.current.frozen.is_some() {
                return Ok(false);
            }
            // An overlay replayed onto a tree of a checkpoint by slices may hold only commits
            // that tree's id is newer than (the log is read from before it): the checkpoint
            // still needs an id of its own.
            let replaced = (rs.current.txn() == rs.current.tree_txn()).then(|| {
                let renumbered = rs.current.renumbered(rs.current.txn() + 1);
                shared.set_current(&mut rs, renumbered)
            });
            let frozen = rs.current.frozen();
            shared.note_upper(&frozen);
            rs.current = frozen.clone();
            (frozen, yields, replaced)
        }
    };
    drop(replaced);
    // The write lock is held and every commit published: the log ends with commit F's record.
    let position = log.end();
    let (part, bytes) = match next {
        Some(slice) => {
            // The frozen overlay's log.
            let bytes = guard.overlay_from.saturating_sub(slice.from);
            (Part::Slice(slice), bytes)
        }
        None => {
            let from = guard.overlay_from;
            guard.overlay_from = position;
            (Part::First { from }, log.since(guard.checkpoint_position))
        }
    };
    let position = match &part {
        // A later slice ends where the frozen overlay's records end: the active overlay's
        // start.
        Part::Slice(_) => guard.overlay_from,
        Part::First { .. } => position,
    };
    let started = std::time::Instant::now();
    let since = match (&part, guard.slicing.as_ref()) {
        (Part::Slice(_), Some(s)) => s.started,
        _ => started,
    };
    let Some(disk) = guard.disk.take() else {
        return Ok(false);
    };
    // The disk state is sent once the thread runs: a thread that cannot be started leaves
    // it here, and the checkpoint is written on this thread instead.
    let (send, receive) = mpsc::channel::<Disk>();
    let owner = shared.clone();
    let job = frozen.clone();
    let work = part.clone();
    let nice = super::admission::share::checkpoint_nice(&shared.options, yields);
    let spawned = shared.background.spawn("larch-checkpoint", nice, move || {
        let disk = receive.recv().ok()?;
        // Off the writer's thread: the table the last merged overlay left is emptied
        // for a later overlay (`overlay::Spare`).
        owner.spare.prepare();
        Some(run(&owner, disk, &job, position, &work))
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
        done: disk.map(|disk| run(shared, disk, &frozen, position, &part)),
        position,
        part,
        bytes,
        started,
        since,
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
    // The writer is paced by how long a frozen overlay takes to reach the tree: a checkpoint
    // by slices is observed once, at its last slice, from its first slice's start.
    let elapsed = ended.saturating_duration_since(running.since);
    let durable = written.as_ref().is_ok_and(|c| c.durable);
    if written.as_ref().is_ok_and(|c| c.partial.is_none()) {
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
    // From here on, a failure leaves the disk state the new tree's and the published snapshot
    // the old one's: the handle stops writing (the log still holds every commit).
    let sliced = written
        .as_ref()
        .is_ok_and(|c| c.partial.is_some() || matches!(running.part, Part::Slice(_)));
    let installed = written.and_then(|c| install(shared, guard, c, &running));
    match installed {
        Ok(()) => {
            super::Counters::add(&shared.counters.checkpoints);
            if sliced {
                super::Counters::add(&shared.counters.checkpoint_slices);
            }
        }
        Err(_) => guard.poisoned = true,
    }
    installed
}

/// Waits for the running checkpoint, then merges the slices a checkpoint by slices has left,
/// one after the other: afterwards the published snapshot has no frozen overlay. Called by a
/// transaction about to write pages (`Txn::start_pages`).
pub(crate) fn drain(shared: &Arc<Shared>, guard: &mut WriterState) -> Result<()> {
    finish(shared, guard, true)?;
    while guard.slicing.is_some() {
        if !start(shared, guard)? {
            return Err(Error::Internal(
                "a checkpoint by slices could not go on".into(),
            ));
        }
        finish(shared, guard, true)?;
    }
    Ok(())
}

/// Publishes the checkpoint the thread wrote under the active overlay (`finish`): with the
/// frozen overlay still above it if slices of it are left to merge.
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
    let (mut txn, mut overlay, frozen, records) = {
        let current = shared.writer_base();
        let records = match &checkpointed.partial {
            None => recounts(&current, &checkpointed.recounted)?,
            Some(p) => kept_counts(&current, &p.changed),
        };
        (
            current.txn(),
            current.overlay.clone(),
            current.frozen.clone(),
            records,
        )
    };
    if matches!(running.part, Part::First { .. }) {
        guard.checkpoint_position = running.position;
    }
    // The states describe the old tree's pages.
    guard.tables.tree_changed();
    if !records.is_empty() {
        txn += 1;
        let o = overlay.get_or_insert_with(|| shared.new_overlay());
        let records = records
            .iter()
            .map(|(k, v)| (COUNTS, &k[..], Some(&v[..]), false));
        o.insert_marked(txn, records);
    }
    let WriterState { disk, slicing, .. } = &mut *guard;
    let disk = disk.as_mut().ok_or_else(|| {
        Error::Internal("a checkpoint put in place without the disk state".into())
    })?;
    match checkpointed.partial {
        None => {
            *slicing = None;
            let published = |snap| Published::checkpointed(snap, overlay, None, txn);
            publish_written(shared, disk, checkpointed.written, published, txn);
        }
        Some(Partial { plan, .. }) => {
            let Some(frozen) = frozen else {
                return Err(Error::Internal(
                    "a slice's checkpoint with no frozen overlay above it".into(),
                ));
            };
            let published = |snap| Published::checkpointed(snap, overlay, Some(frozen), txn);
            publish_written(shared, disk, checkpointed.written, published, txn);
            match (plan, slicing.as_mut()) {
                (Some(plan), _) => {
                    *slicing = Some(Slicing {
                        started: running.started,
                        ..plan
                    })
                }
                (None, Some(s)) => s.next += 1,
                (None, None) => {
                    return Err(Error::Internal("a later slice with no slicing".into()))
                }
            }
        }
    }
    Ok(())
}

/// The count records a slice's checkpoint needs so that readers count as before: a table
/// whose count in the tree the slice changed, and that no overlay gives a count for (its
/// count was the tree's), keeps the tree's count before the slice (the frozen overlay's
/// records are all still above the tree: the merged slice changed nothing a reader sees).
fn kept_counts(current: &Published, changed: &[(u64, u64)]) -> Vec<([u8; 8], [u8; 8])> {
    changed
        .iter()
        .filter(|&&(table, _)| current.overlays().count(table, current.txn()).is_none())
        .map(|&(table, before)| (table.to_be_bytes(), before.to_le_bytes()))
        .collect()
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
fn run(shared: &Shared, mut disk: Disk, job: &Published, position: u64, part: &Part) -> Outcome {
    let written = write(shared, &mut disk, job, position, part);
    Outcome {
        disk,
        written,
        ended: std::time::Instant::now(),
        cpu: own_cpu(),
    }
}

/// What a checkpoint merged (`write`).
struct Merged {
    catalog: TableHeader,
    /// Each table merged: its number, its entry count before and after.
    counts: Vec<Recount>,
    /// A slice that leaves others to merge: the plan, if this was the first.
    partial: Option<Option<Slicing>>,
    /// The last slice of several: each table's count before the first.
    base_counts: Option<Arc<Vec<(u64, u64)>>>,
    /// Whether it is to be made durable: a slice, or a whole overlay where slices were asked
    /// for and it was too small to cut (the copies of the leaves it rewrote are then reused
    /// as soon as it is durable, as a slice's are).
    durable: bool,
}

/// Writes the checkpoint of `job` (the published snapshot as frozen by `start`): its frozen
/// overlay, or the part of it `part` says, merged into its tree, as commit `job.txn()`.
fn write(
    shared: &Shared,
    disk: &mut Disk,
    job: &Published,
    position: u64,
    part: &Part,
) -> Result<Checkpointed> {
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
    let merged = match part {
        Part::First { from } => {
            let meta = &job.snap.meta;
            let memory = super::admission::budget::process_memory();
            let slices = shared
                .options
                .slices_for(meta.page_count, meta.page_bytes, memory);
            let min = match shared.options.checkpoint_slices {
                0 => SLICE_RECORDS_MIN,
                _ => 1,
            };
            let cut = Cut { slices, min };
            merge_first(&mut pages, &mut scratch, catalog, frozen, f, cut, *from)
        }
        Part::Slice(slice) => merge_slice(&mut pages, &mut scratch, catalog, frozen, f, slice),
    };
    let merged = match merged {
        Ok(m) => m,
        Err(e) => {
            disk.carry = Some(pages.abort());
            return Err(e);
        }
    };
    let said = |table: u64, before: u64| frozen.count(table, f).unwrap_or(before);
    let recounted: Vec<Recount> = match (&merged.partial, &merged.base_counts) {
        (Some(_), _) => Vec::new(),
        (None, None) => merged
            .counts
            .iter()
            .filter_map(|&(table, before, exact)| {
                let said = said(table, before);
                (said != exact).then_some((table, said, exact))
            })
            .collect(),
        // The last slice: every table of the frozen overlay, against its count before the
        // first slice and its exact count now.
        (None, Some(base)) => {
            let mut out = Vec::new();
            let names = catalog::list(&pages, merged.catalog)?;
            for &(table, before) in base.iter() {
                let exact = match names.get(table as usize) {
                    Some(name) => catalog::lookup(&pages, &merged.catalog, name)?
                        .map_or(0, |(hdr, _)| hdr.entries),
                    None => 0,
                };
                let said = said(table, before);
                if said != exact {
                    out.push((table, said, exact));
                }
            }
            out
        }
    };
    let changed: Vec<(u64, u64)> = merged
        .counts
        .iter()
        .filter(|&&(_, before, after)| before != after)
        .map(|&(table, before, _)| (table, before))
        .collect();
    // Made durable below: every slice, and a whole overlay where slices were asked for.
    let settle = merged.durable;
    // A slice that leaves others names the log from the frozen overlay's first record.
    let at = match part {
        Part::First { from } if merged.partial.is_some() => *from,
        Part::Slice(slice) if merged.partial.is_some() => slice.from,
        _ => position,
    };
    // A power loss may return to such a slice, once it is durable, and replay those records:
    // so they must be durable before it is (they may be commits that did not ask to be, and a
    // slice already holds some of them: without the rest, the state after the power loss
    // would be no commit's).
    if at < position {
        if let Some(log) = shared.log.as_ref() {
            if let Err(e) = log.sync_to(position) {
                disk.carry = Some(pages.abort());
                return Err(e);
            }
        }
    }
    let mut poisoned = false;
    let mut written = write_commit(
        shared,
        disk,
        &mut poisoned,
        pages,
        merged.catalog,
        Durability::None,
        LogAt::At(at),
    )?;
    if settle {
        // Every slice is made durable, so that the pages it freed are reused by the slices
        // after it instead of pinned by the last durable tree (`Slicing`): its sync runs on a
        // thread of its own while the next slice merges, which waits for it before its own
        // meta page; the last one's, while the writer goes on. So is a whole overlay where
        // slices were asked for and it was too small to cut.
        commit::start_settling(shared, disk);
        return Ok(Checkpointed {
            written,
            recounted,
            durable: false,
            partial: merged.partial.map(|plan| Partial { plan, changed }),
        });
    }
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
        partial: None,
    })
}

/// Records of a checkpoint by slices at least, for each slice, where the slices are chosen
/// by the file's size (`Options::checkpoint_slices` 0): fewer would pay a durable commit for a
/// few leaves. A number of slices set explicitly is taken as said, down to a record a slice.
const SLICE_RECORDS_MIN: usize = 1024;

/// How a frozen overlay is cut (`plan`): into about `slices` slices of `min` records at least.
#[derive(Clone, Copy)]
struct Cut {
    slices: usize,
    min: usize,
}

/// The first checkpoint of a frozen overlay: the whole overlay, or where `cut` asks for more
/// than one slice and the overlay has the records for two, its first slice, with the plan for
/// the others (`Slicing`, its records starting at log position `from`).
fn merge_first(
    pages: &mut WritePages,
    scratch: &mut Scratch,
    catalog: TableHeader,
    frozen: &Overlay,
    f: u64,
    cut: Cut,
    from: u64,
) -> Result<Merged> {
    let g = frozen.gather(f, None, None);
    let all = &g.records;
    let cuts = if cut.slices > 1 && all.len() >= 2 * cut.min {
        plan(&*pages, catalog, all, cut)?
    } else {
        Vec::new()
    };
    let Some(first_cut) = cuts.first() else {
        let (catalog, counts) = merge_records(pages, scratch, catalog, all)?;
        return Ok(Merged {
            catalog,
            counts,
            partial: None,
            base_counts: None,
            durable: cut.slices > 1,
        });
    };
    let mut base_counts = Vec::new();
    for run in all.chunk_by(|a, b| a.0 == b.0) {
        let table = run[0].0;
        let entries = table_header(&*pages, catalog, table)?.map_or(0, |(_, hdr)| hdr.entries);
        base_counts.push((table, entries));
    }
    let end = all.partition_point(|r| (r.0, r.1) < (first_cut.0, &first_cut.1[..]));
    let (catalog, counts) = merge_slice_of(pages, scratch, catalog, &g, 0..end)?;
    Ok(Merged {
        catalog,
        counts,
        partial: Some(Some(Slicing {
            // Set to the first slice's start when it is put in place (`install`).
            started: std::time::Instant::now(),
            cuts,
            next: 1,
            from,
            base_counts: Arc::new(base_counts),
        })),
        base_counts: None,
        durable: true,
    })
}

/// A later slice of a frozen overlay (`Part::Slice`).
fn merge_slice(
    pages: &mut WritePages,
    scratch: &mut Scratch,
    catalog: TableHeader,
    frozen: &Overlay,
    f: u64,
    slice: &Slice,
) -> Result<Merged> {
    let start = (slice.start.0, &slice.start.1[..]);
    let end = slice.end.as_ref().map(|(t, k)| (*t, &k[..]));
    let g = frozen.gather(f, Some(start), end);
    let (catalog, counts) = merge_slice_of(pages, scratch, catalog, &g, 0..g.records.len())?;
    let last = slice.end.is_none();
    Ok(Merged {
        catalog,
        counts,
        partial: (!last).then_some(None),
        base_counts: last.then(|| slice.base_counts.clone()),
        durable: true,
    })
}

/// Where a frozen overlay's records, `all`, are cut into about `cut.slices` slices: at keys
/// that cut each table's tree into parts of about equal leaves (`btree::cuts`), each table's
/// share of the slices by its entries, and at the start of each table it writes; then joined
/// where a slice would hold fewer than `cut.min` records. Each cut is where a slice after the
/// first starts. Empty when the records make one slice.
fn plan(
    src: &WritePages,
    catalog: TableHeader,
    all: &[TableRecord<'_>],
    cut: Cut,
) -> Result<Vec<(u64, Vec<u8>)>> {
    let slices = cut.slices as u64;
    let mut tables = Vec::new();
    for run in all.chunk_by(|a, b| a.0 == b.0) {
        let hdr = table_header(src, catalog, run[0].0)?.map(|(_, hdr)| hdr);
        tables.push((run[0].0, hdr));
    }
    let total: u64 = tables
        .iter()
        .map(|(_, h)| h.map_or(0, |h| h.entries))
        .sum::<u64>()
        .max(1);
    let mut candidates: Vec<(u64, Vec<u8>)> = Vec::new();
    for (table, hdr) in tables {
        candidates.push((table, Vec::new()));
        if let Some(hdr) = hdr {
            let parts = (slices * hdr.entries).div_ceil(total) as usize;
            for key in btree::cuts(src, &hdr, parts)? {
                candidates.push((table, key));
            }
        }
    }
    // Join parts with too few records: a cut is kept when the records since the last kept
    // one, and those after it, are enough.
    let mut cuts = Vec::new();
    let mut last = 0usize;
    for (table, key) in candidates {
        let at = all.partition_point(|r| (r.0, r.1) < (table, &key[..]));
        if at - last >= cut.min && all.len() - at >= cut.min {
            cuts.push((table, key));
            last = at;
        }
    }
    Ok(cuts)
}

/// Table `table`'s name and header in the catalog rooted at `catalog`, if it is there.
fn table_header(
    src: &WritePages,
    catalog: TableHeader,
    table: u64,
) -> Result<Option<(String, TableHeader)>> {
    let names = catalog::list(src, catalog)?;
    let Some(name) = names.get(table as usize) else {
        return Ok(None);
    };
    Ok(catalog::lookup(src, &catalog, name)?.map(|(hdr, _)| (name.clone(), hdr)))
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
    merge_records(pages, scratch, catalog, &overlay.all(txn))
}

/// `merge_overlay`, of the records `all` (sorted by table and key).
fn merge_records(
    pages: &mut WritePages,
    scratch: &mut Scratch,
    catalog: TableHeader,
    all: &[TableRecord<'_>],
) -> Result<(TableHeader, Vec<Recount>)> {
    merge_noting(pages, scratch, catalog, all, None)
}

/// `merge_records` of the gathered records `g.records[range]`, noting on each record's entry
/// whether its key was in the tree (`Gathered::note_in_tree`): a slice of a checkpoint by
/// slices, whose frozen overlay stays above the tree, counted by blind writes' keys as the
/// tree had them before any slice.
fn merge_slice_of(
    pages: &mut WritePages,
    scratch: &mut Scratch,
    catalog: TableHeader,
    g: &Gathered<'_>,
    range: std::ops::Range<usize>,
) -> Result<(TableHeader, Vec<Recount>)> {
    let records = &g.records[range.clone()];
    let mut found = vec![false; records.len()];
    let merged = merge_noting(pages, scratch, catalog, records, Some(&mut found))?;
    for (i, &was) in found.iter().enumerate() {
        g.note_in_tree(range.start + i, was);
    }
    Ok(merged)
}

fn merge_noting(
    pages: &mut WritePages,
    scratch: &mut Scratch,
    catalog: TableHeader,
    all: &[TableRecord<'_>],
    mut found: Option<&mut [bool]>,
) -> Result<(TableHeader, Vec<Recount>)> {
    let names = catalog::list(&*pages, catalog)?;
    let mut catalog = catalog;
    let mut counts = Vec::new();
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
        match found.as_deref_mut() {
            Some(f) => btree::merge_sorted_noting(
                pages,
                scratch,
                &mut hdr,
                run.len(),
                record,
                &mut f[range],
            )?,
            None => btree::merge_sorted(pages, scratch, &mut hdr, run.len(), record)?,
        }
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
