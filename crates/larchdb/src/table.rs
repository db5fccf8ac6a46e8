//! Tables: the read and write handles, and range iteration.

use crate::btree::{self, Scratch};
use crate::engine::catalog::TableState;
use crate::engine::savepoint::UndoSink;
use crate::engine::txn::Txn;
use crate::engine::upper::batch::Batch;
use crate::engine::upper::overlay::Lookup;
use crate::engine::upper::{as_ref, edge, get_layered, uncount, Edge, Overlays, Upper};
use crate::engine::Counters;
use crate::error::{Error, Result};
use crate::limits::{key_bytes_max, VALUE_BYTES_MAX};
use crate::pager::{PageSource, Snapshot, TableHeader, WritePages};
use std::ops::{Bound, RangeBounds};

pub use crate::engine::upper::{Entry, Range};

fn own(b: Bound<&[u8]>) -> Bound<Vec<u8>> {
    match b {
        Bound::Included(k) => Bound::Included(k.to_vec()),
        Bound::Excluded(k) => Bound::Excluded(k.to_vec()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

/// Keys `WriteTable::retain` collects before it deletes them, that a logged transaction's
/// `delete_range` deletes between two looks at what its batch holds, and that a
/// savepoint's undo records take of a range or a table deleted at a time.
pub(crate) const RANGE_CHUNK: usize = 1024;

fn bounds<K: AsRef<[u8]> + ?Sized, R: RangeBounds<K>>(r: &R) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    let map = |b: Bound<&K>| own(b.map(|k| k.as_ref()));
    (map(r.start_bound()), map(r.end_bound()))
}

/// The key range that holds exactly the keys starting with `prefix`: from the prefix itself
/// to the shortest key above all of them (the prefix with its last byte below 0xFF raised by
/// one and what follows cut), unbounded when there is none (empty, or all 0xFF).
fn prefix_bounds(prefix: &[u8]) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    let end = match prefix.iter().rposition(|&b| b != 0xFF) {
        Some(i) => {
            let mut e = prefix[..=i].to_vec();
            e[i] += 1;
            Bound::Excluded(e)
        }
        None => Bound::Unbounded,
    };
    (Bound::Included(prefix.to_vec()), end)
}

/// A table opened in a read transaction. Values borrow from the transaction.
pub struct ReadTable<'t> {
    src: &'t Snapshot,
    hdr: TableHeader,
    upper: Upper<'t>,
}

impl std::fmt::Debug for ReadTable<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("ReadTable");
        if let Ok(n) = self.len() {
            d.field("entries", &n);
        }
        d.finish_non_exhaustive()
    }
}

impl<'t> ReadTable<'t> {
    pub(crate) fn new(src: &'t Snapshot, hdr: TableHeader) -> ReadTable<'t> {
        ReadTable {
            src,
            hdr,
            upper: Upper::default(),
        }
    }

    /// A table whose commits since the tree's are in `upper` (the overlay). Its entry count
    /// is looked up there only when asked (`len`): the count's entry in the overlay gets a
    /// new version at every commit, so a reader that opened a table per read beside a writer
    /// read a cache line the writer had just written, twice, per read.
    pub(crate) fn layered(src: &'t Snapshot, hdr: TableHeader, upper: Upper<'t>) -> ReadTable<'t> {
        ReadTable { src, hdr, upper }
    }

