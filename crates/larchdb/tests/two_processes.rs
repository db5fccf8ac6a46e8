//! Two processes on one database file, with real processes (this test binary re-executed as
//! the child, as in crash_kill.rs): while one process holds a write transaction open, a second
//! writer process opens the database, `try_begin_write` is `WriteBusy`, and `begin_write`
//! waits; once the holder is killed with SIGKILL, even in the middle of its write transaction,
//! the waiting writer goes on at once and finds every commit the holder acknowledged and
//! nothing of the transaction it was killed in. Two processes that write in turns see each
//! other's every commit.
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
/// Increments each of the processes writing in turns makes.
const TURNS: u64 = 200;

/// Pages only for the holder test: it is about the lock. The turns test runs both ways.
fn options() -> Options {
    Options::default().log(false)
}

fn key(round: u32, n: u32) -> Vec<u8> {
    format!("r{round:02}-c{n:04}").into_bytes()
}

/// The children. `hold R`: open for writing, make `HOLDER_COMMITS` commits of round R, start
/// one more transaction, write to it, report "ready", and wait to be killed. `wait R`: open
/// for writing ("opened"), find `try_begin_write` busy ("busy"), then wait in `begin_write`,
/// check that every acknowledged commit of round R is there and nothing of the holder's last
/// transaction, and commit ("committed"). `turns NAME LOG`: increment a shared counter
/// `TURNS` times, one write transaction each, and report "done".
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
    } else if let Some(round) = mode.strip_prefix("wait ") {
        let round: u32 = round.parse().unwrap();
        let db = match Database::open(path, options()) {
            Ok(db) => db,
            Err(e) => {
                println!("\nerror {e}");
                return;
            }
        };
        println!("\nopened");
        match db.try_begin_write() {
            Err(Error::WriteBusy) => println!("busy"),
            Ok(_) => println!("error try_begin_write began"),
            Err(e) => println!("error {e}"),
        }
        let mut w = db.begin_write().unwrap();
        {
            let t = w.table(TABLE).unwrap();
            for n in 0..HOLDER_COMMITS {
                assert_eq!(t.get(&key(round, n)).unwrap(), Some(&b"acked"[..]));
            }
            assert_eq!(t.get(&key(round, HOLDER_COMMITS)).unwrap(), None);
        }
        mark(w, &format!("waiter-{round}"));
        println!("committed");
    } else if let Some(args) = mode.strip_prefix("turns ") {
        let (name, log) = args.split_once(' ').unwrap();
        let db = Database::open(path, options().log(log == "log")).unwrap();
        println!("\nopened");
        for i in 0..TURNS {
            increment(&db, &format!("{name}-{i:04}"));
        }
        println!("done");
    }
}

/// One write transaction that increments the shared counter and records, under `name`, the
/// count it saw.
fn increment(db: &Database, name: &str) {
    let mut w = db.begin_write().unwrap();
    w.ensure_table(TABLE).unwrap();
    let mut t = w.table(TABLE).unwrap();
    let count = t
        .get(b"count")
        .unwrap()
        .map_or(0, |v| u64::from_be_bytes(v[..].try_into().unwrap()));
    t.put(b"count", &(count + 1).to_be_bytes()).unwrap();
    t.put(name.as_bytes(), &count.to_be_bytes()).unwrap();
    w.commit().unwrap();
}

