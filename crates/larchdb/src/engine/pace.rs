//! The writer paced by the checkpoints (docs/design/write-path.md, "the writer paced by the
//! checkpoints").
//!
//! Commits through the log are retired only by checkpoints, which merge them into the tree on
//! a thread of their own; the log's ring holds what they have not retired yet. A writer that
//! appends faster than checkpoints merge fills the ring, and a full ring can only stop the
//! writer until a checkpoint gives room back: a stall as long as a checkpoint and its sync
//! (seconds, with large records). So before each write transaction (`before_write`):
//!
//! - The writer is held to a rate at which the room left in the ring, less a small reserve,
//!   lasts `PACE_HORIZON` times as long as a checkpoint takes: the longer of the average over
//!   the last checkpoints, the average over the last durable ones (the only ones that give
//!   room back, longer by their sync) and the running one's time so far (`Pacer`). The rate
//!   follows the room left, so it binds only near full and falls to nothing at the reserve;
//!   and it is derived from a time, not from the checkpoints' rate (a paced writer makes
//!   smaller checkpoints, which merge fewer records per leaf and so drain more slowly: pacing
//!   by their rate slowed the writer further each time, measured). The writer sleeps its debt
//!   in steps of `PACE_SLEEP_MIN` to `PACE_SLEEP_MAX`, under the write lock, so that the rate
//!   bounds every writer together, as RocksDB's write controller does
//!   (`delayed_write_rate`).
//! - A log whose room calls for a durable checkpoint (`commit::durable_checkpoint_due`) gets
//!   one as soon as none runs and the log has grown by a quarter of a checkpoint's bytes,
//!   without waiting for all of them: a writer paced near the reserve would take long to
//!   append them.
//! - With less than the reserve left (the next record may not fit), the writer waits for
//!   the running checkpoint to be put in place, or starts one and waits, before its
//!   transaction starts: a commit that found the log full would otherwise merge the whole
//!   overlay on the writer's thread (`Txn::route`), the work of a checkpoint and
//!   of the one already running. Pacing makes this rare (`CommitStats::log_full_waits`).
//!
//! And beside readers (`Share`, `Options::checkpoint_share_beside_readers`): while more
//! threads can run than there are cores, the writer also sleeps for the CPU time the running
//! checkpoint takes, so that the writer and its checkpoints use one thread's share of the
//! CPU between them, as a writer that merged its own commits would, and the readers keep
//! theirs (docs/design/write-path.md, session 56).

use super::log::Pressure;
use super::{checkpoint, Counters, Shared, WriterState};
use crate::error::Result;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How many checkpoints' time the room left in the ring must last at the writer's rate.
const PACE_HORIZON: f64 = 1.0;
/// A debt shorter than this is carried to the next transaction rather than slept.
const PACE_SLEEP_MIN: Duration = Duration::from_micros(200);
/// The longest a transaction sleeps; a larger debt is slept by the next ones.
const PACE_SLEEP_MAX: Duration = Duration::from_millis(4);
/// The segments a log needs for a reserve to be kept: in a log of two the reserve would be
/// half of it, and a commit that finds it full writes pages instead
/// (`Txn::route`), as it was built for.
const RESERVE_SEGMENTS_MIN: u64 = 3;
/// The reserve is this share of a segment (`reserve`).
const RESERVE_SEGMENT_FRACTION: u64 = 8;
/// A checkpoint the log's room calls for starts before the log has grown by a checkpoint's
/// bytes, once it has grown by this share of them (`before_write`).
const EARLY_CHECKPOINT_FRACTION: u64 = 4;
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
    /// When the writer, at its allowed rate, may start its next transaction (a virtual clock:
    /// a writer slower than its rate earns no credit, `delay` starts it from now).
    until: Option<Instant>,
    /// How far `until` can be ahead of the clock, at most: its lead at the last reading of the
    /// clock, less the sleep then, plus the steps since. While that is under `PACE_SLEEP_MIN`
    /// no transaction owes a sleep, and `delay` reads no clock: far from a full log that is
    /// every transaction, and the two clock reads were a few percent of a one-put commit.
    /// The steps taken meanwhile are added to `until` without the no-credit rule, which the
    /// next reading applies: a slow writer's credit is under `PACE_SLEEP_MIN` a reading.
    lead: Duration,
    /// How long the running checkpoint had run at the last reading of the clock: the steps
    /// between readings use it (it only grows, and the next reading corrects it).
    running_seen: Option<f64>,
    /// The CPU time of checkpoints beside readers, owed by the writer (`Share`).
    pub(crate) share: Share,
}

