//! Scans of the overlay: an index of sorted runs of its entries, built by the readers that
//! scan (the entries inserted since the last scan sorted into a new run, runs of similar length
//! merged), and `Scan`, a table's keys in a range at a snapshot, in either direction.

use super::*;

/// An entry in a sorted run: its table and its key's first 16 bytes as two numbers that
/// compare as the bytes do (most comparisons need no walk of the keys, as in `SortKey`).
#[derive(Clone, Copy)]
pub(super) struct RunKey {
    pub(super) table: u64,
    pub(super) prefix: (u64, u64),
    pub(super) entry: *const Entry,
}

// SAFETY: a run key points to an entry in an overlay's arena; entries are never written after
// they are published, except their `head` through atomics, and a run key is read only while
// the overlay lives (`Scan` borrows it).
unsafe impl Send for RunKey {}

unsafe impl Sync for RunKey {}

impl RunKey {
    /// # Safety
    /// `e` is an entry of an overlay that outlives the run key's uses.
    pub(super) unsafe fn of(e: *const Entry) -> RunKey {
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
    pub(super) fn cmp(&self, other: &RunKey) -> Order {
        (self.table, self.prefix)
            .cmp(&(other.table, other.prefix))
            // SAFETY: as in `of`.
            .then_with(|| unsafe { entry_key(self.entry).cmp(entry_key(other.entry)) })
    }

    /// This entry against `(table, key)`, `prefix` being `key_prefix(key)`.
    #[inline]
    pub(super) fn cmp_to(&self, table: u64, prefix: (u64, u64), key: &[u8]) -> Order {
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
pub(super) const RUN_GROWTH: usize = 4;

/// The overlay's entries in key order: sorted runs, no entry in two, each more than
/// `RUN_GROWTH` times as long as the next.
#[derive(Default)]
pub(super) struct Index {
    pub(super) runs: Vec<Arc<[RunKey]>>,
    /// How many of `Owned::order`'s entries the runs hold (its first ones).
    pub(super) covered: usize,
}

/// How many entries ahead a scan asks for the entry it will read (`prefetch`), and half as
/// many ahead for that entry's newest version: a run's entries lie in the arena in the order
/// they were made, not in key order, so each one read is a cache miss otherwise, and a
/// version a second one (1M readreverse over a fresh overlay: 0.186 us a key without, 0.148
/// with the entry asked for; a scan of a 1M fillrandom's table with a tenth of it in the
/// overlays, 20.0-21.8M entries a second without the version asked for, 20.9-23.4M with).
pub(super) const PREFETCH_AHEAD: usize = 8;

/// Asks the CPU to bring the cache line at `p` in (does nothing where there is no such hint).
#[inline(always)]
pub(super) fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint; it never faults.
    unsafe {
        std::arch::x86_64::_mm_prefetch(p as *const i8, std::arch::x86_64::_MM_HINT_T0);
    }
}

/// Two runs merged into one.
pub(super) fn merge_runs(a: &[RunKey], b: &[RunKey]) -> Arc<[RunKey]> {
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
pub(super) fn span(
    run: &[RunKey],
    table: u64,
    start: Bound<&[u8]>,
    end: Bound<&[u8]>,
) -> (usize, usize) {
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
    pub(super) index: Arc<Index>,
    /// For each run, the part not yet yielded, `[lo, hi)`.
    pub(super) spans: Vec<(usize, usize)>,
    pub(super) txn: u64,
    pub(super) reverse: bool,
    pub(super) overlay: PhantomData<&'o Overlay>,
}

impl Scan<'_> {
    /// Whether it has nothing in its bounds (the records there may also be of later commits,
    /// which it would skip: not empty then).
    pub(crate) fn is_empty(&self) -> bool {
        self.spans.iter().all(|&(lo, hi)| lo == hi)
    }
}

impl<'o> Iterator for Scan<'o> {
    type Item = Visible<'o>;

    #[inline(always)]
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
            // The run's entry `d` places on in the scan's direction, if the span has it.
            let (lo, hi) = self.spans[i];
            let run = &self.index.runs[i];
            let on = |d: usize| match self.reverse {
                true => hi.checked_sub(d + 1).filter(|&a| a >= lo),
                false => Some(lo + d).filter(|&a| a < hi),
            };
            if let Some(a) = on(PREFETCH_AHEAD) {
                prefetch(run[a].entry as *const u8);
            }
            if let Some(a) = on(PREFETCH_AHEAD / 2) {
                // Asked for `PREFETCH_AHEAD / 2` entries ago, so in the cache: its newest
                // version, which lies apart from it, is asked for in turn. The pointer is
                // only a hint here; `visible` loads it again with acquire ordering.
                // SAFETY: as below.
                let head = unsafe { &(*run[a].entry).head }.load(Ordering::Relaxed);
                prefetch(head as *const u8);
            }
            // SAFETY: the index's entries are this overlay's, alive for `'o`.
            if let Some(v) = unsafe { Overlay::visible(r.entry, self.txn) } {
                return Some((unsafe { entry_key(r.entry) }, v));
            }
        }
    }
}

/// A record being sorted: the first 16 key bytes as two big-endian numbers compare as the
/// bytes do, so most comparisons need no walk of the keys (8 bytes were not enough: keys
/// written as fixed-width decimal numbers, db_bench's and YCSB's, share their first 8 bytes,
/// and the sort then called `memcmp` for every comparison, 12% of a checkpoint's time).
pub(super) struct SortKey<'o> {
    pub(super) table: u64,
    pub(super) prefix: (u64, u64),
    pub(super) key: &'o [u8],
    pub(super) value: Option<&'o [u8]>,
    /// The run the value's commit wrote it into (id 0: none).
    pub(super) run: PageRef,
    /// The entry the record is of.
    pub(super) entry: *const Entry,
}