/// Puts `name` in `w` and commits it: the mark of a writer that had its turn.
fn mark(mut w: larchdb::WriteTxn<'_>, name: &str) {
    w.table(TABLE).unwrap().put(name.as_bytes(), b"1").unwrap();
    w.commit().unwrap();
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

/// The child's next report line (libtest's own lines skipped); `None` once it exits.
fn report(lines: &mut Lines<BufReader<ChildStdout>>) -> Option<String> {
    lines.map_while(|l| l.ok()).find(|l| {
        matches!(
            l.split(' ').next(),
            Some("ready" | "opened" | "busy" | "committed" | "done" | "error")
        )
    })
}

#[test]
fn a_second_writer_process_waits_for_the_file_and_a_killed_holder_frees_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("two.larch");
    for round in 0..ROUNDS {
        let (mut holder, mut holder_lines) = spawn(&path, &format!("hold {round}"));
        assert_eq!(report(&mut holder_lines).as_deref(), Some("ready"));

        // Another process that wants to write opens the database, finds the writer busy...
        let (mut waiter, mut waiter_lines) = spawn(&path, &format!("wait {round}"));
        assert_eq!(report(&mut waiter_lines).as_deref(), Some("opened"));
        assert_eq!(report(&mut waiter_lines).as_deref(), Some("busy"));
        // ...and so does this process (one writing handle in it: a second is refused).
        let db = Database::open(&path, options()).unwrap();
        assert!(matches!(db.try_begin_write(), Err(Error::WriteBusy)));
        assert!(matches!(
            Database::open(&path, options()),
            Err(Error::DatabaseLocked)
        ));
        // The waiter waits while the holder's transaction lives.
        std::thread::sleep(Duration::from_millis(200));
        assert!(waiter.try_wait().unwrap().is_none(), "round {round}");

        // Killed in the middle of a write transaction: its lock goes with it, and the waiter
        // goes on at once.
        holder.kill().unwrap(); // SIGKILL
        holder.wait().unwrap();
        let started = Instant::now();
        assert_eq!(report(&mut waiter_lines).as_deref(), Some("committed"));
        assert!(started.elapsed() < Duration::from_secs(5), "round {round}");
        assert!(waiter.wait().unwrap().success());

        // This process's handle takes the file in turn and sees both.
        let mut w = db.begin_write().unwrap();
        {
            let t = w.table(TABLE).unwrap();
            assert!(t
                .get(format!("waiter-{round}").as_bytes())
                .unwrap()
                .is_some());
            assert!(t.get(&key(round, 0)).unwrap().is_some());
            assert_eq!(t.get(&key(round, HOLDER_COMMITS)).unwrap(), None);
        }
        mark(w, &format!("parent-{round}"));
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
        assert_eq!(
            t.len().unwrap(),
            u64::from((round + 1) * (HOLDER_COMMITS + 2))
        );
    }
}

/// Two processes, and a handle of this one, increment one counter in turns, each in its own
/// write transaction that reads it first: a transaction that started before the other
/// process's last commit would lose an increment. Through the log and without it.
#[test]
fn processes_writing_in_turns_see_each_others_commits() {
    for log in ["log", "pages"] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("turns.larch");
        Database::open(&path, options().log(log == "log")).unwrap();
        let mut children: Vec<_> = ["a", "b"]
            .iter()
            .map(|name| spawn(&path, &format!("turns {name} {log}")))
            .collect();
        for (_, lines) in children.iter_mut() {
            assert_eq!(report(lines).as_deref(), Some("opened"));
        }
        let db = Database::open(&path, options().log(log == "log")).unwrap();
        for i in 0..TURNS / 4 {
            increment(&db, &format!("p-{i:04}"));
        }
        for (mut child, mut lines) in children {
            assert_eq!(report(&mut lines).as_deref(), Some("done"), "{log}");
            assert!(child.wait().unwrap().success());
        }
        let r = db.begin_read().unwrap();
        let t = r.table(TABLE).unwrap();
        let total = 2 * TURNS + TURNS / 4;
        assert_eq!(
            t.get(b"count").unwrap(),
            Some(&total.to_be_bytes()[..]),
            "{log}"
        );
        // Each increment saw a different count: every transaction started from the newest
        // commit, whoever made it.
        let mut seen: Vec<u64> = t
            .iter()
            .map(|e| e.unwrap())
            .filter(|(k, _)| k != b"count")
            .map(|(_, v)| u64::from_be_bytes(v.try_into().unwrap()))
            .collect();
        seen.sort_unstable();
        assert_eq!(seen, (0..total).collect::<Vec<_>>(), "{log}");
        drop(r);
        assert!(db.verify().unwrap().is_clean());
    }
}
