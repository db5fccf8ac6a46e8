//! The engine's half of a write transaction: the write lock, the commit it starts from, its
//! pages (or, through the log, the writer's batch), and what turns it from one into the
//! other. The API's `WriteTxn` (txn/write.rs) is its public face; its commit is
//! `Txn::commit` (engine/commit/route.rs), and a checkpoint or a compaction pass the engine
//! makes itself is a `Txn` of its own.

use super::catalog;
use super::checkpoint;
use super::commit::settle;
use super::published::Published;
use super::savepoint::Savepoints;
use super::{Counters, Shared, WriterState};
use crate::btree;
use crate::error::{Error, Result};
use crate::options::Durability;
use crate::pager::{PageSource, TableHeader, WritePages};
use std::sync::{Arc, MutexGuard};

/// A write transaction, below the API (`crate::WriteTxn`).
pub(crate) struct Txn<'db> {
    pub(crate) shared: &'db Arc<Shared>,
    pub(crate) guard: MutexGuard<'db, WriterState>,
    /// The pages this transaction writes; started by the first change that writes pages
    /// (`start_pages`): a logged transaction reads the tree through its base snapshot and
    /// never starts them. Boxed: a transaction is moved several times, and `WritePages` is
    /// most of a kilobyte (copying it was a quarter of an empty logged commit's time).
    pub(crate) pages: Option<Box<WritePages>>,
    pub(crate) catalog: TableHeader,
    pub(crate) failed: bool,
    /// The commit this transaction starts from: the tree, and the overlay above it.
    pub(crate) base: Arc<Published>,
    /// Writes go to the batch (`WriterState::batch`), not the pages.
    pub(crate) logged: bool,
    /// The base's overlay was applied to the pages (`switch_to_pages`).
    pub(crate) applied: bool,
    /// Made by `checkpoint`: it writes only what the log holds already.
    pub(crate) checkpoint_only: bool,
    /// A commit was attempted (a drop without one is an abort, for the counters).
    pub(crate) committing: bool,
    /// The commit is the application's (`commit_with`), not one the engine makes itself
    /// (`Database::sync`, the `Bounded` flusher): counted in `Stats::commits`.
    pub(crate) counted: bool,
}

