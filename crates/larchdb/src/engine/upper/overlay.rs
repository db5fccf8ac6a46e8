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
//! sort of the whole overlay (write-path.md, "Where it stands (session 16)").
//! Tables are numbered by the checkpoint's catalog (`CatalogCache::table_id`); the entry
//! counts of the tables a commit changed are versions of `COUNTS`, keyed by table number.

use crate::error::Result;
use std::cmp::Ordering as Order;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::ops::Bound;
use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

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

/// One version of a key, written by commit `txn`, in the overlay's arena: this header, then
/// `value_len` bytes of value (`DELETED`: a deletion, no bytes). Immutable once linked.
#[repr(C)]
struct Version {
    txn: u64,
    older: *const Version,
    value_len: u32,
}

/// `Version::value_len` of a deletion (values are at most `VALUE_BYTES_MAX`, 1 GiB).
const DELETED: u32 = u32::MAX;

/// A table's key and its versions, newest first, in the arena: this header, then `key_len`
/// bytes of key. `table` and the key are immutable; `head` changes only by the writer
/// linking a newer version in front.
#[repr(C)]
struct Entry {
    table: u64,
    head: AtomicPtr<Version>,
    key_len: u32,
}

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
            std::slice::from_raw_parts((v as *const u8).add(size_of::<Version>()), len as usize)
        })
    }
}

/// One slot of the hash table: an entry and its full hash, so that a probe reads the entry
/// (a cache miss) only when the hashes match. Empty while `entry` is null; written once.
struct Slot {
    hash: AtomicU64,
    entry: AtomicPtr<Entry>,
}

/// Open addressing over slots, linear probing; never has a removal. Beside the slots, a
/// control byte per slot (`control`): 0 while the slot is empty, else `fingerprint` of its
/// entry's hash, stored after the slot itself. A probe reads the control bytes, sixteen
/// times denser than the slots, and reads a slot only where its byte matches the key's
/// fingerprint (one in 128 of the occupied slots it passes, for another key): a key that is
/// not in the overlay, which is what most reads beside a writer look for, costs the miss on
/// a table of bytes that stays in the cache far longer than the slots do (docs/design/
/// write-path.md, session 56).
struct Slots {
    slots: Box<[Slot]>,
    control: Box<[AtomicU8]>,
}

impl Slots {
    fn new(n: usize) -> Slots {
        Slots {
            slots: (0..n)
                .map(|_| Slot {
                    hash: AtomicU64::new(0),
                    entry: AtomicPtr::new(ptr::null_mut()),
                })
                .collect(),
            control: (0..n).map(|_| AtomicU8::new(0)).collect(),
        }
    }

    /// Empties every slot.
    fn clear(&mut self) {
        // SAFETY: the table is borrowed exclusively, and a slot of all zero bytes is a valid
        // empty slot (a zero hash and a null pointer), as is a zero control byte.
        unsafe {
            ptr::write_bytes(self.slots.as_mut_ptr(), 0, self.slots.len());
            ptr::write_bytes(self.control.as_mut_ptr(), 0, self.control.len());
        }
    }

    /// Fills empty slot `at` with `entry`, of hash `hash`: the slot first, then its control
    /// byte with a release store, so that a probe that reads the byte with an acquire load
    /// finds the slot written.
    fn fill(&self, at: usize, hash: u64, entry: *mut Entry) {
        let slot = &self.slots[at];
        slot.hash.store(hash, Ordering::Relaxed);
        slot.entry.store(entry, Ordering::Release);
        self.control[at].store(fingerprint(hash), Ordering::Release);
    }
}

/// A slot's control byte for an entry of hash `hash`: the hash's top 7 bits (the slot's
/// index comes from its low bits), and the high bit set, so that it is never 0 (empty).
#[inline]
fn fingerprint(hash: u64) -> u8 {
    (hash >> 57) as u8 | 0x80
}

/// Memory an overlay leaves, when it is dropped, for the next overlays of its handle: its
/// arena's full-size chunks and its slot table. A new overlay starts with the table (sized
/// for as many entries as an earlier overlay held, so it rarely grows) and takes chunks from
/// here before asking the allocator. Measured on 1M fillseq of one-put commits: the writer
/// spent 12% of its time in first touches of fresh memory (page faults, and the zeroing of
/// each new table) and in rehashing as a fresh table doubled from 1,024 slots.
///
/// A table must be emptied before it is used again, which costs its size (32 MiB for 2M
/// slots): the thread that drops an overlay (often the writer, as it publishes) only leaves
/// the table here, and the next checkpoint's thread empties it (`prepare`) before a later
/// overlay takes it. Holds at most one overlay's chunks and two tables; freed with the
/// handle.
#[derive(Default)]
pub(crate) struct Spare {
    chunks: Mutex<Vec<Box<[MaybeUninit<u64>]>>>,
    /// An emptied table, ready for a new overlay.
    slots: Mutex<Option<Box<Slots>>>,
    /// A table left by a dropped overlay, not emptied yet.
    dirty: Mutex<Option<Box<Slots>>>,
}

