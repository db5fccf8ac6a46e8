//! Nodes, read side: a leaf or branch page parsed and validated enough that every accessor
//! either returns in-bounds data or a `Corrupted` error; the cell encodings; key order. The
//! byte layout is `crate::layout::node` (docs/design/file-format.md); edits are in `edit.rs`.

use crate::bytes::{get_u16, get_u32};
use crate::error::{Error, Result};
use crate::layout::node::{
    self as layout, BRANCH_CELL_CHILD_AT, BRANCH_CELL_HEADER_BYTES, BRANCH_CHILD0_AT,
    BRANCH_SLOTS_AT, LEAF_CELL_HEADER_BYTES, LEAF_CELL_VWORD_AT, SLOT_BYTES, VWORD_OVERFLOW,
};
use crate::layout::{header, kind};
use crate::pager::{prefetch, PageRef};
use std::cmp::Ordering;

/// A leaf value as stored in the cell.
#[derive(Clone, Copy, Debug)]
pub(crate) enum LeafValue<'a> {
    Inline(&'a [u8]),
    Overflow { run: PageRef, len: usize },
}

/// A read-only view of a leaf or branch page, validated enough that every accessor either
/// returns in-bounds data or a `Corrupted` error.
#[derive(Clone, Copy)]
pub(crate) struct Node<'a> {
    pub(crate) p: &'a [u8],
    pub(crate) id: u64,
    pub(crate) leaf: bool,
    pub(crate) n: usize,
    slots_at: usize,
}

impl<'a> Node<'a> {
    #[inline]
    pub(crate) fn parse(p: &'a [u8], id: u64) -> Result<Node<'a>> {
        let leaf = match header::kind(p) {
            kind::LEAF => true,
            kind::BRANCH => false,
            t => {
                return Err(Error::corrupted(
                    id,
                    format!("expected a tree page, found type {t}"),
                ))
            }
        };
        let n = layout::keys(p) as usize;
        let slots_at = layout::slots_at(leaf);
        let cell_start = layout::cells_start(p) as usize;
        if slots_at + SLOT_BYTES * n > cell_start || cell_start > p.len() {
            return Err(Error::corrupted(id, "slot array overlaps cell area"));
        }
        // Dead bytes lie in the cell area; more would let an insert's compaction overrun it.
        if layout::dead_bytes(p) as usize > p.len() - cell_start {
            return Err(Error::corrupted(
                id,
                "dead-space count exceeds the cell area",
            ));
        }
        Ok(Node {
            p,
            id,
            leaf,
            n,
            slots_at,
        })
    }

    #[cold]
    #[inline(never)]
    pub(super) fn bad(&self, what: &str) -> Error {
        Error::corrupted(self.id, what.to_string())
    }

    /// Offset of cell `i`. Requires: `i < n`.
    #[inline(always)]
    fn cell_at(&self, i: usize) -> usize {
        debug_assert!(i < self.n, "slot {i} of {}", self.n);
        get_u16(self.p, self.slots_at + SLOT_BYTES * i) as usize
    }

    #[inline(always)]
    pub(crate) fn key(&self, i: usize) -> Result<&'a [u8]> {
        let off = self.cell_at(i);
        let hdr = layout::cell_header_bytes(self.leaf);
        let p = self.p;
        if off + hdr > p.len() {
            return Err(self.bad("cell offset out of bounds"));
        }
        let klen = get_u16(p, off) as usize;
        p.get(off + hdr..off + hdr + klen)
            .ok_or_else(|| self.bad("key out of bounds"))
    }

