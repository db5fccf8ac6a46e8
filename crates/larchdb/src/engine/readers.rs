//! The reader registry: the snapshot new readers start from, the live readers of this handle
//! by snapshot, and, for a read-only handle beside a writer in another process, its slot in
//! the lock file's shared reader table (LMDB's protocol; docs/design/concurrency.md). The
//! writer asks it for the oldest snapshot any reader holds before it reuses a page.

use super::catalog::CatalogCache;
use super::overlay::Overlay;
use super::Shared;
use crate::error::{Error, Result};
use crate::pager::freelist::{FreeSet, Held};
use crate::pager::{choose_meta, Access, Meta, Snapshot};
use crate::storage::{LockTable, Storage};
use crate::table::Overlays;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// A committed snapshot as published to readers: the tree of the last commit that wrote
/// pages (a checkpoint), its catalog decoded once on first use, and, for a handle that writes
/// the log, the overlay holding the commits since, up to commit `txn`. While a checkpoint
/// runs on its own thread (`engine::checkpoint`), the commits it writes into the tree are in
/// the `frozen` overlay, below `overlay` (the commits since the checkpoint began).
pub(crate) struct Published {
    pub(crate) snap: Arc<Snapshot>,
    pub(crate) catalog: Arc<CatalogCache>,
    pub(crate) overlay: Option<Arc<Overlay>>,
    pub(crate) frozen: Option<Arc<Overlay>>,
    txn: u64,
}

impl Published {
    /// The snapshot of a commit that wrote pages: the tree is everything.
    pub(crate) fn new(snap: Snapshot) -> Arc<Published> {
        Arc::new(Published {
            txn: snap.meta.txn,
            snap: Arc::new(snap),
            catalog: Arc::default(),
            overlay: None,
            frozen: None,
        })
    }

    /// Commit `txn`, in `overlay` on top of `tree`'s tree (and its frozen overlay, if any).
    pub(crate) fn logged(tree: &Published, overlay: Arc<Overlay>, txn: u64) -> Arc<Published> {
        debug_assert!(txn >= tree.snap.meta.txn);
        Arc::new(Published {
            snap: tree.snap.clone(),
            catalog: tree.catalog.clone(),
            overlay: Some(overlay),
            frozen: tree.frozen.clone(),
            txn,
        })
    }

    /// The same commit, its overlay frozen for a checkpoint (`engine::checkpoint`): the
    /// commits after it go to a new overlay.
    pub(crate) fn frozen(&self) -> Arc<Published> {
        debug_assert!(self.frozen.is_none(), "one checkpoint at a time");
        Arc::new(Published {
            snap: self.snap.clone(),
            catalog: self.catalog.clone(),
            overlay: None,
            frozen: self.overlay.clone(),
            txn: self.txn,
        })
    }

    /// Commit `txn`, whose tree is `snap` (a checkpoint written on its own thread) and whose
    /// later commits are in `overlay`.
    pub(crate) fn checkpointed(
        snap: Snapshot,
        overlay: Option<Arc<Overlay>>,
        txn: u64,
    ) -> Arc<Published> {
        debug_assert!(txn >= snap.meta.txn);
        Arc::new(Published {
            snap: Arc::new(snap),
            catalog: Arc::default(),
            overlay,
            frozen: None,
            txn,
        })
    }

    /// What is read before the tree.
    #[inline]
    pub(crate) fn overlays(&self) -> Overlays<'_> {
        Overlays {
            active: self.overlay.as_deref(),
            frozen: self.frozen.as_deref(),
        }
    }

    /// Whether commits lie above the tree (in an overlay).
    #[inline]
    pub(crate) fn has_overlay(&self) -> bool {
        self.overlay.is_some() || self.frozen.is_some()
    }

    /// The commit this snapshot is.
    #[inline]
    pub(crate) fn txn(&self) -> u64 {
        self.txn
    }

    /// The commit whose tree it is: readers are registered by it, since it names the pages
    /// they need. (A snapshot's own commit would not do: a checkpoint written on its own
    /// thread frees pages of tree S as commit F, while the commits after F are still read
    /// through tree S until the new tree is in place.)
    #[inline]
    pub(crate) fn tree_txn(&self) -> u64 {
        self.snap.meta.txn
    }
}

/// Readers and the snapshot they start from.
pub(crate) struct ReadState {
    pub(crate) current: Arc<Published>,
    /// Snapshot txn -> number of live read transactions on it.
    pub(crate) readers: BTreeMap<u64, usize>,
}

impl ReadState {
    pub(crate) fn new(current: Arc<Published>) -> ReadState {
        ReadState {
            current,
            readers: BTreeMap::new(),
        }
    }

