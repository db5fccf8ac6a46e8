//! The write transaction.

use crate::btree;
use crate::engine::catalog::{self, check_name};
use crate::engine::commit::commit;
use crate::engine::{Shared, WriterState};
use crate::error::{Error, Result};
use crate::limits::TABLE_PROPERTIES_BYTES_MAX;
use crate::options::Durability;
use crate::pager::{TableHeader, WritePages};
use crate::table::WriteTable;
use std::sync::MutexGuard;

/// The write transaction. Only one exists at a time per database; readers are not blocked.
/// Dropping it without `commit` aborts it: nothing it did becomes visible.
pub struct WriteTxn<'db> {
    shared: &'db Shared,
    guard: MutexGuard<'db, WriterState>,
    pages: Option<WritePages>,
    catalog: TableHeader,
    durability: Durability,
    failed: bool,
}

impl<'db> WriteTxn<'db> {
    pub(crate) fn new(
        shared: &'db Shared,
        mut guard: MutexGuard<'db, WriterState>,
    ) -> Result<WriteTxn<'db>> {
        if shared.options.read_only {
            return Err(Error::ReadOnly);
        }
        if guard.poisoned {
            return Err(Error::Poisoned);
        }
        let (base, oldest) = shared.writer_base();
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
        let pages = WritePages::new(base, txn, guard.last_durable_txn, carry, btree::check_node);
        guard.tables.begin(base_txn);
        Ok(WriteTxn {
            shared,
            guard,
            pages: Some(pages),
            catalog,
            durability: shared.options.durability,
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

    /// The pages and the writer state, borrowed apart (a put needs both).
    fn parts(&mut self) -> Result<(&mut WritePages, &mut WriterState)> {
        if self.failed {
            return Err(Error::TxnFailed);
        }
        let pages = self.pages.as_mut().ok_or(Error::TxnFailed)?;
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
        let catalog = self.catalog;
        let pages = self.pages()?;
        Ok(catalog::lookup(&*pages, &catalog, name)?.map(|(hdr, _)| hdr))
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
        match catalog::lookup(pages, &catalog, name)? {
            Some((hdr, value)) => {
                self.guard
                    .tables
                    .open(name, hdr, TableHeader::properties(value));
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
        if self.failed {
            return Err(Error::TxnFailed);
        }
        let ws = &mut *self.guard;
        let state = ws.tables.get_mut(name).ok_or(Error::TxnFailed)?;
        let pages = self.pages.as_mut().ok_or(Error::TxnFailed)?;
        Ok(WriteTable::new(
            pages,
            state,
            &mut ws.scratch,
            &mut self.failed,
        ))
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
        catalog::list(&*self.pages()?, catalog)
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
        let pages = self.pages.take().ok_or(Error::TxnFailed)?;
        // An empty commit writes nothing, unless it must make earlier unsynced commits durable.
        let base_durable = self.guard.last_durable_txn == pages.base.meta.txn;
        if pages.is_clean() && !force && (durability == Durability::None || base_durable) {
            let base_txn = pages.base.meta.txn;
            self.guard.carry = Some(pages.finish());
            self.guard.tables.committed(base_txn);
            return Ok(());
        }
        let txn = pages.txn;
        commit(self.shared, &mut self.guard, pages, catalog, durability)?;
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