    /// The raw bytes of cell `i` (header, key and value or reference), for moving it whole.
    pub(crate) fn cell(&self, i: usize) -> Result<&'a [u8]> {
        let off = self.cell_at(i);
        let len = self.cell_len(off)?;
        self.p
            .get(off..off + len)
            .ok_or_else(|| self.bad("cell out of bounds"))
    }

    fn cell_len(&self, off: usize) -> Result<usize> {
        if self.leaf {
            if off + LEAF_CELL_HEADER_BYTES > self.p.len() {
                return Err(self.bad("cell offset out of bounds"));
            }
            Ok(leaf_cell_len(
                get_u16(self.p, off) as usize,
                get_u32(self.p, off + LEAF_CELL_VWORD_AT),
            ))
        } else {
            if off + BRANCH_CELL_HEADER_BYTES > self.p.len() {
                return Err(self.bad("cell offset out of bounds"));
            }
            Ok(BRANCH_CELL_HEADER_BYTES + get_u16(self.p, off) as usize)
        }
    }

    /// Hints the CPU to load cell `i` (if it exists): a scan's next entries are rarely in the
    /// cache lines it just read.
    #[inline]
    pub(crate) fn prefetch_cell(&self, i: usize) {
        if i < self.n {
            prefetch(self.p, self.cell_at(i));
        }
    }

    /// Value of leaf cell `i`.
    pub(crate) fn value(&self, i: usize) -> Result<LeafValue<'a>> {
        self.entry(i).map(|(_, v)| v)
    }

    /// Key and value of leaf cell `i`, decoding the cell header once (the scan path).
    #[inline(always)]
    pub(crate) fn entry(&self, i: usize) -> Result<(&'a [u8], LeafValue<'a>)> {
        let off = self.cell_at(i);
        let p = self.p;
        if off + LEAF_CELL_HEADER_BYTES > p.len() {
            return Err(self.bad("cell offset out of bounds"));
        }
        let klen = get_u16(p, off) as usize;
        let vword = get_u32(p, off + LEAF_CELL_VWORD_AT);
        let at = off + LEAF_CELL_HEADER_BYTES + klen;
        let key = p
            .get(off + LEAF_CELL_HEADER_BYTES..at)
            .ok_or_else(|| self.bad("key out of bounds"))?;
        let len = (vword & !VWORD_OVERFLOW) as usize;
        if vword & VWORD_OVERFLOW != 0 {
            let r = p
                .get(at..at + PageRef::BYTES)
                .ok_or_else(|| self.bad("overflow reference out of bounds"))?;
            Ok((
                key,
                LeafValue::Overflow {
                    run: PageRef::decode(r),
                    len,
                },
            ))
        } else {
            p.get(at..at + len)
                .map(|v| (key, LeafValue::Inline(v)))
                .ok_or_else(|| self.bad("value out of bounds"))
        }
    }

    /// Child `i` of a branch, `0..=n`. Checked to be no newer than the branch: a commit that
    /// writes a page rewrites the path above it, so a child is never written after its
    /// parent. (This is what lets a reference naming the writer's own transaction be read
    /// as a dirty page: only a dirty branch can hold one.)
    #[inline]
    pub(crate) fn child(&self, i: usize) -> Result<PageRef> {
        let r = if i == 0 {
            PageRef::decode(&self.p[BRANCH_CHILD0_AT..BRANCH_SLOTS_AT])
        } else {
            let off = self.cell_at(i - 1);
            match self
                .p
                .get(off + BRANCH_CELL_CHILD_AT..off + BRANCH_CELL_HEADER_BYTES)
            {
                Some(r) => PageRef::decode(r),
                None => return Err(self.bad("cell offset out of bounds")),
            }
        };
        if r.txn > header::txn(self.p) {
            return Err(self.bad("child written after its parent"));
        }
        Ok(r)
    }

    /// First index whose key is >= `key`, and whether it is equal.
    ///
    /// The hot loop of every lookup and put (about 20 probes per random put on a 1M-record
    /// tree), so it reads the slot array as one slice that `parse` validated and compares keys
    /// inline (`compare_keys`) instead of calling `memcmp`.
    #[inline]
    pub(crate) fn search(&self, key: &[u8]) -> Result<(usize, bool)> {
        self.search_with::<true>(key)
    }

    /// `search` on a node known to be in the CPU cache (a page the caller just copied): no
    /// prefetching.
    #[inline]
    pub(crate) fn search_cached(&self, key: &[u8]) -> Result<(usize, bool)> {
        self.search_with::<false>(key)
    }

    #[inline(always)]
    fn search_with<const PREFETCH: bool>(&self, key: &[u8]) -> Result<(usize, bool)> {
        let p = self.p;
        // In bounds: `parse` checked `slots_at + 2 * n <= cell_start <= p.len()`.
        let slots = p[self.slots_at..self.slots_at + SLOT_BYTES * self.n]
            .as_chunks::<SLOT_BYTES>()
            .0;
        let hdr = layout::cell_header_bytes(self.leaf);
        let (mut lo, mut hi) = (0usize, slots.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            // Both possible next probes are misses in a page just read: ask for them now, so
            // their latency overlaps this comparison.
            if PREFETCH && hi - lo > 2 {
                let a = u16::from_le_bytes(slots[lo + (mid - lo) / 2]) as usize;
                let b = u16::from_le_bytes(slots[mid + 1 + (hi - mid - 1) / 2]) as usize;
                prefetch(p, a);
                prefetch(p, b);
            }
            let off = u16::from_le_bytes(slots[mid]) as usize;
            let Some(k) = slot_key(p, off, hdr) else {
                return Err(self.bad("key out of bounds"));
            };
            match compare_keys(k, key) {
                Ordering::Less => lo = mid + 1,
                Ordering::Equal => return Ok((mid, true)),
                Ordering::Greater => hi = mid,
            }
        }
        Ok((lo, false))
    }

    /// The child of a branch to descend into for `key`.
    #[inline]
    pub(crate) fn child_for(&self, key: &[u8]) -> Result<usize> {
        let (i, eq) = self.search(key)?;
        Ok(if eq { i + 1 } else { i })
    }

    /// Bytes used by slots and live cells (what a compacted page would hold beyond the fixed
    /// prefix).
    pub(crate) fn used_bytes(&self) -> usize {
        let cell_start = layout::cells_start(self.p) as usize;
        let frag = layout::dead_bytes(self.p) as usize;
        SLOT_BYTES * self.n + (self.p.len() - cell_start).saturating_sub(frag)
    }

    /// Checks what every node the engine writes must satisfy, beyond what `parse` checks:
    /// every cell lies whole in the cell area, keys ascend strictly, the live cells fit in the
    /// cell area, and a branch's children are real pages. Run on every dirty node before it
    /// is written, in debug builds (`pager::write`); the reason of the first failure.
    pub(crate) fn check_structure(&self) -> std::result::Result<(), String> {
        let cells_start = layout::cells_start(self.p) as usize;
        let mut live = 0usize;
        let mut prev: Option<&[u8]> = None;
        for i in 0..self.n {
            let off = self.cell_at(i);
            if off < cells_start {
                return Err(format!(
                    "cell {i} at {off} lies before the cell area ({cells_start})"
                ));
            }
            let cell = self.cell(i).map_err(|e| e.to_string())?;
            live += cell.len();
            let key = self.key(i).map_err(|e| e.to_string())?;
            if prev.is_some_and(|p| compare_keys(p, key) != Ordering::Less) {
                return Err(format!("key {i} is not greater than key {}", i - 1));
            }
            prev = Some(key);
        }
        if live > self.p.len() - cells_start {
            return Err(format!(
                "{live} bytes of live cells in a cell area of {}",
                self.p.len() - cells_start
            ));
        }
        if !self.leaf {
            for i in 0..=self.n {
                let child = self.child(i).map_err(|e| e.to_string())?;
                if child.is_none() {
                    return Err(format!("child {i} names no page"));
                }
            }
        }
        Ok(())
    }

    /// Bytes available to slots and cells in an empty page of this kind.
    pub(crate) fn capacity(&self) -> usize {
        self.p.len() - self.slots_at
    }
}

