//! Power loss at every I/O operation: a workload of 200 transactions (puts, deletes, large
//! values, several tables, durable and unsynced commits) runs on the fault-injecting storage;
//! for each k, every write or sync from the k-th on fails (the machine is dying), then the
//! "disk" keeps a random subset of the unsynced writes in random order, the last one torn. After
//! reopening, the database must equal the state after some commit, no earlier than the last
//! acknowledged durable commit, and verify() must be clean.
//!
//! CI samples k; `LARCH_POWER_LOSS_ALL=1 cargo test --release -p larchdb --test power_loss`
//! tries every k.

mod common;

use larchdb::storage::{CrashMode, FaultKind, FaultStorage};
use larchdb::{Database, Durability, Options};
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::sync::Arc;

type State = BTreeMap<(u8, Vec<u8>), Vec<u8>>;
const TABLES: [&str; 3] = ["a", "b", "c"];

/// Runs the workload until it ends or an operation fails. Returns the states after each
/// commit attempt (index 0: empty), the number of commits acknowledged, and the index of the
/// last acknowledged durable commit. With `hold_reader`, a read transaction started after the
/// first commit lives to the end: every page freed after it stays pending, so the free set
/// grows to thousands of extents and commits persist it as deltas (the incremental freelist).
fn workload(db: &Database, hold_reader: bool) -> (Vec<State>, usize, usize) {
    workload_upto(db, hold_reader, 200)
}

/// What a workload run keeps: the states after each commit attempt (index 0: empty), the
/// commits acknowledged and the last acknowledged `Immediate` one.
struct Tally {
    states: Vec<State>,
    acked: usize,
    durable: usize,
}

impl Tally {
    fn new() -> Tally {
        Tally {
            states: vec![State::new()],
            acked: 0,
            durable: 0,
        }
    }

    /// The state the next attempt starts from.
    fn last(&self) -> State {
        self.states.last().unwrap().clone()
    }

    /// Records an attempt that leaves `next` if it commits; false once one failed (the run
    /// stops there).
    fn attempt(
        &mut self,
        next: State,
        durability: Durability,
        result: larchdb::Result<()>,
    ) -> bool {
        self.states.push(next);
        if result.is_err() {
            return false;
        }
        self.acked = self.states.len() - 1;
        if durability == Durability::Immediate {
            self.durable = self.acked;
        }
        true
    }

    fn into_parts(self) -> (Vec<State>, usize, usize) {
        (self.states, self.acked, self.durable)
    }
}

/// The crash points of a sweep over `ops` operations: every one with `LARCH_POWER_LOSS_ALL`,
/// else about `samples` of them, evenly spread.
fn crash_points(ops: u64, samples: u64) -> Vec<u64> {
    if std::env::var("LARCH_POWER_LOSS_ALL").is_ok() {
        (1..=ops).collect()
    } else {
        (1..=ops).step_by((ops / samples).max(1) as usize).collect()
    }
}

/// The workload's first `txns` transactions.
fn workload_upto(db: &Database, hold_reader: bool, txns: usize) -> (Vec<State>, usize, usize) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let mut tally = Tally::new();
    let mut reader = None;
    for txn in 0..txns {
        if hold_reader && txn == 1 && reader.is_none() {
            reader = db.begin_read().ok();
        }
        if !step(db, &mut rng, txn, &mut tally) {
            break;
        }
    }
    tally.into_parts()
}

/// Transactions between two handovers of the file in `workload_in_turns`.
const TURN_TXNS: usize = 7;

/// The workload with the file changing hands every `TURN_TXNS` transactions, as between
/// writing handles in two processes (engine/owner.rs): the handle that gives it back writes a
/// durable checkpoint and closes, and the next opens it, replaying what the log holds past
/// that checkpoint (all of it, if the checkpoint failed). The handover's storage operations,
/// on the fault storage: the lock file and the processes are not part of what a power loss
/// can take. Starts on `db`; stops at the first failure, of a commit or of an open.
fn workload_in_turns(
    mut db: Database,
    data: &FaultStorage,
    log: &FaultStorage,
    options: &Options,
) -> (Vec<State>, usize, usize) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let mut tally = Tally::new();
    for txn in 0..200 {
        if txn > 0 && txn % TURN_TXNS == 0 {
            let _ = db.checkpoint();
            drop(db);
            db = match open_with(data, log, options.clone()) {
                Ok(db) => db,
                Err(_) => break,
            };
        }
        if !step(&db, &mut rng, txn, &mut tally) {
            break;
        }
    }
    tally.into_parts()
}