/// How many transactions apart the writer reads the running checkpoint's CPU clock and the
/// count of threads that can run (`before_write`): two system calls and a small read of
/// `/proc`, a few microseconds, against a one-put commit's half of one.
const SHARE_READ_EVERY: u32 = 256;
/// The most CPU time owed at once: a clock that jumps (or a reading long delayed) does not
/// stop the writer for longer than this.
const SHARE_DEBT_MAX: Duration = Duration::from_millis(100);

/// What the writer owes for the CPU time of a checkpoint that runs beside this handle's
/// readers (`checkpoint::Running::share`). Between two readings of the checkpoint thread's
/// CPU clock, the time it used is owed if both readings found more threads able to run than
/// there are cores (`cores::contended`): then every thread runs only part of the time, and
/// the time the checkpoint runs is time a reader could have run. With cores to spare
/// (readers held open but idle) nothing is owed: a sleeping writer would give no reader
/// anything. Both readings, not one: a thread that runs for a moment (the log's grower, a
/// process of the machine's) contends as briefly, and a writer made to sleep for it lost 8%
/// beside an idle reader (`overwritepinned`), measured.
#[derive(Default)]
pub(crate) struct Share {
    /// The running checkpoint's CPU time at the last reading.
    seen: Duration,
    /// Whether the cores were contended at the last reading (the time a checkpoint uses
    /// after its last reading is owed by it).
    contended: bool,
    /// CPU time owed and not yet slept.
    debt: Duration,
    /// Transactions until the next reading.
    countdown: u32,
}

impl Share {
    /// Whether the writer reads the clocks before this transaction (one in
    /// `SHARE_READ_EVERY`, the first of a checkpoint among them).
    fn due(&mut self) -> bool {
        if self.countdown > 0 {
            self.countdown -= 1;
            return false;
        }
        self.countdown = SHARE_READ_EVERY - 1;
        true
    }

    /// A reading while the checkpoint runs: `cpu`, its thread's CPU time so far (`None`
    /// where it cannot be read), and whether the cores are `contended` now; the time it used
    /// since the last reading is owed if that one found them contended too.
    fn read(&mut self, cpu: Option<Duration>, contended: bool) {
        let both = std::mem::replace(&mut self.contended, contended) && contended;
        if let Some(cpu) = cpu {
            let used = cpu.saturating_sub(self.seen);
            if both {
                self.owe(used);
            }
            self.seen = self.seen.max(cpu);
        }
    }

    /// The checkpoint ended, having used `cpu` in all (`None` where it cannot be read):
    /// the time since the last reading is owed if the cores were contended at it, and the
    /// next checkpoint's clock starts from zero.
    pub(crate) fn ended(&mut self, cpu: Option<Duration>) {
        if let Some(cpu) = cpu.filter(|_| self.contended) {
            self.owe(cpu.saturating_sub(self.seen));
        }
        self.seen = Duration::ZERO;
        self.contended = false;
        self.countdown = 0;
    }

    fn owe(&mut self, used: Duration) {
        self.debt = (self.debt + used).min(SHARE_DEBT_MAX);
    }

    /// The sleep owed before this transaction, if it is worth one, taken off the debt.
    fn sleep(&mut self) -> Option<Duration> {
        (self.debt >= PACE_SLEEP_MIN).then(|| {
            let s = self.debt.min(PACE_SLEEP_MAX);
            self.debt -= s;
            s
        })
    }
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

