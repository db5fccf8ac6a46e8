//! A meta page write torn at any byte. A device writes a sector whole or not at all, and the
//! meta fields are the first 152 bytes of the page: a tear past them changes nothing the
//! checksum covers, and the new commit wins. A tear inside them cannot come from a crash on
//! such a device; it is damage like a flipped bit, and a damaged newest slot may hold a commit
//! whose pages the file holds (here, the one being written): the open says so
//! (`Error::WouldLoseData`) instead of falling back in silence, and a recovering open
//! (`Options::recover`) opens the previous commit, nothing earlier lost.

use larchdb::storage::FaultStorage;
use larchdb::{Database, Durability, Error, Options};
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

fn open(bytes: Vec<u8>, options: Options) -> Result<Database, Error> {
    let s = FaultStorage::new();
    s.set_contents(bytes);
    Database::open_storage(Arc::new(s), options)
}

fn entries(db: &Database) -> u64 {
    db.begin_read()
        .unwrap()
        .table("t")
        .map(|t| t.len().unwrap())
        .unwrap_or(0)
}

#[test]
fn a_meta_write_torn_inside_its_fields_is_refused_and_recovers_the_previous_commit() {
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
    let mut refused = 0;
    torn_points.extend(0..200); // every byte of the 184-byte meta fields and a little past
    for cut in torn_points {
        // The new meta reached the disk up to `cut`; the old bytes remain after it.
        let mut bytes = after.clone();
        bytes[meta + cut..meta + PAGE].copy_from_slice(&before[meta + cut..meta + PAGE]);
        // If the bytes past the cut happen to be equal in both versions, the write is whole.
        let whole = bytes[meta..meta + 184] == after[meta..meta + 184];
        if whole {
            let db = open(bytes, Options::default()).unwrap();
            assert_eq!(
                entries(&db),
                21,
                "cut at {cut}: the complete meta write must win"
            );
            db.verify().unwrap();
            continue;
        }
        // Nothing of the new fields reached the disk: the slot holds the older commit, intact,
        // and the previous commit wins (the one being written was never acknowledged).
        if bytes[meta..meta + 184] == before[meta..meta + 184] {
            let db = open(bytes, Options::default()).unwrap();
            assert_eq!(
                entries(&db),
                20,
                "cut at {cut}: the previous commit must win"
            );
            db.verify().unwrap();
            continue;
        }
        match open(bytes.clone(), Options::default()) {
            Err(Error::WouldLoseData { damage, lost }) => {
                assert!(damage.contains(&format!("meta slot {slot}")), "{damage}");
                assert!(lost.contains("intact page"), "{lost}");
            }
            other => panic!(
                "cut at {cut}: expected WouldLoseData, got {:?}",
                other.err()
            ),
        }
        let db = open(bytes, Options::default().recover(true)).unwrap();
        assert_eq!(
            entries(&db),
            20,
            "cut at {cut}: the previous commit, in full"
        );
        let recovery = db.recovery().expect("the damage is reported");
        assert_eq!(recovery.given_up.len(), 1);
        assert_eq!(recovery.kept, None, "no file to keep copies beside");
        db.verify().unwrap();
        refused += 1;
    }
    assert!(
        refused > 100,
        "only {refused} torn writes differed from the whole one"
    );
}
