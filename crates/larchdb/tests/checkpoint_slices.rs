//! Checkpoints by slices (`Options::checkpoint_slices`, docs/design/footprint.md): the
//! overlays cut by key range, each slice gathering its records in an overlay of its own, and
//! each checkpoint merging one slice's (made durable) while the others go on gathering. These
//! tests drive tens of thousands of one-write commits over a tree of a few thousand leaves,
//! with a checkpoint due every few thousand records, and check against a model:
//! - the checkpoints really went by slices (`CommitStats::checkpoint_slices`);
//! - every snapshot, held by readers across checkpoints, reads as it did when it began, and
//!   the newest one reads as the model: gets, scans both ways, entry counts (blind writes
//!   counted as new, deletions of keys a checkpoint already merged, keys new to the tree);
//! - after a process crash at any point (the meta page then names the log from the oldest
//!   record a slice still holds, and replay applies records the tree already holds), the
//!   reopened database is the model; after a power loss, the model as of the last commit,
//!   every commit being durable. The same where the log keeps a room of its own
//!   (`Options::log_room_bytes`) and most slices' checkpoints are never synced.

mod common;

use larchdb::storage::{CrashMode, FaultStorage};
use larchdb::{Database, Durability, Options};
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// Keys drawn from this many.
const KEYS: u32 = 40_000;

/// Overlays cut into 4 slices (up to 8), a checkpoint due once they hold a MiB (a few
/// thousand one-put records), in a log of 8 MiB.
fn options(durability: Durability) -> Options {
    Options::default()
        .log(true)
        .log_segment_bytes(1 << 20)
        .log_segments(8)
        // The overlays merged from twice this on (1 MiB), the ring six of it.
        .checkpoint_bytes(512 << 10)
        .checkpoint_slices(4)
        .compact_on_close(false)
        .durability(durability)
        // The tests drive the slices' checkpoints themselves (the idle one below has its own).
        .idle_checkpoint_millis(0)
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:08}").into_bytes()
}

fn value(rng: &mut rand::rngs::StdRng) -> Vec<u8> {
    vec![rng.gen::<u8>(); rng.gen_range(1..160)]
}

/// The first half of the keys, in one commit, checkpointed.
fn load(db: &Database, rng: &mut rand::rngs::StdRng) -> Model {
    let mut model = Model::new();
    let mut w = db.begin_write().unwrap();
    w.create_table("t").unwrap();
    {
        let mut t = w.table("t").unwrap();
        for i in (0..KEYS).step_by(2) {
            let v = value(rng);
            t.put(&key(i), &v).unwrap();
            model.insert(key(i), v);
        }
    }
    w.commit().unwrap();
    db.checkpoint().unwrap();
    model
}

/// One commit of one write: an update, a blind set (of a key that may be new), a put of a
/// key that may be new, or a deletion.
fn commit_one(db: &Database, rng: &mut rand::rngs::StdRng, model: &mut Model) {
    let mut w = db.begin_write().unwrap();
    {
        let mut t = w.table("t").unwrap();
        let k = key(rng.gen_range(0..KEYS));
        match rng.gen_range(0..10) {
            0..=1 => {
                let had = t.delete(&k).unwrap();
                assert_eq!(had, model.remove(&k).is_some());
            }
            2..=4 => {
                let v = value(rng);
                t.set(&k, &v).unwrap();
                model.insert(k, v);
            }
            _ => {
                let v = value(rng);
                let had = t.put(&k, &v).unwrap();
                assert_eq!(had, model.insert(k, v).is_some());
            }
        }
    }
    w.commit().unwrap();
}

/// Whether the snapshot `r` holds exactly `model`: counts, both scan directions, and gets.
fn check_snapshot(r: &larchdb::ReadTxn, model: &Model, what: &str) {
    let t = r.table("t").unwrap();
    common::assert_holds(&t, model, what);
    for i in (0..KEYS).step_by(97) {
        let k = key(i);
        assert_eq!(
            t.get(&k).unwrap(),
            model.get(&k).map(|v| &v[..]),
            "{what}: get {i}"
        );
    }
}

