//! The read transaction.

use crate::engine::catalog::{self, check_name};
use crate::engine::published::Published;
use crate::engine::readers::{reader_thread, SHAPE_NONE};
use crate::engine::upper::Upper;
use crate::engine::Shared;
use crate::error::{Error, Result};
use crate::pager::{Snapshot, TableHeader};
use crate::table::ReadTable;
use crate::typed::table::check_types;
use crate::typed::{Key, TableDefinition, TypedReadTable, Value};
use std::sync::Arc;

/// A read transaction: a consistent snapshot of the whole database, as of the newest commit
/// when it began. `Send + Sync`: it can be moved to, kept on, and shared between threads.
/// While it lives, no page it can reach is reused. Values it returns are borrowed from it.
pub struct ReadTxn {
    shared: Arc<Shared>,
    snap: Arc<Published>,
    /// The commit this transaction sees: `snap`'s, or a later one of the same shape (same
    /// tree and overlays), which `renew` moves to without taking a new snapshot.
    txn: u64,
    /// `snap`'s shape (`ReadState::shape`), or `SHAPE_NONE`.
    shape: u64,
    /// The thread that began it (`readers::reader_thread`), which it counts for.
    thread: u64,
}

/// Shows the commit it reads (its id). The transactions and tables print what identifies
/// them:
///
/// ```
/// # let dir = tempfile::tempdir()?;
/// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
/// let mut w = db.begin_write()?;
/// let id = w.id();
/// assert_eq!(format!("{w:?}"), format!("WriteTxn {{ id: {id}, durability: Immediate }}"));
/// w.default_table()?.put(b"k", b"v")?;
/// assert_eq!(format!("{:?}", w.default_table()?), "WriteTable { entries: 1, .. }");
/// w.commit()?;
/// let r = db.begin_read()?;
/// assert_eq!(format!("{r:?}"), format!("ReadTxn {{ id: {id} }}"));
/// assert_eq!(format!("{:?}", r.default_table()?), "ReadTable { entries: 1, .. }");
/// # Ok::<(), larchdb::Error>(())
/// ```
impl std::fmt::Debug for ReadTxn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadTxn").field("id", &self.txn).finish()
    }
}

impl ReadTxn {
    pub(crate) fn new(shared: Arc<Shared>) -> Result<ReadTxn> {
        let thread = reader_thread();
        let (snap, shape) = shared.register_reader(thread)?;
        Ok(ReadTxn {
            shared,
            txn: snap.txn(),
            snap,
            shape,
            thread,
        })
    }

    /// A read transaction on `snap`, registered (`Shared::register_reader_on`).
    pub(crate) fn on(shared: Arc<Shared>, snap: Arc<Published>) -> ReadTxn {
        let thread = reader_thread();
        shared.register_reader_on(&snap, thread);
        ReadTxn {
            shared,
            txn: snap.txn(),
            snap,
            shape: SHAPE_NONE,
            thread,
        }
    }

    pub(crate) fn snapshot(&self) -> &Snapshot {
        &self.snap.snap
    }

    /// The snapshot with its overlays.
    pub(crate) fn published(&self) -> &Published {
        &self.snap
    }