/// Transaction `txn` of the workload on `db`; false if it failed.
fn step(db: &Database, rng: &mut rand::rngs::StdRng, txn: usize, tally: &mut Tally) -> bool {
    {
        let mut next = tally.last();
        let durability = if rng.gen_bool(0.7) {
            Durability::Immediate
        } else {
            Durability::None
        };
        let result = (|| -> larchdb::Result<()> {
            let mut w = db.begin_write()?;
            for _ in 0..rng.gen_range(1..12) {
                let t = rng.gen_range(0..3u8);
                w.ensure_table(TABLES[t as usize])?;
                let key = format!("k{:04}", rng.gen_range(0..300)).into_bytes();
                let mut table = w.table(TABLES[t as usize])?;
                if rng.gen_bool(0.25) {
                    table.delete(&key)?;
                    next.remove(&(t, key));
                } else {
                    let len = match rng.gen_range(0..10) {
                        0 => rng.gen_range(2000..9000),
                        1 => 0,
                        _ => rng.gen_range(1..300),
                    };
                    // Every fourth transaction's values compress, the others' do not, so
                    // that the log fills fast enough for the checkpoints the sweeps count on.
                    // Few or none of its records are packed (`KIND_PACKED`): only once the
                    // log holds more than half its room, and only every 32 commits after a
                    // record that did not pack. tests/packed_commits.rs and the log's unit
                    // tests cover packed records.
                    let value: Vec<u8> = match txn % 4 {
                        0 => (0..len).map(|i| (i + txn) as u8).collect(),
                        _ => common::noise(txn as u64, len),
                    };
                    table.put(&key, &value)?;
                    next.insert((t, key), value);
                }
            }
            w.commit_with(durability)
        })();
        tally.attempt(next, durability, result)
    }
}

fn read_state(db: &Database) -> State {
    let r = db.begin_read().unwrap();
    let mut state = State::new();
    for (t, name) in TABLES.iter().enumerate() {
        if let Ok(table) = r.table(name) {
            for e in table.iter() {
                let (k, v) = e.unwrap();
                state.insert((t as u8, k.to_vec()), v.to_vec());
            }
        }
    }
    state
}

/// Checks a database reopened after a power loss: `verify_all` is clean, and it holds the
/// state after some commit from the last durable acknowledged one (`durable`) up to the one
/// that was in flight, as both the dry run (`states`) and this run (`attempted`) made it.
fn recovered_a_durable_prefix(
    db: &Database,
    states: &[State],
    attempted: &[State],
    acked: usize,
    durable: usize,
    what: &str,
) {
    let report = db.verify_all().unwrap();
    assert!(report.is_clean(), "{what}: verify: {:?}", report.problems);
    let found = read_state(db);
    let last = attempted.len() - 1;
    let matching = (durable..=last).find(|&j| states[j] == found && attempted[j] == found);
    assert!(
        matching.is_some(),
        "{what}: state matches no commit in {durable}..={last} (acked {acked})"
    );
}

#[test]
fn power_loss_at_any_io_operation_keeps_a_durable_prefix() {
    power_loss_run(false);
}

/// The same with a reader held, so that most commits write their freelist as a delta.
#[test]
fn power_loss_with_freelist_deltas_keeps_a_durable_prefix() {
    power_loss_run(true);
}

/// The same with the tree's pages in frames (`Options::frames_bytes`, on a storage that
/// allocates): every page the writer wrote in its frame is written to the file before a meta
/// page names it, and a failed write fails the commit that needed it.
#[test]
fn power_loss_with_frames_keeps_a_durable_prefix() {
    power_loss_run_on(false, true);
}

