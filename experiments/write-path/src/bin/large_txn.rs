//! One write transaction of N records of 1 KB at random keys, put through one table handle,
//! then a count of the table: what a transaction holds while it writes
//! (docs/design/write-path.md, "Memory and space: what is bounded"). Prints the records a
//! second, the anonymous memory sampled every 20,000 records, and whether the transaction
//! turned to writing pages. Run it in a memory cgroup to see it complete or be killed.
//!
//! With `savepoint`, a second transaction then makes a savepoint, overwrites every record,
//! clears the table and rolls back to the savepoint before it commits: what a savepoint's
//! undo records hold (N old values, then N entries again); the table is checked afterwards.
//!
//! ```sh
//! cargo run --release --manifest-path experiments/write-path/Cargo.toml --bin large_txn DIR N [savepoint]
//! ```

use larchdb::{Database, Options};

/// `RssAnon` of this process, in KiB.
fn anon_kb() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("RssAnon"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// The random keys, the same sequence each time.
struct Keys(u64);

impl Keys {
    fn new() -> Keys {
        Keys(0x9E37_79B9_7F4A_7C15)
    }

    fn next(&mut self) -> [u8; 8] {
        let x = &mut self.0;
        *x ^= *x << 13;
        *x ^= *x >> 7;
        *x ^= *x << 17;
        x.to_be_bytes()
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let dir = args.get(1).ok_or("usage: large_txn DIR N")?;
    let n: u64 = args.get(2).map_or(Ok(300_000), |a| a.parse())?;
    let savepoint = match args.get(3).map(String::as_str) {
        None => false,
        Some("savepoint") => true,
        Some(other) => return Err(format!("unknown mode {other:?}").into()),
    };
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir)?;
    let db = Database::open(format!("{dir}/db"), Options::default())?;
    let mut w = db.begin_write()?;
    w.create_table("t")?;
    w.commit()?;
    // A logged commit first: the big transaction starts logged, as an application's would.
    db.put(b"x", b"y")?;
    let started = std::time::Instant::now();
    let mut peak = 0;
    let mut w = db.begin_write()?;
    {
        let mut t = w.table("t")?;
        let mut value = vec![0u8; 1000];
        let mut keys = Keys::new();
        for i in 0..n {
            value[..8].copy_from_slice(&i.to_be_bytes());
            t.put(&keys.next(), &value)?;
            if i % 20_000 == 0 {
                peak = peak.max(anon_kb());
            }
        }
    }
    w.commit()?;
    let secs = started.elapsed().as_secs_f64();
    let r = db.begin_read()?;
    assert_eq!(r.table("t")?.len()?, n);
    drop(r);
    let switched = db.stats()?.commits.switched_to_pages;
    println!(
        "records {n} rate {:.0}/s anon_peak_kb(sampled) {peak} switched_to_pages {switched}",
        n as f64 / secs
    );
    if savepoint {
        let started = std::time::Instant::now();
        let mut peak = 0;
        let mut w = db.begin_write()?;
        let sp = w.savepoint()?;
        {
            let mut t = w.table("t")?;
            let value = vec![1u8; 1000];
            let mut keys = Keys::new();
            for i in 0..n {
                t.put(&keys.next(), &value)?;
                if i % 20_000 == 0 {
                    peak = peak.max(anon_kb());
                }
            }
            assert_eq!(t.clear()?, n);
            peak = peak.max(anon_kb());
        }
        w.rollback_to(&sp)?;
        peak = peak.max(anon_kb());
        w.commit()?;
        let secs = started.elapsed().as_secs_f64();
        let r = db.begin_read()?;
        let t = r.table("t")?;
        assert_eq!(t.len()?, n);
        let mut keys = Keys::new();
        for i in 0..n {
            let v = t.get(&keys.next())?.ok_or("a record is missing")?;
            assert_eq!(v[..8], i.to_be_bytes(), "a record is not the one written first");
        }
        println!(
            "savepoint: {n} overwrites, a clear and the rollback in {secs:.2} s \
             anon_peak_kb(sampled) {peak} undo_spills {}",
            db.stats()?.commits.undo_spills
        );
    }
    Ok(())
}