    /// How long the writer sleeps before its next transaction, the log being as `p` says;
    /// `started`: when the checkpoint running now started, if one runs (one slower than the
    /// ones before slows the writer while it runs, not once it is done); `now` reads the
    /// clock, which is done only when a sleep may be owed (`lead`).
    pub(crate) fn delay(
        &mut self,
        p: Pressure,
        started: Option<Instant>,
        now: impl FnOnce() -> Instant,
    ) -> Option<Duration> {
        let bytes = self.appended.map_or(0, |a| p.appended.saturating_sub(a));
        self.appended = Some(p.appended);
        let average = self.duration?.max(self.durable.unwrap_or(0.0));
        // Bytes a second at which the room left before the reserve lasts the horizon; the
        // time `bytes` take at that rate.
        let room = p.room_left().saturating_sub(reserve(p));
        // (In nanoseconds through a cast: `Duration::from_secs_f64` cost more than the rest
        // of the pacing, on every transaction.)
        let step = |running: Option<f64>| {
            if room == 0 {
                return PACE_SLEEP_MAX;
            }
            let duration = running.map_or(average, |r| average.max(r));
            let seconds = bytes as f64 * (duration * PACE_HORIZON).max(1e-3) / room as f64;
            Duration::from_nanos((seconds.min(1.0) * 1e9) as u64)
        };
        let skipped = step(started.and(self.running_seen));
        let lead = self.lead + skipped;
        if lead < PACE_SLEEP_MIN {
            self.lead = lead;
            self.until = self.until.map(|u| u + skipped);
            return None;
        }
        let now = now();
        let running = started.map(|s| now.saturating_duration_since(s).as_secs_f64());
        self.running_seen = running;
        let until = self.until.map_or(now, |u| u.max(now)) + step(running);
        self.until = Some(until);
        let ahead = until - now;
        let sleep = (ahead >= PACE_SLEEP_MIN).then(|| ahead.min(PACE_SLEEP_MAX));
        self.lead = ahead - sleep.unwrap_or_default();
        sleep
    }
}

