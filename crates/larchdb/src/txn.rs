//! Transactions. A `ReadTxn` owns a snapshot; a `WriteTxn` owns the write lock and the dirty
//! pages of the next snapshot.

use crate::btree::{self, PutMode};
use crate::db::{self, oldest_reader, Database, Durability, Inner, WriterState};
use crate::error::{Error, Result};
use crate::limits::{TABLE_NAME_BYTES_MAX, TABLE_PROPERTIES_BYTES_MAX};
use crate::pager::{CatalogEntry, PageSource, Snapshot, TableHeader, WritePages};
use crate::table::{ReadTable, WriteTable};
use std::collections::HashMap;
use std::sync::{Arc, MutexGuard};

fn check_name(name: &str) -> Result<()> {
    if name.is_empty() || name.len() > TABLE_NAME_BYTES_MAX {
        return Err(Error::InvalidTableName(name.to_string()));
    }
    Ok(())
}

fn decode_header(bytes: &[u8], catalog: &TableHeader) -> Result<TableHeader> {
    TableHeader::decode(bytes, catalog.root.id)
}

fn list_catalog<S: PageSource + ?Sized>(src: &S, catalog: TableHeader) -> Result<Vec<String>> {
    let mut names = Vec::new();
    let mut c = btree::Cursor::new(src, catalog);
    let mut ok = c.first()?;
    while ok {
        let key = c.key()?;
        let name = std::str::from_utf8(key)
            .map_err(|_| Error::corrupted(catalog.root.id, "table name is not UTF-8"))?;
        // A name no table can have is damage, not a name to hand back to the caller.
        if check_name(name).is_err() {
            return Err(Error::corrupted(
                catalog.root.id,
                format!("table name of {} bytes", name.len()),
            ));
        }
        names.push(name.to_string());
        ok = c.next()?;
    }
    Ok(names)
}

/// Catalogs up to this many tables are decoded once per snapshot and searched linearly.
const SMALL_CATALOG_TABLES_MAX: u64 = 32;

/// The whole catalog of a snapshot, if it is small and sound; `None` sends lookups to the tree
/// (which then reports any damage where it is met).
fn small_catalog(snap: &Snapshot) -> Option<Vec<CatalogEntry>> {
    let catalog = snap.meta.catalog;
    if catalog.entries > SMALL_CATALOG_TABLES_MAX {
        return None;
    }
    let mut out = Vec::with_capacity(catalog.entries as usize);
    let mut c = btree::Cursor::new(snap, catalog);
    let mut more = c.first().ok()?;
    while more {
        let (name, value) = c.entry().ok()?;
        out.push((name.into(), decode_header(value, &catalog).ok()?));
        if out.len() as u64 > SMALL_CATALOG_TABLES_MAX {
            return None;
        }
        more = c.next().ok()?;
    }
    Some(out)
}

/// A read transaction: a consistent snapshot of the whole database, as of the newest commit
/// when it began. `Send + Sync`: it can be moved to, kept on, and shared between threads.
/// While it lives, no page it can reach is reused. Values it returns are borrowed from it.
pub struct ReadTxn {
    inner: Arc<Inner>,
    snap: Arc<Snapshot>,
}

impl ReadTxn {
    pub(crate) fn new(inner: Arc<Inner>) -> Result<ReadTxn> {
        let snap = inner.register_reader()?;
        Ok(ReadTxn { inner, snap })
    }

    pub(crate) fn snapshot(&self) -> &Arc<Snapshot> {
        &self.snap
    }

    /// Moves this transaction to the newest committed snapshot, like LMDB's
    /// `mdb_txn_reset` + `mdb_txn_renew`. Costs one atomic load when nothing was committed
    /// since; otherwise the same short registration as `begin_read`. On a read-only handle
    /// beside a writer in another process, if the newest snapshot cannot be read (an I/O
    /// error), the transaction stays on its current snapshot, which remains valid.
    pub fn renew(&mut self) {
        if !self.inner.newer_than(self.snap.meta.txn) {
            return;
        }
        let mut rs = self.inner.read_state();
        if let Some(lock) = self.inner.shared_reader() {
            // This transaction is still registered, so the slot protects what is found.
            if self.inner.refresh_shared(&mut rs, lock).is_err() {
                return;
            }
        }
        if rs.current.meta.txn == self.snap.meta.txn {
            return;
        }
        let snap = rs.current.clone();
        *rs.readers.entry(snap.meta.txn).or_insert(0) += 1;
        self.inner.unregister_reader(&mut rs, self.snap.meta.txn);
        drop(rs);
        // The old snapshot (and possibly its mapping) is released outside the lock.
        let _old = std::mem::replace(&mut self.snap, snap);
    }

