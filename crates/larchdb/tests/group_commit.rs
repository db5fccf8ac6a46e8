//! Group commit through the log: threads committing with `Durability::Immediate` at once share
//! the log's syncs (the committer lets the write lock go before it waits for the sync), each
//! commit is durable when it returns, readers never see an `Immediate` commit before it is
//! durable, and a failed sync fails its commit and every later one without ever being seen.

mod common;

use larchdb::storage::{FaultKind, FaultStorage};
use larchdb::{Database, Durability, Error, Options};
use std::sync::atomic::{AtomicBool, Ordering};

fn options() -> Options {
    Options::default()
        .log(true)
        .log_segment_bytes(256 << 10)
        .log_segments(8)
        .checkpoint_bytes(512 << 10)
}

fn open(data: &FaultStorage, log: &FaultStorage) -> larchdb::Result<Database> {
    common::open_with_log(data, log, options())
}

/// Opens and creates table "t" with a durable commit.
fn open_with_table(data: &FaultStorage, log: &FaultStorage) -> Database {
    let db = open(data, log).unwrap();
    let mut w = db.begin_write().unwrap();
    w.create_table("t").unwrap();
    w.commit().unwrap();
    db
}

/// What a power loss would keep of the two files now, opened.
fn after_power_loss(data: &FaultStorage, log: &FaultStorage) -> Database {
    // (The workloads here never reach a checkpoint, so the log's copy, taken after the data
    // file's, holds everything since the data file's last durable commit.)
    let d = data.durable_copy();
    open(&d, &log.durable_copy()).unwrap()
}

fn key(thread: usize, i: usize) -> Vec<u8> {
    format!("t{thread}-{i:04}").into_bytes()
}

#[test]
fn durable_commits_from_many_threads_share_syncs_and_are_durable_when_they_return() {
    const THREADS: usize = 8;
    const EACH: usize = 25;
    let (data, log) = (FaultStorage::new(), FaultStorage::new());
    let db = open_with_table(&data, &log);
    // A slow log device: while one committer syncs, the others queue behind it. 10 ms is
    // long beside a commit even on a loaded machine under a sanitizer (at 2 ms, a run under
    // AddressSanitizer beside other jobs made 110 syncs for 200 commits).
    log.set_sync_delay(Some(std::time::Duration::from_millis(10)));
    let syncs_before = log.sync_count();
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        let writers: Vec<_> = (0..THREADS)
            .map(|t| {
                let (db, data, log) = (&db, &data, &log);
                s.spawn(move || {
                    for i in 0..EACH {
                        let mut w = db.begin_write().unwrap();
                        w.table("t").unwrap().set(&key(t, i), b"v").unwrap();
                        w.commit_with(Durability::Immediate).unwrap();
                        // Acknowledged: a power loss from now on keeps it.
                        if i % 5 == 4 {
                            let back = after_power_loss(data, log);
                            let r = back.begin_read().unwrap();
                            let got = r.table("t").unwrap().get(&key(t, i)).unwrap();
                            assert!(got.is_some(), "acknowledged commit t{t}-{i} lost");
                        }
                    }
                })
            })
            .collect();
        // A reader: whatever it sees is durable already.
        let reader = s.spawn(|| {
            let mut checks = 0u64;
            while !done.load(Ordering::Acquire) || checks == 0 {
                checks += 1;
                let seen: Vec<Vec<u8>> = {
                    let r = db.begin_read().unwrap();
                    let t = r.table("t").unwrap();
                    (0..THREADS)
                        .filter_map(|th| {
                            (0..EACH)
                                .rev()
                                .find(|&i| t.get(&key(th, i)).unwrap().is_some())
                                .map(|i| key(th, i))
                        })
                        .collect()
                };
                let back = after_power_loss(&data, &log);
                let r = back.begin_read().unwrap();
                let t = r.table("t").unwrap();
                for k in seen {
                    assert!(
                        t.get(&k).unwrap().is_some(),
                        "a reader saw {} before it was durable",
                        String::from_utf8_lossy(&k)
                    );
                }
            }
        });
        for w in writers {
            w.join().unwrap();
        }
        done.store(true, Ordering::Release);
        reader.join().unwrap();
    });
    let commits = (THREADS * EACH) as u64;
    let syncs = log.sync_count() - syncs_before;
    assert!(
        syncs <= commits / 2,
        "{syncs} log syncs for {commits} durable commits from {THREADS} threads"
    );
    let r = db.begin_read().unwrap();
    assert_eq!(r.table("t").unwrap().len().unwrap(), commits);
    db.verify().unwrap();
}

