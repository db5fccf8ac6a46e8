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

use super::freelist::{
    encode_page, extents_per_page, to_extents_into, Extent, FreeSet, KIND_DURABLE, KIND_READERS,
    KIND_RELEASE,
};
use super::shift::{CellsCrc, Shifts};
use super::{
    init_page, overflow_pages, page_id_field, page_type, seal_page, stamp_page, Access, MapView,
    Meta, PageRef, PageSource, Snapshot, TableHeader, H_CHECKSUM, META_SLOTS, PAGE_BRANCH,
    PAGE_FREELIST, PAGE_HEADER_BYTES, PAGE_LEAF,
};
use crate::error::{Error, Result};
use crate::limits::PAGE_COUNT_MAX;
use crate::storage::Storage;
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
/// allocate and zero a page per copy.
const POOL_PAGES_MAX: usize = 4096;

/// Bytes gathered into one `write_at` when consecutive pages are written at commit.
const WRITE_BATCH_BYTES_MAX: usize = 1 << 20;

/// A freelist chain may grow by deltas to twice a base's length plus this many pages before a
/// commit rewrites it as a base.
const DELTA_SLACK_PAGES: usize = 8;

/// Largest number of allocations `WriteMap::is_cold` lets pass unchecked while it finds only
/// resident pages.
const COLD_CHECK_BACKOFF_MAX: u32 = 255;

/// Most bytes of new pages a transaction keeps in owned buffers because an append filled them
/// (`WritePages::new_page_appended`); past this, they live in the mapping like other pages, so
/// a huge load in one transaction does not hold its pages twice in memory.
const APPENDED_OWNED_BYTES_MAX: usize = 64 << 20;

/// Granularity of file growth through the writable mapping: fallocate is a journalled metadata
/// change, so it is not made for every few pages. A durable commit trims what is unused.
const ALLOCATE_STEP_BYTES: u64 = 4 << 20;

/// Where a dirty page's bytes are.
enum Place {
    /// In a buffer owned by the transaction.
    Owned(Box<[u8]>),
    /// In place in the writable mapping; the value is the length in pages.
    Mapped(u64),
}

/// A dirty page (or overflow run) of the transaction.
struct Dirty {
    place: Place,
    /// True while the page's checksum is current: sealed early (see `RECENT_PAGES`) and not
    /// written to since. Every write access goes through `page_mut` or `dirty_page_mut`,
    /// which clear it.
    sealed: bool,
    /// A branch that left the window of recent pages and has not been written since (see
    /// `BranchSealing`).
    out: bool,
    /// For a node copied from a committed page: the `crc0` of its cell area (from its unused
    /// gap to the end), derived from the copied page's checksum and kept current by the edits
    /// made through `node_mut` (`edit::insert_tracked`, `replace_tracked`,
    /// `set_child_tracked`); `None` once anything writes the page through `page_mut` or
    /// `dirty_page_mut`. Sealing then derives the checksum instead of reading the whole page
    /// (see `shift`).
    cells: Option<u32>,
    /// Debug builds: compare a derived checksum with one computed over the page when sealing.
    /// False where the copied page's own checksum did not match its bytes (the derived one
    /// then rightly differs: the damage stays detectable) and in release builds.
    check_derived: bool,
}

impl Dirty {
    /// The page is about to be written: an early seal is void, and the commit seals the page
    /// (it is not pushed back into the window: a page written again after leaving it is
    /// typically a branch on a hot path, which would be sealed over and over). The derived
    /// cell-area CRC survives only a write that reports its changes (`node_mut`). Returns true
    /// if this is a branch written again after it left the window (`BranchSealing`).
    #[inline]
    fn begin_write(&mut self, keep_cells: bool) -> bool {
        self.sealed = false;
        if !keep_cells {
            self.cells = None;
        }
        std::mem::take(&mut self.out)
    }

    fn owned(buf: Box<[u8]>) -> Dirty {
        Dirty {
            place: Place::Owned(buf),
            sealed: false,
            out: false,
            cells: None,
            check_derived: false,
        }
    }
}

/// How many pages a transaction dirtied most recently are left unsealed. When a leaf or
/// overflow page leaves this window it is sealed at once, while its bytes are still in the
/// CPU cache, instead of at commit: a 1000-put random commit dirties about 1,400 pages, 5.6 MB,
/// which is out of the core's cache by commit time, so sealing them there cost a second trip
/// to memory per page (docs/design/performance.md). A page written again after its early seal
/// is sealed again at commit.
const RECENT_PAGES: usize = 16;

/// Cache lines of a reserved copy's page (`WritePages::reserve_copy`) asked for, for writing,
/// when it is allocated: its header and slot array, which the put then edits. The lines arrive
/// while the path above is updated (more measured slower: they compete with the original's).
const RESERVE_PREFETCH_LINES: usize = 8;

/// Fewer branches than this leaving the window in one transaction say too little about the
/// workload: the next transaction keeps the current `BranchSealing` decision.
const BRANCH_SEAL_SAMPLE_MIN: u64 = 64;

/// Whether branches are sealed early, as leaves are, decided from what the last transaction
/// saw. Most of a random commit's branches are written again after they leave the window of
/// recent pages when the commit's puts outnumber the branches above the leaves (1000 puts
/// over the 550 such branches of a 1M-record tree): sealing them early would be wasted, so
/// they are sealed at commit. When the branches outnumber the puts (5,500 of them at 10M
/// records), most are written once: sealing them at commit reads each back from memory, and
/// sealing them early is the cheaper one (docs/design/performance.md). The writer counts the
/// branches that leave the window and those written again afterwards, and seals branches
/// early in the next transaction if fewer than half came back.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct BranchSealing {
    early: bool,
    /// Branches that left the window in this transaction.
    out: u64,
    /// Of those, branches written again afterwards.
    back: u64,
}

