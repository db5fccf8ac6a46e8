//! The layers above the tree, and the layered read.
//!
//! A snapshot of a handle that writes the log reads its keys through up to three layers before
//! the B-tree: the transaction's own writes (`Batch`, a write transaction's only), the active
//! overlay (the commits since the last checkpoint began) and the frozen overlay (the commits a
//! checkpoint is writing into the tree). The newest layer that knows a key wins; a deletion
//! there hides the tree's value.
//!
//! ```text
//! mod.rs      the layered read: Upper (the layers a handle reads, point reads, counts),
//!             UpperScan (the layers merged in a scan's direction), Overlays
//! range.rs    Range: a scan of the tree merged with the layers above it, from either end
//! overlay.rs  Overlay: the versioned, hashed and sorted record store of the commits since a
//!             checkpoint
//! slices.rs   Slices: the active overlays, one per key range
//! batch.rs    Batch: a logged write transaction's private writes and its log record's body
//! ```

pub(crate) mod batch;
pub(crate) mod overlay;
mod range;
pub(crate) mod slices;

pub use range::Range;
use range::Walk;

use super::counts::CountLog;
use crate::btree::{self, Cursor};
use crate::error::{Error, Result};
use crate::pager::{PageSource, TableHeader};
use batch::Batch;
use overlay::{Lookup, Overlay, Scan, Visible};
use slices::{Slices, SlicesScan};
use std::ops::Bound;

/// A key and its value, borrowed from the transaction.
pub type Entry<'t> = (&'t [u8], &'t [u8]);

/// What a table handle reads before the tree: the overlays at the snapshot's commit (the
/// active one, then the frozen one a checkpoint is writing into the tree) and, in a write
/// transaction that commits through the log, the transaction's own writes (which win).
/// Empty when the tree is everything (no overlay, a transaction that writes pages).
#[derive(Clone, Copy, Default)]
pub(crate) struct Upper<'t> {
    overlay: Option<&'t Slices>,
    frozen: Option<&'t Overlay>,
    batch: Option<&'t Batch>,
    /// The entry counts (`engine::counts`).
    counts: Option<&'t CountLog>,
    /// The table's number in the overlay and the batch.
    table: u64,
    /// The snapshot's commit: the newest overlay version visible.
    txn: u64,
}

impl<'t> Upper<'t> {
    pub(crate) fn new(
        overlays: Overlays<'t>,
        batch: Option<&'t Batch>,
        table: u64,
        txn: u64,
    ) -> Upper<'t> {
        Upper {
            overlay: overlays.active,
            frozen: overlays.frozen,
            batch,
            counts: overlays.counts,
            table,
            txn,
        }
    }

    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.overlay.is_none() && self.frozen.is_none() && self.batch.is_none()
    }

    /// The table's entry count at the snapshot, if a commit in an overlay changed it.
    pub(crate) fn count(&self) -> Option<u64> {
        self.counts?.get(self.table, self.txn)
    }

    /// Keys counted as new by blind writes (`WriteTable::set`) that `in_tree` says the tree
    /// has, in both overlays (a key blind in the frozen one and written again in the active
    /// one was known there, so no key is counted twice).
    pub(crate) fn blind_in_tree(&self, in_tree: impl Fn(&[u8]) -> Result<bool>) -> Result<u64> {
        let mut n = 0;
        if let Some(o) = self.overlay {
            n += o.blind_in_tree(self.table, self.txn, &in_tree)?;
        }
        if let Some(o) = self.frozen {
            n += o.blind_in_tree(self.table, self.txn, &in_tree)?;
        }
        Ok(n)
    }

    /// What the layers above the tree say about `key`.
    #[inline]
    pub(crate) fn get(&self, key: &[u8]) -> Lookup<'t> {
        if let Some(found) = self.batch.and_then(|b| b.get(self.table, key)) {
            return match found {
                Some(v) => Lookup::Value(v),
                None => Lookup::Deleted,
            };
        }
        match (self.overlay, self.frozen) {
            (Some(active), Some(frozen)) => {
                // Both probes are a cache miss in a large overlay: the frozen one's slot is
                // asked for first, so that its miss overlaps the active one's.
                let in_frozen = frozen.hash(self.table, key);
                frozen.prefetch_hashed(in_frozen);
                let found = active.get(self.table, key, self.txn);
                if !matches!(found, Lookup::Absent) {
                    return found;
                }
                frozen.get_hashed(in_frozen, self.table, key, self.txn)
            }
            (Some(active), None) => active.get(self.table, key, self.txn),
            (None, Some(frozen)) => frozen.get(self.table, key, self.txn),
            (None, None) => Lookup::Absent,
        }
    }

    /// The keys of the layers above the tree within the bounds, in the scan's direction,
    /// each with what the newest layer holds for it.
    pub(super) fn scan(
        &self,
        start: &Bound<Vec<u8>>,
        end: &Bound<Vec<u8>>,
        reverse: bool,
    ) -> UpperScan<'t> {
        let (s, e) = (as_ref(start), as_ref(end));
        UpperScan {
            batch: self
                .batch
                .map(|b| b.range(self.table, s, e))
                .unwrap_or_default(),
            batch_taken: 0,
            active: self
                .overlay
                .map(|o| o.scan(self.table, self.txn, s, e, reverse)),
            frozen: self
                .frozen
                .map(|o| o.scan(self.table, self.txn, s, e, reverse)),
            heads: [None; 3],
            best: None,
            sole: None,
            started: false,
            reverse,
        }
    }
}

