//! `WriteTable::set` in a logged database: the writes skip the tree lookup, and the entry
//! counts stay exact at every snapshot (readers older and newer than the blind writes, the
//! writer's own transaction, after a checkpoint, after the log is replayed).

use larchdb::{Database, Durability, Options};

fn key(i: u32) -> Vec<u8> {
    format!("key{i:08}").into_bytes()
}

fn count(db: &Database) -> u64 {
    db.begin_read().unwrap().table("t").unwrap().len().unwrap()
}

#[test]
fn blind_writes_keep_counts_exact_at_every_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Database::open(&path, Options::default().log(true)).unwrap();
    let mut w = db.begin_write().unwrap();
    w.create_table("t").unwrap();
    w.commit().unwrap();
    // 0..1000 in the tree.
    let mut w = db.begin_write().unwrap();
    {
        let mut t = w.table("t").unwrap();
        for i in 0..1000 {
            t.set(&key(i), b"tree").unwrap();
        }
    }
    w.commit().unwrap();
    db.checkpoint().unwrap();
    assert_eq!(count(&db), 1000);

    let before = db.begin_read().unwrap();
    // 500..1500 blind, one per commit: half of them in the tree already.
    let mut middle = None;
    for i in 500..1500 {
        let mut w = db.begin_write().unwrap();
        w.table("t").unwrap().set(&key(i), b"blind").unwrap();
        w.commit_with(Durability::None).unwrap();
        if i == 999 {
            middle = Some(db.begin_read().unwrap());
        }
    }
    assert_eq!(before.table("t").unwrap().len().unwrap(), 1000);
    assert_eq!(
        middle.as_ref().unwrap().table("t").unwrap().len().unwrap(),
        1000
    );
    assert_eq!(count(&db), 1500);
    // Asked again (the answers are kept), and from the older snapshots after the newest.
    assert_eq!(count(&db), 1500);
    assert_eq!(middle.unwrap().table("t").unwrap().len().unwrap(), 1000);

    // In one transaction: blind writes of keys in the tree, in the overlay and new, a
    // deletion of a blind one, a checked put over a blind one.
    let mut w = db.begin_write().unwrap();
    {
        let mut t = w.table("t").unwrap();
        t.set(&key(10), b"x").unwrap(); // tree
        t.set(&key(1200), b"x").unwrap(); // overlay
        t.set(&key(5000), b"x").unwrap(); // new
        t.set(&key(5000), b"y").unwrap(); // again
        t.set(&key(20), b"x").unwrap(); // tree, then deleted
        assert!(t.delete(&key(20)).unwrap());
        assert!(t.put(&key(30), b"x").unwrap()); // tree, checked
        t.set(&key(30), b"z").unwrap();
        assert_eq!(t.len().unwrap(), 1500);
        assert_eq!(t.get(&key(5000)).unwrap(), Some(&b"y"[..]));
    }
    w.commit().unwrap();
    assert_eq!(count(&db), 1500);
    assert!(before.table("t").unwrap().get(&key(20)).unwrap().is_some());
    drop(before);

    // An aborted transaction's blind writes leave no trace.
    let mut w = db.begin_write().unwrap();
    w.table("t").unwrap().set(&key(7000), b"gone").unwrap();
    drop(w);
    assert_eq!(count(&db), 1500);

    // The log replayed at open counts from the tree; a checkpoint counts exactly.
    drop(db);
    let db = Database::open(&path, Options::default().log(true)).unwrap();
    assert_eq!(count(&db), 1500);
    db.checkpoint().unwrap();
    assert_eq!(count(&db), 1500);
    let r = db.begin_read().unwrap();
    let t = r.table("t").unwrap();
    assert_eq!(t.iter().map(Result::unwrap).count(), 1500);
    assert_eq!(t.get(&key(20)).unwrap(), None);
    assert_eq!(t.get(&key(30)).unwrap(), Some(&b"z"[..]));
    drop(r);
    assert!(db.verify_all().unwrap().is_clean());
}

/// Without a log, `set` is `put` without its answer.
#[test]
fn set_without_a_log_is_put() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().join("db"), Options::default()).unwrap();
    let mut w = db.begin_write().unwrap();
    w.create_table("t").unwrap();
    {
        let mut t = w.table("t").unwrap();
        t.set(b"a", b"1").unwrap();
        t.set(b"a", b"2").unwrap();
        t.set(b"b", b"3").unwrap();
        assert_eq!(t.len().unwrap(), 2);
    }
    w.commit().unwrap();
    assert_eq!(count(&db), 2);
}

/// Readers on other threads count while blind commits go on: at every snapshot, `len` equals
/// the number of entries a scan finds.
#[test]
fn readers_count_right_while_blind_commits_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().join("db"), Options::default().log(true)).unwrap();
    let mut w = db.begin_write().unwrap();
    w.create_table("t").unwrap();
    {
        let mut t = w.table("t").unwrap();
        for i in 0..2000 {
            t.set(&key(i), b"tree").unwrap();
        }
    }
    w.commit().unwrap();
    db.checkpoint().unwrap();
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                let mut checks = 0;
                while !done.load(std::sync::atomic::Ordering::Acquire) || checks == 0 {
                    let r = db.begin_read().unwrap();
                    let t = r.table("t").unwrap();
                    let n = t.len().unwrap();
                    assert_eq!(
                        n,
                        t.iter().map(Result::unwrap).count() as u64,
                        "len against a scan"
                    );
                    assert!((2000..=5000).contains(&n));
                    checks += 1;
                }
            });
        }
        // A quarter over keys in the tree (0..2000), the rest new, one per commit.
        for i in 1000..5000 {
            let mut w = db.begin_write().unwrap();
            w.table("t").unwrap().set(&key(i), b"blind").unwrap();
            w.commit_with(Durability::None).unwrap();
        }
        done.store(true, std::sync::atomic::Ordering::Release);
    });
    assert_eq!(count(&db), 5000);
}
