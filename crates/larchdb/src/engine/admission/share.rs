//! How a checkpoint shares the CPU with readers: its priority (`checkpoint_nice`), and, beside
//! readers on contended cores, the CPU time the writer owes for it (`Share`), or for one the
//! idle checkpointer started, its rests (`IdleRest`).
//!
//! Whether the cores are contended (`cpu::contended`): more threads can run right now than this
//! process may use cores (`crate::cpu`). A container whose `/proc/loadavg` is the host's reads
//! as contended whenever the host is busy: the writer then pays for its checkpoints whenever
//! they run beside readers, which is the share it would have with no spare core. Where the
//! count cannot be read, the cores read as not contended: nothing changes from a handle
//! without the share.

use crate::cpu::{contended, cores, machine_busy_ticks, ticks_per_second, Sched, ThreadSched};

use super::SLEEP_MAX;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Nice steps below the application's threads a checkpoint runs at when it starts beside the
/// handle's readers (read transactions open as it starts). Measured on 2 cores
/// (readwhilewriting at 1M, ratios to LMDB within each run): with 2 and 4 readers the readers
/// read 1.00x and 0.96x of LMDB's readers at 5, against 0.70x and 0.68x at 0, beside a writer
/// at 2.7x and 2.4x LMDB's (3.6x and 3.2x at 0). Without readers (a load) a checkpoint keeps
/// a full thread's share, so that the writer it paces does too.
pub const CHECKPOINT_NICE_BESIDE_READERS: u8 = 5;

/// Nice steps below the application's threads a checkpoint runs at when it starts beside
/// fewer of the handle's readers than there are cores, other processes quiet
/// (`writer_has_a_core`): the lowest priority. The readers then have a core each, the writer
/// has the one left, and the checkpoint needs no more than the writer's sleeps give it (the
/// writer owes the checkpoint's CPU time while the cores are contended: `Share`; and the
/// pacing). At `CHECKPOINT_NICE_BESIDE_READERS` it time-sliced the reader's core as well:
/// seed 001's table at 10M records beside one reader on 2 cores (the inmem suite's step at
/// one reader, `--background_nice=N` for every checkpoint, two runs each), the reader made
/// 509-524K reads a second at 5, 550-554K at 10, 566-578K at 15 and 567-569K at 19, the
/// writer 251-256K, 302K, 295-310K and 319-326K updates (LMDB's: 582K and 241K). Where the
/// readers take every core, the writer's sleeps leave the checkpoint none: at 19 beside 2
/// and 4 readers the writer made 19.8K and 1.1K updates a second against 114K and 65K at 5.
/// So a checkpoint that starts here and then finds readers on every core, or finds itself
/// starved of the CPU, raises itself where it may (`LowestRaise`).
pub const CHECKPOINT_NICE_WRITERS_CORE: u8 = 19;

/// How many nice steps below the application's threads a checkpoint starting now runs:
/// `Options::background_nice`, or, when it `yields` (this handle has read transactions open
/// as it starts, `beside` of them on other threads, and its overlays hold under half the
/// memory budget: `budget::pressed`), `CHECKPOINT_NICE_WRITERS_CORE` where the readers leave
/// the writer a core (`writer_has_a_core`) and the thread could raise itself back
/// (`engine::may_raise_to`: `LowestRaise`), and `CHECKPOINT_NICE_BESIDE_READERS` elsewhere,
/// if that is lower still. The readers counted are this handle's; readers in other processes
/// are not.
pub(crate) fn checkpoint_nice(options: &crate::Options, yields: bool, beside: usize) -> u8 {
    if !yields {
        return options.background_nice;
    }
    let beside_readers = options.background_nice.max(CHECKPOINT_NICE_BESIDE_READERS);
    if writer_has_a_core(beside) && super::super::may_raise_to(beside_readers) {
        options.background_nice.max(CHECKPOINT_NICE_WRITERS_CORE)
    } else {
        beside_readers
    }
}

/// Whether the writer has a core of its own beside `beside` readers: fewer readers than
/// cores, and the other processes used under `OTHERS_CORES_MAX` of the cores since the last
/// look (`others_cores`). Beside another process's busy threads a checkpoint at the lowest
/// priority gets almost no CPU (a nice-0 thread weighs 68 times one at 19), and the writer,
/// paced to the checkpoints' durations, slows with it. The count of threads able to run at
/// the checkpoint's start is no guide: beside one reader on 2 cores it was 3-5 at most
/// starts (the kernel's writeback workers, the handle's sync thread), with nothing else
/// running. Where the machine's CPU time cannot be read, a core is not assumed.
fn writer_has_a_core(beside: usize) -> bool {
    beside < cores() && others_cores().is_some_and(|c| c < OTHERS_CORES_MAX)
}

/// The share of a core other processes may use, on average since the last look, for a
/// checkpoint to run at `CHECKPOINT_NICE_WRITERS_CORE` (`writer_has_a_core`): more than the
/// kernel's own work for the process's writes, less than one busy thread.
const OTHERS_CORES_MAX: f64 = 0.5;