/// The layers above the tree merged, in a scan's direction (`Upper::scan`): the transaction's
/// own writes, then the active overlay, then the frozen one; a key's newest layer wins.
pub(super) struct UpperScan<'t> {
    /// The transaction's writes in the bounds, ascending, and how many are taken (from the
    /// end if reverse).
    batch: Vec<Visible<'t>>,
    batch_taken: usize,
    active: Option<SlicesScan<'t>>,
    frozen: Option<Scan<'t>>,
    /// Each layer's next key, newest layer first (`None`: it has no more).
    heads: [Option<Visible<'t>>; 3],
    /// `peek`'s answer, kept until `advance` moves a layer on.
    best: Option<Option<Visible<'t>>>,
    /// The one layer with keys left, once every other has none (a layer that has none never
    /// has more): `peek` and `advance` then take its keys with no merge.
    sole: Option<usize>,
    started: bool,
    reverse: bool,
}

impl<'t> UpperScan<'t> {
    /// Whether no layer has anything in the scan's bounds, before it started: a range then
    /// reads the tree alone (`Range::new`). Once idle checkpoints have merged every slice, a
    /// seek otherwise paid for the layers' merge on every step.
    pub(super) fn is_empty(&self) -> bool {
        !self.started
            && self.batch.is_empty()
            && self.active.as_ref().is_none_or(SlicesScan::is_empty)
            && self.frozen.as_ref().is_none_or(Scan::is_empty)
    }

    #[inline(always)]
    fn pull(&mut self, layer: usize) -> Option<Visible<'t>> {
        match layer {
            0 => {
                let n = self.batch.len();
                (self.batch_taken < n).then(|| {
                    self.batch_taken += 1;
                    if self.reverse {
                        self.batch[n - self.batch_taken]
                    } else {
                        self.batch[self.batch_taken - 1]
                    }
                })
            }
            1 => self.active.as_mut()?.next(),
            _ => self.frozen.as_mut()?.next(),
        }
    }

    /// The next key, with what its newest layer holds, without taking it.
    pub(super) fn peek(&mut self) -> Option<Visible<'t>> {
        if !self.started {
            self.started = true;
            for layer in 0..self.heads.len() {
                self.heads[layer] = self.pull(layer);
            }
            self.note_sole();
        }
        if let Some(layer) = self.sole {
            return self.heads[layer];
        }
        if let Some(best) = self.best {
            return best;
        }
        let mut best: Option<Visible<'t>> = None;
        // Newest layer first: a key in two layers keeps the first one met.
        for &(k, v) in self.heads.iter().flatten() {
            let first = |b: &[u8]| {
                let o = btree::node::compare_keys(k, b);
                if self.reverse {
                    o.is_gt()
                } else {
                    o.is_lt()
                }
            };
            if best.is_none_or(|(b, _)| first(b)) {
                best = Some((k, v));
            }
        }
        self.best = Some(best);
        best
    }

    /// Takes key `key` (the one `peek` returned) from every layer that has it.
    pub(super) fn advance(&mut self, key: &[u8]) {
        if let Some(layer) = self.sole {
            self.heads[layer] = self.pull(layer);
            return;
        }
        self.best = None;
        let mut ran_out = false;
        for layer in 0..self.heads.len() {
            if self.heads[layer].is_some_and(|(k, _)| btree::node::compare_keys(k, key).is_eq()) {
                self.heads[layer] = self.pull(layer);
                ran_out |= self.heads[layer].is_none();
            }
        }
        if ran_out {
            self.note_sole();
        }
    }

    /// The next key that has a value, taken, with that value: for a walk whose tree has no
    /// more entries, which needs no look-ahead. Once one layer alone has keys left, they come
    /// straight from it: its head is taken, then each next key is pulled as it is asked for,
    /// instead of being kept in `heads` until the next call, whose read of it back (a copy of
    /// two words per key written one way and read another) held up every step (a 200K-key
    /// scan of one overlay, 9.4 ns a key with the look-ahead kept). After it, `peek` and
    /// `advance` must not be used.
    #[inline(always)]
    pub(super) fn take_value(&mut self) -> Option<Entry<'t>> {
        loop {
            let (k, v) = match self.sole {
                Some(layer) => match self.heads[layer].take() {
                    Some(head) => head,
                    None => self.pull(layer)?,
                },
                None => {
                    let head = self.peek()?;
                    self.advance(head.0);
                    head
                }
            };
            if let Some(v) = v {
                return Some((k, v));
            }
        }
    }

    /// Sets `sole` where one layer alone has keys left: at the start, and each time a layer
    /// runs out, not at every step.
    fn note_sole(&mut self) {
        let mut live = self.heads.iter().enumerate().filter(|(_, h)| h.is_some());
        if let (Some((layer, _)), None) = (live.next(), live.next()) {
            self.sole = Some(layer);
        }
    }
}