impl Spare {
    fn chunk(&self) -> Option<Box<[MaybeUninit<u64>]>> {
        self.chunks.lock().unwrap_or_else(|e| e.into_inner()).pop()
    }

    fn slots(&self) -> Option<Box<Slots>> {
        self.slots.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    /// Empties the table a dropped overlay left, for the next overlay to take (off the
    /// writer's thread: a checkpoint's, before it writes).
    pub(crate) fn prepare(&self) {
        let dirty = self.dirty.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(mut table) = dirty {
            table.clear();
            *self.slots.lock().unwrap_or_else(|e| e.into_inner()) = Some(table);
        }
    }

    /// Keeps what a dropped overlay owned: its full-size chunks (at most as many as it had:
    /// the spare never holds more than one overlay's), and its table, to be emptied by
    /// `prepare`, if at least 1 in `SPARE_SLOTS_FILL` of its slots was used (emptying a table
    /// costs its size: one that held few entries is freed instead, and the next overlay
    /// starts small again).
    fn keep(
        &self,
        chunks: Vec<Box<[MaybeUninit<u64>]>>,
        table: Option<Box<Slots>>,
        entries: usize,
    ) {
        let full: Vec<_> = chunks
            .into_iter()
            .filter(|c| c.len() == CHUNK_WORDS_MAX)
            .collect();
        let n = full.len();
        {
            let mut kept = self.chunks.lock().unwrap_or_else(|e| e.into_inner());
            kept.extend(full);
            kept.truncate(n);
        }
        if let Some(table) = table.filter(|t| entries * SPARE_SLOTS_FILL >= t.slots.len()) {
            *self.dirty.lock().unwrap_or_else(|e| e.into_inner()) = Some(table);
        }
    }
}

/// A dropped overlay's table is kept for the next one if it has at most this many slots per
/// entry it held (a table is at most half full: it has 2 to this many).
const SPARE_SLOTS_FILL: usize = 8;

/// Where entries and versions live: chunks of memory handed out front to back and freed only
/// with the overlay, so that a commit's records cost no allocation of their own (boxing each
/// key, value and version cost a quarter of a one-put commit's time, with their frees when a
/// checkpoint dropped the overlay).
#[derive(Default)]
struct Arena {
    chunks: Vec<Box<[MaybeUninit<u64>]>>,
    /// Words used in the last chunk.
    used: usize,
    /// Where full-size chunks come from first, and go back to with the overlay.
    spare: Option<Arc<Spare>>,
}

/// The first chunk's words (64 KiB); each next one doubles, up to `CHUNK_WORDS_MAX` (1 MiB).
const CHUNK_WORDS_MIN: usize = 8 << 10;
const CHUNK_WORDS_MAX: usize = 128 << 10;

impl Arena {
    /// `bytes` of memory, 8-byte aligned, valid until the arena is dropped.
    fn alloc(&mut self, bytes: usize) -> *mut u8 {
        let words = bytes.div_ceil(8);
        let room = self.chunks.last().map_or(0, |c| c.len() - self.used);
        if words > room {
            let spare = (words <= CHUNK_WORDS_MAX)
                .then(|| self.spare.as_ref().and_then(|s| s.chunk()))
                .flatten();
            let chunk = spare.unwrap_or_else(|| {
                let next = self
                    .chunks
                    .last()
                    .map_or(CHUNK_WORDS_MIN, |c| (c.len() * 2).min(CHUNK_WORDS_MAX));
                Box::new_uninit_slice(next.max(words))
            });
            self.chunks.push(chunk);
            self.used = 0;
        }
        let Some(chunk) = self.chunks.last_mut() else {
            unreachable!("a chunk was pushed above")
        };
        // SAFETY: `used + words <= chunk.len()`, checked or made so above.
        let p = unsafe { chunk.as_mut_ptr().add(self.used) } as *mut u8;
        self.used += words;
        p
    }
}

/// What the overlay owns, and the writer's lock: the arena, and the tables (each boxed so
/// that its address does not change while the vector grows), dropped with the overlay.
#[allow(clippy::vec_box)]
#[derive(Default)]
struct Owned {
    arena: Arena,
    tables: Vec<Box<Slots>>,
    /// Every entry, in the order they were made: what the scan index (`Overlay::index`) sorts
    /// from where it left off.
    order: Vec<*const Entry>,
}

impl Drop for Owned {
    fn drop(&mut self) {
        if let Some(spare) = self.arena.spare.take() {
            // The current table is the last: each one grown is pushed after the one it replaced.
            spare.keep(
                std::mem::take(&mut self.arena.chunks),
                self.tables.pop(),
                self.order.len(),
            );
        }
    }
}

/// An entry in a sorted run: its table and its key's first 16 bytes as two numbers that
/// compare as the bytes do (most comparisons need no walk of the keys, as in `SortKey`).
#[derive(Clone, Copy)]
struct RunKey {
    table: u64,
    prefix: (u64, u64),
    entry: *const Entry,
}

// SAFETY: a run key points to an entry in an overlay's arena; entries are never written after
// they are published, except their `head` through atomics, and a run key is read only while
// the overlay lives (`Scan` borrows it).
unsafe impl Send for RunKey {}
unsafe impl Sync for RunKey {}

impl RunKey {
    /// # Safety
    /// `e` is an entry of an overlay that outlives the run key's uses.
    unsafe fn of(e: *const Entry) -> RunKey {
        // SAFETY: the caller's.
        let (table, key) = unsafe { ((*e).table, entry_key(e)) };
        RunKey {
            table,
            prefix: key_prefix(key),
            entry: e,
        }
    }