    /// Id of the commit this transaction sees.
    pub fn id(&self) -> u64 {
        self.snap.meta.txn
    }

    /// Opens a table for reading.
    pub fn table(&self, name: &str) -> Result<ReadTable<'_>> {
        check_name(name)?;
        let cached = self.snap.tables.get_or_init(|| small_catalog(&self.snap));
        if let Some(list) = cached {
            return match list.iter().find(|(n, _)| &n[..] == name.as_bytes()) {
                Some((_, hdr)) => Ok(ReadTable::new(&self.snap, *hdr)),
                None => Err(Error::TableNotFound(name.to_string())),
            };
        }
        let catalog = self.snap.meta.catalog;
        match btree::get(&*self.snap, &catalog, name.as_bytes())? {
            Some(bytes) => Ok(ReadTable::new(&self.snap, decode_header(bytes, &catalog)?)),
            None => Err(Error::TableNotFound(name.to_string())),
        }
    }

    /// Names of all tables, sorted.
    pub fn list_tables(&self) -> Result<Vec<String>> {
        list_catalog(&*self.snap, self.snap.meta.catalog)
    }

    /// The properties of a table, as set by [`WriteTxn::set_table_properties`]: opaque bytes
    /// of the application's, empty if never set.
    pub fn table_properties(&self, name: &str) -> Result<&[u8]> {
        check_name(name)?;
        let catalog = self.snap.meta.catalog;
        match btree::get(&*self.snap, &catalog, name.as_bytes())? {
            Some(bytes) => {
                decode_header(bytes, &catalog)?;
                Ok(TableHeader::properties(bytes))
            }
            None => Err(Error::TableNotFound(name.to_string())),
        }
    }
}

impl Drop for ReadTxn {
    fn drop(&mut self) {
        let mut rs = self.inner.read_state();
        self.inner.unregister_reader(&mut rs, self.snap.meta.txn);
    }
}

/// Per-table state inside a write transaction.
pub(crate) struct TableState {
    pub(crate) hdr: TableHeader,
    pub(crate) dirty: bool,
    /// Where the last append landed, for the next one (see `btree::append`).
    pub(crate) append_hint: Option<btree::AppendHint>,
    /// The table's properties, written after the header in its catalog value.
    pub(crate) props: Vec<u8>,
    /// The transaction (`TableStates::generation`) this state belongs to.
    generation: u64,
}

/// The tables a write transaction has opened, by name. Kept in the writer state from one
/// transaction to the next, so that opening the same table again allocates nothing and, after
/// a commit, reads nothing: with a fresh map per transaction, the name's `String` and the
/// map's growth were a measurable part of a one-put commit, and so was looking the table up in
/// the catalog again. An entry carries the transaction (generation) that last used it; it is
/// valid if that generation is at least `valid_from`.
#[derive(Default)]
pub(crate) struct TableStates {
    map: HashMap<String, TableState>,
    generation: u64,
    /// Entries of earlier generations down to this one describe the current transaction's base
    /// exactly: each transaction since committed, and each commit was the next one's base.
    valid_from: u64,
    /// Set when the transaction of `generation` committed (or changed nothing): the commit
    /// its states describe.
    committed: Option<(u64, u64)>,
}

impl TableStates {
    /// Starts a transaction on commit `base_txn`. The entries stay valid if the previous
    /// transaction committed and produced that commit (this handle is the only writer, so it
    /// always did, unless the previous transaction aborted or failed); otherwise all of them
    /// become stale.
    fn begin(&mut self, base_txn: u64) {
        let carried = self.committed.take() == Some((self.generation, base_txn));
        self.generation += 1;
        if !carried {
            self.valid_from = self.generation;
        }
    }

    /// The current transaction ended as commit `txn` (its base, if it changed nothing).
    fn committed(&mut self, txn: u64) {
        self.committed = Some((self.generation, txn));
    }

    fn get(&mut self, name: &str) -> Option<&TableState> {
        self.get_mut(name).map(|s| &*s)
    }

    fn get_mut(&mut self, name: &str) -> Option<&mut TableState> {
        let (generation, valid_from) = (self.generation, self.valid_from);
        let s = self.map.get_mut(name)?;
        if s.generation < valid_from {
            return None;
        }
        if s.generation != generation {
            // Carried over: its header and properties are the base's catalog entry. Nothing
            // is changed yet in this transaction, and the append hint named a page of an
            // earlier one.
            s.generation = generation;
            s.dirty = false;
            s.append_hint = None;
        }
        Some(s)
    }