impl SortKey<'_> {
    pub(super) fn new<'o>(
        table: u64,
        key: &'o [u8],
        value: Option<&'o [u8]>,
        run: PageRef,
        entry: *const Entry,
    ) -> SortKey<'o> {
        SortKey {
            table,
            prefix: key_prefix(key),
            key,
            value,
            run,
            entry,
        }
    }
}

/// The records a checkpoint merges (`Overlay::gather`), sorted by table and key, with the
/// entry each is of. Its vectors go back to the overlay's spare when it is dropped, for the
/// next checkpoint's.
pub(crate) struct Gathered<'o> {
    pub(crate) records: Vec<TableRecord<'o>>,
    entries: Vec<*const Entry>,
    /// The sorting vector's allocation, emptied.
    sort: Vec<[usize; 10]>,
    spare: Option<Arc<Spare>>,
}

impl Drop for Gathered<'_> {
    fn drop(&mut self) {
        if let Some(spare) = self.spare.take() {
            spare.keep_gathering(GatherBuffers {
                sort: std::mem::take(&mut self.sort),
                records: recycle(std::mem::take(&mut self.records)),
                entries: recycle(std::mem::take(&mut self.entries)),
            });
        }
    }
}

impl Gathered<'_> {
    /// Notes on record `i`'s entry whether its key was in the tree when a checkpoint by slices
    /// merged it (`Overlay::blind_in_tree` then takes the answer from there).
    pub(crate) fn note_in_tree(&self, i: usize, found: bool) {
        if let Some(&e) = self.entries.get(i) {
            let v = if found { IN_TREE_YES } else { IN_TREE_NO };
            // SAFETY: an entry of the overlay `'_` borrows, which keeps its arena.
            unsafe { &(*e).in_tree }.store(v, Ordering::Release);
        }
    }
}

/// A key's first 16 bytes (zeros after a shorter key) as two big-endian numbers: they compare
/// as the bytes do, up to a tie that only the whole keys settle.
#[inline]
pub(super) fn key_prefix(key: &[u8]) -> (u64, u64) {
    let mut p = [0u8; 16];
    let n = key.len().min(16);
    p[..n].copy_from_slice(&key[..n]);
    let (a, b) = p.split_at(8);
    (
        u64::from_be_bytes(a.try_into().unwrap_or_default()),
        u64::from_be_bytes(b.try_into().unwrap_or_default()),
    )
}

pub(super) fn sort_records(records: &mut [SortKey<'_>]) {
    records.sort_unstable_by(|a, b| {
        (a.table, a.prefix)
            .cmp(&(b.table, b.prefix))
            .then_with(|| a.key.cmp(b.key))
    });
}

impl Overlay {
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
    pub(super) fn index(&self) -> Arc<Index> {
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
        std::mem::take(&mut self.collect(txn, None, None, false).records)
    }

    /// `all`, of the records from `(table, key)` `from` (inclusive) to `to` (exclusive), each
    /// unbounded if `None`, with their entries: one slice of a checkpoint by slices
    /// (`engine::checkpoint`). Sorts only the records within (the walk reads every entry).
    pub(crate) fn gather(
        &self,
        txn: u64,
        from: Option<(u64, &[u8])>,
        to: Option<(u64, &[u8])>,
    ) -> Gathered<'_> {
        self.collect(txn, from, to, true)
    }

    /// `gather`, with the entries only if `entries` (`all` has no use for them).
    fn collect(
        &self,
        txn: u64,
        from: Option<(u64, &[u8])>,
        to: Option<(u64, &[u8])>,
        want_entries: bool,
    ) -> Gathered<'_> {
        let bounded = from.is_some() || to.is_some();
        let within = |table: u64, key: &[u8]| {
            from.is_none_or(|f| (table, key) >= f) && to.is_none_or(|t| (table, key) < t)
        };
        let (mut sorted, spare, buffers);
        {
            let owned = self.owned.lock().unwrap_or_else(|e| e.into_inner());
            spare = owned.arena.spare.clone();
            buffers = spare.as_ref().map(|s| s.gathering()).unwrap_or_default();
            sorted = recycle::<_, SortKey<'_>>(buffers.sort);
            sorted.reserve(if bounded { 0 } else { self.len() });
            sorted.extend(owned.order.iter().filter_map(|&e| {
                // SAFETY: `order` holds entries of this overlay, which live as long as it
                // (as in `find`).
                let (table, key) = unsafe { ((*e).table, entry_key(e)) };
                if bounded && !within(table, key) {
                    return None;
                }
                // SAFETY: as above.
                let (value, run) = unsafe { Self::visible_run(e, txn) }?;
                Some(SortKey::new(table, key, value, run, e))
            }));
        }
        sort_records(&mut sorted);
        let mut entries = recycle::<_, *const Entry>(buffers.entries);
        if want_entries {
            entries.extend(sorted.iter().map(|r| r.entry));
        }
        let mut records = recycle::<_, TableRecord<'_>>(buffers.records);
        records.extend(sorted.iter().map(|r| (r.table, r.key, r.value, r.run)));
        Gathered {
            records,
            entries,
            sort: recycle(sorted),
            spare,
        }
    }
}
