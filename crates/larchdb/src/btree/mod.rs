//! The copy-on-write B+tree: lookups, inserts with splits, deletes with merges, and cursors.
//!
//! Reads work on any [`PageSource`] (a snapshot, or the writer's dirty view). Writes work on
//! [`WritePages`]: a change copies the root-to-leaf path (`make_dirty`), so committed pages are
//! never modified and every snapshot stays intact. Every loop over the tree is bounded by the
//! table's depth, itself bounded by `TREE_DEPTH_MAX`.

mod cursor;
pub(crate) mod node;

pub(crate) use cursor::Cursor;

use crate::error::{Error, Result};
use crate::limits::{inline_cell_bytes_max, TREE_DEPTH_MAX, VALUE_BYTES_MAX};
use crate::pager::{
    overflow_pages, page_a, page_b, page_type, PageRef, PageSource, TableHeader, WritePages,
    PAGE_BRANCH, PAGE_HEADER_BYTES, PAGE_LEAF, PAGE_OVERFLOW,
};
use node::{
    branch_cell, cell_child, cell_key, cells_bytes, compare_keys, edit, leaf_cell_inline_into,
    leaf_cell_len, leaf_cell_overflow, LeafValue, Node, BRANCH_SLOTS_AT, LEAF_SLOTS_AT,
};

/// Cache lines of a random put's committed leaf prefetched at the end of its descent: its
/// header and slot array, with room left in the core's line fill buffers for the work done
/// while they arrive (`put_inner`).
const LEAF_HEAD_LINES: usize = 8;

/// The value bytes of a leaf value, following an overflow reference if there is one.
pub(crate) fn resolve<'s, S: PageSource + ?Sized>(
    src: &'s S,
    v: LeafValue<'s>,
) -> Result<&'s [u8]> {
    match v {
        LeafValue::Inline(b) => Ok(b),
        LeafValue::Overflow { run: r, len } => {
            if len > VALUE_BYTES_MAX {
                return Err(Error::corrupted(
                    r.id,
                    "overflow value longer than the limit",
                ));
            }
            let pages = overflow_pages(len, src.page_bytes());
            let run = src.run_at(r, pages)?;
            check_run(run, r.id, pages, len)?;
            Ok(&run[PAGE_HEADER_BYTES..PAGE_HEADER_BYTES + len])
        }
    }
}

pub(crate) fn check_run(run: &[u8], page: u64, pages: u64, len: usize) -> Result<()> {
    if page_type(run) != PAGE_OVERFLOW || page_a(run) as u64 != pages || page_b(run) as usize != len
    {
        return Err(Error::corrupted(
            page,
            "overflow run header does not match its reference",
        ));
    }
    Ok(())
}

/// Reads and parses the node `r` refers to.
#[inline]
fn node_ref<S: PageSource + ?Sized>(src: &S, r: PageRef) -> Result<Node<'_>> {
    Node::parse(src.page_at(r)?, r.id)
}

/// Reads and parses the node `r` refers to, which must be a leaf exactly when `leaf` says so.
#[inline]
fn node_at<S: PageSource + ?Sized>(src: &S, r: PageRef, leaf: bool) -> Result<Node<'_>> {
    let n = node_ref(src, r)?;
    if n.leaf != leaf {
        return Err(Error::corrupted(
            r.id,
            "node kind does not match the tree depth",
        ));
    }
    Ok(n)
}

/// Looks `key` up.
pub(crate) fn get<'s, S: PageSource + ?Sized>(
    src: &'s S,
    hdr: &TableHeader,
    key: &[u8],
) -> Result<Option<&'s [u8]>> {
    if hdr.root.is_none() {
        return Ok(None);
    }
    let mut r = hdr.root;
    for _ in 1..hdr.depth {
        let n = node_at(src, r, false)?;
        r = n.child(n.child_for(key)?)?;
    }
    // A random lookup's leaf is rarely cached, and its probes would miss one after the
    // other: ask for all of it before its header is read. (Branches are mostly cached:
    // prefetching them measured slower.)
    src.prefetch_page(r.id);
    let leaf = node_at(src, r, true)?;
    // Its lines are on their way (prefetched above): no per-probe prefetching.
    match leaf.search_cached(key)? {
        (i, true) => Ok(Some(resolve(src, leaf.value(i)?)?)),
        _ => Ok(None),
    }
}

