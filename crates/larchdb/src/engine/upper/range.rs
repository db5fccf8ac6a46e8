//! A scan of a table: the tree's cursor merged with the layers above the tree.

use super::{Entry, Upper, UpperScan};
use crate::btree::node::compare_keys;
use crate::btree::Cursor;
use crate::error::{Error, Result};
use crate::pager::{PageSource, TableHeader};
use std::ops::Bound;

/// One direction's walk over a key range. Yields `Result` because a damaged page is reported
/// where it is met; after an error the walk ends.
pub(crate) struct Walk<'t> {
    cursor: Cursor<'t, dyn PageSource + 't>,
    start: Bound<Vec<u8>>,
    end: Bound<Vec<u8>>,
    reverse: bool,
    started: bool,
    done: bool,
    /// The keys above the tree in the range, in its direction (`None` when the tree is
    /// everything).
    upper: Option<UpperScan<'t>>,
    /// The tree's next entry, read ahead while merging with `upper`; `tree_done` once the
    /// tree has no more.
    tree: Option<Entry<'t>>,
    tree_done: bool,
    /// For which leaf and which key above the tree (its address and length) `clear` was
    /// worked out.
    cleared_for: Option<(u64, usize, usize)>,
    /// Whether every key of that leaf comes before that key in the walk's direction, so the
    /// tree's entries there need no comparison with it (`tree_first`).
    clear: bool,
    /// How many of the leaf's entries after the tree's last one taken come before the next
    /// key above the tree: the next steps take them as a walk of the tree alone does, with no
    /// look at the layers above and no comparison (`step`).
    run: usize,
}