/// Runs `commits` commits with readers held across several checkpoints.
fn run(db: &Database, rng: &mut rand::rngs::StdRng, model: &mut Model, commits: usize) {
    let mut held: Vec<(larchdb::ReadTxn, Model, usize)> = Vec::new();
    for i in 0..commits {
        commit_one(db, rng, model);
        if i % 2000 == 0 {
            held.push((db.begin_read().unwrap(), model.clone(), i));
        }
        if held.first().is_some_and(|(_, _, at)| i - at > 5000) {
            let (r, m, at) = held.remove(0);
            check_snapshot(&r, &m, &format!("reader from commit {at}, at {i}"));
        }
        if i % 1500 == 0 {
            let t = db.begin_read().unwrap();
            let n = t.table("t").unwrap().len().unwrap();
            assert_eq!(n, model.len() as u64, "count at commit {i}");
        }
    }
    for (r, m, at) in held {
        check_snapshot(&r, &m, &format!("reader from commit {at}, at the end"));
    }
}

/// Opens the database on fault storage.
fn open(data: &FaultStorage, log: &FaultStorage, durability: Durability) -> Database {
    common::open_with_log(data, log, options(durability)).unwrap()
}

/// The files as a crash of `mode` leaves them, opened with `options`: they must verify clean
/// and hold `model`.
fn crash_and_reopen(
    (data, log): (&FaultStorage, &FaultStorage),
    mode: CrashMode,
    options: Options,
    model: &Model,
    what: &str,
) -> (FaultStorage, FaultStorage, Database) {
    let (data, log) = (data.crash(mode), log.crash(mode));
    let db = common::open_with_log(&data, &log, options).unwrap();
    let report = db.verify_all().unwrap();
    assert!(report.is_clean(), "{what}: {:?}", report.problems);
    check_snapshot(&db.begin_read().unwrap(), model, what);
    (data, log, db)
}

/// `rounds` rounds of 15,000 commits, each checked and ended by a process crash: the handle
/// goes without compacting, wherever its checkpoints are (often part way through a frozen
/// overlay's slices), every other round closed (which waits for a slice being written, and
/// leaves the others), else abandoned as a crash leaves it (a slice's thread may be writing
/// when the files are taken), and reopened with `options`. Returns the checkpoints that went
/// by slices and those made durable as written.
fn crash_rounds(
    (mut data, mut log, mut db): (FaultStorage, FaultStorage, Database),
    rng: &mut rand::rngs::StdRng,
    model: &mut Model,
    rounds: usize,
    options: Options,
) -> ((FaultStorage, FaultStorage, Database), u64, u64) {
    let (mut slices, mut durable) = (0, 0);
    for round in 0..rounds {
        run(&db, rng, model, 15_000);
        check_snapshot(&db.begin_read().unwrap(), model, &format!("round {round}"));
        let stats = db.stats().unwrap().commits;
        slices += stats.checkpoint_slices;
        durable += stats.durable_checkpoints;
        if round % 2 == 0 {
            drop(db);
        } else {
            common::abandon(db);
        }
        (data, log, db) = crash_and_reopen(
            (&data, &log),
            CrashMode::ProcessOnly,
            options.clone(),
            model,
            &format!("round {round}, reopened"),
        );
    }
    ((data, log, db), slices, durable)
}

#[test]
fn slices_keep_every_snapshot_and_count_and_survive_process_crashes() {
    let (data, log) = (FaultStorage::new(), FaultStorage::new());
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let db = open(&data, &log, Durability::None);
    let mut model = load(&db, &mut rng);
    let ((data, log, db), slices, _) = crash_rounds(
        (data, log, db),
        &mut rng,
        &mut model,
        6,
        options(Durability::None),
    );
    assert!(slices >= 8, "{slices} checkpoints went by slices");
    // A checkpoint of everything (which first merges the slices left) and a close.
    db.checkpoint().unwrap();
    check_snapshot(&db.begin_read().unwrap(), &model, "after a checkpoint");
    drop(db);
    let db = open(&data, &log, Durability::None);
    check_snapshot(&db.begin_read().unwrap(), &model, "reopened at the end");
}

