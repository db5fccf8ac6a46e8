//! The active overlays: one per slice of the key space (docs/design/footprint.md, "An
//! overlay per slice").
//!
//! The key space of every table, ordered by (table number, key), is cut into slices; each
//! slice has an overlay of its own that takes the commits' records in its range. A checkpoint
//! freezes one slice's overlay and merges it into the tree, and the others go on gathering
//! records, so that a leaf is rewritten once it has gathered several of them, and the copies a
//! checkpoint makes are of one slice's leaves, not of the whole tree. A read finds its slice by
//! a binary search over the cuts, then probes that slice's overlay.
//!
//! A `Slices` is shared by the snapshots, as an overlay is: the writer adds each commit's
//! records to the overlays of the slices they fall in, and readers see a commit once it is
//! published. Only a checkpoint changes the slices, and it makes a new `Slices`, with the
//! frozen slice's overlay replaced by new ones (the slice may be cut again there): the other
//! slices' overlays are the same objects in both.

use super::overlay::{Inserted, Lookup, Overlay, Scan, TableRecord, Visible};
use crate::error::Result;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// A place in the key space of every table: a table's number and a key.
pub(crate) type At<'k> = (u64, &'k [u8]);

/// `Slice::from` of a slice whose overlay holds no record of the log yet.
const NO_RECORD: u64 = u64::MAX;

/// One slice: its overlay, and where in the log its records start.
pub(crate) struct Slice {
    pub(crate) overlay: Arc<Overlay>,
    /// A log position no record in the overlay comes before: where the commit that first put
    /// one there began appending (`Slices::insert_marked`), or `NO_RECORD`. Only the writer
    /// sets and reads it, through the newest `Slices`.
    from: AtomicU64,
}

impl Slice {
    fn new(overlay: Arc<Overlay>, from: u64) -> Slice {
        Slice {
            overlay,
            from: AtomicU64::new(from),
        }
    }

    /// Where in the log the overlay's records start, if it holds any the log has.
    pub(crate) fn from(&self) -> Option<u64> {
        Some(self.from.load(Ordering::Relaxed)).filter(|&f| f != NO_RECORD)
    }
}

impl Clone for Slice {
    fn clone(&self) -> Slice {
        Slice::new(self.overlay.clone(), self.from.load(Ordering::Relaxed))
    }
}

/// The active overlays, one per slice (the module's text). Never empty.
pub(crate) struct Slices {
    /// Where each slice after the first starts (table, key), ascending.
    starts: Vec<(u64, Box<[u8]>)>,
    /// The bytes every start's key begins with (db_bench's zero-padded decimal keys share
    /// their first 8 or more, YCSB's their `user`).
    common: Box<[u8]>,
    /// `starts` as (table, the 8 bytes of the key after `common` as a big-endian number,
    /// zero-padded), for `index_of`: a point read finds its slice by comparing integers, and
    /// compares keys only where those are equal (a search by key alone called `memcmp` five
    /// times a read over 32 slices: a tenth of a cached point read's time).
    prefixes: Vec<(u64, u64)>,
    slices: Vec<Slice>,
    /// Whether a record went into one of the slices through these `Slices`, or was there when
    /// they were made: once idle checkpoints have merged every slice, the `Slices` made by the
    /// last (`frozen_at`) hold none, and a read skips them with one load instead of finding
    /// its slice. Only the newest `Slices` takes records (the writer goes on through the one
    /// `frozen_at` returns), and a reader's snapshot sees only the records of commits made
    /// through its own, so a flag set before a commit is published is seen by every reader
    /// of that commit. One slice reads its overlay's count instead (a follower's replay adds
    /// records to the overlay it wrapped).
    holds: AtomicBool,
}

/// A key's first 8 bytes as a big-endian number, zero-padded: keys in the order of their
/// prefixes, with equal prefixes for keys that only a longer comparison tells apart.
#[inline]
fn prefix(key: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    let n = key.len().min(8);
    b[..n].copy_from_slice(&key[..n]);
    u64::from_be_bytes(b)
}

