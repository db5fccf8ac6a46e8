//! Checkpoints on a thread of their own (`Options::checkpoint_thread`): the writer freezes the
//! overlay and goes on committing while the thread merges the frozen commits into the tree.
//! These tests drive thousands of small commits through a log small enough that a checkpoint
//! is due every few hundred of them, and check, against a model:
//! - every snapshot, held by readers across several checkpoints, reads as it did when it
//!   began (gets, scans both ways, entry counts), while the thread frees and reuses pages;
//! - entry counts stay exact although blind writes (`set`) count keys as new without looking
//!   (the thread's checkpoint corrects them, `engine::checkpoint::finish`);
//! - readers on other threads see consistent snapshots while checkpoints come and go;
//! - the checkpoints really ran on the thread (the tree's commit is one made through the log),
//!   and with the thread off they run inline (the tree's commit is a checkpoint's own);
//! - after a process crash and after a power loss in the middle of it all, the reopened
//!   database is the model at some commit, no earlier than the last durable one.

mod common;

use larchdb::storage::{CrashMode, FaultKind, FaultStorage};
use larchdb::{Database, Durability, Options};
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// A log of 8 x 64 KiB with a checkpoint every 32 KiB: one every 150-300 commits below.
fn options(thread: bool) -> Options {
    Options::default()
        .log(true)
        .log_segment_bytes(64 << 10)
        .log_segments(8)
        .checkpoint_bytes(32 << 10)
        .checkpoint_thread(thread)
        .durability(Durability::None)
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

/// One commit of 1-3 writes to table "t": blind sets, puts, deletes, over 1,500 keys.
fn commit_one(db: &Database, rng: &mut rand::rngs::StdRng, model: &mut Model) -> u64 {
    let mut w = db.begin_write().unwrap();
    let id = w.id();
    {
        let mut t = w.table("t").unwrap();
        for _ in 0..rng.gen_range(1..4) {
            let k = key(rng.gen_range(0..1500));
            match rng.gen_range(0..10) {
                0..=1 => {
                    let had = t.delete(&k).unwrap();
                    assert_eq!(had, model.remove(&k).is_some());
                }
                2..=5 => {
                    let v = vec![rng.gen::<u8>(); rng.gen_range(1..120)];
                    t.set(&k, &v).unwrap();
                    model.insert(k, v);
                }
                _ => {
                    let v = vec![rng.gen::<u8>(); rng.gen_range(1..120)];
                    let had = t.put(&k, &v).unwrap();
                    assert_eq!(had, model.insert(k, v).is_some());
                }
            }
        }
    }
    w.commit().unwrap();
    id
}

/// Whether the snapshot `r` holds exactly `model`: counts, both scan directions, and a get
/// of every key the model has plus a few it does not.
fn check_snapshot(r: &larchdb::ReadTxn, model: &Model, what: &str) {
    let t = r.table("t").unwrap();
    common::assert_holds(&t, model, what);
    for i in (0..1500).step_by(7) {
        let k = key(i);
        assert_eq!(
            t.get(&k).unwrap(),
            model.get(&k).map(|v| &v[..]),
            "{what}: get {i}"
        );
    }
}

/// Runs `commits` commits with readers held across checkpoints. Returns the commit ids made
/// through the log and the trees' commits seen (`Stats::txn`) along the way.
fn run(db: &Database, commits: usize, seed: u64) -> (Model, BTreeSet<u64>, BTreeSet<u64>) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut model = Model::new();
    let mut ids = BTreeSet::new();
    let mut trees = BTreeSet::new();
    let mut held: Vec<(larchdb::ReadTxn, Model, usize)> = Vec::new();
    for i in 0..commits {
        ids.insert(commit_one(db, &mut rng, &mut model));
        if i % 97 == 0 {
            trees.insert(db.stats().unwrap().txn);
        }
        if i % 250 == 0 {
            held.push((db.begin_read().unwrap(), model.clone(), i));
        }
        // Each reader lives across about 750 commits (several checkpoints), then must read
        // exactly what it read when it began.
        if held.first().is_some_and(|(_, _, at)| i - at > 750) {
            let (r, m, at) = held.remove(0);
            check_snapshot(&r, &m, &format!("reader from commit {at}, at {i}"));
        }
    }
    for (r, m, at) in held {
        check_snapshot(&r, &m, &format!("reader from commit {at}, at the end"));
    }
    (model, ids, trees)
}

