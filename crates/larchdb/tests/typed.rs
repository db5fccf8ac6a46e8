//! Typed tables (`larchdb::typed`): every built-in encoding round-trips through commits and a
//! reopen, with and without the log; key order and ranges are the types' order; the recorded
//! types are checked; bytes a type cannot read are `Error::Decode`, never a panic.

use larchdb::typed::Json;
use larchdb::{Database, Error, Options, TableDefinition};
use proptest::prelude::*;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;

fn open(dir: &tempfile::TempDir, log: bool) -> Database {
    Database::open(dir.path().join("db"), Options::default().log(log)).unwrap()
}

#[derive(Serialize, Deserialize, Debug, PartialEq, Clone)]
struct Account {
    owner: String,
    balance: i64,
    tags: Vec<String>,
}

const BY_ID: TableDefinition<u64, &str> = TableDefinition::new("by_id");
const SIGNED: TableDefinition<i32, f64> = TableDefinition::new("signed");
const BLOBS: TableDefinition<&[u8], [u8; 4]> = TableDefinition::new("blobs");
const OWNED: TableDefinition<String, Vec<u8>> = TableDefinition::new("owned");
const SET: TableDefinition<u128, ()> = TableDefinition::new("set");
const FLAGS: TableDefinition<i8, bool> = TableDefinition::new("flags");
const ACCOUNTS: TableDefinition<u32, Json<Account>> = TableDefinition::new("accounts");

#[test]
fn every_encoding_round_trips_through_a_commit_and_a_reopen() {
    for log in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let ada = Account {
            owner: "ada".into(),
            balance: -12,
            tags: vec!["a".into(), "é".into()],
        };
        {
            let db = open(&dir, log);
            let mut w = db.begin_write().unwrap();
            w.open_table(BY_ID).unwrap().put(7, "seven").unwrap();
            w.open_table(SIGNED).unwrap().put(-3, -0.5).unwrap();
            w.open_table(BLOBS)
                .unwrap()
                .put(&b"\x00\xff"[..], *b"abcd")
                .unwrap();
            w.open_table(OWNED)
                .unwrap()
                .put("k".to_string(), vec![1, 2])
                .unwrap();
            w.open_table(SET).unwrap().put(u128::MAX, ()).unwrap();
            w.open_table(FLAGS).unwrap().put(-128, true).unwrap();
            w.open_table(ACCOUNTS).unwrap().put(1, &ada).unwrap();
            w.commit().unwrap();
            // A second transaction through the same tables (logged, when the log is on).
            let mut w = db.begin_write().unwrap();
            let mut t = w.open_table(BY_ID).unwrap();
            t.put(8, "eight").unwrap();
            assert_eq!(t.get(8).unwrap(), Some("eight"));
            w.commit().unwrap();
        }
        let db = open(&dir, log);
        let r = db.begin_read().unwrap();
        let by_id = r.open_table(BY_ID).unwrap();
        assert_eq!(by_id.get(7).unwrap(), Some("seven"));
        assert_eq!(by_id.get(8).unwrap(), Some("eight"));
        assert_eq!(by_id.get(9).unwrap(), None);
        assert_eq!(by_id.len().unwrap(), 2);
        assert_eq!(r.open_table(SIGNED).unwrap().get(-3).unwrap(), Some(-0.5));
        assert_eq!(
            r.open_table(BLOBS).unwrap().get(&b"\x00\xff"[..]).unwrap(),
            Some(*b"abcd")
        );
        assert_eq!(
            r.open_table(OWNED).unwrap().get("k".to_string()).unwrap(),
            Some(vec![1, 2])
        );
        assert_eq!(r.open_table(SET).unwrap().get(u128::MAX).unwrap(), Some(()));
        assert_eq!(r.open_table(FLAGS).unwrap().get(-128).unwrap(), Some(true));
        assert_eq!(r.open_table(ACCOUNTS).unwrap().get(1).unwrap(), Some(ada));
        assert!(db.verify().unwrap().is_clean());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Keys come back in the type's order, and every kind of range bound selects what a
    /// `BTreeMap` selects (floats compared by `total_cmp`, through their bit patterns).
    #[test]
    fn keys_sort_and_ranges_select_as_the_types_do(
        ints in prop::collection::vec((any::<i64>(), any::<u16>()), 0..300),
        floats in prop::collection::vec(any::<f64>(), 0..100),
        lo in any::<i64>(),
        hi in any::<i64>(),
        log in any::<bool>(),
    ) {
        const INTS: TableDefinition<i64, u16> = TableDefinition::new("ints");
        const FLOATS: TableDefinition<f64, ()> = TableDefinition::new("floats");
        let dir = tempfile::tempdir().unwrap();
        let db = open(&dir, log);
        let mut model = BTreeMap::new();
        let mut w = db.begin_write().unwrap();
        let mut t = w.open_table(INTS).unwrap();
        for &(k, v) in &ints {
            t.put(k, v).unwrap();
            model.insert(k, v);
        }
        let mut f = w.open_table(FLOATS).unwrap();
        for &x in &floats {
            f.put(x, ()).unwrap();
        }
        w.commit().unwrap();

        let r = db.begin_read().unwrap();
        let t = r.open_table(INTS).unwrap();
        let all: Vec<(i64, u16)> = t.iter().collect::<Result<_, _>>().unwrap();
        prop_assert_eq!(&all, &model.iter().map(|(k, v)| (*k, *v)).collect::<Vec<_>>());
        let rev: Vec<(i64, u16)> = t.iter_rev().collect::<Result<_, _>>().unwrap();
        prop_assert_eq!(rev, all.iter().rev().copied().collect::<Vec<_>>());
        let (lo, hi) = (lo.min(hi), lo.max(hi));
        for (start, end) in [
            (Bound::Included(lo), Bound::Excluded(hi)),
            (Bound::Excluded(lo), Bound::Included(hi)),
            (Bound::Unbounded, Bound::Included(hi)),
            (Bound::Included(lo), Bound::Unbounded),
        ] {
            let got: Vec<(i64, u16)> = t.range((start, end)).collect::<Result<_, _>>().unwrap();
            let want: Vec<(i64, u16)> = model.range((start, end)).map(|(k, v)| (*k, *v)).collect();
            prop_assert_eq!(&got, &want);
            let got_rev: Vec<(i64, u16)> = t.range_rev((start, end)).collect::<Result<_, _>>().unwrap();
            prop_assert_eq!(got_rev, want.iter().rev().copied().collect::<Vec<_>>());
        }
        prop_assert_eq!(t.first().unwrap(), model.iter().next().map(|(k, v)| (*k, *v)));
        prop_assert_eq!(t.last().unwrap(), model.iter().next_back().map(|(k, v)| (*k, *v)));
        prop_assert_eq!(
            t.seek(lo).unwrap(),
            model.range(lo..).next().map(|(k, v)| (*k, *v))
        );

        let mut bits: Vec<u64> = floats.iter().map(|x| x.to_bits()).collect();
        bits.sort_by(|a, b| f64::from_bits(*a).total_cmp(&f64::from_bits(*b)));
        bits.dedup();
        let got: Vec<u64> = r.open_table(FLOATS).unwrap().iter().map(|e| e.map(|(k, _)| k.to_bits())).collect::<Result<_, _>>().unwrap();
        prop_assert_eq!(got, bits);
    }
}

