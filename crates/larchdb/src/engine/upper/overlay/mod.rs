//! The overlay of stage 2 (docs/design/write-path.md): the writes of commits since the last
//! checkpoint, in memory, versioned by commit id, read by snapshot readers before the tree.
//!
//! One writer adds the records of each commit (`insert_marked`), then the engine publishes the commit
//! id; readers look keys up (`get`) at their snapshot's commit id, with no lock and no wait. A
//! hash table of entries (one per table and key) with open addressing; each entry holds its
//! versions newest first. Nothing is removed or changed once a reader can see it: a new
//! version is linked in front of the old ones, a full table is replaced by a larger copy, and
//! every entry, version and retired table lives until the overlay itself is dropped (a
//! checkpoint starts a new overlay; readers keep the old one through an `Arc` while they need
//! it). So a reader holding `&Overlay` may keep any pointer it loaded, and values are returned
//! without a copy.
//!
//! Point lookups through the hash table. Scans (`scan`) go through an index of sorted runs
//! of the entries, built by the readers that scan, not by the writer: the entries inserted
//! since the last scan are sorted into a new run, and runs of similar length are merged, so a
//! scan costs the sort of what is new since the last one plus a binary search per run, not a
//! sort of the whole overlay (docs/design/write-path.md, "The overlay").
//! Tables are numbered by the checkpoint's catalog (`CatalogCache::table_id`); the tables'
//! entry counts are not records here but versions in the snapshot's count log
//! (`engine::counts`).

use crate::error::Result;
use crate::pager::PageRef;
use std::cmp::Ordering as Order;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::ops::Bound;
use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

mod memory;
mod scan;

pub(crate) use self::memory::Spare;
use self::memory::*;
use self::scan::*;
pub(crate) use self::scan::{Gathered, Scan};

/// Slots in a new overlay's table; it doubles when three quarters full (`overfull`).
const SLOTS_MIN: usize = 1024;

/// A key and what the overlay holds for it at a snapshot (`None`: deleted).
pub(crate) type Visible<'o> = (&'o [u8], Option<&'o [u8]>);

/// A table's number, a key, and a value or a deletion (`None`).
/// A table's number, a key, a value or a deletion (`None`), and the run the value's commit
/// wrote it into (id 0: none; docs/design/large-values.md).
pub(crate) type TableRecord<'o> = (u64, &'o [u8], Option<&'o [u8]>, PageRef);

/// A record as a commit inserts it (`Overlay::insert_marked`): table, key, value (`None`: a
/// deletion), whether a blind write counted the key as new, and the page id of the run the
/// commit wrote the value into (0: none; docs/design/large-values.md).
pub(crate) type Inserted<'a> = (u64, &'a [u8], Option<&'a [u8]>, bool, u64);

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

/// One version of a key, written by commit `txn`, in the overlay's arena: this header, then
/// `value_len` bytes of value (`DELETED`: a deletion, no bytes), and, where `value_len` has
/// `WITH_RUN`, the page id (u64, unaligned) of the run the commit wrote the value into
/// (docs/design/large-values.md; the run's txn is the version's). Immutable once linked.
#[repr(C)]
struct Version {
    txn: u64,
    older: *const Version,
    value_len: u32,
}

/// `Version::value_len` of a deletion (values are at most `VALUE_BYTES_MAX`, 1 GiB).
const DELETED: u32 = u32::MAX;

/// Bit of `Version::value_len`: the value's run follows it. Values are at most 1 GiB (2^30),
/// so no length has it, and no length with it is `DELETED`, which is compared whole first.
const WITH_RUN: u32 = 1 << 31;