impl<'t> Walk<'t> {
    pub(crate) fn new(
        src: &'t dyn PageSource,
        hdr: TableHeader,
        start: Bound<Vec<u8>>,
        end: Bound<Vec<u8>>,
        reverse: bool,
        upper: Upper<'t>,
    ) -> Walk<'t> {
        let upper = (!upper.is_empty())
            .then(|| upper.scan(&start, &end, reverse))
            .filter(|scan| !scan.is_empty());
        Walk {
            cursor: Cursor::new(src, hdr),
            start,
            end,
            reverse,
            started: false,
            done: false,
            upper,
            tree: None,
            tree_done: false,
            cleared_for: None,
            clear: false,
            run: 0,
        }
    }

    fn position(&mut self) -> Result<bool> {
        if !self.reverse {
            match &self.start {
                Bound::Unbounded => self.cursor.first(),
                Bound::Included(k) => self.cursor.seek(k),
                Bound::Excluded(k) => {
                    let k = k.clone();
                    if !self.cursor.seek(&k)? {
                        return Ok(false);
                    }
                    if self.cursor.key()? == k.as_slice() {
                        return self.cursor.next();
                    }
                    Ok(true)
                }
            }
        } else {
            match &self.end {
                Bound::Unbounded => self.cursor.last(),
                Bound::Included(k) => {
                    let k = k.clone();
                    self.cursor.seek_back(&k)
                }
                Bound::Excluded(k) => {
                    let k = k.clone();
                    if !self.cursor.seek_back(&k)? {
                        return Ok(false);
                    }
                    if self.cursor.key()? == k.as_slice() {
                        return self.cursor.prev();
                    }
                    Ok(true)
                }
            }
        }
    }

    /// Whether `key` is still inside the far bound.
    #[inline]
    fn within(&self, key: &[u8]) -> bool {
        if !self.reverse {
            match &self.end {
                Bound::Unbounded => true,
                Bound::Included(e) => key <= e.as_slice(),
                Bound::Excluded(e) => key < e.as_slice(),
            }
        } else {
            match &self.start {
                Bound::Unbounded => true,
                Bound::Included(s) => key >= s.as_slice(),
                Bound::Excluded(s) => key > s.as_slice(),
            }
        }
    }

    /// The next entry: the tree's alone, or merged with the layers above it, whose version
    /// of a key wins and whose deletions hide the tree's.
    #[inline]
    fn step(&mut self) -> Result<Option<Entry<'t>>> {
        if self.upper.is_none() {
            return self.tree_step();
        }
        // The tree's entries up to the next key above it, counted once that key was met:
        // each step of the merge below costs about as much as the tree's own step (a scan of
        // a 1M fillrandom's table with a tenth of it in the overlays: 12-15M entries a second
        // stepping through the merge for every entry, 21-23M counting; the tree alone 30M).
        if self.run > 0 {
            self.run -= 1;
            match self.tree_step()? {
                Some(t) => return Ok(Some(t)),
                None => {
                    self.run = 0;
                    self.tree_done = true;
                }
            }
        }
        loop {
            if self.tree.is_none() && !self.tree_done {
                self.tree = self.tree_step()?;
                self.tree_done = self.tree.is_none();
            }
            if self.tree_done && self.tree.is_none() {
                return Ok(self.upper.as_mut().and_then(UpperScan::take_value));
            }
            let up = self.upper.as_mut().and_then(UpperScan::peek);
            let (uk, uv) = match (self.tree, up) {
                (None, None) => return Ok(None),
                (Some(t), None) => {
                    self.tree = None;
                    return Ok(Some(t));
                }
                (Some(t), Some((uk, _))) if self.tree_first(t.0, uk)? => {
                    self.tree = None;
                    // A damaged cell the count stops at is reported by the step that reads
                    // it, after the entries before it.
                    let bound = (!self.clear).then_some(uk);
                    self.run = (self.cursor)
                        .leaf_entries_before(bound, !self.reverse)
                        .unwrap_or(0);
                    return Ok(Some(t));
                }
                (t, Some(u)) => {
                    if t.is_some_and(|t| compare_keys(t.0, u.0).is_eq()) {
                        self.tree = None;
                    }
                    u
                }
            };
            if let Some(u) = self.upper.as_mut() {
                u.advance(uk);
            }
            if let Some(v) = uv {
                return Ok(Some((uk, v)));
            }
        }
    }

    /// Whether the tree's entry `key` (of the cursor's leaf) comes before `uk`, the next key
    /// above the tree, in the walk's direction. Decided for the whole leaf where the
    /// separator that bounds it already lies at or before `uk`: one comparison a leaf, with
    /// a branch key the descent has read, instead of one an entry with a key of the leaf's
    /// (each entry's first touch of its key's cache lines, most of a scan's time beside a
    /// sparse overlay: YCSB E).
    #[inline]
    fn tree_first(&mut self, key: &[u8], uk: &[u8]) -> Result<bool> {
        let leaf = self.cursor.leaf_id().unwrap_or(0);
        let id = (leaf, uk.as_ptr() as usize, uk.len());
        if self.cleared_for != Some(id) {
            self.cleared_for = Some(id);
            self.clear = match self.cursor.leaf_bound(!self.reverse)? {
                // Forward: the leaf's keys lie below the bound; back: at or above it.
                Some(b) if !self.reverse => compare_keys(b, uk).is_le(),
                Some(b) => compare_keys(b, uk).is_gt(),
                None => false,
            };
        }
        if self.clear {
            return Ok(true);
        }
        Ok(match compare_keys(key, uk) {
            std::cmp::Ordering::Less => !self.reverse,
            std::cmp::Ordering::Greater => self.reverse,
            std::cmp::Ordering::Equal => false,
        })
    }

    /// The tree's next entry within the range.
    #[inline(always)]
    fn tree_step(&mut self) -> Result<Option<Entry<'t>>> {
        let more = if !self.started {
            self.started = true;
            self.position()?
        } else if self.reverse {
            self.cursor.prev()?
        } else {
            self.cursor.next()?
        };
        if !more {
            return Ok(None);
        }
        let (k, v) = self.cursor.entry()?;
        if !self.within(k) {
            return Ok(None);
        }
        Ok(Some((k, v)))
    }
}

