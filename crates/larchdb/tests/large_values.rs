//! Large values written once (docs/design/large-values.md): a logged commit that is not
//! `Immediate` writes each value too large for a leaf into a run of the data file, from pages
//! a durable checkpoint reserved, and its record names the run; the merge puts the run's
//! reference in the leaf. These tests check that the values read back the same through the
//! overlays, after checkpoints, after a clean reopen and after crashes (a process crash and a
//! power loss at random points), that overwrites and deletions free what they must (the file
//! verifies: no page both reachable and free, none leaked), and that a record whose run is
//! damaged is reported, not replayed with another value.

mod common;

use larchdb::storage::{CrashMode, FaultStorage};
use larchdb::{Database, Durability, Error, Options};
use std::collections::BTreeMap;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn options() -> Options {
    common::small_log_options().durability(Durability::None)
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

/// A value of `len` bytes that differs with `seed`.
fn value(seed: u64, len: usize) -> Vec<u8> {
    common::noise(seed, len)
}

/// One-put commits of 4,000-byte values (and some small ones, and deletions) over `keys`
/// keys, `count` of them from `from` on.
fn writes(db: &Database, model: &mut Model, from: u32, count: u32, keys: u32) {
    writes_durable_every(db, model, from, count, keys, 0);
}

/// `writes`, with every `durable`-th commit `Immediate` (none for 0): those carry their
/// values in their records, and count toward no runs' checkpoint (`commit::runs_due`).
fn writes_durable_every(
    db: &Database,
    model: &mut Model,
    from: u32,
    count: u32,
    keys: u32,
    durable: u32,
) {
    for i in from..from + count {
        let k = key(i.wrapping_mul(7919) % keys);
        let mut w = db.begin_write().unwrap();
        let mut t = w.table("t").unwrap();
        match i % 13 {
            0 => {
                t.delete(&k).unwrap();
                model.remove(&k);
            }
            1 => {
                let v = value(u64::from(i), 100);
                t.put(&k, &v).unwrap();
                model.insert(k, v);
            }
            _ => {
                let v = value(u64::from(i), 4000);
                t.put(&k, &v).unwrap();
                model.insert(k, v);
            }
        }
        if durable > 0 && i % durable == 0 {
            w.commit_with(Durability::Immediate).unwrap();
        } else {
            w.commit().unwrap();
        }
    }
}

fn check(db: &Database, model: &Model) {
    let r = db.begin_read().unwrap();
    let got = common::collect(r.table("t").unwrap().iter());
    let want: Vec<(Vec<u8>, Vec<u8>)> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(got.len(), want.len(), "entries");
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g.0, w.0, "keys");
        assert!(
            g.1 == w.1,
            "the value of {:?} differs",
            String::from_utf8_lossy(&g.0)
        );
    }
    let report = db.verify().unwrap();
    assert!(report.is_clean(), "verify: {report:?}");
}

#[test]
fn large_values_read_back_through_checkpoints_and_a_reopen() {
    let (data, log) = (FaultStorage::new(), FaultStorage::new());
    let mut model = Model::new();
    {
        let db = common::open_with_log(&data, &log, options()).unwrap();
        common::create_table(&db, "t");
        // A durable checkpoint first, so that the writer has a reservation.
        db.checkpoint().unwrap();
        writes(&db, &mut model, 0, 600, 200);
        check(&db, &model);
        db.checkpoint().unwrap();
        check(&db, &model);
        writes(&db, &mut model, 600, 1500, 200);
        check(&db, &model);
        let runs = db.commit_stats().runs_written;
        assert!(runs > 300, "values written into runs: {runs}");
    }
    let db = common::open_with_log(&data, &log, options()).unwrap();
    check(&db, &model);
    let stats = db.stats().unwrap();
    assert!(stats.page_count > 0);
}

#[test]
fn large_values_survive_a_process_crash_and_the_reopen_frees_what_no_record_names() {
    let (data, log) = (FaultStorage::new(), FaultStorage::new());
    let mut model = Model::new();
    let db = common::open_with_log(&data, &log, options()).unwrap();
    common::create_table(&db, "t");
    db.checkpoint().unwrap();
    writes(&db, &mut model, 0, 1200, 300);
    check(&db, &model);
    let (data2, log2) = process_crash(db, &data, &log);
    let db = common::open_with_log(&data2, &log2, options()).unwrap();
    check(&db, &model);
    // And on: the reservation's pages no record named are free again, and the file verifies
    // after more writes and a checkpoint.
    writes(&db, &mut model, 1200, 800, 300);
    db.checkpoint().unwrap();
    check(&db, &model);
}

