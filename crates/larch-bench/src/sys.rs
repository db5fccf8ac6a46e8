//! Process accounting and machine set-up: getrusage/wait4, /proc/<pid>/io, disk usage, memory
//! cgroups and the page cache.

use crate::error::{Error, Result};
use std::ffi::CString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// Resource usage of a process (getrusage/wait4), in the units `time -v` prints.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Usage {
    pub user_s: f64,
    pub sys_s: f64,
    pub maxrss_kb: u64,
    pub vcsw: u64,
    pub ivcsw: u64,
    /// File-system inputs and outputs in 512-byte blocks (ru_inblock, ru_oublock).
    pub fs_in: u64,
    pub fs_out: u64,
}

impl Usage {
    fn from_rusage(r: &libc::rusage) -> Usage {
        let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        Usage {
            user_s: tv(r.ru_utime),
            sys_s: tv(r.ru_stime),
            maxrss_kb: r.ru_maxrss.max(0) as u64,
            vcsw: r.ru_nvcsw.max(0) as u64,
            ivcsw: r.ru_nivcsw.max(0) as u64,
            fs_in: r.ru_inblock.max(0) as u64,
            fs_out: r.ru_oublock.max(0) as u64,
        }
    }

    /// Usage of the calling process, all threads, dead ones included.
    pub fn of_self() -> Usage {
        // SAFETY: rusage is plain old data; getrusage fills it and cannot fail for RUSAGE_SELF
        // with a valid pointer.
        unsafe {
            let mut r: libc::rusage = std::mem::zeroed();
            libc::getrusage(libc::RUSAGE_SELF, &mut r);
            Usage::from_rusage(&r)
        }
    }

    /// `self - earlier` for the counters; max RSS is the peak so far (it cannot be reset).
    pub fn since(&self, earlier: &Usage) -> Usage {
        Usage {
            user_s: (self.user_s - earlier.user_s).max(0.0),
            sys_s: (self.sys_s - earlier.sys_s).max(0.0),
            maxrss_kb: self.maxrss_kb,
            vcsw: self.vcsw.saturating_sub(earlier.vcsw),
            ivcsw: self.ivcsw.saturating_sub(earlier.ivcsw),
            fs_in: self.fs_in.saturating_sub(earlier.fs_in),
            fs_out: self.fs_out.saturating_sub(earlier.fs_out),
        }
    }
}

/// The storage-I/O counters of /proc/<pid>/io.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProcIo {
    pub rchar: u64,
    pub wchar: u64,
    pub read_bytes: u64,
    /// Bytes of page cache this process dirtied (charged when a page becomes dirty).
    pub write_bytes: u64,
    pub cancelled_write_bytes: u64,
}

impl ProcIo {
    pub fn parse(text: &str) -> ProcIo {
        let mut io = ProcIo::default();
        for line in text.lines() {
            let Some((k, v)) = line.split_once(':') else {
                continue;
            };
            let v: u64 = v.trim().parse().unwrap_or(0);
            match k.trim() {
                "rchar" => io.rchar = v,
                "wchar" => io.wchar = v,
                "read_bytes" => io.read_bytes = v,
                "write_bytes" => io.write_bytes = v,
                "cancelled_write_bytes" => io.cancelled_write_bytes = v,
                _ => {}
            }
        }
        io
    }

    /// Reads /proc/self/io; `None` where the kernel lacks task I/O accounting.
    pub fn of_self() -> Option<ProcIo> {
        std::fs::read_to_string("/proc/self/io")
            .ok()
            .map(|t| ProcIo::parse(&t))
    }

    pub fn since(&self, earlier: &ProcIo) -> ProcIo {
        ProcIo {
            rchar: self.rchar.saturating_sub(earlier.rchar),
            wchar: self.wchar.saturating_sub(earlier.wchar),
            read_bytes: self.read_bytes.saturating_sub(earlier.read_bytes),
            write_bytes: self.write_bytes.saturating_sub(earlier.write_bytes),
            cancelled_write_bytes: self
                .cancelled_write_bytes
                .saturating_sub(earlier.cancelled_write_bytes),
        }
    }
}

/// The calling thread's CPU time so far, in seconds (`CLOCK_THREAD_CPUTIME_ID`: user and
/// system time of this thread alone); `None` where the clock cannot be read.
pub fn thread_cpu_s() -> Option<f64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid place for the result.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    (rc == 0).then_some(ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9)
}

