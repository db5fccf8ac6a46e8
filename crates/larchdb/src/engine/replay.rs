//! Replay: the log's records after a tree's checkpoint, applied to a new overlay on top of
//! it. One room for both who replay: an open after a crash (`Shared::open`, reading the log
//! from the checkpoint the chosen meta page names) and a read-only handle following a writer
//! in another process (`Follower`, reading what the writer appended since).
//!
//! The log is read on a thread of its own (`Log::read_back`) and handed over in chunks
//! (`ReadBack`); records are decoded a few ahead of the one applied, their keys' overlay slots
//! prefetched, and applied in commit order. A mark newer than the tree ends the replay
//! (docs/design/durability.md, "Damage is never silent").
//!
//! An open's replay applies records while the overlay holds at most its share of the memory
//! budget (`cap`, `Replay::with_cap`), and the rest in rounds once the handle is made
//! (`Shared::finish_replay`, `checkpoint::replay_round`).

use super::catalog::{self, CatalogCache};
use super::counts::CountLog;
use super::log::{Log, LogSource, ReadBack, Record};
use super::published::Published;
use super::upper::batch;
use super::upper::overlay::{Lookup, Overlay, Visible};
use super::upper::slices::Slices;
use crate::btree;
use crate::error::{Error, Result};
use crate::layout::log::{KIND_COMMIT, KIND_MARK};
use crate::pager::{Meta, Snapshot, TableHeader};
use crate::storage::Storage;
use std::collections::hash_map::{Entry, HashMap};
use std::collections::VecDeque;
use std::sync::Arc;

/// The error for a commit `meta` that names a log where there is none.
pub(crate) fn no_log(meta: &Meta) -> Error {
    Error::CorruptedLog {
        position: meta.log_position,
        reason: "the last commit says commits after it are in the log, and there is no log".into(),
    }
}

/// Records decoded this far ahead of the one being replayed, their keys' overlay slots
/// prefetched: the cache miss of each key's first probe (a large overlay's slot array is read
/// at random) was the largest part of replay (19% of a 1M-record open's samples), and the
/// lookahead overlaps it.
const REPLAY_LOOKAHEAD: usize = 16;
/// Keys of one record prefetched at most (a large batch's later keys are not).
const REPLAY_PREFETCH_KEYS: usize = 4;

/// A commit record decoded for replay: its txn, and each table's number and header (as of
/// the checkpoint) with its records, and those of its records whose values are in runs
/// (`batch::DecodedTable::runs`).
type Decoded<'r> = (u64, u64, Vec<DecodedWrites<'r>>);

/// One table's part of a decoded commit record (`Decoded`).
type DecodedWrites<'r> = (u64, TableHeader, Vec<Visible<'r>>, Vec<(usize, u32, u64)>);

/// Decodes commit records for replay, in log order: checks that their txns rise, resolves
/// the tables they name (by name, once each) and prefetches their first keys' slots in
/// `overlay`.
struct Decoder<'s> {
    snap: &'s Snapshot,
    catalog: &'s CatalogCache,
    tables: HashMap<&'s [u8], (u64, TableHeader)>,
    /// The table the last record named first (most records name the one table most
    /// commits write): found without hashing its name.
    last: Option<(&'s [u8], u64, TableHeader)>,
    txn: u64,
}

