//! The same log storage and state machine as larch-raft's, on a peer engine through
//! larch-bench's adapter (`larch_bench::engines::Engine`): the other side of the cluster
//! benchmark (RocksDB, as in openraft's raft-kv-rocksdb example).
//!
//! It keeps larch-raft's schema and durability, so that the two differ only in the engine: one
//! key space, a prefix byte per table,
//!
//! ```text
//!   a<name>     the log's meta: vote, committed, last purged id; the current snapshot's
//!               data and meta (adjacent keys)
//!   b<index>    log entries (u64, big-endian) -> entry (JSON)
//!   c           a marker, always present: the reverse scan from it finds the last entry
//!   c<name>     the state machine's meta: applied id, membership
//!   d<key>      the replicated map
//! ```
//!
//! Every write Raft must find after a crash is one batch committed with `sync` (the engine's
//! WAL sync); the committed index and the applied batches are written without (larch-raft's
//! reasons hold: RocksDB's WAL is written in order, so a synced batch carries those before it). The snapshot reads `c`.. to the end in
//! one scan, which the adapters serve from one iterator (one read transaction): the data and
//! the applied id of the same state. Range deletes (truncate, purge, install) are a scan of the
//! keys and their deletes in the same batch as the rest of the change.

#![allow(clippy::result_large_err)]

use larch_bench::engines::{Engine, Op, Session, WriteOpts};
use larch_raft::{Membership, NodeId, Request, Response, SnapshotData, SnapshotIds, TypeConfig};
use openraft::storage::{LogFlushed, LogState, RaftLogStorage, RaftStateMachine, Snapshot};
use openraft::{
    AnyError, Entry, EntryPayload, ErrorSubject, ErrorVerb, LogId, OptionalSend, RaftLogReader,
    RaftSnapshotBuilder, SnapshotMeta, StorageError, StorageIOError, StoredMembership, Vote,
};
use serde::{Deserialize, Serialize};
use std::fmt::Debug;
use std::io::Cursor;
use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

type StorageResult<T> = Result<T, StorageError<NodeId>>;
/// The applied id, the membership, and the map.
type State = (Option<LogId<NodeId>>, Membership, Vec<(String, String)>);

const VOTE: &[u8] = b"avote";
const COMMITTED: &[u8] = b"acommitted";
const LAST_PURGED: &[u8] = b"alast_purged";
const SNAPSHOT_DATA: &[u8] = b"asnapshot_data";
const SNAPSHOT_META: &[u8] = b"asnapshot_meta";
const LOG: u8 = b'b';
const MARKER: &[u8] = b"c";
const APPLIED: &[u8] = b"capplied";
const MEMBERSHIP: &[u8] = b"cmembership";
const DATA: u8 = b'd';

/// How many keys one scan of a range delete visits at a time.
const SCAN_CHUNK: u64 = 4096;

fn log_key(index: u64) -> [u8; 9] {
    let mut k = [LOG; 9];
    k[1..].copy_from_slice(&index.to_be_bytes());
    k
}

fn data_key(key: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(1 + key.len());
    k.push(DATA);
    k.extend_from_slice(key.as_bytes());
    k
}

fn io(
    subject: ErrorSubject<NodeId>,
    verb: ErrorVerb,
    e: &larch_bench::Error,
) -> StorageError<NodeId> {
    StorageIOError::new(subject, verb, AnyError::new(e)).into()
}

fn encode<T: Serialize>(subject: ErrorSubject<NodeId>, v: &T) -> StorageResult<Vec<u8>> {
    serde_json::to_vec(v)
        .map_err(|e| StorageIOError::new(subject, ErrorVerb::Write, AnyError::new(&e)).into())
}

fn decode<T: for<'a> Deserialize<'a>>(subject: ErrorSubject<NodeId>, b: &[u8]) -> StorageResult<T> {
    serde_json::from_slice(b)
        .map_err(|e| StorageIOError::new(subject, ErrorVerb::Read, AnyError::new(&e)).into())
}

