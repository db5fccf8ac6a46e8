//! Puts that arrive in key order take the leaf the previous put landed in without a descent
//! (`btree::PutHint`). Runs of ascending and descending keys, overwrites, deletes, appends,
//! large values, commits and aborts, against a `BTreeMap`, with `verify()` after each commit.

mod common;

use larchdb::{Database, Options};
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;

fn key(i: u64) -> Vec<u8> {
    format!("{i:012}").into_bytes()
}

#[test]
fn sorted_runs_match_a_btreemap() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().join("db"), Options::default()).unwrap();
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut rng = rand::rngs::StdRng::seed_from_u64(11);
    {
        let mut w = db.begin_write().unwrap();
        w.create_table("t").unwrap();
        w.commit().unwrap();
    }
    for round in 0..60 {
        let mut w = db.begin_write().unwrap();
        let mut pending = model.clone();
        {
            let mut t = w.table("t").unwrap();
            for _ in 0..rng.gen_range(1..6) {
                // A run: consecutive or spread keys, up or down, some values large.
                let start = rng.gen_range(0..20_000u64);
                let step = rng.gen_range(1..7u64);
                let len = rng.gen_range(1..400u64);
                let down = rng.gen_bool(0.3);
                for j in 0..len {
                    let i = if down {
                        start + (len - j) * step
                    } else {
                        start + j * step
                    };
                    let vlen = if rng.gen_bool(0.02) {
                        rng.gen_range(2000..9000)
                    } else {
                        rng.gen_range(0..120)
                    };
                    let v: Vec<u8> = (0..vlen).map(|b| (b as u64 + i + round) as u8).collect();
                    let replaced = t.put(&key(i), &v).unwrap();
                    assert_eq!(replaced, pending.insert(key(i), v).is_some());
                }
                // Other changes between runs drop the hint.
                match rng.gen_range(0..3) {
                    0 => {
                        let i = rng.gen_range(0..20_000u64);
                        let present = t.delete(&key(i)).unwrap();
                        assert_eq!(present, pending.remove(&key(i)).is_some());
                    }
                    1 => {
                        let last = pending.keys().next_back().cloned().unwrap_or_default();
                        let mut k = last.clone();
                        k.push(b'+');
                        t.append(&k, b"appended").unwrap();
                        pending.insert(k, b"appended".to_vec());
                    }
                    _ => {}
                }
            }
            assert_eq!(t.len().unwrap(), pending.len() as u64);
        }
        if rng.gen_bool(0.2) {
            w.abort();
        } else {
            w.commit().unwrap();
            model = pending;
            db.verify().unwrap();
        }
        let r = db.begin_read().unwrap();
        let t = r.table("t").unwrap();
        let got = common::collect(t.iter());
        let want: Vec<(Vec<u8>, Vec<u8>)> = model.clone().into_iter().collect();
        assert_eq!(got, want, "round {round}");
    }
}
