//! Put and append: the descent, the copy-on-write of the root-to-leaf path, and splits.

use super::edit;
use super::node::{
    branch_cell, cell_child, cell_key, compare_keys, leaf_cell_inline_into, leaf_cell_len,
    leaf_cell_overflow, LeafValue, Node,
};
use super::{node_at, Scratch};
use crate::error::{Error, Result};
use crate::layout::node::{slots_at, LEAF_CELL_HEADER_BYTES};
use crate::layout::{kind, overflow};
use crate::limits::{inline_cell_bytes_max, TREE_DEPTH_MAX};
use crate::pager::{PageRef, PageSource, TableHeader, WritePages};

/// Cache lines of a random put's committed leaf prefetched at the end of its descent: its
/// header and slot array, with room left in the core's line fill buffers for the work done
/// while they arrive (`put_inner`).
const LEAF_HEAD_LINES: usize = 8;

/// The branches passed on the way to a leaf: (page, child index taken), and whether every step
/// took the last child (the leaf is the rightmost one).
pub(super) struct Path {
    steps: [(u64, usize); TREE_DEPTH_MAX],
    len: usize,
    rightmost: bool,
}

impl Default for Path {
    fn default() -> Path {
        Path::new()
    }
}

impl Path {
    pub(super) fn new() -> Path {
        Path {
            steps: [(0, 0); TREE_DEPTH_MAX],
            len: 0,
            rightmost: true,
        }
    }
    pub(super) fn clear(&mut self) {
        self.len = 0;
        self.rightmost = true;
    }
    fn push(&mut self, id: u64, child: usize) {
        debug_assert!(self.len < TREE_DEPTH_MAX);
        self.steps[self.len] = (id, child);
        self.len += 1;
    }
    pub(super) fn iter_up(&self) -> impl Iterator<Item = (u64, usize)> + '_ {
        self.steps[..self.len].iter().rev().copied()
    }
}

/// Descends to the leaf for `key` (or the rightmost leaf when `key` is None), recording the
/// branches passed in `path`. Returns the leaf's reference.
pub(super) fn descend(
    w: &WritePages,
    hdr: &TableHeader,
    key: Option<&[u8]>,
    path: &mut Path,
) -> Result<PageRef> {
    if hdr.depth as usize > TREE_DEPTH_MAX {
        return Err(Error::corrupted(hdr.root.id, "tree deeper than the limit"));
    }
    let mut r = hdr.root;
    for _ in 1..hdr.depth {
        let n = node_at(w, r, false)?;
        let ci = match key {
            Some(k) => n.child_for(k)?,
            None => n.n,
        };
        path.rightmost &= ci == n.n;
        path.push(r.id, ci);
        r = n.child(ci)?;
    }
    if key.is_some() && hdr.depth > 1 && r.txn != w.txn {
        // The committed leaf of a random put is rarely cached: ask for its head now, and
        // for the rest once the path above is updated (`put_inner`). Its 64 lines at once
        // would fill the core's line fill buffers, and the work behind them would wait.
        w.prefetch_head(r.id, LEAF_HEAD_LINES);
    }
    Ok(r)
}

/// Whether a leaf cell for `key` and a value of `value_len` bytes keeps the value inline.
pub(crate) fn stays_inline(page_bytes: usize, key: &[u8], value_len: usize) -> bool {
    leaf_cell_len(key.len(), value_len as u32) <= inline_cell_bytes_max(page_bytes as u32)
}

/// The length of the leaf cell `push_cell` makes for `key` and `value`.
pub(super) fn cell_bytes(page_bytes: usize, key: &[u8], value: &[u8]) -> usize {
    if stays_inline(page_bytes, key, value.len()) {
        leaf_cell_len(key.len(), value.len() as u32)
    } else {
        LEAF_CELL_HEADER_BYTES + key.len() + PageRef::BYTES
    }
}

/// Appends the leaf cell for `key` and `value` to `out`, moving the value to a new overflow
/// run if it is too large to stay inline.
pub(super) fn push_cell(
    w: &mut WritePages,
    key: &[u8],
    value: &[u8],
    out: &mut Vec<u8>,
) -> Result<()> {
    if stays_inline(w.page_bytes(), key, value.len()) {
        leaf_cell_inline_into(key, value, out);
    } else {
        let run = w.new_run(value)?;
        out.extend_from_slice(&leaf_cell_overflow(
            key,
            value.len(),
            PageRef::new(run, w.txn),
        ));
    }
    Ok(())
}

