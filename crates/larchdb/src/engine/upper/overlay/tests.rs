use super::*;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::ops::RangeBounds;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

/// (table, key) -> [(txn, value)] in commit order.
type Model = BTreeMap<(u64, Vec<u8>), Vec<(u64, Option<Vec<u8>>)>>;
/// A record as `Overlay::insert` (the tests' unmarked `insert_marked`) takes it.
type Record<'a> = (u64, &'a [u8], Option<&'a [u8]>);

/// Inserts commit `txn`'s records into the overlay and the model.
fn insert_both(
    o: &Overlay,
    model: &mut Model,
    txn: u64,
    batch: Vec<(u64, Vec<u8>, Option<Vec<u8>>)>,
) {
    o.insert(
        txn,
        batch
            .iter()
            .map(|(t, k, v)| (*t, k.as_slice(), v.as_deref())),
    );
    for (t, k, v) in batch {
        model.entry((t, k)).or_default().push((txn, v));
    }
}

/// A table is at most three quarters full: it doubles past that, rehashing every entry from
/// the entries themselves (a slot keeps no hash), and every key is found after each growth,
/// from the new table and from the old ones a reader may still be on; keys never inserted are
/// absent. An overlay made for a count of entries holds them without growing.
#[test]
fn a_table_grows_past_three_quarters_and_finds_every_key() {
    let o = Overlay::new();
    let key = |i: u64| format!("key-{i:07}").into_bytes();
    let n = 50_000u64;
    let mut old: Vec<*const Slots> = Vec::new();
    for i in 0..n {
        let before = o.table.load(Ordering::Acquire) as *const Slots;
        o.insert(
            i + 1,
            [(i % 3, key(i).as_slice(), Some(&i.to_le_bytes()[..]))],
        );
        // SAFETY: the overlay keeps every table it had while it lives.
        let slots = unsafe { &*o.table.load(Ordering::Acquire) }.slots.len();
        assert!(
            o.len() * 4 <= slots * 3,
            "{} entries in {slots} slots",
            o.len()
        );
        if !std::ptr::eq(before, o.table.load(Ordering::Acquire)) {
            assert!(o.len() * 4 > slots / 2 * 3, "grew at {} entries", o.len());
            old.push(before);
        }
    }
    assert!(old.len() >= 5, "the table grew {} times", old.len());
    for i in 0..n {
        assert_eq!(
            o.get(i % 3, &key(i), n),
            Lookup::Value(&i.to_le_bytes()[..]),
            "key {i}"
        );
        assert_eq!(o.get((i + 1) % 3, &key(i), n), Lookup::Absent, "key {i}");
        assert_eq!(
            o.get(i % 3, &key(n + i), n),
            Lookup::Absent,
            "key {}",
            n + i
        );
    }
    // A reader still on an older table finds the entries that were in it.
    for &t in &old {
        // SAFETY: as above.
        let table = unsafe { &*t };
        let held = table
            .control
            .iter()
            .filter(|c| c.load(Ordering::Relaxed) != 0)
            .count();
        for i in 0..held as u64 {
            assert!(
                o.find(table, o.hash(i % 3, &key(i)), i % 3, &key(i))
                    .is_ok(),
                "key {i}"
            );
        }
    }
    let sized = Overlay::with_capacity(n as usize);
    for i in 0..n {
        sized.insert(i + 1, [(0, key(i).as_slice(), None)]);
    }
    assert_eq!(
        sized.tables(),
        1,
        "a table sized for its entries never grew"
    );
}