/// One engine shared by the log store and the state machine; a session per call (the
/// adapters' sessions are per thread, and openraft calls from its tasks' threads).
#[derive(Clone)]
struct Shared {
    engine: Arc<dyn Engine>,
}

impl Shared {
    fn session(&self, subject: &ErrorSubject<NodeId>) -> StorageResult<Box<dyn Session + '_>> {
        self.engine
            .session()
            .map_err(|e| io(subject.clone(), ErrorVerb::Read, &e))
    }

    fn get<T: for<'a> Deserialize<'a>>(
        &self,
        subject: ErrorSubject<NodeId>,
        key: &[u8],
    ) -> StorageResult<Option<T>> {
        let mut s = self.session(&subject)?;
        let mut out = Vec::new();
        let found = s
            .get(key, &mut out)
            .map_err(|e| io(subject.clone(), ErrorVerb::Read, &e))?;
        if found {
            Ok(Some(decode(subject, &out)?))
        } else {
            Ok(None)
        }
    }

    /// Commits `ops` as one batch; durable on return when `sync`.
    fn write(
        &self,
        subject: ErrorSubject<NodeId>,
        ops: &[Op<'_>],
        sync: bool,
    ) -> StorageResult<()> {
        let mut s = self.session(&subject)?;
        s.write(
            ops,
            WriteOpts {
                sync,
                append: false,
            },
        )
        .map_err(|e| io(subject, ErrorVerb::Write, &e))
    }

    /// Visits every (key, value) from `start` while `keep(key)`, in key order, through scans
    /// of `SCAN_CHUNK` keys.
    fn scan_while(
        &self,
        subject: &ErrorSubject<NodeId>,
        start: &[u8],
        keep: impl Fn(&[u8]) -> bool,
        mut f: impl FnMut(&[u8], &[u8]),
    ) -> StorageResult<()> {
        let mut s = self.session(subject)?;
        let mut from = start.to_vec();
        let mut skip_first = false;
        loop {
            let (mut seen, mut done, mut last) = (0u64, false, None);
            s.scan(Some(&from), false, SCAN_CHUNK, &mut |k, v| {
                seen += 1;
                // The previous chunk's last key, visited again (if it is still there).
                if done || (skip_first && seen == 1 && k == from.as_slice()) {
                    return;
                }
                if !keep(k) {
                    done = true;
                    return;
                }
                f(k, v);
                last = Some(k.to_vec());
            })
            .map_err(|e| io(subject.clone(), ErrorVerb::Read, &e))?;
            match last {
                Some(k) if !done && seen == SCAN_CHUNK => {
                    from = k;
                    skip_first = true;
                }
                _ => return Ok(()),
            }
        }
    }

    /// The keys from `start` while `keep(key)`.
    fn keys_while(
        &self,
        subject: &ErrorSubject<NodeId>,
        start: &[u8],
        keep: impl Fn(&[u8]) -> bool,
    ) -> StorageResult<Vec<Vec<u8>>> {
        let mut keys = Vec::new();
        self.scan_while(subject, start, keep, |k, _| keys.push(k.to_vec()))?;
        Ok(keys)
    }
}

/// Opens the store on `engine` (an empty or earlier database of this store).
pub fn open(engine: Arc<dyn Engine>) -> StorageResult<(PeerLogStore, PeerStateMachine)> {
    let shared = Shared { engine };
    shared.write(ErrorSubject::Store, &[Op::Put(MARKER, b"")], true)?;
    Ok((
        PeerLogStore {
            shared: shared.clone(),
        },
        PeerStateMachine {
            shared,
            snapshots: SnapshotIds::new(),
        },
    ))
}

/// The log: entries, vote, committed index and the last purged id.
#[derive(Clone)]
pub struct PeerLogStore {
    shared: Shared,
}

