//! Checkpoints when the writer goes idle (`Options::idle_checkpoint_millis`): once no commit
//! has been made through the log for the period, the overlay's records are merged into the
//! tree and the new tree is published without waiting for another write transaction. These
//! tests check that it happens (and not with the option off), that an open write transaction
//! puts it off and its commit brings it back, that blind writes' entry counts come out exact,
//! that readers on other threads read consistent snapshots meanwhile, and that a close, a
//! process crash or a power loss in the middle of it keeps what they must.

mod common;

use larchdb::storage::{CrashMode, FaultStorage};
use larchdb::{Database, Durability, Options};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn options(idle_millis: u64) -> Options {
    common::small_log_options()
        .durability(Durability::None)
        .idle_checkpoint_millis(idle_millis)
}

/// A new database on fault storages (data and log), idle checkpoints after `idle_millis`,
/// with table "t".
fn fresh(idle_millis: u64) -> (FaultStorage, FaultStorage, Database) {
    let (data, log) = (FaultStorage::new(), FaultStorage::new());
    let db = common::open_with_log(&data, &log, options(idle_millis)).unwrap();
    common::create_table(&db, "t");
    (data, log, db)
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

/// Commits `count` one-put transactions from `from` on (keys spread over 0..1000, so that
/// past 1000 of them they overwrite), blind (`set`) or not; returns the last commit's id.
fn puts(db: &Database, model: &mut Model, from: u32, count: u32, blind: bool) -> u64 {
    let mut id = 0;
    for i in from..from + count {
        let k = key(i.wrapping_mul(7919) % 1000);
        let v = format!("value {i}").into_bytes();
        let mut w = db.begin_write().unwrap();
        id = w.id();
        let mut t = w.table("t").unwrap();
        if blind {
            t.set(&k, &v).unwrap();
        } else {
            t.put(&k, &v).unwrap();
        }
        w.commit().unwrap();
        model.insert(k, v);
    }
    id
}

fn holds(db: &Database, model: &Model) -> bool {
    let r = db.begin_read().unwrap();
    let t = r.table("t").unwrap();
    let forward = common::collect(t.iter());
    let mut backward = common::collect(t.iter_rev());
    backward.reverse();
    t.len().unwrap() == model.len() as u64
        && forward == backward
        && forward.iter().map(|(k, v)| (k, v)).eq(model.iter())
        && model.iter().all(|(k, v)| t.get(k).unwrap() == Some(&v[..]))
}

/// Waits (up to a minute: a loaded test machine is slow, never this slow) until the tree the
/// handle publishes is commit `id`'s; returns whether it got there.
fn tree_reaches(db: &Database, id: u64) -> bool {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(60) {
        if db.stats().unwrap().txn >= id {
            return true;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    false
}

/// After a burst of commits through the log, the tree comes to hold all of them by itself
/// (the idle checkpoint, published by the idle thread: no write transaction follows).
#[test]
fn an_idle_writer_has_its_overlay_checkpointed() {
    let (_, _, db) = fresh(5);
    let mut model = Model::new();
    for round in 0..3 {
        let last = puts(&db, &mut model, round * 300, 300, false);
        assert!(tree_reaches(&db, last), "round {round}: no idle checkpoint");
        let stats = db.stats().unwrap();
        assert_eq!(stats.txn, last, "round {round}");
        assert_eq!(stats.entries, model.len() as u64, "round {round}");
        assert!(holds(&db, &model), "round {round}");
    }
    assert!(db.stats().unwrap().commits.checkpoints >= 3);
    assert!(db.verify_all().unwrap().is_clean());
}

/// The tree commits this handle's readers read, as its reader list shows them.
fn reader_tree(db: &Database) -> Vec<u64> {
    let stats = db.stats().unwrap();
    stats
        .reader_list
        .iter()
        .filter(|r| r.this_handle)
        .map(|r| r.txn)
        .collect()
}

/// A reader that renews after an idle checkpoint moves to the checkpoint's tree, although no
/// commit came after it (the same commit id): it no longer reads the merged records through
/// the overlay (a probe of its table per point read), nor keeps the overlay and the old tree
/// alive, until the next commit.
#[test]
fn a_renewed_reader_moves_to_the_checkpoints_tree() {
    let (_, _, db) = fresh(50);
    let mut model = Model::new();
    // A reader on the overlay: begun before the idle checkpoint (a machine that stalls this
    // thread past the idle period gets another round).
    let mut round = 0;
    let (mut r, last) = loop {
        round += 1;
        assert!(round <= 20, "every reader began after the idle checkpoint");
        let last = puts(&db, &mut model, round * 300, 300, false);
        let r = db.begin_read().unwrap();
        assert_eq!(r.id(), last);
        let pinned = reader_tree(&db);
        assert_eq!(pinned.len(), 1);
        if pinned[0] < last {
            break (r, last);
        }
    };
    assert!(tree_reaches(&db, last), "no idle checkpoint");
    assert_eq!(db.stats().unwrap().txn, last);
    r.renew();
    assert_eq!(r.id(), last, "no commit came");
    assert_eq!(
        reader_tree(&db),
        [last],
        "the reader kept the overlay's tree"
    );
    {
        let t = r.table("t").unwrap();
        assert_eq!(t.len().unwrap(), model.len() as u64);
        assert!(model.iter().all(|(k, v)| t.get(k).unwrap() == Some(&v[..])));
    }
    // Nothing newer: renewing again stays.
    r.renew();
    assert_eq!(reader_tree(&db), [last]);
}

/// With the option off the overlay stays (the log's growth has not called for a checkpoint).
#[test]
fn with_the_option_off_the_overlay_stays() {
    let (_, _, db) = fresh(0);
    let mut model = Model::new();
    let before = db.stats().unwrap().txn;
    let last = puts(&db, &mut model, 0, 300, false);
    std::thread::sleep(Duration::from_millis(200));
    let stats = db.stats().unwrap();
    assert_eq!(stats.txn, before, "a checkpoint ran, last commit {last}");
    assert_eq!(db.stats().unwrap().commits.checkpoints, 0);
    assert!(holds(&db, &model));
}

/// An open write transaction puts the idle checkpoint off (the thread never waits for the
/// write lock, nor takes it from under a transaction); its commit arms the thread again.
#[test]
fn an_open_transaction_puts_it_off_and_its_commit_brings_it_back() {
    let (_, _, db) = fresh(5);
    let mut model = Model::new();
    // A pause of a period between the burst and `begin_write` (a loaded machine) lets a
    // checkpoint in first: then the burst is tried again.
    let mut attempt = 0;
    let (w, tree) = loop {
        assert!(
            attempt < 20,
            "every burst was checkpointed before its transaction began"
        );
        let last = puts(&db, &mut model, attempt * 100, 100, false);
        let w = db.begin_write().unwrap();
        // Nothing is published while the write lock is held, but by the lock's holder.
        let tree = db.stats().unwrap().txn;
        if tree < last {
            break (w, tree);
        }
        drop(w);
        attempt += 1;
    };
    let mut w = w;
    // Many periods pass while the transaction is open.
    std::thread::sleep(Duration::from_millis(150));
    assert_eq!(
        db.stats().unwrap().txn,
        tree,
        "checkpointed under an open transaction"
    );
    w.table("t").unwrap().put(b"held", b"open").unwrap();
    let id = w.id();
    w.commit().unwrap();
    model.insert(b"held".to_vec(), b"open".to_vec());
    assert!(
        tree_reaches(&db, id),
        "the commit did not bring the idle checkpoint back"
    );
    assert!(holds(&db, &model));
    assert!(db.verify_all().unwrap().is_clean());
}

/// Blind writes count every key as new; the idle checkpoint leaves the tree's count exact,
/// and the count read after it is the tree's.
#[test]
fn blind_writes_counts_come_out_exact() {
    let (_, _, db) = fresh(5);
    let mut model = Model::new();
    let loaded = puts(&db, &mut model, 0, 1000, false);
    assert!(tree_reaches(&db, loaded));
    // Overwrites of keys in the tree, not the overlay: each counted as new.
    let last = puts(&db, &mut model, 1000, 500, true);
    assert_eq!(model.len(), 1000);
    assert_eq!(
        db.begin_read().unwrap().table("t").unwrap().len().unwrap(),
        1000
    );
    assert!(
        tree_reaches(&db, last),
        "the blind writes were not checkpointed"
    );
    assert_eq!(db.stats().unwrap().entries, model.len() as u64);
    assert_eq!(
        db.begin_read().unwrap().table("t").unwrap().len().unwrap(),
        1000
    );
    assert!(holds(&db, &model));
    assert!(db.verify_all().unwrap().is_clean());
}

/// Readers on other threads, each snapshot checked against the invariant that every key of
/// the table holds the same generation, while the writer alternates bursts and pauses (each
/// pause an idle checkpoint, published under the readers).
#[test]
fn readers_beside_idle_checkpoints_see_whole_commits() {
    let (_, _, db) = fresh(2);
    let keys: Vec<Vec<u8>> = (0..50).map(key).collect();
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                let mut checked = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let r = db.begin_read().unwrap();
                    let t = r.table("t").unwrap();
                    let all = common::collect(t.iter());
                    if let Some((_, first)) = all.first() {
                        assert_eq!(all.len(), keys.len());
                        assert!(all.iter().all(|(_, v)| v == first), "a torn commit");
                    }
                    checked += 1;
                }
                assert!(checked > 0);
            });
        }
        for generation in 0u32..40 {
            for _ in 0..5 {
                let mut w = db.begin_write().unwrap();
                let mut t = w.table("t").unwrap();
                for k in &keys {
                    t.put(k, &generation.to_be_bytes()).unwrap();
                }
                w.commit().unwrap();
            }
            if generation % 4 == 0 {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        stop.store(true, Ordering::Relaxed);
    });
    assert!(db.stats().unwrap().commits.checkpoints > 0);
    assert!(db.verify_all().unwrap().is_clean());
}

