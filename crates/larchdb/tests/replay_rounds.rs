//! An open whose log holds more than the overlays' share of the memory budget replays it in
//! rounds (`Shared::finish_replay`): the overlay replayed so far is merged into the tree as a
//! durable checkpoint naming the first record it does not hold, and the replay goes on from
//! there. The database reopened in a smaller budget than it was written with holds every
//! record, and a power loss at any point of the rounds loses none that was durable.

mod common;

use larchdb::storage::{CrashMode, FaultKind, FaultStorage};
use larchdb::{Database, Durability, Options};
use std::collections::BTreeMap;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// The opens: a large budget, checkpoints rare enough that the log holds every record a
/// test writes, no idle checkpoints, no compaction at close.
fn base_options() -> Options {
    Options::default()
        .log(true)
        .log_segment_bytes(1 << 20)
        .log_segments(64)
        .memory_budget(256 << 20)
        .checkpoint_bytes(32 << 20)
        .idle_checkpoint_millis(0)
        .compact_on_close(false)
}

/// The writer: checkpoints, if any comes due, on the writer's thread, so that none is under
/// way when the test crashes the handle (one finishing on its thread meanwhile would leave a
/// log shorter from one run to the next).
fn writer_options() -> Options {
    base_options().checkpoint_thread(false)
}

/// The same database opened with the smallest budget (4 MiB): the overlays' share is 3 MiB.
fn small() -> Options {
    base_options().memory_budget(4 << 20)
}

fn key(i: u32) -> [u8; 4] {
    i.to_be_bytes()
}

fn value(i: u32, round: u8) -> Vec<u8> {
    let mut v = vec![round; 200];
    v[..4].copy_from_slice(&i.to_be_bytes());
    v
}

/// One-put commits of `n` keys in a scattered order, every fifth overwritten and every
/// seventh deleted afterwards; the model of what they leave.
fn write(db: &Database, n: u32) -> Model {
    let mut model = Model::new();
    let commit = |f: &dyn Fn(&mut larchdb::WriteTable<'_>)| {
        let mut w = db.begin_write().unwrap();
        f(&mut w.default_table().unwrap());
        w.commit_with(Durability::None).unwrap();
    };
    for j in 0..n {
        // 7,919 is a prime that divides neither count: a permutation.
        let i = (u64::from(j) * 7_919 % u64::from(n)) as u32;
        commit(&|t| {
            t.put(&key(i), &value(i, 1)).unwrap();
        });
        model.insert(key(i).to_vec(), value(i, 1));
    }
    for i in (0..n).step_by(5) {
        commit(&|t| {
            t.put(&key(i), &value(i, 2)).unwrap();
        });
        model.insert(key(i).to_vec(), value(i, 2));
    }
    for i in (0..n).step_by(7) {
        commit(&|t| assert!(t.delete(&key(i)).unwrap()));
        model.remove(&key(i)[..]);
    }
    model
}

fn contents(db: &Database) -> Model {
    let r = db.begin_read().unwrap();
    let t = r.default_table().unwrap();
    common::collect(t.iter()).into_iter().collect()
}

fn rounds(db: &Database) -> u64 {
    db.stats().unwrap().commits.replay_rounds
}

fn assert_holds(db: &Database, model: &Model, what: &str) {
    assert!(contents(db) == *model, "{what}: the records differ");
    let report = db.verify_all().unwrap();
    assert!(report.is_clean(), "{what}: {:?}", report.problems);
    let r = db.begin_read().unwrap();
    assert_eq!(
        r.default_table().unwrap().len().unwrap(),
        model.len() as u64,
        "{what}: the count"
    );
}

#[test]
fn an_open_past_its_budget_replays_the_log_in_rounds_and_loses_nothing() {
    let (data, log) = (FaultStorage::new(), FaultStorage::new());
    let db = common::open_with_log(&data, &log, writer_options()).unwrap();
    let mut model = write(&db, 30_000);
    let written = db.stats().unwrap().commits;
    // A process crash: everything written is in the files.
    common::abandon(db);
    let crash = |d: &FaultStorage, l: &FaultStorage| {
        (
            d.crash(CrashMode::ProcessOnly),
            l.crash(CrashMode::ProcessOnly),
        )
    };
    let (data, log) = crash(&data, &log);

    let db = common::open_with_log(&data, &log, small()).unwrap();
    assert!(
        rounds(&db) >= 2,
        "rounds: {}; the writer's commits: {written:?}",
        rounds(&db)
    );
    assert_holds(&db, &model, "after the rounds");
    // Writes go on after them; the next open replays from the last round's checkpoint.
    db.put(b"after", b"x").unwrap();
    model.insert(b"after".to_vec(), b"x".to_vec());
    common::abandon(db);
    let (data, log) = crash(&data, &log);
    let db = common::open_with_log(&data, &log, writer_options()).unwrap();
    assert_eq!(rounds(&db), 0, "the log left fits the writer's budget");
    assert_holds(&db, &model, "reopened with the writer's budget");
    drop(db);
    let db = common::open_with_log(&data, &log, small()).unwrap();
    assert_holds(&db, &model, "after a close");
}

