//! Random operations on Larch and on a `BTreeMap` model must agree, across commits, aborts,
//! checkpoints, compactions, reopens (process crashes) and power losses, on the fault-injecting
//! storage with the smallest pages (4 KiB), so that splits, merges and overflow runs happen all
//! the time. Each input runs either through the write-ahead log (a small one: checkpoints come
//! often and the log wraps, `testing::small_log_options`) or on the pages alone. The
//! coverage-guided sibling of crates/larchdb/tests/model.rs, with the same harness
//! (`larchdb::testing`: the model, the writes applied to both, the crashes, the comparisons).

#![no_main]

use arbitrary::Arbitrary;
use larchdb::testing::{self, Crash, Harness, Model};
use larchdb::{Durability, Error, WriteTxn};
use libfuzzer_sys::fuzz_target;

const TABLES: [&str; 3] = ["alpha", "beta", "gamma"];
/// Operations per input: keeps each execution short.
const OPS_MAX: usize = 300;
/// Largest key at 4 KiB pages (docs/design/file-format.md).
const KEY_BYTES_MAX: usize = 1000;

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
    /// `Database::checkpoint`: durable when it returns.
    Checkpoint,
    /// `Database::compact`: a durable checkpoint, pages moved down, the file's end given back.
    Compact,
}

/// One execution: the path the commits take, and the operations.
#[derive(Arbitrary, Debug)]
struct Input {
    log: bool,
    ops: Vec<Op>,
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
            let (k, v) = (key_bytes(key, width), value_bytes(seed, len));
            if k.len() > KEY_BYTES_MAX {
                // Refused before anything changes: the transaction stays usable.
                testing::ensure_table(w, pending, name);
                match w.table(name).unwrap().put(&k, &v) {
                    Err(Error::KeyTooLarge {
                        len,
                        max: KEY_BYTES_MAX,
                    }) if len == k.len() => {}
                    other => panic!("oversized key: {other:?}"),
                }
                return;
            }
            testing::put(w, pending, name, &k, &v, false);
        }
        Op::Delete {
            table: t,
            key,
            width,
        } => testing::delete(w, pending, table(t), &key_bytes(key, width)),
        Op::DropTable { table: t } => testing::drop_table(w, pending, table(t)),
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
fn scan(h: &Harness, t: u8, from: u16, to: u16, reverse: bool) {
    h.check_range(table(t), &key_bytes(from, 3), &key_bytes(to, 4), reverse);
}

fuzz_target!(|input: Input| {
    let ops = &input.ops[..input.ops.len().min(OPS_MAX)];
    // The database, with the newest commit and the newest durable one.
    let mut h = Harness::new(input.log);
    let mut i = 0;
    while i < ops.len() {
        if is_write(&ops[i]) {
            // A write transaction runs until a commit, an abort, or a crash.
            let mut w = h.db().begin_write().unwrap();
            let mut pending = h.latest().clone();
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
                    } => scan(&h, table, from, to, reverse),
                    Op::Commit { durable } => {
                        let how = if durable {
                            Durability::Immediate
                        } else {
                            Durability::None
                        };
                        w.commit_with(how).unwrap();
                        h.committed(pending, durable);
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
                let r = h.db().begin_read().unwrap();
                let k = key_bytes(key, width);
                let want = h.latest().get(table(t)).and_then(|m| m.get(&k));
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
            } => scan(&h, table, from, to, reverse),
            // The harness reopens and checks: after a power loss, against the last durable
            // commit, exactly.
            Op::Reopen => h.crash(Crash::Process),
            Op::PowerLoss { seed, keep_some } => h.crash(Crash::PowerLoss { seed, keep_some }),
            Op::Checkpoint => {
                h.db().checkpoint().unwrap();
                h.made_durable();
            }
            Op::Compact => {
                h.db().compact().unwrap();
                h.made_durable();
                h.check();
            }
            _ => {}
        }
        i += 1;
    }
    h.check();
});