    /// Oldest snapshot that a live reader of this handle holds, if any.
    pub(crate) fn oldest_reader(&self) -> Option<u64> {
        self.readers.keys().next().copied()
    }
}

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

    /// Registers a reader on the newest committed snapshot and returns it.
    #[inline]
    pub(crate) fn register_reader(&self) -> Result<Arc<Published>> {
        let mut rs = self.read_state();
        if let Some(lock) = self.shared_reader() {
            self.refresh_shared(&mut rs, lock)?;
        }
        let snap = rs.current.clone();
        *rs.readers.entry(snap.tree_txn()).or_insert(0) += 1;
        Ok(snap)
    }

    /// Registers a reader on `snap`, a snapshot the writer holds (a write transaction's base):
    /// it may be newer than the published one (a commit waiting for its log's sync), and its
    /// pages are protected by the writer until the registration takes over.
    pub(crate) fn register_reader_on(&self, snap: &Arc<Published>) {
        let mut rs = self.read_state();
        *rs.readers.entry(snap.tree_txn()).or_insert(0) += 1;
        if let Some(lock) = self.shared_reader() {
            lock.set_reader(rs.oldest_reader().unwrap_or(0));
        }
    }

    /// Removes one reader of a snapshot whose tree is commit `txn`; in the shared table, the handle's slot follows
    /// its oldest remaining reader (raising it is always safe: every remaining reader is at
    /// least as new).
    #[inline]
    pub(crate) fn unregister_reader(&self, rs: &mut ReadState, txn: u64) {
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

    /// Moves a reader registered on `held` to the newest committed snapshot, if there is a
    /// newer one: returns it, or `None` to stay. Callers check `newer_than` first (one atomic
    /// load, no lock) and call this only when it is true. On a read-only handle beside a
    /// writer in another process, if the newest snapshot cannot be read (an I/O error), the
    /// reader stays on `held`, which remains valid.
    pub(crate) fn renew_reader(&self, held: &Published) -> Option<Arc<Published>> {
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
        if rs.current.txn() == held.txn() {
            return None;
        }
        let snap = rs.current.clone();
        *rs.readers.entry(snap.tree_txn()).or_insert(0) += 1;
        self.unregister_reader(&mut rs, held.tree_txn());
        Some(snap)
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
    /// Readers in other processes are known only by their handles' oldest trees.
    ///
    /// Called after the writer's base was taken (`writer_base`), so the lock file is read
    /// after the previous commit was published: a reader that registered too late for this
    /// scan has seen that commit and holds a snapshot no older than the base
    /// (docs/design/concurrency.md). A transaction that commits through the log allocates
    /// nothing and never asks (the scan takes a lock call per foreign reader).
    pub(crate) fn release_pending(
        &self,
        free: &mut FreeSet,
        last_durable: u64,
        checkpoint: bool,
    ) -> Result<()> {
        let foreign = self.lock.as_ref().and_then(|lock| lock.oldest_reader().0);
        let own = self.read_state().oldest_reader();
        free.release(own.into_iter().chain(foreign).min(), last_durable)?;
        if free.held_back(last_durable) && (checkpoint || free.scan_due()) {
            let trees = self.read_state().readers.keys().copied().collect();
            free.release_unreached(&Held { trees, foreign }, last_durable)?;
        }
        Ok(())
    }

    /// Whether a writer may have published a snapshot newer than `txn`, seen without a lock.
    #[inline]
    pub(crate) fn newer_than(&self, txn: u64) -> bool {
        match self.shared_reader() {
            Some(lock) => lock.published() > txn,
            None => self.current_txn.load(Ordering::Acquire) != txn,
        }
    }

    /// For a read-only handle beside a writer in another process: makes `rs.current` the
    /// newest committed snapshot and makes sure the handle's slot protects it before any
    /// reader uses it. The protocol (LMDB's) and why it is enough are in
    /// docs/design/concurrency.md: publish a txn in the slot, then re-read the writer's
    /// published txn; if it is not newer than the snapshot chosen, every writer that could
    /// miss the slot started from that snapshot or an older one, so it releases no page the
    /// snapshot reaches.
    /// Requires: `rs` is this handle's read state. While the handle has readers, its slot holds
    /// the oldest of them, which protects every newer snapshot too.
    fn refresh_shared(&self, rs: &mut ReadState, lock: &LockTable) -> Result<()> {
        let current = rs.current.txn();
        // Fast path: nothing newer was published. No syscall.
        if lock.published() <= current {
            if !rs.readers.is_empty() {
                return Ok(());
            }
            // The slot protects the tree's pages (the overlay, if any, is this handle's).
            lock.set_reader(rs.current.tree_txn());
            if lock.published() <= current {
                return Ok(());
            }
        }
        let set_slot = rs.readers.is_empty();
        let r = newest_protected(&*self.storage, self.boot_id, lock, set_slot, current);
        let meta = match r {
            Ok(meta) => meta,
            Err(e) => {
                if rs.readers.is_empty() {
                    lock.set_reader(0);
                }
                return Err(e);
            }
        };
        if meta.txn != current {
            let needed = meta.page_count * meta.page_bytes as u64;
            let held = rs.current.snap.access();
            let access = Access::covering(held, &self.storage, needed, self.options.readahead)?;
            let snap = Snapshot::new(meta, access, self.options.verify_checksums);
            rs.current = Published::new(snap);
            self.current_txn.store(meta.txn, Ordering::Release);
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