impl BranchSealing {
    /// The decision for the next transaction.
    fn next(self) -> BranchSealing {
        let early = if self.out < BRANCH_SEAL_SAMPLE_MIN {
            self.early
        } else {
            self.back * 2 < self.out
        };
        BranchSealing {
            early,
            out: 0,
            back: 0,
        }
    }
}

/// The writable mapping of the file and the length allocated behind it. Owned by the writer
/// state between transactions and by `WritePages` during one. The mapping is an `Access`
/// that commits also hand to the snapshots they publish, so readers and the writer share it.
pub(crate) struct WriteMap {
    storage: Arc<dyn Storage>,
    page_bytes: usize,
    map: Option<Arc<Access>>,
    /// The pages of `map`, for reading dirty pages without the `Access` dispatch.
    view: Option<MapView>,
    /// File length, all of it allocated when `enabled`.
    pub(crate) file_bytes: u64,
    /// False where the storage cannot allocate or map: dirty pages are owned buffers then.
    enabled: bool,
    /// `Options::readahead`, applied to each new mapping.
    readahead: bool,
    /// Allocations left before `is_cold` checks again, and the current gap between checks.
    cold_skip: u32,
    cold_backoff: u32,
    /// New space from here to `file_bytes` is allocated but not yet populated (mapped in):
    /// it is populated when a page in it is first placed in the mapping.
    unpopulated_from: u64,
    /// The last transaction appended pages (`WritePages::new_page_appended`): this one keeps
    /// its new single pages in owned buffers from the start.
    appending: bool,
}

impl WriteMap {
    pub(crate) fn new(
        storage: Arc<dyn Storage>,
        page_bytes: usize,
        file_bytes: u64,
        enabled: bool,
        readahead: bool,
    ) -> WriteMap {
        WriteMap {
            storage,
            page_bytes,
            map: None,
            view: None,
            file_bytes,
            enabled,
            readahead,
            cold_skip: 0,
            cold_backoff: 0,
            unpopulated_from: file_bytes,
            appending: false,
        }
    }

    /// Makes bytes `[0, end)` of the file allocated and mapped for writing. Returns false if
    /// the storage cannot (callers fall back to owned buffers).
    fn ensure(&mut self, end: u64) -> Result<bool> {
        if !self.enabled {
            return Ok(false);
        }
        let mut grown = None;
        if self.file_bytes < end {
            // A whole step if there is room for it, else exactly what is needed, so that a
            // nearly full disk is used to its last page.
            let step = end.div_ceil(ALLOCATE_STEP_BYTES) * ALLOCATE_STEP_BYTES;
            let mut target = step;
            let allocated = match self.storage.allocate(step) {
                Err(e) if step > end && crate::error::is_disk_full(&e) => {
                    target = end;
                    self.storage.allocate(end)?
                }
                other => other?,
            };
            if !allocated {
                self.enabled = false;
                return Ok(false);
            }
            grown = Some((self.file_bytes, target));
            self.file_bytes = target;
        }
        let mapped = self
            .map
            .as_ref()
            .and_then(|m| m.mapped_bytes())
            .unwrap_or(0);
        if mapped < end {
            let mut len = super::MAP_BYTES_MIN.max(mapped);
            while len < end {
                len *= 2;
            }
            match self.storage.map_mut(len) {
                // Snapshots that hold the smaller mapping keep it alive until they end.
                Some(map) => {
                    let access = Access::Shared(map?);
                    access.advise_readahead(self.readahead);
                    // The new view before the new map: the old map stays alive (held by
                    // `self.map`) until the view that points into it is gone.
                    self.view = access.view(self.page_bytes, u64::MAX);
                    self.map = Some(Arc::new(access));
                }
                None => {
                    self.enabled = false;
                    return Ok(false);
                }
            }
        }
        if let Some((from, _)) = grown {
            self.unpopulated_from = self.unpopulated_from.min(from);
        }
        Ok(true)
    }

    /// Before a page ending at byte `end` is written through the mapping: maps in the new
    /// space not populated yet, in one call rather than one page fault per page as the writer
    /// reaches it. Only a hint: older kernels refuse it, and that changes nothing.
    #[inline]
    fn populate_to(&mut self, end: u64) {
        if end <= self.unpopulated_from {
            return;
        }
        let from = self.unpopulated_from;
        if let (Some(map), true) = (self.map.as_ref(), from < self.file_bytes) {
            map.populate_write(from as usize, (self.file_bytes - from) as usize);
        }
        self.unpopulated_from = self.file_bytes;
    }

    /// After a durable commit whose pages end at `needed` bytes: gives back space at the end
    /// of the file, keeping at most one allocation step of slack when writing through the
    /// mapping (so that the next commits do not allocate again at once).
    pub(crate) fn trim(&mut self, needed: u64) {
        let target = if self.enabled {
            needed.div_ceil(ALLOCATE_STEP_BYTES) * ALLOCATE_STEP_BYTES
        } else {
            needed
        };
        let current = match self.storage.len() {
            Ok(len) => len,
            Err(_) => return,
        };
        if current > target && self.storage.set_len(target).is_ok() {
            self.file_bytes = target;
            self.unpopulated_from = self.unpopulated_from.min(target);
        }
    }

