//! Tables: the read and write handles, and range iteration.

use crate::btree::{self, Cursor, Scratch};
use crate::engine::catalog::TableState;
use crate::error::{Error, Result};
use crate::limits::{key_bytes_max, VALUE_BYTES_MAX};
use crate::pager::{PageSource, Snapshot, TableHeader, WritePages};
use std::ops::{Bound, RangeBounds};

/// A key and its value, borrowed from the transaction.
pub type Entry<'t> = (&'t [u8], &'t [u8]);

fn own(b: Bound<&[u8]>) -> Bound<Vec<u8>> {
    match b {
        Bound::Included(k) => Bound::Included(k.to_vec()),
        Bound::Excluded(k) => Bound::Excluded(k.to_vec()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

fn bounds<K: AsRef<[u8]> + ?Sized, R: RangeBounds<K>>(r: &R) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    let map = |b: Bound<&K>| own(b.map(|k| k.as_ref()));
    (map(r.start_bound()), map(r.end_bound()))
}

/// Read operations shared by both table handles.
fn get<'t>(src: &'t dyn PageSource, hdr: &TableHeader, key: &[u8]) -> Result<Option<&'t [u8]>> {
    btree::get(src, hdr, key)
}

fn first<'t>(src: &'t dyn PageSource, hdr: TableHeader) -> Result<Option<Entry<'t>>> {
    let mut c = Cursor::new(src, hdr);
    if c.first()? {
        Ok(Some(c.entry()?))
    } else {
        Ok(None)
    }
}

fn last<'t>(src: &'t dyn PageSource, hdr: TableHeader) -> Result<Option<Entry<'t>>> {
    let mut c = Cursor::new(src, hdr);
    if c.last()? {
        Ok(Some(c.entry()?))
    } else {
        Ok(None)
    }
}

fn seek<'t>(src: &'t dyn PageSource, hdr: TableHeader, key: &[u8]) -> Result<Option<Entry<'t>>> {
    let mut c = Cursor::new(src, hdr);
    if c.seek(key)? {
        Ok(Some(c.entry()?))
    } else {
        Ok(None)
    }
}

/// Iterator over a key range, forward or reverse. Yields `Result` because a damaged page is
/// reported where it is met; after an error the iterator ends.
pub struct Range<'t> {
    cursor: Cursor<'t, dyn PageSource + 't>,
    start: Bound<Vec<u8>>,
    end: Bound<Vec<u8>>,
    reverse: bool,
    started: bool,
    done: bool,
}

impl<'t> Range<'t> {
    fn new(
        src: &'t dyn PageSource,
        hdr: TableHeader,
        start: Bound<Vec<u8>>,
        end: Bound<Vec<u8>>,
        reverse: bool,
    ) -> Range<'t> {
        Range {
            cursor: Cursor::new(src, hdr),
            start,
            end,
            reverse,
            started: false,
            done: false,
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

    #[inline]
    fn step(&mut self) -> Result<Option<Entry<'t>>> {
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

/// A table opened in a read transaction. Values borrow from the transaction.
pub struct ReadTable<'t> {
    src: &'t Snapshot,
    hdr: TableHeader,
}

impl<'t> ReadTable<'t> {
    pub(crate) fn new(src: &'t Snapshot, hdr: TableHeader) -> ReadTable<'t> {
        ReadTable { src, hdr }
    }

    /// The value of `key`, if present.
    #[inline]
    pub fn get(&self, key: &[u8]) -> Result<Option<&'t [u8]>> {
        // Monomorphised on the snapshot type: the page accesses of a lookup inline.
        btree::get(self.src, &self.hdr, key)
    }

    /// The first entry.
    pub fn first(&self) -> Result<Option<Entry<'t>>> {
        first(self.src, self.hdr)
    }

    /// The last entry.
    pub fn last(&self) -> Result<Option<Entry<'t>>> {
        last(self.src, self.hdr)
    }

    /// The first entry whose key is >= `key`.
    pub fn seek(&self, key: &[u8]) -> Result<Option<Entry<'t>>> {
        seek(self.src, self.hdr, key)
    }

    /// Entries with keys in `range`, in ascending order.
    pub fn range<K: AsRef<[u8]> + ?Sized, R: RangeBounds<K>>(&self, range: R) -> Range<'t> {
        let (s, e) = bounds(&range);
        Range::new(self.src, self.hdr, s, e, false)
    }

    /// Entries with keys in `range`, in descending order.
    pub fn range_rev<K: AsRef<[u8]> + ?Sized, R: RangeBounds<K>>(&self, range: R) -> Range<'t> {
        let (s, e) = bounds(&range);
        Range::new(self.src, self.hdr, s, e, true)
    }

    /// All entries, ascending.
    pub fn iter(&self) -> Range<'t> {
        Range::new(
            self.src,
            self.hdr,
            Bound::Unbounded,
            Bound::Unbounded,
            false,
        )
    }

    /// All entries, descending.
    pub fn iter_rev(&self) -> Range<'t> {
        Range::new(self.src, self.hdr, Bound::Unbounded, Bound::Unbounded, true)
    }

    /// Number of entries (kept in the table header: O(1)).
    pub fn len(&self) -> u64 {
        self.hdr.entries
    }

    /// True if the table has no entries.
    pub fn is_empty(&self) -> bool {
        self.hdr.entries == 0
    }

    /// Levels of the table's tree (0 when empty).
    pub fn depth(&self) -> u32 {
        self.hdr.depth
    }
}

