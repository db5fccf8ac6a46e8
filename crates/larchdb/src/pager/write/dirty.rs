//! Dirty pages: where they live (in place in the writable mapping, or in owned buffers), how
//! they are allocated and copied on write, and the write access to them.

use super::{FreedRun, WritePages};
use crate::error::{Error, Result};
use crate::layout::META_SLOTS;
use crate::layout::{header, kind, overflow, unused_gap};
use crate::limits::PAGE_COUNT_MAX;
use crate::pager::page::{checksum_ok, init_page, prefetch_write, stamp_page};
use crate::pager::shift::{cells_crc, CellsCrc};
use crate::pager::{PageRef, PageSource};

/// Most bytes of new pages a transaction keeps in owned buffers because an append or a merge
/// made them (`WritePages::new_page_appended`, `new_page_filled`, a merge's branch copies),
/// and less where the memory budget is (`Carry::with_owned_bytes`); past this, they live in
/// the mapping like other pages, so a huge load in one transaction does not hold its pages
/// twice in memory.
pub(super) const APPENDED_OWNED_BYTES_MAX: usize = 64 << 20;

/// Cache lines of a reserved copy's page (`WritePages::reserve_copy`) asked for, for writing,
/// when it is allocated: its header and slot array, which the put then edits. The lines arrive
/// while the path above is updated (more measured slower: they compete with the original's).
const RESERVE_PREFETCH_LINES: usize = 8;

/// Freed runs (of a page or more) `forget_freed` lets gather before it drops them from the
/// resident set: a system call per batch, not per page.
const FORGET_FREED_RUNS: usize = 1024;

/// What a new page is for, which decides where it is placed (`WritePages::place`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Placing {
    /// A node or run the transaction may read and change again: in the mapping, unless new
    /// space after an append (`WriteMap::appending`) or during a checkpoint's merge
    /// (`WritePages::merging`), or any page of a merge synced as soon as it is written
    /// (`WritePages::synced_soon`).
    Node,
    /// The new right page of a sequential load (`new_page_appended`).
    Appended,
    /// A node written whole, not read again (`new_page_filled`).
    Filled,
}

/// Where a dirty page's bytes are.
pub(super) enum Place {
    /// In a buffer owned by the transaction.
    Owned(Box<[u8]>),
    /// In place in the writable mapping; the value is the length in pages.
    Mapped(u64),
}

/// A dirty page (or overflow run) of the transaction.
pub(super) struct Dirty {
    pub(super) place: Place,
    /// True while the page's checksum is current: sealed early (see `RECENT_PAGES`) and not
    /// written to since. Every write access goes through `page_mut` or `dirty_page_mut`,
    /// which clear it.
    pub(super) sealed: bool,
    /// The page is on the file as it is: a merge's spilled page not written to since (every
    /// write access clears it, as `sealed`). The write-out of frames skips it.
    pub(super) filed: bool,
    /// A branch that left the window of recent pages and has not been written since (see
    /// `BranchSealing`).
    pub(super) out: bool,
    /// For a node copied from a committed page: the `crc0` of its cell area (from its unused
    /// gap to the end), derived from the copied page's checksum and kept current by the edits
    /// made through `node_mut` (`edit::insert_tracked`, `replace_tracked`,
    /// `set_child_tracked`); `None` once anything writes the page through `page_mut` or
    /// `dirty_page_mut`. Sealing then derives the checksum instead of reading the whole page
    /// (see `shift`).
    pub(super) cells: Option<u32>,
    /// Debug builds: compare a derived checksum with one computed over the page when sealing.
    /// False where the copied page's own checksum did not match its bytes (the derived one
    /// then rightly differs: the damage stays detectable) and in release builds.
    pub(super) check_derived: bool,
}

impl Dirty {
    /// The page is about to be written: an early seal is void, and the commit seals the page
    /// (it is not pushed back into the window: a page written again after leaving it is
    /// typically a branch on a hot path, which would be sealed over and over). The derived
    /// cell-area CRC survives only a write that reports its changes (`node_mut`). Returns true
    /// if this is a branch written again after it left the window (`BranchSealing`).
    #[inline]
    pub(super) fn begin_write(&mut self, keep_cells: bool) -> bool {
        self.sealed = false;
        self.filed = false;
        if !keep_cells {
            self.cells = None;
        }
        std::mem::take(&mut self.out)
    }

