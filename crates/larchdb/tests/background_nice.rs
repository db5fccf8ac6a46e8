//! `Options::background_nice`: the handle's background threads (the checkpoint thread, the
//! idle checkpointer, the log's grower) run that many nice steps below the thread that
//! started them, and no other thread's priority changes (the nice value is set per thread:
//! a call that named the whole process would lower the application's threads too).
//!
//! One test in its own binary: it reads every thread's nice value from /proc, and another
//! test's handles, run beside it, would have background threads of their own.

#![cfg(target_os = "linux")]

use larchdb::{Database, Durability, Options};
use std::time::{Duration, Instant};

const STEPS: i64 = 5;

/// The nice value of thread `tid` of this process (field 19 of its `stat`).
fn nice_of(tid: &str) -> Option<i64> {
    nice_in(&std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?)
}

/// The nice value in a `stat` file's text.
fn nice_in(stat: &str) -> Option<i64> {
    // The name, in parentheses, may hold spaces: the fields after it start at `state` (3).
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19 - 3)?.parse().ok()
}

/// Each thread of this process: (name, nice value).
fn threads() -> Vec<(String, i64)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let tid = entry.file_name().to_string_lossy().into_owned();
        let name = std::fs::read_to_string(entry.path().join("comm")).unwrap_or_default();
        if let Some(nice) = nice_of(&tid) {
            out.push((name.trim().to_string(), nice));
        }
    }
    out
}

fn own_nice() -> i64 {
    // SAFETY: `gettid` has no preconditions.
    let tid = unsafe { libc::gettid() };
    nice_of(&tid.to_string()).unwrap()
}

#[test]
fn background_threads_run_lower_and_no_other_thread_does() {
    let dir = tempfile::tempdir().unwrap();
    let mine = own_nice();
    let main_before = std::fs::read_to_string("/proc/self/stat").unwrap();
    let expected = (mine + STEPS).min(19);
    let options = Options::default()
        .log(true)
        .durability(Durability::None)
        .log_segment_bytes(256 << 10)
        .checkpoint_bytes(64 << 10)
        .idle_checkpoint_millis(1)
        .background_nice(STEPS as u8);
    let db = Database::open(dir.path().join("db"), options).unwrap();
    // Commits until a checkpoint thread, the grower and the idle checkpointer have each been
    // seen (checkpoints are due every few hundred commits; the idle checkpointer starts with
    // the first commit through the log).
    let mut seen = std::collections::BTreeMap::<String, i64>::new();
    let wanted = ["larch-checkpoin", "larch-log-grow", "larch-idle-chec"];
    let start = Instant::now();
    let mut i = 0u64;
    while !wanted.iter().all(|w| seen.contains_key(*w)) {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "threads seen in 120 s: {seen:?}"
        );
        for _ in 0..50 {
            db.put(&(i % 5000).to_be_bytes(), &[7u8; 100]).unwrap();
            i += 1;
        }
        for (name, nice) in threads() {
            if name.starts_with("larch-") {
                if let Some(&other) = seen.get(&name) {
                    assert_eq!(other, nice, "{name}: two nice values");
                }
                seen.insert(name, nice);
            } else {
                assert_eq!(
                    nice, mine,
                    "thread {name:?} is not the engine's and was lowered"
                );
            }
        }
    }
    for w in wanted {
        assert_eq!(seen[w], expected, "{w}: {seen:?}");
    }
    assert_eq!(own_nice(), mine);
    // The process's leader (the test harness's main thread) kept its value.
    let main_now = std::fs::read_to_string("/proc/self/stat").unwrap();
    assert_eq!(nice_in(&main_now), nice_in(&main_before));
    drop(db);

    // The default leaves them at the starting thread's value.
    let db = Database::open(
        dir.path().join("plain"),
        Options::default()
            .log(true)
            .durability(Durability::None)
            .idle_checkpoint_millis(1),
    )
    .unwrap();
    let start = Instant::now();
    loop {
        db.put(b"k", b"v").unwrap();
        // Threads of the first handle that are still winding down are told apart by nice.
        let grower = threads()
            .into_iter()
            .any(|(name, nice)| name == "larch-log-grow" && nice == mine);
        if grower {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "no grower at nice {mine}: {:?}",
            threads()
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}
