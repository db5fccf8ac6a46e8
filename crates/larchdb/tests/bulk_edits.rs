//! Bulk edits of a table: `delete_range`, `clear`, `retain`, `pop_first`/`pop_last`, on trees
//! deep enough that a range covers whole subtrees, with and without the log, checked against a
//! model and by `verify_all`; and a range delete that frees subtrees without rewriting them.

mod common;

use larchdb::storage::FaultStorage;
use larchdb::{Database, Options};
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn key(i: u32) -> Vec<u8> {
    format!("key{i:08}").into_bytes()
}

/// Values of 100 bytes, with every 40th an overflow value (several pages).
fn value(i: u32) -> Vec<u8> {
    let len = if i % 40 == 7 { 9000 } else { 100 };
    (0..len).map(|j| (i as usize + j) as u8).collect()
}

fn load(db: &Database, n: u32) -> Model {
    let mut model = Model::new();
    let mut w = db.begin_write().unwrap();
    w.create_table("t").unwrap();
    let mut t = w.table("t").unwrap();
    for i in 0..n {
        t.put(&key(i), &value(i)).unwrap();
        model.insert(key(i), value(i));
    }
    w.commit().unwrap();
    model
}

fn check(db: &Database, model: &Model) {
    let report = db.verify_all().unwrap();
    assert!(report.is_clean(), "verify: {:?}", report.problems);
    let r = db.begin_read().unwrap();
    common::assert_holds(&r.table("t").unwrap(), model, "t");
}

fn random_bound(rng: &mut impl Rng, n: u32) -> Bound<Vec<u8>> {
    // Keys between the table's keys too (a suffix), and past its ends.
    let mut k = key(rng.gen_range(0..n + n / 10));
    if rng.gen_bool(0.3) {
        k.push(b'!');
    }
    match rng.gen_range(0..5) {
        0 | 1 => Bound::Included(k),
        2 | 3 => Bound::Excluded(k),
        _ => Bound::Unbounded,
    }
}

/// Random ranges deleted, several per transaction, some transactions aborted, on a tree of
/// depth 3 or more; the table refilled now and then so that later ranges meet whole subtrees
/// again.
fn ranges_against_a_model(db: &Database, seed: u64) {
    const N: u32 = 20_000;
    let mut model = load(db, N);
    let depth = db.stats().unwrap().depth;
    assert!(
        depth >= 3,
        "the tree is deep enough for whole subtrees: {depth}"
    );
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    for round in 0..40 {
        let mut w = db.begin_write().unwrap();
        let mut pending = model.clone();
        let mut t = w.table("t").unwrap();
        for _ in 0..rng.gen_range(1..4) {
            let (lo, hi) = (random_bound(&mut rng, N), random_bound(&mut rng, N));
            let range = (lo.as_ref().map(|k| &k[..]), hi.as_ref().map(|k| &k[..]));
            let victims = common::keys_in(&pending, range.0, range.1);
            for k in &victims {
                pending.remove(k);
            }
            assert_eq!(
                t.delete_range::<[u8], _>(range).unwrap(),
                victims.len() as u64,
                "round {round}: {lo:?}..{hi:?}"
            );
            assert_eq!(t.len().unwrap(), pending.len() as u64);
        }
        if round % 7 == 3 {
            // Refill a random stretch.
            let from = rng.gen_range(0..N);
            for i in from..(from + 3000).min(N) {
                t.put(&key(i), &value(i)).unwrap();
                pending.insert(key(i), value(i));
            }
        }
        if rng.gen_bool(0.2) {
            drop(w);
        } else {
            w.commit().unwrap();
            model = pending;
        }
        check(db, &model);
    }
}

#[test]
fn delete_range_agrees_with_a_model() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().join("db"), Options::default()).unwrap();
    ranges_against_a_model(&db, 1);
}

#[test]
fn delete_range_agrees_with_a_model_through_the_log() {
    let data = FaultStorage::new();
    let log = FaultStorage::new();
    let db = common::open_with_log(&data, &log, common::small_log_options()).unwrap();
    ranges_against_a_model(&db, 2);
    // And after the log is replayed.
    let model: Model = {
        let r = db.begin_read().unwrap();
        common::collect(r.table("t").unwrap().iter())
            .into_iter()
            .collect()
    };
    drop(db);
    let db = common::open_with_log(&data, &log, common::small_log_options()).unwrap();
    check(&db, &model);
}