    /// Orders by table, then key.
    #[inline]
    fn cmp(&self, other: &RunKey) -> Order {
        (self.table, self.prefix)
            .cmp(&(other.table, other.prefix))
            // SAFETY: as in `of`.
            .then_with(|| unsafe { entry_key(self.entry).cmp(entry_key(other.entry)) })
    }

    /// This entry against `(table, key)`, `prefix` being `key_prefix(key)`.
    #[inline]
    fn cmp_to(&self, table: u64, prefix: (u64, u64), key: &[u8]) -> Order {
        (self.table, self.prefix)
            .cmp(&(table, prefix))
            // SAFETY: as in `of`.
            .then_with(|| unsafe { entry_key(self.entry) }.cmp(key))
    }
}

/// A run grows by merging while the run before it is less than this many times as long: the
/// runs' lengths fall at least that fast, so there are at most log4(entries) + 1 of them (a
/// scan searches each), and an entry is merged again about once per factor of four the
/// overlay grows.
const RUN_GROWTH: usize = 4;

/// The overlay's entries in key order: sorted runs, no entry in two, each more than
/// `RUN_GROWTH` times as long as the next.
#[derive(Default)]
struct Index {
    runs: Vec<Arc<[RunKey]>>,
    /// How many of `Owned::order`'s entries the runs hold (its first ones).
    covered: usize,
}

/// How many entries ahead a scan asks for the entry it will read (`prefetch`): a run's
/// entries lie in the arena in the order they were made, not in key order, so each one read
/// is a cache miss otherwise (1M readreverse over a fresh overlay: 0.186 us a key without,
/// 0.148 with).
const PREFETCH_AHEAD: usize = 8;

/// Asks the CPU to bring the cache line at `p` in (does nothing where there is no such hint).
#[inline(always)]
fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint; it never faults.
    unsafe {
        std::arch::x86_64::_mm_prefetch(p as *const i8, std::arch::x86_64::_MM_HINT_T0);
    }
}

/// Two runs merged into one.
fn merge_runs(a: &[RunKey], b: &[RunKey]) -> Arc<[RunKey]> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        if a[i].cmp(&b[j]) == Order::Less {
            out.push(a[i]);
            i += 1;
        } else {
            out.push(b[j]);
            j += 1;
        }
    }
    out.extend_from_slice(&a[i..]);
    out.extend_from_slice(&b[j..]);
    out.into()
}

/// The part of `run` within table `table` and the bounds, as `[lo, hi)`.
fn span(run: &[RunKey], table: u64, start: Bound<&[u8]>, end: Bound<&[u8]>) -> (usize, usize) {
    let below = |k: &[u8], inclusive: bool| {
        let p = key_prefix(k);
        run.partition_point(|r| match r.cmp_to(table, p, k) {
            Order::Less => true,
            Order::Equal => inclusive,
            Order::Greater => false,
        })
    };
    let lo = match start {
        Bound::Included(k) => below(k, false),
        Bound::Excluded(k) => below(k, true),
        Bound::Unbounded => run.partition_point(|r| r.table < table),
    };
    let hi = match end {
        Bound::Included(k) => below(k, true),
        Bound::Excluded(k) => below(k, false),
        Bound::Unbounded => run.partition_point(|r| r.table <= table),
    };
    (lo, hi.max(lo))
}

/// The keys of one table within bounds, in order or reversed, each with its version visible
/// at a snapshot (`Overlay::scan`): a merge of the index's runs.
pub(crate) struct Scan<'o> {
    index: Arc<Index>,
    /// For each run, the part not yet yielded, `[lo, hi)`.
    spans: Vec<(usize, usize)>,
    txn: u64,
    reverse: bool,
    overlay: PhantomData<&'o Overlay>,
}

impl<'o> Iterator for Scan<'o> {
    type Item = Visible<'o>;

