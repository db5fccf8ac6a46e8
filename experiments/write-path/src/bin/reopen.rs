//! How long open takes after a process crash, against a clean close: a child process loads
//! `BASE` random records (16-byte keys, 100-byte values) in large commits, then makes `N`
//! one-put commits of random keys through the log with the default bounds (`Durability::None`,
//! checkpoints as they fall due), and exits without closing anything (a process crash: the
//! page cache keeps what it wrote). The parent then opens the database, timed, reads one key,
//! closes it cleanly (`Database::checkpoint` first) and opens it again, timed. Also prints the
//! log's replay rate, so that the replay a power loss needs (from the last durable checkpoint,
//! up to the log's room) can be estimated.
//!
//!   cargo run --release --manifest-path experiments/write-path/Cargo.toml --bin reopen [BASE] [N]
//!
//! `reopen child PATH BASE N` makes the crashed database alone; `reopen open PATH` times one
//! open of it (for a profiler: copy the database first, the open replays and checkpoints it).

use larchdb::{Database, Options};
use std::path::Path;
use std::time::Instant;

use larch_write_path_experiments::load_then_crash;

fn child(path: &Path, base: u64, n: u64) {
    let db = Database::open(path, Options::default().log(true)).unwrap();
    load_then_crash(&db, base, n);
}

fn main() {
    let mut args = std::env::args().skip(1);
    let first = args.next();
    if first.as_deref() == Some("child") {
        let path = args.next().expect("path");
        let base = args.next().unwrap().parse().unwrap();
        let n = args.next().unwrap().parse().unwrap();
        child(Path::new(&path), base, n);
        return;
    }
    if first.as_deref() == Some("open") {
        let path = args.next().expect("path");
        let t = Instant::now();
        let db = Database::open(Path::new(&path), Options::default().log(true)).unwrap();
        println!("open {:.1} ms", t.elapsed().as_secs_f64() * 1e3);
        drop(db);
        return;
    }
    let base: u64 = first.map_or(1_000_000, |a| a.parse().expect("BASE"));
    let n: u64 = args.next().map_or(100_000, |a| a.parse().expect("N"));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let t = Instant::now();
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "child",
            path.to_str().unwrap(),
            &base.to_string(),
            &n.to_string(),
        ])
        .status()
        .unwrap();
    assert!(status.success());
    let log_bytes = std::fs::metadata(dir.path().join("db-log")).map_or(0, |m| m.len());
    println!(
        "child: {base} records loaded, {n} one-put commits, then exit without closing ({:.1} s); log file {} MiB",
        t.elapsed().as_secs_f64(),
        log_bytes >> 20
    );
    let t = Instant::now();
    let db = Database::open(&path, Options::default().log(true)).unwrap();
    let crashed = t.elapsed();
    {
        let r = db.begin_read().unwrap();
        let t = r.table("t").unwrap();
        assert!(t.len().unwrap() > 0);
    }
    db.checkpoint().unwrap();
    drop(db);
    let t = Instant::now();
    let db = Database::open(&path, Options::default().log(true)).unwrap();
    let clean = t.elapsed();
    drop(db);
    println!(
        "open after the crash {:.1} ms; after a clean close {:.1} ms",
        crashed.as_secs_f64() * 1e3,
        clean.as_secs_f64() * 1e3
    );
}
