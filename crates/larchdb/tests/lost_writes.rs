//! Lost and misdirected writes: a page write that never reached the disk leaves an older,
//! internally valid version of the page (right checksum, right page id); a misdirected one puts
//! a valid page where another belongs. Every reference records the commit that wrote the page
//! it points to, so both are reported as `Corrupted` on read; a stale value is never returned.

use larchdb::storage::FaultStorage;
use larchdb::{Database, Error, Options};
use std::sync::Arc;

const PAGE: usize = 4096;

fn open(bytes: Vec<u8>) -> larchdb::Result<Database> {
    let s = FaultStorage::new();
    s.set_contents(bytes);
    Database::open_storage(Arc::new(s), Options::default())
}

fn value(round: u32, i: u32) -> Vec<u8> {
    let len = if i.is_multiple_of(40) { 6000 } else { 60 };
    vec![(round * 31 + i) as u8; len]
}

/// Writes round `round` of values over 400 keys in one commit.
fn commit_round(db: &Database, round: u32) {
    let mut w = db.begin_write().unwrap();
    w.ensure_table("t").unwrap();
    {
        let mut t = w.table("t").unwrap();
        for i in 0..400u32 {
            t.put(&i.to_be_bytes(), &value(round, i)).unwrap();
        }
    }
    w.commit().unwrap();
}

/// Reads everything; returns Err on the first error, and checks every value it does read is
/// the newest one.
fn read_all(bytes: Vec<u8>, round: u32) -> larchdb::Result<()> {
    let db = open(bytes)?;
    let r = db.begin_read()?;
    let t = r.table("t")?;
    for e in t.iter() {
        let (k, v) = e?;
        let i = u32::from_be_bytes(k.try_into().unwrap());
        assert_eq!(v, value(round, i).as_slice(), "stale value for key {i}");
    }
    for i in 0..400u32 {
        let v = t
            .get(&i.to_be_bytes())?
            .expect("key missing without an error");
        assert_eq!(v, value(round, i).as_slice(), "stale value for key {i}");
    }
    Ok(())
}

fn two_versions() -> (Vec<u8>, Vec<u8>) {
    let s = FaultStorage::new();
    let db = Database::open_storage(Arc::new(s.clone()), Options::default()).unwrap();
    commit_round(&db, 1);
    commit_round(&db, 2);
    let before = s.contents();
    commit_round(&db, 3);
    let after = s.contents();
    (before, after)
}

#[test]
fn a_lost_page_write_is_caught_never_read_as_current() {
    let (before, after) = two_versions();
    let pages = after.len() / PAGE;
    let mut changed = 0;
    let mut detected = 0;
    for p in 2..pages {
        let range = p * PAGE..(p + 1) * PAGE;
        let old = before
            .get(range.clone())
            .map(|b| b.to_vec())
            .unwrap_or_else(|| vec![0; PAGE]);
        if old == after[range.clone()] {
            continue;
        }
        changed += 1;
        // The last commit's write of page p was lost: the disk still has the older version.
        let mut lost = after.clone();
        lost[range].copy_from_slice(&old);
        match read_all(lost.clone(), 3) {
            Ok(()) => {
                // Only a page nothing reaches (free space) can be lost unnoticed, and then
                // verify must agree that nothing is wrong.
                if let Ok(db) = open(lost) {
                    db.verify()
                        .expect("an undetected lost write must be harmless");
                }
            }
            Err(Error::Corrupted { .. }) => detected += 1,
            Err(e) => panic!("page {p}: untyped failure {e}"),
        }
    }
    assert!(changed > 20, "only {changed} pages changed");
    assert!(
        detected > changed / 2,
        "{detected} of {changed} lost writes detected"
    );
}

#[test]
fn a_misdirected_page_write_is_caught() {
    let (_, after) = two_versions();
    let pages = after.len() / PAGE;
    let mut detected = 0;
    for p in 2..pages - 1 {
        // Page p's content landed on page p+1 as well (p+1's own write was lost).
        let mut bad = after.clone();
        let src = after[p * PAGE..(p + 1) * PAGE].to_vec();
        bad[(p + 1) * PAGE..(p + 2) * PAGE].copy_from_slice(&src);
        match read_all(bad.clone(), 3) {
            // Page p+1 was free space: nothing reads it, and verify agrees nothing is wrong.
            Ok(()) => open(bad)
                .unwrap()
                .verify()
                .map(|_| ())
                .expect("an undetected misdirected write must be harmless"),
            Err(Error::Corrupted { .. }) => detected += 1,
            Err(e) => panic!("page {p}: untyped failure {e}"),
        }
    }
    assert!(
        detected > pages / 4,
        "{detected} of {pages} misdirected writes detected"
    );
}