/// `push_cell` into an emptied `out`.
fn make_cell(w: &mut WritePages, key: &[u8], value: &[u8], out: &mut Vec<u8>) -> Result<()> {
    out.clear();
    push_cell(w, key, value, out)
}

/// How `put` treats the key's position.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum PutMode {
    /// Insert or replace anywhere.
    Upsert,
    /// The key must sort after every key in the tree: no search, and a full page splits at
    /// its end so that sequential loads leave full pages behind.
    Append,
}

/// Where the previous append of a write transaction landed: the table's root and rightmost
/// leaf, both dirty in the transaction. Valid only while nothing but appends changed the table
/// (the table handle drops it on any other change).
#[derive(Clone, Copy, Debug)]
pub(crate) struct AppendHint {
    root: u64,
    leaf: u64,
}

/// Where the previous upsert of a write transaction landed, for the next one: the dirty leaf
/// and the path of dirty branches above it. Keys that arrive in order (a sorted batch, as a
/// checkpoint applies; docs/design/write-path.md) land in the same leaf many times in a row:
/// the hint lets them skip the descent. It is consulted only while the last two puts landed
/// in the same leaf (`armed`), so random puts pay a comparison of two page ids and nothing
/// else, and it is dropped by any split (the path changed) and by every other kind of change
/// to the table (the table handle resets it).
#[derive(Default)]
pub(crate) struct PutHint {
    valid: bool,
    armed: bool,
    root: u64,
    leaf: u64,
    /// Also the path buffer of every upsert that has a hint to fill.
    path: Path,
}

impl PutHint {
    /// Forgets the hint (after any change to the table other than an upsert).
    pub(crate) fn reset(&mut self) {
        self.valid = false;
        self.armed = false;
    }

    /// Whether the hinted leaf is the one `key` belongs in: the hint is valid and armed, the
    /// tree is the same, the leaf is still dirty, and `key` lies within the bounds the path's
    /// separators set (child `i` of a branch holds the keys from separator `i - 1` up to, not
    /// including, separator `i`).
    fn covers(&self, w: &WritePages, hdr: &TableHeader, key: &[u8]) -> Result<bool> {
        if !(self.valid && self.armed && self.root == hdr.root.id && w.is_dirty(self.leaf)) {
            return Ok(false);
        }
        let (mut lo_done, mut hi_done) = (false, false);
        for (page, ci) in self.path.iter_up() {
            let node = Node::parse(w.page(page)?, page)?;
            if !lo_done && ci > 0 {
                if compare_keys(key, node.key(ci - 1)?) == std::cmp::Ordering::Less {
                    return Ok(false);
                }
                lo_done = true;
            }
            if !hi_done && ci < node.n {
                if compare_keys(key, node.key(ci)?) != std::cmp::Ordering::Less {
                    return Ok(false);
                }
                hi_done = true;
            }
            if lo_done && hi_done {
                break;
            }
        }
        Ok(true)
    }
}

/// Appends `key`, which must sort after every key in the tree. With a valid hint and room in
/// the rightmost leaf this is one insert into a dirty page: no descent, no path to update.
pub(crate) fn append(
    w: &mut WritePages,
    scratch: &mut Scratch,
    hdr: &mut TableHeader,
    key: &[u8],
    value: &[u8],
    hint: &mut Option<AppendHint>,
) -> Result<()> {
    if let Some(h) = *hint {
        // `append_in_place` declines a leaf that is no longer dirty.
        if h.root == hdr.root.id && append_in_place(w, hdr, h.leaf, key, value)? {
            return Ok(());
        }
    }
    let placed = put_inner(w, scratch, hdr, key, value, PutMode::Append, None)?;
    // Only the rightmost leaf has no upper bound for the next append's key to pass.
    *hint = placed.rightmost.then_some(AppendHint {
        root: hdr.root.id,
        leaf: placed.leaf,
    });
    Ok(())
}

