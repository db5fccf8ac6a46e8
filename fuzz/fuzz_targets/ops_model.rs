//! Random operations on Larch and on a `BTreeMap` model must agree, across commits, aborts,
//! reopens (process crashes) and power losses, on the fault-injecting storage with the smallest
//! pages (4 KiB), so that splits, merges and overflow runs happen all the time. The
//! coverage-guided sibling of crates/larchdb/tests/model.rs.

#![no_main]

use arbitrary::Arbitrary;
use larchdb::storage::{CrashMode, FaultStorage};
use larchdb::{Database, Durability, Error, Options, WriteTxn};
use libfuzzer_sys::fuzz_target;
use std::collections::BTreeMap;
use std::sync::Arc;

const TABLES: [&str; 3] = ["alpha", "beta", "gamma"];
/// Operations per input: keeps each execution short.
const OPS_MAX: usize = 300;
/// Largest key at 4 KiB pages (docs/design/file-format.md).
const KEY_BYTES_MAX: usize = 1000;

type Model = BTreeMap<String, BTreeMap<Vec<u8>, Vec<u8>>>;

#[derive(Arbitrary, Debug)]
enum Op {
    Put {
        table: u8,
        key: u16,
        width: u8,
        seed: u8,
        len: u16,
    },
    Delete {
        table: u8,
        key: u16,
        width: u8,
    },
    DropTable {
        table: u8,
    },
    Get {
        table: u8,
        key: u16,
        width: u8,
    },
    Scan {
        table: u8,
        from: u16,
        to: u16,
        reverse: bool,
    },
    Commit {
        durable: bool,
    },
    Abort,
    Reopen,
    PowerLoss {
        seed: u64,
        keep_some: bool,
    },
}

fn table(t: u8) -> &'static str {
    TABLES[t as usize % TABLES.len()]
}

/// Keys of 0 to 1001 bytes: the empty key, short and long ones, the largest allowed, and one
/// byte too long.
fn key_bytes(key: u16, width: u8) -> Vec<u8> {
    let w = match width % 8 {
        0 => 0,
        1 | 2 => 4,
        3 => 40,
        4 => 240,
        5 => 600,
        6 => KEY_BYTES_MAX,
        _ => KEY_BYTES_MAX + 1,
    };
    if w == 0 {
        return Vec::new();
    }
    let mut k = format!("{key:05}").into_bytes();
    k.resize(w, b'.');
    k
}

/// Values of 0 to ~13000 bytes: inline ones and overflow runs of up to 4 pages.
fn value_bytes(seed: u8, len: u16) -> Vec<u8> {
    let len = if len % 4 == 0 {
        len as usize % 13_000
    } else {
        len as usize % 700
    };
    (0..len).map(|i| seed.wrapping_add(i as u8)).collect()
}

fn is_write(op: &Op) -> bool {
    matches!(
        op,
        Op::Put { .. } | Op::Delete { .. } | Op::DropTable { .. }
    )
}

fn open(storage: &FaultStorage) -> Database {
    Database::open_storage(Arc::new(storage.clone()), Options::default()).expect("open")
}

fn apply(w: &mut WriteTxn<'_>, pending: &mut Model, op: &Op) {
    match *op {
        Op::Put {
            table: t,
            key,
            width,
            seed,
            len,
        } => {
            let name = table(t);
            w.ensure_table(name).unwrap();
            let m = pending.entry(name.to_string()).or_default();
            let k = key_bytes(key, width);
            let v = value_bytes(seed, len);
            let mut tab = w.table(name).unwrap();
            if k.len() > KEY_BYTES_MAX {
                // Refused before anything changes: the transaction stays usable.
                match tab.put(&k, &v) {
                    Err(Error::KeyTooLarge {
                        len,
                        max: KEY_BYTES_MAX,
                    }) if len == k.len() => {}
                    other => panic!("oversized key: {other:?}"),
                }
                return;
            }
            let replaced = tab.put(&k, &v).unwrap();
            assert_eq!(replaced, m.insert(k.clone(), v.clone()).is_some());
            assert_eq!(tab.get(&k).unwrap(), Some(&v[..]));
        }
        Op::Delete {
            table: t,
            key,
            width,
        } => {
            let name = table(t);
            let k = key_bytes(key, width);
            let present = pending
                .get_mut(name)
                .is_some_and(|m| m.remove(&k).is_some());
            match w.table(name) {
                Ok(mut tab) => assert_eq!(tab.delete(&k).unwrap(), present),
                Err(Error::TableNotFound(_)) => assert!(!present),
                Err(e) => panic!("{e}"),
            }
        }
        Op::DropTable { table: t } => {
            let name = table(t);
            assert_eq!(
                w.delete_table(name).unwrap(),
                pending.remove(name).is_some()
            );
        }
        _ => unreachable!("not a write"),
    }
}