#[test]
fn bulk_edits_take_typed_bounds_and_predicates() {
    const T: TableDefinition<u32, u32> = TableDefinition::new("t");
    let dir = tempfile::tempdir().unwrap();
    for log in [false, true] {
        let db = Database::open(
            dir.path().join(format!("db{log}")),
            Options::default().log(log),
        )
        .unwrap();
        let mut w = db.begin_write().unwrap();
        let mut t = w.open_table(T).unwrap();
        for i in 0..1000 {
            t.append(i, i % 7).unwrap();
        }
        assert!(matches!(t.append(5, 0), Err(Error::AppendOutOfOrder)));
        assert_eq!(t.delete_range(100..=199).unwrap(), 100);
        assert!(t.delete(0).unwrap());
        assert!(!t.delete(0).unwrap());
        assert_eq!(t.retain(|k, v| v != 0 || k < 50).unwrap(), 121);
        let left = t.len().unwrap();
        assert_eq!(left, 1000 - 100 - 1 - 121);
        w.commit().unwrap();
        let r = db.begin_read().unwrap();
        let t = r.open_table(T).unwrap();
        assert_eq!(t.len().unwrap(), left);
        assert_eq!(t.range(100..200).count(), 0);
        assert!(t
            .iter()
            .all(|e| matches!(e, Ok((k, v)) if v != 0 || k < 50)));
        drop(r);
        let mut w = db.begin_write().unwrap();
        assert_eq!(w.open_table(T).unwrap().clear().unwrap(), left);
        w.commit().unwrap();
        assert!(db
            .begin_read()
            .unwrap()
            .open_table(T)
            .unwrap()
            .is_empty()
            .unwrap());
    }
}

