//! Compound typed keys and values (tuples, arrays, `Option`) and the typed ranges' API:
//! encodings round-trip and sort as Rust orders the types, zero bytes inside escaped
//! elements are kept, borrowing types are refused where they could not read back, damaged
//! bytes are `Error::Decode`, and ranges (`..`, `.rev()`, `next_back`, typed prefixes) select
//! what a `BTreeMap` selects.

use larchdb::{Database, Error, Options, TableDefinition};
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::ops::Bound;

fn open(dir: &tempfile::TempDir, log: bool) -> Database {
    Database::open(dir.path().join("db"), Options::default().log(log)).unwrap()
}

type Compound = (String, u64, Option<i16>, Vec<u8>);
const COMPOUND: TableDefinition<Compound, [u32; 2]> = TableDefinition::new("compound");

/// Strings and byte strings that often share prefixes and hold zero bytes.
fn text() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop::sample::select(vec!['\0', 'a', 'b', '\u{ff}', 'é']),
        0..4,
    )
    .prop_map(|cs| cs.into_iter().collect())
}

fn blob() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(prop::sample::select(vec![0u8, 1, 0xff, 0x7f]), 0..4)
}

fn key() -> impl Strategy<Value = Compound> {
    (text(), 0u64..4, prop::option::of(-2i16..2), blob())
}

/// Which end each step of a double-ended walk takes.
fn ends() -> impl Strategy<Value = Vec<bool>> {
    prop::collection::vec(any::<bool>(), 0..40)
}

/// Walks `it` taking the ends `ends` names (`true`: the back), then the rest from the front;
/// what it yields in order.
fn walk<T, E: std::fmt::Debug>(
    mut it: impl DoubleEndedIterator<Item = Result<T, E>>,
    ends: &[bool],
) -> Vec<T> {
    let mut out = Vec::new();
    for &back in ends {
        match if back { it.next_back() } else { it.next() } {
            Some(item) => out.push(item.unwrap()),
            None => return out,
        }
    }
    out.extend(it.map(Result::unwrap));
    out
}