fn power_loss_run(hold_reader: bool) {
    power_loss_run_on(hold_reader, false);
}

/// The frames' share in the tests that keep pages in frames: the test's files all fit.
const FRAMES: u64 = 64 << 20;

/// A data file for the runs, one that allocates where `frames` asks for frames.
fn data_storage(frames: bool) -> FaultStorage {
    if frames {
        FaultStorage::new().allocating()
    } else {
        FaultStorage::new()
    }
}

fn power_loss_run_on(hold_reader: bool, frames: bool) {
    let options = || {
        if frames {
            Options::default().frames_bytes(FRAMES)
        } else {
            Options::default()
        }
    };
    // A dry run counts the operations.
    let probe = data_storage(frames);
    let (states, acked, _) = workload(
        &Database::open_storage(Arc::new(probe.clone()), options()).unwrap(),
        hold_reader,
    );
    assert_eq!(acked, 200);
    let ops = probe.op_count();
    let points = crash_points(ops, 60);
    let mut checked = 0;
    for &k in &points {
        let s = data_storage(frames);
        // Creating the file takes a few operations; fail only within the workload.
        let db = Database::open_storage(Arc::new(s.clone()), options()).unwrap();
        s.fail_after(k, FaultKind::Eio, true);
        let (attempted, acked, durable) = workload(&db, hold_reader);
        drop(db);
        let s = s.crash(CrashMode::KeepRandom { seed: k });
        let db = Database::open_storage(Arc::new(s), options())
            .unwrap_or_else(|e| panic!("k={k}: reopen failed: {e}"));
        recovered_a_durable_prefix(&db, &states, &attempted, acked, durable, &format!("k={k}"));
        checked += 1;
    }
    assert!(checked >= points.len());
    eprintln!(
        "power loss (frames {frames}): {checked} crash points over {ops} I/O operations, all \
         recovered to a durable prefix"
    );
}

/// The log's options for the power-loss runs: small segments and checkpoints, so that the
/// workload's 200 commits cross several checkpoints (each made durable later, on a thread of
/// its own) and the log wraps around; checkpoints as far apart as the log allows, so that
/// appends reach the segments before the last checkpoint while it is still settling (the log
/// there must be kept until it is durable).
///
/// With `rare_durable`, the log has room for several checkpoints, so most are never synced
/// (only one whose successor would not fit in the log is made durable): their pages are freed
/// by the next checkpoint and reused by the one after while the last durable checkpoint's
/// stay pinned, and a power loss returns to that one and replays more of the log.
fn log_options(rare_durable: bool) -> Options {
    let (segments, checkpoint) = if rare_durable {
        (8, 64 << 10)
    } else {
        (4, 3 * (64 << 10))
    };
    Options::default()
        .log(true)
        .log_segment_bytes(64 << 10)
        .log_segments(segments)
        .checkpoint_bytes(checkpoint)
        // The runs count the workload's syncs and operations up to the handle's drop; a
        // compaction at close would add its own, as many as the free space it finds (power
        // loss during a compaction: tests/compact.rs).
        .compact_on_close(false)
}

/// Transactions of the workload run to compare the data file's syncs with rare and with
/// every durable checkpoint.
const COMPARED_TXNS: usize = 1000;

/// The data file's syncs are slow (checkpoints are written and then synced on a thread of
/// their own, while logged commits go on), the log's are not.
const DATA_SYNC: std::time::Duration = std::time::Duration::from_millis(10);

fn open_with_log(
    data: &FaultStorage,
    log: &FaultStorage,
    rare_durable: bool,
) -> larchdb::Result<Database> {
    open_with(data, log, log_options(rare_durable))
}

/// `open_with_log` with `options`.
fn open_with(
    data: &FaultStorage,
    log: &FaultStorage,
    options: Options,
) -> larchdb::Result<Database> {
    data.set_sync_delay(Some(DATA_SYNC));
    common::open_with_log(data, log, options)
}