#[test]
fn every_durable_commit_survives_a_power_loss_part_way_through_slices() {
    let (data, log) = (FaultStorage::new(), FaultStorage::new());
    let mut rng = rand::rngs::StdRng::seed_from_u64(11);
    let db = open(&data, &log, Durability::Immediate);
    let mut model = load(&db, &mut rng);
    power_loss_rounds(
        (data, log, db),
        &mut rng,
        &mut model,
        options(Durability::Immediate),
    );
}

/// Three rounds of 12,000 durable commits, each ended by a power loss and reopened with
/// `options`: every commit is found.
fn power_loss_rounds(
    (mut data, mut log, mut db): (FaultStorage, FaultStorage, Database),
    rng: &mut rand::rngs::StdRng,
    model: &mut Model,
    options: Options,
) {
    for round in 0..3 {
        run(&db, rng, model, 12_000);
        common::abandon(db);
        (data, log, db) = crash_and_reopen(
            (&data, &log),
            CrashMode::DropUnsynced,
            options.clone(),
            model,
            &format!("round {round}, after a power loss"),
        );
    }
}

/// With a room of its own (`Options::log_room_bytes`), a slice's checkpoint is made durable
/// only when the log's room runs short (or the pages the last durable tree pins grow past a
/// quarter of the file): fewer durable checkpoints than slices merged, the same snapshots
/// and counts; a process crash replays from the last checkpoint, a power loss from the last
/// durable one, over the unsynced slices' checkpoints since, and both find the model.
#[test]
fn a_room_of_its_own_makes_durable_checkpoints_rarer_and_loses_nothing() {
    let roomy = |durability| options(durability).log_room_bytes(6 << 20);
    let (data, log) = (FaultStorage::new(), FaultStorage::new());
    let mut rng = rand::rngs::StdRng::seed_from_u64(23);
    let db = common::open_with_log(&data, &log, roomy(Durability::None)).unwrap();
    let mut model = load(&db, &mut rng);
    let ((data, log, db), slices, durable) = crash_rounds(
        (data, log, db),
        &mut rng,
        &mut model,
        4,
        roomy(Durability::None),
    );
    eprintln!("a room of its own: {durable} of {slices} slices' checkpoints made durable");
    assert!(slices >= 8, "{slices} checkpoints went by slices");
    assert!(
        durable * 2 <= slices,
        "{durable} of {slices} slices' checkpoints were made durable"
    );
    drop(db);
    let db = common::open_with_log(&data, &log, roomy(Durability::Immediate)).unwrap();
    power_loss_rounds(
        (data, log, db),
        &mut rng,
        &mut model,
        roomy(Durability::Immediate),
    );
}

/// `CommitStats::durable_checkpoints` counts the checkpoints made durable, and no more: each
/// syncs the data file at least twice (its pages, then its meta page written again as
/// durable), and with a room of its own and `Durability::None` nothing else syncs it before
/// the close; the others, left unsynced, are counted as slices only.
#[test]
fn durable_checkpoints_counts_only_checkpoints_made_durable() {
    let roomy = options(Durability::None).log_room_bytes(6 << 20);
    let (data, log) = (FaultStorage::new(), FaultStorage::new());
    let mut rng = rand::rngs::StdRng::seed_from_u64(29);
    let db = common::open_with_log(&data, &log, roomy).unwrap();
    let mut model = load(&db, &mut rng);
    let (syncs_before, before) = (data.sync_count(), db.stats().unwrap().commits);
    run(&db, &mut rng, &mut model, 60_000);
    let after = db.stats().unwrap().commits;
    // The close waits for a sync still running.
    drop(db);
    let syncs = data.sync_count() - syncs_before;
    let slices = after.checkpoint_slices - before.checkpoint_slices;
    let durable = after.durable_checkpoints - before.durable_checkpoints;
    eprintln!("{durable} of {slices} slices' checkpoints durable, {syncs} syncs of the data file");
    assert!(slices >= 8, "{slices} checkpoints went by slices");
    assert!(
        durable >= 1 && durable < slices,
        "{durable} of {slices} made durable"
    );
    assert!(
        durable * 2 <= syncs,
        "{durable} checkpoints counted durable, for {syncs} syncs of the data file"
    );
}

