//! Checkpoints that start their pages' writeback a few pages at a time (`storage::Paced`), as
//! they do beside readers that wait on the device (docs/design/durability.md, "A checkpoint's
//! writeback beside readers"), forced here on storage in memory
//! (`testing::pace_writeback_every_checkpoint`):
//!
//! - the checkpoints come out right (the contents against a model, `verify_all`, a reopen), and
//!   they did start writebacks;
//! - a failed wait for a writeback stops the handle, as a failed sync does (Linux reports a
//!   file's write error once, so the sync after it could report success), and a power loss
//!   after it keeps every commit made durable before.

mod common;

use larchdb::storage::{CrashMode, FaultKind, FaultStorage};
use larchdb::{Database, Durability, Options};
use std::collections::BTreeMap;

/// Has every checkpoint pace its writeback while it lives (the switch is the process's).
struct PaceEvery;

impl PaceEvery {
    fn on() -> PaceEvery {
        larchdb::testing::pace_writeback_every_checkpoint(true);
        PaceEvery
    }
}

impl Drop for PaceEvery {
    fn drop(&mut self) {
        larchdb::testing::pace_writeback_every_checkpoint(false);
    }
}

fn options(durability: Durability) -> Options {
    common::small_log_options()
        .checkpoint_slices(4)
        .durability(durability)
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:08}").into_bytes()
}

fn value(i: u32, round: u32) -> Vec<u8> {
    format!("{round:04}-{i:08}-{}", "v".repeat(1000)).into_bytes()
}

fn check(db: &Database, model: &BTreeMap<Vec<u8>, Vec<u8>>, what: &str) {
    let r = db.begin_read().unwrap();
    let t = r.table("t").unwrap();
    common::assert_holds(&t, model, what);
    let report = db.verify_all().unwrap();
    assert!(report.is_clean(), "{what}: {:?}", report.problems);
}

const KEYS: u32 = 6_000;

#[test]
fn paced_checkpoints_merge_right_and_start_their_writeback() {
    let _pace = PaceEvery::on();
    let (data, log) = (FaultStorage::new(), FaultStorage::new());
    let db = common::open_with_log(&data, &log, options(Durability::None)).unwrap();
    common::create_table(&db, "t");
    let mut model = BTreeMap::new();
    for round in 0..3 {
        // Keys in a scattered order, ten to a commit, so that every slice's checkpoint
        // rewrites leaves all over its range.
        let mut i = 0u32;
        while i < KEYS {
            let mut w = db.begin_write().unwrap();
            {
                let mut t = w.table("t").unwrap();
                for j in i..(i + 10).min(KEYS) {
                    let k = (j * 2_663 + round * 17) % KEYS;
                    t.put(&key(k), &value(k, round)).unwrap();
                    model.insert(key(k), value(k, round));
                }
            }
            w.commit().unwrap();
            i += 10;
        }
        check(&db, &model, &format!("round {round}"));
    }
    db.checkpoint().unwrap();
    check(&db, &model, "after a checkpoint of everything");
    assert!(
        data.writeback_starts() > 0,
        "the checkpoints started no writeback"
    );
    drop(db);
    let db = common::open_with_log(&data, &log, options(Durability::None)).unwrap();
    check(&db, &model, "reopened");
}

#[test]
fn a_failed_wait_for_writeback_stops_the_handle_and_loses_no_durable_commit() {
    let _pace = PaceEvery::on();
    let (data, log) = (FaultStorage::new(), FaultStorage::new());
    let db = common::open_with_log(&data, &log, options(Durability::Immediate)).unwrap();
    common::create_table(&db, "t");
    data.fail_writeback_waits(Some(FaultKind::Eio));
    // Durable commits until one fails: every commit before it is acknowledged.
    let mut acknowledged = BTreeMap::new();
    let mut failed = false;
    'rounds: for round in 0..20 {
        let mut i = 0u32;
        while i < KEYS {
            let mut batch = Vec::new();
            for j in i..(i + 10).min(KEYS) {
                let k = (j * 2_663 + round * 17) % KEYS;
                batch.push((key(k), value(k, round)));
            }
            let committed = (|| {
                let mut w = db.begin_write()?;
                {
                    let mut t = w.table("t")?;
                    for (k, v) in &batch {
                        t.put(k, v)?;
                    }
                }
                w.commit()
            })();
            match committed {
                Ok(()) => acknowledged.extend(batch),
                Err(_) => {
                    failed = true;
                    break 'rounds;
                }
            }
            i += 10;
        }
    }
    assert!(
        failed,
        "no commit failed while every wait for a writeback failed"
    );
    // The handle writes no more: a failed wait is a failed sync.
    assert!(db.put(b"after", b"the failure").is_err());
    // A power loss now keeps every acknowledged commit.
    let (data, log) = (
        data.crash(CrashMode::DropUnsynced),
        log.crash(CrashMode::DropUnsynced),
    );
    drop(db);
    let db = common::open_with_log(&data, &log, options(Durability::Immediate)).unwrap();
    let r = db.begin_read().unwrap();
    let t = r.table("t").unwrap();
    for (k, v) in &acknowledged {
        assert_eq!(
            t.get(k).unwrap(),
            Some(&v[..]),
            "an acknowledged commit was lost"
        );
    }
}