/// What the same walk over the model yields.
fn model_walk<T: Clone>(items: &[T], ends: &[bool]) -> Vec<T> {
    let mut it = items.iter().cloned();
    let mut out = Vec::new();
    for &back in ends {
        match if back { it.next_back() } else { it.next() } {
            Some(item) => out.push(item),
            None => return out,
        }
    }
    out.extend(it);
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// Tuples of strings, integers, options and byte strings (zero bytes included) sort as
    /// Rust's tuples do, read back equal, and every range form and walk from both ends
    /// selects what a `BTreeMap` does: committed, and in the writing transaction.
    #[test]
    fn compound_keys_sort_as_the_types_do(
        keys in prop::collection::vec(key(), 0..120),
        lo in key(),
        hi in key(),
        walk_ends in ends(),
        log in any::<bool>(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let db = open(&dir, log);
        let mut model = BTreeMap::new();
        let mut w = db.begin_write().unwrap();
        let mut t = w.open_table(COMPOUND).unwrap();
        for (i, k) in keys.iter().enumerate() {
            let v = [i as u32, k.1 as u32];
            t.put(k, v).unwrap();
            model.insert(k.clone(), v);
        }
        let all: Vec<(Compound, [u32; 2])> = model.iter().map(|(k, v)| (k.clone(), *v)).collect();
        let got: Vec<(Compound, [u32; 2])> = t.iter().collect::<Result<_, _>>().unwrap();
        prop_assert_eq!(&got, &all, "in the writing transaction");
        w.commit().unwrap();

        let r = db.begin_read().unwrap();
        let t = r.open_table(COMPOUND).unwrap();
        let got: Vec<(Compound, [u32; 2])> = t.range(..).collect::<Result<_, _>>().unwrap();
        prop_assert_eq!(&got, &all);
        let (lo, hi) = if lo <= hi { (lo, hi) } else { (hi, lo) };
        for (start, end) in [
            (Bound::Included(lo.clone()), Bound::Excluded(hi.clone())),
            (Bound::Excluded(lo.clone()), Bound::Included(hi.clone())),
            (Bound::Unbounded, Bound::Included(hi.clone())),
            (Bound::Included(lo.clone()), Bound::Unbounded),
            (Bound::Unbounded, Bound::Unbounded),
        ] {
            let want: Vec<(Compound, [u32; 2])> = model
                .range((start.clone(), end.clone()))
                .map(|(k, v)| (k.clone(), *v))
                .collect();
            let got: Vec<_> = t.range((start.clone(), end.clone())).collect::<Result<_, _>>().unwrap();
            prop_assert_eq!(&got, &want);
            let rev: Vec<_> = t.range((start.clone(), end.clone())).rev().collect::<Result<_, _>>().unwrap();
            prop_assert_eq!(rev, want.iter().rev().cloned().collect::<Vec<_>>());
            let got = walk(t.range((start.clone(), end.clone())), &walk_ends);
            prop_assert_eq!(got, model_walk(&want, &walk_ends));
            let reversed: Vec<_> = want.iter().rev().cloned().collect();
            let got = walk(t.range_rev((start.clone(), end.clone())), &walk_ends);
            prop_assert_eq!(got, model_walk(&reversed, &walk_ends));
        }
        for k in model.keys() {
            prop_assert_eq!(t.get(k).unwrap(), model.get(k).copied());
        }
    }

    /// Bytes that are not a compound's encoding are `Error::Decode` (or, by chance, a value
    /// that encodes back to the same bytes), never a panic.
    #[test]
    fn any_bytes_decode_or_fail_cleanly(bytes in prop::collection::vec(any::<u8>(), 0..24)) {
        use larchdb::typed::Value;
        fn check<T: Value>(bytes: &[u8]) {
            match T::from_bytes(bytes) {
                Ok(v) => assert_eq!(T::as_bytes(&v).unwrap().as_ref(), bytes),
                Err(e) => assert!(matches!(e, Error::Decode(_)), "{e}"),
            }
        }
        check::<(String, u64)>(&bytes);
        check::<(&str, &[u8])>(&bytes);
        check::<(Vec<u8>, Option<u8>, String)>(&bytes);
        check::<Option<u16>>(&bytes);
        check::<Option<&str>>(&bytes);
        check::<[u16; 2]>(&bytes);
        check::<[String; 2]>(&bytes);
        check::<((u8, String), u8)>(&bytes);
    }
}

#[test]
fn borrowed_elements_read_without_a_copy_and_refuse_what_they_could_not_read() {
    const EVENTS: TableDefinition<(&str, u64), &[u8]> = TableDefinition::new("events");
    const EVENTS_OWNED: TableDefinition<(String, u64), Vec<u8>> = TableDefinition::new("events");
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir, true);
    let mut w = db.begin_write().unwrap();
    let mut t = w.open_table(EVENTS).unwrap();
    t.put(("ada", 2), &b"b"[..]).unwrap();
    t.put(("ada", 1), &b"a"[..]).unwrap();
    t.put(("ad", 9), &b"c"[..]).unwrap();
    // A zero byte in a borrowed element before the last could not come back as a &str.
    let err = t.put(("a\0b", 1), &b"x"[..]).unwrap_err();
    assert!(matches!(err, Error::Decode(_)), "{err}");
    assert!(err.to_string().contains("String"), "{err}");
    assert_eq!(t.len().unwrap(), 3, "the refused write changed nothing");
    // The owned type reads and writes the same encoding, zero bytes included.
    let mut t = w.open_table(EVENTS_OWNED).unwrap();
    t.put(("a\0b".to_string(), 1), b"x".to_vec()).unwrap();
    w.commit().unwrap();

    let r = db.begin_read().unwrap();
    let t = r.open_table(EVENTS_OWNED).unwrap();
    let keys: Vec<(String, u64)> = t
        .iter()
        .map(|e| e.map(|(k, _)| k))
        .collect::<Result<_, _>>()
        .unwrap();
    let want: Vec<(String, u64)> = [("a\0b", 1), ("ad", 9), ("ada", 1), ("ada", 2)]
        .iter()
        .map(|(s, n)| (s.to_string(), *n))
        .collect();
    assert_eq!(keys, want);
    let t = r.open_table(EVENTS).unwrap();
    // Reading the zero byte's entry as &str is an error that says what to use; the others
    // are views into the pages.
    let mut it = t.iter();
    assert!(matches!(it.next(), Some(Err(Error::Decode(_)))));
    assert!(it.next().is_none());
    let ada: Vec<(&str, u64)> = t
        .range(("ada", 0)..=("ada", u64::MAX))
        .map(|e| e.map(|(k, _)| k))
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(ada, [("ada", 1), ("ada", 2)]);
    assert_eq!(t.get(("ad", 9)).unwrap(), Some(&b"c"[..]));
}

