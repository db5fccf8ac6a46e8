//! The writer's view of pages: dirty copies made in this transaction, on top of the snapshot the
//! transaction started from. Copy-on-write: a committed page is never modified; `make_dirty`
//! copies it to a newly allocated page and records the old one as freed by this transaction.
//!
//! Where the storage offers a writable mapping (real files), a dirty page lives in place, in the
//! mapping, at its new page id, as with LMDB's MDB_WRITEMAP: the copy-on-write copy is the only
//! copy, and a commit seals pages where they are instead of writing them. That space is free
//! (no snapshot to keep can reach it) and allocated with `fallocate` first, so neither an abort
//! nor a crash can harm a snapshot, and a full disk is a `DiskFull` error, never a SIGBUS.
//! Elsewhere (the fault-injecting storage) dirty pages are owned buffers written with
//! `write_at` at commit.
//!
//! ```text
//! mod.rs      WritePages: the transaction's page state; what it borrows and hands back (Carry);
//!             reading pages as the transaction sees them (PageSource)
//! map.rs      WriteMap: the writable mapping of the file and the space allocated behind it
//! dirty.rs    dirty pages: allocation, placement (mapping or owned buffer), copy-on-write,
//!             write access, freeing
//! seal.rs     sealing: the window of recent pages sealed early, branch sealing, checksums
//!             derived from the copied page's
//! persist.rs  commit preparation: pending frees, the freelist chain as a base or a delta
//! out.rs      the page write-out and the meta write
//! ```

mod dirty;
mod map;
mod out;
mod persist;
mod seal;

use dirty::APPENDED_OWNED_BYTES_MAX;
pub(crate) use map::WriteMap;

use super::freelist::{Extent, FreeSet, NamedRuns};
use super::page::PageRef;
use super::shift::Shifts;
use super::{PageSource, Snapshot};
use crate::error::{Error, Result};
use crate::layout::{header, META_SLOTS};
use dirty::{Dirty, Place};
use seal::{BranchSealing, RECENT_PAGES};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

/// Hasher for page ids: one multiply. Page ids are dense integers, so this spreads them well.
#[derive(Default)]
pub(crate) struct IdHasher(u64);

impl Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ b as u64).wrapping_mul(0x0100_0000_01b3);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

type IdMap<V> = HashMap<u64, V, BuildHasherDefault<IdHasher>>;

/// Page buffers kept for reuse between transactions, so a commit-heavy workload does not
/// allocate and zero a page per copy: at most this many (4 MiB of 4 KiB pages), and at most
/// what `Carry::with_pool_bytes` allows (an eighth of the memory budget). The buffers go from
/// thread to thread with the checkpoints; a pool of 4,096 kept the process's anonymous memory
/// at 92-95 MB against 58 MB at the peak of a 1M one-put overwrite, at the same write rate
/// (larch-bench fillrandom,overwrite: the allocator's arenas hold on to what each thread
/// freed).
pub(super) const POOL_PAGES_MAX: usize = 1024;

/// What a write transaction hands back to the writer state when it ends.
pub(crate) struct Carry {
    pub(crate) free: FreeSet,
    pub(crate) pool: Vec<Box<[u8]>>,
    /// Most page buffers `pool` keeps.
    pool_max: usize,
    /// Most bytes of new pages a transaction keeps in owned buffers (`with_owned_bytes`).
    owned_max: usize,
    pub(crate) wmap: WriteMap,
    /// Pages of the newest commit's freelist chain, newest first, with the commit that wrote
    /// each, if known (saves reading it back).
    pub(crate) chain: Option<Vec<PageRef>>,
    /// The transaction's working collections, empty, with the capacity they grew to.
    spare_capacity: Buffers,
    branch_sealing: BranchSealing,
    /// CRC tables for the database's page size, built by the first write transaction.
    shifts: Option<Arc<Shifts>>,
}

impl Carry {
    pub(crate) fn new(free: FreeSet, wmap: WriteMap) -> Carry {
        Carry {
            free,
            pool: Vec::new(),
            pool_max: POOL_PAGES_MAX,
            owned_max: APPENDED_OWNED_BYTES_MAX,
            wmap,
            chain: None,
            spare_capacity: Buffers::default(),
            branch_sealing: BranchSealing::default(),
            shifts: None,
        }
    }

    /// Keeps at most `bytes` of page buffers in the pool between transactions.
    pub(crate) fn with_pool_bytes(mut self, bytes: u64, page_bytes: usize) -> Carry {
        let pages = usize::try_from(bytes / page_bytes.max(1) as u64).unwrap_or(usize::MAX);
        self.pool_max = pages.min(POOL_PAGES_MAX);
        self
    }

