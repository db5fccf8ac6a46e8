//! The entry counts of the tables that commits in a snapshot's overlays changed
//! (docs/design/write-path.md, "Entry counts and blind writes").
//!
//! Readers on snapshots of one shape share one published snapshot object and read a later
//! commit of the shape by taking its number alone (`Shared::txn_in_shape`), so the counts are
//! versioned by commit like the overlays' records: each table's count as of the log's first
//! commit (`base`), then one version a commit that changed it, appended by the writer and read
//! with no lock. A log is made for each tree put in place (`checkpoint::install`), from the
//! newest counts: it holds the versions of one checkpoint's commits, not of every commit since
//! the last one that wrote pages. Kept beside the overlays rather than in them: a version of a
//! count record per commit in the overlays was a second insert of every one-put commit and 32
//! bytes of their memory, kept until the slice that held the last keys was merged.

use std::mem::MaybeUninit;
use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};

/// Versions in a table's first chunk (128 bytes: a put into each of many tables costs
/// little); each chunk after it is twice the one before.
const CHUNK_FIRST: usize = 8;

/// Chunks of a table's versions: 8 * (2^32 - 1) versions, more than any log holds.
const CHUNKS: usize = 32;

/// Tables a log has room for beyond those it was made with, at the least (as many as it was
/// made with, if more), before a commit that changes another makes a new log
/// (`CountLog::push` fails): tables reached one by one make a new log each time their number
/// doubles, not each time it grows by a few.
const TABLES_SPARE: usize = 4;

/// One table's count at the log's first commit, and its versions since, oldest first.
struct TableCounts {
    /// The table's number; `u64::MAX` for a spare place not taken yet. Set once, by the
    /// writer, before any reader can look for it (`CountLog::push` stores it before the
    /// places taken).
    table: AtomicU64,
    /// The count at the log's first commit; `None` for a table taken since (its tree's count
    /// until its first version).
    base: Option<u64>,
    /// Versions pushed (their commit, the count after it), published with a release store.
    len: AtomicUsize,
    chunks: [AtomicPtr<(u64, u64)>; CHUNKS],
}

/// Where version `i` lies: its chunk, and its place there.
#[inline]
fn place(i: usize) -> (usize, usize) {
    let n = i / CHUNK_FIRST + 1;
    let chunk = (usize::BITS - 1 - n.leading_zeros()) as usize;
    (chunk, i - CHUNK_FIRST * ((1 << chunk) - 1))
}

#[inline]
fn chunk_len(chunk: usize) -> usize {
    CHUNK_FIRST << chunk
}

impl TableCounts {
    fn new(table: u64, base: Option<u64>) -> TableCounts {
        TableCounts {
            table: AtomicU64::new(table),
            base,
            len: AtomicUsize::new(0),
            chunks: std::array::from_fn(|_| AtomicPtr::new(ptr::null_mut())),
        }
    }

    fn table(&self) -> u64 {
        self.table.load(Ordering::Acquire)
    }

    /// Version `i` (below a `len` loaded with acquire).
    #[inline]
    fn version(&self, i: usize) -> (u64, u64) {
        let (chunk, at) = place(i);
        let p = self.chunks[chunk].load(Ordering::Acquire);
        // SAFETY: version `i` was written, in a chunk of `chunk_len(chunk)` versions stored
        // in `chunks` before `len` was raised past `i` with a release store; chunks live as
        // long as `self`.
        unsafe { *p.add(at) }
    }