impl<'s> Decoder<'s> {
    fn decode(&mut self, rec: &'s Record, overlay: &Overlay) -> Result<Decoded<'s>> {
        if rec.txn <= self.txn {
            return Err(Error::CorruptedLog {
                position: rec.position,
                reason: format!("commit {} after commit {}", rec.txn, self.txn),
            });
        }
        self.txn = rec.txn;
        let mut out = Vec::new();
        for t in batch::decode(&rec.body, rec.position)? {
            let (id, hdr) = match self.last {
                Some((name, id, hdr)) if name == t.name => (id, hdr),
                _ => {
                    let (id, hdr) = self.table(rec, t.name)?;
                    self.last = Some((t.name, id, hdr));
                    (id, hdr)
                }
            };
            for &(key, _) in t.records.iter().take(REPLAY_PREFETCH_KEYS) {
                overlay.prefetch_slot(id, key);
            }
            out.push((id, hdr, t.records, t.runs));
        }
        Ok((rec.txn, rec.position, out))
    }

    /// The number and header (as of the checkpoint) of the table `name`, which `rec` writes:
    /// looked up in the tree once per name.
    fn table(&mut self, rec: &Record, name: &'s [u8]) -> Result<(u64, TableHeader)> {
        match self.tables.entry(name) {
            Entry::Occupied(e) => Ok(*e.get()),
            Entry::Vacant(e) => {
                let snap = self.snap;
                let found = match std::str::from_utf8(name).ok() {
                    Some(n) => catalog::lookup(snap, &snap.meta.catalog, n)?,
                    None => None,
                };
                let (Some((hdr, _)), Some(id)) = (found, self.catalog.table_id(snap, name)?) else {
                    return Err(Error::CorruptedLog {
                        position: rec.position,
                        reason: format!(
                            "commit {} writes table {:?}, which the checkpoint does not have",
                            rec.txn,
                            String::from_utf8_lossy(name)
                        ),
                    });
                };
                Ok(*e.insert((id, hdr)))
            }
        }
    }
}

/// The values of a decoded record's writes whose commit wrote them into runs: for each, the
/// run's first page and pages, and its table, key and value, in the order of the writes. A
/// run is read from the data file (`data`) as it is, not through the snapshot: it may be
/// newer than the tree, and lie past its pages. It must check out (docs/design/large-values.md):
/// its header names it, an overflow run of the record's commit of the record's length, and
/// its checksum holds; otherwise the record is damaged, `CorruptedLog` at `position`.
#[allow(clippy::type_complexity)]
fn read_runs<'d>(
    data: Option<&dyn Storage>,
    snap: &Snapshot,
    txn: u64,
    position: u64,
    decoded: &[DecodedWrites<'d>],
) -> Result<Vec<(u64, u64, (u64, &'d [u8], Box<[u8]>))>> {
    let page_bytes = crate::pager::PageSource::page_bytes(snap);
    let mut out = Vec::new();
    for (table, _, records, runs) in decoded {
        for &(i, len, page) in runs {
            let bad = |reason: String| Error::CorruptedLog { position, reason };
            let Some(data) = data else {
                return Err(bad(
                    "a record names a run, and the data file cannot be read".into(),
                ));
            };
            let Some(run) = read_run(data, page_bytes, page, len, txn) else {
                return Err(bad(format!(
                    "the run at page {page} of commit {txn} cannot be read or does not check out"
                )));
            };
            let key = records.get(i).map(|r| r.0).unwrap_or_default();
            let at = crate::layout::overflow::VALUE_AT;
            let value = run[at..at + len as usize].to_vec().into_boxed_slice();
            let pages = crate::layout::overflow::pages_for(len as usize, page_bytes);
            out.push((page, pages, (*table, key, value)));
        }
    }
    Ok(out)
}

/// The run of a `len`-byte value at `page` that commit `txn` wrote, read from `data` as it
/// is: `None` where it cannot be read, or its header (`btree::check_run`, its page id and
/// commit) or checksum does not check out.
fn read_run(
    data: &dyn Storage,
    page_bytes: usize,
    page: u64,
    len: u32,
    txn: u64,
) -> Option<Vec<u8>> {
    use crate::layout::header;
    let pages = crate::layout::overflow::pages_for(len as usize, page_bytes);
    let mut run = vec![0u8; pages as usize * page_bytes];
    data.read_at(&mut run, page.checked_mul(page_bytes as u64)?)
        .ok()?;
    let ok = btree::check_run(&run, page, pages, len as usize).is_ok()
        && header::page_id(&run) == page
        && header::txn(&run) == txn
        && crate::pager::page::checksum_ok(&run);
    ok.then_some(run)
}

/// Whether every run commit record `rec` names checks out (`read_runs` reads them again to
/// replay them): a record that cannot be decoded does here, and fails its replay.
fn runs_check_out(data: &dyn Storage, page_bytes: usize, rec: &Record) -> bool {
    if rec.kind != KIND_COMMIT {
        return true;
    }
    let Ok(tables) = batch::decode(&rec.body, rec.position) else {
        return true;
    };
    tables
        .iter()
        .flat_map(|t| &t.runs)
        .all(|&(_, len, page)| read_run(data, page_bytes, page, len, rec.txn).is_some())
}

/// The snapshot a handle starts from: `tree`, with the log's records after it replayed into
/// an overlay (`Replay`, given every record at once).
#[cfg(test)]
pub(crate) fn replay(tree: &Arc<Published>, records: Vec<Record>) -> Result<Arc<Published>> {
    let mut r = Replay::new(tree);
    r.expect_records(records.len());
    for rec in records {
        r.record(rec)?;
    }
    r.finish()
}

/// The overlay's bytes an open's replay applies records up to before it goes on in rounds
/// (`Replay::with_cap`, `Shared::finish_replay`): the overlays' share of a memory budget of
/// `budget` bytes (three quarters, as write admission keeps them).
pub(crate) fn cap(budget: u64) -> usize {
    usize::try_from(budget / 4 * 3).unwrap_or(usize::MAX)
}

/// Records held before they are applied, at most: they are decoded together, so that each
/// is resolved and its slots prefetched `REPLAY_LOOKAHEAD` ahead of the one applied. A chunk
/// of one-put commits spans a few hundred KiB of log, so the segment buffers behind it are
/// reused as reading goes on (`Log::read_spare`).
const REPLAY_CHUNK: usize = 4096;

/// Replays the log's records after `tree` into an overlay, as they are read back
/// (`log::ReadBack`), and gives the snapshot a handle starts from (`finish`). Each record is
/// one commit; the tables it names must be in the tree's catalog (tables are created and
/// deleted only by commits that write pages), and the entry counts are rebuilt as the
/// commits were made, into the snapshot `finish` gives (no reader reads at a commit inside a
/// replay: the handle publishes its last one).
///
/// Records are decoded, checked for order and resolved to table numbers `REPLAY_LOOKAHEAD`
/// ahead of the one applied, and their slots prefetched; a record that fails there is queued
/// as its error, so the first failure in log order is the one returned.
///
/// `tree` may already have an overlay of records replayed before (a read-only handle
/// following a writer in another process, `Shared::follow_log`): the records go on into it,
/// after its newest commit, and the entry counts go on from it. Only the handle that made that
/// overlay may pass it: an overlay has one writer.
pub(crate) struct Replay<'t> {
    tree: &'t Arc<Published>,
    /// Made at the first chunk, sized for the records expected.
    overlay: Option<Arc<Overlay>>,
    /// Records read and not applied yet.
    chunk: Vec<Record>,
    /// Bytes of log expected (`ReadBack::expect`), or records (`expect_records`).
    expected_bytes: u64,
    expected_records: Option<usize>,
    /// By table number: its entry count so far (hashed with foldhash: std's SipHash of a
    /// number per record showed in the profile).
    counts: HashMap<u64, u64, foldhash::fast::RandomState>,
    /// The commit the tree is (or, continuing an overlay replayed before, the snapshot's),
    /// and the newest of it and the commits applied: the snapshot's commit at the end.
    start: u64,
    txn: u64,
    /// The last commit record applied (0 before the first, unless continuing an overlay):
    /// records must rise. The log a checkpoint by slices names is read from the oldest
    /// record some slice still needed (`Meta::log_position`), so records may be of commits
    /// the tree is newer than; applying one the tree already holds puts the tree's own
    /// value in the overlay (docs/design/footprint.md, "The log").
    last: u64,
    /// Whether a record has gone into the overlay.
    any: bool,
    /// The overlay's bytes past which no more records are applied (`with_cap`).
    cap: Option<usize>,
    /// The position and commit of the first record not applied, once the overlay passed
    /// `cap`.
    stopped: Option<(u64, u64)>,
    /// The data file, which the runs records name are read from (`with_data`).
    data: Option<Arc<dyn Storage>>,
    /// The runs the records applied name: first page, pages, and the commit that wrote it.
    named: Vec<(u64, u64, u64)>,
    /// The runs the records not applied name (first page, the commit that wrote it): those
    /// the rounds will replay (`later_runs`).
    later: Vec<(u64, u64)>,
    /// A writer's open: `done` syncs the data file if a record names a run (`syncing_runs`).
    sync_runs: bool,
}

impl<'t> Replay<'t> {
    pub(crate) fn new(tree: &'t Arc<Published>) -> Replay<'t> {
        Replay {
            tree,
            // A follower's overlay: always one slice (only a writer's checkpoints cut them).
            overlay: tree.overlay.as_ref().and_then(|o| o.single()).cloned(),
            chunk: Vec::new(),
            expected_bytes: 0,
            expected_records: None,
            counts: HashMap::default(),
            start: tree.txn(),
            txn: tree.txn(),
            last: if tree.overlay.is_some() {
                tree.txn()
            } else {
                0
            },
            any: false,
            cap: None,
            stopped: None,
            data: None,
            named: Vec::new(),
            later: Vec::new(),
            sync_runs: false,
        }
    }

    /// For a writer's open: once every record is read back (`ReadBack::done`), the data
    /// file is synced if any of them names a run, before the open syncs the log's tail
    /// (`Log::close_tail`), after which the next record appended says the log was synced
    /// past them. The process before may have crashed with a run in the page cache only; a
    /// power loss after the open then kept the records it vouched for without the run, and
    /// the next open refused the log as damaged (`read_back`: a record whose run does not
    /// check out, with a later one that says the log was synced past it).
    pub(crate) fn syncing_runs(mut self) -> Replay<'t> {
        self.sync_runs = true;
        self
    }