/// Commits that leave the entry count as it was (an update, or a key moved: one deleted and
/// another put, in one commit, often in two slices): a slice that merges one half of a move
/// changes the tree's count and not what readers count, before and after each slice.
#[test]
fn counts_hold_while_slices_merge_moves_that_keep_the_count() {
    let data = FaultStorage::new();
    let log = FaultStorage::new();
    let mut rng = rand::rngs::StdRng::seed_from_u64(5);
    let db = open(&data, &log, Durability::None);
    let mut model = load(&db, &mut rng);
    let mut held: Vec<(larchdb::ReadTxn, Model)> = Vec::new();
    for i in 0..30_000 {
        let mut w = db.begin_write().unwrap();
        {
            let mut t = w.table("t").unwrap();
            let k = key(rng.gen_range(0..KEYS));
            let v = value(&mut rng);
            if model.contains_key(&k) && rng.gen_bool(0.5) {
                assert!(t.put(&k, &v).unwrap());
                model.insert(k, v);
            } else if !model.contains_key(&k) {
                // Moved here from the first key the model has after it (or before it).
                let from = model
                    .range(k.clone()..)
                    .next()
                    .or_else(|| model.iter().next_back())
                    .map(|(f, _)| f.clone())
                    .unwrap();
                assert!(t.delete(&from).unwrap());
                model.remove(&from);
                assert!(!t.put(&k, &v).unwrap());
                model.insert(k, v);
            }
        }
        w.commit().unwrap();
        if i % 3000 == 0 {
            held.push((db.begin_read().unwrap(), model.clone()));
        }
        if i % 500 == 0 {
            let n = db.begin_read().unwrap().table("t").unwrap().len().unwrap();
            assert_eq!(n, model.len() as u64, "count at commit {i}");
        }
    }
    assert!(db.stats().unwrap().commits.checkpoint_slices >= 4);
    for (n, (r, m)) in held.iter().enumerate() {
        check_snapshot(r, m, &format!("reader {n}"));
    }
    check_snapshot(&db.begin_read().unwrap(), &model, "at the end");
    // A checkpoint of everything merges the slices one at a time first, then what is left:
    // the tree alone then reads as the model.
    let before = db.stats().unwrap().commits.checkpoint_slices;
    db.checkpoint().unwrap();
    assert!(db.stats().unwrap().commits.checkpoint_slices > before);
    check_snapshot(&db.begin_read().unwrap(), &model, "after a checkpoint");
    for (n, (r, m)) in held.iter().enumerate() {
        check_snapshot(r, m, &format!("reader {n} after a checkpoint"));
    }
    let report = db.verify().unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
    assert_eq!(report.entries, model.len() as u64);
}

/// Under a memory budget of a few MiB, checkpoints come as the budget calls for them (the
/// fullest slice each time, the writer stopped at three quarters of it): the same reads,
/// counts and reopen.
#[test]
fn slices_merge_as_a_small_memory_budget_calls_for_them() {
    let data = FaultStorage::new();
    let log = FaultStorage::new();
    let mut rng = rand::rngs::StdRng::seed_from_u64(13);
    let options = || options(Durability::None).memory_budget(4 << 20);
    let db = common::open_with_log(&data, &log, options()).unwrap();
    let mut model = load(&db, &mut rng);
    run(&db, &mut rng, &mut model, 20_000);
    let c = db.stats().unwrap().commits;
    assert!(c.checkpoint_slices >= 2, "{} slices", c.checkpoint_slices);
    check_snapshot(&db.begin_read().unwrap(), &model, "at the end");
    common::abandon(db);
    crash_and_reopen(
        (&data, &log),
        CrashMode::ProcessOnly,
        options(),
        &model,
        "reopened",
    );
}

