//! Bit rot: one random bit flipped in random pages of every page type. Every flip that damages
//! data is reported as `Error::Corrupted` naming the damaged page (by `verify()` and by a read
//! that passes through the page, or by the open for a freelist page); a flip in the newest meta
//! slot is `Error::WouldLoseData` (a recovering open then reads the previous commit exactly); a
//! flip the format promises to tolerate (the older meta slot, the unused gap of a page, a free
//! page) leaves every value exact and `verify()` clean. Never a panic, never a wrong value.
//!
//! The database has every page type: meta slots, catalog branches and leaves, table roots,
//! branches and leaves below them, overflow runs of 2 to 5 pages (head and continuation pages),
//! freelist pages, free and pending pages. Each page is classified by a verification walk
//! (`Database::page_roles`); the expected outcome of each flip is computed here from the byte
//! layout in docs/design/file-format.md, independently of the engine.
//!
//! Half of the flips pick a bit anywhere in the page (mostly in the unused gap for a meta slot
//! or a short freelist page), half a bit in the bytes the page's checksum covers, so that every
//! type gets many flips that must be detected.
//!
//! `LARCH_BIT_ROT_FLIPS=N` flips per page type (default 150 in memory, a tenth of that on a
//! real file); `LARCH_BIT_ROT_FLIPS=10000 cargo test --release -p larchdb --test bit_rot` is
//! the long mode.

use larchdb::storage::FaultStorage;
use larchdb::{Database, Error, Options, PageRole};
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;

const PAGE_BYTES: usize = 4096;
const TABLES: usize = 120;
const TREE_ENTRIES: u32 = 1500;

type Model = BTreeMap<String, BTreeMap<Vec<u8>, Vec<u8>>>;

fn flips_per_type() -> usize {
    std::env::var("LARCH_BIT_ROT_FLIPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(150)
}

/// A database with every page type, its page roles, and the exact state of its last two
/// commits (a meta slot flip falls back to the previous one).
struct Sample {
    bytes: Vec<u8>,
    roles: Vec<PageRole>,
    last: Model,
    prev: Model,
    /// Slot holding the newest commit.
    newest_slot: usize,
}

fn tree_key(i: u32) -> Vec<u8> {
    // Long keys: few per branch, so the tree is three levels deep.
    let mut k = format!("{i:08}").into_bytes();
    k.resize(180, b'k');
    k
}

fn blob(i: u32, round: u32) -> Vec<u8> {
    let len = [5000, 9000, 17000][(i % 3) as usize];
    (0..len)
        .map(|j| (j as u32 * 31 + i + round) as u8)
        .collect()
}

fn apply(w: &mut larchdb::WriteTxn<'_>, model: &mut Model, table: &str, key: &[u8], v: &[u8]) {
    w.ensure_table(table).unwrap();
    w.table(table).unwrap().put(key, v).unwrap();
    model
        .entry(table.to_string())
        .or_default()
        .insert(key.to_vec(), v.to_vec());
}

fn remove(w: &mut larchdb::WriteTxn<'_>, model: &mut Model, table: &str, key: &[u8]) {
    assert!(w.table(table).unwrap().delete(key).unwrap());
    model.get_mut(table).unwrap().remove(key);
}

fn build() -> Sample {
    let s = FaultStorage::new();
    // Closed as it is: the page roles below are the file's (a compaction at close would move
    // pages and settle the last commit's frees).
    let db = Database::open_storage(
        Arc::new(s.clone()),
        Options::default().compact_on_close(false),
    )
    .unwrap();
    let mut model = Model::new();
    let mut rng = rand::rngs::StdRng::seed_from_u64(0xb17);
    // Many tables with long names: the catalog has several leaves under a branch.
    let mut w = db.begin_write().unwrap();
    for t in 0..TABLES {
        let name = format!("table-{t:04}-with-a-rather-long-name-to-fill-the-catalog");
        apply(&mut w, &mut model, &name, b"only", &[t as u8; 10]);
    }
    for i in 0..TREE_ENTRIES {
        apply(&mut w, &mut model, "tree", &tree_key(i), &[i as u8; 40]);
    }
    for i in 0..24u32 {
        apply(&mut w, &mut model, "blobs", &i.to_be_bytes(), &blob(i, 0));
    }
    w.commit().unwrap();
    // Scattered updates and deletes: freed pages all over the file, so the freelist has many
    // extents; the last commit's frees stay pending in the file.
    let mut prev = model.clone();
    for round in 1..=6u32 {
        prev = model.clone();
        let mut w = db.begin_write().unwrap();
        for _ in 0..60 {
            let i = rng.gen_range(0..TREE_ENTRIES);
            let k = tree_key(i);
            if rng.gen_bool(0.3) && model["tree"].contains_key(&k) {
                remove(&mut w, &mut model, "tree", &k);
            } else {
                apply(&mut w, &mut model, "tree", &k, &[round as u8; 40]);
            }
        }
        for i in (round % 4..24).step_by(4) {
            apply(
                &mut w,
                &mut model,
                "blobs",
                &i.to_be_bytes(),
                &blob(i, round),
            );
        }
        let name = format!(
            "table-{:04}-with-a-rather-long-name-to-fill-the-catalog",
            round * 7
        );
        apply(&mut w, &mut model, &name, b"round", &round.to_le_bytes());
        w.commit().unwrap();
    }
    assert!(db.verify().unwrap().is_clean());
    let roles = db.page_roles().unwrap();
    drop(db);
    let bytes = s.contents();
    assert_eq!(roles.len() * PAGE_BYTES, bytes.len());
    let txn =
        |slot: usize| u64::from_le_bytes(bytes[slot * PAGE_BYTES + 16..][..8].try_into().unwrap());
    let newest_slot = if txn(0) > txn(1) { 0 } else { 1 };
    Sample {
        bytes,
        roles,
        last: model,
        prev,
        newest_slot,
    }
}

fn u16_at(b: &[u8], at: usize) -> usize {
    u16::from_le_bytes(b[at..at + 2].try_into().unwrap()) as usize
}
fn u32_at(b: &[u8], at: usize) -> usize {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap()) as usize
}