/// The machine's CPU time at a look (`others_cores`).
#[derive(Clone, Copy)]
struct CpuLook {
    at: Instant,
    /// The machine's busy time, in clock ticks.
    machine: u64,
    /// The process's own CPU time.
    own: Duration,
}

/// The cores' time used by threads outside this process since the last call (from any
/// handle), in cores: 1.0 is one core busy throughout. The machine's busy time (the first line
/// of `/proc/stat`: user, nice, system, irq and softirq ticks; not idle, I/O wait or stolen)
/// less the process's CPU time (`getrusage`), over the time between the calls. `None` at the
/// first call, where either cannot be read, or within a tick of the last look.
fn others_cores() -> Option<f64> {
    static LAST: std::sync::Mutex<Option<CpuLook>> = std::sync::Mutex::new(None);
    let now = CpuLook::now()?;
    let mut last = LAST.lock().unwrap_or_else(|e| e.into_inner());
    let before = last.replace(now)?;
    let others = now.others_since(before);
    if others.is_none() {
        *last = Some(before);
    }
    others
}

impl CpuLook {
    fn now() -> Option<CpuLook> {
        Some(CpuLook {
            at: Instant::now(),
            machine: machine_busy_ticks()?,
            own: usage(Who::Process)?.1,
        })
    }

    /// The cores other processes used between `before` and this look; `None` within a tick.
    fn others_since(&self, before: CpuLook) -> Option<f64> {
        let hz = ticks_per_second()?;
        let wall = self.at.saturating_duration_since(before.at).as_secs_f64();
        if wall * hz < 1.0 {
            return None;
        }
        let machine = self.machine.saturating_sub(before.machine) as f64 / hz;
        let own = self.own.saturating_sub(before.own).as_secs_f64();
        Some((machine - own).max(0.0) / wall)
    }
}

/// How many transactions apart the writer reads the running checkpoint's CPU clock and the
/// count of threads that can run (`before_write`): two system calls and a small read of
/// `/proc`, a few microseconds, against a one-put commit's half of one.
const SHARE_READ_EVERY: u32 = 256;
/// The most CPU time owed at once: a clock that jumps (or a reading long delayed) does not
/// stop the writer for longer than this.
const SHARE_DEBT_MAX: Duration = Duration::from_millis(100);

/// Time the writer owes and has not slept yet (the CPU share's and the device's): capped at
/// `SHARE_DEBT_MAX`, slept from the shortest sleep for the writer's company
/// (`Company::share_min`) to `SLEEP_MAX` a transaction.
#[derive(Default)]
struct Debt(Duration);

impl Debt {
    fn owe(&mut self, d: Duration) {
        self.0 = (self.0 + d).min(SHARE_DEBT_MAX);
    }

    /// The sleep owed before this transaction, if it is at least `min`, taken off the debt.
    fn take(&mut self, min: Duration) -> Option<Duration> {
        (self.0 >= min).then(|| {
            let s = self.0.min(SLEEP_MAX);
            self.0 -= s;
            s
        })
    }
}

/// What the writer owes for the CPU time of a checkpoint that runs beside this handle's
/// readers (`checkpoint::Running::share`). Between two readings of the checkpoint thread's
/// CPU clock, the time it used is owed if both readings found more threads able to run than
/// there are cores (`contended`): then every thread runs only part of the time, and
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
    debt: Debt,
    /// Transactions until the next reading.
    countdown: u32,
}

impl Share {
    /// Whether the writer reads the clocks before this transaction (one in
    /// `SHARE_READ_EVERY`, the first of a checkpoint among them).
    pub(super) fn due(&mut self) -> bool {
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
    pub(super) fn read(&mut self, cpu: Option<Duration>, contended: bool) {
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
        self.debt.owe(used);
    }

    /// The sleep owed before this transaction, if it is at least `min`, taken off the debt.
    pub(super) fn sleep(&mut self, min: Duration) -> Option<Duration> {
        self.debt.take(min)
    }
}

/// Leaves an idle checkpoint's merge writes between two looks at the cores (`IdleRest`).
const IDLE_REST_EVERY: u32 = 32;
/// How long an idle checkpoint's merge rests while the cores are contended, in units of the
/// time it worked (`IdleRest`): it takes at most a quarter of a core. Two readers right after
/// a 200K-record load of 1 KB values (the keeper resting too), over the first second: 1.44-1.47M
/// reads a second at 3, 1.34-1.41M without the rest, 1.55-1.59M at 10; the writer that came
/// next beside them 78-83K, 71-86K and 64-69K updates a second: the more the merges rest,
/// the more of them the next writer finds undone (docs/design/performance.md, "Idle work
/// gives way to busy readers").
const IDLE_REST_WEIGHT: u32 = 3;
/// The most an idle checkpoint's merge rests at once (`IdleRest`): also the most a writer
/// that comes to wait for it waits for the rest.
const IDLE_REST_MAX: Duration = Duration::from_millis(20);

/// The rest of a checkpoint the idle checkpointer started (`engine::idle`), beside the
/// handle's readers: no writer waits for it, and where the readers take every core, each
/// merge the cores share with them slows them for its whole time, where what it gives them
/// back (reads that probe no overlay, a few percent of each) pays for it only over seconds.
/// So every `IDLE_REST_EVERY` leaves the merge writes, if more threads can run than the
/// process has cores (`contended`), it sleeps `IDLE_REST_WEIGHT` times the time it worked,
/// unless a writer waits for it (`Shared::checkpoint_awaited`, set by `checkpoint::finish`).
/// Not a lower priority: a writer that comes to wait for a checkpoint at nice 19 beside busy
/// readers waits for a scheduler's round, and cannot raise it.
pub(crate) struct IdleRest {
    awaited: Arc<std::sync::atomic::AtomicBool>,
    countdown: u32,
    since: Instant,
}

impl IdleRest {
    pub(crate) fn new(awaited: Arc<std::sync::atomic::AtomicBool>) -> IdleRest {
        IdleRest {
            awaited,
            countdown: IDLE_REST_EVERY,
            since: Instant::now(),
        }
    }

