//! A sorted batch merged into the tree leaf by leaf: what a checkpoint does with the overlay
//! (docs/design/write-path.md, "The merge").
//!
//! For each leaf the batch reaches: one descent, the leaf's cells and the batch's records for
//! its key range merged into a list, that list packed into as few pages as hold it (the leaf's
//! copy and new right siblings), and the path above updated once per page. A key-by-key
//! application copies the leaf once too but pays a descent, a binary search, a slot shift
//! and, as the leaf fills, a split for every record; the merge pays a cell copy.
//!
//! Deletions that would leave a leaf less than a quarter full are applied key by key instead
//! (`delete` merges underfull leaves with a sibling). An empty tree gets its first leaf from
//! `put` of the first record; the rest are merged into it.

use super::delete::delete;
use super::node::{cell_key, compare_keys, leaf_cell_overflow, LeafValue, Node};
use super::put::{cell_bytes, descend, propagate, push_cell, put, Path};
use super::{edit, node_at, Scratch};
use crate::error::{Error, Result};
use crate::layout::node::{slots_at, SLOT_BYTES};
use crate::layout::{kind, overflow};
use crate::pager::page::checksum_ok;
use crate::pager::{PageRef, PageSource, TableHeader, WritePages};
use std::cmp::Ordering;

/// A key and its new value, or a deletion (`None`).
pub(crate) type Record<'r> = (&'r [u8], Option<&'r [u8]>);

/// Where a cell of a merged leaf comes from.
#[derive(Clone, Copy)]
enum Part {
    /// Cell `i` of the leaf as it was.
    Old(usize),
    /// Record `i` of the batch (a new or replacing value).
    New(usize),
}

/// What the merge keeps between leaves, so that these buffers are not allocated again for
/// each leaf: the leaf as it was, the batch's new cells, the merged list and page breaks (the
/// list of cell slices, the new pages' ids and separators are still allocated per leaf).
#[derive(Default)]
pub(crate) struct MergeScratch {
    old: Vec<u8>,
    cells: Vec<u8>,
    /// (start, end) of each new cell in `cells`, in the order of `Part::New` in `parts`.
    spans: Vec<(usize, usize)>,
    parts: Vec<Part>,
    /// Overflow runs (reference, pages) of the old values replaced or deleted.
    runs: Vec<(PageRef, u64)>,
    /// The first part of each page after the first.
    breaks: Vec<usize>,
    hi: Vec<u8>,
}

/// Applies `n` records, `record(i)` for `i` in `0..n`, in strictly ascending key order, to the
/// table whose header is `hdr` (its entry count kept). Requires: key and value lengths within
/// the limits (the records were checked when they were first written).
pub(crate) fn merge_sorted<'r>(
    w: &mut WritePages,
    scratch: &mut Scratch,
    hdr: &mut TableHeader,
    n: usize,
    record: impl Fn(usize) -> Record<'r>,
) -> Result<()> {
    merge_noting(w, scratch, hdr, n, record, &|_| PageRef::default(), None)
}

/// `merge_sorted` of records some of whose values are in runs a commit wrote already
/// (`run(i)`, id 0 for none: docs/design/large-values.md): the leaf takes the run's reference
/// as it is. A cell that references the same run already stays, and frees nothing.
pub(crate) fn merge_sorted_runs<'r>(
    w: &mut WritePages,
    scratch: &mut Scratch,
    hdr: &mut TableHeader,
    n: usize,
    record: impl Fn(usize) -> Record<'r>,
    run: &impl Fn(usize) -> PageRef,
    found: Option<&mut [bool]>,
) -> Result<()> {
    merge_noting(w, scratch, hdr, n, record, run, found)
}