/// A table's key and its versions, newest first, in the arena: this header, then `key_len`
/// bytes of key. `table` and the key are immutable; `head` changes only by the writer
/// linking a newer version in front.
#[repr(C)]
struct Entry {
    table: u64,
    head: AtomicPtr<Version>,
    key_len: u32,
    /// Whether the key was in the tree when a checkpoint by slices merged it
    /// (`Gathered::note_in_tree`): `IN_TREE_UNKNOWN` until then. Kept for blind writes' counts
    /// (`blind_in_tree`), which a look in the tree could no longer give once the slice is in.
    /// In the header's padding: no entry grows.
    in_tree: AtomicU8,
}

// The flag lies in what was the header's padding.
const _: () = assert!(size_of::<Entry>() == 24);

/// `Entry::in_tree` before a merge noted it.
const IN_TREE_UNKNOWN: u8 = 0;
/// `Entry::in_tree`: the merge found the key in the tree.
const IN_TREE_YES: u8 = 1;
/// `Entry::in_tree`: the merge did not find the key in the tree.
const IN_TREE_NO: u8 = 2;

/// The key that follows entry `e`.
///
/// # Safety
/// `e` points to an entry written by `new_entry` (`Overlay::insert_marked`), in an arena that outlives `'o`.
#[inline]
unsafe fn entry_key<'o>(e: *const Entry) -> &'o [u8] {
    // SAFETY: the caller's; the key was written right after the header, in the same
    // allocation, which `e` was derived from.
    unsafe {
        std::slice::from_raw_parts(
            (e as *const u8).add(size_of::<Entry>()),
            (*e).key_len as usize,
        )
    }
}

/// The value that follows version `v`, or `None` for a deletion.
///
/// # Safety
/// As `entry_key`, for a version.
#[inline]
unsafe fn version_value<'o>(v: *const Version) -> Option<&'o [u8]> {
    // SAFETY: the caller's, as in `entry_key`.
    unsafe {
        let len = (*v).value_len;
        (len != DELETED).then(|| {
            std::slice::from_raw_parts(
                (v as *const u8).add(size_of::<Version>()),
                (len & !WITH_RUN) as usize,
            )
        })
    }
}

/// The page id of the run version `v`'s value was written into by its commit, or 0.
///
/// # Safety
/// As `entry_key`, for a version.
#[inline]
unsafe fn version_run(v: *const Version) -> u64 {
    // SAFETY: the caller's; a version with `WITH_RUN` was written with the id after its value.
    unsafe {
        let len = (*v).value_len;
        if len == DELETED || len & WITH_RUN == 0 {
            return 0;
        }
        let at = (v as *const u8).add(size_of::<Version>() + (len & !WITH_RUN) as usize);
        (at as *const u64).read_unaligned()
    }
}

/// One slot of the hash table: an entry. Empty while null; written once. The entry's hash is
/// not kept beside it: a probe reads the slot only where the control byte matches the key's
/// fingerprint, so a slot of 8 bytes reads the entry of another key one time in 128, where
/// one of 16 bytes (the hash beside the pointer) would not, and the table is half the size
/// (the slots and the tables they grew out of were about half of what the overlays held
/// for 8-byte keys with no value).
struct Slot {
    entry: AtomicPtr<Entry>,
}

/// A table grows (doubles) once its entries would fill more than `FILL_NUM / FILL_DEN` of its
/// slots. A probe walks control bytes, 64 to a cache line: at three quarters full, a key the
/// table lacks costs about eight of them (linear probing), the same line mostly.
const FILL_NUM: usize = 3;
const FILL_DEN: usize = 4;

/// Whether `entries` entries overfill a table of `slots` slots (`FILL_NUM / FILL_DEN`).
#[inline]
fn overfull(entries: usize, slots: usize) -> bool {
    entries * FILL_DEN > slots * FILL_NUM
}

/// The commit that made entry `e`: its oldest version's.
///
/// # Safety
/// As `entry_key`.
unsafe fn made_by(e: *const Entry) -> u64 {
    // SAFETY: the caller's; versions are immutable once linked, and an entry always has one.
    unsafe {
        let mut v = (*e).head.load(Ordering::Acquire) as *const Version;
        while !(*v).older.is_null() {
            v = (*v).older;
        }
        (*v).txn
    }
}

