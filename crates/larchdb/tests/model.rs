//! Model-based test: random operations on Larch and on a `BTreeMap` model must agree, across
//! commits, aborts, reopens (process crashes) and power losses, on the fault-injecting storage.
//! Values are sized so that splits, merges and overflow runs happen all the time. The harness
//! (the model, the writes applied to both, the crashes and the comparisons) is
//! `larchdb::testing`, shared with the fuzz target fuzz/fuzz_targets/ops_model.rs.

use larchdb::testing::{self, Crash, Harness, Model};
use proptest::prelude::*;
use std::collections::BTreeMap;

const TABLES: [&str; 3] = ["alpha", "beta", "gamma"];

#[derive(Debug, Clone)]
enum Op {
    Put {
        table: usize,
        key: u16,
        width: u8,
        value: (u8, u16),
        /// Through `set`, which does not say whether the key was there.
        blind: bool,
    },
    Delete {
        table: usize,
        key: u16,
        width: u8,
    },
    DeleteRange {
        table: usize,
        from: u16,
        count: u8,
    },
    /// `WriteTable::delete_range` over keys `from..to`, each end included, excluded or open
    /// as `ends` says.
    RemoveRange {
        table: usize,
        from: u16,
        to: u16,
        ends: u8,
    },
    /// `WriteTable::retain`, keeping keys whose last byte is not a multiple of `modulus`.
    Retain {
        table: usize,
        modulus: u8,
    },
    /// `WriteTable::pop_first` or `pop_last`.
    Pop {
        table: usize,
        last: bool,
    },
    /// `WriteTable::clear`.
    Clear {
        table: usize,
    },
    DropTable {
        table: usize,
    },
    Append {
        table: usize,
        count: u8,
        value: (u8, u16),
    },
    Commit {
        durable: bool,
    },
    Abort,
    CheckScan {
        table: usize,
        from: u16,
        to: u16,
        reverse: bool,
    },
    Reopen,
    PowerLoss {
        seed: u64,
        keep_some: bool,
    },
    Checkpoint,
    /// `Database::compact`: a durable checkpoint, pages moved down, the file's end and the
    /// log given back.
    Compact,
    /// `WriteTxn::savepoint`.
    Savepoint,
    /// `WriteTxn::rollback_to` the savepoint `back` places from the newest live one.
    RollbackTo {
        back: u8,
    },
    /// `WriteTxn::release` of the savepoint `back` places from the newest live one.
    Release {
        back: u8,
    },
    /// A read transaction of the newest commit, held across the operations after it (up to
    /// `HELD_MAX`; the oldest is let go first) until a crash or `LetGo`: checkpoints merge its
    /// overlays meanwhile, and compactions move pages, while it keeps its snapshot.
    Hold,
    /// Checks that the held reader `which` (modulo those held) still sees its snapshot.
    CheckHeld {
        which: u8,
    },
    /// Lets the held reader `which` (modulo those held) go.
    LetGo {
        which: u8,
    },
}

/// Read transactions held at once (`Op::Hold`).
const HELD_MAX: usize = 4;

fn key_bytes(key: u16, width: u8) -> Vec<u8> {
    // Same key number, different widths: different keys, of lengths from 1 to ~250 bytes.
    let w = 1 + (width as usize % 4) * 80;
    format!("{key:0w$}").into_bytes()
}

fn value_bytes(seed: u8, len: u16) -> Vec<u8> {
    (0..len as usize)
        .map(|i| seed.wrapping_add(i as u8))
        .collect()
}

