//! What a logged commit costs outside checkpoints: `N` transactions of each kind on a fresh
//! logged database whose checkpoint bound is above what they write (the log sized to hold
//! them), timed as a whole, best of `R` rounds (a fresh database each): an empty transaction
//! (begin, commit), one that opens the table and commits nothing, one-put commits of
//! sequential keys (`append`, as larch-bench's fillseq) and of random keys (`set`, fillrandom),
//! 16-byte keys and 100-byte values, `Durability::None`. The floor a one-put fill can reach
//! once checkpoints cost nothing.
//!
//!   cargo run --release --manifest-path experiments/write-path/Cargo.toml --bin commit_path [N] [R] [KIND]
//!
//! `COMMIT_PATH_CHECKPOINTS=1`: the default log bounds (checkpoints run, as in larch-bench);
//! `COMMIT_PATH_EXIT=1`: one round, the process leaves before the close (to profile the loop
//! alone); `COMMIT_PATH_STATS=1`: the handle's `CommitStats` after the loop.

use larchdb::{Database, Durability, Options};
use rand::{Rng, SeedableRng};
use std::time::Instant;

use larch_write_path_experiments::key;

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u64 = args.next().map_or(300_000, |a| a.parse().expect("N"));
    let rounds: u32 = args.next().map_or(3, |a| a.parse().expect("R"));
    let only = args.next();
    let kinds = ["empty", "table", "append", "set"];
    for kind in kinds
        .into_iter()
        .filter(|k| only.as_deref().is_none_or(|o| o == *k))
    {
        let mut best = f64::MAX;
        for _ in 0..rounds {
            best = best.min(round(kind, n));
        }
        println!("{kind:>8}: {best:7.0} ns/commit (best of {rounds}, {n} commits)");
    }
}

fn round(kind: &str, n: u64) -> f64 {
    let dir = tempfile::tempdir().unwrap();
    let mut opts = Options::default().log(true);
    // Room for every record: no checkpoint runs in the timed loop (unless
    // COMMIT_PATH_CHECKPOINTS is set: the default bounds, as larch-bench runs).
    if std::env::var_os("COMMIT_PATH_CHECKPOINTS").is_none() {
        opts.log_segment_bytes = ((n * 200) >> 20).next_multiple_of(16).max(16) << 20;
        opts.checkpoint_bytes = opts.log_segment_bytes * (opts.log_segments - 1);
    }
    let db = Database::open(dir.path().join("db"), opts).unwrap();
    {
        let mut w = db.begin_write().unwrap();
        w.create_table("t").unwrap();
        w.commit().unwrap();
    }
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let value: Vec<u8> = (0..100).map(|_| rng.gen()).collect();
    let keys: Vec<[u8; 16]> = match kind {
        "set" => (0..n).map(|_| key(rng.gen_range(0..n * 10))).collect(),
        _ => (0..n).map(key).collect(),
    };
    let start = Instant::now();
    for k in &keys {
        let mut w = db.begin_write().unwrap();
        match kind {
            "empty" => {}
            "table" => {
                w.table("t").unwrap();
            }
            "append" => w.table("t").unwrap().append(k, &value).unwrap(),
            _ => w.table("t").unwrap().set(k, &value).unwrap(),
        }
        w.commit_with(Durability::None).unwrap();
    }
    let ns = start.elapsed().as_nanos() as f64 / n as f64;
    if std::env::var_os("COMMIT_PATH_STATS").is_some() {
        // What held the writer back: the pacing's sleeps, waits for room, checkpoints.
        println!("{:?}", db.stats().unwrap().commits);
    }
    if std::env::var_os("COMMIT_PATH_EXIT").is_some() {
        // For a profile of the loop alone: leave without the close's checkpoint.
        println!("{kind:>8}: {ns:7.0} ns/commit (one round, exited before the close)");
        std::process::exit(0);
    }
    ns
}
