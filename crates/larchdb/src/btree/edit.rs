//! Node edits: mutations of a dirty leaf or branch page in place. Requires for all: the page
//! parsed as a node of its kind (`Node::parse`), and the caller has it dirty in the current
//! write transaction (`WritePages::page_mut`/`node_mut`). The `_tracked` forms also report
//! each change to the page's derived cell-area CRC (`pager::shift`).

use super::node::Node;
use crate::bytes::{get_u16, put_u16};
use crate::error::{Error, Result};
use crate::layout::node::{
    self as layout, BRANCH_CELL_CHILD_AT, BRANCH_CHILD0_AT, BRANCH_SLOTS_AT,
    LEAF_CELL_HEADER_BYTES, SLOT_BYTES,
};
use crate::layout::{header, kind};
use crate::pager::page::init_page;
use crate::pager::shift::CellsCrc;
use crate::pager::PageRef;

fn slots_at(p: &[u8]) -> usize {
    layout::slots_at(header::kind(p) == kind::LEAF)
}

/// Makes `p` an empty node of `kind` (keeping nothing but the type).
pub(crate) fn reset(p: &mut [u8], kind: u8) {
    init_page(p, kind);
    let len = p.len() as u32;
    layout::set_cells_start(p, len);
    layout::set_dead_bytes(p, 0);
}

/// Inserts `cell` at slot `i`. Returns false, changing nothing, if it does not fit even
/// after compaction. Requires: the page parsed as a valid node and `i <= n`.
pub(crate) fn insert(p: &mut [u8], i: usize, cell: &[u8]) -> Result<bool> {
    insert_with(p, i, cell.len(), |dst| dst.copy_from_slice(cell))
}

/// Inserts a leaf cell with an inline value at slot `i`, written in place (no cell buffer).
/// Same contract as `insert`.
pub(crate) fn insert_inline(p: &mut [u8], i: usize, key: &[u8], value: &[u8]) -> Result<bool> {
    let len = LEAF_CELL_HEADER_BYTES + key.len() + value.len();
    insert_with(p, i, len, |dst| {
        dst[..2].copy_from_slice(&(key.len() as u16).to_le_bytes());
        dst[2..6].copy_from_slice(&(value.len() as u32).to_le_bytes());
        dst[6..6 + key.len()].copy_from_slice(key);
        dst[6 + key.len()..].copy_from_slice(value);
    })
}

/// Makes room for a cell of `len` bytes at slot `i` and lets `write` fill it.
fn insert_with(p: &mut [u8], i: usize, len: usize, write: impl FnOnce(&mut [u8])) -> Result<bool> {
    let n = layout::keys(p) as usize;
    debug_assert!(i <= n, "insert at slot {i} of {n}");
    let sa = slots_at(p);
    let cell_start = layout::cells_start(p) as usize;
    let frag = layout::dead_bytes(p) as usize;
    let need = len + SLOT_BYTES;
    let free = cell_start.saturating_sub(sa + SLOT_BYTES * n);
    if free < need {
        if free.saturating_add(frag) < need {
            return Ok(false);
        }
        compact(p)?;
        // Compaction frees exactly the dead bytes the header counts, unless the count is
        // wrong: a damaged page that passed the read checks (which do not checksum pages
        // read through the memory map).
        if (layout::cells_start(p) as usize) < sa + SLOT_BYTES * n + need {
            return Err(Error::corrupted(
                header::page_id(p),
                "dead-space count does not match the cells",
            ));
        }
    }
    let cell_start = layout::cells_start(p) as usize - len;
    write(&mut p[cell_start..cell_start + len]);
    layout::set_cells_start(p, cell_start as u32);
    let at = sa + SLOT_BYTES * i;
    p.copy_within(at..sa + SLOT_BYTES * n, at + SLOT_BYTES);
    put_u16(p, at, cell_start as u16);
    layout::set_keys(p, (n + 1) as u16);
    Ok(true)
}

/// Overwrites cell `i`, whose length is `old_len`, with `cell` where it stands, if `cell` is
/// no longer (an update that keeps the key and the value's size, the common case, moves
/// nothing and leaves no dead space). Returns false, changing nothing, if `cell` is longer.
/// Requires: the page parsed as a valid node, `i < n`, and `old_len` is cell `i`'s length.
pub(crate) fn replace(p: &mut [u8], i: usize, old_len: usize, cell: &[u8]) -> bool {
    debug_assert!(i < layout::keys(p) as usize);
    if cell.len() > old_len {
        return false;
    }
    let off = get_u16(p, slots_at(p) + SLOT_BYTES * i) as usize;
    let Some(dst) = p.get_mut(off..off + cell.len()) else {
        return false;
    };
    dst.copy_from_slice(cell);
    let shrunk = (old_len - cell.len()) as u32;
    if shrunk > 0 {
        // The cell's tail is dead space now; compaction reclaims it.
        layout::set_dead_bytes(p, layout::dead_bytes(p).saturating_add(shrunk));
    }
    true
}