/// Inserts `key` at the end of dirty rightmost leaf `leaf` if it fits. Returns false, having
/// changed nothing, if it does not.
fn append_in_place(
    w: &mut WritePages,
    hdr: &mut TableHeader,
    leaf: u64,
    key: &[u8],
    value: &[u8],
) -> Result<bool> {
    let inline_len = leaf_cell_len(key.len(), value.len() as u32);
    if inline_len > inline_cell_bytes_max(w.page_bytes() as u32) {
        // Overflow values take the general path.
        return Ok(false);
    }
    let Some(p) = w.dirty_page_mut(leaf) else {
        return Ok(false);
    };
    let n = {
        let node = Node::parse(p, leaf)?;
        if !node.leaf {
            return Err(Error::internal(format!(
                "page {leaf}: the append hint names a branch"
            )));
        }
        if node.n > 0 && compare_keys(node.key(node.n - 1)?, key) != std::cmp::Ordering::Less {
            return Err(Error::AppendOutOfOrder);
        }
        node.n
    };
    if !edit::insert_inline(p, n, key, value)? {
        return Ok(false);
    }
    hdr.entries += 1;
    Ok(true)
}

/// Inserts or replaces `key`. Returns true if it replaced a value. `hint` is the table's
/// `PutHint`, where the caller keeps one (a table handle does; the catalog does not).
/// Requires: key and value lengths are within the limits (checked by the caller).
pub(crate) fn put(
    w: &mut WritePages,
    scratch: &mut Scratch,
    hdr: &mut TableHeader,
    key: &[u8],
    value: &[u8],
    hint: Option<&mut PutHint>,
) -> Result<bool> {
    debug_assert!(key.len() <= crate::limits::key_bytes_max(w.page_bytes() as u32));
    debug_assert!(value.len() <= crate::limits::VALUE_BYTES_MAX);
    let Some(hint) = hint else {
        return put_inner(w, scratch, hdr, key, value, PutMode::Upsert, None).map(|p| p.replaced);
    };
    let before = hint.leaf;
    let placed = put_inner(
        w,
        scratch,
        hdr,
        key,
        value,
        PutMode::Upsert,
        Some(&mut *hint),
    )?;
    hint.valid = !placed.split;
    hint.armed = !placed.split && placed.leaf == before;
    hint.root = hdr.root.id;
    hint.leaf = placed.leaf;
    Ok(placed.replaced)
}

/// What `put_inner` did.
struct Placed {
    /// The key was present: its value was replaced.
    replaced: bool,
    /// The leaf the key is in now.
    leaf: u64,
    /// A node split.
    split: bool,
    /// `leaf` is the tree's rightmost leaf.
    rightmost: bool,
}

/// Where a put's key stands in its leaf, found before the leaf is changed.
struct Slot {
    /// Index of the key, or where it goes.
    idx: usize,
    /// Keys in the leaf.
    n: usize,
    /// The key is present: its cell's length, and its overflow run (first page, pages) if
    /// its value has one.
    old: Option<(usize, Option<(PageRef, u64)>)>,
}

