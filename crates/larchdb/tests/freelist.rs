//! The incremental freelist: with readers holding old snapshots, every commit leaves pages
//! pending, the free set grows to thousands of extents, and commits must persist only what
//! changed (a delta in front of the chain) instead of rewriting all of it. Checked through
//! what the API shows: the chain's length moves by about a page per commit between rebases,
//! stays within its bound, and the database reopens and verifies clean with exact values.
//!
//! And a reader held for long pins only the pages of its own tree, not everything freed
//! after it (`FreeSet::release_unreached`): with page commits and with checkpoints, the
//! pending pages and the file stay bounded while the reader still reads its snapshot.

mod common;

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
    // Pages only: every commit frees pages and writes the free set.
    let db = Database::open(&path, Options::default().log(false)).unwrap();
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
    // A reader on every commit's snapshot: each commit frees pages some reader reaches, so
    // every one stays pending.
    let mut held = vec![db.begin_read().unwrap()];
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
        held.push(db.begin_read().unwrap());
        let stats = db.stats().unwrap();
        chain.push((stats.freelist_pages, stats.pending_pages));
    }
    let grew_by_one = chain.windows(2).filter(|w| w[1].0 == w[0].0 + 1).count();
    let (last_pages, last_pending) = *chain.last().unwrap();
    assert!(
        last_pending > 2_000,
        "the held readers pin what commits free: {last_pending} pending pages"
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
    // Once the readers are gone, the pending pages are reused and the chain shrinks back.
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

/// Loads `n` entries of `value_bytes` into table "t" in one commit; returns them.
fn load(db: &Database, n: u32, value_bytes: usize) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut model = BTreeMap::new();
    let mut w = db.begin_write().unwrap();
    w.create_table("t").unwrap();
    {
        let mut t = w.table("t").unwrap();
        for i in 0..n {
            t.put(&key(i), &vec![i as u8; value_bytes]).unwrap();
            model.insert(key(i).to_vec(), vec![i as u8; value_bytes]);
        }
    }
    w.commit().unwrap();
    model
}

/// `commits` one-put commits of random keys of the `n` loaded, recorded in `model`; returns
/// the most pages the file used and the most pages pending, sampled every `every` commits.
fn overwrite(
    db: &Database,
    model: &mut BTreeMap<Vec<u8>, Vec<u8>>,
    n: u32,
    commits: u32,
    every: u32,
    value_bytes: usize,
) -> (u64, u64) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(9);
    let (mut most_pages, mut most_pending) = (0, 0);
    for c in 0..commits {
        let mut w = db.begin_write().unwrap();
        let k = key(rng.gen_range(0..n));
        let v = vec![(c % 251) as u8; value_bytes];
        w.table("t").unwrap().put(&k, &v).unwrap();
        w.commit_with(Durability::None).unwrap();
        model.insert(k.to_vec(), v);
        if c % every == 0 {
            let s = db.stats().unwrap();
            most_pages = most_pages.max(s.page_count);
            most_pending = most_pending.max(s.pending_pages);
        }
    }
    (most_pages, most_pending)
}

/// Page commits: one reader holds the loaded tree through 6,000 commits. Each commit copies a
/// path and frees the one before it, written by the commit before: no reader reaches those
/// pages, so they are reused, and what stays pending is about the held tree itself (freed as
/// the commits replace it) plus what waits for the next look (`FreeSet::scan_due`). Without
/// the look, all of them would stay pending while the reader lives.
#[test]
fn a_reader_held_across_page_commits_pins_only_its_own_tree() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().join("db"), Options::default()).unwrap();
    let model = load(&db, 20_000, 60);
    let held = db.begin_read().unwrap();
    let s = db.stats().unwrap();
    let tree = s.leaf_pages + s.branch_pages;
    let (most_pages, most_pending) = overwrite(&db, &mut model.clone(), 20_000, 6_000, 50, 60);
    // Measured: 1,279 pending and 1,950 pages for a tree of 526 (34,187 and 34,865 without
    // the look).
    assert!(
        most_pending < 4 * tree,
        "{most_pending} pages pending for a held tree of {tree} pages"
    );
    assert!(
        most_pages < 6 * tree,
        "the file grew to {most_pages} pages for a tree of {tree}"
    );
    common::assert_holds(&held.table("t").unwrap(), &model, "the held snapshot");
    drop(held);
    assert!(db.verify().unwrap().is_clean());
}

/// Checkpoints: one reader holds the loaded tree while about a hundred checkpoints each
/// rewrite most leaves. Each checkpoint frees the pages the one before wrote, which no reader
/// reaches; they are reused at the next checkpoint, so the file holds the held tree, the
/// durable one, and the two newest, whatever the number of checkpoints. Without a look at
/// each reader's tree, the file would grow by a tree every checkpoint.
#[test]
fn a_reader_held_across_checkpoints_pins_only_its_own_tree() {
    let dir = tempfile::tempdir().unwrap();
    let options = common::small_log_options()
        .log_segment_bytes(64 << 10)
        .log_segments(8)
        .checkpoint_bytes(32 << 10)
        .durability(Durability::None);
    let db = Database::open(dir.path().join("db"), options.clone()).unwrap();
    let mut model = load(&db, 2_000, 100);
    let loaded = model.clone();
    db.checkpoint().unwrap();
    let held = db.begin_read().unwrap();
    let s = db.stats().unwrap();
    let tree = s.leaf_pages + s.branch_pages;
    let (most_pages, _) = overwrite(&db, &mut model, 2_000, 20_000, 100, 100);
    // Measured: 449 pages for a tree of 89 (2,687 without the look).
    assert!(
        most_pages < 8 * tree + 100,
        "the file grew to {most_pages} pages for a tree of {tree}"
    );
    common::assert_holds(&held.table("t").unwrap(), &loaded, "the held snapshot");
    drop(held);
    // Closed without compaction (`small_log_options`): the open replays the log.
    drop(db);
    let db = Database::open(dir.path().join("db"), options).unwrap();
    assert!(db.verify().unwrap().is_clean());
    let r = db.begin_read().unwrap();
    common::assert_holds(&r.table("t").unwrap(), &model, "after reopening");
}