/// A close while the idle thread waits or checkpoints, a process crash and a power loss
/// after idle checkpoints: what must be kept is (every commit after a close or a process
/// crash; after a power loss, the model at a commit no earlier than the last durable one).
#[test]
fn close_crash_and_power_loss_around_idle_checkpoints() {
    for pause in [0u64, 1, 3, 8, 20] {
        // A close soon after a burst (the thread waiting, or its checkpoint running).
        let (data, log, db) = fresh(2);
        let mut model = Model::new();
        puts(&db, &mut model, 0, 400, false);
        std::thread::sleep(Duration::from_millis(pause));
        drop(db);
        let db = common::open_with_log(&data, &log, options(2)).unwrap();
        assert!(holds(&db, &model), "close after {pause} ms");
        drop(db);

        // A process crash at the same moment.
        let (data, log, db) = fresh(2);
        let mut model = Model::new();
        puts(&db, &mut model, 0, 400, false);
        std::thread::sleep(Duration::from_millis(pause));
        let crashed = (
            data.crash(CrashMode::ProcessOnly),
            log.crash(CrashMode::ProcessOnly),
        );
        drop(db);
        let db = common::open_with_log(&crashed.0, &crashed.1, options(2)).unwrap();
        assert!(holds(&db, &model), "process crash after {pause} ms");
        assert!(db.verify_all().unwrap().is_clean());
        drop(db);

        // A power loss: the last durable commit is the `Immediate` one in the middle; the
        // database comes back as the model at it or at a later commit.
        let (data, log, db) = fresh(2);
        let mut model = Model::new();
        puts(&db, &mut model, 0, 200, false);
        let mut w = db.begin_write().unwrap();
        w.table("t").unwrap().put(b"durable", b"yes").unwrap();
        w.commit_with(Durability::Immediate).unwrap();
        model.insert(b"durable".to_vec(), b"yes".to_vec());
        let mut states = vec![model.clone()];
        std::thread::sleep(Duration::from_millis(pause));
        for i in 200..400 {
            puts(&db, &mut model, i, 1, false);
            states.push(model.clone());
        }
        std::thread::sleep(Duration::from_millis(pause));
        let lost = (
            data.crash(CrashMode::DropUnsynced),
            log.crash(CrashMode::DropUnsynced),
        );
        drop(db);
        let db = common::open_with_log(&lost.0, &lost.1, options(2)).unwrap();
        let r = db.begin_read().unwrap();
        let got: Model = common::collect(r.table("t").unwrap().iter())
            .into_iter()
            .collect();
        drop(r);
        assert!(
            states.contains(&got),
            "power loss after {pause} ms: not the model at a commit since the durable one"
        );
        assert!(db.verify_all().unwrap().is_clean());
    }
}

