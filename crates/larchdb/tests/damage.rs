//! Damage never turns silently into loss (docs/design/durability.md, "Damage is never silent"):
//! a flipped bit in a meta slot, a data file cut short, missing or empty beside its log, a log
//! cut short or damaged at its end. Each open either recovers every acknowledged commit or
//! fails with `Error::WouldLoseData`, changing nothing; a recovering open (`Options::recover`)
//! opens the newest intact state, reports what it gave up, and keeps copies aside. Crash and
//! restart loops keep the log's file bounded, and creating a database syncs its names.
//!
//! A process killed with kill -9 is stood for by a copy of its files (the lock file too) taken
//! while its handle is still open, the handle then abandoned: what the kernel holds is what the
//! killed process left.

mod common;

use larchdb::storage::{lock_path, log_path, CrashMode, FaultStorage, Storage};
use larchdb::testing::{copy_database, cut_file};
use larchdb::{Database, Error, Options};
use std::path::{Path, PathBuf};
use std::sync::Arc;

const PAGE: usize = 4096;
/// Bytes of a meta slot that its checksum covers (formats 5 and 6).
const META_FIELDS: usize = 184;

fn key(i: u32) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

fn value(i: u32) -> Vec<u8> {
    vec![(i % 251) as u8; 100]
}

/// Options for the logged databases here: no idle checkpoint, so that nothing changes the
/// files while a handle is copied as a killed process leaves them; 1 MiB segments, so that
/// the hundreds of opens each test makes read little.
fn logged() -> Options {
    Options::default()
        .idle_checkpoint_millis(0)
        .log_segment_bytes(1 << 20)
        .log_segments(8)
        .checkpoint_bytes(1 << 20)
}

/// `n` one-put `Immediate` commits (acknowledged, synced) into the default table.
fn commit_puts(db: &Database, from: u32, n: u32) {
    for i in from..from + n {
        db.put(&key(i), &value(i)).unwrap();
    }
}

/// The files of `db`, open at `path`, as a kill -9 leaves them, copied under `to`; the handle
/// is abandoned, never closed.
fn killed(db: Database, path: &Path, to: &Path) -> PathBuf {
    let copy = copy_database(path, to);
    common::abandon(db);
    copy
}

/// How many of the keys `0..n` the database holds with their values, checking that they are
/// a prefix (commits are never lost out of order).
fn prefix_held(db: &Database, n: u32) -> u32 {
    let r = db.begin_read().unwrap();
    let t = r.default_table().unwrap();
    let mut held = 0;
    for i in 0..n {
        if let Some(v) = t.get(&key(i)).unwrap() {
            assert_eq!(v, &value(i)[..], "key {i}");
            assert_eq!(held, i, "key {i} present after a missing one");
            held += 1;
        }
    }
    held
}

/// What opening the database at `path` (after copying it to `scratch`) gives: the prefix of
/// `0..n` held, or the error.
fn open_copy(path: &Path, scratch: &Path, options: Options, n: u32) -> Result<u32, Error> {
    let _ = std::fs::remove_dir_all(scratch);
    let copy = copy_database(path, scratch);
    let db = Database::open(&copy, options)?;
    Ok(prefix_held(&db, n))
}

fn flip(path: &Path, at: u64, bit: u8) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[at as usize] ^= 1 << bit;
    std::fs::write(path, bytes).unwrap();
}

/// Opens a copy of the database at `path` with one bit flipped at each checksummed byte of
/// each meta slot, in turn: each open must hold all of `0..n` or be refused. Returns how many
/// opened whole and how many were refused.
fn flip_every_meta_byte(path: &Path, scratch: &Path, options: &Options, n: u32) -> (u32, u32) {
    let (mut whole, mut refused) = (0, 0);
    for slot in 0..2u64 {
        for byte in 0..META_FIELDS as u64 {
            let _ = std::fs::remove_dir_all(scratch);
            let copy = copy_database(path, scratch);
            flip(&copy, slot * PAGE as u64 + byte, (byte % 8) as u8);
            match Database::open(&copy, options.clone()) {
                Ok(db) => {
                    assert_eq!(prefix_held(&db, n), n, "slot {slot} byte {byte}");
                    whole += 1;
                }
                Err(Error::WouldLoseData { .. }) => refused += 1,
                Err(e) => panic!("slot {slot} byte {byte}: {e}"),
            }
        }
    }
    (whole, refused)
}

