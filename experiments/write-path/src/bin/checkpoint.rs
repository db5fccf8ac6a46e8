//! How long a checkpoint stalls the writer: a tree of `BASE` random records (16-byte keys,
//! 100-byte values, loaded in large commits), then `N` one-put logged commits of random keys
//! (the same key space, db_bench's fillrandom), then `Database::checkpoint()`, timed. Three
//! rounds; the database file and its log under $TMPDIR.
//!
//!   cargo run --release --manifest-path experiments/write-path/Cargo.toml --bin checkpoint [BASE] [N]

use larchdb::{Database, Durability, Options};
use rand::{Rng, SeedableRng};
use std::time::Instant;

fn key(i: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k.copy_from_slice(format!("{i:016}").as_bytes());
    k
}

fn main() {
    let mut args = std::env::args().skip(1);
    let base: u64 = args.next().map_or(1_000_000, |a| a.parse().expect("BASE"));
    let n: u64 = args.next().map_or(150_000, |a| a.parse().expect("N"));
    let dir = tempfile::tempdir().unwrap();
    let mut options = Options::default().log(true);
    // Checkpoints only when asked: the experiment times them.
    options.log_segment_bytes = 64 << 20;
    options.checkpoint_bytes = 1 << 40;
    options.checkpoint_bytes = 3 * options.log_segment_bytes;
    let db = Database::open(dir.path().join("db"), options).unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let value: Vec<u8> = (0..100).map(|_| rng.gen()).collect();
    let space = (base + 3 * n).max(1);
    {
        let mut w = db.begin_write().unwrap();
        w.create_table("t").unwrap();
        w.commit().unwrap();
    }
    let mut loaded = 0;
    while loaded < base {
        let mut w = db.begin_write().unwrap();
        {
            let mut t = w.table("t").unwrap();
            for _ in 0..100_000.min(base - loaded) {
                t.put(&key(rng.gen_range(0..space)), &value).unwrap();
            }
        }
        w.commit_with(Durability::None).unwrap();
        loaded += 100_000;
    }
    db.checkpoint().unwrap();
    let file = std::fs::metadata(dir.path().join("db")).map_or(0, |m| m.len());
    println!("base loaded: file {} MiB", file >> 20);
    println!("tree of {base} random records, {n} one-put commits, then a checkpoint");
    for round in 0..3 {
        let t0 = Instant::now();
        for _ in 0..n {
            let mut w = db.begin_write().unwrap();
            w.table("t")
                .unwrap()
                .put(&key(rng.gen_range(0..space)), &value)
                .unwrap();
            w.commit_with(Durability::None).unwrap();
        }
        let commits = t0.elapsed();
        let t1 = Instant::now();
        db.checkpoint().unwrap();
        let cp = t1.elapsed();
        let file = std::fs::metadata(dir.path().join("db")).map_or(0, |m| m.len());
        println!(
            "round {round}: commits {:.3} us each; checkpoint {:.1} ms, {:.3} us a record; file {} MiB",
            commits.as_secs_f64() * 1e6 / n as f64,
            cp.as_secs_f64() * 1e3,
            cp.as_secs_f64() * 1e6 / n as f64,
            file >> 20
        );
    }
}