/// `put`, also returning the leaf the key landed in and whether a node split. With `hint`, the
/// descent is skipped when the hint covers the key, and the path is kept in the hint. About
/// 120 lines, kept whole on purpose: its steps are ordered for the memory system (prefetch the leaf, point the path at
/// its copy while it arrives, copy, then search the cached original), and each step's comment
/// says why it stands where it does; split apart, that order would be spread over functions.
fn put_inner(
    w: &mut WritePages,
    scratch: &mut Scratch,
    hdr: &mut TableHeader,
    key: &[u8],
    value: &[u8],
    mode: PutMode,
    mut hint: Option<&mut PutHint>,
) -> Result<Placed> {
    let Scratch {
        cell, split_copy, ..
    } = scratch;
    if hdr.root.is_none() {
        // A root leaf: no branch above it.
        if let Some(h) = hint.as_deref_mut() {
            h.path.clear();
        }
        return put_first(w, cell, hdr, key, value).map(|(replaced, leaf)| Placed {
            replaced,
            leaf,
            split: false,
            rightmost: true,
        });
    }
    let mut local = None;
    let (path, hinted) = match hint {
        Some(h) => {
            let leaf = h.covers(w, hdr, key)?.then_some(h.leaf);
            (&mut h.path, leaf)
        }
        None => (local.insert(Path::new()), None),
    };
    let mut leaf_ref = match hinted {
        // Dirty in this transaction: referenced with its id.
        Some(leaf) => PageRef::new(leaf, w.txn),
        None => {
            path.clear();
            let search_key = (mode == PutMode::Upsert).then_some(key);
            descend(w, hdr, search_key, path)?
        }
    };
    // An upsert's leaf is copied before it is searched: the copy streams the whole page in
    // at once (it is almost never in the cache on a random put), so the binary search that
    // follows reads cached bytes instead of waiting for one miss per probe; and before the
    // copy, while the leaf's first lines are on their way, the path above is pointed at the
    // page the copy will take (`reserve_copy`). The leaf is checked through its reference
    // when it is searched: a failed check fails the put, which poisons the transaction, so a
    // bad copy never commits. An append must change nothing when its key is out of order, so
    // it checks that first and copies later.
    if mode == PutMode::Append {
        let mut n = node_at(w, leaf_ref, true)?;
        if n.n == 0 {
            // An empty rightmost leaf: deletes leave one where its branch could not merge
            // (long separators fill the sibling). Its lower bound, the separator above it, may
            // sort after the key, so the key's leaf is found by its value instead; the key
            // still sorts after every key there, so it goes at that leaf's end.
            path.clear();
            leaf_ref = descend(w, hdr, Some(key), path)?;
            n = node_at(w, leaf_ref, true)?;
        }
        if n.n > 0 && compare_keys(n.key(n.n - 1)?, key) != std::cmp::Ordering::Less {
            return Err(Error::AppendOutOfOrder);
        }
    }
    let leaf_id = leaf_ref.id;
    // The cell is built in the scratch buffer: no allocation per put. (Built before the copy,
    // so a large value's overflow run is allocated before the leaf's page.)
    make_cell(w, key, value, cell)?;
    let leaf = match mode {
        // Dirty already (a reference naming this transaction): the path points at it.
        PutMode::Upsert if leaf_ref.txn == w.txn => leaf_id,
        PutMode::Upsert => {
            // The leaf's lines are still arriving (prefetched at the end of the descent):
            // meanwhile, take the page its copy goes to and point the path above at it.
            let new = w.reserve_copy()?;
            propagate(w, split_copy, hdr, path, leaf_id, new, None)?;
            // Now the rest of it: copied next.
            w.prefetch_page(leaf_id);
            w.copy_reserved(leaf_id, new)?;
            new
        }
        PutMode::Append => leaf_id,
    };
    let slot = find_slot(w, leaf_ref, key, mode)?;
    let leaf = match mode {
        // Copied above.
        PutMode::Upsert => leaf,
        PutMode::Append => w.make_dirty(leaf)?,
    };
    let found = slot.old.is_some();
    if let Some((cell_len, run)) = slot.old {
        let replaced = run.is_none() && {
            let (p, mut crc) = w.node_mut(leaf)?;
            edit::replace_tracked(p, slot.idx, cell_len, cell, &mut crc)
        };
        if replaced {
            // Replaced where it stood: nothing moved, so the path above only needs the new
            // page id (already set for an upsert).
            if mode == PutMode::Append {
                propagate(w, split_copy, hdr, path, leaf_id, leaf, None)?;
            }
            return Ok(Placed {
                replaced: true,
                leaf,
                split: false,
                rightmost: path.rightmost,
            });
        }
        edit::remove(w.page_mut(leaf)?, slot.idx, cell_len);
        if let Some((run, pages)) = run {
            w.free_run(run, pages)?;
        }
    }
    // Where the key lands: the leaf, or after a split at the end, the new right page (the only
    // case `append` asks about).
    let mut landed = leaf;
    let inserted = {
        let (p, mut crc) = w.node_mut(leaf)?;
        edit::insert_tracked(p, slot.idx, cell, &mut crc)?
    };
    let split = if inserted {
        None
    } else {
        let at_end = path.rightmost && slot.idx == slot.n && !found;
        let (sep, right) = split_node(w, split_copy, leaf, slot.idx, cell, at_end)?;
        if at_end {
            landed = right;
        }
        Some((sep, right))
    };
    let split_happened = split.is_some();
    if mode == PutMode::Append || split_happened {
        // For an upsert the path points at the copy already: only a split changes it again.
        let old = if mode == PutMode::Append {
            leaf_id
        } else {
            leaf
        };
        propagate(w, split_copy, hdr, path, old, leaf, split)?;
    }
    if !found {
        hdr.entries += 1;
    }
    Ok(Placed {
        replaced: found,
        leaf: landed,
        split: split_happened,
        // After a split at the end, the key is in the new right page.
        rightmost: path.rightmost && (landed != leaf || !split_happened),
    })
}