/// Blind writes' keys found in the tree are counted at each snapshot by the commits that made
/// their entries, including entries a later commit wrote again (the commit that made an entry
/// is its oldest version's), and a snapshot before the list's last commit reads only its
/// prefix; the answers of earlier calls are reused, whatever order the snapshots come in.
#[test]
fn blind_keys_in_the_tree_are_counted_at_every_snapshot() {
    let o = Overlay::new();
    let key = |i: u64| format!("b{i:05}").into_bytes();
    let in_tree = |k: &[u8]| -> Result<bool> { Ok(k.last().is_some_and(|b| b % 3 == 0)) };
    for txn in 1..=300u64 {
        // Commit `txn` writes key `txn` blind (table 1 for one in five), and writes key
        // `txn / 2` again (a version in front of an entry an earlier commit made).
        let again = key(txn / 2);
        let fresh = key(txn);
        o.insert_marked(
            txn,
            [
                (
                    u64::from(txn % 5 == 0),
                    fresh.as_slice(),
                    Some(&b"v"[..]),
                    true,
                    0,
                ),
                (
                    u64::from(txn / 2 % 5 == 0),
                    again.as_slice(),
                    Some(&b"w"[..]),
                    false,
                    0,
                ),
            ],
        );
    }
    let expect = |table: u64, txn: u64| {
        (1..=txn.min(300))
            .filter(|&i| u64::from(i % 5 == 0) == table && in_tree(&key(i)).unwrap())
            .count() as u64
    };
    for txn in [300, 17, 299, 1, 150, 0, 151, 400] {
        for table in 0..2 {
            assert_eq!(
                o.blind_in_tree(table, txn, in_tree).unwrap(),
                expect(table, txn),
                "table {table} at {txn}"
            );
        }
    }
}

/// Every key's versions, compared with a model at every snapshot, across many growths.
#[test]
fn lookups_at_every_snapshot_match_a_model() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(5);
    let o = Overlay::new();
    let mut model = Model::new();
    for txn in 1..=300u64 {
        let mut batch: Vec<(u64, Vec<u8>, Option<Vec<u8>>)> = Vec::new();
        for _ in 0..rng.gen_range(1..40) {
            let table = rng.gen_range(0..3);
            let key = format!("{:06}", rng.gen_range(0..4000)).into_bytes();
            let value = (!rng.gen_bool(0.1)).then(|| vec![txn as u8; rng.gen_range(0..50)]);
            batch.push((table, key, value));
        }
        insert_both(&o, &mut model, txn, batch);
    }
    assert_eq!(o.len(), model.len());
    assert!(o.owned.lock().unwrap().tables.len() > 2, "the table grew");
    for ((t, k), versions) in &model {
        for snap in [0u64, 1, 50, 150, 299, 300, 1000] {
            let want = match versions.iter().rev().find(|(txn, _)| *txn <= snap) {
                None => Lookup::Absent,
                Some((_, None)) => Lookup::Deleted,
                Some((_, Some(v))) => Lookup::Value(v),
            };
            assert_eq!(o.get(*t, k, snap), want, "table {t} key {k:?} at {snap}");
        }
    }
    assert_eq!(o.get(7, b"000001", 300), Lookup::Absent);
    // The same key in another table is another entry.
    o.insert(
        301,
        [(0, &b"k"[..], Some(&b"zero"[..])), (1, b"k", Some(b"one"))],
    );
    assert_eq!(o.get(0, b"k", 301), Lookup::Value(b"zero"));
    assert_eq!(o.get(1, b"k", 301), Lookup::Value(b"one"));
    assert_eq!(o.get(1, b"k", 300), Lookup::Absent);
}