    fn range_of(&self, start: Bound<Vec<u8>>, end: Bound<Vec<u8>>, reverse: bool) -> Range<'t> {
        Range::new(self.src, self.hdr, start, end, reverse, self.upper)
    }

    /// The value of `key`, if present.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// # let mut w = db.begin_write()?;
    /// # w.create_table("t")?;
    /// # w.create_table("empty")?;
    /// # let mut t = w.table("t")?;
    /// # for (k, v) in [(b"a", b"1"), (b"b", b"2"), (b"d", b"4")] {
    /// #     t.put(k, v)?;
    /// # }
    /// # drop(t);
    /// # w.commit()?;
    /// let r = db.begin_read()?;
    /// let t = r.table("t")?;
    /// assert_eq!(t.get(b"a")?, Some(&b"1"[..]));
    /// assert_eq!(t.get(b"c")?, None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn get(&self, key: &[u8]) -> Result<Option<&'t [u8]>> {
        // Monomorphised on the snapshot type: the page accesses of a lookup inline.
        get_layered(self.src, &self.hdr, &self.upper, key)
    }

    /// The first entry.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// # let mut w = db.begin_write()?;
    /// # w.create_table("t")?;
    /// # w.create_table("empty")?;
    /// # let mut t = w.table("t")?;
    /// # for (k, v) in [(b"a", b"1"), (b"b", b"2"), (b"d", b"4")] {
    /// #     t.put(k, v)?;
    /// # }
    /// # drop(t);
    /// # w.commit()?;
    /// let r = db.begin_read()?;
    /// let t = r.table("t")?;
    /// assert_eq!(t.first()?, Some((&b"a"[..], &b"1"[..])));
    /// assert_eq!(r.table("empty")?.first()?, None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn first(&self) -> Result<Option<Entry<'t>>> {
        edge(self.src, self.hdr, self.upper, Edge::First)
    }

    /// The last entry.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// # let mut w = db.begin_write()?;
    /// # w.create_table("t")?;
    /// # w.create_table("empty")?;
    /// # let mut t = w.table("t")?;
    /// # for (k, v) in [(b"a", b"1"), (b"b", b"2"), (b"d", b"4")] {
    /// #     t.put(k, v)?;
    /// # }
    /// # drop(t);
    /// # w.commit()?;
    /// let r = db.begin_read()?;
    /// let t = r.table("t")?;
    /// assert_eq!(t.last()?, Some((&b"d"[..], &b"4"[..])));
    /// assert_eq!(r.table("empty")?.last()?, None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn last(&self) -> Result<Option<Entry<'t>>> {
        edge(self.src, self.hdr, self.upper, Edge::Last)
    }

    /// The first entry whose key is >= `key`.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// # let mut w = db.begin_write()?;
    /// # w.create_table("t")?;
    /// # w.create_table("empty")?;
    /// # let mut t = w.table("t")?;
    /// # for (k, v) in [(b"a", b"1"), (b"b", b"2"), (b"d", b"4")] {
    /// #     t.put(k, v)?;
    /// # }
    /// # drop(t);
    /// # w.commit()?;
    /// let r = db.begin_read()?;
    /// let t = r.table("t")?;
    /// assert_eq!(t.seek(b"b")?, Some((&b"b"[..], &b"2"[..])));
    /// // There is no "c": the next key up is "d".
    /// assert_eq!(t.seek(b"c")?, Some((&b"d"[..], &b"4"[..])));
    /// assert_eq!(t.seek(b"e")?, None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn seek(&self, key: &[u8]) -> Result<Option<Entry<'t>>> {
        edge(self.src, self.hdr, self.upper, Edge::Seek(key))
    }

    /// Entries with keys in `range`, in ascending order.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// # let mut w = db.begin_write()?;
    /// # w.create_table("t")?;
    /// # w.create_table("empty")?;
    /// # let mut t = w.table("t")?;
    /// # for (k, v) in [(b"a", b"1"), (b"b", b"2"), (b"d", b"4")] {
    /// #     t.put(k, v)?;
    /// # }
    /// # drop(t);
    /// # w.commit()?;
    /// let r = db.begin_read()?;
    /// let t = r.table("t")?;
    /// let keys: Vec<&[u8]> = t.range(&b"b"[..]..&b"z"[..]).map(|e| e.map(|(k, _)| k)).collect::<Result<_, _>>()?;
    /// assert_eq!(keys, [&b"b"[..], b"d"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn range<K: AsRef<[u8]> + ?Sized, R: RangeBounds<K>>(&self, range: R) -> Range<'t> {
        let (s, e) = bounds(&range);
        self.range_of(s, e, false)
    }

    /// Entries with keys in `range`, in descending order.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// # let mut w = db.begin_write()?;
    /// # w.create_table("t")?;
    /// # w.create_table("empty")?;
    /// # let mut t = w.table("t")?;
    /// # for (k, v) in [(b"a", b"1"), (b"b", b"2"), (b"d", b"4")] {
    /// #     t.put(k, v)?;
    /// # }
    /// # drop(t);
    /// # w.commit()?;
    /// let r = db.begin_read()?;
    /// let t = r.table("t")?;
    /// let keys: Vec<&[u8]> = t.range_rev(&b"a"[..]..&b"d"[..]).map(|e| e.map(|(k, _)| k)).collect::<Result<_, _>>()?;
    /// assert_eq!(keys, [&b"b"[..], b"a"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn range_rev<K: AsRef<[u8]> + ?Sized, R: RangeBounds<K>>(&self, range: R) -> Range<'t> {
        let (s, e) = bounds(&range);
        self.range_of(s, e, true)
    }

    /// Entries whose keys start with `prefix`, ascending (all of them for an empty prefix).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// let mut w = db.begin_write()?;
    /// w.create_table("t")?;
    /// let mut t = w.table("t")?;
    /// for k in [&b"user/1"[..], b"user/2", b"users", b"usex"] {
    ///     t.put(k, b"")?;
    /// }
    /// drop(t);
    /// w.commit()?;
    /// let r = db.begin_read()?;
    /// let t = r.table("t")?;
    /// let keys: Vec<&[u8]> = t.prefix(b"user/").map(|e| e.map(|(k, _)| k)).collect::<Result<_, _>>()?;
    /// assert_eq!(keys, [&b"user/1"[..], b"user/2"]);
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn prefix(&self, prefix: &[u8]) -> Range<'t> {
        let (s, e) = prefix_bounds(prefix);
        self.range_of(s, e, false)
    }

    /// Entries whose keys start with `prefix`, descending.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// # let mut w = db.begin_write()?;
    /// # w.create_table("t")?;
    /// # let mut t = w.table("t")?;
    /// # for k in [&b"a"[..], b"b\xff", b"b\xff\x00", b"c"] { t.put(k, b"")?; }
    /// # drop(t);
    /// # w.commit()?;
    /// let r = db.begin_read()?;
    /// let t = r.table("t")?;
    /// let keys: Vec<&[u8]> = t.prefix_rev(b"b\xff").map(|e| e.map(|(k, _)| k)).collect::<Result<_, _>>()?;
    /// assert_eq!(keys, [&b"b\xff\x00"[..], b"b\xff"]);
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn prefix_rev(&self, prefix: &[u8]) -> Range<'t> {
        let (s, e) = prefix_bounds(prefix);
        self.range_of(s, e, true)
    }

    /// All entries, ascending.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// # let mut w = db.begin_write()?;
    /// # w.create_table("t")?;
    /// # w.create_table("empty")?;
    /// # let mut t = w.table("t")?;
    /// # for (k, v) in [(b"a", b"1"), (b"b", b"2"), (b"d", b"4")] {
    /// #     t.put(k, v)?;
    /// # }
    /// # drop(t);
    /// # w.commit()?;
    /// let r = db.begin_read()?;
    /// let t = r.table("t")?;
    /// let keys: Vec<&[u8]> = t.iter().map(|e| e.map(|(k, _)| k)).collect::<Result<_, _>>()?;
    /// assert_eq!(keys, [&b"a"[..], b"b", b"d"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn iter(&self) -> Range<'t> {
        self.range_of(Bound::Unbounded, Bound::Unbounded, false)
    }

    /// All entries, descending.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// # let mut w = db.begin_write()?;
    /// # w.create_table("t")?;
    /// # w.create_table("empty")?;
    /// # let mut t = w.table("t")?;
    /// # for (k, v) in [(b"a", b"1"), (b"b", b"2"), (b"d", b"4")] {
    /// #     t.put(k, v)?;
    /// # }
    /// # drop(t);
    /// # w.commit()?;
    /// let r = db.begin_read()?;
    /// let t = r.table("t")?;
    /// let keys: Vec<&[u8]> = t.iter_rev().map(|e| e.map(|(k, _)| k)).collect::<Result<_, _>>()?;
    /// assert_eq!(keys, [&b"d"[..], b"b", b"a"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn iter_rev(&self) -> Range<'t> {
        self.range_of(Bound::Unbounded, Bound::Unbounded, true)
    }

    /// Number of entries. Kept in the table header and the overlay: O(1), except that in a
    /// logged database each key that a blind write ([`WriteTable::set`]) counted as new is
    /// looked up in the tree once, by the first call that needs it (until the next
    /// checkpoint counts them exactly).
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// # let mut w = db.begin_write()?;
    /// # w.create_table("t")?;
    /// # w.create_table("empty")?;
    /// # let mut t = w.table("t")?;
    /// # for (k, v) in [(b"a", b"1"), (b"b", b"2"), (b"d", b"4")] {
    /// #     t.put(k, v)?;
    /// # }
    /// # drop(t);
    /// # w.commit()?;
    /// let r = db.begin_read()?;
    /// let t = r.table("t")?;
    /// assert_eq!(t.len()?, 3);
    /// assert_eq!(r.table("empty")?.len()?, 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn len(&self) -> Result<u64> {
        let (src, hdr) = (self.src, self.hdr);
        let in_tree = self
            .upper
            .blind_in_tree(|k| Ok(btree::get(src, &hdr, k)?.is_some()))?;
        uncount(self.upper.count().unwrap_or(hdr.entries), in_tree)
    }

    /// True if the table has no entries (see [`ReadTable::len`]).
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// # let mut w = db.begin_write()?;
    /// # w.create_table("t")?;
    /// # w.create_table("empty")?;
    /// # let mut t = w.table("t")?;
    /// # for (k, v) in [(b"a", b"1"), (b"b", b"2"), (b"d", b"4")] {
    /// #     t.put(k, v)?;
    /// # }
    /// # drop(t);
    /// # w.commit()?;
    /// let r = db.begin_read()?;
    /// let t = r.table("t")?;
    /// assert!(!t.is_empty()?);
    /// assert!(r.table("empty")?.is_empty()?);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }

    /// Levels of the table's tree (0 when empty), as of the last commit that wrote pages.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// # let mut w = db.begin_write()?;
    /// # w.create_table("t")?;
    /// # w.create_table("empty")?;
    /// # let mut t = w.table("t")?;
    /// # for (k, v) in [(b"a", b"1"), (b"b", b"2"), (b"d", b"4")] {
    /// #     t.put(k, v)?;
    /// # }
    /// # drop(t);
    /// # w.commit()?;
    /// let r = db.begin_read()?;
    /// let t = r.table("t")?;
    /// // Three small entries fit in one leaf page.
    /// assert_eq!(t.depth(), 1);
    /// assert_eq!(r.table("empty")?.depth(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn depth(&self) -> u32 {
        self.hdr.depth
    }
}