#[test]
fn a_failed_log_sync_fails_its_commit_and_every_later_one_and_is_never_seen() {
    let (data, log) = (FaultStorage::new(), FaultStorage::new());
    let db = open_with_table(&data, &log);
    let mut w = db.begin_write().unwrap();
    w.table("t").unwrap().set(b"kept", b"1").unwrap();
    w.commit().unwrap();
    // The next log operations: the record's write, then its sync, which fails.
    log.fail_after(2, FaultKind::Eio, false);
    let mut w = db.begin_write().unwrap();
    w.table("t").unwrap().set(b"lost", b"2").unwrap();
    assert!(matches!(w.commit(), Err(Error::Io { .. })));
    let r = db.begin_read().unwrap();
    let t = r.table("t").unwrap();
    assert_eq!(t.get(b"kept").unwrap(), Some(&b"1"[..]));
    assert_eq!(
        t.get(b"lost").unwrap(),
        None,
        "a commit whose sync failed was published"
    );
    assert!(matches!(db.begin_write(), Err(Error::Poisoned)));
    assert!(matches!(db.checkpoint(), Err(Error::Poisoned)));
    drop((r, db));
    // Reopened, the handle is healthy again; the lost commit may or may not have reached the
    // disk (its write did), but the one before is there.
    log.clear_faults();
    let db = open(&data, &log).unwrap();
    let r = db.begin_read().unwrap();
    assert_eq!(r.table("t").unwrap().get(b"kept").unwrap(), Some(&b"1"[..]));
    drop(r);
    let mut w = db.begin_write().unwrap();
    w.table("t").unwrap().set(b"after", b"3").unwrap();
    w.commit().unwrap();
    let r = db.begin_read().unwrap();
    assert_eq!(
        r.table("t").unwrap().get(b"after").unwrap(),
        Some(&b"3"[..])
    );
    db.verify().unwrap();
}

/// A `None` commit made while an `Immediate` commit before it waits for the log's sync
/// publishes both only once the `Immediate` one is durable.
#[test]
fn a_none_commit_after_a_waiting_immediate_one_waits_for_its_sync() {
    let (data, log) = (FaultStorage::new(), FaultStorage::new());
    let db = open_with_table(&data, &log);
    // Long enough that the thread below finds the sync under way even on a busy machine.
    log.set_sync_delay(Some(std::time::Duration::from_millis(500)));
    std::thread::scope(|s| {
        let first = s.spawn(|| {
            let mut w = db.begin_write().unwrap();
            w.table("t").unwrap().set(b"durable", b"1").unwrap();
            w.commit_with(Durability::Immediate).unwrap();
        });
        // Wait until the first commit let the write lock go (its sync is under way).
        let mut w = loop {
            match db.try_begin_write() {
                Ok(mut w) => {
                    if w.table("t").unwrap().get(b"durable").unwrap().is_some() {
                        break w;
                    }
                }
                Err(Error::WriteBusy) => {}
                Err(e) => panic!("{e}"),
            }
            std::thread::yield_now();
        };
        assert!(
            !first.is_finished(),
            "the Immediate commit's sync was not under way"
        );
        w.table("t").unwrap().set(b"quick", b"2").unwrap();
        w.commit_with(Durability::None).unwrap();
        // Published, so the Immediate commit before it is durable.
        let back = after_power_loss(&data, &log);
        let r = back.begin_read().unwrap();
        assert!(r.table("t").unwrap().get(b"durable").unwrap().is_some());
        first.join().unwrap();
    });
    let r = db.begin_read().unwrap();
    assert_eq!(r.table("t").unwrap().len().unwrap(), 2);
}
