//! Opens, reads, verifies and writes to a damaged database file: only typed errors, never a
//! panic, a hang or an out-of-bounds read. The input is a list of edits (xor or set a byte,
//! truncate) to a small valid database built once per process, or, with bit 0 of the first
//! byte, a whole file. Bit 1 opens it as a real file read through the memory map, where reads
//! check page headers but not checksums, so damaged page contents reach the node decoding;
//! otherwise on the in-memory storage, which checksums every page it loads. Bit 2 also runs a
//! write transaction on it. Bit 3 edits the write-ahead log of a database that crashed with
//! commits in it instead (the data file intact), and opens the two, which replays the log: a
//! torn tail is dropped, damage followed by valid records is `CorruptedLog`.

#![no_main]

use larchdb::storage::FaultStorage;
use larchdb::testing::small_log_options;
use larchdb::{Database, Durability, Error, Options};
use libfuzzer_sys::fuzz_target;
use std::sync::{Arc, OnceLock};

/// A valid database with branches, leaves, overflow runs, a freelist and two meta slots of
/// different commits.
fn seed() -> &'static [u8] {
    static SEED: OnceLock<Vec<u8>> = OnceLock::new();
    SEED.get_or_init(|| {
        let s = FaultStorage::new();
        let db = Database::open_storage(Arc::new(s.clone()), Options::default()).unwrap();
        for round in 0..3u32 {
            let mut w = db.begin_write().unwrap();
            w.ensure_table("t").unwrap();
            w.ensure_table("u").unwrap();
            {
                let mut t = w.table("t").unwrap();
                for i in 0..120u32 {
                    let len = if i % 40 == 0 { 6000 } else { 60 };
                    t.put(&(i * 3 + round).to_be_bytes(), &vec![i as u8; len])
                        .unwrap();
                }
                for i in 0..30u32 {
                    t.delete(&(i * 3 + round.saturating_sub(1)).to_be_bytes())
                        .unwrap();
                }
            }
            w.table("u")
                .unwrap()
                .put(b"key", &round.to_le_bytes())
                .unwrap();
            w.commit().unwrap();
        }
        drop(db);
        s.contents()
    })
}

/// The logged database's options: the model tests' small log (six segments, no compaction
/// at close, so that dropping the handle leaves the log to replay) with the smallest segments
/// (64 KiB, a short input to copy per execution), and no checkpoint before the seed's commits
/// are all in the log.
fn log_options() -> Options {
    small_log_options()
        .log_segment_bytes(64 << 10)
        .checkpoint_bytes(256 << 10)
}

/// A database that crashed (its handle dropped without a close's checkpoint) with commits in
/// its log since the last checkpoint: one-put and many-put commits, deletes, an overflow
/// value, durable and not, and a sequential batch that leaves only a mark in the log. Returns
/// the data file, the log, and the length of the log's written part (the rest is zeros).
fn seed_logged() -> &'static (Vec<u8>, Vec<u8>, usize) {
    static SEED: OnceLock<(Vec<u8>, Vec<u8>, usize)> = OnceLock::new();
    SEED.get_or_init(|| {
        let (data, log) = (FaultStorage::new(), FaultStorage::new());
        let db = Database::open_storage_with_log(
            Arc::new(data.clone()),
            Arc::new(log.clone()),
            log_options(),
        )
        .unwrap();
        for round in 0..12u32 {
            let mut w = db.begin_write().unwrap();
            w.ensure_table("t").unwrap();
            {
                let mut t = w.table("t").unwrap();
                let puts = if round % 3 == 0 { 40 } else { 1 };
                for i in 0..puts {
                    let len = if (round + i) % 17 == 0 { 6000 } else { 60 };
                    t.put(&(i * 7 + round).to_be_bytes(), &vec![round as u8; len])
                        .unwrap();
                }
                if round % 4 == 1 {
                    t.delete(&(round - 1).to_be_bytes()).unwrap();
                }
            }
            let how = if round % 5 == 4 {
                Durability::Immediate
            } else {
                Durability::None
            };
            w.commit_with(how).unwrap();
            if round == 6 {
                // 100 appends in key order: pages written, a mark in the log.
                let mut w = db.begin_write().unwrap();
                w.ensure_table("seq").unwrap();
                let mut t = w.table("seq").unwrap();
                for i in 0..100u32 {
                    t.append(&i.to_be_bytes(), &[9u8; 30]).unwrap();
                }
                drop(t);
                w.commit_with(Durability::None).unwrap();
            }
        }
        drop(db);
        let log = log.contents();
        let written = log.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
        (data.contents(), log, written)
    })
}

/// Errors a damaged file may give.
fn typed(e: &Error) -> bool {
    matches!(
        e,
        Error::Corrupted { .. }
            | Error::CorruptedLog { .. }
            | Error::NotADatabase
            | Error::UnsupportedVersion { .. }
    )
}

fn ok_or_typed<T>(r: Result<T, Error>, what: &str) -> Option<T> {
    match r {
        Ok(v) => Some(v),
        Err(e) if typed(&e) => None,
        Err(e) => panic!("{what}: untyped error {e:?}"),
    }
}

