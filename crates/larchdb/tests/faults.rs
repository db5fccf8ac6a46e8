//! Injected I/O failures through the storage seam: every failure is a typed error, nothing
//! acknowledged is lost, and the database is consistent after reopen.

mod common;

use larchdb::storage::{CrashMode, FaultKind, FaultStorage};
use larchdb::{Database, Durability, Error, Options};
use std::sync::Arc;

/// Dropping the handle stands for a crash of the process here: it does not compact.
fn open(s: &FaultStorage) -> Database {
    Database::open_storage(
        Arc::new(s.clone()),
        Options::default().compact_on_close(false),
    )
    .unwrap()
}

fn load(db: &Database, from: u32, to: u32, value_len: usize) -> larchdb::Result<()> {
    let mut w = db.begin_write()?;
    w.ensure_table("t")?;
    {
        let mut t = w.table("t")?;
        for i in from..to {
            t.put(&i.to_be_bytes(), &vec![i as u8; value_len])?;
        }
    }
    w.commit_with(Durability::Immediate)
}

fn count(db: &Database) -> u64 {
    db.begin_read()
        .unwrap()
        .table("t")
        .map(|t| t.len().unwrap())
        .unwrap_or(0)
}

#[test]
fn enospc_on_any_write_is_disk_full_and_loses_nothing() {
    for nth in 1..40 {
        let s = FaultStorage::new();
        let db = open(&s);
        load(&db, 0, 200, 300).unwrap();
        s.fail_after(nth, FaultKind::Enospc, false);
        match load(&db, 200, 400, 3000) {
            Ok(()) => assert_eq!(count(&db), 400),
            Err(Error::DiskFull) => {
                // The failed commit is invisible; the earlier one is intact.
                assert_eq!(count(&db), 200, "nth={nth}");
                db.verify().unwrap();
            }
            Err(Error::Poisoned) => unreachable!(),
            Err(e) => panic!("nth={nth}: unexpected {e}"),
        }
        let acknowledged = count(&db);
        // Writes resume (the fault was one-shot) unless the handle was poisoned by a failure
        // after the meta write began; either way a reopen shows every acknowledged commit.
        if load(&db, 1000, 1010, 10).is_ok() {
            assert_eq!(count(&db), acknowledged + 10);
        }
        let expect = count(&db);
        drop(db);
        let s2 = s.crash(CrashMode::DropUnsynced);
        let db = open(&s2);
        assert_eq!(count(&db), expect, "nth={nth}");
        db.verify().unwrap();
    }
}

#[test]
fn eio_on_sync_fails_stop_and_reopen_keeps_acknowledged_commits() {
    let mut saw_poison = 0;
    // Every operation of the load in turn, until the fault lands after it (each page written is
    // one: the count depends on how the engine groups its writes).
    for nth in 1..10_000 {
        let s = FaultStorage::new();
        let db = open(&s);
        load(&db, 0, 100, 100).unwrap();
        s.fail_after(nth, FaultKind::Eio, false);
        let result = load(&db, 100, 300, 2000);
        let acknowledged = if result.is_ok() { 300 } else { 100 };
        match result {
            Ok(()) => {}
            Err(Error::Io { .. }) => {
                // After a failed sync or meta write the handle refuses writes (fail-stop);
                // after a failed page write it stays usable.
                if let Err(e) = db.begin_write() {
                    assert!(matches!(e, Error::Poisoned), "nth={nth}: {e}");
                    saw_poison += 1;
                }
            }
            Err(e) => panic!("nth={nth}: unexpected {e}"),
        }
        // Reads keep working on the last good snapshot.
        assert_eq!(count(&db), acknowledged);
        drop(db);
        let db = open(&s.crash(CrashMode::DropUnsynced));
        assert_eq!(count(&db), acknowledged, "nth={nth}");
        db.verify().unwrap();
        if result.is_ok() {
            break;
        }
    }
    assert!(saw_poison > 0, "no case failed a sync");
}

#[test]
fn full_device_then_space_freed_resumes() {
    let s = FaultStorage::new();
    let db = open(&s);
    load(&db, 0, 100, 100).unwrap();
    let used = s.contents().len() as u64;
    s.set_space_limit(Some(used + 64 * 1024));
    let err = load(&db, 100, 2000, 1000).unwrap_err();
    assert!(matches!(err, Error::DiskFull), "{err}");
    assert_eq!(count(&db), 100);
    db.verify().unwrap();
    // Small commits that fit still work; a big one works once space is there.
    load(&db, 100, 110, 10).unwrap();
    s.set_space_limit(None);
    load(&db, 110, 2000, 1000).unwrap();
    assert_eq!(count(&db), 2000);
    db.verify().unwrap();
}

