//! What a checkpoint that applies buffered writes to the B-tree in one write transaction costs
//! per key, against the batch's size and order: random keys put in arrival order (what the
//! engine's batched commits do today) or sorted first (what an overlay sorted by key hands a
//! checkpoint). Into a tree of `--num` random records (16-byte keys, 100-byte values), as
//! db_bench's fillrandom; the database file under $TMPDIR.
//!
//!   cargo run --release --manifest-path experiments/write-path/Cargo.toml --bin batch_apply [NUM]
//!
//! `ONLY=100000s` (or `1000`, ...) runs one cell of the table: the batch size, `s` for sorted.

use larchdb::{Database, Durability, Options};
use rand::{Rng, SeedableRng};
use std::time::Instant;

use larch_write_path_experiments::{key, load_random};

fn main() {
    let num: u64 = std::env::args()
        .nth(1)
        .map(|a| a.parse().expect("NUM"))
        .unwrap_or(1_000_000);
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().join("db"), Options::default()).unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let value: Vec<u8> = (0..100).map(|_| rng.gen()).collect();
    // The base: `num` random keys, loaded in commits of 100K.
    load_random(&db, num, num * 10, &mut rng, &value);
    println!("tree of {num} random records; ns per key applied, median of 5 batches");
    println!("| batch | arrival order | sorted |");
    println!("|---|---|---|");
    let only: Option<(usize, bool)> = std::env::var("ONLY")
        .ok()
        .map(|v| (v.trim_end_matches('s').parse().unwrap(), v.ends_with('s')));
    for batch in [1usize, 100, 1_000, 10_000, 100_000] {
        let mut row = Vec::new();
        for sorted in [false, true] {
            if only.is_some_and(|o| o != (batch, sorted)) {
                row.push(0.0);
                continue;
            }
            let mut times = Vec::new();
            let rounds = if batch == 1 { 5 * 2000 } else { 5 };
            let per = if batch == 1 { 2000 } else { 1 };
            for r in 0..rounds / per {
                let mut keys: Vec<[u8; 16]> = (0..batch * per)
                    .map(|_| key(rng.gen_range(0..num * 10)))
                    .collect();
                if sorted {
                    keys.sort_unstable();
                }
                let t0 = Instant::now();
                for chunk in keys.chunks(batch) {
                    let mut w = db.begin_write().unwrap();
                    {
                        let mut t = w.table("t").unwrap();
                        for k in chunk {
                            t.put(k, &value).unwrap();
                        }
                    }
                    w.commit_with(Durability::None).unwrap();
                }
                let _ = r;
                times.push(t0.elapsed().as_nanos() as f64 / (batch * per) as f64);
            }
            times.sort_by(|a, b| a.partial_cmp(b).unwrap());
            row.push(times[times.len() / 2]);
        }
        println!("| {batch} | {:.0} | {:.0} |", row[0], row[1]);
    }
}