#[test]
fn snapshots_and_counts_hold_across_checkpoints_on_a_thread() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Database::open(&path, options(true)).unwrap();
    common::create_table(&db, "t");
    let (model, ids, trees) = run(&db, 6000, 1);
    check_snapshot(&db.begin_read().unwrap(), &model, "at the end");
    assert!(db.verify_all().unwrap().is_clean());
    // Checkpoints written by the thread are trees of commits made through the log.
    let threaded = trees.iter().filter(|t| ids.contains(t)).count();
    assert!(
        threaded >= 5,
        "{threaded} of the trees seen ({trees:?}) were written by the thread"
    );
    drop(db);
    let db = Database::open(&path, options(true)).unwrap();
    check_snapshot(&db.begin_read().unwrap(), &model, "after reopening");
    assert!(db.verify_all().unwrap().is_clean());
}

#[test]
fn checkpoints_run_inline_with_the_thread_off() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().join("db"), options(false)).unwrap();
    common::create_table(&db, "t");
    let (model, ids, trees) = run(&db, 3000, 2);
    check_snapshot(&db.begin_read().unwrap(), &model, "at the end");
    // An inline checkpoint is a commit of its own, never one made through the log.
    assert!(trees.len() >= 5, "trees seen: {trees:?}");
    assert!(
        trees.iter().all(|t| !ids.contains(t)),
        "trees {trees:?} include commits made through the log"
    );
}

/// One commit of the readers' tests to table "t": one of 800 keys deleted (3 in 10) or set to
/// `value(rng, id)`, then key "sum" set to the number of those keys live (`live`), and, if
/// `last`, key "last" to the commit's id. Returns the id.
fn commit_with_sum(
    db: &Database,
    rng: &mut rand::rngs::StdRng,
    live: &mut BTreeSet<Vec<u8>>,
    last: bool,
    value: impl FnOnce(&mut rand::rngs::StdRng, u64) -> Vec<u8>,
) -> u64 {
    let mut w = db.begin_write().unwrap();
    let id = w.id();
    let mut t = w.table("t").unwrap();
    let k = key(rng.gen_range(0..800));
    if rng.gen_bool(0.3) {
        t.delete(&k).unwrap();
        live.remove(&k);
    } else {
        t.set(&k, &value(rng, id)).unwrap();
        live.insert(k);
    }
    t.set(b"sum", &(live.len() as u64).to_le_bytes()).unwrap();
    if last {
        t.set(b"last", &id.to_le_bytes()).unwrap();
    }
    w.commit().unwrap();
    id
}

/// Readers on other threads open snapshot after snapshot while the writer commits and the
/// thread checkpoints. The writer keeps two invariants in every commit: key "sum" holds the
/// number of other keys, and every other key's value names the commit that wrote it, which
/// is never newer than the snapshot.
#[test]
fn readers_on_other_threads_see_whole_commits_across_checkpoints() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Database::open(dir.path().join("db"), options(true)).unwrap());
    common::create_table(&db, "t");
    let stop = Arc::new(AtomicBool::new(false));
    // Snapshots each reader checked: the writer goes on until both have checked some.
    let checked: Arc<[std::sync::atomic::AtomicU64; 2]> = Arc::default();
    let readers: Vec<_> = (0..2)
        .map(|i| {
            let (db, stop, checked) = (db.clone(), stop.clone(), checked.clone());
            std::thread::spawn(move || {
                let mut seen = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let r = db.begin_read().unwrap();
                    let t = r.table("t").unwrap();
                    let entries = common::collect(t.iter());
                    let others = entries.iter().filter(|(k, _)| k != b"sum").count() as u64;
                    let sum = t.get(b"sum").unwrap().map_or(0, |v| {
                        u64::from_le_bytes(v.try_into().expect("an 8-byte sum"))
                    });
                    assert_eq!(sum, others, "snapshot {}: sum against keys", r.id());
                    assert_eq!(
                        t.len().unwrap(),
                        entries.len() as u64,
                        "snapshot {}",
                        r.id()
                    );
                    for (k, v) in &entries {
                        if k != b"sum" {
                            let at = u64::from_le_bytes(v[..8].try_into().unwrap());
                            assert!(
                                at <= r.id(),
                                "a value of commit {at} in snapshot {}",
                                r.id()
                            );
                        }
                    }
                    seen += 1;
                    checked[i].fetch_add(1, Ordering::Relaxed);
                }
                seen
            })
        })
        .collect();
    let mut rng = rand::rngs::StdRng::seed_from_u64(3);
    let mut live = BTreeSet::new();
    // 4,000 commits at least, and on until each reader has checked 20 snapshots (a loaded
    // machine may leave the readers' threads waiting).
    for n in 0u64.. {
        if n >= 4000 && checked.iter().all(|c| c.load(Ordering::Relaxed) >= 20) {
            break;
        }
        assert!(n < 2_000_000, "the readers made no progress");
        commit_with_sum(&db, &mut rng, &mut live, false, |rng, id| {
            let mut v = id.to_le_bytes().to_vec();
            v.resize(rng.gen_range(8..100), 7);
            v
        });
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        assert!(r.join().unwrap() > 0);
    }
    assert!(db.verify_all().unwrap().is_clean());
}