    /// Keeps at most `bytes` of new pages in owned buffers in a transaction (and at most
    /// `APPENDED_OWNED_BYTES_MAX`): the memory budget, so that under a small memory limit a
    /// large transaction's new pages go to the file's mapping, which the kernel can write
    /// back and take, rather than fill the process's memory.
    pub(crate) fn with_owned_bytes(mut self, bytes: u64) -> Carry {
        let bytes = usize::try_from(bytes).unwrap_or(usize::MAX);
        self.owned_max = bytes.min(APPENDED_OWNED_BYTES_MAX);
        self
    }
}

/// The collections a write transaction fills. They are handed from one transaction to the
/// next, emptied, so that a small commit allocates almost nothing: growing a fresh hash map
/// and half a dozen vectors for every one-put commit cost more than a quarter of its
/// instructions (docs/design/performance.md).
#[derive(Default)]
struct Buffers {
    dirty: IdMap<Dirty>,
    taken: Vec<(u64, u64)>,
    spare: Vec<(u64, u64)>,
    freed: Vec<FreedRun>,
    ids: Vec<u64>,
    extents: Vec<Extent>,
    runs: Vec<FreedRun>,
}

pub(crate) use crate::pager::freelist::FreedRun;

/// The writer's view of pages for one write transaction: its dirty pages over the snapshot it
/// started from, the free space it allocates from, and what it freed.
pub(crate) struct WritePages {
    pub(crate) base: Arc<Snapshot>,
    pub(crate) txn: u64,
    page_bytes: usize,
    dirty: IdMap<Dirty>,
    /// Free space; moved here from the writer state for the transaction's life.
    pub(crate) free: FreeSet,
    pub(crate) page_count: u64,
    /// Extents taken from `free`, given back on abort.
    taken: Vec<(u64, u64)>,
    /// Pages allocated and then freed in this transaction: reusable at once.
    spare: Vec<(u64, u64)>,
    /// Committed pages this transaction replaced or deleted: pending after commit.
    freed: Vec<FreedRun>,
    /// Overflow runs freed while `defer_runs` is set: deferred at commit
    /// (`FreeSet::defer`).
    deferred: Vec<FreedRun>,
    /// `defer_runs`: the first commit a replay from this commit's meta page reads.
    defer_runs: Option<u64>,
    /// `defer_runs`: the runs log records name, which a freed run is deferred only if it is.
    named: Option<Arc<std::sync::Mutex<NamedRuns>>>,
    /// The deferred runs this commit frees (`FreeSet::undefer`): deferred again if it fails.
    undeferred: Vec<FreedRun>,
    /// The runs this commit deferred, once `pend_freed` moved them to the free set: not
    /// deferred again if it fails (its base tree still references them).
    own_deferred: Vec<FreedRun>,
    /// The extents the meta page's reservation list names (`name_reserved`): the
    /// reservation, and the tail of the one before it.
    reserve: Vec<(u64, u64)>,
    reserve_tail: Vec<(u64, u64)>,
    /// The runs `freed` became at commit (first page, pages), for `take_freed`.
    freed_runs: Vec<(u64, u64)>,
    /// Entries of `freed` already dropped from the resident set (`forget_freed`).
    freed_forgotten: usize,
    /// The last durable commit when the transaction began.
    last_durable: u64,
    pool: Vec<Box<[u8]>>,
    pool_max: usize,
    /// Most bytes of new pages the transaction keeps in owned buffers (`with_owned_bytes`).
    owned_max: usize,
    wmap: WriteMap,
    /// The base snapshot's freelist chain, newest first, if known; after `prepare_commit`,
    /// the new one.
    chain: Option<Vec<PageRef>>,
    /// Page ids, sorted for the write-out; kept for the next transaction.
    ids: Vec<u64>,
    /// The free set's persisted form, built at commit; kept for the next transaction.
    extents: Vec<Extent>,
    /// Freed pages grouped into runs at commit; kept for the next transaction.
    runs: Vec<FreedRun>,
    /// The pages written most recently, a ring (0: no page; slot 0 is a meta page, never
    /// dirty). See `RECENT_PAGES`.
    recent: [u64; RECENT_PAGES],
    recent_at: usize,
    /// Whether any dirty page of the transaction is an owned buffer (not in the mapping).
    any_owned: bool,
    /// Bytes of new pages kept in owned buffers (appended, filled, a merge's copies), less
    /// those written out by `spill_filled` (at most `owned_max`).
    appended_owned_bytes: usize,
    /// Filled pages in owned buffers not yet written out (`spill_filled`).
    spill: Vec<u64>,
    /// Copies of cold reused pages in owned buffers, not yet written out (`spill_cold`).
    cold_owned: Vec<u64>,
    /// Pages `spill_cold` wrote out (`cold_spilled`).
    cold_spilled: u64,
    /// A checkpoint's merge runs in this transaction (`merging`).
    merging: bool,
    /// The transaction is made durable as soon as it is written (`synced_soon`).
    synced_soon: bool,
    /// The writeback of the pages `spill_filled` writes, started a few at a time
    /// (`pace_writeback`).
    paced: Option<crate::storage::Paced>,
    /// A wait for that writeback failed: the caller stops writing (a sync after it may not
    /// report the failure again).
    writeback_failed: bool,
    /// `spill_filled` wrote pages behind (`Storage::write_behind`) that may still be in
    /// flight: a spilled page (`Dirty::filed`) is written again or freed only after a drain.
    behind: bool,
    /// A merge asks for the leaves it will reach to be read ahead (`read_ahead`).
    reads_ahead: bool,
    /// The pages a merge asked to be read ahead, and the requests that took (`will_need`).
    asked_ahead: std::cell::Cell<(u64, u64)>,
    /// Called by a merge after each leaf it writes (`between_leaves`).
    leaf_hook: Option<Box<dyn FnMut() + Send>>,
    /// Some of the pages in owned buffers were a sequential load's (the next transaction is
    /// likely one too).
    appended: bool,
    branch_sealing: BranchSealing,
    shifts: Arc<Shifts>,
    /// The node check debug builds run on every dirty leaf and branch before the commit
    /// seals and writes it (`write_out`).
    check_node: NodeCheck,
}