/// The log file's length (`FaultStorage` as the log's storage).
fn log_len(log: &FaultStorage) -> u64 {
    use larchdb::storage::Storage;
    log.len().unwrap()
}

/// Waits (up to a minute) until the log's file is at most `bytes` long; returns whether it got
/// there.
fn log_shrinks_to(log: &FaultStorage, bytes: u64) -> bool {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(60) {
        if log_len(log) <= bytes {
            return true;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    false
}

/// One-put commits of 1 KB values, keys `from..from + count`.
fn large_puts(db: &Database, model: &mut Model, from: u32, count: u32, durability: Durability) {
    for i in from..from + count {
        let k = key(i);
        let v = common::noise(u64::from(i), 1000);
        let mut w = db.begin_write().unwrap();
        w.table("t").unwrap().put(&k, &v).unwrap();
        w.commit_with(durability).unwrap();
        model.insert(k, v);
    }
}

/// Once the idle checkpoints have merged every record, a log file of more than a segment
/// goes back to its header (a durable commit names a new cycle's start, then the file is cut);
/// a log of less than a segment is left as it is. Every commit is kept through a power loss
/// right after, and the commits the handle makes after it through a power loss (up to the
/// durable one) and a process crash (all).
#[test]
fn an_idle_log_gives_its_file_back() {
    let segment = 1 << 20; // `small_log_options`
    let (data, log, db) = fresh(5);
    let mut model = Model::new();

    // Less than a segment of records: merged, the file left.
    large_puts(&db, &mut model, 0, 100, Durability::None);
    let last = db.stats().unwrap().txn;
    assert!(tree_reaches(&db, last));
    std::thread::sleep(Duration::from_millis(200));
    let small = log_len(&log);
    assert!(small > 64 << 10, "{small} bytes: the records' file was cut");
    assert!(small <= segment, "{small} bytes");

    // About three segments of records: the file goes back.
    large_puts(&db, &mut model, 100, 3000, Durability::None);
    assert!(log_len(&log) > 2 * segment);
    assert!(log_shrinks_to(&log, 64 << 10), "{} bytes", log_len(&log));
    assert!(holds(&db, &model));
    assert!(db.verify_all().unwrap().is_clean());

    // Everything is in a durable commit: a power loss now keeps every commit.
    let (data, log) = (
        data.crash(CrashMode::DropUnsynced),
        log.crash(CrashMode::DropUnsynced),
    );
    drop(db);
    let db = common::open_with_log(&data, &log, options(5)).unwrap();
    assert!(holds(&db, &model), "power loss after the log went back");
    assert!(db.verify_all().unwrap().is_clean());

    let (data, log, db) =
        write_on_after_the_cut(data, log, db, &mut model, CrashMode::DropUnsynced);
    write_on_after_the_cut(data, log, db, &mut model, CrashMode::ProcessOnly);
}

/// `Stats`' figures of the log: its file's length, the record bytes not yet in a durable
/// checkpoint and the ring's room, as records are added and merged; zeros for a read-only
/// handle and without the log.
#[test]
fn stats_show_the_logs_file_its_kept_records_and_its_room() {
    // No idle checkpoint: the records stay until the checkpoint below.
    let (_data, log, db) = fresh(0);
    let mut model = Model::new();
    // Half a checkpoint's log (`small_log_options`: one every MiB): none is due yet.
    large_puts(&db, &mut model, 0, 500, Durability::None);
    let s = db.stats().unwrap();
    assert_eq!(s.commits.checkpoints, 0);
    assert_eq!(s.log_file_bytes, log_len(&log));
    // 500 records of 1,000 bytes (their framing comes on top).
    assert!(s.log_kept_bytes >= 500 * 1000, "{}", s.log_kept_bytes);
    assert!(s.log_kept_bytes <= s.log_file_bytes, "{s:?}");
    assert!(s.log_room_bytes >= s.log_kept_bytes, "{s:?}");

    db.checkpoint().unwrap();
    let s = db.stats().unwrap();
    assert_eq!(
        s.log_kept_bytes, 0,
        "every record is in a durable checkpoint"
    );
    assert_eq!(s.log_file_bytes, log_len(&log));
    assert!(s.log_room_bytes > 0);
    assert!(holds(&db, &model));

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let off = Database::open(&path, Options::default().log(false)).unwrap();
    off.put(b"k", b"v").unwrap();
    let s = off.stats().unwrap();
    assert_eq!(
        (s.log_file_bytes, s.log_kept_bytes, s.log_room_bytes),
        (0, 0, 0)
    );
    drop(off);
    let path = dir.path().join("logged");
    let writer = Database::open(&path, Options::default().idle_checkpoint_millis(0)).unwrap();
    for i in 0..10u8 {
        writer.put(&[i], b"w").unwrap();
    }
    assert!(writer.stats().unwrap().log_kept_bytes > 0);
    let reader = Database::open(&path, Options::default().read_only(true)).unwrap();
    let s = reader.stats().unwrap();
    assert_eq!(
        (s.log_file_bytes, s.log_kept_bytes, s.log_room_bytes),
        (0, 0, 0)
    );
    assert_eq!(reader.get(&[9]).unwrap(), Some(b"w".to_vec()));
}

/// Writes until the idle log's file goes back, then commits on into the new cycle (the last
/// commit durable), then `crash`es and reopens: every commit is kept (up to the durable one,
/// the log was synced).
fn write_on_after_the_cut(
    data: FaultStorage,
    log: FaultStorage,
    db: Database,
    model: &mut Model,
    crash: CrashMode,
) -> (FaultStorage, FaultStorage, Database) {
    large_puts(&db, model, 0, 3000, Durability::None);
    assert!(log_shrinks_to(&log, 64 << 10), "{} bytes", log_len(&log));
    large_puts(&db, model, 3000, 300, Durability::None);
    large_puts(&db, model, 3300, 1, Durability::Immediate);
    let (data, log) = (data.crash(crash), log.crash(crash));
    drop(db);
    let db = common::open_with_log(&data, &log, options(5)).unwrap();
    assert!(holds(&db, model), "{crash:?} after writes to the new cycle");
    assert!(db.verify_all().unwrap().is_clean());
    (data, log, db)
}

/// Idle checkpoints beside readers on more threads than there are cores: the cores are
/// contended, so each idle merge rests between its leaves (`share::IdleRest`). The tree still
/// comes to hold every record, the readers read whole snapshots meanwhile, and writes that
/// come back while an idle checkpoint runs commit as before.
#[test]
fn idle_checkpoints_beside_readers_on_every_core_merge_everything() {
    let (_, _, db) = fresh(5);
    let mut model = Model::new();
    let readers = std::thread::available_parallelism().map_or(2, |n| n.get()) + 1;
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        for _ in 0..readers {
            s.spawn(|| {
                let mut read = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let r = db.begin_read().unwrap();
                    let t = r.table("t").unwrap();
                    let n = t.len().unwrap();
                    assert!(n == 0 || t.get(&key(0)).unwrap().is_some());
                    read += 1;
                }
                assert!(read > 0);
            });
        }
        // Keys spread over the table, so that each merge writes many leaves (it rests
        // between them).
        let scattered = |db: &Database, model: &mut Model, from: u32, count: u32| {
            for i in from..from + count {
                let k = key(i.wrapping_mul(7919) % 9000);
                let v = common::noise(u64::from(i), 1000);
                let mut w = db.begin_write().unwrap();
                w.table("t").unwrap().put(&k, &v).unwrap();
                w.commit().unwrap();
                model.insert(k, v);
            }
        };
        for round in 0..3 {
            // A burst, a pause long enough for idle checkpoints to start, then more writes
            // beside them.
            scattered(&db, &mut model, round * 3000, 1500);
            std::thread::sleep(Duration::from_millis(30));
            scattered(&db, &mut model, round * 3000 + 1500, 1500);
            let last = db.stats().unwrap().txn;
            assert!(
                tree_reaches(&db, last),
                "round {round}: no idle checkpoint merged it all"
            );
        }
        stop.store(true, Ordering::Relaxed);
    });
    assert!(holds(&db, &model));
    assert!(db.verify_all().unwrap().is_clean());
}