/// Readers that keep one transaction and renew it (as LMDB's reset and renew) while the
/// writer commits through the log and the thread checkpoints. A renew moves either by the
/// commit id alone (commits into the overlay the reader already reads) or to a new snapshot
/// (a checkpoint's tree, a new overlay): either way the transaction reads the commit it names
/// (key "last" holds the id of the commit that wrote it: the newest one the transaction reads
/// is at most its id, and no commit of the writer's lies between the two; checkpoints make
/// commits of their own, which write no "last"), never goes back, and sees every commit that
/// returned before the renew began.
#[test]
fn renewed_readers_see_each_commit_exactly_across_checkpoints() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Database::open(dir.path().join("db"), options(true)).unwrap());
    common::create_table(&db, "t");
    let stop = Arc::new(AtomicBool::new(false));
    let committed = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let ids = Arc::new(std::sync::Mutex::new(Vec::new()));
    // Renews that moved, by each reader: the writer goes on until there are enough.
    let moves: Arc<[std::sync::atomic::AtomicU64; 2]> = Arc::default();
    let readers: Vec<_> = (0..2)
        .map(|i| {
            let (db, stop, committed) = (db.clone(), stop.clone(), committed.clone());
            let (ids, moves) = (ids.clone(), moves.clone());
            std::thread::spawn(move || {
                let mut r = db.begin_read().unwrap();
                let (mut renews, mut moved) = (0u64, 0u64);
                while !stop.load(Ordering::Relaxed) {
                    let before = r.id();
                    let returned = committed.load(Ordering::Acquire);
                    r.renew();
                    let id = r.id();
                    assert!(id >= before, "renew went back from {before} to {id}");
                    assert!(
                        id >= returned,
                        "commit {returned} returned, renew gave {id}"
                    );
                    if id > before {
                        moved += 1;
                        moves[i].fetch_add(1, Ordering::Relaxed);
                    }
                    let t = match r.table("t") {
                        Ok(t) => t,
                        Err(larchdb::Error::TableNotFound(_)) => continue,
                        Err(e) => panic!("{e}"),
                    };
                    let last = t.get(b"last").unwrap().map_or(0, |v| {
                        u64::from_le_bytes(v.try_into().expect("an 8-byte id"))
                    });
                    assert!(last <= id, "snapshot {id} reads commit {last}'s last");
                    let ids = ids.lock().unwrap();
                    let next = ids[ids.partition_point(|&c| c <= last)..].first();
                    if let Some(&c) = next {
                        assert!(c > id, "snapshot {id} reads {last}'s last, not {c}'s");
                    }
                    drop(ids);
                    let sum = t.get(b"sum").unwrap().map_or(0, |v| {
                        u64::from_le_bytes(v.try_into().expect("an 8-byte sum"))
                    });
                    let entries = t.len().unwrap();
                    let fixed = u64::from(last != 0) + u64::from(sum != 0 || last != 0);
                    if last != 0 {
                        assert_eq!(sum + fixed, entries, "snapshot {id}: sum against len");
                    }
                    renews += 1;
                }
                (renews, moved)
            })
        })
        .collect();
    let mut rng = rand::rngs::StdRng::seed_from_u64(5);
    let mut live = BTreeSet::new();
    // 4,000 commits at least, and on until each reader has moved 100 times and 5
    // checkpoints were made (a loaded machine may leave the readers' threads waiting).
    for n in 0u64.. {
        if n >= 4000
            && n % 500 == 0
            && moves.iter().all(|m| m.load(Ordering::Relaxed) >= 100)
            && db.stats().unwrap().commits.checkpoints >= 5
        {
            break;
        }
        assert!(n < 2_000_000, "the readers made no progress");
        let id = commit_with_sum(&db, &mut rng, &mut live, true, |_, _| vec![9; 20]);
        ids.lock().unwrap().push(id);
        committed.store(id, Ordering::Release);
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        let (renews, moved) = r.join().unwrap();
        assert!(renews > 0 && moved > 0, "{renews} renews, {moved} moved");
    }
}