/// A process crash leaves runs in the page cache only, named by records the log holds; the
/// open syncs the log's tail, and the next record appended says the log was synced past
/// them, so the open syncs the data file first (`Replay::syncing_runs`). A durable commit
/// after the reopen, then a power loss: every value reads back, where the open refused the
/// log as damaged (a record whose run was lost, with a later one saying it was synced).
#[test]
fn an_open_after_a_process_crash_syncs_the_runs_before_it_vouches_for_their_records() {
    for keys in [50, 300] {
        let (data, log) = (FaultStorage::new(), FaultStorage::new());
        let mut model = Model::new();
        let db = common::open_with_log(&data, &log, options()).unwrap();
        common::create_table(&db, "t");
        db.checkpoint().unwrap();
        writes(&db, &mut model, 0, 600, keys);
        assert!(db.commit_stats().runs_written > 0, "no value went to a run");
        let (data, log) = process_crash(db, &data, &log);
        let db = common::open_with_log(&data, &log, options()).unwrap();
        check(&db, &model);
        let mut w = db.begin_write().unwrap();
        w.table("t").unwrap().put(b"marker", b"m").unwrap();
        w.commit_with(Durability::Immediate).unwrap();
        model.insert(b"marker".to_vec(), b"m".to_vec());
        let lost = (
            data.crash(CrashMode::DropUnsynced),
            log.crash(CrashMode::DropUnsynced),
        );
        common::abandon(db);
        let db = common::open_with_log(&lost.0, &lost.1, options())
            .unwrap_or_else(|e| panic!("{keys} keys: reopen after the power loss: {e}"));
        check(&db, &model);
    }
}

#[test]
fn after_a_power_loss_the_database_is_a_commit_at_or_after_the_last_durable_one() {
    for seed in 0..8u64 {
        let (data, log) = (FaultStorage::new(), FaultStorage::new());
        let mut model = Model::new();
        let db = common::open_with_log(&data, &log, options()).unwrap();
        common::create_table(&db, "t");
        db.checkpoint().unwrap();
        writes(&db, &mut model, 0, 700, 250);
        // A durable commit: everything before it must survive.
        let mut w = db.begin_write().unwrap();
        w.table("t").unwrap().put(b"marker", b"m").unwrap();
        w.commit_with(Durability::Immediate).unwrap();
        model.insert(b"marker".to_vec(), b"m".to_vec());
        // The states of every commit after it.
        let mut states = vec![model.clone()];
        let count = 300 + seed as u32 * 50;
        for i in 700..700 + count {
            writes(&db, &mut model, i, 1, 250);
            states.push(model.clone());
        }
        let mode = CrashMode::KeepRandom { seed };
        let (data2, log2) = (data.crash(mode), log.crash(mode));
        common::abandon(db);
        let db = common::open_with_log(&data2, &log2, options()).unwrap();
        let r = db.begin_read().unwrap();
        let got: Model = common::collect(r.table("t").unwrap().iter())
            .into_iter()
            .collect();
        drop(r);
        assert!(
            states.contains(&got),
            "seed {seed}: the database after the power loss is no commit's from the last \
             durable one on ({} entries)",
            got.len()
        );
        let report = db.verify().unwrap();
        assert!(report.is_clean(), "seed {seed}: verify: {report:?}");
    }
}

