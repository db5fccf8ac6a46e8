//! Savepoints inside a write transaction (`WriteTxn::savepoint`, `rollback_to`, `release`):
//! what the model test (tests/model.rs) does not reach: table properties, typed tables, blind
//! writes and a logged transaction turning to pages between the savepoint and the rollback,
//! savepoints that are not live, and what a commit after a rollback leaves on disk.

mod common;

use larchdb::{Database, Error, Options, TableDefinition};

fn both() -> [(tempfile::TempDir, Options); 2] {
    [
        (tempfile::tempdir().unwrap(), Options::default()),
        (tempfile::tempdir().unwrap(), Options::default().log(true)),
    ]
}

#[test]
fn rollback_restores_tables_properties_and_counts() {
    for (dir, options) in both() {
        let path = dir.path().join("db");
        let db = Database::open(&path, options.clone()).unwrap();
        let mut w = db.begin_write().unwrap();
        w.create_table("keep").unwrap();
        w.create_table("drop").unwrap();
        w.set_table_properties("keep", b"props-1").unwrap();
        for i in 0u32..3000 {
            w.table("keep")
                .unwrap()
                .put(&i.to_be_bytes(), &[i as u8; 40])
                .unwrap();
            w.table("drop")
                .unwrap()
                .put(&i.to_be_bytes(), &vec![7u8; 300])
                .unwrap();
        }
        w.set_table_properties("drop", b"dropped-props").unwrap();
        w.commit().unwrap();
        let committed = common::contents(&db);

        // Logged handles start this transaction through the log (puts into the batch); the
        // properties change turns it to pages half way.
        let mut w = db.begin_write().unwrap();
        let sp = w.savepoint().unwrap();
        {
            let mut t = w.table("keep").unwrap();
            t.set(&5u32.to_be_bytes(), b"blind").unwrap();
            t.put(&9000u32.to_be_bytes(), b"new").unwrap();
            assert!(t.delete(&7u32.to_be_bytes()).unwrap());
            assert_eq!(
                t.delete_range(&100u32.to_be_bytes()[..]..&2000u32.to_be_bytes()[..])
                    .unwrap(),
                1900
            );
            assert_eq!(t.pop_last().unwrap().unwrap().1, b"new".to_vec());
            t.retain(|k, _| k[3] % 2 == 0).unwrap();
        }
        w.set_table_properties("keep", b"props-2").unwrap();
        assert!(w.delete_table("drop").unwrap());
        w.create_table("fresh").unwrap();
        w.table("fresh").unwrap().append(b"a", b"1").unwrap();
        assert_eq!(w.list_tables().unwrap(), ["fresh", "keep"]);

        w.rollback_to(&sp).unwrap();
        assert_eq!(w.list_tables().unwrap(), ["drop", "keep"]);
        assert_eq!(w.table("keep").unwrap().len().unwrap(), 3000);
        assert_eq!(w.table("drop").unwrap().len().unwrap(), 3000);
        // Still live: change again, roll back again.
        w.table("keep").unwrap().clear().unwrap();
        w.rollback_to(&sp).unwrap();
        // And changes after the rollback are kept.
        w.table("keep").unwrap().put(b"after", b"x").unwrap();
        w.commit().unwrap();

        let mut want = committed.clone();
        let keep = want.iter_mut().find(|t| t.0 == "keep").unwrap();
        keep.2.push((b"after".to_vec(), b"x".to_vec()));
        keep.2.sort();
        assert_eq!(common::contents(&db), want);
        let report = db.verify_all().unwrap();
        assert!(report.is_clean(), "{:?}", report.problems);
        drop(db);
        let db = Database::open(&path, options).unwrap();
        assert_eq!(common::contents(&db), want);
        let r = db.begin_read().unwrap();
        assert_eq!(r.table("keep").unwrap().len().unwrap(), 3001);
    }
}

#[test]
fn nested_savepoints_and_release() {
    for (dir, options) in both() {
        let db = Database::open(dir.path().join("db"), options).unwrap();
        let mut w = db.begin_write().unwrap();
        let outer = w.savepoint().unwrap();
        w.default_table().unwrap().put(b"a", b"1").unwrap();
        let middle = w.savepoint().unwrap();
        w.default_table().unwrap().put(b"b", b"2").unwrap();
        let inner = w.savepoint().unwrap();
        w.default_table().unwrap().put(b"a", b"3").unwrap();

        // Releasing the middle one releases the inner one too and keeps the changes; the
        // outer one still undoes all of them.
        w.release(middle).unwrap();
        assert!(matches!(w.release(inner), Err(Error::SavepointInvalid)));
        assert_eq!(
            w.default_table().unwrap().get(b"a").unwrap(),
            Some(&b"3"[..])
        );
        w.rollback_to(&outer).unwrap();
        assert!(w.list_tables().unwrap().is_empty());

        // Released: no savepoint is live, nothing is recorded, rollback_to refuses it.
        w.default_table().unwrap().put(b"c", b"4").unwrap();
        w.release(outer).unwrap();
        w.default_table().unwrap().put(b"d", b"5").unwrap();
        w.commit().unwrap();
        let r = db.begin_read().unwrap();
        let t = r.default_table().unwrap();
        assert_eq!(
            common::collect(t.iter()),
            [
                (b"c".to_vec(), b"4".to_vec()),
                (b"d".to_vec(), b"5".to_vec())
            ]
        );
    }
}

