//! openraft's log storage and state machine on one Larch database per node.
//!
//! ```text
//! tables (one database per node)
//!   raft_log    log index (u64, big-endian) -> entry (JSON)
//!   raft_meta   "vote" -> Vote, "committed" -> LogId, "last_purged" -> LogId (JSON)
//!   sm_data     application key -> value (the state machine's data)
//!   sm_meta     "applied" -> LogId, "membership" -> StoredMembership,
//!               "snapshot_meta" -> the current snapshot's SnapshotMeta (JSON),
//!               "snapshot_data" -> its data (the map as JSON, as sent to a follower)
//! ```
//!
//! Durability: every write Raft must find after a crash (the vote, appended entries, a
//! truncation or a purge, a snapshot) is one write transaction committed
//! `Durability::Immediate` (Larch's log append and group commit) before the call returns or,
//! for `append`, before its callback is called. The committed index and the applied batches
//! are committed without a sync of their own: openraft allows the committed index to be lost,
//! applies again the committed entries a crash took from the state machine, and Larch's
//! commits become durable in order, so whatever durable commit follows carries them. Reads are read transactions: the log reader and the
//! snapshot builder see a consistent snapshot while appends, truncations and applies go on.
//!
//! The Larch calls are synchronous and short; they run on the calling task, as openraft's own
//! RocksDB stores do.

// openraft's traits return its `StorageError` (over 200 bytes); the helpers return it too.
#![allow(clippy::result_large_err)]

use larchdb::{Database, Durability, Options};
use openraft::storage::{LogFlushed, LogState, RaftLogStorage, RaftStateMachine, Snapshot};
use openraft::{
    AnyError, Entry, EntryPayload, ErrorSubject, ErrorVerb, LogId, OptionalSend, RaftLogReader,
    RaftSnapshotBuilder, SnapshotMeta, StorageError, StorageIOError, StoredMembership, Vote,
};
use serde::{Deserialize, Serialize};
use std::fmt::Debug;
use std::io::Cursor;
use std::ops::{Bound, RangeBounds};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A node's id in the cluster.
pub type NodeId = u64;

/// A write to the replicated key-value map.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    /// Sets `key` to `value`.
    Set { key: String, value: String },
    /// Removes `key`.
    Delete { key: String },
}

/// What applying a request answered: the value it set, if any.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Response {
    pub value: Option<String>,
}

openraft::declare_raft_types!(
    /// The Raft types of a Larch-backed key-value node.
    pub TypeConfig:
        D = Request,
        R = Response,
        NodeId = NodeId,
        Node = openraft::BasicNode,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = Cursor<Vec<u8>>,
        AsyncRuntime = openraft::TokioRuntime,
);

const LOG: &str = "raft_log";
const META: &str = "raft_meta";
const DATA: &str = "sm_data";
const SM_META: &str = "sm_meta";

const VOTE: &[u8] = b"vote";
const COMMITTED: &[u8] = b"committed";
const LAST_PURGED: &[u8] = b"last_purged";
const APPLIED: &[u8] = b"applied";
const MEMBERSHIP: &[u8] = b"membership";
const SNAPSHOT_META: &[u8] = b"snapshot_meta";
const SNAPSHOT_DATA: &[u8] = b"snapshot_data";

type StorageResult<T> = Result<T, StorageError<NodeId>>;
/// A node's membership as the state machine stores it.
pub type Membership = StoredMembership<NodeId, openraft::BasicNode>;

/// Opens (creating it if needed) the database at `path` and returns its log store and state
/// machine, which share it.
pub fn open(path: impl AsRef<Path>) -> StorageResult<(LogStore, StateMachineStore)> {
    open_with(path, Options::default())
}

/// `open`, with the database's options (its memory budget, say). The stores choose each
/// commit's durability themselves; `Options::durability` is not used.
pub fn open_with(
    path: impl AsRef<Path>,
    options: Options,
) -> StorageResult<(LogStore, StateMachineStore)> {
    let db = Database::open(path.as_ref(), options)
        .map_err(|e| StorageIOError::new(ErrorSubject::Store, ErrorVerb::Read, &e))?;
    let db = Arc::new(db);
    write(&db, ErrorSubject::Store, Durability::Immediate, |w| {
        for table in [LOG, META, DATA, SM_META] {
            w.ensure_table(table)
                .map_err(|e| io_write(ErrorSubject::Store, &e))?;
        }
        Ok(())
    })?;
    Ok((
        LogStore { db: db.clone() },
        StateMachineStore {
            db,
            snapshots: SnapshotIds::new(),
        },
    ))
}