/// The first put into an empty tree: a root leaf holding one cell.
fn put_first(
    w: &mut WritePages,
    cell: &mut Vec<u8>,
    hdr: &mut TableHeader,
    key: &[u8],
    value: &[u8],
) -> Result<(bool, u64)> {
    make_cell(w, key, value, cell)?;
    let id = w.new_page(kind::LEAF)?;
    let p = w.page_mut(id)?;
    edit::reset(p, kind::LEAF);
    edit::fill(p, &[&cell[..]])?;
    *hdr = TableHeader {
        root: PageRef::new(id, w.txn),
        entries: 1,
        depth: 1,
    };
    Ok((false, id))
}

/// Where `key` stands in the leaf `leaf_ref` names. Searched in the page the copy was made
/// from (the same bytes): the copy's loads brought it into the cache, while the copy's own
/// lines may still be waiting to be owned by this core; reading them now would wait for that.
fn find_slot(w: &WritePages, leaf_ref: PageRef, key: &[u8], mode: PutMode) -> Result<Slot> {
    let leaf = node_at(w, leaf_ref, true)?;
    let (idx, found) = match mode {
        PutMode::Upsert => leaf.search_cached(key)?,
        PutMode::Append => (leaf.n, false),
    };
    let old = if found {
        let run = match leaf.value(idx)? {
            LeafValue::Overflow { run, len } => {
                Some((run, overflow::pages_for(len, w.page_bytes())))
            }
            LeafValue::Inline(_) => None,
        };
        Some((leaf.cell(idx)?.len(), run))
    } else {
        None
    };
    Ok(Slot {
        idx,
        n: leaf.n,
        old,
    })
}

/// Index at which to split `cells` (at least 3) so both halves hold about half the bytes and
/// each fits in `capacity` bytes (cells and slots). Leaf cells may reach half a leaf
/// (`inline_cell_bytes_max`), so the balanced point can leave one side over capacity; it then
/// moves toward the other side. A point where both fit exists whenever the cells came from one
/// full node plus one new cell of at most half its capacity: take the largest left side that
/// fits; the next cell would not, so the left holds more than half, and the right less than
/// the rest. `None` only for cells that no node could have held. In a branch the cell at the
/// split point moves up to the parent; branch cells are at most a third of a node, so the
/// balanced point always fits.
fn split_point(cells: &[&[u8]], leaf: bool, capacity: usize) -> Option<usize> {
    let size = |c: &&[u8]| c.len() + 2;
    let total: usize = cells.iter().map(size).sum();
    let mut k = cells.len() - 1;
    let mut acc = 0;
    for (i, c) in cells.iter().enumerate() {
        acc += size(c);
        if acc >= total / 2 {
            k = (i + 1).clamp(1, cells.len() - 1);
            break;
        }
    }
    if !leaf {
        return Some(k);
    }
    let left = |k: usize| cells[..k].iter().map(size).sum::<usize>();
    while k > 1 && left(k) > capacity {
        k -= 1;
    }
    while k < cells.len() - 1 && total - left(k) > capacity {
        k += 1;
    }
    (left(k) <= capacity && total - left(k) <= capacity).then_some(k)
}

/// Splits dirty node `id`, which has no room for `cell` at `idx`, into itself and a new right
/// sibling. Returns the separator for the parent and the new page. With `at_end` (a sequential
/// append on the rightmost path) the left page keeps everything old and the right gets only the
/// new cell, so sequential loads fill pages completely.
fn split_node(
    w: &mut WritePages,
    split_copy: &mut Vec<u8>,
    id: u64,
    idx: usize,
    cell: &[u8],
    at_end: bool,
) -> Result<(Vec<u8>, u64)> {
    let leaf = Node::parse(w.page(id)?, id)?.leaf;
    let kind = if leaf { kind::LEAF } else { kind::BRANCH };
    if at_end {
        // The left page stays as it is: only the new cell moves, to a new right page.
        let right = w.new_page_appended(kind)?;
        let p = w.page_mut(right)?;
        edit::reset(p, kind);
        if leaf {
            edit::fill(p, &[cell])?;
        } else {
            // The new separator moves up; its child becomes the right page's child 0.
            edit::set_child(p, 0, cell_child(cell));
        }
        return Ok((cell_key(cell, leaf).to_vec(), right));
    }
    // The page is rebuilt from a copy of it (one copy into a buffer kept across splits, not
    // one per cell).
    split_copy.clear();
    split_copy.extend_from_slice(w.page(id)?);
    split_rebuild(w, id, idx, cell, leaf, split_copy)
}

