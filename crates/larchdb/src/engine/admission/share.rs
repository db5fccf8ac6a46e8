//! How a checkpoint shares the CPU with readers: its priority (`checkpoint_nice`), and, beside
//! readers on contended cores, the CPU time the writer owes for it (`Share`).
//!
//! Whether the cores are contended: more threads can run right now than this process may use
//! cores. Linux: the count of threads that can run is the first number of `/proc/loadavg`'s
//! fourth field ("3/412": 3 running or ready to run, system-wide, the reading thread among
//! them), read at once, not averaged; the cores are `std::thread::available_parallelism` (the
//! process's CPU affinity and cgroup quota). A container whose `/proc/loadavg` is the host's
//! counts the host's threads against its own cores, and reads as contended whenever the host
//! is busy: the writer then pays for its checkpoints whenever they run beside readers, which is
//! the share it would have with no spare core. Elsewhere, or where the file cannot be read, the
//! cores read as not contended: nothing changes from a handle without the share.

use super::{SLEEP_MAX, SLEEP_MIN};
use std::sync::OnceLock;
use std::time::Duration;

/// Nice steps below the application's threads a checkpoint runs at when it starts beside the
/// handle's readers (read transactions open as it starts). Measured on 2 cores
/// (readwhilewriting at 1M, ratios to LMDB within each run): with 2 and 4 readers the readers
/// read 1.00x and 0.96x of LMDB's readers at 5, against 0.70x and 0.68x at 0, beside a writer
/// at 2.7x and 2.4x LMDB's (3.6x and 3.2x at 0). Without readers (a load) a checkpoint keeps
/// a full thread's share, so that the writer it paces does too.
pub const CHECKPOINT_NICE_BESIDE_READERS: u8 = 5;

/// How many nice steps below the application's threads a checkpoint starting now runs:
/// `Options::background_nice`, or, when it `yields` (this handle has read transactions open
/// as it starts, and its overlays hold under half the memory budget: `budget::pressed`),
/// `CHECKPOINT_NICE_BESIDE_READERS` if that is lower still. The readers counted are this
/// handle's; readers in other processes are not.
pub(crate) fn checkpoint_nice(options: &crate::Options, yields: bool) -> u8 {
    if yields {
        options.background_nice.max(CHECKPOINT_NICE_BESIDE_READERS)
    } else {
        options.background_nice
    }
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
    debt: Duration,
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
        self.debt = (self.debt + used).min(SHARE_DEBT_MAX);
    }

    /// The sleep owed before this transaction, if it is worth one, taken off the debt.
    pub(super) fn sleep(&mut self) -> Option<Duration> {
        (self.debt >= SLEEP_MIN).then(|| {
            let s = self.debt.min(SLEEP_MAX);
            self.debt -= s;
            s
        })
    }
}

/// The file and the cores, found once per process, at the first reading: the file stays open
/// for the process's life (one descriptor, close-on-exec), a `pread` a reading instead of an
/// open, a read and a close. A descriptor the application closes under it (or reuses for
/// another file) fails to read or to parse: the cores then read as not contended.
struct Probe {
    #[cfg(target_os = "linux")]
    loadavg: Option<std::fs::File>,
    cores: usize,
}

fn probe() -> &'static Probe {
    static PROBE: OnceLock<Probe> = OnceLock::new();
    PROBE.get_or_init(|| Probe {
        #[cfg(target_os = "linux")]
        loadavg: std::fs::File::open("/proc/loadavg").ok(),
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
    })
}

/// Whether more threads can run now than the process has cores (see the module's text).
/// About a microsecond: one `pread` of `/proc/loadavg`.
pub(super) fn contended() -> bool {
    runnable().is_some_and(|r| r > probe().cores)
}

/// Threads that can run now, system-wide, the caller among them.
#[cfg(target_os = "linux")]
fn runnable() -> Option<usize> {
    use std::os::unix::fs::FileExt;
    let file = probe().loadavg.as_ref()?;
    let mut buf = [0u8; 128];
    let n = file.read_at(&mut buf, 0).ok()?;
    parse_runnable(buf.get(..n)?)
}

#[cfg(not(target_os = "linux"))]
fn runnable() -> Option<usize> {
    None
}

/// The runnable count of `/proc/loadavg`'s text: "0.50 0.40 0.30 3/412 4567".
fn parse_runnable(text: &[u8]) -> Option<usize> {
    let text = std::str::from_utf8(text).ok()?;
    let (running, _) = text.split_ascii_whitespace().nth(3)?.split_once('/')?;
    running.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

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
        // Slept at most SLEEP_MAX a transaction, never less than SLEEP_MIN.
        assert_eq!(s.sleep(), Some(SLEEP_MAX));
        s.debt += ms(1);
        assert_eq!(s.sleep(), Some(SLEEP_MAX));
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
    fn the_runnable_count_is_read_from_loadavgs_fourth_field() {
        assert_eq!(parse_runnable(b"0.75 1.64 1.65 3/79 8047\n"), Some(3));
        assert_eq!(parse_runnable(b"12.00 9.10 8.00 17/2048 1"), Some(17));
        assert_eq!(parse_runnable(b"0.75 1.64 1.65"), None);
        assert_eq!(parse_runnable(b"0.75 1.64 1.65 x/79 8047"), None);
        assert_eq!(parse_runnable(b"0.75 1.64 1.65 79 8047"), None);
        assert_eq!(parse_runnable(b""), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_calling_thread_is_counted() {
        // The reading thread runs as it reads: at least one, wherever /proc is mounted.
        if std::path::Path::new("/proc/loadavg").exists() {
            assert!(runnable().is_some_and(|r| r >= 1));
        }
    }
}