#[test]
fn a_savepoint_of_another_transaction_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().join("db"), Options::default()).unwrap();
    let mut w = db.begin_write().unwrap();
    let old = w.savepoint().unwrap();
    w.default_table().unwrap().put(b"a", b"1").unwrap();
    w.commit().unwrap();

    let mut w = db.begin_write().unwrap();
    let mine = w.savepoint().unwrap();
    w.default_table().unwrap().put(b"b", b"2").unwrap();
    assert!(matches!(w.rollback_to(&old), Err(Error::SavepointInvalid)));
    assert!(matches!(w.release(old), Err(Error::SavepointInvalid)));
    // The refusal changed nothing, and the transaction goes on.
    assert_eq!(w.default_table().unwrap().len().unwrap(), 2);
    w.rollback_to(&mine).unwrap();
    w.commit().unwrap();
    assert_eq!(db.get(b"a").unwrap(), Some(b"1".to_vec()));
    assert_eq!(db.get(b"b").unwrap(), None);
}

#[test]
fn typed_tables_roll_back_with_their_types() {
    const COUNTS: TableDefinition<&str, u64> = TableDefinition::new("counts");
    for (dir, options) in both() {
        let db = Database::open(dir.path().join("db"), options).unwrap();
        let mut w = db.begin_write().unwrap();
        let sp = w.savepoint().unwrap();
        w.open_table(COUNTS).unwrap().put("x", 1).unwrap();
        // The table and the record of its types go together.
        w.rollback_to(&sp).unwrap();
        assert!(w.list_tables().unwrap().is_empty());
        let mut t = w.open_table(COUNTS).unwrap();
        t.put("y", 2).unwrap();
        w.commit().unwrap();

        let mut w = db.begin_write().unwrap();
        let sp = w.savepoint().unwrap();
        let mut t = w.open_table(COUNTS).unwrap();
        t.put("y", 3).unwrap();
        t.put("z", 4).unwrap();
        w.rollback_to(&sp).unwrap();
        let t = w.open_table(COUNTS).unwrap();
        assert_eq!(t.get("y").unwrap(), Some(2));
        assert_eq!(t.get("z").unwrap(), None);
        assert_eq!(t.len().unwrap(), 1);
    }
}

#[test]
fn bad_input_is_not_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().join("db"), Options::default()).unwrap();
    let mut w = db.begin_write().unwrap();
    let sp = w.savepoint().unwrap();
    // Bad input is refused without failing the transaction, and is not recorded.
    let long = vec![0u8; 100_000];
    assert!(matches!(
        w.default_table().unwrap().put(&long, b"v"),
        Err(Error::KeyTooLarge { .. })
    ));
    w.default_table().unwrap().put(b"k", b"v").unwrap();
    assert!(matches!(
        w.default_table().unwrap().append(b"a", b"v"),
        Err(Error::AppendOutOfOrder)
    ));
    w.rollback_to(&sp).unwrap();
    assert!(w.list_tables().unwrap().is_empty());
    w.commit().unwrap();
    assert_eq!(db.get(b"k").unwrap(), None);
}

/// With the smallest memory budget (4 MiB), a transaction's undo records may hold 1 MiB in
/// memory; past it they go to a temporary file.
fn spilling() -> [(tempfile::TempDir, Options); 2] {
    both().map(|(dir, o)| (dir, o.log_segment_bytes(1 << 20).memory_budget(4 << 20)))
}

fn spills(db: &Database) -> u64 {
    db.stats().unwrap().commits.undo_spills
}

/// The entries of the default table, as a new reader sees them.
fn default_len(db: &Database) -> u64 {
    db.begin_read()
        .unwrap()
        .default_table()
        .unwrap()
        .len()
        .unwrap()
}

fn value(i: u32, round: u8) -> Vec<u8> {
    let mut v = vec![round; 300];
    v[..4].copy_from_slice(&i.to_be_bytes());
    v
}

/// A table's name and entries.
type Seen = (String, Vec<(Vec<u8>, Vec<u8>)>);

/// What the transaction sees of every table, in order.
fn seen(w: &mut larchdb::WriteTxn<'_>) -> Vec<Seen> {
    let names = w.list_tables().unwrap();
    names
        .into_iter()
        .map(|n| {
            let t = w.table(&n).unwrap();
            (n, common::collect(t.iter()))
        })
        .collect()
}

