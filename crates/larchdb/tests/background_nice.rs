//! `Options::background_nice`: the handle's background threads (the checkpoint thread, the
//! idle checkpointer, the log's grower) run that many nice steps below the application's
//! thread that started them, and no other thread's priority changes (the nice value is set
//! per thread: a call that named the whole process would lower the application's threads
//! too). A checkpoint the idle checkpointer starts, from its own lowered thread, is lowered
//! by N in all, not by N again. Write admission's `CHECKPOINT_NICE_BESIDE_READERS` and
//! `CHECKPOINT_NICE_WRITERS_CORE`: a checkpoint that starts while the handle has a read
//! transaction open runs lower (by the second where the readers leave the writer a core and
//! the machine is otherwise quiet), one without at the application's value.
//!
//! One test in its own binary: it reads every thread's nice value from /proc, and another
//! test's handles, run beside it, would have background threads of their own.

#![cfg(target_os = "linux")]

use larchdb::{
    Database, Durability, Options, CHECKPOINT_NICE_BESIDE_READERS, CHECKPOINT_NICE_WRITERS_CORE,
};
use std::time::{Duration, Instant};

const STEPS: i64 = 5;

/// The name and nice value of thread `tid` of this process, from one read of its `stat`
/// (the name and the value read from two files could straddle a new thread's renaming and
/// its lowering).
fn thread_of(tid: &str) -> Option<(String, i64)> {
    let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?;
    Some((name_in(&stat)?, nice_in(&stat)?))
}

/// The name in a `stat` file's text: field 2, in parentheses (it may hold spaces and
/// parentheses itself: it ends at the last `)`).
fn name_in(stat: &str) -> Option<String> {
    Some(stat[stat.find('(')? + 1..stat.rfind(')')?].to_string())
}

/// The nice value in a `stat` file's text: field 19.
fn nice_in(stat: &str) -> Option<i64> {
    // The fields after the name start at `state` (3).
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19 - 3)?.parse().ok()
}

/// Each thread of this process: (name, nice value).
fn threads() -> Vec<(String, i64)> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .flatten()
        .filter_map(|e| thread_of(&e.file_name().to_string_lossy()))
        .collect()
}

/// 50 one-put commits over 5,000 keys, from the `i`th on: enough log for a checkpoint every
/// few calls with the tests' small checkpoint bytes.
fn put_some(db: &Database, i: &mut u64) {
    for _ in 0..50 {
        db.put(&(*i % 5000).to_be_bytes(), &[7u8; 100]).unwrap();
        *i += 1;
    }
}

/// A handle that writes the log without syncs, checkpointing once idle for `idle_millis`.
fn logged(idle_millis: u64) -> Options {
    Options::default()
        .log(true)
        .durability(Durability::None)
        .idle_checkpoint_millis(idle_millis)
}

fn own_nice() -> i64 {
    // SAFETY: `gettid` has no preconditions.
    let tid = unsafe { libc::gettid() };
    thread_of(&tid.to_string()).unwrap().1
}