/// A process crash and a power loss at points spread over a workload whose checkpoints run
/// on the thread (some mid-checkpoint): the reopened database is the model after some
/// commit, no earlier than the last durable one, and verifies clean.
#[test]
fn crashes_during_threaded_checkpoints_recover_a_prefix() {
    for (n, stop) in [700usize, 1300, 2100, 2900].into_iter().enumerate() {
        let (data, log) = (FaultStorage::new(), FaultStorage::new());
        let db = common::open_with_log(&data, &log, options(true)).unwrap();
        common::create_table(&db, "t");
        let mut rng = rand::rngs::StdRng::seed_from_u64(10 + n as u64);
        // The states after each commit since the last durable one (a power loss may return
        // to any of them), the first being the durable one.
        let mut states = vec![Model::new()];
        for i in 0..stop {
            let mut model = states.last().unwrap().clone();
            commit_one(&db, &mut rng, &mut model);
            states.push(model);
            if i % 400 == 399 {
                let w = db.begin_write().unwrap();
                w.commit_with(Durability::Immediate).unwrap();
                states.drain(..states.len() - 1);
            }
        }
        // The process dies with the thread possibly mid-checkpoint.
        for mode in [
            CrashMode::ProcessOnly,
            CrashMode::KeepRandom { seed: n as u64 },
        ] {
            let d = data.crash(mode);
            let l = log.crash(match mode {
                CrashMode::KeepRandom { seed } => CrashMode::KeepRandom { seed: !seed },
                m => m,
            });
            let db = common::open_with_log(&d, &l, options(true)).unwrap();
            let r = db.begin_read().unwrap();
            let t = r.table("t").unwrap();
            let got: Model = common::collect(t.iter()).into_iter().collect();
            let at = states.iter().rposition(|s| *s == got);
            let what = format!("crash {mode:?} after {stop} commits");
            let at = at.unwrap_or_else(|| {
                panic!("{what}: not the state after any commit since the last durable one")
            });
            if matches!(mode, CrashMode::ProcessOnly) {
                assert_eq!(at, states.len() - 1, "{what}: a process crash lost commits");
            }
            assert_eq!(t.len().unwrap(), got.len() as u64, "{what}: count");
            assert!(db.verify_all().unwrap().is_clean(), "{what}: verify");
        }
        common::abandon(db);
    }
}

/// Every write to the data file fails from some point on (only checkpoints write it, all on
/// the thread): the failure reaches the writer at its next transaction, the handle then
/// refuses writes (`Poisoned`), and a reopen finds every commit acknowledged before, from the
/// log.
#[test]
fn an_io_error_in_the_checkpoint_thread_stops_the_handle_and_loses_nothing() {
    let (data, log) = (FaultStorage::new(), FaultStorage::new());
    let db = common::open_with_log(&data, &log, options(true)).unwrap();
    common::create_table(&db, "t");
    data.fail_after(1, FaultKind::Eio, true);
    let mut acked = 0u32;
    let err = loop {
        let r = (|| -> larchdb::Result<()> {
            let mut w = db.begin_write()?;
            w.table("t")?.set(&key(acked), &[7; 100])?;
            w.commit()
        })();
        match r {
            Ok(()) => acked += 1,
            Err(e) => break e,
        }
        assert!(acked < 20_000, "no checkpoint failed");
    };
    assert!(acked > 200, "failed after {acked} commits: {err}");
    assert!(
        matches!(db.begin_write().err(), Some(larchdb::Error::Poisoned)),
        "after {err}, a write transaction began"
    );
    // Reads go on, from memory and the old tree.
    let r = db.begin_read().unwrap();
    assert_eq!(r.table("t").unwrap().len().unwrap(), acked as u64);
    drop(r);
    drop(db);
    data.clear_faults();
    let (data, log) = (
        data.crash(CrashMode::ProcessOnly),
        log.crash(CrashMode::ProcessOnly),
    );
    let db = common::open_with_log(&data, &log, options(true)).unwrap();
    let r = db.begin_read().unwrap();
    let t = r.table("t").unwrap();
    assert_eq!(t.len().unwrap(), acked as u64);
    for i in 0..acked {
        assert!(t.get(&key(i)).unwrap().is_some(), "commit of key {i} lost");
    }
    assert!(db.verify_all().unwrap().is_clean());
}