/// The bytes every key of `starts` begins with (the empty keys that start a table's slices
/// aside), and each start's (table, prefix) after them (0 for an empty key: at or before
/// every key of its table).
fn prefixes(starts: &[(u64, Box<[u8]>)]) -> (Box<[u8]>, Vec<(u64, u64)>) {
    let mut keys = starts.iter().map(|(_, k)| &k[..]).filter(|k| !k.is_empty());
    let mut common: &[u8] = keys.next().unwrap_or_default();
    for k in keys {
        let same = common
            .iter()
            .zip(k.iter())
            .take_while(|(a, b)| a == b)
            .count();
        common = &common[..same];
    }
    let skip = common.len();
    let prefixes = starts
        .iter()
        .map(|(t, k)| (*t, k.get(skip..).map_or(0, prefix)))
        .collect();
    (common.into(), prefixes)
}

impl Slices {
    /// One slice, the whole key space, in `overlay`, which holds records of the log from
    /// position `from` on (replay's).
    pub(crate) fn one(overlay: Arc<Overlay>, from: u64) -> Slices {
        Slices {
            starts: Vec::new(),
            common: Box::default(),
            prefixes: Vec::new(),
            holds: AtomicBool::new(overlay.len() > 0),
            slices: vec![Slice::new(overlay, from)],
        }
    }

    /// Slices starting at `starts` (ascending; the first slice starts at the key space's
    /// start), each with a new, empty overlay from `make`.
    pub(crate) fn new(
        starts: Vec<(u64, Box<[u8]>)>,
        mut make: impl FnMut() -> Arc<Overlay>,
    ) -> Slices {
        debug_assert!(starts.windows(2).all(|w| w[0] < w[1]));
        let slices = (0..=starts.len())
            .map(|_| Slice::new(make(), NO_RECORD))
            .collect();
        let (common, prefixes) = prefixes(&starts);
        Slices {
            starts,
            common,
            prefixes,
            holds: AtomicBool::new(false),
            slices,
        }
    }

    /// The slices, in key order.
    pub(crate) fn slices(&self) -> &[Slice] {
        &self.slices
    }

    /// The overlay, where there is one slice.
    pub(crate) fn single(&self) -> Option<&Arc<Overlay>> {
        match &self.slices[..] {
            [only] => Some(&only.overlay),
            _ => None,
        }
    }

    /// Where slice `i` starts (inclusive) and ends (exclusive), `None` for the key space's
    /// start and end.
    pub(crate) fn bounds(&self, i: usize) -> (Option<At<'_>>, Option<At<'_>>) {
        let at = |j: usize| self.starts.get(j).map(|(t, k)| (*t, &k[..]));
        (i.checked_sub(1).and_then(at), at(i))
    }

    /// The slice whose overlay holds the most keys (tables' counts are one key each), if
    /// any holds one.
    pub(crate) fn fullest(&self) -> Option<usize> {
        (0..self.slices.len())
            .filter(|&i| self.slices[i].overlay.len() > 0)
            .max_by_key(|&i| self.slices[i].overlay.len())
    }

    /// The slice that holds the oldest record of the log (`Slice::from`), if any holds one.
    pub(crate) fn oldest(&self) -> Option<usize> {
        (0..self.slices.len())
            .filter_map(|i| Some((self.slices[i].from()?, i)))
            .min()
            .map(|(_, i)| i)
    }

    /// Where in the log the oldest record of these overlays may be, if they hold any the log
    /// has.
    pub(crate) fn oldest_from(&self) -> Option<u64> {
        self.slices.iter().filter_map(Slice::from).min()
    }

    /// The oldest commit these overlays hold a record of, if any (`Overlay::first_txn`).
    pub(crate) fn oldest_first_txn(&self) -> Option<u64> {
        self.slices
            .iter()
            .filter_map(|s| s.overlay.first_txn())
            .min()
    }

