//! A read-only handle beside a writer that commits through the log (`Options::log`) sees each
//! commit when the writer publishes it, not only at checkpoints: it reads the log's records up
//! to the end the writer published in the lock file (docs/design/concurrency.md, "Readers in
//! other processes and the log"). Both handles are in this process here, on a real file and
//! its lock file, exactly as they would be in two; `shared_readers.rs` runs the writer in
//! another process.

mod common;

use larchdb::{Database, Durability, Options};
use std::collections::BTreeMap;
use std::path::Path;

const TABLE: &str = "t";

fn value(key: u32, round: u32) -> Vec<u8> {
    let mut v = format!("{key}:{round}:").into_bytes();
    v.resize(120 + (key % 7) as usize * 40, b'v');
    v
}

fn writer(path: &Path) -> Database {
    Database::open(path, common::small_log_options()).unwrap()
}

fn reader(path: &Path) -> Database {
    Database::open(path, Options::default().read_only(true)).unwrap()
}

/// A logging writer on a new database at `path` with table `TABLE`, and a reader beside it.
fn writer_and_reader(path: &Path) -> (Database, Database) {
    let db = writer(path);
    common::create_table(&db, TABLE);
    (db, reader(path))
}

/// One commit: a put of `key`, or its deletion every 9th round, with the durability `i`
/// picks; the model follows.
fn commit_one(db: &Database, model: &mut BTreeMap<Vec<u8>, Vec<u8>>, key: u32, i: u32) {
    let mut w = db.begin_write().unwrap();
    {
        let mut t = w.table(TABLE).unwrap();
        let k = key.to_be_bytes().to_vec();
        if i % 9 == 8 {
            t.delete(&k).unwrap();
            model.remove(&k);
        } else {
            let v = value(key, i);
            t.put(&k, &v).unwrap();
            model.insert(k, v);
        }
    }
    let d = match i % 50 {
        0 => Durability::Immediate,
        1..=5 => Durability::Bounded,
        _ => Durability::None,
    };
    w.commit_with(d).unwrap();
}

#[test]
fn a_read_only_handle_sees_each_commit_through_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let (db, ro) = writer_and_reader(&path);
    let mut model = BTreeMap::new();
    // Held from the start: what it reads never changes.
    let held = ro.begin_read().unwrap();
    let held_id = held.id();
    assert_eq!(held.table(TABLE).unwrap().len().unwrap(), 0);
    let mut renewed = ro.begin_read().unwrap();
    // About 7 MB of log: several checkpoints, and the six-segment ring goes round.
    for i in 0..24_000u32 {
        let key = i.wrapping_mul(2_654_435_761) % 5_000;
        commit_one(&db, &mut model, key, i);
        let newest = db.begin_read().unwrap().id();
        if i % 7 == 0 {
            let r = ro.begin_read().unwrap();
            assert_eq!(r.id(), newest, "commit {i}: the reader is behind");
            let t = r.table(TABLE).unwrap();
            let k = key.to_be_bytes();
            assert_eq!(
                t.get(&k).unwrap(),
                model.get(&k[..]).map(|v| &v[..]),
                "commit {i}: key {key}"
            );
        }
        if i % 3 == 0 {
            renewed.renew();
            assert_eq!(renewed.id(), newest, "commit {i}: renew stayed behind");
        }
        if i % 4_000 == 3_999 {
            let r = ro.begin_read().unwrap();
            common::assert_holds(&r.table(TABLE).unwrap(), &model, "the reader's table");
        }
    }
    assert_eq!(held.id(), held_id);
    assert_eq!(
        held.table(TABLE).unwrap().len().unwrap(),
        0,
        "held snapshot changed"
    );
    drop(held);
    drop(renewed);
    // The writer goes away without a last checkpoint (as a crash would leave it), and the
    // reader still reads everything it published.
    drop(db);
    let r = ro.begin_read().unwrap();
    common::assert_holds(&r.table(TABLE).unwrap(), &model, "after the writer's drop");
    drop(r);
    // A new writer replays the log and goes on; the reader follows it too.
    let db = writer(&path);
    for i in 24_000..26_000u32 {
        commit_one(&db, &mut model, i % 5_000, i);
    }
    let newest = db.begin_read().unwrap().id();
    let r = ro.begin_read().unwrap();
    assert_eq!(r.id(), newest);
    common::assert_holds(
        &r.table(TABLE).unwrap(),
        &model,
        "after the writer's reopen",
    );
    drop(r);
    // A writer that compacts at close: the reader moves to the last tree.
    drop(db);
    let db = Database::open(&path, Options::default().log(true)).unwrap();
    for i in 26_000..26_100u32 {
        commit_one(&db, &mut model, i % 5_000, i);
    }
    drop(db);
    let r = ro.begin_read().unwrap();
    common::assert_holds(&r.table(TABLE).unwrap(), &model, "after a compacting close");
    drop(r);
    assert!(ro.verify_all().unwrap().is_clean());
    // A reader opened now reads the same.
    let fresh = reader(&path);
    let r = fresh.begin_read().unwrap();
    common::assert_holds(&r.table(TABLE).unwrap(), &model, "a new reader");
}

