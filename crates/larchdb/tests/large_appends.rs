//! A logged transaction of many appends (a sequential load in large batches) commits by
//! writing its pages, as a checkpoint does, with its writes appended to the log as its record
//! (docs/design/write-path.md, "large sequential batches"): the tree holds it at once, the
//! log makes it durable, and power loss, a process crash and the log's lack of room all keep
//! exactly the acknowledged commits.

mod common;

use larchdb::storage::{CrashMode, FaultStorage};
use larchdb::{Database, Durability};
use std::collections::BTreeMap;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn open(data: &FaultStorage, log: &FaultStorage) -> Database {
    common::open_with_log(data, log, common::small_log_options()).unwrap()
}

fn key(n: u64) -> Vec<u8> {
    format!("key{n:012}").into_bytes()
}

fn value(n: u64, len: usize) -> Vec<u8> {
    (0..len).map(|i| (n as usize + i) as u8).collect()
}

/// Appends keys `from..from + count` (values of `len` bytes) in one transaction and commits
/// it; returns the commit's id.
fn append(
    db: &Database,
    model: &mut Model,
    from: u64,
    count: u64,
    len: usize,
    d: Durability,
) -> u64 {
    let mut w = db.begin_write().unwrap();
    let id = w.id();
    {
        let mut t = w.table("t").unwrap();
        for n in from..from + count {
            t.append(&key(n), &value(n, len)).unwrap();
            model.insert(key(n), value(n, len));
        }
    }
    w.commit_with(d).unwrap();
    id
}

fn holds(db: &Database, model: &Model) -> bool {
    let r = db.begin_read().unwrap();
    let t = r.table("t").unwrap();
    t.len().unwrap() == model.len() as u64
        && common::collect(t.iter())
            .iter()
            .map(|(k, v)| (k, v))
            .eq(model.iter())
}

/// The tree (the snapshot `stats` describes, without the overlay) holds a large sequential
/// batch as soon as it commits; a small one stays in the overlay until the next large one
/// applies it first.
#[test]
fn a_large_sequential_batch_is_in_the_tree_when_it_commits() {
    let (data, log) = (FaultStorage::new(), FaultStorage::new());
    // No idle checkpoints: one running would send the next large batch through the overlay.
    let options = common::small_log_options().idle_checkpoint_millis(0);
    let db = common::open_with_log(&data, &log, options).unwrap();
    common::create_table(&db, "t");
    let mut model = Model::new();
    let mut next = 0;
    for round in 0..20u64 {
        let id = append(&db, &mut model, next, 100, 100, Durability::None);
        next += 100;
        let stats = db.stats().unwrap();
        assert_eq!(stats.txn, id, "round {round}: the batch is not in the tree");
        assert_eq!(stats.entries, model.len() as u64);
        // A small batch commits through the log: the tree does not change.
        let small = append(&db, &mut model, next, 10, 100, Durability::None);
        next += 10;
        let stats = db.stats().unwrap();
        assert!(
            stats.txn < small,
            "round {round}: a small batch wrote pages"
        );
        assert!(holds(&db, &model));
    }
    assert!(db.verify_all().unwrap().is_clean());
    // Reopened after a crash: the small batches since the last large one replay.
    drop(db);
    let (data, log) = (
        data.crash(CrashMode::ProcessOnly),
        log.crash(CrashMode::ProcessOnly),
    );
    let db = open(&data, &log);
    assert!(holds(&db, &model));
    assert!(db.verify_all().unwrap().is_clean());
}

/// Power loss after a mix of large and small batches at each durability: every commit up to
/// the last `Immediate` one is kept (the large ones through the log alone: their pages are
/// not synced), and what is kept is a prefix of the commits, whatever the disk kept of the
/// rest.
#[test]
fn power_loss_keeps_every_acknowledged_large_batch() {
    for seed in 0..12u64 {
        let (data, log) = (FaultStorage::new(), FaultStorage::new());
        let db = open(&data, &log);
        common::create_table(&db, "t");
        let mut model = Model::new();
        // The model after each commit, and the last one that was durable.
        let mut states = vec![model.clone()];
        let mut durable = 0;
        let mut next = 0;
        for step in 0..30u64 {
            let large = (step + seed) % 3 != 0;
            let count = if large { 80 + step % 50 } else { 5 };
            let d = match (step * 7 + seed) % 4 {
                0 => Durability::Immediate,
                1 => Durability::Bounded,
                _ => Durability::None,
            };
            // Values of a few hundred bytes, some large enough for overflow pages.
            let len = if step % 5 == 4 { 5000 } else { 300 };
            append(&db, &mut model, next, count, len, d);
            next += count;
            states.push(model.clone());
            if d == Durability::Immediate {
                durable = states.len() - 1;
            }
        }
        let mode = if seed % 2 == 0 {
            CrashMode::DropUnsynced
        } else {
            CrashMode::KeepRandom { seed }
        };
        let (data, log) = (data.crash(mode), log.crash(mode));
        drop(db);
        let db = open(&data, &log);
        assert!(db.verify_all().unwrap().is_clean(), "seed {seed}");
        let kept = states.iter().rposition(|s| holds(&db, s));
        let kept = kept.unwrap_or_else(|| panic!("seed {seed}: no prefix of the commits"));
        assert!(
            kept >= durable,
            "seed {seed}: commit {durable} was durable, {kept} kept"
        );
    }
}

/// In a log of two segments, each barely larger than a batch's record, every large batch
/// needs the room the one before it took: each one's pages are made durable by the next
/// (`Settling`) before its record is appended. After a power loss that follows one durable
/// commit through the log, every batch is there (one that neither the log nor a durable
/// commit held would be missing under the later record's replay).
#[test]
fn large_batches_in_a_two_segment_log_are_all_kept() {
    let (data, log) = (FaultStorage::new(), FaultStorage::new());
    let options = common::small_log_options()
        .log_segments(2)
        .checkpoint_bytes(1 << 19);
    let db = common::open_with_log(&data, &log, options.clone()).unwrap();
    common::create_table(&db, "t");
    let mut model = Model::new();
    let mut next = 0;
    // Each batch about 250 KiB of records: the 1 MiB segment fills in four.
    for _ in 0..40 {
        append(&db, &mut model, next, 200, 1200, Durability::None);
        next += 200;
    }
    append(&db, &mut model, next, 1, 10, Durability::Immediate);
    assert!(holds(&db, &model));
    let (data, log) = (
        data.crash(CrashMode::DropUnsynced),
        log.crash(CrashMode::DropUnsynced),
    );
    drop(db);
    let db = common::open_with_log(&data, &log, options).unwrap();
    assert!(db.verify_all().unwrap().is_clean());
    assert!(holds(&db, &model));
}
