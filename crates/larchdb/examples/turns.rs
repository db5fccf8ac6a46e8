//! Writers in several processes taking turns on one database: what a handover of the file
//! costs. `PROCS` processes (this program re-executed) each make `TXNS` one-put write
//! transactions as fast as they can, all on one counter, so that the file changes hands at
//! almost every transaction; the same transactions in one process are the baseline.
//!
//! ```text
//! cargo run --release -p larchdb --example turns -- [PROCS] [TXNS] [none|immediate]
//! ```

use larchdb::{Database, Durability, Options};
use std::path::Path;
use std::process::Command;
use std::time::Instant;

fn options(durability: &str) -> Options {
    let durability = match durability {
        "none" => Durability::None,
        _ => Durability::Immediate,
    };
    Options::default().durability(durability)
}

/// `txns` increments of the counter, one write transaction each. Returns the checkpoints the
/// handle wrote: one per handover it gave (and the few its log's growth asked for).
fn increment(path: &Path, txns: u64, durability: &str) -> larchdb::Result<u64> {
    let db = Database::open(path, options(durability))?;
    for _ in 0..txns {
        let mut w = db.begin_write()?;
        let mut t = w.default_table()?;
        let count = t.get(b"count")?.map_or(0, |v| {
            u64::from_be_bytes(v[..].try_into().unwrap_or([0; 8]))
        });
        t.put(b"count", &(count + 1).to_be_bytes())?;
        w.commit()?;
    }
    Ok(db.commit_stats().checkpoints)
}

fn count(path: &Path) -> larchdb::Result<u64> {
    let db = Database::open(path, Options::default())?;
    let r = db.begin_read()?;
    let v = r.default_table()?.get(b"count")?;
    Ok(v.map_or(0, |v| u64::from_be_bytes(v.try_into().unwrap_or([0; 8]))))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if let Some(path) = std::env::var_os("LARCH_TURNS_CHILD") {
        let txns = args[2].parse()?;
        println!("{}", increment(Path::new(&path), txns, &args[3])?);
        return Ok(());
    }
    let procs: u64 = args.get(1).map_or(Ok(2), |a| a.parse())?;
    let txns: u64 = args.get(2).map_or(Ok(2000), |a| a.parse())?;
    let durability = args.get(3).cloned().unwrap_or_else(|| "none".into());
    let dir = tempfile::tempdir()?;

    let alone = dir.path().join("alone.larch");
    Database::open(&alone, options(&durability))?;
    let started = Instant::now();
    increment(&alone, procs * txns, &durability)?;
    let one = started.elapsed();

    let shared = dir.path().join("turns.larch");
    Database::open(&shared, options(&durability))?;
    let started = Instant::now();
    let children: Vec<_> = (0..procs)
        .map(|_| {
            Command::new(std::env::current_exe()?)
                .args(["child", &txns.to_string(), &durability])
                .env("LARCH_TURNS_CHILD", &shared)
                .stdout(std::process::Stdio::piped())
                .spawn()
        })
        .collect::<Result<_, _>>()?;
    let mut checkpoints = 0;
    for c in children {
        let out = c.wait_with_output()?;
        assert!(out.status.success(), "a writer process failed");
        checkpoints += String::from_utf8_lossy(&out.stdout).trim().parse::<u64>()?;
    }
    let turns = started.elapsed();
    assert_eq!(count(&shared)?, procs * txns);
    assert_eq!(count(&alone)?, procs * txns);

    let per = |d: std::time::Duration| d.as_secs_f64() * 1e6 / (procs * txns) as f64;
    println!(
        "{procs} processes x {txns} transactions ({durability}): {:.0} us a transaction in \
         turns, {:.1} us in one process ({:.2} s and {:.2} s; {checkpoints} checkpoints in \
         turns, about one per handover)",
        per(turns),
        per(one),
        turns.as_secs_f64(),
        one.as_secs_f64()
    );
    Ok(())
}
