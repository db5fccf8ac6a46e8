//! The engine in one page: open, create a table, write in a transaction, read a snapshot,
//! scan a range, delete, and reopen.
//!
//!     cargo run --release -p larchdb --example quickstart [DIR]

use larchdb::{Database, Durability, Options};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = match std::env::args().nth(1) {
        Some(d) => std::path::PathBuf::from(d),
        None => std::env::temp_dir().join(format!("larch-quickstart-{}", std::process::id())),
    };
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("fruit.larch");

    let db = Database::open(&path, Options::default())?;
    let mut w = db.begin_write()?;
    w.ensure_table("fruit")?;
    {
        let mut fruit = w.table("fruit")?;
        for (name, colour) in [("apple", "red"), ("banana", "yellow"), ("cherry", "red")] {
            fruit.put(name.as_bytes(), colour.as_bytes())?;
        }
    }
    w.commit_with(Durability::Immediate)?; // durable when it returns

    // A read transaction is a snapshot: later commits do not change what it sees.
    let r = db.begin_read()?;
    let mut w = db.begin_write()?;
    w.table("fruit")?.delete(b"banana")?;
    w.commit()?;
    let fruit = r.table("fruit")?;
    assert_eq!(fruit.get(b"banana")?, Some(&b"yellow"[..]));
    for entry in fruit.range(&b"b"[..]..) {
        let (k, v) = entry?;
        println!(
            "{} is {}",
            String::from_utf8_lossy(k),
            String::from_utf8_lossy(v)
        );
    }
    drop(r);

    // Reopened, the file holds the last commit.
    drop(db);
    let db = Database::open(&path, Options::default())?;
    let r = db.begin_read()?;
    let fruit = r.table("fruit")?;
    assert_eq!(fruit.get(b"banana")?, None);
    assert_eq!(fruit.len()?, 2);
    println!(
        "{} entries after reopening; verify: {:?}",
        fruit.len()?,
        db.verify()?.is_clean()
    );
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