#[test]
fn unsynced_commits_survive_a_process_crash_but_not_a_power_loss() {
    let s = FaultStorage::new();
    let db = open(&s);
    load(&db, 0, 10, 10).unwrap();
    let mut w = db.begin_write().unwrap();
    w.table("t").unwrap().put(b"volatile", b"1").unwrap();
    w.commit_with(Durability::None).unwrap();
    drop(db);
    // Same boot: the page cache kept everything, the unsynced commit is trusted.
    let s = s.crash(CrashMode::ProcessOnly);
    let db = open(&s);
    assert_eq!(count(&db), 11);
    drop(db);
    // Power loss: back to the last durable commit, never a torn state.
    let s = s.crash(CrashMode::KeepRandom { seed: 7 });
    let db = open(&s);
    assert_eq!(count(&db), 10);
    db.verify().unwrap();
}

#[test]
fn pages_pinned_by_the_durable_commit_trigger_a_durable_commit() {
    let s = FaultStorage::new();
    let opts = Options::default().pinned_bytes_max(256 * 1024);
    let db = Database::open_storage(Arc::new(s.clone()), opts).unwrap();
    // A durable base of 100 values on overflow pages (~2 MB).
    load(&db, 0, 100, 20_000).unwrap();
    // Unsynced rewrites of those values free pages the durable commit needs: they stay
    // pinned until a commit is made durable, which happens on its own past the bound.
    for i in 0..100u32 {
        let mut w = db.begin_write().unwrap();
        w.table("t")
            .unwrap()
            .put(&i.to_be_bytes(), &[2u8; 20_000])
            .unwrap();
        w.commit_with(Durability::None).unwrap();
    }
    let pinned_peak = db.stats().unwrap().pending_pages * 4096;
    assert!(pinned_peak < 2 * 1024 * 1024, "pinned {pinned_peak} bytes");
    drop(db);
    // After a power loss: a prefix of the rewrites survived, and never a torn state.
    let db = open(&s.crash(CrashMode::DropUnsynced));
    let r = db.begin_read().unwrap();
    let t = r.table("t").unwrap();
    let rewritten: Vec<bool> = (0..100u32)
        .map(|i| t.get(&i.to_be_bytes()).unwrap().unwrap()[0] == 2)
        .collect();
    let k = rewritten.iter().take_while(|&&b| b).count();
    assert!(rewritten[k..].iter().all(|&b| !b), "not a prefix");
    // The bound is the larger of 256 KiB and a quarter of the file (2-5 MB here): at most
    // ~60 rewrites of 20 KB can be pending, so at least one automatic durable commit happened.
    assert!(k >= 40, "only {k} of 100 rewrites were made durable");
    drop(r);
    db.verify().unwrap();
}

#[test]
fn unsynced_pages_written_after_the_durable_commit_are_reused_at_once() {
    let s = FaultStorage::new();
    let db = open(&s);
    for i in 0..200u32 {
        let mut w = db.begin_write().unwrap();
        w.ensure_table("t").unwrap();
        w.table("t")
            .unwrap()
            .put(&(i % 10).to_be_bytes(), &[i as u8; 20_000])
            .unwrap();
        w.commit_with(Durability::None).unwrap();
    }
    // 200 commits rewrote 10 values of 5 pages each; without reuse the file would hold 1000
    // overflow pages.
    let st = db.stats().unwrap();
    assert!(st.page_count < 120, "page count {}", st.page_count);
    db.verify().unwrap();
}

fn log_options() -> Options {
    Options::default()
        .log(true)
        .log_segment_bytes(64 << 10)
        .log_segments(8)
        .checkpoint_bytes(3 * (64 << 10))
        .compact_on_close(false)
}

fn open_logged(data: &FaultStorage, log: &FaultStorage) -> larchdb::Result<Database> {
    common::open_with_log(data, log, log_options())
}

/// Logged commits of keys `from..to`, ten a commit, every fourth one durable, 200 bytes a
/// value: a record of about 2 KB, so the log grows its file (64 KiB at a time here) and
/// crosses checkpoints. Returns the commits acknowledged (durable or not) and the first error.
fn logged_load(db: &Database, from: u32, to: u32) -> (u32, Option<Error>) {
    let mut acked = from;
    for c in (from..to).step_by(10) {
        let r = (|| {
            let mut w = db.begin_write()?;
            {
                let mut t = w.table("t")?;
                for i in c..c + 10 {
                    t.put(&i.to_be_bytes(), &common::noise(u64::from(i), 200))?;
                }
            }
            let durable = (c / 10) % 4 == 0;
            w.commit_with(if durable {
                Durability::Immediate
            } else {
                Durability::None
            })
        })();
        if let Err(e) = r {
            return (acked, Some(e));
        }
        acked = c + 10;
    }
    (acked, None)
}

