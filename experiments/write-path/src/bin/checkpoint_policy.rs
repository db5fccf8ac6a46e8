//! A model of how many leaf pages a random one-put load writes under two checkpoint policies,
//! at equal overlay memory (no engine code: leaves as key ranges, records as counts), for the
//! write-amplification target (write-path.md, "Open problems"). `N` random 16-byte-key records of
//! `R` bytes go into a B-tree whose leaves hold up to `C = 4096 / (R + 6)` records and split
//! evenly when full (the merge's even split), through an overlay of at most `M` records:
//!
//! - `full`: when the overlay holds `M`, every leaf with a pending record is rewritten (a
//!   checkpoint of the whole overlay, as now); the overlay empties.
//! - `partial`: when it holds `M`, the leaves with the most pending records are rewritten,
//!   densest first, until it holds `M / 2`; the others keep their records for later.
//! - `once`: as `partial`, but every leaf holding a record an earlier checkpoint left behind
//!   is rewritten first, so no record waits more than one checkpoint (the log then holds the
//!   commits since the checkpoint before the last, and nothing is written to it again).
//!
//! Printed: leaf pages written per record's bytes (the tree's part of the write
//! amplification; the log adds its own, the same for all), for each `M`. `partial` keeps
//! records for any number of checkpoints, which the log must hold: the model charges the
//! worst case, every record a checkpoint leaves behind written to the log again (a record of
//! `R + 60` bytes, the log's one-put record), as `relogged`.
//!
//!   cargo run --release --manifest-path experiments/write-path/Cargo.toml --bin checkpoint_policy [N] [R]

use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;

/// A leaf: records in the tree, records pending in the overlay, and how many of those a
/// checkpoint already left behind once.
#[derive(Clone, Copy, Default)]
struct Leaf {
    count: u64,
    pending: u64,
    carried: u64,
}

/// Which leaves a checkpoint rewrites.
#[derive(Clone, Copy, PartialEq)]
enum Policy {
    /// Every leaf with a pending record.
    Full,
    /// The densest, until the overlay is half full.
    Partial,
    /// Every leaf holding a record a checkpoint left behind before, then the densest until
    /// the overlay is half full: a record waits at most one checkpoint, so the log need only
    /// hold the commits since the checkpoint before the last.
    Once,
}

const PAGE: u64 = 4096;

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u64 = args.next().map_or(10_000_000, |a| a.parse().expect("N"));
    let record: u64 = args.next().map_or(116, |a| a.parse().expect("R"));
    let capacity = PAGE / (record + 6);
    println!("{n} records of {record} bytes, {capacity} a full leaf");
    for m in [n / 40, n / 10, n / 4] {
        for policy in [Policy::Full, Policy::Partial, Policy::Once] {
            let (pages, kept) = run(n, capacity, m, policy);
            let amp = (pages * PAGE) as f64 / (n * record) as f64;
            let relogged = (kept * (record + 60)) as f64 / (n * record) as f64;
            let log = match policy {
                Policy::Full => String::new(),
                Policy::Partial => format!(", relogged at most {relogged:.2}"),
                Policy::Once => ", the log holding one checkpoint more".to_string(),
            };
            println!(
                "overlay of {m:>8} records, {:>7}: {pages:>9} leaf pages written, tree write \
                 amplification {amp:.2}{log}",
                match policy {
                    Policy::Full => "full",
                    Policy::Partial => "partial",
                    Policy::Once => "once",
                }
            );
        }
    }
}

/// Leaf pages written by a load of `n` random records, and the records its checkpoints left
/// behind, summed over the checkpoints.
fn run(n: u64, capacity: u64, m: u64, policy: Policy) -> (u64, u64) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(55);
    // Leaves by their first key.
    let mut leaves: BTreeMap<u64, Leaf> = BTreeMap::new();
    leaves.insert(0, Leaf::default());
    let (mut pending, mut pages, mut kept) = (0u64, 0u64, 0u64);
    for _ in 0..n {
        let key: u64 = rng.gen();
        let Some((_, leaf)) = leaves.range_mut(..=key).next_back() else {
            unreachable!("the first leaf starts at 0")
        };
        leaf.pending += 1;
        pending += 1;
        if pending < m {
            continue;
        }
        // A checkpoint: which leaves are rewritten.
        let mut chosen: Vec<(u64, u64)> = leaves
            .iter()
            .filter(|(_, l)| l.pending > 0)
            .map(|(&start, l)| {
                // Leaves holding carried records first, whatever their density.
                let must = policy == Policy::Once && l.carried > 0;
                (start, l.pending + if must { 1 << 40 } else { 0 })
            })
            .collect();
        if policy != Policy::Full {
            chosen.sort_unstable_by(|a, b| b.1.cmp(&a.1));
            let mut freed = 0;
            let keep = chosen
                .iter()
                .take_while(|(_, p)| {
                    let must = *p >= 1 << 40;
                    let more = must || pending - freed > m / 2;
                    freed += p & ((1 << 40) - 1);
                    more
                })
                .count();
            chosen.truncate(keep);
        }
        for (start, _) in chosen {
            let end = leaves
                .range(start + 1..)
                .next()
                .map_or(u64::MAX, |(&s, _)| s);
            let leaf = leaves[&start];
            let total = leaf.count + leaf.pending;
            pending -= leaf.pending;
            // Split evenly into the fewest leaves that hold them.
            let parts = total.div_ceil(capacity).max(1);
            pages += parts;
            let width = (end - start) / parts;
            for i in 0..parts {
                let each = total / parts + u64::from(i < total % parts);
                leaves.insert(
                    start + i * width,
                    Leaf {
                        count: each,
                        pending: 0,
                        carried: 0,
                    },
                );
            }
        }
        kept += pending;
        // What is left pending has now been left behind once.
        for l in leaves.values_mut() {
            l.carried = l.pending;
        }
    }
    (pages, kept)
}
