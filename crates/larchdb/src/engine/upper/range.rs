//! A scan of a table: the tree's cursor merged with the layers above the tree.

use super::{Entry, Upper, UpperScan};
use crate::btree::Cursor;
use crate::error::Result;
use crate::pager::{PageSource, TableHeader};
use std::ops::Bound;

/// Iterator over a key range, forward or reverse. Yields `Result` because a damaged page is
/// reported where it is met; after an error the iterator ends.
pub struct Range<'t> {
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
        let upper = (!upper.is_empty())
            .then(|| upper.scan(&start, &end, reverse))
            .filter(|scan| !scan.is_empty());
        Range {
            cursor: Cursor::new(src, hdr),
            start,
            end,
            reverse,
            started: false,
            done: false,
            upper,
            tree: None,
            tree_done: false,
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
        loop {
            if self.tree.is_none() && !self.tree_done {
                self.tree = self.tree_step()?;
                self.tree_done = self.tree.is_none();
            }
            let up = self.upper.as_mut().and_then(UpperScan::peek);
            let (uk, uv) = match (self.tree, up) {
                (None, None) => return Ok(None),
                (Some(t), None) => {
                    self.tree = None;
                    return Ok(Some(t));
                }
                (Some(t), Some((uk, _))) if (t.0 < uk) != self.reverse && t.0 != uk => {
                    self.tree = None;
                    return Ok(Some(t));
                }
                (t, Some(u)) => {
                    if t.is_some_and(|t| t.0 == u.0) {
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

    /// The tree's next entry within the range.
    #[inline]
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

impl<'t> Iterator for Range<'t> {
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