    /// The count at commit `txn`: the newest version at or before it, else the base.
    fn at(&self, txn: u64) -> Option<u64> {
        let len = self.len.load(Ordering::Acquire);
        // The newest first: readers are mostly on the newest commits.
        if len == 0 {
            return self.base;
        }
        let newest = self.version(len - 1);
        if newest.0 <= txn {
            return Some(newest.1);
        }
        // Versions rise with their commits: the first one after `txn`, and the one before it.
        let (mut lo, mut hi) = (0, len - 1);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.version(mid).0 <= txn {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        match lo {
            0 => self.base,
            i => Some(self.version(i - 1).1),
        }
    }

    /// The newest count.
    fn newest(&self) -> Option<u64> {
        match self.len.load(Ordering::Acquire) {
            0 => self.base,
            n => Some(self.version(n - 1).1),
        }
    }

    /// Appends version `(txn, count)`, and returns the bytes of a chunk it allocated.
    ///
    /// # Safety
    /// No other thread pushes into this table at the same time (the log's one writer).
    unsafe fn push(&self, txn: u64, count: u64) -> usize {
        let i = self.len.load(Ordering::Relaxed);
        let (chunk, at) = place(i);
        let mut p = self.chunks[chunk].load(Ordering::Relaxed);
        let mut grown = 0;
        if p.is_null() {
            let fresh: Box<[MaybeUninit<(u64, u64)>]> = Box::new_uninit_slice(chunk_len(chunk));
            p = Box::into_raw(fresh) as *mut (u64, u64);
            self.chunks[chunk].store(p, Ordering::Release);
            grown = chunk_len(chunk) * size_of::<(u64, u64)>();
        }
        // SAFETY: `at` is within the chunk's `chunk_len(chunk)` versions; no reader reads
        // version `i` before `len` passes it, and no other writer writes it (the caller's).
        unsafe { p.add(at).write((txn, count)) };
        self.len.store(i + 1, Ordering::Release);
        grown
    }
}

impl Drop for TableCounts {
    fn drop(&mut self) {
        for (chunk, p) in self.chunks.iter_mut().enumerate() {
            let p = *p.get_mut();
            if !p.is_null() {
                // SAFETY: made by `push` from a boxed slice of this length, freed once.
                drop(unsafe {
                    Box::from_raw(ptr::slice_from_raw_parts_mut(
                        p as *mut MaybeUninit<(u64, u64)>,
                        chunk_len(chunk),
                    ))
                });
            }
        }
    }
}

/// The entry counts of a snapshot's tables, by table number, versioned by commit (see the
/// module's documentation). A table not in it has its tree's count.
pub(crate) struct CountLog {
    /// Ascending by table number, then the spare places (`u64::MAX`) the writer takes in
    /// order.
    tables: Box<[TableCounts]>,
    /// The tables it was made with (the sorted ones).
    sorted: usize,
    /// Places taken.
    taken: AtomicUsize,
    /// Bytes of versions' chunks allocated.
    bytes: AtomicUsize,
}

impl CountLog {
    /// A log whose counts start at `base` (table, count), and room for as many more tables
    /// (`TABLES_SPARE` at the least).
    pub(crate) fn new(base: impl IntoIterator<Item = (u64, u64)>) -> CountLog {
        let mut base: Vec<(u64, u64)> = base.into_iter().collect();
        base.sort_unstable_by_key(|&(t, _)| t);
        base.dedup_by_key(|&mut (t, _)| t);
        let taken = base.len();
        let spare = (0..taken.max(TABLES_SPARE)).map(|_| TableCounts::new(u64::MAX, None));
        let tables = base
            .into_iter()
            .map(|(t, n)| TableCounts::new(t, Some(n)))
            .chain(spare)
            .collect();
        CountLog {
            tables,
            sorted: taken,
            taken: AtomicUsize::new(taken),
            bytes: AtomicUsize::new(0),
        }
    }

    /// The place of `table`: among the base tables by a binary search, else among those taken
    /// since.
    fn find(&self, table: u64) -> Option<&TableCounts> {
        let (sorted, since) = self.tables().split_at(self.sorted);
        match sorted.binary_search_by_key(&table, |t| t.table()) {
            Ok(i) => Some(&sorted[i]),
            Err(_) => since.iter().find(|t| t.table() == table),
        }
    }

    /// The places taken: the base tables', then those taken since.
    fn tables(&self) -> &[TableCounts] {
        &self.tables[..self.taken.load(Ordering::Acquire)]
    }

    /// Table `table`'s entries at commit `txn` (not older than the log's first), if a commit
    /// in the overlays changed it by then.
    pub(crate) fn get(&self, table: u64, txn: u64) -> Option<u64> {
        self.find(table)?.at(txn)
    }