/// The first page of the overflow run that holds `page`.
fn run_head(roles: &[PageRole], page: usize) -> usize {
    let mut p = page;
    while roles[p] == PageRole::OverflowContinuation {
        p -= 1;
    }
    assert_eq!(roles[p], PageRole::OverflowHead, "page {page}");
    p
}

/// The bytes of the file (absolute offsets) in `page`'s unused gap, which its checksum skips,
/// computed from docs/design/file-format.md ("Unused gap"). Empty for free pages.
fn gap(bytes: &[u8], roles: &[PageRole], page: usize) -> Range<usize> {
    let at = page * PAGE_BYTES;
    let p = &bytes[at..at + PAGE_BYTES];
    let (start, end) = match roles[page] {
        // After the meta fields: 184 bytes from format 5 on (the reservations), 152 in formats
        // 3 and 4 (the log position), 144 in format 2.
        PageRole::Meta => (
            match u32_at(p, 40) {
                2 => 144,
                3 | 4 => 152,
                _ => 184,
            },
            PAGE_BYTES,
        ),
        PageRole::CatalogBranch
        | PageRole::CatalogLeaf
        | PageRole::TableRoot
        | PageRole::Branch
        | PageRole::Leaf => {
            let slots_at = match p[4] {
                2 => 48,
                3 => 32,
                t => panic!("page {page}: node of type {t}"),
            };
            (slots_at + 2 * u16_at(p, 6), u32_at(p, 24))
        }
        PageRole::Freelist | PageRole::ReserveList => (48 + 24 * u16_at(p, 6), PAGE_BYTES),
        PageRole::OverflowHead | PageRole::OverflowContinuation => {
            let head = run_head(roles, page) * PAGE_BYTES;
            let value_end = head + 32 + u32_at(bytes, head + 28);
            let run_end = head + u32_at(bytes, head + 24) * PAGE_BYTES;
            let gap = value_end.max(at)..run_end.min(at + PAGE_BYTES);
            return if gap.is_empty() { at..at } else { gap };
        }
        PageRole::Free | PageRole::Pending => (0, 0),
        PageRole::Unaccounted => panic!("page {page} unaccounted"),
    };
    assert!(
        start <= end && end <= PAGE_BYTES,
        "page {page}: gap {start}..{end}"
    );
    at + start..at + end
}

