//! The reader registry: the snapshot new readers start from, the live readers of this handle
//! by snapshot, and, for a read-only handle beside a writer in another process, its slot in
//! the lock file's shared reader table (LMDB's protocol; docs/design/concurrency.md). The
//! writer asks it for the oldest snapshot any reader holds before it reuses a page.

use super::published::Published;
use super::replay::Follower;
use super::Shared;
use crate::error::{Error, Result};
use crate::pager::freelist::Held;
use crate::pager::{choose_meta, Access, Carry, Meta, Snapshot};
use crate::storage::{LockTable, Storage};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Readers and the snapshot they start from.
pub(crate) struct ReadState {
    pub(crate) current: Arc<Published>,
    /// Changes whenever `current` is replaced by a snapshot that differs from it in more than
    /// its commit id: another tree, catalog, overlay or count log (`Shared::set_current`).
    /// Snapshots of one shape differ only in the commits they see in the same overlay and
    /// count log, so a reader on one
    /// of them reads a later one's commit by taking its number (`Shared::txn_in_shape`).
    pub(crate) shape: u64,
    /// Snapshot txn -> number of live read transactions on it.
    pub(crate) readers: BTreeMap<u64, usize>,
    /// Thread (`reader_thread`) -> number of live read transactions it began: which readers
    /// the writer would starve by its checkpoints' work and which are its own (`beside`).
    threads: HashMap<u64, usize>,
    /// For a read-only handle registered in the lock file: where it is in the log of a
    /// writer in another process, whose commits it reads as they are published.
    pub(crate) follow: Option<Follower>,
    /// A snapshot `current` replaced, of `current`'s shape (so it holds no part `current`
    /// does not): the next commit through the log takes it for its own snapshot once no
    /// reader holds it (`commit::logged::publish_logged`). Dropped whenever the shape
    /// changes.
    pub(crate) spare: Option<Arc<Published>>,
}

impl ReadState {
    pub(crate) fn new(current: Arc<Published>, follow: Option<Follower>) -> ReadState {
        ReadState {
            current,
            shape: SHAPE_FIRST,
            readers: BTreeMap::new(),
            threads: HashMap::new(),
            follow,
            spare: None,
        }
    }

    /// The current snapshot and its shape.
    pub(crate) fn current(&self) -> (Arc<Published>, u64) {
        (self.current.clone(), self.shape)
    }

    /// Oldest snapshot that a live reader of this handle holds, if any.
    pub(crate) fn oldest_reader(&self) -> Option<u64> {
        self.readers.keys().next().copied()
    }

    /// This handle's live read transactions begun on threads other than `thread`
    /// (`reader_thread`): those a writer on `thread` shares the CPU and the device with. A
    /// thread that holds a read transaction while it writes (a session renewing one per
    /// operation, as YCSB's clients) does not read while it writes: a writer slowed for its
    /// own reader's sake gives that reader nothing.
    pub(crate) fn beside(&self, thread: u64) -> usize {
        let all: usize = self.readers.values().sum();
        all.saturating_sub(self.threads.get(&thread).copied().unwrap_or(0))
    }

    fn add_reader(&mut self, tree: u64, thread: u64) {
        *self.readers.entry(tree).or_insert(0) += 1;
        *self.threads.entry(thread).or_insert(0) += 1;
    }
}

/// A number for the calling thread, unique in the process, for `ReadState::beside`: a read
/// transaction counts for the thread that began it, wherever it is used or dropped.
pub(crate) fn reader_thread() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    thread_local! {
        static ID: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    }
    ID.with(|id| {
        if id.get() == 0 {
            id.set(NEXT.fetch_add(1, Ordering::Relaxed));
        }
        id.get()
    })
}

/// The shape of a handle's first snapshot (`ReadState::shape`); 0 is no shape (a reader on a
/// snapshot it was given: `Shared::register_reader_on`).
pub(crate) const SHAPE_FIRST: u64 = 1;
pub(crate) const SHAPE_NONE: u64 = 0;