    /// Records `name` as opened in this transaction with header `hdr` and properties
    /// `props`, unchanged so far. Reuses the entry (and its buffers) left by an earlier
    /// transaction.
    fn open(&mut self, name: &str, hdr: TableHeader, props: &[u8]) {
        let generation = self.generation;
        let state = match self.map.get_mut(name) {
            Some(s) => s,
            None => self.map.entry(name.to_string()).or_insert(TableState {
                hdr,
                dirty: false,
                append_hint: None,
                props: Vec::new(),
                generation,
            }),
        };
        state.hdr = hdr;
        state.dirty = false;
        state.append_hint = None;
        state.props.clear();
        state.props.extend_from_slice(props);
        state.generation = generation;
    }

    fn remove(&mut self, name: &str) {
        self.map.remove(name);
    }

    /// Tables this transaction changed, sorted by name.
    fn changed(&self) -> Vec<(&str, &TableState)> {
        let mut out: Vec<(&str, &TableState)> = self
            .map
            .iter()
            .filter(|(_, s)| s.generation == self.generation && s.dirty)
            .map(|(n, s)| (n.as_str(), s))
            .collect();
        out.sort_unstable_by(|a, b| a.0.cmp(b.0));
        out
    }
}

/// The write transaction. Only one exists at a time per database; readers are not blocked.
/// Dropping it without `commit` aborts it: nothing it did becomes visible.
pub struct WriteTxn<'db> {
    db: &'db Database,
    guard: MutexGuard<'db, WriterState>,
    pages: Option<WritePages>,
    catalog: TableHeader,
    durability: Durability,
    failed: bool,
}

