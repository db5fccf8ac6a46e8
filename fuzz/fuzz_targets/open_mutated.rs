//! Opens, reads, verifies and writes to a damaged database file: only typed errors, never a
//! panic, a hang or an out-of-bounds read. The input is a list of edits (xor or set a byte,
//! truncate) to a small valid database built once per process, or, with bit 0 of the first
//! byte, a whole file. Bit 1 opens it as a real file read through the memory map, where reads
//! check page headers but not checksums, so damaged page contents reach the node decoding;
//! otherwise on the in-memory storage, which checksums every page it loads. Bit 2 also runs a
//! write transaction on it.

#![no_main]

use larchdb::storage::FaultStorage;
use larchdb::{Database, Error, Options};
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

/// Errors a damaged file may give.
fn typed(e: &Error) -> bool {
    matches!(
        e,
        Error::Corrupted { .. } | Error::NotADatabase | Error::UnsupportedVersion { .. }
    )
}

fn ok_or_typed<T>(r: Result<T, Error>, what: &str) -> Option<T> {
    match r {
        Ok(v) => Some(v),
        Err(e) if typed(&e) => None,
        Err(e) => panic!("{what}: untyped error {e:?}"),
    }
}

fn file_bytes(data: &[u8]) -> Vec<u8> {
    let mode = data.first().copied().unwrap_or(0);
    if mode & 1 != 0 {
        return data[1..].to_vec();
    }
    let mut bytes = seed().to_vec();
    for edit in data[1.min(data.len())..].chunks_exact(6) {
        if bytes.is_empty() {
            break;
        }
        let at = u32::from_le_bytes(edit[..4].try_into().unwrap()) as usize % bytes.len();
        match edit[4] % 4 {
            0 | 1 => bytes[at] ^= edit[5],
            2 => bytes[at] = edit[5],
            _ => bytes.truncate(at),
        }
    }
    bytes
}

fn exercise(db: &Database, write: bool) {
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
        Err(e) if typed(&e) => {}
        Err(e) => panic!("write: untyped error {e:?}"),
    }
}

fuzz_target!(|data: &[u8]| {
    let mode = data.first().copied().unwrap_or(0);
    let bytes = file_bytes(data);
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
        exercise(&db, mode & 4 != 0);
    }
});