/// The key of the cell at `off`, whose header is `hdr` bytes (key length first), if in bounds.
#[inline(always)]
fn slot_key(p: &[u8], off: usize, hdr: usize) -> Option<&[u8]> {
    let h = p.get(off..off + 2)?;
    let klen = u16::from_le_bytes([h[0], h[1]]) as usize;
    p.get(off + hdr..off + hdr + klen)
}

/// Byte-wise lexicographic order, as `<[u8]>::cmp`, comparing 8 bytes at a time as big-endian
/// integers: inline, with no call to `memcmp`, which for keys of a few dozen bytes costs more
/// than the comparison.
#[inline(always)]
pub(crate) fn compare_keys(a: &[u8], b: &[u8]) -> Ordering {
    let n = a.len().min(b.len());
    let (a8, _) = a[..n].as_chunks::<8>();
    let (b8, _) = b[..n].as_chunks::<8>();
    for (x, y) in a8.iter().zip(b8) {
        let (x, y) = (u64::from_be_bytes(*x), u64::from_be_bytes(*y));
        if x != y {
            return x.cmp(&y);
        }
    }
    let done = a8.len() * 8;
    for (x, y) in a[done..n].iter().zip(&b[done..n]) {
        if x != y {
            return x.cmp(y);
        }
    }
    a.len().cmp(&b.len())
}

