//! The write transaction.

use crate::btree;
use crate::engine::catalog::{self, check_name};
use crate::engine::checkpoint;
use crate::engine::commit::{commit, commit_logged, finish_immediate, settle, LogAt};
use crate::engine::readers::Published;
use crate::engine::{Counters, Shared, WriterState};
use crate::error::{Error, Result};
use crate::limits::TABLE_PROPERTIES_BYTES_MAX;
use crate::options::Durability;
use crate::pager::{PageSource, TableHeader, WritePages};
use crate::table::{Logged, TablePages, WriteTable};
use crate::engine::savepoint::{Savepoint, Savepoints, Undo, UndoSink};
use crate::txn::ReadTxn;
use crate::typed::table::{check_types, type_record};
use crate::typed::{Key, TableDefinition, TypedWriteTable, Value};
use std::sync::{Arc, MutexGuard};

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
/// `Database`. A transaction lives on the thread that began it. In an async runtime, run the
/// whole transaction (begin, writes, commit) in one blocking task, such as tokio's
/// `spawn_blocking` with an `Arc<Database>`; [`crate::ReadTxn`] is `Send + Sync` and owns
/// what it needs, so readers can move freely.
///
/// ```compile_fail
/// # let dir = tempfile::tempdir().unwrap();
/// let db = larchdb::Database::open(dir.path().join("db"), Default::default()).unwrap();
/// let w = db.begin_write().unwrap();
/// std::thread::scope(|s| {
///     s.spawn(move || w.commit()); // error: `MutexGuard` cannot be sent between threads
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
    shared: &'db Arc<Shared>,
    guard: MutexGuard<'db, WriterState>,
    /// The pages this transaction writes; started by the first change that writes pages
    /// (`start_pages`): a logged transaction reads the tree through its base snapshot and
    /// never starts them. Boxed: a transaction is moved several times, and `WritePages` is
    /// most of a kilobyte (copying it was a quarter of an empty logged commit's time).
    pages: Option<Box<WritePages>>,
    catalog: TableHeader,
    durability: Durability,
    failed: bool,
    /// The commit this transaction starts from: the tree, and the overlay above it.
    base: Arc<Published>,
    /// Writes go to the batch (`WriterState::batch`), not the pages.
    logged: bool,
    /// The base's overlay was applied to the pages (`switch_to_pages`).
    applied: bool,
    /// Made by `checkpoint`: it writes only what the log holds already.
    checkpoint_only: bool,
    /// A commit was attempted (a drop without one is an abort, for the counters).
    committing: bool,
    /// The commit is the application's (`commit_with`), not one the engine makes itself
    /// (`Database::sync`, the `Bounded` flusher): counted in `Stats::commits`.
    counted: bool,
}