#[test]
fn options_arrays_and_nested_tuples_round_trip_through_a_reopen() {
    const OPT: TableDefinition<Option<u32>, Option<String>> = TableDefinition::new("opt");
    const ARR: TableDefinition<[i16; 3], [&str; 2]> = TableDefinition::new("arr");
    type NestedKey = ((u8, String), i64);
    const NESTED: TableDefinition<NestedKey, (bool, Option<[u8; 2]>)> =
        TableDefinition::new("nested");
    for log in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        {
            let db = open(&dir, log);
            let mut w = db.begin_write().unwrap();
            let mut t = w.open_table(OPT).unwrap();
            t.put(Some(7), None).unwrap();
            t.put(None, Some("none's value".to_string())).unwrap();
            t.put(Some(0), Some(String::new())).unwrap();
            let mut t = w.open_table(ARR).unwrap();
            t.put([1, -1, 0], ["x", "yz"]).unwrap();
            t.put([-5, 9, 9], ["", ""]).unwrap();
            let mut t = w.open_table(NESTED).unwrap();
            t.put(((2, "b\0".to_string()), -1), (true, Some([0, 0])))
                .unwrap();
            t.put(((2, "b".to_string()), 5), (false, None)).unwrap();
            t.put(((1, "zz".to_string()), 0), (true, None)).unwrap();
            w.commit().unwrap();
        }
        let db = open(&dir, log);
        let r = db.begin_read().unwrap();
        let t = r.open_table(OPT).unwrap();
        let got: Vec<_> = t.iter().collect::<Result<_, _>>().unwrap();
        assert_eq!(
            got,
            [
                (None, Some("none's value".to_string())),
                (Some(0), Some(String::new())),
                (Some(7), None)
            ]
        );
        let t = r.open_table(ARR).unwrap();
        let got: Vec<_> = t.iter_rev().collect::<Result<_, _>>().unwrap();
        assert_eq!(got, [([1, -1, 0], ["x", "yz"]), ([-5, 9, 9], ["", ""])]);
        let t = r.open_table(NESTED).unwrap();
        let got: Vec<_> = t.iter().collect::<Result<_, _>>().unwrap();
        assert_eq!(
            got,
            [
                (((1, "zz".to_string()), 0), (true, None)),
                (((2, "b".to_string()), 5), (false, None)),
                (((2, "b\0".to_string()), -1), (true, Some([0, 0]))),
            ]
        );
    }
}

#[test]
fn damaged_compound_bytes_are_decode_errors() {
    use larchdb::typed::Value;
    let cases: [(&str, Result<(), Error>); 6] = [
        ("bad tag", Option::<u8>::from_bytes(&[2, 1]).map(drop)),
        (
            "None with bytes",
            Option::<u8>::from_bytes(&[0, 1]).map(drop),
        ),
        ("short None", Option::<u32>::from_bytes(&[0]).map(drop)),
        (
            "unterminated element",
            <(String, u8)>::from_bytes(b"abc").map(drop),
        ),
        (
            "zero byte that neither escapes nor ends",
            <(String, u8)>::from_bytes(b"a\0\x05\x01").map(drop),
        ),
        (
            "trailing bytes",
            <(u8, u8)>::from_bytes(&[1, 2, 3]).map(drop),
        ),
    ];
    for (what, got) in cases {
        assert!(matches!(got, Err(Error::Decode(_))), "{what}: {got:?}");
    }
    // Stored through the byte API, read typed: an error in the stream, then the end.
    const AS_PAIRS: TableDefinition<(u8, u8), ()> = TableDefinition::new("raw");
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir, false);
    let mut w = db.begin_write().unwrap();
    w.create_table("raw").unwrap();
    w.table("raw").unwrap().put(&[1, 2, 3], b"").unwrap();
    w.commit().unwrap();
    let r = db.begin_read().unwrap();
    let t = r.open_table(AS_PAIRS).unwrap();
    let mut it = t.iter();
    assert!(matches!(it.next_back(), Some(Err(Error::Decode(_)))));
    assert!(it.next().is_none() && it.next_back().is_none());
}

#[test]
fn type_names_are_recorded_and_checked_for_compounds() {
    use larchdb::typed::Value;
    assert_eq!(<(&str, u64)>::type_name(), "(str,u64)");
    assert_eq!(<(String, u64)>::type_name(), <(&str, u64)>::type_name());
    assert_eq!(<(u8,)>::type_name(), "(u8,)");
    assert_eq!(<[u8; 4]>::type_name(), "[u8;4]");
    assert_eq!(Option::<Vec<u8>>::type_name(), "Option<bytes>");
    assert_eq!(<(u32, [u8; 3], Option<u8>)>::fixed_width(), Some(9));
    assert_eq!(<(u32, &str)>::fixed_width(), None);
    const PAIRS: TableDefinition<(u32, u32), ()> = TableDefinition::new("pairs");
    const SWAPPED: TableDefinition<(u32, i32), ()> = TableDefinition::new("pairs");
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir, false);
    let mut w = db.begin_write().unwrap();
    w.open_table(PAIRS).unwrap().put((1, 2), ()).unwrap();
    assert!(matches!(
        w.open_table(SWAPPED),
        Err(Error::TableTypeMismatch { .. })
    ));
}