/// A power loss after the `txns`-th step of a test: the handle `db` is gone without its
/// destructor, both files keep a random subset of their unsynced writes (seeded by `txns`),
/// and `reopen` opens them again: the database verifies clean and holds `expected`.
fn power_loss_keeps(
    db: Database,
    data: &FaultStorage,
    log: &FaultStorage,
    txns: usize,
    expected: &State,
    reopen: impl FnOnce(&FaultStorage, &FaultStorage) -> larchdb::Result<Database>,
) {
    common::abandon(db);
    let (data, log) = (
        data.crash(CrashMode::KeepRandom { seed: txns as u64 }),
        log.crash(CrashMode::KeepRandom {
            seed: !(txns as u64),
        }),
    );
    let db = reopen(&data, &log)
        .unwrap_or_else(|e| panic!("after {txns}: reopen after the power loss: {e}"));
    let report = db.verify_all().unwrap();
    assert!(
        report.is_clean(),
        "after {txns}: verify: {:?}",
        report.problems
    );
    assert!(
        read_state(&db) == *expected,
        "after {txns}: the state after the power loss"
    );
}

/// Power loss at every I/O operation of a workload that commits through the log: for each k,
/// every operation from the k-th on fails on the data file (the log stays healthy) or on the
/// log (the data file stays healthy), then both keep a random subset of their unsynced writes, the last torn. After
/// reopening, the database equals the state after some commit no earlier than the last
/// acknowledged durable one; a checkpoint written but not yet synced when the power went
/// returns to the one before it, and the log still holds everything after that one.
#[test]
fn power_loss_with_a_log_keeps_a_durable_prefix() {
    power_loss_with_a_log(false);
}

/// The same with checkpoints that are mostly never synced (`log_options(true)`).
#[test]
fn power_loss_with_rare_durable_checkpoints_keeps_a_durable_prefix() {
    power_loss_with_a_log(true);
}

/// The same with checkpoints by slices (`Options::checkpoint_slices`): a power loss part way
/// through a frozen overlay's slices returns to a durable slice, whose meta page names the log
/// from the overlay's first record; replay applies records the tree already holds.
#[test]
fn power_loss_with_checkpoints_by_slices_keeps_a_durable_prefix() {
    power_loss_sweep(false, 4, 0);
}

/// The same with slices in a log that keeps a room of its own (`Options::log_room_bytes`):
/// a slice's checkpoint is made durable only as the room runs short, so a power loss returns
/// to an older durable slice and replays the log over the unsynced ones' pages.
#[test]
fn power_loss_with_slices_in_a_room_of_their_own_keeps_a_durable_prefix() {
    power_loss_sweep(true, 4, 7 * (64 << 10));
}

/// The same with slices and the tree's pages in frames (`Options::frames_bytes`, on a data
/// file that allocates): the checkpoints' pages are written from the frames, and a merge's
/// spills copied into them.
#[test]
fn power_loss_with_a_log_and_frames_keeps_a_durable_prefix() {
    power_loss_sweep_on(false, 4, 0, true);
}

fn power_loss_with_a_log(rare_durable: bool) {
    power_loss_sweep(rare_durable, 0, 0);
}

fn power_loss_sweep(rare_durable: bool, slices: u32, room: u64) {
    power_loss_sweep_on(rare_durable, slices, room, false);
}

