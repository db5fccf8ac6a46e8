//! Group commit: the log shared by committers, whose syncs are shared by the commits that wait
//! together, and the pressure its room puts on the writer.

use super::*;

/// The most times a group commit's leader yields to committers about to append before it
/// syncs (`GroupLog::sync_to_gathering`).
pub(super) const GATHER_YIELDS_MAX: u32 = 16;

/// How full the log is (`GroupLog::pressure`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Pressure {
    /// Record bytes appended by this handle so far.
    pub(crate) appended: u64,
    /// Bytes kept since the last durable checkpoint's position.
    pub(crate) kept: u64,
    /// Bytes the ring can keep.
    pub(crate) room: u64,
    /// Bytes that can be appended before the log is full (`Log::left_bytes`).
    pub(crate) left: u64,
    /// A segment's bytes: a record goes in once there is a segment's room left.
    pub(crate) segment: u64,
    /// The segments of the log's geometry: its ring may be smaller, but the log goes past
    /// the ring into free slots rather than fail (`Log::append`).
    pub(crate) segments: u64,
    /// The log bytes a checkpoint comes after (`Log::plan`).
    pub(crate) checkpoint: u64,
    /// The bytes of large values' runs a durable checkpoint comes after (`Log::plan`,
    /// `commit::runs_due`).
    pub(crate) runs: u64,
}

impl Pressure {
    /// Bytes that can be appended before the ring is full: what the log kept leaves of the
    /// ring, or less when the slots after the end still hold the records of the cycle before
    /// (just after the ring grew).
    pub(crate) fn room_left(&self) -> u64 {
        self.room.saturating_sub(self.kept).min(self.left)
    }
}

/// Why `GroupLog::append_written` failed.
pub(crate) enum AppendFailed {
    /// The record was not appended (`Log::append`).
    NoRoom(NoRoom),
    /// The record was appended, and writing it failed: the log is failed (fail-stop).
    Write(Error),
}

/// The log shared by committing threads, for group commit: a commit appends its record under
/// the writer's lock, lets the lock go, and waits in `sync_to_gathering` until its record is
/// durable. The
/// first waiter becomes the leader: it takes every record appended so far, writes and syncs
/// them without holding the log, and wakes the others; those whose records it covered return,
/// the rest elect the next leader, which takes what was appended meanwhile. So one sync serves
/// every commit that was waiting, and the next transaction runs while the log is flushed
/// (RocksDB's write group, without its pipelining). A failed write or sync fails every waiter
/// and every later call (`Error::Poisoned`).
pub(crate) struct GroupLog {
    pub(super) state: std::sync::Mutex<GroupState>,
    pub(super) flushed: std::sync::Condvar,
    /// The end of the last record (or pad) a sync made durable: what the lock file records
    /// for the next open to reach (`LockTable::set_log_synced`), read without the lock.
    pub(super) durable_end: std::sync::atomic::AtomicU64,
    /// `Log::failed`, read without the lock (`failed`): set, under the lock, by every
    /// `GroupLog` call that can fail the log (a write or a sync).
    failed: std::sync::atomic::AtomicBool,
    /// `Log::packed_allowed`, fixed by the file's version: read without the lock.
    packed_allowed: bool,
    /// `Log::runs_allowed`, likewise.
    runs_allowed: bool,
    /// The data file, synced before a sync of the log that makes durable a record naming a
    /// run written since its last sync (`runs_written`; docs/design/large-values.md).
    data: std::sync::OnceLock<Arc<dyn Storage>>,
    /// Where the first record naming such a run may be, or `u64::MAX` for none.
    runs_from: std::sync::atomic::AtomicU64,
}

pub(super) struct GroupState {
    pub(super) log: Log,
    /// A leader is writing and syncing.
    pub(super) leading: bool,
    /// A leader took appended bytes (`Log::take`) and is writing them without the lock: the
    /// file does not hold every byte before `Log::written` yet.
    pub(super) writing: bool,
    /// Syncs made for commits (`Stats::commits`, and tests).
    pub(super) syncs: u64,
    /// Threads waiting on `GroupLog::flushed` (`wait_flushed`): the leader wakes them only if
    /// there are any, since a condition variable's wake is a system call whether or not
    /// anyone waits (two wakes a durable commit of a single committer).
    pub(super) waiting: u32,
}