/// A table dropped among the one-put commits: a commit of pages (the overlays merged into the
/// tree first) that frees the table's runs, which records name: those frees must wait like a
/// checkpoint's, or a power loss returns to a log whose records name runs reused since.
#[test]
fn runs_a_commit_of_pages_frees_wait_for_the_records_that_name_them() {
    for seed in 0..6u64 {
        let (data, log) = (FaultStorage::new(), FaultStorage::new());
        let mut model = Model::new();
        let db = common::open_with_log(&data, &log, options()).unwrap();
        common::create_table(&db, "t");
        common::create_table(&db, "u");
        db.checkpoint().unwrap();
        writes(&db, &mut model, 0, 300, 200);
        let mut states = vec![model.clone()];
        for round in 0..12u32 {
            let from = 300 + round * 40;
            for i in from..from + 40 {
                writes(&db, &mut model, i, 1, 200);
                states.push(model.clone());
                // A large value in the table dropped below.
                let mut w = db.begin_write().unwrap();
                w.table("u")
                    .unwrap()
                    .put(&key(i), &value(u64::from(i) << 8, 4000))
                    .unwrap();
                w.commit().unwrap();
            }
            let mut w = db.begin_write().unwrap();
            assert!(w.delete_table("u").unwrap());
            w.create_table("u").unwrap();
            w.commit().unwrap();
            // Every other round ends with a commit that must survive: the log is synced past
            // the records before it, whatever runs they name.
            if round % 2 == 1 {
                let mut w = db.begin_write().unwrap();
                w.table("t")
                    .unwrap()
                    .put(b"marker", &round.to_be_bytes())
                    .unwrap();
                w.commit_with(Durability::Immediate).unwrap();
                model.insert(b"marker".to_vec(), round.to_be_bytes().to_vec());
                states = vec![model.clone()];
            }
        }
        let mode = CrashMode::KeepRandom { seed };
        let (data2, log2) = (data.crash(mode), log.crash(mode));
        common::abandon(db);
        let db = common::open_with_log(&data2, &log2, options()).unwrap();
        let r = db.begin_read().unwrap();
        let got: Model = common::collect(r.table("t").unwrap().iter())
            .into_iter()
            .collect();
        drop(r);
        assert!(
            states.contains(&got),
            "seed {seed}: the database after the power loss is no commit's from the last \
             durable one on ({} entries)",
            got.len()
        );
        let report = db.verify().unwrap();
        assert!(report.is_clean(), "seed {seed}: verify: {report:?}");
    }
}

/// A run damaged under a record that a later `Immediate` commit's sync vouches for: never
/// replayed as another value. The open refuses (`WouldLoseData`: the commits after it were
/// acknowledged), or, where a durable checkpoint already holds the record, it opens and the
/// damage is reported where the run is read; a recovering open keeps the commits before it.
#[test]
fn a_damaged_run_is_refused_or_reported_never_read_as_a_value() {
    let (data, log) = (FaultStorage::new(), FaultStorage::new());
    let mut model = Model::new();
    let db = common::open_with_log(&data, &log, options()).unwrap();
    common::create_table(&db, "t");
    db.checkpoint().unwrap();
    // The runs of live values: the overflow pages (kind 4) that hold the newest value still
    // live that has one. Written until there is one (the checkpoints the log's room brings
    // reserve pages for runs, and values go to the log while the writer has none).
    let holds = |bytes: &[u8], p: usize, v: &[u8]| {
        let at = p * 4096;
        bytes[at + 4] == 4 && bytes[at + 32..at + 96] == v[..64]
    };
    let live_runs = |model: &Model, upto: u32| {
        let bytes = data.contents();
        (0..upto)
            .rev()
            .map(|i| value(u64::from(i), 4000))
            .filter(|v| model.values().any(|m| m == v))
            .map(|v| {
                (2..bytes.len() / 4096)
                    .filter(|&p| holds(&bytes, p, &v))
                    .collect::<Vec<_>>()
            })
            .find(|pages| !pages.is_empty())
    };
    let mut written = 0;
    let pages = loop {
        writes(&db, &mut model, written, 500, 150);
        written += 500;
        if let Some(pages) = live_runs(&model, written) {
            break pages;
        }
        assert!(written < 20_000, "no live value in a run");
    };
    let mut w = db.begin_write().unwrap();
    w.table("t").unwrap().put(b"marker", b"m").unwrap();
    w.commit_with(Durability::Immediate).unwrap();
    let (data2, log2) = process_crash(db, &data, &log);
    let mut bytes = data2.contents();
    for &page in &pages {
        bytes[page * 4096 + 1000] ^= 0x5a;
    }
    data2.set_contents(bytes);
    match common::open_with_log(&data2, &log2, options()) {
        Err(Error::WouldLoseData { .. }) => {
            let db = common::open_with_log(&data2, &log2, options().recover(true)).unwrap();
            let report = db.verify_all().unwrap();
            assert!(
                report.is_clean(),
                "after the recovery: {:?}",
                report.problems
            );
        }
        Ok(db) => {
            let report = db.verify_all().unwrap();
            assert!(
                report
                    .problems
                    .iter()
                    .any(|p| pages.contains(&(p.page as usize))),
                "the damaged run is not reported: {:?}",
                report.problems
            );
            // No key reads another value than the one written.
            let r = db.begin_read().unwrap();
            let t = r.table("t").unwrap();
            for (k, v) in &model {
                if let Ok(Some(got)) = t.get(k) {
                    assert_eq!(got, v.as_slice());
                }
            }
        }
        Err(e) => panic!("the open failed otherwise: {e}"),
    }
}

