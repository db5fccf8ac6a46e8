//! Node layout: slotted pages. See docs/design/file-format.md for the byte tables.
//!
//! ```text
//! leaf:   [header 32][slot u16 * n][free][cells ...]     cell = klen u16, vword u32, key, value | overflow ref
//! branch: [header 32][child0 ref][slot u16 * n][free][cells ...]  cell = klen u16, child ref, key
//! ref:    page u64, txn u64 (the commit that wrote the page: a stale page is caught on read)
//! ```
//! Header field A is the offset where cell content starts (cells grow down from the page end),
//! field B the bytes of dead cells not yet compacted. Slots are sorted by key. In a branch,
//! cell i holds separator key i and child i+1; every key in child i+1 is >= key i and every key
//! in child i is < key i.

use crate::bytes::{get_u16, get_u32, put_u16};
use crate::error::{Error, Result};
use crate::pager::shift::CellsCrc;
use crate::pager::{
    page_a, page_b, page_count_field, page_txn_field, page_type, set_page_a, set_page_b,
    set_page_count_field, PageRef, PAGE_BRANCH, PAGE_HEADER_BYTES, PAGE_LEAF,
};
use std::cmp::Ordering;

/// Offset of the slot array in a leaf, and of child 0 / the slot array in a branch.
pub(crate) use crate::pager::LEAF_SLOTS_AT;
pub(crate) const BRANCH_CHILD0_AT: usize = PAGE_HEADER_BYTES;
pub(crate) use crate::pager::BRANCH_SLOTS_AT;
/// Bytes before the key in a leaf cell and in a branch cell.
pub(crate) const LEAF_CELL_HEADER_BYTES: usize = 6;
pub(crate) const BRANCH_CELL_HEADER_BYTES: usize = 2 + PageRef::BYTES;
/// Bit of a leaf cell's vword marking an overflow value; the low 31 bits are the value length.
pub(crate) const VWORD_OVERFLOW: u32 = 1 << 31;

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
        let leaf = match page_type(p) {
            PAGE_LEAF => true,
            PAGE_BRANCH => false,
            t => {
                return Err(Error::corrupted(
                    id,
                    format!("expected a tree page, found type {t}"),
                ))
            }
        };
        let n = page_count_field(p) as usize;
        let slots_at = if leaf { LEAF_SLOTS_AT } else { BRANCH_SLOTS_AT };
        let cell_start = page_a(p) as usize;
        if slots_at + 2 * n > cell_start || cell_start > p.len() {
            return Err(Error::corrupted(id, "slot array overlaps cell area"));
        }
        // Dead bytes lie in the cell area; more would let an insert's compaction overrun it.
        if page_b(p) as usize > p.len() - cell_start {
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

    fn bad(&self, what: &str) -> Error {
        Error::corrupted(self.id, what.to_string())
    }

    /// Offset of cell `i`. Requires: `i < n`.
    #[inline(always)]
    fn cell_at(&self, i: usize) -> usize {
        get_u16(self.p, self.slots_at + 2 * i) as usize
    }

    #[inline(always)]
    pub(crate) fn key(&self, i: usize) -> Result<&'a [u8]> {
        let off = self.cell_at(i);
        let hdr = if self.leaf {
            LEAF_CELL_HEADER_BYTES
        } else {
            BRANCH_CELL_HEADER_BYTES
        };
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
                get_u32(self.p, off + 2),
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
            crate::pager::prefetch(self.p, self.cell_at(i));
        }
    }

    /// Value of leaf cell `i`.
    pub(crate) fn value(&self, i: usize) -> Result<LeafValue<'a>> {
        self.entry(i).map(|(_, v)| v)
    }

    /// Key and value of leaf cell `i`, decoding the cell header once (the scan path).
    #[inline]
    pub(crate) fn entry(&self, i: usize) -> Result<(&'a [u8], LeafValue<'a>)> {
        let off = self.cell_at(i);
        let p = self.p;
        if off + LEAF_CELL_HEADER_BYTES > p.len() {
            return Err(self.bad("cell offset out of bounds"));
        }
        let klen = get_u16(p, off) as usize;
        let vword = get_u32(p, off + 2);
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
            match self.p.get(off + 2..off + BRANCH_CELL_HEADER_BYTES) {
                Some(r) => PageRef::decode(r),
                None => return Err(self.bad("cell offset out of bounds")),
            }
        };
        if r.txn > page_txn_field(self.p) {
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
        let slots = p[self.slots_at..self.slots_at + 2 * self.n]
            .as_chunks::<2>()
            .0;
        let hdr = if self.leaf {
            LEAF_CELL_HEADER_BYTES
        } else {
            BRANCH_CELL_HEADER_BYTES
        };
        let (mut lo, mut hi) = (0usize, slots.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            // Both possible next probes are misses in a page just read: ask for them now, so
            // their latency overlaps this comparison.
            if PREFETCH && hi - lo > 2 {
                let a = u16::from_le_bytes(slots[lo + (mid - lo) / 2]) as usize;
                let b = u16::from_le_bytes(slots[mid + 1 + (hi - mid - 1) / 2]) as usize;
                crate::pager::prefetch(p, a);
                crate::pager::prefetch(p, b);
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
        let cell_start = page_a(self.p) as usize;
        let frag = page_b(self.p) as usize;
        2 * self.n + (self.p.len() - cell_start).saturating_sub(frag)
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
    let hdr = if leaf {
        LEAF_CELL_HEADER_BYTES
    } else {
        BRANCH_CELL_HEADER_BYTES
    };
    let klen = get_u16(cell, 0) as usize;
    &cell[hdr..hdr + klen]
}

/// Child of an encoded branch cell.
pub(crate) fn cell_child(cell: &[u8]) -> PageRef {
    PageRef::decode(&cell[2..BRANCH_CELL_HEADER_BYTES])
}

/// Mutations of a dirty node page. Requires for all: the page parsed as a node of this kind.
pub(crate) mod edit {
    use super::*;

    fn slots_at(p: &[u8]) -> usize {
        if page_type(p) == PAGE_LEAF {
            LEAF_SLOTS_AT
        } else {
            BRANCH_SLOTS_AT
        }
    }

    /// Makes `p` an empty node of `kind` (keeping nothing but the type).
    pub(crate) fn reset(p: &mut [u8], kind: u8) {
        crate::pager::init_page(p, kind);
        let len = p.len() as u32;
        set_page_a(p, len);
        set_page_b(p, 0);
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
    fn insert_with(
        p: &mut [u8],
        i: usize,
        len: usize,
        write: impl FnOnce(&mut [u8]),
    ) -> Result<bool> {
        let n = page_count_field(p) as usize;
        let sa = slots_at(p);
        let cell_start = page_a(p) as usize;
        let frag = page_b(p) as usize;
        let need = len + 2;
        let free = cell_start.saturating_sub(sa + 2 * n);
        if free < need {
            if free.saturating_add(frag) < need {
                return Ok(false);
            }
            compact(p)?;
            // Compaction frees exactly the dead bytes the header counts, unless the count is
            // wrong: a damaged page that passed the read checks (which do not checksum pages
            // read through the memory map).
            if (page_a(p) as usize) < sa + 2 * n + need {
                return Err(Error::corrupted(
                    crate::pager::page_id_field(p),
                    "dead-space count does not match the cells",
                ));
            }
        }
        let cell_start = page_a(p) as usize - len;
        write(&mut p[cell_start..cell_start + len]);
        set_page_a(p, cell_start as u32);
        let at = sa + 2 * i;
        p.copy_within(at..sa + 2 * n, at + 2);
        put_u16(p, at, cell_start as u16);
        set_page_count_field(p, (n + 1) as u16);
        Ok(true)
    }

    /// Overwrites cell `i`, whose length is `old_len`, with `cell` where it stands, if `cell` is
    /// no longer (an update that keeps the key and the value's size, the common case, moves
    /// nothing and leaves no dead space). Returns false, changing nothing, if `cell` is longer.
    /// Requires: the page parsed as a valid node, `i < n`, and `old_len` is cell `i`'s length.
    pub(crate) fn replace(p: &mut [u8], i: usize, old_len: usize, cell: &[u8]) -> bool {
        if cell.len() > old_len {
            return false;
        }
        let off = get_u16(p, slots_at(p) + 2 * i) as usize;
        let Some(dst) = p.get_mut(off..off + cell.len()) else {
            return false;
        };
        dst.copy_from_slice(cell);
        let shrunk = (old_len - cell.len()) as u32;
        if shrunk > 0 {
            // The cell's tail is dead space now; compaction reclaims it.
            set_page_b(p, page_b(p).saturating_add(shrunk));
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
        let (a, b) = (page_a(p) as usize, page_b(p));
        let inserted = insert(p, i, cell)?;
        if inserted {
            if page_b(p) == b && page_a(p) as usize + cell.len() == a {
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
        let off = get_u16(p, slots_at(p) + 2 * i) as usize;
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
    pub(crate) fn set_child_tracked(
        p: &mut [u8],
        i: usize,
        child: PageRef,
        crc: &mut CellsCrc<'_>,
    ) {
        if i == 0 || !crc.is_tracked() {
            set_child(p, i, child);
            return;
        }
        let at = get_u16(p, BRANCH_SLOTS_AT + 2 * (i - 1)) as usize + 2;
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
        let n = page_count_field(p) as usize;
        let sa = slots_at(p);
        let off = get_u16(p, sa + 2 * i) as usize;
        let at = sa + 2 * i;
        p.copy_within(at + 2..sa + 2 * n, at);
        set_page_count_field(p, (n - 1) as u16);
        if off == page_a(p) as usize {
            set_page_a(p, (off + cell_len) as u32);
        } else {
            // Saturating: a damaged count must not overflow; compaction then reports it.
            set_page_b(p, page_b(p).saturating_add(cell_len as u32));
        }
    }

    /// Sets child `i` of a branch.
    pub(crate) fn set_child(p: &mut [u8], i: usize, child: PageRef) {
        let at = if i == 0 {
            BRANCH_CHILD0_AT
        } else {
            get_u16(p, BRANCH_SLOTS_AT + 2 * (i - 1)) as usize + 2
        };
        p[at..at + PageRef::BYTES].copy_from_slice(&child.encode());
    }

    /// Rewrites the page with its live cells packed at the end, removing dead space.
    /// Fails, leaving the page as it was, if a cell reference is out of bounds.
    pub(crate) fn compact(p: &mut [u8]) -> Result<()> {
        let copy = p.to_vec();
        let node = Node::parse(&copy, crate::pager::page_id_field(&copy))?;
        let sa = slots_at(p);
        let mut cells = Vec::with_capacity(node.n);
        for i in 0..node.n {
            cells.push(node.cell(i)?);
        }
        // Cells that overlap (damaged slots) add up to more than the page holds.
        let cell_bytes: usize = cells.iter().map(|c| c.len()).sum();
        if sa + 2 * node.n + cell_bytes > p.len() {
            return Err(node.bad("cells overlap"));
        }
        let mut top = p.len();
        for (i, c) in cells.iter().enumerate() {
            top -= c.len();
            p[top..top + c.len()].copy_from_slice(c);
            put_u16(p, sa + 2 * i, top as u16);
        }
        set_page_a(p, top as u32);
        set_page_b(p, 0);
        Ok(())
    }

    /// Appends `cells`, in order, after the node's cells, compacting first if only the dead
    /// space makes room. Packs them below the cell area in one pass, without the per-cell
    /// bookkeeping of `insert` (a leaf split rebuilds two pages of about 30 cells). Fails if
    /// they do not fit. Requires: the page parsed as a valid node.
    pub(crate) fn fill<C: AsRef<[u8]>>(p: &mut [u8], cells: &[C]) -> Result<()> {
        let base = page_count_field(p) as usize;
        let sa = slots_at(p);
        let need: usize = cells.iter().map(|c| c.as_ref().len() + 2).sum();
        let slots_end = sa + 2 * base;
        let id = crate::pager::page_id_field(p);
        let does_not_fit = || Error::corrupted(id, "internal: cells do not fit");
        if base + cells.len() > u16::MAX as usize {
            return Err(does_not_fit());
        }
        if (page_a(p) as usize) < slots_end + need {
            if (page_a(p) as usize).saturating_add(page_b(p) as usize) < slots_end + need {
                return Err(does_not_fit());
            }
            compact(p)?;
        }
        let mut top = page_a(p) as usize;
        if top > p.len() || top < slots_end + need {
            return Err(does_not_fit());
        }
        for (i, c) in cells.iter().enumerate() {
            let c = c.as_ref();
            top -= c.len();
            p[top..top + c.len()].copy_from_slice(c);
            put_u16(p, slots_end + 2 * i, top as u16);
        }
        set_page_a(p, top as u32);
        set_page_count_field(p, (base + cells.len()) as u16);
        Ok(())
    }
}

/// Bytes a set of cells needs in a node (cells plus their slots).
pub(crate) fn cells_bytes(cells: &[&[u8]]) -> usize {
    cells.iter().map(|c| c.len() + 2).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leaf(cells: &[(&[u8], &[u8])]) -> Vec<u8> {
        let mut p = vec![0u8; 4096];
        edit::reset(&mut p, PAGE_LEAF);
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
        assert!(page_b(&p) > 0);
        // Two more cells fit only once the dead bytes are reclaimed.
        edit::fill(&mut p, &cells[..2]).unwrap();
        let n = Node::parse(&p, 5).unwrap();
        assert_eq!(n.n, 3);
        assert_eq!(page_b(&p), 0);
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
        let a_before = page_a(&p);
        assert!(edit::replace(
            &mut p,
            1,
            len,
            &leaf_cell_inline(b"b", b"xyz")
        ));
        assert_eq!((page_a(&p), page_b(&p)), (a_before, 0));
        assert!(edit::replace(&mut p, 1, len, &leaf_cell_inline(b"b", b"q")));
        assert_eq!(page_b(&p), 2);
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
        assert_eq!(page_b(&p), 0);
        assert_eq!(page_a(&p), a_before + 2);
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
        edit::reset(&mut p, PAGE_LEAF);
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
        set_page_count_field(&mut p, 4000);
        assert!(Node::parse(&p, 9).is_err());
    }
}