    /// These slices with slice `i`'s overlay taken out to be frozen: in its place, new, empty
    /// overlays from `make`, one for each part of the slice `cuts` (ascending, within it) cut
    /// it into. The writer goes on through the new `Slices` alone.
    pub(crate) fn frozen_at(
        &self,
        i: usize,
        cuts: Vec<(u64, Box<[u8]>)>,
        mut make: impl FnMut() -> Arc<Overlay>,
    ) -> Slices {
        let parts = cuts.len() + 1;
        let mut starts = Vec::with_capacity(self.starts.len() + cuts.len());
        starts.extend_from_slice(&self.starts[..i]);
        starts.extend(cuts);
        starts.extend_from_slice(&self.starts[i..]);
        let mut slices = Vec::with_capacity(self.slices.len() + parts - 1);
        slices.extend_from_slice(&self.slices[..i]);
        slices.extend((0..parts).map(|_| Slice::new(make(), NO_RECORD)));
        slices.extend_from_slice(&self.slices[i + 1..]);
        debug_assert!(starts.windows(2).all(|w| w[0] < w[1]));
        debug_assert_eq!(starts.len() + 1, slices.len());
        let (common, prefixes) = prefixes(&starts);
        let holds = slices.iter().any(|s| s.overlay.len() > 0);
        Slices {
            starts,
            common,
            prefixes,
            holds: AtomicBool::new(holds),
            slices,
        }
    }

    /// Whether no slice holds a record (`holds`).
    #[inline]
    fn empty(&self) -> bool {
        self.slices.len() > 1 && !self.holds.load(Ordering::Acquire)
    }

    /// The slice `(table, key)` falls in.
    #[inline]
    fn index_of(&self, table: u64, key: &[u8]) -> usize {
        if self.starts.is_empty() {
            return 0;
        }
        let by_key = |starts: &[(u64, Box<[u8]>)]| {
            starts.partition_point(|(t, k)| (*t, &k[..]) <= (table, key))
        };
        let Some(rest) = key.strip_prefix(&self.common[..]) else {
            // A key without the starts' common bytes: by whole keys.
            return by_key(&self.starts);
        };
        let p = (table, prefix(rest));
        // Past the last start's prefix: the last slice, where ascending keys all go.
        if self.prefixes.last().is_some_and(|&q| q < p) {
            return self.prefixes.len();
        }
        // The slices whose start is at or before the key: those whose start's prefix is
        // below the key's, and, among those with the same prefix, the ones whose whole start
        // is at or before it (the keys compared whole: the common bytes are equal).
        let below = self.prefixes.partition_point(|&q| q < p);
        let same = self.prefixes[below..].partition_point(|&q| q == p);
        below + by_key(&self.starts[below..below + same])
    }

    /// The overlay of the slice `(table, key)` falls in.
    #[inline]
    pub(crate) fn overlay_of(&self, table: u64, key: &[u8]) -> &Overlay {
        &self.slices[self.index_of(table, key)].overlay
    }

