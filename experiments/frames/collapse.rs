//! First touch of anonymous memory in 4 KiB pages, in 2 MiB pages at fault, and in 4 KiB pages
//! collapsed afterwards (`MADV_COLLAPSE`, Linux 6.1+), and the latency of dependent random
//! reads across it in each case: the buffer pool's frames (docs/design/buffer-pool.md,
//! "Huge pages without the first touch's cost").
//!
//! Build and run (no crates: the two system calls are declared here):
//!
//! ```sh
//! rustc -O -o /tmp/collapse experiments/frames/collapse.rs
//! for m in small huge collapse; do /tmp/collapse $m; done
//! ```
use std::time::Instant;

extern "C" {
    fn mmap(addr: *mut u8, len: usize, prot: i32, flags: i32, fd: i32, off: i64) -> *mut u8;
    fn madvise(addr: *mut u8, len: usize, advice: i32) -> i32;
}
const PROT_READ: i32 = 1;
const PROT_WRITE: i32 = 2;
const MAP_PRIVATE: i32 = 0x02;
const MAP_ANONYMOUS: i32 = 0x20;
const MAP_NORESERVE: i32 = 0x4000;
const MADV_HUGEPAGE: i32 = 14;
const MADV_COLLAPSE: i32 = 25;
const MB: usize = 1 << 20;
const LEN: usize = 512 * MB;

fn anon_huge_mb() -> u64 {
    let s = std::fs::read_to_string("/proc/self/smaps_rollup").unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with("AnonHugePages:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0)
        / 1024
}

/// Nanoseconds a read, each read's address depending on the one before (no overlap).
fn reads(base: *const u8, n: usize) -> f64 {
    let (mut x, mut sum) = (0x9E37_79B9_7F4A_7C15u64, 0u64);
    let t = Instant::now();
    for _ in 0..n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let off = ((x ^ sum) as usize % (LEN / 64)) * 64;
        // SAFETY: `off < LEN`, within the mapping.
        sum = sum.wrapping_add(unsafe { *(base.add(off) as *const u64) }) & 0xff;
    }
    std::hint::black_box(sum);
    t.elapsed().as_nanos() as f64 / n as f64
}

fn main() {
    let mode = std::env::args().nth(1).unwrap_or_else(|| "small".into());
    // SAFETY: an anonymous private mapping, aligned below to 2 MiB within it.
    let base = unsafe {
        let raw = mmap(
            std::ptr::null_mut(),
            LEN + 2 * MB,
            PROT_READ | PROT_WRITE,
            MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
            -1,
            0,
        );
        assert!(raw as isize != -1, "mmap failed");
        raw.add((2 * MB - raw as usize % (2 * MB)) % (2 * MB))
    };
    if mode == "huge" {
        // SAFETY: within the mapping.
        unsafe { madvise(base, LEN, MADV_HUGEPAGE) };
    }
    let t = Instant::now();
    for at in (0..LEN).step_by(4096) {
        // SAFETY: within the mapping.
        unsafe { *base.add(at) = 1 };
    }
    let touch = t.elapsed().as_secs_f64();
    println!(
        "{mode}: first touch of 512 MiB {touch:.3} s ({:.0} MB/s), AnonHugePages {} MB",
        512.0 / touch,
        anon_huge_mb()
    );
    println!("  dependent random reads: {:.1} ns", reads(base, 20_000_000));
    if mode == "collapse" {
        let t = Instant::now();
        // SAFETY: within the mapping.
        let rc = unsafe { madvise(base, LEN, MADV_COLLAPSE) };
        println!(
            "  MADV_COLLAPSE rc {rc} ({}) in {:.3} s, AnonHugePages {} MB",
            std::io::Error::last_os_error(),
            t.elapsed().as_secs_f64(),
            anon_huge_mb()
        );
        println!("  dependent random reads after: {:.1} ns", reads(base, 20_000_000));
    }
}
