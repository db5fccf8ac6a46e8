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

/// `Stats::commits`: what the handle's write transactions did, counted since it was opened.
#[test]
fn stats_count_commits_aborts_and_failures() {
    use larchdb::storage::FaultStorage;
    use std::sync::Arc;
    for (dir, options) in both() {
        let logged = options.log;
        let path = dir.path().join("db");
        // Checkpoints counted are the ones asked for: none when the writer pauses.
        let options = options.idle_checkpoint_millis(0);
        let db = Database::open(&path, options.clone()).unwrap();
        assert_eq!(db.stats().unwrap().commits, larchdb::CommitStats::default());
        let mut w = db.begin_write().unwrap();
        w.create_table("t").unwrap();
        w.commit().unwrap();
        for i in 0u8..5 {
            db.put(&[i], b"v").unwrap();
        }
        db.begin_write().unwrap().commit().unwrap(); // nothing to write
        db.begin_write().unwrap().abort();
        let mut w = db.begin_write().unwrap();
        w.table("t").unwrap().put(b"k", b"v").unwrap();
        drop(w); // an abort too
        let c = db.stats().unwrap().commits;
        assert_eq!(c.commits, 7, "{c:?}");
        assert_eq!(c.aborts, 2, "{c:?}");
        assert_eq!(c.failed_commits, 0);
        if logged {
            // The first transaction on a new log writes pages, and so does a change of the
            // catalog (the default table's creation); the other puts go to the log, each
            // synced (`Immediate`, the default).
            assert_eq!((c.page_commits, c.logged_commits), (2, 4), "{c:?}");
            assert_eq!(c.log_syncs, 4, "{c:?}");
        } else {
            assert_eq!((c.page_commits, c.logged_commits), (6, 0), "{c:?}");
            assert_eq!(c.log_syncs, 0);
        }
        assert_eq!(c.checkpoints, 0);
        // The engine's own commits are not the application's, nor aborts.
        db.sync().unwrap();
        db.checkpoint().unwrap();
        let after = db.stats().unwrap().commits;
        assert_eq!(after.checkpoints, 1);
        assert_eq!(
            (after.commits, after.aborts, after.page_commits),
            (c.commits, c.aborts, c.page_commits),
            "{after:?}"
        );
        drop(db);
        // Counted per handle: a reopen starts from zero.
        let db = Database::open(&path, options).unwrap();
        assert_eq!(db.stats().unwrap().commits.commits, 0);
    }

    // A commit that fails (the disk is full) is counted as failed, not as a commit.
    let storage = FaultStorage::new();
    let db = Database::open_storage(Arc::new(storage.clone()), Options::default()).unwrap();
    db.put(b"a", b"1").unwrap();
    storage.set_space_limit(Some(storage.contents().len() as u64));
    let mut w = db.begin_write().unwrap();
    let r = (|| {
        let mut t = w.default_table()?;
        for i in 0u32..2000 {
            t.put(&i.to_be_bytes(), &[1; 500])?;
        }
        Ok::<_, Error>(())
    })();
    let r = r.and_then(|()| w.commit());
    assert!(matches!(r, Err(Error::DiskFull)), "{r:?}");
    let c = db.stats().unwrap().commits;
    assert_eq!((c.commits, c.failed_commits, c.aborts), (1, 1, 0), "{c:?}");
}

/// `Stats::oldest_reader` and the pages it keeps from reuse.
#[test]
fn stats_show_what_the_oldest_reader_pins() {
    let dir = tempfile::tempdir().unwrap();
    // Pages only: each commit rewrites the leaves the reader then pins.
    let db = Database::open(dir.path().join("db"), Options::default().log(false)).unwrap();
    let mut w = db.begin_write().unwrap();
    let mut t = w.default_table().unwrap();
    for i in 0u32..20_000 {
        t.put(&i.to_be_bytes(), &[1; 100]).unwrap();
    }
    w.commit().unwrap();
    let s = db.stats().unwrap();
    assert_eq!((s.oldest_reader, s.oldest_reader_pages), (None, 0));

    let reader = db.begin_read().unwrap();
    let held = reader.id();
    for round in 0..3u8 {
        let mut w = db.begin_write().unwrap();
        let mut t = w.default_table().unwrap();
        for i in 0u32..20_000 {
            t.put(&i.to_be_bytes(), &[round; 100]).unwrap();
        }
        w.commit().unwrap();
    }
    let s = db.stats().unwrap();
    assert_eq!(s.oldest_reader, Some(held));
    // Every leaf was rewritten three times since: the old trees wait for the reader.
    assert!(s.leaf_pages > 100, "{s:?}");
    assert!(
        s.oldest_reader_pages >= 2 * s.leaf_pages && s.oldest_reader_pages <= s.pending_pages,
        "{} pinned, {} pending, {} leaves",
        s.oldest_reader_pages,
        s.pending_pages,
        s.leaf_pages
    );
    drop(reader);
    db.put(b"x", b"y").unwrap();
    let s = db.stats().unwrap();
    assert_eq!((s.oldest_reader, s.oldest_reader_pages), (None, 0));
}

/// `Stats`' entry counts are the newest commit's, also with the log, where the commits since
/// the last checkpoint are in the overlay and not yet in the tree the walk counts (the C API's
/// tests met 2000 entries after every one was deleted through the log).
#[test]
fn stats_count_the_newest_commits_entries() {
    for (dir, options) in both() {
        let db = Database::open(dir.path().join("db"), options.compact_on_close(false)).unwrap();
        let mut w = db.begin_write().unwrap();
        w.create_table("t").unwrap();
        for i in 0..500u32 {
            w.table("t").unwrap().put(&i.to_be_bytes(), b"v").unwrap();
        }
        w.commit().unwrap();
        db.put(b"k", b"v").unwrap();
        // Small commits: through the log, with it.
        for i in 0..300u32 {
            let mut w = db.begin_write().unwrap();
            assert!(w.table("t").unwrap().delete(&i.to_be_bytes()).unwrap());
            w.commit().unwrap();
        }
        db.put(b"k2", b"v").unwrap();
        let s = db.stats().unwrap();
        assert_eq!(s.entries, 202);
        let t = s.tables.iter().find(|t| t.name == "t").unwrap();
        assert_eq!(t.entries, 200);
        db.checkpoint().unwrap();
        assert_eq!(db.stats().unwrap().entries, 202);
    }
}