/// Overlays made one after another from a handle's spare memory take the last ones'
/// chunks and tables, and still hold exactly their own commits: an emptied table keeps
/// no entry of the overlay before, and one not emptied yet is never handed out.
#[test]
fn overlays_that_reuse_memory_hold_only_their_own_commits() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(9);
    let spare = Arc::new(Spare::default());
    let mut reused_tables = 0;
    for generation in 0..6u64 {
        // Every other generation runs no checkpoint: the dropped table stays unemptied.
        if generation % 2 == 0 {
            spare.prepare();
        }
        let spare_slots = spare.slots.lock().unwrap().as_ref().map(|t| t.slots.len());
        let chunks_before = spare.chunks.lock().unwrap().len();
        let o = Overlay::with_spare(Some(spare.clone()));
        // It starts with the smallest table, whatever the spare holds: the spare's table goes
        // to the overlay that outgrows its own.
        assert_eq!(
            o.owned.lock().unwrap().tables[0].slots.len(),
            SLOTS_MIN,
            "generation {generation}"
        );
        assert_eq!(
            spare.slots.lock().unwrap().as_ref().map(|t| t.slots.len()),
            spare_slots,
            "generation {generation}: the spare keeps its table until then"
        );
        // The first table the overlay grows into is the spare's, if one is as large; a stale
        // slot in it would hide from lookups (the hasher is new) but fill the table, until a
        // probe finds no empty slot at all.
        let mut grown = false;
        let mut model = Model::new();
        let keys = 20_000 + 5_000 * generation;
        for txn in 1..=400u64 {
            let mut batch: Vec<(u64, Vec<u8>, Option<Vec<u8>>)> = Vec::new();
            for _ in 0..rng.gen_range(1..80) {
                let table = rng.gen_range(0..2);
                let key = format!("{generation}-{:06}", rng.gen_range(0..keys)).into_bytes();
                let value = (!rng.gen_bool(0.1)).then(|| vec![txn as u8; rng.gen_range(0..200)]);
                batch.push((table, key, value));
            }
            insert_both(&o, &mut model, txn, batch);
            if !grown && o.owned.lock().unwrap().tables.len() > 1 {
                grown = true;
                if let Some(slots) = spare_slots {
                    reused_tables += 1;
                    assert!(
                        spare.slots.lock().unwrap().is_none(),
                        "generation {generation}: the spare's table taken"
                    );
                    assert_eq!(
                        o.owned.lock().unwrap().tables[1].slots.len(),
                        slots,
                        "generation {generation}: grown into the spare's table"
                    );
                }
            }
        }
        assert!(grown, "generation {generation}: the table grew");
        assert_eq!(o.len(), model.len(), "generation {generation}");
        if generation > 0 {
            assert!(
                spare.chunks.lock().unwrap().len() < chunks_before || chunks_before == 0,
                "generation {generation}: chunks were taken from the spare"
            );
        }
        for ((t, k), versions) in &model {
            let want = match versions.last() {
                None => Lookup::Absent,
                Some((_, None)) => Lookup::Deleted,
                Some((_, Some(v))) => Lookup::Value(v),
            };
            assert_eq!(
                o.get(*t, k, 400),
                want,
                "generation {generation}, key {k:?}"
            );
        }
        // No key of an earlier generation is found.
        for g in 0..generation {
            for t in 0..2 {
                let k = format!("{g}-{:06}", rng.gen_range(0..keys)).into_bytes();
                assert_eq!(o.get(t, &k, 400), Lookup::Absent, "generation {generation}");
            }
        }
        drop(o);
        assert!(
            !spare.chunks.lock().unwrap().is_empty(),
            "the chunks were kept"
        );
    }
    assert!(reused_tables >= 2, "tables were reused: {reused_tables}");
}

/// What the model holds for `table` within the bounds at snapshot `snap`, in order.
fn model_scan(
    model: &Model,
    table: u64,
    snap: u64,
    (start, end): (Bound<&[u8]>, Bound<&[u8]>),
    reverse: bool,
) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
    let mut out: Vec<_> = model
        .iter()
        .filter(|((t, k), _)| *t == table && (start, end).contains(k.as_slice()))
        .filter_map(|((_, k), versions)| {
            let (_, v) = versions.iter().rev().find(|(txn, _)| *txn <= snap)?;
            Some((k.clone(), v.clone()))
        })
        .collect();
    if reverse {
        out.reverse();
    }
    out
}