/// A write transaction that commits through the log: where a table's writes go.
pub(crate) struct Logged<'t> {
    pub(crate) batch: &'t mut Batch,
    pub(crate) overlays: Overlays<'t>,
    /// The table's number in the overlay and the batch.
    pub(crate) table: u64,
    /// The transaction's base commit.
    pub(crate) txn: u64,
    /// The batch's bytes past which the transaction turns to writing pages
    /// (`TableAccess::bound`, `Shared::batch_bytes_max`).
    pub(crate) bound: usize,
}

/// What a write transaction's table reads and writes pages through.
pub(crate) enum TablePages<'t> {
    /// The transaction's pages: it changes the tree.
    Write(&'t mut WritePages),
    /// A logged transaction's base snapshot: it reads the tree and changes nothing in it.
    Read(&'t Snapshot),
}

/// What a write transaction's table reads the tree through, for a read.
#[derive(Clone, Copy)]
pub(crate) enum TableSource<'a> {
    Write(&'a WritePages),
    Read(&'a Snapshot),
}

/// A logged transaction's layers above the tree, for a read.
#[derive(Clone, Copy)]
pub(crate) struct LoggedView<'a> {
    pub(crate) batch: &'a Batch,
    pub(crate) overlays: Overlays<'a>,
    pub(crate) table: u64,
    pub(crate) txn: u64,
}

/// What a `WriteTable` reaches its transaction through (`engine::txn::Txn`), at each call:
/// the transaction may turn from committing through the log to writing pages between two
/// calls (`bound`), and the table's parts are taken again after it.
pub(crate) trait TableAccess {
    /// The table in `slot` (`catalog::TableStates`) for a change; `id` is its number in the
    /// batch while the transaction commits through the log.
    fn parts(&mut self, slot: usize, id: Option<u64>) -> Result<TableParts<'_>>;
    /// The table in `slot` for a read.
    fn view(&self, slot: usize, id: Option<u64>) -> TableView<'_>;
    /// After a change: a logged transaction whose batch outgrew its bound
    /// (`Shared::batch_bytes_max`) turns to writing pages now, its records so far applied to
    /// the tree, rather than hold its writes in memory until the commit
    /// (`Txn::switch_to_pages`).
    fn bound(&mut self, slot: usize) -> Result<()>;
}

/// A table of a write transaction, read for one call (`TableAccess::view`).
#[derive(Clone, Copy)]
pub(crate) struct TableView<'a> {
    pub(crate) pages: TableSource<'a>,
    pub(crate) hdr: TableHeader,
    pub(crate) logged: Option<LoggedView<'a>>,
    /// The table's state could not be had (the transaction failed turning to pages): every
    /// read fails with `TxnFailed`.
    pub(crate) failed: bool,
}

impl<'a> TableView<'a> {
    /// A view whose reads fail (`src` is read for nothing).
    pub(crate) fn failed(src: &'a Snapshot) -> TableView<'a> {
        TableView {
            pages: TableSource::Read(src),
            hdr: TableHeader::default(),
            logged: None,
            failed: true,
        }
    }

    fn src(&self) -> &'a dyn PageSource {
        match self.pages {
            TableSource::Write(p) => p,
            TableSource::Read(s) => s,
        }
    }

