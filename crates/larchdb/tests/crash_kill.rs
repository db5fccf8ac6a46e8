//! kill -9 at random points: a child process commits with `Durability::Immediate` and reports
//! each acknowledged commit; the parent SIGKILLs it at a random moment, reopens the database,
//! and checks that every acknowledged commit is there and that `verify()` is clean.
//!
//! With two writing processes (`two_writers`), both continue one commit sequence in turns
//! (each commit's number read in its own write transaction), and both are killed, one after
//! the other: the second goes on alone after the first dies, holding the file.
//!
//! 100 kill points by default; `LARCH_KILL_POINTS=1000 cargo test --release --test crash_kill`
//! is the long mode.

use larchdb::{Database, Durability, Options};
use rand::{Rng, SeedableRng};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

const CHILD_ENV: &str = "LARCH_CRASH_CHILD_DB";
/// Set to "none" or "bounded" to make the child commit with `Durability::None` or `Bounded`;
/// "batches" for `None` with every third commit a sequential batch (`SEQ`).
const DURABILITY_ENV: &str = "LARCH_CRASH_CHILD_DURABILITY";
/// Set to "1" to make the child (and the parent's reopen) commit through the write-ahead log.
const LOG_ENV: &str = "LARCH_CRASH_CHILD_LOG";
/// Set to "1" when two children write at once: each commit's number is read in its own write
/// transaction.
const TWO_ENV: &str = "LARCH_CRASH_CHILD_TWO";
/// Set to "1" to make the child keep the tree's pages in frames (`Options::frames_bytes`).
const FRAMES_ENV: &str = "LARCH_CRASH_CHILD_FRAMES";
const TABLE: &str = "data";
const LOG: &str = "commits";
/// Commits `n` with `n % 3 == 2` of the "batches" mode append `SEQ_BATCH` keys here (and put
/// their `LOG` key): 64 or more appends, a sequential batch that writes its pages and leaves
/// only a mark in the log.
const SEQ: &str = "seq";
const SEQ_BATCH: u64 = 100;

fn is_batch(n: u64) -> bool {
    n % 3 == 2
}

/// Batch commits among commits `0..=last`.
fn batches_upto(last: u64) -> u64 {
    (last + 1) / 3
}

fn commit_key(n: u64) -> Vec<u8> {
    format!("commit{n:010}").into_bytes()
}

/// The value commit `n` stores under its key: its size varies so overflow runs come and go.
fn commit_value(n: u64) -> Vec<u8> {
    let len = match n % 7 {
        0 => 6000,
        1 => 0,
        _ => (n as usize * 37) % 900,
    };
    (0..len).map(|i| (n as usize + i) as u8).collect()
}

/// The options of both processes: with a log, a small one, so that checkpoints come every few
/// hundred commits and the log's segments are reused, with room for several checkpoints (most
/// are never synced; their pages are reused while the last durable one's stay pinned).
fn options(log: bool) -> Options {
    let frames = match std::env::var(FRAMES_ENV).as_deref() {
        Ok("1") => 64 << 20,
        _ => 0,
    };
    if !log {
        return Options::default().log(false).frames_bytes(frames);
    }
    Options::default()
        .frames_bytes(frames)
        .log(true)
        .log_segment_bytes(512 << 10)
        .log_segments(6)
        .checkpoint_bytes(512 << 10)
}

/// The number after the newest commit's in `log` (0 for none).
fn next_commit(last: Option<(&[u8], &[u8])>) -> u64 {
    last.map_or(0, |(k, _)| {
        std::str::from_utf8(&k[6..])
            .unwrap()
            .parse::<u64>()
            .unwrap()
            + 1
    })
}

/// The child: continues the commit sequence found in the database, forever; with `two`,
/// beside another child doing the same.
fn child(path: &Path, durability: Durability, log: bool, batches: bool, two: bool) {
    let db = Database::open(path, options(log)).expect("child open");
    let start = {
        let r = db.begin_read().unwrap();
        match r.table(LOG) {
            Ok(t) => next_commit(t.last().unwrap()),
            Err(_) => 0,
        }
    };
    let mut rng = rand::rngs::StdRng::seed_from_u64(start);
    // Half of the time a reader holds an old snapshot, so the free set grows large and
    // commits write their freelist as deltas (the incremental freelist) as well as bases.
    let mut _held = None;
    let mut next = start;
    loop {
        let mut w = db.begin_write().unwrap();
        w.ensure_table(LOG).unwrap();
        w.ensure_table(TABLE).unwrap();
        let n = match two {
            true => next_commit(w.table(LOG).unwrap().last().unwrap()),
            false => next,
        };
        next = n + 1;
        if two {
            rng = rand::rngs::StdRng::seed_from_u64(n);
        }
        match n % 120 {
            0 => _held = Some(db.begin_read().unwrap()),
            60 => _held = None,
            _ => {}
        }
        let batch = batches && is_batch(n);
        if batch {
            w.ensure_table(SEQ).unwrap();
            let mut t = w.table(SEQ).unwrap();
            for i in 0..SEQ_BATCH {
                t.append(format!("s{n:010}{i:03}").as_bytes(), &[n as u8; 60])
                    .unwrap();
            }
        }
        w.table(LOG)
            .unwrap()
            .put(&commit_key(n), &commit_value(n))
            .unwrap();
        // A batch's commit writes nothing else: nearly all its writes are appends.
        if !batch {
            let mut t = w.table(TABLE).unwrap();
            for _ in 0..rng.gen_range(1..40) {
                let k: u32 = rng.gen_range(0..5000);
                if rng.gen_bool(0.25) {
                    t.delete(&k.to_be_bytes()).unwrap();
                } else {
                    let v = vec![n as u8; rng.gen_range(0..2500)];
                    t.put(&k.to_be_bytes(), &v).unwrap();
                }
            }
        }
        // Keep the log bounded: old commits' values shrink to nothing but the key stays.
        if n >= 50 {
            w.table(LOG).unwrap().put(&commit_key(n - 50), b"").unwrap();
        }
        w.commit_with(durability).unwrap();
        println!("ack {n}");
    }
}