fn merge_noting<'r>(
    w: &mut WritePages,
    scratch: &mut Scratch,
    hdr: &mut TableHeader,
    n: usize,
    record: impl Fn(usize) -> Record<'r>,
    run: &impl Fn(usize) -> PageRef,
    mut found: Option<&mut [bool]>,
) -> Result<()> {
    w.merging();
    let mut i = 0;
    let mut path = Path::new();
    let mut ahead = w.reads_ahead().then(Ahead::default);
    while i < n {
        if let Some(a) = ahead.as_mut() {
            a.ask(w, hdr, i, n, &record);
        }
        if hdr.root.is_none() {
            // `put` builds the first leaf; the merge takes over from the next record.
            if let (key, Some(value)) = record(i) {
                put(w, scratch, hdr, key, value, None)?;
                free_copied(w, run(i), value.len())?;
            }
            note(&mut found, i, false);
            i += 1;
            continue;
        }
        path.clear();
        let (first, _) = record(i);
        let leaf_ref = descend(w, hdr, Some(first), &mut path)?;
        // The records this leaf holds: those below the least separator above it that is
        // greater than its keys (none on the right edge).
        let m = &mut scratch.merge;
        m.hi.clear();
        let mut bounded = false;
        for (page, ci) in path.iter_up() {
            let node = Node::parse(w.page(page)?, page)?;
            if ci < node.n {
                m.hi.extend_from_slice(node.key(ci)?);
                bounded = true;
                break;
            }
        }
        // At most `MERGE_CHUNK_BYTES` of them at a time: the rest go to the leaf's last
        // page, found again by the next descent.
        let mut j = i + 1;
        let mut held = record_bytes(record(i));
        let mut more = false;
        while j < n {
            let r = record(j);
            if bounded && compare_keys(r.0, &m.hi) != Ordering::Less {
                break;
            }
            if held >= MERGE_CHUNK_BYTES {
                more = true;
                break;
            }
            held += record_bytes(r);
            j += 1;
        }
        merge_leaf(
            w, scratch, hdr, &mut path, leaf_ref, i, j, more, &record, run, &mut found,
        )?;
        w.spill_filled()?;
        w.leaf_done();
        i = j;
    }
    Ok(())
}

/// The most bytes of records (keys and values) merged into one leaf at a time. A leaf's key
/// range may hold any number of the batch's records: all of them, on the right edge of a
/// sequential load, whose checkpoint (a 32nd of the data file, or more) held every new cell
/// and every new page in memory at once, the cells' list copied as it doubled, none of it
/// counted by the memory budget: a 1M one-put `fillseq` peaked at 82-90 MB of anonymous
/// memory that way, 37-38 MB in chunks. Past this, the leaf's pages are filled whole and
/// the records left go to its last page, which the next descent finds (dirty: rewritten in
/// place). 1 MiB: a few hundred pages, written out by `spill_filled` as the merge goes; one
/// page of the tree is merged again a chunk.
const MERGE_CHUNK_BYTES: usize = 1 << 20;

/// The bytes a record brings to a merge, for `MERGE_CHUNK_BYTES`.
#[inline]
fn record_bytes(record: Record<'_>) -> usize {
    record.0.len() + record.1.map_or(0, <[u8]>::len)
}

/// Leaves looked up ahead of the merge (`Ahead`): about twice the device's queue depth, so
/// that it reads many at once while the merge works through the first. Each record ahead
/// is one descent through the branches (a leaf's records after its first find the same leaf).
const AHEAD_LEAVES: usize = 64;

/// The most pages one hint of consecutive leaves asks for (`Ahead`): 128 KiB of 4 KiB
/// pages, a request the device takes whole.
const AHEAD_RUN_PAGES: u64 = 32;

