//! Write admission: what a write transaction waits for before it starts, decided in one
//! function (`make_room`), as LevelDB's `DBImpl::MakeRoomForWrite` holds the whole of its
//! policy.
//!
//! Commits through the log are retired only by checkpoints, which merge them into the tree on
//! a thread of their own; the log's ring holds what they have not retired yet. A writer that
//! appends faster than checkpoints merge fills the ring, and a full ring can only stop it
//! until a checkpoint gives room back: a stall as long as a checkpoint and its sync (seconds,
//! with large records). And the checkpoints take CPU: beside readers, the writer and its
//! checkpoints together must not take more than the one thread's share a writer that merged
//! its own commits would. So, under the write lock, before each write transaction, in order:
//!
//! 1. **A checkpoint due** (the log grew by a checkpoint's bytes, `Log::checkpoint_due`, or the
//!    active overlay holds a quarter of the memory budget, `budget.rs`): one
//!    that ended is put in place, and one is started on its own thread if none runs; without
//!    the checkpoint thread it is written here, and the caller takes the lock again.
//! 2. **A durable checkpoint early**: a log whose room calls for a durable checkpoint
//!    (`commit::durable_checkpoint_due`) gets one as soon as none runs and the log has grown by
//!    a quarter of a checkpoint's bytes, without waiting for all of them: a writer paced near
//!    the reserve would take long to append them.
//! 3. **A stop**: with less than the reserve left (the next record may not fit), or the
//!    overlays at three quarters of the memory budget (`budget::over_budget`), the writer
//!    waits for the running checkpoint to be put in place, or starts one and waits, before its
//!    transaction starts: a commit that found the log full would otherwise merge the whole
//!    overlay on the writer's thread (`Txn::route`), the work of a checkpoint and of the one
//!    already running. Pacing makes this rare (`CommitStats::log_full_waits`).
//! 4. **A slowdown**: the writer sleeps what it owes: the pacing (`pace.rs`: the room left in
//!    the log, and the memory left before the budget's stop, must last as long as a checkpoint
//!    takes), beside readers while more threads can run than there are cores, the CPU time
//!    the running checkpoint used, and beside readers that wait on the device, its share of
//!    the device (`share.rs`: `Share`, `WriterDevice`). A share's sleep ends early once
//!    another thread waits for the write lock (`share_sleep`).
//!
//! The checkpoint's own priority is admission's too (`share::checkpoint_nice`): beside
//! readers it runs `CHECKPOINT_NICE_BESIDE_READERS` nice steps below the application's
//! threads. The two together, both fixed, are the policy beside readers: the writer and its
//! checkpoints take one thread's share of the CPU between them, as a writer that merged its
//! own commits would. Neither alone keeps the readers' share (readwhilewriting at 1M on two
//! cores: docs/design/performance.md, "Write admission beside readers").

pub(crate) mod budget;
mod pace;
pub(crate) mod share;

pub(crate) use pace::Pacer;

use super::readers::reader_thread;
use super::txn::Txn;
use super::{checkpoint, commit, Counters, Shared, WriterState};
use crate::engine::log::Pressure;
use crate::error::Result;
use crate::options::Durability;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, MutexGuard};
use std::time::{Duration, Instant};

/// A debt shorter than this is carried to the next transaction rather than slept: the shares'
/// debts, and the pacing's while another writer waits for the lock or readers read beside
/// the writer (otherwise the pacing's shortest sleep is `pace::PACE_SLEEP_MIN`).
const SLEEP_MIN: Duration = Duration::from_micros(200);
/// The longest a transaction sleeps; a larger debt is slept by the next ones.
const SLEEP_MAX: Duration = Duration::from_millis(4);
/// The steps a sleep for the readers' share is taken in, each followed by a look at whether a
/// writer waits for the lock (`share_sleep`).
const SHARE_STEP: Duration = Duration::from_micros(250);
/// The segments a log needs for a reserve to be kept: in a log of two the reserve would be
/// half of it, and a commit that finds it full writes pages instead
/// (`Txn::route`), as it was built for.
const RESERVE_SEGMENTS_MIN: u64 = 3;
/// The reserve is this share of a segment (`reserve`).
const RESERVE_SEGMENT_FRACTION: u64 = 8;
/// A checkpoint the log's room calls for starts before the log has grown by a checkpoint's
/// bytes, once it has grown by this share of them (`hold_back`).
const EARLY_CHECKPOINT_FRACTION: u64 = 4;

