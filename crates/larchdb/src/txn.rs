//! Transactions. A `ReadTxn` owns a snapshot; a `WriteTxn` owns the write lock and the dirty
//! pages of the next snapshot.

use crate::btree::{self, PutMode};
use crate::db::{self, oldest_reader, Database, Durability, Inner, WriterState};
use crate::error::{Error, Result};
use crate::limits::TABLE_NAME_BYTES_MAX;
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
    pub(crate) fn new(inner: Arc<Inner>) -> ReadTxn {
        let snap = {
            let mut rs = inner.read_state();
            let snap = rs.current.clone();
            *rs.readers.entry(snap.meta.txn).or_insert(0) += 1;
            snap
        };
        ReadTxn { inner, snap }
    }

    /// Moves this transaction to the newest committed snapshot, like LMDB's
    /// `mdb_txn_reset` + `mdb_txn_renew`. Costs one atomic load when nothing was committed
    /// since; otherwise the same short registration as `begin_read`.
    pub fn renew(&mut self) {
        if self
            .inner
            .current_txn
            .load(std::sync::atomic::Ordering::Acquire)
            == self.snap.meta.txn
        {
            return;
        }
        let mut rs = self.inner.read_state();
        if rs.current.meta.txn == self.snap.meta.txn {
            return;
        }
        let old = self.snap.meta.txn;
        if let Some(n) = rs.readers.get_mut(&old) {
            *n -= 1;
            if *n == 0 {
                rs.readers.remove(&old);
            }
        }
        let snap = rs.current.clone();
        *rs.readers.entry(snap.meta.txn).or_insert(0) += 1;
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
}

impl Drop for ReadTxn {
    fn drop(&mut self) {
        let mut rs = self.inner.read_state();
        let txn = self.snap.meta.txn;
        if let Some(n) = rs.readers.get_mut(&txn) {
            *n -= 1;
            if *n == 0 {
                rs.readers.remove(&txn);
            }
        }
    }
}

/// Per-table state inside a write transaction.
pub(crate) struct TableState {
    pub(crate) hdr: TableHeader,
    pub(crate) dirty: bool,
    /// Where the last append landed, for the next one (see `btree::append`).
    pub(crate) append_hint: Option<btree::AppendHint>,
}

/// The write transaction. Only one exists at a time per database; readers are not blocked.
/// Dropping it without `commit` aborts it: nothing it did becomes visible.
pub struct WriteTxn<'db> {
    db: &'db Database,
    guard: MutexGuard<'db, WriterState>,
    pages: Option<WritePages>,
    catalog: TableHeader,
    tables: HashMap<String, TableState>,
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
        let (base, oldest) = {
            let rs = inner.read_state();
            (rs.current.clone(), oldest_reader(&rs))
        };
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
        let txn = base.meta.txn + 1;
        let catalog = base.meta.catalog;
        let pages = WritePages::new(base, txn, guard.last_durable_txn, carry);
        Ok(WriteTxn {
            db,
            guard,
            pages: Some(pages),
            catalog,
            tables: HashMap::new(),
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
        if let Some(t) = self.tables.get(name) {
            return Ok(Some(t.hdr));
        }
        let catalog = self.catalog;
        let pages = self.pages()?;
        match btree::get(&*pages, &catalog, name.as_bytes())? {
            Some(bytes) => Ok(Some(decode_header(bytes, &catalog)?)),
            None => Ok(None),
        }
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
            t.tables.insert(
                name.to_string(),
                TableState {
                    hdr: TableHeader::default(),
                    dirty: false,
                    append_hint: None,
                },
            );
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
        let hdr = self
            .lookup(name)?
            .ok_or_else(|| Error::TableNotFound(name.to_string()))?;
        if !self.tables.contains_key(name) {
            self.tables.insert(
                name.to_string(),
                TableState {
                    hdr,
                    dirty: false,
                    append_hint: None,
                },
            );
        }
        let state = self.tables.get_mut(name).ok_or(Error::TxnFailed)?;
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
            t.tables.remove(name);
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
        let mut updates: Vec<(String, TableHeader)> = self
            .tables
            .iter()
            .filter(|(_, s)| s.dirty)
            .map(|(n, s)| (n.clone(), s.hdr))
            .collect();
        updates.sort_by(|a, b| a.0.cmp(&b.0));
        let pages = self.pages.as_mut().ok_or(Error::TxnFailed)?;
        for (name, hdr) in updates {
            btree::put(
                pages,
                &mut catalog,
                name.as_bytes(),
                &hdr.encode(),
                PutMode::Upsert,
            )?;
        }
        let pages = self.pages.take().ok_or(Error::TxnFailed)?;
        // An empty commit writes nothing, unless it must make earlier unsynced commits durable.
        let base_durable = self.guard.last_durable_txn == pages.base.meta.txn;
        if pages.is_clean() && !force && (durability == Durability::None || base_durable) {
            self.guard.carry = Some(pages.finish());
            return Ok(());
        }
        let boot_id = self.db.boot_id();
        db::commit(
            &self.db.inner,
            boot_id,
            &mut self.guard,
            pages,
            catalog,
            durability,
        )
    }
}

impl Drop for WriteTxn<'_> {
    fn drop(&mut self) {
        if let Some(pages) = self.pages.take() {
            self.guard.carry = Some(pages.abort());
        }
    }
}
