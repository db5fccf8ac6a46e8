//! A reader's dependent random reads across 400 MiB of anonymous memory in 4 KiB pages while
//! another thread puts it in 2 MiB pages, chunk by chunk, two ways:
//! - `collapse`: `MADV_COLLAPSE` on each chunk (the kernel copies it into a new huge page while
//!   the chunk is unmapped, so a reader that reaches it waits for the copy and for the new
//!   page's first touch);
//! - `swap`: a new huge page made and touched first (`MADV_HUGEPAGE` on a staging mapping),
//!   the chunk copied into it while readers still read the old one, then moved over the chunk
//!   with `mremap` (a reader that reaches it waits only for the move of one page table entry).
//!
//! Build and run (no crates: the system calls are declared here):
//!
//! ```sh
//! rustc -O -o /tmp/swap experiments/frames/swap.rs
//! for m in none collapse swap; do /tmp/swap $m; done
//! ```
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

extern "C" {
    fn mmap(addr: *mut u8, len: usize, prot: i32, flags: i32, fd: i32, off: i64) -> *mut u8;
    fn munmap(addr: *mut u8, len: usize) -> i32;
    fn madvise(addr: *mut u8, len: usize, advice: i32) -> i32;
    fn mremap(old: *mut u8, old_len: usize, new_len: usize, flags: i32, ...) -> *mut u8;
}
const PROT_READ: i32 = 1;
const PROT_WRITE: i32 = 2;
const MAP_PRIVATE: i32 = 0x02;
const MAP_ANONYMOUS: i32 = 0x20;
const MAP_NORESERVE: i32 = 0x4000;
const MADV_HUGEPAGE: i32 = 14;
const MADV_COLLAPSE: i32 = 25;
const MREMAP_MAYMOVE: i32 = 1;
const MREMAP_FIXED: i32 = 2;
const MB: usize = 1 << 20;
const HUGE: usize = 2 * MB;
const LEN: usize = 400 * MB;

fn anon_huge_mb() -> u64 {
    let s = std::fs::read_to_string("/proc/self/smaps_rollup").unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with("AnonHugePages:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0)
        / 1024
}

/// `len` bytes of anonymous memory aligned to 2 MiB.
fn aligned(len: usize) -> *mut u8 {
    // SAFETY: a fresh anonymous mapping.
    let raw = unsafe {
        mmap(
            std::ptr::null_mut(),
            len + HUGE,
            PROT_READ | PROT_WRITE,
            MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
            -1,
            0,
        )
    };
    assert!(raw as isize != -1);
    let off = (raw as usize).next_multiple_of(HUGE) - raw as usize;
    // SAFETY: within the mapping.
    unsafe { raw.add(off) }
}

/// Moves a new huge page, holding chunk `at`'s bytes, over it.
fn swap(at: *mut u8) -> bool {
    let stage = aligned(HUGE);
    // SAFETY: `stage` is a fresh 2 MiB mapping; `at` a chunk of the region, read only by the
    // reader meanwhile.
    unsafe {
        if madvise(stage, HUGE, MADV_HUGEPAGE) != 0 {
            return false;
        }
        std::ptr::write_volatile(stage, 0); // one fault: the whole huge page
        std::ptr::copy_nonoverlapping(at, stage, HUGE);
        let r = mremap(stage, HUGE, HUGE, MREMAP_MAYMOVE | MREMAP_FIXED, at);
        if r != at {
            munmap(stage, HUGE);
            return false;
        }
    }
    true
}

fn main() {
    let mode = std::env::args().nth(1).unwrap_or_else(|| "swap".into());
    let base = aligned(LEN);
    let words = LEN / 8;
    // SAFETY: the region is ours; filled before the reader starts.
    unsafe {
        let w = base as *mut u64;
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for i in 0..words {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *w.add(i) = x;
        }
    }
    let stop = Arc::new(AtomicBool::new(false));
    let reads = Arc::new(AtomicU64::new(0));
    let worst = Arc::new(AtomicU64::new(0));
    let b = base as usize;
    let reader = {
        let (stop, reads, worst) = (stop.clone(), reads.clone(), worst.clone());
        std::thread::spawn(move || {
            let w = b as *const u64;
            let (mut i, mut x) = (1usize, 0x2545_F491_4F6C_DD1Du64);
            while !stop.load(Ordering::Relaxed) {
                let t = Instant::now();
                for _ in 0..1000 {
                    // SAFETY: `i` stays within the region's words.
                    let v = unsafe { std::ptr::read_volatile(w.add(i)) };
                    // The next address depends on this read's value (one read at a time).
                    x ^= (v & 1) ^ (x << 13);
                    x ^= x >> 7;
                    x ^= x << 17;
                    i = (x % words as u64) as usize;
                }
                let ns = t.elapsed().as_nanos() as u64;
                worst.fetch_max(ns, Ordering::Relaxed);
                reads.fetch_add(1000, Ordering::Relaxed);
            }
        })
    };
    let window = |what: &str, f: &mut dyn FnMut()| {
        let (r0, t) = (reads.load(Ordering::Relaxed), Instant::now());
        worst.store(0, Ordering::Relaxed);
        f();
        let secs = t.elapsed().as_secs_f64();
        let n = reads.load(Ordering::Relaxed) - r0;
        println!(
            "{mode:8} {what:7} {secs:6.3} s  {:6.1} ns a read  worst 1000 reads {:7.1} us  huge {} MB",
            secs * 1e9 / n as f64,
            worst.load(Ordering::Relaxed) as f64 / 1e3,
            anon_huge_mb()
        );
    };
    window("before", &mut || std::thread::sleep(Duration::from_millis(500)));
    window("during", &mut || {
        for c in 0..LEN / HUGE {
            // SAFETY: chunk `c` lies within the region.
            let at = unsafe { base.add(c * HUGE) };
            match mode.as_str() {
                // SAFETY: advice over a chunk of the region.
                "collapse" => unsafe {
                    madvise(at, HUGE, MADV_COLLAPSE);
                },
                "swap" => {
                    swap(at);
                }
                _ => std::thread::sleep(Duration::from_micros(2500)),
            }
        }
    });
    window("after", &mut || std::thread::sleep(Duration::from_millis(500)));
    stop.store(true, Ordering::Relaxed);
    reader.join().unwrap();
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    println!("{mode:8} mappings {}", maps.lines().count());
}