/// Scans of every table, in both directions, with every kind of bound and at old and new
/// snapshots, match a model while commits go on being inserted: the index is built a
/// little at a time (a scan after every few commits) and merges its runs as it grows.
#[test]
fn scans_match_a_model_as_the_index_grows() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(11);
    let o = Overlay::new();
    let mut model = Model::new();
    let key = |rng: &mut rand::rngs::StdRng| {
        // Keys longer and shorter than the 16-byte prefix, sharing long prefixes.
        let n: u32 = rng.gen_range(0..3000);
        match n % 3 {
            0 => format!("{n:06}").into_bytes(),
            1 => format!("key-with-a-long-shared-prefix-{n:06}").into_bytes(),
            _ => n.to_be_bytes()[..(n % 4) as usize + 1].to_vec(),
        }
    };
    let bound = |rng: &mut rand::rngs::StdRng, k: Vec<u8>| match rng.gen_range(0..3) {
        0 => Bound::Included(k),
        1 => Bound::Excluded(k),
        _ => Bound::Unbounded,
    };
    let mut runs_seen = 0;
    for txn in 1..=400u64 {
        let mut batch: Vec<(u64, Vec<u8>, Option<Vec<u8>>)> = Vec::new();
        for _ in 0..rng.gen_range(1..30) {
            let table = rng.gen_range(0..3);
            let value = (!rng.gen_bool(0.15)).then(|| vec![txn as u8; rng.gen_range(0..20)]);
            batch.push((table, key(&mut rng), value));
        }
        insert_both(&o, &mut model, txn, batch);
        if rng.gen_range(0..4) != 0 {
            continue;
        }
        for _ in 0..3 {
            let table = rng.gen_range(0..4);
            let snap = rng.gen_range(0..=txn + 1);
            let reverse = rng.gen_bool(0.5);
            let (a, b) = (key(&mut rng), key(&mut rng));
            let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
            let (start, end) = (bound(&mut rng, lo), bound(&mut rng, hi));
            let bounds = (
                start.as_ref().map(|k| k.as_slice()),
                end.as_ref().map(|k| k.as_slice()),
            );
            let got: Vec<_> = o
                .scan(table, snap, bounds.0, bounds.1, reverse)
                .map(|(k, v)| (k.to_vec(), v.map(|v| v.to_vec())))
                .collect();
            let want = model_scan(&model, table, snap, bounds, reverse);
            assert_eq!(got, want, "table {table} at {snap} within {bounds:?}");
        }
        runs_seen = runs_seen.max(o.index.lock().unwrap().runs.len());
    }
    assert!(
        runs_seen >= 3,
        "the index held several runs at once ({runs_seen})"
    );
    let index = o.index();
    assert_eq!(index.covered, o.len());
    for w in index.runs.windows(2) {
        assert!(
            w[0].len() >= RUN_GROWTH * w[1].len(),
            "runs fall by the growth factor"
        );
    }
    // A bound past the end, and one before the start, of a table.
    let all = model_scan(&model, 1, 400, (Bound::Unbounded, Bound::Unbounded), false);
    assert_eq!(
        o.scan(1, 400, Bound::Unbounded, Bound::Unbounded, false)
            .count(),
        all.len()
    );
    assert_eq!(
        o.scan(
            1,
            400,
            Bound::Excluded(b"\xff\xff\xff\xff\xff"),
            Bound::Unbounded,
            false
        )
        .count(),
        0
    );
    assert_eq!(
        o.scan(1, 400, Bound::Unbounded, Bound::Excluded(b""), true)
            .count(),
        0
    );
}

/// Scans on other threads while the writer inserts: each sees every key published at its
/// snapshot, in order, whichever of them builds the index's next run.
#[test]
fn scans_beside_the_writer_see_every_published_key() {
    const COMMITS: u64 = 3000;
    let o = Arc::new(Overlay::new());
    let published = Arc::new(AtomicU64::new(0));
    let readers: Vec<_> = (0..2)
        .map(|r| {
            let (o, published) = (o.clone(), published.clone());
            std::thread::spawn(move || {
                let mut rng = rand::rngs::StdRng::seed_from_u64(r);
                loop {
                    let snap = published.load(Ordering::Acquire);
                    // Commit n added key (n * 7919 mod COMMITS), and table 1's key n.
                    let from = rng.gen_range(0..COMMITS);
                    let got: Vec<u64> = o
                        .scan(
                            0,
                            snap,
                            Bound::Included(&from.to_be_bytes()[..]),
                            Bound::Unbounded,
                            false,
                        )
                        .map(|(k, _)| u64::from_be_bytes(k.try_into().unwrap()))
                        .collect();
                    let mut want: Vec<u64> = (1..=snap)
                        .map(|n| n * 7919 % COMMITS)
                        .filter(|&k| k >= from)
                        .collect();
                    want.sort_unstable();
                    assert_eq!(got, want, "from {from} at {snap}");
                    let newest = o
                        .scan(1, snap, Bound::Unbounded, Bound::Unbounded, true)
                        .next();
                    assert_eq!(
                        newest.map(|(k, _)| k.to_vec()),
                        (snap > 0).then(|| snap.to_be_bytes().to_vec())
                    );
                    if snap == COMMITS {
                        return;
                    }
                }
            })
        })
        .collect();
    for txn in 1..=COMMITS {
        let k0 = (txn * 7919 % COMMITS).to_be_bytes();
        let k1 = txn.to_be_bytes();
        o.insert(
            txn,
            [(0u64, &k0[..], Some(&b"v"[..])), (1, &k1[..], Some(b"v"))],
        );
        published.store(txn, Ordering::Release);
    }
    for r in readers {
        r.join().unwrap();
    }
}