/// A flip in every checksummed byte of each meta slot of a database whose commits are in its
/// log (killed before any checkpoint replaced the older slot): every open either holds every
/// acknowledged commit or is refused. Before, a flip in the newest slot opened the slot
/// written at creation and cut the log: the database empty, for good.
#[test]
fn a_flipped_bit_in_either_meta_slot_beside_a_log_loses_nothing_silently() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db.larch");
    let db = Database::open(&path, logged()).unwrap();
    const N: u32 = 300;
    commit_puts(&db, 0, N);
    let crashed = killed(db, &path, &dir.path().join("crashed"));
    let scratch = dir.path().join("scratch");
    let (whole, refused) = flip_every_meta_byte(&crashed, &scratch, &logged(), N);
    eprintln!("meta flips beside a log: {whole} opened whole, {refused} refused");
    assert!(refused >= 100, "the newest slot's flips are refused");
    assert!(whole >= 100, "the older slot's flips cost nothing");

    // A refused one, recovered: the newest intact state, what was given up said, the damaged
    // meta page and the log kept aside; the next ordinary open finds nothing wrong.
    let newest = (0..2u64)
        .find(|&slot| {
            let _ = std::fs::remove_dir_all(&scratch);
            let copy = copy_database(&crashed, &scratch);
            flip(&copy, slot * PAGE as u64 + 60, 3);
            Database::open(&copy, logged()).is_err()
        })
        .unwrap();
    let _ = std::fs::remove_dir_all(&scratch);
    let copy = copy_database(&crashed, &scratch);
    let log_before = std::fs::read(log_path(&copy)).unwrap();
    flip(&copy, newest * PAGE as u64 + 60, 3);
    let db = Database::open(&copy, logged().recover(true)).unwrap();
    let recovery = db.recovery().expect("the damage is reported").clone();
    assert!(
        recovery.given_up[0]
            .damage
            .contains(&format!("meta slot {newest}")),
        "{recovery}"
    );
    let kept = recovery.kept.clone().expect("copies kept");
    assert_eq!(std::fs::read(kept.join("log")).unwrap(), log_before);
    let metas = std::fs::read(kept.join("meta-pages")).unwrap();
    assert!(metas.len() >= 2 * PAGE);
    drop(db);
    let db = Database::open(&copy, logged()).unwrap();
    assert!(db.recovery().is_none());
    db.verify().unwrap();
}

/// The same without a log (`Options::log(false)`: every commit writes its pages): a flip in
/// the newest slot is refused (the file holds that commit's pages), one in the older slot
/// opens every commit.
#[test]
fn a_flipped_bit_in_either_meta_slot_without_a_log_loses_nothing_silently() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db.larch");
    let pages = Options::default().log(false);
    let db = Database::open(&path, pages.clone()).unwrap();
    const N: u32 = 2000;
    for c in 0..4 {
        let mut w = db.begin_write().unwrap();
        let mut t = w.default_table().unwrap();
        for i in c * (N / 4)..(c + 1) * (N / 4) {
            t.put(&key(i), &value(i)).unwrap();
        }
        w.commit().unwrap();
    }
    drop(db);
    let scratch = dir.path().join("scratch");
    let (whole, refused) = flip_every_meta_byte(&path, &scratch, &pages, N);
    eprintln!("meta flips without a log: {whole} opened whole, {refused} refused");
    assert!(
        refused >= 100 && whole >= 100,
        "{refused} refused, {whole} whole"
    );
}