impl GroupLog {
    pub(crate) fn new(log: Log) -> GroupLog {
        // Everything read back at open was synced before the log was handed over
        // (`close_tail`); a new log's start holds nothing.
        let synced = log.synced;
        let failed = log.failed;
        let packed_allowed = log.packed_allowed;
        let runs_allowed = log.runs_allowed;
        GroupLog {
            packed_allowed,
            runs_allowed,
            state: std::sync::Mutex::new(GroupState {
                log,
                leading: false,
                writing: false,
                syncs: 0,
                waiting: 0,
            }),
            flushed: std::sync::Condvar::new(),
            durable_end: std::sync::atomic::AtomicU64::new(synced),
            failed: std::sync::atomic::AtomicBool::new(failed),
            data: std::sync::OnceLock::new(),
            runs_from: std::sync::atomic::AtomicU64::new(u64::MAX),
        }
    }

    /// The data file the runs of large values are written to (`runs_written`).
    pub(crate) fn set_data(&self, data: Arc<dyn Storage>) {
        let _ = self.data.set(data);
    }

    /// Whether the log's version has records that name runs (`OP_PUT_RUN`).
    pub(crate) fn runs_allowed(&self) -> bool {
        self.runs_allowed && self.data.get().is_some()
    }

    /// A committer wrote runs its record, appended at or after `position`, names: the data
    /// file is synced before any sync of the log past it.
    pub(crate) fn runs_written(&self, position: u64) {
        self.runs_from
            .fetch_min(position, std::sync::atomic::Ordering::AcqRel);
    }

    /// Syncs the data file if a record before `end` names a run written since its last sync.
    /// Called by the log's sync after it took the bytes up to `end`: a committer marks its
    /// runs before it appends the record that names them.
    fn sync_runs_before(&self, end: u64) -> Result<()> {
        use std::sync::atomic::Ordering::AcqRel;
        let from = self.runs_from.swap(u64::MAX, AcqRel);
        if from >= end {
            self.runs_from.fetch_min(from, AcqRel);
            return Ok(());
        }
        match self.data.get() {
            Some(data) => data.sync().map_err(Error::from_io).inspect_err(|_| {
                self.runs_from.fetch_min(from, AcqRel);
            }),
            None => Ok(()),
        }
    }