impl RaftLogReader<TypeConfig> for PeerLogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> StorageResult<Vec<Entry<TypeConfig>>> {
        let start = match range.start_bound() {
            Bound::Included(&i) => i,
            Bound::Excluded(&i) => i.saturating_add(1),
            Bound::Unbounded => 0,
        };
        let mut raw = Vec::new();
        let end = range.end_bound().cloned();
        self.shared.scan_while(
            &ErrorSubject::Logs,
            &log_key(start),
            |k| {
                k.len() == 9
                    && k[0] == LOG
                    && match end {
                        Bound::Included(e) => index_of(k) <= e,
                        Bound::Excluded(e) => index_of(k) < e,
                        Bound::Unbounded => true,
                    }
            },
            |_, v| raw.push(v.to_vec()),
        )?;
        raw.iter().map(|v| decode(ErrorSubject::Logs, v)).collect()
    }
}

fn index_of(k: &[u8]) -> u64 {
    let mut b = [0; 8];
    b.copy_from_slice(&k[1..9]);
    u64::from_be_bytes(b)
}

fn is_log_key(k: &[u8]) -> bool {
    k.len() == 9 && k[0] == LOG
}

impl RaftLogStorage<TypeConfig> for PeerLogStore {
    type LogReader = Self;

    async fn get_log_state(&mut self) -> StorageResult<LogState<TypeConfig>> {
        let last_purged: Option<LogId<NodeId>> =
            self.shared.get(ErrorSubject::Logs, LAST_PURGED)?;
        // The marker, then the greatest key below it: the last entry, if the log holds one.
        let mut last_raw = None;
        let mut s = self.shared.session(&ErrorSubject::Logs)?;
        s.scan(Some(MARKER), true, 2, &mut |k, v| {
            if is_log_key(k) {
                last_raw = Some(v.to_vec());
            }
        })
        .map_err(|e| io(ErrorSubject::Logs, ErrorVerb::Read, &e))?;
        let last = match last_raw {
            Some(v) => Some(decode::<Entry<TypeConfig>>(ErrorSubject::Logs, &v)?.log_id),
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
        let v = encode(ErrorSubject::Vote, vote)?;
        self.shared
            .write(ErrorSubject::Vote, &[Op::Put(VOTE, &v)], true)
    }

    async fn read_vote(&mut self) -> StorageResult<Option<Vote<NodeId>>> {
        self.shared.get(ErrorSubject::Vote, VOTE)
    }

    async fn save_committed(&mut self, committed: Option<LogId<NodeId>>) -> StorageResult<()> {
        let v = encode(ErrorSubject::Store, &committed)?;
        self.shared
            .write(ErrorSubject::Store, &[Op::Put(COMMITTED, &v)], false)
    }

    async fn read_committed(&mut self) -> StorageResult<Option<LogId<NodeId>>> {
        Ok(self
            .shared
            .get::<Option<LogId<NodeId>>>(ErrorSubject::Store, COMMITTED)?
            .flatten())
    }

    async fn append<I>(&mut self, entries: I, callback: LogFlushed<TypeConfig>) -> StorageResult<()>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut encoded = Vec::new();
        for entry in entries {
            let v = encode(ErrorSubject::Log(entry.log_id), &entry)?;
            encoded.push((log_key(entry.log_id.index), v));
        }
        let ops: Vec<Op<'_>> = encoded.iter().map(|(k, v)| Op::Put(k, v)).collect();
        let written = self.shared.write(ErrorSubject::Logs, &ops, true);
        match &written {
            Ok(()) => callback.log_io_completed(Ok(())),
            Err(e) => callback.log_io_completed(Err(std::io::Error::other(e.to_string()))),
        }
        written
    }

    async fn truncate(&mut self, log_id: LogId<NodeId>) -> StorageResult<()> {
        let keys =
            self.shared
                .keys_while(&ErrorSubject::Logs, &log_key(log_id.index), is_log_key)?;
        let ops: Vec<Op<'_>> = keys.iter().map(|k| Op::Delete(k)).collect();
        self.shared.write(ErrorSubject::Logs, &ops, true)
    }