/// The model test's smallest failure: a large value written, its run freed by a range
/// deletion (deferred), and a clean close that merged everything without a commit that freed
/// it. The close now makes one.
#[test]
fn a_close_frees_the_runs_deferred_and_the_reservations_given_up() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let options = || {
        larchdb::testing::small_log_options()
            .checkpoint_bytes(16 << 10)
            .checkpoint_slices(4)
    };
    let db = Database::open(&path, options()).unwrap();
    let mut w = db.begin_write().unwrap();
    w.create_table("a").unwrap();
    w.table("a").unwrap().put(b"k", &value(0, 2024)).unwrap();
    w.commit_with(Durability::None).unwrap();
    let mut w = db.begin_write().unwrap();
    {
        let mut t = w.table("a").unwrap();
        t.delete_range::<[u8], _>(..).unwrap();
        let mut k = b"k".to_vec();
        for _ in 0..64 {
            k.push(b'~');
            t.append(&k, b"").unwrap();
        }
    }
    w.commit_with(Durability::None).unwrap();
    drop(db);
    let db = Database::open(&path, options()).unwrap();
    let report = db.verify_all().unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
}

/// A read-only handle beside a writer of large values reads each one as the writer publishes
/// its record, from the run the record names (written before the record is appended), and
/// still reads them after the writer goes away without a last checkpoint.
#[test]
fn a_follower_reads_large_values_from_the_runs_their_records_name() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Database::open(&path, options()).unwrap();
    common::create_table(&db, "t");
    db.checkpoint().unwrap();
    let ro = Database::open(&path, Options::default().read_only(true)).unwrap();
    let mut model = Model::new();
    for round in 0..6u32 {
        writes(&db, &mut model, round * 400, 400, 300);
        let newest = db.begin_read().unwrap().id();
        let r = ro.begin_read().unwrap();
        assert_eq!(r.id(), newest, "round {round}: the follower is behind");
        common::assert_holds(&r.table("t").unwrap(), &model, "the follower's table");
    }
    assert!(db.commit_stats().runs_written > 0, "no value went to a run");
    drop(db);
    let r = ro.begin_read().unwrap();
    common::assert_holds(&r.table("t").unwrap(), &model, "after the writer's drop");
    drop(r);
    assert!(ro.verify_all().unwrap().is_clean());
    let db = Database::open(&path, options()).unwrap();
    check(&db, &model);
}

/// The options of the writer whose log an open replays in rounds: a log long enough to hold
/// every record the test writes and checkpoints rare (replay_rounds.rs), the checkpoint
/// thread on (it takes the reservations the runs come from). The runs' durable checkpoints
/// come after an eighth of a checkpoint's bytes of them (`commit::runs_due`): 12 MiB, more
/// than the tests write between checkpoints.
fn rounds_options() -> Options {
    options()
        .log_segment_bytes(1 << 20)
        .log_segments(128)
        .memory_budget(256 << 20)
        .checkpoint_bytes(96 << 20)
        .idle_checkpoint_millis(0)
}

