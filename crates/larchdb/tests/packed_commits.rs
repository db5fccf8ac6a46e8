//! Commit records packed in the log (`KIND_PACKED`, docs/design/write-path.md, "Packed
//! commits"): a writer whose values compress packs its records once the log's room runs short
//! (past half the ring's room, or holding the writer back: `commit::logged::packing_pays`),
//! and not before; the records it packed come back whole through a process crash (the log
//! replayed) and a close.

mod common;

use common::key5 as key;
use larchdb::storage::{CrashMode, FaultStorage};
use larchdb::{Database, Durability, Options};
use std::collections::BTreeMap;
use std::time::Duration;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// A 1000-byte value that differs with `i` and compresses to about a quarter: its first
/// 250 bytes do not compress, the rest repeat them.
fn value(i: u32) -> Vec<u8> {
    let head = common::noise(u64::from(i), 250);
    head.iter().cycle().take(1000).copied().collect()
}

fn options() -> Options {
    Options::default()
        .log(true)
        .log_segment_bytes(64 << 10)
        .log_segments(8)
        .checkpoint_bytes(32 << 10)
        .durability(Durability::None)
}

/// `count` one-put commits of `value`s, over `keys` keys from `from` on.
fn puts(db: &Database, model: &mut Model, from: u32, count: u32, keys: u32) {
    for i in from..from + count {
        let (k, v) = (key(i % keys), value(i));
        let mut w = db.begin_write().unwrap();
        w.table("t").unwrap().put(&k, &v).unwrap();
        w.commit().unwrap();
        model.insert(k, v);
    }
}

fn holds(db: &Database, model: &Model) {
    let r = db.begin_read().unwrap();
    let got: Model = common::collect(r.table("t").unwrap().iter())
        .into_iter()
        .collect();
    assert_eq!(got.len(), model.len());
    assert!(&got == model, "the table is not the model");
}

/// A writer faster than its checkpoints (the data file's syncs slowed to 20 ms each) fills
/// the log's ring past half its room: from there its records are packed. A process crash
/// then replays them.
#[test]
fn records_are_packed_once_the_log_fills_and_replay_whole() {
    let (data, log) = (FaultStorage::new(), FaultStorage::new());
    data.set_sync_delay(Some(Duration::from_millis(20)));
    let db = common::open_with_log(&data, &log, options()).unwrap();
    common::create_table(&db, "t");
    let before = db.stats().unwrap().commits;
    let mut model = Model::new();
    puts(&db, &mut model, 0, 3000, 500);
    let after = db.stats().unwrap().commits;
    let (logged, packed) = (
        after.logged_commits - before.logged_commits,
        after.packed_commits - before.packed_commits,
    );
    assert!(
        packed > 0,
        "3 MB of values that pack to a quarter through a 448 KiB ring, and none packed: \
         {after:?}"
    );
    assert!(
        packed < logged,
        "every record packed, the first ones too, into an empty log: {after:?}"
    );
    holds(&db, &model);
    let crashed = (
        data.crash(CrashMode::ProcessOnly),
        log.crash(CrashMode::ProcessOnly),
    );
    drop(db);
    let db = common::open_with_log(&crashed.0, &crashed.1, options()).unwrap();
    holds(&db, &model);
    assert!(db.verify_all().unwrap().is_clean());
    // The reopened handle appends to the same log, packed records and all.
    puts(&db, &mut model, 3000, 1000, 500);
    drop(db);
    let db = common::open_with_log(&crashed.0, &crashed.1, options()).unwrap();
    holds(&db, &model);
}

/// A writer whose checkpoints keep up leaves the log under half its room: nothing is packed
/// (packing would cost the writer CPU under the write lock and give back room it does not
/// need).
#[test]
fn nothing_is_packed_while_the_log_has_room() {
    let (data, log) = (FaultStorage::new(), FaultStorage::new());
    let options = Options::default().log(true).durability(Durability::None);
    let db = common::open_with_log(&data, &log, options.clone()).unwrap();
    common::create_table(&db, "t");
    let mut model = Model::new();
    puts(&db, &mut model, 0, 500, 100);
    let stats = db.stats().unwrap().commits;
    assert!(stats.logged_commits >= 500, "{stats:?}");
    assert_eq!(stats.packed_commits, 0, "{stats:?}");
    drop(db);
    let db = common::open_with_log(&data, &log, options).unwrap();
    holds(&db, &model);
}