    async fn purge(&mut self, log_id: LogId<NodeId>) -> StorageResult<()> {
        let v = encode(ErrorSubject::Logs, &log_id)?;
        let keys = self
            .shared
            .keys_while(&ErrorSubject::Logs, &log_key(0), |k| {
                is_log_key(k) && index_of(k) <= log_id.index
            })?;
        // The purge pointer and the deletion in one batch.
        let mut ops: Vec<Op<'_>> = vec![Op::Put(LAST_PURGED, &v)];
        ops.extend(keys.iter().map(|k| Op::Delete(k)));
        self.shared.write(ErrorSubject::Logs, &ops, true)
    }
}

/// The replicated map, its applied id and membership, and its current snapshot.
#[derive(Clone)]
pub struct PeerStateMachine {
    shared: Shared,
    snapshots: SnapshotIds,
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

impl PeerStateMachine {
    /// The value of `key` in this node's copy of the map.
    pub fn get(&self, key: &str) -> StorageResult<Option<String>> {
        let mut s = self.shared.session(&ErrorSubject::StateMachine)?;
        let mut out = Vec::new();
        let found = s
            .get(&data_key(key), &mut out)
            .map_err(|e| io(ErrorSubject::StateMachine, ErrorVerb::Read, &e))?;
        Ok(found.then(|| lossy(&out)))
    }

    /// Every key and value of this node's copy of the map, in key order.
    pub fn entries(&self) -> StorageResult<Vec<(String, String)>> {
        let mut out = Vec::new();
        self.shared.scan_while(
            &ErrorSubject::StateMachine,
            &[DATA],
            |k| k.first() == Some(&DATA),
            |k, v| out.push((lossy(&k[1..]), lossy(v))),
        )?;
        Ok(out)
    }

    /// The applied id, the membership and (when `with_data`) the map, from one scan.
    fn state(&self, with_data: bool) -> StorageResult<State> {
        let (mut applied, mut membership, mut data) = (None, None, Vec::new());
        let subject = ErrorSubject::StateMachine;
        let mut s = self.shared.session(&subject)?;
        let mut failed = None;
        // One scan of `c`.. to the end: one iterator, one state.
        let limit = if with_data { u64::MAX } else { 3 };
        s.scan(Some(MARKER), false, limit, &mut |k, v| {
            if k == APPLIED {
                applied = Some(v.to_vec());
            } else if k == MEMBERSHIP {
                membership = Some(v.to_vec());
            } else if with_data && k.first() == Some(&DATA) {
                data.push((lossy(&k[1..]), lossy(v)));
            } else if k.first() != Some(&MARKER[0]) && k.first() != Some(&DATA) {
                failed = Some(lossy(k));
            }
        })
        .map_err(|e| io(subject.clone(), ErrorVerb::Read, &e))?;
        if let Some(k) = failed {
            return Err(StorageIOError::new(
                subject,
                ErrorVerb::Read,
                AnyError::error(format!("unexpected key {k:?} in the state machine")),
            )
            .into());
        }
        let applied = match applied {
            Some(v) => decode::<Option<LogId<NodeId>>>(subject.clone(), &v)?,
            None => None,
        };
        let membership = match membership {
            Some(v) => decode(subject, &v)?,
            None => Membership::default(),
        };
        Ok((applied, membership, data))
    }
}

impl RaftSnapshotBuilder<TypeConfig> for PeerStateMachine {
    async fn build_snapshot(&mut self) -> StorageResult<Snapshot<TypeConfig>> {
        let (applied, membership, entries) = self.state(true)?;
        let data = encode(ErrorSubject::Snapshot(None), &SnapshotData { entries })?;
        let meta = self.snapshots.next(applied, membership);
        let subject = ErrorSubject::Snapshot(Some(meta.signature()));
        let stored = encode(subject.clone(), &meta)?;
        self.shared.write(
            subject,
            &[
                Op::Put(SNAPSHOT_META, &stored),
                Op::Put(SNAPSHOT_DATA, &data),
            ],
            true,
        )?;
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
        })
    }
}