/// The branches passed on the way to a leaf: (page, child index taken).
struct Path {
    steps: [(u64, usize); TREE_DEPTH_MAX],
    len: usize,
}

impl Path {
    fn new() -> Path {
        Path {
            steps: [(0, 0); TREE_DEPTH_MAX],
            len: 0,
        }
    }
    fn push(&mut self, id: u64, child: usize) {
        self.steps[self.len] = (id, child);
        self.len += 1;
    }
    fn iter_up(&self) -> impl Iterator<Item = (u64, usize)> + '_ {
        self.steps[..self.len].iter().rev().copied()
    }
}

/// Descends to the leaf for `key` (or the rightmost leaf when `key` is None). Returns the leaf
/// and whether every step took the last child.
fn descend(
    w: &WritePages,
    hdr: &TableHeader,
    key: Option<&[u8]>,
    path: &mut Path,
) -> Result<(PageRef, bool)> {
    if hdr.depth as usize > TREE_DEPTH_MAX {
        return Err(Error::corrupted(hdr.root.id, "tree deeper than the limit"));
    }
    let mut r = hdr.root;
    let mut rightmost = true;
    for _ in 1..hdr.depth {
        let n = node_at(w, r, false)?;
        let ci = match key {
            Some(k) => n.child_for(k)?,
            None => n.n,
        };
        rightmost &= ci == n.n;
        path.push(r.id, ci);
        r = n.child(ci)?;
    }
    if key.is_some() && hdr.depth > 1 && r.txn != w.txn {
        // The committed leaf of a random put is rarely cached: ask for its head now, and
        // for the rest once the path above is updated (`put_inner`). Its 64 lines at once
        // would fill the core's line fill buffers, and the work behind them would wait.
        w.prefetch_head(r.id, LEAF_HEAD_LINES);
    }
    Ok((r, rightmost))
}