#[test]
fn background_threads_run_lower_and_no_other_thread_does() {
    let dir = tempfile::tempdir().unwrap();
    let mine = own_nice();
    let main_before = std::fs::read_to_string("/proc/self/stat").unwrap();
    let expected = (mine + STEPS).min(19);
    let options = logged(1)
        .log_segment_bytes(256 << 10)
        .checkpoint_bytes(64 << 10)
        .background_nice(STEPS as u8);
    let db = Database::open(dir.path().join("db"), options).unwrap();
    // Commits until a checkpoint thread, the grower and the idle checkpointer have each been
    // seen at the lowered value (checkpoints are due every few hundred commits; the idle
    // checkpointer starts with the first commit through the log). A new thread bears its name
    // a moment before it lowers itself, so a first sighting may be at the application's value:
    // the sampling goes on until each has been seen lowered, and a thread that never lowers
    // itself fails the test at the deadline.
    let mut seen = std::collections::BTreeMap::<String, i64>::new();
    let wanted = ["larch-checkpoin", "larch-log-grow", "larch-idle-chec"];
    let start = Instant::now();
    let mut i = 0u64;
    while !wanted.iter().all(|w| seen.get(*w) == Some(&expected)) {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "threads seen in 120 s (each wanted at {expected}): {seen:?}"
        );
        put_some(&db, &mut i);
        for (name, nice) in threads() {
            if name.starts_with("larch-") {
                // The highest value seen is the one it runs at (see above).
                let most = seen.entry(name).or_insert(nice);
                *most = (*most).max(nice);
            } else {
                assert_eq!(
                    nice, mine,
                    "thread {name:?} is not the engine's and was lowered"
                );
            }
        }
    }
    // The loop ends only once each wanted thread was seen at `expected`.
    assert_eq!(own_nice(), mine);
    // The process's leader (the test harness's main thread) kept its value.
    let main_now = std::fs::read_to_string("/proc/self/stat").unwrap();
    assert_eq!(nice_in(&main_now), nice_in(&main_before));
    drop(db);

    // A checkpoint the idle checkpointer starts, from its own lowered thread, is lowered by
    // N from the application's value, not by 2N: a load below a checkpoint's bytes, then
    // quiet, and the idle checkpoint's merge of it watched for.
    let options = logged(20).background_nice(STEPS as u8);
    let db = Database::open(dir.path().join("idle"), options).unwrap();
    let mut w = db.begin_write().unwrap();
    w.ensure_table("t").unwrap();
    w.commit().unwrap();
    for chunk in 0..100u64 {
        let mut w = db.begin_write().unwrap();
        let mut t = w.table("t").unwrap();
        for k in 0..1000u64 {
            t.put(&(k * 100 + chunk).to_be_bytes(), &[9u8; 100])
                .unwrap();
        }
        w.commit().unwrap();
    }
    // The writer is quiet from here: the next checkpoint is the idle checkpointer's, watched
    // until it has been published, and seen at least once.
    let before = db.stats().unwrap().commits.checkpoints;
    let start = Instant::now();
    let mut idle_checkpoint = None;
    while idle_checkpoint.is_none() || db.stats().unwrap().commits.checkpoints == before {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "no checkpoint thread seen"
        );
        for (name, nice) in threads() {
            if name == "larch-checkpoin" {
                idle_checkpoint = idle_checkpoint.max(Some(nice));
            }
        }
    }
    assert_eq!(idle_checkpoint, Some(expected));
    drop(db);

    // The default leaves them at the starting thread's value (the handles above joined
    // their growers when dropped). Read once the grower has had time to lower itself: a new
    // thread shows the starting thread's value until it does.
    let db = Database::open(dir.path().join("plain"), logged(1)).unwrap();
    let start = Instant::now();
    let grower = || {
        threads()
            .into_iter()
            .find(|(name, _)| name == "larch-log-grow")
            .map(|(_, nice)| nice)
    };
    while grower().is_none() {
        assert!(start.elapsed() < Duration::from_secs(120), "no grower");
        db.put(b"k", b"v").unwrap();
        std::thread::sleep(Duration::from_millis(1));
    }
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(grower(), Some(mine), "{:?}", threads());
    drop(db);

    // Beside readers (`background_nice` at 0): a checkpoint that starts while the handle has
    // no read transaction open runs at the application's value, one that starts while one is
    // open runs `CHECKPOINT_NICE_BESIDE_READERS` steps below it, or
    // `CHECKPOINT_NICE_WRITERS_CORE` where the reader leaves the writer a core (fewer readers
    // than cores), other processes are quiet and the thread could raise itself back (it does
    // where starved): which one depends on the machine and the privileges. Without
    // idle checkpoints, every checkpoint is started by the writer (this thread), between two
    // transactions.
    let lowered = [CHECKPOINT_NICE_BESIDE_READERS, CHECKPOINT_NICE_WRITERS_CORE]
        .map(|steps| (mine + i64::from(steps)).min(19));
    assert!(
        !lowered.contains(&mine),
        "the test needs a thread that can be lowered"
    );
    let options = logged(0)
        .log_segment_bytes(256 << 10)
        .checkpoint_bytes(64 << 10);
    let db = Database::open(dir.path().join("readers"), options).unwrap();
    let checkpoints = |db: &Database| db.stats().unwrap().commits.checkpoints;
    let checkpoint_nice = || {
        threads()
            .into_iter()
            .filter(|(name, _)| name == "larch-checkpoin")
            .map(|(_, nice)| nice)
            .collect::<Vec<_>>()
    };
    // No reader: several checkpoints, each sighting of their threads at the application's
    // value (a thread that is not to be lowered never shows another).
    let before = checkpoints(&db);
    let mut sightings = 0;
    let start = Instant::now();
    let mut i = 0u64;
    while sightings == 0 || checkpoints(&db) < before + 3 {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "checkpoints without readers: {sightings} sightings, {} checkpoints",
            checkpoints(&db) - before
        );
        put_some(&db, &mut i);
        for nice in checkpoint_nice() {
            assert_eq!(nice, mine, "a checkpoint without readers was lowered");
            sightings += 1;
        }
    }
    // A reader open, begun on another thread (a reader of the writer's own thread is not
    // beside it): checkpoints from here start beside it, and are seen lowered (a first
    // sighting may come before the thread lowers itself; one never lowered fails at the
    // deadline).
    let reader = std::thread::scope(|s| s.spawn(|| db.begin_read().unwrap()).join().unwrap());
    let mut seen_lowered = None;
    let start = Instant::now();
    while seen_lowered.is_none() {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "no checkpoint beside a reader seen at {lowered:?}"
        );
        put_some(&db, &mut i);
        for nice in checkpoint_nice() {
            assert!(
                nice == mine || lowered.contains(&nice),
                "a checkpoint beside a reader at {nice}, not {mine} or {lowered:?}"
            );
            if nice != mine {
                seen_lowered = Some(nice);
            }
        }
    }
    drop(reader);
    assert_eq!(own_nice(), mine);
}