#[test]
fn typed_prefixes_and_full_ranges_need_no_annotations() {
    const NAMES: TableDefinition<&str, u32> = TableDefinition::new("names");
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir, true);
    let mut w = db.begin_write().unwrap();
    let mut t = w.open_table(NAMES).unwrap();
    for (i, k) in ["app", "apple", "apply", "b", "ap"].into_iter().enumerate() {
        t.put(k, i as u32).unwrap();
    }
    let uncommitted: Vec<&str> = t
        .prefix("app")
        .map(|e| e.map(|(k, _)| k))
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(uncommitted, ["app", "apple", "apply"]);
    assert_eq!(t.range_rev(..).count(), 5);
    assert_eq!(t.delete_range(..).unwrap(), 5);
    w.abort();
}

/// The encodings as bytes: the Python package's `larch.typed` asserts the same vectors
/// (bindings/python/tests/test_typed.py), so that a table written from one reads from the
/// other.
#[test]
fn the_encodings_are_these_bytes() {
    use larchdb::typed::Value;
    fn enc<T: Value>(v: T::SelfType<'_>) -> Vec<u8> {
        T::as_bytes(&v).unwrap().as_ref().to_vec()
    }
    let mut u64_7 = vec![0u8; 7];
    u64_7.push(7);
    assert_eq!(enc::<u64>(7), u64_7);
    assert_eq!(enc::<i8>(-128), b"\x00");
    assert_eq!(enc::<i8>(127), b"\xff");
    assert_eq!(enc::<i32>(-1), b"\x7f\xff\xff\xff");
    assert_eq!(enc::<f64>(-0.0), b"\x7f\xff\xff\xff\xff\xff\xff\xff");
    assert_eq!(enc::<f64>(1.0), b"\xbf\xf0\x00\x00\x00\x00\x00\x00");
    assert_eq!(enc::<bool>(true), b"\x01");
    assert_eq!(enc::<()>(()), b"");
    assert_eq!(enc::<&str>("é"), "é".as_bytes());
    assert_eq!(enc::<Option<u32>>(None), b"\x00\x00\x00\x00\x00");
    assert_eq!(enc::<Option<u32>>(Some(5)), b"\x01\x00\x00\x00\x05");
    assert_eq!(enc::<Option<&str>>(Some("a")), b"\x01a");
    let mut tuple = b"a\x00\xffb\x00\x01".to_vec();
    tuple.extend_from_slice(&1u64.to_be_bytes());
    assert_eq!(enc::<(String, u64)>(("a\0b".to_string(), 1)), tuple);
    assert_eq!(enc::<(&[u8], &str)>((b"", "z")), b"\x00\x01z");
    assert_eq!(enc::<[u16; 2]>([1, 2]), b"\x00\x01\x00\x02");
    assert_eq!(enc::<[u8; 3]>(*b"abc"), b"abc");
    assert_eq!(
        enc::<((u8, &str), i16)>(((1, "x"), -1)),
        b"\x01x\x00\x01\x7f\xff"
    );
    assert_eq!(<((u8, &str), i16)>::type_name(), "((u8,str),i16)");
    assert_eq!(<[u16; 2]>::type_name(), "[u16;2]");
    assert_eq!(<(&[u8], &str)>::type_name(), "(bytes,str)");
}

#[test]
fn bounds_that_do_not_encode_are_the_first_item() {
    const EVENTS: TableDefinition<(&str, u64), ()> = TableDefinition::new("events");
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir, true);
    let mut w = db.begin_write().unwrap();
    let mut t = w.open_table(EVENTS).unwrap();
    t.put(("a", 1), ()).unwrap();
    // A zero byte in a borrowed element before the last does not encode.
    for mut it in [
        t.range(("a\0", 0)..),
        t.range_rev(..=("a\0", 0)),
        t.prefix(("a\0", 0)),
    ] {
        assert!(matches!(it.next_back(), Some(Err(Error::Decode(_)))));
        assert!(it.next().is_none() && it.next_back().is_none());
    }
    assert!(matches!(
        t.delete_range(("a\0", 0)..),
        Err(Error::Decode(_))
    ));
    assert_eq!(t.len().unwrap(), 1);
}