    /// The merge wrote a leaf: rests, one in `IDLE_REST_EVERY`, while the cores are
    /// contended and no writer waits.
    pub(crate) fn leaf(&mut self) {
        self.countdown -= 1;
        if self.countdown > 0 {
            return;
        }
        self.countdown = IDLE_REST_EVERY;
        if !self.awaited.load(Ordering::Relaxed) && contended() {
            let worked = self.since.elapsed();
            std::thread::sleep((worked * IDLE_REST_WEIGHT).min(IDLE_REST_MAX));
        }
        self.since = Instant::now();
    }
}

/// Leaves a merge writes between two looks at the readers beside it (`LowestRaise`).
const LOWEST_LOOK_EVERY: u32 = 64;
/// How many times as long as it ran a checkpoint at the lowest priority waits for a core
/// in a window for it to count as starved (`starved`).
const STARVED_WAIT_PER_RUN: u32 = 8;
/// The least time waited for a core in a window for a checkpoint to count as starved
/// (`starved`): a preemption or two is not starvation.
const STARVED_WAIT_MIN: Duration = Duration::from_millis(100);
/// The CPU time a checkpoint runs in one window of its looks for starvation (`LowestRaise`).
const STARVED_WINDOW_RUN: Duration = Duration::from_millis(50);

/// A checkpoint that started at the lowest priority (`CHECKPOINT_NICE_WRITERS_CORE`: fewer
/// readers than cores as it started) and then finds readers on every core: at the lowest
/// priority beside them it gets almost no CPU (a nice-0 thread weighs 68 times one at 19),
/// and the writer, paced to it, waits for it. Seed 001's step beside 4 readers on 2 cores,
/// after a checkpoint had started at 19 as the step before ended: one merge for the whole 4 s,
/// and the writer at 9.9K updates a second against LMDB's 55K (docs/design/performance.md,
/// "A checkpoint at the lowest priority beside more readers"). The same holds beside the
/// application's other busy threads, which `writer_has_a_core` does not see (it counts other
/// processes' CPU time): the share's test (tests/checkpoint_share.rs, a writer beside one
/// reader and three spinning threads on 2 cores, a debug build) took 290 s for its first
/// writer on CI's machine, 4 checkpoints, the writer paced for 83 s (locally 60 s for all
/// three writers; raised when starved, 13 s, 20 checkpoints for the first). So every
/// `LOWEST_LOOK_EVERY` leaves it writes, it counts the handle's readers beside it
/// (`ReadState::beside`) and reads its own time run and waiting for a core
/// (`cpu::ThreadSched`); once the readers take every core, or it is starved (`starved`, over
/// a window of `STARVED_WINDOW_RUN` run), it raises itself to
/// `CHECKPOINT_NICE_BESIDE_READERS` (or the application's `Options::background_nice`, if
/// lower still), once: a thread that is not allowed to (`engine::raise_to`) stays where it
/// is, and one that could not have been does not start this low (`checkpoint_nice`).
pub(crate) struct LowestRaise {
    shared: Arc<super::super::Shared>,
    /// The thread that started the checkpoint (`ReadState::beside`).
    starter: u64,
    countdown: u32,
    /// The steps below the application's threads to raise it to.
    to: u8,
    /// Looked, and raised or found it could not: done.
    done: bool,
    /// The checkpoint thread's times, read at each look.
    times: ThreadSched,
    /// Its time run and waiting for a core at the window's start: the merge's start, then
    /// each look where it has run `STARVED_WINDOW_RUN` since.
    sched: Option<Sched>,
}

/// Whether a checkpoint's thread has been starved of the CPU since `before` (`LowestRaise`):
/// it waited for a core more than `STARVED_WAIT_PER_RUN` times as long as it ran, and at
/// least `STARVED_WAIT_MIN`.
fn starved(before: Sched, now: Sched) -> bool {
    let ran = now.ran.saturating_sub(before.ran);
    let waited = now.waited.saturating_sub(before.waited);
    waited >= STARVED_WAIT_MIN && waited > ran * STARVED_WAIT_PER_RUN
}

impl LowestRaise {
    /// `None` unless the calling thread runs lower than it would be raised to.
    /// Called on the checkpoint's thread.
    pub(crate) fn new(shared: &Arc<super::super::Shared>, starter: u64) -> Option<LowestRaise> {
        let to = shared
            .options
            .background_nice
            .max(CHECKPOINT_NICE_BESIDE_READERS);
        (super::super::lowered() > to).then(|| {
            let times = ThreadSched::open();
            LowestRaise {
                shared: shared.clone(),
                starter,
                countdown: LOWEST_LOOK_EVERY,
                to,
                done: false,
                sched: times.read(),
                times,
            }
        })
    }