fn op() -> impl Strategy<Value = Op> {
    let value = prop_oneof![
        4 => (any::<u8>(), 0u16..60),
        3 => (any::<u8>(), 60u16..1400),
        1 => (any::<u8>(), 1400u16..12000),
    ];
    prop_oneof![
        40 => (0..3usize, 0u16..400, any::<u8>(), value, any::<bool>()).prop_map(|(table, key, width, value, blind)| Op::Put { table, key, width, value, blind }),
        12 => (0..3usize, 0u16..400, any::<u8>()).prop_map(|(table, key, width)| Op::Delete { table, key, width }),
        3 => (0..3usize, 0u16..400, any::<u8>()).prop_map(|(table, from, count)| Op::DeleteRange { table, from, count }),
        3 => (0..3usize, 0u16..400, 0u16..400, any::<u8>()).prop_map(|(table, from, to, ends)| Op::RemoveRange { table, from, to, ends }),
        1 => (0..3usize, 2u8..6).prop_map(|(table, modulus)| Op::Retain { table, modulus }),
        2 => (0..3usize, any::<bool>()).prop_map(|(table, last)| Op::Pop { table, last }),
        1 => (0..3usize).prop_map(|table| Op::Clear { table }),
        1 => (0..3usize).prop_map(|table| Op::DropTable { table }),
        3 => (0..3usize, 1u8..120, (any::<u8>(), 0u16..3000))
            .prop_map(|(table, count, value)| Op::Append { table, count, value }),
        8 => any::<bool>().prop_map(|durable| Op::Commit { durable }),
        2 => Just(Op::Abort),
        4 => (0..3usize, 0u16..400, 0u16..400, any::<bool>()).prop_map(|(table, from, to, reverse)| Op::CheckScan { table, from, to, reverse }),
        2 => Just(Op::Reopen),
        2 => (any::<u64>(), any::<bool>()).prop_map(|(seed, keep_some)| Op::PowerLoss { seed, keep_some }),
        1 => Just(Op::Checkpoint),
        1 => Just(Op::Compact),
        4 => Just(Op::Savepoint),
        3 => (0u8..3).prop_map(|back| Op::RollbackTo { back }),
        1 => (0u8..3).prop_map(|back| Op::Release { back }),
        2 => Just(Op::Hold),
        3 => any::<u8>().prop_map(|which| Op::CheckHeld { which }),
        1 => any::<u8>().prop_map(|which| Op::LetGo { which }),
    ]
}

fn scan(h: &Harness, table: usize, from: u16, to: u16, reverse: bool) {
    let (a, b) = (key_bytes(from, 1), key_bytes(to, 2));
    h.check_range(TABLES[table], &a, &b, reverse);
}

/// Applies one write operation to the transaction and the model.
fn apply(w: &mut larchdb::WriteTxn<'_>, pending: &mut Model, op: &Op) {
    match *op {
        Op::Put {
            table,
            key,
            width,
            value: (seed, len),
            blind,
        } => {
            let (k, v) = (key_bytes(key, width), value_bytes(seed, len));
            testing::put(w, pending, TABLES[table], &k, &v, blind);
        }
        Op::Delete { table, key, width } => {
            testing::delete(w, pending, TABLES[table], &key_bytes(key, width));
        }
        Op::DeleteRange { table, from, count } => {
            let name = TABLES[table];
            let Some(m) = pending.get_mut(name) else {
                return;
            };
            let start = key_bytes(from, 0);
            let victims: Vec<Vec<u8>> = m
                .range(start..)
                .take(count as usize)
                .map(|(k, _)| k.clone())
                .collect();
            let mut t = w.table(name).unwrap();
            for k in victims {
                m.remove(&k);
                assert!(t.delete(&k).unwrap());
            }
        }
        Op::RemoveRange {
            table,
            from,
            to,
            ends,
        } => {
            use std::ops::Bound;
            let name = TABLES[table];
            let Some(m) = pending.get_mut(name) else {
                return;
            };
            // Keys of width 0 and 1 bound the range: both sort among the table's keys.
            let end = |k: Vec<u8>, how: u8| match how % 3 {
                0 => Bound::Included(k),
                1 => Bound::Excluded(k),
                _ => Bound::Unbounded,
            };
            let (lo, hi) = (
                end(key_bytes(from, 0), ends),
                end(key_bytes(to, 1), ends / 3),
            );
            let range = (lo.as_ref().map(|k| &k[..]), hi.as_ref().map(|k| &k[..]));
            let victims = testing::keys_in(m, range.0, range.1);
            for k in &victims {
                m.remove(k);
            }
            let mut t = w.table(name).unwrap();
            assert_eq!(
                t.delete_range::<[u8], _>(range).unwrap(),
                victims.len() as u64
            );
            assert_eq!(
                t.len().unwrap(),
                m.len() as u64,
                "count of {name} after delete_range"
            );
        }
        Op::Retain { table, modulus } => {
            let name = TABLES[table];
            let Some(m) = pending.get_mut(name) else {
                return;
            };
            let keep = |k: &[u8]| k.last().is_none_or(|b| b % modulus != 0);
            let before = m.len();
            m.retain(|k, _| keep(k));
            let mut t = w.table(name).unwrap();
            let mut seen = Vec::new();
            let deleted = t
                .retain(|k, v| {
                    seen.push((k.to_vec(), v.len()));
                    keep(k)
                })
                .unwrap();
            assert_eq!(deleted, (before - m.len()) as u64);
            assert_eq!(seen.len(), before, "retain visits every entry once");
            assert!(seen.windows(2).all(|p| p[0].0 < p[1].0), "in key order");
            assert_eq!(t.len().unwrap(), m.len() as u64);
        }
        Op::Pop { table, last } => {
            let name = TABLES[table];
            let Some(m) = pending.get_mut(name) else {
                return;
            };
            let want = if last { m.pop_last() } else { m.pop_first() };
            let mut t = w.table(name).unwrap();
            let got = if last { t.pop_last() } else { t.pop_first() }.unwrap();
            assert_eq!(got, want);
        }
        Op::Clear { table } => {
            let name = TABLES[table];
            let Some(m) = pending.get_mut(name) else {
                return;
            };
            let n = m.len() as u64;
            m.clear();
            let mut t = w.table(name).unwrap();
            assert_eq!(t.clear().unwrap(), n);
            assert!(t.is_empty().unwrap());
            assert!(t.first().unwrap().is_none());
        }
        Op::DropTable { table } => testing::drop_table(w, pending, TABLES[table]),
        Op::Append {
            table,
            count,
            value: (seed, len),
        } => {
            // Keys that sort after everything in the table: the last key plus a suffix byte.
            let name = TABLES[table];
            let m = testing::ensure_table(w, pending, name);
            let mut t = w.table(name).unwrap();
            for n in 0..count {
                let mut k = m.keys().next_back().cloned().unwrap_or_default();
                if k.len() >= 900 {
                    break;
                }
                k.push(b'~');
                let v = value_bytes(seed.wrapping_add(n), len);
                t.append(&k, &v).unwrap();
                m.insert(k, v);
            }
            if let Some(last) = m.keys().next_back() {
                assert!(matches!(
                    t.append(last, b"x"),
                    Err(larchdb::Error::AppendOutOfOrder)
                ));
            }
        }
        _ => unreachable!("not a write operation"),
    }
}