    fn upper(&self) -> Upper<'a> {
        match self.logged {
            Some(l) => Upper::new(l.overlays, Some(l.batch), l.table, l.txn),
            None => Upper::default(),
        }
    }

    /// The value of `key` as the transaction sees it (each page source its own code: this
    /// is the read path of a logged transaction's `put` and `delete`).
    #[inline]
    fn get(&self, key: &[u8]) -> Result<Option<&'a [u8]>> {
        if self.failed {
            return Err(Error::TxnFailed);
        }
        let upper = self.upper();
        match self.pages {
            TableSource::Write(p) => get_layered(p, &self.hdr, &upper, key),
            TableSource::Read(s) => get_layered(s, &self.hdr, &upper, key),
        }
    }

    fn edge(&self, at: Edge<'_>) -> Result<Option<Entry<'a>>> {
        if self.failed {
            return Err(Error::TxnFailed);
        }
        edge(self.src(), self.hdr, self.upper(), at)
    }

    fn range_of(&self, start: Bound<Vec<u8>>, end: Bound<Vec<u8>>, reverse: bool) -> Range<'a> {
        if self.failed {
            return Range::failed(self.src(), Error::TxnFailed);
        }
        Range::new(self.src(), self.hdr, start, end, reverse, self.upper())
    }

    fn len(&self) -> Result<u64> {
        if self.failed {
            return Err(Error::TxnFailed);
        }
        let Some(l) = &self.logged else {
            return Ok(self.hdr.entries);
        };
        let (src, hdr) = (self.src(), self.hdr);
        let in_tree = |k: &[u8]| Ok(btree::get(src, &hdr, k)?.is_some());
        let n = l.batch.blind_in_tree(l.table, &in_tree)?;
        let above = Upper::new(l.overlays, None, l.table, l.txn);
        uncount(self.hdr.entries, n + above.blind_in_tree(in_tree)?)
    }
}

/// A table of a write transaction, borrowed for one change (`TableAccess::parts`).
pub(crate) struct TableParts<'t> {
    pages: TablePages<'t>,
    state: &'t mut TableState,
    scratch: &'t mut Scratch,
    failed: &'t mut bool,
    /// `Some` when the transaction commits through the log: the tree (read through `pages`)
    /// is not changed, the writes are kept in the batch. `state.hdr` is then the tree's
    /// header with the table's entry count as this transaction sees it.
    logged: Option<Logged<'t>>,
    /// `Some` while the transaction has a live savepoint: each change records how to undo it
    /// (`engine::savepoint`).
    undo: Option<UndoSink<'t>>,
}