/// Large values in the log, most in runs and some in the records (the writer ran past its
/// reservation), then a process crash: an open in a budget too small for them replays in
/// rounds, holds every value, frees the extents' pages no record names after the last round
/// (the file verifies), and goes on.
#[test]
fn an_open_that_replays_large_values_in_rounds_holds_them_and_frees_the_rest() {
    let (data, log) = (FaultStorage::new(), FaultStorage::new());
    let mut model = Model::new();
    let db = common::open_with_log(&data, &log, rounds_options()).unwrap();
    common::create_table(&db, "t");
    // The first checkpoint reserves room sized by the values that missed one.
    writes(&db, &mut model, 0, 100, 2000);
    db.checkpoint().unwrap();
    db.checkpoint().unwrap();
    writes(&db, &mut model, 100, 2400, 2000);
    assert!(db.commit_stats().runs_written > 0, "no value went to a run");
    let (data, log) = process_crash(db, &data, &log);
    let small = || rounds_options().memory_budget(4 << 20);
    let db = common::open_with_log(&data, &log, small()).unwrap();
    let rounds = db.stats().unwrap().commits.replay_rounds;
    assert!(rounds >= 2, "rounds: {rounds}");
    check(&db, &model);
    writes(&db, &mut model, 2500, 300, 2000);
    db.checkpoint().unwrap();
    check(&db, &model);
    drop(db);
    let db = common::open_with_log(&data, &log, rounds_options()).unwrap();
    check(&db, &model);
}

/// The same log, made durable by a last `Immediate` commit, replayed in rounds with a power
/// loss at sampled operations of the data file: each reopen holds every value and verifies.
#[test]
fn a_power_loss_during_rounds_over_large_values_keeps_every_durable_value() {
    let (data, log) = (FaultStorage::new(), FaultStorage::new());
    let mut model = Model::new();
    let db = common::open_with_log(&data, &log, rounds_options()).unwrap();
    common::create_table(&db, "t");
    writes(&db, &mut model, 0, 100, 1500);
    db.checkpoint().unwrap();
    db.checkpoint().unwrap();
    writes(&db, &mut model, 100, 1900, 1500);
    let mut w = db.begin_write().unwrap();
    w.table("t").unwrap().put(b"last", b"1").unwrap();
    w.commit_with(Durability::Immediate).unwrap();
    model.insert(b"last".to_vec(), b"1".to_vec());
    assert!(db.commit_stats().runs_written > 0, "no value went to a run");
    common::abandon(db);
    let (data, log) = (
        data.crash(CrashMode::DropUnsynced),
        log.crash(CrashMode::DropUnsynced),
    );
    let small = || rounds_options().memory_budget(4 << 20);
    power_loss_in_the_open(&data, &log, small, &model, 16, 1);
}

/// Checkpoints on the writer's thread (`checkpoint_thread(false)`) take reservations too:
/// values go to runs, and read back through checkpoints, a process crash and a reopen.
#[test]
fn without_the_checkpoint_thread_large_values_go_to_runs_and_read_back() {
    let (data, log) = (FaultStorage::new(), FaultStorage::new());
    let mut model = Model::new();
    let opts = || options().checkpoint_thread(false);
    let db = common::open_with_log(&data, &log, opts()).unwrap();
    common::create_table(&db, "t");
    db.checkpoint().unwrap();
    writes(&db, &mut model, 0, 1500, 300);
    let runs = db.commit_stats().runs_written;
    check(&db, &model);
    let (data, log) = process_crash(db, &data, &log);
    let db = common::open_with_log(&data, &log, opts()).unwrap();
    check(&db, &model);
    assert!(runs > 0, "no value went to a run");
}

