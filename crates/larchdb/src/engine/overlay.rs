//! The overlay of stage 2 (docs/design/write-path.md): the writes of commits since the last
//! checkpoint, in memory, versioned by commit id, read by snapshot readers before the tree.
//!
//! One writer adds the records of each commit (`insert`), then the engine publishes the commit
//! id; readers look keys up (`get`) at their snapshot's commit id, with no lock and no wait. A
//! hash table of entries (one per table and key) with open addressing; each entry holds its
//! versions newest first. Nothing is removed or changed once a reader can see it: a new
//! version is linked in front of the old ones, a full table is replaced by a larger copy, and
//! every entry, version and retired table lives until the overlay itself is dropped (a
//! checkpoint starts a new overlay; readers keep the old one through an `Arc` while they need
//! it). So a reader holding `&Overlay` may keep any pointer it loaded, and values are returned
//! without a copy.
//!
//! Point lookups through the hash table; scans take a table's entries in key order from
//! `sorted`, which walks the whole table (to be replaced by sorted runs, write-path.md, Plan).
//! Tables are numbered by the checkpoint's catalog (`CatalogCache::table_id`); the entry
//! counts of the tables a commit changed are versions of `COUNTS`, keyed by table number.

use std::hash::{BuildHasher, Hasher};
use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};
use std::sync::Mutex;

/// Slots in a new overlay's table; it doubles when half full.
const SLOTS_MIN: usize = 1024;

/// The table number under which the entry counts of tables are kept: key = the table's number
/// (u64 big-endian), value = its entries (u64 little-endian) after the commit.
pub(crate) const COUNTS: u64 = u64::MAX;

/// A key and what the overlay holds for it at a snapshot (`None`: deleted).
pub(crate) type Visible<'o> = (&'o [u8], Option<&'o [u8]>);

/// A table's number, a key, and a value or a deletion (`None`).
pub(crate) type TableRecord<'o> = (u64, &'o [u8], Option<&'o [u8]>);

/// What the overlay says about a key at a snapshot.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Lookup<'o> {
    /// The overlay has no version of the key visible at the snapshot: read the tree.
    Absent,
    /// Deleted at or before the snapshot, after the tree's version.
    Deleted,
    /// The key's value at the snapshot.
    Value(&'o [u8]),
}

/// One version of a key: written by commit `txn`; `None` is a deletion. Immutable once linked.
struct Version {
    txn: u64,
    value: Option<Box<[u8]>>,
    older: *const Version,
}

/// A table's key and its versions, newest first. `table` and `key` are immutable; `head`
/// changes only by the writer linking a newer version in front.
struct Entry {
    table: u64,
    key: Box<[u8]>,
    head: AtomicPtr<Version>,
}

/// Open addressing over entry pointers (null: empty), linear probing; never has a removal.
struct Slots {
    slots: Box<[AtomicPtr<Entry>]>,
}

impl Slots {
    fn new(n: usize) -> Slots {
        Slots {
            slots: (0..n).map(|_| AtomicPtr::new(ptr::null_mut())).collect(),
        }
    }
}

/// What the overlay owns, and the writer's lock: entries, versions and tables, each boxed so
/// that its address does not change while the vectors grow, dropped with the overlay.
// The boxes are the point: readers hold pointers to the elements, which a `Vec<T>` would move
// when it grows.
#[allow(clippy::vec_box)]
#[derive(Default)]
struct Owned {
    entries: Vec<Box<Entry>>,
    versions: Vec<Box<Version>>,
    tables: Vec<Box<Slots>>,
}

/// The overlay of one checkpoint interval.
pub(crate) struct Overlay {
    /// The current table (owned by `owned.tables`).
    table: AtomicPtr<Slots>,
    /// Entries in the table.
    len: AtomicUsize,
    hasher: foldhash::fast::RandomState,
    owned: Mutex<Owned>,
}

// SAFETY: the raw pointers in `Overlay`, `Entry` and `Version` point into boxes that `owned`
// keeps until the overlay is dropped, and what they point to is never written after it is
// published (release stores), except through atomics. Readers on any thread only load (acquire)
// and read immutable fields; the one writer at a time is serialised by the `owned` mutex.
unsafe impl Send for Overlay {}
unsafe impl Sync for Overlay {}

