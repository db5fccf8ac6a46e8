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

fn options(durability: Durability) -> Options {
    common::small_log_options()
        .checkpoint_slices(4)
        .durability(durability)
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:08}").into_bytes()
}

fn value(i: u32, round: u32) -> Vec<u8> {
    common::noise(u64::from(round) << 32 | u64::from(i), 1014)
}

fn check(db: &Database, model: &BTreeMap<Vec<u8>, Vec<u8>>, what: &str) {
    let r = db.begin_read().unwrap();
    let t = r.table("t").unwrap();
    common::assert_holds(&t, model, what);
    let report = db.verify_all().unwrap();
    assert!(report.is_clean(), "{what}: {:?}", report.problems);
}

const KEYS: u32 = 6_000;

/// Round `round`'s commits: every key once, in a scattered order, ten to a commit, so that
/// every slice's checkpoint rewrites leaves all over its range.
fn batches(round: u32) -> impl Iterator<Item = Vec<(Vec<u8>, Vec<u8>)>> {
    (0..KEYS).step_by(10).map(move |i| {
        (i..(i + 10).min(KEYS))
            .map(|j| {
                let k = (j * 2_663 + round * 17) % KEYS;
                (key(k), value(k, round))
            })
            .collect()
    })
}

/// Puts `batch` into table "t" in one transaction.
fn commit(db: &Database, batch: &[(Vec<u8>, Vec<u8>)]) -> larchdb::Result<()> {
    let mut w = db.begin_write()?;
    {
        let mut t = w.table("t")?;
        for (k, v) in batch {
            t.put(k, v)?;
        }
    }
    w.commit()
}

#[test]
fn paced_checkpoints_merge_right_and_start_their_writeback() {
    let _pace = common::Switched::on(larchdb::testing::pace_writeback_every_checkpoint);
    let (data, log) = (FaultStorage::new(), FaultStorage::new());
    let db = common::open_with_log(&data, &log, options(Durability::None)).unwrap();
    common::create_table(&db, "t");
    let mut model = BTreeMap::new();
    for round in 0..3 {
        for batch in batches(round) {
            commit(&db, &batch).unwrap();
            model.extend(batch);
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
    let _pace = common::Switched::on(larchdb::testing::pace_writeback_every_checkpoint);
    let (data, log) = (FaultStorage::new(), FaultStorage::new());
    let db = common::open_with_log(&data, &log, options(Durability::Immediate)).unwrap();
    common::create_table(&db, "t");
    data.fail_writeback_waits(Some(FaultKind::Eio));
    // Durable commits until one fails: every commit before it is acknowledged.
    let mut acknowledged = BTreeMap::new();
    let mut failed = false;
    'rounds: for round in 0..20 {
        for batch in batches(round) {
            match commit(&db, &batch) {
                Ok(()) => acknowledged.extend(batch),
                Err(_) => {
                    failed = true;
                    break 'rounds;
                }
            }
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