fn power_loss_sweep_on(rare_durable: bool, slices: u32, room: u64, frames: bool) {
    let options = || {
        let options = log_options(rare_durable)
            .checkpoint_slices(slices)
            .log_room_bytes(room);
        if frames {
            options.frames_bytes(FRAMES)
        } else {
            options
        }
    };
    let (data, log) = (data_storage(frames), FaultStorage::new());
    let db = open_with(&data, &log, options()).unwrap();
    let (data_start, log_start) = (data.op_count(), log.op_count());
    let (states, acked, _) = workload(&db, false);
    let sliced = db.stats().unwrap().commits.checkpoint_slices;
    drop(db);
    assert_eq!(acked, 200);
    if slices > 1 {
        assert!(sliced >= 2, "{sliced} checkpoints by slices");
    }
    if rare_durable && room == 0 {
        // Checkpoints that were never synced: a longer run of the workload with every
        // checkpoint made durable syncs the data file more often. (Over the 200 commits
        // swept below, the tables' creation and the first commit's syncs, the same in both,
        // outnumber the checkpoints', and when checkpoints come depends on the checkpoint
        // thread's timing: the counts were sometimes equal, 12 and 12.)
        let syncs = |rare: bool| {
            let (d, l) = (FaultStorage::new(), FaultStorage::new());
            let db = open_with_log(&d, &l, rare).unwrap();
            let before = d.sync_count();
            workload_upto(&db, false, COMPARED_TXNS);
            drop(db);
            d.sync_count() - before
        };
        let (rare, every) = (syncs(true), syncs(false));
        assert!(
            rare < every,
            "{rare} data syncs with rare durable checkpoints, {every} with every one durable"
        );
    }
    let data_ops = data.op_count() - data_start;
    let log_ops = log.op_count() - log_start;
    assert!(
        data_ops > 20 && log_ops > 200,
        "{data_ops} data, {log_ops} log operations"
    );
    let points = |ops: u64| crash_points(ops, 40);
    let mut checked = 0;
    for (failing_log, ops) in [(false, data_ops), (true, log_ops)] {
        for k in points(ops) {
            let (data, log) = (data_storage(frames), FaultStorage::new());
            let db = open_with(&data, &log, options()).unwrap();
            let failing = if failing_log { &log } else { &data };
            failing.fail_after(k, FaultKind::Eio, true);
            let (attempted, acked, durable) = workload(&db, false);
            drop(db);
            let what = format!("{} op {k}", if failing_log { "log" } else { "data" });
            let data = data.crash(CrashMode::KeepRandom { seed: k });
            let log = log.crash(CrashMode::KeepRandom { seed: k ^ 0x5eed });
            let db = open_with(&data, &log, options())
                .unwrap_or_else(|e| panic!("{what}: reopen failed: {e}"));
            recovered_a_durable_prefix(&db, &states, &attempted, acked, durable, &what);
            checked += 1;
        }
    }
    eprintln!(
        "power loss with a log ({slices} slices, room {room}, frames {frames}): {checked} \
         crash points over {data_ops} data and {log_ops} log operations"
    );
}

/// Power loss at every I/O operation while the file changes hands every few transactions
/// (`workload_in_turns`), through the log: after the reopen, the state of some commit no
/// earlier than the last acknowledged durable one, whichever handle made it.
#[test]
fn power_loss_with_the_file_changing_hands_keeps_a_durable_prefix() {
    let options = log_options(false);
    let (data, log) = (FaultStorage::new(), FaultStorage::new());
    let db = open_with(&data, &log, options.clone()).unwrap();
    let (data_start, log_start) = (data.op_count(), log.op_count());
    let (states, acked, _) = workload_in_turns(db, &data, &log, &options);
    assert_eq!(acked, 200);
    let data_ops = data.op_count() - data_start;
    let log_ops = log.op_count() - log_start;
    let mut checked = 0;
    for (failing_log, ops) in [(false, data_ops), (true, log_ops)] {
        for k in crash_points(ops, 30) {
            let (data, log) = (FaultStorage::new(), FaultStorage::new());
            let db = open_with(&data, &log, options.clone()).unwrap();
            let failing = if failing_log { &log } else { &data };
            failing.fail_after(k, FaultKind::Eio, true);
            let (attempted, acked, durable) = workload_in_turns(db, &data, &log, &options);
            let what = format!(
                "in turns, {} op {k}",
                if failing_log { "log" } else { "data" }
            );
            let data = data.crash(CrashMode::KeepRandom { seed: k });
            let log = log.crash(CrashMode::KeepRandom { seed: k ^ 0x5eed });
            let db = open_with(&data, &log, options.clone())
                .unwrap_or_else(|e| panic!("{what}: reopen failed: {e}"));
            recovered_a_durable_prefix(&db, &states, &attempted, acked, durable, &what);
            checked += 1;
        }
    }
    eprintln!(
        "power loss with the file changing hands: {checked} crash points over {data_ops} data \
         and {log_ops} log operations"
    );
}

