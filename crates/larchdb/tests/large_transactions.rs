//! A transaction whose writes outgrow a quarter of the memory budget turns to writing pages
//! as it writes, in the middle of a table's changes, so that what it holds in memory stays
//! bounded whatever its size: its own reads, counts, ranges, savepoints and deletions see the
//! same table before and after the turn, and the commit keeps all of it. Beyond memory, the
//! copies of cold pages it makes after the turn are written out past the budget, and the
//! commit, or the rollback, keeps the tree whole.

mod common;

use common::{collect, create_table};
use larchdb::storage::{FileStorage, Storage};
use larchdb::{Database, Options};
use std::path::{Path, PathBuf};

/// The smallest memory budget (4 MiB): a batch turns to pages past 1 MiB.
fn options() -> Options {
    Options::default()
        .log(true)
        .log_segment_bytes(1 << 20)
        .memory_budget(4 << 20)
}

fn key(i: u32) -> [u8; 4] {
    i.to_be_bytes()
}

/// Sixteen bytes: each deletion's record in the batch is about 20 bytes.
fn key16(i: u32) -> [u8; 16] {
    let mut k = [b'k'; 16];
    k[12..].copy_from_slice(&i.to_be_bytes());
    k
}

fn value(i: u32) -> Vec<u8> {
    let mut v = vec![(i % 251) as u8; 1000];
    v[..4].copy_from_slice(&i.to_be_bytes());
    v
}

fn switched(db: &Database) -> u64 {
    db.stats().unwrap().commits.switched_to_pages
}

/// A new database with `options()`, in a directory that lives as long as the first value.
fn fresh() -> (tempfile::TempDir, PathBuf, Database) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Database::open(&path, options()).unwrap();
    (dir, path, db)
}

/// `db` closed and opened again.
fn reopen(db: Database, path: &Path) -> Database {
    drop(db);
    Database::open(path, options()).unwrap()
}

#[test]
fn a_transaction_outgrowing_its_bound_writes_pages_as_it_goes() {
    let (_dir, path, db) = fresh();
    create_table(&db, "t");
    // Records in the overlay, through the log: the turn applies them first.
    for i in (0..200u32).map(|i| i * 20) {
        let mut w = db.begin_write().unwrap();
        w.table("t").unwrap().put(&key(i), b"old").unwrap();
        w.commit().unwrap();
    }
    assert_eq!(switched(&db), 0);

    // 4,000 records of 1 KB in one handle: about four times the batch's bound.
    let mut w = db.begin_write().unwrap();
    let mut t = w.table("t").unwrap();
    for i in 0..4000u32 {
        let replaced = t.put(&key(i), &value(i)).unwrap();
        assert_eq!(replaced, i % 20 == 0, "key {i}");
        // Reads of its own writes, across the turn.
        if i % 97 == 0 {
            assert_eq!(t.get(&key(i)).unwrap(), Some(&value(i)[..]));
            assert_eq!(t.get(&key(i + 20 - i % 20)).unwrap(), Some(&b"old"[..]));
        }
    }
    assert_eq!(t.len().unwrap(), 4000);
    assert_eq!(t.iter().count(), 4000);
    let last = t.last().unwrap().unwrap();
    assert_eq!(last.0, key(3999));
    // A range delete of most of it, and a set and an append after.
    assert_eq!(
        t.delete_range(&key(1000)[..]..&key(3500)[..]).unwrap(),
        2500
    );
    t.set(&key(1500), b"set").unwrap();
    t.append(&key(5000), b"appended").unwrap();
    assert_eq!(t.len().unwrap(), 1502);
    w.commit().unwrap();
    assert_eq!(switched(&db), 1);

    let check = |db: &Database| {
        let r = db.begin_read().unwrap();
        let t = r.table("t").unwrap();
        assert_eq!(t.len().unwrap(), 1502);
        assert_eq!(t.get(&key(999)).unwrap(), Some(&value(999)[..]));
        assert_eq!(t.get(&key(1000)).unwrap(), None);
        assert_eq!(t.get(&key(1500)).unwrap(), Some(&b"set"[..]));
        assert_eq!(t.get(&key(3500)).unwrap(), Some(&value(3500)[..]));
        assert_eq!(t.get(&key(5000)).unwrap(), Some(&b"appended"[..]));
        assert_eq!(t.iter().count(), 1502);
    };
    check(&db);
    let db = reopen(db, &path);
    check(&db);
    db.verify().unwrap();
}

#[test]
fn a_range_delete_through_the_log_turns_to_pages_once_its_records_outgrow_the_bound() {
    let (_dir, path, db) = fresh();
    let mut w = db.begin_write().unwrap();
    w.create_table("t").unwrap();
    let mut t = w.table("t").unwrap();
    for i in 0..100_000u32 {
        t.put(&key16(i), b"v").unwrap();
    }
    w.commit().unwrap();
    let before = switched(&db);
    // One record of the log for each key deleted: 100,000 of them outgrow 1 MiB.
    let mut w = db.begin_write().unwrap();
    let mut t = w.table("t").unwrap();
    t.put(&key16(200_000), b"kept").unwrap();
    assert_eq!(
        t.delete_range(&key16(10)[..]..&key16(99_990)[..]).unwrap(),
        99_980
    );
    assert_eq!(t.len().unwrap(), 21);
    w.commit().unwrap();
    assert_eq!(switched(&db), before + 1);
    let db = reopen(db, &path);
    let r = db.begin_read().unwrap();
    let keys: Vec<Vec<u8>> = collect(r.table("t").unwrap().iter())
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    let want: Vec<Vec<u8>> = (0..10u32)
        .chain(99_990..100_000)
        .chain([200_000])
        .map(|i| key16(i).to_vec())
        .collect();
    assert_eq!(keys, want);
    drop(r);
    db.verify().unwrap();
}

