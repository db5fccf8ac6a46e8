//! The write-out's ways on this machine: what writing a checkpoint's pages costs, buffered and
//! synced as the engine writes them now, or with `O_DIRECT` from several threads at once (what
//! the frames' write-behind needs: docs/design/buffer-pool.md, "The design").
//!
//! A file of `FILE_MIB` MiB is written whole first (so every later write overwrites allocated
//! blocks, as a checkpoint's do), then each round writes `PAGES` pages of 4 KiB at random
//! page-aligned offsets, from page-aligned buffers, and reports the wall time, the pages a
//! second, and the process's CPU time a page (user + system, `getrusage`):
//!
//! - `buffered`: `pwrite` of each page, then one `fdatasync` (a checkpoint's single pages now);
//! - `direct-N`: the file opened again with `O_DIRECT`, the pages split among N threads, each
//!   `pwrite`s its share one at a time (N writes in flight), then one `fdatasync`.
//!
//! No crates: `rustc -O -o /tmp/writeout experiments/frames/writeout.rs; /tmp/writeout DIR`
//! (DIR on the disk to measure; the file is removed at the end).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::time::Instant;

const PAGE: usize = 4096;
const FILE_MIB: u64 = 400;
const PAGES: usize = 20_000;
const O_DIRECT: i32 = 0o40000;

#[repr(C)]
struct Timeval {
    sec: i64,
    usec: i64,
}

#[repr(C)]
struct Rusage {
    utime: Timeval,
    stime: Timeval,
    rest: [i64; 14],
}

extern "C" {
    fn getrusage(who: i32, usage: *mut Rusage) -> i32;
    fn posix_memalign(out: *mut *mut u8, align: usize, size: usize) -> i32;
}

/// The process's CPU time so far, in seconds.
fn cpu() -> f64 {
    let mut u = Rusage {
        utime: Timeval { sec: 0, usec: 0 },
        stime: Timeval { sec: 0, usec: 0 },
        rest: [0; 14],
    };
    // SAFETY: `u` is a valid, writable rusage of the platform's layout (x86_64 Linux).
    unsafe { getrusage(0, &mut u) };
    let t = |t: &Timeval| t.sec as f64 + t.usec as f64 / 1e6;
    t(&u.utime) + t(&u.stime)
}

/// A page-aligned buffer of `len` bytes, filled with `fill` (leaked: the program is short).
fn aligned(len: usize, fill: u8) -> &'static mut [u8] {
    let mut p = std::ptr::null_mut();
    // SAFETY: `p` is a valid place for the pointer; the alignment is a power of two.
    let rc = unsafe { posix_memalign(&mut p, PAGE, len) };
    assert_eq!(rc, 0, "posix_memalign");
    // SAFETY: `len` bytes were just allocated at `p`, which nothing else uses.
    let b = unsafe { std::slice::from_raw_parts_mut(p, len) };
    b.fill(fill);
    b
}

/// `n` random page numbers within the file (a xorshift, seeded).
fn offsets(n: usize, seed: u64) -> Vec<u64> {
    let pages = FILE_MIB * 1024 * 1024 / PAGE as u64;
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % pages) * PAGE as u64
        })
        .collect()
}

fn round(name: &str, path: &std::path::Path, threads: usize, seed: u64) {
    let offs = offsets(PAGES, seed);
    let buffered = OpenOptions::new().write(true).open(path).unwrap();
    let (c0, t0) = (cpu(), Instant::now());
    if threads == 0 {
        let page = aligned(PAGE, 1);
        for &o in &offs {
            buffered.write_all_at(page, o).unwrap();
        }
    } else {
        let direct = OpenOptions::new()
            .write(true)
            .custom_flags(O_DIRECT)
            .open(path)
            .unwrap();
        std::thread::scope(|s| {
            for share in offs.chunks(offs.len().div_ceil(threads)) {
                let direct = &direct;
                s.spawn(move || {
                    let page = aligned(PAGE, 2);
                    for &o in share {
                        direct.write_all_at(page, o).unwrap();
                    }
                });
            }
        });
    }
    buffered.sync_data().unwrap();
    let (secs, cpus) = (t0.elapsed().as_secs_f64(), cpu() - c0);
    println!(
        "{name:>10}: {secs:.2} s, {:>6.0} pages/s, {:.1} us CPU a page",
        PAGES as f64 / secs,
        cpus * 1e6 / PAGES as f64
    );
}

fn main() {
    let dir = std::env::args().nth(1).unwrap_or_else(|| "/tmp".into());
    let path = std::path::Path::new(&dir).join("writeout.test");
    {
        let mut f = File::create(&path).unwrap();
        let chunk = vec![0u8; 1 << 20];
        for _ in 0..FILE_MIB {
            f.write_all(&chunk).unwrap();
        }
        f.sync_all().unwrap();
    }
    for r in 0..2u64 {
        round("buffered", &path, 0, 11 + r);
        for threads in [1, 4, 16, 32] {
            round(&format!("direct-{threads}"), &path, threads, 100 * threads as u64 + r);
        }
    }
    std::fs::remove_file(&path).unwrap();
}
