//! A range of keys deleted as whole subtrees: a child whose key range lies inside the range is
//! freed without being read beyond what freeing needs (its leaves' overflow values and entry
//! counts), and only the nodes on the range's two edges are copied and edited.

use super::delete::{free_subtree, merge_child, shrink_root};
use super::node::{LeafValue, Node};
use super::node_at;
use crate::error::{Error, Result};
use crate::layout::overflow;
use crate::limits::TREE_DEPTH_MAX;
use crate::pager::{PageRef, PageSource, TableHeader, WritePages};
use std::ops::Bound;

/// Deletes every key within `start`..`end`. Returns how many it deleted.
pub(crate) fn delete_range(
    w: &mut WritePages,
    hdr: &mut TableHeader,
    start: Bound<&[u8]>,
    end: Bound<&[u8]>,
) -> Result<u64> {
    if hdr.root.is_none() || empty_bounds(start, end) {
        return Ok(0);
    }
    if hdr.depth as usize > TREE_DEPTH_MAX {
        return Err(Error::corrupted(hdr.root.id, "tree deeper than the limit"));
    }
    let keys = Keys { start, end };
    let (outcome, deleted) = prune(w, &keys, hdr.root, 1, hdr.depth, None, None)?;
    match outcome {
        Outcome::Kept => {}
        Outcome::Changed(id) => {
            hdr.root = PageRef::new(id, w.txn);
            shrink_root(w, hdr)?;
        }
        Outcome::Removed => *hdr = TableHeader::default(),
    }
    // (An emptied tree's header is the default one, with no entries.)
    hdr.entries = hdr.entries.saturating_sub(deleted);
    Ok(deleted)
}

/// Bounds that no key can satisfy (`b"b"..b"a"`, `b"a"..b"a"`): `RangeBounds` allows them.
fn empty_bounds(start: Bound<&[u8]>, end: Bound<&[u8]>) -> bool {
    match (start, end) {
        (Bound::Included(s), Bound::Included(e)) => s > e,
        (Bound::Included(s), Bound::Excluded(e))
        | (Bound::Excluded(s), Bound::Included(e))
        | (Bound::Excluded(s), Bound::Excluded(e)) => s >= e,
        _ => false,
    }
}

struct Keys<'k> {
    start: Bound<&'k [u8]>,
    end: Bound<&'k [u8]>,
}

impl Keys<'_> {
    /// Whether every key of a child covering `[lo, hi)` (`None`: unbounded) is in the range.
    fn covers(&self, lo: Option<&[u8]>, hi: Option<&[u8]>) -> bool {
        let from = match (self.start, lo) {
            (Bound::Unbounded, _) => true,
            (_, None) => false,
            (Bound::Included(s), Some(l)) => s <= l,
            (Bound::Excluded(s), Some(l)) => s < l,
        };
        let to = match (self.end, hi) {
            (Bound::Unbounded, _) => true,
            (_, None) => false,
            // Every key is below `h`, so at most `e` when `h <= e`.
            (Bound::Included(e) | Bound::Excluded(e), Some(h)) => h <= e,
        };
        from && to
    }

    /// Whether a child covering `[lo, hi)` may hold a key of the range (false only when it
    /// surely cannot).
    fn meets(&self, lo: Option<&[u8]>, hi: Option<&[u8]>) -> bool {
        let below = match (self.start, hi) {
            (Bound::Unbounded, _) | (_, None) => false,
            // Every key is below `h`: none reaches a start at or past it.
            (Bound::Included(s) | Bound::Excluded(s), Some(h)) => h <= s,
        };
        let above = match (self.end, lo) {
            (Bound::Unbounded, _) | (_, None) => false,
            (Bound::Included(e), Some(l)) => l > e,
            (Bound::Excluded(e), Some(l)) => l >= e,
        };
        !below && !above
    }

    /// The slots `[from, to)` of a leaf whose keys are in the range.
    fn slots(&self, leaf: &Node<'_>) -> Result<(usize, usize)> {
        let from = match self.start {
            Bound::Unbounded => 0,
            Bound::Included(s) => leaf.search(s)?.0,
            Bound::Excluded(s) => match leaf.search(s)? {
                (i, true) => i + 1,
                (i, false) => i,
            },
        };
        let to = match self.end {
            Bound::Unbounded => leaf.n,
            Bound::Included(e) => match leaf.search(e)? {
                (i, true) => i + 1,
                (i, false) => i,
            },
            Bound::Excluded(e) => leaf.search(e)?.0,
        };
        Ok((from, to.max(from)))
    }
}

/// What pruning did to a node.
enum Outcome {
    /// Nothing in it was in the range.
    Kept,
    /// It lost keys and is now this dirty page.
    Changed(u64),
    /// It lost every key and its page is freed.
    Removed,
}