/// A slot's control byte for an entry of hash `hash`: the hash's top 7 bits (the slot's
/// index comes from its low bits), and the high bit set, so that it is never 0 (empty).
#[inline]
fn fingerprint(hash: u64) -> u8 {
    (hash >> 57) as u8 | 0x80
}

/// A table's blind entries (`Overlay::insert_marked`), in the order of the commits that made
/// them, and how many of the first ones were found in the tree.
#[derive(Default)]
struct BlindList {
    /// The entries. The commit that made each is its oldest version's (`made_by`), read only
    /// for a snapshot older than the last of them: kept beside each, it was a third of the
    /// list's memory, which every blind write adds to (tupl's updates, YCSB's).
    entries: Vec<*const Entry>,
    /// The commit that made the last entry.
    last: u64,
    /// `present[i]`: how many of `entries[..=i]` have their key in the tree; as long as the
    /// prefix of entries resolved so far.
    present: Vec<u64>,
}

/// The overlay of one checkpoint interval.
pub(crate) struct Overlay {
    /// The current table (owned by `owned.tables`).
    table: AtomicPtr<Slots>,
    /// Entries in the table.
    len: AtomicUsize,
    /// The memory the overlay holds, as of its last commit (`bytes`).
    bytes: AtomicUsize,
    /// The first commit inserted (0: none yet): the oldest its records are of.
    first_txn: AtomicU64,
    hasher: foldhash::fast::RandomState,
    owned: Mutex<Owned>,
    /// The entries in key order, for scans (`index`); locked before `owned`, never after.
    index: Mutex<Arc<Index>>,
}

// SAFETY: the raw pointers in `Overlay`, `Slot`, `Entry`, `Version` and the `blind` lists'
// entries point into the arena or the boxed tables that `owned` keeps until the overlay is dropped, and what they point to is
// never written after it is published (release stores), except through atomics. Readers on
// any thread only load (acquire) and read immutable fields; the one writer at a time is
// serialised by the `owned` mutex.
unsafe impl Send for Overlay {}

unsafe impl Sync for Overlay {}

impl Drop for Overlay {
    fn drop(&mut self) {
        let owned = self.owned.get_mut().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = &owned.arena.spare {
            s.note_held(*self.bytes.get_mut(), 0);
        }
    }
}

impl Default for Overlay {
    fn default() -> Overlay {
        Overlay::new()
    }
}

/// Equal byte strings, compared inline 8 bytes at a time (a call to `memcmp` costs more than
/// comparing a 16-byte key). The chunks are compared as numbers, and the tail byte by byte:
/// an array's or a slice's `==` calls `memcmp` (2% of a one-put commit's samples).
#[inline(always)]
fn bytes_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let (a8, at) = a.as_chunks::<8>();
    let (b8, bt) = b.as_chunks::<8>();
    a8.iter()
        .zip(b8)
        .all(|(x, y)| u64::from_ne_bytes(*x) == u64::from_ne_bytes(*y))
        && at.iter().zip(bt).all(|(x, y)| x == y)
}

impl Overlay {
    /// An empty overlay with memory of its own.
    pub(crate) fn new() -> Overlay {
        Overlay::with_spare(None)
    }

    /// An empty overlay with memory of its own whose table holds `entries` without growing
    /// (replay, which knows how many records it brings: growing rehashes every entry, and a
    /// prefetched slot is only right in the table that stays).
    pub(crate) fn with_capacity(entries: usize) -> Overlay {
        let slots = (entries.saturating_mul(FILL_DEN) / FILL_NUM + 1).checked_next_power_of_two();
        Overlay::with_table(
            None,
            Box::new(Slots::new(slots.unwrap_or(0).max(SLOTS_MIN))),
        )
    }