    /// The merge wrote a leaf: one in `LOWEST_LOOK_EVERY`, raises the thread where the
    /// readers beside it take every core or it is starved.
    pub(crate) fn leaf(&mut self) {
        if self.done {
            return;
        }
        self.countdown -= 1;
        if self.countdown > 0 {
            return;
        }
        self.countdown = LOWEST_LOOK_EVERY;
        let now = self.times.read();
        let starved = match (self.sched, now) {
            (Some(since), Some(now)) => {
                if now.ran.saturating_sub(since.ran) >= STARVED_WINDOW_RUN {
                    self.sched = Some(now);
                }
                starved(since, now)
            }
            _ => false,
        };
        if starved || self.shared.read_state().beside(self.starter) >= cores() {
            super::super::raise_to(self.to);
            self.done = true;
        }
    }
}

/// Leaves a merge writes between two readings of the page-fault counts (`DeviceShare`).
const DEVICE_READ_EVERY: u32 = 16;
/// The most a checkpoint sleeps at once for the device's share (`DeviceShare`).
const DEVICE_SLEEP_MAX: Duration = Duration::from_millis(20);
/// The most readers a checkpoint yields the device to (`DeviceShare`).
const DEVICE_READERS_MAX: u32 = 4;
/// How long a checkpoint sleeps for each reader that waits on the device, in units of the
/// time it worked (`DeviceShare`). Measured beside 1 / 2 / 4 readers on seed 002's table in a
/// 1 GiB cgroup (readers, then writer, a second): 1, 5.2K / 16.0K / 33.6K and 19.0K / 20.4K
/// / 18.0K; 3, 7.7K / 29.7K / 58.5K and 14.6K / 15.2K / 10.3K; 6, 8.4K / 33.5K / 62.3K and
/// 11.1K / 7.7K / 6.4K; without the share 3.5K / 10.8K / 21.2K and 26.5K / 22.1K / 20.5K
/// (LMDB's: 9.9K / 35K / 74K and 8.8K / 7.5K / 7.2K).
const DEVICE_SHARE_WEIGHT: u32 = 3;

/// A checkpoint's share of the device beside the handle's readers, where the tree is
/// beyond memory: the CPU share (`Share`) gives readers nothing when everyone waits on the
/// device. Every `DEVICE_READ_EVERY` leaves the merge writes (`WritePages::between_leaves`),
/// if the process's other threads waited on the device meanwhile (major page faults: readers
/// reading the tree), the checkpoint sleeps `DEVICE_SHARE_WEIGHT` times as long as it worked
/// for each reader (at most `DEVICE_READERS_MAX`, each sleep at most `DEVICE_SLEEP_MAX`):
/// its reads, its read-ahead and the writes behind it otherwise take most of the device, and
/// the readers, who read one page at a time, wait. The writer, paced by the checkpoints, slows
/// with it. In memory no thread faults, and nothing changes.
pub(crate) struct DeviceShare {
    readers: u32,
    /// The checkpoint's own faults, told to the writer's share (`WriterDevice`).
    tally: FaultTally,
    countdown: u32,
    since: Instant,
    own: Option<u64>,
    all: Option<u64>,
}

impl DeviceShare {
    /// The share beside `readers` read transactions; the thread's faults are added to
    /// `background` (`Counters::background_faults`).
    pub(crate) fn new(readers: usize, background: Arc<AtomicU64>) -> DeviceShare {
        DeviceShare {
            tally: FaultTally::new(background),
            readers: u32::try_from(readers)
                .unwrap_or(u32::MAX)
                .min(DEVICE_READERS_MAX),
            countdown: DEVICE_READ_EVERY,
            since: Instant::now(),
            own: major_faults(Who::Thread),
            all: major_faults(Who::Process),
        }
    }