impl Shared {
    /// The reader table, if this is a read-only handle registered in one: its snapshots come
    /// from the file (a writer in another process may have committed), and the oldest of them
    /// is published in its slot.
    #[inline]
    pub(crate) fn shared_reader(&self) -> Option<&LockTable> {
        if self.options.read_only || self.closed.load(std::sync::atomic::Ordering::Acquire) {
            self.lock.as_ref()
        } else {
            None
        }
    }

    /// Registers a reader on the newest committed snapshot and returns it, with its shape.
    #[inline]
    pub(crate) fn register_reader(&self, thread: u64) -> Result<(Arc<Published>, u64)> {
        let mut rs = self.read_state();
        if let Some(lock) = self.shared_reader() {
            self.refresh_shared(&mut rs, lock)?;
        }
        let (snap, shape) = rs.current();
        rs.add_reader(snap.tree_txn(), thread);
        Ok((snap, shape))
    }

    /// Registers a reader on `snap`, a snapshot the writer holds (a write transaction's base):
    /// it may be newer than the published one (a commit waiting for its log's sync), and its
    /// pages are protected by the writer until the registration takes over.
    pub(crate) fn register_reader_on(&self, snap: &Arc<Published>, thread: u64) {
        let mut rs = self.read_state();
        rs.add_reader(snap.tree_txn(), thread);
        if let Some(lock) = self.shared_reader() {
            lock.set_reader(rs.oldest_reader().unwrap_or(0));
        }
    }

    /// Removes one reader of a snapshot whose tree is commit `txn`; in the shared table, the handle's slot follows
    /// its oldest remaining reader (raising it is always safe: every remaining reader is at
    /// least as new).
    #[inline]
    pub(crate) fn unregister_reader(&self, rs: &mut ReadState, txn: u64, thread: u64) {
        if let Some(n) = rs.threads.get_mut(&thread) {
            *n -= 1;
            if *n == 0 {
                rs.threads.remove(&thread);
            }
        }
        self.unregister_tree(rs, txn);
    }

    /// `unregister_reader`'s count by snapshot.
    fn unregister_tree(&self, rs: &mut ReadState, txn: u64) {
        if let Some(n) = rs.readers.get_mut(&txn) {
            *n -= 1;
            if *n == 0 {
                rs.readers.remove(&txn);
                if let Some(lock) = self.shared_reader() {
                    lock.set_reader(rs.oldest_reader().unwrap_or(0));
                }
            }
        }
    }

    /// Moves a reader registered on `held`, reading its overlay up to commit `txn`, to the
    /// newest committed snapshot, if there is a newer one: returns it with its shape, or
    /// `None` to stay. Callers check `newer_than` first (atomic loads, no lock) and call this
    /// only when it is true. On a read-only handle beside a writer in another process, if the
    /// newest snapshot cannot be read (an I/O error), the reader stays on `held`, which
    /// remains valid.
    pub(crate) fn renew_reader(&self, held: &Published, txn: u64) -> Option<(Arc<Published>, u64)> {
        if self.closed.load(std::sync::atomic::Ordering::Acquire) {
            // The handle is closed: its state follows no writer any more.
            return None;
        }
        let mut rs = self.read_state();
        if let Some(lock) = self.shared_reader() {
            // The reader is still registered, so the slot protects what is found.
            if self.refresh_shared(&mut rs, lock).is_err() {
                return None;
            }
        }
        // A newer commit, or the same one on a newer tree: a checkpoint's, which reads
        // through no overlay (readers renewing per operation would otherwise read the
        // overlay a checkpoint merged, and keep it alive, until the next commit).
        if rs.current.txn() == txn && rs.current.tree_txn() == held.tree_txn() {
            return None;
        }
        let (snap, shape) = rs.current();
        // Readers are registered by their tree: a commit through the log keeps it.
        if snap.tree_txn() != held.tree_txn() {
            *rs.readers.entry(snap.tree_txn()).or_insert(0) += 1;
            self.unregister_tree(&mut rs, held.tree_txn());
        }
        Some((snap, shape))
    }