/// What a flip must lead to.
#[derive(Clone, Copy, Debug)]
enum Expect<'m> {
    /// Opens; every table reads back exactly `model`; `verify()` is clean.
    Intact(&'m Model),
    /// Opens; `verify()` and reading every table fail with `Corrupted` naming this page.
    Corrupted(u64),
    /// The open fails with `Corrupted` naming this page.
    OpenFails(u64),
    /// The open fails with `WouldLoseData` (the newest meta slot is damaged: it may have held
    /// a commit whose pages the file holds); a recovering open reads back exactly `model`.
    Refused(&'m Model),
}

/// Reads every table in full.
fn read_all(db: &Database) -> Result<Model, Error> {
    let r = db.begin_read()?;
    let mut out = Model::new();
    for name in r.list_tables()? {
        let t = r.table(&name)?;
        let mut m = BTreeMap::new();
        for e in t.iter() {
            let (k, v) = e?;
            m.insert(k.to_vec(), v.to_vec());
        }
        assert_eq!(m.len() as u64, t.len().unwrap(), "table {name}: count");
        out.insert(name, m);
    }
    Ok(out)
}

#[derive(Clone, Copy)]
enum Backend {
    /// The fault-injecting storage: pages are read into buffers and checksummed on load.
    Memory,
    /// A real file read through the memory map, opened with `verify_checksums`.
    File,
}

fn open(
    bytes: Vec<u8>,
    backend: Backend,
    dir: &std::path::Path,
    recover: bool,
) -> Result<Database, Error> {
    let options = Options::default().recover(recover);
    match backend {
        Backend::Memory => {
            let s = FaultStorage::new();
            s.set_contents(bytes);
            Database::open_storage(Arc::new(s), options)
        }
        Backend::File => {
            let path = dir.join("rot.larch");
            std::fs::write(&path, bytes).unwrap();
            Database::open(&path, options.verify_checksums(true))
        }
    }
}

fn check(bytes: Vec<u8>, expect: Expect<'_>, backend: Backend, dir: &std::path::Path, what: &str) {
    let db = open(bytes.clone(), backend, dir, false);
    match expect {
        Expect::Refused(model) => {
            match db {
                Err(Error::WouldLoseData { .. }) => {}
                other => panic!("{what}: open gave {other:?}, expected WouldLoseData"),
            }
            let db = open(bytes, backend, dir, true)
                .unwrap_or_else(|e| panic!("{what}: recovering open failed: {e}"));
            assert!(db.recovery().is_some(), "{what}: nothing reported given up");
            if let Err(e) = db.verify() {
                panic!("{what}: verify failed: {e}");
            }
            match read_all(&db) {
                Ok(m) => assert!(m == *model, "{what}: values differ from the model"),
                Err(e) => panic!("{what}: read failed: {e}"),
            }
        }
        Expect::OpenFails(page) => match db {
            Err(Error::Corrupted { page: p, .. }) if p == page => {}
            other => panic!("{what}: open gave {other:?}, expected Corrupted at page {page}"),
        },
        Expect::Intact(model) => {
            let db = db.unwrap_or_else(|e| panic!("{what}: open failed: {e}"));
            if let Err(e) = db.verify() {
                panic!("{what}: verify failed: {e}");
            }
            match read_all(&db) {
                Ok(m) => assert!(m == *model, "{what}: values differ from the model"),
                Err(e) => panic!("{what}: read failed: {e}"),
            }
        }
        Expect::Corrupted(page) => {
            let db = db.unwrap_or_else(|e| panic!("{what}: open failed: {e}"));
            match db.verify() {
                Err(Error::Corrupted { page: p, .. }) if p == page => {}
                other => panic!("{what}: verify gave {other:?}, expected Corrupted at {page}"),
            }
            match read_all(&db) {
                Err(Error::Corrupted { page: p, .. }) if p == page => {}
                Err(e) => panic!("{what}: read gave {e}, expected Corrupted at {page}"),
                Ok(_) => panic!("{what}: reading every table did not notice page {page}"),
            }
        }
    }
}

/// Tallies of one page type.
#[derive(Default)]
struct Tally {
    pages: usize,
    flips: usize,
    detected: usize,
    open_refused: usize,
    in_gap: usize,
    fell_back: usize,
    harmless: usize,
}

fn sweep(backend: Backend, flips: usize, seed: u64) {
    let sample = build();
    let dir = tempfile::tempdir().unwrap();
    let roles = &sample.roles;
    let mut by_role: BTreeMap<PageRole, Vec<usize>> = BTreeMap::new();
    for (page, role) in roles.iter().enumerate() {
        by_role.entry(*role).or_default().push(page);
    }
    // The database really has every type, several pages of most.
    for (role, min) in [
        (PageRole::Meta, 2),
        (PageRole::CatalogBranch, 1),
        (PageRole::CatalogLeaf, 3),
        (PageRole::TableRoot, 3),
        (PageRole::Branch, 3),
        (PageRole::Leaf, 50),
        (PageRole::OverflowHead, 20),
        (PageRole::OverflowContinuation, 20),
        (PageRole::Freelist, 1),
        (PageRole::Free, 1),
        (PageRole::Pending, 1),
    ] {
        let n = by_role.get(&role).map_or(0, |v| v.len());
        assert!(
            n >= min,
            "sample has {n} pages of type {role:?}, wants {min}"
        );
    }
    assert!(!by_role.contains_key(&PageRole::Unaccounted));

    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut report = Vec::new();
    for (role, pages) in &by_role {
        let mut tally = Tally {
            pages: pages.len(),
            ..Default::default()
        };
        for trial in 0..flips {
            let page = pages[rng.gen_range(0..pages.len())];
            let at = page * PAGE_BYTES;
            let gap = gap(&sample.bytes, roles, page);
            // Even trials: any bit of the page. Odd trials: a bit outside the gap.
            let byte = if trial % 2 == 0 || gap.len() == PAGE_BYTES {
                rng.gen_range(at..at + PAGE_BYTES)
            } else {
                let b = rng.gen_range(0..PAGE_BYTES - gap.len());
                let b = at + b;
                if b >= gap.start {
                    b + gap.len()
                } else {
                    b
                }
            };
            let bit = rng.gen_range(0..8);
            let in_gap = gap.contains(&byte);
            let expect = match role {
                _ if in_gap => {
                    tally.in_gap += 1;
                    Expect::Intact(&sample.last)
                }
                PageRole::Meta if page == sample.newest_slot => {
                    // The newest slot is damaged: the open cannot tell whether it held a commit
                    // newer than the other slot's (the file holds the newest commit's pages),
                    // and refuses; a recovering open takes the other slot, whose commit (the
                    // previous one) is intact in full.
                    tally.fell_back += 1;
                    Expect::Refused(&sample.prev)
                }
                PageRole::Meta | PageRole::Free | PageRole::Pending => {
                    // The older slot, or a page nothing reaches: nothing to notice.
                    tally.harmless += 1;
                    Expect::Intact(&sample.last)
                }
                PageRole::Freelist | PageRole::ReserveList => {
                    // The open loads the free set and the reserved pages' list, checksumming
                    // every page of them.
                    tally.open_refused += 1;
                    Expect::OpenFails(page as u64)
                }
                PageRole::OverflowContinuation => {
                    tally.detected += 1;
                    Expect::Corrupted(run_head(roles, page) as u64)
                }
                _ => {
                    tally.detected += 1;
                    Expect::Corrupted(page as u64)
                }
            };
            let mut bytes = sample.bytes.clone();
            bytes[byte] ^= 1 << bit;
            let what = format!(
                "{role:?} page {page}, byte {} bit {bit}{}",
                byte - at,
                if in_gap { " (unused gap)" } else { "" }
            );
            check(bytes, expect, backend, dir.path(), &what);
            tally.flips += 1;
        }
        report.push((*role, tally));
    }
    eprintln!(
        "{:<22} {:>6} {:>7} {:>9} {:>13} {:>7} {:>10} {:>9}",
        "page type",
        "pages",
        "flips",
        "detected",
        "open refused",
        "in gap",
        "fell back",
        "harmless"
    );
    for (role, t) in &report {
        eprintln!(
            "{:<22} {:>6} {:>7} {:>9} {:>13} {:>7} {:>10} {:>9}",
            format!("{role:?}"),
            t.pages,
            t.flips,
            t.detected,
            t.open_refused,
            t.in_gap,
            t.fell_back,
            t.harmless
        );
    }
}

#[test]
fn a_flipped_bit_in_any_page_is_reported_at_that_page_or_harmless() {
    sweep(Backend::Memory, flips_per_type(), 1);
}

/// The same through a real file and its memory map, with `verify_checksums` (which reads rely
/// on for bit rot through the map; without it only `verify()` checks data pages' checksums).
#[test]
fn a_flipped_bit_is_caught_through_the_memory_map() {
    sweep(Backend::File, flips_per_type().div_ceil(10), 2);
}

/// A copy-on-write copy does not seal damage in. A bit flips on disk in a value of a committed
/// leaf, in bytes no read verifies (the default: mapped pages are not checksummed on read);
/// then a put to another key of the same leaf (its neighbour) copies the leaf. The copy's checksum is derived
/// from the original's, not computed over the damaged bytes, so `verify()` still reports the
/// damage, at the copy. (A checksum computed over the copy would have made it look sound.)
/// Through the log, the checkpoint that merges the put copies the leaf: a merge that built the
/// leaf afresh from its cells sealed the damage in, until it learnt to check the old leaf's
/// checksum first (`btree::merge`).
#[test]
fn copying_a_damaged_leaf_does_not_launder_the_damage() {
    copy_a_damaged_leaf(false);
    copy_a_damaged_leaf(true);
}

fn copy_a_damaged_leaf(log: bool) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let value = |i: u8| vec![i; 60];
    {
        let db = Database::open(&path, Options::default().log(log)).unwrap();
        let mut w = db.begin_write().unwrap();
        w.create_table("t").unwrap();
        {
            let mut t = w.table("t").unwrap();
            // Several leaves under a root branch.
            for i in 0..240u8 {
                t.put(&[i], &value(i)).unwrap();
            }
        }
        w.commit().unwrap();
    }
    // Flip a bit in the middle of key 105's value, wherever the leaf holding it lies.
    let mut bytes = std::fs::read(&path).unwrap();
    let needle = value(105);
    let at = bytes
        .windows(needle.len())
        .position(|w| w == needle.as_slice())
        .expect("value on disk");
    bytes[at + 30] ^= 0x10;
    std::fs::write(&path, &bytes).unwrap();
    // The pages `verify_all` reports.
    let damaged = |db: &Database| -> Vec<u64> {
        let report = db.verify_all().unwrap();
        report.problems.iter().map(|p| p.page).collect()
    };
    let db = Database::open(&path, Options::default().log(log)).unwrap();
    let before = damaged(&db);
    assert!(!before.is_empty(), "the flip itself is reported");
    {
        let mut w = db.begin_write().unwrap();
        w.table("t").unwrap().put(&[106], &value(1)).unwrap();
        w.commit().unwrap();
    }
    // Through the log, the leaf is copied when a checkpoint merges the commit.
    db.checkpoint().unwrap();
    let after = damaged(&db);
    assert!(
        after.iter().any(|p| !before.contains(p)),
        "log {log}: the copy of the damaged leaf must not verify clean: {before:?} then {after:?}"
    );
    let r = db.begin_read().unwrap();
    assert_eq!(
        r.table("t").unwrap().get(&[106]).unwrap(),
        Some(&value(1)[..])
    );
}
