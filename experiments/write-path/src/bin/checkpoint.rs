//! What checkpoints cost the writer: a tree of `BASE` random records (16-byte keys, 100-byte
//! values, loaded in large commits), then rounds of `N` one-put commits of random keys (the
//! same key space, db_bench's fillrandom) with the default log and checkpoint bounds, each
//! commit timed: the mean, and the commits that ran a checkpoint (over 10 ms), how many and
//! how long. The database file and its log under $TMPDIR.
//!
//!   cargo run --release --manifest-path experiments/write-path/Cargo.toml --bin checkpoint [BASE] [N]

use larchdb::{Database, Options};
use rand::{Rng, SeedableRng};
use std::time::{Duration, Instant};

use larch_write_path_experiments::{load_random, set_random};

fn main() {
    let mut args = std::env::args().skip(1);
    let base: u64 = args.next().map_or(1_000_000, |a| a.parse().expect("BASE"));
    let n: u64 = args.next().map_or(500_000, |a| a.parse().expect("N"));
    let dir = tempfile::tempdir().unwrap();
    // CKPT_MB: the checkpoint bound in MiB (default: the engine's), the log sized to hold it.
    let mut opts = Options::default().log(true);
    if let Some(mb) = std::env::var("CKPT_MB")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        opts.checkpoint_bytes = mb << 20;
        opts.log_segment_bytes = (mb << 20).div_ceil(3).next_multiple_of(1 << 20);
    }
    println!(
        "checkpoint_bytes {} MiB, log {} x {} MiB",
        opts.checkpoint_bytes >> 20,
        opts.log_segments,
        opts.log_segment_bytes >> 20
    );
    let db = Database::open(dir.path().join("db"), opts).unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let value: Vec<u8> = (0..100).map(|_| rng.gen()).collect();
    let space = (base + 3 * n).max(1);
    load_random(&db, base, space, &mut rng, &value);
    db.checkpoint().unwrap();
    let file = std::fs::metadata(dir.path().join("db")).map_or(0, |m| m.len());
    println!(
        "tree of {base} random records (file {} MiB), rounds of {n} one-put commits",
        file >> 20
    );
    for round in 0..3 {
        let mut slow: Vec<Duration> = Vec::new();
        let t0 = Instant::now();
        for _ in 0..n {
            let t = Instant::now();
            set_random(&db, space, &mut rng, &value);
            let took = t.elapsed();
            if took > Duration::from_millis(10) {
                slow.push(took);
            }
        }
        let all = t0.elapsed();
        let slow_total: Duration = slow.iter().sum();
        let file = std::fs::metadata(dir.path().join("db")).map_or(0, |m| m.len());
        println!(
            "round {round}: {:.3} us a commit ({:.3} without the slow ones); {} over 10 ms, {:.0} ms in all, longest {:.0} ms; file {} MiB",
            all.as_secs_f64() * 1e6 / n as f64,
            (all - slow_total).as_secs_f64() * 1e6 / (n as usize - slow.len()) as f64,
            slow.len(),
            slow_total.as_secs_f64() * 1e3,
            slow.iter().max().copied().unwrap_or_default().as_secs_f64() * 1e3,
            file >> 20
        );
    }
}