    /// Moves this transaction to the newest committed snapshot, like LMDB's
    /// `mdb_txn_reset` + `mdb_txn_renew`. Costs two atomic loads when nothing was committed
    /// since, or when the commits since went through the log into the overlay this
    /// transaction already reads (it then reads up to the newest of them); otherwise (a
    /// checkpoint's new tree, a new overlay) the same short registration as `begin_read`. On
    /// a read-only handle beside a writer in another process, if the newest snapshot cannot
    /// be read (an I/O error), the transaction stays on its current snapshot, which remains
    /// valid. After its [`crate::Database`] is dropped, it stays where it is.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// let mut r = db.begin_read()?;
    /// let before = r.id();
    /// db.put(b"k", b"v")?;
    /// assert_eq!(r.default_table()?.get(b"k")?, None);
    /// r.renew();
    /// assert!(r.id() > before);
    /// assert_eq!(r.default_table()?.get(b"k")?, Some(&b"v"[..]));
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn renew(&mut self) {
        if self
            .shared
            .retired
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            // The handle moved to another state (a writer in another process took the file,
            // or this handle took it back): the newest snapshot is there.
            if let Some(next) = self.shared.successor().and_then(|s| ReadTxn::new(s).ok()) {
                *self = next;
            }
            return;
        }
        if let Some(txn) = self.shared.txn_in_shape(self.shape) {
            // Commits go only forward; the check keeps a stale load from moving back.
            self.txn = self.txn.max(txn);
            return;
        }
        if !self.shared.newer_than(&self.snap, self.txn) {
            return;
        }
        if let Some((snap, shape)) = self.shared.renew_reader(&self.snap, self.txn) {
            self.txn = snap.txn();
            self.shape = shape;
            // The old snapshot (and possibly its mapping) is released outside the lock, and
            // a merged overlay it was the last to hold off this thread.
            crate::engine::commit::retire(&self.shared, std::mem::replace(&mut self.snap, snap));
        }
    }

    /// Id of the commit this transaction sees.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// let before = db.begin_read()?.id();
    /// db.put(b"k", b"v")?;
    /// assert_eq!(db.begin_read()?.id(), before + 1);
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn id(&self) -> u64 {
        self.txn
    }

    /// Opens a table for reading.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// # let mut w = db.begin_write()?;
    /// # w.create_table("t")?;
    /// # w.table("t")?.put(b"k", b"v")?;
    /// # w.commit()?;
    /// let r = db.begin_read()?;
    /// assert_eq!(r.table("t")?.get(b"k")?, Some(&b"v"[..]));
    /// assert!(matches!(r.table("missing"), Err(larchdb::Error::TableNotFound(_))));
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn table(&self, name: &str) -> Result<ReadTable<'_>> {
        check_name(name)?;
        let snap = &self.snap.snap;
        let found = match self.snap.catalog.entries(snap) {
            Some(list) => list
                .iter()
                .find(|(n, _)| &n[..] == name.as_bytes())
                .map(|(_, hdr)| *hdr),
            None => catalog::lookup(&**snap, &snap.meta.catalog, name)?.map(|(hdr, _)| hdr),
        };
        let Some(hdr) = found else {
            return Err(Error::TableNotFound(name.to_string()));
        };
        if !self.snap.has_overlay() {
            return Ok(ReadTable::new(snap, hdr));
        }
        let overlays = self.snap.overlays();
        // Commits since the tree's are in the overlay: the table's number there, and its
        // entry count at this snapshot.
        let txn = self.txn;
        let id = self.snap.catalog.table_id(snap, name.as_bytes())?;
        let id = id.ok_or_else(|| Error::Internal(format!("table {name} has no number")))?;
        let upper = Upper::new(overlays, None, id, txn);
        Ok(ReadTable::layered(snap, hdr, upper))
    }

    /// The default table ([`crate::DEFAULT_TABLE`]): the one [`crate::Database::get`] reads.
    /// Empty if it was never written.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// assert!(db.begin_read()?.default_table()?.is_empty()?);
    /// db.put(b"k", b"v")?;
    /// assert_eq!(db.begin_read()?.default_table()?.get(b"k")?, Some(&b"v"[..]));
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn default_table(&self) -> Result<ReadTable<'_>> {
        match self.table(crate::DEFAULT_TABLE) {
            Err(Error::TableNotFound(_)) => {
                Ok(ReadTable::new(&self.snap.snap, TableHeader::default()))
            }
            r => r,
        }
    }

    /// Opens a typed table for reading (see [`crate::typed`]). [`Error::TableNotFound`] if it
    /// does not exist; [`Error::TableTypeMismatch`] if it was created with other types.
    ///
    /// ```
    /// use larchdb::TableDefinition;
    /// const COUNTS: TableDefinition<&str, u64> = TableDefinition::new("counts");
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// let mut w = db.begin_write()?;
    /// w.open_table(COUNTS)?.put("apples", 3)?;
    /// w.commit()?;
    /// let r = db.begin_read()?;
    /// assert_eq!(r.open_table(COUNTS)?.get("apples")?, Some(3));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open_table<K: Key + 'static, V: Value + 'static>(
        &self,
        definition: TableDefinition<'_, K, V>,
    ) -> Result<TypedReadTable<'_, K, V>> {
        let name = definition.name();
        check_types::<K, V>(name, self.table_properties(name)?)?;
        Ok(TypedReadTable::new(self.table(name)?))
    }

    /// Names of all tables, sorted.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// let mut w = db.begin_write()?;
    /// w.create_table("b")?;
    /// w.create_table("a")?;
    /// w.commit()?;
    /// assert_eq!(db.begin_read()?.list_tables()?, ["a", "b"]);
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn list_tables(&self) -> Result<Vec<String>> {
        catalog::list(&*self.snap.snap, self.snap.snap.meta.catalog)
    }

    /// The properties of a table, as set by [`crate::WriteTxn::set_table_properties`]: opaque
    /// bytes of the application's, empty if never set.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// let mut w = db.begin_write()?;
    /// w.create_table("t")?;
    /// w.create_table("plain")?;
    /// w.set_table_properties("t", b"schema=2")?;
    /// w.commit()?;
    /// let r = db.begin_read()?;
    /// assert_eq!(r.table_properties("t")?, b"schema=2");
    /// assert!(r.table_properties("plain")?.is_empty());
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn table_properties(&self, name: &str) -> Result<&[u8]> {
        check_name(name)?;
        match catalog::lookup(&*self.snap.snap, &self.snap.snap.meta.catalog, name)? {
            Some((_, value)) => Ok(TableHeader::properties(value)),
            None => Err(Error::TableNotFound(name.to_string())),
        }
    }
}

impl Drop for ReadTxn {
    fn drop(&mut self) {
        let mut rs = self.shared.read_state();
        self.shared
            .unregister_reader(&mut rs, self.snap.tree_txn(), self.thread);
    }
}