    fn next(&mut self) -> Option<Visible<'o>> {
        loop {
            let mut best: Option<(usize, RunKey)> = None;
            for (i, &(lo, hi)) in self.spans.iter().enumerate() {
                if lo == hi {
                    continue;
                }
                let r = self.index.runs[i][if self.reverse { hi - 1 } else { lo }];
                let first = best.is_none_or(|(_, b)| {
                    let o = r.cmp(&b);
                    if self.reverse {
                        o == Order::Greater
                    } else {
                        o == Order::Less
                    }
                });
                if first {
                    best = Some((i, r));
                }
            }
            let (i, r) = best?;
            if self.reverse {
                self.spans[i].1 -= 1;
            } else {
                self.spans[i].0 += 1;
            }
            let (lo, hi) = self.spans[i];
            let ahead = if self.reverse {
                hi.checked_sub(PREFETCH_AHEAD + 1).filter(|&a| a >= lo)
            } else {
                Some(lo + PREFETCH_AHEAD).filter(|&a| a < hi)
            };
            if let Some(a) = ahead {
                prefetch(self.index.runs[i][a].entry as *const u8);
            }
            // SAFETY: the index's entries are this overlay's, alive for `'o`.
            if let Some(v) = unsafe { Overlay::visible(r.entry, self.txn) } {
                return Some((unsafe { entry_key(r.entry) }, v));
            }
        }
    }
}

/// A table's blind entries (`Overlay::insert_marked`), in the order of the commits that made
/// them, and how many of the first ones were found in the tree.
#[derive(Default)]
struct BlindList {
    /// The commit that made each entry, and the entry.
    entries: Vec<(u64, *const Entry)>,
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
    hasher: foldhash::fast::RandomState,
    owned: Mutex<Owned>,
    /// The entries in key order, for scans (`index`); locked before `owned`, never after.
    index: Mutex<Arc<Index>>,
    /// By table number: the entries made by blind writes (`WriteTable::set` of a key neither
    /// the transaction nor the overlay had), whose entry counts assumed the key was new.
    blind: Mutex<HashMap<u64, BlindList>>,
}

// SAFETY: the raw pointers in `Overlay`, `Slot`, `Entry`, `Version` and the `blind` lists'
// entries point into the arena or the boxed tables that `owned` keeps until the overlay is dropped, and what they point to is
// never written after it is published (release stores), except through atomics. Readers on
// any thread only load (acquire) and read immutable fields; the one writer at a time is
// serialised by the `owned` mutex.
unsafe impl Send for Overlay {}
unsafe impl Sync for Overlay {}

impl Default for Overlay {
    fn default() -> Overlay {
        Overlay::new()
    }
}

/// Equal byte strings, compared inline 8 bytes at a time (a call to `memcmp` costs more than
/// comparing a 16-byte key). The chunks are compared as numbers, and the tail byte by byte:
/// an array's or a slice's `==` calls `memcmp` (2% of a one-put commit's samples, session 55).
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

/// A record being sorted: the first 16 key bytes as two big-endian numbers compare as the
/// bytes do, so most comparisons need no walk of the keys (8 bytes were not enough: keys
/// written as fixed-width decimal numbers, db_bench's and YCSB's, share their first 8 bytes,
/// and the sort then called `memcmp` for every comparison, 12% of a checkpoint's time).
struct SortKey<'o> {
    table: u64,
    prefix: (u64, u64),
    key: &'o [u8],
    value: Option<&'o [u8]>,
}

impl SortKey<'_> {
    fn new<'o>(table: u64, key: &'o [u8], value: Option<&'o [u8]>) -> SortKey<'o> {
        SortKey {
            table,
            prefix: key_prefix(key),
            key,
            value,
        }
    }
}

/// A key's first 16 bytes (zeros after a shorter key) as two big-endian numbers: they compare
/// as the bytes do, up to a tie that only the whole keys settle.
#[inline]
fn key_prefix(key: &[u8]) -> (u64, u64) {
    let mut p = [0u8; 16];
    let n = key.len().min(16);
    p[..n].copy_from_slice(&key[..n]);
    let (a, b) = p.split_at(8);
    (
        u64::from_be_bytes(a.try_into().unwrap_or_default()),
        u64::from_be_bytes(b.try_into().unwrap_or_default()),
    )
}