/// Makes room for a write transaction (`Database::begin_write`, the write lock held): the
/// steps of the module's text. Returns the write lock for the transaction to start, or `None`
/// when a checkpoint was written here and the caller should take the lock again (a due
/// checkpoint may follow).
pub(crate) fn make_room<'a>(
    shared: &'a Arc<Shared>,
    mut guard: MutexGuard<'a, WriterState>,
) -> Result<Option<MutexGuard<'a, WriterState>>> {
    let pressure = || shared.log.as_ref().map(|l| l.pressure());
    let due = |guard: &WriterState, p: Option<Pressure>| {
        p.is_some_and(|p| Txn::checkpoint_due(shared, guard, &p)) || budget::memory_due(shared)
    };
    // Read once for the check and the pacing where no checkpoint is due (most transactions).
    let p = pressure();
    guard.pack_next = p.is_some_and(|p| {
        let waiting = shared.writers_waiting.load(Ordering::Relaxed) > 0;
        commit::packing_pays(p, guard.pacer.log_binds(), waiting)
    });
    if !due(&guard, p) {
        hold_back(shared, &mut guard, p)?;
        return Ok(Some(guard));
    }
    if shared.options.checkpoint_thread && !guard.poisoned {
        // One running already: the writer is paced so that the log has room for it to
        // finish, and waits for it if the log is nearly full anyway (`hold_back`).
        checkpoint::finish(shared, &mut guard, false)?;
        if guard.checkpoint.is_some()
            || !due(&guard, pressure())
            || checkpoint::start(shared, &mut guard, false)?
        {
            hold_back(shared, &mut guard, pressure())?;
            return Ok(Some(guard));
        }
    }
    Txn::new(shared, guard)?.checkpoint(Durability::None)?;
    Ok(None)
}

/// Steps 2 to 4 of `make_room`: a durable checkpoint early, a wait for room when the log is
/// nearly full, then the sleep the pacing and the share say. Only on a handle that writes the
/// log with checkpoints on a thread of their own (without one, a due checkpoint is written
/// before the transaction anyway).
///
/// `p`: the log's pressure, read by the caller just before (`None` without a log).
fn hold_back(shared: &Arc<Shared>, guard: &mut WriterState, p: Option<Pressure>) -> Result<()> {
    let (Some(log), Some(mut p)) = (shared.log.as_ref(), p) else {
        return Ok(());
    };
    if !shared.options.checkpoint_thread || guard.poisoned {
        return Ok(());
    }
    if guard.checkpoint.is_none()
        && commit::durable_checkpoint_due(shared, p)
        && log.since(guard.checkpoint_position) >= p.checkpoint / EARLY_CHECKPOINT_FRACTION
    {
        // The log needs room back before the checkpoint its growth calls for would start (the
        // writer paced near the reserve appends too slowly to reach it): a checkpoint started
        // now is made durable, and gives the room back once it is in place. Not before the
        // log has grown by a share of a checkpoint's bytes: in a log too small for two
        // checkpoints, whose room always calls for a durable one, that would be a durable
        // checkpoint a transaction.
        if checkpoint::start(shared, guard, false)? {
            p = log.pressure();
        }
    }
    if short_of_room(p) || budget::over_budget(shared) {
        let waited = Instant::now();
        // The running checkpoint's tree put in place gives back the log before it, if it was
        // made durable; otherwise (or with none running) a checkpoint started now is made
        // durable, the log's room calling for it (`commit::durable_checkpoint_due`).
        checkpoint::finish(shared, guard, true)?;
        let short = short_of_room(log.pressure()) || budget::over_budget(shared);
        if short && checkpoint::start(shared, guard, false)? {
            checkpoint::finish(shared, guard, true)?;
        }
        let c = &shared.counters;
        Counters::add(&c.log_full_waits);
        c.log_full_wait_micros
            .fetch_add(micros(waited.elapsed()), Ordering::Relaxed);
        guard.pacer.device.slept(waited.elapsed());
        p = log.pressure();
    }
    let started = guard.checkpoint.as_ref().map(|r| r.started());
    if let Some(r) = guard.checkpoint.as_ref().filter(|r| r.share) {
        if guard.pacer.share.due() {
            guard.pacer.share.read(r.cpu(), share::contended());
        }
    }
    let readers = || shared.read_state().beside(reader_thread()) > 0;
    guard
        .pacer
        .device
        .before_write(readers, &shared.counters.background_faults);
    guard.pacer.contended =
        shared.writers_waiting.load(Ordering::Relaxed) > 0 || guard.pacer.device.readers_beside();
    let paced = guard
        .pacer
        .delay(p, budget::memory(shared), started, Instant::now);
    let owed = guard.pacer.share.sleep();
    let device = guard.pacer.device.sleep();
    if paced.is_some() || owed.is_some() || device.is_some() {
        let [paced, owed, device] = [paced, owed, device].map(Option::unwrap_or_default);
        // The pacing is slept whole: the log's room needs it whoever writes next.
        std::thread::sleep(paced);
        let shared_for = share_sleep(&shared.writers_waiting, owed + device);
        guard.pacer.device.slept(paced + shared_for);
        let c = &shared.counters;
        c.paced_micros.fetch_add(micros(paced), Ordering::Relaxed);
        c.share_micros
            .fetch_add(micros(shared_for), Ordering::Relaxed);
    }
    Ok(())
}