/// The body of `split_node` (not at the end): `copy` holds node `id` as it was.
fn split_rebuild(
    w: &mut WritePages,
    id: u64,
    idx: usize,
    cell: &[u8],
    leaf: bool,
    copy: &[u8],
) -> Result<(Vec<u8>, u64)> {
    let kind = if leaf { kind::LEAF } else { kind::BRANCH };
    let n = Node::parse(copy, id)?;
    let mut cells: Vec<&[u8]> = Vec::with_capacity(n.n + 1);
    for i in 0..n.n {
        if i == idx {
            cells.push(cell);
        }
        cells.push(n.cell(i)?);
    }
    if idx >= n.n {
        cells.push(cell);
    }
    let child0 = if leaf {
        PageRef::default()
    } else {
        n.child(0)?
    };
    if cells.len() < 3 {
        return Err(Error::corrupted(id, "node too full to hold three cells"));
    }
    let capacity = w.page_bytes() - slots_at(leaf);
    let Some(k) = split_point(&cells, leaf, capacity) else {
        return Err(Error::corrupted(
            id,
            "cells too large to split into two pages",
        ));
    };
    let right = w.new_page(kind)?;
    let sep = cell_key(cells[k], leaf).to_vec();
    {
        let p = w.page_mut(right)?;
        edit::reset(p, kind);
        if leaf {
            edit::fill(p, &cells[k..])?;
        } else {
            // The middle separator moves up; its child becomes the right page's child 0.
            edit::set_child(p, 0, cell_child(cells[k]));
            edit::fill(p, &cells[k + 1..])?;
        }
    }
    let p = w.page_mut(id)?;
    edit::reset(p, kind);
    if !leaf {
        edit::set_child(p, 0, child0);
    }
    edit::fill(p, &cells[..k])?;
    Ok((sep, right))
}

/// Walks back up `path` after a leaf change: makes each branch dirty, points it at the new
/// child, and inserts a split's separator, splitting branches as needed. Grows a new root if
/// the old one split. Stops early once a branch was already dirty and nothing changes above.
pub(super) fn propagate(
    w: &mut WritePages,
    split_copy: &mut Vec<u8>,
    hdr: &mut TableHeader,
    path: &mut Path,
    old_child: u64,
    mut child: u64,
    mut split: Option<(Vec<u8>, u64)>,
) -> Result<()> {
    let rightmost = path.rightmost;
    let mut old_child = old_child;
    for step in (0..path.len).rev() {
        let (pid, ci) = path.steps[step];
        if split.is_none() && old_child == child && w.is_dirty(pid) {
            // The path above is dirty already and points here: nothing changes upward.
            return Ok(());
        }
        let np = w.make_dirty(pid)?;
        // A second call (a put's leaf split after the path was pointed at its copy) finds
        // the copies.
        path.steps[step].0 = np;
        let txn = w.txn;
        let (p, mut crc) = w.node_mut(np)?;
        edit::set_child_tracked(p, ci, PageRef::new(child, txn), &mut crc);
        if let Some((sep, right)) = split.take() {
            let cell = branch_cell(&sep, PageRef::new(right, txn));
            if !edit::insert_tracked(p, ci, &cell, &mut crc)? {
                let n = node_keys_of(w, np)?;
                split = Some(split_node(
                    w,
                    split_copy,
                    np,
                    ci,
                    &cell,
                    rightmost && ci == n,
                )?);
            }
        }
        old_child = pid;
        child = np;
    }
    let txn = w.txn;
    hdr.root = PageRef::new(child, txn);
    if let Some((sep, right)) = split {
        let root = w.new_page(kind::BRANCH)?;
        let p = w.page_mut(root)?;
        edit::reset(p, kind::BRANCH);
        edit::set_child(p, 0, PageRef::new(child, txn));
        edit::fill(p, &[branch_cell(&sep, PageRef::new(right, txn))])?;
        hdr.root = PageRef::new(root, txn);
        hdr.depth += 1;
        if hdr.depth as usize > TREE_DEPTH_MAX {
            return Err(Error::corrupted(root, "tree grew past the depth limit"));
        }
    }
    Ok(())
}

fn node_keys_of(w: &WritePages, id: u64) -> Result<usize> {
    Ok(Node::parse(w.page(id)?, id)?.n)
}
