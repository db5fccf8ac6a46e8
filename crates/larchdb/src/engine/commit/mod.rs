//! The commit: how a write transaction becomes the newest committed snapshot, and durable.
//!
//! `Txn::commit` (route.rs) decides how a commit goes and serves its durability level once:
//!
//! - **Through the log** (logged.rs): the transaction's batch becomes one record, appended to
//!   the log and inserted into the overlay; published at once, or, `Immediate`, once the
//!   group sync that covers it is done. No page is written.
//! - **By writing pages** (pages.rs): the tree's changed pages are written (into space no
//!   preserved snapshot can reach), then the meta page to the slot that does not hold the
//!   last durable commit, synced when durable; then the snapshot is published to readers in
//!   this process, then in others (the lock file). A checkpoint is such a commit; so is a
//!   large sequential batch, whose record (or, `None`, a mark) goes to the log with it.
//! - **Settling** (settle.rs): a checkpoint's pages are made durable on a thread of their own
//!   when the log needs the room; a mark's pages before the next commit that must be durable.
//!
//! docs/design/write-path.md describes the whole; docs/design/durability.md what each level
//! promises.

mod logged;
mod pages;
mod route;
pub(crate) mod runs;
mod settle;

use super::counts::CountLog;
use super::log::{AppendFailed, NoRoom};
use super::published::Published;
use super::{Disk, Shared, WriterState};
use crate::error::{Error, Result};
use crate::layout::log::{KIND_COMMIT, KIND_MARK};
use crate::options::Durability;
use crate::pager::{Access, Carry, Meta, Snapshot, TableHeader, WritePages};
pub(crate) use logged::{commit_logged, finish_immediate, packing_pays, publish_pending};
pub(crate) use pages::{
    commit, durable_checkpoint_due, log_short, pinned_bytes_bound, publish_written, retire,
    runs_due, write_commit, Written,
};
pub(crate) use runs::{named_at_open, Extents, RunSpace};
pub(crate) use settle::{
    make_durable, mark_unsettled, settle, settle_keeping_log, settle_marks, start_settling,
    Settling,
};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// The log position a commit that writes pages names for replay (`Meta::log_position`): the
/// records before it are in its tree.
pub(crate) enum LogAt<'a> {
    /// The log's end when the meta page is written: the writer's commits, which hold the
    /// write lock (nothing is appended meanwhile).
    End,
    /// A given position: a checkpoint written on its own thread, while the writer appends.
    /// `log_to`: where its tree holds records of commits past `position` (a slice's
    /// checkpoint: other slices hold records from there, `engine::checkpoint`), the end of
    /// the last, up to which the log is made durable before the checkpoint is (a power loss
    /// returning to a tree with part of a commit whose record it lost would be no commit's
    /// state).
    At { position: u64, log_to: Option<u64> },
    /// A logged transaction that writes pages itself (`Txn::route`, a large
    /// sequential batch): its writes, `body`, are appended to the log as commit `pages.txn`'s
    /// record once its pages are written and before its meta page is, so that the log holds
    /// them before any meta page names a position past them (a power loss returns to the last
    /// durable checkpoint and replays them from the log). Made durable as `durability` says
    /// through the log alone: the pages are a checkpoint, synced when the log needs the room
    /// (`Settling`). A log with no room for the record makes the commit durable by its pages
    /// instead, as a commit the log does not hold must be.
    Append {
        body: &'a [u8],
        durability: Durability,
    },
    /// A `Durability::None` transaction that writes pages itself, whose writes are not put
    /// in the log: a mark (`KIND_MARK`, no body) is appended in their place, where `Append`
    /// puts the record. A power loss that takes the pages (not synced) ends the log at the
    /// mark: the open replays up to it and drops what follows, the commits after it made on
    /// top of those pages, none of which was promised durable, since every commit that must
    /// be durable makes the mark's pages durable first (`settle_marks`). Saves the log the
    /// batch's bytes, half of what a sequential load writes, and their copy. A commit that
    /// changes what the log does not hold (a table created or dropped, properties, a batch
    /// the log has no room for) leaves one too, its meta page durable: an open from an older
    /// tree then ends the log there instead of replaying the commits after it onto a tree
    /// without it (`Txn::commit_txn`).
    Mark,
}

/// The log of a handle whose commit goes through it.
fn log_of(shared: &Shared) -> Result<&super::log::GroupLog> {
    shared
        .log
        .as_deref()
        .ok_or_else(|| Error::Internal("a logged commit without a log".into()))
}