    pub(super) fn owned(buf: Box<[u8]>) -> Dirty {
        Dirty {
            place: Place::Owned(buf),
            sealed: false,
            filed: false,
            out: false,
            cells: None,
            check_derived: false,
        }
    }
}

impl WritePages {
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

    /// The transaction needs pages past its frames (it grew the file beyond them): rather
    /// than keep each further page in an owned buffer until its commit, whatever their number,
    /// the writer maps the file from here on (`WriteMap::frames_to_file`), which the kernel
    /// writes back and takes under pressure. The pages this transaction wrote in frames are
    /// copied into the mapping first; every other page the frames hold is on the file
    /// (`write_out` put it there), as are the pages it spilled (`Dirty::filed`). Readers of
    /// earlier snapshots keep the frames until they end.
    fn leave_frames(&mut self, end: u64) -> Result<()> {
        let Some(frames) = self.wmap.frames_to_file(end) else {
            return Ok(());
        };
        // Pages written behind (this transaction's spills, a checkpoint's) reach the file
        // before the mapping reads it.
        self.drain_behind()?;
        let ps = self.page_bytes;
        let (dirty, wmap) = (&self.dirty, &mut self.wmap);
        for (&id, d) in dirty.iter() {
            if let (Place::Mapped(n), false) = (&d.place, d.filed) {
                let from = frames.bytes(id, *n, ps)?;
                wmap.bytes_mut(id, *n as usize * ps, ps)?
                    .copy_from_slice(from);
            }
        }
        if let Some(f) = frames.frames() {
            f.written();
        }
        Ok(())
    }

