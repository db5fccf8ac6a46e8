//! The memory budget (`Options::memory_budget`, `engine/admission/budget.rs`): the overlays of a
//! writer faster than the log's checkpoints stay inside it. With checkpoints the log's growth
//! would call for only every 1 GiB, a load of 48 MiB of 1 KiB values into a 16 MiB budget gets
//! its checkpoints from the budget (one each time the active overlay holds a quarter of it),
//! readers held across them keep their snapshots, and every record is there after a reopen.

mod common;

use common::{key5 as key, value_1k as value};
use larchdb::storage::FaultStorage;
use larchdb::{Durability, Options, ReadTxn};
use std::collections::BTreeMap;

#[test]
fn a_writer_faster_than_the_logs_checkpoints_is_held_to_the_budget() {
    for thread in [true, false] {
        let (data, log) = (FaultStorage::new(), FaultStorage::new());
        let options = Options::default()
            .log(true)
            .log_segment_bytes(64 << 20)
            .log_segments(32)
            .checkpoint_bytes(1 << 30)
            .idle_checkpoint_millis(0)
            .checkpoint_thread(thread)
            .memory_budget(16 << 20)
            .durability(Durability::None);
        let db = common::open_with_log(&data, &log, options.clone()).unwrap();
        common::create_table(&db, "t");
        let before = db.stats().unwrap().commits.checkpoints;
        let mut model = BTreeMap::new();
        let mut held = Vec::new();
        // 48K one-put commits of 1 KiB over 12K keys: 48 MiB through the log, three times the
        // budget, and far below the checkpoint the log's growth would call for.
        for i in 0..48_000u32 {
            let (k, v) = (key(i.wrapping_mul(2_654_435_761) % 12_000), value(i));
            let mut w = db.begin_write().unwrap();
            w.table("t").unwrap().put(&k, &v).unwrap();
            w.commit().unwrap();
            model.insert(k, v);
            if i % 12_000 == 0 {
                held.push((db.begin_read().unwrap(), model.clone()));
            }
        }
        let checkpoints = db.stats().unwrap().commits.checkpoints - before;
        assert!(
            checkpoints >= 8,
            "thread {thread}: {checkpoints} checkpoints for 48 MiB of overlay in a 16 MiB budget"
        );
        for (r, then) in &held {
            reads_as(r, then);
        }
        drop(held);
        db.verify().unwrap();
        drop(db);
        let db = common::open_with_log(&data, &log, options).unwrap();
        reads_as(&db.begin_read().unwrap(), &model);
    }
}

/// Asserts that `r` reads table `t` as `model`: its count, and each key's value.
fn reads_as(r: &ReadTxn, model: &BTreeMap<Vec<u8>, Vec<u8>>) {
    let t = r.table("t").unwrap();
    assert_eq!(t.len().unwrap(), model.len() as u64);
    for (k, v) in model {
        assert_eq!(t.get(k).unwrap(), Some(&v[..]), "{k:?}");
    }
}

/// Readers held across checkpoints keep the overlays of the snapshots they started from
/// (`Stats::pinned_overlay_bytes`). Staggered ones, each started after the last checkpoint
/// and all held to the end, each kept what the overlays held at its start (here about 1.5 MB
/// a reader, 35 MB with 24) before what they hold came out of the writer's budget; now the
/// overlays together stay within 39/32 of the budget plus 3/32 of it for each reader
/// (`admission::budget::within_pins`: 22 MB), and the writer goes on. Four slices, so that
/// the overlays' least size (a chunk and a table a slice) stays under that share.
#[test]
fn readers_held_across_checkpoints_shrink_the_writers_budget_instead_of_adding_to_it() {
    const BUDGET: u64 = 8 << 20;
    const READERS: u32 = 24;
    const EVERY: u32 = 1_500;
    const SLICES: u32 = 4;
    let (data, log) = (FaultStorage::new(), FaultStorage::new());
    let options = Options::default()
        .log(true)
        .log_segment_bytes(64 << 20)
        .log_segments(32)
        .checkpoint_bytes(1 << 30)
        .idle_checkpoint_millis(0)
        .memory_budget(BUDGET)
        .checkpoint_slices(SLICES)
        .durability(Durability::None);
    let db = common::open_with_log(&data, &log, options.clone()).unwrap();
    common::create_table(&db, "t");
    let mut model = BTreeMap::new();
    let mut held = Vec::new();
    let (mut most, mut most_pinned) = (0, 0);
    // 1 KiB values over 12K keys, a reader started every 1.5 MiB of them (about the
    // checkpoint a quarter of the budget calls for) and held.
    for i in 0..READERS * EVERY {
        let (k, v) = (key(i.wrapping_mul(2_654_435_761) % 12_000), value(i));
        let mut w = db.begin_write().unwrap();
        w.table("t").unwrap().put(&k, &v).unwrap();
        w.commit().unwrap();
        model.insert(k, v);
        if i % EVERY == EVERY - 1 {
            let s = db.stats().unwrap();
            most = most.max(s.overlay_bytes);
            most_pinned = most_pinned.max(s.pinned_overlay_bytes);
            held.push((db.begin_read().unwrap(), model.clone()));
        }
    }
    let bound = BUDGET * 39 / 32 + u64::from(READERS) * BUDGET * 3 / 32;
    assert!(
        most <= bound,
        "the overlays held {most} bytes with {READERS} readers, more than {bound}"
    );
    assert!(
        most_pinned > BUDGET,
        "the readers held {most_pinned} bytes of overlays: the test held too little to tell"
    );
    for (r, then) in &held {
        reads_as(r, then);
    }
    drop(held);
    db.verify().unwrap();
    drop(db);
    let db = common::open_with_log(&data, &log, options).unwrap();
    let t = db.begin_read().unwrap();
    let t = t.table("t").unwrap();
    assert_eq!(t.len().unwrap(), model.len() as u64);
}