/// The read-ahead of a merge beyond memory (`WritePages::read_ahead`): the leaves the next
/// records reach, found by a descent through the branches (which stay in memory), asked for
/// (`WritePages::will_need`) `AHEAD_LEAVES / 2` to `AHEAD_LEAVES` leaves ahead of the merge.
/// Without it each leaf is one page fault, waited for before the next is known: the device
/// reads one page at a time. Leaves with consecutive page ids are asked for in one hint (a
/// run): a merge writes a slice's leaves in key order into the lowest free pages, so the next
/// merge of that slice finds most of them consecutive (tupl's updates beyond memory: 88% of
/// the leaves hinted followed the one before), and each hint is a system call, a request and
/// a notification of the device (a VM exit on a virtual machine: a hint a leaf took a third
/// of the checkpoint thread's time). A run is asked for once it is broken, at
/// `AHEAD_RUN_PAGES`, or once its first leaf is within `AHEAD_LEAVES / 2` of the merge.
/// A descent may find a leaf the merge is about to replace (a split ahead moves the records
/// past it): the hint is wasted, nothing else.
#[derive(Default)]
struct Ahead {
    /// The next record to look ahead for.
    next: usize,
    /// The first record of each leaf looked up, the merge not yet past it.
    starts: std::collections::VecDeque<usize>,
    /// The last leaf looked up.
    last: Option<u64>,
    /// Consecutive leaves looked up and not asked for yet: the first's page id, the pages,
    /// and the first's record.
    run: Option<(u64, u64, usize)>,
    path: Path,
}

impl Ahead {
    /// Before merging from record `i` (of `n`): forgets the leaves before it, looks up the
    /// next ones, up to `AHEAD_LEAVES` ahead, and asks for those due (see `Ahead`). A descent
    /// that fails stops the read-ahead (the merge's own descent reports the failure).
    fn ask<'r>(
        &mut self,
        w: &WritePages,
        hdr: &TableHeader,
        i: usize,
        n: usize,
        record: &impl Fn(usize) -> Record<'r>,
    ) {
        while self.starts.front().is_some_and(|&s| s < i) {
            self.starts.pop_front();
        }
        self.next = self.next.max(i);
        if hdr.root.is_none() || hdr.depth < 2 {
            return;
        }
        while self.starts.len() < AHEAD_LEAVES && self.next < n {
            self.path.clear();
            let Ok(leaf) = descend(w, hdr, Some(record(self.next).0), &mut self.path) else {
                self.next = n;
                self.run = None;
                return;
            };
            if self.last != Some(leaf.id) {
                match self.run.as_mut() {
                    Some((first, pages, _))
                        if first.checked_add(*pages) == Some(leaf.id)
                            && *pages < AHEAD_RUN_PAGES =>
                    {
                        *pages += 1
                    }
                    _ => {
                        self.flush(w);
                        self.run = Some((leaf.id, 1, self.next));
                    }
                }
                self.starts.push_back(self.next);
                self.last = Some(leaf.id);
            }
            self.next += 1;
        }
        let due = self.run.is_some_and(|(_, _, at)| {
            self.next >= n || self.starts.partition_point(|&s| s < at) < AHEAD_LEAVES / 2
        });
        if due {
            self.flush(w);
        }
    }

    /// Asks for the run looked up, if any.
    fn flush(&mut self, w: &WritePages) {
        if let Some((first, pages, _)) = self.run.take() {
            w.will_need(first, pages);
        }
    }
}

/// Notes whether record `i`'s key was in the tree, where the caller asked (`merge_noting`).
#[inline]
fn note(found: &mut Option<&mut [bool]>, i: usize, was: bool) {
    if let Some(slot) = found.as_deref_mut().and_then(|f| f.get_mut(i)) {
        *slot = was;
    }
}