/// The CPU seconds of a benchmark's process spent outside the benchmark's own threads: the
/// process's user and system time (`process_cpu_s`) less what the benchmark's threads used
/// (`threads_cpu_s`), never below 0 (the two are read at slightly different moments). What an
/// engine's threads of its own (checkpoints, compactions, flushes) took, and the driver's
/// memory sampler (`AnonPeak`, a read of a small file every `ANON_SAMPLE_MS`).
pub fn background_cpu_s(process_cpu_s: f64, threads_cpu_s: f64) -> f64 {
    (process_cpu_s - threads_cpu_s).max(0.0)
}

/// Anonymous memory of this process, in bytes: resident pages that are not file-backed or
/// shared (`/proc/self/statm`: resident - shared, in pages).
pub fn anon_bytes_of_self() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/statm").ok()?;
    anon_bytes_of_statm(&text, page_bytes())
}

fn anon_bytes_of_statm(text: &str, page_bytes: u64) -> Option<u64> {
    let mut f = text
        .split_whitespace()
        .skip(1)
        .map(|x| x.parse::<u64>().ok());
    let resident = f.next()??;
    let shared = f.next()??;
    Some(resident.saturating_sub(shared) * page_bytes)
}

fn page_bytes() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n > 0 {
        n as u64
    } else {
        4096
    }
}

/// How often `AnonPeak` samples: a peak shorter than this may be missed.
pub const ANON_SAMPLE_MS: u64 = 5;

/// The peak of this process's anonymous memory over a benchmark, sampled on a thread of its
/// own every `ANON_SAMPLE_MS` (the kernel keeps a peak of the whole resident set, `ru_maxrss`,
/// but none of its anonymous part: the memory an engine holds itself, beside the file pages
/// the kernel can take back).
pub struct AnonPeak {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<u64>>,
}

impl AnonPeak {
    pub fn start() -> AnonPeak {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("bench-anon-peak".into())
            .spawn(move || {
                let mut peak = 0;
                loop {
                    peak = peak.max(anon_bytes_of_self().unwrap_or(0));
                    if flag.load(std::sync::atomic::Ordering::Relaxed) {
                        return peak;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(ANON_SAMPLE_MS));
                }
            })
            .ok();
        AnonPeak { stop, thread }
    }

    /// The peak since `start`, in bytes (`None` if the sampler could not start).
    pub fn finish(mut self) -> Option<u64> {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.take()?.join().ok()
    }
}

impl Drop for AnonPeak {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// What the block device under a directory did, as the device counts it
/// (`/sys/class/block/<device>/stat`): requests and sectors (512 bytes each) read and
/// written. The bytes written are what an engine's writes cost after the page cache merged or
/// dropped them, which a process's `write_bytes` (bytes it dirtied) does not tell; the
/// requests are what a device takes a fixed cost for, whatever their size up to a point
/// (docs/design/bench-method.md). Counts every process's I/O on the device.
pub struct DeviceIo {
    stat: PathBuf,
    dir: PathBuf,
}

/// A block device's counts so far (`DeviceIo`), or over a run (`since`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceCounts {
    /// Read requests completed.
    pub reads: u64,
    pub read_bytes: u64,
    /// Write requests completed.
    pub writes: u64,
    pub write_bytes: u64,
}

impl DeviceCounts {
    /// The counts from `earlier` to these.
    pub fn since(&self, earlier: &DeviceCounts) -> DeviceCounts {
        DeviceCounts {
            reads: self.reads.saturating_sub(earlier.reads),
            read_bytes: self.read_bytes.saturating_sub(earlier.read_bytes),
            writes: self.writes.saturating_sub(earlier.writes),
            write_bytes: self.write_bytes.saturating_sub(earlier.write_bytes),
        }
    }
}

impl DeviceIo {
    /// The counters of the device holding `dir`, if it is a block device the kernel counts.
    pub fn for_dir(dir: &Path) -> Option<DeviceIo> {
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
        let (_, _, source) = crate::suite::machine::mount_of(&mountinfo, dir)?;
        let name = source.strip_prefix("/dev/")?;
        let stat = PathBuf::from(format!("/sys/class/block/{name}/stat"));
        let d = DeviceIo {
            stat,
            dir: dir.to_path_buf(),
        };
        d.now().map(|_| d)
    }

    /// Syncs the file system holding the directory (`syncfs`: every dirty page any engine
    /// left in the page cache goes to the device), then reads the counts so far.
    pub fn synced(&self) -> Option<DeviceCounts> {
        syncfs(&self.dir).ok()?;
        self.now()
    }