/// Before a write transaction starts (`Database::begin_write`, with the write lock held and
/// any checkpoint due started): waits for room in the log if it is nearly full, then sleeps
/// what the pacing says. Only on a handle that writes the log with checkpoints on a thread of
/// their own (without one, a due checkpoint is written before the transaction anyway).
pub(crate) fn before_write(shared: &Arc<Shared>, guard: &mut WriterState) -> Result<()> {
    let Some(log) = shared.log.as_ref() else {
        return Ok(());
    };
    if !shared.options.checkpoint_thread || guard.poisoned {
        return Ok(());
    }
    let mut p = log.pressure();
    if guard.checkpoint.is_none()
        && super::commit::durable_checkpoint_due(shared, p)
        && log.since(guard.checkpoint_position) >= p.checkpoint / EARLY_CHECKPOINT_FRACTION
    {
        // The log needs room back before the checkpoint its growth calls for would start (the
        // writer paced near the reserve appends too slowly to reach it): a checkpoint started
        // now is made durable, and gives the room back once it is in place. Not before the
        // log has grown by a share of a checkpoint's bytes: in a log too small for two
        // checkpoints, whose room always calls for a durable one, that would be a durable
        // checkpoint a transaction.
        if checkpoint::start(shared, guard)? {
            p = log.pressure();
        }
    }
    if short_of_room(p) {
        let waited = Instant::now();
        // The running checkpoint's tree put in place gives back the log before it, if it was
        // made durable; otherwise (or with none running) a checkpoint started now is made
        // durable, the log's room calling for it (`commit::durable_checkpoint_due`).
        checkpoint::finish(shared, guard, true)?;
        if short_of_room(log.pressure()) && checkpoint::start(shared, guard)? {
            checkpoint::finish(shared, guard, true)?;
        }
        let c = &shared.counters;
        Counters::add(&c.log_full_waits);
        c.log_full_wait_micros
            .fetch_add(micros(waited.elapsed()), Ordering::Relaxed);
        p = log.pressure();
    }
    let started = guard.checkpoint.as_ref().map(|r| r.started());
    if let Some(r) = guard.checkpoint.as_ref().filter(|r| r.share) {
        if guard.pacer.share.due() {
            guard.pacer.share.read(r.cpu(), super::cores::contended());
        }
    }
    let paced = guard.pacer.delay(p, started, Instant::now);
    let owed = guard.pacer.share.sleep();
    if paced.is_some() || owed.is_some() {
        std::thread::sleep(paced.unwrap_or_default() + owed.unwrap_or_default());
        let c = &shared.counters;
        c.paced_micros
            .fetch_add(micros(paced.unwrap_or_default()), Ordering::Relaxed);
        c.share_micros
            .fetch_add(micros(owed.unwrap_or_default()), Ordering::Relaxed);
    }
    Ok(())
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
        }
    }

    fn close(a: Duration, b: Duration) -> bool {
        a.abs_diff(b) < Duration::from_micros(10)
    }

    #[test]
    fn nothing_is_paced_before_a_checkpoint_was_timed() {
        let mut p = Pacer::default();
        let now = Instant::now();
        assert_eq!(p.delay(pressure(90 * MB, 99 * MB), None, || now), None);
    }

    /// The log kept when 40 MB are left past the reserve (1.25 MB) of the 100 MB ring.
    const KEPT_40_LEFT: u64 = 100 * MB - 40 * MB - MB * 5 / 4;

    #[test]
    fn the_room_left_must_last_a_checkpoint() {
        // Checkpoints of 0.5 s. The 40 MB left past the reserve must last 0.5 s: 80 MB/s, and
        // 1 MB more of log is 12.5 ms, slept 4 ms at a time, the rest carried (2 ms left
        // after 10.5 ms).
        let mut p = Pacer::default();
        p.observe(10 * MB, Duration::from_millis(500), false);
        let now = Instant::now();
        assert_eq!(p.delay(pressure(50 * MB, KEPT_40_LEFT), None, || now), None);
        assert_eq!(
            p.delay(pressure(51 * MB, KEPT_40_LEFT), None, || now),
            Some(PACE_SLEEP_MAX)
        );
        let later = now + Duration::from_micros(10_500);
        let left = p
            .delay(pressure(51 * MB, KEPT_40_LEFT), None, || later)
            .unwrap();
        assert!(close(left, Duration::from_millis(2)), "{left:?}");
        // With 95 MB left, 93.75 MB/0.5 s: a 16 KB record is 83 us, under the shortest
        // sleep, carried.
        let mut q = Pacer::default();
        q.observe(10 * MB, Duration::from_millis(500), false);
        q.delay(pressure(0, 5 * MB), None, || now);
        assert_eq!(q.delay(pressure(MB / 64, 5 * MB), None, || now), None);
        assert!(
            close(q.lead, Duration::from_secs_f64(1.0 / 64.0 / 187.5)),
            "{:?}",
            q.lead
        );
        // Nothing left past the reserve: the longest sleep for any write.
        let mut r = Pacer::default();
        r.observe(10 * MB, Duration::from_millis(500), false);
        r.delay(pressure(0, 100 * MB - MB * 5 / 4), None, || now);
        assert_eq!(
            r.delay(pressure(1, 100 * MB - MB * 5 / 4), None, || now),
            Some(PACE_SLEEP_MAX)
        );
    }

    #[test]
    fn the_clock_is_read_only_when_a_sleep_may_be_owed() {
        // 93.75 MB left past the reserve, checkpoints of 0.5 s: a 16 KB record is 83 us at
        // that rate. Two owe less than the shortest sleep together, and read no clock; the
        // third may owe 250 us, and reads it (and owes 83 us: the steps before the first
        // reading start nothing). A 1 MB record then owes 5.3 ms, read and slept.
        let mut p = Pacer::default();
        p.observe(10 * MB, Duration::from_millis(500), false);
        let now = Instant::now();
        let reads = std::cell::Cell::new(0);
        let clock = || {
            reads.set(reads.get() + 1);
            now
        };
        for i in 0..4 {
            assert_eq!(p.delay(pressure(i * MB / 64, 5 * MB), None, clock), None);
            assert_eq!(reads.get(), u32::from(i == 3), "transaction {i}");
        }
        assert!(close(p.lead, Duration::from_micros(83)), "{:?}", p.lead);
        assert_eq!(
            p.delay(pressure(3 * MB / 64 + MB, 5 * MB), None, clock),
            Some(PACE_SLEEP_MAX)
        );
        assert_eq!(reads.get(), 2);
        // What was not slept is the lead the next transactions start from.
        let owed = Duration::from_secs_f64((1.0 + 1.0 / 64.0) / 187.5);
        assert!(close(p.lead, owed - PACE_SLEEP_MAX), "{:?}", p.lead);
    }

    #[test]
    fn a_slow_writer_earns_no_credit() {
        let mut p = Pacer::default();
        p.observe(10 * MB, Duration::from_millis(500), false);
        let now = Instant::now();
        p.delay(pressure(50 * MB, KEPT_40_LEFT), None, || now);
        // A second later (far slower than the rate), a 1 MB burst is still paced from now.
        let later = now + Duration::from_secs(1);
        assert_eq!(
            p.delay(pressure(51 * MB, KEPT_40_LEFT), None, || later),
            Some(PACE_SLEEP_MAX)
        );
        let until = p.until.unwrap() - later;
        assert!(close(until, Duration::from_micros(12_500)), "{until:?}");
    }

    #[test]
    fn a_long_running_or_durable_checkpoint_lowers_the_rate() {
        // The average says 0.5 s; the checkpoint running has run 2 s: 40 MB must last 2 s.
        let mut p = Pacer::default();
        p.observe(10 * MB, Duration::from_millis(500), false);
        let now = Instant::now();
        let running = now.checked_sub(Duration::from_secs(2));
        p.delay(pressure(50 * MB, KEPT_40_LEFT), running, || now);
        p.delay(pressure(51 * MB, KEPT_40_LEFT), running, || now);
        let until = p.until.unwrap() - now;
        assert!(close(until, Duration::from_millis(50)), "{until:?}");
        // Durable checkpoints of 1 s among unsynced ones: 40 MB must last 1 s.
        let mut q = Pacer::default();
        q.observe(10 * MB, Duration::from_secs(1), true);
        for _ in 0..10 {
            q.observe(10 * MB, Duration::from_millis(100), false);
        }
        q.delay(pressure(50 * MB, KEPT_40_LEFT), None, || now);
        q.delay(pressure(51 * MB, KEPT_40_LEFT), None, || now);
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
    fn the_duration_is_averaged() {
        let mut p = Pacer::default();
        p.observe(MB, Duration::from_secs(1), true);
        p.observe(MB, Duration::from_secs(3), false);
        assert_eq!((p.duration, p.durable), (Some(2.0), Some(1.0)));
        p.observe(0, Duration::from_secs(9), true);
        assert_eq!(p.duration, Some(2.0), "an empty checkpoint says nothing");
    }

    #[test]
    fn a_checkpoints_cpu_time_is_owed_only_while_the_cores_are_contended() {
        let ms = Duration::from_millis;
        let mut s = Share::default();
        // The first transaction of a checkpoint reads, then one in SHARE_READ_EVERY.
        assert!(s.due());
        assert!((1..SHARE_READ_EVERY).all(|_| !s.due()));
        assert!(s.due());
        // The time used between two readings is owed when both found the cores
        // contended: not the 3 ms before the first, nor the 2 ms after it (the second found
        // them free), nor the 5 ms after that; the 4 ms after, yes.
        s.read(Some(ms(3)), true);
        assert_eq!(s.debt, ms(0));
        s.read(Some(ms(5)), false);
        s.read(Some(ms(10)), true);
        assert_eq!(s.debt, ms(0));
        s.read(Some(ms(14)), true);
        assert_eq!(s.debt, ms(4));
        s.debt += ms(4);
        // A clock that cannot be read owes nothing and keeps what was seen.
        s.read(None, true);
        assert_eq!((s.debt, s.seen), (ms(8), ms(14)));
        // Slept at most PACE_SLEEP_MAX a transaction, never less than PACE_SLEEP_MIN.
        assert_eq!(s.sleep(), Some(PACE_SLEEP_MAX));
        s.debt += ms(1);
        assert_eq!(s.sleep(), Some(PACE_SLEEP_MAX));
        assert_eq!(s.sleep(), Some(ms(1)));
        assert_eq!(s.sleep(), None);
        // The end owes the rest since the last reading, contended; the next checkpoint's
        // clock starts from zero, and its first transaction reads it.
        s.ended(Some(ms(16)));
        assert_eq!(s.debt, ms(2));
        assert!(s.due());
        s.read(Some(ms(1)), true);
        s.read(Some(ms(2)), true);
        assert_eq!(s.debt, ms(3));
        // After an uncontended reading, the end owes nothing.
        s.read(Some(ms(3)), false);
        s.ended(Some(ms(50)));
        assert_eq!(s.debt, ms(3));
        // A clock that jumps owes SHARE_DEBT_MAX at most.
        s.read(Some(Duration::from_secs(9)), true);
        s.read(Some(Duration::from_secs(10)), true);
        assert_eq!(s.debt, SHARE_DEBT_MAX);
    }

    #[test]
    fn the_reserve_needs_a_log_of_three_segments() {
        let p = |left, segments| Pressure {
            room: 10 * MB,
            left,
            segments,
            ..pressure(0, 0)
        };
        assert!(short_of_room(p(MB, 3)), "a ring smaller than the log");
        assert!(!short_of_room(p(2 * MB, 3)));
        assert!(!short_of_room(p(MB, 2)), "a log of two segments fills");
    }
}