impl<'db> WriteTxn<'db> {
    pub(crate) fn new(
        db: &'db Database,
        mut guard: MutexGuard<'db, WriterState>,
    ) -> Result<WriteTxn<'db>> {
        let inner = &db.inner;
        if inner.options.read_only {
            return Err(Error::ReadOnly);
        }
        if guard.poisoned {
            return Err(Error::Poisoned);
        }
        let (base, mut oldest) = {
            let rs = inner.read_state();
            (rs.current.clone(), oldest_reader(&rs))
        };
        // Readers in other processes (and other handles): read after the previous commit was
        // published, so that a reader that registered too late for this scan has seen that
        // commit and holds a snapshot no older than `base` (docs/design/concurrency.md).
        if let Some(lock) = inner.lock.as_ref() {
            if let Some(foreign) = lock.oldest_reader().0 {
                oldest = Some(oldest.map_or(foreign, |o| o.min(foreign)));
            }
        }
        // Pages freed by commit T are unreachable from every snapshot >= T. The snapshots to
        // keep are the live readers' and the last durable one (a power loss returns to it).
        let Some(mut carry) = guard.carry.take() else {
            return Err(Error::Poisoned);
        };
        if let Err(e) = carry.free.release(oldest, guard.last_durable_txn) {
            guard.carry = Some(carry);
            guard.poisoned = true;
            return Err(e);
        }
        let base_txn = base.meta.txn;
        let txn = base_txn + 1;
        let catalog = base.meta.catalog;
        let pages = WritePages::new(base, txn, guard.last_durable_txn, carry);
        guard.tables.begin(base_txn);
        Ok(WriteTxn {
            db,
            guard,
            pages: Some(pages),
            catalog,
            durability: inner.options.durability,
            failed: false,
        })
    }

    /// Id this transaction's commit will have.
    pub fn id(&self) -> u64 {
        self.pages.as_ref().map_or(0, |p| p.txn)
    }

    fn pages(&mut self) -> Result<&mut WritePages> {
        if self.failed {
            return Err(Error::TxnFailed);
        }
        self.pages.as_mut().ok_or(Error::TxnFailed)
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
        let catalog = self.catalog;
        let pages = self.pages()?;
        match btree::get(&*pages, &catalog, name.as_bytes())? {
            Some(bytes) => Ok(Some(decode_header(bytes, &catalog)?)),
            None => Ok(None),
        }
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
        let catalog = self.catalog;
        let pages = self.pages.as_ref().ok_or(Error::TxnFailed)?;
        match btree::get(pages, &catalog, name.as_bytes())? {
            Some(bytes) => {
                let hdr = decode_header(bytes, &catalog)?;
                self.guard
                    .tables
                    .open(name, hdr, TableHeader::properties(bytes));
                Ok(())
            }
            None => Err(Error::TableNotFound(name.to_string())),
        }
    }

    /// Sets the properties of table `name`: up to
    /// [`crate::limits::TABLE_PROPERTIES_BYTES_MAX`] bytes the application attaches to the
    /// table, stored in its catalog entry, kept until set again or the table is deleted, and
    /// read with [`ReadTxn::table_properties`]. The engine does not interpret them (the
    /// `larch` tool keeps there the dump header lines it cannot use, to write them back).
    pub fn set_table_properties(&mut self, name: &str, props: &[u8]) -> Result<()> {
        check_name(name)?;
        if props.len() > TABLE_PROPERTIES_BYTES_MAX {
            return Err(Error::ValueTooLarge {
                len: props.len(),
                max: TABLE_PROPERTIES_BYTES_MAX,
            });
        }
        self.pages()?;
        self.load_state(name)?;
        let state = self.guard.tables.get_mut(name).ok_or(Error::TxnFailed)?;
        if state.props != props {
            state.props = props.to_vec();
            state.dirty = true;
        }
        Ok(())
    }

    /// Creates an empty table. Fails with [`Error::TableExists`] if the name is taken.
    pub fn create_table(&mut self, name: &str) -> Result<()> {
        check_name(name)?;
        if self.lookup(name)?.is_some() {
            return Err(Error::TableExists(name.to_string()));
        }
        self.guarded(|t| {
            let mut catalog = t.catalog;
            let pages = t.pages()?;
            btree::put(
                pages,
                &mut catalog,
                name.as_bytes(),
                &TableHeader::default().encode(),
                PutMode::Upsert,
            )?;
            t.catalog = catalog;
            t.guard.tables.open(name, TableHeader::default(), &[]);
            Ok(())
        })
    }

    /// Creates the table if it does not exist. Returns true if it created it.
    pub fn ensure_table(&mut self, name: &str) -> Result<bool> {
        check_name(name)?;
        if self.lookup(name)?.is_some() {
            return Ok(false);
        }
        self.create_table(name)?;
        Ok(true)
    }

    /// Opens a table for reading and writing.
    pub fn table(&mut self, name: &str) -> Result<WriteTable<'_>> {
        check_name(name)?;
        self.load_state(name)?;
        let state = self.guard.tables.get_mut(name).ok_or(Error::TxnFailed)?;
        let pages = self.pages.as_mut().ok_or(Error::TxnFailed)?;
        if self.failed {
            return Err(Error::TxnFailed);
        }
        Ok(WriteTable::new(pages, state, &mut self.failed))
    }

    /// Deletes a table and frees its pages. Returns false if it did not exist.
    pub fn delete_table(&mut self, name: &str) -> Result<bool> {
        check_name(name)?;
        let Some(hdr) = self.lookup(name)? else {
            return Ok(false);
        };
        self.guarded(|t| {
            let mut catalog = t.catalog;
            let pages = t.pages()?;
            btree::free_tree(pages, &hdr)?;
            btree::delete(pages, &mut catalog, name.as_bytes())?;
            t.catalog = catalog;
            t.guard.tables.remove(name);
            Ok(true)
        })
    }

    /// Names of all tables, as this transaction sees them, sorted.
    pub fn list_tables(&mut self) -> Result<Vec<String>> {
        let catalog = self.catalog;
        list_catalog(&*self.pages()?, catalog)
    }

    /// Commits with the database's default durability.
    pub fn commit(self) -> Result<()> {
        let d = self.durability;
        self.commit_forced(d, false)
    }

    /// Commits with the given durability.
    pub fn commit_with(self, durability: Durability) -> Result<()> {
        self.commit_forced(durability, false)
    }

    /// Aborts: nothing this transaction did becomes visible. Same as dropping it.
    pub fn abort(self) {}

    pub(crate) fn commit_forced(mut self, durability: Durability, force: bool) -> Result<()> {
        if self.failed {
            return Err(Error::TxnFailed);
        }
        let mut catalog = self.catalog;
        let pages = self.pages.as_mut().ok_or(Error::TxnFailed)?;
        let mut value = Vec::new();
        for (name, state) in self.guard.tables.changed() {
            value.clear();
            value.extend_from_slice(&state.hdr.encode());
            value.extend_from_slice(&state.props);
            btree::put(
                pages,
                &mut catalog,
                name.as_bytes(),
                &value,
                PutMode::Upsert,
            )?;
        }
        let pages = self.pages.take().ok_or(Error::TxnFailed)?;
        // An empty commit writes nothing, unless it must make earlier unsynced commits durable.
        let base_durable = self.guard.last_durable_txn == pages.base.meta.txn;
        if pages.is_clean() && !force && (durability == Durability::None || base_durable) {
            let base_txn = pages.base.meta.txn;
            self.guard.carry = Some(pages.finish());
            self.guard.tables.committed(base_txn);
            return Ok(());
        }
        let boot_id = self.db.boot_id();
        let txn = pages.txn;
        db::commit(
            &self.db.inner,
            boot_id,
            &mut self.guard,
            pages,
            catalog,
            durability,
        )?;
        self.guard.tables.committed(txn);
        Ok(())
    }
}

impl Drop for WriteTxn<'_> {
    fn drop(&mut self) {
        if let Some(pages) = self.pages.take() {
            self.guard.carry = Some(pages.abort());
        }
    }
}
