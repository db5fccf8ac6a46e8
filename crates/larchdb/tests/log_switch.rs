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