    /// The merge wrote a leaf: sleeps, one in `DEVICE_READ_EVERY`, if the other threads
    /// waited on the device meanwhile, unless the log is `short` of room: the writer is
    /// paced to the checkpoints already, and one that slept for the readers then held it to
    /// a few hundred writes a second (seed 002's table at 6 GiB beside 4 readers warming a
    /// cold cache).
    pub(crate) fn leaf(&mut self, short: impl FnOnce() -> bool) {
        self.countdown -= 1;
        if self.countdown > 0 {
            return;
        }
        self.countdown = DEVICE_READ_EVERY;
        let (own, all) = (major_faults(Who::Thread), major_faults(Who::Process));
        let others = match (self.own, self.all, own, all) {
            (Some(o0), Some(a0), Some(o1), Some(a1)) => {
                a1.saturating_sub(a0).saturating_sub(o1.saturating_sub(o0))
            }
            _ => 0,
        };
        if others > 0 && !short() {
            let worked = self.since.elapsed();
            let owed = worked * self.readers * DEVICE_SHARE_WEIGHT;
            std::thread::sleep(owed.min(DEVICE_SLEEP_MAX));
        }
        (self.own, self.all) = (own, all);
        self.tally.note(own);
        self.since = Instant::now();
    }
}

/// Write transactions between two readings of the page-fault counts by the writer
/// (`WriterDevice`): two `getrusage` calls, about a microsecond, against a few for a
/// 4000-byte one-put commit.
const WRITER_READ_EVERY: u32 = 32;
/// How long the writer sleeps beside readers that wait on the device, in units of the time it
/// worked (`WriterDevice`): it works at most a quarter of the time. Seed 002's table in a 6 GiB
/// cgroup, 1 and 4 readers (reads, then writes, a second): at 2, 7.2-8.4K and 27K, 23-24K and
/// 18-19K; at 4, 8.3-9.4K and 12-13K, 27-30K and 11.5K; at 5, 10.0-10.4K and 10.4-10.9K,
/// 28-29K and 10-10.4K; LMDB's readers 7.4-10.5K and 25-29K beside writers of 6.7-10K. The
/// writer held by the benchmark's rate limit instead (no share), one reader: to 8K, 12.1K; 16K,
/// 11.5K; 24K, 9.3K; 32K, 8.4K; unheld, 3.0-5.6K beside 57K (docs/design/performance.md,
/// "Beyond memory: the writer's share of the device"). Those were kept at 4; once the
/// writer's own work got cheaper, 4 let it write 1.8-3.0x LMDB's beside readers at 0.60-0.92x
/// (seed 000's and 002's steps at small scale, alternated runs of 4, 5 and 6 within the hour):
/// 5 gave the readers 0.80-0.94x with the writer at 1.44-2.6x, 6 the readers 0.83-1.14x with
/// the writer at 1.0-1.8x (performance.md, "A sequential merge's memory, ..."). Once large
/// values went to the device once, from the writer's commit (docs/design/large-values.md),
/// the writer's work held less of the device, and 5 gave the readers of seed 000's step at
/// small scale 1.13 / 1.07 / 0.84x LMDB's beside a writer at 0.60 / 0.68 / 0.97x; 3 gave them
/// 0.91 / 0.94 / 0.85x beside 1.50 / 1.25 / 1.23x, both columns ahead, at every step, of the
/// engine before at 5 (0.74 / 0.82 / 0.76x beside 1.16 / 1.05 / 1.20x) within the same hour
/// (performance.md, "Large values written once: a prototype").
const WRITER_DEVICE_WEIGHT: u32 = 3;
/// The share of the cores under which the process's threads count as waiting on the device
/// rather than on the CPU (`WriterDevice::read`).
const DEVICE_BOUND_BUSY: f64 = 0.75;

/// The writer's share of the device beside the handle's readers, where the tree is beyond
/// memory: the checkpoint yields the device to readers that wait on it (`DeviceShare`), but
/// the log's appends take it too, at the writer's own pace, which the checkpoints set only
/// once the log is nearly full: with the memory and the log's room of a large machine (seed
/// 002's table in a 6 GiB cgroup) the writer appended 57K records of 4000 bytes a second and
/// its reader read 0.44x of LMDB's, each read waiting behind the log's writes. So, while the
/// handle has read transactions open, every `WRITER_READ_EVERY` write transactions the
/// writer reads the process's major page faults and CPU time; if threads other than the
/// writer and the checkpoints (`Counters::background_faults`) took any since the last
/// reading, and the process used under `DEVICE_BOUND_BUSY` of the cores, it owes
/// `WRITER_DEVICE_WEIGHT` times the time it worked meanwhile (the time between the readings
/// less what it slept for admission), slept before its next transactions as the CPU share
/// is. In memory no reader faults, and nothing changes. Readers in other processes are not
/// seen: their faults are not this process's.
#[derive(Default)]
pub(crate) struct WriterDevice {
    countdown: u32,
    last: Option<Faults>,
    /// Slept for admission since the last reading (not work).
    slept: Duration,
    debt: Debt,
    /// Read transactions were open on other threads at the last reading.
    readers: bool,
}

/// One reading of the fault counts (`WriterDevice`).
#[derive(Clone, Copy)]
struct Faults {
    at: Instant,
    own: u64,
    all: u64,
    /// The process's CPU time.
    cpu: Duration,
    background: u64,
}

impl WriterDevice {
    /// Before a write transaction: one in `WRITER_READ_EVERY` asks `readers` whether read
    /// transactions of the handle are open beside the writer, and whether their reads wait on
    /// the device in page faults (the file read through a mapping: `Access::reads_fault`); if
    /// both, reads the fault counts (the checkpoints' from `background`) and owes for the work
    /// since the last reading if other threads waited on the device meanwhile.
    ///
    /// The counts only where they can see the readers' waits: without readers nothing is
    /// owed, and the two `getrusage` calls were about 2.5% of a one-put load's writer; and
    /// readers of frames read what memory lacks with the engine's own reads, which no fault
    /// counts. There the calls cost more than their time: `getrusage` of the whole process
    /// reads the CPU time of each of its threads, running ones included, and with YCSB A's
    /// four clients on two cores (each a reader and a writer, the file in frames) the
    /// update's P99 was 57-493 us with the counts read and 36-121 us without, five alternated
    /// rounds (docs/design/performance.md, "The writer's look at the device, in frames").
    pub(super) fn before_write(
        &mut self,
        readers: impl FnOnce() -> (bool, bool),
        background: &AtomicU64,
    ) {
        if self.countdown > 0 {
            self.countdown -= 1;
            return;
        }
        self.countdown = WRITER_READ_EVERY - 1;
        let counts = || (major_faults(Who::Thread), usage(Who::Process));
        let faulting;
        (self.readers, faulting) = readers();
        let (Some(own), Some((all, cpu))) = (if faulting { counts() } else { (None, None) }) else {
            self.last = None;
            self.debt = Debt::default();
            return;
        };
        let now = Faults {
            at: Instant::now(),
            own,
            all,
            cpu,
            background: background.load(Ordering::Relaxed),
        };
        if let Some(last) = self.last.replace(now) {
            self.read(last, now, cores());
        }
        self.slept = Duration::ZERO;
    }

