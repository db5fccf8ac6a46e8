//! A meta page write torn at any byte: the opener rejects the torn slot and uses the other one,
//! which holds the previous commit; nothing earlier is lost.

use larchdb::storage::FaultStorage;
use larchdb::{Database, Durability, Options};
use std::sync::Arc;

const PAGE: usize = 4096;

fn commit(db: &Database, n: u32) {
    let mut w = db.begin_write().unwrap();
    w.ensure_table("t").unwrap();
    w.table("t")
        .unwrap()
        .put(&n.to_be_bytes(), &vec![n as u8; 3000])
        .unwrap();
    w.commit_with(Durability::Immediate).unwrap();
}

fn open(bytes: Vec<u8>) -> Database {
    let s = FaultStorage::new();
    s.set_contents(bytes);
    Database::open_storage(Arc::new(s), Options::default()).expect("open after a torn meta write")
}

fn entries(db: &Database) -> u64 {
    db.begin_read()
        .unwrap()
        .table("t")
        .map(|t| t.len().unwrap())
        .unwrap_or(0)
}

#[test]
fn a_torn_meta_write_falls_back_to_the_previous_commit() {
    let s = FaultStorage::new();
    let db = Database::open_storage(Arc::new(s.clone()), Options::default()).unwrap();
    for n in 0..20 {
        commit(&db, n);
    }
    let before = s.contents();
    commit(&db, 20);
    let after = s.contents();
    drop(db);
    // The slot the last commit wrote is the one whose bytes changed.
    let slot = (0..2)
        .find(|&k| before[k * PAGE..(k + 1) * PAGE] != after[k * PAGE..(k + 1) * PAGE])
        .unwrap();
    let meta = slot * PAGE;
    let mut torn_points: Vec<usize> = (0..=PAGE).step_by(512).collect();
    let mut previous_won = 0;
    torn_points.extend(0..200); // every byte of the 144-byte meta fields and a little past
    for cut in torn_points {
        // The new meta reached the disk up to `cut`; the old bytes remain after it.
        let mut bytes = after.clone();
        bytes[meta + cut..meta + PAGE].copy_from_slice(&before[meta + cut..meta + PAGE]);
        // If the bytes past the cut happen to be equal in both versions, the write is whole.
        let whole = bytes[meta..meta + 144] == after[meta..meta + 144];
        let db = open(bytes);
        let n = entries(&db);
        if whole {
            assert_eq!(n, 21, "cut at {cut}: the complete meta write must win");
        } else {
            assert_eq!(n, 20, "cut at {cut}: the previous commit must win");
            previous_won += 1;
        }
        db.verify().unwrap();
    }
    assert!(
        previous_won > 100,
        "only {previous_won} torn writes differed from the whole one"
    );
}