    /// An empty overlay that draws on the memory `spare` holds (if any) as it grows, and
    /// leaves its own there when it is dropped. It starts with the smallest table: the
    /// spare's table goes to the overlay whose table first outgrows its own (`grow`), the
    /// slice being written, not to whichever overlay a recut makes first (in a sequential
    /// load, one that never gets a record, whose idle table would count in the overlays'
    /// memory and make checkpoints due early).
    pub(crate) fn with_spare(spare: Option<Arc<Spare>>) -> Overlay {
        Overlay::with_table(spare, Box::new(Slots::new(SLOTS_MIN)))
    }

    fn with_table(spare: Option<Arc<Spare>>, first: Box<Slots>) -> Overlay {
        let table = &*first as *const Slots as *mut Slots;
        if let Some(s) = &spare {
            s.note_held(0, first.bytes());
        }
        Overlay {
            table: AtomicPtr::new(table),
            len: AtomicUsize::new(0),
            first_txn: AtomicU64::new(0),
            hasher: foldhash::fast::RandomState::default(),
            bytes: AtomicUsize::new(first.bytes()),
            owned: Mutex::new(Owned {
                table_bytes: first.bytes(),
                tables: vec![first],
                arena: Arena {
                    spare,
                    ..Arena::default()
                },
                order: Vec::new(),
                blind: HashMap::new(),
                blind_bytes: 0,
                replaced_runs: Vec::new(),
            }),
            index: Mutex::new(Arc::default()),
        }
    }

    /// How many keys of `table` that blind writes of commits up to `txn` counted as new were
    /// in the tree already (`in_tree` looks one up, unless a checkpoint by slices noted the
    /// answer when it merged the key): the table's entry count at `txn` is the overlay's
    /// (`count`) minus this. Each key is looked up once, by the first caller that
    /// needs it; later calls reuse the answer. The lookups run without the overlay's lock (the
    /// writer's, `owned`), so that a reader resolving many keys never holds up the writer's
    /// next commit.
    pub(crate) fn blind_in_tree(
        &self,
        table: u64,
        txn: u64,
        mut in_tree: impl FnMut(&[u8]) -> Result<bool>,
    ) -> Result<u64> {
        loop {
            let (start, todo): (usize, Vec<*const Entry>) = {
                let owned = self.owned.lock().unwrap_or_else(|e| e.into_inner());
                let Some(list) = owned.blind.get(&table) else {
                    return Ok(0);
                };
                let upto = if txn >= list.last {
                    list.entries.len()
                } else {
                    // SAFETY: as in `find`: entries live in the arena as long as the overlay.
                    list.entries
                        .partition_point(|&e| unsafe { made_by(e) } <= txn)
                };
                if upto == 0 {
                    return Ok(0);
                }
                if list.present.len() >= upto {
                    return Ok(list.present[upto - 1]);
                }
                let start = list.present.len();
                (start, list.entries[start..upto].to_vec())
            };
            let mut found = Vec::with_capacity(todo.len());
            for e in todo {
                // SAFETY: as in `find`: entries live in the arena as long as the overlay.
                let noted = unsafe { &(*e).in_tree }.load(Ordering::Acquire);
                found.push(match noted {
                    IN_TREE_YES => true,
                    IN_TREE_NO => false,
                    // SAFETY: as above.
                    _ => in_tree(unsafe { entry_key(e) })?,
                });
            }
            let mut owned = self.owned.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(list) = owned.blind.get_mut(&table) {
                // Another caller may have resolved them meanwhile (the same answers).
                if list.present.len() == start {
                    let mut n = list.present.last().copied().unwrap_or(0);
                    for f in found {
                        n += u64::from(f);
                        list.present.push(n);
                    }
                }
            }
        }
    }

    /// The tables blind writes made entries of (`blind_in_tree`), ascending.
    pub(crate) fn blind_tables(&self) -> Vec<u64> {
        let owned = self.owned.lock().unwrap_or_else(|e| e.into_inner());
        let mut tables: Vec<u64> = owned.blind.keys().copied().collect();
        tables.sort_unstable();
        tables
    }