impl<'t> TableParts<'t> {
    pub(crate) fn new(
        pages: TablePages<'t>,
        state: &'t mut TableState,
        scratch: &'t mut Scratch,
        failed: &'t mut bool,
        logged: Option<Logged<'t>>,
        undo: Option<UndoSink<'t>>,
    ) -> TableParts<'t> {
        TableParts {
            pages,
            state,
            scratch,
            failed,
            logged,
            undo,
        }
    }

    /// Whether the transaction's batch holds more than its bound (`Logged::bound`).
    #[inline]
    fn over_bound(&self) -> bool {
        self.logged
            .as_ref()
            .is_some_and(|l| l.batch.bytes() > l.bound)
    }

    fn view(&self) -> TableView<'_> {
        TableView {
            pages: match &self.pages {
                TablePages::Write(p) => TableSource::Write(p),
                TablePages::Read(s) => TableSource::Read(s),
            },
            hdr: self.state.hdr,
            logged: self.logged.as_ref().map(|l| LoggedView {
                batch: l.batch,
                overlays: l.overlays,
                table: l.table,
                txn: l.txn,
            }),
            failed: false,
        }
    }

    /// The value `key` has before a change, if a savepoint needs it (`Some`): `Some(None)`
    /// for a key without one.
    ///
    /// Makes room for the record first (`undo_room`).
    fn undo_before(&mut self, key: &[u8]) -> Result<Option<Option<Vec<u8>>>> {
        if self.undo.is_none() {
            return Ok(None);
        }
        self.undo_room()?;
        Ok(Some(self.view().get(key)?.map(<[u8]>::to_vec)))
    }

    /// Before a change that a savepoint records: the undo records past their bound go to
    /// their file (`UndoLog::make_room`), so that a failure there comes before the change.
    fn undo_room(&mut self) -> Result<()> {
        match self.undo.as_mut() {
            Some(sink) => sink.log.make_room(),
            None => Ok(()),
        }
    }

    /// Whether `key` is present before a logged change: from the value `undo_before` read,
    /// or a lookup if it read none.
    fn existed(&self, key: &[u8], old: &Option<Option<Vec<u8>>>) -> Result<bool> {
        match old {
            Some(old) => Ok(old.is_some()),
            None => Ok(self.view().get(key)?.is_some()),
        }
    }

    /// Records the undo of a change of `key` that succeeded, its value before being `old`
    /// (from `undo_before`).
    fn undo_after(&mut self, key: &[u8], old: Option<Option<Vec<u8>>>) {
        if let (Some(sink), Some(old)) = (self.undo.as_mut(), old) {
            sink.key(key.to_vec(), old);
        }
    }

    /// Where the tree is read from.
    #[inline]
    fn src(&self) -> &dyn PageSource {
        match &self.pages {
            TablePages::Write(p) => &**p,
            TablePages::Read(s) => *s,
        }
    }

    fn check(&self, key: &[u8], value: &[u8]) -> Result<()> {
        let max = key_bytes_max(self.src().page_bytes() as u32);
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
        let TablePages::Write(pages) = &mut self.pages else {
            return Err(Error::Internal(
                "a change of the tree in a transaction that reads it only".into(),
            ));
        };
        let before = self.state.hdr;
        // The change whole, then the copies of cold pages it left beyond the transaction's
        // bound written out (`WritePages::spill_cold`); a failure there fails the transaction.
        let r = f(pages, self.scratch, self.state).and_then(|t| pages.spill_cold().map(|()| t));
        match &r {
            // The catalog is rewritten at commit only for tables whose header changed.
            Ok(_) => self.state.dirty |= self.state.hdr != before,
            // Detected before anything changed: the transaction stays usable.
            Err(Error::AppendOutOfOrder) => {}
            Err(_) => *self.failed = true,
        }
        r
    }

    /// Records a logged write of `key` (a value, or a deletion) that changes the table's
    /// entry count by `grow` (+1 a new key, -1 a deleted one, 0 a replacement).
    /// `blind` if the write counted the key as new without knowing (`set`).
    fn log_write(&mut self, key: &[u8], value: Option<&[u8]>, grow: i64, blind: bool) {
        if let Some(l) = self.logged.as_mut() {
            l.batch.put(l.table, key, value, blind);
        }
        if grow != 0 {
            self.state.hdr.entries = self.state.hdr.entries.wrapping_add_signed(grow);
            self.state.dirty = true;
        }
        match (&mut self.state.last_key, value) {
            (Some(last), Some(_)) if key > last.as_slice() => {
                // The buffer is reused: a sequential load runs this once a commit.
                last.clear();
                last.extend_from_slice(key);
            }
            (Some(last), None) if key == last.as_slice() => self.state.last_key = None,
            _ => {}
        }
    }

    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<bool> {
        self.check(key, value)?;
        if *self.failed {
            return Err(Error::TxnFailed);
        }
        let old = self.undo_before(key)?;
        let existed = if self.logged.is_some() {
            let existed = self.existed(key, &old)?;
            self.log_write(key, Some(value), if existed { 0 } else { 1 }, false);
            existed
        } else {
            self.mutate(|w, s, t| {
                // Any change but an append may reshape the tree's right edge.
                t.append_hint = None;
                t.last_key = None;
                btree::put(w, s, &mut t.hdr, key, value, Some(&mut t.put_hint))
            })?
        };
        self.undo_after(key, old);
        Ok(existed)
    }

    fn set(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        if self.logged.is_none() {
            return self.put(key, value).map(|_| ());
        }
        if self.undo.is_some() {
            // A savepoint needs the old value: the lookup `set` skips is made anyway.
            return self.put(key, value).map(|_| ());
        }
        self.check(key, value)?;
        if *self.failed {
            return Err(Error::TxnFailed);
        }
        // What this transaction and the overlay know of the key costs no tree lookup.
        let known = match self.view().upper().get(key) {
            Lookup::Value(_) => Some(true),
            Lookup::Deleted => Some(false),
            Lookup::Absent => None,
        };
        let grow = if known == Some(true) { 0 } else { 1 };
        self.log_write(key, Some(value), grow, known.is_none());
        Ok(())
    }

    fn append(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.check(key, value)?;
        self.undo_room()?;
        if self.logged.is_some() {
            if *self.failed {
                return Err(Error::TxnFailed);
            }
            if self.state.last_key.is_none() {
                let last = self.view().edge(Edge::Last)?.map(|(k, _)| k.to_vec());
                self.state.last_key = Some(last.unwrap_or_default());
            }
            let in_order = match &self.state.last_key {
                Some(last) if crate::btree::node::compare_keys(key, last).is_gt() => true,
                Some(last) if last.is_empty() => self.view().len()? == 0,
                _ => false,
            };
            if !in_order {
                return Err(Error::AppendOutOfOrder);
            }
            // `log_write`'s work for a key known to be past every other: no lookup in the
            // batch, no comparison with the last key, which `key` now is.
            if let Some(l) = self.logged.as_mut() {
                l.batch.append(l.table, key, value);
            }
            self.state.hdr.entries = self.state.hdr.entries.wrapping_add(1);
            self.state.dirty = true;
            if let Some(last) = self.state.last_key.as_mut() {
                last.clear();
                last.extend_from_slice(key);
            }
        } else {
            self.mutate(|w, s, t| {
                t.put_hint.reset();
                t.last_key = None;
                btree::append(w, s, &mut t.hdr, key, value, &mut t.append_hint)
            })?;
        }
        // An append adds a key the table did not have.
        self.undo_after(key, self.undo.is_some().then_some(None));
        Ok(())
    }

    fn delete(&mut self, key: &[u8]) -> Result<bool> {
        if key.len() > key_bytes_max(self.src().page_bytes() as u32) {
            return Ok(false);
        }
        if *self.failed {
            return Err(Error::TxnFailed);
        }
        let old = self.undo_before(key)?;
        let existed = if self.logged.is_some() {
            let existed = self.existed(key, &old)?;
            if existed {
                self.log_write(key, None, -1, false);
            }
            existed
        } else {
            self.mutate(|w, _, t| {
                t.append_hint = None;
                t.put_hint.reset();
                t.last_key = None;
                btree::delete(w, &mut t.hdr, key)
            })?
        };
        if existed {
            self.undo_after(key, old);
        }
        Ok(existed)
    }

    /// Deletes the keys from `start` to `end`: all of them where the tree is changed and no
    /// savepoint is live, at most `RANGE_CHUNK` through the log or for a savepoint's undo
    /// records. Returns how many, and the last key deleted if keys may be left past it.
    fn delete_range_chunk(
        &mut self,
        start: Bound<Vec<u8>>,
        end: Bound<Vec<u8>>,
    ) -> Result<(u64, Option<Vec<u8>>)> {
        if *self.failed {
            return Err(Error::TxnFailed);
        }
        let keep_values = self.undo.is_some();
        if self.logged.is_some() || keep_values {
            // The entries as this transaction sees them (tree, overlay and batch together);
            // a savepoint keeps each, to put it back.
            self.undo_room()?;
            let chunk = RANGE_CHUNK;
            let doomed = self
                .view()
                .range_of(start.clone(), end.clone(), false)
                .take(chunk)
                .map(|e| e.map(|(k, v)| (k.to_vec(), keep_values.then(|| v.to_vec()))))
                .collect::<Result<Vec<_>>>()?;
            let more = (doomed.len() == chunk).then(|| doomed[doomed.len() - 1].0.clone());
            let n = if self.logged.is_some() {
                for (k, _) in &doomed {
                    self.log_write(k, None, -1, false);
                }
                doomed.len() as u64
            } else {
                let end = match &more {
                    Some(last) => Bound::Included(last.clone()),
                    None => end,
                };
                self.delete_tree_range(start, end)?
            };
            if n != doomed.len() as u64 {
                *self.failed = true;
                return Err(Error::internal(
                    "delete_range: the count differs from the scan",
                ));
            }
            if let Some(sink) = self.undo.as_mut() {
                for (k, v) in doomed {
                    sink.key(k, v);
                }
            }
            return Ok((n, more));
        }
        Ok((self.delete_tree_range(start, end)?, None))
    }

    fn delete_tree_range(&mut self, start: Bound<Vec<u8>>, end: Bound<Vec<u8>>) -> Result<u64> {
        self.mutate(|w, _, t| {
            t.append_hint = None;
            t.put_hint.reset();
            t.last_key = None;
            btree::delete_range(w, &mut t.hdr, as_ref(&start), as_ref(&end))
        })
    }
}