    /// As `Overlay::get`, in the slice of the key.
    #[inline]
    pub(crate) fn get(&self, table: u64, key: &[u8], txn: u64) -> Lookup<'_> {
        if self.empty() {
            return Lookup::Absent;
        }
        let overlay = self.overlay_of(table, key);
        // Most slices are empty once idle checkpoints have merged them: no probe then.
        if overlay.len() == 0 {
            return Lookup::Absent;
        }
        overlay.get(table, key, txn)
    }

    /// As `Overlay::blind_in_tree`, over every slice.
    pub(crate) fn blind_in_tree(
        &self,
        table: u64,
        txn: u64,
        in_tree: &impl Fn(&[u8]) -> Result<bool>,
    ) -> Result<u64> {
        let mut n = 0;
        for s in &self.slices {
            n += s.overlay.blind_in_tree(table, txn, in_tree)?;
        }
        Ok(n)
    }

    /// As `Overlay::prefetch_slot`, in the slice of the key.
    #[inline]
    pub(crate) fn prefetch_slot(&self, table: u64, key: &[u8]) {
        self.overlay_of(table, key).prefetch_slot(table, key);
    }

    /// As `Overlay::insert_marked`: each record goes to its slice's overlay, runs of records
    /// of one slice together. `logged`: the log position the commit's record was appended at
    /// or after, which a slice that held no record of the log takes as its `from`.
    pub(crate) fn insert_marked<'a>(
        &self,
        txn: u64,
        records: impl IntoIterator<Item = Inserted<'a>>,
        logged: u64,
    ) {
        // Only the writer sets and reads `from` (a load and a store, no locked instruction),
        // and only the first commit with a record in the slice sets it.
        let logged_in = |slice: &Slice| {
            if slice.from.load(Ordering::Relaxed) == NO_RECORD {
                slice.from.store(logged, Ordering::Relaxed);
            }
        };
        if let [only] = &self.slices[..] {
            only.overlay.insert_marked(txn, records);
            logged_in(only);
            return;
        }
        // Before the records: the commit is published after them (`holds`).
        if !self.holds.load(Ordering::Relaxed) {
            self.holds.store(true, Ordering::Release);
        }
        // Each run of records in one slice goes to its overlay in one call, taken from the
        // records as they come (no buffer).
        let mut records = records
            .into_iter()
            .map(|r| (self.index_of(r.0, r.1), r))
            .peekable();
        while let Some(&(at, _)) = records.peek() {
            let run = std::iter::from_fn(|| records.next_if(|(i, _)| *i == at).map(|(_, r)| r));
            self.slices[at].overlay.insert_marked(txn, run);
            logged_in(&self.slices[at]);
        }
    }

    /// Keys with at least one version, in all the slices (`Overlay::len`).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.slices.iter().map(|s| s.overlay.len()).sum()
    }

    /// The memory the overlays hold (`Overlay::bytes`).
    pub(crate) fn bytes(&self) -> usize {
        self.slices.iter().map(|s| s.overlay.bytes()).sum()
    }

    /// Every record visible at `txn`, sorted by table and key (`Overlay::all`, slice after
    /// slice).
    pub(crate) fn all(&self, txn: u64) -> Vec<TableRecord<'_>> {
        match self.single() {
            Some(only) => only.all(txn),
            None => self
                .slices
                .iter()
                .flat_map(|s| s.overlay.all(txn))
                .collect(),
        }
    }

    /// As `Overlay::scan`, through the slices the bounds reach, in the scan's direction. Only
    /// the first slice's overlay is scanned at once; the others as the scan reaches them, and
    /// not at all where they hold nothing: a seek reads a few entries of one slice, and each
    /// overlay's scan takes its index's lock and sorts what it gathered since the last.
    pub(crate) fn scan<'a>(
        &'a self,
        table: u64,
        txn: u64,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
        reverse: bool,
    ) -> SlicesScan<'a> {
        if self.empty() {
            return SlicesScan {
                current: None,
                between: &[],
                end: None,
                table,
                txn,
                reverse,
            };
        }
        let first = match start {
            Bound::Included(k) | Bound::Excluded(k) => self.index_of(table, k),
            Bound::Unbounded => self.index_of(table, &[]),
        };
        let last = match end {
            Bound::Included(k) | Bound::Excluded(k) => self.index_of(table, k),
            // The last slice that starts at or before the table's end.
            Bound::Unbounded => self.starts.partition_point(|(t, _)| *t <= table),
        };
        let last = last.max(first);
        let scan = |s: &'a Slice| {
            (s.overlay.len() > 0).then(|| s.overlay.scan(table, txn, start, end, reverse))
        };
        let (current, between, end_scan) = if first == last {
            (scan(&self.slices[first]), &self.slices[..0], None)
        } else if reverse {
            (
                scan(&self.slices[last]),
                &self.slices[first + 1..last],
                scan(&self.slices[first]),
            )
        } else {
            (
                scan(&self.slices[first]),
                &self.slices[first + 1..last],
                scan(&self.slices[last]),
            )
        };
        SlicesScan {
            current,
            between,
            end: end_scan,
            table,
            txn,
            reverse,
        }
    }
}

