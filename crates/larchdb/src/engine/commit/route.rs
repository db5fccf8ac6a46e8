//! How a commit goes: through the log, by writing pages, or by writing pages with its record
//! in the log (a large sequential batch); and what its durability level asks of it.

use super::{commit, commit_logged, finish_immediate, mark_unsettled, settle_marks, LogAt};
use crate::btree;
use crate::engine::published::Published;
use crate::engine::txn::Txn;
use crate::engine::{Counters, WriterState};
use crate::error::{Error, Result};
use crate::options::Durability;
use std::sync::Arc;

/// A commit made (`Txn::route`), with what is left to serve its durability once the write lock
/// is let go (`Txn::commit`).
struct Committed {
    how: How,
    /// The durability the commit is to have: the one asked for, or the one its route gave it.
    durability: Durability,
}

/// How a commit went.
enum How {
    /// Through the log (`commit_logged`). `wrote`: it held writes. `wait`: an `Immediate`
    /// commit's log position to sync to and snapshot to publish then (`LoggedCommit::wait`).
    Log {
        wrote: bool,
        wait: Option<(u64, Arc<Published>)>,
    },
    /// A large sequential batch's pages, with its record or a mark in the log
    /// (`commit_direct`): the log makes it durable.
    Direct,
    /// Pages and a meta page (`commit_txn`).
    Pages,
}

impl Txn<'_> {
    /// Commits: decides how (`route`), lets the write lock go, then serves the durability
    /// level. The one place a commit's durability is dispatched:
    ///
    /// - through the log, `Immediate`: the committer waits for the log's group sync up to its
    ///   record, then publishes (`finish_immediate`); the next transaction runs meanwhile and
    ///   its commit can share the sync;
    /// - `Bounded`: the flusher is told, and syncs within `Options::bounded_delay`;
    /// - `None`, or a commit that was made durable by its own pages: nothing more.
    ///
    /// `force`: the commit is written even if empty, and made durable (`Database::sync`, a
    /// checkpoint).
    pub(crate) fn commit(mut self, durability: Durability, force: bool) -> Result<()> {
        self.committing = true;
        if self.failed {
            return Err(Error::TxnFailed);
        }
        let Committed { how, durability } = self.route(durability, force)?;
        let shared = self.shared;
        drop(self);
        if let How::Log { wrote: true, .. } = how {
            shared.idle.note(shared);
        }
        match (how, durability) {
            (
                How::Log {
                    wait: Some((end, published)),
                    ..
                },
                _,
            ) => finish_immediate(shared, end, published, true),
            (How::Log { .. } | How::Direct, Durability::Bounded) => {
                shared.flusher.note_logged(shared)
            }
            (How::Pages, Durability::Bounded) => shared.flusher.note(shared, false),
            _ => Ok(()),
        }
    }

    /// How a commit goes, decided in one place:
    ///
    /// 1. A commit that must be durable, after a `None` batch's mark whose pages may not be,
    ///    makes them durable first (`settle_marks`); while a checkpoint is being written, by
    ///    writing its own pages durably (its meta page is the one to make durable, and the
    ///    checkpoint thread holds the disk state meanwhile).
    /// 2. A logged transaction whose batch fits the log:
    ///    - a large sequential batch, when pages are free to write, writes its pages with its
    ///      record in the log (`commit_direct`);
    ///    - any other appends its record to the log and the overlay (`commit_logged`), unless
    ///      the log has no room.
    /// 3. Otherwise it writes pages (`commit_txn`), after the overlay's records are applied
    ///    to the tree (`switch_to_pages`: a checkpoint on the writer's thread).
    fn route(&mut self, durability: Durability, force: bool) -> Result<Committed> {
        if self.logged && (durability != Durability::None || force) {
            let unsettled = mark_unsettled(&mut self.guard);
            if unsettled {
                Counters::add(&self.shared.counters.marks_settled);
            }
            if unsettled && self.guard.checkpoint.is_some() {
                self.switch_to_pages()?;
                return self.commit_txn(Durability::Immediate, force, LogAt::End);
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
                    return Ok(Committed {
                        how: How::Log {
                            wrote,
                            wait: c.wait,
                        },
                        durability,
                    });
                }
            }
            // The changed tables' counts were kept for the overlay; the tree's are rebuilt.
            self.switch_to_pages()?;
        }
        self.commit_txn(durability, force, LogAt::End)
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
    fn commit_direct(&mut self, durability: Durability) -> Result<Committed> {
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
        Ok(Committed {
            how: How::Direct,
            durability,
        })
    }

    /// Commits a transaction that writes pages (`commit::commit`), naming the log position
    /// `log_at` says. The durability it returns is the one the commit had: `Immediate` where
    /// the log cannot stand for it, `None` for an empty commit that wrote nothing.
    fn commit_txn(
        &mut self,
        durability: Durability,
        force: bool,
        log_at: LogAt<'_>,
    ) -> Result<Committed> {
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
            return Ok(Committed {
                how: How::Pages,
                durability: Durability::None,
            });
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
        Ok(Committed {
            how: How::Pages,
            durability,
        })
    }
}

/// Whether a logged transaction's batch is a sequential load large enough to commit by
/// writing pages (`Txn::commit_direct`): `DIRECT_APPENDS_MIN` writes or more, nearly all
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
