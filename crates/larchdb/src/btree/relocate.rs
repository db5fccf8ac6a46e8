//! Moving a tree's pages out of the end of the file (`Database::compact`): every page at or
//! past a bound is copied into free space below it, through the same copy-on-write as any
//! change, so that once the commit is durable the end of the file holds only free pages and is
//! given back (docs/design/write-path.md, "Close, compaction, detaching").
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
        let runs = runs_past(w, r, above)?;
        if r.id < above && runs.is_empty() {
            return Ok(None);
        }
        let new = w.make_dirty(r.id)?;
        move_runs(w, new, runs)?;
        // The leaf's copy is final: written out as such copies gather, not held to the commit.
        w.filled(new)?;
        w.forget_freed();
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

/// An overflow reference of a leaf to move: the cell's index, key, run, value length and
/// cell length.
type RunPast = (usize, Vec<u8>, PageRef, usize, usize);

/// The overflow references of leaf `r` whose runs reach `above` or past it (one read of the
/// leaf: its copy has the same cells at the same indexes).
fn runs_past(w: &WritePages, r: PageRef, above: u64) -> Result<Vec<RunPast>> {
    let ps = w.page_bytes();
    let n = node_at(w, r, true)?;
    let mut runs = Vec::new();
    for i in 0..n.n {
        if let (key, LeafValue::Overflow { run, len }) = n.entry(i)? {
            if run.id + overflow::pages_for(len, ps) > above {
                runs.push((i, key.to_vec(), run, len, n.cell(i)?.len()));
            }
        }
    }
    Ok(runs)
}

/// Copies the runs `runs_past` found into free space and points the dirty copy `leaf` of
/// their leaf at the copies.
fn move_runs(w: &mut WritePages, leaf: u64, runs: Vec<RunPast>) -> Result<()> {
    let ps = w.page_bytes();
    for (i, key, run, len, cell_len) in runs {
        let value = resolve(w, LeafValue::Overflow { run, len })?.to_vec();
        let new = w.new_run(&value)?;
        w.free_run(run, overflow::pages_for(len, ps))?;
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