    /// True if page `id` is reused space whose bytes are not in memory: writing it through the
    /// mapping would make the kernel read it from the disk first, only for the copy to
    /// overwrite it (a write fault on a non-resident page of a shared file mapping). Such a
    /// page is written with `write_at` instead, which needs no read. Found by the memsweep
    /// suite: with a database larger than memory, reused free pages are mostly cold, and the
    /// writer ran at half speed (docs/design/performance.md). The check is a `mincore` call;
    /// while it keeps finding resident pages (a database in memory), it is made for one
    /// allocation in up to `COLD_CHECK_BACKOFF_MAX + 1`, so it costs nothing measurable there.
    #[inline]
    fn is_cold(&mut self, id: u64, page_bytes: usize) -> bool {
        if self.cold_skip > 0 {
            self.cold_skip -= 1;
            return false;
        }
        self.check_cold(id, page_bytes)
    }

    #[inline(never)]
    fn check_cold(&mut self, id: u64, page_bytes: usize) -> bool {
        let Some(ptr) = self
            .map
            .as_ref()
            .and_then(|m| m.writable(id as usize * page_bytes, page_bytes))
        else {
            return false;
        };
        let mut resident = [0u8; 1];
        // SAFETY: `ptr` is page-aligned (the mapping is, and database pages are multiples of
        // the 4 KiB system page) and `[ptr, ptr + 1)` lies in the mapping (checked by
        // `writable`); mincore writes one byte per system page of the range into `resident`.
        let r = unsafe { libc::mincore(ptr as *mut libc::c_void, 1, resident.as_mut_ptr()) };
        let cold = r == 0 && resident[0] & 1 == 0;
        self.cold_backoff = if cold {
            0
        } else {
            (self.cold_backoff + 1).min(COLD_CHECK_BACKOFF_MAX)
        };
        self.cold_skip = self.cold_backoff;
        cold
    }

    /// The mapping, for the snapshot a commit publishes: it covers every page the commit
    /// wrote.
    pub(crate) fn access(&self) -> Option<&Arc<Access>> {
        self.map.as_ref().filter(|_| self.enabled)
    }

    fn bytes(&self, id: u64, len: usize, page_bytes: usize) -> Result<&[u8]> {
        match self.map.as_ref() {
            Some(m) => m.bytes(id, (len / page_bytes) as u64, page_bytes),
            None => Err(Error::corrupted(
                id,
                "internal: dirty page outside the writable mapping",
            )),
        }
    }

    /// Requires: `id` is a dirty page (or run) of the current write transaction, or, for
    /// `write_meta`, a meta slot; either way no snapshot reads it.
    fn bytes_mut(&mut self, id: u64, len: usize, page_bytes: usize) -> Result<&mut [u8]> {
        self.slice_mut(id as usize * page_bytes, len)
            .ok_or_else(|| {
                Error::corrupted(id, "internal: dirty page outside the writable mapping")
            })
    }

    fn slice_mut(&mut self, at: usize, len: usize) -> Option<&mut [u8]> {
        let ptr = self.map.as_ref()?.writable(at, len)?;
        // SAFETY: `ptr..ptr + len` lies in the mapping (checked by `writable`), which `self`
        // keeps alive for the slice's lifetime. Only the writer holds a `WriteMap` (it moves
        // between the writer state and the write transaction), and `&mut self` ties the slice
        // to one borrow of it, so the writer holds one mutable slice at a time. Callers pass
        // only pages that are dirty in the current transaction (taken from free space: no
        // snapshot can reach them, so no reader holds a slice of them) or a meta slot
        // (snapshots keep their meta decoded; no page access reads slots 0 and 1).
        Some(unsafe { std::slice::from_raw_parts_mut(ptr, len) })
    }
}

/// What a write transaction hands back to the writer state when it ends.
pub(crate) struct Carry {
    pub(crate) free: FreeSet,
    pub(crate) pool: Vec<Box<[u8]>>,
    pub(crate) wmap: WriteMap,
    /// Pages of the newest commit's freelist chain, newest first, with the commit that wrote
    /// each, if known (saves reading it back).
    pub(crate) chain: Option<Vec<(u64, u64)>>,
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
            wmap,
            chain: None,
            spare_capacity: Buffers::default(),
            branch_sealing: BranchSealing::default(),
            shifts: None,
        }
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
    freed: Vec<(u64, u64, u64)>,
    scratch: Vec<u8>,
    split_copy: Vec<u8>,
    ids: Vec<u64>,
    extents: Vec<Extent>,
    runs: Vec<(u64, u64)>,
}

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
    /// Committed pages this transaction replaced or deleted, with the txn that wrote each:
    /// pending after commit.
    freed: Vec<(u64, u64, u64)>,
    /// The last durable commit when the transaction began.
    last_durable: u64,
    pool: Vec<Box<[u8]>>,
    wmap: WriteMap,
    /// Scratch space for building a cell, reused across puts.
    pub(crate) scratch: Vec<u8>,
    /// Scratch space for the copy of a node being split, reused across splits.
    pub(crate) split_copy: Vec<u8>,
    /// The base snapshot's freelist chain (page, writing commit), newest first, if known;
    /// after `prepare_commit`, the new one.
    chain: Option<Vec<(u64, u64)>>,
    /// Page ids, sorted and grouped at commit; kept for the next transaction.
    ids: Vec<u64>,
    /// The free set's persisted form, built at commit; kept for the next transaction.
    extents: Vec<Extent>,
    /// Freed pages grouped into extents at commit; kept for the next transaction.
    runs: Vec<(u64, u64)>,
    /// The pages written most recently, a ring (0: no page; slot 0 is a meta page, never
    /// dirty). See `RECENT_PAGES`.
    recent: [u64; RECENT_PAGES],
    recent_at: usize,
    /// Whether any dirty page of the transaction is an owned buffer (not in the mapping).
    any_owned: bool,
    /// Bytes of appended pages in owned buffers (see `APPENDED_OWNED_BYTES_MAX`).
    appended_owned_bytes: usize,
    branch_sealing: BranchSealing,
    shifts: Arc<Shifts>,
}

