//! Ranges walked from both ends (`next` and `next_back` interleaved, `.rev()`), against a
//! `BTreeMap`'s double-ended range: random bounds over keys with 0x00 and 0xFF in them; pages
//! only, and through the log with records in the overlay, in a checkpoint's tree, and in the
//! transaction's own writes, deletions included. Every entry comes out once, in order from
//! each end, and both ends stop where they meet.

mod common;

use larchdb::{Database, Options};
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::ops::Bound;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;
type Entries = Vec<(Vec<u8>, Vec<u8>)>;

const ALPHABET: [u8; 4] = [0x00, b'a', 0xFE, 0xFF];

fn random_key(rng: &mut rand::rngs::StdRng, len_max: usize) -> Vec<u8> {
    let len = rng.gen_range(0..=len_max);
    (0..len)
        .map(|_| ALPHABET[rng.gen_range(0..ALPHABET.len())])
        .collect()
}

fn random_bound(rng: &mut rand::rngs::StdRng) -> Bound<Vec<u8>> {
    match rng.gen_range(0..3) {
        0 => Bound::Unbounded,
        1 => Bound::Included(random_key(rng, 4)),
        _ => Bound::Excluded(random_key(rng, 4)),
    }
}

/// Takes from `it` the ends `ends` names (`true`: the back) until it ends; what each end
/// yielded, the back's in the order it came.
fn walk<'a, I, T>(mut it: I, ends: &[bool]) -> (Vec<T>, Vec<T>)
where
    I: DoubleEndedIterator<Item = T> + 'a,
{
    let (mut front, mut back) = (Vec::new(), Vec::new());
    for &from_back in ends.iter().cycle() {
        let item = if from_back { it.next_back() } else { it.next() };
        match item {
            Some(x) if from_back => back.push(x),
            Some(x) => front.push(x),
            None => break,
        }
    }
    assert!(
        it.next().is_none() && it.next_back().is_none(),
        "ended at both ends"
    );
    (front, back)
}

fn owned(it: larchdb::Range<'_>) -> impl DoubleEndedIterator<Item = (Vec<u8>, Vec<u8>)> + '_ {
    it.map(|e| {
        let (k, v) = e.unwrap();
        (k.to_vec(), v.to_vec())
    })
}

/// The ranges of table `t` (of a read or a write transaction) as `check` takes them: over
/// given bounds, descending if asked.
macro_rules! ranges_of {
    ($t:expr) => {
        |b: &(Bound<Vec<u8>>, Bound<Vec<u8>>), rev: bool| {
            if rev {
                $t.range_rev(b.clone())
            } else {
                $t.range(b.clone())
            }
        }
    };
}

/// Checks a handle's ranges against the model for random bounds, from both ends.
fn check<'t>(
    range: impl Fn(&(Bound<Vec<u8>>, Bound<Vec<u8>>), bool) -> larchdb::Range<'t>,
    model: &Model,
    rng: &mut rand::rngs::StdRng,
    what: &str,
) {
    check_with(range, model, rng, what, |rng| {
        (random_bound(rng), random_bound(rng))
    })
}

/// `check`, with the bounds `bounds` draws.
fn check_with<'t>(
    range: impl Fn(&(Bound<Vec<u8>>, Bound<Vec<u8>>), bool) -> larchdb::Range<'t>,
    model: &Model,
    rng: &mut rand::rngs::StdRng,
    what: &str,
    mut bounds: impl FnMut(&mut rand::rngs::StdRng) -> (Bound<Vec<u8>>, Bound<Vec<u8>>),
) {
    for _ in 0..12 {
        let bounds = bounds(rng);
        let ends: Vec<bool> = (0..rng.gen_range(1..6))
            .map(|_| rng.gen_bool(0.5))
            .collect();
        let want: Entries = if matches!(
            (&bounds.0, &bounds.1),
            (Bound::Included(s) | Bound::Excluded(s), Bound::Included(e) | Bound::Excluded(e)) if s > e
        ) || matches!((&bounds.0, &bounds.1), (Bound::Excluded(s), Bound::Excluded(e)) if s == e)
        {
            // BTreeMap panics on these; no key is in them.
            Vec::new()
        } else {
            model
                .range(bounds.clone())
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        };
        for reverse in [false, true] {
            let ordered: Entries = if reverse {
                want.iter().rev().cloned().collect()
            } else {
                want.clone()
            };
            let (front, mut back) = walk(owned(range(&bounds, reverse)), &ends);
            back.reverse();
            let mut got = front;
            got.extend(back);
            assert_eq!(
                got, ordered,
                "{what}: {bounds:02x?}, reverse {reverse}, ends {ends:?}"
            );
            let rev: Entries = owned(range(&bounds, reverse)).rev().collect();
            assert!(
                rev.iter().eq(ordered.iter().rev()),
                "{what}: {bounds:02x?}, reverse {reverse}, .rev()"
            );
        }
    }
}

