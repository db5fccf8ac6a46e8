//! The incremental freelist: with a reader holding an old snapshot, every commit leaves pages
//! pending, the free set grows to thousands of extents, and commits must persist only what
//! changed (a delta in front of the chain) instead of rewriting all of it. Checked through
//! what the API shows: the chain's length moves by about a page per commit between rebases,
//! stays within its bound, and the database reopens and verifies clean with exact values.

use larchdb::{Database, Durability, Options};
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;

fn key(i: u32) -> [u8; 8] {
    (i as u64 * 2_654_435_761 % 1_000_003).to_be_bytes()
}

#[test]
fn commits_under_a_held_reader_append_deltas_and_reopen_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let mut model = BTreeMap::new();
    let db = Database::open(&path, Options::default()).unwrap();
    {
        let mut w = db.begin_write().unwrap();
        w.create_table("t").unwrap();
        {
            let mut t = w.table("t").unwrap();
            for i in 0..20_000u32 {
                t.put(&key(i), &[i as u8; 60]).unwrap();
                model.insert(key(i), vec![i as u8; 60]);
            }
        }
        w.commit().unwrap();
    }
    let held = db.begin_read().unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(3);
    let mut chain = Vec::new();
    for c in 0..600u32 {
        let mut w = db.begin_write().unwrap();
        let i = rng.gen_range(0..20_000u32);
        let v = vec![(c % 251) as u8; rng.gen_range(40..80)];
        w.table("t").unwrap().put(&key(i), &v).unwrap();
        model.insert(key(i), v);
        // Mostly unsynced, as a busy writer would; now and then a durable commit.
        let durability = if c % 97 == 0 {
            Durability::Immediate
        } else {
            Durability::None
        };
        w.commit_with(durability).unwrap();
        let stats = db.stats().unwrap();
        chain.push((stats.freelist_pages, stats.pending_pages));
    }
    let grew_by_one = chain.windows(2).filter(|w| w[1].0 == w[0].0 + 1).count();
    let (last_pages, last_pending) = *chain.last().unwrap();
    assert!(
        last_pending > 2_000,
        "the held reader pins what commits free: {last_pending} pending pages"
    );
    // A base of this free set is a few pages; 600 rewrites of it would keep the chain's length
    // steady. Deltas add one page per commit until the chain reaches its bound.
    assert!(
        grew_by_one > 300,
        "chain grew by one page in only {grew_by_one} of 600 commits (pages, pending): {:?}",
        &chain[chain.len() - 20..]
    );
    // Bound: twice a base plus slack. A base holds at most one extent per pending page.
    let per_page = (4096 - 48) / 24;
    let base_max = (last_pending as usize).div_ceil(per_page) as u64 + 1;
    assert!(
        last_pages <= 2 * base_max + 8,
        "chain of {last_pages} pages for a base of at most {base_max}"
    );
    assert!(db.verify().unwrap().is_clean());
    // Once the reader is gone, the pending pages are reused and the chain shrinks back.
    drop(held);
    for _ in 0..20 {
        let mut w = db.begin_write().unwrap();
        w.table("t").unwrap().put(&key(1), b"after").unwrap();
        w.commit_with(Durability::None).unwrap();
    }
    model.insert(key(1), b"after".to_vec());
    let after = db.stats().unwrap();
    assert!(
        after.pending_pages < 100 && after.freelist_pages < last_pages,
        "{after:?}"
    );
    drop(db);
    let db = Database::open(&path, Options::default()).unwrap();
    let report = db.verify().unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
    let r = db.begin_read().unwrap();
    let t = r.table("t").unwrap();
    let found: BTreeMap<[u8; 8], Vec<u8>> = t
        .iter()
        .map(|e| {
            let (k, v) = e.unwrap();
            (k.try_into().unwrap(), v.to_vec())
        })
        .collect();
    assert_eq!(found, model);
}
