//! `Database::compact` and the compaction a close makes (`Options::compact_on_close`): the
//! space a load freed is given back, the log is cut to its header, every record stays, and a
//! power loss at any I/O operation of a compaction keeps the database whole.

mod common;

use larchdb::storage::{CrashMode, FaultKind, FaultStorage};
use larchdb::{Database, Durability, Options};
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::sync::Arc;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn key(i: u64) -> Vec<u8> {
    format!("{i:016}").into_bytes()
}

/// One-put commits of random keys (about one in `big` values long enough for an overflow
/// run, when `big` is not 0), then deletes of about half the keys: the tree's pages end up
/// spread over a file about twice as large as they need.
fn random_load(db: &Database, model: &mut Model, puts: u64, big: u32, seed: u64) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut w = db.begin_write().unwrap();
    w.ensure_table("t").unwrap();
    w.commit().unwrap();
    for _ in 0..puts {
        let k = key(rng.gen_range(0..puts * 2));
        let len = if big != 0 && rng.gen_range(0..big) == 0 {
            rng.gen_range(5_000..20_000)
        } else {
            100
        };
        // Bytes that do not compress: a log of packed records (`KIND_PACKED`) would fill
        // too slowly for the checkpoints that leave the free space the compactions move.
        let v: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
        let mut w = db.begin_write().unwrap();
        w.table("t").unwrap().put(&k, &v).unwrap();
        w.commit_with(Durability::None).unwrap();
        model.insert(k, v);
    }
    let keys: Vec<Vec<u8>> = model.keys().cloned().collect();
    for chunk in keys.chunks(97) {
        let mut w = db.begin_write().unwrap();
        for k in chunk.iter().filter(|_| rng.gen_bool(0.5)) {
            assert!(w.table("t").unwrap().delete(k).unwrap());
            model.remove(k);
        }
        w.commit_with(Durability::None).unwrap();
    }
}

fn check(db: &Database, model: &Model) {
    let report = db.verify_all().unwrap();
    assert!(report.is_clean(), "verify: {:?}", report.problems);
    let r = db.begin_read().unwrap();
    common::assert_holds(&r.table("t").unwrap(), model, "t");
}

fn log_options() -> Options {
    Options::default()
        .log(true)
        .log_segment_bytes(1 << 20)
        .log_segments(8)
        .checkpoint_bytes(1 << 20)
}

/// After a random load, `compact` leaves a file with almost no free page in it (the pages in
/// use are moved to its start and the end is given back) and a log of just its header; the
/// data is intact before and after a reopen, and commits go on through the restarted log.
#[test]
fn compact_gives_back_what_a_random_load_freed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.larch");
    let db = Database::open(&path, log_options().compact_on_close(false)).unwrap();
    let mut model = Model::new();
    random_load(&db, &mut model, 30_000, 0, 1);
    let before = db.stats().unwrap();
    let c = db.compact().unwrap();
    let after = db.stats().unwrap();
    check(&db, &model);
    assert!(c.moved, "{c:?}");
    assert!(
        c.data_bytes_after * 10 < c.data_bytes_before * 7,
        "{c:?}: {before:?}"
    );
    // Only the pages in use, and a few the last passes copied around.
    assert!(
        after.free_pages <= 64,
        "{} free pages left of {}",
        after.free_pages,
        after.file_bytes / 4096
    );
    assert_eq!(c.data_bytes_after, after.file_bytes);
    assert!(c.log_bytes_before > 1 << 20, "{c:?}");
    let log_path = larchdb::storage::log_path(&path);
    assert_eq!(
        std::fs::metadata(&log_path).unwrap().len(),
        c.log_bytes_after
    );
    assert!(c.log_bytes_after <= 4096, "{c:?}");
    // Nothing to do a second time.
    let again = db.compact().unwrap();
    assert!(!again.moved && again.data_bytes_after == again.data_bytes_before);
    // Commits through the log from its first slot, then a reopen that replays them.
    let mut w = db.begin_write().unwrap();
    for i in 0..500 {
        let (k, v) = (key(i * 7 + 1), vec![i as u8; 50]);
        w.table("t").unwrap().put(&k, &v).unwrap();
        model.insert(k, v);
    }
    w.commit().unwrap();
    for i in 0..300 {
        let mut w = db.begin_write().unwrap();
        let (k, v) = (key(i * 11 + 3), vec![3; 80]);
        w.table("t").unwrap().put(&k, &v).unwrap();
        w.commit().unwrap();
        model.insert(k, v);
    }
    drop(db);
    assert!(std::fs::metadata(&log_path).unwrap().len() > 4096);
    let db = Database::open(&path, log_options()).unwrap();
    check(&db, &model);
}