    /// For the writer starting a transaction: the newest published snapshot.
    pub(crate) fn writer_base(&self) -> Arc<Published> {
        self.read_state().current.clone()
    }

    /// For a writer about to allocate pages (a page-writing transaction, or a checkpoint when
    /// `checkpoint`): makes reusable the pending pages that no snapshot to be kept reaches.
    /// Pages freed by commit T are unreachable from every tree of a commit >= T; the trees
    /// kept are the live readers' (registered by their tree's commit, in this handle or in
    /// the lock file by another) and the last durable one (a power loss returns to it).
    ///
    /// First the oldest reader's horizon (`FreeSet::release`). Then, if it holds runs back, a
    /// look at each run against each reader's tree (`FreeSet::release_unreached`), so that a
    /// reader held for long pins only its own tree: at every checkpoint (the look, and the
    /// base it makes the next persist write, cost about as many runs as readers pin, small
    /// beside the pages a checkpoint writes), at a page commit only once the pending runs
    /// have doubled (`scan_due`), so that a commit's cost does not follow what readers pin.
    /// Readers in other processes are known only by their handles' oldest trees. Last, the
    /// pages no reader of this handle reads any more (released, or kept only for a power
    /// loss) are dropped from the writer's mapping, out of the process's resident set.
    ///
    /// Called after the writer's base was taken (`writer_base`), so the lock file is read
    /// after the previous commit was published: a reader that registered too late for this
    /// scan has seen that commit and holds a snapshot no older than the base
    /// (docs/design/concurrency.md). A transaction that commits through the log allocates
    /// nothing and never asks (the scan takes a lock call per foreign reader).
    pub(crate) fn release_pending(
        &self,
        carry: &mut Carry,
        last_durable: u64,
        checkpoint: bool,
    ) -> Result<()> {
        let free = &mut carry.free;
        let foreign = self.lock.as_ref().and_then(|lock| lock.oldest_reader().0);
        let (own, current) = {
            let rs = self.read_state();
            (rs.oldest_reader(), rs.current.snap.access().clone())
        };
        free.release(own.into_iter().chain(foreign).min(), last_durable)?;
        if free.held_back(last_durable) && (checkpoint || free.scan_due()) {
            let trees = self.read_state().readers.keys().copied().collect();
            free.release_unreached(&Held { trees, foreign }, last_durable)?;
        }
        let unread = free.take_unread();
        carry.wmap.forget(&unread);
        // Readers read through the writer's mapping, or, when a checkpoint wrote past it, a
        // read-only one of their own (`commit::snapshot_of`): the pages leave that one too.
        if carry
            .wmap
            .access()
            .is_none_or(|w| !Arc::ptr_eq(w, &current))
        {
            current.forget_runs(carry.wmap.page_bytes(), &unread);
        }
        Ok(())
    }

    /// Whether a writer may have published a snapshot newer than `held` read up to commit
    /// `txn`, seen without a lock: for a read-only handle beside a writer in another process,
    /// a commit with a newer tree, or a commit through the log past `txn`.
    #[inline]
    pub(crate) fn newer_than(&self, held: &Published, txn: u64) -> bool {
        match self.shared_reader() {
            // A read-only handle follows the log: a newer tree (a tree is never newer than its
            // snapshot), or a commit through the log past the snapshot.
            Some(lock) if self.options.read_only => {
                lock.published() > held.tree_txn() || lock.log_txn() > txn
            }
            Some(lock) => lock.published() > txn,
            // A commit, or a checkpoint's tree under the same commit (whose snapshot reads
            // no overlay the held one reads).
            None => {
                self.current_txn.load(Ordering::Acquire) != txn
                    || self.current_tree_txn.load(Ordering::Acquire) != held.tree_txn()
            }
        }
    }