fn is_write(op: &Op) -> bool {
    matches!(
        op,
        Op::Put { .. }
            | Op::Delete { .. }
            | Op::DeleteRange { .. }
            | Op::RemoveRange { .. }
            | Op::Retain { .. }
            | Op::Pop { .. }
            | Op::Clear { .. }
            | Op::DropTable { .. }
            | Op::Append { .. }
            | Op::Savepoint
            | Op::RollbackTo { .. }
            | Op::Release { .. }
    )
}

fn run(ops: Vec<Op>, log: bool) {
    run_on(ops, Harness::new(log));
}

/// Asserts that the held reader `r` sees exactly `expected`: its tables, and each table's
/// count and entries.
fn check_held(r: &larchdb::ReadTxn, expected: &Model) {
    let want: Vec<String> = expected.keys().cloned().collect();
    assert_eq!(r.list_tables().unwrap(), want, "a held reader's tables");
    for (name, map) in expected {
        let t = r.table(name).unwrap();
        testing::assert_holds(&t, map, &format!("{name}, held at {}", r.id()));
    }
}

fn run_on(ops: Vec<Op>, h: Harness) {
    // The database, with the newest commit and the commits that may survive a power loss.
    let mut h = h;
    // Read transactions held, each with the state it saw.
    let mut held: Vec<(larchdb::ReadTxn, Model)> = Vec::new();
    let mut i = 0;
    while i < ops.len() {
        let op = &ops[i];
        if is_write(op) {
            // A write transaction runs until a commit, an abort, or a crash.
            let mut w = h.db().begin_write().unwrap();
            let mut pending = h.latest().clone();
            // Live savepoints, oldest first, with the state each marks.
            let mut savepoints: Vec<(larchdb::Savepoint, Model)> = Vec::new();
            while i < ops.len() {
                match &ops[i] {
                    Op::Savepoint => savepoints.push((w.savepoint().unwrap(), pending.clone())),
                    Op::RollbackTo { back } => {
                        if let Some(at) = savepoints.len().checked_sub(1 + *back as usize) {
                            w.rollback_to(&savepoints[at].0).unwrap();
                            pending = savepoints[at].1.clone();
                            let gone = savepoints.split_off(at + 1);
                            for (sp, _) in gone {
                                // Rolled past: no longer live.
                                assert!(matches!(
                                    w.rollback_to(&sp),
                                    Err(larchdb::Error::SavepointInvalid)
                                ));
                            }
                            // What the transaction sees is the savepoint's state.
                            for (name, m) in &pending {
                                let t = w.table(name).unwrap();
                                assert_eq!(t.len().unwrap(), m.len() as u64, "count of {name}");
                                let got = testing::collect(t.iter());
                                assert!(got.iter().map(|(k, v)| (k, v)).eq(m.iter()));
                            }
                            assert_eq!(
                                w.list_tables().unwrap(),
                                pending.keys().cloned().collect::<Vec<_>>()
                            );
                        }
                    }
                    Op::Release { back } => {
                        if let Some(at) = savepoints.len().checked_sub(1 + *back as usize) {
                            let released = savepoints.split_off(at);
                            let mut it = released.into_iter();
                            w.release(it.next().unwrap().0).unwrap();
                            for (sp, _) in it {
                                assert!(matches!(
                                    w.release(sp),
                                    Err(larchdb::Error::SavepointInvalid)
                                ));
                            }
                        }
                    }
                    op if is_write(op) => apply(&mut w, &mut pending, op),
                    Op::CheckScan {
                        table,
                        from,
                        to,
                        reverse,
                    } => scan(&h, *table, *from, *to, *reverse),
                    Op::Commit { durable: d } => {
                        w.commit_with(if *d {
                            larchdb::Durability::Immediate
                        } else {
                            larchdb::Durability::None
                        })
                        .unwrap();
                        h.committed(pending, *d);
                        let report = h.db().verify_all().unwrap();
                        assert!(
                            report.is_clean(),
                            "verify after commit: {:?}",
                            report.problems
                        );
                        i += 1;
                        break;
                    }
                    Op::Abort => {
                        drop(w);
                        i += 1;
                        break;
                    }
                    _ => break, // a crash: the transaction dies with the process
                }
                i += 1;
            }
            continue;
        }
        match *op {
            Op::CheckScan {
                table,
                from,
                to,
                reverse,
            } => scan(&h, table, from, to, reverse),
            Op::Reopen => {
                // The process's readers end with it.
                held.clear();
                h.crash(Crash::Process);
            }
            Op::PowerLoss { seed, keep_some } => {
                held.clear();
                h.crash(Crash::PowerLoss { seed, keep_some });
            }
            Op::Hold => {
                if held.len() == HELD_MAX {
                    held.remove(0);
                }
                held.push((h.db().begin_read().unwrap(), h.latest().clone()));
            }
            Op::CheckHeld { which } if !held.is_empty() => {
                let (r, m) = &held[which as usize % held.len()];
                check_held(r, m);
            }
            Op::LetGo { which } if !held.is_empty() => {
                let n = held.len();
                held.remove(which as usize % n);
            }
            Op::Compact => {
                // (The file may grow: the checkpoint first writes the overlay into the tree.)
                h.db().compact().unwrap();
                h.made_durable();
                h.check();
            }
            Op::Checkpoint => {
                h.db().checkpoint().unwrap();
                h.made_durable();
                h.check();
            }
            _ => {}
        }
        i += 1;
    }
    for (r, m) in &held {
        check_held(r, m);
    }
    drop(held);
    h.check();
}

