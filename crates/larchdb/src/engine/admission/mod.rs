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
//!    the device (`share.rs`: `Share`, `WriterDevice`). All of it is one sleep (`sleep`),
//!    whose share part ends as soon as another thread comes to wait for the write lock
//!    (`ShareSleeper`). A debt under the shortest sleep for the writer's company
//!    (`Company`) is carried to the next transaction.
//!
//! The checkpoint's own priority is admission's too (`share::checkpoint_nice`): beside
//! readers it runs `CHECKPOINT_NICE_BESIDE_READERS` nice steps below the application's
//! threads, and at the lowest priority (`CHECKPOINT_NICE_WRITERS_CORE`) where the readers
//! leave the writer a core of its own (fewer readers than cores, other processes quiet) and
//! its thread could raise itself back: it then runs in the writer's sleeps, off the readers'
//! cores, and raises itself once where readers come to take every core or it is starved of
//! the CPU (`share::LowestRaise`). The two together, both fixed,
//! are the policy beside readers: the writer and its checkpoints take one thread's share of
//! the CPU between them, as a writer that merged its own commits would. Neither alone keeps
//! the readers' share (readwhilewriting at 1M on two cores: docs/design/performance.md,
//! "Write admission beside readers"). A checkpoint the idle
//! checkpointer started, which no writer waits for, rests beside readers that take every core
//! (`share::IdleRest`).

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
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// A share's debt shorter than this is carried to the next transaction rather than slept
/// (`Company::share_min`).
const SLEEP_MIN: Duration = Duration::from_micros(200);
/// The shortest pacing sleep while another writer waits for the lock: the sleeper holds the
/// lock, so every waiting writer's operation takes the sleep too, and the fewer sleeps the
/// fewer operations wait. YCSB's A and F with four clients (200K records of 1 KB, the pacing
/// binding, three rounds, docs/design/performance.md, "Under the write lock with four
/// clients"): at 200 us the updates' P99 was 354-671 us and the read-modify-writes'
/// 109-713 us, at 1 ms 73-112 us and 58-188 us, at 4 ms 55-96 us and 57-93 us, at the
/// same rates (A 304-376K, 346-360K and 325-383K operations a second); two threads' random
/// one-put fills of 1 KB values had a P99 of 106-122 us, 57-61 us and 49-83 us, and a P99.9
/// of 0.84-0.94 ms, 1.48-1.53 ms and 1.34-1.64 ms.
const WRITERS_SLEEP_MIN: Duration = Duration::from_millis(1);
/// The same beside readers on other threads with no writer waiting: each sleep hands the
/// core to a reader and takes it back, two switches for the same time slept whatever its
/// length. Seed 001's table at 10M records beside 1, 2 and 4 readers (the inmem suite's
/// step, three runs of each, docs/design/performance.md, "The writer's sleeps beside
/// readers"): with 200 us, and the share's sleep looking for waiting writers every 250 us,
/// the process made 33.1-36.3K / 30.0-35.4K / 29.3-32.3K voluntary switches in 15 s; with
/// 1 ms, and one wait, 17.0-17.3K / 14.5-17.7K / 12.0-15.7K, the readers and the writer
/// within their runs' spread, and the writer's P99 at 2 and 4 readers 6-13 us against
/// 275-281 us, fewer of its transactions sleeping.
const READERS_SLEEP_MIN: Duration = Duration::from_millis(1);
/// The longest a transaction sleeps; a larger debt is slept by the next ones.
const SLEEP_MAX: Duration = Duration::from_millis(4);

/// Whom the writer's sleeps give way to, read before each transaction's sleep (`hold_back`):
/// the shortest sleep follows from it (`pace_min`, `share_min`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Company {
    /// No reader on another thread, no writer waiting: the pacing's sleeps serve only the
    /// log's room and the memory, and short ones keep the writer's latency low.
    #[default]
    Alone,
    /// Read transactions were open on other threads at the device share's last reading
    /// (`WriterDevice::readers_beside`), and no writer waits.
    Readers,
    /// Another writer waits for the lock.
    Writers,
}

impl Company {
    /// The shortest pacing sleep: `PACE_SLEEP_MIN` alone, `READERS_SLEEP_MIN` beside
    /// readers, `WRITERS_SLEEP_MIN` while a writer waits.
    fn pace_min(self) -> Duration {
        match self {
            Company::Alone => pace::PACE_SLEEP_MIN,
            Company::Readers => READERS_SLEEP_MIN,
            Company::Writers => WRITERS_SLEEP_MIN,
        }
    }

    /// The shortest sleep for a share's debt: as the pacing's, and never under `SLEEP_MIN`.
    fn share_min(self) -> Duration {
        self.pace_min().max(SLEEP_MIN)
    }
}

/// The writer asleep in `sleep`, if any, under the write lock: a thread that comes to wait
/// for the lock wakes it (`Shared::lock_writer`), and the share part of its sleep ends then,
/// not at its next look. A condition variable, not the thread's park token, which the
/// application's own code may use.
#[derive(Default)]
pub(crate) struct ShareSleeper {
    asleep: Mutex<bool>,
    wake: Condvar,
}