#[test]
fn the_recorded_types_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir, false);
    let mut w = db.begin_write().unwrap();
    w.open_table(BY_ID).unwrap().put(1, "one").unwrap();
    w.commit().unwrap();

    // Types that read each other's bytes share an encoding name.
    const AS_STRING: TableDefinition<u64, String> = TableDefinition::new("by_id");
    let r = db.begin_read().unwrap();
    assert_eq!(
        r.open_table(AS_STRING).unwrap().get(1).unwrap(),
        Some("one".to_string())
    );

    const WRONG_KEY: TableDefinition<u32, &str> = TableDefinition::new("by_id");
    const WRONG_VALUE: TableDefinition<u64, &[u8]> = TableDefinition::new("by_id");
    match r.open_table(WRONG_KEY) {
        Err(Error::TableTypeMismatch {
            table,
            stored,
            requested,
        }) => {
            assert_eq!(table, "by_id");
            assert_eq!(stored, "u64 -> str");
            assert_eq!(requested, "u32 -> str");
        }
        other => panic!("expected a type mismatch, got {:?}", other.err()),
    }
    let err = r.open_table(WRONG_VALUE).err().unwrap();
    assert!(err.to_string().contains("u64 -> str"), "{err}");
    drop(r);
    let mut w = db.begin_write().unwrap();
    assert!(matches!(
        w.open_table(WRONG_VALUE),
        Err(Error::TableTypeMismatch { .. })
    ));
    // The failed open left the transaction usable.
    w.open_table(BY_ID).unwrap().put(2, "two").unwrap();
    w.commit().unwrap();

    // A read transaction does not create tables.
    const MISSING: TableDefinition<u64, u64> = TableDefinition::new("missing");
    assert!(matches!(
        db.begin_read().unwrap().open_table(MISSING),
        Err(Error::TableNotFound(t)) if t == "missing"
    ));
    const BAD_NAME: TableDefinition<u64, u64> = TableDefinition::new("");
    assert!(matches!(
        db.begin_write().unwrap().open_table(BAD_NAME),
        Err(Error::InvalidTableName(_))
    ));
}

#[test]
fn bytes_a_type_cannot_read_are_decode_errors() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir, false);
    // A table written through the byte API has no type record: any types open it.
    let mut w = db.begin_write().unwrap();
    w.create_table("raw").unwrap();
    let mut t = w.table("raw").unwrap();
    t.put(&5u64.to_be_bytes(), b"abc").unwrap();
    t.put(b"short", &[0xff]).unwrap();
    w.commit().unwrap();

    const AS_U64: TableDefinition<u64, u64> = TableDefinition::new("raw");
    let r = db.begin_read().unwrap();
    let t = r.open_table(AS_U64).unwrap();
    assert!(matches!(t.get(5), Err(Error::Decode(_))));
    let mut it = t.iter();
    assert!(matches!(it.next(), Some(Err(Error::Decode(_)))));
    assert!(it.next().is_none(), "a typed range ends after an error");
    assert!(matches!(t.last(), Err(Error::Decode(_))));

    const AS_STR: TableDefinition<&[u8], &str> = TableDefinition::new("raw");
    let t = r.open_table(AS_STR).unwrap();
    assert_eq!(t.get(&5u64.to_be_bytes()[..]).unwrap(), Some("abc"));
    let err = t.get(&b"short"[..]).unwrap_err();
    assert!(matches!(err, Error::Decode(_)));
    assert!(err.to_string().contains("UTF-8"), "{err}");
    drop(r);

    // retain stops at the first entry it cannot read.
    let mut w = db.begin_write().unwrap();
    let mut t = w.open_table(AS_STR).unwrap();
    assert!(matches!(t.retain(|_, _| false), Err(Error::Decode(_))));
    w.abort();

    // A value JSON cannot hold, and stored bytes that are not JSON of the type.
    type PairMap = HashMap<(u8, u8), u8>;
    const TUPLE_KEYS: TableDefinition<u8, Json<PairMap>> = TableDefinition::new("json");
    let mut w = db.begin_write().unwrap();
    let mut t = w.open_table(TUPLE_KEYS).unwrap();
    let map = HashMap::from([((1, 2), 3)]);
    assert!(matches!(t.put(1, &map), Err(Error::Decode(_))));
    assert_eq!(
        t.len().unwrap(),
        0,
        "a value that did not encode changed nothing"
    );
    t.bytes_mut().put(&[2], b"{not json").unwrap();
    assert!(matches!(t.get(2), Err(Error::Decode(_))));
}

#[test]
fn limits_are_the_byte_api_limits() {
    const T: TableDefinition<&[u8], &[u8]> = TableDefinition::new("t");
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir, true);
    let mut w = db.begin_write().unwrap();
    let mut t = w.open_table(T).unwrap();
    let big = vec![0u8; larchdb::limits::key_bytes_max(db.page_bytes()) + 1];
    assert!(matches!(
        t.put(&big[..], &b"v"[..]),
        Err(Error::KeyTooLarge { .. })
    ));
    assert!(t.is_empty().unwrap());
}
