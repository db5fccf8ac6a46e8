//! Savepoints inside a write transaction: points it can roll back to without aborting.
//!
//! A write transaction changes either its pages (copy-on-write, but a page it has copied once
//! is changed in place, and may already be written out) or its batch (one write per key,
//! replaced in place), depending on how it commits (`WriteTxn`'s docs). Neither keeps what a
//! key held before the transaction's own last write, so a savepoint cannot be a copy of
//! either without copying all of it. Instead, while any savepoint is live, every change
//! records how to undo it at the level of the API: the value a key had (or that it had none),
//! a table created, a table deleted with its entries and properties, properties replaced.
//! Rolling back applies those in reverse through the same calls, so it works the same in both
//! kinds of transaction and across a switch from one to the other. The data and counts come
//! back exactly; the pages do not (a rolled-back split stays split), which no reader can see.
//!
//! Cost: nothing while no savepoint is live; with one, a lookup of the old value before each
//! change and a copy of it (a blind `set` gives up its skipped lookup), and, for a range
//! delete, a clear or a deleted table, a copy of every entry it removes.

use crate::error::{Error, Result};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Numbers the write transactions that make savepoints, so that a savepoint of one is refused
/// by another.
static SERIALS: AtomicU64 = AtomicU64::new(1);

/// A point inside a write transaction, made by [`crate::WriteTxn::savepoint`], that
/// [`crate::WriteTxn::rollback_to`] returns the transaction to. It is only a name for the
/// point: dropping it releases nothing ([`crate::WriteTxn::release`] does, or the end of the
/// transaction).
#[derive(Debug)]
pub struct Savepoint {
    serial: u64,
    id: u64,
}

/// How to undo one change.
pub(crate) enum Undo {
    /// Key `key` of `table` held `old` (`None`: no value).
    Key {
        table: Arc<str>,
        key: Vec<u8>,
        old: Option<Vec<u8>>,
    },
    /// The table was created.
    Created(String),
    /// The table was deleted; it had these properties and entries (in key order).
    Deleted {
        table: String,
        props: Vec<u8>,
        entries: Vec<(Vec<u8>, Vec<u8>)>,
    },
    /// The table's properties were `old`.
    Props { table: String, old: Vec<u8> },
}

/// Where a table opened while savepoints are live records the undo of its changes.
pub(crate) struct UndoSink<'t> {
    pub(crate) log: &'t mut Vec<Undo>,
    pub(crate) table: Arc<str>,
}

impl UndoSink<'_> {
    pub(crate) fn key(&mut self, key: Vec<u8>, old: Option<Vec<u8>>) {
        self.log.push(Undo::Key {
            table: self.table.clone(),
            key,
            old,
        });
    }
}

/// A live savepoint: its id, and the length of the undo records when it was made.
pub(crate) type Mark = (u64, usize);

/// A transaction's live savepoints and the undo records since the oldest.
#[derive(Default)]
pub(crate) struct Savepoints {
    /// The transaction's number (`SERIALS`), taken by its first savepoint; 0 until then.
    serial: u64,
    next_id: u64,
    /// Live savepoints, oldest first.
    marks: Vec<Mark>,
    pub(crate) undo: Vec<Undo>,
}

impl Savepoints {
    /// Whether changes are to be recorded: some savepoint is live.
    pub(crate) fn active(&self) -> bool {
        !self.marks.is_empty()
    }

    pub(crate) fn make(&mut self) -> Savepoint {
        if self.serial == 0 {
            self.serial = SERIALS.fetch_add(1, Ordering::Relaxed);
        }
        self.next_id += 1;
        self.marks.push((self.next_id, self.undo.len()));
        Savepoint {
            serial: self.serial,
            id: self.next_id,
        }
    }

    fn position(&self, sp: &Savepoint) -> Result<usize> {
        if sp.serial != self.serial {
            return Err(Error::SavepointInvalid);
        }
        self.marks
            .iter()
            .position(|&(id, _)| id == sp.id)
            .ok_or(Error::SavepointInvalid)
    }

    /// Forgets `sp` and every savepoint made after it, keeping their changes. The undo
    /// records go once no savepoint is left.
    pub(crate) fn release(&mut self, sp: &Savepoint) -> Result<()> {
        let at = self.position(sp)?;
        self.marks.truncate(at);
        if self.marks.is_empty() {
            self.undo = Vec::new();
        }
        Ok(())
    }

    /// Forgets the savepoints made after `sp` (it stays) and returns the undo records since
    /// it, in the order they were made, and the live marks: recording stays off (`active`)
    /// until they are put back (`resume`), so that applying the records records nothing.
    pub(crate) fn unwind(&mut self, sp: &Savepoint) -> Result<(Vec<Undo>, Vec<Mark>)> {
        let at = self.position(sp)?;
        self.marks.truncate(at + 1);
        let mark = self.marks[at].1;
        let undo = self.undo.split_off(mark);
        Ok((undo, std::mem::take(&mut self.marks)))
    }

    pub(crate) fn resume(&mut self, marks: Vec<Mark>) {
        self.marks = marks;
    }
}