#[test]
fn a_power_loss_at_any_point_of_the_rounds_keeps_every_durable_record() {
    power_loss_in_rounds(base_options(), 25_000);
}

/// The same over a log kept for slices: rounds of records older than the tree's commit.
#[test]
fn a_power_loss_in_rounds_over_a_log_kept_for_slices_keeps_every_durable_record() {
    power_loss_in_rounds(
        base_options()
            .checkpoint_bytes(2 << 20)
            .checkpoint_slices(4),
        40_000,
    );
}

/// Writes `n` keys with `options`, the last commit durable, then opens with the smallest
/// budget with a power loss at sampled operations of the data file during the rounds; each
/// reopen after the power loss holds every record.
fn power_loss_in_rounds(options: Options, n: u32) {
    let (data, log) = (FaultStorage::new(), FaultStorage::new());
    let db = common::open_with_log(&data, &log, options.clone()).unwrap();
    let mut model = write(&db, n);
    common::settle(&db);
    // A durable commit: its sync makes every record before it durable too.
    let mut w = db.begin_write().unwrap();
    w.default_table().unwrap().put(b"last", b"1").unwrap();
    w.commit_with(Durability::Immediate).unwrap();
    model.insert(b"last".to_vec(), b"1".to_vec());
    common::abandon(db);
    let (data, log) = (
        data.crash(CrashMode::DropUnsynced),
        log.crash(CrashMode::DropUnsynced),
    );

    // The rounds' operations on the data file, counted on a copy.
    let (d, l) = (data.durable_copy(), log.durable_copy());
    let before = d.op_count();
    let db = common::open_with_log(&d, &l, options.clone().memory_budget(4 << 20)).unwrap();
    assert!(rounds(&db) >= 1, "rounds: {}", rounds(&db));
    assert_holds(&db, &model, "without a power loss");
    let ops = d.op_count() - before;
    drop(db);

    let step = (ops / 24).max(1);
    for k in (1..=ops).step_by(step as usize) {
        let (d, l) = (data.durable_copy(), log.durable_copy());
        d.fail_after(k, FaultKind::Eio, true);
        if let Ok(db) = common::open_with_log(&d, &l, options.clone().memory_budget(4 << 20)) {
            common::abandon(db);
        }
        d.clear_faults();
        let (d, l) = (
            d.crash(CrashMode::KeepRandom { seed: k }),
            l.crash(CrashMode::KeepRandom { seed: !k }),
        );
        let db = common::open_with_log(&d, &l, options.clone().memory_budget(4 << 20))
            .unwrap_or_else(|e| panic!("power loss at {k} of {ops}: reopen: {e}"));
        assert_holds(&db, &model, &format!("power loss at {k} of {ops}"));
        drop(db);
    }
}

/// With checkpoints by slices while writing, the log is kept from the oldest record a slice
/// still needed, so the open replays records of commits the tree holds as well: a round may
/// hold nothing newer than the tree, and goes on without a checkpoint.
#[test]
fn rounds_over_a_log_kept_for_slices_lose_nothing() {
    let (data, log) = (FaultStorage::new(), FaultStorage::new());
    let options = base_options()
        .checkpoint_bytes(2 << 20)
        .checkpoint_slices(4);
    let db = common::open_with_log(&data, &log, options.clone()).unwrap();
    let model = write(&db, 60_000);
    common::settle(&db);
    assert!(db.stats().unwrap().commits.checkpoint_slices > 0);
    common::abandon(db);
    let (data, log) = (
        data.crash(CrashMode::ProcessOnly),
        log.crash(CrashMode::ProcessOnly),
    );
    let db = common::open_with_log(&data, &log, options.memory_budget(4 << 20)).unwrap();
    assert!(rounds(&db) >= 1, "rounds: {}", rounds(&db));
    assert_holds(&db, &model, "after the rounds");
}