/// Once the writer is idle, the idle checkpoint merges every slice that holds records, not
/// one: reads after a burst of writes then find the tree alone.
#[test]
fn an_idle_writer_has_every_slice_merged() {
    let data = FaultStorage::new();
    let log = FaultStorage::new();
    let mut rng = rand::rngs::StdRng::seed_from_u64(9);
    let options = options(Durability::None).idle_checkpoint_millis(20);
    let db = common::open_with_log(&data, &log, options).unwrap();
    let mut model = load(&db, &mut rng);
    // Random updates: every slice gathers some.
    for _ in 0..2_000 {
        let mut w = db.begin_write().unwrap();
        let k = key(rng.gen_range(0..KEYS));
        let v = value(&mut rng);
        w.table("t").unwrap().put(&k, &v).unwrap();
        w.commit().unwrap();
        model.insert(k, v);
    }
    let before = db.stats().unwrap().commits.checkpoint_slices;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while db.stats().unwrap().commits.checkpoint_slices < before + 4 {
        assert!(
            std::time::Instant::now() < deadline,
            "the idle checkpoint merged {} slices",
            db.stats().unwrap().commits.checkpoint_slices - before
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    check_snapshot(
        &db.begin_read().unwrap(),
        &model,
        "after the idle checkpoints",
    );
    let report = db.verify().unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
}

/// A reader that renews while slices are frozen and merged sees each commit whole: every
/// commit sets keys spread over every slice to one generation, and a renewed snapshot reads
/// the same generation in all of them. (A slice's freeze is a new shape: a reader on the
/// snapshot before it reads the frozen slice through the slices it had, which the commits
/// after the freeze no longer go to, so it must not move to them by their ids alone.)
#[test]
fn renewed_readers_see_whole_commits_while_slices_are_frozen() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let data = FaultStorage::new();
    let log = FaultStorage::new();
    let mut rng = rand::rngs::StdRng::seed_from_u64(21);
    let db = Arc::new(common::open_with_log(&data, &log, options(Durability::None)).unwrap());
    let mut model = load(&db, &mut rng);
    // One key in each eighth of the key space (in every slice, whatever the cuts), none of
    // them a key `commit_one` writes.
    let marks: Vec<Vec<u8>> = (0..8)
        .map(|i| [key(i * KEYS / 8 + 1), b"m".to_vec()].concat())
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (db, stop, marks) = (db.clone(), stop.clone(), marks.clone());
            std::thread::spawn(move || {
                let mut r = db.begin_read().unwrap();
                let mut renews = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    r.renew();
                    let t = r.table("t").unwrap();
                    let seen: Vec<Option<Vec<u8>>> = marks
                        .iter()
                        .map(|k| t.get(k).unwrap().map(|v| v.to_vec()))
                        .collect();
                    assert!(
                        seen.iter().all(|v| *v == seen[0]),
                        "snapshot {} reads a commit in part: {seen:?}",
                        r.id()
                    );
                    renews += 1;
                }
                renews
            })
        })
        .collect();
    let mut generation = 0u64;
    for i in 0..30_000u32 {
        if i % 4 == 0 {
            generation += 1;
            let v = generation.to_le_bytes();
            let mut w = db.begin_write().unwrap();
            {
                let mut t = w.table("t").unwrap();
                for k in &marks {
                    t.put(k, &v).unwrap();
                    model.insert(k.clone(), v.to_vec());
                }
            }
            w.commit().unwrap();
        } else {
            commit_one(&db, &mut rng, &mut model);
        }
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        assert!(r.join().unwrap() > 0);
    }
    let c = db.stats().unwrap().commits;
    assert!(c.checkpoint_slices >= 4, "{} slices", c.checkpoint_slices);
    check_snapshot(&db.begin_read().unwrap(), &model, "at the end");
}