/// A scan through several slices' overlays, one after another (`Slices::scan`).
pub(crate) struct SlicesScan<'o> {
    /// The slice being read.
    current: Option<Scan<'o>>,
    /// The slices wholly within the bounds, in key order, not reached yet: each scanned for
    /// the whole table when it is (its keys are all within the bounds).
    between: &'o [Slice],
    /// The last slice's scan, made at once with the bounds (which are not kept).
    end: Option<Scan<'o>>,
    table: u64,
    txn: u64,
    reverse: bool,
}

impl<'o> SlicesScan<'o> {
    /// Whether no slice has anything in its bounds (`Scan::is_empty`; a slice between the
    /// first and the last, scanned whole for the table, counts as empty only with no record).
    pub(crate) fn is_empty(&self) -> bool {
        self.current.as_ref().is_none_or(Scan::is_empty)
            && self.end.as_ref().is_none_or(Scan::is_empty)
            && self.between.iter().all(|s| s.overlay.len() == 0)
    }

    /// The next slice's scan, or `None` once every slice is read.
    fn advance(&mut self) -> Option<Scan<'o>> {
        loop {
            let next = if self.reverse {
                self.between.split_last().map(|(s, rest)| {
                    self.between = rest;
                    s
                })
            } else {
                self.between.split_first().map(|(s, rest)| {
                    self.between = rest;
                    s
                })
            };
            let Some(slice) = next else {
                return self.end.take();
            };
            if slice.overlay.len() > 0 {
                let all = (Bound::Unbounded, Bound::Unbounded);
                return Some(
                    slice
                        .overlay
                        .scan(self.table, self.txn, all.0, all.1, self.reverse),
                );
            }
        }
    }
}

impl<'o> Iterator for SlicesScan<'o> {
    type Item = Visible<'o>;

    #[inline(always)]
    fn next(&mut self) -> Option<Visible<'o>> {
        loop {
            if let Some(v) = self.current.as_mut().and_then(Iterator::next) {
                return Some(v);
            }
            self.current = Some(self.advance()?);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use std::collections::BTreeMap;

    /// Slices cut within table 1 and at table 2's start.
    fn cut() -> Slices {
        let starts: Vec<(u64, Box<[u8]>)> = vec![
            (1, b"0300".to_vec().into_boxed_slice()),
            (1, b"0700".to_vec().into_boxed_slice()),
            (2, Box::default()),
        ];
        Slices::new(starts, || Arc::new(Overlay::new()))
    }

    /// A key's slice found by the starts' prefixes is the one a search by whole keys finds,
    /// with starts and keys that share 8-byte prefixes or more, are shorter than 8 bytes, or
    /// end in zero bytes (equal to their padding), with and without the starts' common bytes.
    #[test]
    fn slices_are_found_by_prefix_as_by_key() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(9);
        let key = |rng: &mut rand::rngs::StdRng| -> Vec<u8> {
            // Half of them with 9 common bytes, as zero-padded decimal keys have.
            let mut k = match rng.gen_bool(0.5) {
                true => b"000000000".to_vec(),
                false => Vec::new(),
            };
            let len = rng.gen_range(0..12);
            k.extend((0..len).map(|_| [0u8, b'0', b'a'][rng.gen_range(0..3)]));
            k
        };
        for round in 0..400 {
            let mut starts: Vec<(u64, Box<[u8]>)> = (0..rng.gen_range(1..40))
                .map(|_| (rng.gen_range(0..3u64), key(&mut rng).into_boxed_slice()))
                .collect();
            if round % 2 == 0 {
                // Starts that all share the common bytes.
                // (A table's first slice starts at its empty key, which stays empty.)
                for (_, k) in starts.iter_mut().filter(|(_, k)| !k.is_empty()) {
                    *k = [&b"000000000"[..], k].concat().into_boxed_slice();
                }
            }
            starts.sort();
            starts.dedup();
            let s = Slices::new(starts.clone(), || Arc::new(Overlay::new()));
            for _ in 0..200 {
                let (t, k) = (rng.gen_range(0..3u64), key(&mut rng));
                let by_key = starts.partition_point(|(st, sk)| (*st, &sk[..]) <= (t, &k[..]));
                assert_eq!(s.index_of(t, &k), by_key, "table {t} key {k:?}");
            }
        }
    }