    /// Keys (table and key pairs) with at least one version.
    pub(crate) fn len(&self) -> usize {
        self.len.load(Ordering::Acquire)
    }

    #[inline]
    pub(crate) fn hash(&self, table: u64, key: &[u8]) -> u64 {
        key_hash(&self.hasher, table, key)
    }

    /// Asks the CPU for the slot where the search for a key of hash `hash` starts (a read
    /// about to probe another overlay first: `upper::Upper::get`).
    #[inline]
    pub(crate) fn prefetch_hashed(&self, hash: u64) {
        let (slots, i) = self.home(hash);
        prefetch(&slots.control[i] as *const AtomicU8 as *const u8);
    }

    /// `prefetch_hashed`, and the slot itself, which an insert writes.
    #[inline]
    fn prefetch_for_insert(&self, hash: u64) {
        let (slots, i) = self.home(hash);
        prefetch(&slots.control[i] as *const AtomicU8 as *const u8);
        prefetch(&slots.slots[i] as *const Slot as *const u8);
    }

    /// The current table, and the slot where the search for a key of hash `hash` starts.
    #[inline]
    fn home(&self, hash: u64) -> (&Slots, usize) {
        // SAFETY: as in `get`: the pointer names a table the overlay owns while it lives.
        let slots = unsafe { &*self.table.load(Ordering::Acquire) };
        (slots, hash as usize & (slots.slots.len() - 1))
    }

    /// Asks the CPU for the slot where `(table, key)`'s search starts, so that the commit
    /// about to insert it finds the line in the cache: a large overlay's table is a slot
    /// array of many MiB read at random, and its load missed the cache on nearly every
    /// one-put commit (two thirds of `commit_logged`'s own time, 1M fillseq). Called by the
    /// writer before it encodes and appends the commit's record, which gives the line time
    /// to arrive.
    #[inline]
    pub(crate) fn prefetch_slot(&self, table: u64, key: &[u8]) {
        self.prefetch_for_insert(self.hash(table, key));
    }

    /// The entry of `(table, key)` in `slots`, or the index of the empty slot where it would
    /// go.
    #[inline]
    fn find(
        &self,
        slots: &Slots,
        hash: u64,
        table: u64,
        key: &[u8],
    ) -> std::result::Result<*const Entry, usize> {
        let mask = slots.slots.len() - 1;
        let wanted = fingerprint(hash);
        let mut i = hash as usize & mask;
        loop {
            // The acquire load pairs with `Slots::fill`'s release store: a byte set means
            // the slot is written.
            let control = slots.control[i].load(Ordering::Acquire);
            if control == 0 {
                return Err(i);
            }
            if control == wanted {
                let p = slots.slots[i].entry.load(Ordering::Acquire);
                // SAFETY: a non-null slot points to an entry in the arena, alive as long as
                // `self`, fully written before the release store that published it.
                if !p.is_null() && unsafe { (*p).table == table && bytes_eq(entry_key(p), key) } {
                    return Ok(p);
                }
            }
            i = (i + 1) & mask;
        }
    }