/// A table opened in a write transaction. Each change asks the transaction for the table's
/// parts (`TableAccess`), so that a transaction whose writes outgrow their bound (a quarter
/// of the memory budget) turns to writing pages in the middle of a table's changes: what a
/// transaction holds in memory stays bounded whatever its size (docs/design/write-path.md,
/// "Memory and space: what is bounded").
pub struct WriteTable<'t> {
    txn: &'t mut (dyn TableAccess + 't),
    /// The table's slot in the writer's table states.
    slot: usize,
    /// Its number in the batch, if it was opened in a transaction committing through the log.
    id: Option<u64>,
}

impl std::fmt::Debug for WriteTable<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("WriteTable");
        if let Ok(n) = self.len() {
            d.field("entries", &n);
        }
        d.finish_non_exhaustive()
    }
}

impl<'t> WriteTable<'t> {
    pub(crate) fn new(
        txn: &'t mut (dyn TableAccess + 't),
        slot: usize,
        id: Option<u64>,
    ) -> WriteTable<'t> {
        WriteTable { txn, slot, id }
    }

    #[inline]
    fn parts(&mut self) -> Result<TableParts<'_>> {
        self.txn.parts(self.slot, self.id)
    }

    #[inline]
    fn view(&self) -> TableView<'_> {
        self.txn.view(self.slot, self.id)
    }

    /// Runs a change, then bounds what the transaction holds (`TableAccess::bound`).
    #[inline]
    fn change<T>(&mut self, f: impl FnOnce(&mut TableParts<'_>) -> Result<T>) -> Result<T> {
        let mut parts = self.parts()?;
        let r = f(&mut parts)?;
        if parts.over_bound() {
            self.txn.bound(self.slot)?;
        }
        Ok(r)
    }

    /// Inserts or replaces. Returns true if it replaced an existing value.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// let mut w = db.begin_write()?;
    /// w.create_table("t")?;
    /// let mut t = w.table("t")?;
    /// assert!(!t.put(b"k", b"1")?); // a new key
    /// assert!(t.put(b"k", b"2")?); // replaced the value
    /// assert_eq!(t.get(b"k")?, Some(&b"2"[..]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn put(&mut self, key: &[u8], value: &[u8]) -> Result<bool> {
        self.change(|p| p.put(key, value))
    }

    /// Inserts or replaces, without saying which: the write most engines' `put` is. In a
    /// logged database ([`crate::Options::log`]) this skips the tree lookup that
    /// [`WriteTable::put`] makes to answer whether the key was there (most of a one-put
    /// commit's time in a tree larger than the CPU's caches); the entry count then treats a
    /// key that neither this transaction nor the overlay has as new until a checkpoint or a
    /// call to `len` looks it up. Otherwise the same as `put`.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// let db = larchdb::Database::open(dir.path().join("db"), larchdb::Options::default().log(true))?;
    /// let mut w = db.begin_write()?;
    /// w.create_table("t")?;
    /// w.commit()?;
    /// for (k, v) in [(b"a", b"1"), (b"b", b"2"), (b"a", b"3")] {
    ///     let mut w = db.begin_write()?;
    ///     w.table("t")?.set(k, v)?;
    ///     w.commit()?;
    /// }
    /// let r = db.begin_read()?;
    /// let t = r.table("t")?;
    /// assert_eq!(t.get(b"a")?, Some(&b"3"[..]));
    /// assert_eq!(t.len()?, 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.change(|p| p.set(key, value))
    }

    /// Inserts a key that sorts after every key in the table (sequential loads): skips the
    /// search and splits full pages at their end, leaving them full. Fails with
    /// [`Error::AppendOutOfOrder`], changing nothing, if the key is not the greatest.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// let mut w = db.begin_write()?;
    /// w.create_table("t")?;
    /// let mut t = w.table("t")?;
    /// t.append(b"a", b"1")?;
    /// t.append(b"b", b"2")?;
    /// // A key not past the last one is refused, and nothing changes.
    /// assert!(matches!(t.append(b"b", b"3"), Err(larchdb::Error::AppendOutOfOrder)));
    /// assert!(matches!(t.append(b"a", b"3"), Err(larchdb::Error::AppendOutOfOrder)));
    /// assert_eq!(t.get(b"b")?, Some(&b"2"[..]));
    /// assert_eq!(t.len()?, 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn append(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.change(|p| p.append(key, value))
    }

    /// Deletes `key`. Returns true if it was present.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// let mut w = db.begin_write()?;
    /// w.create_table("t")?;
    /// let mut t = w.table("t")?;
    /// t.put(b"k", b"v")?;
    /// assert!(t.delete(b"k")?);
    /// assert!(!t.delete(b"k")?); // already gone
    /// assert_eq!(t.get(b"k")?, None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn delete(&mut self, key: &[u8]) -> Result<bool> {
        self.change(|p| p.delete(key))
    }

    /// Deletes every key in `range`. Returns how many it deleted.
    ///
    /// On a database without a log, the B-tree frees each subtree that lies inside the range
    /// whole (its pages, and its values' overflow pages) and edits only the nodes on the
    /// range's two edges: its cost follows the tree's depth and the number of pages freed,
    /// not a delete per key. In a logged database ([`crate::Options::log`]) the deletions
    /// are records of the log, one per key, until they outgrow what a transaction may hold
    /// ([`crate::CommitStats::switched_to_pages`]): the transaction then writes pages, as any
    /// large one does, and the rest of the range is deleted in the tree.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// let mut w = db.begin_write()?;
    /// w.create_table("t")?;
    /// let mut t = w.table("t")?;
    /// for i in 0u32..1000 {
    ///     t.put(&i.to_be_bytes(), b"v")?;
    /// }
    /// assert_eq!(t.delete_range(&100u32.to_be_bytes()[..]..&900u32.to_be_bytes()[..])?, 800);
    /// assert_eq!(t.len()?, 200);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn delete_range<K: AsRef<[u8]> + ?Sized, R: RangeBounds<K>>(
        &mut self,
        range: R,
    ) -> Result<u64> {
        let (mut from, end) = bounds(&range);
        let mut deleted = 0u64;
        loop {
            let (n, more) = self.change(|p| p.delete_range_chunk(from, end.clone()))?;
            deleted += n;
            match more {
                Some(k) => from = Bound::Excluded(k),
                None => return Ok(deleted),
            }
        }
    }

    /// Deletes every entry. Returns how many there were. The table stays (with its
    /// properties); [`crate::WriteTxn::delete_table`] removes it. Costs what
    /// [`WriteTable::delete_range`] of everything costs: the tree's pages are freed whole.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// let mut w = db.begin_write()?;
    /// w.create_table("t")?;
    /// let mut t = w.table("t")?;
    /// t.put(b"a", b"1")?;
    /// t.put(b"b", b"2")?;
    /// assert_eq!(t.clear()?, 2);
    /// assert!(t.is_empty()?);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn clear(&mut self) -> Result<u64> {
        self.delete_range::<[u8], _>(..)
    }

    /// Keeps only the entries for which `keep(key, value)` returns true, visiting them in
    /// key order. Returns how many it deleted. The deletions are made a chunk of keys at a
    /// time, so the memory it holds stays small whatever the table's size.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// let mut w = db.begin_write()?;
    /// w.create_table("t")?;
    /// let mut t = w.table("t")?;
    /// for i in 0u8..10 {
    ///     t.put(&[i], &[i % 3])?;
    /// }
    /// // Deletes the entries whose value is 0: keys 0, 3, 6 and 9.
    /// assert_eq!(t.retain(|_, v| v != [0])?, 4);
    /// assert_eq!(t.len()?, 6);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn retain(&mut self, mut keep: impl FnMut(&[u8], &[u8]) -> bool) -> Result<u64> {
        let mut from: Bound<Vec<u8>> = Bound::Unbounded;
        let mut deleted = 0u64;
        let mut doomed: Vec<Vec<u8>> = Vec::new();
        loop {
            doomed.clear();
            let mut next = None;
            for e in self.view().range_of(from, Bound::Unbounded, false) {
                let (k, v) = e?;
                if !keep(k, v) {
                    doomed.push(k.to_vec());
                }
                if doomed.len() == RANGE_CHUNK {
                    next = Some(k.to_vec());
                    break;
                }
            }
            for k in &doomed {
                if !self.delete(k)? {
                    return Err(Error::internal("retain: a key it saw is gone"));
                }
            }
            deleted += doomed.len() as u64;
            match next {
                Some(k) => from = Bound::Excluded(k),
                None => return Ok(deleted),
            }
        }
    }

    /// Removes the first entry and returns it.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// let mut w = db.begin_write()?;
    /// w.create_table("queue")?;
    /// let mut q = w.table("queue")?;
    /// q.put(b"1", b"first")?;
    /// q.put(b"2", b"second")?;
    /// assert_eq!(q.pop_first()?, Some((b"1".to_vec(), b"first".to_vec())));
    /// assert_eq!(q.len()?, 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn pop_first(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        let e = self.first()?.map(|(k, v)| (k.to_vec(), v.to_vec()));
        self.pop(e)
    }

    /// Removes the last entry and returns it.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// let mut w = db.begin_write()?;
    /// w.create_table("stack")?;
    /// let mut s = w.table("stack")?;
    /// s.put(b"1", b"bottom")?;
    /// s.put(b"2", b"top")?;
    /// assert_eq!(s.pop_last()?, Some((b"2".to_vec(), b"top".to_vec())));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn pop_last(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        let e = self.last()?.map(|(k, v)| (k.to_vec(), v.to_vec()));
        self.pop(e)
    }

    fn pop(&mut self, e: Option<(Vec<u8>, Vec<u8>)>) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        if let Some((k, _)) = &e {
            if !self.delete(k)? {
                return Err(Error::internal("pop: the entry it read is gone"));
            }
        }
        Ok(e)
    }

    /// The value of `key`, as this transaction sees it.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// # let mut w = db.begin_write()?;
    /// # w.create_table("t")?;
    /// # w.table("t")?.put(b"k", b"old")?;
    /// # w.commit()?;
    /// let r = db.begin_read()?;
    /// let mut w = db.begin_write()?;
    /// let mut t = w.table("t")?;
    /// t.put(b"k", b"new")?;
    /// // The transaction sees its own write before it commits; an earlier reader does not.
    /// assert_eq!(t.get(b"k")?, Some(&b"new"[..]));
    /// assert_eq!(r.table("t")?.get(b"k")?, Some(&b"old"[..]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn get(&self, key: &[u8]) -> Result<Option<&[u8]>> {
        self.view().get(key)
    }

    /// The first entry.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// let mut w = db.begin_write()?;
    /// w.create_table("t")?;
    /// let mut t = w.table("t")?;
    /// t.put(b"b", b"2")?;
    /// t.put(b"a", b"1")?;
    /// assert_eq!(t.first()?, Some((&b"a"[..], &b"1"[..])));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn first(&self) -> Result<Option<Entry<'_>>> {
        self.view().edge(Edge::First)
    }

    /// The last entry.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// let mut w = db.begin_write()?;
    /// w.create_table("t")?;
    /// let mut t = w.table("t")?;
    /// t.put(b"b", b"2")?;
    /// t.put(b"a", b"1")?;
    /// assert_eq!(t.last()?, Some((&b"b"[..], &b"2"[..])));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn last(&self) -> Result<Option<Entry<'_>>> {
        self.view().edge(Edge::Last)
    }

    /// The first entry whose key is >= `key`.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// let mut w = db.begin_write()?;
    /// w.create_table("t")?;
    /// let mut t = w.table("t")?;
    /// t.put(b"a", b"1")?;
    /// t.put(b"c", b"3")?;
    /// assert_eq!(t.seek(b"b")?, Some((&b"c"[..], &b"3"[..])));
    /// assert_eq!(t.seek(b"d")?, None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn seek(&self, key: &[u8]) -> Result<Option<Entry<'_>>> {
        self.view().edge(Edge::Seek(key))
    }

    /// Entries with keys in `range`, ascending.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// let mut w = db.begin_write()?;
    /// w.create_table("t")?;
    /// let mut t = w.table("t")?;
    /// for k in [b"a", b"b", b"c", b"d"] {
    ///     t.put(k, b"")?;
    /// }
    /// let keys: Vec<&[u8]> = t.range(&b"b"[..]..&b"d"[..]).map(|e| e.map(|(k, _)| k)).collect::<Result<_, _>>()?;
    /// assert_eq!(keys, [&b"b"[..], b"c"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn range<K: AsRef<[u8]> + ?Sized, R: RangeBounds<K>>(&self, range: R) -> Range<'_> {
        let (s, e) = bounds(&range);
        self.view().range_of(s, e, false)
    }

    /// Entries with keys in `range`, descending.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// let mut w = db.begin_write()?;
    /// w.create_table("t")?;
    /// let mut t = w.table("t")?;
    /// for k in [b"a", b"b", b"c", b"d"] {
    ///     t.put(k, b"")?;
    /// }
    /// let keys: Vec<&[u8]> = t.range_rev(&b"a"[..]..=&b"c"[..]).map(|e| e.map(|(k, _)| k)).collect::<Result<_, _>>()?;
    /// assert_eq!(keys, [&b"c"[..], b"b", b"a"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn range_rev<K: AsRef<[u8]> + ?Sized, R: RangeBounds<K>>(&self, range: R) -> Range<'_> {
        let (s, e) = bounds(&range);
        self.view().range_of(s, e, true)
    }

    /// Entries whose keys start with `prefix`, ascending, as this transaction sees them
    /// (its own writes included).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// let mut w = db.begin_write()?;
    /// w.create_table("t")?;
    /// let mut t = w.table("t")?;
    /// for k in [&b"a/1"[..], b"a/2", b"b/1"] {
    ///     t.put(k, b"")?;
    /// }
    /// assert_eq!(t.prefix(b"a/").count(), 2);
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn prefix(&self, prefix: &[u8]) -> Range<'_> {
        let (s, e) = prefix_bounds(prefix);
        self.view().range_of(s, e, false)
    }

    /// Entries whose keys start with `prefix`, descending, as this transaction sees them.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// let mut w = db.begin_write()?;
    /// w.create_table("t")?;
    /// let mut t = w.table("t")?;
    /// for k in [&b"a/1"[..], b"a/2", b"b/1"] {
    ///     t.put(k, b"")?;
    /// }
    /// let first = t.prefix_rev(b"a/").next().transpose()?.map(|(k, _)| k.to_vec());
    /// assert_eq!(first.as_deref(), Some(&b"a/2"[..]));
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn prefix_rev(&self, prefix: &[u8]) -> Range<'_> {
        let (s, e) = prefix_bounds(prefix);
        self.view().range_of(s, e, true)
    }

    /// All entries, ascending.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// let mut w = db.begin_write()?;
    /// w.create_table("t")?;
    /// let mut t = w.table("t")?;
    /// for k in [b"c", b"a", b"b"] {
    ///     t.put(k, b"")?;
    /// }
    /// let keys: Vec<&[u8]> = t.iter().map(|e| e.map(|(k, _)| k)).collect::<Result<_, _>>()?;
    /// assert_eq!(keys, [&b"a"[..], b"b", b"c"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn iter(&self) -> Range<'_> {
        self.view()
            .range_of(Bound::Unbounded, Bound::Unbounded, false)
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
        self.view()
            .range_of(Bound::Unbounded, Bound::Unbounded, true)
    }

    /// Number of entries, as this transaction sees them (see [`ReadTable::len`] for what
    /// blind writes cost it).
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// let mut w = db.begin_write()?;
    /// w.create_table("t")?;
    /// let mut t = w.table("t")?;
    /// t.put(b"a", b"1")?;
    /// t.put(b"b", b"2")?;
    /// t.put(b"a", b"3")?; // replaces: still two entries
    /// assert_eq!(t.len()?, 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn len(&self) -> Result<u64> {
        self.view().len()
    }

    /// True if the table has no entries (see [`WriteTable::len`]).
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// let mut w = db.begin_write()?;
    /// w.create_table("t")?;
    /// let mut t = w.table("t")?;
    /// assert!(t.is_empty()?);
    /// t.put(b"k", b"v")?;
    /// assert!(!t.is_empty()?);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }
}

