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