    /// Reads the runs records name from `data` (docs/design/large-values.md).
    pub(crate) fn with_data(mut self, data: Arc<dyn Storage>) -> Replay<'t> {
        self.data = Some(data);
        self
    }

    /// The runs the records applied so far name (first page, pages, the commit that wrote
    /// it), ascending.
    pub(crate) fn named_runs(&self) -> Vec<(u64, u64, u64)> {
        let mut named = self.named.clone();
        named.sort_unstable();
        named
    }

    /// Applies records only while the overlay holds at most `bytes` (at least one commit):
    /// an open whose log holds more than the overlays' share of the memory budget replays it
    /// in rounds (`Shared::finish_replay`). The records from the first one left are read on
    /// (an open's proof reads the log to its end) and not applied.
    pub(crate) fn with_cap(mut self, bytes: usize) -> Replay<'t> {
        self.cap = Some(bytes);
        self
    }

    /// The position and commit of the first record not applied, if the overlay passed its
    /// cap.
    pub(crate) fn stopped(&self) -> Option<(u64, u64)> {
        self.stopped
    }

    /// The runs the records read and not applied name (first page, the commit that wrote
    /// it): an open's later rounds replay them, so a round's checkpoint that frees one (a
    /// tree's value that an older record replaced) defers it (`NamedRuns`).
    pub(crate) fn later_runs(&self) -> &[(u64, u64)] {
        &self.later
    }

    /// Notes the runs `rec` names, a commit record read and not applied (`later_runs`).
    fn note_later(&mut self, rec: &Record) {
        if rec.kind != KIND_COMMIT {
            return;
        }
        // One that does not decode is found so by the round that applies it.
        if let Ok(tables) = batch::decode(&rec.body, rec.position) {
            let runs = tables.iter().flat_map(|t| &t.runs);
            self.later.extend(runs.map(|&(_, _, page)| (page, rec.txn)));
        }
    }

    /// Sizes the overlay for `n` records instead of estimating them from the bytes expected.
    pub(crate) fn expect_records(&mut self, n: usize) {
        self.expected_records = Some(n);
    }

    /// Whether a record has gone into the overlay (an error after that leaves it partly
    /// applied).
    pub(crate) fn applied(&self) -> bool {
        self.any
    }

    /// The snapshot with every record applied: `tree` itself if there were none.
    pub(crate) fn finish(mut self) -> Result<Arc<Published>> {
        self.flush()?;
        match self.overlay {
            Some(overlay) if self.any => {
                let slices = match &self.tree.overlay {
                    Some(s) if s.single().is_some_and(|o| Arc::ptr_eq(o, &overlay)) => s.clone(),
                    Some(_) => {
                        return Err(Error::Internal(
                            "a replay onto the overlays of several slices".into(),
                        ))
                    }
                    None => Arc::new(Slices::one(overlay, self.tree.snap.meta.log_position)),
                };
                let counts = self.counts.iter().map(|(&table, &n)| (table, n));
                let counts = CountLog::after(self.tree.counts().map(|l| &**l), counts);
                Ok(Published::logged(
                    self.tree,
                    slices,
                    self.txn,
                    Some(Arc::new(counts)),
                ))
            }
            _ => Ok(self.tree.clone()),
        }
    }

    /// The overlay the records go into, made for the records expected if there is none: the
    /// chunk's records, scaled by the bytes expected to the bytes they span when more are to
    /// come (growing the table rehashes every entry, and leaves the slots prefetched for the
    /// old table wrong).
    fn overlay(&mut self, more: bool) -> Arc<Overlay> {
        if let Some(o) = &self.overlay {
            return o.clone();
        }
        let n = self.chunk.len();
        let expected = match (self.expected_records, self.chunk.first(), self.chunk.last()) {
            (Some(records), ..) => records,
            (None, Some(first), Some(last)) if more && last.position > first.position => {
                let spanned = last.position - first.position;
                let scaled = (n as u128 * self.expected_bytes as u128 / spanned as u128) as usize;
                scaled.max(n)
            }
            _ => n,
        };
        let o = Arc::new(Overlay::with_capacity(expected));
        self.overlay = Some(o.clone());
        o
    }

    /// Applies the records held, in order (the first failure ends it: the records before it
    /// are in the overlay).
    pub(crate) fn flush(&mut self) -> Result<()> {
        if self.chunk.is_empty() {
            return Ok(());
        }
        let more = self.chunk.len() == REPLAY_CHUNK;
        let overlay = self.overlay(more);
        let chunk = std::mem::take(&mut self.chunk);
        let r = self.apply(&chunk, &overlay);
        // The chunk's allocation is kept; its records (and the segment buffers they share)
        // are let go.
        self.chunk = chunk;
        self.chunk.clear();
        r
    }

    fn apply(&mut self, records: &[Record], overlay: &Overlay) -> Result<()> {
        let snap = &*self.tree.snap;
        let mut decoder = Decoder {
            snap,
            catalog: &self.tree.catalog,
            tables: HashMap::new(),
            last: None,
            txn: self.last,
        };
        let mut commits = records.iter();
        let mut ahead: VecDeque<Result<Decoded<'_>>> = VecDeque::with_capacity(REPLAY_LOOKAHEAD);
        let mut txn = self.last;
        let mut apply = || -> Result<()> {
            loop {
                while ahead.len() < REPLAY_LOOKAHEAD && !matches!(ahead.back(), Some(Err(_))) {
                    let Some(rec) = commits.next() else { break };
                    ahead.push_back(decoder.decode(rec, overlay));
                }
                let Some(next) = ahead.pop_front() else { break };
                let (rec_txn, position, decoded) = next?;
                // The overlay holds its share: the records from here wait for the next round
                // (`Replay::stopped`).
                if self.any && self.cap.is_some_and(|cap| overlay.bytes() > cap) {
                    self.stopped = Some((position, rec_txn));
                    break;
                }
                // The values of records whose commits wrote them into runs, read and checked.
                let runs = read_runs(self.data.as_deref(), snap, rec_txn, position, &decoded)?;
                for (page, pages, _) in &runs {
                    self.named.push((*page, *pages, rec_txn));
                }
                let mut run_at = runs.iter().peekable();
                let mut writes = Vec::with_capacity(decoded.iter().map(|d| d.2.len()).sum());
                for (id, hdr, records, _) in decoded {
                    let n = self.counts.entry(id).or_insert_with(|| {
                        // Where an earlier replay left the count, if it changed it.
                        self.tree.count(id).unwrap_or(hdr.entries)
                    });
                    for (key, value) in records {
                        let (value, run) = match run_at.peek() {
                            Some((page, _, v)) if v.0 == id && v.1 == key => {
                                let r = (Some(&v.2[..]), *page);
                                run_at.next();
                                r
                            }
                            _ => (value, 0),
                        };
                        // A put of a key the overlay does not have is counted as new without
                        // looking in the tree, and marked, as a blind write of a live commit is
                        // (`Overlay::blind_in_tree` corrects the count when it is asked for): a
                        // tree lookup a record made replay several times slower. A deletion looks.
                        let (existed, blind) = match (overlay.get(id, key, txn), value) {
                            (Lookup::Value(_), _) => (true, false),
                            (Lookup::Deleted, _) => (false, false),
                            (Lookup::Absent, Some(_)) => (false, true),
                            (Lookup::Absent, None) => {
                                (btree::get(snap, &hdr, key)?.is_some(), false)
                            }
                        };
                        match (existed, value) {
                            (false, Some(_)) => *n += 1,
                            (true, None) => *n = n.saturating_sub(1),
                            _ => {}
                        }
                        writes.push((id, key, value, blind, run));
                    }
                }
                overlay.insert_marked(rec_txn, writes.drain(..));
                txn = rec_txn;
                self.last = txn;
                self.txn = self.txn.max(txn);
                self.any = true;
            }
            Ok(())
        };
        let applied = apply();
        if let Some((stop, _)) = self.stopped {
            for rec in records.iter().filter(|r| r.position >= stop) {
                self.note_later(rec);
            }
        }
        applied
    }
}

