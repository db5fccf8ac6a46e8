//! Helpers shared by the integration tests (`mod common;` in each).

/// Every entry of a range, copied out, in its order; panics on a read error.
#[allow(dead_code)] // Not every test that has `mod common;` scans.
pub fn collect(it: larchdb::Range<'_>) -> Vec<(Vec<u8>, Vec<u8>)> {
    it.map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())))
        .collect::<Result<_, _>>()
        .unwrap()
}

/// Options for a logged database with a small log (six 1 MiB segments, a checkpoint every
/// MiB), so that checkpoints come often and the log wraps around with room for several of
/// them; no compaction at close, so that a drop stands for a process crash and the next open
/// replays the log.
#[allow(dead_code)] // Not every test that has `mod common;` opens a logged database.
pub fn small_log_options() -> larchdb::Options {
    larchdb::Options::default()
        .log(true)
        .log_segment_bytes(1 << 20)
        .log_segments(6)
        .checkpoint_bytes(1 << 20)
        .compact_on_close(false)
}

/// Opens a database whose data file is `data` and whose log is `log` (fault storages: the
/// test keeps its own handles on them to crash, fail or copy them).
#[allow(dead_code)] // Not every test that has `mod common;` opens a logged database.
pub fn open_with_log(
    data: &larchdb::storage::FaultStorage,
    log: &larchdb::storage::FaultStorage,
    options: larchdb::Options,
) -> larchdb::Result<larchdb::Database> {
    larchdb::Database::open_storage_with_log(
        std::sync::Arc::new(data.clone()),
        std::sync::Arc::new(log.clone()),
        options,
    )
}

/// Creates table `name` in a commit of its own; panics on an error.
#[allow(dead_code)] // Not every test that has `mod common;` creates tables this way.
pub fn create_table(db: &larchdb::Database, name: &str) {
    let mut w = db.begin_write().unwrap();
    w.create_table(name).unwrap();
    w.commit().unwrap();
}

/// Asserts that table `t` holds exactly `expected`: its entry count, a forward scan of keys
/// and values, and a reverse scan of keys. `what` names the table in the messages.
#[allow(dead_code)] // Not every test that has `mod common;` checks against a model.
pub fn assert_holds(
    t: &larchdb::ReadTable<'_>,
    expected: &std::collections::BTreeMap<Vec<u8>, Vec<u8>>,
    what: &str,
) {
    assert_eq!(t.len().unwrap(), expected.len() as u64, "{what}: count");
    let got = collect(t.iter());
    let want: Vec<(Vec<u8>, Vec<u8>)> = expected
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    assert!(
        got == want,
        "{what}: scan differs ({} vs {} entries)",
        got.len(),
        want.len()
    );
    let rev: Vec<Vec<u8>> = t.iter_rev().map(|e| e.unwrap().0.to_vec()).collect();
    assert!(
        rev.iter().rev().eq(expected.keys()),
        "{what}: reverse scan differs"
    );
}

/// The keys of `model` within `lo..hi`, as a range delete should find them: none for bounds no
/// key can satisfy (`BTreeMap::range` panics on those; the engine deletes nothing).
#[allow(dead_code)] // Not every test that has `mod common;` deletes ranges.
pub fn keys_in(
    model: &std::collections::BTreeMap<Vec<u8>, Vec<u8>>,
    lo: std::ops::Bound<&[u8]>,
    hi: std::ops::Bound<&[u8]>,
) -> Vec<Vec<u8>> {
    use std::ops::Bound;
    let empty = match (lo, hi) {
        (Bound::Included(a), Bound::Included(b)) => a > b,
        (Bound::Unbounded, _) | (_, Bound::Unbounded) => false,
        (Bound::Included(a) | Bound::Excluded(a), Bound::Included(b) | Bound::Excluded(b)) => {
            a >= b
        }
    };
    if empty {
        return Vec::new();
    }
    model
        .range::<[u8], _>((lo, hi))
        .map(|(k, _)| k.clone())
        .collect()
}

/// A table: its name, its properties and its entries.
#[allow(dead_code)] // Only the tests that compare whole databases use it.
pub type Table = (String, Vec<u8>, Vec<(Vec<u8>, Vec<u8>)>);

/// Every table of the newest commit, by name, with its properties and entries.
#[allow(dead_code)]
pub fn contents(db: &larchdb::Database) -> Vec<Table> {
    let r = db.begin_read().unwrap();
    r.list_tables()
        .unwrap()
        .into_iter()
        .map(|name| {
            let props = r.table_properties(&name).unwrap().to_vec();
            let entries = collect(r.table(&name).unwrap().iter());
            (name, props, entries)
        })
        .collect()
}