impl Default for Overlay {
    fn default() -> Overlay {
        Overlay::new()
    }
}

impl Overlay {
    pub(crate) fn new() -> Overlay {
        let first = Box::new(Slots::new(SLOTS_MIN));
        let table = &*first as *const Slots as *mut Slots;
        Overlay {
            table: AtomicPtr::new(table),
            len: AtomicUsize::new(0),
            hasher: foldhash::fast::RandomState::default(),
            owned: Mutex::new(Owned {
                tables: vec![first],
                ..Owned::default()
            }),
        }
    }

    /// Keys (table and key pairs) with at least one version.
    pub(crate) fn len(&self) -> usize {
        self.len.load(Ordering::Acquire)
    }

    fn hash(&self, table: u64, key: &[u8]) -> usize {
        let mut h = self.hasher.build_hasher();
        h.write_u64(table);
        h.write(key);
        h.finish() as usize
    }

    /// The entry of `(table, key)` in `slots`, if any.
    fn find<'o>(&'o self, slots: &'o Slots, table: u64, key: &[u8]) -> Option<&'o Entry> {
        let mask = slots.slots.len() - 1;
        let mut i = self.hash(table, key) & mask;
        loop {
            let p = slots.slots[i].load(Ordering::Acquire);
            if p.is_null() {
                return None;
            }
            // SAFETY: a non-null slot points to an entry boxed in `owned`, alive as long as
            // `self`, fully written before the release store that published it.
            let e = unsafe { &*p };
            if e.table == table && *e.key == *key {
                return Some(e);
            }
            i = (i + 1) & mask;
        }
    }