/// A structural check of a node page, supplied by the layer that owns the node layout (the
/// B-tree): the reason it fails, if it does.
pub(crate) type NodeCheck = fn(&[u8]) -> std::result::Result<(), String>;

impl WritePages {
    /// The page state of write transaction `txn`, on `base`, with what the writer state lent
    /// (`carry`). `last_durable` is the last durable commit, or the checkpoint about to become
    /// it (`commit::Settling`): the pages it reaches are pinned.
    pub(crate) fn new(
        base: Arc<Snapshot>,
        txn: u64,
        last_durable: u64,
        carry: Carry,
        check_node: NodeCheck,
    ) -> WritePages {
        debug_assert!(txn > base.meta.txn && last_durable <= base.meta.txn);
        let page_bytes = base.page_bytes();
        let page_count = base.meta.page_count;
        let b = carry.spare_capacity;
        debug_assert!(b.dirty.is_empty() && b.taken.is_empty() && b.freed.is_empty());
        WritePages {
            base,
            txn,
            page_bytes,
            dirty: b.dirty,
            free: carry.free,
            page_count,
            taken: b.taken,
            spare: b.spare,
            freed: b.freed,
            deferred: Vec::new(),
            defer_runs: None,
            named: None,
            undeferred: Vec::new(),
            own_deferred: Vec::new(),
            reserve: Vec::new(),
            reserve_tail: Vec::new(),
            freed_runs: Vec::new(),
            freed_forgotten: 0,
            last_durable,
            pool: carry.pool,
            pool_max: carry.pool_max,
            owned_max: carry.owned_max,
            wmap: {
                let mut wmap = carry.wmap;
                wmap.begin();
                wmap
            },
            chain: carry.chain,
            ids: b.ids,
            extents: b.extents,
            runs: b.runs,
            recent: [0; RECENT_PAGES],
            recent_at: 0,
            any_owned: false,
            appended_owned_bytes: 0,
            spill: Vec::new(),
            cold_owned: Vec::new(),
            cold_spilled: 0,
            merging: false,
            synced_soon: false,
            paced: None,
            writeback_failed: false,
            behind: false,
            reads_ahead: false,
            asked_ahead: std::cell::Cell::new((0, 0)),
            leaf_hook: None,
            appended: false,
            branch_sealing: carry.branch_sealing,
            shifts: carry
                .shifts
                .filter(|s| s.page_bytes() == page_bytes)
                .unwrap_or_else(|| Arc::new(Shifts::new(page_bytes))),
            check_node,
        }
    }

    /// Undoes this transaction's allocations and hands back what it borrowed. Pages it wrote
    /// in place are free space and stay as garbage.
    pub(crate) fn abort(mut self) -> Carry {
        // Spills written behind read their frames until drained; the pages are free again
        // once this returns. A failure is kept by the storage for the next commit.
        if self.behind {
            let _ = self.drain_behind();
        }
        for (start, len) in std::mem::take(&mut self.taken) {
            // Cannot overlap: these pages were removed from this very set.
            let _ = self.free.insert(start, len);
        }
        self.finish()
    }