/// A process crash after every few transactions of the logged workload (with checkpoints
/// mostly never synced, so that the newest one is often unsynced when the process dies), a
/// reopen in the same boot, 20 more durable commits, then a power loss: the reopen syncs the
/// data file at most once, and not at all for an unsynced newest checkpoint whose log names
/// no run (the checkpoint settles later, the log is kept from the durable one); it syncs to
/// write a durable newest meta page again (its own sync may have failed), or for runs a
/// record read back names (the crashed process may have left them in the page cache). What
/// the power loss leaves is exactly the reopened state plus the 20 commits (the last of them
/// durable makes every one before it durable).
#[test]
fn a_power_loss_after_reopening_from_a_crash_keeps_everything_durable() {
    let step = if std::env::var("LARCH_POWER_LOSS_ALL").is_ok() {
        1
    } else {
        5
    };
    let mut unsynced = 0;
    for txns in (1..=200).step_by(step) {
        let (data, log) = (FaultStorage::new(), FaultStorage::new());
        let db = open_with_log(&data, &log, true).unwrap();
        let (_, acked, _) = workload_upto(&db, false, txns);
        assert_eq!(acked, txns);
        // The process dies: no destructor runs, the page cache keeps every write.
        common::abandon(db);
        let (data, log) = (
            data.crash(CrashMode::ProcessOnly),
            log.crash(CrashMode::ProcessOnly),
        );
        let syncs = data.sync_count();
        let db = open_with_log(&data, &log, true)
            .unwrap_or_else(|e| panic!("after {txns}: reopen after the crash: {e}"));
        let synced = data.sync_count() - syncs;
        assert!(
            synced <= 1,
            "after {txns}: the open synced the data file {synced} times"
        );
        unsynced += usize::from(synced == 0);
        let mut expected = read_state(&db);
        for i in 0..20u32 {
            let mut w = db.begin_write().unwrap();
            w.ensure_table("a").unwrap();
            let key = format!("z{i:02}").into_bytes();
            let value = vec![i as u8; 50 + i as usize * 40];
            w.table("a").unwrap().put(&key, &value).unwrap();
            w.commit_with(Durability::Immediate).unwrap();
            expected.insert((0, key), value);
        }
        power_loss_keeps(db, &data, &log, txns, &expected, |d, l| {
            open_with_log(d, l, true)
        });
    }
    assert!(unsynced > 0, "every reopen synced the data file");
}

/// A power loss that keeps some of the log's unsynced writes and not earlier ones (commits
/// that never waited for a sync, spanning three segments), then a reopen, more commits and a
/// second crash: the second reopen holds exactly what the first one did plus the commits made
/// after it. The commits the first power loss took away never come back, though their records
/// may lie intact in the segments after the log's end, whose headers name the very positions
/// the reopened log reaches again (`Log::close_tail`). Fixed-size records, so that new records
/// end where stale ones begin.
#[test]
fn commits_lost_in_a_power_loss_never_come_back_after_later_ones() {
    let options = || {
        Options::default()
            .log(true)
            .log_segment_bytes(64 << 10)
            .log_segments(8)
            .checkpoint_bytes(7 * (64 << 10))
            .idle_checkpoint_millis(0)
            .compact_on_close(false)
    };
    let put = |db: &Database, i: u32, durability: Durability| {
        let mut w = db.begin_write().unwrap();
        w.table("a")
            .unwrap()
            .put(&i.to_be_bytes(), &[i as u8; 100])
            .unwrap();
        w.commit_with(durability).unwrap();
    };
    let mut came_back = Vec::new();
    let mut lost_some = 0;
    for seed in 0..40u64 {
        let (data, log) = (FaultStorage::new(), FaultStorage::new());
        let db = common::open_with_log(&data, &log, options()).unwrap();
        common::create_table(&db, "a");
        put(&db, 0, Durability::Immediate);
        for i in 1..1500 {
            put(&db, i, Durability::None);
        }
        common::abandon(db);
        let (data, log) = (
            data.crash(CrashMode::DropUnsynced),
            log.crash(CrashMode::KeepRandom { seed }),
        );
        let db = common::open_with_log(&data, &log, options()).unwrap();
        let mut expected = read_state(&db);
        if expected.len() < 1500 {
            lost_some += 1;
        }
        for i in 0..60 {
            let i = 100_000 + i;
            put(&db, i, Durability::None);
            expected.insert((0, i.to_be_bytes().to_vec()), vec![i as u8; 100]);
        }
        put(&db, 200_000, Durability::Immediate);
        expected.insert(
            (0, 200_000u32.to_be_bytes().to_vec()),
            vec![200_000u32 as u8; 100],
        );
        common::abandon(db);
        let (data, log) = (
            data.crash(CrashMode::DropUnsynced),
            log.crash(CrashMode::DropUnsynced),
        );
        let db = common::open_with_log(&data, &log, options()).unwrap();
        if read_state(&db) != expected {
            came_back.push(seed);
        }
    }
    assert!(lost_some > 0, "no power loss lost a commit");
    assert!(
        came_back.is_empty(),
        "lost commits came back (seeds {came_back:?})"
    );
}