impl<'t> Iterator for Walk<'t> {
    type Item = Result<Entry<'t>>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.step() {
            Ok(Some(e)) => Some(Ok(e)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

/// Iterator over a key range, in its direction (ascending, or descending for the `_rev`
/// scans) and, as a `DoubleEndedIterator`, from its other end too: `next_back` walks the
/// range the other way, and the two ends stop where they meet, so every entry comes out
/// once. Yields `Result` because a damaged page is reported where it is met; after an error
/// the iterator ends at both ends.
pub struct Range<'t> {
    /// The walk in the range's direction.
    front: Walk<'t>,
    /// The walk the other way, started by the first `next_back`; boxed because most scans
    /// never take it.
    back: Option<Box<Walk<'t>>>,
    /// The last key each end yielded: an end stops at a key the other has passed.
    front_key: Option<&'t [u8]>,
    back_key: Option<&'t [u8]>,
    /// What starting the back walk needs besides the front walk's bounds.
    src: &'t dyn PageSource,
    hdr: TableHeader,
    upper: Upper<'t>,
    reverse: bool,
    done: bool,
    /// Yielded first, ending the range: a range the transaction could not start.
    failed: Option<Error>,
}

impl<'t> Range<'t> {
    pub(crate) fn new(
        src: &'t dyn PageSource,
        hdr: TableHeader,
        start: Bound<Vec<u8>>,
        end: Bound<Vec<u8>>,
        reverse: bool,
        upper: Upper<'t>,
    ) -> Range<'t> {
        Range {
            front: Walk::new(src, hdr, start, end, reverse, upper),
            back: None,
            front_key: None,
            back_key: None,
            src,
            hdr,
            upper,
            reverse,
            done: false,
            failed: None,
        }
    }

    /// A range that yields `e` and ends (`src` is read for nothing).
    pub(crate) fn failed(src: &'t dyn PageSource, e: Error) -> Range<'t> {
        let mut r = Range::new(
            src,
            TableHeader::default(),
            Bound::Unbounded,
            Bound::Unbounded,
            false,
            Upper::default(),
        );
        r.failed = Some(e);
        r
    }

    /// Whether `key`, reached by the end walking in direction `reverse`, lies at or past the
    /// last key the other end yielded.
    #[inline]
    fn crossed(key: &[u8], other: Option<&[u8]>, reverse: bool) -> bool {
        match other {
            None => false,
            Some(o) if reverse => key <= o,
            Some(o) => key >= o,
        }
    }

    /// One entry from the walk `next` gives, unless it has met the other end.
    #[inline]
    fn take(
        &mut self,
        item: Option<Result<Entry<'t>>>,
        from_back: bool,
    ) -> Option<Result<Entry<'t>>> {
        match item {
            None => {
                self.done = true;
                None
            }
            Some(Err(e)) => {
                self.done = true;
                Some(Err(e))
            }
            Some(Ok((k, v))) => {
                let (other, reverse) = if from_back {
                    (self.front_key, !self.reverse)
                } else {
                    (self.back_key, self.reverse)
                };
                if Self::crossed(k, other, reverse) {
                    self.done = true;
                    return None;
                }
                if from_back {
                    self.back_key = Some(k);
                } else {
                    self.front_key = Some(k);
                }
                Some(Ok((k, v)))
            }
        }
    }
}

impl<'t> Iterator for Range<'t> {
    type Item = Result<Entry<'t>>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        if let Some(e) = self.failed.take() {
            self.done = true;
            return Some(Err(e));
        }
        let item = self.front.next();
        self.take(item, false)
    }
}

impl<'t> DoubleEndedIterator for Range<'t> {
    fn next_back(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        if let Some(e) = self.failed.take() {
            self.done = true;
            return Some(Err(e));
        }
        let back = self.back.get_or_insert_with(|| {
            Box::new(Walk::new(
                self.src,
                self.hdr,
                self.front.start.clone(),
                self.front.end.clone(),
                !self.reverse,
                self.upper,
            ))
        });
        let item = back.next();
        self.take(item, true)
    }
}

impl std::iter::FusedIterator for Range<'_> {}