    /// The newest commit, if its snapshot has the shape `shape` (`ReadState::shape`): a
    /// reader on a snapshot of that shape reads it by reading its overlay up to that commit,
    /// with two atomic loads and no lock. `None` for another shape, and on handles whose
    /// readers follow another process's writer (`shared_reader`).
    ///
    /// `set_current` stores the shape before the commit id, and this loads them in the other
    /// order, so a commit id read here that a snapshot of a newer shape published comes with
    /// that shape (or a newer one), never with the old: the id is taken only with the shape
    /// of the snapshot that published it, whose overlay holds the commit (inserted before it
    /// was published).
    #[inline]
    pub(crate) fn txn_in_shape(&self, shape: u64) -> Option<u64> {
        if shape == SHAPE_NONE || self.shared_reader().is_some() {
            return None;
        }
        let txn = self.current_txn.load(Ordering::Acquire);
        (self.current_shape.load(Ordering::Acquire) == shape).then_some(txn)
    }

    /// Makes `published` the snapshot new readers start from (`rs` is this handle's read
    /// state) and returns the one it replaces.
    pub(crate) fn set_current(
        &self,
        rs: &mut ReadState,
        published: Arc<Published>,
    ) -> Arc<Published> {
        if !rs.current.same_shape(&published) {
            // Of the shape that ends: it shares every part with the snapshot replaced, so
            // its drop frees none.
            rs.spare = None;
            // Before the commit id: see `txn_in_shape`.
            rs.shape += 1;
            self.current_shape.store(rs.shape, Ordering::Release);
        }
        self.note_upper(&published);
        self.current_txn.store(published.txn(), Ordering::Release);
        self.current_tree_txn
            .store(published.tree_txn(), Ordering::Release);
        std::mem::replace(&mut rs.current, published)
    }

    /// For a read-only handle beside a writer in another process: makes `rs.current` the
    /// newest committed snapshot and makes sure the handle's slot protects it before any
    /// reader uses it. The protocol (LMDB's) and why it is enough are in
    /// docs/design/concurrency.md: publish a txn in the slot, then re-read the writer's
    /// published txn; if it is not newer than the snapshot chosen, every writer that could
    /// miss the slot started from that snapshot or an older one, so it releases no page the
    /// snapshot reaches.
    ///
    /// A handle that follows the log (`rs.follow`) compares the published commit with its
    /// snapshot's tree, not the snapshot (its snapshot is newer than its tree by the records it
    /// read), and then reads the records the writer published since (`Follower::catch_up`). A
    /// record that is no longer there means the writer reused its room after a newer
    /// checkpoint: the handle then moves to that checkpoint's tree and reads from there.
    /// Requires: `rs` is this handle's read state. While the handle has readers, its slot holds
    /// the oldest of them, which protects every newer snapshot too.
    fn refresh_shared(&self, rs: &mut ReadState, lock: &LockTable) -> Result<()> {
        let mut last_err = None;
        for _ in 0..crate::limits::READER_REGISTER_TRIES_MAX {
            match self.refresh_shared_once(rs, lock) {
                Ok(()) => return Ok(()),
                // The log moved on under a slow follower; a newer tree is published by now.
                Err(e @ Error::CorruptedLog { .. })
                    if rs.follow.is_some() && lock.published() > rs.current.tree_txn() =>
                {
                    last_err = Some(e);
                }
                Err(e) => {
                    last_err = Some(e);
                    break;
                }
            }
        }
        if rs.readers.is_empty() {
            // Nothing of this handle's is read; the slot protects nothing.
            lock.set_reader(0);
        }
        Err(last_err.unwrap_or_else(|| Error::Internal("refresh without a try".into())))
    }