/// With checkpoints by slices the log is kept from the oldest record a slice still needs, so
/// an open's rounds replay records older than the tree: a round that applies an older record
/// of a key whose value the tree holds in a later record's run frees that run, and the round
/// that replays the later record takes it back (`FreeSet::revive`) before any commit can
/// reuse it (the run was deferred: a later record names it). The values read back, and the
/// file verifies, after the rounds, after more writes, and after a power loss during them.
#[test]
fn rounds_over_a_log_kept_for_slices_keep_the_runs_later_records_name() {
    // An eighth of a checkpoint's bytes of the runs the records name call for a durable
    // checkpoint of the oldest slice (`commit::runs_due`): 4 MiB of them. Every third commit
    // is `Immediate`, with its value in its record, so that the log kept for the slices
    // holds more than the 3 MiB an open in a 4 MiB budget replays in one round, and each
    // key's records name runs and carry values by turns (a key comes back every 400 writes).
    // The overlays' bytes that merge a slice (64 MiB) and the ring's room for their round
    // are more than the test writes: the runs call for every merge.
    let opts = || {
        rounds_options()
            .log_segments(256)
            .checkpoint_bytes(32 << 20)
            .checkpoint_slices(4)
    };
    let small = || opts().memory_budget(4 << 20);
    let (data, log) = (FaultStorage::new(), FaultStorage::new());
    let mut model = Model::new();
    let db = common::open_with_log(&data, &log, opts()).unwrap();
    common::create_table(&db, "t");
    writes_durable_every(&db, &mut model, 0, 100, 400, 3);
    db.checkpoint().unwrap();
    db.checkpoint().unwrap();
    writes_durable_every(&db, &mut model, 100, 4000, 400, 3);
    // Whether the log kept for the slices at a given moment spans a slice's merge, and an
    // open replays it in rounds that revive runs, depends on where the checkpoints on their
    // thread stand: the writes go on, and after every 250 a power loss is copied (the last
    // commit `Immediate`, so that it loses none) and opened, until one does.
    let mut at = 4100;
    let (d, l, (data, log), db) = loop {
        writes_durable_every(&db, &mut model, at, 250, 400, 3);
        at += 250;
        let mut w = db.begin_write().unwrap();
        w.table("t")
            .unwrap()
            .put(b"last", &at.to_le_bytes())
            .unwrap();
        w.commit_with(Durability::Immediate).unwrap();
        model.insert(b"last".to_vec(), at.to_le_bytes().to_vec());
        common::settle(&db);
        let (d, l) = (data.durable_copy(), log.durable_copy());
        let lost = (data.durable_copy(), log.durable_copy());
        let opened = common::open_with_log(&d, &l, small()).unwrap();
        let c = opened.stats().unwrap().commits;
        if c.replay_rounds >= 2 && c.replay_runs_revived > 0 {
            assert!(
                db.commit_stats().checkpoint_slices > 0,
                "no slice was merged"
            );
            common::abandon(db);
            break (d, l, lost, opened);
        }
        drop(opened);
        assert!(
            at < 40_000,
            "no open replayed a log kept for slices in rounds that revived a run"
        );
    };
    check(&db, &model);
    let mut after = model.clone();
    writes(&db, &mut after, at, 300, 400);
    db.checkpoint().unwrap();
    check(&db, &after);
    drop(db);
    let db = common::open_with_log(&d, &l, opts()).unwrap();
    check(&db, &after);
    drop(db);

    // A power loss at sampled operations of the data file during the rounds.
    power_loss_in_the_open(&data, &log, small, &model, 12, 2);
}

/// A transaction that writes pages deletes keys whose values are in runs a record names
/// (their frees wait: `WritePages::defer_runs`), and fails on a full disk at each of its
/// first operations: rolled back, its tree still holds the runs, so none of them may be
/// freed later (`fail_commit` keeps only the runs deferred before it). After more writes and
/// checkpoints every value reads back and the file verifies.
#[test]
fn a_failed_commit_of_pages_frees_none_of_the_runs_it_deferred() {
    let (data, log) = (FaultStorage::new(), FaultStorage::new());
    let mut model = Model::new();
    let db = common::open_with_log(&data, &log, options()).unwrap();
    common::create_table(&db, "t");
    db.checkpoint().unwrap();
    writes(&db, &mut model, 0, 1200, 300);
    assert!(db.commit_stats().runs_written > 0, "no value went to a run");
    common::abandon(db);
    let mut failed = 0;
    for k in 1..=12u64 {
        let (d, l) = (
            data.crash(CrashMode::ProcessOnly),
            log.crash(CrashMode::ProcessOnly),
        );
        let db = common::open_with_log(&d, &l, options()).unwrap();
        let mut w = db.begin_write().unwrap();
        w.create_table(&format!("other{k}")).unwrap();
        {
            let mut t = w.table("t").unwrap();
            for key in model.keys().take(40) {
                t.delete(key).unwrap();
            }
        }
        d.fail_after(k, larchdb::storage::FaultKind::Enospc, false);
        let committed = w.commit();
        d.clear_faults();
        let mut model = model.clone();
        match committed {
            Ok(()) => {
                let keys: Vec<_> = model.keys().take(40).cloned().collect();
                for key in keys {
                    model.remove(&key);
                }
            }
            // Rolled back with the handle still writing.
            Err(Error::DiskFull) if db.begin_write().is_ok() => failed += 1,
            // A failure that stops the handle: a reopen goes on from the files.
            // Whether its commit reached the files is not known.
            Err(_) => {
                drop(db);
                let db = common::open_with_log(&d, &l, options()).unwrap();
                let r = db.begin_read().unwrap();
                let got: Model = common::collect(r.table("t").unwrap().iter())
                    .into_iter()
                    .collect();
                let mut deleted = model.clone();
                deleted.retain(|key, _| !model.keys().take(40).any(|k| k == key));
                assert!(got == model || got == deleted, "after a failure at {k}");
                drop(r);
                let report = db.verify().unwrap();
                assert!(report.is_clean(), "verify: {report:?}");
                continue;
            }
        }
        writes(&db, &mut model, 1200, 400, 300);
        db.checkpoint().unwrap();
        writes(&db, &mut model, 1600, 200, 300);
        db.checkpoint().unwrap();
        check(&db, &model);
    }
    assert!(failed > 0, "no commit failed on the full disk");
}