    /// Records go to their slice, and reads and scans (bounded or not, both ways)
    /// through the slices give what one overlay would.
    #[test]
    fn slices_read_as_one_overlay() {
        let s = cut();
        assert_eq!(s.slices().len(), 4);
        let mut model: BTreeMap<(u64, Vec<u8>), Option<Vec<u8>>> = BTreeMap::new();
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        for txn in 1..=200u64 {
            let mut batch = Vec::new();
            for _ in 0..rng.gen_range(1..20) {
                let table = rng.gen_range(0..4u64);
                let key = format!("{:04}", rng.gen_range(0..1000)).into_bytes();
                let value = (!rng.gen_bool(0.1)).then(|| vec![txn as u8; 3]);
                batch.push((table, key, value));
            }
            batch.sort();
            batch.dedup_by(|a, b| (a.0, &a.1) == (b.0, &b.1));
            s.insert_marked(
                txn,
                batch
                    .iter()
                    .map(|(t, k, v)| (*t, k.as_slice(), v.as_deref(), false, 0)),
                txn * 10,
            );
            for (t, k, v) in batch {
                model.insert((t, k), v);
            }
        }
        // Each slice holds only its own range.
        for (i, slice) in s.slices().iter().enumerate() {
            let (start, end) = s.bounds(i);
            for ((t, k), _) in model.iter() {
                let inside =
                    start.is_none_or(|b| (*t, &k[..]) >= b) && end.is_none_or(|b| (*t, &k[..]) < b);
                let found = !matches!(slice.overlay.get(*t, k, 200), Lookup::Absent);
                assert_eq!(found, inside, "slice {i}, table {t}, key {k:?}");
            }
        }
        for ((t, k), v) in &model {
            let want = match v {
                Some(v) => Lookup::Value(v),
                None => Lookup::Deleted,
            };
            assert_eq!(s.get(*t, k, 200), want);
        }
        let mut empties = 0;
        // (Table 4 has no record; the last bounds hold no key.)
        for table in 0..5u64 {
            for (lo, hi) in [
                (None, None),
                (Some("0250"), Some("0750")),
                (Some("0700"), None),
                (Some("0500"), Some("0500")),
            ] {
                let start = lo.map_or(Bound::Unbounded, |k: &str| Bound::Included(k.as_bytes()));
                let end = hi.map_or(Bound::Unbounded, |k: &str| Bound::Excluded(k.as_bytes()));
                let want: Vec<(Vec<u8>, Option<Vec<u8>>)> = model
                    .iter()
                    .filter(|((t, k), _)| {
                        *t == table
                            && lo.is_none_or(|l| &k[..] >= l.as_bytes())
                            && hi.is_none_or(|h| &k[..] < h.as_bytes())
                    })
                    .map(|((_, k), v)| (k.clone(), v.clone()))
                    .collect();
                let got: Vec<(Vec<u8>, Option<Vec<u8>>)> = s
                    .scan(table, 200, start, end, false)
                    .map(|(k, v)| (k.to_vec(), v.map(|v| v.to_vec())))
                    .collect();
                assert_eq!(got, want, "table {table} {lo:?}..{hi:?}");
                // A scan that says it is empty has nothing (a range then reads the tree
                // alone); one with something never says so.
                for reverse in [false, true] {
                    let empty = s.scan(table, 200, start, end, reverse).is_empty();
                    assert!(!empty || want.is_empty(), "{table} {lo:?}..{hi:?}");
                    empties += usize::from(empty);
                }
                let mut back: Vec<(Vec<u8>, Option<Vec<u8>>)> = s
                    .scan(table, 200, start, end, true)
                    .map(|(k, v)| (k.to_vec(), v.map(|v| v.to_vec())))
                    .collect();
                back.reverse();
                assert_eq!(back, want, "table {table} {lo:?}..{hi:?} reversed");
            }
        }
        assert!(empties > 0, "no scan was empty");
        // Deletions too: a checkpoint applies them.
        assert_eq!(s.all(200).len(), model.len());
    }