/// A table opened in a write transaction.
pub struct WriteTable<'t> {
    pages: &'t mut WritePages,
    state: &'t mut TableState,
    scratch: &'t mut Scratch,
    failed: &'t mut bool,
}

impl<'t> WriteTable<'t> {
    pub(crate) fn new(
        pages: &'t mut WritePages,
        state: &'t mut TableState,
        scratch: &'t mut Scratch,
        failed: &'t mut bool,
    ) -> WriteTable<'t> {
        WriteTable {
            pages,
            state,
            scratch,
            failed,
        }
    }

    fn check(&self, key: &[u8], value: &[u8]) -> Result<()> {
        let max = key_bytes_max(self.pages.page_bytes() as u32);
        if key.len() > max {
            return Err(Error::KeyTooLarge {
                len: key.len(),
                max,
            });
        }
        if value.len() > VALUE_BYTES_MAX {
            return Err(Error::ValueTooLarge {
                len: value.len(),
                max: VALUE_BYTES_MAX,
            });
        }
        Ok(())
    }

    fn mutate<T>(
        &mut self,
        f: impl FnOnce(&mut WritePages, &mut Scratch, &mut TableState) -> Result<T>,
    ) -> Result<T> {
        if *self.failed {
            return Err(Error::TxnFailed);
        }
        let before = self.state.hdr;
        let r = f(self.pages, self.scratch, self.state);
        match &r {
            // The catalog is rewritten at commit only for tables whose header changed.
            Ok(_) => self.state.dirty |= self.state.hdr != before,
            // Detected before anything changed: the transaction stays usable.
            Err(Error::AppendOutOfOrder) => {}
            Err(_) => *self.failed = true,
        }
        r
    }

    /// Inserts or replaces. Returns true if it replaced an existing value.
    pub fn put(&mut self, key: &[u8], value: &[u8]) -> Result<bool> {
        self.check(key, value)?;
        self.mutate(|w, s, t| {
            // Any change but an append may reshape the tree's right edge.
            t.append_hint = None;
            btree::put(w, s, &mut t.hdr, key, value, Some(&mut t.put_hint))
        })
    }

    /// Inserts a key that sorts after every key in the table (sequential loads): skips the
    /// search and splits full pages at their end, leaving them full. Fails with
    /// [`Error::AppendOutOfOrder`], changing nothing, if the key is not the greatest.
    pub fn append(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.check(key, value)?;
        self.mutate(|w, s, t| {
            t.put_hint.reset();
            btree::append(w, s, &mut t.hdr, key, value, &mut t.append_hint)
        })
    }

    /// Deletes `key`. Returns true if it was present.
    pub fn delete(&mut self, key: &[u8]) -> Result<bool> {
        if key.len() > key_bytes_max(self.pages.page_bytes() as u32) {
            return Ok(false);
        }
        self.mutate(|w, _, t| {
            t.append_hint = None;
            t.put_hint.reset();
            btree::delete(w, &mut t.hdr, key)
        })
    }

    /// The value of `key`, as this transaction sees it.
    pub fn get(&self, key: &[u8]) -> Result<Option<&[u8]>> {
        get(&*self.pages, &self.state.hdr, key)
    }

    /// The first entry.
    pub fn first(&self) -> Result<Option<Entry<'_>>> {
        first(&*self.pages, self.state.hdr)
    }

    /// The last entry.
    pub fn last(&self) -> Result<Option<Entry<'_>>> {
        last(&*self.pages, self.state.hdr)
    }

    /// The first entry whose key is >= `key`.
    pub fn seek(&self, key: &[u8]) -> Result<Option<Entry<'_>>> {
        seek(&*self.pages, self.state.hdr, key)
    }

    /// Entries with keys in `range`, ascending.
    pub fn range<K: AsRef<[u8]> + ?Sized, R: RangeBounds<K>>(&self, range: R) -> Range<'_> {
        let (s, e) = bounds(&range);
        Range::new(&*self.pages, self.state.hdr, s, e, false)
    }

    /// Entries with keys in `range`, descending.
    pub fn range_rev<K: AsRef<[u8]> + ?Sized, R: RangeBounds<K>>(&self, range: R) -> Range<'_> {
        let (s, e) = bounds(&range);
        Range::new(&*self.pages, self.state.hdr, s, e, true)
    }

    /// All entries, ascending.
    pub fn iter(&self) -> Range<'_> {
        Range::new(
            &*self.pages,
            self.state.hdr,
            Bound::Unbounded,
            Bound::Unbounded,
            false,
        )
    }

    /// All entries, descending.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// let mut w = db.begin_write()?;
    /// w.create_table("t")?;
    /// let mut t = w.table("t")?;
    /// for k in [b"a", b"b", b"c"] {
    ///     t.put(k, b"")?;
    /// }
    /// let keys: Vec<&[u8]> = t.iter_rev().map(|e| e.map(|(k, _)| k)).collect::<Result<_, _>>()?;
    /// assert_eq!(keys, [&b"c"[..], b"b", b"a"]);
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn iter_rev(&self) -> Range<'_> {
        Range::new(
            &*self.pages,
            self.state.hdr,
            Bound::Unbounded,
            Bound::Unbounded,
            true,
        )
    }

    /// Number of entries.
    pub fn len(&self) -> u64 {
        self.state.hdr.entries
    }

    /// True if the table has no entries.
    pub fn is_empty(&self) -> bool {
        self.state.hdr.entries == 0
    }
}
