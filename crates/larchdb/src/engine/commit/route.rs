//! How a commit goes: through the log, by writing pages, or by writing pages with its record
//! in the log (a large sequential batch); and what its durability level asks of it.

use super::{commit, commit_logged, finish_immediate, mark_unsettled, settle_marks, LogAt};
use crate::btree;
use crate::engine::txn::Txn;
use crate::engine::{Counters, WriterState};
use crate::error::{Error, Result};
use crate::options::Durability;

impl Txn<'_> {
    pub(crate) fn commit(mut self, durability: Durability, force: bool) -> Result<()> {
        self.committing = true;
        if self.failed {
            return Err(Error::TxnFailed);
        }
        if self.logged && (durability != Durability::None || force) {
            // A commit that must be durable, after a mark whose pages may not be: they are
            // made durable first (`commit::settle_marks`), by this commit's own pages while a
            // checkpoint is being written (its meta page is the one to make durable, and the
            // checkpoint thread holds the disk state meanwhile).
            let unsettled = mark_unsettled(&mut self.guard);
            if unsettled {
                Counters::add(&self.shared.counters.marks_settled);
            }
            if unsettled && self.guard.checkpoint.is_some() {
                self.switch_to_pages()?;
                return self.commit_pages(Durability::Immediate, force, LogAt::End);
            }
            if unsettled {
                settle_marks(self.shared, &mut self.guard)?;
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