    /// Whether read transactions were open on other threads than the writer's at the last
    /// reading (one write transaction in `WRITER_READ_EVERY`).
    pub(super) fn readers_beside(&self) -> bool {
        self.readers
    }

    /// The owing part of `before_write`, between readings `last` and `now`, on `cores`: owes
    /// if threads other than the writer and the checkpoints took major faults, and the process
    /// used under `DEVICE_BOUND_BUSY` of the cores meanwhile: its threads wait on the device,
    /// not on the CPU (readers that mostly find their pages cached and fault now and then are
    /// held by the CPU, which the CPU share divides: a writer slowed for them there gave them
    /// nothing, and its reads fell with it, seed 002's table warm in a 1 GiB cgroup).
    fn read(&mut self, last: Faults, now: Faults, cores: usize) {
        let between = now.at.saturating_duration_since(last.at);
        let cpu = now.cpu.saturating_sub(last.cpu);
        let busy = cpu.as_secs_f64() / (between.as_secs_f64() * cores as f64).max(1e-9);
        let others = now
            .all
            .saturating_sub(last.all)
            .saturating_sub(now.own.saturating_sub(last.own))
            .saturating_sub(now.background.saturating_sub(last.background));
        if others > 0 && busy < DEVICE_BOUND_BUSY {
            let worked = between.saturating_sub(self.slept);
            self.debt.owe(worked * WRITER_DEVICE_WEIGHT);
        }
    }

    /// The writer slept `d` for admission (pacing, a share, a wait for room): not work.
    pub(super) fn slept(&mut self, d: Duration) {
        self.slept += d;
    }

    /// The sleep owed before this transaction, if it is at least `min`, taken off the debt.
    pub(super) fn sleep(&mut self, min: Duration) -> Option<Duration> {
        self.debt.take(min)
    }
}

/// The major faults of a checkpoint's thread, added to `Counters::background_faults` as they
/// are taken (at each reading), so that the writer's share (`WriterDevice`) counts only the
/// readers'.
pub(crate) struct FaultTally {
    counter: Arc<AtomicU64>,
    seen: Option<u64>,
}

impl FaultTally {
    /// Counts the calling thread's faults from now on into `counter`.
    pub(crate) fn new(counter: Arc<AtomicU64>) -> FaultTally {
        FaultTally {
            counter,
            seen: major_faults(Who::Thread),
        }
    }