/// Readers on other threads while the writer inserts and publishes commits: every reader
/// sees exactly the commits up to the one published when it looked, whole (each commit
/// writes every counter, and adds one new key), across the table's growths.
#[test]
fn readers_beside_the_writer_see_whole_commits() {
    const COUNTERS: u64 = 8;
    const COMMITS: u64 = 6000;
    let o = Arc::new(Overlay::new());
    let published = Arc::new(AtomicU64::new(0));
    let readers: Vec<_> = (0..2)
        .map(|r| {
            let (o, published) = (o.clone(), published.clone());
            std::thread::spawn(move || {
                let mut rng = rand::rngs::StdRng::seed_from_u64(r);
                let mut checks = 0u64;
                loop {
                    let snap = published.load(Ordering::Acquire);
                    for c in 0..COUNTERS {
                        let want = snap.to_le_bytes();
                        match o.get(0, &c.to_be_bytes(), snap) {
                            Lookup::Value(v) => assert_eq!(v, want, "counter {c} at {snap}"),
                            other => assert_eq!(snap, 0, "{other:?} at {snap}"),
                        }
                    }
                    // Key n was added by commit n: present exactly up to the snapshot.
                    let n = rng.gen_range(1..COMMITS + 1);
                    let added = o.get(1, &n.to_be_bytes(), snap);
                    assert_eq!(added == Lookup::Absent, n > snap, "key {n} at {snap}");
                    checks += 1;
                    if snap == COMMITS {
                        return checks;
                    }
                }
            })
        })
        .collect();
    for txn in 1..=COMMITS {
        let value = txn.to_le_bytes();
        let keys: Vec<[u8; 8]> = (0..COUNTERS).map(|c| c.to_be_bytes()).collect();
        let new_key = txn.to_be_bytes();
        let mut records: Vec<Record> = keys
            .iter()
            .map(|k| (0u64, &k[..], Some(&value[..])))
            .collect();
        records.push((1, &new_key, Some(b"new")));
        o.insert(txn, records);
        published.store(txn, Ordering::Release);
    }
    for r in readers {
        assert!(r.join().unwrap() > 0);
    }
    assert_eq!(o.len(), (COUNTERS + COMMITS) as usize);
}

/// A spare with a cap keeps no more than it allows: of the chunks a dropped overlay leaves, as
/// many as fit, and its table only if that fits beside them.
#[test]
fn a_spare_keeps_no_more_than_its_cap() {
    let chunk = CHUNK_WORDS * size_of::<u64>();
    for (cap, chunks_max) in [(2 * chunk, 2), (chunk / 2, 0)] {
        let spare = Arc::new(Spare::with_cap(cap));
        let o = Overlay::with_spare(Some(spare.clone()));
        // Values large enough for several full-size chunks.
        for txn in 1..=600u64 {
            let key = format!("{txn:06}").into_bytes();
            o.insert(
                txn,
                [(0u64, key.as_slice(), Some(vec![7u8; 8 << 10].as_slice()))],
            );
        }
        assert!(o.bytes() > 3 * chunk, "the overlay outgrew the cap");
        drop(o);
        let kept = spare.chunks.lock().unwrap().len();
        assert_eq!(kept, chunks_max, "cap {cap}");
        let table = spare
            .dirty
            .lock()
            .unwrap()
            .as_ref()
            .map_or(0, |t| t.bytes());
        assert!(
            kept * chunk + table <= cap,
            "cap {cap}: {kept} chunks and {table} bytes of table"
        );
    }
}