/// A data file deleted, or cut to nothing, beside a log that holds commits: refused, nothing
/// created or cut; a recovering open starts a new database and keeps the old log aside.
#[test]
fn a_missing_or_empty_data_file_beside_its_log_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db.larch");
    let db = Database::open(&path, logged()).unwrap();
    commit_puts(&db, 0, 200);
    let crashed = killed(db, &path, &dir.path().join("crashed"));
    for empty in [false, true] {
        let scratch = dir.path().join(format!("scratch-{empty}"));
        let copy = copy_database(&crashed, &scratch);
        if empty {
            std::fs::write(&copy, b"").unwrap();
        } else {
            std::fs::remove_file(&copy).unwrap();
        }
        let log_before = std::fs::read(log_path(&copy)).unwrap();
        match Database::open(&copy, logged()) {
            Err(Error::WouldLoseData { damage, .. }) => {
                assert!(damage.contains("data file is empty"), "{damage}")
            }
            other => panic!("empty {empty}: {:?}", other.map(|_| ())),
        }
        assert_eq!(copy.exists(), empty, "a refused open creates no data file");
        assert_eq!(std::fs::read(log_path(&copy)).unwrap(), log_before);
        let db = Database::open(&copy, logged().recover(true)).unwrap();
        let recovery = db.recovery().expect("reported");
        assert_eq!(recovery.given_up.len(), 1, "{recovery}");
        assert!(recovery.given_up[0]
            .lost
            .contains("every commit in the log"));
        let kept = recovery.kept.clone().unwrap();
        assert_eq!(std::fs::read(kept.join("log")).unwrap(), log_before);
        assert_eq!(prefix_held(&db, 200), 0);
    }
}

/// A data file cut short at every 1% of its length and at every 4 KiB of its last 10%, without
/// a log (four commits of 5,000 records, closed): it opens with every record, or is refused.
/// Before, a cut of the last 1%, 5% or 10% opened the previous commit, `verify` clean.
#[test]
fn a_data_file_cut_short_is_refused_never_rolled_back() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db.larch");
    let pages = Options::default().log(false);
    let db = Database::open(&path, pages.clone()).unwrap();
    const N: u32 = 20_000;
    for c in 0..4 {
        let mut w = db.begin_write().unwrap();
        let mut t = w.default_table().unwrap();
        for i in c * 5000..(c + 1) * 5000 {
            t.put(&key(i), &value(i)).unwrap();
        }
        w.commit().unwrap();
    }
    drop(db);
    let len = std::fs::metadata(&path).unwrap().len();
    let pages_in = len / PAGE as u64;
    let mut cuts: Vec<u64> = (0..100).map(|p| pages_in * p / 100 * PAGE as u64).collect();
    cuts.extend((pages_in * 9 / 10..pages_in).map(|p| p * PAGE as u64));
    let scratch = dir.path().join("scratch");
    let (mut whole, mut refused, mut other) = (0, 0, 0);
    for &cut in &cuts {
        let _ = std::fs::remove_dir_all(&scratch);
        let copy = copy_database(&path, &scratch);
        cut_file(&copy, cut);
        match Database::open(&copy, pages.clone().create(cut > 0)) {
            Ok(db) if cut == 0 => drop(db), // an empty file is made a new database
            Ok(db) => {
                assert_eq!(prefix_held(&db, N), N, "cut at {cut} of {len}");
                whole += 1;
            }
            Err(Error::WouldLoseData { .. }) => refused += 1,
            Err(Error::Corrupted { .. } | Error::NotADatabase) => other += 1,
            Err(e) => panic!("cut at {cut}: {e}"),
        }
    }
    eprintln!("data file cuts: {whole} whole, {refused} refused, {other} corrupted");
    assert!(refused > 10, "{refused} refused");
}