impl WritePages {
    pub(crate) fn new(
        base: Arc<Snapshot>,
        txn: u64,
        last_durable: u64,
        carry: Carry,
    ) -> WritePages {
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
            last_durable,
            pool: carry.pool,
            wmap: carry.wmap,
            scratch: b.scratch,
            split_copy: b.split_copy,
            chain: carry.chain,
            ids: b.ids,
            extents: b.extents,
            runs: b.runs,
            recent: [0; RECENT_PAGES],
            recent_at: 0,
            any_owned: false,
            appended_owned_bytes: 0,
            branch_sealing: carry.branch_sealing,
            shifts: carry
                .shifts
                .filter(|s| s.page_bytes() == page_bytes)
                .unwrap_or_else(|| Arc::new(Shifts::new(page_bytes))),
        }
    }

    /// Undoes this transaction's allocations and hands back what it borrowed. Pages it wrote
    /// in place are free space and stay as garbage.
    pub(crate) fn abort(mut self) -> Carry {
        for (start, len) in std::mem::take(&mut self.taken) {
            // Cannot overlap: these pages were removed from this very set.
            let _ = self.free.insert(start, len);
        }
        self.finish()
    }

    /// Hands back what the transaction borrowed (after a commit, or via `abort`).
    pub(crate) fn finish(mut self) -> Carry {
        let page_bytes = self.page_bytes;
        for (_, d) in self.dirty.drain() {
            if let Place::Owned(buf) = d.place {
                if buf.len() == page_bytes && self.pool.len() < POOL_PAGES_MAX {
                    self.pool.push(buf);
                }
            }
        }
        self.taken.clear();
        self.spare.clear();
        self.freed.clear();
        self.ids.clear();
        self.wmap.appending = self.appended_owned_bytes > 0;
        Carry {
            free: self.free,
            pool: self.pool,
            wmap: self.wmap,
            chain: self.chain,
            branch_sealing: self.branch_sealing.next(),
            shifts: Some(self.shifts),
            spare_capacity: Buffers {
                dirty: self.dirty,
                taken: self.taken,
                spare: self.spare,
                freed: self.freed,
                scratch: self.scratch,
                split_copy: self.split_copy,
                ids: self.ids,
                extents: self.extents,
                runs: self.runs,
            },
        }
    }

    fn alloc(&mut self, n: u64) -> Result<u64> {
        if let Some(i) = self.spare.iter().position(|&(_, len)| len >= n) {
            let (start, len) = self.spare[i];
            if len == n {
                self.spare.swap_remove(i);
            } else {
                self.spare[i] = (start + n, len - n);
            }
            return Ok(start);
        }
        if let Some(start) = self.free.alloc(n) {
            self.taken.push((start, n));
            return Ok(start);
        }
        let start = self.page_count;
        if start + n > PAGE_COUNT_MAX {
            return Err(Error::DatabaseFull);
        }
        self.page_count += n;
        Ok(start)
    }

    /// Allocates `n` pages and makes room for them: in place in the mapping if possible,
    /// otherwise in an owned buffer. Returns the id and whether the bytes are in the mapping.
    /// `appended`: the page is a new node of a sequential load (see `new_page_appended`). A
    /// copied node's derived cell-area CRC is set when it is copied (`copy_reserved`).
    fn place(&mut self, n: u64, appended: bool) -> Result<(u64, bool)> {
        let id = self.alloc(n)?;
        let bytes = n as usize * self.page_bytes;
        let mapped = self.wmap.ensure((id + n) * self.page_bytes as u64)?;
        // Only reused space can be cold: a page past the base snapshot's end is new space.
        let reused = id < self.base.meta.page_count;
        let owned_new = mapped
            && n == 1
            && !reused
            && (appended || self.wmap.appending)
            && self.appended_owned_bytes + bytes <= APPENDED_OWNED_BYTES_MAX;
        let in_map =
            mapped && !owned_new && !(n == 1 && reused && self.wmap.is_cold(id, self.page_bytes));
        if owned_new {
            self.appended_owned_bytes += bytes;
        } else if in_map && !reused {
            self.wmap.populate_to((id + n) * self.page_bytes as u64);
        }
        let dirty = if in_map {
            Dirty {
                place: Place::Mapped(n),
                sealed: false,
                out: false,
                cells: None,
                check_derived: false,
            }
        } else if n == 1 {
            self.any_owned = true;
            Dirty::owned(
                self.pool
                    .pop()
                    .unwrap_or_else(|| vec![0u8; bytes].into_boxed_slice()),
            )
        } else {
            self.any_owned = true;
            Dirty::owned(vec![0u8; bytes].into_boxed_slice())
        };
        // Before the page is entered: the page the window pushes out may be this very id,
        // freed and reused within the transaction, and must not be sealed before its bytes
        // are written.
        self.touched(id);
        self.dirty.insert(id, dirty);
        Ok((id, in_map))
    }

    /// Records that dirty page `id` was just written, and seals the page this pushes out of the
    /// window of recent pages (`RECENT_PAGES`).
    #[inline]
    fn touched(&mut self, id: u64) {
        let slot = self.recent_at % RECENT_PAGES;
        self.recent_at = self.recent_at.wrapping_add(1);
        let out = std::mem::replace(&mut self.recent[slot], id);
        if out != 0 {
            self.seal_early(out);
        }
    }

    /// Seals dirty page `id` now if it is not sealed. Sealing early is always safe: a later
    /// write clears the flag and the page is sealed again.
    fn seal_early(&mut self, id: u64) {
        let ps = self.page_bytes;
        let txn = self.txn;
        let Some(d) = self.dirty.get_mut(&id) else {
            // Freed again in this transaction.
            return;
        };
        if d.sealed {
            return;
        }
        let page: &mut [u8] = match &mut d.place {
            Place::Owned(b) => b,
            Place::Mapped(n) => match self.wmap.bytes_mut(id, *n as usize * ps, ps) {
                Ok(p) => p,
                // Left for the commit, which reports it.
                Err(_) => return,
            },
        };
        if page_type(page) == PAGE_BRANCH {
            // A branch is written again whenever one of its children is copied: sealed early
            // only while most branches are not (`BranchSealing`).
            d.out = true;
            self.branch_sealing.out += 1;
            if !self.branch_sealing.early {
                return;
            }
        }
        seal(page, id, txn, d.cells, d.check_derived, &self.shifts);
        d.sealed = true;
    }

    pub(crate) fn is_dirty(&self, id: u64) -> bool {
        self.dirty.contains_key(&id)
    }

    /// Allocates a new dirty page of type `kind` with an empty body.
    pub(crate) fn new_page(&mut self, kind: u8) -> Result<u64> {
        self.new_page_placed(kind, false)
    }

    /// `new_page` for a node a sequential load fills (the new right page of a split at the
    /// end): kept in an owned buffer and written with `write_at` at commit instead of placed
    /// in the mapping, as are all new single pages of the transaction after one that appended
    /// (`WriteMap::appending`: a load's copies of the right edge, its catalog and freelist
    /// pages), up to `APPENDED_OWNED_BYTES_MAX` per transaction. Such pages are written in
    /// full and rarely read again by the writer; writing one costs the kernel a copy into the
    /// page cache, where placing it in the mapping costs a zeroed page mapped in first (the
    /// populate): 1M- and 10M-record sequential loads ran 7.4M -> 11.0M and 7.5M -> 10.9M
    /// records/s (docs/design/performance.md). Random inserts keep the mapping: their new pages
    /// are read and copied again soon, which through the mapping costs no page fault (10M
    /// random inserts with every new page owned: 416K -> 394K puts/s).
    pub(crate) fn new_page_appended(&mut self, kind: u8) -> Result<u64> {
        self.new_page_placed(kind, true)
    }

    fn new_page_placed(&mut self, kind: u8, appended: bool) -> Result<u64> {
        let (id, _) = self.place(1, appended)?;
        let txn = self.txn;
        let p = self.page_mut(id)?;
        stamp_page(p, id, txn);
        init_page(p, kind);
        Ok(id)
    }

    /// Allocates an overflow run for `value`, copies the value in, and returns its first page.
    pub(crate) fn new_run(&mut self, value: &[u8]) -> Result<u64> {
        let pages = overflow_pages(value.len(), self.page_bytes);
        let (id, _) = self.place(pages, false)?;
        let txn = self.txn;
        let buf = self.page_mut(id)?;
        stamp_page(buf, id, txn);
        init_page(buf, super::PAGE_OVERFLOW);
        super::set_page_a(buf, pages as u32);
        super::set_page_b(buf, value.len() as u32);
        buf[PAGE_HEADER_BYTES..PAGE_HEADER_BYTES + value.len()].copy_from_slice(value);
        Ok(id)
    }

    /// Returns a dirty, writable copy of page `id`: the page itself if this transaction already
    /// copied it, otherwise a copy at a newly allocated id. Returns the id to use from now on.
    pub(crate) fn make_dirty(&mut self, id: u64) -> Result<u64> {
        if self.dirty.contains_key(&id) {
            return Ok(id);
        }
        let (new_id, _) = self.place(1, false)?;
        self.copy_reserved(id, new_id)?;
        Ok(new_id)
    }

    /// The first half of `make_dirty` for a committed node, split so that work which does not
    /// need the node's bytes (pointing the path above at the copy) can run while they are
    /// still on their way from memory: allocates the page the copy goes to and enters it as
    /// dirty, without reading the node, and asks for the new page's head for writing
    /// (`RESERVE_PREFETCH_LINES`). `copy_reserved(node, new)` must follow before anything
    /// reads or writes the new page; the node must not be dirty (a reference to it names an
    /// earlier commit).
    pub(crate) fn reserve_copy(&mut self) -> Result<u64> {
        let (id, in_map) = self.place(1, false)?;
        if let Some(p) = self.mapped_page(id).filter(|_| in_map) {
            for line in 0..RESERVE_PREFETCH_LINES {
                super::prefetch_write(p, line * 64);
            }
        }
        Ok(id)
    }

    /// The second half of `reserve_copy` (and of `make_dirty`): copies committed node `id` into
    /// `new`, stamps it, and frees `id` when the transaction commits.
    pub(crate) fn copy_reserved(&mut self, id: u64, new: u64) -> Result<()> {
        let ps = self.page_bytes;
        let old = self.base.page(id)?;
        let born = super::page_txn_field(old);
        let cells = match page_type(old) {
            PAGE_LEAF | PAGE_BRANCH => cells_crc(&self.shifts, old),
            _ => None,
        };
        let check = cells.is_some() && cfg!(debug_assertions) && super::checksum_ok(old);
        let Some(d) = self.dirty.get_mut(&new) else {
            return Err(Error::corrupted(
                new,
                "internal: reserved page is not dirty",
            ));
        };
        // Whatever the window did to the empty page meanwhile (an early seal) is void.
        d.begin_write(false);
        d.cells = cells;
        d.check_derived = check;
        let dst: &mut [u8] = match &mut d.place {
            Place::Owned(b) => &mut b[..],
            Place::Mapped(_) => self.wmap.bytes_mut(new, ps, ps)?,
        };
        // The unused gap is not copied: nothing reads it and the checksum skips it.
        let (gap_start, gap_end) = super::unused_gap(old);
        dst[..gap_start].copy_from_slice(&old[..gap_start]);
        dst[gap_end..].copy_from_slice(&old[gap_end..]);
        stamp_page(dst, new, self.txn);
        self.freed.push((id, 1, born));
        Ok(())
    }

    /// The writable bytes of `id` if it is a dirty single page of this transaction.
    #[inline]
    pub(crate) fn dirty_page_mut(&mut self, id: u64) -> Option<&mut [u8]> {
        let ps = self.page_bytes;
        let d = self.dirty.get_mut(&id)?;
        if d.begin_write(false) {
            self.branch_sealing.back += 1;
        }
        match &mut d.place {
            Place::Owned(b) if b.len() == ps => Some(&mut b[..]),
            Place::Mapped(1) => self.wmap.bytes_mut(id, ps, ps).ok(),
            _ => None,
        }
    }

    /// The writable bytes of dirty node `id` with its derived cell-area CRC, which the caller
    /// keeps current (`CellsCrc`): every change to the cell area is reported there.
    pub(crate) fn node_mut(&mut self, id: u64) -> Result<(&mut [u8], CellsCrc<'_>)> {
        let ps = self.page_bytes;
        let Some(d) = self.dirty.get_mut(&id) else {
            return Err(Error::corrupted(
                id,
                "internal: writing a page that is not dirty",
            ));
        };
        if d.begin_write(true) {
            self.branch_sealing.back += 1;
        }
        let Dirty { place, cells, .. } = d;
        let p: &mut [u8] = match place {
            Place::Owned(b) => &mut b[..],
            Place::Mapped(n) => self.wmap.bytes_mut(id, *n as usize * ps, ps)?,
        };
        Ok((p, CellsCrc::new(cells, &self.shifts)))
    }

    /// The writable bytes of dirty page (or run) `id`.
    pub(crate) fn page_mut(&mut self, id: u64) -> Result<&mut [u8]> {
        let ps = self.page_bytes;
        let d = self.dirty.get_mut(&id);
        match d.map(|d| {
            if d.begin_write(false) {
                self.branch_sealing.back += 1;
            }
            &mut d.place
        }) {
            Some(Place::Owned(b)) => Ok(&mut b[..]),
            Some(Place::Mapped(n)) => {
                let len = *n as usize * ps;
                self.wmap.bytes_mut(id, len, ps)
            }
            None => Err(Error::corrupted(
                id,
                "internal: writing a page that is not dirty",
            )),
        }
    }

    /// Frees `pages` pages at `id`: at once if this transaction allocated them, otherwise as
    /// pending once the transaction commits.
    pub(crate) fn free(&mut self, id: u64, pages: u64) -> Result<()> {
        if let Some(d) = self.dirty.remove(&id) {
            if let Place::Owned(buf) = d.place {
                if buf.len() == self.page_bytes && self.pool.len() < POOL_PAGES_MAX {
                    self.pool.push(buf);
                }
            }
            self.spare.push((id, pages));
        } else {
            let born = super::page_txn_field(self.base.run(id, pages)?);
            self.freed.push((id, pages, born));
        }
        Ok(())
    }

    /// True if the transaction changed nothing.
    pub(crate) fn is_clean(&self) -> bool {
        self.dirty.is_empty() && self.freed.is_empty() && self.spare.is_empty()
    }

    /// Builds the freelist chain for the new commit and returns the meta that names it.
    /// Requires: every tree change of the transaction is done (`catalog` is final).
    /// After this, the dirty pages are the complete set of pages the commit writes.
    ///
    /// The chain is either the old one with a delta in front (the free set's changes since the
    /// last commit, `FreeSet::log`) or a new base (the whole free set), whichever is shorter,
    /// except that deltas stop once the chain would be more than twice as long as a base plus
    /// `DELTA_SLACK_PAGES`: then a base replaces the chain. So a commit writes
    /// O(what it changed) freelist pages, amortised, and loading reads at most about three
    /// times a base.
    pub(crate) fn prepare_commit(&mut self, catalog: TableHeader) -> Result<Meta> {
        let old_chain: Vec<(u64, u64)> = match self.chain.take() {
            Some(chain) => chain,
            None => self
                .base
                .freelist_chain()?
                .into_iter()
                .map(|(id, born, _)| (id, born))
                .collect(),
        };
        let txn = self.txn;
        self.pend_freed();
        for &(start, len) in &self.spare {
            if !self.free.insert(start, len) {
                return Err(Error::corrupted(start, "internal: spare page already free"));
            }
        }
        self.spare.clear();
        self.free.settle();
        self.trim();
        let per_page = extents_per_page(self.page_bytes);
        // A base would hold the free set plus the old chain's pages, which it frees.
        let base_pages = (self.free.entry_count() + old_chain.len()).div_ceil(per_page);
        // A delta holds the log plus one removal per page it allocates for itself.
        let delta_pages = self
            .free
            .log()
            .map(|log| (log.len() + 1).div_ceil(per_page).max(1))
            .unwrap_or(usize::MAX);
        // Every entry of a chain must lie below the page count of the commit that names the
        // chain (loading checks it). A chain built by deltas keeps that only while the page
        // count does not shrink and the delta's own entries lie below it: otherwise, a base.
        let use_delta = !old_chain.is_empty()
            && delta_pages < base_pages
            && old_chain.len() + delta_pages <= 2 * base_pages + DELTA_SLACK_PAGES
            && self.page_count >= self.base.meta.page_count
            && self.free.log().is_some_and(|log| {
                log.iter().all(|&(_, start, len, kind)| {
                    kind == KIND_RELEASE || start + len <= self.page_count
                })
            });
        let chain = if use_delta {
            self.write_delta(old_chain)?
        } else {
            self.write_base(old_chain)?
        };
        self.free.start_log();
        let head = chain.first().copied().unwrap_or((0, 0));
        let pages = chain.len() as u64;
        self.chain = Some(chain);
        Ok(Meta {
            txn,
            page_bytes: self.page_bytes as u32,
            page_count: self.page_count,
            catalog,
            freelist_head: PageRef::new(head.0, head.1),
            freelist_pages: pages,
            last_durable_txn: self.base.meta.last_durable_txn,
            durable: false,
            boot_id: [0; 16],
        })
    }

    /// Makes the pages this transaction freed pending. Pages written after the last durable
    /// commit are not part of it: only readers can still need them. Older pages are also
    /// needed by a recovery after a power loss.
    fn pend_freed(&mut self) {
        let txn = self.txn;
        for (kind, after_durable) in [(KIND_READERS, true), (KIND_DURABLE, false)] {
            self.ids.clear();
            for &(start, len, born) in &self.freed {
                if (born > self.last_durable) == after_durable {
                    self.ids.extend(start..start + len);
                }
            }
            to_extents_into(&mut self.ids, &mut self.runs);
            self.free.add_pending(txn, kind, &self.runs);
        }
        self.freed.clear();
    }

    /// Gives back free space at the end of the file.
    fn trim(&mut self) {
        loop {
            let trimmed = self.free.trim_tail(self.page_count);
            if trimmed == self.page_count {
                break;
            }
            self.page_count = trimmed;
        }
    }

    /// Writes the whole free set as a new chain, freeing the old chain's pages. Returns the new
    /// chain, newest (head) first.
    fn write_base(&mut self, old_chain: Vec<(u64, u64)>) -> Result<Vec<(u64, u64)>> {
        let txn = self.txn;
        self.freed
            .extend(old_chain.into_iter().map(|(id, born)| (id, 1, born)));
        self.pend_freed();
        self.free.settle();
        self.trim();
        // Allocating chain pages from the free set never adds extents (it takes the front of
        // one), so the page count computed first is enough.
        let per_page = extents_per_page(self.page_bytes);
        let needed = self.free.entry_count().div_ceil(per_page);
        let mut chain = Vec::with_capacity(needed);
        for _ in 0..needed {
            chain.push((self.new_page(PAGE_FREELIST)?, txn));
        }
        let mut entries = std::mem::take(&mut self.extents);
        entries.clear();
        self.free.entries_into(&mut entries);
        if entries.len() > chain.len() * per_page {
            return Err(Error::corrupted(0, "internal: freelist chain too short"));
        }
        for i in 0..chain.len() {
            let from = (i * per_page).min(entries.len());
            let to = ((i + 1) * per_page).min(entries.len());
            let next = chain
                .get(i + 1)
                .map_or(PageRef::default(), |&(id, born)| PageRef::new(id, born));
            encode_page(self.page_mut(chain[i].0)?, next, &entries[from..to]);
        }
        self.extents = entries;
        Ok(chain)
    }

    /// Puts the free set's changes since the last commit in front of the old chain. Returns
    /// the new chain, newest (head) first.
    fn write_delta(&mut self, old_chain: Vec<(u64, u64)>) -> Result<Vec<(u64, u64)>> {
        let txn = self.txn;
        let per_page = extents_per_page(self.page_bytes);
        // Each page allocated here adds at most one removal to the log it records.
        let mut pages: Vec<u64> = Vec::new();
        loop {
            let Some(len) = self.free.log().map(|l| l.len()) else {
                return Err(Error::corrupted(0, "internal: freelist log lost"));
            };
            if pages.len() * per_page >= len {
                break;
            }
            pages.push(self.new_page(PAGE_FREELIST)?);
        }
        let mut entries = std::mem::take(&mut self.extents);
        entries.clear();
        entries.extend_from_slice(self.free.log().unwrap_or(&[]));
        // Replay reads the chain from its tail: the delta's first entries go in the page
        // nearest the old chain, its last ones in the new head.
        let mut next = old_chain
            .first()
            .map_or(PageRef::default(), |&(id, born)| PageRef::new(id, born));
        for (i, &id) in pages.iter().enumerate() {
            let from = (i * per_page).min(entries.len());
            let to = ((i + 1) * per_page).min(entries.len());
            encode_page(self.page_mut(id)?, next, &entries[from..to]);
            next = PageRef::new(id, txn);
        }
        self.extents = entries;
        let mut chain: Vec<(u64, u64)> = pages.iter().rev().map(|&id| (id, txn)).collect();
        chain.extend(old_chain);
        Ok(chain)
    }

    /// Seals every dirty page (page id, txn id, checksum) and makes it reach the file: pages
    /// in the mapping are sealed in place; owned buffers are written with `write_at`, gathering
    /// consecutive pages into larger writes. Returns the bytes written or sealed.
    pub(crate) fn write_out(&mut self, storage: &dyn Storage) -> Result<u64> {
        let ps = self.page_bytes;
        if !self.any_owned {
            // Every dirty page is in the mapping: seal in place, in any order.
            let mut written = 0u64;
            for (&id, d) in self.dirty.iter_mut() {
                if let Place::Mapped(n) = d.place {
                    let len = n as usize * ps;
                    let page = self.wmap.bytes_mut(id, len, ps)?;
                    let state = (d.sealed, d.cells, d.check_derived);
                    seal_or_check(page, id, self.txn, state, &self.shifts);
                    written += len as u64;
                }
            }
            return Ok(written);
        }
        // Owned buffers are written in page order, consecutive ones gathered.
        let mut ids = std::mem::take(&mut self.ids);
        ids.clear();
        ids.extend(self.dirty.keys().copied());
        ids.sort_unstable();
        let mut batch: Vec<u8> = Vec::new();
        let mut batch_start = 0u64;
        let mut written = 0u64;
        for &id in &ids {
            let Some(d) = self.dirty.get_mut(&id) else {
                continue;
            };
            let (sealed, cells, check) = (d.sealed, d.cells, d.check_derived);
            let buf: &mut [u8] = match &mut d.place {
                Place::Owned(b) => b,
                Place::Mapped(n) => {
                    let len = *n as usize * ps;
                    let page = self.wmap.bytes_mut(id, len, ps)?;
                    seal_or_check(page, id, self.txn, (sealed, cells, check), &self.shifts);
                    written += len as u64;
                    continue;
                }
            };
            debug_assert!(page_type(buf) != 0);
            seal_or_check(buf, id, self.txn, (sealed, cells, check), &self.shifts);
            let at = id * ps as u64;
            let contiguous = !batch.is_empty() && batch_start + batch.len() as u64 == at;
            if !contiguous || batch.len() + buf.len() > WRITE_BATCH_BYTES_MAX {
                if !batch.is_empty() {
                    storage.write_at(&batch, batch_start)?;
                    written += batch.len() as u64;
                    batch.clear();
                }
                batch_start = at;
            }
            if buf.len() > WRITE_BATCH_BYTES_MAX {
                storage.write_at(buf, at)?;
                written += buf.len() as u64;
                batch_start = at + buf.len() as u64;
                continue;
            }
            batch.extend_from_slice(buf);
        }
        if !batch.is_empty() {
            storage.write_at(&batch, batch_start)?;
            written += batch.len() as u64;
        }
        Ok(written)
    }
}

