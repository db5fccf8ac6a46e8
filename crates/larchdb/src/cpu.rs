//! The cores this process may use, and whether more threads can run right now than that
//! (`contended`): read by write admission beside readers (`engine::admission::share`), by the
//! idle checkpoints' rests and by the frames' keeper (`pager::access`). And the machine's busy
//! time (`machine_busy_ticks`), for the share of the cores other processes take
//! (`share::others_cores`), and a thread's own time waiting for a core (`ThreadSched`). A
//! leaf below both.
//!
//! Linux: the count of threads that can run is the first number of `/proc/loadavg`'s fourth
//! field ("3/412": 3 running or ready to run, system-wide, the reading thread among them), read
//! at once, not averaged; the cores are `std::thread::available_parallelism` (the process's CPU
//! affinity and cgroup quota). A container whose `/proc/loadavg` is the host's counts the
//! host's threads against its own cores. Elsewhere, or where the file cannot be read, the cores
//! read as not contended.

use std::sync::OnceLock;

/// The files, the cores and the clock's rate, found once per process, at the first reading:
/// the files stay open for the process's life (one descriptor each, close-on-exec), a `pread`
/// a reading instead of an open, a read and a close. A descriptor the application closes under
/// it (or reuses for another file) fails to read or to parse: the cores then read as not
/// contended, and the machine's busy time cannot be read.
struct Probe {
    #[cfg(target_os = "linux")]
    loadavg: Option<std::fs::File>,
    /// `/proc/stat`, for the machine's busy time (`machine_busy_ticks`).
    #[cfg(target_os = "linux")]
    stat: Option<std::fs::File>,
    cores: usize,
    /// The clock ticks a second `/proc/stat` counts in (`sysconf(_SC_CLK_TCK)`).
    ticks_per_second: Option<f64>,
}

fn probe() -> &'static Probe {
    static PROBE: OnceLock<Probe> = OnceLock::new();
    PROBE.get_or_init(|| Probe {
        #[cfg(target_os = "linux")]
        loadavg: std::fs::File::open("/proc/loadavg").ok(),
        #[cfg(target_os = "linux")]
        stat: std::fs::File::open("/proc/stat").ok(),
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        ticks_per_second: clock_ticks(),
    })
}

/// The cores the process may use.
pub(crate) fn cores() -> usize {
    probe().cores
}

/// Whether more threads can run now than the process has cores (see the module's text).
/// About a microsecond: one `pread` of `/proc/loadavg`.
pub(crate) fn contended() -> bool {
    runnable().is_some_and(|r| r > cores())
}

/// Threads that can run now, system-wide, the caller among them.
#[cfg(target_os = "linux")]
fn runnable() -> Option<usize> {
    parse_runnable(read_head(probe().loadavg.as_ref(), &mut [0u8; 128])?)
}

#[cfg(not(target_os = "linux"))]
fn runnable() -> Option<usize> {
    None
}

/// The start of a `/proc` file kept open, into `buf`: one `pread` from offset 0.
#[cfg(target_os = "linux")]
fn read_head<'a>(file: Option<&std::fs::File>, buf: &'a mut [u8]) -> Option<&'a [u8]> {
    use std::os::unix::fs::FileExt;
    let n = file?.read_at(buf, 0).ok()?;
    buf.get(..n)
}

/// The runnable count of `/proc/loadavg`'s text: "0.50 0.40 0.30 3/412 4567".
fn parse_runnable(text: &[u8]) -> Option<usize> {
    let text = std::str::from_utf8(text).ok()?;
    let (running, _) = text.split_ascii_whitespace().nth(3)?.split_once('/')?;
    running.parse().ok()
}