    fn refresh_shared_once(&self, rs: &mut ReadState, lock: &LockTable) -> Result<()> {
        let current = rs.current.txn();
        let tree = rs.current.tree_txn();
        // The snapshot stays unless a newer one is published: a newer tree, for a follower.
        let floor = if rs.follow.is_some() { tree } else { current };
        // Fast path: nothing newer was published. No syscall.
        if lock.published() <= floor {
            let protected = !rs.readers.is_empty() || {
                // The slot protects the tree's pages (the overlay, if any, is this handle's).
                lock.set_reader(tree);
                lock.published() <= floor
            };
            if protected {
                return self.follow_log(rs, lock);
            }
        }
        let set_slot = rs.readers.is_empty();
        let r = newest_protected(&*self.storage, self.boot_id, lock, set_slot, floor);
        let meta = match r {
            Ok(meta) => meta,
            Err(e) => {
                if rs.readers.is_empty() {
                    lock.set_reader(0);
                }
                return Err(e);
            }
        };
        if meta.txn == floor {
            return self.follow_log(rs, lock);
        }
        let needed = meta.page_count * meta.page_bytes as u64;
        let held = rs.current.snap.access();
        let readahead = crate::engine::admission::budget::readahead(&self.options);
        let access = Access::covering(held, &self.storage, needed, readahead)?;
        let snap = Snapshot::new(meta, access, self.options.verify_checksums);
        let mut fresh = Published::new(snap);
        if let Some(follow) = rs.follow.as_mut() {
            let caught = follow.catch_up(&fresh, meta.log_position, lock.log_bound(), true);
            fresh = match caught {
                Ok(p) => p,
                Err(e) => {
                    if rs.readers.is_empty() {
                        // The slot named the new tree; the old one is no longer protected
                        // either, and the next try starts from the file again.
                        lock.set_reader(0);
                    }
                    return Err(e);
                }
            };
        }
        // A follower's new tree with the records after it is at least as new as what it had:
        // both read the same log, up to an end that only grows.
        debug_assert!(fresh.txn() >= current || rs.follow.is_none());
        self.set_current(rs, fresh);
        Ok(())
    }

    /// For a follower whose tree is still the newest: reads the records the writer published
    /// through the log after its snapshot's, if any.
    fn follow_log(&self, rs: &mut ReadState, lock: &LockTable) -> Result<()> {
        let Some(follow) = rs.follow.as_mut() else {
            return Ok(());
        };
        let (txn, end) = lock.log_published();
        if txn <= rs.current.txn() {
            return Ok(());
        }
        let applied = follow.applied;
        let next = follow.catch_up(&rs.current, applied, Some(end), false)?;
        // A commit that wrote pages with no record in the log (a batch too large for it, one
        // that found it full) publishes its tree before any record after it is published:
        // seen here, after the caller's check found no newer tree, such a record was just
        // applied without that commit's writes. The newer tree is read instead
        // (`refresh_shared` retries on this error while a newer tree is published).
        if lock.published() > rs.current.tree_txn() {
            return Err(Error::CorruptedLog {
                position: applied,
                reason: "a newer tree was published while the log was read".into(),
            });
        }
        if next.txn() > rs.current.txn() {
            self.set_current(rs, next);
        }
        Ok(())
    }
}

