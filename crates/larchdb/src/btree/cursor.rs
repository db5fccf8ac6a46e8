//! A cursor over one tree: a stack of nodes from the root to the current leaf. Trees carry no
//! sibling links (copy-on-write would have to rewrite them), so moving past a leaf edge goes up
//! to the nearest branch with a next (or previous) child and down again.

use super::node::{compare_keys, LeafValue, Node};
use super::resolve;
use crate::error::{Error, Result};
use crate::limits::TREE_DEPTH_MAX;
use crate::pager::{PageRef, PageSource, TableHeader};

/// The cache lines of the next leaf a scan that crossed a leaf edge asks for
/// (`Cursor::prefetch_siblings`), and of a seek's leaf before its header is read: its header
/// and slots.
const SIBLING_LINES: usize = 2;

/// A seek's leaf holding more entries than this is asked for whole: its search probes lines
/// across it and a scan from the seek reads on through it. A leaf of a few large records is
/// read at a cell or two, and 64 prefetches a seek would hold up the loads the search waits
/// on (`Cursor::seek`).
const SEEK_LEAF_WHOLE_ENTRIES: usize = 8;

std::thread_local! {
    /// Whether the last seek on this thread found its leaf holding more than
    /// `SEEK_LEAF_WHOLE_ENTRIES` entries. A leaf's entry count is in its header, which is the
    /// seek's first miss in the leaf: asking for the rest of the leaf only once the header
    /// showed many entries made a second miss, which the search's first probe waited on. So a
    /// seek guesses from the last one (a thread mostly seeks in one table, whose leaves hold
    /// records of one size) and asks for the whole leaf before its header is read when the
    /// last leaf was dense, as a point read does (`btree::get`). `seekrandom` over 1M reopened
    /// records of 100 bytes went from 1.055 to 1.005 us a seek (medians of twelve passes in
    /// six alternated runs, docs/design/performance.md, "A seek's leaf asked for whole by the
    /// last one's count"); with 1 KB records, three to a leaf, the whole leaf asked for first
    /// was 7% slower, so they keep the two lines, then the rest on a dense header.
    static SEEK_LEAF_DENSE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// The leaves after the one a scan crossed into that it asks for (`Cursor::prefetch_siblings`):
/// with 1 KB records, three to a leaf, a scan crosses a leaf every three records, and one leaf
/// ahead left most of each crossing's miss in the scan's way. Measured over 200K records of
/// 1000 bytes (`seekrandom --seek_nexts=50 --value_size=1000`, 2 s runs alternated,
/// docs/design/performance.md, "A scan's leaves asked for four ahead"): one ahead 165-195K
/// scans a second, four 166-228K, eight 193-198K (each crossing's prefetches then outrun
/// what the scan reads).
const SIBLINGS_AHEAD: usize = 4;

/// How many entries on a scan asks for the cell it will read (`Cursor::next`, `prev`, and
/// `leaf_entries_before` where a scan merges the tree with the layers above it), and
/// how many of a leaf's first cells (in the scan's direction) it asks for as it enters the
/// leaf (`descend_edge`), before reading the first. A cell's first line is a miss wherever
/// the scan reads no more of the cell than its header (a 128-byte value spans three lines)
/// or the leaf is new to the cache, and the miss costs several entries' time: three entries
/// ahead, and nothing at a leaf's start, left most of it in the scan's way. `readseq` of
/// 200K reopened records of 8-byte keys, medians of three alternated rounds
/// (docs/design/performance.md, "A scan asks for a leaf's first cells"): 128-byte values 29M
/// entries a second before, 44M with eight and eight; 1 KB values 12.5M and 22M; 8-byte values
/// within the spread (100M and 96M). Twelve and twelve halved `readreverse` of 1 KB values.
const SCAN_AHEAD_CELLS: usize = 8;
const LEAF_ENTRY_CELLS: usize = 8;

/// A leaf of at most this many entries has the next leaf's first cells asked for as a scan
/// crosses into it (`Cursor::prefetch_next_cells`): its own entries are too few to hide the
/// next crossing's misses.
const SPARSE_LEAF_ENTRIES: usize = 8;

/// Asks for leaf `n`'s first `LEAF_ENTRY_CELLS` cells from its left edge (`leftmost`) or its
/// right one: those a scan entering it that way reads first. Always inlined: as a call on
/// `descend_edge`'s path, YCSB E at four clients made 186-198K scans a second against 196-217K.
#[inline(always)]
fn prefetch_edge_cells(n: &Node<'_>, leftmost: bool) {
    for k in 0..LEAF_ENTRY_CELLS {
        // Past either end (`wrapping_sub` below 0 included), `prefetch_cell` asks for nothing.
        n.prefetch_cell(if leftmost { k } else { n.n.wrapping_sub(k + 1) });
    }
}

pub(crate) struct Cursor<'s, S: PageSource + ?Sized> {
    src: &'s S,
    hdr: TableHeader,
    /// Root first; the last entry is a leaf and its index is the current entry.
    stack: Vec<(Node<'s>, usize)>,
    /// The direction of the last leaf edge crossed since the cursor was positioned (forward:
    /// `true`), if any: that crossing asked for the `SIBLINGS_AHEAD` leaves after the one it
    /// reached (`prefetch_siblings`), so the next crossing the same way under the same parent
    /// asks only for the one after those.
    streak: Option<bool>,
}

impl<'s, S: PageSource + ?Sized> Cursor<'s, S> {
    pub(crate) fn new(src: &'s S, hdr: TableHeader) -> Cursor<'s, S> {
        Cursor {
            src,
            hdr,
            stack: Vec::with_capacity(hdr.depth as usize),
            streak: None,
        }
    }

    fn load(&self, r: PageRef) -> Result<Node<'s>> {
        let id = r.id;
        let level = self.stack.len() + 1;
        if level > self.hdr.depth as usize || level > TREE_DEPTH_MAX {
            return Err(Error::corrupted(id, "path deeper than the table's depth"));
        }
        let n = Node::parse(self.src.page_at(r)?, id)?;
        if n.leaf != (level == self.hdr.depth as usize) {
            return Err(Error::corrupted(
                id,
                "node kind does not match the tree depth",
            ));
        }
        Ok(n)
    }

    /// Pushes the path from `id` down its leftmost (or rightmost) edge.
    fn descend_edge(&mut self, mut id: PageRef, leftmost: bool) -> Result<()> {
        loop {
            let n = self.load(id)?;
            if n.leaf {
                let i = if leftmost { 0 } else { n.n.wrapping_sub(1) };
                // The cells a scan reads first here, before it waits on the first of them;
                // `next` and `prev` ask for the later ones.
                prefetch_edge_cells(&n, leftmost);
                self.stack.push((n, i));
                return Ok(());
            }
            let ci = if leftmost { 0 } else { n.n };
            id = n.child(ci)?;
            self.stack.push((n, ci));
        }
    }

    /// Moves to the first entry. Returns whether there is one.
    pub(crate) fn first(&mut self) -> Result<bool> {
        self.stack.clear();
        self.streak = None;
        if self.hdr.root.is_none() {
            return Ok(false);
        }
        self.descend_edge(self.hdr.root, true)?;
        self.settle_forward()
    }

    /// Moves to the last entry. Returns whether there is one.
    pub(crate) fn last(&mut self) -> Result<bool> {
        self.stack.clear();
        self.streak = None;
        if self.hdr.root.is_none() {
            return Ok(false);
        }
        self.descend_edge(self.hdr.root, false)?;
        self.settle_backward()
    }

    /// Moves to the first entry with a key >= `key`. Returns whether there is one.
    pub(crate) fn seek(&mut self, key: &[u8]) -> Result<bool> {
        self.stack.clear();
        self.streak = None;
        if self.hdr.root.is_none() {
            return Ok(false);
        }
        let mut id = self.hdr.root;
        // Whether the leaf was asked for whole before its header was read.
        let mut whole = false;
        loop {
            let n = self.load(id)?;
            if n.leaf {
                // Asked for whole only where it holds many entries (`SEEK_LEAF_WHOLE_ENTRIES`;
                // measured in docs/design/performance.md, "Scans of 1 KB records beside
                // writes"), and the next seek guesses from this one (`SEEK_LEAF_DENSE`).
                let dense = n.n > SEEK_LEAF_WHOLE_ENTRIES;
                if dense && !whole {
                    self.src.prefetch_page(id.id);
                }
                SEEK_LEAF_DENSE.set(dense);
                let (i, _) = n.search(key)?;
                self.stack.push((n, i));
                return self.settle_forward();
            }
            let ci = n.child_for(key)?;
            id = n.child(ci)?;
            self.stack.push((n, ci));
            if self.stack.len() + 1 == self.hdr.depth as usize {
                // The leaf next: all of it where the last seek's leaf was dense, else its
                // header and slots, two lines, asked for together, so that the search's first
                // reads wait on one miss.
                whole = SEEK_LEAF_DENSE.get();
                if whole {
                    self.src.prefetch_page(id.id);
                } else {
                    self.src.prefetch_head(id.id, SIBLING_LINES);
                }
            }
        }
    }

    /// Moves to the last entry with a key <= `key`. Returns whether there is one.
    pub(crate) fn seek_back(&mut self, key: &[u8]) -> Result<bool> {
        if !self.seek(key)? {
            return self.last();
        }
        if self.key()? == key {
            return Ok(true);
        }
        self.prev()
    }

    /// A scan that crossed into a leaf will likely cross into the next ones (forward) or the
    /// previous ones: the `SIBLINGS_AHEAD` leaves after it, under the same parent, are asked
    /// for now, so that their misses overlap the reading of this one instead of stopping the
    /// scan at every leaf edge (trees carry no sibling links, and copy-on-write places
    /// siblings anywhere in the file). Where the crossing before went the same way under the
    /// same parent (`climbed`, the levels it went up above the leaf's parent, is 0), it asked
    /// for all of them but the last already, and only the last is asked for.
    fn prefetch_siblings(&mut self, forward: bool, climbed: usize) {
        let only_last = climbed == 0 && self.streak == Some(forward);
        self.streak = Some(forward);
        let depth = self.stack.len();
        if depth < 2 {
            return;
        }
        let (b, ci) = &self.stack[depth - 2];
        let first = if only_last { SIBLINGS_AHEAD } else { 1 };
        for k in first..=SIBLINGS_AHEAD {
            let sibling = match forward {
                true => ci.checked_add(k).filter(|&c| c <= b.n),
                false => ci.checked_sub(k),
            };
            let Some(r) = sibling.and_then(|c| b.child(c).ok()) else {
                break;
            };
            // Its first lines only (its header and slots): its mapping's translation and the
            // lines a crossing reads first. The whole page, 64 prefetches a leaf, filled the
            // line-fill buffers the scan's own reads wait on (YCSB E at 200K records of 1 KB,
            // three to a leaf, one leaf ahead: 62-69K scans a second whole, 83-93K by the
            // head, 66-82K without).
            self.src.prefetch_head(r.id, SIBLING_LINES);
        }
        if only_last && self.stack[depth - 1].0.n <= SPARSE_LEAF_ENTRIES {
            self.prefetch_next_cells(forward);
        }
    }

    /// A scan that crossed into a leaf of few entries (`SPARSE_LEAF_ENTRIES`) crosses again
    /// after them: the next leaf's first cells in the scan's direction are asked for now, so
    /// that their misses overlap the reading of this leaf's few entries. `descend_edge` asks
    /// for them only as it enters the leaf, just before it reads the first, and `next` asks
    /// `SCAN_AHEAD_CELLS` on within the leaf only. The next leaf's header and slots were asked
    /// for one crossing before (`prefetch_siblings`), so reading them here seldom waits; and
    /// only where the next leaf is in a ready frame (`PageSource::page_ready`): elsewhere its
    /// header's read could fault or load in a page the scan may never reach.
    #[cold]
    fn prefetch_next_cells(&self, forward: bool) {
        let Some((b, ci)) = self.stack.len().checked_sub(2).map(|i| &self.stack[i]) else {
            return;
        };
        let next = match forward {
            true => ci.checked_add(1).filter(|&c| c <= b.n),
            false => ci.checked_sub(1),
        };
        let Some(r) = next.and_then(|c| b.child(c).ok()) else {
            return;
        };
        let next = self
            .src
            .page_ready(r)
            .and_then(|p| Node::parse(p, r.id).ok());
        if let Some(n) = next.filter(|n| n.leaf) {
            prefetch_edge_cells(&n, forward);
        }
    }

    /// If the leaf index is past the end, moves to the next leaf's first entry.
    fn settle_forward(&mut self) -> Result<bool> {
        loop {
            match self.stack.last() {
                None => return Ok(false),
                Some((n, i)) if *i < n.n => return Ok(true),
                _ => {}
            }
            // Leaf exhausted: climb to a branch with a next child.
            self.stack.pop();
            let mut climbed = 0;
            loop {
                let Some((b, ci)) = self.stack.last_mut() else {
                    return Ok(false);
                };
                if *ci < b.n {
                    *ci += 1;
                    let child = b.child(*ci)?;
                    self.descend_edge(child, true)?;
                    self.prefetch_siblings(true, climbed);
                    break;
                }
                self.stack.pop();
                climbed += 1;
            }
        }
    }

    /// If the leaf index is before the start (or the leaf is empty), moves to the previous
    /// leaf's last entry.
    fn settle_backward(&mut self) -> Result<bool> {
        loop {
            match self.stack.last() {
                None => return Ok(false),
                Some((n, i)) if *i < n.n => return Ok(true),
                _ => {}
            }
            self.stack.pop();
            let mut climbed = 0;
            loop {
                let Some((b, ci)) = self.stack.last_mut() else {
                    return Ok(false);
                };
                if *ci > 0 {
                    *ci -= 1;
                    let child = b.child(*ci)?;
                    self.descend_edge(child, false)?;
                    self.prefetch_siblings(false, climbed);
                    break;
                }
                self.stack.pop();
                climbed += 1;
            }
        }
    }

    /// Moves to the next entry. Returns whether there is one.
    ///
    /// `next`, `prev` and `entry` (and `Node::entry` under it) are always inlined: with
    /// `#[inline]` alone, a scan from another crate (larch-bench, the C library) called each
    /// of them once an entry, and a scan of 8-byte records ran at 84-114M entries a second
    /// instead of 178M (docs/design/performance.md, "A scan's step inlined").
    #[inline(always)]
    pub(crate) fn next(&mut self) -> Result<bool> {
        match self.stack.last_mut() {
            Some((n, i)) => {
                *i += 1;
                // Cells sit in insertion order, not key order: ask for one
                // `SCAN_AHEAD_CELLS` entries on early, so a scan does not wait on memory
                // for every entry.
                n.prefetch_cell(*i + SCAN_AHEAD_CELLS);
                if *i < n.n {
                    return Ok(true);
                }
            }
            None => return Ok(false),
        }
        self.settle_forward()
    }

    /// Moves to the previous entry. Returns whether there is one.
    #[inline(always)]
    pub(crate) fn prev(&mut self) -> Result<bool> {
        match self.stack.last_mut() {
            // usize::MAX marks "before the first" and is >= n, so settle moves on.
            Some((n, i)) => {
                *i = i.wrapping_sub(1);
                n.prefetch_cell(i.wrapping_sub(SCAN_AHEAD_CELLS));
            }
            None => return Ok(false),
        }
        self.settle_backward()
    }

    /// The page id of the leaf the cursor is in, if any.
    #[inline]
    pub(crate) fn leaf_id(&self) -> Option<u64> {
        self.stack.last().map(|(n, _)| n.id)
    }

    /// How many entries of the current leaf follow the current one in direction `forward`
    /// and come before `key` in that direction (forward: keys below it; back: keys above it);
    /// with `key` `None`, every entry that follows in the leaf.
    ///
    /// Counts by comparing the following keys in order, not by a binary search: they are the
    /// cells a scan reads next, so the count brings them into the cache in the order the scan
    /// wants them, where a search's probes missed on cells out of order (a scan of a 1M
    /// fillrandom's table with a tenth of it in the overlays: 21-23M entries a second
    /// counted so, 18-19M searched).
    pub(crate) fn leaf_entries_before(&self, key: Option<&[u8]>, forward: bool) -> Result<usize> {
        let Some((n, i)) = self.stack.last() else {
            return Ok(0);
        };
        let Some(k) = key else {
            return Ok(if forward {
                n.n.saturating_sub(i + 1)
            } else {
                *i
            });
        };
        let mut count = 0;
        if forward {
            while i + 1 + count < n.n && compare_keys(n.key(i + 1 + count)?, k).is_lt() {
                n.prefetch_cell(i + SCAN_AHEAD_CELLS + count);
                count += 1;
            }
        } else {
            while count < *i && compare_keys(n.key(i - 1 - count)?, k).is_gt() {
                n.prefetch_cell(i.wrapping_sub(SCAN_AHEAD_CELLS + count));
                count += 1;
            }
        }
        Ok(count)
    }

    /// The separator that bounds the current leaf on the side a scan in direction `forward`
    /// walks towards: every key of the leaf is below it (forward) or at or above it (back),
    /// as `Node::child_for` routes keys. `None` at the tree's edge on that side, or above a
    /// leaf with no parent.
    pub(crate) fn leaf_bound(&self, forward: bool) -> Result<Option<&'s [u8]>> {
        let depth = self.stack.len();
        for (b, ci) in self.stack[..depth.saturating_sub(1)].iter().rev() {
            if forward && *ci < b.n {
                return b.key(*ci).map(Some);
            }
            if !forward && *ci > 0 {
                return b.key(*ci - 1).map(Some);
            }
        }
        Ok(None)
    }

    /// Key of the current entry. Requires: the last move returned true.
    pub(crate) fn key(&self) -> Result<&'s [u8]> {
        match self.stack.last() {
            Some((n, i)) if *i < n.n => n.key(*i),
            _ => Err(Error::internal("cursor not on an entry")),
        }
    }

    /// Key and value of the current entry. Requires: the last move returned true.
    #[inline(always)]
    pub(crate) fn entry(&self) -> Result<(&'s [u8], &'s [u8])> {
        match self.stack.last() {
            Some((n, i)) if *i < n.n => match n.entry(*i)? {
                (k, LeafValue::Inline(v)) => Ok((k, v)),
                (k, v) => Ok((k, resolve(self.src, v)?)),
            },
            _ => Err(Error::internal("cursor not on an entry")),
        }
    }
}