/// The sequential-batch workload: table "a" created durably, then 150 transactions of
/// sequential batches (64 to 160 appends past the last key, `Durability::None`: they write
/// their pages and put only a mark in the log), and a few random puts with `None`,
/// `Bounded` or `Immediate`. Returns the states after each commit attempt, the commits
/// acknowledged and the last acknowledged `Immediate` one, as `workload` does.
fn batch_workload(db: &Database) -> (Vec<State>, usize, usize) {
    batch_workload_upto(db, 150)
}

/// The sequential-batch workload's first `txns` transactions after the table's creation.
fn batch_workload_upto(db: &Database, txns: usize) -> (Vec<State>, usize, usize) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(11);
    let mut tally = Tally::new();
    let mut next_key = 0u32;
    let created = (|| -> larchdb::Result<()> {
        let mut w = db.begin_write()?;
        w.ensure_table("a")?;
        w.commit_with(Durability::Immediate)
    })();
    if !tally.attempt(State::new(), Durability::Immediate, created) {
        return tally.into_parts();
    }
    for txn in 0..txns {
        let mut next = tally.last();
        let pick = rng.gen_range(0..10);
        let durability = match pick {
            0..=5 => Durability::None,
            6 | 7 => Durability::Immediate,
            _ => Durability::Bounded,
        };
        let result = (|| -> larchdb::Result<()> {
            let mut w = db.begin_write()?;
            let mut table = w.table("a")?;
            if pick < 4 {
                for _ in 0..rng.gen_range(64..160) {
                    next_key += 1;
                    let key = format!("s{next_key:08}").into_bytes();
                    let value: Vec<u8> = (0..rng.gen_range(20..200))
                        .map(|i| (i + txn) as u8)
                        .collect();
                    table.append(&key, &value)?;
                    next.insert((0, key), value);
                }
            } else {
                for _ in 0..rng.gen_range(1..4) {
                    let key = format!("r{:04}", rng.gen_range(0..200)).into_bytes();
                    let value: Vec<u8> = (0..rng.gen_range(1..300))
                        .map(|i| (i * 3 + txn) as u8)
                        .collect();
                    table.put(&key, &value)?;
                    next.insert((0, key), value);
                }
            }
            w.commit_with(durability)
        })();
        if !tally.attempt(next, durability, result) {
            break;
        }
    }
    tally.into_parts()
}