/// The log of a killed process cut at every 1% of its length and at every 4 KiB boundary
/// around the end of its records, and its last records damaged: every open holds every
/// acknowledged commit or is refused; each cut or damage that takes a synced record is
/// refused (the lock file says how far the log was synced). Before, any cut past the log's
/// header lost its tail without a word.
#[test]
fn a_log_cut_short_or_damaged_at_its_end_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db.larch");
    let db = Database::open(&path, logged()).unwrap();
    const N: u32 = 400;
    commit_puts(&db, 0, N);
    let crashed = killed(db, &path, &dir.path().join("crashed"));
    // Where the records end in the file: found by a clean reopen of a copy, which reads them.
    let log_len = std::fs::metadata(log_path(&crashed)).unwrap().len();
    let records_end = {
        let bytes = std::fs::read(log_path(&crashed)).unwrap();
        (0..bytes.len()).rev().find(|&i| bytes[i] != 0).unwrap() as u64 + 1
    };
    let mut cuts: Vec<u64> = (1..100).map(|p| log_len * p / 100).collect();
    let first = records_end.saturating_sub(64 << 10) / 4096 * 4096;
    cuts.extend((first..log_len).step_by(4096));
    let scratch = dir.path().join("scratch");
    let (mut whole, mut refused) = (0, 0);
    for &cut in &cuts {
        let _ = std::fs::remove_dir_all(&scratch);
        let copy = copy_database(&crashed, &scratch);
        cut_file(&log_path(&copy), cut);
        match Database::open(&copy, logged()) {
            Ok(db) => {
                assert_eq!(prefix_held(&db, N), N, "cut at {cut} of {log_len}");
                assert!(cut >= records_end, "cut at {cut} took records and opened");
                whole += 1;
            }
            Err(Error::WouldLoseData { .. }) => {
                assert!(
                    cut < records_end,
                    "cut at {cut} took nothing, and was refused"
                );
                refused += 1;
            }
            Err(e) => panic!("cut at {cut}: {e}"),
        }
    }
    eprintln!("log cuts: {whole} whole, {refused} refused");
    assert!(whole > 0 && refused > 0);

    // The last 4 KiB of records zeroed, and one bit of the last record flipped.
    for damage in ["zeroed", "flipped"] {
        let _ = std::fs::remove_dir_all(&scratch);
        let copy = copy_database(&crashed, &scratch);
        let log = log_path(&copy);
        let mut bytes = std::fs::read(&log).unwrap();
        let end = records_end as usize;
        match damage {
            "zeroed" => bytes[end - 4096..end].fill(0),
            _ => bytes[end - 20] ^= 0x10,
        }
        std::fs::write(&log, bytes).unwrap();
        match Database::open(&copy, logged()) {
            Err(Error::WouldLoseData { damage: d, .. }) => {
                assert!(d.contains("lock file says"), "{damage}: {d}")
            }
            other => panic!("{damage}: {:?}", other.map(|_| ())),
        }
        // Recovered: the commits before the damage, the rest given up and said.
        let db = Database::open(&copy, logged().recover(true)).unwrap();
        let held = prefix_held(&db, N);
        assert!(held < N && held > N / 2, "{damage}: {held} held");
        let recovery = db.recovery().unwrap();
        assert!(
            recovery.given_up[0].lost.contains("after commit"),
            "{recovery}"
        );
        drop(db);
        let db = Database::open(&copy, logged()).unwrap();
        assert_eq!(prefix_held(&db, N), held, "{damage}: reopened as recovered");
    }

    // What cannot be told: the log cut at a record boundary with the lock file gone (deleted,
    // or the files copied without it). Nothing outside the log says how far it went; it opens
    // at the cut (docs/design/durability.md, "What cannot be told").
    let _ = std::fs::remove_dir_all(&scratch);
    let copy = copy_database(&crashed, &scratch);
    std::fs::remove_file(lock_path(&copy)).unwrap();
    let cut = records_end - 4096;
    let held = {
        cut_file(&log_path(&copy), cut);
        open_copy(&copy, &dir.path().join("scratch-2"), logged(), N).unwrap()
    };
    assert!(held < N, "the cut took records");
}