/// Each dropped overlay leaves its chunks, and the spare keeps those of several while the live
/// overlays hold many (up to a quarter of their chunks), not only the last one's: with random
/// keys every slice's overlay grows while one is merged, and those that grow draw on it.
#[test]
fn a_spare_keeps_a_share_of_the_live_overlays_chunks() {
    let chunk = CHUNK_WORDS * size_of::<u64>();
    let spare = Arc::new(Spare::default());
    let fill = |o: &Overlay, chunks: usize| {
        for txn in 1..=(chunks * 8) as u64 {
            let key = format!("{txn:06}").into_bytes();
            o.insert(
                txn,
                [(0u64, key.as_slice(), Some(vec![7u8; chunk / 10].as_slice()))],
            );
        }
    };
    let big = Overlay::with_spare(Some(spare.clone()));
    fill(&big, 40);
    let big_chunks = big.owned.lock().unwrap().arena.chunks.len();
    // Small overlays, all live, then dropped one after another: the spare keeps the chunks
    // of each (where it kept only the last one's, it held two).
    let smalls: Vec<Overlay> = (0..10)
        .map(|_| {
            let small = Overlay::with_spare(Some(spare.clone()));
            fill(&small, 1);
            // A second full chunk.
            small.owned.lock().unwrap().arena.alloc(chunk);
            small
        })
        .collect();
    let live = big_chunks + 2 * smalls.len();
    for small in smalls {
        drop(small);
        let kept = spare.chunks.lock().unwrap().len();
        assert!(kept <= live / 4 + 2, "kept {kept}, live at most {live}");
    }
    let kept = spare.chunks.lock().unwrap().len();
    assert!(
        kept >= big_chunks / 4 - 1,
        "kept {kept} chunks, the live overlay holds {big_chunks}"
    );
    drop(big);
    assert_eq!(
        spare.chunks.lock().unwrap().len(),
        big_chunks,
        "nothing live: one dropped overlay's chunks"
    );
}

/// Full-size chunks come from the spare's slabs: chunks given back beyond its cap are the
/// slabs' again, their memory returned to the kernel (zeroed on the next touch), and the next
/// overlays take them before any new slab is mapped.
#[test]
fn chunks_given_back_serve_later_overlays_without_new_mappings() {
    let chunk = CHUNK_WORDS * size_of::<u64>();
    let spare = Arc::new(Spare::with_cap(2 * chunk));
    let fill = |o: &Overlay, byte: u8| {
        for txn in 1..=300u64 {
            let key = format!("{txn:06}").into_bytes();
            o.insert(
                txn,
                [(0u64, key.as_slice(), Some(vec![byte; 8 << 10].as_slice()))],
            );
        }
    };
    let slabs = |spare: &Spare| spare.slabs.lock().unwrap().maps.len();
    let first = Overlay::with_spare(Some(spare.clone()));
    fill(&first, 7);
    let chunks = first.owned.lock().unwrap().arena.chunks.len();
    assert!(chunks > 4, "{chunks} chunks");
    let mapped = slabs(&spare);
    assert_eq!(mapped, chunks.div_ceil(SLAB_CHUNKS), "{chunks} chunks");
    drop(first);
    assert_eq!(
        spare.chunks.lock().unwrap().len(),
        2,
        "the cap's two chunks kept"
    );
    // The chunks given back read as zeroes: their memory went back to the kernel (Linux's
    // `MADV_DONTNEED` on private anonymous memory).
    #[cfg(target_os = "linux")]
    {
        let slabs = spare.slabs.lock().unwrap();
        assert!(slabs.empty.len() >= chunks - 2);
        for p in &slabs.empty {
            // SAFETY: an empty chunk lies within a slab the spare maps, and no arena holds it.
            let words = unsafe { std::slice::from_raw_parts(p.as_ptr().cast::<u64>(), 16) };
            assert!(
                words.iter().all(|&w| w == 0),
                "an empty chunk kept its bytes"
            );
        }
    }
    for round in 0..3u8 {
        let o = Overlay::with_spare(Some(spare.clone()));
        fill(&o, round);
        for txn in [1u64, 150, 300] {
            let key = format!("{txn:06}").into_bytes();
            let value = vec![round; 8 << 10];
            assert_eq!(
                o.get(0, &key, u64::MAX),
                Lookup::Value(&value),
                "round {round}, key {txn}"
            );
        }
        drop(o);
        assert_eq!(slabs(&spare), mapped, "round {round} mapped a new slab");
    }
}