    /// Allocates `n` pages and makes room for them: in place in the mapping if possible,
    /// otherwise in an owned buffer. Returns the id and whether the bytes are in the mapping.
    /// `placing` says what the page is for (`Placing`). A copied node's derived cell-area CRC
    /// is set when it is copied (`copy_reserved`).
    fn place(&mut self, n: u64, placing: Placing) -> Result<(u64, bool)> {
        let id = self.alloc(n)?;
        let bytes = n as usize * self.page_bytes;
        let end = (id + n) * self.page_bytes as u64;
        if self.wmap.past_frames(end) {
            self.leave_frames(end)?;
        }
        let mapped = self.wmap.ensure(end)?;
        // Only reused space can be cold: a page past the base snapshot's end is new space.
        let reused = id < self.base.meta.page_count;
        let wants_owned = match placing {
            Placing::Node => {
                (!reused && (self.wmap.appending || self.merging))
                    || (self.merging && self.synced_soon)
            }
            Placing::Appended => !reused,
            Placing::Filled => true,
        };
        let owned_new =
            mapped && n == 1 && wants_owned && self.appended_owned_bytes + bytes <= self.owned_max;
        let cold =
            mapped && !owned_new && n == 1 && reused && self.wmap.is_cold(id, self.page_bytes);
        let in_map = mapped && !owned_new && !cold;
        if cold && placing == Placing::Node {
            self.cold_owned.push(id);
        }
        self.wmap.placed(id, n, in_map);
        if owned_new {
            self.appended_owned_bytes += bytes;
            // A sequential load's pages (not a merge's): the next transaction is likely one too.
            self.appended |=
                placing == Placing::Appended || (placing == Placing::Node && self.wmap.appending);
            if placing == Placing::Filled {
                self.spill.push(id);
            }
        }
        if !reused && (in_map || (self.synced_soon && self.wmap.frames().is_some())) {
            // New space: mapped in ahead, also for an owned page copied into its frame to be
            // written behind from there; the other owned pages in new space stay on the file
            // alone (`WritePages::to_frame`).
            self.wmap.populate_to((id + n) * self.page_bytes as u64);
        }
        let dirty = if in_map {
            Dirty {
                place: Place::Mapped(n),
                sealed: false,
                filed: false,
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

    /// Marks the transaction as running a checkpoint's merge (`btree::merge_sorted`): new
    /// space it takes for any page is kept in owned buffers, as for an append. The merge
    /// writes its leaves out as it goes (`spill_filled`); a branch copy placed in new space of
    /// the mapping would have the whole allocation step behind it populated (zeroed and mapped
    /// in) only for those leaves to be written over it: 22% of a merge's samples at 1M.
    pub(crate) fn merging(&mut self) {
        self.merging = true;
    }

    /// Marks the transaction as a merge whose leaves are mostly not in memory (the last
    /// checkpoint's merge read from the device: `engine::checkpoint`): the merge asks for the
    /// leaves it will reach next to be read ahead (`will_need`), so that the device reads
    /// many at once instead of one fault at a time.
    pub(crate) fn read_ahead(&mut self) {
        self.reads_ahead = true;
    }

    /// Has a merge call `hook` after each leaf it writes (`leaf_done`): the checkpoint's
    /// share of the device beside readers (`engine::admission::share::DeviceShare`).
    pub(crate) fn between_leaves(&mut self, hook: Box<dyn FnMut() + Send>) {
        self.leaf_hook = Some(hook);
    }

    /// A merge wrote a leaf (see `between_leaves`).
    pub(crate) fn leaf_done(&mut self) {
        if let Some(hook) = self.leaf_hook.as_mut() {
            hook();
        }
    }

    /// Whether the merge reads its leaves ahead (`read_ahead`).
    pub(crate) fn reads_ahead(&self) -> bool {
        self.reads_ahead
    }

    /// Asks for committed pages `id..id + pages` to be read into the page cache now, without
    /// waiting (`Snapshot::will_need`), one request for each run among them that is not
    /// this transaction's (its own pages are in memory).
    pub(crate) fn will_need(&self, id: u64, pages: u64) {
        let ask = |from: u64, to: u64| {
            if to > from {
                let hinted = self.base.will_need(from, to - from);
                if hinted > 0 {
                    let (p, r) = self.asked_ahead.get();
                    self.asked_ahead.set((p + hinted, r + 1));
                }
            }
        };
        let end = id.saturating_add(pages);
        let mut from = id;
        for p in id..end {
            if self.is_dirty(p) {
                ask(from, p);
                from = p + 1;
            }
        }
        ask(from, end);
    }

    /// The pages hinted to be read ahead so far (`will_need`: those the kernel was asked
    /// for, cached or not), and the requests that took.
    pub(crate) fn asked_ahead(&self) -> (u64, u64) {
        self.asked_ahead.get()
    }

    /// Marks the transaction as made durable as soon as it is written (a checkpoint of one
    /// slice among several): a merge then keeps every page it takes in an owned buffer,
    /// written with `write_at`, reused space included. A page stored into through the mapping
    /// is write-protected by the sync that follows, a TLB flush on every other core for each
    /// (an interrupt on a virtual machine): with every slice synced, that took a third of a
    /// random overwrite load's time (docs/design/performance.md). Not for checkpoints that
    /// are rarely synced, whose copies of reused pages in owned buffers would be held in
    /// anonymous memory until the commit (up to `owned_max`).
    pub(crate) fn synced_soon(&mut self) {
        self.synced_soon = true;
    }

    /// Starts the writeback of the pages `spill_filled` writes out as it writes them, a few at
    /// a time (`storage::Paced`): a checkpoint's merge beside readers that wait on the device,
    /// whose pages would otherwise reach the device all at once at a sync (its own, or the
    /// sync of the checkpoint before it, which runs beside it).
    pub(crate) fn pace_writeback(&mut self) {
        self.paced = Some(crate::storage::Paced::default());
    }

    /// Whether a wait for the writeback `pace_writeback` started failed: the write error is
    /// reported once, so the handle must stop writing.
    pub(crate) fn writeback_failed(&self) -> bool {
        self.writeback_failed
    }

    /// Marks dirty page `id` as written whole and not to be written again by this
    /// transaction (a leaf a relocation copied): if it waits in an owned buffer, it joins the
    /// filled pages `spill_filled` writes out as they gather. A compaction under a memory limit
    /// finds the free pages it copies into cold, so each copy was an owned buffer held until
    /// the commit: the whole tree in anonymous memory, and the process killed at the close.
    pub(crate) fn filled(&mut self, id: u64) -> Result<()> {
        let ps = self.page_bytes;
        let owned =
            matches!(self.dirty.get(&id).map(|d| &d.place), Some(Place::Owned(b)) if b.len() == ps);
        // Only a page the mapping covers: once written out, it is read through the mapping
        // (`spill_filled`); without one (a storage that cannot be mapped) it stays owned.
        if owned && self.mapped_page(id).is_some() {
            self.spill.push(id);
        }
        self.spill_filled()
    }

    /// Drops the committed pages freed since the last call from the process's resident set,
    /// once at least `FORGET_FREED_RUNS` runs of them wait. For a relocation (compaction), which
    /// reads every page it moves and writes the copy through the mapping: with the pages it
    /// left behind still mapped, the process held the tree twice at the close.
    pub(crate) fn forget_freed(&mut self) {
        let waiting = &self.freed[self.freed_forgotten.min(self.freed.len())..];
        // Counted in runs, each at least a page: a check per relocated leaf costs nothing.
        if waiting.len() < FORGET_FREED_RUNS {
            return;
        }
        let mut runs: Vec<(u64, u64)> = waiting.iter().map(|r| (r.start, r.pages)).collect();
        runs.sort_unstable();
        runs.dedup_by(|next, run| {
            let adjacent = run.0 + run.1 == next.0;
            if adjacent {
                run.1 += next.1;
            }
            adjacent
        });
        self.wmap.forget(&runs);
        self.freed_forgotten = self.freed.len();
    }

    pub(crate) fn is_dirty(&self, id: u64) -> bool {
        self.dirty.contains_key(&id)
    }

    /// Allocates a new dirty page of type `kind` with an empty body.
    pub(crate) fn new_page(&mut self, kind: u8) -> Result<u64> {
        self.new_page_placed(kind, Placing::Node)
    }

    /// `new_page` for a node a sequential load fills (the new right page of a split at the
    /// end): kept in an owned buffer and written with `write_at` at commit instead of placed
    /// in the mapping, as are all new single pages of the transaction after one that appended
    /// (`WriteMap::appending`: a load's copies of the right edge, its catalog and freelist
    /// pages), up to `owned_max` per transaction (the memory budget, at most
    /// `APPENDED_OWNED_BYTES_MAX`). Such pages are written in full and rarely read again by
    /// the writer; writing one costs the kernel a copy into the page cache, where placing it
    /// in the mapping costs a zeroed page mapped in first (the populate): 1M- and 10M-record
    /// sequential loads ran 7.4M -> 11.0M and 7.5M -> 10.9M
    /// records/s (docs/design/performance.md). Random inserts keep the mapping: their new pages
    /// are read and copied again soon, which through the mapping costs no page fault (10M
    /// random inserts with every new page owned: 416K -> 394K puts/s).
    pub(crate) fn new_page_appended(&mut self, kind: u8) -> Result<u64> {
        self.new_page_placed(kind, Placing::Appended)
    }

    /// `new_page` for a node written whole and not read again by this transaction (a leaf a
    /// checkpoint's merge fills, `btree::merge_sorted`): kept in an owned buffer, as
    /// `new_page_appended`, whether the page is new space or reused. Through the mapping,
    /// every such page took a write fault (reused pages are write-protected by the last sync
    /// of the file): the pages of a checkpoint of 150,000 records into 1M cost 150-190 ms
    /// mapped and about 50 ms owned (`experiments/write-path`, `checkpoint`).
    pub(crate) fn new_page_filled(&mut self, kind: u8) -> Result<u64> {
        self.new_page_placed(kind, Placing::Filled)
    }

    fn new_page_placed(&mut self, kind: u8, placing: Placing) -> Result<u64> {
        let (id, _) = self.place(1, placing)?;
        let txn = self.txn;
        let p = self.page_mut(id)?;
        stamp_page(p, id, txn);
        init_page(p, kind);
        Ok(id)
    }

    /// Allocates an overflow run for `value`, copies the value in, and returns its first page.
    pub(crate) fn new_run(&mut self, value: &[u8]) -> Result<u64> {
        let pages = overflow::pages_for(value.len(), self.page_bytes);
        let (id, _) = self.place(pages, Placing::Node)?;
        let txn = self.txn;
        let buf = self.page_mut(id)?;
        stamp_page(buf, id, txn);
        init_page(buf, kind::OVERFLOW);
        overflow::set_run(buf, pages as u32, value.len() as u32);
        buf[overflow::VALUE_AT..overflow::VALUE_AT + value.len()].copy_from_slice(value);
        Ok(id)
    }

    /// Returns a dirty, writable copy of page `id`: the page itself if this transaction already
    /// copied it, otherwise a copy at a newly allocated id. Returns the id to use from now on.
    pub(crate) fn make_dirty(&mut self, id: u64) -> Result<u64> {
        if self.dirty.contains_key(&id) {
            return Ok(id);
        }
        let (new_id, _) = self.place(1, Placing::Node)?;
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
        let (id, in_map) = self.place(1, Placing::Node)?;
        if let Some(p) = self.mapped_page(id).filter(|_| in_map) {
            for line in 0..RESERVE_PREFETCH_LINES {
                prefetch_write(p, line * 64);
            }
        }
        Ok(id)
    }

    /// The second half of `reserve_copy` (and of `make_dirty`): copies committed node `id` into
    /// `new`, stamps it, and frees `id` when the transaction commits.
    pub(crate) fn copy_reserved(&mut self, id: u64, new: u64) -> Result<()> {
        let ps = self.page_bytes;
        let old = self.base.page(id)?;
        let born = header::txn(old);
        let cells = match header::kind(old) {
            kind::LEAF | kind::BRANCH => cells_crc(&self.shifts, old),
            _ => None,
        };
        let check = cells.is_some() && cfg!(debug_assertions) && checksum_ok(old);
        let Some(d) = self.dirty.get_mut(&new) else {
            return Err(Error::internal(format!(
                "page {new}: reserved page is not dirty"
            )));
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
        let (gap_start, gap_end) = unused_gap(old);
        dst[..gap_start].copy_from_slice(&old[..gap_start]);
        dst[gap_end..].copy_from_slice(&old[gap_end..]);
        stamp_page(dst, new, self.txn);
        self.freed.push(FreedRun {
            start: id,
            pages: 1,
            born,
        });
        Ok(())
    }

    /// The writable bytes of `id` if it is a dirty single page of this transaction.
    #[inline]
    pub(crate) fn dirty_page_mut(&mut self, id: u64) -> Option<&mut [u8]> {
        let ps = self.page_bytes;
        // A failed drain is kept by the storage: the commit's write-out meets it again.
        self.wait_if_behind(id).ok()?;
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
        self.wait_if_behind(id)?;
        let Some(d) = self.dirty.get_mut(&id) else {
            return Err(Error::internal(format!(
                "page {id}: writing a page that is not dirty"
            )));
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
        self.wait_if_behind(id)?;
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
            None => Err(Error::internal(format!(
                "page {id}: writing a page that is not dirty"
            ))),
        }
    }

    /// Frees `pages` pages at `id`: at once if this transaction allocated them, otherwise as
    /// pending once the transaction commits.
    pub(crate) fn free(&mut self, id: u64, pages: u64) -> Result<()> {
        // Freed pages of this transaction are taken again by it (`spare`).
        self.wait_if_behind(id)?;
        if let Some(d) = self.dirty.remove(&id) {
            if let Place::Owned(buf) = d.place {
                if buf.len() == self.page_bytes && self.pool.len() < self.pool_max {
                    self.pool.push(buf);
                }
            }
            self.spare.push((id, pages));
        } else {
            let born = header::txn(self.base.run(id, pages)?);
            self.freed.push(FreedRun {
                start: id,
                pages,
                born,
            });
        }
        Ok(())
    }

    /// Frees the overflow run `run` refers to, of `pages` pages: `free`, with the commit that
    /// wrote it taken from the reference (checked equal to the run's header by every read
    /// through it) instead of read from the run. A merge beyond memory replacing large values
    /// otherwise read each old value's page from the device only to free it: one random read
    /// a record, the most of a checkpoint's time with seed 000's 4000-byte values.
    pub(crate) fn free_run(&mut self, run: PageRef, pages: u64) -> Result<()> {
        if self.dirty.contains_key(&run.id) {
            return self.free(run.id, pages);
        }
        let end = run.id.checked_add(pages);
        if run.id < META_SLOTS || end.is_none_or(|end| end > self.base.meta.page_count) {
            return Err(Error::corrupted(
                run.id,
                format!(
                    "overflow run of {pages} pages out of range (file has {} pages)",
                    self.base.meta.page_count
                ),
            ));
        }
        let freed = FreedRun {
            start: run.id,
            pages,
            born: run.txn,
        };
        let named = self.named.as_ref().is_some_and(|n| {
            n.lock()
                .unwrap_or_else(|e| e.into_inner())
                .names(run.id, run.txn)
        });
        match self.defer_runs {
            // A record a replay reads may name it: freed once no replay does
            // (`FreeSet::defer`).
            Some(_) if named => self.deferred.push(freed),
            _ => self.freed.push(freed),
        }
        Ok(())
    }

    /// Takes `n` pages for the writer's runs of large values (`Meta::reserve_list`): free
    /// extents of at least `shortest` pages, at most `extents_max` of them, then the file's end
    /// for the rest (only where the free space ran out, not where it is in more pieces), given
    /// room in the file, their frames forgotten (the writer writes them to the file, and a
    /// reader loads them from there); neither in the tree nor free from this commit on.
    /// Returns the extents, ascending; `None`, with nothing taken, where the file has no room
    /// for them (a full disk): the writer's values go to the log meanwhile.
    pub(crate) fn reserve_pages(
        &mut self,
        n: u64,
        shortest: u64,
        extents_max: usize,
    ) -> Result<Option<Vec<(u64, u64)>>> {
        let (page_count, taken) = (self.page_count, self.taken.len());
        let mut got = self.free.take_extents(n, shortest, extents_max);
        self.taken.extend_from_slice(&got);
        let have: u64 = got.iter().map(|e| e.1).sum();
        if have < n && got.len() < extents_max {
            let start = self.page_count;
            if start + (n - have) <= PAGE_COUNT_MAX {
                self.page_count += n - have;
                got.push((start, n - have));
            }
        }
        let Some(end) = got.iter().map(|&(s, len)| s + len).max() else {
            return Ok(None);
        };
        let end = end * self.page_bytes as u64;
        if self.wmap.past_frames(end) {
            self.leave_frames(end)?;
        }
        match self.wmap.ensure(end) {
            Ok(_) => {}
            Err(Error::DiskFull) => {
                // Given back as taken: the file's end, and the free extents.
                while self.taken.len() > taken {
                    if let Some((start, len)) = self.taken.pop() {
                        let _ = self.free.insert(start, len);
                    }
                }
                self.page_count = page_count;
                return Ok(None);
            }
            Err(e) => return Err(e),
        }
        if let Some(frames) = self.wmap.frames() {
            for &(start, len) in &got {
                frames.forget_page(start, len);
            }
        }
        Ok(Some(crate::pager::freelist::join_runs(got)))
    }

    /// Frees pages no tree reaches and no record names (a reservation's remainder): pending
    /// for nothing but this commit.
    pub(crate) fn free_unused(&mut self, id: u64, n: u64) {
        self.freed.push(FreedRun {
            start: id,
            pages: n,
            born: self.txn,
        });
    }

    /// The extents this commit's meta page names as reserved (`Meta::reserve`,
    /// `Meta::reserve_tail`).
    pub(crate) fn name_reserved(&mut self, reserve: Vec<(u64, u64)>, tail: Vec<(u64, u64)>) {
        self.reserve = reserve;
        self.reserve_tail = tail;
    }

    /// Defers the runs this transaction frees (`free_run`, `FreeSet::defer`): a record a
    /// replay reads again may name one (docs/design/large-values.md). `horizon`: the first
    /// commit a replay from this transaction's meta page reads (0 where not known); the
    /// runs deferred that commits before it wrote are freed by it, pending until it is
    /// durable.
    /// Only a run a record names (`named`, `NamedRuns::names`) waits; any other is freed as
    /// pages are.
    pub(crate) fn defer_runs(
        &mut self,
        horizon: u64,
        named: std::sync::Arc<std::sync::Mutex<crate::pager::freelist::NamedRuns>>,
    ) {
        self.defer_runs = Some(horizon);
        self.named = Some(named);
    }

    /// For a failed commit, which reads its free set again: the runs deferred before that
    /// it took out to free (`FreeSet::undefer`), deferred again, and those it deferred
    /// itself, which are its base tree's again and must not be (in the free set's deferred
    /// runs too, once `pend_freed` moved them there). Its horizon is forgotten
    /// (`NamedRuns::forget`): no durable commit of its id names it.
    pub(crate) fn take_deferred(&mut self) -> (Vec<FreedRun>, Vec<FreedRun>) {
        if let Some(named) = &self.named {
            named
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .forget(self.txn);
        }
        let mut own = std::mem::take(&mut self.own_deferred);
        own.append(&mut self.deferred);
        (std::mem::take(&mut self.undeferred), own)
    }

    /// `defer_runs`' horizon, once known.
    pub(crate) fn defer_horizon(&mut self, horizon: u64) {
        if let Some(h) = self.defer_runs.as_mut() {
            *h = horizon;
        }
    }

    /// Before page `id` is written or freed: if a spill wrote it behind and the write may
    /// still be in flight, waits for the writes behind (the bytes of a write in flight stay
    /// unchanged, and no page is in two writes at once).
    #[inline]
    fn wait_if_behind(&mut self, id: u64) -> Result<()> {
        if self.behind && self.dirty.get(&id).is_some_and(|d| d.filed) {
            self.drain_behind()?;
        }
        Ok(())
    }

    /// True if the transaction changed nothing.
    pub(crate) fn is_clean(&self) -> bool {
        self.dirty.is_empty() && self.freed.is_empty() && self.spare.is_empty()
    }
}
