//! Moving a tree's pages out of the end of the file (`Database::compact`): every page at or
//! past a bound is copied into free space below it, through the same copy-on-write as any
//! change, so that once the commit is durable the end of the file holds only free pages and is
//! given back (docs/design/write-path.md, "Where it stands (session 17)").
//!
//! Every page of the tree is read: a leaf below the bound moves too when it refers to an
//! overflow run that reaches past it (the run is copied, the leaf's reference rewritten).
//! Reading only the branches and the leaves past the bound was tried first: with one value
//! in eight in an overflow run, the runs past the bound that leaves below it refer to kept
//! the file's end, and a compaction moved pages without giving back a byte.

use super::edit;
use super::node::{leaf_cell_overflow, LeafValue};
use super::{node_at, resolve};
use crate::error::{Error, Result};
use crate::layout::overflow;
use crate::pager::{PageRef, PageSource, TableHeader, WritePages};

/// Moves every page of the tree `hdr` whose id is `above` or more below it (copies at the
/// lowest free pages, `WritePages::make_dirty`), and the path above each. Returns whether
/// anything moved (`hdr.root` then names the new root).
pub(crate) fn relocate(w: &mut WritePages, hdr: &mut TableHeader, above: u64) -> Result<bool> {
    if hdr.root.id == 0 || hdr.depth == 0 {
        return Ok(false);
    }
    match relocate_node(w, hdr.root, 1, hdr.depth, above)? {
        Some(id) => {
            hdr.root = PageRef::new(id, w.txn);
            Ok(true)
        }
        None => Ok(false),
    }
}

/// Moves node `r` (at `level` of a tree `depth` deep) if it or anything below it must move.
/// Returns its new id if it moved. Recursion is bounded by the depth.
fn relocate_node(
    w: &mut WritePages,
    r: PageRef,
    level: u32,
    depth: u32,
    above: u64,
) -> Result<Option<u64>> {
    if level == depth {
        if r.id < above && !refers_past(w, r, above)? {
            return Ok(None);
        }
        let new = w.make_dirty(r.id)?;
        relocate_runs(w, new, above)?;
        return Ok(Some(new));
    }
    let children = {
        let n = node_at(w, r, false)?;
        (0..=n.n).map(|i| n.child(i)).collect::<Result<Vec<_>>>()?
    };
    let mut moved = Vec::new();
    for (i, child) in children.into_iter().enumerate() {
        if let Some(id) = relocate_node(w, child, level + 1, depth, above)? {
            moved.push((i, id));
        }
    }
    if r.id < above && moved.is_empty() {
        return Ok(None);
    }
    let new = w.make_dirty(r.id)?;
    let txn = w.txn;
    let p = w.page_mut(new)?;
    for (i, id) in moved {
        edit::set_child(p, i, PageRef::new(id, txn));
    }
    Ok(Some(new))
}

/// Whether leaf `r` refers to an overflow run that reaches `above` or past it.
fn refers_past(w: &WritePages, r: PageRef, above: u64) -> Result<bool> {
    let ps = w.page_bytes();
    let n = node_at(w, r, true)?;
    for i in 0..n.n {
        if let LeafValue::Overflow { run, len } = n.value(i)? {
            if run.id + overflow::pages_for(len, ps) > above {
                return Ok(true);
            }
        }
    }
    Ok(false)
}

/// Moves the overflow runs of dirty leaf `leaf` that reach `above` or past it.
fn relocate_runs(w: &mut WritePages, leaf: u64, above: u64) -> Result<()> {
    let ps = w.page_bytes();
    let runs = {
        let n = node_at(w, PageRef::new(leaf, w.txn), true)?;
        let mut runs = Vec::new();
        for i in 0..n.n {
            if let (key, LeafValue::Overflow { run, len }) = n.entry(i)? {
                if run.id + overflow::pages_for(len, ps) > above {
                    runs.push((i, key.to_vec(), run, len, n.cell(i)?.len()));
                }
            }
        }
        runs
    };
    for (i, key, run, len, cell_len) in runs {
        let value = resolve(w, LeafValue::Overflow { run, len })?.to_vec();
        let new = w.new_run(&value)?;
        w.free(run.id, overflow::pages_for(len, ps))?;
        let cell = leaf_cell_overflow(&key, len, PageRef::new(new, w.txn));
        // Same key, same value length: the cell keeps its size and is overwritten in place.
        if !edit::replace(w.page_mut(leaf)?, i, cell_len, &cell) {
            return Err(Error::internal(format!(
                "page {leaf}: a moved overflow reference did not fit its cell"
            )));
        }
    }
    Ok(())
}