/// `seed` with the input's edits, each at a position below `reach` (or the whole file from the
/// input).
fn file_bytes(data: &[u8], seed: &[u8], reach: usize) -> Vec<u8> {
    let mode = data.first().copied().unwrap_or(0);
    if mode & 1 != 0 {
        return data[1..].to_vec();
    }
    let mut bytes = seed.to_vec();
    for edit in data[1.min(data.len())..].chunks_exact(6) {
        if bytes.is_empty() {
            break;
        }
        let at = u32::from_le_bytes(edit[..4].try_into().unwrap()) as usize
            % bytes.len().min(reach.max(1));
        match edit[4] % 4 {
            0 | 1 => bytes[at] ^= edit[5],
            2 => bytes[at] = edit[5],
            _ => bytes.truncate(at),
        }
    }
    bytes
}

/// Whether `e` is the debug build's check of a dirty node before it is sealed, failing on a
/// node copied from a damaged page. Reads through the memory map do not verify checksums, so
/// there a key made out of order on disk reaches a write; the check refuses the commit with
/// `Internal` (it cannot tell the damage from an engine bug), and a release build, which has
/// no such check, keeps the damage visible through the copy's derived checksum
/// (docs/design/durability.md, "Checksums: when they are verified").
fn sealing_check(e: &Error, mapped: bool) -> bool {
    mapped
        && cfg!(debug_assertions)
        && matches!(e, Error::Internal(why) if why.contains("fails its check before sealing"))
}

fn exercise(db: &Database, write: bool, mapped: bool) {
    ok_or_typed(db.stats(), "stats");
    let _ = ok_or_typed(db.verify_all(), "verify_all");
    let Some(r) = ok_or_typed(db.begin_read(), "begin_read") else {
        return;
    };
    let names = ok_or_typed(r.list_tables(), "list_tables").unwrap_or_default();
    for name in &names {
        let Some(t) = ok_or_typed(r.table(name), "table") else {
            continue;
        };
        let _ = t.len();
        for e in t.iter() {
            if ok_or_typed(e, "iter").is_none() {
                break;
            }
        }
        for e in t.iter_rev() {
            if ok_or_typed(e, "iter_rev").is_none() {
                break;
            }
        }
        for k in [0u32, 7, 200, 359] {
            ok_or_typed(t.get(&k.to_be_bytes()), "get");
            ok_or_typed(t.seek(&k.to_be_bytes()), "seek");
        }
        ok_or_typed(t.first(), "first");
        ok_or_typed(t.last(), "last");
        for e in t.range(&5u32.to_be_bytes()[..]..&90u32.to_be_bytes()[..]) {
            if ok_or_typed(e, "range").is_none() {
                break;
            }
        }
    }
    drop(r);
    if !write {
        return;
    }
    // A failed operation leaves the transaction able only to abort: later calls and the commit
    // give `TxnFailed`.
    let writes = || -> Result<(), Error> {
        let mut w = db.begin_write()?;
        for name in names.iter().map(String::as_str).chain(["new"]) {
            w.ensure_table(name)?;
            let mut t = w.table(name)?;
            for i in 0..40u32 {
                let k = (i * 11).to_be_bytes();
                if i % 3 == 0 {
                    t.delete(&k)?;
                } else {
                    t.put(&k, &[i as u8; 700])?;
                }
            }
        }
        w.commit()
    };
    match writes() {
        Ok(()) | Err(Error::TxnFailed) => {}
        Err(e) if typed(&e) || sealing_check(&e, mapped) => {}
        Err(e) => panic!("write: untyped error {e:?}"),
    }
}

fuzz_target!(|data: &[u8]| {
    let mode = data.first().copied().unwrap_or(0);
    if mode & 8 != 0 {
        // The log, edited where its records are (the rest is zeros the log grew into): a
        // whole log from the input, or edits up to a page past its last written byte.
        let (data_file, log, written) = seed_logged();
        let log = file_bytes(data, log, written + 4096);
        let (d, l) = (FaultStorage::new(), FaultStorage::new());
        d.set_contents(data_file.clone());
        l.set_contents(log);
        let db = Database::open_storage_with_log(Arc::new(d), Arc::new(l), log_options());
        if let Some(db) = ok_or_typed(db, "open with the log") {
            exercise(&db, mode & 4 != 0, false);
        }
        return;
    }
    let bytes = file_bytes(data, seed(), usize::MAX);
    let db = if mode & 2 != 0 {
        let dir = if std::path::Path::new("/dev/shm").is_dir() {
            std::path::PathBuf::from("/dev/shm")
        } else {
            std::env::temp_dir()
        };
        let path = dir.join(format!("larch-fuzz-{}.larch", std::process::id()));
        std::fs::write(&path, &bytes).unwrap();
        Database::open(&path, Options::default())
    } else {
        let s = FaultStorage::new();
        s.set_contents(bytes);
        Database::open_storage(Arc::new(s), Options::default())
    };
    if let Some(db) = ok_or_typed(db, "open") {
        exercise(&db, mode & 4 != 0, mode & 2 != 0);
    }
});
