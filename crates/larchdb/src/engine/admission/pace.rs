//! The writer paced by the checkpoints (admission's slowdown, step 4 of `make_room`): held to
//! the rate at which the room left in the log's ring, less a small reserve, lasts
//! `PACE_HORIZON` times as long as a checkpoint takes: the longer of the average over the last
//! checkpoints, the average over the last durable ones (the only ones that give room back,
//! longer by their sync) and the running one's time so far (`Pacer`). The memory budget is
//! paced the same way: from half the budget, the overlays' growth is held to the rate at
//! which the memory left before the writer would stop (`budget::over_budget`) lasts as long,
//! and the slower of the two rates binds. Each rate follows the room left, so it binds only
//! near full and falls to nothing at the stop; and it is derived from a time, not from the
//! checkpoints' rate (a paced writer makes smaller checkpoints, which merge fewer records per
//! leaf and so drain more slowly: pacing by their rate slowed the writer further each time,
//! measured). The writer sleeps its debt in steps of `PACE_SLEEP_MIN` (longer beside readers
//! or while another writer waits for the lock: `Company::pace_min`) to `SLEEP_MAX`, under the
//! write lock, so that the rate bounds every writer together, as RocksDB's write controller
//! does (`delayed_write_rate`). A debt is owed at the rate of the room it was run up against:
//! once a checkpoint gives that room back, what is left of it shrinks in proportion
//! (`rebase`).

use super::share::{Share, WriterDevice};
use super::{reserve, Company, SLEEP_MAX};
use crate::engine::log::Pressure;
use std::time::{Duration, Instant};

/// How many checkpoints' time the room left in the ring, and the memory left before the stop,
/// must last at the writer's rate. For the memory, half and a quarter of it were tried, and
/// what is left of the running checkpoint's expected time: the writer stopped at the budget
/// again (tupl beyond memory, 10-37 stops in 30 s, its slowest operation 0.4-0.5 s).
const PACE_HORIZON: f64 = 1.0;
/// A pacing debt shorter than this is carried to the next transaction rather than slept,
/// while no other writer waits for the lock and no reader reads beside the writer
/// (`Company::pace_min` otherwise). A sleep takes about the thread's timer slack (50 us by default)
/// longer than asked (sleeps of 20 us took 64-128 us), and each one is an operation's
/// latency: YCSB A and F with one client at 200K records of 1 KB, the writer paced for a third
/// of its time, had their updates' P99 at 308-387 us with 200 us and 153-278 us with 50 us,
/// for the same operations a second and 2x the voluntary context switches. With four clients
/// waiting on the lock, the shorter sleeps cut the P99 by a fifth and A's operations by an
/// eighth (medians of seven pairs, 72K against 82K a second: more sleeps the waiting clients
/// wake behind). Beside readers on other threads, each sleep is a switch that hands the core
/// to a reader: seed 001's writer beside 2 and 4 readers made 2x the voluntary switches with
/// 50 us and no more updates.
pub(super) const PACE_SLEEP_MIN: Duration = Duration::from_micros(50);
/// Each checkpoint's duration counts for this share of the average.
const DURATION_WEIGHT: f64 = 0.5;

/// The writer's pacing state, in `WriterState` (one writer at a time).
#[derive(Default)]
pub(crate) struct Pacer {
    /// How long a checkpoint takes, from its start to its tree written (and synced when it
    /// was made durable), in seconds, averaged; `None` before the first.
    duration: Option<f64>,
    /// The same for the checkpoints made durable, the only ones that give room back, and
    /// longer by their sync: most checkpoints are not, and their average alone let the
    /// ring fill while a durable one synced.
    durable: Option<f64>,
    /// The log's bytes appended at the last transaction (`None` before the first).
    appended: Option<u64>,
    /// The overlays' memory at the last transaction (`None` before the first).
    held: Option<u64>,
    /// When the writer, at its allowed rate, may start its next transaction (a virtual clock:
    /// a writer slower than its rate earns no credit, `delay` starts it from now).
    until: Option<Instant>,
    /// How far `until` can be ahead of the clock, at most: its lead at the last reading of the
    /// clock, less the sleep then, plus the steps since. While that is under the shortest sleep
    /// no transaction owes a sleep, and `delay` reads no clock: far from a full log that is
    /// every transaction, and the two clock reads were a few percent of a one-put commit.
    /// The steps taken meanwhile are added to `until` without the no-credit rule, which the
    /// next reading applies: a slow writer's credit is under the shortest sleep a reading.
    lead: Duration,
    /// How long the running checkpoint had run at the last reading of the clock: the steps
    /// between readings use it (it only grows, and the next reading corrects it).
    running_seen: Option<f64>,
    /// The room that bound the step at the last reading of the clock: a debt is owed against
    /// it, and shrinks in proportion once that room is given back (`rebase`).
    bound: Option<Bound>,
    /// The CPU time of checkpoints beside readers, owed by the writer (`Share`).
    pub(crate) share: Share,
    /// The writer's share of the device beside readers that wait on it (`WriterDevice`).
    pub(crate) device: WriterDevice,
    /// Whom the writer's sleeps give way to, which sets the shortest (`Company::pace_min`).
    /// Set before each `delay`.
    pub(crate) company: Company,
    /// At the last reading of the clock, the writer was held back by the rate the log's
    /// room allows (not the memory's): it came before its time (`log_binds`).
    log_binds: bool,
}