/// Seals a dirty page at commit, unless it was sealed early and not written since (debug
/// builds check that claim: a write that bypassed `page_mut` would show here). The page's
/// state is (sealed, cells, check_derived) of its `Dirty`.
#[inline]
fn seal_or_check(
    page: &mut [u8],
    id: u64,
    txn: u64,
    (sealed, cells, check): (bool, Option<u32>, bool),
    shifts: &Shifts,
) {
    if sealed {
        // A derived checksum of a copy of a damaged page rightly does not match.
        debug_assert!(
            (cells.is_some() && !check)
                || (super::checksum_ok(page) && super::page_id_field(page) == id),
            "page {id} written after its early seal"
        );
    } else {
        seal(page, id, txn, cells, check, shifts);
    }
}

/// `crc0` of the cell area of committed node page `old` (from its unused gap to the end),
/// derived from its checksum: `crc0(P ++ C) = shift(crc0(P), |C|) ^ crc0(C)`, where `P` is the
/// page from after the checksum field to the gap. `None` if the page's layout gives no gap.
fn cells_crc(shifts: &Shifts, old: &[u8]) -> Option<u32> {
    let (start, end) = super::unused_gap(old);
    let len = old.len();
    if start < H_CHECKSUM + 4 || start > end || end > len || len > shifts.page_bytes() {
        return None;
    }
    let head = &old[H_CHECKSUM + 4..start];
    let whole = super::page_checksum_field(old) ^ shifts.zeros(head.len() + (len - end));
    Some(whole ^ shifts.shift(shifts.crc0(head), len - end))
}