/// 40 crash-and-restart cycles of a little writing each, and 15 clean closes without
/// compaction: the log's file stays within a few chunks of what it holds. Before, each reopen
/// padded the log to the end of its segment, and the next record went into the next one: a
/// 32 MiB segment a cycle, 1 GiB by the 33rd.
#[test]
fn crash_restart_cycles_keep_the_log_bounded() {
    let options = Options::default().idle_checkpoint_millis(0);
    let (mut data, mut log) = (FaultStorage::new(), FaultStorage::new());
    let mut next = 0u32;
    let mut largest = 0;
    for cycle in 0..40 {
        let db = common::open_with_log(&data, &log, options.clone()).unwrap();
        assert_eq!(prefix_held(&db, next + 50), next, "cycle {cycle}");
        commit_puts(&db, next, 50);
        next += 50;
        common::abandon(db);
        data = data.crash(CrashMode::ProcessOnly);
        log = log.crash(CrashMode::ProcessOnly);
        let len = log.len().unwrap();
        assert!(len <= 4 << 20, "cycle {cycle}: a log file of {len} bytes");
        largest = largest.max(len);
    }
    let clean = options.clone().compact_on_close(false);
    for cycle in 0..15 {
        let db = common::open_with_log(&data, &log, clean.clone()).unwrap();
        commit_puts(&db, next, 50);
        next += 50;
        drop(db);
        let len = log.len().unwrap();
        assert!(
            len <= 4 << 20,
            "clean close {cycle}: a log file of {len} bytes"
        );
        largest = largest.max(len);
    }
    eprintln!("crash and restart cycles: the log file at most {largest} bytes");
    let db = common::open_with_log(&data, &log, options).unwrap();
    assert_eq!(prefix_held(&db, next), next);
}

/// Creating a database and its log makes their names durable (the directory synced): a power
/// loss right after the first commit keeps both. The fault storage loses a storage whose name
/// was never synced.
#[test]
fn creating_the_files_syncs_their_names() {
    let (data, log) = (FaultStorage::new(), FaultStorage::new());
    let db = common::open_with_log(&data, &log, Options::default()).unwrap();
    db.put(b"k", b"v").unwrap();
    assert!(data.name_synced() && log.name_synced());
    common::abandon(db);
    let (data, log) = (
        data.crash(CrashMode::DropUnsynced),
        log.crash(CrashMode::DropUnsynced),
    );
    let db = common::open_with_log(&data, &log, Options::default()).unwrap();
    assert_eq!(db.get(b"k").unwrap(), Some(b"v".to_vec()));
    // The page path too.
    let pages = FaultStorage::new();
    let db = Database::open_storage(Arc::new(pages.clone()), Options::default()).unwrap();
    db.put(b"k", b"v").unwrap();
    let after = pages.crash(CrashMode::DropUnsynced);
    common::abandon(db);
    let db = Database::open_storage(Arc::new(after), Options::default()).unwrap();
    assert_eq!(db.get(b"k").unwrap(), Some(b"v".to_vec()));
}

/// A commit that changes what the log does not hold (a table created) writes its pages and a
/// durable meta page, and leaves a mark in the log; its meta page then damaged, beside later
/// commits in the log: the replay from the older meta page ends at the mark (the later records
/// were made on its pages), and the open refuses instead of replaying them onto a tree without
/// it; a recovering open opens the commit before it.
#[test]
fn a_damaged_meta_page_of_a_commit_that_wrote_only_pages_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db.larch");
    let db = Database::open(&path, logged()).unwrap();
    commit_puts(&db, 0, 20);
    let mut w = db.begin_write().unwrap();
    w.create_table("t").unwrap();
    w.commit().unwrap();
    let created = db.begin_read().unwrap().id();
    commit_puts(&db, 20, 20);
    let crashed = killed(db, &path, &dir.path().join("crashed"));
    // The slot holding the table's commit: the newest meta page.
    let bytes = std::fs::read(&crashed).unwrap();
    let txn = |slot: usize| u64::from_le_bytes(bytes[slot * PAGE + 16..][..8].try_into().unwrap());
    let slot = (0..2)
        .find(|&s| txn(s) == created)
        .expect("the table's commit is a meta page");
    let scratch = dir.path().join("scratch");
    let copy = copy_database(&crashed, &scratch);
    flip(&copy, (slot * PAGE + 70) as u64, 1);
    match Database::open(&copy, logged()) {
        Err(Error::WouldLoseData { .. }) => {}
        other => panic!("{:?}", other.map(|db| prefix_held(&db, 40))),
    }
    let db = Database::open(&copy, logged().recover(true)).unwrap();
    assert_eq!(prefix_held(&db, 40), 20);
    assert!(db.begin_read().unwrap().table("t").is_err());
}
