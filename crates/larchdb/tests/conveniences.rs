//! The simple case: the default table and `Database::get`/`put`/`delete`; and a write
//! transaction's base read while it writes (`WriteTxn::read_base`).

mod common;

use larchdb::{Database, Error, Options, DEFAULT_TABLE};

fn both() -> [(tempfile::TempDir, Options); 2] {
    [
        (tempfile::tempdir().unwrap(), Options::default()),
        (tempfile::tempdir().unwrap(), Options::default().log(true)),
    ]
}

#[test]
fn get_put_delete_on_the_default_table() {
    for (dir, options) in both() {
        let path = dir.path().join("db");
        let db = Database::open(&path, options.clone()).unwrap();
        // Nothing yet: no table, reads are empty, a delete changes nothing.
        assert_eq!(db.get(b"a").unwrap(), None);
        assert!(!db.delete(b"a").unwrap());
        assert!(db.begin_read().unwrap().list_tables().unwrap().is_empty());
        assert!(db
            .begin_read()
            .unwrap()
            .default_table()
            .unwrap()
            .is_empty()
            .unwrap());

        db.put(b"a", b"1").unwrap();
        db.put(b"b", b"2").unwrap();
        db.put(b"a", b"3").unwrap();
        assert_eq!(db.get(b"a").unwrap(), Some(b"3".to_vec()));
        assert_eq!(
            db.begin_read().unwrap().list_tables().unwrap(),
            [DEFAULT_TABLE]
        );
        assert!(db.delete(b"b").unwrap());
        assert!(!db.delete(b"b").unwrap());

        // Bad input: a clear error, nothing written.
        let long = vec![7u8; 100_000];
        assert!(matches!(
            db.put(&long, b"v"),
            Err(Error::KeyTooLarge { .. })
        ));
        assert_eq!(db.get(&long).unwrap(), None);
        assert!(!db.delete(&long).unwrap());

        // The same table through a transaction, by either name.
        let mut w = db.begin_write().unwrap();
        w.default_table().unwrap().put(b"c", b"4").unwrap();
        assert_eq!(w.table(DEFAULT_TABLE).unwrap().len().unwrap(), 2);
        w.commit().unwrap();
        drop(db);

        let db = Database::open(&path, options.clone()).unwrap();
        let r = db.begin_read().unwrap();
        let t = r.default_table().unwrap();
        let got = common::collect(t.iter());
        assert_eq!(
            got,
            [
                (b"a".to_vec(), b"3".to_vec()),
                (b"c".to_vec(), b"4".to_vec())
            ]
        );
        drop(r);
        drop(db);

        // A read-only handle reads, and refuses writes with its own error.
        let ro = Database::open(&path, options.read_only(true)).unwrap();
        assert_eq!(ro.get(b"c").unwrap(), Some(b"4".to_vec()));
        assert!(matches!(ro.put(b"d", b"5"), Err(Error::ReadOnly)));
        assert!(matches!(ro.delete(b"a"), Err(Error::ReadOnly)));
    }
}

#[test]
fn a_table_copied_into_another_in_one_transaction() {
    for (dir, options) in both() {
        let db = Database::open(dir.path().join("db"), options).unwrap();
        let mut w = db.begin_write().unwrap();
        w.create_table("a").unwrap();
        let mut a = w.table("a").unwrap();
        for i in 0u32..3000 {
            a.put(&i.to_be_bytes(), &[i as u8; 300]).unwrap();
        }
        w.commit().unwrap();

        let mut w = db.begin_write().unwrap();
        w.create_table("b").unwrap();
        // A write to `a` in this transaction: the base does not see it.
        w.table("a").unwrap().put(b"new", b"x").unwrap();
        let base = w.read_base();
        let from = base.table("a").unwrap();
        assert_eq!(from.get(b"new").unwrap(), None);
        assert!(matches!(base.table("b"), Err(Error::TableNotFound(_))));
        let mut b = w.table("b").unwrap();
        for e in from.iter() {
            let (k, v) = e.unwrap();
            b.put(k, v).unwrap();
        }
        assert_eq!(b.len().unwrap(), 3000);
        w.commit().unwrap();

        // The base outlives the transaction and keeps its pages while later commits free
        // and reuse others.
        for round in 0u32..5 {
            let mut w = db.begin_write().unwrap();
            let mut a = w.table("a").unwrap();
            for i in 0u32..3000 {
                a.put(&i.to_be_bytes(), &[(round + 7) as u8; 300]).unwrap();
            }
            w.commit().unwrap();
        }
        db.checkpoint().unwrap();
        assert_eq!(from.len().unwrap(), 3000);
        for e in from.iter() {
            let (k, v) = e.unwrap();
            let i = u32::from_be_bytes(k.try_into().unwrap());
            assert_eq!(v, &[i as u8; 300][..]);
        }
        drop(base);

        let r = db.begin_read().unwrap();
        let b = r.table("b").unwrap();
        assert_eq!(b.len().unwrap(), 3000);
        assert_eq!(b.get(&5u32.to_be_bytes()).unwrap(), Some(&[5u8; 300][..]));
        assert!(r.table("a").unwrap().get(b"new").unwrap().is_some());
        let report = db.verify_all().unwrap();
        assert!(report.is_clean(), "{:?}", report.problems);
    }
}

/// A read transaction that outlives its `Database` keeps reading its snapshot, and does not
/// keep the database locked: the next writer opens it, rewrites and compacts it, and never
/// reuses a page the old snapshot reaches.
#[test]
fn a_reader_outliving_its_database_does_not_hold_the_write_lock() {
    for options in [Options::default(), Options::default().log(true)] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let db = Database::open(&path, options.clone()).unwrap();
        let mut w = db.begin_write().unwrap();
        w.create_table("t").unwrap();
        let mut t = w.table("t").unwrap();
        for i in 0u32..5000 {
            t.put(&i.to_be_bytes(), &[1u8; 200]).unwrap();
        }
        w.commit().unwrap();
        let mut old = db.begin_read().unwrap();
        drop(db);

        let db = Database::open(&path, options.clone()).unwrap();
        for round in 2u8..6 {
            let mut w = db.begin_write().unwrap();
            let mut t = w.table("t").unwrap();
            t.clear().unwrap();
            for i in 0u32..5000 {
                t.put(&i.to_be_bytes(), &[round; 200]).unwrap();
            }
            w.commit().unwrap();
        }
        db.compact().unwrap();
        old.renew();
        let t = old.table("t").unwrap();
        assert_eq!(t.len().unwrap(), 5000);
        for e in t.iter() {
            assert_eq!(e.unwrap().1, &[1u8; 200][..]);
        }
        drop(old);
        // The old handle's slot is gone with its last reader: pages it held are reused.
        let mut w = db.begin_write().unwrap();
        w.table("t").unwrap().put(b"k", b"v").unwrap();
        w.commit().unwrap();
        let report = db.verify_all().unwrap();
        assert!(report.is_clean(), "{:?}", report.problems);
        assert_eq!(db.stats().unwrap().other_readers, 0);
    }
}