/// Overflow values move with the leaves that refer to them, and values larger than a page
/// come back whole; the same without a log.
#[test]
fn compact_moves_overflow_values() {
    let s = FaultStorage::new();
    let db = Database::open_storage(Arc::new(s.clone()), Options::default()).unwrap();
    let mut model = Model::new();
    random_load(&db, &mut model, 3_000, 8, 2);
    let c = db.compact().unwrap();
    assert!(c.moved && c.data_bytes_after < c.data_bytes_before, "{c:?}");
    assert_eq!(c.log_bytes_before, 0);
    check(&db, &model);
    drop(db);
    let db = Database::open_storage(
        Arc::new(s.crash(CrashMode::DropUnsynced)),
        Options::default(),
    )
    .unwrap();
    check(&db, &model);
}

/// A reader's snapshot holds its pages: compaction moves nothing while it lives, and the
/// reader sees its snapshot whole; once it is gone, the next compaction moves the pages.
#[test]
fn a_reader_keeps_its_snapshot_through_a_compaction() {
    let s = FaultStorage::new();
    let db = Database::open_storage(Arc::new(s), Options::default()).unwrap();
    let mut model = Model::new();
    random_load(&db, &mut model, 4_000, 0, 3);
    let old = model.clone();
    let reader = db.begin_read().unwrap();
    let keys: Vec<Vec<u8>> = model.keys().cloned().collect();
    let mut w = db.begin_write().unwrap();
    for k in keys.iter().step_by(3) {
        w.table("t").unwrap().delete(k).unwrap();
        model.remove(k);
    }
    w.commit().unwrap();
    let c = db.compact().unwrap();
    assert!(!c.moved, "{c:?}");
    common::assert_holds(&reader.table("t").unwrap(), &old, "reader");
    drop(reader);
    let c = db.compact().unwrap();
    assert!(c.moved && c.data_bytes_after < c.data_bytes_before, "{c:?}");
    check(&db, &model);
}

/// Closing compacts: the files on the disk are the compacted ones, and the next open
/// replays nothing (its log is just the header). With `compact_on_close` off, the log keeps
/// its records and the next open replays them.
#[test]
fn close_compacts_unless_told_not_to() {
    for compact in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.larch");
        let db = Database::open(&path, log_options().compact_on_close(compact)).unwrap();
        let mut model = Model::new();
        random_load(&db, &mut model, 20_000, 0, 4);
        let in_use = db.stats().unwrap();
        drop(db);
        let data = std::fs::metadata(&path).unwrap().len();
        let log = std::fs::metadata(larchdb::storage::log_path(&path))
            .unwrap()
            .len();
        if compact {
            assert!(log <= 4096, "log file of {log} bytes after close");
            assert!(
                data * 10 < in_use.file_bytes * 7,
                "{data} of {}",
                in_use.file_bytes
            );
        } else {
            assert!(log > 1 << 20, "log file of {log} bytes after close");
            assert!(data >= in_use.file_bytes, "{data} of {}", in_use.file_bytes);
        }
        let db = Database::open(&path, log_options().compact_on_close(false)).unwrap();
        check(&db, &model);
    }
}

/// Power loss at every I/O operation of a compaction (its checkpoint, the moves, the last
/// commit and the log's cut): a load whose last commit is durable, then `compact`, which
/// changes no record; for each k, every operation from the k-th on fails, the disk keeps a
/// random subset of the unsynced writes, and the reopened database verifies clean and holds
/// exactly the load. Without a log, and with one (two tests, so that they run side by side:
/// each reopens a few hundred times).
#[test]
fn power_loss_during_a_compaction_keeps_every_record() {
    power_loss_during_a_compaction(false);
}