/// Microseconds since the Unix epoch (0 on a clock before it).
fn clock_micros() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

fn io_write(subject: ErrorSubject<NodeId>, e: &larchdb::Error) -> StorageError<NodeId> {
    StorageIOError::new(subject, ErrorVerb::Write, AnyError::new(e)).into()
}

fn io_read(subject: ErrorSubject<NodeId>, e: &larchdb::Error) -> StorageError<NodeId> {
    StorageIOError::new(subject, ErrorVerb::Read, AnyError::new(e)).into()
}

fn decode_error(subject: ErrorSubject<NodeId>, e: &serde_json::Error) -> StorageError<NodeId> {
    StorageIOError::new(subject, ErrorVerb::Read, AnyError::new(e)).into()
}

fn encode<T: Serialize>(subject: ErrorSubject<NodeId>, v: &T) -> StorageResult<Vec<u8>> {
    serde_json::to_vec(v)
        .map_err(|e| StorageIOError::new(subject, ErrorVerb::Write, AnyError::new(&e)).into())
}

fn decode<T: for<'a> Deserialize<'a>>(subject: ErrorSubject<NodeId>, b: &[u8]) -> StorageResult<T> {
    serde_json::from_slice(b).map_err(|e| decode_error(subject, &e))
}

/// A value of `table` at `key` in `r`'s snapshot, decoded.
fn value_in<T: for<'a> Deserialize<'a>>(
    r: &larchdb::ReadTxn,
    subject: ErrorSubject<NodeId>,
    table: &str,
    key: &[u8],
) -> StorageResult<Option<T>> {
    let t = r.table(table).map_err(|e| io_read(subject.clone(), &e))?;
    match t.get(key).map_err(|e| io_read(subject.clone(), &e))? {
        Some(b) => Ok(Some(decode(subject, b)?)),
        None => Ok(None),
    }
}

/// `value_in` the newest snapshot.
fn read_value<T: for<'a> Deserialize<'a>>(
    db: &Database,
    subject: ErrorSubject<NodeId>,
    table: &str,
    key: &[u8],
) -> StorageResult<Option<T>> {
    let r = db.begin_read().map_err(|e| io_read(subject.clone(), &e))?;
    value_in(&r, subject, table, key)
}

/// Writes `f`'s changes in one transaction committed with `durability`, and returns what `f`
/// returned.
fn write<R>(
    db: &Database,
    subject: ErrorSubject<NodeId>,
    durability: Durability,
    f: impl FnOnce(&mut larchdb::WriteTxn) -> StorageResult<R>,
) -> StorageResult<R> {
    let mut w = db
        .begin_write()
        .map_err(|e| io_write(subject.clone(), &e))?;
    let out = f(&mut w)?;
    w.commit_with(durability)
        .map_err(|e| io_write(subject, &e))?;
    Ok(out)
}

/// Sets each (key, value) of `sets` in `table`.
fn set_all(
    w: &mut larchdb::WriteTxn,
    table: &str,
    sets: &[(&[u8], Vec<u8>)],
    subject: ErrorSubject<NodeId>,
) -> StorageResult<()> {
    let mut t = w.table(table).map_err(|e| io_write(subject.clone(), &e))?;
    for (k, v) in sets {
        t.set(k, v).map_err(|e| io_write(subject.clone(), &e))?;
    }
    Ok(())
}

/// The log: entries, vote, committed index and the last purged id.
#[derive(Clone)]
pub struct LogStore {
    db: Arc<Database>,
}

impl LogStore {
    /// Writes `f`'s changes in one transaction committed with `durability` (`write`).
    fn write(
        &self,
        subject: ErrorSubject<NodeId>,
        durability: Durability,
        f: impl FnOnce(&mut larchdb::WriteTxn) -> StorageResult<()>,
    ) -> StorageResult<()> {
        write(&self.db, subject, durability, f)
    }

    /// Sets `key` of the meta table to `value`, encoded, committed with `durability`.
    fn set_meta<T: Serialize>(
        &self,
        subject: ErrorSubject<NodeId>,
        key: &[u8],
        value: &T,
        durability: Durability,
    ) -> StorageResult<()> {
        let v = encode(subject.clone(), value)?;
        self.write(subject.clone(), durability, |w| {
            w.table(META)
                .and_then(|mut t| t.set(key, &v))
                .map_err(|e| io_write(subject, &e))
        })
    }

