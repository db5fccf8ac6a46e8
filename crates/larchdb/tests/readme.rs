//! The README's Rust example, compiled and run: the block between the markers below must be
//! the README's ```rust block, indented (`readme_block_is_this_file`), so that the README
//! never shows code that does not build.

#![allow(unused_variables, unused_imports)]

use std::path::Path;

#[rustfmt::skip]
fn example() -> Result<(), Box<dyn std::error::Error>> {
    // README BEGIN
    use larchdb::{Database, Durability, Options};

    let db = Database::open("data.larch", Options::default())?;

    let mut w = db.begin_write()?;
    w.create_table("users")?;
    w.table("users")?.put(b"alice", b"admin")?;
    w.commit_with(Durability::Immediate)?;   // durable when it returns

    let r = db.begin_read()?;                 // Send + Sync, one snapshot for its whole life
    let users = r.table("users")?;
    assert_eq!(users.get(b"alice")?, Some(&b"admin"[..]));
    for entry in users.range(b"a".as_slice()..b"b".as_slice()) {
        let (key, value) = entry?;
    }
    for entry in users.prefix(b"ali") {      // keys starting with "ali"; prefix_rev descends
        let (key, value) = entry?;
    }

    // Bulk edits: a range frees whole subtrees; retain, clear, pop_first/pop_last.
    let mut w = db.begin_write()?;
    let mut users = w.table("users")?;
    users.delete_range(b"a".as_slice()..b"b".as_slice())?;
    users.retain(|key, value| value != b"guest")?;
    w.commit()?;

    // The simple case: the default table, one operation per transaction.
    db.put(b"config", b"v1")?;
    assert_eq!(db.get(b"config")?, Some(b"v1".to_vec()));

    // A table copied into another in one transaction: read the commit it started from.
    let mut w = db.begin_write()?;
    w.ensure_table("backup")?;
    let base = w.read_base();
    let users = base.table("users")?;
    let mut backup = w.table("backup")?;
    for entry in users.iter() {
        let (key, value) = entry?;
        backup.put(key, value)?;
    }
    w.commit()?;

    // Typed tables: keys and values as Rust types (integers sort as numbers, strings and byte
    // strings read without a copy; tuples, arrays and Options of them sort as Rust orders them;
    // any serde type as JSON with the `serde` feature).
    use larchdb::TableDefinition;
    const SCORES: TableDefinition<(&str, u64), Option<u32>> = TableDefinition::new("scores");
    let mut w = db.begin_write()?;
    w.open_table(SCORES)?.put(("alice", 2026), Some(10))?;  // created on first use, types recorded
    w.commit()?;
    let r = db.begin_read()?;
    let scores = r.open_table(SCORES)?;
    assert_eq!(scores.get(("alice", 2026))?, Some(Some(10)));
    for entry in scores.range(("alice", 0)..).rev() {       // ranges walk from either end
        let ((name, year), score) = entry?;
    }

    // Savepoints: undo part of a transaction, keep the rest (nested; SQL's SAVEPOINT).
    let mut w = db.begin_write()?;
    w.table("users")?.put(b"carol", b"staff")?;
    let sp = w.savepoint()?;
    w.table("users")?.delete(b"alice")?;
    w.rollback_to(&sp)?;                     // alice is back; carol stays
    w.commit()?;

    // A hot backup, compacted; space given back in place; what the handle and its readers do.
    db.copy_to("backup.larch")?;
    db.compact_with_progress(|step| println!("{step:?}"))?;
    let stats = db.stats()?;   // entries, pages by kind, free/pending, readers, oldest reader and
                               // the pages it pins, commit counters (stats.commits)
    // README END
    Ok(())
}

#[test]
fn the_readme_example_runs() {
    let dir = tempfile::tempdir().unwrap();
    // The example opens data.larch and writes backup.larch in the current directory; this
    // is the only test in its binary that does, and no other test reads the directory.
    std::env::set_current_dir(dir.path()).unwrap();
    example().unwrap();
    assert!(Path::new("backup.larch").exists());
}

#[test]
fn readme_block_is_this_file() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(manifest.join("../../README.md")).unwrap();
    let block = readme
        .split("```rust\n")
        .nth(1)
        .and_then(|rest| rest.split("\n```").next())
        .expect("the README has a ```rust block");
    let this = include_str!("readme.rs");
    let ours = this
        .split("// README BEGIN\n")
        .nth(1)
        .and_then(|rest| rest.split("\n    // README END").next())
        .unwrap();
    let ours: Vec<&str> = ours
        .lines()
        .map(|l| l.strip_prefix("    ").unwrap_or(l))
        .collect();
    let theirs: Vec<&str> = block.lines().collect();
    assert_eq!(
        ours, theirs,
        "tests/readme.rs must hold the README's Rust example as it is"
    );
}
