//! Delete, with merges of underfull nodes and root shrinking; freeing a whole tree.

use super::edit;
use super::node::{branch_cell, cells_bytes, LeafValue, Node};
use super::put::{descend, Path};
use super::{node_at, node_ref};
use crate::error::{Error, Result};
use crate::layout::overflow;
use crate::limits::TREE_DEPTH_MAX;
use crate::pager::{PageRef, PageSource, TableHeader, WritePages};

/// Deletes `key`. Returns true if it was present.
pub(crate) fn delete(w: &mut WritePages, hdr: &mut TableHeader, key: &[u8]) -> Result<bool> {
    if hdr.root.is_none() {
        return Ok(false);
    }
    let mut path = Path::new();
    let leaf_ref = descend(w, hdr, Some(key), &mut path)?;
    let leaf_id = leaf_ref.id;
    let (idx, cell_len, run) = {
        // `descend` prefetched the leaf's head; the search prefetches its probes.
        let leaf = node_at(w, leaf_ref, true)?;
        let (idx, found) = leaf.search(key)?;
        if !found {
            return Ok(false);
        }
        let run = match leaf.value(idx)? {
            LeafValue::Overflow { run, len } => {
                Some((run, overflow::pages_for(len, w.page_bytes())))
            }
            LeafValue::Inline(_) => None,
        };
        (idx, leaf.cell(idx)?.len(), run)
    };
    if let Some((run, pages)) = run {
        w.free_run(run, pages)?;
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
pub(super) fn merge_child(w: &mut WritePages, parent: u64, ci: usize) -> Result<()> {
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
pub(super) fn shrink_root(w: &mut WritePages, hdr: &mut TableHeader) -> Result<()> {
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
    free_subtree(w, hdr.root, 1, hdr.depth).map(|_| ())
}

/// Frees the subtree under `r` (at `level` of a tree of `depth`) with its overflow values.
/// Returns how many entries it held.
pub(super) fn free_subtree(w: &mut WritePages, r: PageRef, level: u32, depth: u32) -> Result<u64> {
    let mut stack: Vec<(PageRef, u32)> = vec![(r, level)];
    let mut to_free: Vec<(u64, u64)> = Vec::new();
    let mut runs: Vec<(PageRef, u64)> = Vec::new();
    let mut entries = 0u64;
    while let Some((r, level)) = stack.pop() {
        let leaf = level == depth;
        let n = node_at(w, r, leaf)?;
        if leaf {
            entries += n.n as u64;
            for i in 0..n.n {
                if let LeafValue::Overflow { run, len } = n.value(i)? {
                    runs.push((run, overflow::pages_for(len, w.page_bytes())));
                }
            }
        } else {
            for i in 0..=n.n {
                stack.push((n.child(i)?, level + 1));
            }
        }
        to_free.push((r.id, 1));
    }
    for (run, pages) in runs {
        w.free_run(run, pages)?;
    }
    for (id, pages) in to_free {
        w.free(id, pages)?;
    }
    Ok(entries)
}