    fn entries<RB: RangeBounds<u64>>(&self, range: RB) -> StorageResult<Vec<Entry<TypeConfig>>> {
        let key = |b: Bound<&u64>| b.map(|i| i.to_be_bytes());
        let (start, end) = (key(range.start_bound()), key(range.end_bound()));
        let r = self
            .db
            .begin_read()
            .map_err(|e| io_read(ErrorSubject::Logs, &e))?;
        let t = r.table(LOG).map_err(|e| io_read(ErrorSubject::Logs, &e))?;
        let mut out = Vec::new();
        for item in t.range::<[u8; 8], _>((start, end)) {
            let (_, v) = item.map_err(|e| io_read(ErrorSubject::Logs, &e))?;
            out.push(decode(ErrorSubject::Logs, v)?);
        }
        Ok(out)
    }
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> StorageResult<Vec<Entry<TypeConfig>>> {
        self.entries(range)
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = Self;

    async fn get_log_state(&mut self) -> StorageResult<LogState<TypeConfig>> {
        // The purge pointer and the last entry from one snapshot.
        let r = self
            .db
            .begin_read()
            .map_err(|e| io_read(ErrorSubject::Logs, &e))?;
        let last_purged: Option<LogId<NodeId>> =
            value_in(&r, ErrorSubject::Logs, META, LAST_PURGED)?;
        let t = r.table(LOG).map_err(|e| io_read(ErrorSubject::Logs, &e))?;
        let last = match t.last().map_err(|e| io_read(ErrorSubject::Logs, &e))? {
            Some((_, v)) => Some(decode::<Entry<TypeConfig>>(ErrorSubject::Logs, v)?.log_id),
            None => last_purged,
        };
        Ok(LogState {
            last_purged_log_id: last_purged,
            last_log_id: last,
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<NodeId>) -> StorageResult<()> {
        self.set_meta(ErrorSubject::Vote, VOTE, vote, Durability::Immediate)
    }

    async fn read_vote(&mut self) -> StorageResult<Option<Vote<NodeId>>> {
        read_value(&self.db, ErrorSubject::Vote, META, VOTE)
    }

    async fn save_committed(&mut self, committed: Option<LogId<NodeId>>) -> StorageResult<()> {
        // Raft may lose it: no sync of its own (the next durable commit carries it).
        self.set_meta(ErrorSubject::Store, COMMITTED, &committed, Durability::None)
    }

    async fn read_committed(&mut self) -> StorageResult<Option<LogId<NodeId>>> {
        Ok(
            read_value::<Option<LogId<NodeId>>>(&self.db, ErrorSubject::Store, META, COMMITTED)?
                .flatten(),
        )
    }

    async fn append<I>(&mut self, entries: I, callback: LogFlushed<TypeConfig>) -> StorageResult<()>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let written = self.write(ErrorSubject::Logs, Durability::Immediate, |w| {
            let mut t = w.table(LOG).map_err(|e| io_write(ErrorSubject::Logs, &e))?;
            for entry in entries {
                let v = encode(ErrorSubject::Log(entry.log_id), &entry)?;
                t.set(&entry.log_id.index.to_be_bytes(), &v)
                    .map_err(|e| io_write(ErrorSubject::Log(entry.log_id), &e))?;
            }
            Ok(())
        });
        // Durable (the commit returned after its log sync): tell Raft, with the failure if any.
        match &written {
            Ok(()) => callback.log_io_completed(Ok(())),
            Err(e) => callback.log_io_completed(Err(std::io::Error::other(e.to_string()))),
        }
        written
    }

    async fn truncate(&mut self, log_id: LogId<NodeId>) -> StorageResult<()> {
        self.write(ErrorSubject::Logs, Durability::Immediate, |w| {
            let mut t = w.table(LOG).map_err(|e| io_write(ErrorSubject::Logs, &e))?;
            t.delete_range(&log_id.index.to_be_bytes()[..]..)
                .map_err(|e| io_write(ErrorSubject::Logs, &e))?;
            Ok(())
        })
    }

    async fn purge(&mut self, log_id: LogId<NodeId>) -> StorageResult<()> {
        let v = encode(ErrorSubject::Logs, &log_id)?;
        // The purge pointer and the deletion in one transaction: a crash leaves both or neither.
        self.write(ErrorSubject::Logs, Durability::Immediate, |w| {
            w.table(META)
                .and_then(|mut t| t.set(LAST_PURGED, &v))
                .map_err(|e| io_write(ErrorSubject::Logs, &e))?;
            let mut t = w.table(LOG).map_err(|e| io_write(ErrorSubject::Logs, &e))?;
            t.delete_range(..=&log_id.index.to_be_bytes()[..])
                .map_err(|e| io_write(ErrorSubject::Logs, &e))?;
            Ok(())
        })
    }
}

/// The state machine's data in a snapshot, as followers are sent it (JSON): every key and
/// value, in key order. Any store of this crate's `TypeConfig` uses it.
#[derive(Serialize, Deserialize)]
pub struct SnapshotData {
    pub entries: Vec<(String, String)>,
}

/// The ids of the snapshots a state machine builds: unique across restarts, since the count
/// starts from the clock (microseconds since the Unix epoch).
#[derive(Clone)]
pub struct SnapshotIds(Arc<AtomicU64>);

impl SnapshotIds {
    /// A count starting from the clock.
    pub fn new() -> Self {
        SnapshotIds(Arc::new(AtomicU64::new(clock_micros())))
    }

    /// The meta of the next snapshot of the state at `applied` with `membership`.
    pub fn next(
        &self,
        applied: Option<LogId<NodeId>>,
        membership: Membership,
    ) -> SnapshotMeta<NodeId, openraft::BasicNode> {
        let n = self.0.fetch_add(1, Ordering::Relaxed) + 1;
        let snapshot_id = match applied {
            Some(id) => format!("{}-{}-{n}", id.leader_id, id.index),
            None => format!("--{n}"),
        };
        SnapshotMeta {
            last_log_id: applied,
            last_membership: membership,
            snapshot_id,
        }
    }
}

impl Default for SnapshotIds {
    fn default() -> Self {
        Self::new()
    }
}

/// The replicated key-value map, its last applied id and membership, and its current
/// snapshot.
#[derive(Clone)]
pub struct StateMachineStore {
    db: Arc<Database>,
    /// The ids of the snapshots this handle builds.
    snapshots: SnapshotIds,
}

impl StateMachineStore {
    /// The value of `key` in the replicated map (a read of this node's state: linearizable
    /// reads go through the leader, `Raft::ensure_linearizable`, first).
    pub fn get(&self, key: &str) -> StorageResult<Option<String>> {
        let r = self
            .db
            .begin_read()
            .map_err(|e| io_read(ErrorSubject::StateMachine, &e))?;
        let t = r
            .table(DATA)
            .map_err(|e| io_read(ErrorSubject::StateMachine, &e))?;
        let v = t
            .get(key.as_bytes())
            .map_err(|e| io_read(ErrorSubject::StateMachine, &e))?;
        Ok(v.map(|b| String::from_utf8_lossy(b).into_owned()))
    }

    /// Every key and value of the replicated map, in key order.
    pub fn entries(&self) -> StorageResult<Vec<(String, String)>> {
        let r = self
            .db
            .begin_read()
            .map_err(|e| io_read(ErrorSubject::StateMachine, &e))?;
        entries_of(&r)
    }
}

fn entries_of(r: &larchdb::ReadTxn) -> StorageResult<Vec<(String, String)>> {
    let t = r
        .table(DATA)
        .map_err(|e| io_read(ErrorSubject::StateMachine, &e))?;
    let mut out = Vec::new();
    for item in t.range::<[u8], _>(..) {
        let (k, v) = item.map_err(|e| io_read(ErrorSubject::StateMachine, &e))?;
        out.push((
            String::from_utf8_lossy(k).into_owned(),
            String::from_utf8_lossy(v).into_owned(),
        ));
    }
    Ok(out)
}

/// The last applied id and membership in `r`'s snapshot.
fn applied_in(r: &larchdb::ReadTxn) -> StorageResult<(Option<LogId<NodeId>>, Membership)> {
    let applied = value_in(r, ErrorSubject::StateMachine, SM_META, APPLIED)?.flatten();
    let membership = value_in(r, ErrorSubject::StateMachine, SM_META, MEMBERSHIP)?;
    Ok((applied, membership.unwrap_or_default()))
}

impl RaftSnapshotBuilder<TypeConfig> for StateMachineStore {
    async fn build_snapshot(&mut self) -> StorageResult<Snapshot<TypeConfig>> {
        // One read transaction: the data and the applied id of the same commit, while applies
        // go on.
        let r = self
            .db
            .begin_read()
            .map_err(|e| io_read(ErrorSubject::StateMachine, &e))?;
        let (applied, membership) = applied_in(&r)?;
        let data = encode(
            ErrorSubject::Snapshot(None),
            &SnapshotData {
                entries: entries_of(&r)?,
            },
        )?;
        drop(r);
        let meta = self.snapshots.next(applied, membership);
        let subject = ErrorSubject::Snapshot(Some(meta.signature()));
        let stored = encode(subject.clone(), &meta)?;
        write(&self.db, subject.clone(), Durability::Immediate, |w| {
            let sets = [(SNAPSHOT_META, stored), (SNAPSHOT_DATA, data.clone())];
            set_all(w, SM_META, &sets, subject)
        })?;
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
        })
    }
}

