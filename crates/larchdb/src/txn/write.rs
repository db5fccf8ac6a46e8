//! The write transaction.

use crate::btree;
use crate::engine::catalog::{self, check_name};
use crate::engine::readers::reader_thread;
use crate::engine::savepoint::{Savepoint, Undo};
use crate::engine::txn::Txn;
use crate::engine::{Counters, Shared};
use crate::error::{Error, Result};
use crate::limits::TABLE_PROPERTIES_BYTES_MAX;
use crate::options::Durability;
use crate::pager::TableHeader;
use crate::table::WriteTable;
use crate::txn::ReadTxn;
use crate::typed::table::{check_types, type_record};
use crate::typed::{Key, TableDefinition, TypedWriteTable, Value};
use std::marker::PhantomData;
use std::ops::Bound;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// The write transaction. Only one exists at a time per database; readers are not blocked.
/// Dropping it without `commit` aborts it: nothing it did becomes visible.
///
/// On a handle that writes the log (`Options::log`), a transaction starts *logged*: its writes
/// are kept in the writer's batch and its commit appends them to the log and the overlay,
/// leaving the tree alone. A change of the catalog (creating or deleting a table, setting its
/// properties) or a batch too large for the log turns it into a transaction that writes pages:
/// it first applies the overlay's records and its own batch to the tree (a checkpoint), and
/// its commit writes pages and a meta page as without a log (docs/design/write-path.md).
///
/// **Not `Send`**: it holds the guard of the writer's mutex (`std::sync::MutexGuard`), which
/// must be released by the thread that took it (POSIX mutexes require it), and it borrows the
/// `Database`. Moving it to another thread is a compile error that names
/// `WriteTxnStaysOnTheThreadThatBeganIt` beside the guard. A transaction lives on the thread that began it. In an async runtime, run the
/// whole transaction (begin, writes, commit) in one blocking task, such as tokio's
/// `spawn_blocking` with an `Arc<Database>`; [`crate::ReadTxn`] is `Send + Sync` and owns
/// what it needs, so readers can move freely.
///
/// ```compile_fail
/// # let dir = tempfile::tempdir().unwrap();
/// let db = larchdb::Database::open(dir.path().join("db"), Default::default()).unwrap();
/// let w = db.begin_write().unwrap();
/// std::thread::scope(|s| {
///     s.spawn(move || w.commit()); // error: WriteTxnStaysOnTheThreadThatBeganIt, MutexGuard
/// });
/// ```
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// let db = std::sync::Arc::new(larchdb::Database::open(dir.path().join("db"), Default::default())?);
/// let db2 = db.clone();
/// // The whole transaction on another thread, as spawn_blocking would run it.
/// std::thread::spawn(move || -> larchdb::Result<()> {
///     let mut w = db2.begin_write()?;
///     w.default_table()?.put(b"k", b"v")?;
///     w.commit()
/// })
/// .join()
/// .unwrap()?;
/// assert_eq!(db.get(b"k")?, Some(b"v".to_vec()));
/// # Ok::<(), larchdb::Error>(())
/// ```
pub struct WriteTxn<'db> {
    /// Names why the compiler refuses to move it to another thread (see above): the first
    /// field, so that the error reports it before the mutex guard.
    _stays_on_its_thread: WriteTxnStaysOnTheThreadThatBeganIt,
    /// The transaction below the API: the write lock, its pages or batch, its commit.
    t: Txn<'db>,
    /// What `commit` asks for: `Options::durability`.
    durability: Durability,
    /// This thread writes this database while the transaction lives.
    _writing: ThisThreadWrites<'db>,
    /// The state `t` and `_writing` borrow: dropped after them (the last field).
    _keep: Keep,
}

/// The state (`engine::Shared`) a write transaction begun by `Database::begin_write` borrows,
/// kept alive by the transaction itself: the handle may move on to another state meanwhile
/// (`engine::owner`), and the one it was on then lives as long as something holds it.
pub(crate) struct Keep(*mut Arc<Shared>);

impl Keep {
    pub(crate) fn new(shared: Arc<Shared>) -> Keep {
        Keep(Box::into_raw(Box::new(shared)))
    }

    /// The state, borrowed for as long as the caller chooses.
    ///
    /// # Safety
    /// Nothing borrowed through the reference may be used after `self` is dropped.
    pub(crate) unsafe fn get<'a>(&self) -> &'a Arc<Shared> {
        // SAFETY: `self.0` came from `Box::into_raw` and is freed only by the drop; the caller
        // keeps the borrow within `self`'s life.
        unsafe { &*self.0 }
    }
}