/// Reads the newest committed meta page from the file and, if `set_slot`, publishes it in
/// this handle's slot, retrying until no newer commit was published meanwhile. Never
/// returns a snapshot older than `floor`.
pub(crate) fn newest_protected(
    storage: &dyn Storage,
    boot_id: Option<[u8; 16]>,
    lock: &LockTable,
    set_slot: bool,
    floor: u64,
) -> Result<Meta> {
    let mut last_err = None;
    for _ in 0..crate::limits::READER_REGISTER_TRIES_MAX {
        // The file may have grown since the last look; a meta page whose pages it does not
        // hold yet is rejected by `choose_meta` and retried.
        let chosen = storage
            .len()
            .map_err(Error::from_io)
            .and_then(|len| choose_meta(storage, len, boot_id));
        match chosen {
            Ok(c) if c.meta.txn >= floor => {
                if set_slot {
                    lock.set_reader(c.meta.txn);
                }
                if lock.published() <= c.meta.txn {
                    return Ok(c.meta);
                }
            }
            Ok(_) => {}
            // A meta slot being rewritten reads as damaged for a moment; retry.
            Err(e @ Error::Corrupted { .. }) => last_err = Some(e),
            Err(e) => return Err(e),
        }
        std::thread::yield_now();
    }
    Err(last_err.unwrap_or_else(|| Error::Io {
        op: "register a reader",
        path: None,
        source: std::io::Error::other("the writer kept publishing newer commits"),
    }))
}

#[cfg(test)]
mod tests {
    use super::reader_thread;
    use crate::{Database, Options};

    #[test]
    fn a_writer_is_beside_the_readers_of_other_threads_only() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path().join("db"), Options::default()).unwrap();
        let beside = || db.engine().read_state().beside(reader_thread());
        let own = db.begin_read().unwrap();
        assert_eq!(beside(), 0, "this thread's own reader");
        // Begun on another thread, moved here: it counts for the thread that began it.
        let other = std::thread::scope(|s| s.spawn(|| db.begin_read().unwrap()).join().unwrap());
        assert_eq!(beside(), 1);
        let mut renewed = other;
        db.put(b"k", b"v").unwrap();
        renewed.renew();
        assert_eq!(beside(), 1, "renewed, still the other thread's");
        // Seen from the other thread, this thread's reader is beside it, and its own is not.
        let there = std::thread::scope(|s| {
            s.spawn(|| db.engine().read_state().beside(reader_thread()))
                .join()
                .unwrap()
        });
        assert_eq!(there, 2, "a new thread began neither");
        drop(renewed);
        assert_eq!(beside(), 0);
        drop(own);
        assert_eq!(db.engine().read_state().beside(0), 0);
        assert!(db.engine().read_state().threads.is_empty());
    }

    #[test]
    fn a_commit_through_the_log_reuses_the_snapshot_no_reader_holds() {
        use std::sync::Arc;
        let dir = tempfile::tempdir().unwrap();
        // No checkpoint by the idle thread: it would change the shape between two commits.
        let options = Options::default()
            .log(true)
            .idle_checkpoint_millis(0)
            .durability(crate::Durability::None);
        let db = Database::open(dir.path().join("db"), options).unwrap();
        // The first commits make the table, the overlays and the count log: new shapes.
        for i in 0..4u32 {
            db.put(&i.to_be_bytes(), b"v").unwrap();
        }
        let current = || db.engine().read_state().current.clone();
        let first = Arc::as_ptr(&current());
        db.put(b"a", b"1").unwrap();
        db.put(b"b", b"2").unwrap();
        assert_eq!(
            Arc::as_ptr(&current()),
            first,
            "the snapshot the first commit replaced is the second commit's"
        );
        // Held by a reader, it stays that reader's commit.
        let reader = db.begin_read().unwrap();
        let held = current();
        let txn = held.txn();
        db.put(b"c", b"3").unwrap();
        db.put(b"d", b"4").unwrap();
        db.put(b"e", b"5").unwrap();
        assert_eq!(held.txn(), txn);
        assert_ne!(Arc::as_ptr(&current()), Arc::as_ptr(&held));
        let t = reader.table(crate::DEFAULT_TABLE).unwrap();
        assert_eq!(t.get(b"b").unwrap(), Some(&b"2"[..]));
        assert_eq!(t.get(b"c").unwrap(), None, "a later commit, unseen");
        assert_eq!(db.get(b"e").unwrap().as_deref(), Some(&b"5"[..]));
    }
}