/// Deletes the range's keys below node `r` at `level` (1 the root) of a tree of `depth`,
/// whose keys lie in `[lo, hi)`. Returns what became of the node and how many keys went.
fn prune(
    w: &mut WritePages,
    keys: &Keys<'_>,
    r: PageRef,
    level: u32,
    depth: u32,
    lo: Option<&[u8]>,
    hi: Option<&[u8]>,
) -> Result<(Outcome, u64)> {
    if level == depth {
        return prune_leaf(w, keys, r);
    }
    // What the edit needs of the branch, owned: the children and their bounds.
    let (children, seps) = {
        let n = node_at(w, r, false)?;
        let mut children = Vec::with_capacity(n.n + 1);
        let mut seps = Vec::with_capacity(n.n);
        for i in 0..=n.n {
            children.push(n.child(i)?);
        }
        for i in 0..n.n {
            seps.push(n.key(i)?.to_vec());
        }
        (children, seps)
    };
    let bound = |i: usize| -> (Option<&[u8]>, Option<&[u8]>) {
        let clo = if i == 0 { lo } else { Some(&seps[i - 1][..]) };
        let chi = if i == seps.len() {
            hi
        } else {
            Some(&seps[i][..])
        };
        (clo, chi)
    };
    let mut outcomes = Vec::with_capacity(children.len());
    let mut deleted = 0u64;
    for (i, &c) in children.iter().enumerate() {
        let (clo, chi) = bound(i);
        let outcome = if !keys.meets(clo, chi) {
            Outcome::Kept
        } else if keys.covers(clo, chi) {
            deleted += free_subtree(w, c, level + 1, depth)?;
            Outcome::Removed
        } else {
            let (o, d) = prune(w, keys, c, level + 1, depth, clo, chi)?;
            deleted += d;
            o
        };
        outcomes.push(outcome);
    }
    if outcomes.iter().all(|o| matches!(o, Outcome::Kept)) {
        return Ok((Outcome::Kept, 0));
    }
    if outcomes.iter().all(|o| matches!(o, Outcome::Removed)) {
        w.free(r.id, 1)?;
        return Ok((Outcome::Removed, deleted));
    }
    let id = w.make_dirty(r.id)?;
    let txn = w.txn;
    // From the last child to the first, so that the slots still to edit keep their index.
    let mut removed_before = vec![0usize; outcomes.len() + 1];
    for (i, o) in outcomes.iter().enumerate() {
        removed_before[i + 1] = removed_before[i] + matches!(o, Outcome::Removed) as usize;
    }
    for (i, o) in outcomes.iter().enumerate().rev() {
        match o {
            Outcome::Kept => {}
            Outcome::Changed(c) => {
                super::edit::set_child(w.page_mut(id)?, i, PageRef::new(*c, txn))
            }
            Outcome::Removed => {
                // Child `i` goes with the separator on its left (its range joins its left
                // sibling's); the first child goes with the separator on its right, and the
                // second child becomes the first.
                let cell = i.saturating_sub(1);
                let (len, next) = {
                    let n = Node::parse(w.page(id)?, id)?;
                    let next = if i == 0 { Some(n.child(1)?) } else { None };
                    (n.cell(cell)?.len(), next)
                };
                let p = w.page_mut(id)?;
                if let Some(next) = next {
                    super::edit::set_child(p, 0, next);
                }
                super::edit::remove(p, cell, len);
            }
        }
    }
    // The edges that kept some keys may be nearly empty: merged with a neighbour where they
    // fit (as a delete does), the right edge first so that the left one keeps its index.
    for (i, o) in outcomes.iter().enumerate().rev() {
        if let Outcome::Changed(c) = o {
            let at = i - removed_before[i];
            let n = Node::parse(w.page(*c)?, *c)?;
            if n.used_bytes() < n.capacity() / 4 {
                merge_child(w, id, at)?;
            }
        }
    }
    Ok((Outcome::Changed(id), deleted))
}

/// The range's part of leaf `r`.
fn prune_leaf(w: &mut WritePages, keys: &Keys<'_>, r: PageRef) -> Result<(Outcome, u64)> {
    let page_bytes = w.page_bytes();
    let (from, to, n, runs, lens) = {
        let leaf = node_at(w, r, true)?;
        let (from, to) = keys.slots(&leaf)?;
        let mut runs = Vec::new();
        let mut lens = Vec::with_capacity(to - from);
        for i in from..to {
            if let LeafValue::Overflow { run, len } = leaf.value(i)? {
                runs.push((run, overflow::pages_for(len, page_bytes)));
            }
            lens.push(leaf.cell(i)?.len());
        }
        (from, to, leaf.n, runs, lens)
    };
    if from == to {
        return Ok((Outcome::Kept, 0));
    }
    for (run, pages) in runs {
        w.free_run(run, pages)?;
    }
    let deleted = (to - from) as u64;
    if from == 0 && to == n {
        w.free(r.id, 1)?;
        return Ok((Outcome::Removed, deleted));
    }
    let id = w.make_dirty(r.id)?;
    let p = w.page_mut(id)?;
    for (i, len) in (from..to).zip(lens).rev() {
        super::edit::remove(p, i, len);
    }
    Ok((Outcome::Changed(id), deleted))
}