/// Opens the durable state of `data` and `log` with `options`, which replays at least
/// `rounds` rounds, then again with a power loss at about `samples` points among the data
/// file's operations of that open (an I/O error there, then the unsynced writes kept at
/// random): each reopen holds `model` and verifies.
fn power_loss_in_the_open(
    data: &FaultStorage,
    log: &FaultStorage,
    options: impl Fn() -> Options,
    model: &Model,
    samples: u64,
    rounds: u64,
) {
    let (d, l) = (data.durable_copy(), log.durable_copy());
    let before = d.op_count();
    let db = common::open_with_log(&d, &l, options()).unwrap();
    assert!(db.stats().unwrap().commits.replay_rounds >= rounds);
    check(&db, model);
    let ops = d.op_count() - before;
    drop(db);
    let step = (ops / samples).max(1);
    for k in (1..=ops).step_by(step as usize) {
        let (d, l) = (data.durable_copy(), log.durable_copy());
        d.fail_after(k, larchdb::storage::FaultKind::Eio, true);
        if let Ok(db) = common::open_with_log(&d, &l, options()) {
            common::abandon(db);
        }
        d.clear_faults();
        let (d, l) = (
            d.crash(CrashMode::KeepRandom { seed: k }),
            l.crash(CrashMode::KeepRandom { seed: !k }),
        );
        let db = common::open_with_log(&d, &l, options())
            .unwrap_or_else(|e| panic!("power loss at {k} of {ops}: reopen: {e}"));
        check(&db, model);
        drop(db);
    }
}

/// `db`'s files as a process crash leaves them, its handle abandoned (`common::abandon`).
fn process_crash(
    db: Database,
    data: &FaultStorage,
    log: &FaultStorage,
) -> (FaultStorage, FaultStorage) {
    let crashed = (
        data.crash(CrashMode::ProcessOnly),
        log.crash(CrashMode::ProcessOnly),
    );
    common::abandon(db);
    crashed
}

/// One commit that puts `k` = `v` into table "t", and the model with it.
fn put(db: &Database, model: &mut Model, k: Vec<u8>, v: Vec<u8>) {
    let mut w = db.begin_write().unwrap();
    w.table("t").unwrap().put(&k, &v).unwrap();
    w.commit().unwrap();
    model.insert(k, v);
}

/// `rounds` rounds of `per_round` one-put overwrites of values of `len` bytes, each of a key
/// drawn at random among `keys` keys, each round followed by a checkpoint: the runs the
/// overwrites free lie scattered over the file.
fn overwrites(db: &Database, model: &mut Model, seed: u64, keys: u32, rounds: u32, len: usize) {
    let per_round = keys / 4;
    let mut draw = seed | 1;
    for round in 0..rounds {
        for i in 0..per_round {
            draw = draw
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let k = key((draw >> 33) as u32 % keys);
            put(
                db,
                model,
                k,
                value(seed + u64::from(round * per_round + i), len),
            );
        }
        db.checkpoint().unwrap();
    }
}