fn run(options: Options, what: &str) {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().join("db"), options.clone()).unwrap();
    common::create_table(&db, "t");
    let mut rng = rand::rngs::StdRng::seed_from_u64(59);
    let mut model = Model::new();
    for round in 0..24 {
        let mut w = db.begin_write().unwrap();
        {
            let mut t = w.table("t").unwrap();
            for _ in 0..rng.gen_range(1..150) {
                let k = random_key(&mut rng, 6);
                if rng.gen_bool(0.25) {
                    t.delete(&k).unwrap();
                    model.remove(&k);
                } else {
                    let v = vec![round as u8; rng.gen_range(0..20)];
                    t.put(&k, &v).unwrap();
                    model.insert(k, v);
                }
            }
            let what = format!("{what}: round {round}, in the write transaction");
            let range = ranges_of!(t);
            check(range, &model, &mut rng, &what);
        }
        w.commit().unwrap();
        let r = db.begin_read().unwrap();
        let t = r.table("t").unwrap();
        let range = ranges_of!(t);
        check(range, &model, &mut rng, &format!("{what}: round {round}"));
        drop(r);
        if options.log && round % 8 == 7 {
            db.checkpoint().unwrap();
        }
    }
}

#[test]
fn double_ended_ranges_match_a_model_on_pages() {
    run(Options::default(), "pages");
}

#[test]
fn double_ended_ranges_match_a_model_through_the_log() {
    run(common::small_log_options(), "log");
}

/// A tree of several levels under a sparse overlay, YCSB E's shape: a walk decides for each
/// leaf, by the separator above it, whether the next key above the tree can fall in it, and
/// compares no key of a leaf where it cannot. Walks from both ends against the model, with
/// the overlay's keys (and the transaction's own writes) updating and deleting keys the tree
/// holds, which include its separators, and falling between and beyond them.
#[test]
fn ranges_over_a_deep_tree_under_a_sparse_overlay() {
    deep_tree_under_an_overlay(50..300, 58);
}

/// The same under a dense overlay, as right after a random load (a tenth of the table and
/// more): most leaves hold keys of the overlay, and a walk takes the tree's entries before
/// the overlay's next key as counted in the leaf, without looking at the overlay for each.
#[test]
fn ranges_over_a_deep_tree_under_a_dense_overlay() {
    deep_tree_under_an_overlay(2_000..4_000, 60);
}

/// 20,000 records in a tree of three levels, then six rounds of `writes` random puts and
/// deletions through the log, with ranges from both ends checked in each.
fn deep_tree_under_an_overlay(writes: std::ops::Range<usize>, seed: u64) {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().join("db"), common::small_log_options()).unwrap();
    common::create_table(&db, "t");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut model = Model::new();
    let key = |n: u64| format!("user{n:012}").into_bytes();
    // 20,000 records of 150 bytes: about 25 a leaf, a tree of three levels.
    let mut w = db.begin_write().unwrap();
    {
        let mut t = w.table("t").unwrap();
        for i in 0..20_000u64 {
            let (k, v) = (key(i * 10), vec![(i % 251) as u8; 150]);
            t.put(&k, &v).unwrap();
            model.insert(k, v);
        }
    }
    w.commit().unwrap();
    db.checkpoint().unwrap();
    let bounds = |rng: &mut rand::rngs::StdRng| {
        let from = rng.gen_range(0..200_100u64);
        let to = from + rng.gen_range(0..4_000u64);
        let end = |n: u64, rng: &mut rand::rngs::StdRng| match rng.gen_range(0..8) {
            0 => Bound::Unbounded,
            1..=4 => Bound::Included(key(n)),
            _ => Bound::Excluded(key(n)),
        };
        (end(from, rng), end(to, rng))
    };
    for round in 0..6u8 {
        let mut w = db.begin_write().unwrap();
        {
            let mut t = w.table("t").unwrap();
            for _ in 0..rng.gen_range(writes.clone()) {
                // A multiple of ten is a key the tree holds.
                let n = rng.gen_range(0..20_010u64) * if rng.gen_bool(0.5) { 10 } else { 1 };
                let k = key(n);
                if rng.gen_bool(0.3) {
                    t.delete(&k).unwrap();
                    model.remove(&k);
                } else {
                    let v = vec![round; rng.gen_range(0..40)];
                    t.put(&k, &v).unwrap();
                    model.insert(k, v);
                }
            }
            let what = format!("round {round}, in the write transaction");
            let range = ranges_of!(t);
            check_with(range, &model, &mut rng, &what, bounds);
        }
        w.commit().unwrap();
        let r = db.begin_read().unwrap();
        assert!(
            r.table("t").unwrap().len().unwrap() == model.len() as u64,
            "round {round}: entries"
        );
        let t = r.table("t").unwrap();
        let range = ranges_of!(t);
        check_with(range, &model, &mut rng, &format!("round {round}"), bounds);
    }
}