/// A point read inside the write transaction sees its own writes.
fn get_in_txn(w: &mut WriteTxn<'_>, pending: &Model, t: u8, key: u16, width: u8) {
    let name = table(t);
    let k = key_bytes(key, width);
    let want = pending.get(name).and_then(|m| m.get(&k));
    match w.table(name) {
        Ok(tab) => assert_eq!(tab.get(&k).unwrap(), want.map(|v| v.as_slice())),
        Err(Error::TableNotFound(_)) => assert!(!pending.contains_key(name)),
        Err(e) => panic!("{e}"),
    }
}

/// A range scan of the newest commit, either direction.
fn scan(db: &Database, model: &Model, t: u8, from: u16, to: u16, reverse: bool) {
    let name = table(t);
    let (a, b) = (key_bytes(from, 3), key_bytes(to, 4));
    let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
    let r = db.begin_read().unwrap();
    let Some(m) = model.get(name) else {
        assert!(matches!(r.table(name), Err(Error::TableNotFound(_))));
        return;
    };
    let tab = r.table(name).unwrap();
    let it = if reverse {
        tab.range_rev(lo.as_slice()..hi.as_slice())
    } else {
        tab.range(lo.as_slice()..hi.as_slice())
    };
    let got: Vec<(Vec<u8>, Vec<u8>)> = it
        .map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())).unwrap())
        .collect();
    let mut want: Vec<(Vec<u8>, Vec<u8>)> = m
        .range(lo..hi)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if reverse {
        want.reverse();
    }
    assert!(got == want, "scan of {name} differs");
}

/// Every table equals the model, and `verify()` is clean.
fn check(db: &Database, model: &Model) {
    let report = db.verify_all().unwrap();
    assert!(report.is_clean(), "verify: {:?}", report.problems);
    let r = db.begin_read().unwrap();
    let names: Vec<String> = model.keys().cloned().collect();
    assert_eq!(r.list_tables().unwrap(), names);
    for (name, m) in model {
        let tab = r.table(name).unwrap();
        assert_eq!(tab.len().unwrap(), m.len() as u64);
        let got: Vec<(Vec<u8>, Vec<u8>)> = tab
            .iter()
            .map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())).unwrap())
            .collect();
        let want: Vec<(Vec<u8>, Vec<u8>)> = m.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        assert!(got == want, "contents of {name} differ");
    }
}

fuzz_target!(|ops: Vec<Op>| {
    let ops = &ops[..ops.len().min(OPS_MAX)];
    let mut storage = FaultStorage::new();
    let mut db = open(&storage);
    // The newest commit, and the newest durable one.
    let mut latest = Model::new();
    let mut durable = Model::new();
    let mut i = 0;
    while i < ops.len() {
        if is_write(&ops[i]) {
            // A write transaction runs until a commit, an abort, or a crash.
            let mut w = db.begin_write().unwrap();
            let mut pending = latest.clone();
            while i < ops.len() {
                match ops[i] {
                    ref op if is_write(op) => apply(&mut w, &mut pending, op),
                    Op::Get { table, key, width } => {
                        get_in_txn(&mut w, &pending, table, key, width)
                    }
                    Op::Scan {
                        table,
                        from,
                        to,
                        reverse,
                    } => scan(&db, &latest, table, from, to, reverse),
                    Op::Commit { durable: d } => {
                        let how = if d {
                            Durability::Immediate
                        } else {
                            Durability::None
                        };
                        w.commit_with(how).unwrap();
                        latest = pending;
                        if d {
                            durable = latest.clone();
                        }
                        i += 1;
                        break;
                    }
                    Op::Abort => {
                        w.abort();
                        i += 1;
                        break;
                    }
                    // A crash: the transaction dies with the process.
                    _ => break,
                }
                i += 1;
            }
            continue;
        }
        match ops[i] {
            Op::Get {
                table: t,
                key,
                width,
            } => {
                let r = db.begin_read().unwrap();
                let k = key_bytes(key, width);
                let want = latest.get(table(t)).and_then(|m| m.get(&k));
                match r.table(table(t)) {
                    Ok(tab) => assert_eq!(tab.get(&k).unwrap(), want.map(|v| v.as_slice())),
                    Err(Error::TableNotFound(_)) => assert!(want.is_none()),
                    Err(e) => panic!("{e}"),
                }
            }
            Op::Scan {
                table,
                from,
                to,
                reverse,
            } => scan(&db, &latest, table, from, to, reverse),
            Op::Reopen | Op::PowerLoss { .. } => {
                drop(db);
                storage = match ops[i] {
                    Op::Reopen => storage.crash(CrashMode::ProcessOnly),
                    Op::PowerLoss {
                        seed,
                        keep_some: true,
                    } => storage.crash(CrashMode::KeepRandom { seed }),
                    _ => storage.crash(CrashMode::DropUnsynced),
                };
                if !matches!(ops[i], Op::Reopen) {
                    // A power loss returns to the last durable commit, exactly.
                    latest = durable.clone();
                }
                db = open(&storage);
                check(&db, &latest);
            }
            _ => {}
        }
        i += 1;
    }
    check(&db, &latest);
});