    /// Sets table `table`'s entries to `count` as of commit `txn`, newer than every version
    /// pushed before and not yet published (no version where the count is the newest
    /// already). Only the snapshot's writer calls it. `false`, with nothing done, where the
    /// log has no room for another table: the caller makes a new log (`after`).
    ///
    /// # Safety
    /// No other thread pushes into this log at the same time: only the writer, holding the
    /// write lock, pushes, and only into its base snapshot's log (`commit_logged`).
    pub(crate) unsafe fn push(&self, table: u64, txn: u64, count: u64) -> bool {
        let t = match self.find(table) {
            Some(t) if t.newest() == Some(count) => return true,
            Some(t) => t,
            None => {
                let taken = self.taken.load(Ordering::Relaxed);
                let Some(t) = self.tables.get(taken) else {
                    return false;
                };
                t.table.store(table, Ordering::Release);
                self.taken.store(taken + 1, Ordering::Release);
                t
            }
        };
        // SAFETY: the caller's.
        let grown = unsafe { t.push(txn, count) };
        if grown > 0 {
            self.bytes.fetch_add(grown, Ordering::Relaxed);
        }
        true
    }

    /// The newest count of each table the log holds.
    fn newest(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.tables()
            .iter()
            .filter_map(|t| Some((t.table(), t.newest()?)))
    }

    /// A new log starting from the newest counts of `before` (none: no table's) with
    /// `changed` set over them.
    pub(crate) fn after(
        before: Option<&CountLog>,
        changed: impl IntoIterator<Item = (u64, u64)>,
    ) -> CountLog {
        let mut all: Vec<(u64, u64)> = before.into_iter().flat_map(|b| b.newest()).collect();
        for (table, count) in changed {
            match all.iter_mut().find(|(t, _)| *t == table) {
                Some(c) => c.1 = count,
                None => all.push((table, count)),
            }
        }
        CountLog::new(all)
    }

    /// Memory the log holds beside its own allocation: its versions' chunks.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed) + self.tables.len() * size_of::<TableCounts>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Versions read at every commit give the count of the newest version at or before it,
    /// the base before the first; tables taken after the log was made are found, and a table
    /// beyond the log's room is refused; a log made from it starts at its newest counts.
    #[test]
    fn counts_read_at_every_commit() {
        assert_eq!(place(0), (0, 0));
        assert_eq!(place(7), (0, 7));
        assert_eq!(place(8), (1, 0));
        assert_eq!(place(23), (1, 15));
        assert_eq!(place(24), (2, 0));
        // SAFETY (every push below): one thread.
        let push = |log: &CountLog, t, txn, n| unsafe { log.push(t, txn, n) };
        let log = CountLog::new([(9, 100), (3, 30)]);
        assert_eq!(
            (log.get(3, 5), log.get(9, 5), log.get(4, 5)),
            (Some(30), Some(100), None)
        );
        // Table 3 changed at every other commit from 10, table 9 at every tenth.
        let mut model = vec![(30u64, 100u64); 10];
        for txn in 10..5000u64 {
            let (mut a, mut b) = *model.last().unwrap();
            if txn % 2 == 0 {
                a = txn * 7;
                assert!(push(&log, 3, txn, a));
            }
            if txn % 10 == 0 {
                b = txn;
                assert!(push(&log, 9, txn, b));
            }
            model.push((a, b));
        }
        for (txn, &(a, b)) in model.iter().enumerate().skip(5) {
            let txn = txn as u64;
            assert_eq!(log.get(3, txn), Some(a), "table 3 at {txn}");
            assert_eq!(log.get(9, txn), Some(b), "table 9 at {txn}");
        }
        assert!(log.bytes() >= 2500 * 16);
        // Four more tables, then no room.
        for t in [1, 20, 5, 7] {
            assert!(push(&log, t, 6000, t * 2));
        }
        assert!(!push(&log, 8, 6001, 1));
        assert_eq!((log.get(20, 6000), log.get(20, 5999)), (Some(40), None));
        assert_eq!(log.get(8, 6001), None);
        let next = CountLog::after(Some(&log), [(8, 1), (3, 2)]);
        let mut all: Vec<_> = next.newest().collect();
        all.sort();
        assert_eq!(
            all,
            [
                (1, 2),
                (3, 2),
                (5, 10),
                (7, 14),
                (8, 1),
                (9, 4990),
                (20, 40)
            ]
        );
        assert_eq!(next.get(8, 0), Some(1));
    }
}