impl TableAccess for Txn<'_> {
    #[inline]
    fn parts(&mut self, slot: usize, id: Option<u64>) -> Result<TableParts<'_>> {
        let ws = &mut *self.guard;
        let (name, state) = ws.tables.at_mut(slot).ok_or(Error::TxnFailed)?;
        let pages = match self.pages.as_deref_mut() {
            Some(p) => TablePages::Write(p),
            None => TablePages::Read(&self.base.snap),
        };
        let logged = match (self.logged, id) {
            (true, Some(table)) => Some(Logged {
                batch: &mut ws.batch,
                overlays: self.base.overlays(),
                table,
                txn: self.base.txn(),
                bound: self.shared.batch_bytes_max,
            }),
            (true, None) => return Err(Error::internal("a logged table without its number")),
            (false, _) => None,
        };
        let undo = ws.savepoints.active().then(|| UndoSink {
            log: &mut ws.savepoints.undo,
            table: name.into(),
        });
        Ok(TableParts::new(
            pages,
            state,
            &mut ws.scratch,
            &mut self.failed,
            logged,
            undo,
        ))
    }

    #[inline]
    fn view(&self, slot: usize, id: Option<u64>) -> TableView<'_> {
        let Some(state) = self.guard.tables.at(slot) else {
            return TableView::failed(&self.base.snap);
        };
        let logged = match (self.logged, id) {
            (true, Some(table)) => Some(LoggedView {
                batch: &self.guard.batch,
                overlays: self.base.overlays(),
                table,
                txn: self.base.txn(),
            }),
            (true, None) => return TableView::failed(&self.base.snap),
            (false, _) => None,
        };
        TableView {
            pages: match self.pages.as_deref() {
                Some(p) => TableSource::Write(p),
                None => TableSource::Read(&self.base.snap),
            },
            hdr: state.hdr,
            logged,
            failed: false,
        }
    }

    fn bound(&mut self, slot: usize) -> Result<()> {
        if !self.logged || self.guard.batch.bytes() <= self.shared.batch_bytes_max {
            return Ok(());
        }
        let name = self.guard.tables.name_of(slot).map(str::to_owned);
        // The change that called this is in the batch already: a failure here fails the
        // transaction (`guarded`), never leaves it going on with that change unsaid.
        self.guarded(|t| {
            let name = name.ok_or_else(|| Error::internal("a table's slot without a name"))?;
            t.switch_to_pages()?;
            // The table is opened again on the tree the batch was applied to, in the same slot.
            if t.load_state(&name)? != slot {
                return Err(Error::internal("a table opened again in another slot"));
            }
            Counters::add(&t.shared.counters.switched_to_pages);
            Ok(())
        })
    }
}
