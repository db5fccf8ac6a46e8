//! A database written without the log, then opened with it: the first commits through the
//! log are as durable as any, across power loss and reopen with or without the log option.

mod common;

use larchdb::storage::FaultStorage;
use larchdb::{Database, Durability, Options};

fn open(data: &FaultStorage, log: &FaultStorage, with_log: bool) -> Database {
    let options = Options::default().log(with_log);
    common::open_with_log(data, log, options).unwrap()
}

fn put(db: &Database, key: &[u8], durability: Durability) {
    let mut w = db.begin_write().unwrap();
    w.ensure_table("t").unwrap();
    w.table("t").unwrap().put(key, b"v").unwrap();
    w.commit_with(durability).unwrap();
}

fn has(db: &Database, key: &[u8]) -> bool {
    let r = db.begin_read().unwrap();
    let t = r.table("t").unwrap();
    t.get(key).unwrap().is_some()
}

#[test]
fn the_first_durable_commit_through_a_new_log_survives_a_power_loss() {
    let (data, log) = (FaultStorage::new(), FaultStorage::new());
    let db = open(&data, &log, false);
    put(&db, b"before", Durability::Immediate);
    drop(db);
    let db = open(&data, &log, true);
    put(&db, b"logged", Durability::Immediate);
    // Power loss while the handle is open: only what was synced is kept.
    let (data, log) = (data.durable_copy(), log.durable_copy());
    drop(db);
    for with_log in [true, false] {
        let (data, log) = (data.durable_copy(), log.durable_copy());
        let db = open(&data, &log, with_log);
        assert!(has(&db, b"before"));
        assert!(
            has(&db, b"logged"),
            "with_log {with_log}: the acknowledged commit is lost"
        );
    }
}

/// A handle that writes the log, closed (compacted, the log holding nothing), leaves a data
/// file that is the whole database: a copy of it alone opens, to read and to write, and a
/// power loss right after the close keeps everything. Without the compaction at close the
/// log is still named, and a copy without it is refused, never read as if complete.
#[test]
fn a_closed_database_is_its_data_file_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Database::open(&path, Options::default()).unwrap();
    for i in 0..1000u32 {
        db.put(&i.to_be_bytes(), b"v").unwrap();
    }
    assert!(db.stats().unwrap().commits.logged_commits > 0);
    drop(db);
    let copy = dir.path().join("copy");
    std::fs::copy(&path, &copy).unwrap();
    for options in [Options::default().read_only(true), Options::default()] {
        let db = Database::open(&copy, options).unwrap();
        assert_eq!(db.get(&999u32.to_be_bytes()).unwrap(), Some(b"v".to_vec()));
        assert_eq!(
            db.begin_read()
                .unwrap()
                .default_table()
                .unwrap()
                .len()
                .unwrap(),
            1000
        );
        db.verify().unwrap();
    }
    // The copy, opened with the log, started one of its own; the original goes on with its.
    assert!(larchdb::storage::log_path(&copy).exists());
    let db = Database::open(&path, Options::default()).unwrap();
    // (The first commit on a new log writes pages, the next ones go to the log.)
    db.put(b"after", b"w").unwrap();
    db.put(b"after", b"x").unwrap();
    assert!(db.stats().unwrap().commits.logged_commits > 0);
    drop(db);

    // Left for the next open to replay: the data file alone is not the database.
    let kept = dir.path().join("kept");
    let db = Database::open(&kept, Options::default().compact_on_close(false)).unwrap();
    db.put(b"k", b"v").unwrap();
    drop(db);
    let copy = dir.path().join("kept-copy");
    std::fs::copy(&kept, &copy).unwrap();
    assert!(matches!(
        Database::open(&copy, Options::default()),
        Err(larchdb::Error::CorruptedLog { .. })
    ));
}

/// The close's last commit, the one that says the log is no longer needed, is durable: after
/// a power loss right after the close, the data file alone holds every commit.
#[test]
fn a_closed_database_needs_no_log_after_a_power_loss() {
    let (data, log) = (FaultStorage::new(), FaultStorage::new());
    let db = open(&data, &log, true);
    for i in 0..300u32 {
        put(&db, &i.to_be_bytes(), Durability::None);
    }
    drop(db);
    let data = data.durable_copy();
    let db = common::open_with_log(&data, &FaultStorage::new(), Options::default()).unwrap();
    for i in 0..300u32 {
        assert!(has(&db, &i.to_be_bytes()), "{i}");
    }
}