fn sort_records(records: &mut [SortKey<'_>]) {
    records.sort_unstable_by(|a, b| {
        (a.table, a.prefix)
            .cmp(&(b.table, b.prefix))
            .then_with(|| a.key.cmp(b.key))
    });
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
        let slots = entries.saturating_mul(2).checked_next_power_of_two();
        Overlay::with_table(
            None,
            Box::new(Slots::new(slots.unwrap_or(0).max(SLOTS_MIN))),
        )
    }

    /// An empty overlay that starts with the memory `spare` holds (if any) and leaves its own
    /// there when it is dropped.
    pub(crate) fn with_spare(spare: Option<Arc<Spare>>) -> Overlay {
        let first = spare
            .as_ref()
            .and_then(|s| s.slots())
            .unwrap_or_else(|| Box::new(Slots::new(SLOTS_MIN)));
        Overlay::with_table(spare, first)
    }

    fn with_table(spare: Option<Arc<Spare>>, first: Box<Slots>) -> Overlay {
        let table = &*first as *const Slots as *mut Slots;
        Overlay {
            table: AtomicPtr::new(table),
            len: AtomicUsize::new(0),
            hasher: foldhash::fast::RandomState::default(),
            owned: Mutex::new(Owned {
                tables: vec![first],
                arena: Arena {
                    spare,
                    ..Arena::default()
                },
                order: Vec::new(),
            }),
            index: Mutex::new(Arc::default()),
            blind: Mutex::new(HashMap::new()),
        }
    }

    /// How many keys of `table` that blind writes of commits up to `txn` counted as new were
    /// in the tree already (`in_tree` looks one up): the table's entry count at `txn` is the
    /// overlay's (`count`) minus this. Each key is looked up once, by the first caller that
    /// needs it; later calls reuse the answer. The lookups run without the lock, so that a
    /// reader resolving many keys never holds up the writer's next commit.
    pub(crate) fn blind_in_tree(
        &self,
        table: u64,
        txn: u64,
        mut in_tree: impl FnMut(&[u8]) -> Result<bool>,
    ) -> Result<u64> {
        loop {
            let (start, todo): (usize, Vec<*const Entry>) = {
                let blind = self.blind.lock().unwrap_or_else(|e| e.into_inner());
                let Some(list) = blind.get(&table) else {
                    return Ok(0);
                };
                let upto = list.entries.partition_point(|&(t, _)| t <= txn);
                if upto == 0 {
                    return Ok(0);
                }
                if list.present.len() >= upto {
                    return Ok(list.present[upto - 1]);
                }
                let start = list.present.len();
                (
                    start,
                    list.entries[start..upto].iter().map(|e| e.1).collect(),
                )
            };
            let mut found = Vec::with_capacity(todo.len());
            for e in todo {
                // SAFETY: as in `find`: entries live in the arena as long as the overlay.
                found.push(in_tree(unsafe { entry_key(e) })?);
            }
            let mut blind = self.blind.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(list) = blind.get_mut(&table) {
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

    /// Keys (table and key pairs) with at least one version.
    pub(crate) fn len(&self) -> usize {
        self.len.load(Ordering::Acquire)
    }

    #[inline]
    pub(crate) fn hash(&self, table: u64, key: &[u8]) -> u64 {
        key_hash(&self.hasher, table, key)
    }

    /// Asks the CPU for the slot where the search for a key of hash `hash` starts (a read
    /// about to probe another overlay first: `table::Upper::get`).
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
                let slot = &slots.slots[i];
                let p = slot.entry.load(Ordering::Acquire);
                // The hash was stored before the entry pointer's release store.
                if !p.is_null() && slot.hash.load(Ordering::Relaxed) == hash {
                    // SAFETY: a non-null slot points to an entry in the arena, alive as long
                    // as `self`, fully written before the release store that published it.
                    if unsafe { (*p).table == table && bytes_eq(entry_key(p), key) } {
                        return Ok(p);
                    }
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

    /// The number of entries of table `table` at snapshot `txn`, if a commit in the overlay
    /// changed it.
    pub(crate) fn count(&self, table: u64, txn: u64) -> Option<u64> {
        match self.get(COUNTS, &table.to_be_bytes(), txn) {
            Lookup::Value(v) if v.len() == 8 => Some(u64::from_le_bytes(v.try_into().ok()?)),
            _ => None,
        }
    }

    /// The keys of `table` within `start..end` with a version visible at snapshot `txn`, in
    /// key order (descending if `reverse`), each with that version.
    pub(crate) fn scan(
        &self,
        table: u64,
        txn: u64,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
        reverse: bool,
    ) -> Scan<'_> {
        let index = self.index();
        let spans = index
            .runs
            .iter()
            .map(|r| span(r, table, start, end))
            .collect();
        Scan {
            index,
            spans,
            txn,
            reverse,
            overlay: PhantomData,
        }
    }

    /// The index of every entry made so far, so of every entry a snapshot already published
    /// can see (a commit's entries are made before it is published). The entries made since
    /// the last call are sorted into a new run, which absorbs the runs less than
    /// `RUN_GROWTH` times its length; the writer only appends to `order`.
    fn index(&self) -> Arc<Index> {
        let mut index = self.index.lock().unwrap_or_else(|e| e.into_inner());
        let new: Vec<*const Entry> = {
            let owned = self.owned.lock().unwrap_or_else(|e| e.into_inner());
            owned.order[index.covered..].to_vec()
        };
        if new.is_empty() {
            return index.clone();
        }
        let covered = index.covered + new.len();
        // SAFETY: entries of this overlay, alive as long as it.
        let mut run: Vec<RunKey> = new.into_iter().map(|e| unsafe { RunKey::of(e) }).collect();
        run.sort_unstable_by(RunKey::cmp);
        let mut run: Arc<[RunKey]> = run.into();
        let mut runs = index.runs.clone();
        while let Some(last) = runs.pop_if(|r| r.len() < RUN_GROWTH * run.len()) {
            run = merge_runs(&last, &run);
        }
        runs.push(run);
        *index = Arc::new(Index { runs, covered });
        index.clone()
    }

    /// Every record visible at snapshot `txn`, tables' entry counts left out, sorted by table
    /// and key: what a checkpoint applies to the tree.
    ///
    /// Reads the entries in the order they were made (`Owned::order`), not the hash table's:
    /// the entries lie in the arena in that order, so the walk reads memory front to back
    /// instead of missing the cache at every entry, and keys written in ascending order come
    /// out sorted already, which the sort finds in one pass (1M fillseq of one-put commits:
    /// the walk of the table and the sort were 36% of the checkpoint thread's time).
    pub(crate) fn all(&self, txn: u64) -> Vec<TableRecord<'_>> {
        let mut records = Vec::with_capacity(self.len());
        {
            let owned = self.owned.lock().unwrap_or_else(|e| e.into_inner());
            records.extend(owned.order.iter().filter_map(|&e| {
                // SAFETY: `order` holds entries of this overlay, which live as long as it
                // (as in `find`).
                let (table, key) = unsafe { ((*e).table, entry_key(e)) };
                if table == COUNTS {
                    return None;
                }
                // SAFETY: as above.
                let value = unsafe { Self::visible(e, txn) }?;
                Some(SortKey::new(table, key, value))
            }));
        }
        sort_records(&mut records);
        records
            .into_iter()
            .map(|r| (r.table, r.key, r.value))
            .collect()
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

    /// Adds the records of commit `txn`: for each, a value or a deletion (`None`) of
    /// `(table, key)`. Requires: `txn` is newer than every commit inserted before, and is not
    /// yet published to readers (they see it once the engine publishes it).
    #[cfg(test)]
    pub(crate) fn insert<'a>(
        &self,
        txn: u64,
        records: impl IntoIterator<Item = (u64, &'a [u8], Option<&'a [u8]>)>,
    ) {
        self.insert_marked(txn, records.into_iter().map(|(t, k, v)| (t, k, v, false)));
    }

    /// `insert`, with each record marked if a blind write counted its key as new without
    /// knowing (see `blind_in_tree`); such a key has no entry yet.
    pub(crate) fn insert_marked<'a>(
        &self,
        txn: u64,
        records: impl IntoIterator<Item = (u64, &'a [u8], Option<&'a [u8]>, bool)>,
    ) {
        let mut owned = self.owned.lock().unwrap_or_else(|e| e.into_inner());
        let mut blind = None;
        for (table, key, value, counted_new) in records {
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
            let vp = new_version(&mut owned.arena, txn, older, value);
            match found {
                // SAFETY: as in `find`. The release store publishes the version.
                Ok(e) => unsafe { &(*e).head }.store(vp, Ordering::Release),
                Err(at) => {
                    let ep = new_entry(&mut owned.arena, table, key, vp);
                    owned.order.push(ep);
                    if counted_new {
                        let lists = blind.get_or_insert_with(|| {
                            self.blind.lock().unwrap_or_else(|e| e.into_inner())
                        });
                        let list = lists.entry(table).or_default();
                        list.entries.push((txn, ep as *const Entry));
                    }
                    slots.fill(at, hash, ep);
                    let len = self.len.fetch_add(1, Ordering::AcqRel) + 1;
                    if len * 2 > slots.slots.len() {
                        self.grow(&mut owned, slots);
                    }
                }
            }
        }
    }

    /// Replaces the table by one twice as large holding the same entries; readers still on the
    /// old one find every entry published before they loaded it (nothing is removed from it).
    fn grow(&self, owned: &mut Owned, old: &Slots) {
        let bigger = Box::new(Slots::new(old.slots.len() * 2));
        let mask = bigger.slots.len() - 1;
        for slot in old.slots.iter() {
            let p = slot.entry.load(Ordering::Acquire);
            if p.is_null() {
                continue;
            }
            let hash = slot.hash.load(Ordering::Relaxed);
            let mut i = hash as usize & mask;
            while bigger.control[i].load(Ordering::Relaxed) != 0 {
                i = (i + 1) & mask;
            }
            bigger.fill(i, hash, p);
        }
        let bp = &*bigger as *const Slots as *mut Slots;
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
) -> *mut Version {
    let bytes = value.map_or(0, |v| v.len());
    let p = arena.alloc(size_of::<Version>() + bytes) as *mut Version;
    // SAFETY: `p` is fresh, 8-byte aligned, with room for the header and the value; nothing
    // else refers to it until it is published.
    unsafe {
        p.write(Version {
            txn,
            older,
            value_len: value.map_or(DELETED, |v| v.len() as u32),
        });
        if let Some(v) = value {
            ptr::copy_nonoverlapping(v.as_ptr(), (p as *mut u8).add(size_of::<Version>()), bytes);
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
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use std::collections::BTreeMap;
    use std::ops::RangeBounds;
    use std::sync::atomic::AtomicU64;
    use std::sync::Arc;

    /// (table, key) -> [(txn, value)] in commit order.
    type Model = BTreeMap<(u64, Vec<u8>), Vec<(u64, Option<Vec<u8>>)>>;
    /// A record as `Overlay::insert` (the tests' unmarked `insert_marked`) takes it.
    type Record<'a> = (u64, &'a [u8], Option<&'a [u8]>);

    /// Inserts commit `txn`'s records into the overlay and the model.
    fn insert_both(
        o: &Overlay,
        model: &mut Model,
        txn: u64,
        batch: Vec<(u64, Vec<u8>, Option<Vec<u8>>)>,
    ) {
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
            insert_both(&o, &mut model, txn, batch);
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

    /// Overlays made one after another from a handle's spare memory take the last ones'
    /// chunks and tables, and still hold exactly their own commits: an emptied table keeps
    /// no entry of the overlay before, and one not emptied yet is never handed out.
    #[test]
    fn overlays_that_reuse_memory_hold_only_their_own_commits() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(9);
        let spare = Arc::new(Spare::default());
        let mut reused_tables = 0;
        for generation in 0..6u64 {
            // Every other generation runs no checkpoint: the dropped table stays unemptied.
            if generation % 2 == 0 {
                spare.prepare();
            }
            let had_table = spare.slots.lock().unwrap().is_some();
            let chunks_before = spare.chunks.lock().unwrap().len();
            let o = Overlay::with_spare(Some(spare.clone()));
            let (first_slots, empty) = {
                let owned = o.owned.lock().unwrap();
                let t = &owned.tables[0];
                let empty = t
                    .slots
                    .iter()
                    .all(|s| s.entry.load(Ordering::Relaxed).is_null())
                    && t.control.iter().all(|c| c.load(Ordering::Relaxed) == 0);
                (t.slots.len(), empty)
            };
            // A stale slot would hide from lookups (the hasher is new) but fill the table,
            // until a probe finds no empty slot at all.
            assert!(empty, "generation {generation}: the table starts empty");
            if had_table {
                reused_tables += 1;
                assert!(
                    first_slots > SLOTS_MIN,
                    "generation {generation}: a sized table"
                );
            } else {
                assert_eq!(first_slots, SLOTS_MIN, "generation {generation}");
            }
            let mut model = Model::new();
            let keys = 20_000 + 5_000 * generation;
            for txn in 1..=400u64 {
                let mut batch: Vec<(u64, Vec<u8>, Option<Vec<u8>>)> = Vec::new();
                for _ in 0..rng.gen_range(1..80) {
                    let table = rng.gen_range(0..2);
                    let key = format!("{generation}-{:06}", rng.gen_range(0..keys)).into_bytes();
                    let value =
                        (!rng.gen_bool(0.1)).then(|| vec![txn as u8; rng.gen_range(0..200)]);
                    batch.push((table, key, value));
                }
                insert_both(&o, &mut model, txn, batch);
            }
            assert_eq!(o.len(), model.len(), "generation {generation}");
            if generation > 0 {
                assert!(
                    spare.chunks.lock().unwrap().len() < chunks_before || chunks_before == 0,
                    "generation {generation}: chunks were taken from the spare"
                );
            }
            for ((t, k), versions) in &model {
                let want = match versions.last() {
                    None => Lookup::Absent,
                    Some((_, None)) => Lookup::Deleted,
                    Some((_, Some(v))) => Lookup::Value(v),
                };
                assert_eq!(
                    o.get(*t, k, 400),
                    want,
                    "generation {generation}, key {k:?}"
                );
            }
            // No key of an earlier generation is found.
            for g in 0..generation {
                for t in 0..2 {
                    let k = format!("{g}-{:06}", rng.gen_range(0..keys)).into_bytes();
                    assert_eq!(o.get(t, &k, 400), Lookup::Absent, "generation {generation}");
                }
            }
            drop(o);
            assert!(
                !spare.chunks.lock().unwrap().is_empty(),
                "the chunks were kept"
            );
        }
        assert!(reused_tables >= 2, "tables were reused: {reused_tables}");
    }

    /// What the model holds for `table` within the bounds at snapshot `snap`, in order.
    fn model_scan(
        model: &Model,
        table: u64,
        snap: u64,
        (start, end): (Bound<&[u8]>, Bound<&[u8]>),
        reverse: bool,
    ) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
        let mut out: Vec<_> = model
            .iter()
            .filter(|((t, k), _)| *t == table && (start, end).contains(k.as_slice()))
            .filter_map(|((_, k), versions)| {
                let (_, v) = versions.iter().rev().find(|(txn, _)| *txn <= snap)?;
                Some((k.clone(), v.clone()))
            })
            .collect();
        if reverse {
            out.reverse();
        }
        out
    }

    /// Scans of every table, in both directions, with every kind of bound and at old and new
    /// snapshots, match a model while commits go on being inserted: the index is built a
    /// little at a time (a scan after every few commits) and merges its runs as it grows.
    #[test]
    fn scans_match_a_model_as_the_index_grows() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        let o = Overlay::new();
        let mut model = Model::new();
        let key = |rng: &mut rand::rngs::StdRng| {
            // Keys longer and shorter than the 16-byte prefix, sharing long prefixes.
            let n: u32 = rng.gen_range(0..3000);
            match n % 3 {
                0 => format!("{n:06}").into_bytes(),
                1 => format!("key-with-a-long-shared-prefix-{n:06}").into_bytes(),
                _ => n.to_be_bytes()[..(n % 4) as usize + 1].to_vec(),
            }
        };
        let bound = |rng: &mut rand::rngs::StdRng, k: Vec<u8>| match rng.gen_range(0..3) {
            0 => Bound::Included(k),
            1 => Bound::Excluded(k),
            _ => Bound::Unbounded,
        };
        let mut runs_seen = 0;
        for txn in 1..=400u64 {
            let mut batch: Vec<(u64, Vec<u8>, Option<Vec<u8>>)> = Vec::new();
            for _ in 0..rng.gen_range(1..30) {
                let table = rng.gen_range(0..3);
                let value = (!rng.gen_bool(0.15)).then(|| vec![txn as u8; rng.gen_range(0..20)]);
                batch.push((table, key(&mut rng), value));
            }
            insert_both(&o, &mut model, txn, batch);
            if rng.gen_range(0..4) != 0 {
                continue;
            }
            for _ in 0..3 {
                let table = rng.gen_range(0..4);
                let snap = rng.gen_range(0..=txn + 1);
                let reverse = rng.gen_bool(0.5);
                let (a, b) = (key(&mut rng), key(&mut rng));
                let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
                let (start, end) = (bound(&mut rng, lo), bound(&mut rng, hi));
                let bounds = (
                    start.as_ref().map(|k| k.as_slice()),
                    end.as_ref().map(|k| k.as_slice()),
                );
                let got: Vec<_> = o
                    .scan(table, snap, bounds.0, bounds.1, reverse)
                    .map(|(k, v)| (k.to_vec(), v.map(|v| v.to_vec())))
                    .collect();
                let want = model_scan(&model, table, snap, bounds, reverse);
                assert_eq!(got, want, "table {table} at {snap} within {bounds:?}");
            }
            runs_seen = runs_seen.max(o.index.lock().unwrap().runs.len());
        }
        assert!(
            runs_seen >= 3,
            "the index held several runs at once ({runs_seen})"
        );
        let index = o.index();
        assert_eq!(index.covered, o.len());
        for w in index.runs.windows(2) {
            assert!(
                w[0].len() >= RUN_GROWTH * w[1].len(),
                "runs fall by the growth factor"
            );
        }
        // A bound past the end, and one before the start, of a table.
        let all = model_scan(&model, 1, 400, (Bound::Unbounded, Bound::Unbounded), false);
        assert_eq!(
            o.scan(1, 400, Bound::Unbounded, Bound::Unbounded, false)
                .count(),
            all.len()
        );
        assert_eq!(
            o.scan(
                1,
                400,
                Bound::Excluded(b"\xff\xff\xff\xff\xff"),
                Bound::Unbounded,
                false
            )
            .count(),
            0
        );
        assert_eq!(
            o.scan(1, 400, Bound::Unbounded, Bound::Excluded(b""), true)
                .count(),
            0
        );
    }

    /// Scans on other threads while the writer inserts: each sees every key published at its
    /// snapshot, in order, whichever of them builds the index's next run.
    #[test]
    fn scans_beside_the_writer_see_every_published_key() {
        const COMMITS: u64 = 3000;
        let o = Arc::new(Overlay::new());
        let published = Arc::new(AtomicU64::new(0));
        let readers: Vec<_> = (0..2)
            .map(|r| {
                let (o, published) = (o.clone(), published.clone());
                std::thread::spawn(move || {
                    let mut rng = rand::rngs::StdRng::seed_from_u64(r);
                    loop {
                        let snap = published.load(Ordering::Acquire);
                        // Commit n added key (n * 7919 mod COMMITS), and table 1's key n.
                        let from = rng.gen_range(0..COMMITS);
                        let got: Vec<u64> = o
                            .scan(
                                0,
                                snap,
                                Bound::Included(&from.to_be_bytes()[..]),
                                Bound::Unbounded,
                                false,
                            )
                            .map(|(k, _)| u64::from_be_bytes(k.try_into().unwrap()))
                            .collect();
                        let mut want: Vec<u64> = (1..=snap)
                            .map(|n| n * 7919 % COMMITS)
                            .filter(|&k| k >= from)
                            .collect();
                        want.sort_unstable();
                        assert_eq!(got, want, "from {from} at {snap}");
                        let newest = o
                            .scan(1, snap, Bound::Unbounded, Bound::Unbounded, true)
                            .next();
                        assert_eq!(
                            newest.map(|(k, _)| k.to_vec()),
                            (snap > 0).then(|| snap.to_be_bytes().to_vec())
                        );
                        if snap == COMMITS {
                            return;
                        }
                    }
                })
            })
            .collect();
        for txn in 1..=COMMITS {
            let k0 = (txn * 7919 % COMMITS).to_be_bytes();
            let k1 = txn.to_be_bytes();
            o.insert(
                txn,
                [(0u64, &k0[..], Some(&b"v"[..])), (1, &k1[..], Some(b"v"))],
            );
            published.store(txn, Ordering::Release);
        }
        for r in readers {
            r.join().unwrap();
        }
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
