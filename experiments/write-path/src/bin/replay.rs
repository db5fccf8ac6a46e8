//! What replaying the log costs at open, per record and per GiB of log, with the log in the
//! page cache (a process crash) and read from the disk (a power loss: the machine restarts
//! with an empty page cache, and open replays from the last durable checkpoint, up to the
//! log's whole room).
//!
//! A child process loads `BASE` random records (16-byte keys, 100-byte values) in large
//! commits, makes a durable checkpoint, then makes `N` one-put commits of random keys through
//! the log (`Durability::None`) with checkpoints held back (`checkpoint_bytes` as large as
//! `SEGMENTS` segments of 32 MiB allow), so that every one of them is in the log after the
//! checkpoint, and exits without closing anything. The replay a reopen does is then exactly
//! what a power loss calls for after `N` commits since the last durable checkpoint. The
//! parent copies the crashed files for each open it times (an open replays and may write),
//! times a warm open (the copy is in the page cache) and a cold one (`sync` and
//! `/proc/sys/vm/drop_caches` first; needs root), each in a process of its own that exits
//! without closing, and a clean open (the copy checkpointed and closed).
//!
//!   cargo run --release --manifest-path experiments/write-path/Cargo.toml --bin replay [BASE] [N] [SEGMENTS]
//!
//! `SEGMENTS` 0 keeps the default bounds, with checkpoints as they come: the warm open is then
//! the open after a process crash (the log from the last checkpoint), not after a power loss.
//!
//! `replay child DIR BASE N SEGMENTS` makes the crashed database alone; `replay open DIR`
//! times one open of it; `replay close DIR` opens, checkpoints and closes it.

use larchdb::{Database, Options};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use larch_write_path_experiments::load_then_crash;

const SEGMENT_BYTES: u64 = 32 << 20;

fn child(dir: &Path, base: u64, n: u64, segments: u64) {
    // SEGMENTS 0: the default bounds, checkpoints not held back; the open then replays what a
    // process crash leaves (the commits since the last checkpoint, not the last durable one).
    let options = match segments {
        0 => Options::default(),
        _ => Options::default()
            .log(true)
            .log_segments(segments)
            .checkpoint_bytes((segments - 1) * SEGMENT_BYTES),
    };
    let db = Database::open(dir.join("db"), options).unwrap();
    load_then_crash(&db, base, n);
}

/// Opens the database in `dir` and exits without closing it; prints the open's time.
fn open(dir: &Path) {
    let t = Instant::now();
    let db = Database::open(dir.join("db"), Options::default().log(true)).unwrap();
    let ms = t.elapsed().as_secs_f64() * 1e3;
    {
        let r = db.begin_read().unwrap();
        // Not `len`: after a replay of blind writes it looks each of their keys up in the
        // tree (about 14 s after 5.5M commits at 10M records).
        assert!(r.table("t").unwrap().first().unwrap().is_some());
    }
    println!("{ms:.1}");
    std::process::exit(0);
}

fn run(args: &[&str]) -> String {
    let out = Command::new(std::env::current_exe().unwrap())
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

fn copy(from: &Path, to: &Path) {
    let _ = std::fs::remove_dir_all(to);
    let status = Command::new("cp")
        .args(["-a", from.to_str().unwrap(), to.to_str().unwrap()])
        .status()
        .unwrap();
    assert!(status.success());
    // The copy's writeback would otherwise compete with the open timed next.
    let _ = Command::new("sync").status();
}

fn drop_caches() -> bool {
    let _ = Command::new("sync").status();
    std::fs::write("/proc/sys/vm/drop_caches", "3").is_ok()
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    match args.first() {
        Some(&"child") => {
            let n = |i: usize| args[i].parse().unwrap();
            return child(Path::new(args[1]), n(2), n(3), n(4));
        }
        Some(&"open") => return open(Path::new(args[1])),
        Some(&"close") => {
            let db = Database::open(Path::new(args[1]).join("db"), Options::default().log(true))
                .unwrap();
            db.checkpoint().unwrap();
            drop(db);
            return;
        }
        _ => {}
    }
    let base: u64 = args.first().map_or(1_000_000, |a| a.parse().expect("BASE"));
    let n: u64 = args.get(1).map_or(1_000_000, |a| a.parse().expect("N"));
    let segments: u64 = args.get(2).map_or(160, |a| a.parse().expect("SEGMENTS"));
    let top = tempfile::tempdir_in(std::env::var("TMPDIR").unwrap_or("/tmp".into())).unwrap();
    let crashed: PathBuf = top.path().join("crashed");
    std::fs::create_dir(&crashed).unwrap();
    let t = Instant::now();
    run(&[
        "child",
        crashed.to_str().unwrap(),
        &base.to_string(),
        &n.to_string(),
        &segments.to_string(),
    ]);
    let log_bytes = std::fs::metadata(crashed.join("db-log")).map_or(0, |m| m.len());
    let data_bytes = std::fs::metadata(crashed.join("db")).map_or(0, |m| m.len());
    println!(
        "child: {base} records loaded, a durable checkpoint, {n} one-put commits, exit without \
         closing ({:.1} s); data file {} MiB, log file {} MiB",
        t.elapsed().as_secs_f64(),
        data_bytes >> 20,
        log_bytes >> 20
    );
    let trial: PathBuf = top.path().join("trial");
    let dir = trial.to_str().unwrap();
    for round in 0..2 {
        copy(&crashed, &trial);
        let warm: f64 = run(&["open", dir]).parse().unwrap();
        copy(&crashed, &trial);
        let cold = if drop_caches() {
            format!("{:.1} ms", run(&["open", dir]).parse::<f64>().unwrap())
        } else {
            "not measured (drop_caches needs root)".into()
        };
        copy(&crashed, &trial);
        run(&["close", dir]);
        let clean: f64 = run(&["open", dir]).parse().unwrap();
        println!(
            "round {round}: open after the crash, warm {warm:.1} ms, cold {cold}; after a clean \
             close {clean:.1} ms; replay {:.3} us a record (warm - clean)",
            (warm - clean) * 1e3 / n as f64
        );
    }
}