/// Turns `testing::spill_undo_records_always` off again when dropped, a failed case included.
struct SpillOff;

impl Drop for SpillOff {
    fn drop(&mut self) {
        testing::spill_undo_records_always(false);
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("LARCH_MODEL_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(128),
        ..ProptestConfig::default()
    })]
    #[test]
    fn behaves_like_a_btreemap(ops in proptest::collection::vec(op(), 1..250)) {
        run(ops, false);
    }

    /// The same, committing through the write-ahead log: checkpoints, explicit and due, and
    /// replays after every reopen and power loss.
    #[test]
    fn behaves_like_a_btreemap_with_a_log(ops in proptest::collection::vec(op(), 1..250)) {
        run(ops, true);
    }

    /// The same, with a checkpoint due every 16 KiB of log and merged in up to four slices
    /// (`Options::checkpoint_slices`): crashes and reopens part way through a frozen overlay's
    /// slices.
    #[test]
    fn behaves_like_a_btreemap_with_checkpoints_by_slices(
        ops in proptest::collection::vec(op(), 1..250)
    ) {
        let options = testing::small_log_options().checkpoint_bytes(16 << 10).checkpoint_slices(4);
        run_on(ops, Harness::with_log_options(options));
    }

    /// The same, with and without the log, each savepoint's undo records written to their
    /// file at every change (`testing::spill_undo_records_always`) and read back by the
    /// rollbacks.
    #[test]
    fn behaves_like_a_btreemap_with_undo_records_in_a_file(
        ops in proptest::collection::vec(op(), 1..250),
        log in proptest::bool::ANY,
    ) {
        testing::spill_undo_records_always(true);
        let _off = SpillOff;
        run(ops, log);
    }

    /// The same, with the tree's pages in frames (`Options::frames_bytes`): the frames are
    /// empty after every reopen and power loss, and loaded from the file.
    #[test]
    fn behaves_like_a_btreemap_in_frames(ops in proptest::collection::vec(op(), 1..250)) {
        let options = testing::small_log_options().checkpoint_bytes(16 << 10).checkpoint_slices(4);
        run_on(ops, Harness::in_frames(options));
    }
}