impl<'db> Txn<'db> {
    pub(crate) fn new(
        shared: &'db Arc<Shared>,
        mut guard: MutexGuard<'db, WriterState>,
    ) -> Result<Txn<'db>> {
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
        let mut w = Txn {
            shared,
            guard,
            pages: None,
            catalog,
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
    pub(crate) fn start_pages(&mut self) -> Result<&mut WritePages> {
        if self.pages.is_none() {
            if self.guard.checkpoint.is_some() || self.guard.retry.is_some() {
                // A checkpoint thread holds the disk state: wait for it, and start from the
                // snapshot it leaves. One that failed with nothing written is written again
                // first (`checkpoint::Retry`): its frozen overlay is above the tree.
                let done = (|| {
                    checkpoint::finish(self.shared, &mut self.guard, true)?;
                    if self.guard.retry.is_some() {
                        checkpoint::start(self.shared, &mut self.guard, false)?;
                        checkpoint::finish(self.shared, &mut self.guard, true)?;
                    }
                    Ok(())
                })();
                if let Err(e) = done {
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
            let released = self
                .shared
                .release_pending(&mut carry, disk.last_durable_txn, false);
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
            let mut pages = WritePages::new(base, txn, pinned, carry, btree::check_node);
            if self.shared.log.is_some() {
                // Runs it frees wait for a checkpoint whose position is past the log's end
                // (`WritePages::defer_runs`); it frees none deferred before. Its meta page
                // names the pages reserved for large values (`commit::runs`).
                pages.defer_runs(0, self.shared.named_runs.clone());
                // Its commit frees the leftovers, the reservations a closing handle gave up
                // (`RunSpace::close`) among them, and may take a reservation (`runs::reserve`).
                let (pending, tail) = self.shared.runs_named();
                pages.name_reserved(pending.unwrap_or_default(), tail);
            }
            self.pages = Some(Box::new(pages));
        }
        self.pages.as_deref_mut().ok_or(Error::TxnFailed)
    }

    /// Makes the published snapshot this transaction's base, after a checkpoint thread's tree
    /// was put in place (`checkpoint::finish`): the same commits (and, if the checkpoint
    /// corrected entry counts, a commit that did). Only before its pages start; the table
    /// states were cleared with the old tree.
    pub(crate) fn rebase(&mut self) {
        let published = self.shared.writer_base();
        debug_assert!(published.txn() >= self.base.txn());
        debug_assert!(published.frozen.is_none());
        self.catalog = published.snap.meta.catalog;
        self.base = published;
    }

    /// What this transaction reads pages from: its own pages once started, else the base
    /// snapshot (the same pages: a transaction that has not started them changed none).
    pub(crate) fn source(&self) -> &dyn PageSource {
        source_of(&self.pages, &self.base)
    }

    /// Whether a checkpoint is due: the log has grown since the last one by
    /// `Options::checkpoint_bytes` (or more in a large database: `Log::plan`); or, with the
    /// active overlays cut in slices, whose checkpoints each merge one, once they hold as many
    /// bytes, and at least twice `Options::checkpoint_bytes` (`log::overlay_bytes`), or the
    /// log needs room back (`commit::durable_checkpoint_due`; the checkpoint then merges the
    /// slice holding the oldest records).
    ///
    /// `p`: the log's pressure, read by the caller just before (`GroupLog::pressure`).
    pub(crate) fn checkpoint_due(
        shared: &Shared,
        guard: &WriterState,
        p: &crate::engine::log::Pressure,
    ) -> bool {
        let Some(log) = shared.log.as_ref() else {
            return false;
        };
        if !shared.sliced() {
            return log.checkpoint_due(guard.checkpoint_position)
                || super::commit::runs_due(shared, p);
        }
        let overlays =
            crate::engine::log::overlay_bytes(p.checkpoint, shared.options.checkpoint_bytes);
        shared.upper_bytes().0 >= overlays || super::commit::durable_checkpoint_due(shared, *p)
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
                // The runs of versions a newer one replaced in an overlay, as a checkpoint's
                // merge frees them (`checkpoint::replaced_runs`), looked up in the tree before
                // the merge changes its cells.
                let mut replaced = Vec::new();
                for slice in o.slices() {
                    replaced.extend(checkpoint::replaced_runs(pages, t.catalog, &slice.overlay)?);
                }
                t.catalog = checkpoint::merge_records(pages, scratch, t.catalog, &o.all(txn))?;
                for (run, n) in replaced {
                    pages.free_run(run, n)?;
                }
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
                    t.merge(name(table)?, records.len(), |i| records.get(i))?;
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
    pub(crate) fn merge<'r>(
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

    pub(crate) fn pages(&mut self) -> Result<&mut WritePages> {
        if self.failed {
            return Err(Error::TxnFailed);
        }
        self.start_pages()
    }

    /// The pages and the writer state, borrowed apart (a put needs both).
    pub(crate) fn parts(&mut self) -> Result<(&mut WritePages, &mut WriterState)> {
        self.pages()?;
        let pages = self.pages.as_deref_mut().ok_or(Error::TxnFailed)?;
        Ok((pages, &mut *self.guard))
    }

    /// Runs a change that may fail half-way; a failure poisons the transaction.
    pub(crate) fn guarded<T>(&mut self, f: impl FnOnce(&mut Self) -> Result<T>) -> Result<T> {
        let r = f(self);
        if r.is_err() {
            self.failed = true;
        }
        r
    }

    pub(crate) fn lookup(&mut self, name: &str) -> Result<Option<TableHeader>> {
        if let Some(t) = self.guard.tables.get(name) {
            return Ok(Some(t.hdr));
        }
        if self.failed {
            return Err(Error::TxnFailed);
        }
        Ok(catalog::lookup(self.source(), &self.catalog, name)?.map(|(hdr, _)| hdr))
    }

    /// Makes sure the writer's table states hold this transaction's state of existing table
    /// `name`. Returns its slot (`catalog::TableStates::at_mut`).
    pub(crate) fn load_state(&mut self, name: &str) -> Result<usize> {
        if let Some(slot) = self.guard.tables.slot(name) {
            return Ok(slot);
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
                let slot = self
                    .guard
                    .tables
                    .open(name, hdr, TableHeader::properties(value));
                Ok(slot)
            }
            None => Err(Error::TableNotFound(name.to_string())),
        }
    }

    /// Table `name`'s entry count at the base commit, if a commit in its overlays changed
    /// it.
    pub(crate) fn overlay_count(&self, name: &str) -> Result<Option<u64>> {
        let b = &self.base;
        if !b.has_overlay() {
            return Ok(None);
        }
        Ok(match b.catalog.table_id(&b.snap, name.as_bytes())? {
            Some(id) => b.count(id),
            None => None,
        })
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
        self.commit(durability, true)?;
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
        self.commit(Durability::Immediate, true)?;
        Ok(true)
    }
}

/// Pages at or past the returned id are moved by `Txn::relocate`: the pages in use. The
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

impl Txn<'_> {
    /// Gives the pages' state back to the writer.
    pub(crate) fn hand_back(&mut self, carry: crate::pager::Carry) {
        // The disk state is the writer's while pages are started (`start_pages`).
        if let Some(disk) = self.guard.disk.as_mut() {
            disk.carry = Some(carry);
        }
    }
}

impl Drop for Txn<'_> {
    fn drop(&mut self) {
        if !self.committing && !self.checkpoint_only {
            Counters::add(&self.shared.counters.aborts);
        }
        if let Some(pages) = self.pages.take() {
            self.shared
                .counters
                .cold_pages_spilled
                .fetch_add(pages.cold_spilled(), std::sync::atomic::Ordering::Relaxed);
            self.hand_back(pages.abort());
        }
        let spills = self.guard.savepoints.undo.spills;
        if spills > 0 {
            self.shared
                .counters
                .undo_spills
                .fetch_add(spills, std::sync::atomic::Ordering::Relaxed);
        }
        if self.guard.savepoints.active() || !self.guard.savepoints.undo.is_empty() || spills > 0 {
            // What the undo records hold (a deleted table's entries) is not kept past the
            // transaction.
            self.guard.savepoints = Savepoints::default();
        }
    }
}
