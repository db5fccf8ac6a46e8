//! `prefix` and `prefix_rev` on read and write handles, against a `BTreeMap` filtered by
//! `starts_with`: keys over a small alphabet with 0x00 and 0xFF in it (so that prefixes end in
//! 0xFF runs, and keys extend a prefix by 0x00), the empty prefix, a prefix of only 0xFF
//! bytes, and prefixes no key has; pages only, and through the log with records in the
//! overlay, in a checkpoint's tree, and in the transaction's own writes.

mod common;

use larchdb::{Database, Options};
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

const ALPHABET: [u8; 4] = [0x00, b'a', 0xFE, 0xFF];

fn random_key(rng: &mut rand::rngs::StdRng, len_max: usize) -> Vec<u8> {
    let len = rng.gen_range(0..=len_max);
    (0..len)
        .map(|_| ALPHABET[rng.gen_range(0..ALPHABET.len())])
        .collect()
}

/// Every prefix worth asking: all strings over the alphabet up to 3 bytes (the empty one,
/// 0xFF runs, ones no key has), and a few longer ones.
fn prefixes(rng: &mut rand::rngs::StdRng) -> Vec<Vec<u8>> {
    let mut out = vec![Vec::new()];
    let mut level = vec![Vec::new()];
    for _ in 0..3 {
        let mut next = Vec::new();
        for p in &level {
            for &b in &ALPHABET {
                let mut q: Vec<u8> = p.clone();
                q.push(b);
                next.push(q);
            }
        }
        out.extend(next.iter().cloned());
        level = next;
    }
    out.push(vec![0xFF; 6]);
    for _ in 0..20 {
        out.push(random_key(rng, 6));
    }
    out
}

fn expected(model: &Model, prefix: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
    model
        .iter()
        .filter(|(k, _)| k.starts_with(prefix))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Asserts that a prefix's forward and reverse scans (`fwd`, `rev`) give exactly what the
/// model holds under `prefix`, in order.
fn assert_scans(
    fwd: larchdb::Range<'_>,
    rev: larchdb::Range<'_>,
    model: &Model,
    prefix: &[u8],
    what: &str,
) {
    let want = expected(model, prefix);
    assert_eq!(common::collect(fwd), want, "{what}: prefix {prefix:02x?}");
    let mut back = common::collect(rev);
    back.reverse();
    assert_eq!(back, want, "{what}: prefix_rev {prefix:02x?}");
}

fn check_read(db: &Database, model: &Model, prefixes: &[Vec<u8>], what: &str) {
    let r = db.begin_read().unwrap();
    let t = r.table("t").unwrap();
    for p in prefixes {
        assert_scans(t.prefix(p), t.prefix_rev(p), model, p, what);
    }
}

fn run(options: Options, what: &str) {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().join("db"), options.clone()).unwrap();
    common::create_table(&db, "t");
    let mut rng = rand::rngs::StdRng::seed_from_u64(22);
    let prefixes = prefixes(&mut rng);
    let mut model = Model::new();
    for round in 0..30 {
        let mut w = db.begin_write().unwrap();
        {
            let mut t = w.table("t").unwrap();
            for _ in 0..rng.gen_range(1..200) {
                let k = random_key(&mut rng, 8);
                if rng.gen_bool(0.2) {
                    t.delete(&k).unwrap();
                    model.remove(&k);
                } else {
                    let v = vec![round as u8; rng.gen_range(0..40)];
                    t.put(&k, &v).unwrap();
                    model.insert(k, v);
                }
            }
            // The transaction's own writes, before the commit.
            for p in prefixes.iter().take(25) {
                let what = format!("{what}: round {round}, in the write transaction");
                assert_scans(t.prefix(p), t.prefix_rev(p), &model, p, &what);
            }
        }
        w.commit().unwrap();
        if round % 10 == 9 {
            check_read(&db, &model, &prefixes, &format!("{what}: round {round}"));
            if options.log {
                db.checkpoint().unwrap();
            }
        }
    }
    check_read(&db, &model, &prefixes, &format!("{what}: after the rounds"));
    drop(db);
    let db = Database::open(dir.path().join("db"), options).unwrap();
    check_read(&db, &model, &prefixes, &format!("{what}: reopened"));
}

#[test]
fn prefix_scans_match_a_filtered_model_on_pages() {
    run(Options::default(), "pages");
}

#[test]
fn prefix_scans_match_a_filtered_model_through_the_log() {
    run(common::small_log_options(), "log");
}