    /// The counts so far, with no sync: what the device did by now, the dirty pages the
    /// engines left in the page cache not counted.
    pub fn now(&self) -> Option<DeviceCounts> {
        device_counts_of_stat(&std::fs::read_to_string(&self.stat).ok()?)
    }
}

/// The counts of a block device's `stat` file: reads completed (field 1), sectors read (3),
/// writes completed (5), sectors written (7).
fn device_counts_of_stat(text: &str) -> Option<DeviceCounts> {
    let fields: Vec<u64> = text
        .split_whitespace()
        .take(7)
        .map(str::parse)
        .collect::<std::result::Result<_, _>>()
        .ok()?;
    match fields[..] {
        [reads, _, sectors_read, _, writes, _, sectors_written] => Some(DeviceCounts {
            reads,
            read_bytes: sectors_read.checked_mul(512)?,
            writes,
            write_bytes: sectors_written.checked_mul(512)?,
        }),
        _ => None,
    }
}

/// `syncfs(2)` on the file system holding `dir`.
pub fn syncfs(dir: &Path) -> std::io::Result<()> {
    let f = std::fs::File::open(dir)?;
    use std::os::fd::AsRawFd;
    // SAFETY: a valid open descriptor, borrowed for the call.
    if unsafe { libc::syncfs(f.as_raw_fd()) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Allocated bytes under `path` (`du -sk` * 1024 semantics: st_blocks, sparse files count only
/// what they occupy). Symlinks are not followed. Depth is bounded so a loop cannot hang us.
pub fn du_bytes(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    fn walk(p: &Path, depth: u32) -> u64 {
        let Ok(md) = std::fs::symlink_metadata(p) else {
            return 0;
        };
        let mut total = md.blocks() * 512;
        if md.is_dir() && depth < 32 {
            if let Ok(rd) = std::fs::read_dir(p) {
                for e in rd.flatten() {
                    total += walk(&e.path(), depth + 1);
                }
            }
        }
        total
    }
    walk(path, 0)
}

/// `sync; echo 3 > /proc/sys/vm/drop_caches`.
pub fn drop_caches() -> Result<()> {
    // SAFETY: sync has no preconditions.
    unsafe { libc::sync() };
    std::fs::write("/proc/sys/vm/drop_caches", "3").map_err(|e| {
        Error::System(format!(
            "--drop_caches: cannot write /proc/sys/vm/drop_caches ({e}); run as root on a \
             machine (not a container) that allows it, or drop --drop_caches"
        ))
    })
}

/// A memory cgroup created for one child and removed when dropped.
#[derive(Debug)]
pub struct MemoryCgroup {
    pub dir: PathBuf,
    pub version: u8,
    procs: CString,
}

impl MemoryCgroup {
    /// Creates `<our cgroup>/larch-bench-<pid>-<tag>` with a memory limit of `limit_bytes`
    /// (page cache included), on cgroup v2 if it has the memory controller, else v1.
    pub fn create(limit_bytes: u64, tag: &str) -> Result<MemoryCgroup> {
        let cgroups = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        let name = format!("larch-bench-{}-{tag}", std::process::id());
        let mut tried = Vec::new();
        // cgroup v2: a single "0::/path" line and a memory controller at the root.
        let v2_root = Path::new("/sys/fs/cgroup");
        if let Ok(ctrls) = std::fs::read_to_string(v2_root.join("cgroup.controllers")) {
            if ctrls.split_whitespace().any(|c| c == "memory") {
                let own = cgroups
                    .lines()
                    .find_map(|l| l.strip_prefix("0::"))
                    .unwrap_or("/");
                let parent = v2_root.join(own.trim_start_matches('/'));
                // Enable the memory controller for our children (may already be on).
                let _ = std::fs::write(parent.join("cgroup.subtree_control"), "+memory");
                match Self::make(&parent.join(&name), "memory.max", limit_bytes, 2) {
                    Ok(cg) => {
                        let _ = std::fs::write(cg.dir.join("memory.swap.max"), "0");
                        return Ok(cg);
                    }
                    Err(e) => tried.push(format!("v2 {}: {e}", parent.display())),
                }
            } else {
                tried.push("v2: memory controller not enabled at /sys/fs/cgroup".into());
            }
        }
        // cgroup v1: the memory hierarchy, under our own memory cgroup.
        let v1_root = Path::new("/sys/fs/cgroup/memory");
        if v1_root.join("memory.limit_in_bytes").exists() || v1_root.is_dir() {
            let own = cgroups
                .lines()
                .find_map(|l| {
                    let mut parts = l.splitn(3, ':');
                    let (_, ctl, path) = (parts.next()?, parts.next()?, parts.next()?);
                    ctl.split(',').any(|c| c == "memory").then_some(path)
                })
                .unwrap_or("/");
            let parent = v1_root.join(own.trim_start_matches('/'));
            for base in [parent, v1_root.to_path_buf()] {
                match Self::make(&base.join(&name), "memory.limit_in_bytes", limit_bytes, 1) {
                    Ok(cg) => {
                        let _ = std::fs::write(
                            cg.dir.join("memory.memsw.limit_in_bytes"),
                            limit_bytes.to_string(),
                        );
                        return Ok(cg);
                    }
                    Err(e) => tried.push(format!("v1 {}: {e}", base.display())),
                }
            }
        }
        if tried.is_empty() {
            tried.push("no cgroup file system mounted at /sys/fs/cgroup".into());
        }
        Err(Error::System(format!(
            "--memory_limit needs a writable memory cgroup (v2 memory.max or v1 \
             memory.limit_in_bytes), run as root: {}",
            tried.join("; ")
        )))
    }

    fn make(dir: &Path, limit_file: &str, limit: u64, version: u8) -> Result<MemoryCgroup> {
        std::fs::create_dir(dir).map_err(|e| Error::io(format!("mkdir {}", dir.display()), e))?;
        let cleanup = |e: Error| {
            let _ = std::fs::remove_dir(dir);
            e
        };
        std::fs::write(dir.join(limit_file), limit.to_string())
            .map_err(|e| cleanup(Error::io(format!("write {limit_file}"), e)))?;
        let procs = dir.join("cgroup.procs");
        let procs = CString::new(procs.as_os_str().as_encoded_bytes())
            .map_err(|_| cleanup(Error::System("cgroup path contains NUL".into())))?;
        Ok(MemoryCgroup {
            dir: dir.to_path_buf(),
            version,
            procs,
        })
    }

    /// Peak memory use of the group (page cache included), if the kernel reports it.
    pub fn peak_bytes(&self) -> Option<u64> {
        let file = if self.version == 2 {
            "memory.peak"
        } else {
            "memory.max_usage_in_bytes"
        };
        std::fs::read_to_string(self.dir.join(file))
            .ok()?
            .trim()
            .parse()
            .ok()
    }
}

impl Drop for MemoryCgroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// How a measured child ended.
#[derive(Debug, Clone, Copy)]
pub struct ChildOutcome {
    /// Exit code, or 128 + signal.
    pub code: i32,
    pub usage: Usage,
    pub wall_s: f64,
}

/// Spawns `cmd` (inside `cgroup` when given: the child joins it between fork and exec, so all
/// its allocations are charged) and reaps it with wait4 to get its own rusage.
pub fn spawn_measured(cmd: &mut Command, cgroup: Option<&MemoryCgroup>) -> Result<ChildOutcome> {
    use std::os::unix::process::CommandExt;
    if let Some(cg) = cgroup {
        let procs = cg.procs.clone();
        // SAFETY: the closure runs in the forked child before exec and only calls the
        // async-signal-safe open/write/close on a path prepared before the fork.
        unsafe {
            cmd.pre_exec(move || {
                let fd = libc::open(procs.as_ptr(), libc::O_WRONLY);
                if fd < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                let n = libc::write(fd, b"0".as_ptr().cast(), 1);
                let err = std::io::Error::last_os_error();
                libc::close(fd);
                if n != 1 {
                    return Err(err);
                }
                Ok(())
            });
        }
    }
    let start = Instant::now();
    let child = cmd
        .spawn()
        .map_err(|e| Error::Child(format!("cannot start child {:?}: {e}", cmd.get_program())))?;
    let pid = child.id() as libc::pid_t;
    // SAFETY: pid is our direct child, not yet reaped (std's Child is never waited on: we drop
    // it below without calling wait), and status/rusage are valid out-pointers.
    let (rc, status, r) = unsafe {
        let mut status: libc::c_int = 0;
        let mut r: libc::rusage = std::mem::zeroed();
        let mut rc;
        loop {
            rc = libc::wait4(pid, &mut status, 0, &mut r);
            if rc >= 0 || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted
            {
                break;
            }
        }
        (rc, status, r)
    };
    drop(child);
    if rc < 0 {
        return Err(Error::Child(format!(
            "wait4: {}",
            std::io::Error::last_os_error()
        )));
    }
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else if libc::WIFSIGNALED(status) {
        128 + libc::WTERMSIG(status)
    } else {
        -1
    };
    Ok(ChildOutcome {
        code,
        usage: Usage::from_rusage(&r),
        wall_s: start.elapsed().as_secs_f64(),
    })
}

/// `larch-bench __write_probe FILE BYTES`: writes BYTES to FILE, fsyncs, and prints its own
/// /proc/self/io write_bytes. Used by the accounting tests.
pub fn write_probe_main(args: &[String]) -> Result<()> {
    let (Some(path), Some(n)) = (args.first(), args.get(1)) else {
        return Err(Error::Usage("__write_probe FILE BYTES".into()));
    };
    let n: u64 = n
        .parse()
        .map_err(|_| Error::Usage(format!("__write_probe: bad byte count {n:?}")))?;
    let before = ProcIo::of_self().unwrap_or_default();
    let mut f = std::fs::File::create(path).map_err(|e| Error::io(format!("create {path}"), e))?;
    let chunk = vec![0x5au8; 1 << 20];
    let mut left = n;
    while left > 0 {
        let k = left.min(chunk.len() as u64) as usize;
        f.write_all(&chunk[..k])
            .map_err(|e| Error::io(format!("write {path}"), e))?;
        left -= k as u64;
    }
    f.sync_all()
        .map_err(|e| Error::io(format!("fsync {path}"), e))?;
    let after = ProcIo::of_self().unwrap_or_default();
    println!("write_bytes={}", after.since(&before).write_bytes);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_statm_and_block_stat() {
        // size resident shared text lib data dt, in pages
        assert_eq!(
            anon_bytes_of_statm("1000 300 120 10 0 500 0\n", 4096),
            Some(180 * 4096)
        );
        assert_eq!(anon_bytes_of_statm("garbage", 4096), None);
        let stat = "  179013     4321  8123456    51234   987654   12345 24681357   765432        0   123456   816666\n";
        assert_eq!(
            device_counts_of_stat(stat),
            Some(DeviceCounts {
                reads: 179_013,
                read_bytes: 8_123_456 * 512,
                writes: 987_654,
                write_bytes: 24_681_357 * 512,
            })
        );
        assert_eq!(device_counts_of_stat("1 2 3"), None);
        assert_eq!(device_counts_of_stat("1 2 3 4 x 6 7"), None);
    }

    #[test]
    fn anon_peak_sees_memory_held_for_a_moment() {
        let sampler = AnonPeak::start();
        let before = anon_bytes_of_self().unwrap();
        let mut v = vec![0u8; 64 << 20];
        for i in (0..v.len()).step_by(4096) {
            v[i] = 1;
        }
        std::thread::sleep(std::time::Duration::from_millis(4 * ANON_SAMPLE_MS));
        drop(std::hint::black_box(v));
        let peak = sampler.finish().unwrap();
        assert!(
            peak >= before + (60 << 20),
            "peak {peak} after {before} with 64 MiB touched"
        );
    }

    #[test]
    fn parses_proc_io() {
        let t = "rchar: 10\nwchar: 20\nsyscr: 1\nsyscw: 2\nread_bytes: 4096\n\
                 write_bytes: 8192\ncancelled_write_bytes: 0\n";
        let io = ProcIo::parse(t);
        assert_eq!(io.rchar, 10);
        assert_eq!(io.wchar, 20);
        assert_eq!(io.read_bytes, 4096);
        assert_eq!(io.write_bytes, 8192);
    }

    #[test]
    fn self_usage_grows_with_cpu_work() {
        let a = Usage::of_self();
        let mut x = 0u64;
        for i in 0..20_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        let d = Usage::of_self().since(&a);
        assert!(d.user_s + d.sys_s > 0.0);
        assert!(d.maxrss_kb > 0);
    }

    #[test]
    fn du_counts_allocated_blocks() {
        let dir = std::env::temp_dir().join(format!("larch-bench-du-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        std::fs::write(dir.join("sub/a"), vec![1u8; 64 * 1024]).unwrap();
        let n = du_bytes(&dir);
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(n >= 64 * 1024, "{n}");
    }
}