/// Sleeps up to `owed` for the readers' share (the CPU share and the device's), in steps of
/// `SHARE_STEP`, and stops early, giving the rest of the debt up, once another thread waits
/// for the write lock: that thread is a writer, and a sleep under the lock keeps it from
/// working without giving a reader anything. Beside one writer (readers and a writer, as in
/// readwhilewriting) nobody waits for the lock, and the whole debt is slept. Where the
/// application's threads both read and write (YCSB's clients), the threads a sleep would yield
/// to come to wait for the lock one after the other until none runs: YCSB A with 4 clients on
/// 2 cores at 200K records used 129% of the CPU, and its writers slept 1.2 s of every 3 s
/// for the share, holding the lock. Returns the time slept.
fn share_sleep(writers_waiting: &AtomicUsize, owed: Duration) -> Duration {
    let start = Instant::now();
    loop {
        let slept = start.elapsed();
        let left = owed.saturating_sub(slept);
        if left.is_zero() || writers_waiting.load(Ordering::Relaxed) > 0 {
            return slept.min(owed);
        }
        std::thread::sleep(left.min(SHARE_STEP));
    }
}

/// The room kept for the next transaction's record: an eighth of a segment, in a log large
/// enough to keep it (none in a smaller one). A larger record that finds the log full writes
/// pages (`Txn::route`); a whole segment (the largest record is half of one)
/// was a third of a small database's ring, and pacing toward it took the 1M one-put
/// fillrandom from 1.58-1.65x LMDB (an eighth) to 1.39-1.64x, measured.
fn reserve(p: Pressure) -> u64 {
    if p.segments >= RESERVE_SEGMENTS_MIN {
        p.segment / RESERVE_SEGMENT_FRACTION
    } else {
        0
    }
}

/// Whether the log may have no room for the next transaction's record: less than the
/// reserve left.
fn short_of_room(p: Pressure) -> bool {
    p.left < reserve(p)
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MB: u64 = 1 << 20;

    #[test]
    fn the_reserve_needs_a_log_of_three_segments() {
        let p = |left, segments| Pressure {
            room: 10 * MB,
            left,
            segments,
            appended: 0,
            kept: 0,
            segment: 10 * MB,
            checkpoint: 5 * MB,
        };
        assert!(short_of_room(p(MB, 3)), "a ring smaller than the log");
        assert!(!short_of_room(p(2 * MB, 3)));
        assert!(!short_of_room(p(MB, 2)), "a log of two segments fills");
    }

    #[test]
    fn a_share_sleep_ends_when_a_writer_waits() {
        let waiting = AtomicUsize::new(1);
        let owed = Duration::from_secs(60);
        assert!(
            share_sleep(&waiting, owed) < owed,
            "a writer waits: the debt given up"
        );
        waiting.store(0, Ordering::Relaxed);
        let owed = 2 * SHARE_STEP + Duration::from_micros(10);
        assert_eq!(
            share_sleep(&waiting, owed),
            owed,
            "slept whole, capped at the debt"
        );
        std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(SHARE_STEP);
                waiting.store(1, Ordering::Relaxed);
            });
            let slept = share_sleep(&waiting, Duration::from_secs(60));
            assert!(
                slept < Duration::from_secs(60),
                "stopped when a writer came to wait"
            );
        });
    }
}