/// `insert`, reporting the new cell to `crc` (or invalidating it if the page was
/// compacted to make room).
pub(crate) fn insert_tracked(
    p: &mut [u8],
    i: usize,
    cell: &[u8],
    crc: &mut CellsCrc<'_>,
) -> Result<bool> {
    let (a, b) = (layout::cells_start(p) as usize, layout::dead_bytes(p));
    let inserted = insert(p, i, cell)?;
    if inserted {
        if layout::dead_bytes(p) == b && layout::cells_start(p) as usize + cell.len() == a {
            crc.prepended(cell, p.len() - a);
        } else {
            crc.invalidate();
        }
    }
    Ok(inserted)
}

/// `replace`, reporting the overwritten bytes to `crc`.
pub(crate) fn replace_tracked(
    p: &mut [u8],
    i: usize,
    old_len: usize,
    cell: &[u8],
    crc: &mut CellsCrc<'_>,
) -> bool {
    let off = get_u16(p, slots_at(p) + SLOT_BYTES * i) as usize;
    let Some(old) = p.get(off..off + cell.len()) else {
        return false;
    };
    let old = crc.crc0(old);
    if !replace(p, i, old_len, cell) {
        return false;
    }
    crc.overwritten(old, cell, p.len() - off - cell.len());
    true
}

/// `set_child`, reporting the overwritten reference to `crc` (child 0 lies in the page's
/// head, not in the cell area).
pub(crate) fn set_child_tracked(p: &mut [u8], i: usize, child: PageRef, crc: &mut CellsCrc<'_>) {
    if i == 0 || !crc.is_tracked() {
        set_child(p, i, child);
        return;
    }
    let at = get_u16(p, BRANCH_SLOTS_AT + SLOT_BYTES * (i - 1)) as usize + BRANCH_CELL_CHILD_AT;
    let new = child.encode();
    let mut delta = [0u8; PageRef::BYTES];
    for ((d, o), n) in delta.iter_mut().zip(&p[at..at + PageRef::BYTES]).zip(&new) {
        *d = o ^ n;
    }
    p[at..at + PageRef::BYTES].copy_from_slice(&new);
    crc.changed(&delta, p.len() - at - PageRef::BYTES);
}

/// Removes slot `i`, leaving its bytes as dead space.
pub(crate) fn remove(p: &mut [u8], i: usize, cell_len: usize) {
    let n = layout::keys(p) as usize;
    let sa = slots_at(p);
    let off = get_u16(p, sa + SLOT_BYTES * i) as usize;
    let at = sa + SLOT_BYTES * i;
    p.copy_within(at + SLOT_BYTES..sa + SLOT_BYTES * n, at);
    layout::set_keys(p, (n - 1) as u16);
    if off == layout::cells_start(p) as usize {
        layout::set_cells_start(p, (off + cell_len) as u32);
    } else {
        // Saturating: a damaged count must not overflow; compaction then reports it.
        layout::set_dead_bytes(p, layout::dead_bytes(p).saturating_add(cell_len as u32));
    }
}

/// Sets child `i` of a branch.
pub(crate) fn set_child(p: &mut [u8], i: usize, child: PageRef) {
    let at = if i == 0 {
        BRANCH_CHILD0_AT
    } else {
        get_u16(p, BRANCH_SLOTS_AT + SLOT_BYTES * (i - 1)) as usize + BRANCH_CELL_CHILD_AT
    };
    p[at..at + PageRef::BYTES].copy_from_slice(&child.encode());
}

/// Rewrites the page with its live cells packed at the end, removing dead space.
/// Fails, leaving the page as it was, if a cell reference is out of bounds.
pub(crate) fn compact(p: &mut [u8]) -> Result<()> {
    let copy = p.to_vec();
    let node = Node::parse(&copy, header::page_id(&copy))?;
    let sa = slots_at(p);
    let mut cells = Vec::with_capacity(node.n);
    for i in 0..node.n {
        cells.push(node.cell(i)?);
    }
    // Cells that overlap (damaged slots) add up to more than the page holds.
    let cell_bytes: usize = cells.iter().map(|c| c.len()).sum();
    if sa + SLOT_BYTES * node.n + cell_bytes > p.len() {
        return Err(node.bad("cells overlap"));
    }
    let mut top = p.len();
    for (i, c) in cells.iter().enumerate() {
        top -= c.len();
        p[top..top + c.len()].copy_from_slice(c);
        put_u16(p, sa + SLOT_BYTES * i, top as u16);
    }
    layout::set_cells_start(p, top as u32);
    layout::set_dead_bytes(p, 0);
    Ok(())
}