/// A failure this test found, as proptest shrank it: appends in two tables, a savepoint after the
/// first table's, the second table's appends rolled back, then one more append in each.
#[test]
fn appends_after_a_rollback_past_other_appends() {
    let append = |table, count, len| Op::Append {
        table,
        count,
        value: (0, len),
    };
    let put = |table, len| Op::Put {
        table,
        key: 0,
        width: 0,
        value: (0, len),
        blind: false,
    };
    for log in [false, true] {
        run(
            vec![
                put(0, 0),
                put(1, 1007),
                append(0, 1, 0),
                Op::Savepoint,
                append(1, 108, 1514),
                Op::Savepoint,
                Op::RollbackTo { back: 1 },
                append(0, 1, 0),
                append(1, 1, 0),
                Op::Commit { durable: false },
            ],
            log,
        );
    }
}

/// An edit at the ends of a tree of long keys (`ends_of_a_tree_of_long_keys`).
#[derive(Debug, Clone)]
enum EndOp {
    /// Deletes `count` keys from the `at`-th (of the table's keys, modulo its length),
    /// newest-first when `reverse`.
    DeleteRun {
        at: u16,
        count: u16,
        reverse: bool,
    },
    /// Appends `count` keys after the last, with `len`-byte values.
    Append {
        count: u8,
        len: u16,
    },
    /// Puts `count` keys before the first.
    Prepend {
        count: u8,
        len: u16,
    },
    Pop {
        last: bool,
    },
    /// `delete_range` over the keys from the `at`-th, `count` of them.
    RemoveRange {
        at: u16,
        count: u16,
    },
    /// Puts key `at` (modulo the span of the table's keys, from its first): present or not.
    Middle {
        at: u16,
        len: u16,
    },
    Commit,
    /// A commit, then `Database::compact` (pages moved down, the file's end given back).
    Compact,
}