/// Encodes the leaf cell for `key` and `value` into `out`, moving the value to a new overflow
/// run if it is too large to stay inline.
fn make_cell(w: &mut WritePages, key: &[u8], value: &[u8], out: &mut Vec<u8>) -> Result<()> {
    out.clear();
    if leaf_cell_len(key.len(), value.len() as u32) <= inline_cell_bytes_max(w.page_bytes() as u32)
    {
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

/// Appends `key`, which must sort after every key in the tree. With a valid hint and room in
/// the rightmost leaf this is one insert into a dirty page: no descent, no path to update.
pub(crate) fn append(
    w: &mut WritePages,
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
    let (_, leaf) = put_inner(w, hdr, key, value, PutMode::Append)?;
    *hint = Some(AppendHint {
        root: hdr.root.id,
        leaf,
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
            return Err(Error::corrupted(
                leaf,
                "internal: append hint names a branch",
            ));
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

/// Inserts or replaces `key`. Returns true if it replaced a value.
/// Requires: key and value lengths are within the limits (checked by the caller).
pub(crate) fn put(
    w: &mut WritePages,
    hdr: &mut TableHeader,
    key: &[u8],
    value: &[u8],
    mode: PutMode,
) -> Result<bool> {
    put_inner(w, hdr, key, value, mode).map(|(replaced, _)| replaced)
}

/// `put`, also returning the leaf the key landed in.
fn put_inner(
    w: &mut WritePages,
    hdr: &mut TableHeader,
    key: &[u8],
    value: &[u8],
    mode: PutMode,
) -> Result<(bool, u64)> {
    if hdr.root.is_none() {
        let mut cell = Vec::new();
        make_cell(w, key, value, &mut cell)?;
        let id = w.new_page(PAGE_LEAF)?;
        let p = w.page_mut(id)?;
        edit::reset(p, PAGE_LEAF);
        edit::fill(p, &[cell])?;
        *hdr = TableHeader {
            root: PageRef::new(id, w.txn),
            entries: 1,
            depth: 1,
        };
        return Ok((false, id));
    }
    let mut path = Path::new();
    let search_key = if mode == PutMode::Append {
        None
    } else {
        Some(key)
    };
    let (leaf_ref, rightmost) = descend(w, hdr, search_key, &mut path)?;
    let leaf_id = leaf_ref.id;
    // An upsert's leaf is copied before it is searched: the copy streams the whole page in
    // at once (it is almost never in the cache on a random put), so the binary search that
    // follows reads cached bytes instead of waiting for one miss per probe; and before the
    // copy, while the leaf's first lines are on their way, the path above is pointed at the
    // page the copy will take (`reserve_copy`). The leaf is checked through its reference
    // when it is searched: a failed check fails the put, which poisons the transaction, so a
    // bad copy never commits. An append must change nothing when its key is out of order, so
    // it checks that first and copies later.
    if mode == PutMode::Append {
        let n = node_at(w, leaf_ref, true)?;
        if n.n > 0 && compare_keys(n.key(n.n - 1)?, key) != std::cmp::Ordering::Less {
            return Err(Error::AppendOutOfOrder);
        }
    }
    // The cell is built in the transaction's scratch buffer: no allocation per put. (Built
    // before the copy, so a large value's overflow run is allocated before the leaf's page.)
    let mut cell = std::mem::take(&mut w.scratch);
    if let Err(e) = make_cell(w, key, value, &mut cell) {
        w.scratch = cell;
        return Err(e);
    }
    let leaf = match mode {
        // Dirty already (a reference naming this transaction): the path points at it.
        PutMode::Upsert if leaf_ref.txn == w.txn => leaf_id,
        PutMode::Upsert => {
            // The leaf's lines are still arriving (prefetched at the end of the descent):
            // meanwhile, take the page its copy goes to and point the path above at it.
            let new = w.reserve_copy()?;
            propagate(w, hdr, &mut path, leaf_id, new, None, rightmost)?;
            // Now the rest of it: copied next.
            w.prefetch_page(leaf_id);
            w.copy_reserved(leaf_id, new)?;
            new
        }
        PutMode::Append => leaf_id,
    };
    let (idx, found, n, old) = {
        // Searched in the page the copy was made from (the same bytes): the copy's loads
        // brought it into the cache, while the copy's own lines may still be waiting to be
        // owned by this core; reading them now would wait for that.
        let leaf = node_at(w, leaf_ref, true)?;
        let (idx, found) = match mode {
            PutMode::Upsert => leaf.search_cached(key)?,
            PutMode::Append => (leaf.n, false),
        };
        let old = if found {
            let run = match leaf.value(idx)? {
                LeafValue::Overflow { run, len } => {
                    Some((run.id, overflow_pages(len, w.page_bytes())))
                }
                LeafValue::Inline(_) => None,
            };
            Some((leaf.cell(idx)?.len(), run))
        } else {
            None
        };
        (idx, found, leaf.n, old)
    };
    let leaf = match mode {
        // Copied above.
        PutMode::Upsert => leaf,
        PutMode::Append => w.make_dirty(leaf)?,
    };
    if let Some((cell_len, run)) = old {
        let replaced = run.is_none() && {
            let (p, mut crc) = w.node_mut(leaf)?;
            edit::replace_tracked(p, idx, cell_len, &cell, &mut crc)
        };
        if replaced {
            // Replaced where it stood: nothing moved, so the path above only needs the new
            // page id (already set for an upsert).
            w.scratch = cell;
            if mode == PutMode::Append {
                propagate(w, hdr, &mut path, leaf_id, leaf, None, rightmost)?;
            }
            return Ok((true, leaf));
        }
        edit::remove(w.page_mut(leaf)?, idx, cell_len);
        if let Some((page, pages)) = run {
            w.free(page, pages)?;
        }
    }
    // Where the key lands: the leaf, or after a split at the end, the new right page (the only
    // case `append` asks about).
    let mut landed = leaf;
    let inserted = {
        let (p, mut crc) = w.node_mut(leaf)?;
        edit::insert_tracked(p, idx, &cell, &mut crc)?
    };
    let split = if inserted {
        None
    } else {
        let at_end = rightmost && idx == n && !found;
        let (sep, right) = split_node(w, leaf, idx, &cell, at_end)?;
        if at_end {
            landed = right;
        }
        Some((sep, right))
    };
    w.scratch = cell;
    if mode == PutMode::Append || split.is_some() {
        // For an upsert the path points at the copy already: only a split changes it again.
        let old = if mode == PutMode::Append {
            leaf_id
        } else {
            leaf
        };
        propagate(w, hdr, &mut path, old, leaf, split, rightmost)?;
    }
    if !found {
        hdr.entries += 1;
    }
    Ok((found, landed))
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
    id: u64,
    idx: usize,
    cell: &[u8],
    at_end: bool,
) -> Result<(Vec<u8>, u64)> {
    let leaf = Node::parse(w.page(id)?, id)?.leaf;
    let kind = if leaf { PAGE_LEAF } else { PAGE_BRANCH };
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
    let mut copy = std::mem::take(&mut w.split_copy);
    copy.clear();
    copy.extend_from_slice(w.page(id)?);
    let r = split_rebuild(w, id, idx, cell, leaf, &copy);
    w.split_copy = copy;
    r
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
    let kind = if leaf { PAGE_LEAF } else { PAGE_BRANCH };
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
    let capacity = w.page_bytes() - if leaf { LEAF_SLOTS_AT } else { BRANCH_SLOTS_AT };
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
fn propagate(
    w: &mut WritePages,
    hdr: &mut TableHeader,
    path: &mut Path,
    old_child: u64,
    mut child: u64,
    mut split: Option<(Vec<u8>, u64)>,
    rightmost: bool,
) -> Result<()> {
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
                let n = page_count_field_of(w, np)?;
                split = Some(split_node(w, np, ci, &cell, rightmost && ci == n)?);
            }
        }
        old_child = pid;
        child = np;
    }
    let txn = w.txn;
    hdr.root = PageRef::new(child, txn);
    if let Some((sep, right)) = split {
        let root = w.new_page(PAGE_BRANCH)?;
        let p = w.page_mut(root)?;
        edit::reset(p, PAGE_BRANCH);
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

fn page_count_field_of(w: &WritePages, id: u64) -> Result<usize> {
    Ok(Node::parse(w.page(id)?, id)?.n)
}

/// Deletes `key`. Returns true if it was present.
pub(crate) fn delete(w: &mut WritePages, hdr: &mut TableHeader, key: &[u8]) -> Result<bool> {
    if hdr.root.is_none() {
        return Ok(false);
    }
    let mut path = Path::new();
    let (leaf_ref, _) = descend(w, hdr, Some(key), &mut path)?;
    let leaf_id = leaf_ref.id;
    let (idx, cell_len, run) = {
        // `descend` prefetched the leaf's head; the search prefetches its probes.
        let leaf = node_at(w, leaf_ref, true)?;
        let (idx, found) = leaf.search(key)?;
        if !found {
            return Ok(false);
        }
        let run = match leaf.value(idx)? {
            LeafValue::Overflow { run, len } => Some((run.id, overflow_pages(len, w.page_bytes()))),
            LeafValue::Inline(_) => None,
        };
        (idx, leaf.cell(idx)?.len(), run)
    };
    if let Some((page, pages)) = run {
        w.free(page, pages)?;
    }
    let leaf = w.make_dirty(leaf_id)?;
    edit::remove(w.page_mut(leaf)?, idx, cell_len);
    hdr.entries = hdr.entries.saturating_sub(1);
    let mut child = leaf;
    for (pid, ci) in path.iter_up() {
        let np = w.make_dirty(pid)?;
        let txn = w.txn;
        edit::set_child(w.page_mut(np)?, ci, PageRef::new(child, txn));
        let c = Node::parse(w.page(child)?, child)?;
        if c.used_bytes() < c.capacity() / 4 {
            merge_child(w, np, ci)?;
        }
        child = np;
    }
    hdr.root = PageRef::new(child, w.txn);
    shrink_root(w, hdr)?;
    Ok(true)
}

/// Merges child `ci` of dirty branch `parent` with a sibling if both fit in one page: the
/// right one's cells move into the left one and the right page is freed.
fn merge_child(w: &mut WritePages, parent: u64, ci: usize) -> Result<()> {
    let (li, lid, rid, sep) = {
        let pn = Node::parse(w.page(parent)?, parent)?;
        if pn.n == 0 {
            return Ok(());
        }
        let li = if ci > 0 { ci - 1 } else { 0 };
        (li, pn.child(li)?, pn.child(li + 1)?, pn.key(li)?.to_vec())
    };
    let (leaf, moved) = {
        let l = node_ref(w, lid)?;
        let r = node_ref(w, rid)?;
        if l.leaf != r.leaf {
            return Err(Error::corrupted(rid.id, "siblings of different kinds"));
        }
        let mut moved: Vec<Vec<u8>> = Vec::with_capacity(r.n + 1);
        if !r.leaf {
            // The parent's separator comes down, pointing at the right page's child 0.
            moved.push(branch_cell(&sep, r.child(0)?));
        }
        for i in 0..r.n {
            moved.push(r.cell(i)?.to_vec());
        }
        let moved_refs: Vec<&[u8]> = moved.iter().map(|c| c.as_slice()).collect();
        if l.used_bytes() + cells_bytes(&moved_refs) > l.capacity() {
            return Ok(());
        }
        (l.leaf, moved)
    };
    let _ = leaf;
    let new_lid = w.make_dirty(lid.id)?;
    edit::fill(w.page_mut(new_lid)?, &moved)?;
    let sep_cell_len = {
        let pn = Node::parse(w.page(parent)?, parent)?;
        pn.cell(li)?.len()
    };
    let txn = w.txn;
    let p = w.page_mut(parent)?;
    edit::remove(p, li, sep_cell_len);
    edit::set_child(p, li, PageRef::new(new_lid, txn));
    w.free(rid.id, 1)?;
    Ok(())
}

/// Removes roots that no longer earn their level: a branch with one child, an empty leaf.
fn shrink_root(w: &mut WritePages, hdr: &mut TableHeader) -> Result<()> {
    for _ in 0..TREE_DEPTH_MAX {
        if hdr.root.is_none() {
            return Ok(());
        }
        let root = hdr.root;
        let n = node_ref(w, root)?;
        match (n.leaf, n.n) {
            (false, 0) => {
                hdr.root = n.child(0)?;
                hdr.depth -= 1;
                w.free(root.id, 1)?;
            }
            (true, 0) => {
                w.free(root.id, 1)?;
                *hdr = TableHeader::default();
                return Ok(());
            }
            _ => return Ok(()),
        }
    }
    Ok(())
}

/// Frees every page of a tree (for dropping a table).
pub(crate) fn free_tree(w: &mut WritePages, hdr: &TableHeader) -> Result<()> {
    if hdr.root.is_none() {
        return Ok(());
    }
    let mut stack: Vec<(PageRef, u32)> = vec![(hdr.root, 1)];
    let mut to_free: Vec<(u64, u64)> = Vec::new();
    while let Some((r, level)) = stack.pop() {
        let leaf = level == hdr.depth;
        let n = node_at(w, r, leaf)?;
        if leaf {
            for i in 0..n.n {
                if let LeafValue::Overflow { run, len } = n.value(i)? {
                    to_free.push((run.id, overflow_pages(len, w.page_bytes())));
                }
            }
        } else {
            for i in 0..=n.n {
                stack.push((n.child(i)?, level + 1));
            }
        }
        to_free.push((r.id, 1));
    }
    for (id, pages) in to_free {
        w.free(id, pages)?;
    }
    Ok(())
}