/// A reader that held an old snapshot while the writer's log went round its ring several
/// times: its next read starts from the newest checkpoint, not from where it stopped.
#[test]
fn a_reader_far_behind_starts_from_the_newest_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let (db, ro) = writer_and_reader(&path);
    let mut model = BTreeMap::new();
    for i in 0..100u32 {
        commit_one(&db, &mut model, i, i);
    }
    let old = ro.begin_read().unwrap();
    let old_model = model.clone();
    common::assert_holds(&old.table(TABLE).unwrap(), &old_model, "first look");
    for i in 100..30_000u32 {
        commit_one(&db, &mut model, i % 3_000, i);
    }
    let r = ro.begin_read().unwrap();
    assert_eq!(r.id(), db.begin_read().unwrap().id());
    common::assert_holds(
        &r.table(TABLE).unwrap(),
        &model,
        "after the ring went round",
    );
    common::assert_holds(&old.table(TABLE).unwrap(), &old_model, "the old snapshot");
}

/// The lock file's published end is what a reader reads to: a writer's commits that a
/// reader opened before the writer are seen, and a reader opened after a writer that wrote
/// no log reads none.
#[test]
fn readers_and_writers_opened_in_any_order() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    // A database written without the log first.
    let db = Database::open(&path, Options::default()).unwrap();
    common::create_table(&db, TABLE);
    let mut model = BTreeMap::new();
    for i in 0..50u32 {
        commit_one(&db, &mut model, i, i);
    }
    let ro = reader(&path);
    drop(db);
    let r = ro.begin_read().unwrap();
    common::assert_holds(&r.table(TABLE).unwrap(), &model, "pages only");
    drop(r);
    // Then a writer through the log, opened after the reader.
    let db = writer(&path);
    for i in 50..2_000u32 {
        commit_one(&db, &mut model, i % 400, i);
        if i % 97 == 0 {
            let r = ro.begin_read().unwrap();
            assert_eq!(r.id(), db.begin_read().unwrap().id());
        }
    }
    let r = ro.begin_read().unwrap();
    common::assert_holds(&r.table(TABLE).unwrap(), &model, "through the log");
    let late = reader(&path);
    let r2 = late.begin_read().unwrap();
    assert_eq!(r2.id(), r.id());
    common::assert_holds(&r2.table(TABLE).unwrap(), &model, "a reader opened late");
}

/// A read-only handle beside a writer whose sequential batches leave only a mark in the log
/// (`Durability::None`, 64 appends or more: they write their pages) between one-put commits:
/// every read sees the newest commit, batches and puts alike (a follower that reads a mark
/// moves to the batch's tree, published before any record after it), and a writer
/// reopened after a drop without its last checkpoint replays past the marks.
#[test]
fn a_read_only_handle_follows_the_log_across_marks() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let (db, ro) = writer_and_reader(&path);
    let mut model = BTreeMap::new();
    let mut next = 0u32;
    for round in 0..300u32 {
        if round % 3 == 0 {
            let mut w = db.begin_write().unwrap();
            {
                let mut t = w.table(TABLE).unwrap();
                for _ in 0..100 {
                    next += 1;
                    let k = (0x8000_0000 + next).to_be_bytes().to_vec();
                    let v = value(next, round);
                    t.append(&k, &v).unwrap();
                    model.insert(k, v);
                }
            }
            w.commit_with(Durability::None).unwrap();
        } else {
            commit_one(&db, &mut model, round % 500, round);
        }
        let newest = db.begin_read().unwrap().id();
        let r = ro.begin_read().unwrap();
        assert_eq!(r.id(), newest, "round {round}: the reader is behind");
        if round % 25 == 0 {
            common::assert_holds(&r.table(TABLE).unwrap(), &model, "the reader's table");
        }
    }
    let marked = db.stats().unwrap().commits.marked_commits;
    assert!(marked > 50, "{marked} commits left a mark");
    // Gone without a last checkpoint, as after a crash: a new writer replays from its
    // checkpoint, across the marks after it, and the reader follows it.
    drop(db);
    let db = writer(&path);
    for round in 300..400u32 {
        commit_one(&db, &mut model, round % 500, round);
    }
    let w = db.begin_read().unwrap();
    common::assert_holds(&w.table(TABLE).unwrap(), &model, "the reopened writer");
    let r = ro.begin_read().unwrap();
    assert_eq!(r.id(), w.id());
    common::assert_holds(
        &r.table(TABLE).unwrap(),
        &model,
        "the reader after the reopen",
    );
}