impl<'db> WriteTxn<'db> {
    pub(crate) fn new(
        shared: &'db Arc<Shared>,
        mut guard: MutexGuard<'db, WriterState>,
    ) -> Result<WriteTxn<'db>> {
        if shared.options.read_only {
            return Err(Error::ReadOnly);
        }
        if shared.log.as_ref().is_some_and(|l| l.failed()) {
            // A committer's sync of the log failed after it let the write lock go.
            guard.poisoned = true;
        }
        if guard.poisoned {
            return Err(Error::Poisoned);
        }
        // A checkpoint written on its own thread is put in place between two transactions.
        checkpoint::finish(shared, &mut guard, false)?;
        let WriterState { disk, poisoned, .. } = &mut *guard;
        if let Some(disk) = disk.as_mut() {
            if disk.settling.as_ref().is_some_and(|s| s.synced()) {
                // The last checkpoint's sync is done: it becomes the durable one, so that the
                // pages the one before reaches can be reused below.
                settle(shared, disk, poisoned)?;
            }
            if disk.carry.is_none() {
                // A transaction failed to hand the pages' state back.
                return Err(Error::Poisoned);
            }
        }
        let published = shared.writer_base();
        // A commit whose committer still waits for the log's sync is newer than what readers
        // see; this transaction follows it (its tree is the published one's).
        let published = match &guard.pending {
            Some((p, _)) if p.txn() > published.txn() => p.clone(),
            _ => published,
        };
        let base_txn = published.txn();
        let catalog = published.snap.meta.catalog;
        guard.tables.begin(base_txn);
        guard.batch.clear();
        guard.savepoints = Savepoints::default();
        // Until a durable commit says its log holds later commits (`Meta::log`), a power loss
        // returns to a commit whose open starts a new log, dropping what the log held: so the
        // first transaction on a log just created writes pages (durably, as every
        // transaction of such a handle that writes pages and is not a checkpoint), and only
        // the ones after it commit through the log.
        let logged = shared.log.is_some() && published.snap.meta.log;
        let mut w = WriteTxn {
            shared,
            guard,
            pages: None,
            catalog,
            durability: shared.options.durability,
            failed: false,
            base: published,
            logged,
            applied: false,
            checkpoint_only: false,
            committing: false,
            counted: false,
        };
        if !logged {
            w.start_pages()?;
            if w.base.has_overlay() {
                // Records replayed from the log by a handle that does not write it: this
                // transaction writes pages, so it starts by applying them.
                w.switch_to_pages()?;
            }
        }
        Ok(w)
    }

    /// The pages this transaction writes, started from the writer's state if they are not
    /// yet.
    fn start_pages(&mut self) -> Result<&mut WritePages> {
        if self.pages.is_none() {
            if self.guard.checkpoint.is_some() {
                // A checkpoint thread holds the disk state: wait for it, and start from the
                // snapshot it leaves.
                if let Err(e) = checkpoint::finish(self.shared, &mut self.guard, true) {
                    self.failed = true;
                    return Err(e);
                }
                self.rebase();
            }
            let WriterState { disk, poisoned, .. } = &mut *self.guard;
            let Some(disk) = disk.as_mut() else {
                return Err(Error::Poisoned);
            };
            let Some(mut carry) = disk.carry.take() else {
                return Err(Error::Poisoned);
            };
            let released =
                self.shared
                    .release_pending(&mut carry.free, disk.last_durable_txn, false);
            if let Err(e) = released {
                disk.carry = Some(carry);
                *poisoned = true;
                self.failed = true;
                return Err(e);
            }
            // A checkpoint still settling becomes the durable one before this transaction's
            // commit (`settle`), but this transaction's page writes may reach the disk before
            // that (a checkpoint writes its merged leaves as it goes, and the settling sync
            // flushes whatever is in the page cache): the pages it reaches are pinned as the
            // durable commit's from now on, or a power loss would return to a checkpoint whose
            // pages this transaction overwrote. (Between transactions, settling is started and
            // completed only by commits, `new` and a checkpoint thread, which this transaction
            // waited for above: this is what it was when the pages started.)
            let pinned = disk
                .settling
                .as_ref()
                .map_or(disk.last_durable_txn, |s| s.txn());
            let base = self.base.snap.clone();
            let txn = self.base.txn() + 1;
            let pages = WritePages::new(base, txn, pinned, carry, btree::check_node);
            self.pages = Some(Box::new(pages));
        }
        self.pages.as_deref_mut().ok_or(Error::TxnFailed)
    }

    /// Makes the published snapshot this transaction's base, after a checkpoint thread's tree
    /// was put in place (`checkpoint::finish`): the same commits (and, if the checkpoint
    /// corrected entry counts, a commit that did). Only before its pages start; the table
    /// states were cleared with the old tree.
    fn rebase(&mut self) {
        let published = self.shared.writer_base();
        debug_assert!(published.txn() >= self.base.txn());
        debug_assert!(published.frozen.is_none());
        self.catalog = published.snap.meta.catalog;
        self.base = published;
    }

    /// What this transaction reads pages from: its own pages once started, else the base
    /// snapshot (the same pages: a transaction that has not started them changed none).
    fn source(&self) -> &dyn PageSource {
        source_of(&self.pages, &self.base)
    }

    /// Whether the log has grown enough since the last checkpoint that one is due (by
    /// `Options::checkpoint_bytes`, or more in a large database: `Log::plan`).
    pub(crate) fn checkpoint_due(shared: &Shared, guard: &WriterState) -> bool {
        shared
            .log
            .as_ref()
            .is_some_and(|log| log.checkpoint_due(guard.checkpoint_position))
    }

    /// Turns a logged transaction into one that writes pages: the overlay's records up to the
    /// base commit, then this transaction's own, are applied to the tree, table by table in key
    /// order. Its commit is then a checkpoint. Does nothing for a transaction that writes pages
    /// already (unless records replayed from the log are still to be applied).
    pub(crate) fn switch_to_pages(&mut self) -> Result<()> {
        if !self.logged && (self.applied || !self.base.has_overlay()) {
            return Ok(());
        }
        if self.failed {
            return Err(Error::TxnFailed);
        }
        self.start_pages()?;
        self.logged = false;
        self.applied = true;
        // The states describe the tree plus the overlay; from here on, the tree alone.
        self.guard.tables.tree_changed();
        // No frozen overlay: a checkpoint thread was waited for when the pages started.
        if self.base.frozen.is_some() {
            self.failed = true;
            return Err(Error::Internal(
                "pages started on a snapshot a checkpoint is still writing".into(),
            ));
        }
        let overlay = self.base.overlay.clone();
        self.guarded(|t| {
            if let Some(o) = overlay.as_deref() {
                let txn = t.base.txn();
                let pages = t.pages.as_deref_mut().ok_or(Error::TxnFailed)?;
                let scratch = &mut t.guard.scratch;
                t.catalog = checkpoint::merge_overlay(pages, scratch, t.catalog, o, txn)?.0;
            }
            let names = catalog::list(t.source(), t.catalog)?;
            let name = |table: u64| -> Result<&str> {
                names
                    .get(table as usize)
                    .map(|n| n.as_str())
                    .ok_or_else(|| {
                        Error::Internal(format!("batch names table {table}, not in the catalog"))
                    })
            };
            let batch = std::mem::take(&mut t.guard.batch);
            let r = (|| {
                for (table, records) in batch.by_table() {
                    t.merge(name(table)?, records.len(), |i| records[i])?;
                }
                Ok(())
            })();
            t.guard.batch = batch;
            t.guard.batch.clear();
            r
        })
    }

    /// Merges `n` records of table `name`, `record(i)`, ascending by key, into its tree
    /// (`btree::merge_sorted`).
    fn merge<'r>(
        &mut self,
        name: &str,
        n: usize,
        record: impl Fn(usize) -> btree::Record<'r>,
    ) -> Result<()> {
        self.load_state(name)?;
        let ws = &mut *self.guard;
        let state = ws.tables.get_mut(name).ok_or(Error::TxnFailed)?;
        let pages = self.pages.as_deref_mut().ok_or(Error::TxnFailed)?;
        let before = state.hdr;
        state.put_hint.reset();
        state.append_hint = None;
        btree::merge_sorted(pages, &mut ws.scratch, &mut state.hdr, n, record)?;
        state.dirty |= state.hdr != before;
        Ok(())
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
        self.base.txn() + 1
    }

    fn pages(&mut self) -> Result<&mut WritePages> {
        if self.failed {
            return Err(Error::TxnFailed);
        }
        self.start_pages()
    }

    /// The pages and the writer state, borrowed apart (a put needs both).
    fn parts(&mut self) -> Result<(&mut WritePages, &mut WriterState)> {
        self.pages()?;
        let pages = self.pages.as_deref_mut().ok_or(Error::TxnFailed)?;
        Ok((pages, &mut *self.guard))
    }

    /// Runs a change that may fail half-way; a failure poisons the transaction.
    fn guarded<T>(&mut self, f: impl FnOnce(&mut Self) -> Result<T>) -> Result<T> {
        let r = f(self);
        if r.is_err() {
            self.failed = true;
        }
        r
    }

    fn lookup(&mut self, name: &str) -> Result<Option<TableHeader>> {
        if let Some(t) = self.guard.tables.get(name) {
            return Ok(Some(t.hdr));
        }
        if self.failed {
            return Err(Error::TxnFailed);
        }
        Ok(catalog::lookup(self.source(), &self.catalog, name)?.map(|(hdr, _)| hdr))
    }

    /// Makes sure the writer's table states hold this transaction's state of existing table
    /// `name`.
    fn load_state(&mut self, name: &str) -> Result<()> {
        if self.guard.tables.get(name).is_some() {
            return Ok(());
        }
        if self.failed {
            return Err(Error::TxnFailed);
        }
        // Borrowed apart from the writer state (the table state is opened with the entry's
        // properties).
        let src = source_of(&self.pages, &self.base);
        match catalog::lookup(src, &self.catalog, name)? {
            Some((mut hdr, value)) => {
                if self.logged {
                    // The entry count as of the base commit: the overlay's, if it changed.
                    if let Some(count) = self.overlay_count(name)? {
                        hdr.entries = count;
                    }
                }
                self.guard
                    .tables
                    .open(name, hdr, TableHeader::properties(value));
                Ok(())
            }
            None => Err(Error::TableNotFound(name.to_string())),
        }
    }

    /// Table `name`'s entry count in the overlay at the base commit, if a commit there
    /// changed it.
    fn overlay_count(&self, name: &str) -> Result<Option<u64>> {
        let b = &self.base;
        if !b.has_overlay() {
            return Ok(None);
        }
        Ok(match b.catalog.table_id(&b.snap, name.as_bytes())? {
            Some(id) => b.overlays().count(id, b.txn()),
            None => None,
        })
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
        if self.failed {
            return Err(Error::TxnFailed);
        }
        self.load_state(name)?;
        let unchanged = self
            .guard
            .tables
            .get(name)
            .is_some_and(|s| s.props == props);
        if unchanged {
            return Ok(());
        }
        self.switch_to_pages()?;
        self.load_state(name)?;
        let state = self.guard.tables.get_mut(name).ok_or(Error::TxnFailed)?;
        if state.props != props {
            let old = std::mem::replace(&mut state.props, props.to_vec());
            state.dirty = true;
            if self.guard.savepoints.active() {
                self.guard.savepoints.undo.push(Undo::Props {
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
        if self.lookup(name)?.is_some() {
            return Err(Error::TableExists(name.to_string()));
        }
        self.switch_to_pages()?;
        self.guarded(|t| {
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
        if self.lookup(name)?.is_some() {
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
        self.load_state(name)?;
        if self.failed {
            return Err(Error::TxnFailed);
        }
        let logged = if self.logged {
            let b = &self.base;
            let id = b.catalog.table_id(&b.snap, name.as_bytes())?;
            Some(id.ok_or_else(|| Error::TableNotFound(name.to_string()))?)
        } else {
            None
        };
        let ws = &mut *self.guard;
        let state = ws.tables.get_mut(name).ok_or(Error::TxnFailed)?;
        let pages = match self.pages.as_deref_mut() {
            Some(p) => TablePages::Write(p),
            None => TablePages::Read(&self.base.snap),
        };
        let logged = logged.map(|table| Logged {
            batch: &mut ws.batch,
            overlays: self.base.overlays(),
            table,
            txn: self.base.txn(),
        });
        let undo = ws.savepoints.active().then(|| UndoSink {
            log: &mut ws.savepoints.undo,
            table: name.into(),
        });
        Ok(WriteTable::new(
            pages,
            state,
            &mut ws.scratch,
            &mut self.failed,
            logged,
            undo,
        ))
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
            self.load_state(name)?;
            let state = self.guard.tables.get(name).ok_or(Error::TxnFailed)?;
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
        ReadTxn::on(self.shared.clone(), self.base.clone())
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
        if self.lookup(name)?.is_none() {
            return Ok(false);
        }
        self.switch_to_pages()?;
        let Some(hdr) = self.lookup(name)? else {
            return Ok(false);
        };
        // A savepoint keeps the table's entries and properties, to make it again.
        let undo = if self.guard.savepoints.active() {
            self.load_state(name)?;
            let props = self.guard.tables.get(name).map(|s| s.props.clone());
            let t = self.table(name)?;
            let entries = t
                .iter()
                .map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())))
                .collect::<Result<Vec<_>>>()?;
            Some(Undo::Deleted {
                table: name.to_string(),
                props: props.unwrap_or_default(),
                entries,
            })
        } else {
            None
        };
        self.guarded(|t| {
            let mut catalog = t.catalog;
            let pages = t.pages()?;
            btree::free_tree(pages, &hdr)?;
            btree::delete(pages, &mut catalog, name.as_bytes())?;
            t.catalog = catalog;
            t.guard.tables.remove(name);
            t.guard.savepoints.undo.extend(undo);
            Ok(true)
        })
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
    /// table. A savepoint made before a bulk deletion therefore holds the deleted data in
    /// memory until it is released. Without a live savepoint, nothing is recorded.
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
        if self.failed {
            return Err(Error::TxnFailed);
        }
        Ok(self.guard.savepoints.make())
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
        if self.failed {
            return Err(Error::TxnFailed);
        }
        let (undo, marks) = self.guard.savepoints.unwind(savepoint)?;
        let r = self.guarded(|t| t.undo(undo));
        self.guard.savepoints.resume(marks);
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
        self.guard.savepoints.release(&savepoint)
    }

    /// Applies undo records, newest first (`rollback_to`; recording is off).
    fn undo(&mut self, undo: Vec<Undo>) -> Result<()> {
        let missing = |name: &str| Error::internal(format!("savepoint: table {name:?} is gone"));
        for u in undo.into_iter().rev() {
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
                Undo::Deleted {
                    table,
                    props,
                    entries,
                } => {
                    self.create_table(&table)?;
                    self.set_table_properties(&table, &props)?;
                    let mut t = self.table(&table)?;
                    for (k, v) in &entries {
                        t.append(k, v)?;
                    }
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
        if self.failed {
            return Err(Error::TxnFailed);
        }
        catalog::list(self.source(), self.catalog)
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
        self.counted = true;
        let counters = &self.shared.counters;
        let r = self.commit_forced(durability, false);
        Counters::add(match r {
            Ok(()) => &counters.commits,
            Err(_) => &counters.failed_commits,
        });
        r
    }

    /// Makes this transaction a checkpoint and commits it: `Durability::None` for the
    /// checkpoints the log's growth calls for (made durable on a thread of their own,
    /// `commit::Settling`), `Immediate` for `Database::checkpoint()`.
    pub(crate) fn checkpoint(mut self, durability: Durability) -> Result<()> {
        // Called on a transaction just begun (`Database::begin_write`, `checkpoint`): it
        // holds no writes of its own.
        self.checkpoint_only = true;
        self.switch_to_pages()?;
        let shared = self.shared;
        self.commit_forced(durability, true)?;
        Counters::add(&shared.counters.checkpoints);
        Ok(())
    }

    /// Moves the pages of every tree that lie at the end of the file into free space below
    /// (`btree::relocate`) and commits durably, so that the next durable commit finds the end
    /// of the file free and gives it back (`Database::compact`). Does nothing, and returns
    /// false, when the free space is too small a share of the file to be worth a walk of the
    /// trees (`compact_bound`). Called on a transaction just begun, after a durable
    /// checkpoint: the overlay is empty, and the pages freed before are reusable.
    /// `progress(done, tables)` is called before the first table and after each.
    pub(crate) fn relocate(
        mut self,
        first: bool,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<bool> {
        self.checkpoint_only = true;
        self.switch_to_pages()?;
        let pages = self.pages()?;
        let Some(above) = compact_bound(pages, first) else {
            return Ok(false);
        };
        self.guarded(|t| {
            let pages = t.pages.as_deref_mut().ok_or(Error::TxnFailed)?;
            let scratch = &mut t.guard.scratch;
            let mut value = Vec::new();
            let names = catalog::list(&*pages, t.catalog)?;
            let tables = names.len() as u64;
            progress(0, tables);
            for (done, name) in names.into_iter().enumerate() {
                let Some((mut hdr, entry)) = catalog::lookup(&*pages, &t.catalog, &name)? else {
                    continue;
                };
                let props = TableHeader::properties(entry).to_vec();
                if btree::relocate(pages, &mut hdr, above)? {
                    value.clear();
                    value.extend_from_slice(&hdr.encode());
                    value.extend_from_slice(&props);
                    btree::put(
                        pages,
                        scratch,
                        &mut t.catalog,
                        name.as_bytes(),
                        &value,
                        None,
                    )?;
                }
                progress(done as u64 + 1, tables);
            }
            btree::relocate(pages, &mut t.catalog, above)?;
            Ok(())
        })?;
        // The cached table states name the pages before the move.
        self.guard.tables.tree_changed();
        self.commit_forced(Durability::Immediate, true)?;
        Ok(true)
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

    pub(crate) fn commit_forced(mut self, durability: Durability, force: bool) -> Result<()> {
        self.committing = true;
        if self.failed {
            return Err(Error::TxnFailed);
        }
        if self.logged && (durability != Durability::None || force) {
            // A commit that must be durable, after a mark whose pages may not be: they are
            // made durable first (`commit::settle_marks`), by this commit's own pages while a
            // checkpoint is being written (its meta page is the one to make durable, and the
            // checkpoint thread holds the disk state meanwhile).
            let unsettled = crate::engine::commit::mark_unsettled(&mut self.guard);
            if unsettled {
                Counters::add(&self.shared.counters.marks_settled);
            }
            if unsettled && self.guard.checkpoint.is_some() {
                self.switch_to_pages()?;
                return self.commit_pages(Durability::Immediate, force, LogAt::End);
            }
            if unsettled {
                crate::engine::commit::settle_marks(self.shared, &mut self.guard)?;
            }
        }
        if self.logged {
            if self.guard.batch.bytes() <= self.shared.options.log_batch_bytes_max() {
                if writes_pages_itself(&self.guard.batch) && pages_free_to_write(&self.guard) {
                    return self.commit_direct(durability);
                }
                let base = self.base.clone();
                let wrote = !self.guard.batch.is_empty();
                // `None`: no room in the log; the transaction commits by writing pages (a
                // checkpoint) below.
                if let Some(c) =
                    commit_logged(self.shared, &mut self.guard, &base, durability, force)?
                {
                    // A logged transaction has not started its pages (whatever starts them ends
                    // logging: `switch_to_pages`); should one ever have, they were only read,
                    // and the writer's buffers go back untouched.
                    if let Some(pages) = self.pages.take() {
                        self.hand_back(pages.abort());
                    }
                    self.guard.tables.committed(c.txn);
                    if wrote && self.counted {
                        Counters::add(&self.shared.counters.logged_commits);
                    }
                    let shared = self.shared;
                    // The write lock goes before the wait for the log's sync: the next
                    // transaction runs meanwhile, and its commit can share the sync.
                    drop(self);
                    if wrote {
                        shared.idle.note(shared);
                    }
                    return match c.wait {
                        Some((end, published)) => finish_immediate(shared, end, published, true),
                        None if durability == Durability::Bounded => {
                            shared.flusher.note_logged(shared)
                        }
                        None => Ok(()),
                    };
                }
            }
            // The changed tables' counts were kept for the overlay; the tree's are rebuilt.
            self.switch_to_pages()?;
        }
        self.commit_pages(durability, force, LogAt::End)
    }

    /// Commits a logged transaction of many appends by writing its pages, as a checkpoint
    /// does, and its writes to the log as its record (`LogAt::Append`): a sequential batch
    /// fills leaves in place at the tree's right edge, where the overlay would copy every
    /// record twice more (into the overlay, then into the leaf at a checkpoint) and hold it in
    /// memory meanwhile. The overlay's records are applied first (`switch_to_pages`: a
    /// checkpoint on the writer's thread when there are any). The log makes the commit
    /// durable as `durability` says; the pages are synced when the log needs the room, as a
    /// checkpoint's are.
    ///
    /// A `Durability::None` batch puts only a mark in the log (`LogAt::Mark`): nothing
    /// promised it would survive a power loss, and the commits after it that must be durable
    /// make its pages durable first (`commit::settle_marks`).
    fn commit_direct(mut self, durability: Durability) -> Result<()> {
        let mark = durability == Durability::None
            && self.shared.log.as_ref().is_some_and(|l| l.marks_allowed());
        let mut body = std::mem::take(&mut self.guard.record);
        let base = self.base.clone();
        let encoded = if mark {
            Ok(())
        } else {
            self.guard.batch.encode(
                |id| {
                    base.catalog
                        .name(&base.snap, id)?
                        .ok_or_else(|| Error::Internal(format!("no table numbered {id}")))
                },
                &mut body,
            )
        };
        let r = encoded.and_then(|()| self.switch_to_pages());
        let r = r.and_then(|()| {
            // The pages' own durability: the log's, through `LogAt::Append`.
            let log_at = if mark {
                LogAt::Mark
            } else {
                LogAt::Append {
                    body: &body,
                    durability,
                }
            };
            self.commit_txn(Durability::None, false, log_at)
        });
        self.guard.record = body;
        r?;
        if mark {
            let txn = self
                .shared
                .current_txn
                .load(std::sync::atomic::Ordering::Acquire);
            // Made durable instead if the log had no room for the mark.
            let durable = self
                .guard
                .disk
                .as_ref()
                .is_some_and(|d| d.last_durable_txn >= txn);
            if !durable {
                self.guard.marked = Some(txn);
                Counters::add(&self.shared.counters.marked_commits);
            }
        }
        if durability == Durability::Bounded {
            // After the write lock is let go: the flusher may need it.
            let shared = self.shared;
            drop(self);
            shared.flusher.note_logged(shared)?;
        }
        Ok(())
    }

    /// Commits a transaction that writes pages (`commit::commit`), naming the log position
    /// `log_at` says.
    fn commit_pages(
        mut self,
        durability: Durability,
        force: bool,
        log_at: LogAt<'_>,
    ) -> Result<()> {
        let durability = self.commit_txn(durability, force, log_at)?;
        if durability == Durability::Bounded {
            // After the write lock is let go: the flusher may need it.
            let shared = self.shared;
            drop(self);
            shared.flusher.note(shared, false)?;
        }
        Ok(())
    }

    /// `commit_pages` up to the flusher's note: returns the durability the commit had.
    fn commit_txn(
        &mut self,
        durability: Durability,
        force: bool,
        log_at: LogAt<'_>,
    ) -> Result<Durability> {
        // A handle that does not write the log, applying records replayed from it, commits
        // them durably: it does not keep the log they came from. A handle that writes it
        // commits durably every transaction that writes pages with changes the log does not
        // hold (a table created or deleted, properties, a batch too large for the log or one
        // that found it full): a later durable commit through the log must not be replayed,
        // after a power loss, on top of a tree without them. Only a checkpoint, which writes
        // what the log holds, may wait for its sync (`commit::Settling`): replaying the log
        // from the last durable checkpoint redoes it. So may a transaction whose record goes to
        // the log with its pages (`LogAt::Append`).
        let log = self.shared.log.is_some();
        let in_log = self.checkpoint_only || matches!(log_at, LogAt::Append { .. } | LogAt::Mark);
        let durability = if (self.base.has_overlay() && !log) || (log && !in_log) {
            Durability::Immediate
        } else {
            durability
        };
        let mut catalog = self.catalog;
        let pages = self.pages.as_deref_mut().ok_or(Error::TxnFailed)?;
        let WriterState {
            tables, scratch, ..
        } = &mut *self.guard;
        let mut value = Vec::new();
        for (name, state) in tables.changed() {
            value.clear();
            value.extend_from_slice(&state.hdr.encode());
            value.extend_from_slice(&state.props);
            btree::put(pages, scratch, &mut catalog, name.as_bytes(), &value, None)?;
        }
        let pages = *self.pages.take().ok_or(Error::TxnFailed)?;
        // An empty commit writes nothing, unless it must make earlier unsynced commits durable.
        let base_durable = self.guard.disk()?.last_durable_txn == self.base.txn();
        let log_checkpoint = self.shared.log.is_some() && self.base.has_overlay();
        if pages.is_clean()
            && !force
            && !log_checkpoint
            && (durability != Durability::Immediate || base_durable)
            && matches!(log_at, LogAt::End)
        {
            let base_txn = self.base.txn();
            self.hand_back(pages.finish());
            self.guard.tables.committed(base_txn);
            return Ok(Durability::None);
        }
        let txn = pages.txn;
        // A commit that changes what the log does not hold leaves a mark in it (`KIND_MARK`),
        // appended after its pages and before its meta page, as a `None` batch does: a replay
        // onto an older tree ends there, since every record after it was made on its pages.
        // Its meta page is durable (above), so only damage to it makes a tree older than the
        // mark the newest intact one, and the open then refuses instead of replaying the
        // commits after it onto a tree without it (docs/design/durability.md, "Damage is
        // never silent"). A checkpoint changes no content: it takes a commit number and leaves
        // no mark.
        let log_at = match (log_at, self.shared.log.as_ref()) {
            (LogAt::End, Some(group))
                if !in_log
                    && group.marks_allowed()
                    && !self
                        .shared
                        .log_detached
                        .load(std::sync::atomic::Ordering::Relaxed) =>
            {
                LogAt::Mark
            }
            (log_at, _) => log_at,
        };
        commit(
            self.shared,
            &mut self.guard,
            pages,
            catalog,
            durability,
            log_at,
        )?;
        self.guard.tables.committed(txn);
        let counters = &self.shared.counters;
        if self.counted {
            Counters::add(&counters.page_commits);
        }
        if log_checkpoint && !self.checkpoint_only {
            // The overlay's records were applied first: a checkpoint on this thread.
            Counters::add(&counters.checkpoints);
        }
        Ok(durability)
    }
}

/// Whether a logged transaction's batch is a sequential load large enough to commit by
/// writing pages (`WriteTxn::commit_direct`): `DIRECT_APPENDS_MIN` writes or more, nearly all
/// of them appends (`WriteTable::append`), which fill the tree's last leaves in place.
/// Random writes stay in the overlay even in large batches: a checkpoint brings many more of
/// them to each leaf than one transaction does (measured, 1M fillrandom in 1000-put commits:
/// 1.16 us a put through the overlay, 1.45 us for Larch without the log, which writes pages).
fn writes_pages_itself(batch: &crate::engine::upper::batch::Batch) -> bool {
    let appended = batch.appended();
    appended >= DIRECT_APPENDS_MIN && appended >= batch.len() - batch.len() / 8
}

/// Whether a transaction can write pages now without waiting: no checkpoint is being written
/// on its own thread, and none is being synced (`commit::Settling`: its meta page's slot is
/// the one the next commit that writes pages takes). Otherwise a large sequential batch goes
/// through the overlay like any other: waiting for the sync made the slowest 1000-put commits
/// of a 1M sequential load (P99.9) take 44-75 ms.
fn pages_free_to_write(guard: &WriterState) -> bool {
    guard.checkpoint.is_none()
        && guard
            .disk
            .as_ref()
            .is_some_and(|d| d.settling.as_ref().is_none_or(|s| s.synced()))
}

/// `writes_pages_itself`: the fewest appends in a transaction that commits by writing pages.
/// A commit that writes pages costs more than one through the log (the path to the right
/// edge and the catalog copied, a meta page written), and applies whatever the overlay holds
/// first; a batch this large pays for it many times over.
const DIRECT_APPENDS_MIN: usize = 64;

/// Pages at or past the returned id are moved by `WriteTxn::relocate`: the pages in use. The
/// move also copies the branches above each page it moves and writes freelist pages; those
/// copies take the lowest free pages past the bound, and the next pass moves them (the
/// branches a few moved branches reach are a few: the passes converge in two or three).
/// Reserving room below the bound for them instead leaves it as holes, since a copied
/// branch's old page is freed by the same commit (measured, 10M random records: 6,515 free
/// pages inside the file, 2.3% of it, after one pass with room for every branch).
///
/// `None` when that would give back fewer than `COMPACT_PAGES_MIN` pages, or for the first
/// pass less than one page in `COMPACT_SHARE_MIN` of the file (not worth a walk of the
/// branches), or when pages held by readers (pending) could not be moved anyway.
fn compact_bound(pages: &WritePages, first: bool) -> Option<u64> {
    let count = pages.page_count;
    let free = pages.free.free_pages();
    let pending = pages.free.pending_pages();
    let used = count.checked_sub(free + pending)?;
    let above = used + COMPACT_SLACK_PAGES;
    let gain = count.saturating_sub(above);
    let share = if first { count / COMPACT_SHARE_MIN } else { 0 };
    (pending <= free / 8 && gain >= COMPACT_PAGES_MIN.max(share)).then_some(above)
}

/// `compact_bound`: a first pass that would give back less than a page in this many of the
/// file is not worth a walk of the branches; no pass is for fewer pages than this.
const COMPACT_SHARE_MIN: u64 = 8;
const COMPACT_PAGES_MIN: u64 = 64;
/// `compact_bound`: room for the catalog's own changes.
const COMPACT_SLACK_PAGES: u64 = 4;

/// `WriteTxn::source`, from the fields it reads (so that the writer state can be borrowed
/// beside it).
fn source_of<'a>(pages: &'a Option<Box<WritePages>>, base: &'a Published) -> &'a dyn PageSource {
    match pages {
        Some(p) => &**p,
        None => &*base.snap,
    }
}

impl WriteTxn<'_> {
    /// Gives the pages' state back to the writer.
    fn hand_back(&mut self, carry: crate::pager::Carry) {
        // The disk state is the writer's while pages are started (`start_pages`).
        if let Some(disk) = self.guard.disk.as_mut() {
            disk.carry = Some(carry);
        }
    }
}

impl Drop for WriteTxn<'_> {
    fn drop(&mut self) {
        if !self.committing && !self.checkpoint_only {
            Counters::add(&self.shared.counters.aborts);
        }
        if let Some(pages) = self.pages.take() {
            self.hand_back(pages.abort());
        }
        if self.guard.savepoints.active() || !self.guard.savepoints.undo.is_empty() {
            // What the undo records hold (a deleted table's entries) is not kept past the
            // transaction.
            self.guard.savepoints = Savepoints::default();
        }
    }
}
