//! Readers on other threads beside a writer: each read transaction sees one commit, whole,
//! never blocked by the writer; `renew` moves it to the newest commit.
//!
//!     cargo run --release -p larchdb --example readers

use larchdb::{Database, Durability, Options};
use std::sync::Arc;

const COMMITS: u64 = 2_000;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join(format!("larch-readers-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let db = Arc::new(Database::open(
        dir.join("counters.larch"),
        Options::default().durability(Durability::None),
    )?);
    let mut w = db.begin_write()?;
    w.create_table("counters")?;
    {
        let mut t = w.table("counters")?;
        t.put(b"a", &0u64.to_le_bytes())?;
        t.put(b"b", &0u64.to_le_bytes())?;
    }
    w.commit()?;

    // Readers check an invariant the writer keeps in every commit: a == b.
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let db = db.clone();
            std::thread::spawn(move || -> Result<u64, larchdb::Error> {
                let mut r = db.begin_read()?;
                let mut seen = 0;
                loop {
                    let t = r.table("counters")?;
                    let a = u64::from_le_bytes(t.get(b"a")?.unwrap().try_into().unwrap());
                    let b = u64::from_le_bytes(t.get(b"b")?.unwrap().try_into().unwrap());
                    assert_eq!(a, b, "a torn snapshot");
                    seen += 1;
                    if a == COMMITS {
                        return Ok(seen);
                    }
                    r.renew();
                }
            })
        })
        .collect();
    for i in 1..=COMMITS {
        let mut w = db.begin_write()?;
        {
            let mut t = w.table("counters")?;
            t.put(b"a", &i.to_le_bytes())?;
            t.put(b"b", &i.to_le_bytes())?;
        }
        w.commit()?;
    }
    for r in readers {
        let seen = r.join().expect("reader thread")?;
        println!("a reader checked {seen} snapshots, none torn");
    }
    db.sync()?;
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