    /// Slices that hold no record say so (a read skips them), from the first record put
    /// through them on; slices made by freezing one hold records if another slice does.
    #[test]
    fn slices_know_when_they_hold_nothing() {
        let s = cut();
        assert!(s.empty());
        assert_eq!(s.get(1, b"0400", 9), Lookup::Absent);
        assert!(s
            .scan(1, 9, Bound::Unbounded, Bound::Unbounded, false)
            .is_empty());
        s.insert_marked(10, [(1, &b"0400"[..], Some(&b"b"[..]), false, 0)], 10);
        assert!(!s.empty());
        assert_eq!(
            s.get(1, b"0400", 9),
            Lookup::Absent,
            "a later commit's record"
        );
        assert_eq!(s.get(1, b"0400", 10), Lookup::Value(&b"b"[..]));
        // The record is in slice 1 ("0300".."0700"): freezing it leaves none; freezing
        // another leaves it.
        let none = s.frozen_at(1, Vec::new(), || Arc::new(Overlay::new()));
        assert!(none.empty());
        let some = s.frozen_at(0, Vec::new(), || Arc::new(Overlay::new()));
        assert!(!some.empty());
        assert_eq!(some.get(1, b"0400", 10), Lookup::Value(&b"b"[..]));
        // One slice reads its overlay, which a replay may fill after wrapping it.
        let overlay = Arc::new(Overlay::new());
        let one = Slices::one(overlay.clone(), 0);
        overlay.insert(1, [(1, &b"k"[..], Some(&b"v"[..]))]);
        assert_eq!(one.get(1, b"k", 1), Lookup::Value(&b"v"[..]));
    }

    /// Freezing a slice replaces its overlay by new ones for the parts the cuts make, and
    /// keeps the others' overlays and log positions.
    #[test]
    fn a_frozen_slice_is_replaced_by_its_parts() {
        let s = cut();
        assert_eq!((s.oldest(), s.oldest_from()), (None, None));
        s.insert_marked(1, [(1, &b"0400"[..], Some(&b"b"[..]), false, 0)], 10);
        s.insert_marked(2, [(1, &b"0100"[..], Some(&b"a"[..]), false, 0)], 20);
        s.insert_marked(3, [(0, &b"0400"[..], Some(&b"c"[..]), false, 0)], 30);
        assert_eq!(s.slices()[3].from(), None, "a slice with no record");
        assert_eq!(s.fullest(), Some(0));
        // A slice's first record of the log sets where it starts; later ones do not.
        assert_eq!(
            [s.slices()[0].from(), s.slices()[1].from()],
            [Some(20), Some(10)]
        );
        assert_eq!((s.oldest(), s.oldest_from()), (Some(1), Some(10)));
        let cuts = vec![(1, b"0500".to_vec().into_boxed_slice())];
        let t = s.frozen_at(1, cuts, || Arc::new(Overlay::new()));
        assert_eq!(t.slices().len(), 5);
        assert!(Arc::ptr_eq(&t.slices()[0].overlay, &s.slices()[0].overlay));
        assert!(Arc::ptr_eq(&t.slices()[3].overlay, &s.slices()[2].overlay));
        assert_eq!(
            t.bounds(1),
            (Some((1, &b"0300"[..])), Some((1, &b"0500"[..])))
        );
        assert_eq!(
            t.bounds(2),
            (Some((1, &b"0500"[..])), Some((1, &b"0700"[..])))
        );
        assert_eq!(
            t.get(1, b"0400", 2),
            Lookup::Absent,
            "the frozen slice's record left"
        );
        assert_eq!(t.get(1, b"0100", 2), Lookup::Value(b"a"));
        assert_eq!((t.oldest(), t.oldest_from()), (Some(0), Some(20)));
        assert_eq!([t.slices()[1].from(), t.slices()[2].from()], [None, None]);
    }
}