/// The machine's busy time so far, in clock ticks (`share::others_cores`).
#[cfg(target_os = "linux")]
pub(crate) fn machine_busy_ticks() -> Option<u64> {
    parse_busy_ticks(read_head(probe().stat.as_ref(), &mut [0u8; 256])?)
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn machine_busy_ticks() -> Option<u64> {
    None
}

/// The busy ticks of `/proc/stat`'s first line, "cpu  user nice system idle iowait irq
/// softirq steal ...": user + nice + system + irq + softirq.
fn parse_busy_ticks(text: &[u8]) -> Option<u64> {
    let line = text.split(|&b| b == b'\n').next()?;
    let line = std::str::from_utf8(line).ok()?;
    let mut fields = line.split_ascii_whitespace();
    if fields.next()? != "cpu" {
        return None;
    }
    let ticks: Vec<u64> = fields
        .take(7)
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    let [user, nice, system, _idle, _iowait, irq, softirq] = ticks[..] else {
        return None;
    };
    Some(user + nice + system + irq + softirq)
}

/// The opening thread's time on a core and waiting for one (`/proc/thread-self/schedstat`:
/// nanoseconds run, nanoseconds ready to run but waiting on a run queue, time slices), for a
/// checkpoint that may be starved of the CPU (`share::LowestRaise`). The file names the
/// thread that opened it, so it is opened once, on the thread it reads, and each reading is
/// one `pread`. Reads `None` off Linux, or where the kernel keeps no such counts
/// (`CONFIG_SCHED_INFO` off).
pub(crate) struct ThreadSched {
    #[cfg(target_os = "linux")]
    file: Option<std::fs::File>,
}

impl ThreadSched {
    /// The calling thread's.
    pub(crate) fn open() -> ThreadSched {
        ThreadSched {
            #[cfg(target_os = "linux")]
            file: std::fs::File::open("/proc/thread-self/schedstat").ok(),
        }
    }

    /// The thread's times so far.
    #[cfg(target_os = "linux")]
    pub(crate) fn read(&self) -> Option<Sched> {
        parse_sched(read_head(self.file.as_ref(), &mut [0u8; 96])?)
    }

    #[cfg(not(target_os = "linux"))]
    pub(crate) fn read(&self) -> Option<Sched> {
        None
    }
}

/// A thread's time on a core and waiting for one (`ThreadSched`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Sched {
    pub(crate) ran: std::time::Duration,
    pub(crate) waited: std::time::Duration,
}

/// `schedstat`'s text: "run_ns wait_ns slices".
fn parse_sched(text: &[u8]) -> Option<Sched> {
    let text = std::str::from_utf8(text).ok()?;
    let mut fields = text.split_ascii_whitespace();
    let mut nanos = || {
        fields
            .next()?
            .parse()
            .ok()
            .map(std::time::Duration::from_nanos)
    };
    Some(Sched {
        ran: nanos()?,
        waited: nanos()?,
    })
}

/// The clock ticks a second the machine's busy time counts in; `None` where unknown.
pub(crate) fn ticks_per_second() -> Option<f64> {
    probe().ticks_per_second
}

/// `sysconf(_SC_CLK_TCK)`; `None` where it fails.
fn clock_ticks() -> Option<f64> {
    // SAFETY: `sysconf` reads a configuration value; it takes no pointer.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (hz > 0).then_some(hz as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn a_threads_run_and_wait_times_are_read_from_schedstat() {
        let ns = std::time::Duration::from_nanos;
        let want = |ran, waited| {
            Some(Sched {
                ran: ns(ran),
                waited: ns(waited),
            })
        };
        assert_eq!(
            parse_sched(b"1022875 10059910 3\n"),
            want(1022875, 10059910)
        );
        assert_eq!(parse_sched(b"0 0 0"), want(0, 0));
        assert_eq!(parse_sched(b"1022875"), None, "no wait time");
        assert_eq!(parse_sched(b"x 1 2"), None);
        assert_eq!(parse_sched(b""), None);
        #[cfg(target_os = "linux")]
        if std::path::Path::new("/proc/thread-self/schedstat").exists() {
            let sched = ThreadSched::open();
            let (a, b) = (sched.read().unwrap(), sched.read().unwrap());
            assert!(b.ran >= a.ran && b.waited >= a.waited);
        }
    }

    #[test]
    fn the_machines_busy_ticks_are_read_from_procs_first_line() {
        let text = b"cpu  4504803 27693 1004088 7878491 415223 7 53483 2982 0 0\ncpu0 1 2 3\n";
        assert_eq!(
            parse_busy_ticks(text),
            Some(4504803 + 27693 + 1004088 + 7 + 53483)
        );
        assert_eq!(
            parse_busy_ticks(b"cpu  1 2 3 4 5 6 7"),
            Some(1 + 2 + 3 + 6 + 7)
        );
        assert_eq!(parse_busy_ticks(b"cpu  1 2 3 4 5 6"), None, "a field short");
        assert_eq!(
            parse_busy_ticks(b"cpu0 1 2 3 4 5 6 7"),
            None,
            "not the total"
        );
        assert_eq!(parse_busy_ticks(b"cpu  1 2 x 4 5 6 7"), None);
        assert_eq!(parse_busy_ticks(b""), None);
    }
}