/// Which room bound the writer's step at a reading of the clock, and how much of it was left.
#[derive(Clone, Copy, Debug)]
struct Bound {
    /// The log's room (otherwise the memory left before the budget's stop).
    log: bool,
    left: u64,
}

/// The overlays' memory as admission reads it (`budget::memory`): what the active and frozen
/// overlays hold, the level above which their growth is paced, and the level at which the
/// writer stops for a checkpoint.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Memory {
    pub(crate) held: u64,
    /// Growth below this is not paced (`budget::pressed`'s level).
    pub(crate) start: u64,
    pub(crate) stop: u64,
}

impl Pacer {
    /// A checkpoint that covered `bytes` of log took `elapsed`, made `durable` or not; one
    /// that covered nothing (an idle handle's) says nothing of the writer's.
    pub(crate) fn observe(&mut self, bytes: u64, elapsed: Duration, durable: bool) {
        if bytes == 0 {
            return;
        }
        let secs = elapsed.as_secs_f64();
        let average = |a: Option<f64>| {
            Some(match a {
                Some(d) => d + (secs - d) * DURATION_WEIGHT,
                None => secs,
            })
        };
        self.duration = average(self.duration);
        if durable {
            self.durable = average(self.durable);
        }
    }

    /// How long the writer sleeps before its next transaction, the log being as `p` says and
    /// the overlays' memory as `m` does; `started`: when the checkpoint running now started,
    /// if one runs (one slower than the ones before slows the writer while it runs, not once
    /// it is done); `now` reads the clock, which is done only when a sleep may be owed
    /// (`lead`).
    pub(crate) fn delay(
        &mut self,
        p: Pressure,
        m: Memory,
        started: Option<Instant>,
        now: impl FnOnce() -> Instant,
    ) -> Option<Duration> {
        let bytes = self.appended.map_or(0, |a| p.appended.saturating_sub(a));
        self.appended = Some(p.appended);
        // The overlays' growth since the last transaction above `m.start` (none where a
        // checkpoint put in place meanwhile gave memory back).
        let grown = self
            .held
            .map_or(0, |h| m.held.saturating_sub(h.max(m.start)));
        self.held = Some(m.held);
        let average = self.duration?.max(self.durable.unwrap_or(0.0));
        // Bytes a second at which the room left before the reserve (the memory left before
        // the stop) lasts the horizon; the time `bytes` (`grown`) take at that rate.
        let room = p.room_left().saturating_sub(reserve(p));
        let memory_room = m.stop.saturating_sub(m.held);
        // (In nanoseconds through a cast: `Duration::from_secs_f64` cost more than the rest
        // of the pacing, on every transaction.)
        let step = |running: Option<f64>| {
            if room == 0 || memory_room == 0 {
                return SLEEP_MAX;
            }
            let duration = running.map_or(average, |r| average.max(r));
            let horizon = (duration * PACE_HORIZON).max(1e-3);
            let seconds =
                (bytes as f64 / room as f64).max(grown as f64 / memory_room as f64) * horizon;
            Duration::from_nanos((seconds.min(1.0) * 1e9) as u64)
        };
        let skipped = step(started.and(self.running_seen));
        let lead = self.lead + skipped;
        if lead < self.sleep_min() {
            self.lead = lead;
            self.until = self.until.map(|u| u + skipped);
            return None;
        }
        let now = now();
        let running = started.map(|s| now.saturating_duration_since(s).as_secs_f64());
        self.running_seen = running;
        self.rebase(now, room, memory_room);
        // The room whose share of this transaction's bytes is the larger binds its step (an
        // empty room binds whatever the share); one that added nothing leaves the last one.
        let log = match self.bound {
            Some(b) if bytes == 0 && grown == 0 => b.log,
            _ => {
                room == 0
                    || (memory_room != 0
                        && (bytes as f64) * (memory_room as f64) >= (grown as f64) * (room as f64))
            }
        };
        // The writer came before the time its rate allowed: the rate holds it back.
        self.log_binds = log && self.until.is_some_and(|u| u > now);
        self.bound = Some(Bound {
            log,
            left: if log { room } else { memory_room },
        });
        let until = self.until.map_or(now, |u| u.max(now)) + step(running);
        self.until = Some(until);
        let ahead = until - now;
        let sleep = (ahead >= self.sleep_min()).then(|| ahead.min(SLEEP_MAX));
        self.lead = ahead - sleep.unwrap_or_default();
        sleep
    }

