//! Checkpoints whose merges read their leaves ahead (`btree::merge`'s `Ahead`,
//! docs/design/write-path.md, "The merge"), as they do once the tree is beyond memory, forced
//! here on a tree in memory (`testing::read_ahead_every_merge`):
//!
//! - the merges come out right (the contents against a model, `verify_all`) with the
//!   read-ahead's descents running before every leaf;
//! - leaves with consecutive page ids are asked for in one request
//!   (`CommitStats::read_ahead_pages`, `read_ahead_requests`): the load wrote the leaves in key
//!   order, and each checkpoint's merge rewrites a slice's leaves in key order.

mod common;

use larchdb::{Database, Durability, Options};
use std::collections::BTreeMap;

const KEYS: u32 = 40_000;

/// The file read through its mapping (frames off): a merge's read-ahead is hints to the
/// page cache, and frames hold the whole file in memory, which needs none.
fn options() -> Options {
    Options::default()
        .frames_bytes(0)
        .log(true)
        .log_segment_bytes(1 << 20)
        .log_segments(8)
        .checkpoint_bytes(512 << 10)
        .checkpoint_slices(4)
        .compact_on_close(false)
        // The test asks for the checkpoints itself.
        .idle_checkpoint_millis(0)
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:08}").into_bytes()
}

fn value(i: u32, round: u32) -> Vec<u8> {
    format!("{round:04}-{i:08}-{}", "v".repeat(80)).into_bytes()
}

fn check(db: &Database, model: &BTreeMap<Vec<u8>, Vec<u8>>, what: &str) {
    let r = db.begin_read().unwrap();
    let t = r.table("t").unwrap();
    assert_eq!(t.len().unwrap(), model.len() as u64, "{what}: len");
    let got = larchdb::testing::collect(t.iter());
    let want: Vec<(Vec<u8>, Vec<u8>)> = model.clone().into_iter().collect();
    assert!(got == want, "{what}: contents differ");
    let report = db.verify_all().unwrap();
    assert!(report.is_clean(), "{what}: {:?}", report.problems);
}

#[test]
fn merges_that_read_ahead_merge_right_and_ask_for_consecutive_leaves_at_once() {
    let _every = common::Switched::on(larchdb::testing::read_ahead_every_merge);
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().join("db"), options()).unwrap();
    let mut model = BTreeMap::new();
    {
        // A load in key order: its leaves lie in consecutive pages.
        let mut w = db.begin_write().unwrap();
        w.create_table("t").unwrap();
        {
            let mut t = w.table("t").unwrap();
            for i in 0..KEYS {
                t.put(&key(i), &value(i, 0)).unwrap();
                model.insert(key(i), value(i, 0));
            }
        }
        w.commit().unwrap();
    }
    check(&db, &model, "loaded");
    for round in 1..=3u32 {
        // Every seventh key (with an offset a round) updated, about five a leaf, and some
        // keys deleted and added back: the merges reach every leaf, in several commits.
        let keys: Vec<u32> = (round..KEYS).step_by(7).collect();
        for chunk in keys.chunks(500) {
            let mut w = db.begin_write().unwrap();
            {
                let mut t = w.table("t").unwrap();
                for &i in chunk {
                    if i % 5 == 0 {
                        assert!(t.delete(&key(i)).unwrap());
                        model.remove(&key(i));
                    } else {
                        t.put(&key(i), &value(i, round)).unwrap();
                        model.insert(key(i), value(i, round));
                    }
                }
            }
            w.commit_with(Durability::None).unwrap();
        }
        check(
            &db,
            &model,
            &format!("round {round}, before the checkpoint"),
        );
        db.checkpoint().unwrap();
        check(&db, &model, &format!("round {round}, after the checkpoint"));
    }
    let c = db.stats().unwrap().commits;
    assert!(c.checkpoint_slices >= 4, "{} slices", c.checkpoint_slices);
    // Each slice's checkpoint is merged, then synced on a thread of its own: both timed.
    assert!(
        c.checkpoint_merge_micros > 0 && c.checkpoint_sync_micros > 0,
        "merges {} us, syncs {} us",
        c.checkpoint_merge_micros,
        c.checkpoint_sync_micros
    );
    assert!(
        c.read_ahead_pages > 1_000,
        "the merges read ahead: {} pages hinted",
        c.read_ahead_pages
    );
    assert!(
        c.read_ahead_requests * 4 <= c.read_ahead_pages,
        "consecutive leaves asked for at once: {} requests for {} pages",
        c.read_ahead_requests,
        c.read_ahead_pages
    );
    drop(db);
    let db = Database::open(dir.path().join("db"), options()).unwrap();
    check(&db, &model, "reopened");
}
