//! Two processes on one database file, with real processes (this test binary re-executed as
//! the child, as in crash_kill.rs): while one process holds the database open for writing, a
//! second writer process gets `Error::DatabaseLocked`; once the holder is killed with SIGKILL,
//! even in the middle of a write transaction, the next open succeeds at once and finds every
//! commit the holder acknowledged and nothing of the transaction it was killed in.
//!
//! Only behaviour through the public API is checked, not the lock mechanism.

use larchdb::{Database, Error, Options};
use std::io::{BufRead, BufReader, Lines};
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

const CHILD_ENV: &str = "LARCH_TWO_PROC_CHILD";
const DB_ENV: &str = "LARCH_TWO_PROC_DB";
const TABLE: &str = "t";
/// Commits the holder makes before it stops in the middle of a transaction.
const HOLDER_COMMITS: u32 = 20;
/// Holders killed in turn, each continuing where the last one stopped.
const ROUNDS: u32 = 5;

/// Pages only: the test is about the lock, and its open after a kill is timed. Through the
/// log (the default), that open also pads the killed holder's last log segment with zeros
/// (up to a segment, 8 MiB by default, written and synced).
fn options() -> Options {
    Options::default().log(false)
}

fn key(round: u32, n: u32) -> Vec<u8> {
    format!("r{round:02}-c{n:04}").into_bytes()
}

/// The children. `hold R`: open for writing, make `HOLDER_COMMITS` commits of round R, start
/// one more transaction, write to it, report "ready", and wait to be killed. `try`: open for
/// writing and report "locked", or "opened" and then "committed" after one commit.
#[test]
fn child_entry() {
    let (Ok(mode), Ok(path)) = (std::env::var(CHILD_ENV), std::env::var(DB_ENV)) else {
        return;
    };
    let path = Path::new(&path);
    if let Some(round) = mode.strip_prefix("hold ") {
        let round: u32 = round.parse().unwrap();
        let db = Database::open(path, options()).expect("holder open");
        for n in 0..HOLDER_COMMITS {
            let mut w = db.begin_write().unwrap();
            w.ensure_table(TABLE).unwrap();
            w.table(TABLE)
                .unwrap()
                .put(&key(round, n), b"acked")
                .unwrap();
            w.commit().unwrap();
        }
        let mut w = db.begin_write().unwrap();
        {
            let mut t = w.table(TABLE).unwrap();
            for n in HOLDER_COMMITS..HOLDER_COMMITS + 500 {
                t.put(&key(round, n), &[7u8; 300]).unwrap();
            }
        }
        println!("\nready");
        loop {
            std::thread::sleep(Duration::from_secs(60));
        }
    } else if mode == "try" {
        match Database::open(path, options()) {
            Err(Error::DatabaseLocked) => println!("\nlocked"),
            Ok(db) => {
                println!("\nopened");
                let mut w = db.begin_write().unwrap();
                w.ensure_table(TABLE).unwrap();
                w.table(TABLE).unwrap().put(b"second-writer", b"1").unwrap();
                w.commit().unwrap();
                println!("committed");
            }
            Err(e) => println!("\nerror {e}"),
        }
    }
}

fn spawn(path: &Path, mode: &str) -> (Child, Lines<BufReader<ChildStdout>>) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_entry", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, mode)
        .env(DB_ENV, path)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let lines = BufReader::new(child.stdout.take().unwrap()).lines();
    (child, lines)
}

/// The child's report lines (libtest's own lines skipped), until it exits.
fn reports(lines: Lines<BufReader<ChildStdout>>) -> Vec<String> {
    lines
        .map_while(|l| l.ok())
        .filter(|l| {
            matches!(
                l.split(' ').next(),
                Some("ready" | "locked" | "opened" | "committed" | "error")
            )
        })
        .collect()
}

/// Waits for the holder's "ready".
fn wait_ready(lines: &mut Lines<BufReader<ChildStdout>>) {
    for line in lines.by_ref() {
        if line.unwrap() == "ready" {
            return;
        }
    }
    panic!("the holder exited before it was ready");
}

#[test]
fn a_second_writer_process_is_locked_out_and_a_killed_holder_leaves_no_lock() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("two.larch");
    let mut second_writer_seen = false;
    for round in 0..ROUNDS {
        let (mut holder, mut holder_lines) = spawn(&path, &format!("hold {round}"));
        wait_ready(&mut holder_lines);

        // Another process that wants to write is refused while the holder lives...
        let (mut other, other_lines) = spawn(&path, "try");
        assert_eq!(reports(other_lines), ["locked"], "round {round}");
        assert!(other.wait().unwrap().success());
        // ...and so is this process.
        assert!(
            matches!(Database::open(&path, options()), Err(Error::DatabaseLocked)),
            "round {round}"
        );

        // Killed in the middle of a write transaction: its lock goes with it.
        holder.kill().unwrap(); // SIGKILL
        holder.wait().unwrap();
        let started = Instant::now();
        let db = Database::open(&path, options())
            .unwrap_or_else(|e| panic!("round {round}: open after the kill: {e}"));
        assert!(started.elapsed() < Duration::from_secs(1));
        assert!(db.verify().unwrap().is_clean());
        let r = db.begin_read().unwrap();
        let t = r.table(TABLE).unwrap();
        // Every commit of every holder so far, nothing of the transactions they were killed in.
        for done in 0..=round {
            for n in 0..HOLDER_COMMITS {
                assert_eq!(t.get(&key(done, n)).unwrap(), Some(&b"acked"[..]));
            }
            assert_eq!(t.get(&key(done, HOLDER_COMMITS)).unwrap(), None);
        }
        let second = u64::from(second_writer_seen);
        assert_eq!(
            t.len().unwrap(),
            u64::from((round + 1) * HOLDER_COMMITS) + second
        );
        drop(r);
        drop(db);

        // With no holder, a second writer process opens and commits.
        if round == 0 {
            let (mut other, other_lines) = spawn(&path, "try");
            assert_eq!(reports(other_lines), ["opened", "committed"]);
            assert!(other.wait().unwrap().success());
            second_writer_seen = true;
            let db = Database::open(&path, options()).unwrap();
            let r = db.begin_read().unwrap();
            assert_eq!(
                r.table(TABLE).unwrap().get(b"second-writer").unwrap(),
                Some(&b"1"[..])
            );
        }
    }
}