/// The keys present are exactly `0..n` for some n (commits are all or nothing, in order).
fn logged_prefix(db: &Database) -> u32 {
    let r = db.begin_read().unwrap();
    let t = r.table("t").unwrap();
    let n = t.len().unwrap() as u32;
    for i in (0..n).step_by(7).chain(n.checked_sub(1)) {
        let v = t.get(&i.to_be_bytes()).unwrap();
        assert_eq!(
            v,
            Some(&common::noise(u64::from(i), 200)[..]),
            "key {i} of {n}"
        );
    }
    assert!(t.get(&n.to_be_bytes()).unwrap().is_none());
    n
}

/// ENOSPC and EIO at every I/O operation of the log during logged commits that grow the log
/// file and cross checkpoints: each failure is a typed error; one while the log file grows
/// fails that commit alone (`DiskFull`, nothing lost, the next commit goes through); one
/// while records are written or synced stops the handle (`Poisoned`, fail-stop); every
/// acknowledged commit is there after a process crash, every durable one after a power
/// loss, and the rest is a prefix of the commits made.
#[test]
fn log_faults_at_every_operation_are_typed_and_lose_nothing_acknowledged() {
    let setup = || {
        let (data, log) = (FaultStorage::new(), FaultStorage::new());
        let db = open_logged(&data, &log).unwrap();
        let mut w = db.begin_write().unwrap();
        w.ensure_table("t").unwrap();
        w.commit().unwrap();
        (data, log, db)
    };
    let (_, clean_log, db) = setup();
    let before = clean_log.op_count();
    assert_eq!(logged_load(&db, 0, 1500).0, 1500);
    let ops = clean_log.op_count() - before;
    drop(db);
    let (mut grow_refused, mut poisoned) = (0, 0);
    for kind in [FaultKind::Enospc, FaultKind::Eio] {
        for nth in 1..=ops {
            let (data, log, db) = setup();
            log.fail_after(nth, kind, false);
            let (acked, err) = logged_load(&db, 0, 1500);
            let durable_acked = acked.checked_sub(1).map_or(0, |a| a / 40 * 40 + 10);
            match err {
                None => assert_eq!(acked, 1500),
                Some(Error::DiskFull) if kind == FaultKind::Enospc => {}
                Some(Error::Io { .. }) if kind == FaultKind::Eio => {}
                Some(e) => panic!("{kind:?} at {nth}: {e}"),
            }
            if err.is_some() {
                // The failed commit is not seen.
                assert_eq!(logged_prefix(&db), acked, "{kind:?} at {nth}");
                // Either the handle goes on (a refused growth) or it is stopped.
                match logged_load(&db, acked, acked + 10) {
                    (n, None) => {
                        assert_eq!(n, acked + 10);
                        assert_eq!(logged_prefix(&db), acked + 10);
                        grow_refused += 1;
                    }
                    (_, Some(Error::Poisoned)) => poisoned += 1,
                    (_, Some(e)) => panic!("{kind:?} at {nth}, after: {e}"),
                }
            }
            let seen = logged_prefix(&db);
            assert!(seen >= acked, "{kind:?} at {nth}: {seen} < {acked}");
            drop(db);
            // A process crash keeps what was handed to the files; a power loss what was
            // synced. Either way a prefix, with every acknowledged (durable) commit.
            let crashed = open_logged(
                &data.crash(CrashMode::ProcessOnly),
                &log.crash(CrashMode::ProcessOnly),
            )
            .unwrap_or_else(|e| panic!("{kind:?} at {nth}: reopen: {e}"));
            let n = logged_prefix(&crashed);
            assert!(n >= seen, "{kind:?} at {nth}: {n} < {seen}");
            crashed.verify().unwrap();
            drop(crashed);
            let lost = open_logged(&data.durable_copy(), &log.durable_copy())
                .unwrap_or_else(|e| panic!("{kind:?} at {nth}: reopen after power loss: {e}"));
            let n = logged_prefix(&lost);
            assert!(
                n >= durable_acked,
                "{kind:?} at {nth}: {n} < {durable_acked}"
            );
            lost.verify().unwrap();
        }
    }
    eprintln!("{ops} log operations: {grow_refused} refused growths, {poisoned} stopped");
    assert!(grow_refused > 0, "no fault hit the log file's growth");
    assert!(poisoned > 0, "no fault hit a record's write or sync");
}