fn end_op() -> impl Strategy<Value = EndOp> {
    let len = prop_oneof![Just(0u16), Just(100), Just(1514), Just(3000)];
    prop_oneof![
        4 => (any::<u16>(), 1u16..200, any::<bool>()).prop_map(|(at, count, reverse)| EndOp::DeleteRun { at, count, reverse }),
        3 => (1u8..80, len.clone()).prop_map(|(count, len)| EndOp::Append { count, len }),
        2 => (1u8..80, len).prop_map(|(count, len)| EndOp::Prepend { count, len }),
        2 => any::<bool>().prop_map(|last| EndOp::Pop { last }),
        2 => (any::<u16>(), 1u16..200).prop_map(|(at, count)| EndOp::RemoveRange { at, count }),
        2 => (any::<u16>(), 0u16..2000).prop_map(|(at, len)| EndOp::Middle { at, len }),
        2 => Just(EndOp::Commit),
        1 => Just(EndOp::Compact),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("LARCH_MODEL_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(64),
        ..ProptestConfig::default()
    })]
    /// Deletes and inserts at both ends of a tree whose 241-byte keys make branches of about
    /// fifteen children, so that merges often cannot happen and deletes leave empty leaves and
    /// branches of one child at the edges (the shape behind `appends_after_a_rollback_past_other_appends`). Every
    /// step is checked against a `BTreeMap`, every commit with `verify_all`.
    #[test]
    fn ends_of_a_tree_of_long_keys(
        fill in 20u32..400,
        fill_len in prop_oneof![Just(100u16), Just(1514)],
        ops in proptest::collection::vec(end_op(), 1..60),
        log in any::<bool>(),
    ) {
        let key = |n: u32| format!("{n:0241}").into_bytes();
        let h = Harness::new(log);
        let db = h.db();
        let mut model: BTreeMap<u32, Vec<u8>> = BTreeMap::new();
        let mut w = db.begin_write().unwrap();
        w.create_table("t").unwrap();
        {
            let mut t = w.table("t").unwrap();
            for n in 0..fill {
                let v = value_bytes(n as u8, fill_len);
                t.append(&key(1_000_000 + n), &v).unwrap();
                model.insert(1_000_000 + n, v);
            }
        }
        for op in ops.iter().chain([EndOp::Commit].iter()) {
            match *op {
                EndOp::DeleteRun { at, count, reverse } => {
                    if model.is_empty() {
                        continue;
                    }
                    let at = at as usize % model.len();
                    let mut run: Vec<u32> = model.keys().skip(at).take(count as usize).copied().collect();
                    if reverse {
                        run.reverse();
                    }
                    let mut t = w.table("t").unwrap();
                    for n in run {
                        model.remove(&n);
                        prop_assert!(t.delete(&key(n)).unwrap());
                    }
                }
                EndOp::Append { count, len } => {
                    let mut t = w.table("t").unwrap();
                    let from = model.keys().next_back().map_or(1_000_000, |n| n + 1);
                    for n in from..from + count as u32 {
                        let v = value_bytes(n as u8, len);
                        t.append(&key(n), &v).unwrap();
                        model.insert(n, v);
                    }
                }
                EndOp::Prepend { count, len } => {
                    let mut t = w.table("t").unwrap();
                    let below = model.keys().next().map_or(1_000_000, |n| *n);
                    for n in (below - count as u32..below).rev() {
                        let v = value_bytes(n as u8, len);
                        prop_assert!(!t.put(&key(n), &v).unwrap());
                        model.insert(n, v);
                    }
                }
                EndOp::Pop { last } => {
                    let mut t = w.table("t").unwrap();
                    let got = if last { t.pop_last() } else { t.pop_first() }.unwrap();
                    let want = if last { model.pop_last() } else { model.pop_first() };
                    prop_assert_eq!(got, want.map(|(n, v)| (key(n), v)));
                }
                EndOp::RemoveRange { at, count } => {
                    if model.is_empty() {
                        continue;
                    }
                    let at = at as usize % model.len();
                    let run: Vec<u32> = model.keys().skip(at).take(count as usize).copied().collect();
                    let (lo, hi) = (key(run[0]), key(run[run.len() - 1]));
                    for n in &run {
                        model.remove(n);
                    }
                    let mut t = w.table("t").unwrap();
                    prop_assert_eq!(t.delete_range(lo..=hi).unwrap(), run.len() as u64);
                }
                EndOp::Middle { at, len } => {
                    let first = model.keys().next().map_or(1_000_000, |n| *n);
                    let span = model.keys().next_back().map_or(1, |n| n - first + 1);
                    let n = first + at as u32 % span;
                    let v = value_bytes(n as u8, len);
                    let mut t = w.table("t").unwrap();
                    prop_assert_eq!(t.put(&key(n), &v).unwrap(), model.insert(n, v).is_some());
                }
                EndOp::Commit | EndOp::Compact => {
                    w.commit().unwrap();
                    if matches!(op, EndOp::Compact) {
                        db.compact().unwrap();
                    }
                    let report = db.verify_all().unwrap();
                    prop_assert!(report.is_clean(), "{:?}", report.problems);
                    let r = db.begin_read().unwrap();
                    let t = r.table("t").unwrap();
                    let want: Vec<(Vec<u8>, Vec<u8>)> = model.iter().map(|(n, v)| (key(*n), v.clone())).collect();
                    prop_assert!(testing::collect(t.iter()) == want);
                    let mut back = testing::collect(t.iter_rev());
                    back.reverse();
                    prop_assert!(back == want);
                    prop_assert_eq!(t.first().unwrap().map(|(k, _)| k.to_vec()), want.first().map(|e| e.0.clone()));
                    prop_assert_eq!(t.last().unwrap().map(|(k, _)| k.to_vec()), want.last().map(|e| e.0.clone()));
                    for (k, v) in want.iter().step_by(7) {
                        prop_assert_eq!(t.get(k).unwrap(), Some(&v[..]));
                    }
                    drop(r);
                    w = db.begin_write().unwrap();
                }
            }
        }
    }
}