#[test]
fn overwrites_of_large_values_reuse_the_pages_their_old_runs_leave() {
    // Each overwrite writes a new run and frees the old one, a page (or two) somewhere in
    // the file: a reservation takes those pages in as many extents as they are, so the file
    // stays near the live data however many times the values are replaced, where taking
    // reservations only from extents as long as themselves grew it by nearly every run
    // written. Values of one page, then of two (a reservation then takes no single free
    // page).
    for (len, pages_each) in [(4000usize, 1u64), (8000, 2)] {
        let (data, log) = (FaultStorage::new(), FaultStorage::new());
        let mut model = Model::new();
        let keys = 400;
        let live = u64::from(keys) * pages_each;
        let db = common::open_with_log(&data, &log, options()).unwrap();
        common::create_table(&db, "t");
        db.checkpoint().unwrap();
        overwrites(&db, &mut model, 1, keys, 4 * 40, len);
        check(&db, &model);
        let pages = db.stats().unwrap().page_count;
        let runs = db.commit_stats().runs_written;
        assert!(
            runs > u64::from(keys) * 30,
            "values written into runs: {runs}"
        );
        // Reservations taken as one extent each, from a free extent as long or the file's
        // end, grew the file to about ten times the live data here.
        assert!(
            pages < 8 * live,
            "{len}-byte values: {pages} pages after {runs} runs written"
        );
        // A process crash among the overwrites, records past the last checkpoint: the open
        // reads the reserved pages' list and frees what no record names; the file verifies
        // and goes on reusing.
        for i in 0..keys / 4 {
            put(
                &db,
                &mut model,
                key(i),
                value((1 << 20) + u64::from(i), len),
            );
        }
        let (data2, log2) = process_crash(db, &data, &log);
        let db = common::open_with_log(&data2, &log2, options()).unwrap();
        check(&db, &model);
        overwrites(&db, &mut model, 1 << 30, keys, 4 * 20, len);
        check(&db, &model);
        let after = db.stats().unwrap().page_count;
        assert!(
            after < 8 * live,
            "{len}-byte values: {after} pages after a reopen and 20 more passes"
        );
    }
}

#[test]
fn runs_freed_under_a_log_of_slices_are_given_back_before_the_log_needs_room() {
    // A freed run waits while a record a replay may read names it: with the overlays cut in
    // slices, until the slice holding the oldest records is merged, which the log's room
    // calls for. The log holds the runs' references, not their values, so its room called
    // for it after about a million overwrites: every run written until then waited, and the
    // open file grew with them (23,154 pages at most after 28,179 runs written here, against
    // 400 live, without `commit::runs_due`). A durable checkpoint of the oldest slice is due
    // once the named runs and the values that missed a reservation hold the runs' interval (a
    // 32nd of the file, at least 1 MiB), and a reservation holds at most two such intervals.
    // The bound is six intervals of 8 MiB (2,048 pages), what the file stayed within when the
    // interval was a checkpoint's bytes.
    let dir = tempfile::tempdir().unwrap();
    let options = || {
        Options::default()
            .log(true)
            .durability(Durability::None)
            .checkpoint_slices(4)
    };
    let db = Database::open(dir.path().join("db"), options()).unwrap();
    common::create_table(&db, "t");
    let mut model = Model::new();
    let keys = 400u32;
    for i in 0..keys {
        put(&db, &mut model, key(i), value(u64::from(i), 4000));
    }
    let bound = u64::from(keys) + 6 * 2048;
    let mut draw = 7u64;
    let mut most = 0;
    for i in 0..40_000u64 {
        draw = draw
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let k = key((draw >> 33) as u32 % keys);
        put(&db, &mut model, k, value((1 << 32) + i, 4000));
        if i % 1000 == 999 {
            most = most.max(db.stats().unwrap().page_count);
        }
    }
    let runs = db.commit_stats().runs_written;
    assert!(runs > 15_000, "values written into runs: {runs}");
    assert!(
        most < bound,
        "{most} pages at most after {runs} runs written"
    );
    check(&db, &model);
    let db = {
        drop(db);
        Database::open(dir.path().join("db"), options()).unwrap()
    };
    check(&db, &model);
}