impl ReadBack for Replay<'_> {
    fn expect(&mut self, bytes: u64) {
        // With a cap, the overlay is sized for what it may hold, not for the whole log.
        self.expected_bytes = match self.cap {
            Some(cap) => bytes.min(cap as u64),
            None => bytes,
        };
    }

    fn done(&mut self) -> Result<()> {
        self.flush()?;
        let names_runs = !self.named.is_empty() || !self.later.is_empty();
        match &self.data {
            Some(data) if self.sync_runs && names_runs => data.sync().map_err(Error::from_io),
            _ => Ok(()),
        }
    }

    fn run_check(&self) -> Option<super::log::RunCheck> {
        let data = self.data.clone()?;
        let page_bytes = crate::pager::PageSource::page_bytes(&*self.tree.snap);
        Some(Arc::new(move |rec: &Record| {
            runs_check_out(&*data, page_bytes, rec)
        }))
    }

    fn record(&mut self, rec: Record) -> Result<()> {
        if rec.kind == KIND_MARK && rec.txn > self.start {
            // A commit that wrote its pages: its writes are in a newer tree, not in the log.
            // An open never gets here (its reading ends at the mark: `Reopen::tree_txn`,
            // `Log::read_records_into`); a follower beside a writer moves to that tree,
            // which is published before any record after the mark.
            return Err(Error::CorruptedLog {
                position: rec.position,
                reason: format!(
                    "commit {} wrote its pages; the records after it need its tree",
                    rec.txn
                ),
            });
        }
        if self.stopped.is_some() {
            self.note_later(&rec);
            return Ok(());
        }
        if rec.kind != KIND_COMMIT {
            return Ok(());
        }
        self.chunk.push(rec);
        if self.chunk.len() == REPLAY_CHUNK {
            self.flush()?;
        }
        Ok(())
    }
}