#[test]
fn undo_records_past_their_bound_go_to_a_file_and_come_back_in_order() {
    for (dir, options) in spilling() {
        let path = dir.path().join("db");
        let db = Database::open(&path, options.clone()).unwrap();
        let mut w = db.begin_write().unwrap();
        w.create_table("a").unwrap();
        w.create_table("b").unwrap();
        for i in 0u32..6000 {
            w.table("a")
                .unwrap()
                .put(&i.to_be_bytes(), &value(i, 1))
                .unwrap();
            w.table("b")
                .unwrap()
                .put(&i.to_be_bytes(), &value(i, 2))
                .unwrap();
        }
        w.set_table_properties("b", b"b-props").unwrap();
        w.commit().unwrap();

        let mut w = db.begin_write().unwrap();
        let start = seen(&mut w);
        let outer = w.savepoint().unwrap();
        // Overwrites and new keys: about 2.6 MB of old values and keys recorded.
        for i in 0u32..8000 {
            w.table("a")
                .unwrap()
                .put(&i.to_be_bytes(), &value(i, 3))
                .unwrap();
        }
        let middle_state = seen(&mut w);
        let middle = w.savepoint().unwrap();
        // A range and a whole table deleted, a table made and filled, a clear.
        assert_eq!(
            w.table("a")
                .unwrap()
                .delete_range(&1000u32.to_be_bytes()[..]..&7000u32.to_be_bytes()[..])
                .unwrap(),
            6000
        );
        assert!(w.delete_table("b").unwrap());
        w.create_table("c").unwrap();
        for i in 0u32..3000 {
            w.table("c")
                .unwrap()
                .append(&i.to_be_bytes(), &value(i, 4))
                .unwrap();
        }
        w.table("c").unwrap().clear().unwrap();
        w.set_table_properties("a", b"a-props").unwrap();

        // Back to the middle: the overwrites stay, the deletions are undone.
        w.rollback_to(&middle).unwrap();
        assert_eq!(seen(&mut w), middle_state);
        assert_eq!(w.table("a").unwrap().len().unwrap(), 8000);
        // More changes after it, then back to the start.
        for i in 0u32..8000 {
            w.table("a").unwrap().delete(&i.to_be_bytes()).unwrap();
        }
        w.rollback_to(&outer).unwrap();
        assert_eq!(seen(&mut w), start);
        assert_eq!(w.table("a").unwrap().len().unwrap(), 6000);
        assert_eq!(w.table("b").unwrap().len().unwrap(), 6000);
        w.table("a").unwrap().put(b"after", b"x").unwrap();
        w.commit().unwrap();
        assert!(
            spills(&db) >= 4,
            "the undo records should have gone to their file: {} spills",
            spills(&db)
        );

        let want = common::contents(&db);
        let a = &want.iter().find(|t| t.0 == "a").unwrap().2;
        assert_eq!(a.len(), 6001);
        let b = want.iter().find(|t| t.0 == "b").unwrap();
        assert_eq!(b.1, b"b-props");
        let report = db.verify_all().unwrap();
        assert!(report.is_clean(), "{:?}", report.problems);
        drop(db);
        let db = Database::open(&path, options).unwrap();
        assert_eq!(common::contents(&db), want);
    }
}

#[test]
fn a_released_savepoint_and_an_aborted_transaction_forget_their_records() {
    for (dir, options) in spilling() {
        let db = Database::open(dir.path().join("db"), options).unwrap();
        let mut w = db.begin_write().unwrap();
        // New keys: about 70 bytes of undo record each, 1.4 MB in all.
        let sp = w.savepoint().unwrap();
        for i in 0u32..20000 {
            w.default_table()
                .unwrap()
                .put(&i.to_be_bytes(), &value(i, 1))
                .unwrap();
        }
        w.release(sp).unwrap();
        // Nothing is recorded once released; a new savepoint starts from empty.
        let sp = w.savepoint().unwrap();
        w.default_table().unwrap().put(b"late", b"1").unwrap();
        w.rollback_to(&sp).unwrap();
        w.commit().unwrap();
        assert!(spills(&db) >= 1);
        assert_eq!(default_len(&db), 20000);

        let before = spills(&db);
        let mut w = db.begin_write().unwrap();
        let _sp = w.savepoint().unwrap();
        w.default_table().unwrap().clear().unwrap();
        drop(w);
        assert!(spills(&db) > before);
        assert_eq!(default_len(&db), 20000);
        let mut w = db.begin_write().unwrap();
        let sp = w.savepoint().unwrap();
        w.default_table().unwrap().put(b"x", b"y").unwrap();
        w.rollback_to(&sp).unwrap();
        w.commit().unwrap();
        assert_eq!(default_len(&db), 20000);
    }
}