/// Appends `cells`, in order, after the node's cells, compacting first if only the dead
/// space makes room. Packs them below the cell area in one pass, without the per-cell
/// bookkeeping of `insert` (a leaf split rebuilds two pages of about 30 cells). Fails if
/// they do not fit. Requires: the page parsed as a valid node.
pub(crate) fn fill<C: AsRef<[u8]>>(p: &mut [u8], cells: &[C]) -> Result<()> {
    let base = layout::keys(p) as usize;
    let sa = slots_at(p);
    let need: usize = cells.iter().map(|c| c.as_ref().len() + SLOT_BYTES).sum();
    let slots_end = sa + SLOT_BYTES * base;
    let id = header::page_id(p);
    let does_not_fit = || Error::corrupted(id, "cells do not fit");
    if base + cells.len() > u16::MAX as usize {
        return Err(does_not_fit());
    }
    if (layout::cells_start(p) as usize) < slots_end + need {
        if (layout::cells_start(p) as usize).saturating_add(layout::dead_bytes(p) as usize)
            < slots_end + need
        {
            return Err(does_not_fit());
        }
        compact(p)?;
    }
    let mut top = layout::cells_start(p) as usize;
    if top > p.len() || top < slots_end + need {
        return Err(does_not_fit());
    }
    for (i, c) in cells.iter().enumerate() {
        let c = c.as_ref();
        top -= c.len();
        p[top..top + c.len()].copy_from_slice(c);
        put_u16(p, slots_end + SLOT_BYTES * i, top as u16);
    }
    layout::set_cells_start(p, top as u32);
    layout::set_keys(p, (base + cells.len()) as u16);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::btree::edit;
    use crate::btree::node::*;
    use crate::layout::node::LEAF_SLOTS_AT;

    fn leaf(cells: &[(&[u8], &[u8])]) -> Vec<u8> {
        let mut p = vec![0u8; 4096];
        edit::reset(&mut p, kind::LEAF);
        for (i, (k, v)) in cells.iter().enumerate() {
            assert!(edit::insert(&mut p, i, &leaf_cell_inline(k, v)).unwrap());
        }
        p
    }

    #[test]
    fn insert_search_remove_compact() {
        let mut p = leaf(&[(b"a", b"1"), (b"c", b"3")]);
        assert!(edit::insert(&mut p, 1, &leaf_cell_inline(b"b", b"2")).unwrap());
        let n = Node::parse(&p, 5).unwrap();
        assert_eq!(n.n, 3);
        assert_eq!(n.search(b"b").unwrap(), (1, true));
        assert_eq!(n.search(b"bb").unwrap(), (2, false));
        assert_eq!(n.key(2).unwrap(), b"c");
        let len0 = n.cell(0).unwrap().len();
        let len1 = n.cell(1).unwrap().len();
        let used = n.used_bytes();
        edit::remove(&mut p, 1, len1);
        edit::remove(&mut p, 0, len0);
        let n = Node::parse(&p, 5).unwrap();
        assert!(n.used_bytes() < used);
        edit::compact(&mut p).unwrap();
        let n = Node::parse(&p, 5).unwrap();
        assert_eq!(n.n, 1);
        assert!(matches!(n.value(0).unwrap(), LeafValue::Inline(b"3")));
    }

    #[test]
    fn fill_appends_in_order_compacts_when_dead_space_makes_room_and_refuses_overflow() {
        let big = vec![7u8; 1200];
        let cells: Vec<Vec<u8>> = (0..3u8)
            .map(|i| leaf_cell_inline(&[b'k', i], &big))
            .collect();
        let mut p = leaf(&[(b"a", &big), (b"b", &big), (b"c", &big)]);
        // Remove the two older cells (not at the cell area's start): dead space, no room.
        for _ in 0..2 {
            let len = Node::parse(&p, 5).unwrap().cell(0).unwrap().len();
            edit::remove(&mut p, 0, len);
        }
        assert!(layout::dead_bytes(&p) > 0);
        // Two more cells fit only once the dead bytes are reclaimed.
        edit::fill(&mut p, &cells[..2]).unwrap();
        let n = Node::parse(&p, 5).unwrap();
        assert_eq!(n.n, 3);
        assert_eq!(layout::dead_bytes(&p), 0);
        let keys: Vec<&[u8]> = (0..3).map(|i| n.key(i).unwrap()).collect();
        assert_eq!(keys, [&b"c"[..], &[b'k', 0][..], &[b'k', 1][..]]);
        // A fourth cell does not fit: an error, and the page is unchanged.
        let before = p.clone();
        assert!(edit::fill(&mut p, &cells[2..]).is_err());
        assert_eq!(p, before);
        // Nor do three where dead space would make room for only two.
        let mut q = leaf(&[(b"a", &big), (b"b", &big), (b"c", &big)]);
        for _ in 0..2 {
            let len = Node::parse(&q, 5).unwrap().cell(0).unwrap().len();
            edit::remove(&mut q, 0, len);
        }
        let before = q.clone();
        assert!(edit::fill(&mut q, &cells).is_err());
        assert_eq!(q, before);
    }

    #[test]
    fn replace_in_place_keeps_the_slot_and_counts_a_shorter_cell() {
        let mut p = leaf(&[(b"a", b"111"), (b"b", b"222"), (b"c", b"333")]);
        let len = Node::parse(&p, 5).unwrap().cell(1).unwrap().len();
        let a_before = layout::cells_start(&p);
        assert!(edit::replace(
            &mut p,
            1,
            len,
            &leaf_cell_inline(b"b", b"xyz")
        ));
        assert_eq!(
            (layout::cells_start(&p), layout::dead_bytes(&p)),
            (a_before, 0)
        );
        assert!(edit::replace(&mut p, 1, len, &leaf_cell_inline(b"b", b"q")));
        assert_eq!(layout::dead_bytes(&p), 2);
        assert!(!edit::replace(
            &mut p,
            1,
            len,
            &leaf_cell_inline(b"b", b"toolong")
        ));
        let n = Node::parse(&p, 5).unwrap();
        assert!(matches!(n.value(1).unwrap(), LeafValue::Inline(b"q")));
        assert!(matches!(n.value(2).unwrap(), LeafValue::Inline(b"333")));
        edit::compact(&mut p).unwrap();
        assert_eq!(layout::dead_bytes(&p), 0);
        assert_eq!(layout::cells_start(&p), a_before + 2);
        let n = Node::parse(&p, 5).unwrap();
        assert!(matches!(n.value(1).unwrap(), LeafValue::Inline(b"q")));
    }

    #[test]
    fn compare_keys_is_byte_order() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for _ in 0..20_000 {
            let la = (next() % 40) as usize;
            let lb = (next() % 40) as usize;
            // Few distinct byte values, so that long common prefixes are frequent.
            let a: Vec<u8> = (0..la).map(|_| (next() % 3) as u8 * 127).collect();
            let mut b: Vec<u8> = (0..lb).map(|_| (next() % 3) as u8 * 127).collect();
            if next() % 4 == 0 {
                b = a.clone();
                if next() % 2 == 0 && !b.is_empty() {
                    let i = (next() as usize) % b.len();
                    b[i] = b[i].wrapping_add(1);
                }
            }
            assert_eq!(compare_keys(&a, &b), a.cmp(&b), "{a:?} {b:?}");
        }
    }

    #[test]
    fn full_page_refuses_then_compaction_makes_room() {
        let mut p = vec![0u8; 4096];
        edit::reset(&mut p, kind::LEAF);
        let big = vec![7u8; 900];
        let mut i = 0;
        while edit::insert(&mut p, i, &leaf_cell_inline(&[i as u8], &big)).unwrap() {
            i += 1;
        }
        assert_eq!(i, 4);
        let n = Node::parse(&p, 2).unwrap();
        let len = n.cell(0).unwrap().len();
        edit::remove(&mut p, 1, len);
        assert!(edit::insert(&mut p, 1, &leaf_cell_inline(b"x", &big)).unwrap());
    }

    #[test]
    fn corrupt_slot_is_an_error_not_a_panic() {
        let mut p = leaf(&[(b"a", b"1")]);
        put_u16(&mut p, LEAF_SLOTS_AT, 4094);
        let n = Node::parse(&p, 9).unwrap();
        assert!(matches!(n.key(0), Err(Error::Corrupted { page: 9, .. })));
        assert!(n.value(0).is_err());
        layout::set_keys(&mut p, 4000);
        assert!(Node::parse(&p, 9).is_err());
    }
}
