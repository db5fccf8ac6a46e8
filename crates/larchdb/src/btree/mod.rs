//! The copy-on-write B+tree: lookups, inserts with splits, deletes with merges, and cursors.
//!
//! Reads work on any [`PageSource`] (a snapshot, or the writer's dirty view). Writes work on
//! [`WritePages`]: a change copies the root-to-leaf path (`make_dirty`), so committed pages are
//! never modified and every snapshot stays intact. Every loop over the tree is bounded by the
//! table's depth, itself bounded by `TREE_DEPTH_MAX`.
//!
//! ```text
//! node.rs    a node read: parse, keys, values, children, binary search; cell encodings
//! edit.rs    a dirty node edited in place: insert, replace, remove, compact, fill
//! put.rs     put and append: descent, copy-on-write of the path, splits
//! delete.rs  delete with merges, root shrinking, freeing a whole tree
//! range.rs   a range deleted as whole subtrees
//! merge.rs   a sorted batch merged in leaf by leaf (checkpoints)
//! cursor.rs  ordered iteration: seek, first/last, next/prev
//! relocate.rs  pages past a bound moved below it (compaction)
//! cuts.rs    keys that cut a tree into parts of about equal leaves (checkpoints by slices)
//! ```

mod cursor;
mod cuts;
mod delete;
mod edit;
mod merge;
pub(crate) mod node;
mod put;
mod range;
mod relocate;

pub(crate) use cursor::Cursor;
pub(crate) use cuts::cuts;
pub(crate) use delete::{delete, free_tree};
pub(crate) use merge::{merge_sorted, merge_sorted_runs, MergeScratch, Record};
pub(crate) use put::{append, put, stays_inline, AppendHint, PutHint};
pub(crate) use range::delete_range;
pub(crate) use relocate::relocate;

use crate::error::{Error, Result};
use crate::layout::{header, kind, overflow};
use crate::limits::VALUE_BYTES_MAX;
use crate::pager::{PageRef, PageSource, TableHeader};
use node::{LeafValue, Node};

/// The B-tree's working buffers, kept by the writer from one put (and one transaction) to the
/// next so that a put allocates nothing: the cell being inserted, and the copy of a node being
/// split.
#[derive(Default)]
pub(crate) struct Scratch {
    cell: Vec<u8>,
    split_copy: Vec<u8>,
    merge: MergeScratch,
}

/// The structural check debug builds run on every dirty node before it is sealed
/// (the `NodeCheck` that `WritePages` runs): parses the page and checks what `Node::check_structure` checks.
pub(crate) fn check_node(p: &[u8]) -> std::result::Result<(), String> {
    let node = Node::parse(p, header::page_id(p)).map_err(|e| e.to_string())?;
    node.check_structure()
}

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
            let pages = overflow::pages_for(len, src.page_bytes());
            let run = src.run_at(r, pages)?;
            check_run(run, r.id, pages, len)?;
            Ok(&run[overflow::VALUE_AT..overflow::VALUE_AT + len])
        }
    }
}

pub(crate) fn check_run(run: &[u8], page: u64, pages: u64, len: usize) -> Result<()> {
    if header::kind(run) != kind::OVERFLOW
        || overflow::run_pages(run) as u64 != pages
        || overflow::value_bytes(run) as usize != len
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
pub(super) fn node_ref<S: PageSource + ?Sized>(src: &S, r: PageRef) -> Result<Node<'_>> {
    Node::parse(src.page_at(r)?, r.id)
}

/// Reads and parses the node `r` refers to, which must be a leaf exactly when `leaf` says so.
#[inline]
pub(super) fn node_at<S: PageSource + ?Sized>(src: &S, r: PageRef, leaf: bool) -> Result<Node<'_>> {
    let n = node_ref(src, r)?;
    if n.leaf != leaf {
        return Err(Error::corrupted(
            r.id,
            "node kind does not match the tree depth",
        ));
    }
    Ok(n)
}

/// The leaf of a table with a root whose range holds `key`: the branches descended.
#[inline]
fn leaf_for<S: PageSource + ?Sized>(src: &S, hdr: &TableHeader, key: &[u8]) -> Result<PageRef> {
    let mut r = hdr.root;
    for _ in 1..hdr.depth {
        let n = node_at(src, r, false)?;
        r = n.child(n.child_for(key)?)?;
    }
    Ok(r)
}

/// The run `key`'s cell references, if its value is in one (`None` also where the table
/// lacks the key).
pub(crate) fn cell_run<S: PageSource + ?Sized>(
    src: &S,
    hdr: &TableHeader,
    key: &[u8],
) -> Result<Option<PageRef>> {
    if hdr.root.is_none() {
        return Ok(None);
    }
    let leaf = node_at(src, leaf_for(src, hdr, key)?, true)?;
    match leaf.search_cached(key)? {
        (i, true) => match leaf.value(i)? {
            LeafValue::Overflow { run, .. } => Ok(Some(run)),
            LeafValue::Inline(_) => Ok(None),
        },
        _ => Ok(None),
    }
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
    let r = leaf_for(src, hdr, key)?;
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
