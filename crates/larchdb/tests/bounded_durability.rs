//! `Durability::Bounded`: a commit is visible at once and becomes durable without any later
//! call, within the time bound or as soon as the bytes bound is reached, and at the latest
//! when the handle closes; with and without the log.

mod common;

use larchdb::storage::FaultStorage;
use larchdb::{Database, Durability, Options};
use std::time::{Duration, Instant};

fn options(log: bool, millis: u64, bytes: u64) -> Options {
    Options::default()
        .log(log)
        .log_segment_bytes(256 << 10)
        .log_segments(8)
        .checkpoint_bytes(512 << 10)
        .bounded_millis(millis)
        .bounded_bytes(bytes)
}

fn open(data: &FaultStorage, log: &FaultStorage, o: Options) -> Database {
    common::open_with_log(data, log, o).unwrap()
}

/// The keys of table "t" a power loss now would keep.
fn durable_keys(data: &FaultStorage, log: &FaultStorage, o: &Options) -> usize {
    let db = open(&data.durable_copy(), &log.durable_copy(), o.clone());
    let r = db.begin_read().unwrap();
    let n = match r.table("t") {
        Ok(t) => t.len().unwrap(),
        Err(larchdb::Error::TableNotFound(_)) => 0,
        Err(e) => panic!("{e}"),
    };
    n as usize
}

/// Waits (up to a generous limit, not a timing assertion) until a power loss keeps `n` keys.
fn becomes_durable(data: &FaultStorage, log: &FaultStorage, o: &Options, n: usize) -> bool {
    let give_up = Instant::now() + Duration::from_secs(20);
    while Instant::now() < give_up {
        if durable_keys(data, log, o) == n {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    false
}

fn commit_keys(db: &Database, from: usize, n: usize, durability: Durability) {
    for i in from..from + n {
        let mut w = db.begin_write().unwrap();
        w.table("t")
            .unwrap()
            .set(format!("k{i:06}").as_bytes(), &[7u8; 100])
            .unwrap();
        w.commit_with(durability).unwrap();
    }
}

#[test]
fn bounded_commits_become_durable_with_no_later_call_with_and_without_the_log() {
    for log in [true, false] {
        let (data, lg) = (FaultStorage::new(), FaultStorage::new());
        let o = options(log, 20, u64::MAX);
        let db = open(&data, &lg, o.clone());
        common::create_table(&db, "t");
        commit_keys(&db, 0, 10, Durability::Bounded);
        // Visible at once.
        assert_eq!(
            db.begin_read().unwrap().table("t").unwrap().len().unwrap(),
            10
        );
        assert!(
            becomes_durable(&data, &lg, &o, 10),
            "log {log}: never durable"
        );
        // The handle keeps working; a second round too.
        commit_keys(&db, 10, 5, Durability::Bounded);
        assert!(
            becomes_durable(&data, &lg, &o, 15),
            "log {log}: second round"
        );
        db.verify().unwrap();
    }
}

#[test]
fn the_bytes_bound_syncs_before_the_time_bound() {
    let (data, lg) = (FaultStorage::new(), FaultStorage::new());
    // A time bound no test waits for (too far to be an instant); 16 KiB of records start a
    // sync.
    let o = options(true, u64::MAX, 16 << 10);
    let db = open(&data, &lg, o.clone());
    common::create_table(&db, "t");
    let syncs = lg.sync_count();
    commit_keys(&db, 0, 400, Durability::Bounded);
    // About 150 B of log a commit: the first 100 or so start a sync; later ones may wait
    // until the handle closes (the time bound is infinite). At least the first ~16 KiB of commits become durable, in few syncs.
    let give_up = Instant::now() + Duration::from_secs(20);
    while durable_keys(&data, &lg, &o) < 100 && Instant::now() < give_up {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(durable_keys(&data, &lg, &o) >= 100);
    let made = lg.sync_count() - syncs;
    assert!(
        (1..50).contains(&made),
        "{made} syncs for 400 bounded commits"
    );
    drop(db);
    // Closing makes the rest durable.
    assert_eq!(durable_keys(&data, &lg, &o), 400);
}

#[test]
fn closing_the_handle_makes_bounded_commits_durable() {
    for log in [true, false] {
        let (data, lg) = (FaultStorage::new(), FaultStorage::new());
        let o = options(log, 3_600_000, u64::MAX);
        let db = open(&data, &lg, o.clone());
        common::create_table(&db, "t");
        commit_keys(&db, 0, 3, Durability::Bounded);
        commit_keys(&db, 3, 2, Durability::None);
        drop(db);
        assert_eq!(durable_keys(&data, &lg, &o), 5, "log {log}");
    }
}