#[test]
fn child_entry() {
    if let Ok(path) = std::env::var(CHILD_ENV) {
        let mode = std::env::var(DURABILITY_ENV);
        let durability = match mode.as_deref() {
            Ok("none") | Ok("batches") => Durability::None,
            Ok("bounded") => Durability::Bounded,
            _ => Durability::Immediate,
        };
        let log = std::env::var(LOG_ENV).as_deref() == Ok("1");
        child(
            Path::new(&path),
            durability,
            log,
            mode.as_deref() == Ok("batches"),
            std::env::var(TWO_ENV).as_deref() == Ok("1"),
        );
    }
}

fn kill_points() -> usize {
    std::env::var("LARCH_KILL_POINTS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(100)
}

#[test]
fn kill_nine_loses_no_acknowledged_commit() {
    sweep(kill_points(), "immediate", false);
}

/// Unsynced commits survive a process crash: the kernel's page cache keeps them, and the meta
/// page's boot id tells the opener it can trust them.
#[test]
fn kill_nine_keeps_unsynced_commits_of_the_same_boot() {
    sweep(kill_points() / 2, "none", false);
}

/// The same through the write-ahead log: acknowledged commits are in the log (synced, or in
/// the page cache through its mapping), replayed at every reopen, across checkpoints.
#[test]
fn kill_nine_with_a_log_loses_no_acknowledged_commit() {
    sweep(kill_points(), "immediate", true);
}

#[test]
fn kill_nine_with_a_log_keeps_unsynced_commits() {
    sweep(kill_points() / 2, "none", true);
}

/// Sequential batches that leave only a mark in the log, every third commit, between
/// `None` commits through it: a process crash anywhere, a batch's mark written and its meta
/// page not yet included, keeps every acknowledged commit, and each batch whole or not at all.
#[test]
fn kill_nine_with_a_log_keeps_sequential_batches() {
    sweep(kill_points() / 2, "batches", true);
}

/// `Durability::Bounded`: written like `None`, so a process crash keeps them whatever the
/// child's flusher thread was doing when it was killed; with and without the log.
#[test]
fn kill_nine_keeps_bounded_commits() {
    sweep(kill_points() / 4, "bounded", false);
    sweep(kill_points() / 4, "bounded", true);
}

/// Two writing processes in turns, killed one after the other: every commit either
/// acknowledged is there, through the log and without it.
#[test]
fn kill_nine_with_two_writers_loses_no_acknowledged_commit() {
    sweep_with(kill_points() / 4, "immediate", false, 2);
    sweep_with(kill_points() / 4, "immediate", true, 2);
}

/// The same with `Durability::None` through the log: a holder killed with unsynced commits
/// leaves them to the other, which replays them when it takes the file.
#[test]
fn kill_nine_with_two_writers_keeps_unsynced_commits() {
    sweep_with(kill_points() / 4, "none", true, 2);
}

/// Children that keep the tree's pages in frames (`Options::frames_bytes`), written to the
/// file with `pwrite` before each meta page: page commits, synced and not, through the log
/// and without it, and two writers handing the file over (each takes it back with frames
/// of its own, empty).
#[test]
fn kill_nine_with_frames_loses_no_acknowledged_commit() {
    sweep_children(kill_points() / 4, "immediate", false, 1, true);
    sweep_children(kill_points() / 4, "none", false, 1, true);
    sweep_children(kill_points() / 4, "none", true, 1, true);
    sweep_children(kill_points() / 4, "immediate", false, 2, true);
}

fn sweep(points: usize, durability: &str, log: bool) {
    sweep_with(points, durability, log, 1)
}

fn sweep_with(points: usize, durability: &str, log: bool, writers: usize) {
    sweep_children(points, durability, log, writers, false)
}

/// `points` rounds of `writers` children, killed one after the other at random moments; with
/// `frames`, the children keep the tree's pages in frames.
fn sweep_children(points: usize, durability: &str, log: bool, writers: usize, frames: bool) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("crash.larch");
    let exe = std::env::current_exe().unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x1a7c);
    let mut acked_max: Option<u64> = None;
    let mut found_max: Option<u64> = None;
    let mut total_acks = 0u64;
    // Rounds in which every child acknowledged commits: the file changed hands.
    let mut shared_rounds = 0;
    for point in 0..points {
        let children: Vec<_> = (0..writers)
            .map(|_| {
                let mut child = Command::new(&exe)
                    .args(["--exact", "child_entry", "--nocapture", "--test-threads=1"])
                    .env(CHILD_ENV, &path)
                    .env(DURABILITY_ENV, durability)
                    .env(LOG_ENV, if log { "1" } else { "0" })
                    .env(TWO_ENV, if writers > 1 { "1" } else { "0" })
                    .env(FRAMES_ENV, if frames { "1" } else { "0" })
                    .stdout(Stdio::piped())
                    .stderr(Stdio::null())
                    .spawn()
                    .unwrap();
                let stdout = child.stdout.take().unwrap();
                let reader = std::thread::spawn(move || {
                    let mut acks = Vec::new();
                    for line in BufReader::new(stdout).lines() {
                        let Ok(line) = line else { break };
                        // libtest prints "test child_entry ... " without a newline before the
                        // test runs, so the first acknowledgement shares its line.
                        if let Some(at) = line.find("ack ") {
                            acks.push(line[at + 4..].trim().parse::<u64>().unwrap());
                        }
                    }
                    acks
                });
                (child, reader)
            })
            .collect();
        // Kill anywhere from start-up to some hundreds of commits in. Opening with a log reads
        // it back and replays it first (tens of ms in a debug build), so the window is longer.
        // With two writers, each is killed at a moment of its own: the last goes on alone.
        let window = if log { 150_000 } else { 60_000 };
        let mut acked_by = 0;
        for (mut child, reader) in children {
            std::thread::sleep(Duration::from_micros(rng.gen_range(0..window)));
            child.kill().unwrap(); // SIGKILL
            child.wait().unwrap();
            let acks = reader.join().unwrap();
            total_acks += acks.len() as u64;
            if let Some(&last) = acks.iter().max() {
                acked_max = acked_max.max(Some(last));
                acked_by += 1;
            }
        }
        if acked_by == writers {
            shared_rounds += 1;
        }

        let db = Database::open(&path, options(log)).expect("reopen after kill");
        let report = db.verify_all().unwrap();
        assert!(
            report.is_clean(),
            "kill point {point}: verify found {:?}",
            report.problems
        );
        let r = db.begin_read().unwrap();
        let Ok(log) = r.table(LOG) else {
            assert!(
                acked_max.is_none(),
                "kill point {point}: the log table vanished"
            );
            continue;
        };
        let (k, _) = log.last().unwrap().unwrap();
        let last: u64 = std::str::from_utf8(&k[6..]).unwrap().parse().unwrap();
        // Every acknowledged commit is there.
        if let Some(max) = acked_max {
            assert!(
                last >= max,
                "kill point {point}: acknowledged commit {max} lost (last is {last})"
            );
        }
        // At most one commit per child past the newest one known (acknowledged, or found
        // after the previous kill): it committed and the child died before acknowledging it.
        if let Some(known) = acked_max.max(found_max) {
            assert!(
                last <= known + writers as u64,
                "kill point {point}: commit {last} appeared after {known}"
            );
        }
        // Each commit n wrote its value and emptied commit n-50's: the newest state is exact.
        assert_eq!(
            log.len().unwrap(),
            last + 1,
            "kill point {point}: commits missing"
        );
        for n in last.saturating_sub(60)..=last {
            let v = log
                .get(&commit_key(n))
                .unwrap()
                .unwrap_or_else(|| panic!("commit {n} missing"));
            let expected = if n + 50 > last {
                commit_value(n)
            } else {
                Vec::new()
            };
            assert_eq!(
                v,
                expected.as_slice(),
                "kill point {point}: value of commit {n} (last {last})"
            );
        }
        if durability == "batches" {
            // Each batch whole, none past the last commit.
            let seq = r.table(SEQ).map_or(Ok(0), |t| t.len()).unwrap();
            assert_eq!(
                seq,
                SEQ_BATCH * batches_upto(last),
                "kill point {point}: the batches' keys (last commit {last})"
            );
        }
        found_max = Some(last);
    }
    assert!(
        total_acks > points as u64,
        "children made too little progress: {total_acks} acks"
    );
    if writers > 1 {
        assert!(
            shared_rounds > 0,
            "no round in which every writer committed"
        );
    }
    eprintln!("{durability} (log: {log}, writers: {writers}): {points} kill points ({shared_rounds} with every writer committing), {total_acks} acknowledged commits, all present, verify clean");
}