impl RaftStateMachine<TypeConfig> for PeerStateMachine {
    type SnapshotBuilder = Self;

    async fn applied_state(&mut self) -> StorageResult<(Option<LogId<NodeId>>, Membership)> {
        let (applied, membership, _) = self.state(false)?;
        Ok((applied, membership))
    }

    async fn apply<I>(&mut self, entries: I) -> StorageResult<Vec<Response>>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let (mut replies, mut owned, mut last, mut membership) =
            (Vec::new(), Vec::new(), None, None);
        for entry in entries {
            last = Some(entry.log_id);
            match entry.payload {
                EntryPayload::Blank => replies.push(Response::default()),
                EntryPayload::Normal(Request::Set { key, value }) => {
                    owned.push((data_key(&key), Some(value.clone().into_bytes())));
                    replies.push(Response { value: Some(value) });
                }
                EntryPayload::Normal(Request::Delete { key }) => {
                    owned.push((data_key(&key), None));
                    replies.push(Response::default());
                }
                EntryPayload::Membership(m) => {
                    membership = Some(StoredMembership::new(Some(entry.log_id), m));
                    replies.push(Response::default());
                }
            }
        }
        let subject = ErrorSubject::StateMachine;
        let applied = encode(subject.clone(), &last)?;
        let membership = membership
            .map(|m| encode(subject.clone(), &m))
            .transpose()?;
        let mut ops: Vec<Op<'_>> = owned
            .iter()
            .map(|(k, v)| match v {
                Some(v) => Op::Put(k, v),
                None => Op::Delete(k),
            })
            .collect();
        if last.is_some() {
            ops.push(Op::Put(APPLIED, &applied));
        }
        if let Some(m) = &membership {
            ops.push(Op::Put(MEMBERSHIP, m));
        }
        // Not synced, as in larch-raft: the WAL is one file written in order, so the next
        // synced batch carries this one, and openraft applies again what a crash took.
        self.shared.write(subject, &ops, false)?;
        Ok(replies)
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
        let old = self
            .shared
            .keys_while(&subject, &[DATA], |k| k.first() == Some(&DATA))?;
        let new: Vec<(Vec<u8>, &str)> = data
            .entries
            .iter()
            .map(|(k, v)| (data_key(k), v.as_str()))
            .collect();
        // The whole state replaced in one synced batch: the old keys go.
        let mut ops: Vec<Op<'_>> = old.iter().map(|k| Op::Delete(k)).collect();
        ops.extend(new.iter().map(|(k, v)| Op::Put(k, v.as_bytes())));
        ops.extend([
            Op::Put(APPLIED, &applied),
            Op::Put(MEMBERSHIP, &membership),
            Op::Put(SNAPSHOT_META, &stored),
            Op::Put(SNAPSHOT_DATA, &bytes),
        ]);
        self.shared.write(subject, &ops, true)
    }

    async fn get_current_snapshot(&mut self) -> StorageResult<Option<Snapshot<TypeConfig>>> {
        // The data and the meta (adjacent keys) from one scan: one iterator, one state.
        let subject = ErrorSubject::Snapshot(None);
        let (mut meta, mut data) = (None, None);
        let mut s = self.shared.session(&subject)?;
        s.scan(Some(SNAPSHOT_DATA), false, 2, &mut |k, v| {
            if k == SNAPSHOT_DATA {
                data = Some(v.to_vec());
            } else if k == SNAPSHOT_META {
                meta = Some(v.to_vec());
            }
        })
        .map_err(|e| io(subject.clone(), ErrorVerb::Read, &e))?;
        match (meta, data) {
            (Some(meta), Some(data)) => Ok(Some(Snapshot {
                meta: decode(subject, &meta)?,
                snapshot: Box::new(Cursor::new(data)),
            })),
            (None, None) => Ok(None),
            _ => Err(StorageIOError::new(
                subject,
                ErrorVerb::Read,
                AnyError::error("a snapshot's meta without its data, or the reverse"),
            )
            .into()),
        }
    }
}