#[test]
fn a_savepoint_taken_through_the_log_rolls_back_writes_made_after_the_turn() {
    let (_dir, path, db) = fresh();
    create_table(&db, "t");
    let mut w = db.begin_write().unwrap();
    w.table("t").unwrap().put(&key(1), b"committed").unwrap();
    w.commit().unwrap();

    let mut w = db.begin_write().unwrap();
    w.table("t").unwrap().put(&key(2), b"before").unwrap();
    let sp = w.savepoint().unwrap();
    let mut t = w.table("t").unwrap();
    t.put(&key(1), b"changed").unwrap();
    for i in 10..3000u32 {
        t.put(&key(i), &value(i)).unwrap();
    }
    assert_eq!(
        switched(&db),
        1,
        "the writes after the savepoint wrote pages"
    );
    w.rollback_to(&sp).unwrap();
    let t = w.table("t").unwrap();
    assert_eq!(t.len().unwrap(), 2);
    assert_eq!(t.get(&key(1)).unwrap(), Some(&b"committed"[..]));
    w.commit().unwrap();
    let db = reopen(db, &path);
    let r = db.begin_read().unwrap();
    let all = collect(r.table("t").unwrap().iter());
    assert_eq!(
        all,
        vec![
            (key(1).to_vec(), b"committed".to_vec()),
            (key(2).to_vec(), b"before".to_vec())
        ]
    );
    drop(r);
    db.verify().unwrap();
}

/// Drops the file's pages from the kernel's page cache (`Storage::drop_cached`; none is
/// mapped or dirty: the handle that wrote them is closed and the file synced).
fn drop_cached(path: &Path) {
    let f = FileStorage::open(path, false, false).unwrap();
    f.sync().unwrap();
    f.drop_cached(0, f.len().unwrap()).unwrap();
}

#[test]
fn a_transaction_beyond_memory_writes_out_its_copies_of_cold_pages_as_it_goes() {
    // Frames and readahead off: the file is mapped, and its free pages are cold once
    // dropped from the page cache, as beyond memory. No compaction at the close: the free
    // pages stay.
    let options = || {
        options()
            .frames_bytes(0)
            .readahead(false)
            .compact_on_close(false)
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Database::open(&path, options()).unwrap();
    const N: u32 = 20_000;
    // Another table's 20 MB of leaves, then as many of this one's; the other is dropped: its
    // pages, before this table's in the file, are free.
    for table in ["filler", "t"] {
        let mut w = db.begin_write().unwrap();
        w.create_table(table).unwrap();
        let mut t = w.table(table).unwrap();
        for i in 0..N {
            t.put(&key(i), &value(i)).unwrap();
        }
        w.commit().unwrap();
    }
    let mut w = db.begin_write().unwrap();
    assert!(w.delete_table("filler").unwrap());
    w.commit().unwrap();
    db.checkpoint().unwrap();
    drop(db);
    drop_cached(&path);

    // One transaction changes a record in every leaf (four records a leaf): each leaf's copy
    // goes to a cold free page, about 5,000 of them (20 MB) against a bound of 4 MiB in owned
    // buffers.
    let db = Database::open(&path, options()).unwrap();
    let changed = |i: u32| i % 4 == 1;
    let new = |i: u32, round: u8| {
        let mut v = value(i);
        v[4..8].copy_from_slice(&[b'n', b'e', b'w', round]);
        v
    };
    let write_all = |db: &Database, round: u8, commit: bool| {
        let mut w = db.begin_write().unwrap();
        let mut t = w.table("t").unwrap();
        for i in (0..N).filter(|&i| changed(i)) {
            assert!(t.put(&key(i), &new(i, round)).unwrap());
        }
        if commit {
            w.commit().unwrap();
        }
    };
    write_all(&db, 1, true);
    let spilled = db.stats().unwrap().commits.cold_pages_spilled;
    assert!(spilled > 1024, "{spilled} copies of cold pages written out");
    let check = |db: &Database| {
        let r = db.begin_read().unwrap();
        let t = r.table("t").unwrap();
        assert_eq!(t.len().unwrap(), u64::from(N));
        for i in 0..N {
            let want = if changed(i) { new(i, 1) } else { value(i) };
            assert_eq!(t.get(&key(i)).unwrap(), Some(&want[..]), "key {i}");
        }
    };
    check(&db);
    db.verify().unwrap();

    // Cold again, and a transaction that writes its copies out the same way, then ends
    // without a commit: what it wrote is in free pages only.
    drop(db);
    drop_cached(&path);
    let db = Database::open(&path, options()).unwrap();
    write_all(&db, 2, false);
    let stats = db.stats().unwrap().commits;
    assert_eq!(stats.aborts, 1);
    assert!(stats.cold_pages_spilled > 1024, "{stats:?}");
    check(&db);
    db.verify().unwrap();
    let db = reopen(db, &path);
    check(&db);
    db.verify().unwrap();
}