/// A read-only handle's place in the log of the writer (in another process) it follows:
/// commits through the log reach its readers when the writer publishes them in the lock file
/// (`LockTable::publish_log`), not only at checkpoints (docs/design/concurrency.md, "Readers in
/// other processes and the log").
pub(crate) struct Follower {
    /// Where the log is, opened when a meta page first names one.
    source: LogSource,
    storage: Option<Arc<dyn Storage>>,
    /// A reader of the log's geometry, read again at each new tree (a writer may have started
    /// a new log since).
    log: Option<Log>,
    /// The log position after the last record the current snapshot holds.
    pub(crate) applied: u64,
    /// A replay into the current snapshot's overlay from this position failed part way.
    stuck: Option<u64>,
    /// What the log must reach when it is read back whole with no writer publishing, set by
    /// an open alone with the database (`Log::read_records_into`).
    pub(crate) expect: Option<super::log::Expect>,
    /// The data file, which the runs records name are read from (`Replay::with_data`).
    pub(crate) data: Option<Arc<dyn Storage>>,
}

impl Follower {
    pub(crate) fn new(source: LogSource) -> Follower {
        Follower {
            source,
            storage: None,
            log: None,
            applied: 0,
            stuck: None,
            expect: None,
            data: None,
        }
    }

    /// `base` (a tree, or a snapshot this follower built) with the log's records from `from`
    /// applied: up to `to`, the end the writer published, or, with no end published (no
    /// writer that writes the log has run since the lock file was reset), every record the
    /// log holds, as an open after a crash reads them. `fresh`: `base` is a new tree, whose
    /// log may be a new one. Sets `applied` to where the records read end.
    pub(crate) fn catch_up(
        &mut self,
        base: &Arc<Published>,
        from: u64,
        to: Option<u64>,
        fresh: bool,
    ) -> Result<Arc<Published>> {
        let meta = &base.snap.meta;
        if !meta.log {
            self.applied = from;
            return Ok(base.clone());
        }
        if self.storage.is_none() {
            self.storage = self.source.open(true, false)?;
        }
        let Some(storage) = self.storage.clone() else {
            return Err(no_log(meta));
        };
        if fresh {
            self.stuck = None;
        } else if self.stuck == Some(from) {
            // Records from here went partly into the overlay before one failed; reading them
            // again would add them again. The error stays until a newer tree.
            return Err(Error::CorruptedLog {
                position: from,
                reason: "an earlier read of the log from here failed".into(),
            });
        }
        let mut replay = Replay::new(base);
        if let Some(data) = &self.data {
            replay = replay.with_data(data.clone());
        }
        let end = match to {
            Some(to) if to <= from => {
                self.applied = from;
                return Ok(base.clone());
            }
            Some(to) => {
                if fresh || self.log.is_none() {
                    self.log = Some(Log::follower(storage)?);
                }
                let log = self
                    .log
                    .as_mut()
                    .ok_or_else(|| Error::Internal("a follower without its log reader".into()))?;
                let records = log.follow(from, to)?;
                replay.expect_records(records.len());
                records
                    .into_iter()
                    .try_for_each(|rec| replay.record(rec))
                    .map(|()| to)
            }
            // No writer publishing (none has run since the lock file was reset): the log as
            // an open after a crash reads it, ending at a mark newer than this snapshot (its
            // pages may have been lost with a power loss).
            None => Log::read_records_into(
                storage,
                from,
                Some(base.txn()),
                self.expect.take(),
                &mut replay,
            ),
        };
        // Applied to the last record (or the first failure), then whether any went in.
        let end = end.and_then(|end| replay.flush().map(|()| end));
        let touched = replay.applied();
        match end.and_then(|end| Ok((replay.finish()?, end))) {
            Ok((p, end)) => {
                self.applied = end;
                Ok(p)
            }
            Err(e) => {
                if !fresh && touched {
                    self.stuck = Some(from);
                }
                Err(e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::Options;
    use crate::pager::{choose_meta, Access, Chosen};
    use crate::storage::{FaultStorage, Storage};
    use crate::Database;

    /// A database with table `t` whose log holds `n` one-put commits after its last
    /// checkpoint: the tree as of that checkpoint, and the log's records after it.
    fn logged(n: u32) -> (Arc<Published>, Vec<Record>) {
        let (tree, log) = logged_log(n);
        let (records, _) = Log::read_records(log, tree.snap.meta.log_position).unwrap();
        (tree, records)
    }

    /// `logged`, with the log itself instead of its records.
    fn logged_log(n: u32) -> (Arc<Published>, Arc<dyn Storage>) {
        let data = FaultStorage::new();
        let log = FaultStorage::new();
        let options = Options::default()
            .log(true)
            .checkpoint_thread(false)
            .compact_on_close(false);
        let db =
            Database::open_storage_with_log(Arc::new(data.clone()), Arc::new(log.clone()), options)
                .unwrap();
        let mut w = db.begin_write().unwrap();
        w.create_table("t").unwrap();
        w.commit().unwrap();
        db.checkpoint().unwrap();
        for i in 0..n {
            let mut w = db.begin_write().unwrap();
            w.table("t").unwrap().put(&i.to_be_bytes(), b"v").unwrap();
            w.commit().unwrap();
        }
        drop(db);
        let storage: Arc<dyn Storage> = Arc::new(data);
        let Chosen { meta, .. } =
            choose_meta(&*storage, storage.len().unwrap(), storage.boot_id()).unwrap();
        let access = Access::for_pages(
            &storage,
            meta.page_count * meta.page_bytes as u64,
            None,
            crate::pager::Readahead::new(Some(false), None),
        )
        .unwrap();
        let tree = Published::new(Snapshot::new(meta, Arc::new(access), false));
        (tree, Arc::new(log))
    }

    /// A read-only handle's follower whose replay into its overlay fails after some records
    /// went in stays stuck at that position: reading from there again would apply them a
    /// second time. One that failed before any record went in is not stuck, and a new tree
    /// clears it.
    #[test]
    fn a_follower_that_applied_part_of_a_failed_replay_stays_stuck() {
        let (tree, log) = logged_log(100);
        let from = tree.snap.meta.log_position;
        // A commit record after the others that passes its checksum and cannot be decoded.
        let (mut writer, _) = Log::open(log.clone(), from, from).unwrap();
        let (records, _) = Log::read_records(log.clone(), from).unwrap();
        writer
            .append(KIND_COMMIT, records.last().unwrap().txn + 1, &[1, 2, 3])
            .unwrap();
        writer.sync().unwrap();
        let (all, _) = Log::read_records(log.clone(), from).unwrap();
        assert_eq!(all.len(), records.len() + 1);
        let bad = all.last().unwrap().position;
        let damaged = |r: Result<Arc<Published>>| match r {
            Err(Error::CorruptedLog { position, reason }) if !reason.contains("earlier read") => {
                assert_eq!(position, bad, "{reason}");
            }
            other => panic!("expected the bad record, got {:?}", other.map(|p| p.txn())),
        };
        let stuck = |r: Result<Arc<Published>>, at: u64| match r {
            Err(Error::CorruptedLog { position, reason }) if reason.contains("earlier read") => {
                assert_eq!(position, at);
            }
            other => panic!(
                "expected the follower stuck, got {:?}",
                other.map(|p| p.txn())
            ),
        };
        let table = tree
            .catalog
            .table_id(&tree.snap, b"t")
            .unwrap()
            .expect("table t");
        let mut f = Follower::new(LogSource::Storage(log.clone()));
        // The first half, up to an end a writer published.
        let half = records[50].position;
        let base = f.catch_up(&tree, from, Some(half), true).unwrap();
        assert_eq!(base.txn(), records[49].txn);
        let overlay = base.overlay.clone().expect("an overlay");
        let entries = overlay.len();
        // The rest and the bad record: the rest goes into the shared overlay, then it fails.
        damaged(f.catch_up(&base, half, None, false));
        let applied = overlay.len();
        assert!(applied > entries, "the records before the bad one went in");
        // From the same place again: stuck, nothing applied a second time.
        stuck(f.catch_up(&base, half, None, false), half);
        assert_eq!(overlay.len(), applied);
        // The snapshot's readers still see the first half only.
        let key = 60u32.to_be_bytes();
        assert!(matches!(
            overlay.get(table, &key, base.txn()),
            Lookup::Absent
        ));
        // A new tree clears it: the replay is tried again, up to every good record.
        let whole = f.catch_up(&tree, from, Some(bad), true).unwrap();
        assert_eq!(whole.txn(), records.last().unwrap().txn);
        // Failing at the first record read, nothing went in: not stuck, the same damage is
        // reported again.
        let entries = whole.overlay.as_ref().expect("an overlay").len();
        for _ in 0..2 {
            damaged(f.catch_up(&whole, bad, None, false));
        }
        assert_eq!(whole.overlay.as_ref().unwrap().len(), entries);
    }

    fn failed_at(result: Result<Arc<Published>>) -> u64 {
        match result {
            Err(Error::CorruptedLog { position, .. }) => position,
            Err(e) => panic!("expected CorruptedLog, got {e:?}"),
            Ok(_) => panic!("expected CorruptedLog, replay succeeded"),
        }
    }

    /// Every commit is replayed, past the lookahead's window.
    #[test]
    fn replay_brings_every_commit() {
        let n = 3 * REPLAY_LOOKAHEAD as u32;
        let (tree, records) = logged(n);
        let commits: Vec<_> = records.iter().filter(|r| r.kind == KIND_COMMIT).collect();
        assert_eq!(commits.len(), n as usize);
        let last = commits.last().unwrap().txn;
        let current = replay(&tree, records).unwrap();
        assert_eq!(current.txn(), last);
        assert_every_key(&tree, &current, n);
    }

    /// A sequential `None` batch leaves a mark only in a log whose version allows marks: in
    /// a version-2 log (an older build's, which would read a mark as the log's end) it
    /// appends its record, as before marks; in a new log, a mark.
    #[test]
    fn a_version_2_log_gets_the_batch_record_not_a_mark() {
        use crate::bytes::put_u32;
        use crate::layout::log::{FILE_CRC_AT, FILE_VERSION_AT, FILE_VERSION_NO_MARKS};
        for version_2 in [false, true] {
            let (data, log) = (FaultStorage::new(), FaultStorage::new());
            let options = || {
                Options::default()
                    .log(true)
                    .checkpoint_thread(false)
                    .idle_checkpoint_millis(0)
                    .compact_on_close(false)
            };
            let open = || {
                Database::open_storage_with_log(
                    Arc::new(data.clone()),
                    Arc::new(log.clone()),
                    options(),
                )
                .unwrap()
            };
            let db = open();
            let mut w = db.begin_write().unwrap();
            w.create_table("t").unwrap();
            w.commit().unwrap();
            db.put(b"x", b"y").unwrap();
            drop(db);
            // Where this build's records end (the table's commit left a mark, which a
            // version-2 log cannot hold: an older build wrote none).
            let (_, first_end) = Log::read_records(Arc::new(log.clone()), 0).unwrap();
            if version_2 {
                let mut c = log.contents();
                put_u32(&mut c, FILE_VERSION_AT, FILE_VERSION_NO_MARKS);
                let crc = crate::pager::shift::crc32c(&c[..FILE_CRC_AT]);
                put_u32(&mut c, FILE_CRC_AT, crc);
                log.set_contents(c);
            }
            let db = open();
            let mut w = db.begin_write().unwrap();
            {
                let mut t = w.table("t").unwrap();
                for i in 0..100u32 {
                    t.append(&i.to_be_bytes(), &[7; 40]).unwrap();
                }
            }
            w.commit_with(crate::Durability::None).unwrap();
            let txn = db.begin_read().unwrap().id();
            assert_eq!(
                db.stats().unwrap().commits.marked_commits,
                u64::from(!version_2)
            );
            drop(db);
            let (records, _) = Log::read_records(Arc::new(log.clone()), first_end).unwrap();
            let batch = records
                .iter()
                .find(|r| r.txn == txn)
                .expect("the batch's record");
            let want = if version_2 { KIND_COMMIT } else { KIND_MARK };
            assert_eq!(batch.kind, want, "version 2: {version_2}");
        }
    }

    /// A mark of a commit newer than the tree stops a replay with `CorruptedLog` at the mark
    /// (a follower then moves to the newer tree); one the tree holds is passed over.
    #[test]
    fn a_mark_newer_than_the_tree_stops_a_replay() {
        let (tree, records) = logged(40);
        let mark = |txn: u64, position: u64| Record {
            position,
            kind: KIND_MARK,
            txn,
            body: Vec::new().into(),
        };
        let last = records.last().unwrap().clone();
        let mut with_newer = records[..20].to_vec();
        let at = with_newer.last().unwrap().position + 64;
        with_newer.push(mark(with_newer.last().unwrap().txn + 1, at));
        with_newer.extend(records[20..].iter().cloned());
        match replay(&tree, with_newer) {
            Err(Error::CorruptedLog { position, .. }) => assert_eq!(position, at),
            other => panic!(
                "a newer mark was replayed past: {:?}",
                other.map(|p| p.txn())
            ),
        }
        let mut with_older = vec![mark(tree.txn(), 0)];
        with_older.extend(records.iter().cloned());
        assert_eq!(replay(&tree, with_older).unwrap().txn(), last.txn);
    }

    /// The overlay of `current`, replayed over `tree` from `logged(n)`'s log: every key of
    /// table `t` with its value, and the entry count. Returns the overlay.
    fn assert_every_key<'c>(tree: &Published, current: &'c Published, n: u32) -> &'c Overlay {
        let Some(overlay) = current.overlay.as_ref().and_then(|o| o.single()) else {
            panic!("no overlay of one slice after a replay")
        };
        let last = current.txn();
        let id = tree.catalog.table_id(&tree.snap, b"t").unwrap().unwrap();
        for i in 0..n {
            assert!(
                matches!(overlay.get(id, &i.to_be_bytes(), last), Lookup::Value(b"v")),
                "key {i}"
            );
        }
        assert_eq!(current.count(id), Some(n as u64));
        overlay
    }

    /// Replayed as the log is read back, a chunk of records at a time: every commit of
    /// several chunks comes back, with the entry count, into an overlay sized for them from
    /// the bytes announced; damage in a later chunk is reported at its record.
    #[test]
    fn replay_as_read_goes_on_across_chunks() {
        let n = 2 * REPLAY_CHUNK as u32 + 5;
        let (tree, log) = logged_log(n);
        let from = tree.snap.meta.log_position;
        let mut r = Replay::new(&tree);
        Log::read_records_into(log.clone(), from, None, None, &mut r).unwrap();
        let current = r.finish().unwrap();
        let overlay = assert_every_key(&tree, &current, n);
        // Sized from the first chunk's bytes, the table did not grow.
        assert_eq!(overlay.tables(), 1);
        let (records, _) = Log::read_records(log, from).unwrap();
        let k = REPLAY_CHUNK + 7;
        let mut damaged = records.clone();
        damaged[k].body.truncate(3);
        assert_eq!(failed_at(replay(&tree, damaged)), records[k].position);
    }

    /// Records are decoded ahead of the one applied; whatever fails first in the log's order
    /// is what replay reports, whether a commit out of order or a body that does not decode,
    /// and whichever comes later within the window.
    #[test]
    fn replay_reports_the_first_damaged_record() {
        let (tree, records) = logged(3 * REPLAY_LOOKAHEAD as u32);
        let k = REPLAY_LOOKAHEAD + 4;
        fn out_of_order(r: &mut [Record], i: usize) {
            r[i].txn = r[i - 1].txn;
        }
        fn undecodable(r: &mut [Record], i: usize) {
            r[i].body.truncate(3);
        }
        type Damage = fn(&mut [Record], usize);
        let cases: [(Damage, Damage); 2] =
            [(out_of_order, undecodable), (undecodable, out_of_order)];
        for (first, later) in cases {
            let mut damaged = records.clone();
            first(&mut damaged, k);
            later(&mut damaged, k + 3);
            assert_eq!(failed_at(replay(&tree, damaged)), records[k].position);
            // Alone, the later damage is what is reported.
            let mut damaged = records.clone();
            later(&mut damaged, k + 3);
            assert_eq!(failed_at(replay(&tree, damaged)), records[k + 3].position);
        }
    }
}