/// `power_loss_during_a_compaction_keeps_every_record`, with a log.
#[test]
fn power_loss_during_a_compaction_with_a_log_keeps_every_record() {
    power_loss_during_a_compaction(true);
}

fn power_loss_during_a_compaction(with_log: bool) {
    let run = |fail_at: Option<u64>| {
        let data = FaultStorage::new();
        let log = FaultStorage::new();
        let options = if with_log {
            log_options()
        } else {
            Options::default()
        };
        let options = options.compact_on_close(false);
        let db = if with_log {
            common::open_with_log(&data, &log, options.clone()).unwrap()
        } else {
            Database::open_storage(Arc::new(data.clone()), options.clone()).unwrap()
        };
        let mut model = Model::new();
        random_load(&db, &mut model, 2_500, 10, 5);
        db.sync().unwrap();
        let (d0, l0) = (data.op_count(), log.op_count());
        if let Some(k) = fail_at {
            // From the k-th operation of the compaction on, on either file.
            data.fail_after(k + 1, FaultKind::Eio, true);
            log.fail_after(k + 1, FaultKind::Eio, true);
        }
        let result = db.compact();
        let ops = (data.op_count() - d0) + (log.op_count() - l0);
        drop(db);
        (data, log, options, model, result, ops)
    };
    let (_, _, _, _, result, ops) = run(None);
    assert!(result.unwrap().moved);
    assert!(ops > 10, "{ops} operations");
    let mut failed = 0;
    for k in 0..ops {
        let (data, log, options, model, result, _) = run(Some(k));
        failed += result.is_err() as u32;
        let data = data.crash(CrashMode::KeepRandom { seed: k });
        let db = if with_log {
            let log = log.crash(CrashMode::KeepRandom { seed: k ^ 0x5eed });
            common::open_with_log(&data, &log, options)
        } else {
            Database::open_storage(Arc::new(data), options)
        }
        .unwrap_or_else(|e| panic!("log {with_log}, k={k}: reopen failed: {e}"));
        check(&db, &model);
    }
    assert!(failed > 0, "log {with_log}: no compaction failed");
    eprintln!("compaction, log {with_log}: power loss at each of {ops} I/O operations");
}

/// `compact_with_progress` reports its steps in order: the checkpoint the log's commits need,
/// each table of each move, then the trim.
#[test]
fn compaction_reports_its_steps() {
    use larchdb::CompactStep;
    let dir = tempfile::tempdir().unwrap();
    let options = common::small_log_options();
    let db = Database::open(dir.path().join("db"), options).unwrap();
    let mut w = db.begin_write().unwrap();
    for name in ["a", "b"] {
        w.create_table(name).unwrap();
        let mut t = w.table(name).unwrap();
        for i in 0..20_000 {
            t.put(&key(i), &[1; 80]).unwrap();
        }
    }
    w.commit().unwrap();
    // Through the log: the compaction starts with a checkpoint.
    for i in 0..19_000 {
        let mut w = db.begin_write().unwrap();
        w.table(if i % 2 == 0 { "a" } else { "b" })
            .unwrap()
            .delete(&key(i))
            .unwrap();
        w.commit_with(Durability::None).unwrap();
    }
    let mut steps = Vec::new();
    let c = db.compact_with_progress(|s| steps.push(s)).unwrap();
    assert!(c.moved && c.data_bytes_after < c.data_bytes_before, "{c:?}");
    assert_eq!(steps.first(), Some(&CompactStep::Checkpoint), "{steps:?}");
    assert_eq!(steps.last(), Some(&CompactStep::Trimming), "{steps:?}");
    let first_pass: Vec<_> = steps
        .iter()
        .filter(|s| matches!(s, CompactStep::Moving { pass: 0, .. }))
        .collect();
    let want: Vec<_> = (0..=2)
        .map(|done| CompactStep::Moving {
            pass: 0,
            tables_done: done,
            tables: 2,
        })
        .collect();
    assert_eq!(first_pass, want.iter().collect::<Vec<_>>());
    // A second compaction has nothing to write or move.
    let mut steps = Vec::new();
    db.compact_with_progress(|s| steps.push(s)).unwrap();
    assert_eq!(steps, [CompactStep::Trimming]);
}
