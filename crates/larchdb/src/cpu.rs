//! The cores this process may use, and whether more threads can run right now than that
//! (`contended`): read by write admission beside readers (`engine::admission::share`), by the
//! idle checkpoints' rests and by the frames' keeper (`pager::access`). A leaf below both.
//!
//! Linux: the count of threads that can run is the first number of `/proc/loadavg`'s fourth
//! field ("3/412": 3 running or ready to run, system-wide, the reading thread among them), read
//! at once, not averaged; the cores are `std::thread::available_parallelism` (the process's CPU
//! affinity and cgroup quota). A container whose `/proc/loadavg` is the host's counts the
//! host's threads against its own cores. Elsewhere, or where the file cannot be read, the cores
//! read as not contended.

use std::sync::OnceLock;

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
pub(crate) fn read_head<'a>(file: Option<&std::fs::File>, buf: &'a mut [u8]) -> Option<&'a [u8]> {
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
}
