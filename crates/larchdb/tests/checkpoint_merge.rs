//! A checkpoint merges the overlay into the tree leaf by leaf (`btree::merge_sorted`): batches
//! of every shape (a few keys spread over many leaves, dense runs that fill many new pages in
//! one leaf's place, appends past the right edge, deletions that empty leaves, large values
//! moved to and from overflow runs, keys of many lengths) into trees of every shape (empty, one
//! leaf, several levels, as the rounds grow it), against a `BTreeMap`, with `verify_all()`
//! after each checkpoint and a reopen after every eighth.

mod common;

use larchdb::{Database, Durability, Options};
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn options() -> Options {
    let mut o = Options::default().log(true);
    o.log_segment_bytes = 1 << 20;
    o.log_segments = 4;
    // Checkpoints only when the test asks.
    o.checkpoint_bytes = 3 << 20;
    o
}

fn key(rng: &mut impl Rng, i: u64) -> Vec<u8> {
    // Most keys alike in length; some short, some long, so that leaves hold different counts.
    match rng.gen_range(0..10) {
        0 => format!("{i}").into_bytes(),
        1 => format!("{i:08}-{}", "x".repeat(rng.gen_range(0..200))).into_bytes(),
        _ => format!("{i:08}").into_bytes(),
    }
}

fn value(rng: &mut impl Rng, i: u64) -> Vec<u8> {
    let len = match rng.gen_range(0..50) {
        0 => rng.gen_range(2_000..12_000),
        1 => 0,
        _ => rng.gen_range(1..150),
    };
    (0..len).map(|b| (b as u64 ^ i) as u8).collect()
}

fn check(db: &Database, model: &Model, what: &str) {
    let r = db.begin_read().unwrap();
    let t = r.table("t").unwrap();
    assert_eq!(t.len().unwrap(), model.len() as u64, "{what}: len");
    let got = common::collect(t.iter());
    let want: Vec<(Vec<u8>, Vec<u8>)> = model.clone().into_iter().collect();
    assert!(got == want, "{what}: contents differ");
}