/// The overlays a snapshot reads before its tree, and its entry counts
/// (`engine::published::Published`).
#[derive(Clone, Copy, Default)]
pub(crate) struct Overlays<'t> {
    pub(crate) active: Option<&'t Slices>,
    pub(crate) frozen: Option<&'t Overlay>,
    pub(crate) counts: Option<&'t CountLog>,
}

pub(crate) fn as_ref(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match b {
        Bound::Included(k) => Bound::Included(k.as_slice()),
        Bound::Excluded(k) => Bound::Excluded(k.as_slice()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

/// The value of `key`: the layers above the tree, then the tree.
#[inline]
pub(crate) fn get_layered<'t, S: PageSource + ?Sized>(
    src: &'t S,
    hdr: &TableHeader,
    upper: &Upper<'t>,
    key: &[u8],
) -> Result<Option<&'t [u8]>> {
    if !upper.is_empty() {
        match upper.get(key) {
            Lookup::Value(v) => return Ok(Some(v)),
            Lookup::Deleted => return Ok(None),
            Lookup::Absent => {}
        }
    }
    btree::get(src, hdr, key)
}

/// A table's entry count with `in_tree` of the keys counted as new by blind writes taken
/// off (it cannot be more than the count: each was counted once).
pub(crate) fn uncount(entries: u64, in_tree: u64) -> Result<u64> {
    entries.checked_sub(in_tree).ok_or_else(|| {
        Error::Internal(format!(
            "entry count {entries} is less than the {in_tree} keys that blind writes counted \
             as new and the tree has"
        ))
    })
}

/// Where `edge` looks.
#[derive(Clone, Copy)]
pub(crate) enum Edge<'k> {
    First,
    Last,
    /// The first key at or after this one.
    Seek(&'k [u8]),
}

/// The entry at `at`: straight from the tree's cursor when nothing lies above the tree, else
/// the first of a range merged with the layers above it.
pub(crate) fn edge<'t>(
    src: &'t dyn PageSource,
    hdr: TableHeader,
    upper: Upper<'t>,
    at: Edge<'_>,
) -> Result<Option<Entry<'t>>> {
    if upper.is_empty() {
        let mut c = Cursor::new(src, hdr);
        let found = match at {
            Edge::First => c.first()?,
            Edge::Last => c.last()?,
            Edge::Seek(k) => c.seek(k)?,
        };
        return if found {
            Ok(Some(c.entry()?))
        } else {
            Ok(None)
        };
    }
    let (start, reverse) = match at {
        Edge::First => (Bound::Unbounded, false),
        Edge::Last => (Bound::Unbounded, true),
        Edge::Seek(k) => (Bound::Included(k.to_vec()), false),
    };
    Walk::new(src, hdr, start, Bound::Unbounded, reverse, upper)
        .next()
        .transpose()
}