    /// The version of `(table, key)` visible at snapshot `txn`: the newest written by a commit
    /// no later than `txn`.
    #[inline]
    pub(crate) fn get(&self, table: u64, key: &[u8], txn: u64) -> Lookup<'_> {
        self.get_hashed(self.hash(table, key), table, key, txn)
    }

    /// `get`, with the key's hash (`hash`) already made.
    pub(crate) fn get_hashed(&self, hash: u64, table: u64, key: &[u8], txn: u64) -> Lookup<'_> {
        // SAFETY: the table pointer always names a table boxed in `owned` (retired tables are
        // kept too), published with a release store.
        let slots = unsafe { &*self.table.load(Ordering::Acquire) };
        let Ok(entry) = self.find(slots, hash, table, key) else {
            return Lookup::Absent;
        };
        // SAFETY: as in `find`.
        match unsafe { Self::visible(entry, txn) } {
            None => Lookup::Absent,
            Some(None) => Lookup::Deleted,
            Some(Some(value)) => Lookup::Value(value),
        }
    }

    /// How many slot tables the overlay has had (1 until it first grew).
    #[cfg(test)]
    pub(crate) fn tables(&self) -> usize {
        self.owned.lock().map_or(0, |o| o.tables.len())
    }

    /// The version of entry `e` visible at `txn`: `Some(None)` for a deletion, `None` if none.
    ///
    /// # Safety
    /// `e` is an entry of this overlay (as `find` returns), and `'o` no longer than its life.
    unsafe fn visible<'o>(e: *const Entry, txn: u64) -> Option<Option<&'o [u8]>> {
        // SAFETY: the caller's.
        let mut v = unsafe { &(*e).head }.load(Ordering::Acquire) as *const Version;
        while !v.is_null() {
            // SAFETY: versions live in the arena as long as the overlay, immutable once
            // linked (the release store of `head` published them and their `older` links).
            unsafe {
                if (*v).txn <= txn {
                    return Some(version_value(v));
                }
                v = (*v).older;
            }
        }
        None
    }

    /// `visible`, with the run the version's commit wrote its value into (id 0: none).
    ///
    /// # Safety
    /// As `visible`.
    unsafe fn visible_run<'o>(e: *const Entry, txn: u64) -> Option<(Option<&'o [u8]>, PageRef)> {
        // SAFETY: the caller's, as in `visible`.
        let mut v = unsafe { &(*e).head }.load(Ordering::Acquire) as *const Version;
        while !v.is_null() {
            // SAFETY: as in `visible`.
            unsafe {
                if (*v).txn <= txn {
                    return Some((version_value(v), PageRef::new(version_run(v), (*v).txn)));
                }
                v = (*v).older;
            }
        }
        None
    }

    /// The first commit inserted into this overlay, if any.
    pub(crate) fn first_txn(&self) -> Option<u64> {
        Some(self.first_txn.load(Ordering::Relaxed)).filter(|&t| t != 0)
    }

    /// The runs (first page, pages at `page_bytes`) that the versions of this overlay name,
    /// whatever their snapshots: pages neither in a tree nor free until a merge takes them
    /// (`Database::verify`).
    pub(crate) fn runs(&self, page_bytes: usize) -> Vec<(u64, u64)> {
        let owned = self.owned.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = Vec::new();
        for &e in &owned.order {
            // SAFETY: as in `find`: entries and their versions live as long as the overlay.
            unsafe {
                let mut v = (*e).head.load(Ordering::Acquire) as *const Version;
                while !v.is_null() {
                    let run = version_run(v);
                    if run != 0 {
                        let len = ((*v).value_len & !WITH_RUN) as usize;
                        out.push((run, crate::layout::overflow::pages_for(len, page_bytes)));
                    }
                    v = (*v).older;
                }
            }
        }
        out
    }

    /// The runs of versions that a newer version of the same key replaced in this overlay
    /// (`Owned::replaced_runs`), with their tables, keys and value lengths: what the merge of
    /// this overlay frees, beside the runs of the cells it replaces.
    pub(crate) fn replaced_runs(&self) -> Vec<(u64, &[u8], PageRef, usize)> {
        let owned = self.owned.lock().unwrap_or_else(|e| e.into_inner());
        owned
            .replaced_runs
            .iter()
            // SAFETY: the entries live in the arena as long as the overlay (as in `find`).
            .map(|&(e, run, len)| unsafe { ((*e).table, entry_key(e), run, len) })
            .collect()
    }

    /// Adds the records of commit `txn`: for each, a value or a deletion (`None`) of
    /// `(table, key)`. Requires: `txn` is newer than every commit inserted before, and is not
    /// yet published to readers (they see it once the engine publishes it).
    #[cfg(test)]
    pub(crate) fn insert<'a>(
        &self,
        txn: u64,
        records: impl IntoIterator<Item = (u64, &'a [u8], Option<&'a [u8]>)>,
    ) {
        self.insert_marked(
            txn,
            records.into_iter().map(|(t, k, v)| (t, k, v, false, 0)),
        );
    }

    /// `insert`, with each record marked if a blind write counted its key as new without
    /// knowing (see `blind_in_tree`); such a key has no entry yet; and with the page id of the
    /// run its commit wrote the value into, or 0 (`Inserted`).
    pub(crate) fn insert_marked<'a>(
        &self,
        txn: u64,
        records: impl IntoIterator<Item = Inserted<'a>>,
    ) {
        let mut owned = self.owned.lock().unwrap_or_else(|e| e.into_inner());
        let owned = &mut *owned;
        if self.first_txn.load(Ordering::Relaxed) == 0 {
            self.first_txn.store(txn, Ordering::Relaxed);
        }
        for (table, key, value, counted_new, run) in records {
            // SAFETY: as in `get`; only this writer (holding `owned`) replaces the table.
            let slots = unsafe { &*self.table.load(Ordering::Acquire) };
            let hash = self.hash(table, key);
            let found = self.find(slots, hash, table, key);
            let older = match found {
                // SAFETY: as in `find`.
                Ok(e) => unsafe { &(*e).head }.load(Ordering::Acquire) as *const Version,
                Err(_) => ptr::null(),
            };
            debug_assert!(
                older.is_null() || unsafe { (*older).txn } <= txn,
                "commits are inserted in order"
            );
            // SAFETY: `older`, if not null, is a version of this overlay (as in `visible`).
            let replaced = match older.is_null() {
                true => PageRef::default(),
                false => unsafe { PageRef::new(version_run(older), (*older).txn) },
            };
            let vp = new_version(&mut owned.arena, txn, older, value, run);
            match found {
                // SAFETY: as in `find`. The release store publishes the version.
                Ok(e) => {
                    unsafe { &(*e).head }.store(vp, Ordering::Release);
                    if !replaced.is_none() {
                        // A run only this overlay's version named: the merge frees it.
                        // SAFETY: `older` is not null here (it had a run).
                        let len = unsafe { (*older).value_len & !WITH_RUN } as usize;
                        owned.replaced_runs.push((e, replaced, len));
                    }
                }
                Err(at) => {
                    let ep = new_entry(&mut owned.arena, table, key, vp);
                    owned.order.push(ep);
                    if counted_new {
                        let list = owned.blind.entry(table).or_default();
                        let had = list.entries.capacity();
                        list.entries.push(ep as *const Entry);
                        list.last = txn;
                        owned.blind_bytes +=
                            (list.entries.capacity() - had) * size_of::<*const Entry>();
                    }
                    slots.fill(at, hash, ep);
                    // Only this writer (holding `owned`) counts: a load and a store, not a
                    // locked add, which would wait for the slot's store above to drain.
                    let len = self.len.load(Ordering::Relaxed) + 1;
                    self.len.store(len, Ordering::Release);
                    if overfull(len, slots.slots.len()) {
                        self.grow(owned, slots);
                    }
                }
            }
        }
        let held = owned.arena.held
            + owned.table_bytes
            + owned.order.capacity() * size_of::<*const Entry>()
            + owned.blind_bytes;
        let before = self.bytes.load(Ordering::Relaxed);
        if held != before {
            self.bytes.store(held, Ordering::Relaxed);
            if let Some(s) = &owned.arena.spare {
                s.note_held(before, held);
            }
        }
    }

    /// The memory the overlay holds: its arena's chunks, its tables, its list of entries and
    /// its blind writes' lists, as of its last commit (not counted: the scan index readers
    /// build, and the blind keys' answers a count resolves, `BlindList::present`; each is
    /// freed with the overlay, and is at most 8 bytes an entry).
    pub(crate) fn bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Replaces the table by one twice as large (or the spare's, if at least that) holding the
    /// same entries (`owned.order`); readers still on the old one find every entry published
    /// before they loaded it (nothing is removed from it).
    fn grow(&self, owned: &mut Owned, old: &Slots) {
        let want = old.slots.len() * 2;
        let bigger = owned
            .arena
            .spare
            .as_ref()
            .and_then(|s| s.slots_at_least(want))
            .unwrap_or_else(|| Box::new(Slots::new(want)));
        let mask = bigger.slots.len() - 1;
        debug_assert_eq!(owned.order.len(), self.len.load(Ordering::Relaxed));
        // Every entry of the table, in the order they were made (the arena's: read front to
        // back), each hashed again.
        for &p in &owned.order {
            // SAFETY: as in `find`: entries live in the arena as long as the overlay.
            let hash = unsafe { self.hash((*p).table, entry_key(p)) };
            let mut i = hash as usize & mask;
            while bigger.control[i].load(Ordering::Relaxed) != 0 {
                i = (i + 1) & mask;
            }
            bigger.fill(i, hash, p.cast_mut());
        }
        let bp = &*bigger as *const Slots as *mut Slots;
        owned.table_bytes += bigger.bytes();
        owned.tables.push(bigger);
        // Publishes the new table with everything stored in it above.
        self.table.store(bp, Ordering::Release);
    }
}