impl RaftStateMachine<TypeConfig> for StateMachineStore {
    type SnapshotBuilder = Self;

    async fn applied_state(&mut self) -> StorageResult<(Option<LogId<NodeId>>, Membership)> {
        let r = self
            .db
            .begin_read()
            .map_err(|e| io_read(ErrorSubject::StateMachine, &e))?;
        applied_in(&r)
    }

    async fn apply<I>(&mut self, entries: I) -> StorageResult<Vec<Response>>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        // The data, the applied id and the membership of the batch in one commit, without a
        // sync of its own: the entries are already durable in the log (committed), openraft
        // applies again what a crash took (from the applied id to the committed one), and
        // Larch's commits become durable in order, so the next durable commit (the snapshot
        // built from this state, the purge after it, the next append) carries this one.
        write(
            &self.db,
            ErrorSubject::StateMachine,
            Durability::None,
            |w| {
                let mut replies = Vec::new();
                let mut last = None;
                let mut membership = None;
                for entry in entries {
                    let subject = ErrorSubject::Apply(entry.log_id);
                    last = Some(entry.log_id);
                    let reply = match entry.payload {
                        EntryPayload::Blank => Response::default(),
                        EntryPayload::Normal(Request::Set { key, value }) => {
                            w.table(DATA)
                                .and_then(|mut t| t.set(key.as_bytes(), value.as_bytes()))
                                .map_err(|e| io_write(subject, &e))?;
                            Response { value: Some(value) }
                        }
                        EntryPayload::Normal(Request::Delete { key }) => {
                            w.table(DATA)
                                .and_then(|mut t| t.delete(key.as_bytes()))
                                .map_err(|e| io_write(subject, &e))?;
                            Response::default()
                        }
                        EntryPayload::Membership(m) => {
                            membership = Some(StoredMembership::new(Some(entry.log_id), m));
                            Response::default()
                        }
                    };
                    replies.push(reply);
                }
                let mut sets = Vec::new();
                if last.is_some() {
                    sets.push((APPLIED, encode(ErrorSubject::StateMachine, &last)?));
                }
                if let Some(m) = &membership {
                    sets.push((MEMBERSHIP, encode(ErrorSubject::StateMachine, m)?));
                }
                set_all(w, SM_META, &sets, ErrorSubject::StateMachine)?;
                Ok(replies)
            },
        )
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(&mut self) -> StorageResult<Box<Cursor<Vec<u8>>>> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<NodeId, openraft::BasicNode>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> StorageResult<()> {
        let subject = ErrorSubject::Snapshot(Some(meta.signature()));
        let bytes = snapshot.into_inner();
        let data: SnapshotData = decode(subject.clone(), &bytes)?;
        let stored = encode(subject.clone(), meta)?;
        let applied = encode(subject.clone(), &meta.last_log_id)?;
        let membership = encode(subject.clone(), &meta.last_membership)?;
        // The whole state replaced in one durable commit: the old keys go.
        write(&self.db, subject.clone(), Durability::Immediate, |w| {
            let mut t = w.table(DATA).map_err(|e| io_write(subject.clone(), &e))?;
            t.delete_range::<[u8], _>(..)
                .map_err(|e| io_write(subject.clone(), &e))?;
            for (k, v) in &data.entries {
                t.set(k.as_bytes(), v.as_bytes())
                    .map_err(|e| io_write(subject.clone(), &e))?;
            }
            let sets = [
                (APPLIED, applied),
                (MEMBERSHIP, membership),
                (SNAPSHOT_META, stored),
                (SNAPSHOT_DATA, bytes),
            ];
            set_all(w, SM_META, &sets, subject)
        })
    }

    async fn get_current_snapshot(&mut self) -> StorageResult<Option<Snapshot<TypeConfig>>> {
        // The meta and the data from one snapshot of the database.
        let subject = ErrorSubject::Snapshot(None);
        let r = self
            .db
            .begin_read()
            .map_err(|e| io_read(subject.clone(), &e))?;
        let Some(meta) = value_in(&r, subject.clone(), SM_META, SNAPSHOT_META)? else {
            return Ok(None);
        };
        let t = r.table(SM_META).map_err(|e| io_read(subject.clone(), &e))?;
        let data = t
            .get(SNAPSHOT_DATA)
            .map_err(|e| io_read(subject.clone(), &e))?
            .ok_or_else(|| {
                StorageIOError::new(
                    subject,
                    ErrorVerb::Read,
                    AnyError::error("a snapshot's meta without its data"),
                )
            })?;
        Ok(Some(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data.to_vec())),
        }))
    }
}