    /// Adds the calling thread's faults since the last call (or `new`) to the counter: `now`,
    /// their count read by the caller.
    fn note(&mut self, now: Option<u64>) {
        if let (Some(seen), Some(now)) = (self.seen, now) {
            self.counter
                .fetch_add(now.saturating_sub(seen), Ordering::Relaxed);
        }
        if now.is_some() {
            self.seen = now;
        }
    }
}

impl Drop for FaultTally {
    /// The faults since the last reading (the merge's end: the tally is dropped with the
    /// merge's pages, on the checkpoint's thread).
    fn drop(&mut self) {
        self.note(major_faults(Who::Thread));
    }
}

/// Whose page faults `major_faults` counts.
#[derive(Clone, Copy)]
pub(crate) enum Who {
    /// The calling thread's.
    Thread,
    /// The process's: every thread's, live or ended.
    Process,
}

/// Major page faults so far (reads waited on the device for, a retried fault on a page
/// being read among them): `getrusage`; `None` where it fails.
pub(crate) fn major_faults(who: Who) -> Option<u64> {
    usage(who).map(|(faults, _)| faults)
}

/// Bytes read from the device so far on behalf of `who` (`getrusage`'s `ru_inblock`, which
/// Linux counts as the reads submitted, in 512-byte units): the reads its page faults waited
/// for and those its hints started (`MADV_WILLNEED`) alike. `None` where it fails.
pub(crate) fn device_read_bytes(who: Who) -> Option<u64> {
    let ru = rusage(who)?;
    u64::try_from(ru.ru_inblock).ok()?.checked_mul(512)
}

/// Major page faults and CPU time (user and system) so far: `getrusage`; `None` where it
/// fails.
fn usage(who: Who) -> Option<(u64, Duration)> {
    let usage = rusage(who)?;
    let time = |t: libc::timeval| {
        let micros = u64::try_from(t.tv_usec).ok()?;
        Some(Duration::from_secs(u64::try_from(t.tv_sec).ok()?) + Duration::from_micros(micros))
    };
    let cpu = time(usage.ru_utime)? + time(usage.ru_stime)?;
    Some((u64::try_from(usage.ru_majflt).ok()?, cpu))
}

/// `getrusage` for `who`; `None` where it fails.
fn rusage(who: Who) -> Option<libc::rusage> {
    let who = match who {
        Who::Thread => libc::RUSAGE_THREAD,
        Who::Process => libc::RUSAGE_SELF,
    };
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `getrusage` writes a `rusage` into the pointer it is given, which points to
    // one (zeroed, so initialised whatever it writes).
    let rc = unsafe { libc::getrusage(who, usage.as_mut_ptr()) };
    if rc != 0 {
        return None;
    }
    // SAFETY: zeroed above, and filled in by the successful call.
    Some(unsafe { usage.assume_init() })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The calling thread's nice value (Linux: `PRIO_PROCESS` 0 names the calling thread).
    #[cfg(target_os = "linux")]
    fn own_nice() -> i32 {
        // SAFETY: reads the calling thread's priority; no memory is touched.
        unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_checkpoint_at_the_lowest_priority_is_raised_where_allowed_and_only_as_far_as_asked() {
        std::thread::spawn(|| {
            let start = own_nice();
            // An application's thread is never raised.
            assert!(!crate::engine::raise_to(CHECKPOINT_NICE_BESIDE_READERS));
            let may = crate::engine::may_raise_to(CHECKPOINT_NICE_BESIDE_READERS);
            crate::engine::background_nice(CHECKPOINT_NICE_WRITERS_CORE).apply();
            let low = own_nice();
            assert_eq!(crate::engine::lowered(), CHECKPOINT_NICE_WRITERS_CORE);
            // Not "raised" to a lower priority than it has.
            assert!(!crate::engine::raise_to(CHECKPOINT_NICE_WRITERS_CORE));
            let steps = i32::from(CHECKPOINT_NICE_WRITERS_CORE - CHECKPOINT_NICE_BESIDE_READERS);
            // Told beforehand whether it could (`checkpoint_nice` lowers no further where not).
            let raised = crate::engine::raise_to(CHECKPOINT_NICE_BESIDE_READERS);
            assert_eq!(raised, may);
            if raised {
                // Allowed (privileged, or a high enough `RLIMIT_NICE`): back up the steps.
                assert_eq!(own_nice(), low - steps);
                assert_eq!(crate::engine::lowered(), CHECKPOINT_NICE_BESIDE_READERS);
                assert!(own_nice() >= start);
            } else {
                // Not allowed: nothing changed.
                assert_eq!(own_nice(), low);
                assert_eq!(crate::engine::lowered(), CHECKPOINT_NICE_WRITERS_CORE);
            }
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_checkpoint_is_starved_where_it_waits_long_and_many_times_what_it_ran() {
        let ms = Duration::from_millis;
        let at = |ran, waited| Sched {
            ran: ms(ran),
            waited: ms(waited),
        };
        let since = at(1_000, 2_000);
        // Beside 3 spinning threads at nice 0: 2 ms run, 200 ms waited.
        assert!(starved(since, at(1_002, 2_200)));
        // Many times what it ran, but too short a wait to tell from a preemption or two.
        assert!(!starved(since, at(1_002, 2_099)));
        assert!(starved(since, at(1_002, 2_100)));
        // A long wait, but it ran an eighth of that or more: a share, not starvation.
        assert!(!starved(since, at(1_030, 2_240)));
        assert!(starved(since, at(1_030, 2_241)));
        // Counters that went back (never, but not a reason to raise).
        assert!(!starved(since, at(900, 1_000)));
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
        assert_eq!(s.debt.0, ms(0));
        s.read(Some(ms(5)), false);
        s.read(Some(ms(10)), true);
        assert_eq!(s.debt.0, ms(0));
        s.read(Some(ms(14)), true);
        assert_eq!(s.debt.0, ms(4));
        s.debt.0 += ms(4);
        // A clock that cannot be read owes nothing and keeps what was seen.
        s.read(None, true);
        assert_eq!((s.debt.0, s.seen), (ms(8), ms(14)));
        // Slept at most SLEEP_MAX a transaction, never less than the shortest sleep asked.
        let min = ms(1);
        assert_eq!(s.sleep(min), Some(SLEEP_MAX));
        s.debt.0 += ms(1);
        assert_eq!(s.sleep(min), Some(SLEEP_MAX));
        assert_eq!(s.sleep(ms(2)), None, "1 ms left, carried");
        assert_eq!(s.sleep(min), Some(ms(1)));
        assert_eq!(s.sleep(min), None);
        // The end owes the rest since the last reading, contended; the next checkpoint's
        // clock starts from zero, and its first transaction reads it.
        s.ended(Some(ms(16)));
        assert_eq!(s.debt.0, ms(2));
        assert!(s.due());
        s.read(Some(ms(1)), true);
        s.read(Some(ms(2)), true);
        assert_eq!(s.debt.0, ms(3));
        // After an uncontended reading, the end owes nothing.
        s.read(Some(ms(3)), false);
        s.ended(Some(ms(50)));
        assert_eq!(s.debt.0, ms(3));
        // A clock that jumps owes SHARE_DEBT_MAX at most.
        s.read(Some(Duration::from_secs(9)), true);
        s.read(Some(Duration::from_secs(10)), true);
        assert_eq!(s.debt.0, SHARE_DEBT_MAX);
    }

    #[test]
    fn the_writer_owes_for_its_work_while_readers_wait_on_the_device() {
        let ms = Duration::from_millis;
        let t0 = Instant::now();
        let at = |own, all, cpu, background, after| Faults {
            at: t0 + ms(after),
            own,
            all,
            cpu: ms(cpu),
            background,
        };
        let start = at(5, 100, 0, 40, 0);
        // 10 ms between readings, 2 ms of them slept for admission, 4 ms of CPU on 2 cores
        // (a fifth busy): 3 faults of the others (10 in all, 2 the writer's, 5 the
        // checkpoints'): `WRITER_DEVICE_WEIGHT` times the 8 ms worked is owed.
        let mut w = WriterDevice {
            slept: ms(2),
            ..Default::default()
        };
        w.read(start, at(7, 110, 4, 45, 10), 2);
        let owed = ms(8) * WRITER_DEVICE_WEIGHT;
        assert_eq!(w.debt.0, owed);
        // Paid a SLEEP_MAX at a time.
        assert_eq!(w.sleep(ms(1)), Some(SLEEP_MAX));
        assert_eq!(w.debt.0, owed - SLEEP_MAX);
        // Every fault the writer's or the checkpoints': nothing owed.
        let mut w = WriterDevice::default();
        w.read(start, at(7, 107, 4, 45, 10), 2);
        assert_eq!(w.debt.0, ms(0));
        assert_eq!(w.sleep(ms(1)), None);
        // The process busy on three quarters of the cores (15 ms of CPU in 10 ms on 2): its
        // readers wait on the CPU, which the CPU share divides; nothing owed.
        w.read(start, at(7, 110, 15, 45, 10), 2);
        assert_eq!(w.debt.0, ms(0));
        // A long interval owes SHARE_DEBT_MAX at most.
        w.read(start, at(7, 110, 4, 45, 10_000), 2);
        assert_eq!(w.debt.0, SHARE_DEBT_MAX);
    }

    #[test]
    fn the_writer_reads_the_counts_only_while_readers_are_open() {
        let background = AtomicU64::new(0);
        let mut w = WriterDevice::default();
        // One transaction in WRITER_READ_EVERY asks whether readers are open.
        let asked = std::cell::Cell::new(0);
        for _ in 0..WRITER_READ_EVERY * 3 {
            w.before_write(
                || {
                    asked.set(asked.get() + 1);
                    (false, false)
                },
                &background,
            );
        }
        assert_eq!(asked.get(), 3);
        assert!(w.last.is_none(), "no reading without readers");
        assert!(!w.readers_beside());
        w.before_write(|| (true, true), &background);
        let readable = major_faults(Who::Process).is_some();
        assert_eq!(w.last.is_some(), readable);
        assert!(w.readers_beside(), "the readers seen at the last reading");
        // Kept until the next reading, then cleared with the readers gone.
        for _ in 0..WRITER_READ_EVERY - 1 {
            w.before_write(|| (false, false), &background);
            assert!(w.readers_beside());
        }
        w.before_write(|| (false, false), &background);
        assert!(!w.readers_beside());
        assert!(w.last.is_none());
        // Readers whose reads fault on nothing (frames): seen, and no counts read.
        let mut w = WriterDevice::default();
        w.before_write(|| (true, true), &background);
        assert_eq!(w.last.is_some(), readable);
        w.debt.0 = Duration::from_millis(5);
        for _ in 0..WRITER_READ_EVERY {
            w.before_write(|| (true, false), &background);
        }
        assert!(
            w.readers_beside(),
            "readers of frames are company all the same"
        );
        assert!(
            w.last.is_none(),
            "no counts where the readers' reads fault on nothing"
        );
        assert_eq!(
            w.debt.0,
            Duration::ZERO,
            "nor a debt left from the counts before"
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn another_processs_busy_thread_is_seen() {
        let Some(before) = CpuLook::now() else {
            return;
        };
        // A child process busy for half a second: at least a third of a core, from the look
        // before it to the look after (other processes of the machine can only add to it).
        let mut child = std::process::Command::new("sh")
            .args([
                "-c",
                "end=$(($(date +%s%N) + 500000000)); while [ $(date +%s%N) -lt $end ]; do :; done",
            ])
            .spawn()
            .unwrap();
        child.wait().unwrap();
        let Some(seen) = CpuLook::now().and_then(|now| now.others_since(before)) else {
            return;
        };
        assert!(seen > 0.3, "{seen}");
    }
}