/// A version in `arena`: `txn`'s value (or deletion) linked in front of `older`.
fn new_version(
    arena: &mut Arena,
    txn: u64,
    older: *const Version,
    value: Option<&[u8]>,
    run: u64,
) -> *mut Version {
    let bytes = value.map_or(0, |v| v.len());
    let run = if value.is_some() { run } else { 0 };
    let extra = if run != 0 { size_of::<u64>() } else { 0 };
    let p = arena.alloc(size_of::<Version>() + bytes + extra) as *mut Version;
    // SAFETY: `p` is fresh, 8-byte aligned, with room for the header, the value and the run's
    // id; nothing else refers to it until it is published.
    unsafe {
        let flag = if run != 0 { WITH_RUN } else { 0 };
        p.write(Version {
            txn,
            older,
            value_len: value.map_or(DELETED, |v| v.len() as u32 | flag),
        });
        if let Some(v) = value {
            let at = (p as *mut u8).add(size_of::<Version>());
            ptr::copy_nonoverlapping(v.as_ptr(), at, bytes);
            if run != 0 {
                (at.add(bytes) as *mut u64).write_unaligned(run);
            }
        }
    }
    p
}

/// An entry in `arena` for `(table, key)` whose newest version is `head`.
fn new_entry(arena: &mut Arena, table: u64, key: &[u8], head: *mut Version) -> *mut Entry {
    let p = arena.alloc(size_of::<Entry>() + key.len()) as *mut Entry;
    // SAFETY: as in `new_version`.
    unsafe {
        p.write(Entry {
            table,
            head: AtomicPtr::new(head),
            key_len: key.len() as u32,
            in_tree: AtomicU8::new(IN_TREE_UNKNOWN),
        });
        ptr::copy_nonoverlapping(
            key.as_ptr(),
            (p as *mut u8).add(size_of::<Entry>()),
            key.len(),
        );
    }
    p
}

/// The hash of `key` of table `table` under `hasher` (the overlay's entries, the batch's
/// index).
pub(crate) fn key_hash(hasher: &foldhash::fast::RandomState, table: u64, key: &[u8]) -> u64 {
    let mut h = hasher.build_hasher();
    h.write_u64(table);
    h.write(key);
    h.finish()
}

#[cfg(test)]
mod tests;