/// Merges records `lo..hi` into the leaf `leaf_ref` (reached through `path`), whose key range
/// holds all of them; with `more`, records after them go to the same leaf's range (the next
/// chunk, `MERGE_CHUNK_BYTES`), so its pages are filled whole, not evenly. About 140 lines,
/// kept whole on purpose: it is one pass over the leaf's cells and the records in key order,
/// packing pages as it goes, with the state of that pass (the cell and record cursors, the
/// page being filled, the entry count) in its locals; split into functions, each would take
/// most of them by `&mut`.
#[allow(clippy::too_many_arguments)]
fn merge_leaf<'r>(
    w: &mut WritePages,
    scratch: &mut Scratch,
    hdr: &mut TableHeader,
    path: &mut Path,
    leaf_ref: PageRef,
    lo: usize,
    hi: usize,
    more: bool,
    record: &impl Fn(usize) -> Record<'r>,
    run: &impl Fn(usize) -> PageRef,
    found: &mut Option<&mut [bool]>,
) -> Result<()> {
    let page_bytes = w.page_bytes();
    let capacity = page_bytes - slots_at(true);
    let m = &mut scratch.merge;
    m.old.clear();
    m.old.extend_from_slice(node_at(w, leaf_ref, true)?.p);
    let dirty = leaf_ref.txn == w.txn && w.is_dirty(leaf_ref.id);
    if !dirty && !checksum_ok(&m.old) {
        // A committed leaf whose bytes no longer match its checksum (bit rot that no read
        // verified): leaves built fresh from its cells would get a checksum of their own
        // over the damage and verify clean. The records go in one at a time instead, through
        // the copy-on-write copy, whose checksum is derived from the damaged page's and so
        // still reports the damage (tests/bit_rot.rs).
        return apply_each(w, scratch, hdr, lo, hi, record, run, found);
    }
    let old = Node::parse(&m.old, leaf_ref.id)?;
    // The plan: which cells the leaf ends with, in order, and what they need.
    m.parts.clear();
    m.runs.clear();
    let (mut oi, mut ri) = (0, lo);
    let (mut bytes, mut added, mut removed, mut written) = (0usize, 0u64, 0u64, 0usize);
    while oi < old.n || ri < hi {
        let ord = match (oi < old.n, ri < hi) {
            (true, true) => compare_keys(old.key(oi)?, record(ri).0),
            (true, false) => Ordering::Less,
            _ => Ordering::Greater,
        };
        match ord {
            Ordering::Less => {
                m.parts.push(Part::Old(oi));
                bytes += old.cell(oi)?.len() + SLOT_BYTES;
                oi += 1;
            }
            Ordering::Equal | Ordering::Greater => {
                let (key, value) = record(ri);
                if ri > lo && compare_keys(record(ri - 1).0, key) != Ordering::Less {
                    return Err(Error::internal("merge_sorted: records out of order"));
                }
                let replaces = ord == Ordering::Equal;
                note(found, ri, replaces);
                if replaces {
                    if let LeafValue::Overflow { run: had, len } = old.value(oi)? {
                        // A replayed record the tree holds already keeps its run.
                        if had != run(ri) {
                            m.runs.push((had, overflow::pages_for(len, page_bytes)));
                        }
                    }
                    oi += 1;
                }
                match value {
                    Some(v) => {
                        m.parts.push(Part::New(ri));
                        written += 1;
                        bytes += cell_bytes(page_bytes, key, v) + SLOT_BYTES;
                        added += u64::from(!replaces);
                    }
                    None => removed += u64::from(replaces),
                }
                ri += 1;
            }
        }
    }
    if removed > 0 && bytes < capacity / 4 {
        // An underfull leaf: `delete` merges it with a sibling.
        return apply_each(w, scratch, hdr, lo, hi, record, run, found);
    }
    if written == 0 && removed == 0 {
        // Only deletions of keys the leaf lacks (keys put and deleted again since the last
        // checkpoint): nothing changes, the leaf is not rewritten.
        return Ok(());
    }
    for &(run, pages) in &m.runs {
        w.free_run(run, pages)?;
    }
    // The new cells, values moved to overflow runs where too large, then all of them as
    // slices, in order.
    m.cells.clear();
    m.spans.clear();
    for part in &m.parts {
        if let Part::New(ri) = *part {
            let (key, value) = record(ri);
            let value = value.unwrap_or_default();
            let start = m.cells.len();
            match run(ri) {
                r if r.is_none() => push_cell(w, key, value, &mut m.cells)?,
                // The run the commit wrote: its reference, as it is.
                r => m
                    .cells
                    .extend_from_slice(&leaf_cell_overflow(key, value.len(), r)),
            }
            m.spans.push((start, m.cells.len()));
        }
    }
    let mut spans = m.spans.iter();
    let mut cells: Vec<&[u8]> = Vec::with_capacity(m.parts.len());
    for part in &m.parts {
        cells.push(match *part {
            Part::Old(i) => old.cell(i)?,
            Part::New(_) => {
                let (s, e) = spans.next().copied().unwrap_or_default();
                &m.cells[s..e]
            }
        });
    }
    // Page breaks: as many pages as the bytes need, filled evenly (whole where more records
    // follow); a cell that would overrun its page starts the next one.
    let pages = bytes.div_ceil(capacity).max(1);
    let target = if more {
        capacity
    } else {
        bytes.div_ceil(pages)
    };
    m.breaks.clear();
    let mut acc = 0;
    for (k, cell) in cells.iter().enumerate() {
        let size = cell.len() + SLOT_BYTES;
        if acc > 0 && (acc >= target || acc + size > capacity) {
            m.breaks.push(k);
            acc = 0;
        }
        acc += size;
    }
    // The pages: the leaf's own (a copy unless dirty already), then new right siblings.
    let leaf_id = leaf_ref.id;
    let first = if dirty {
        leaf_id
    } else {
        let id = w.new_page_filled(kind::LEAF)?;
        w.free(leaf_id, 1)?;
        id
    };
    let mut ids = Vec::with_capacity(m.breaks.len() + 1);
    ids.push(first);
    for _ in &m.breaks {
        ids.push(w.new_page_filled(kind::LEAF)?);
    }
    for (p, &id) in ids.iter().enumerate() {
        let start = if p == 0 { 0 } else { m.breaks[p - 1] };
        let end = m.breaks.get(p).copied().unwrap_or(cells.len());
        let page = w.page_mut(id)?;
        edit::reset(page, kind::LEAF);
        edit::fill(page, &cells[start..end])?;
    }
    let mut seps = m.breaks.iter().map(|&k| cell_key(cells[k], true).to_vec());
    let split = seps.next().map(|s| (s, ids[1]));
    let seps: Vec<Vec<u8>> = seps.collect();
    drop(cells);
    hdr.entries = hdr.entries.wrapping_add(added).wrapping_sub(removed);
    // The path above: pointed at the first page, then each sibling's separator inserted next
    // to the page before it (found by a descent, since inserting may split branches).
    propagate(w, &mut scratch.split_copy, hdr, path, leaf_id, first, split)?;
    for (sep, p) in seps.into_iter().zip(1..) {
        path.clear();
        let left = descend(w, hdr, Some(&sep), path)?;
        if left.id != ids[p] {
            return Err(Error::internal(format!(
                "merge: separator {p} leads to page {}, not {}",
                left.id, ids[p]
            )));
        }
        let split = Some((sep, ids[p + 1]));
        propagate(w, &mut scratch.split_copy, hdr, path, ids[p], ids[p], split)?;
    }
    Ok(())
}