#[inline]
pub(crate) fn leaf_cell_len(klen: usize, vword: u32) -> usize {
    let v = if vword & VWORD_OVERFLOW != 0 {
        PageRef::BYTES
    } else {
        vword as usize
    };
    LEAF_CELL_HEADER_BYTES + klen + v
}

/// Encodes a leaf cell with an inline value.
#[cfg(test)]
pub(crate) fn leaf_cell_inline(key: &[u8], value: &[u8]) -> Vec<u8> {
    let mut c = Vec::with_capacity(LEAF_CELL_HEADER_BYTES + key.len() + value.len());
    leaf_cell_inline_into(key, value, &mut c);
    c
}

/// Appends a leaf cell with an inline value to `out`.
pub(crate) fn leaf_cell_inline_into(key: &[u8], value: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(&(key.len() as u16).to_le_bytes());
    out.extend_from_slice(&(value.len() as u32).to_le_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(value);
}

/// Encodes a leaf cell whose value lives in the overflow run `run`.
pub(crate) fn leaf_cell_overflow(key: &[u8], len: usize, run: PageRef) -> Vec<u8> {
    let mut c = Vec::with_capacity(LEAF_CELL_HEADER_BYTES + key.len() + PageRef::BYTES);
    c.extend_from_slice(&(key.len() as u16).to_le_bytes());
    c.extend_from_slice(&(len as u32 | VWORD_OVERFLOW).to_le_bytes());
    c.extend_from_slice(key);
    c.extend_from_slice(&run.encode());
    c
}

/// Encodes a branch cell.
pub(crate) fn branch_cell(key: &[u8], child: PageRef) -> Vec<u8> {
    let mut c = Vec::with_capacity(BRANCH_CELL_HEADER_BYTES + key.len());
    c.extend_from_slice(&(key.len() as u16).to_le_bytes());
    c.extend_from_slice(&child.encode());
    c.extend_from_slice(key);
    c
}

/// Key of an encoded cell.
pub(crate) fn cell_key(cell: &[u8], leaf: bool) -> &[u8] {
    let hdr = layout::cell_header_bytes(leaf);
    let klen = get_u16(cell, 0) as usize;
    &cell[hdr..hdr + klen]
}

/// Child of an encoded branch cell.
pub(crate) fn cell_child(cell: &[u8]) -> PageRef {
    PageRef::decode(&cell[BRANCH_CELL_CHILD_AT..BRANCH_CELL_HEADER_BYTES])
}

/// Bytes a set of cells needs in a node (cells plus their slots).
pub(crate) fn cells_bytes(cells: &[&[u8]]) -> usize {
    cells.iter().map(|c| c.len() + SLOT_BYTES).sum()
}