    /// Whether the log's room held the writer back at the last reading of the clock: the
    /// writer came before the time the room's rate allowed it, so fewer log bytes a
    /// transaction would let it go faster (`commit::logged::packing_pays`).
    pub(crate) fn log_binds(&self) -> bool {
        self.log_binds
    }

    /// The shortest sleep: a debt under it is carried.
    fn sleep_min(&self) -> Duration {
        self.company.pace_min()
    }

    /// Shrinks the debt (how far `until` is ahead of `now`) in proportion to the room that
    /// bound the writer at the last reading, where that room has grown since: a checkpoint
    /// gave it back. The debt was the time its bytes take at the rate the room left then
    /// allowed; at the rate the room allows now they take that much less. Without it, bytes
    /// paced against a nearly full ring (each owing up to a second, slept `SLEEP_MAX` a
    /// transaction) kept the writer sleeping `SLEEP_MAX` at every transaction for a second or
    /// more after the ring's room was back: YCSB D with one client, right after F filled the
    /// ring, slept 1.5 s of its 2 s.
    fn rebase(&mut self, now: Instant, room: u64, memory_room: u64) {
        let (Some(until), Some(bound)) = (self.until, self.bound) else {
            return;
        };
        let left = if bound.log { room } else { memory_room };
        if left <= bound.left {
            return;
        }
        let owed = until.saturating_duration_since(now).as_nanos() as f64;
        let kept = owed * bound.left as f64 / left as f64;
        self.until = Some(now + Duration::from_nanos(kept as u64));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MB: u64 = 1 << 20;

    /// Overlays far from the memory budget's stop: the log alone paces.
    const FREE: Memory = Memory {
        held: 0,
        start: 0,
        stop: 1 << 40,
    };

    /// A pacer that has timed one checkpoint of 10 MB at half a second.
    fn half_second() -> Pacer {
        let mut p = Pacer::default();
        p.observe(10 * MB, Duration::from_millis(500), false);
        p
    }

    /// 100 MB of ring, `kept` of it kept, `appended` appended.
    fn pressure(appended: u64, kept: u64) -> Pressure {
        Pressure {
            appended,
            kept,
            room: 100 * MB,
            left: 200 * MB,
            segment: 10 * MB,
            segments: 20,
            checkpoint: 5 * MB,
            runs: 5 * MB,
        }
    }

    fn close(a: Duration, b: Duration) -> bool {
        a.abs_diff(b) < Duration::from_micros(10)
    }

    #[test]
    fn nothing_is_paced_before_a_checkpoint_was_timed() {
        let mut p = Pacer::default();
        let now = Instant::now();
        assert_eq!(
            p.delay(pressure(90 * MB, 99 * MB), FREE, None, || now),
            None
        );
    }

    /// The log kept when 40 MB are left past the reserve (1.25 MB) of the 100 MB ring.
    const KEPT_40_LEFT: u64 = 100 * MB - 40 * MB - MB * 5 / 4;

    #[test]
    fn the_room_left_must_last_a_checkpoint() {
        // Checkpoints of 0.5 s. The 40 MB left past the reserve must last 0.5 s: 80 MB/s, and
        // 1 MB more of log is 12.5 ms, slept 4 ms at a time, the rest carried (2 ms left
        // after 10.5 ms).
        let mut p = half_second();
        let now = Instant::now();
        assert_eq!(
            p.delay(pressure(50 * MB, KEPT_40_LEFT), FREE, None, || now),
            None
        );
        assert_eq!(
            p.delay(pressure(51 * MB, KEPT_40_LEFT), FREE, None, || now),
            Some(SLEEP_MAX)
        );
        let later = now + Duration::from_micros(10_500);
        let left = p
            .delay(pressure(51 * MB, KEPT_40_LEFT), FREE, None, || later)
            .unwrap();
        assert!(close(left, Duration::from_millis(2)), "{left:?}");
        // With 95 MB left, 93.75 MB/0.5 s: a 4 KB record is 21 us, under the shortest
        // sleep, carried.
        let mut q = half_second();
        q.delay(pressure(0, 5 * MB), FREE, None, || now);
        assert_eq!(
            q.delay(pressure(MB / 256, 5 * MB), FREE, None, || now),
            None
        );
        assert!(
            close(q.lead, Duration::from_secs_f64(1.0 / 256.0 / 187.5)),
            "{:?}",
            q.lead
        );
        // Nothing left past the reserve: the longest sleep for any write.
        let mut r = half_second();
        r.delay(pressure(0, 100 * MB - MB * 5 / 4), FREE, None, || now);
        assert_eq!(
            r.delay(pressure(1, 100 * MB - MB * 5 / 4), FREE, None, || now),
            Some(SLEEP_MAX)
        );
    }

    #[test]
    fn the_clock_is_read_only_when_a_sleep_may_be_owed() {
        // 93.75 MB left past the reserve, checkpoints of 0.5 s: a 4 KB record is 21 us at
        // that rate. Two owe less than the shortest sleep together, and read no clock; the
        // third may owe 62 us, and reads it (and owes 21 us: the steps before the first
        // reading start nothing). A 1 MB record then owes 5.3 ms, read and slept.
        let mut p = half_second();
        let now = Instant::now();
        let reads = std::cell::Cell::new(0);
        let clock = || {
            reads.set(reads.get() + 1);
            now
        };
        for i in 0..4 {
            assert_eq!(
                p.delay(pressure(i * MB / 256, 5 * MB), FREE, None, clock),
                None
            );
            assert_eq!(reads.get(), u32::from(i == 3), "transaction {i}");
        }
        let step = Duration::from_secs_f64(1.0 / 256.0 / 187.5);
        assert!(close(p.lead, step), "{:?}", p.lead);
        assert_eq!(
            p.delay(pressure(3 * MB / 256 + MB, 5 * MB), FREE, None, clock),
            Some(SLEEP_MAX)
        );
        assert_eq!(reads.get(), 2);
        // What was not slept is the lead the next transactions start from.
        let owed = Duration::from_secs_f64((1.0 + 1.0 / 256.0) / 187.5);
        assert!(close(p.lead, owed - SLEEP_MAX), "{:?}", p.lead);
    }

    #[test]
    fn the_shortest_sleep_follows_the_writers_company() {
        // 93.75 MB left past the reserve, checkpoints of 0.5 s: 16 KB owes 83 us, 64 KB
        // 333 us, and 256 KB 1.33 ms. Alone all are slept; while another writer waits for
        // the lock, and beside readers, only the last (the shortest sleep is 1 ms).
        let now = Instant::now();
        for (company, sleeps) in [
            (Company::Alone, [true, true, true]),
            (Company::Writers, [false, false, true]),
            (Company::Readers, [false, false, true]),
        ] {
            for (bytes, sleeps) in [MB / 64, MB / 16, MB / 4].into_iter().zip(sleeps) {
                let owed = Duration::from_secs_f64(bytes as f64 / MB as f64 / 187.5);
                let mut p = half_second();
                p.company = company;
                p.delay(pressure(0, 5 * MB), FREE, None, || now);
                let slept = p.delay(pressure(bytes, 5 * MB), FREE, None, || now);
                if sleeps {
                    assert!(close(slept.unwrap(), owed), "{company:?} {slept:?}");
                } else {
                    assert_eq!(slept, None, "{company:?}");
                    assert!(close(p.lead, owed), "{company:?} {:?}", p.lead);
                }
            }
        }
    }

    #[test]
    fn a_slow_writer_earns_no_credit() {
        let mut p = half_second();
        let now = Instant::now();
        p.delay(pressure(50 * MB, KEPT_40_LEFT), FREE, None, || now);
        // A second later (far slower than the rate), a 1 MB burst is still paced from now.
        let later = now + Duration::from_secs(1);
        assert_eq!(
            p.delay(pressure(51 * MB, KEPT_40_LEFT), FREE, None, || later),
            Some(SLEEP_MAX)
        );
        let until = p.until.unwrap() - later;
        assert!(close(until, Duration::from_micros(12_500)), "{until:?}");
    }

    #[test]
    fn the_log_binds_a_writer_it_holds_back_and_no_other() {
        let mut p = half_second();
        let now = Instant::now();
        p.delay(pressure(50 * MB, KEPT_40_LEFT), FREE, None, || now);
        assert!(!p.log_binds());
        // A 1 MB burst owes 12.5 ms: the first reading finds no earlier debt, the next, at
        // the same moment, finds the writer ahead of its rate.
        p.delay(pressure(51 * MB, KEPT_40_LEFT), FREE, None, || now);
        assert!(!p.log_binds());
        p.delay(pressure(52 * MB, KEPT_40_LEFT), FREE, None, || now);
        assert!(p.log_binds());
        // A second later the writer is behind its rate.
        let later = now + Duration::from_secs(1);
        p.delay(pressure(53 * MB, KEPT_40_LEFT), FREE, None, || later);
        assert!(!p.log_binds());
        // Held back by the overlays' memory, not the log's room: packing would not help.
        let mut q = half_second();
        let held = |held| Memory {
            held,
            start: 50 * MB,
            stop: 100 * MB,
        };
        for i in 0..3 {
            q.delay(
                pressure(i * MB / 256, 5 * MB),
                held(60 * MB + i * MB),
                None,
                || now,
            );
        }
        assert!(q.until.is_some_and(|u| u > now));
        assert!(!q.log_binds());
    }

    #[test]
    fn a_long_running_or_durable_checkpoint_lowers_the_rate() {
        // The average says 0.5 s; the checkpoint running has run 2 s: 40 MB must last 2 s.
        let mut p = half_second();
        let now = Instant::now();
        let running = now.checked_sub(Duration::from_secs(2));
        p.delay(pressure(50 * MB, KEPT_40_LEFT), FREE, running, || now);
        p.delay(pressure(51 * MB, KEPT_40_LEFT), FREE, running, || now);
        let until = p.until.unwrap() - now;
        assert!(close(until, Duration::from_millis(50)), "{until:?}");
        // Durable checkpoints of 1 s among unsynced ones: 40 MB must last 1 s.
        let mut q = Pacer::default();
        q.observe(10 * MB, Duration::from_secs(1), true);
        for _ in 0..10 {
            q.observe(10 * MB, Duration::from_millis(100), false);
        }
        q.delay(pressure(50 * MB, KEPT_40_LEFT), FREE, None, || now);
        q.delay(pressure(51 * MB, KEPT_40_LEFT), FREE, None, || now);
        let until = q.until.unwrap() - now;
        assert!(close(until, Duration::from_millis(25)), "{until:?}");
    }

    #[test]
    fn the_room_left_counts_when_the_ring_has_just_grown() {
        // Kept 10 of 100 MB, but only 20 MB can be appended.
        let p = Pressure {
            left: 20 * MB,
            ..pressure(0, 10 * MB)
        };
        assert_eq!(p.room_left(), 20 * MB);
        assert_eq!(
            Pressure {
                left: 200 * MB,
                ..p
            }
            .room_left(),
            90 * MB
        );
    }

    #[test]
    fn a_debt_shrinks_as_the_room_that_bound_it_comes_back() {
        // Checkpoints of 0.5 s; 1 MB left past the reserve. 1 MB more of log owes 0.5 s.
        let kept = |left: u64| 100 * MB - MB * 5 / 4 - left;
        let mut p = half_second();
        let now = Instant::now();
        p.delay(pressure(0, kept(MB)), FREE, None, || now);
        assert_eq!(
            p.delay(pressure(MB, kept(MB)), FREE, None, || now),
            Some(SLEEP_MAX)
        );
        let owed = p.until.unwrap() - now;
        assert!(close(owed, Duration::from_millis(500)), "{owed:?}");
        // The room unchanged, the debt stays whole.
        let later = now + SLEEP_MAX;
        p.delay(pressure(MB, kept(MB)), FREE, None, || later);
        let owed = p.until.unwrap() - later;
        assert!(close(owed, Duration::from_millis(496)), "{owed:?}");
        // A checkpoint gave 49 MB back: 50 MB left, the debt at a fiftieth.
        p.delay(pressure(MB, kept(50 * MB)), FREE, None, || later);
        let owed = p.until.unwrap() - later;
        assert!(
            close(owed, Duration::from_secs_f64(0.496 / 50.0)),
            "{owed:?}"
        );
        // Shrunk once: the room as it is now is what the next reading compares with.
        p.delay(pressure(MB, kept(50 * MB)), FREE, None, || later);
        let again = p.until.unwrap() - later;
        assert!(close(again, owed), "{again:?}");

        // Owed against the memory left before the stop: only that memory coming back shrinks
        // it, not the log's room.
        let held = |held| Memory {
            held,
            start: 50 * MB,
            stop: 100 * MB,
        };
        let mut q = half_second();
        q.delay(pressure(0, 5 * MB), held(98 * MB), None, || now);
        q.delay(pressure(0, 5 * MB), held(99 * MB), None, || now);
        let owed = q.until.unwrap() - now;
        assert!(close(owed, Duration::from_millis(500)), "{owed:?}");
        q.delay(pressure(0, MB), held(99 * MB), None, || now);
        let owed = q.until.unwrap() - now;
        assert!(close(owed, Duration::from_millis(500)), "{owed:?}");
        // A checkpoint put in place: 40 MB left before the stop.
        q.delay(pressure(0, MB), held(60 * MB), None, || now);
        let owed = q.until.unwrap() - now;
        assert!(close(owed, Duration::from_secs_f64(0.5 / 40.0)), "{owed:?}");
    }

    #[test]
    fn the_duration_is_averaged() {
        let mut p = Pacer::default();
        p.observe(MB, Duration::from_secs(1), true);
        p.observe(MB, Duration::from_secs(3), false);
        assert_eq!((p.duration, p.durable), (Some(2.0), Some(1.0)));
        p.observe(0, Duration::from_secs(9), true);
        assert_eq!(p.duration, Some(2.0), "an empty checkpoint says nothing");
    }

    #[test]
    fn the_overlays_growth_is_paced_by_the_memory_left_before_the_stop() {
        // Checkpoints of 0.5 s; the log far from full (95 MB left: a record of 4 KB owes 21
        // us, carried). The overlays grow by 1 MB to 40 MB short of the stop, which must last
        // 0.5 s: 80 MB/s, and the 1 MB owes 12.5 ms, slept 4 ms at a time.
        let mut p = half_second();
        let now = Instant::now();
        let held = |held| Memory {
            held,
            start: 50 * MB,
            stop: 100 * MB,
        };
        assert_eq!(
            p.delay(pressure(0, 5 * MB), held(59 * MB), None, || now),
            None
        );
        assert_eq!(
            p.delay(pressure(MB / 256, 5 * MB), held(60 * MB), None, || now),
            Some(SLEEP_MAX)
        );
        let until = p.until.unwrap() - now;
        assert!(close(until, Duration::from_micros(12_500)), "{until:?}");
        // Growth below the start is not paced, above it only what is above.
        let mut b = half_second();
        b.delay(pressure(0, 5 * MB), held(20 * MB), None, || now);
        assert_eq!(
            b.delay(pressure(0, 5 * MB), held(50 * MB), None, || now),
            None
        );
        assert_eq!(b.lead, Duration::ZERO);
        // The memory a checkpoint put in place gives back is no growth: only the log paces.
        let mut q = half_second();
        q.delay(pressure(0, 5 * MB), held(61 * MB), None, || now);
        assert_eq!(
            q.delay(pressure(MB / 256, 5 * MB), held(30 * MB), None, || now),
            None
        );
        assert!(
            close(q.lead, Duration::from_secs_f64(1.0 / 256.0 / 187.5)),
            "{:?}",
            q.lead
        );
        // Far from the stop, the overlays' growth owes little: 1 MB with 1023 MB left is 0.49
        // ms.
        let mut r = half_second();
        let far = |held| Memory {
            held,
            start: 0,
            stop: 1024 * MB,
        };
        r.delay(pressure(0, 5 * MB), far(0), None, || now);
        let owed = r.delay(pressure(0, 5 * MB), far(MB), None, || now).unwrap();
        assert!(
            close(owed, Duration::from_secs_f64(0.5 / 1023.0)),
            "{owed:?}"
        );
        // At the stop, the longest sleep for any write.
        let mut t = half_second();
        t.delay(pressure(0, 5 * MB), held(100 * MB), None, || now);
        assert_eq!(
            t.delay(pressure(1, 5 * MB), held(100 * MB), None, || now),
            Some(SLEEP_MAX)
        );
    }
}