impl ShareSleeper {
    /// A thread came to wait for the write lock (after counting itself in
    /// `writers_waiting`): wakes the writer asleep for a share, if one is.
    pub(crate) fn writer_waits(&self) {
        let asleep = self.asleep.lock().unwrap_or_else(|e| e.into_inner());
        if *asleep {
            self.wake.notify_one();
        }
    }
}

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
            guard.pacer.share.read(r.cpu(), crate::cpu::contended());
        }
    }
    let readers = || {
        let rs = shared.read_state();
        let beside = rs.beside(reader_thread()) > 0;
        (beside, beside && rs.current.snap.access().reads_fault())
    };
    guard
        .pacer
        .device
        .before_write(readers, &shared.counters.background_faults);
    let company = if shared.writers_waiting.load(Ordering::Relaxed) > 0 {
        Company::Writers
    } else if guard.pacer.device.readers_beside() {
        Company::Readers
    } else {
        Company::Alone
    };
    guard.pacer.company = company;
    let paced = guard
        .pacer
        .delay(p, budget::memory(shared), started, Instant::now);
    let owed = guard.pacer.share.sleep(company.share_min());
    let device = guard.pacer.device.sleep(company.share_min());
    if paced.is_some() || owed.is_some() || device.is_some() {
        let [paced, owed, device] = [paced, owed, device].map(Option::unwrap_or_default);
        let shared_for = sleep(
            &shared.writers_waiting,
            &shared.share_sleeper,
            paced,
            owed + device,
        );
        guard.pacer.device.slept(paced + shared_for);
        let c = &shared.counters;
        c.paced_micros.fetch_add(micros(paced), Ordering::Relaxed);
        c.share_micros
            .fetch_add(micros(shared_for), Ordering::Relaxed);
    }
    Ok(())
}

/// Sleeps `paced` whole (the log's room needs it whoever writes next), then up to `owed` for
/// the readers' share (the CPU share and the device's), in one sleep: the share part ends
/// early, giving the rest of the debt up, once another thread waits for the write lock (it
/// wakes the sleeper: `ShareSleeper::writer_waits`): that thread is a writer, and a sleep
/// under the lock keeps it from working without giving a reader anything. Beside one writer
/// (readers and a writer, as in readwhilewriting) nobody waits for the lock, and the whole
/// debt is slept. Where the application's threads both read and write (YCSB's clients), the
/// threads a sleep would yield to come to wait for the lock one after the other until none
/// runs: YCSB A with 4 clients on 2 cores at 200K records used 129% of the CPU, and its
/// writers slept 1.2 s of every 3 s for the share, holding the lock. Returns the time slept
/// for the share: none where the sleep aimed at `paced` alone, however late it woke.
fn sleep(
    writers_waiting: &AtomicUsize,
    sleeper: &ShareSleeper,
    paced: Duration,
    owed: Duration,
) -> Duration {
    let start = Instant::now();
    let mut asleep = sleeper.asleep.lock().unwrap_or_else(|e| e.into_inner());
    *asleep = true;
    // Whether the last wait aimed past `paced`, into the share: the time slept past `paced`
    // counts as the share only then, not a wait for `paced` alone that overran it.
    let mut sharing = false;
    let shared_for = loop {
        let slept = start.elapsed();
        // Read under the sleeper's lock, which a waiting writer takes after counting itself:
        // a writer counted after this reading wakes the wait below.
        let waiting = writers_waiting.load(Ordering::Relaxed) > 0;
        let end = if waiting { paced } else { paced + owed };
        if slept >= end {
            break if sharing {
                slept.saturating_sub(paced).min(owed)
            } else {
                Duration::ZERO
            };
        }
        sharing = !waiting;
        asleep = sleeper
            .wake
            .wait_timeout(asleep, end - slept)
            .unwrap_or_else(|e| e.into_inner())
            .0;
    };
    *asleep = false;
    shared_for
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
            runs: 5 * MB,
        };
        assert!(short_of_room(p(MB, 3)), "a ring smaller than the log");
        assert!(!short_of_room(p(2 * MB, 3)));
        assert!(!short_of_room(p(MB, 2)), "a log of two segments fills");
    }

    #[test]
    fn a_share_sleep_ends_when_a_writer_waits() {
        let waiting = AtomicUsize::new(1);
        let sleeper = ShareSleeper::default();
        let ms = Duration::from_millis;
        let owed = Duration::from_secs(60);
        assert_eq!(
            sleep(&waiting, &sleeper, Duration::ZERO, owed),
            Duration::ZERO,
            "a writer waits: the debt given up"
        );
        let start = Instant::now();
        assert_eq!(
            sleep(&waiting, &sleeper, ms(2), owed),
            Duration::ZERO,
            "a sleep past the pacing's is not the share's"
        );
        assert!(start.elapsed() >= ms(2), "the pacing slept whole");
        waiting.store(0, Ordering::Relaxed);
        let start = Instant::now();
        assert_eq!(
            sleep(&waiting, &sleeper, ms(1), ms(2)),
            ms(2),
            "slept whole, the share capped at the debt"
        );
        assert!(start.elapsed() >= ms(3));
        assert!(!*sleeper.asleep.lock().unwrap());
        std::thread::scope(|s| {
            s.spawn(|| {
                // As `Shared::lock_writer`: counted, then the sleeper woken.
                while !*sleeper.asleep.lock().unwrap() {
                    std::thread::yield_now();
                }
                waiting.store(1, Ordering::Relaxed);
                sleeper.writer_waits();
            });
            let slept = sleep(&waiting, &sleeper, Duration::ZERO, owed);
            assert!(slept < owed, "woken when a writer came to wait");
        });
    }
}