/// Power loss at I/O operations of the sequential-batch workload (`batch_workload`): batches
/// that leave only a mark in the log, between commits that must be durable. Every power
/// loss returns to a durable prefix: the `Immediate` commits after a mark made its pages
/// durable first (`commit::settle_marks`), and an open whose tree is older than a mark ends
/// the log there.
#[test]
fn power_loss_with_sequential_batches_keeps_a_durable_prefix() {
    let options = || log_options(true).idle_checkpoint_millis(0);
    let (data, log) = (FaultStorage::new(), FaultStorage::new());
    let db = common::open_with_log(&data, &log, options()).unwrap();
    let (data_start, log_start) = (data.op_count(), log.op_count());
    let (states, acked, _) = batch_workload(&db);
    assert_eq!(acked, 151);
    let c = db.stats().unwrap().commits;
    assert!(
        c.marked_commits > 20 && c.marks_settled > 5,
        "marks: {} made, {} settled",
        c.marked_commits,
        c.marks_settled
    );
    drop(db);
    let data_ops = data.op_count() - data_start;
    let log_ops = log.op_count() - log_start;
    let points = |ops: u64| crash_points(ops, 60);
    let mut checked = 0;
    for (failing_log, ops) in [(false, data_ops), (true, log_ops)] {
        for k in points(ops) {
            let (data, log) = (FaultStorage::new(), FaultStorage::new());
            let db = common::open_with_log(&data, &log, options()).unwrap();
            let failing = if failing_log { &log } else { &data };
            failing.fail_after(k, FaultKind::Eio, true);
            let (attempted, acked, durable) = batch_workload(&db);
            drop(db);
            let what = format!("{} op {k}", if failing_log { "log" } else { "data" });
            let data = data.crash(CrashMode::KeepRandom { seed: k });
            let log = log.crash(CrashMode::KeepRandom { seed: k ^ 0x5eed });
            // A read-only handle first (it reads the log as the writer's open does, ending
            // at a mark newer than its tree), then the writer: the same state.
            let ro = common::open_with_log(&data, &log, options().read_only(true))
                .unwrap_or_else(|e| panic!("{what}: read-only open failed: {e}"));
            let seen = read_state(&ro);
            drop(ro);
            let db = common::open_with_log(&data, &log, options())
                .unwrap_or_else(|e| panic!("{what}: reopen failed: {e}"));
            recovered_a_durable_prefix(&db, &states, &attempted, acked, durable, &what);
            assert!(
                read_state(&db) == seen,
                "{what}: the read-only handle read another state"
            );
            checked += 1;
        }
    }
    eprintln!(
        "power loss with sequential batches: {checked} crash points over {data_ops} data and {log_ops} log operations"
    );
}

/// A process crash at points of the sequential-batch workload, a reopen in the same boot
/// (which may start from a batch's meta page, not synced: the log before it, which a power
/// loss replays, may hold its mark), 20 `Immediate` commits, then a power loss: exactly the
/// reopened state plus the 20 commits comes back. The reopened handle does not read the log
/// to know whether there is a mark: its first commit that must be durable makes the newest
/// commit durable first.
#[test]
fn a_power_loss_after_reopening_from_a_crash_amid_sequential_batches_keeps_everything_durable() {
    let options = || log_options(true).idle_checkpoint_millis(0);
    let step = if std::env::var("LARCH_POWER_LOSS_ALL").is_ok() {
        1
    } else {
        7
    };
    let mut unsynced_opens = 0;
    for txns in (1..=150).step_by(step) {
        let (data, log) = (FaultStorage::new(), FaultStorage::new());
        let db = common::open_with_log(&data, &log, options()).unwrap();
        batch_workload_upto(&db, txns);
        common::abandon(db);
        let (data, log) = (
            data.crash(CrashMode::ProcessOnly),
            log.crash(CrashMode::ProcessOnly),
        );
        let db = common::open_with_log(&data, &log, options())
            .unwrap_or_else(|e| panic!("after {txns}: reopen after the crash: {e}"));
        let mut expected = read_state(&db);
        for i in 0..20u32 {
            let mut w = db.begin_write().unwrap();
            let key = format!("z{i:02}").into_bytes();
            let value = vec![i as u8; 30 + i as usize * 10];
            w.table("a").unwrap().put(&key, &value).unwrap();
            w.commit_with(Durability::Immediate).unwrap();
            expected.insert((0, key), value);
        }
        if db.stats().unwrap().commits.marks_settled > 0 {
            unsynced_opens += 1;
        }
        power_loss_keeps(db, &data, &log, txns, &expected, |d, l| {
            common::open_with_log(d, l, options())
        });
    }
    assert!(
        unsynced_opens > 3,
        "{unsynced_opens} reopens from a commit not synced"
    );
}