    /// The version of `(table, key)` visible at snapshot `txn`: the newest written by a commit
    /// no later than `txn`.
    pub(crate) fn get(&self, table: u64, key: &[u8], txn: u64) -> Lookup<'_> {
        // SAFETY: the table pointer always names a table boxed in `owned` (retired tables are
        // kept too), published with a release store.
        let slots = unsafe { &*self.table.load(Ordering::Acquire) };
        let Some(entry) = self.find(slots, table, key) else {
            return Lookup::Absent;
        };
        match Self::visible(entry, txn) {
            None => Lookup::Absent,
            Some(None) => Lookup::Deleted,
            Some(Some(value)) => Lookup::Value(value),
        }
    }

    /// The number of entries of table `table` at snapshot `txn`, if a commit in the overlay
    /// changed it.
    pub(crate) fn count(&self, table: u64, txn: u64) -> Option<u64> {
        match self.get(COUNTS, &table.to_be_bytes(), txn) {
            Lookup::Value(v) if v.len() == 8 => Some(u64::from_le_bytes(v.try_into().ok()?)),
            _ => None,
        }
    }

    /// Every record visible at snapshot `txn`, in no order: each key with the newest version
    /// no later than `txn`. Walks the whole hash table.
    fn visible_records(&self, txn: u64) -> impl Iterator<Item = TableRecord<'_>> {
        // SAFETY: as in `get`.
        let slots = unsafe { &*self.table.load(Ordering::Acquire) };
        slots.slots.iter().filter_map(move |slot| {
            let p = slot.load(Ordering::Acquire);
            if p.is_null() {
                return None;
            }
            // SAFETY: as in `find`.
            let e = unsafe { &*p };
            Self::visible(e, txn).map(|v| (e.table, &*e.key, v))
        })
    }

    /// Every key of `table` with a version visible at snapshot `txn`, in key order, with that
    /// version. Walks the whole hash table: O(overlay) per call.
    pub(crate) fn sorted(&self, table: u64, txn: u64) -> Vec<Visible<'_>> {
        let mut out: Vec<Visible<'_>> = self
            .visible_records(txn)
            .filter(|r| r.0 == table)
            .map(|(_, k, v)| (k, v))
            .collect();
        out.sort_unstable_by(|a, b| a.0.cmp(b.0));
        out
    }

    /// Every record visible at snapshot `txn`, tables' entry counts left out, sorted by table
    /// and key: what a checkpoint applies to the tree.
    pub(crate) fn all(&self, txn: u64) -> Vec<TableRecord<'_>> {
        let mut out = Vec::with_capacity(self.len());
        out.extend(self.visible_records(txn).filter(|r| r.0 != COUNTS));
        out.sort_unstable_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
        out
    }

    /// The version of entry `e` visible at `txn`: `Some(None)` for a deletion, `None` if none.
    fn visible(e: &Entry, txn: u64) -> Option<Option<&[u8]>> {
        let mut v = e.head.load(Ordering::Acquire) as *const Version;
        while !v.is_null() {
            // SAFETY: versions are boxed in `owned`, alive as long as the overlay, immutable
            // once linked (the release store of `head` published them and their `older` links).
            let version = unsafe { &*v };
            if version.txn <= txn {
                return Some(version.value.as_deref());
            }
            v = version.older;
        }
        None
    }

    /// Adds the records of commit `txn`: for each, a value or a deletion (`None`) of
    /// `(table, key)`. Requires: `txn` is newer than every commit inserted before, and is not
    /// yet published to readers (they see it once the engine publishes it).
    pub(crate) fn insert<'a>(
        &self,
        txn: u64,
        records: impl IntoIterator<Item = (u64, &'a [u8], Option<&'a [u8]>)>,
    ) {
        let mut owned = self.owned.lock().unwrap_or_else(|e| e.into_inner());
        for (table, key, value) in records {
            // SAFETY: as in `get`; only this writer (holding `owned`) replaces the table.
            let slots = unsafe { &*self.table.load(Ordering::Acquire) };
            let found = self.find(slots, table, key).map(|e| e as *const Entry);
            let older = match found {
                // SAFETY: as in `find`.
                Some(e) => unsafe { &*e }.head.load(Ordering::Acquire) as *const Version,
                None => ptr::null(),
            };
            debug_assert!(
                older.is_null() || unsafe { &*older }.txn <= txn,
                "commits are inserted in order"
            );
            let version = Box::new(Version {
                txn,
                value: value.map(Box::from),
                older,
            });
            let vp = &*version as *const Version as *mut Version;
            owned.versions.push(version);
            match found {
                // SAFETY: as in `find`. The release store publishes the version.
                Some(e) => unsafe { &*e }.head.store(vp, Ordering::Release),
                None => {
                    let entry = Box::new(Entry {
                        table,
                        key: key.into(),
                        head: AtomicPtr::new(vp),
                    });
                    let ep = &*entry as *const Entry as *mut Entry;
                    owned.entries.push(entry);
                    self.place(slots, ep, table, key);
                    let len = self.len.fetch_add(1, Ordering::AcqRel) + 1;
                    if len * 2 > slots.slots.len() {
                        self.grow(&mut owned, slots);
                    }
                }
            }
        }
    }

    /// Stores new entry `ep` in the first empty slot of its probe sequence.
    fn place(&self, slots: &Slots, ep: *mut Entry, table: u64, key: &[u8]) {
        let mask = slots.slots.len() - 1;
        let mut i = self.hash(table, key) & mask;
        while !slots.slots[i].load(Ordering::Acquire).is_null() {
            i = (i + 1) & mask;
        }
        slots.slots[i].store(ep, Ordering::Release);
    }

    /// Replaces the table by one twice as large holding the same entries; readers still on the
    /// old one find every entry published before they loaded it (nothing is removed from it).
    fn grow(&self, owned: &mut Owned, old: &Slots) {
        let bigger = Box::new(Slots::new(old.slots.len() * 2));
        for slot in old.slots.iter() {
            let p = slot.load(Ordering::Acquire);
            if !p.is_null() {
                // SAFETY: as in `find`.
                let e = unsafe { &*p };
                self.place(&bigger, p, e.table, &e.key);
            }
        }
        let bp = &*bigger as *const Slots as *mut Slots;
        owned.tables.push(bigger);
        self.table.store(bp, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use std::collections::BTreeMap;
    use std::sync::atomic::AtomicU64;
    use std::sync::Arc;

    /// (table, key) -> [(txn, value)] in commit order.
    type Model = BTreeMap<(u64, Vec<u8>), Vec<(u64, Option<Vec<u8>>)>>;
    /// A record as `Overlay::insert` takes it.
    type Record<'a> = (u64, &'a [u8], Option<&'a [u8]>);

    /// Every key's versions, compared with a model at every snapshot, across many growths.
    #[test]
    fn lookups_at_every_snapshot_match_a_model() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(5);
        let o = Overlay::new();
        let mut model = Model::new();
        for txn in 1..=300u64 {
            let mut batch: Vec<(u64, Vec<u8>, Option<Vec<u8>>)> = Vec::new();
            for _ in 0..rng.gen_range(1..40) {
                let table = rng.gen_range(0..3);
                let key = format!("{:06}", rng.gen_range(0..4000)).into_bytes();
                let value = (!rng.gen_bool(0.1)).then(|| vec![txn as u8; rng.gen_range(0..50)]);
                batch.push((table, key, value));
            }
            o.insert(
                txn,
                batch
                    .iter()
                    .map(|(t, k, v)| (*t, k.as_slice(), v.as_deref())),
            );
            for (t, k, v) in batch {
                model.entry((t, k)).or_default().push((txn, v));
            }
        }
        assert_eq!(o.len(), model.len());
        assert!(o.owned.lock().unwrap().tables.len() > 2, "the table grew");
        for ((t, k), versions) in &model {
            for snap in [0u64, 1, 50, 150, 299, 300, 1000] {
                let want = match versions.iter().rev().find(|(txn, _)| *txn <= snap) {
                    None => Lookup::Absent,
                    Some((_, None)) => Lookup::Deleted,
                    Some((_, Some(v))) => Lookup::Value(v),
                };
                assert_eq!(o.get(*t, k, snap), want, "table {t} key {k:?} at {snap}");
            }
        }
        assert_eq!(o.get(7, b"000001", 300), Lookup::Absent);
        // The same key in another table is another entry.
        o.insert(
            301,
            [(0, &b"k"[..], Some(&b"zero"[..])), (1, b"k", Some(b"one"))],
        );
        assert_eq!(o.get(0, b"k", 301), Lookup::Value(b"zero"));
        assert_eq!(o.get(1, b"k", 301), Lookup::Value(b"one"));
        assert_eq!(o.get(1, b"k", 300), Lookup::Absent);
    }

    /// Readers on other threads while the writer inserts and publishes commits: every reader
    /// sees exactly the commits up to the one published when it looked, whole (each commit
    /// writes every counter, and adds one new key), across the table's growths.
    #[test]
    fn readers_beside_the_writer_see_whole_commits() {
        const COUNTERS: u64 = 8;
        const COMMITS: u64 = 6000;
        let o = Arc::new(Overlay::new());
        let published = Arc::new(AtomicU64::new(0));
        let readers: Vec<_> = (0..2)
            .map(|r| {
                let (o, published) = (o.clone(), published.clone());
                std::thread::spawn(move || {
                    let mut rng = rand::rngs::StdRng::seed_from_u64(r);
                    let mut checks = 0u64;
                    loop {
                        let snap = published.load(Ordering::Acquire);
                        for c in 0..COUNTERS {
                            let want = snap.to_le_bytes();
                            match o.get(0, &c.to_be_bytes(), snap) {
                                Lookup::Value(v) => assert_eq!(v, want, "counter {c} at {snap}"),
                                other => assert_eq!(snap, 0, "{other:?} at {snap}"),
                            }
                        }
                        // Key n was added by commit n: present exactly up to the snapshot.
                        let n = rng.gen_range(1..COMMITS + 1);
                        let added = o.get(1, &n.to_be_bytes(), snap);
                        assert_eq!(added == Lookup::Absent, n > snap, "key {n} at {snap}");
                        checks += 1;
                        if snap == COMMITS {
                            return checks;
                        }
                    }
                })
            })
            .collect();
        for txn in 1..=COMMITS {
            let value = txn.to_le_bytes();
            let keys: Vec<[u8; 8]> = (0..COUNTERS).map(|c| c.to_be_bytes()).collect();
            let new_key = txn.to_be_bytes();
            let mut records: Vec<Record> = keys
                .iter()
                .map(|k| (0u64, &k[..], Some(&value[..])))
                .collect();
            records.push((1, &new_key, Some(b"new")));
            o.insert(txn, records);
            published.store(txn, Ordering::Release);
        }
        for r in readers {
            assert!(r.join().unwrap() > 0);
        }
        assert_eq!(o.len(), (COUNTERS + COMMITS) as usize);
    }
}