/// Pages of the file that differ between two images of it.
fn pages_changed(before: &[u8], after: &[u8], page_bytes: usize) -> usize {
    let pages = before.len().max(after.len()).div_ceil(page_bytes);
    (0..pages)
        .filter(|&p| {
            let at = |img: &[u8]| {
                let s = (p * page_bytes).min(img.len());
                img[s..((p + 1) * page_bytes).min(img.len())].to_vec()
            };
            at(before) != at(after)
        })
        .count()
}

#[test]
fn delete_range_frees_subtrees_without_rewriting_them() {
    let storage = FaultStorage::new();
    let db = Database::open_storage(Arc::new(storage.clone()), Options::default()).unwrap();
    let mut model = load(&db, 20_000);
    let page_bytes = db.page_bytes() as usize;
    let leaves = db.stats().unwrap().leaf_pages;
    let before = storage.contents();
    // The middle 80%.
    let (lo, hi) = (key(2_000), key(18_000));
    let mut w = db.begin_write().unwrap();
    let n = w
        .table("t")
        .unwrap()
        .delete_range(lo.as_slice()..hi.as_slice())
        .unwrap();
    w.commit().unwrap();
    assert_eq!(n, 16_000);
    model.retain(|k, _| *k < lo || *k >= hi);
    check(&db, &model);
    // A delete per key would rewrite every leaf it passes (about 80% of them) and the
    // branches above; the range rewrites the two edges' paths, the meta and the freelist.
    let changed = pages_changed(&before, &storage.contents(), page_bytes);
    assert!(
        changed < 40,
        "{changed} pages written for a range over {} of {leaves} leaves",
        leaves * 8 / 10
    );
    let stats = db.stats().unwrap();
    assert!(
        stats.leaf_pages < leaves / 3,
        "{} leaves left",
        stats.leaf_pages
    );
}

#[test]
fn clear_pop_and_retain() {
    for log in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let options = if log {
            common::small_log_options()
        } else {
            Options::default()
        };
        let db = Database::open(dir.path().join("db"), options).unwrap();
        let mut model = load(&db, 5_000);
        let mut w = db.begin_write().unwrap();
        let mut t = w.table("t").unwrap();
        // An empty range, a reversed one, and bounds longer than any key delete nothing.
        assert_eq!(
            t.delete_range(key(10).as_slice()..key(10).as_slice())
                .unwrap(),
            0
        );
        let (hi, lo) = (key(20), key(10));
        assert_eq!(
            t.delete_range::<[u8], _>((Bound::Excluded(&hi[..]), Bound::Included(&lo[..])))
                .unwrap(),
            0
        );
        let long = vec![0xFFu8; 100_000];
        assert_eq!(t.delete_range(long.as_slice()..).unwrap(), 0);
        assert_eq!(t.pop_first().unwrap(), model.pop_first());
        assert_eq!(t.pop_last().unwrap(), model.pop_last());
        let deleted = t.retain(|k, _| k.last() != Some(&b'3')).unwrap();
        let before = model.len();
        model.retain(|k, _| k.last() != Some(&b'3'));
        assert_eq!(deleted, (before - model.len()) as u64);
        w.commit().unwrap();
        check(&db, &model);

        let mut w = db.begin_write().unwrap();
        let mut t = w.table("t").unwrap();
        assert_eq!(t.clear().unwrap(), model.len() as u64);
        assert_eq!(t.pop_first().unwrap(), None);
        assert_eq!(t.pop_last().unwrap(), None);
        assert_eq!(t.clear().unwrap(), 0);
        w.commit().unwrap();
        check(&db, &Model::new());
        // The table is still there, and usable.
        let mut w = db.begin_write().unwrap();
        w.table("t").unwrap().put(b"k", b"v").unwrap();
        w.commit().unwrap();
        check(&db, &Model::from([(b"k".to_vec(), b"v".to_vec())]));
    }
}