impl Drop for Keep {
    fn drop(&mut self) {
        // SAFETY: `self.0` came from `Box::into_raw` in `new` and is freed only here.
        drop(unsafe { Box::from_raw(self.0) });
    }
}

// SAFETY: a `Keep` only hands out shared references to an `Arc<Shared>`, which is `Sync`.
unsafe impl Sync for Keep {}

/// Not `Send`: what the compiler names when a [`WriteTxn`] is moved to another thread. The
/// transaction holds the writer's mutex guard, which the thread that took it must release;
/// run the whole transaction on one thread (in an async runtime, one `spawn_blocking` task).
struct WriteTxnStaysOnTheThreadThatBeganIt(PhantomData<*const ()>);

/// Marks the database's write transaction as this thread's while it lives
/// (`Shared::writing_thread`). One write transaction is open per database at a time, so one
/// slot holds it; the mark is cleared only if it is still this transaction's, from whatever
/// thread drops it (the Python package may drop one elsewhere).
pub(crate) struct ThisThreadWrites<'db> {
    shared: &'db Shared,
    thread: u64,
}

impl<'db> ThisThreadWrites<'db> {
    /// Whether the calling thread has the write transaction of `shared` open.
    pub(crate) fn writing(shared: &Shared) -> bool {
        shared.writing_thread.load(Ordering::Acquire) == reader_thread()
    }

    fn new(shared: &'db Shared) -> ThisThreadWrites<'db> {
        let thread = reader_thread();
        shared.writing_thread.store(thread, Ordering::Release);
        ThisThreadWrites { shared, thread }
    }
}

impl Drop for ThisThreadWrites<'_> {
    fn drop(&mut self) {
        let _ = self.shared.writing_thread.compare_exchange(
            self.thread,
            0,
            Ordering::AcqRel,
            Ordering::Relaxed,
        );
    }
}

impl std::fmt::Debug for WriteTxn<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteTxn")
            .field("id", &self.id())
            .field("durability", &self.durability)
            .finish()
    }
}

