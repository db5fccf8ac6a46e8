//! What a read of a key the overlay holds costs: `N` one-put commits of sequential keys
//! (`append`) or of random ones (`set`) on a fresh logged database whose checkpoint bound is
//! above what they write (so the overlay holds every key), then `N` reads of random keys
//! that were written (`hit`) and `N` of keys in the same range that were not (`miss`: the
//! overlay is probed, then the tree), best of `R` rounds: what the overlay's designs cost the
//! readers (write-path.md, "Measured and not kept"). `FRESH_READS_STATS=1` prints the
//! checkpoints and commits each round made (none of the first should run).
//!
//!   cargo run --release --manifest-path experiments/write-path/Cargo.toml --bin fresh_reads [N] [R] [KIND]

use larchdb::{Database, Durability, Options};
use rand::{Rng, SeedableRng};
use std::time::Instant;

use larch_write_path_experiments::key;

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u64 = args.next().map_or(1_000_000, |a| a.parse().expect("N"));
    let rounds: u32 = args.next().map_or(3, |a| a.parse().expect("R"));
    let only = args.next();
    for kind in ["append", "set"]
        .into_iter()
        .filter(|k| only.as_deref().is_none_or(|o| o == *k))
    {
        let (mut hit, mut miss) = (f64::MAX, f64::MAX);
        for _ in 0..rounds {
            let (h, m) = round(kind, n);
            hit = hit.min(h);
            miss = miss.min(m);
        }
        println!("{kind:>8}: hit {hit:6.0} ns/read, miss {miss:6.0} ns/read (best of {rounds}, {n} keys)");
    }
}

fn round(kind: &str, n: u64) -> (f64, f64) {
    let dir = tempfile::tempdir().unwrap();
    let mut opts = Options::default().log(true);
    opts.log_segment_bytes = ((n * 200) >> 20).next_multiple_of(16).max(16) << 20;
    opts.checkpoint_bytes = opts.log_segment_bytes * (opts.log_segments - 1);
    opts.idle_checkpoint_millis = 0;
    let db = Database::open(dir.path().join("db"), opts).unwrap();
    {
        let mut w = db.begin_write().unwrap();
        w.create_table("t").unwrap();
        w.commit().unwrap();
    }
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let value = [7u8; 100];
    // Even numbers are written, odd ones are the misses.
    let mut written: Vec<u64> = (0..n).map(|i| i * 2).collect();
    if kind == "set" {
        for i in (1..written.len()).rev() {
            written.swap(i, rng.gen_range(0..=i));
        }
    }
    for &i in &written {
        let mut w = db.begin_write().unwrap();
        match kind {
            "append" => w.table("t").unwrap().append(&key(i), &value).unwrap(),
            _ => w.table("t").unwrap().set(&key(i), &value).unwrap(),
        }
        w.commit_with(Durability::None).unwrap();
    }
    let r = db.begin_read().unwrap();
    let t = r.table("t").unwrap();
    let mut time = |odd: u64| {
        let probes: Vec<[u8; 16]> = (0..n).map(|_| key(rng.gen_range(0..n) * 2 + odd)).collect();
        let start = Instant::now();
        let mut found = 0u64;
        for k in &probes {
            found += t.get(k).unwrap().is_some() as u64;
        }
        assert_eq!(found, if odd == 0 { n } else { 0 });
        start.elapsed().as_nanos() as f64 / n as f64
    };
    let times = (time(0), time(1));
    if std::env::var_os("FRESH_READS_STATS").is_some() {
        let c = db.stats().unwrap().commits;
        println!(
            "checkpoints {} logged {} page {}",
            c.checkpoints, c.logged_commits, c.page_commits
        );
    }
    times
}
