//! What an insert into a large open-addressing table costs on its own (the overlay's slot
//! table, `engine/overlay.rs`): `N` random hashes inserted into a table of twice `N` slots
//! (16 bytes each, linear probing), one at a time, in groups of `G` sorted by slot, and in
//! groups of 32 whose slots are prefetched first. Three rounds. Session 55: in a tight loop
//! the processor overlaps the inserts' cache misses by itself (22-25 ns an insert at 1M, 16-20
//! prefetched), which a one-put commit, with hundreds of ns of other work between two
//! inserts, does not get.
//!
//!   cargo run --release --manifest-path experiments/write-path/Cargo.toml --bin slot_inserts [N] [G]

use std::time::Instant;

fn mix(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51afd7ed558ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ceb9fe1a85ec53);
    x ^ (x >> 33)
}

#[derive(Clone, Copy, Default)]
struct Slot {
    hash: u64,
    entry: u64,
}

fn insert(t: &mut [Slot], h: u64, e: u64) {
    let mask = t.len() - 1;
    let mut i = h as usize & mask;
    while t[i].entry != 0 {
        i = (i + 1) & mask;
    }
    t[i] = Slot { hash: h, entry: e };
}

/// A table of `2n` slots rounded up, every page touched.
fn table(n: usize) -> Vec<Slot> {
    let mut t = vec![Slot::default(); (n * 2).next_power_of_two()];
    for s in t.iter_mut() {
        s.hash = 0;
    }
    t
}

fn prefetch(p: *const Slot) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint; it never faults.
    unsafe {
        std::arch::x86_64::_mm_prefetch(p as *const i8, std::arch::x86_64::_MM_HINT_T0);
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().map_or(1_000_000, |a| a.parse().expect("N"));
    let group: usize = args.next().map_or(4096, |a| a.parse().expect("G"));
    for round in 0..3u64 {
        let hash = |i: usize| mix(i as u64 + round * n as u64);
        let ns = |start: Instant| start.elapsed().as_nanos() as f64 / n as f64;

        let mut t = table(n);
        let start = Instant::now();
        for i in 0..n {
            insert(&mut t, hash(i), i as u64 + 1);
        }
        let one = ns(start);

        let mut t = table(n);
        let mask = t.len() as u64 - 1;
        let start = Instant::now();
        let mut buf: Vec<(u64, u64)> = Vec::with_capacity(group);
        for i in 0..n {
            buf.push((hash(i), i as u64 + 1));
            if buf.len() == group || i == n - 1 {
                buf.sort_unstable_by_key(|&(h, _)| h & mask);
                for &(h, e) in &buf {
                    insert(&mut t, h, e);
                }
                buf.clear();
            }
        }
        let sorted = ns(start);

        let mut t = table(n);
        let start = Instant::now();
        for i in 0..n {
            buf.push((hash(i), i as u64 + 1));
            if buf.len() == 32 || i == n - 1 {
                for &(h, _) in &buf {
                    prefetch(&t[(h & mask) as usize]);
                }
                for &(h, e) in &buf {
                    insert(&mut t, h, e);
                }
                buf.clear();
            }
        }
        let prefetched = ns(start);
        println!(
            "{n} inserts: one at a time {one:.1} ns, sorted groups of {group} {sorted:.1} ns, \
             prefetched groups of 32 {prefetched:.1} ns"
        );
    }
}