impl<'db> WriteTxn<'db> {
    /// The API's face of `t`, begun by `Database::begin_write`.
    /// `t` borrows the state `keep` holds.
    pub(crate) fn on(t: Txn<'db>, keep: Keep) -> WriteTxn<'db> {
        let durability = t.shared.options.durability;
        let _writing = ThisThreadWrites::new(t.shared);
        WriteTxn {
            _stays_on_its_thread: WriteTxnStaysOnTheThreadThatBeganIt(PhantomData),
            t,
            durability,
            _writing,
            _keep: keep,
        }
    }

    /// Id this transaction's commit will have. On a handle whose checkpoints run on a thread
    /// of their own, a logged transaction that turns to writing pages (it creates or deletes a
    /// table, sets properties, or its batch does not fit the log) first waits for a running
    /// checkpoint, and may then be given a later id: the checkpoint's correction of entry
    /// counts is a commit of its own.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// let before = db.begin_read()?.id();
    /// let mut w = db.begin_write()?;
    /// assert_eq!(w.id(), before + 1);
    /// w.default_table()?.put(b"k", b"v")?;
    /// w.commit()?;
    /// assert_eq!(db.begin_read()?.id(), before + 1);
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn id(&self) -> u64 {
        self.t.base.txn() + 1
    }

    /// The properties of table `name` as this transaction sees them (set by
    /// [`WriteTxn::set_table_properties`], here or in an earlier commit); empty if never set.
    /// [`Error::TableNotFound`] if there is no such table.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// let mut w = db.begin_write()?;
    /// w.create_table("t")?;
    /// assert_eq!(w.table_properties("t")?, b"");
    /// w.set_table_properties("t", b"schema=3")?;
    /// assert_eq!(w.table_properties("t")?, b"schema=3");
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn table_properties(&mut self, name: &str) -> Result<Vec<u8>> {
        check_name(name)?;
        if self.t.failed {
            return Err(Error::TxnFailed);
        }
        self.t.load_state(name)?;
        let state = self.t.guard.tables.get(name).ok_or(Error::TxnFailed)?;
        Ok(state.props.clone())
    }

    /// Sets the properties of table `name`: up to
    /// [`crate::limits::TABLE_PROPERTIES_BYTES_MAX`] bytes the application attaches to the
    /// table, stored in its catalog entry, kept until set again or the table is deleted, and
    /// read with [`ReadTxn::table_properties`]. The engine does not interpret them (the
    /// `larch` tool keeps there the dump header lines it cannot use, to write them back).
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// let mut w = db.begin_write()?;
    /// w.create_table("t")?;
    /// w.set_table_properties("t", b"schema=2")?;
    /// w.commit()?;
    /// assert_eq!(db.begin_read()?.table_properties("t")?, b"schema=2");
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn set_table_properties(&mut self, name: &str, props: &[u8]) -> Result<()> {
        check_name(name)?;
        if props.len() > TABLE_PROPERTIES_BYTES_MAX {
            return Err(Error::ValueTooLarge {
                len: props.len(),
                max: TABLE_PROPERTIES_BYTES_MAX,
            });
        }
        if self.t.failed {
            return Err(Error::TxnFailed);
        }
        self.t.load_state(name)?;
        let unchanged = self
            .t
            .guard
            .tables
            .get(name)
            .is_some_and(|s| s.props == props);
        if unchanged {
            return Ok(());
        }
        self.t.switch_to_pages()?;
        self.t.load_state(name)?;
        let state = self.t.guard.tables.get_mut(name).ok_or(Error::TxnFailed)?;
        if state.props != props {
            let old = std::mem::replace(&mut state.props, props.to_vec());
            state.dirty = true;
            if self.t.guard.savepoints.active() {
                self.t.guard.savepoints.undo.push(Undo::Props {
                    table: name.to_string(),
                    old,
                });
            }
        }
        Ok(())
    }

    /// Creates an empty table. Fails with [`Error::TableExists`] if the name is taken.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// let mut w = db.begin_write()?;
    /// w.create_table("t")?;
    /// assert!(matches!(w.create_table("t"), Err(larchdb::Error::TableExists(_))));
    /// w.commit()?;
    /// assert!(db.begin_read()?.table("t")?.is_empty()?);
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn create_table(&mut self, name: &str) -> Result<()> {
        check_name(name)?;
        if self.t.lookup(name)?.is_some() {
            return Err(Error::TableExists(name.to_string()));
        }
        self.t.switch_to_pages()?;
        self.t.guarded(|t| {
            let mut catalog = t.catalog;
            let (pages, ws) = t.parts()?;
            btree::put(
                pages,
                &mut ws.scratch,
                &mut catalog,
                name.as_bytes(),
                &TableHeader::default().encode(),
                None,
            )?;
            ws.tables.open(name, TableHeader::default(), &[]);
            t.catalog = catalog;
            if t.guard.savepoints.active() {
                t.guard
                    .savepoints
                    .undo
                    .push(Undo::Created(name.to_string()));
            }
            Ok(())
        })
    }

    /// Creates the table if it does not exist. Returns true if it created it.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// let mut w = db.begin_write()?;
    /// assert!(w.ensure_table("t")?);
    /// assert!(!w.ensure_table("t")?);
    /// assert_eq!(w.list_tables()?, ["t"]);
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn ensure_table(&mut self, name: &str) -> Result<bool> {
        check_name(name)?;
        if self.t.lookup(name)?.is_some() {
            return Ok(false);
        }
        self.create_table(name)?;
        Ok(true)
    }

    /// Opens a table for reading and writing.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// let mut w = db.begin_write()?;
    /// w.create_table("t")?;
    /// let mut t = w.table("t")?;
    /// t.put(b"k", b"v")?;
    /// assert_eq!(t.get(b"k")?, Some(&b"v"[..]));
    /// assert!(matches!(w.table("missing"), Err(larchdb::Error::TableNotFound(_))));
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn table(&mut self, name: &str) -> Result<WriteTable<'_>> {
        check_name(name)?;
        let slot = self.t.load_state(name)?;
        if self.t.failed {
            return Err(Error::TxnFailed);
        }
        let id = if self.t.logged {
            let b = &self.t.base;
            let id = b.catalog.table_id(&b.snap, name.as_bytes())?;
            Some(id.ok_or_else(|| Error::TableNotFound(name.to_string()))?)
        } else {
            None
        };
        Ok(WriteTable::new(&mut self.t, slot, id))
    }