#[test]
fn checkpoints_merge_batches_of_every_shape() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let mut db = Database::open(&path, options()).unwrap();
    let mut model = Model::new();
    let mut rng = rand::rngs::StdRng::seed_from_u64(17);
    {
        let mut w = db.begin_write().unwrap();
        w.create_table("t").unwrap();
        w.commit().unwrap();
    }
    for round in 0..40u64 {
        // Several commits of one shape, then a checkpoint.
        let shape = round % 5;
        for _ in 0..rng.gen_range(1..8) {
            let mut w = db.begin_write().unwrap();
            {
                let mut t = w.table("t").unwrap();
                let n = rng.gen_range(1..300u64);
                for j in 0..n {
                    let i = match shape {
                        // Spread over the whole key space.
                        0 => rng.gen_range(0..100_000),
                        // A dense run: many new keys in one leaf's range.
                        1 => 50_000 + round * 7 + j,
                        // Past the right edge.
                        2 => 1_000_000 + round * 1_000 + j,
                        // Before the left edge.
                        3 => rng.gen_range(0..50),
                        _ => rng.gen_range(40_000..60_000),
                    };
                    if shape == 4 && rng.gen_bool(0.7) {
                        // Deletions, most of them of present keys: leaves empty out.
                        let k = match model.range(key(&mut rng, i)..).next() {
                            Some((k, _)) => k.clone(),
                            None => continue,
                        };
                        let present = t.delete(&k).unwrap();
                        assert!(present);
                        model.remove(&k);
                    } else {
                        let k = key(&mut rng, i);
                        let v = value(&mut rng, i);
                        let replaced = t.put(&k, &v).unwrap();
                        assert_eq!(replaced, model.insert(k, v).is_some());
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
        let report = db.verify_all().unwrap();
        assert!(report.is_clean(), "round {round}: {:?}", report.problems);
        if round % 8 == 7 {
            drop(db);
            db = Database::open(&path, options()).unwrap();
            check(&db, &model, &format!("round {round}, reopened"));
        }
    }
    // Everything deleted, then merged: the tree empties through the merge's deletions.
    let keys: Vec<Vec<u8>> = model.keys().cloned().collect();
    for chunk in keys.chunks(500) {
        let mut w = db.begin_write().unwrap();
        {
            let mut t = w.table("t").unwrap();
            for k in chunk {
                assert!(t.delete(k).unwrap());
                model.remove(k);
            }
        }
        w.commit_with(Durability::None).unwrap();
    }
    db.checkpoint().unwrap();
    check(&db, &model, "all deleted");
    let report = db.verify_all().unwrap();
    assert!(report.is_clean(), "all deleted: {:?}", report.problems);
}

/// Megabytes of records into one leaf's key range in one checkpoint: past the right edge (a
/// sequential load's checkpoint) and between two keys of the tree, with replacements,
/// deletions and overflow values among them. The merge takes such a range a chunk at a time
/// (`btree::merge`'s `MERGE_CHUNK_BYTES`), filling pages whole while more follow: the
/// contents match the model, the tree verifies, and the leaves stay as full as one pass
/// would have made them.
#[test]
fn checkpoints_merge_megabytes_into_one_leaf() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let mut o = options();
    // One checkpoint takes all of each round: none by size or idleness, one slice.
    o.checkpoint_bytes = 100 << 20;
    o.idle_checkpoint_millis = 0;
    o.checkpoint_slices = 1;
    o.log_segment_bytes = 8 << 20;
    o.log_segments = 16;
    let db = Database::open(&path, o.clone()).unwrap();
    let mut model = Model::new();
    let value =
        |i: u64, len: usize| -> Vec<u8> { (0..len).map(|b| (b as u64 ^ i) as u8).collect() };
    {
        let mut w = db.begin_write().unwrap();
        w.create_table("t").unwrap();
        w.commit().unwrap();
    }
    let put_all = |model: &mut Model,
                   keys: &mut dyn Iterator<Item = (Vec<u8>, Option<Vec<u8>>)>| {
        let mut w = db.begin_write().unwrap();
        {
            let mut t = w.table("t").unwrap();
            for (k, v) in keys {
                match v {
                    Some(v) => {
                        t.put(&k, &v).unwrap();
                        model.insert(k, v);
                    }
                    None => {
                        t.delete(&k).unwrap();
                        model.remove(&k);
                    }
                }
            }
        }
        w.commit_with(Durability::None).unwrap();
    };
    // A sparse tree: keys "k00000000".."k00990000" every 10,000.
    put_all(
        &mut model,
        &mut (0..100u64).map(|i| {
            (
                format!("k{:08}", i * 10_000).into_bytes(),
                Some(value(i, 100)),
            )
        }),
    );
    db.checkpoint().unwrap();
    // Round 1: 60,000 records of 100 bytes past the right edge (about 7 MB), one checkpoint.
    put_all(
        &mut model,
        &mut (0..60_000u64).map(|i| (format!("m{i:08}").into_bytes(), Some(value(i, 100)))),
    );
    db.checkpoint().unwrap();
    check(&db, &model, "appended past the right edge");
    let stats = db.stats().unwrap();
    // 60,100 cells of about 121 bytes (the cell, its slot) in 4 KiB leaves: whole leaves
    // hold about 33, so about 1,820 leaves; evenly packed runs would need no more.
    assert!(
        stats.leaf_pages <= 1_900,
        "appended leaves not filled: {} leaf pages",
        stats.leaf_pages
    );
    // Round 2: between two keys of the tree, 50,000 new keys with overflow values every
    // 97th, and replacements and deletions of the first round's keys in the same checkpoint.
    put_all(
        &mut model,
        &mut (0..50_000u64).map(|i| {
            let len = if i % 97 == 0 { 5_000 } else { 80 };
            (
                format!("k{:08}-{i:06}", 20_000).into_bytes(),
                Some(value(i, len)),
            )
        }),
    );
    put_all(
        &mut model,
        &mut (0..60_000u64).step_by(3).map(|i| {
            let k = format!("m{i:08}").into_bytes();
            if i % 2 == 0 {
                (k, None)
            } else {
                (k, Some(value(i + 1, 300)))
            }
        }),
    );
    db.checkpoint().unwrap();
    check(&db, &model, "a dense run between two keys");
    let report = db.verify_all().unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
    // Round 3: in one checkpoint, most of that run deleted and new keys of megabytes woven
    // between the ones left, so that the chunks of one range carry deletions too.
    put_all(
        &mut model,
        &mut (0..50_000u64).filter(|i| i % 5 != 0).map(|i| {
            let k = format!("k{:08}-{i:06}", 20_000).into_bytes();
            (k, None)
        }),
    );
    put_all(
        &mut model,
        &mut (0..40_000u64).map(|i| {
            (
                format!("k{:08}-{:06}x", 20_000, i + 5_000).into_bytes(),
                Some(value(i, 120)),
            )
        }),
    );
    db.checkpoint().unwrap();
    check(&db, &model, "deletions and insertions woven in one range");
    let report = db.verify_all().unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
    drop(db);
    let db = Database::open(&path, o).unwrap();
    check(&db, &model, "reopened");
    let report = db.verify_all().unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
}