/// Stamps and checksums a dirty page: from its derived cell-area CRC when there is one (the
/// same checksum, without reading the cell area), otherwise over the whole page.
#[inline]
fn seal(page: &mut [u8], id: u64, txn: u64, cells: Option<u32>, check: bool, shifts: &Shifts) {
    let Some(cells) = cells else {
        seal_page(page, id, txn);
        return;
    };
    stamp_page(page, id, txn);
    let (start, end) = super::unused_gap(page);
    let len = page.len();
    let head = &page[H_CHECKSUM + 4..start];
    let crc =
        shifts.shift(shifts.crc0(head), len - end) ^ cells ^ shifts.zeros(head.len() + (len - end));
    debug_assert!(
        !check || crc == super::page_checksum(page),
        "derived checksum of page {id} differs"
    );
    super::set_page_checksum_field(page, crc);
}

impl WritePages {
    /// Writes the meta fields at `offset` (a meta slot): through the writable mapping when
    /// there is one (no syscall), with `write_at` otherwise.
    pub(crate) fn write_meta(
        &mut self,
        bytes: &[u8],
        offset: u64,
        storage: &dyn Storage,
    ) -> Result<()> {
        let at = offset as usize;
        let end = offset + bytes.len() as u64;
        if self.wmap.enabled && self.wmap.file_bytes >= end {
            if let Some(dst) = self.wmap.slice_mut(at, bytes.len()) {
                dst.copy_from_slice(bytes);
                return Ok(());
            }
        }
        storage.write_at(bytes, offset)?;
        Ok(())
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
        (page_id_field(p) == id).then_some(p)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn branches_are_sealed_early_after_a_transaction_where_most_did_not_come_back() {
        let start = BranchSealing::default();
        assert!(!start.early);
        let seen = |early, out, back| BranchSealing { early, out, back }.next().early;
        // Most came back (1M records, 1000-put commits): sealed at commit.
        assert!(!seen(false, 330, 264));
        assert!(!seen(true, 330, 264));
        // Most did not (10M records): sealed early.
        assert!(seen(false, 946, 163));
        // Exactly half came back: at commit.
        assert!(!seen(true, 200, 100));
        // Too few to judge: the decision stands.
        assert!(seen(true, BRANCH_SEAL_SAMPLE_MIN - 1, 0));
        assert!(!seen(false, BRANCH_SEAL_SAMPLE_MIN - 1, 0));
        // The counters start again.
        let next = BranchSealing {
            early: false,
            out: 500,
            back: 10,
        }
        .next();
        assert_eq!((next.out, next.back), (0, 0));
    }
}