    /// Opens a typed table for reading and writing (see [`crate::typed`]), creating it if it
    /// does not exist; a table it creates records the names of the types' encodings, and
    /// opening it with other types later is [`Error::TableTypeMismatch`]. (Creating a table
    /// makes this transaction commit by writing pages, as [`WriteTxn::create_table`] does.)
    ///
    /// ```
    /// use larchdb::TableDefinition;
    /// const EVENTS: TableDefinition<u64, &str> = TableDefinition::new("events");
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// let mut w = db.begin_write()?;
    /// let mut events = w.open_table(EVENTS)?;
    /// events.put(1, "started")?;
    /// events.put(2, "stopped")?;
    /// assert_eq!(events.last()?, Some((2, "stopped")));
    /// w.commit()?;
    ///
    /// const WRONG: TableDefinition<u64, u64> = TableDefinition::new("events");
    /// let mut w = db.begin_write()?;
    /// assert!(matches!(w.open_table(WRONG), Err(larchdb::Error::TableTypeMismatch { .. })));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open_table<K: Key + 'static, V: Value + 'static>(
        &mut self,
        definition: TableDefinition<'_, K, V>,
    ) -> Result<TypedWriteTable<'_, K, V>> {
        let name = definition.name();
        if self.ensure_table(name)? {
            self.set_table_properties(name, &type_record::<K, V>())?;
        } else {
            self.t.load_state(name)?;
            let state = self.t.guard.tables.get(name).ok_or(Error::TxnFailed)?;
            check_types::<K, V>(name, &state.props)?;
        }
        Ok(TypedWriteTable::new(self.table(name)?))
    }

    /// The default table ([`crate::DEFAULT_TABLE`]), created if it does not exist.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// let mut w = db.begin_write()?;
    /// w.default_table()?.put(b"k", b"v")?;
    /// w.commit()?;
    /// assert_eq!(db.get(b"k")?, Some(b"v".to_vec()));
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn default_table(&mut self) -> Result<WriteTable<'_>> {
        self.ensure_table(crate::DEFAULT_TABLE)?;
        self.table(crate::DEFAULT_TABLE)
    }

    /// A read transaction on the commit this transaction started from: what it sees does not
    /// include this transaction's writes, and it lives on after the commit or abort. It does
    /// not borrow the transaction, so a table read through it can be scanned while tables of
    /// this transaction are written, as when copying one table into another. (A transaction
    /// opens one table at a time for writing: its tables share the transaction's pages and
    /// batch, which a write may move, and values are returned without a copy.)
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// # let mut w = db.begin_write()?;
    /// # w.create_table("a")?;
    /// # w.table("a")?.put(b"k", b"v")?;
    /// # w.commit()?;
    /// let mut w = db.begin_write()?;
    /// w.create_table("b")?;
    /// let base = w.read_base();
    /// let a = base.table("a")?;
    /// let mut b = w.table("b")?;
    /// for entry in a.iter() {
    ///     let (k, v) = entry?;
    ///     b.put(k, v)?;
    /// }
    /// w.commit()?;
    /// assert_eq!(db.begin_read()?.table("b")?.get(b"k")?, Some(&b"v"[..]));
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn read_base(&self) -> ReadTxn {
        ReadTxn::on(self.t.shared.clone(), self.t.base.clone())
    }

    /// Deletes a table and frees its pages. Returns false if it did not exist.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// # let mut w = db.begin_write()?;
    /// # w.create_table("t")?;
    /// # w.commit()?;
    /// let mut w = db.begin_write()?;
    /// assert!(w.delete_table("t")?);
    /// assert!(!w.delete_table("t")?);
    /// w.commit()?;
    /// assert!(db.begin_read()?.list_tables()?.is_empty());
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn delete_table(&mut self, name: &str) -> Result<bool> {
        check_name(name)?;
        if self.t.lookup(name)?.is_none() {
            return Ok(false);
        }
        self.t.switch_to_pages()?;
        let Some(hdr) = self.t.lookup(name)? else {
            return Ok(false);
        };
        // A savepoint keeps the table's entries and properties, to make it again: the
        // entries as `Key` records, a chunk at a time within the undo log's bound, then the
        // table's own record. A failure fails the transaction: the records made so far
        // would undo a deletion that did not happen.
        if self.t.guard.savepoints.active() {
            let r = self.record_deleted_table(name);
            if r.is_err() {
                self.t.failed = true;
            }
            r?;
        }
        self.t.guarded(|t| {
            let mut catalog = t.catalog;
            let pages = t.pages()?;
            btree::free_tree(pages, &hdr)?;
            btree::delete(pages, &mut catalog, name.as_bytes())?;
            t.catalog = catalog;
            t.guard.tables.remove(name);
            Ok(true)
        })
    }

    /// The undo records of the deletion of table `name` (`delete_table`, a savepoint live).
    fn record_deleted_table(&mut self, name: &str) -> Result<()> {
        self.t.load_state(name)?;
        let props = self.t.guard.tables.get(name).map(|s| s.props.clone());
        let table: std::sync::Arc<str> = name.into();
        let mut from: Bound<Vec<u8>> = Bound::Unbounded;
        loop {
            self.t.guard.savepoints.undo.make_room()?;
            let mut chunk = Vec::new();
            let mut bytes = 0;
            for e in self
                .table(name)?
                .range::<Vec<u8>, _>((from.clone(), Bound::Unbounded))
            {
                let (k, v) = e?;
                bytes += k.len() + v.len();
                chunk.push((k.to_vec(), v.to_vec()));
                if chunk.len() == crate::table::RANGE_CHUNK || bytes >= 1 << 20 {
                    break;
                }
            }
            let Some((last, _)) = chunk.last() else {
                break;
            };
            from = Bound::Excluded(last.clone());
            for (key, v) in chunk {
                self.t.guard.savepoints.undo.push(Undo::Key {
                    table: table.clone(),
                    key,
                    old: Some(v),
                });
            }
        }
        self.t.guard.savepoints.undo.push(Undo::Deleted {
            table: name.to_string(),
            props: props.unwrap_or_default(),
        });
        Ok(())
    }

    /// Marks a point in this transaction that [`WriteTxn::rollback_to`] can return it to,
    /// undoing what was done after it without aborting what was done before: SQL's
    /// `SAVEPOINT`, LMDB's nested transaction. Savepoints nest; each stays live until it is
    /// released ([`WriteTxn::release`]), a rollback to an older one passes it, or the
    /// transaction ends.
    ///
    /// While any savepoint is live, each change records how to undo it: the old value of a
    /// key put or deleted (a lookup and a copy; [`WriteTable::set`] then costs what `put`
    /// does), every entry a range delete or a clear removes, and every entry of a deleted
    /// table. A savepoint made before a bulk deletion therefore keeps the deleted data until
    /// it is released: in memory up to a bound (an eighth of what a transaction's writes may
    /// hold, at least 1 MiB), in an unlinked file in the temporary directory
    /// (`TMPDIR`) beyond it ([`crate::CommitStats::undo_spills`]). Without a live savepoint,
    /// nothing is recorded.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// let mut w = db.begin_write()?;
    /// w.default_table()?.put(b"order:1", b"paid")?;
    /// let before_items = w.savepoint()?;
    /// w.default_table()?.put(b"item:1", b"widget")?;
    /// w.default_table()?.delete(b"order:1")?;
    /// // The items turn out to be invalid: undo them, keep the order.
    /// w.rollback_to(&before_items)?;
    /// w.commit()?;
    /// assert_eq!(db.get(b"order:1")?, Some(b"paid".to_vec()));
    /// assert_eq!(db.get(b"item:1")?, None);
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn savepoint(&mut self) -> Result<Savepoint> {
        if self.t.failed {
            return Err(Error::TxnFailed);
        }
        let bound = crate::engine::savepoint::undo_bound(self.t.shared.batch_bytes_max);
        Ok(self.t.guard.savepoints.make(bound))
    }

    /// Undoes every change made since `savepoint`: keys, counts, tables created or deleted,
    /// table properties. `savepoint` stays live (it can be rolled back to again); those made
    /// after it are gone ([`Error::SavepointInvalid`] if used). The undo is made through the
    /// same calls as the changes, so a failure in it (a full disk when a page is written)
    /// fails the transaction as such a call does.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// let mut w = db.begin_write()?;
    /// let sp = w.savepoint()?;
    /// w.create_table("scratch")?;
    /// w.table("scratch")?.put(b"k", b"v")?;
    /// let inner = w.savepoint()?;
    /// w.rollback_to(&sp)?;
    /// assert!(w.list_tables()?.is_empty());
    /// assert!(matches!(w.rollback_to(&inner), Err(larchdb::Error::SavepointInvalid)));
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn rollback_to(&mut self, savepoint: &Savepoint) -> Result<()> {
        if self.t.failed {
            return Err(Error::TxnFailed);
        }
        let (mark, marks) = self.t.guard.savepoints.unwind(savepoint)?;
        let r = self.undo(mark);
        if r.is_err() {
            self.t.failed = true;
        }
        self.t.guard.savepoints.resume(marks);
        r
    }

    /// Releases `savepoint` and every savepoint made after it, keeping their changes (SQL's
    /// `RELEASE`). Once no savepoint is live, the undo records are dropped and changes stop
    /// being recorded.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// let mut w = db.begin_write()?;
    /// let sp = w.savepoint()?;
    /// w.default_table()?.put(b"k", b"v")?;
    /// w.release(sp)?;
    /// w.commit()?;
    /// assert_eq!(db.get(b"k")?, Some(b"v".to_vec()));
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn release(&mut self, savepoint: Savepoint) -> Result<()> {
        self.t.guard.savepoints.release(&savepoint)
    }

    /// Applies the undo records after position `mark`, newest first, dropping each as it is
    /// applied (`rollback_to`; recording is off).
    fn undo(&mut self, mark: usize) -> Result<()> {
        let missing = |name: &str| Error::internal(format!("savepoint: table {name:?} is gone"));
        while self.t.guard.savepoints.undo.len() > mark {
            let Some(u) = self.t.guard.savepoints.undo.pop()? else {
                return Err(Error::internal("savepoint: an undo record is missing"));
            };
            match u {
                Undo::Key { table, key, old } => {
                    let mut t = self.table(&table)?;
                    match old {
                        Some(v) => {
                            t.put(&key, &v)?;
                        }
                        // The put that made the key is the newest change left to it.
                        None if !t.delete(&key)? => {
                            return Err(Error::internal("savepoint: a key put is not there"));
                        }
                        None => {}
                    }
                }
                Undo::Created(name) => {
                    if !self.delete_table(&name)? {
                        return Err(missing(&name));
                    }
                }
                // Its entries are the records that come next.
                Undo::Deleted { table, props } => {
                    self.create_table(&table)?;
                    self.set_table_properties(&table, &props)?;
                }
                Undo::Props { table, old } => self.set_table_properties(&table, &old)?,
            }
        }
        Ok(())
    }

    /// Names of all tables, as this transaction sees them, sorted.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// let mut w = db.begin_write()?;
    /// w.create_table("b")?;
    /// w.create_table("a")?;
    /// assert_eq!(w.list_tables()?, ["a", "b"]);
    /// // Not committed yet: readers see none.
    /// assert!(db.begin_read()?.list_tables()?.is_empty());
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn list_tables(&mut self) -> Result<Vec<String>> {
        if self.t.failed {
            return Err(Error::TxnFailed);
        }
        catalog::list(self.t.source(), self.t.catalog)
    }

    /// Commits with the database's default durability.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// let mut w = db.begin_write()?;
    /// w.default_table()?.put(b"k", b"v")?;
    /// assert_eq!(db.get(b"k")?, None);
    /// w.commit()?;
    /// assert_eq!(db.get(b"k")?, Some(b"v".to_vec()));
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn commit(self) -> Result<()> {
        let d = self.durability;
        self.commit_with(d)
    }

    /// Commits with the given durability.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// let mut w = db.begin_write()?;
    /// w.default_table()?.put(b"k", b"v")?;
    /// // Not synced: visible at once, durable with a later durable commit.
    /// w.commit_with(larchdb::Durability::None)?;
    /// assert_eq!(db.get(b"k")?, Some(b"v".to_vec()));
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn commit_with(mut self, durability: Durability) -> Result<()> {
        self.t.counted = true;
        let counters = &self.t.shared.counters;
        let r = self.t.commit(durability, false);
        Counters::add(match r {
            Ok(()) => &counters.commits,
            Err(_) => &counters.failed_commits,
        });
        r
    }

    /// Aborts: nothing this transaction did becomes visible. Same as dropping it.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// let mut w = db.begin_write()?;
    /// w.create_table("t")?;
    /// w.default_table()?.put(b"k", b"v")?;
    /// w.abort();
    /// assert_eq!(db.get(b"k")?, None);
    /// assert!(db.begin_read()?.list_tables()?.is_empty());
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn abort(self) {}
}