    /// Hands back what the transaction borrowed (after a commit, or via `abort`).
    pub(crate) fn finish(mut self) -> Carry {
        let page_bytes = self.page_bytes;
        // Draining even an empty map clears all of its control bytes: after a checkpoint
        // (tens of thousands of dirty pages) that was a 64 KiB memset in every commit that
        // wrote no page (a logged one).
        if !self.dirty.is_empty() {
            for (_, d) in self.dirty.drain() {
                if let Place::Owned(buf) = d.place {
                    if buf.len() == page_bytes && self.pool.len() < self.pool_max {
                        self.pool.push(buf);
                    }
                }
            }
        }
        self.taken.clear();
        self.spare.clear();
        self.freed.clear();
        self.ids.clear();
        self.wmap.appending = self.appended;
        self.wmap.written();
        Carry {
            free: self.free,
            pool: self.pool,
            pool_max: self.pool_max,
            owned_max: self.owned_max,
            wmap: self.wmap,
            chain: self.chain,
            branch_sealing: self.branch_sealing.next(),
            shifts: Some(self.shifts),
            spare_capacity: Buffers {
                dirty: self.dirty,
                taken: self.taken,
                spare: self.spare,
                freed: self.freed,
                ids: self.ids,
                extents: self.extents,
                runs: self.runs,
            },
        }
    }
}

impl WritePages {
    /// Dirty page `id` read straight from the mapping, without a dirty-map lookup, while every
    /// dirty page of the transaction lives there (no owned buffers): for a reference naming
    /// this transaction, which only a dirty page can answer. The caller checks the reference
    /// (`PageRef::check`); the page id is checked here.
    #[inline]
    fn mapped_dirty_page(&self, id: u64) -> Option<&[u8]> {
        if self.any_owned {
            return None;
        }
        let p = self.mapped_page(id)?;
        (header::page_id(p) == id).then_some(p)
    }

    /// The bytes of page `id` in the writable mapping, whatever they hold, if the file covers
    /// it (a page past the file's end would fault).
    #[inline]
    fn mapped_page(&self, id: u64) -> Option<&[u8]> {
        if id < META_SLOTS || (id + 1).saturating_mul(self.page_bytes as u64) > self.wmap.file_bytes
        {
            return None;
        }
        self.wmap.view.as_ref()?.page(id)
    }
}

impl PageSource for WritePages {
    /// A reference names the commit that wrote its page, and this transaction's dirty pages
    /// are referenced with its own id: any other reference is to a committed page, read from
    /// the snapshot without looking in the dirty-page map.
    #[inline]
    fn page_at(&self, r: PageRef) -> Result<&[u8]> {
        let p = if r.txn != self.txn {
            self.base.page(r.id)?
        } else if let Some(p) = self.mapped_dirty_page(r.id) {
            p
        } else {
            self.page(r.id)?
        };
        r.check(p)?;
        Ok(p)
    }

    #[inline]
    fn page(&self, id: u64) -> Result<&[u8]> {
        match self.dirty.get(&id).map(|d| &d.place) {
            Some(Place::Owned(b)) => Ok(b),
            Some(Place::Mapped(_)) => self.wmap.bytes(id, self.page_bytes, self.page_bytes),
            None => self.base.page(id),
        }
    }

    fn run_at(&self, r: PageRef, pages: u64) -> Result<&[u8]> {
        // A run a logged commit after the base tree wrote, put in this transaction's tree by
        // its merge of the overlays (`Snapshot::run_after`).
        if r.txn > self.base.meta.txn && r.txn < self.txn && !self.dirty.contains_key(&r.id) {
            return self.base.run_after(r, pages);
        }
        let p = self.run(r.id, pages)?;
        r.check(p)?;
        Ok(p)
    }

    fn run(&self, id: u64, pages: u64) -> Result<&[u8]> {
        let ps = self.page_bytes;
        match self.dirty.get(&id).map(|d| &d.place) {
            Some(Place::Owned(b)) if b.len() as u64 == pages * ps as u64 => Ok(b),
            Some(Place::Mapped(n)) if *n == pages => self.wmap.bytes(id, pages as usize * ps, ps),
            Some(_) => Err(Error::corrupted(id, "overflow run length mismatch")),
            None => self.base.run(id, pages),
        }
    }

    #[inline]
    fn page_bytes(&self) -> usize {
        self.page_bytes
    }

    #[inline]
    fn prefetch_page(&self, id: u64) {
        self.base.prefetch_mapped_page(id);
    }

    #[inline]
    fn prefetch_head(&self, id: u64, lines: usize) {
        self.base.prefetch_mapped_head(id, lines);
    }
}
