//! A model of what checkpoints cost in space, log and writes when each one merges the whole
//! overlay (`full`, as now) against when the overlay is cut by key range into `K` slices and
//! a checkpoint merges one slice (`sliced`), at equal overlay memory (no engine code: leaves
//! as key ranges, records as counts). For issue 58's footprint targets: the open database's
//! files within 1.1x LMDB's, the log small, the tree's write amplification no worse.
//!
//! Two workloads, `N` records of `R` bytes in leaves of `C = 4096 / (R + 6)` records:
//! - `update`: a tree of `N` records packed full (a sequential load), then `U` updates of
//!   uniformly random existing keys (seed 001's readwhilewriting writer);
//! - `load`: `N` random inserts into an empty tree, leaves split evenly when full (the
//!   merge's even split), as `checkpoint_policy` models.
//!
//! An overlay holds at most `M` records. `full`: when it holds `M`, every leaf with a record is
//! rewritten. `sliced`: when it holds `M`, the slice holding the most records is merged (the
//! leaves of its key range that have a record are rewritten), then the next most, until it
//! holds at most `M - M / K`. Every checkpoint is made durable, so the pages it frees are
//! reusable once the next is written; the extra space is then the pages the last two
//! checkpoints wrote (`extra`, the largest pair seen). The log holds the records since the
//! oldest one still in the overlay (`log`, the largest seen), and a slice's records wait in
//! memory until it is merged (`held`, the most seen).
//!
//! Printed, per policy: the tree's write amplification (leaf pages written x 4096 / records'
//! bytes), the extra space as a share of the tree's pages, the log's largest size in records
//! and as a share of the tree's bytes (a one-put record is `R + 60` bytes of log), and the
//! overlay's most records.
//!
//!   cargo run --release --manifest-path experiments/write-path/Cargo.toml --bin sliced_checkpoints [N] [R] [U]

use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;

const PAGE: u64 = 4096;

#[derive(Clone, Copy, PartialEq)]
enum Workload {
    Update,
    Load,
}

/// What one run measured.
struct Outcome {
    pages: u64,
    records: u64,
    extra_pages: u64,
    tree_pages: u64,
    log_records: u64,
    held: u64,
    checkpoints: u64,
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u64 = args.next().map_or(1_000_000, |a| a.parse().expect("N"));
    let record: u64 = args.next().map_or(116, |a| a.parse().expect("R"));
    let updates: u64 = args.next().map_or(n, |a| a.parse().expect("U"));
    let capacity = PAGE / (record + 6);
    println!("{n} records of {record} bytes, {capacity} a full leaf; {updates} updates");
    for workload in [Workload::Update, Workload::Load] {
        println!(
            "\n{}",
            match workload {
                Workload::Update => "update: random updates of a packed tree",
                Workload::Load => "load: random inserts into an empty tree",
            }
        );
        for m in [n / 32, n / 8, n / 4] {
            for k in [1u64, 4, 8, 16, 32] {
                let o = run(workload, n, updates, capacity, m, k);
                let amp = (o.pages * PAGE) as f64 / (o.records * record) as f64;
                let tree_bytes = o.tree_pages * PAGE;
                println!(
                    "M {m:>8} {:>10}: tree write amplification {amp:5.2}, extra space {:5.1}% \
                     of the tree, log at most {:>8} records ({:5.1}% of the tree), overlay at \
                     most {:>8} records, {} checkpoints",
                    if k == 1 {
                        "full".to_string()
                    } else {
                        format!("sliced {k}")
                    },
                    100.0 * o.extra_pages as f64 / o.tree_pages as f64,
                    o.log_records,
                    100.0 * (o.log_records * (record + 60)) as f64 / tree_bytes as f64,
                    o.held,
                    o.checkpoints,
                );
            }
        }
    }
}

/// A leaf: records in the tree, and the records pending for it in the overlay.
#[derive(Clone, Copy, Default)]
struct Leaf {
    count: u64,
    pending: u64,
}

fn run(workload: Workload, n: u64, updates: u64, capacity: u64, m: u64, k: u64) -> Outcome {
    let mut rng = rand::rngs::StdRng::seed_from_u64(58);
    let mut leaves: BTreeMap<u64, Leaf> = BTreeMap::new();
    let total = match workload {
        Workload::Update => {
            // A packed tree over the whole key space, its leaves of equal key width.
            let count = n.div_ceil(capacity);
            let width = u64::MAX / count;
            for i in 0..count {
                leaves.insert(
                    i * width,
                    Leaf {
                        count: capacity,
                        pending: 0,
                    },
                );
            }
            updates
        }
        Workload::Load => {
            leaves.insert(0, Leaf::default());
            n
        }
    };
    // Slices: equal key ranges (uniform keys), each with the position (record number) of its
    // oldest pending record.
    let slice_of = |key: u64| -> usize { ((key as u128 * k as u128) >> 64) as usize };
    let mut since: Vec<Option<u64>> = vec![None; k as usize];
    let mut in_slice: Vec<u64> = vec![0; k as usize];
    let (mut pending, mut pages, mut checkpoints) = (0u64, 0u64, 0u64);
    let (mut last_written, mut extra, mut log_max, mut held) = (0u64, 0u64, 0u64, 0u64);
    for i in 0..total {
        let key: u64 = rng.gen();
        let Some((&start, leaf)) = leaves.range_mut(..=key).next_back() else {
            unreachable!("the first leaf starts at 0")
        };
        leaf.pending += 1;
        pending += 1;
        // A record belongs to the slice of its leaf's first key: slices cut the leaves, and
        // only a merged leaf (with nothing pending) ever splits.
        let s = slice_of(start);
        in_slice[s] += 1;
        since[s].get_or_insert(i);
        held = held.max(pending);
        let oldest = since.iter().flatten().min().copied().unwrap_or(i);
        log_max = log_max.max(i + 1 - oldest);
        if pending < m {
            continue;
        }
        // A checkpoint: one slice at a time, the fullest first, until the overlay holds at
        // most M - M / K (all of it when K is 1).
        let target = m - m / k;
        let mut written = 0;
        while pending > target {
            let s = (0..k as usize).max_by_key(|&s| in_slice[s]).unwrap();
            let starts: Vec<u64> = leaves
                .iter()
                .filter(|(&start, l)| l.pending > 0 && slice_of(start) == s)
                .map(|(&start, _)| start)
                .collect();
            for start in starts {
                let end = leaves
                    .range(start + 1..)
                    .next()
                    .map_or(u64::MAX, |(&e, _)| e);
                let leaf = leaves[&start];
                pending -= leaf.pending;
                // An update replaces a record; an insert adds one.
                let all = match workload {
                    Workload::Update => leaf.count,
                    Workload::Load => leaf.count + leaf.pending,
                };
                let parts = all.div_ceil(capacity).max(1);
                written += parts;
                let width = (end - start) / parts;
                for j in 0..parts {
                    let each = all / parts + u64::from(j < all % parts);
                    leaves.insert(
                        start + j * width,
                        Leaf {
                            count: each,
                            pending: 0,
                        },
                    );
                }
            }
            in_slice[s] = 0;
            since[s] = None;
        }
        pages += written;
        checkpoints += 1;
        extra = extra.max(written + last_written);
        last_written = written;
    }
    let tree_pages = leaves.len() as u64;
    Outcome {
        pages,
        records: total,
        extra_pages: extra,
        tree_pages,
        log_records: log_max,
        held,
        checkpoints,
    }
}