    /// The end of the last record a sync made durable: at least where the log was read back
    /// to at open.
    pub(crate) fn durable_end(&self) -> u64 {
        self.durable_end.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Waits on `flushed`, counted in `GroupState::waiting`.
    fn wait_flushed<'a>(
        &'a self,
        mut st: std::sync::MutexGuard<'a, GroupState>,
    ) -> std::sync::MutexGuard<'a, GroupState> {
        st.waiting += 1;
        let mut st = self.flushed.wait(st).unwrap_or_else(|e| e.into_inner());
        st.waiting -= 1;
        st
    }

    /// Wakes every thread waiting on `flushed`, if any; `st` is the group's lock, held.
    fn notify_flushed(&self, st: &GroupState) {
        if st.waiting > 0 {
            self.flushed.notify_all();
        }
    }

    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, GroupState> {
        // No code panics while holding this lock; recover the state if a panic ever did.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `Log::append`, under the group's lock.
    pub(crate) fn append(
        &self,
        kind: u8,
        txn: u64,
        body: &[u8],
    ) -> std::result::Result<u64, NoRoom> {
        self.lock().log.append(kind, txn, body)
    }

    /// `Log::append`, and for a commit that is not synced (`write`) `write` too, under one
    /// hold of the group's lock: returns the position the record went at or after (a pad may
    /// come first: `Log::end` before it) and its end.
    pub(crate) fn append_written(
        &self,
        kind: u8,
        txn: u64,
        body: &[u8],
        write: bool,
    ) -> std::result::Result<(u64, u64), AppendFailed> {
        let mut st = self.lock();
        let start = st.log.end();
        let end = st
            .log
            .append(kind, txn, body)
            .map_err(AppendFailed::NoRoom)?;
        if write {
            self.write_locked(st).map_err(AppendFailed::Write)?;
        }
        Ok((start, end))
    }

    /// Returns once every record before `position` is durable, syncing them (and whatever
    /// else was appended) if no other committer is already doing so.
    pub(crate) fn sync_to(&self, position: u64) -> Result<()> {
        self.sync_to_gathering(position, &|| false)
    }

    /// `sync_to`, where a committer that becomes the leader first lets the committers that
    /// `more` says are about to append do so (yielding its core to them, for at most
    /// `GATHER_YIELDS_MAX` turns), so that its sync covers their records too: without it, on
    /// few cores, the first committer woken after a sync leads the next one alone while the
    /// others are still taking the write lock in turn.
    pub(crate) fn sync_to_gathering(&self, position: u64, more: &dyn Fn() -> bool) -> Result<()> {
        let mut st = self.lock();
        loop {
            if st.log.failed {
                return Err(Error::Poisoned);
            }
            if st.log.synced >= position {
                return Ok(());
            }
            if st.leading {
                st = self.wait_flushed(st);
                continue;
            }
            st.leading = true;
            let mut turns = 0;
            while more() && turns < GATHER_YIELDS_MAX {
                drop(st);
                std::thread::yield_now();
                st = self.lock();
                turns += 1;
            }
            let flush = st.log.take();
            let appended_end = st.log.appended_end;
            let sink = st.log.sink.clone();
            st.writing = true;
            drop(st);
            // The runs the records taken name, on the device before the records are.
            let runs_synced = self.sync_runs_before(flush.end);
            let written = runs_synced.and_then(|()| sink.write(&flush, false));
            // The bytes are in the file (or failed): a `write` waiting for them may go on
            // while this leader syncs.
            st = self.lock();
            st.writing = false;
            self.notify_flushed(&st);
            let r = match written {
                Ok(()) => {
                    drop(st);
                    sink.forget_stored(flush.end);
                    let r = sink.storage.sync().map_err(Error::from_io);
                    st = self.lock();
                    r
                }
                Err(e) => Err(e),
            };
            st.leading = false;
            match r {
                Ok(()) => {
                    st.log.synced = st.log.synced.max(flush.end);
                    st.syncs += 1;
                    self.durable_end
                        .fetch_max(appended_end, std::sync::atomic::Ordering::AcqRel);
                }
                Err(e) => {
                    st.log.failed = true;
                    self.note_failed();
                    self.notify_flushed(&st);
                    return Err(e);
                }
            }
            self.notify_flushed(&st);
        }
    }

    /// Makes every record appended so far durable (`Durability::Bounded`'s flush).
    pub(crate) fn sync_end(&self) -> Result<()> {
        self.sync_to(self.end())
    }

    /// Bytes appended and not yet durable.
    pub(crate) fn unsynced_bytes(&self) -> u64 {
        let st = self.lock();
        st.log.distance(st.log.synced, st.log.end)
    }

    /// `Log::plan`.
    pub(crate) fn plan(
        &self,
        file_bytes: u64,
        checkpoint_bytes_min: u64,
        sliced: bool,
        overlays: u64,
    ) {
        self.lock()
            .log
            .plan(file_bytes, checkpoint_bytes_min, sliced, overlays)
    }

    /// Whether the log has grown since `position` (the last checkpoint's) by the bytes a
    /// checkpoint comes after (`Log::plan`).
    pub(crate) fn checkpoint_due(&self, position: u64) -> bool {
        let st = self.lock();
        st.log.distance(position, st.log.end) >= st.log.checkpoint_bytes
    }

    /// Log bytes from `position` (a checkpoint's) to the end: what a checkpoint started now
    /// covers.
    pub(crate) fn since(&self, position: u64) -> u64 {
        let st = self.lock();
        st.log.distance(position, st.log.end)
    }

    /// How full the log is, for pacing the writer (`engine::pace`): the bytes appended, kept
    /// since the last durable checkpoint and left, the ring's room and a segment's bytes.
    pub(crate) fn pressure(&self) -> Pressure {
        let st = self.lock();
        Pressure {
            appended: st.log.appended,
            kept: st.log.kept_bytes(),
            room: st.log.room_bytes(),
            left: st.log.left_bytes(),
            segment: st.log.sink.segment_bytes,
            segments: st.log.sink.segments,
            checkpoint: st.log.checkpoint_bytes,
            runs: st.log.runs_interval_bytes,
        }
    }

    /// Whether the log's version allows marks (`KIND_MARK`).
    pub(crate) fn marks_allowed(&self) -> bool {
        self.lock().log.marks_allowed
    }

    /// Whether the log's version allows packed commits (`KIND_PACKED`).
    #[inline]
    pub(crate) fn packed_allowed(&self) -> bool {
        self.packed_allowed
    }

    /// Whether a write or sync of the log failed (every later commit fails). Without the
    /// lock: a commit's `Txn::new` asks, and the write or sync that fails under the lock is
    /// where a failure is caught anyway.
    pub(crate) fn failed(&self) -> bool {
        self.failed.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Notes that the log failed (`failed`); called under the lock, with `Log::failed` set.
    fn note_failed(&self) {
        self.failed
            .store(true, std::sync::atomic::Ordering::Release);
    }

    /// Syncs made so far for commits (`sync_to`: `Immediate` commits and `Bounded`'s
    /// flushes).
    pub(crate) fn syncs(&self) -> u64 {
        self.lock().syncs
    }

    /// `Log::end`.
    pub(crate) fn end(&self) -> u64 {
        self.lock().log.end()
    }

    /// `Log::write`: hands every appended record to the storage, without a sync (a process
    /// crash then loses none of them). A leader of a sync may have taken some of them
    /// (`sync_to_gathering`) and be writing them without the lock: this waits until its
    /// write is done, so that on return every record appended so far is in the file. The
    /// caller publishes that end to readers in other processes (`LockTable::publish_log`),
    /// and a commit that is not `Immediate` returns, promising that a process crash keeps
    /// it; and this write's own bytes, stored after the leader's, never reach the file
    /// ahead of the records before them (a crash between the two would leave a hole before
    /// valid records, which reads back as damage).
    pub(crate) fn write(&self) -> Result<()> {
        self.write_locked(self.lock())
    }

    /// `write`, with the group's lock held.
    fn write_locked<'a>(&'a self, mut st: std::sync::MutexGuard<'a, GroupState>) -> Result<()> {
        while st.writing && !st.log.failed {
            st = self.wait_flushed(st);
        }
        let r = st.log.write();
        if r.is_err() {
            self.note_failed();
        }
        r
    }

    /// `Log::release_to`.
    pub(crate) fn release_to(&self, position: u64) {
        self.lock().log.release_to(position)
    }

    /// The log file's storage, to read records back from (an open's replay rounds).
    pub(crate) fn storage(&self) -> Arc<dyn Storage> {
        self.lock().log.sink.storage.clone()
    }

    /// The log file's length.
    pub(crate) fn file_bytes(&self) -> Result<u64> {
        Ok(self.lock().log.sink.storage.len()?)
    }

    /// `Log::restart`, unless a leader is writing.
    pub(crate) fn restart(&self) -> Option<u64> {
        let mut st = self.lock();
        if st.leading {
            return None;
        }
        st.log.restart()
    }

    /// Stops the thread that grows the log's file (`Background::stop`).
    pub(crate) fn stop_grower(&self) {
        self.lock().log.stop_grower();
    }

    /// `Log::cut`, unless a leader is writing.
    pub(crate) fn cut(&self) {
        let mut st = self.lock();
        if !st.leading {
            st.log.cut();
        }
    }

    /// Whether the log holds nothing: every record is in a durable checkpoint, and the file
    /// is cut to its header (`restart` and `cut` after a durable commit naming the new end).
    pub(crate) fn holds_nothing(&self) -> bool {
        let st = self.lock();
        !st.leading && !st.log.failed && st.log.idle() && st.log.is_cut()
    }
}