/// Records `lo..hi` applied one at a time.
#[allow(clippy::too_many_arguments)]
fn apply_each<'r>(
    w: &mut WritePages,
    scratch: &mut Scratch,
    hdr: &mut TableHeader,
    lo: usize,
    hi: usize,
    record: &impl Fn(usize) -> Record<'r>,
    run: &impl Fn(usize) -> PageRef,
    found: &mut Option<&mut [bool]>,
) -> Result<()> {
    for ri in lo..hi {
        let was = match record(ri) {
            (key, Some(value)) => {
                let r = run(ri);
                // A replayed record the tree holds already: its cell stays.
                if !r.is_none() && super::cell_run(&*w, hdr, key)? == Some(r) {
                    note(found, ri, true);
                    continue;
                }
                let was = put(w, scratch, hdr, key, value, None)?;
                free_copied(w, r, value.len())?;
                was
            }
            (key, None) => delete(w, hdr, key)?,
        };
        note(found, ri, was);
    }
    Ok(())
}

/// Frees the run `r` (id 0: none) of a value of `len` bytes that `put` copied into a run of
/// its own (a leaf merged key by key): no leaf references it.
fn free_copied(w: &mut WritePages, r: PageRef, len: usize) -> Result<()> {
    if r.is_none() {
        return Ok(());
    }
    w.free_run(r, overflow::pages_for(len, w.page_bytes()))
}