/// A durable checkpoint whose data file fails from some operation on (EIO, sticky), among
/// them the sync after its meta page: that page says the commit is durable, and it sits in
/// the page cache only. The next handle in the same boot must not trust it: trusted, its log
/// went round over the records the durable commit before it needs, and after a power loss
/// the open refused the log as damaged. Each operation of the checkpoint in turn; after the
/// failure the handle is dropped, another opens (or fails to) and commits through the log
/// until it stops, then the power goes: the open keeps every durable commit acknowledged.
#[test]
fn a_meta_page_whose_sync_failed_is_not_trusted_by_the_next_open() {
    // A ring of four segments, a checkpoint every three: a handle that cannot write the
    // data file still goes round the log once. Checkpoints on the writer's thread, so that
    // the operations come in one order.
    let options = || log_options().log_segments(4).checkpoint_thread(false);
    let setup = || {
        let (data, log) = (FaultStorage::new(), FaultStorage::new());
        let db = common::open_with_log(&data, &log, options()).unwrap();
        let mut w = db.begin_write().unwrap();
        w.ensure_table("t").unwrap();
        w.commit().unwrap();
        assert_eq!(logged_load(&db, 0, 600).0, 600);
        (data, log, db)
    };
    // The last durable commit of the load: keys up to 570.
    let durable_acked = 570;
    let (data, _, db) = setup();
    let before = data.op_count();
    db.checkpoint().unwrap();
    let ops = data.op_count() - before;
    drop(db);
    let mut failed = 0;
    for nth in 1..=ops {
        let (data, log, db) = setup();
        data.fail_after(nth, FaultKind::Eio, true);
        if db.checkpoint().is_ok() {
            continue;
        }
        failed += 1;
        drop(db);
        if let Ok(db) = common::open_with_log(&data, &log, options()) {
            let _ = logged_load(&db, 600, 2000);
            drop(db);
        }
        data.clear_faults();
        let lost = common::open_with_log(&data.durable_copy(), &log.durable_copy(), options())
            .unwrap_or_else(|e| panic!("EIO from operation {nth}: reopen after power loss: {e}"));
        let n = logged_prefix(&lost);
        assert!(
            n >= durable_acked,
            "EIO from operation {nth}: {n} < {durable_acked}"
        );
        lost.verify().unwrap();
    }
    assert!(failed > 0, "no fault failed the checkpoint");
}

/// A data file that cannot grow under checkpoints (a full disk): a checkpoint that fails
/// while its pages are written leaves nothing of it behind and is written again later
/// (`checkpoint::Retry`), so the handle is not stopped. Logged commits go on while the log
/// has room; once it has none, a commit fails as a full disk, losing nothing; once space is
/// back, writes resume on the same handle, and every acknowledged commit survives a process
/// crash (every durable one a power loss).
#[test]
fn a_full_disk_under_checkpoints_is_retried_and_loses_nothing() {
    let (data, log) = (FaultStorage::new(), FaultStorage::new());
    let db = open_logged(&data, &log).unwrap();
    let mut w = db.begin_write().unwrap();
    w.ensure_table("t").unwrap();
    w.commit().unwrap();
    let (n, err) = logged_load(&db, 0, 500);
    assert!(n == 500 && err.is_none(), "{n}: {err:?}");
    db.checkpoint().unwrap();
    data.set_space_limit(Some(data.contents().len() as u64));
    let (acked, err) = logged_load(&db, 500, 20_000);
    assert!(
        matches!(err, Some(Error::DiskFull)),
        "expected a full disk, got {err:?} after {acked}"
    );
    assert!(acked > 500, "no logged commit went through");
    assert_eq!(logged_prefix(&db), acked);
    data.set_space_limit(None);
    let (n, err) = logged_load(&db, acked, acked + 2000);
    assert!(n == acked + 2000 && err.is_none(), "{n}: {err:?}");
    let total = acked + 2000;
    assert_eq!(logged_prefix(&db), total);
    db.checkpoint().unwrap();
    db.verify().unwrap();
    drop(db);
    let crashed = open_logged(
        &data.crash(CrashMode::ProcessOnly),
        &log.crash(CrashMode::ProcessOnly),
    )
    .unwrap();
    assert_eq!(logged_prefix(&crashed), total);
    crashed.verify().unwrap();
    drop(crashed);
    let lost = open_logged(&data.durable_copy(), &log.durable_copy()).unwrap();
    let durable_acked = (total - 1) / 40 * 40 + 10;
    assert!(logged_prefix(&lost) >= durable_acked);
    lost.verify().unwrap();
}
