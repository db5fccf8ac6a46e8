//! Free-space accounting. A page is in exactly one of: reachable from the newest commit, free
//! (reusable now), or pending (freed by a commit, but still reachable from an older snapshot
//! that a reader or a crash could need). A page written by commit W and freed by commit T is
//! reachable from snapshots W..T-1 only, so it is pending while a snapshot in that range must be
//! kept:
//! - a live reader's: at every commit, pending runs are released in the order freed while no
//!   reader is older than T (the oldest reader's horizon, one comparison); and at each
//!   checkpoint that horizon holds runs back (`held_back`), or at a page commit once the
//!   pending runs have doubled since the last look (`scan_due`), every pending run is tested
//!   against each reader's tree, so that a reader held for long pins only the pages of its
//!   own tree, not everything freed after it (`release_unreached`);
//! - the last durable commit's, D: only if W <= D < T. Pages written after D (the bulk, when
//!   commits are not synced) are not part of D and are reused as soon as readers allow.
//!
//! Persisted as a chain of freelist pages of entries; see docs/design/file-format.md. A commit
//! either rewrites the whole set (a *base*: free and pending extents) or, when that would be
//! longer, appends only what changed since the last commit (a *delta*: the same entries plus
//! removals and releases, replayed in order on load). So a commit's freelist cost follows what
//! it changed, not the size of the free set, which long-lived readers and unsynced commits can
//! make large.

mod bitmap;
mod codec;
mod named;
mod replay;

pub(crate) use codec::{decode_page, decode_reserve_page, encode_page};
pub(crate) use named::NamedRuns;
pub(crate) use replay::replay;

use crate::error::{Error, Result};
use crate::limits::PAGE_COUNT_MAX;
use bitmap::Bitmap;
use std::collections::{BTreeMap, VecDeque};

/// A persisted entry of the free set or of its change log (see the kinds below). One extent is
/// 24 bytes on a freelist page (`layout::freelist`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Extent {
    /// The commit that freed the pages, or 0 for free space and removals.
    pub(crate) txn: u64,
    /// First page (0 for a release).
    pub(crate) start: u64,
    /// Pages (for a release: the kind of pending extents released).
    pub(crate) pages: u64,
    /// One of the `KIND_` constants.
    pub(crate) kind: u32,
}

impl Extent {
    pub(crate) const fn new(txn: u64, start: u64, pages: u64, kind: u32) -> Extent {
        Extent {
            txn,
            start,
            pages,
            kind,
        }
    }
}

/// Extent kinds.
pub(crate) const KIND_FREE: u32 = 0;
/// Pending until no reader is older than the freeing txn.
pub(crate) const KIND_READERS: u32 = 1;
/// Pending also until the freeing txn is durable (the page belongs to the durable snapshot).
pub(crate) const KIND_DURABLE: u32 = 2;
/// Delta entry: the free extent is no longer free (allocated, or given back at the file's end).
pub(crate) const KIND_REMOVE: u32 = 3;
/// Delta entry: pending extents of kind `pages` (1 or 2) freed by a txn no later than `txn`
/// become free (`FreeSet::release`); `start` is 0.
pub(crate) const KIND_RELEASE: u32 = 4;

/// Change entries kept before a commit gives up on a delta and rewrites the whole set.
const LOG_MAX: usize = 1 << 20;

/// Pages freed by a commit and not yet reusable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct PendingRun {
    /// The commit that freed them.
    txn: u64,
    start: u64,
    pages: u64,
    /// The oldest commit that wrote any of them: no tree older than this reaches them. Kept in
    /// memory only; a run loaded from the file has 0 (every older tree may reach it).
    born: u64,
}

/// Committed pages a transaction frees (replaced by a copy, or deleted): pending once it
/// commits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FreedRun {
    pub(crate) start: u64,
    pub(crate) pages: u64,
    /// The commit that wrote them (the oldest of them, for a run of pages written apart).
    /// Pages written after the last durable commit are not part of it, so only readers can
    /// still need them; a reader of a tree older than this never reaches them.
    pub(crate) born: u64,
}

/// The snapshots that live readers hold, as `FreeSet::release_unreached` needs them.
#[derive(Clone, Debug, Default)]
pub(crate) struct Held {
    /// The trees (by commit) that live readers of this handle hold, ascending.
    pub(crate) trees: Vec<u64>,
    /// The oldest tree a reader in another process holds, if any: their other trees are not
    /// known, so every tree from this one on counts as read.
    pub(crate) foreign: Option<u64>,
}

impl Held {
    /// Whether a reader holds a tree in `from..to`, `to` excluded (pages written by commit
    /// `from` and freed by commit `to` are reachable from those trees only).
    fn reads_any(&self, from: u64, to: u64) -> bool {
        if self.foreign.is_some_and(|f| f < to) {
            return true;
        }
        let i = self.trees.partition_point(|&t| t < from);
        self.trees.get(i).is_some_and(|&t| t < to)
    }
}

/// Pending runs below which `scan_due` never asks for a scan: a handful of runs is released
/// by the horizon soon enough.
const SCAN_RUNS_MIN: usize = 1024;

/// Pending runs of one kind, in txn order: commits add their own, newer than any before, at
/// the back, and releases take from the front.
type Pending = VecDeque<PendingRun>;

/// Single free pages kept apart before they are merged into the extent map. Below this,
/// a commit that frees and reuses about as many pages as it writes (random inserts: a thousand
/// or more per commit) never changes the map.
const SINGLES_MAX: usize = 1 << 14;

/// Freed runs up to this long are kept as single pages: most allocations take one page, and a
/// single is reused with a pop where an extent costs map updates. (Runs for `alloc(n > 1)` are
/// rebuilt by merging the singles when no extent fits.)
const SINGLES_RUN_MAX: u64 = 16;

/// Fewer single pages than this are persisted as they are (see `FreeSet::settle`).
const SINGLES_SETTLE_MIN: usize = 64;

/// Free space. Single pages, the bulk of what copy-on-write frees, go to a sorted array: freed
/// pages are appended unsorted and merged into it in one sorted pass before the next
/// allocation (a commit's worth at a time), and reusing one is a pop from its end, where the
/// ordered extent map costs two range lookups and an insert or a removal per page (and a
/// binary heap, used before, a sift per push and per pop). Runs go to the extent map, which
/// coalesces neighbours. Either way the lowest free page is reused first, so data gathers at
/// the start of the file and its end can be given back. A bitmap of every free page catches a
/// double free, which only a corrupt freelist can cause, in both at once.
#[derive(Clone, Debug, Default)]
pub(crate) struct FreeSet {
    /// Free extents: start -> length, disjoint, coalesced with each other (not with `singles`).
    free: BTreeMap<u64, u64>,
    /// Free single pages, not in `free`, in descending order: the lowest is popped from the end.
    singles: Vec<u64>,
    /// Free single pages not yet merged into `singles` (`absorb`), in the order freed.
    incoming: Vec<u64>,
    /// A free extent taken out of `free` because single pages are being taken from its front
    /// (`alloc_one`): one map update per extent, not two per page. Disjoint from `free`.
    front: Option<(u64, u64)>,
    /// No page in `singles` or `incoming` is larger than this (an upper bound: pops do not
    /// lower it).
    singles_max: u64,
    /// Bit `p` is set exactly when page `p` is free (in `free` or in `singles`).
    bits: Bitmap,
    free_pages: u64,
    /// Pending extents of kind `KIND_READERS`, by freeing txn.
    pending_readers: Pending,
    /// Pending extents of kind `KIND_DURABLE`, by freeing txn.
    pending_durable: Pending,
    pending_pages: u64,
    /// Pages in `pending_durable`: what the last durable commit pins.
    pinned_pages: u64,
    /// Changes since the set was last persisted, as delta entries, in order; `None` when not
    /// recorded (then the next commit must rewrite the whole set).
    log: Option<Vec<Extent>>,
    /// Pending runs left by the last `release_unreached` (see `scan_due`).
    scanned_runs: usize,
    /// Runs that no reader of this handle reads any more (released, or pinned only for a
    /// power loss), not yet taken by `take_unread`: the writer drops them from its mapping,
    /// so that the process's resident set holds the trees readers read, not every copy the
    /// file holds. Kept in memory only.
    unread: Vec<(u64, u64)>,
    /// Pinned runs (`KIND_DURABLE`) freed by commits up to this one are in `unread` already.
    unread_pinned_through: u64,
    /// Overflow runs freed by commits that a replay may still read a record naming
    /// (`defer`). In memory only: after a crash the open's replay reads those records again
    /// and the merge frees the runs anew (docs/design/large-values.md, "When a freed logged
    /// run can be reused").
    deferred: Vec<FreedRun>,
}

impl FreeSet {
    /// Defers `runs`, freed by a commit, until a commit whose replay reads no record that
    /// named them (`undefer`). A run's `born` is the commit that wrote it, the one whose
    /// record names it where a logged commit wrote it.
    pub(crate) fn defer(&mut self, runs: Vec<FreedRun>) {
        self.deferred.extend(runs);
    }

    /// Every deferred run, taken out.
    pub(crate) fn take_deferred(&mut self) -> Vec<FreedRun> {
        std::mem::take(&mut self.deferred)
    }

    /// The deferred runs written by commits before `horizon`, the first commit a replay
    /// from the committing transaction's meta page reads: to be freed by that transaction.
    pub(crate) fn undefer(&mut self, horizon: u64) -> Vec<FreedRun> {
        let mut out = Vec::new();
        self.deferred.retain(|r| {
            let before = r.born < horizon;
            if before {
                out.push(*r);
            }
            !before
        });
        out
    }

    /// The deferred runs named by `runs` (first page, the commit that wrote it) are not
    /// freed after all: an open's round replayed the records that name them, and its
    /// overlay holds them again (`Shared::finish_replay`).
    pub(crate) fn revive(&mut self, runs: impl Iterator<Item = (u64, u64)>) -> u64 {
        if self.deferred.is_empty() {
            return 0;
        }
        let runs: std::collections::HashSet<(u64, u64)> = runs.collect();
        let before = self.deferred.len();
        self.deferred.retain(|r| !runs.contains(&(r.start, r.born)));
        (before - self.deferred.len()) as u64
    }

    /// The deferred runs (`defer`): first page, pages.
    pub(crate) fn deferred_runs(&self) -> Vec<(u64, u64)> {
        self.deferred.iter().map(|r| (r.start, r.pages)).collect()
    }

    /// Pages free to reuse now.
    pub(crate) fn free_pages(&self) -> u64 {
        self.free_pages
    }

    /// Pages freed and not yet reusable.
    pub(crate) fn pending_pages(&self) -> u64 {
        self.pending_pages
    }

    /// Pages kept only because the last durable commit may need them after a power loss.
    pub(crate) fn pinned_pages(&self) -> u64 {
        self.pinned_pages
    }

    /// Starts recording changes (after a load, or once a commit persisted the whole set).
    pub(crate) fn start_log(&mut self) {
        match &mut self.log {
            Some(log) => log.clear(),
            None => self.log = Some(Vec::new()),
        }
    }

    /// The changes recorded since `start_log`, if they were recorded (and not too many).
    pub(crate) fn log(&self) -> Option<&[Extent]> {
        self.log.as_deref()
    }

    fn record(&mut self, txn: u64, start: u64, len: u64, kind: u32) {
        if let Some(log) = &mut self.log {
            if log.len() >= LOG_MAX {
                self.log = None;
                return;
            }
            push_split(log, txn, start, len, kind);
        }
    }

    /// Adds a free extent. Returns false (and changes nothing) if it overlaps free space: a
    /// double free, which only a corrupt freelist can cause.
    pub(crate) fn insert(&mut self, start: u64, len: u64) -> bool {
        let ok = self.insert_unlogged(start, len);
        if ok && len > 0 {
            self.record(0, start, len, KIND_FREE);
        }
        ok
    }

    fn insert_unlogged(&mut self, start: u64, len: u64) -> bool {
        if len == 0 {
            return true;
        }
        let Some(end) = start.checked_add(len).filter(|&e| e <= PAGE_COUNT_MAX) else {
            return false;
        };
        if self.bits.any(start, end) {
            return false;
        }
        self.bits.set(start, end, true);
        self.free_pages += len;
        if len <= SINGLES_RUN_MAX {
            self.incoming.extend(start..end);
            self.singles_max = self.singles_max.max(end - 1);
            if self.singles_len() > SINGLES_MAX {
                self.merge_singles();
            }
        } else {
            // Back into the map first, so that the new extent coalesces with it.
            self.unfront();
            self.insert_extent(start, len);
        }
        true
    }

    /// Before the free set is persisted: if single pages would be most of its entries, merges
    /// them into the extent map, where neighbours coalesce into fewer entries. A commit writes
    /// the whole freelist, so its length matters to every later commit.
    pub(crate) fn settle(&mut self) {
        let singles = self.singles_len();
        if singles > SINGLES_SETTLE_MIN && singles > self.free.len() {
            self.merge_singles();
        }
    }

    fn singles_len(&self) -> usize {
        self.singles.len() + self.incoming.len()
    }

    /// Merges `incoming` into `singles`, keeping it in descending order: one sort of the new
    /// pages and one pass from the back of both (no allocation once the arrays have grown).
    fn absorb(&mut self) {
        if self.incoming.is_empty() {
            return;
        }
        self.incoming.sort_unstable_by(|a, b| b.cmp(a));
        let (old, new) = (self.singles.len(), self.incoming.len());
        self.singles.resize(old + new, 0);
        // Fill from the back with the smaller of the two smallest not yet placed (`i` and `j`
        // count the unplaced pages of each): the slot written, `i + j - 1`, lies past the
        // unplaced part of `singles` (`..i`) while incoming pages remain.
        let (mut i, mut j) = (old, new);
        while j > 0 {
            let k = i + j - 1;
            if i > 0 && self.singles[i - 1] < self.incoming[j - 1] {
                self.singles[k] = self.singles[i - 1];
                i -= 1;
            } else {
                self.singles[k] = self.incoming[j - 1];
                j -= 1;
            }
        }
        self.incoming.clear();
    }

    /// Moves every single page into the extent map, coalescing: for runs (`alloc(n > 1)`),
    /// tail trimming, compact persistence, and to bound the array.
    fn merge_singles(&mut self) {
        self.absorb();
        // The array's own buffer, handed back empty: no allocation.
        let mut singles = std::mem::take(&mut self.singles);
        let mut run: Option<(u64, u64)> = None;
        for &p in singles.iter().rev() {
            match &mut run {
                Some((s, l)) if *s + *l == p => *l += 1,
                _ => {
                    if let Some((s, l)) = run.take() {
                        self.insert_extent(s, l);
                    }
                    run = Some((p, 1));
                }
            }
        }
        if let Some((s, l)) = run {
            self.insert_extent(s, l);
        }
        singles.clear();
        self.singles = singles;
        self.singles_max = 0;
    }

    /// Adds an extent, known to be disjoint from free space, to the map, merging neighbours.
    fn insert_extent(&mut self, start: u64, len: u64) {
        let end = start + len;
        let mut new_start = start;
        let mut new_len = len;
        if let Some((&s, &l)) = self.free.range(..start).next_back() {
            if s + l == start {
                new_start = s;
                new_len += l;
            }
        }
        if let Some((&s, &l)) = self.free.range(end..).next() {
            if s == end {
                new_len += l;
                self.free.remove(&s);
            }
        }
        self.free.insert(new_start, new_len);
    }

    /// Takes `n` contiguous free pages: the lowest page for one; for a run, the first fit
    /// (after merging the singles, if nothing fits without).
    pub(crate) fn alloc(&mut self, n: u64) -> Option<u64> {
        if n == 1 {
            return self.alloc_one();
        }
        self.unfront();
        let fits = |free: &BTreeMap<u64, u64>| {
            free.iter()
                .find(|(_, &len)| len >= n)
                .map(|(&s, &l)| (s, l))
        };
        let (start, len) = match fits(&self.free) {
            Some(f) => f,
            None if self.singles_len() > 0 => {
                self.merge_singles();
                fits(&self.free)?
            }
            None => return None,
        };
        self.free.remove(&start);
        if len > n {
            self.free.insert(start + n, len - n);
        }
        self.took(start, n);
        Some(start)
    }

    /// Takes up to `n` free pages for a reservation of large values' runs, in at most
    /// `extents_max` extents of at least `shortest` pages each, the lowest first (data gathers
    /// at the start of the file, and its end can be given back). Returns them ascending; fewer
    /// than `n` pages where the free space has no more such extents.
    pub(crate) fn take_extents(
        &mut self,
        n: u64,
        shortest: u64,
        extents_max: usize,
    ) -> Vec<(u64, u64)> {
        self.unfront();
        self.merge_singles();
        let shortest = shortest.max(1);
        let mut out: Vec<(u64, u64)> = Vec::new();
        let mut have = 0;
        let mut from = 0;
        while have < n && out.len() < extents_max {
            let Some((&start, &len)) = self.free.range(from..).find(|&(_, &len)| len >= shortest)
            else {
                break;
            };
            let take = len.min(n - have);
            self.free.remove(&start);
            if len > take {
                self.free.insert(start + take, len - take);
            }
            self.took(start, take);
            out.push((start, take));
            have += take;
            from = start + len;
        }
        out
    }

    /// The lowest free page: the last single, the front extent's first page, or the first page
    /// of the map's lowest extent, which then becomes the front (and the old front goes back
    /// to the map). Taking pages from the front changes no map entry.
    fn alloc_one(&mut self) -> Option<u64> {
        self.absorb();
        let single = self.singles.last().copied();
        let mapped = self.free.first_key_value().map(|(&s, _)| s);
        let front = self.front.map(|(s, _)| s);
        let lowest = [single, mapped, front].into_iter().flatten().min()?;
        if Some(lowest) == single {
            self.singles.pop();
        } else if Some(lowest) == front {
            self.front = self
                .front
                .and_then(|(s, l)| (l > 1).then_some((s + 1, l - 1)));
        } else {
            let len = self.free.remove(&lowest)?;
            self.unfront();
            self.front = (len > 1).then_some((lowest + 1, len - 1));
        }
        self.took(lowest, 1);
        Some(lowest)
    }

    /// Puts the front extent back into the map.
    fn unfront(&mut self) {
        if let Some((s, l)) = self.front.take() {
            self.insert_extent(s, l);
        }
    }

    /// Accounts for `[start, start + n)`, just taken out of the free set.
    fn took(&mut self, start: u64, n: u64) {
        self.bits.set(start, start + n, false);
        self.free_pages -= n;
        self.record(0, start, n, KIND_REMOVE);
    }

    /// Records pages freed by commit `txn`, pending with `kind`.
    pub(crate) fn add_pending(&mut self, txn: u64, kind: u32, extents: &[FreedRun]) {
        if extents.is_empty() {
            return;
        }
        for e in extents {
            self.record(txn, e.start, e.pages, kind);
        }
        let pages: u64 = extents.iter().map(|e| e.pages).sum();
        self.pending_pages += pages;
        if kind == KIND_DURABLE && txn <= self.unread_pinned_through {
            // Pinned by a commit no reader is older than: unread already (`note_pinned_unread`
            // looks only past `unread_pinned_through`).
            self.unread
                .extend(extents.iter().map(|e| (e.start, e.pages)));
        }
        let queue = if kind == KIND_DURABLE {
            self.pinned_pages += pages;
            &mut self.pending_durable
        } else {
            &mut self.pending_readers
        };
        // In txn order: at the back, except for a txn older than the newest (never from a
        // commit; kept correct for any caller).
        let at = if queue.back().is_none_or(|b| b.txn <= txn) {
            queue.len()
        } else {
            queue.partition_point(|e| e.txn <= txn)
        };
        for (i, e) in extents.iter().enumerate() {
            queue.insert(
                at + i,
                PendingRun {
                    txn,
                    start: e.start,
                    pages: e.pages,
                    born: e.born,
                },
            );
        }
    }

    /// Whether `release_unreached` is worth its cost now: the pending runs have doubled since
    /// it last ran (and are more than `SCAN_RUNS_MIN`). Its cost, one look at every pending
    /// run, is then paid for by the runs added since, so a commit's cost stays independent
    /// of how much a reader pins, and the pending runs stay within twice what the readers
    /// reach (plus the runs the oldest reader's horizon releases anyway).
    pub(crate) fn scan_due(&self) -> bool {
        let runs = self.pending_readers.len() + self.pending_durable.len();
        runs > SCAN_RUNS_MIN && runs >= 2 * self.scanned_runs
    }

    /// Whether, after `release`, some pending run is kept only because a reader is older than
    /// the commit that freed it (`release_unreached` may free it). O(1).
    pub(crate) fn held_back(&self, last_durable: u64) -> bool {
        !self.pending_readers.is_empty()
            || self
                .pending_durable
                .front()
                .is_some_and(|r| r.txn <= last_durable)
    }

    /// Makes reusable every pending run that no live reader reaches and, for pages of the last
    /// durable commit (`KIND_DURABLE`), that a power loss would not return to either: a run
    /// written by commit W and freed by commit T is free once no reader holds a tree in
    /// W..T-1 (`Held::reads_any`) and, if durable-kind, T <= `last_durable`. Unlike `release`
    /// this takes runs from anywhere in the queues, which a delta cannot record: if it
    /// releases any, the next persist rewrites the whole set (a base), a cost of the same
    /// order as this scan's.
    pub(crate) fn release_unreached(&mut self, held: &Held, last_durable: u64) -> Result<()> {
        let mut freed = Vec::new();
        for durable in [false, true] {
            let queue = if durable {
                &mut self.pending_durable
            } else {
                &mut self.pending_readers
            };
            queue.retain(|r| {
                let unreached =
                    (!durable || r.txn <= last_durable) && !held.reads_any(r.born, r.txn);
                if unreached {
                    freed.push((durable, *r));
                }
                !unreached
            });
        }
        self.scanned_runs = self.pending_readers.len() + self.pending_durable.len();
        if freed.is_empty() {
            return Ok(());
        }
        self.log = None;
        for (durable, r) in freed {
            self.pending_pages -= r.pages;
            if durable {
                self.pinned_pages -= r.pages;
            }
            if !durable || r.txn > self.unread_pinned_through {
                self.unread.push((r.start, r.pages));
            }
            if !self.insert_unlogged(r.start, r.pages) {
                return Err(Error::corrupted(
                    r.start,
                    format!("page freed twice (by txn {})", r.txn),
                ));
            }
        }
        Ok(())
    }

    /// Makes reusable every pending extent that no snapshot to be kept can reach: those freed
    /// by a commit no later than the oldest reader (all of them if there is none), and for
    /// pages of the durable snapshot, no later than `last_durable` too.
    pub(crate) fn release(&mut self, oldest_reader: Option<u64>, last_durable: u64) -> Result<()> {
        let reader_horizon = oldest_reader.unwrap_or(u64::MAX);
        self.note_pinned_unread(reader_horizon);
        self.release_from(false, reader_horizon)?;
        self.release_from(true, reader_horizon.min(last_durable))?;
        let runs = self.pending_readers.len() + self.pending_durable.len();
        self.scanned_runs = self.scanned_runs.min(runs);
        Ok(())
    }

    /// Puts in `unread` the pinned runs freed by commits up to `reader_horizon` that are not
    /// there yet: no reader of this handle reaches them, though a power loss may.
    fn note_pinned_unread(&mut self, reader_horizon: u64) {
        let through = self.unread_pinned_through;
        if reader_horizon <= through {
            return;
        }
        let from = self.pending_durable.partition_point(|r| r.txn <= through);
        let to = self
            .pending_durable
            .partition_point(|r| r.txn <= reader_horizon);
        for r in self.pending_durable.range(from..to) {
            self.unread.push((r.start, r.pages));
        }
        // Not past the newest pinned run: runs a later commit pins are looked at then.
        if let Some(newest) = self.pending_durable.back() {
            self.unread_pinned_through = reader_horizon.min(newest.txn);
        }
    }

    /// The runs no reader of this handle reads any more, found since the last call, sorted
    /// and coalesced (see `unread`).
    pub(crate) fn take_unread(&mut self) -> Vec<(u64, u64)> {
        let mut runs = std::mem::take(&mut self.unread);
        runs.sort_unstable();
        let mut out: Vec<(u64, u64)> = Vec::with_capacity(runs.len().min(1024));
        for (start, pages) in runs {
            match out.last_mut() {
                Some((s, n)) if *s + *n >= start => *n = (*n).max(start + pages - *s),
                _ => out.push((start, pages)),
            }
        }
        out
    }

    fn release_from(&mut self, durable: bool, horizon: u64) -> Result<()> {
        let kind = if durable { KIND_DURABLE } else { KIND_READERS };
        let queue = if durable {
            &self.pending_durable
        } else {
            &self.pending_readers
        };
        if queue.front().is_some_and(|e| e.txn <= horizon) {
            // Replayed as the same release: no entry per page.
            self.record(horizon, 0, kind as u64, KIND_RELEASE);
        }
        loop {
            let queue = if durable {
                &mut self.pending_durable
            } else {
                &mut self.pending_readers
            };
            let Some(&PendingRun {
                txn,
                start,
                pages: len,
                ..
            }) = queue.front()
            else {
                return Ok(());
            };
            if txn > horizon {
                return Ok(());
            }
            queue.pop_front();
            self.pending_pages -= len;
            if durable {
                self.pinned_pages -= len;
            }
            if !durable || txn > self.unread_pinned_through {
                self.unread.push((start, len));
            }
            if !self.insert_unlogged(start, len) {
                return Err(Error::corrupted(
                    start,
                    format!("page freed twice (by txn {txn})"),
                ));
            }
        }
    }

    /// If the last free extent ends at `page_count`, removes it and returns the new, smaller
    /// page count: space at the end of the file is given back rather than kept free.
    pub(crate) fn trim_tail(&mut self, page_count: u64) -> u64 {
        if page_count == 0 || !self.bits.any(page_count - 1, page_count) {
            // The last page is in use: nothing to give back.
            return page_count;
        }
        self.unfront();
        if self.singles_len() > 0 && self.singles_max + 1 >= page_count {
            self.merge_singles();
        }
        match self.free.iter().next_back() {
            Some((&start, &len)) if start + len == page_count => {
                self.free.remove(&start);
                self.bits.set(start, page_count, false);
                self.free_pages -= len;
                self.record(0, start, len, KIND_REMOVE);
                start
            }
            _ => page_count,
        }
    }

    /// Number of extents `entries` returns, without building them.
    ///
    /// O(1), from counters: a commit calls this over a free set of thousands of extents.
    /// An extent of more than `u32::MAX` pages is persisted in pieces; their extra pieces are
    /// counted by an upper bound (pages / `u32::MAX`), exact unless such extents exist, which
    /// takes a free set of 16 TiB at 4 KiB pages. `entries_into` writes no more than this.
    pub(crate) fn entry_count(&self) -> usize {
        let extra = |pages: u64| (pages / u32::MAX as u64) as usize;
        self.free.len()
            + usize::from(self.front.is_some())
            + self.singles_len()
            + self.pending_readers.len()
            + self.pending_durable.len()
            + extra(self.free_pages)
            + extra(self.pending_pages)
    }

    /// Persisted form, appended to `out`: free extents, then pending ones. Extents longer than
    /// a u32 are split. Appends at most `entry_count()` items (exactly that many unless an
    /// extent is longer than `u32::MAX` pages). Plain loops into a buffer the
    /// caller keeps: a commit writes the whole free set, so this runs once per commit over
    /// every extent (nested iterator adapters cost twice as much here).
    pub(crate) fn entries_into(&self, out: &mut Vec<Extent>) {
        let push = push_split;
        out.reserve(self.entry_count());
        for (&s, &l) in self
            .free
            .iter()
            .chain(self.front.as_ref().map(|(s, l)| (s, l)))
        {
            push(out, 0, s, l, KIND_FREE);
        }
        for &p in self.singles.iter().chain(&self.incoming) {
            out.push(Extent::new(0, p, 1, KIND_FREE));
        }
        for (kind, queue) in [
            (KIND_READERS, &self.pending_readers),
            (KIND_DURABLE, &self.pending_durable),
        ] {
            for r in queue {
                push(out, r.txn, r.start, r.pages, kind);
            }
        }
    }

    /// The persisted form, as a new vector.
    #[cfg(test)]
    pub(crate) fn extents(&self) -> Vec<Extent> {
        let mut out = Vec::new();
        self.entries_into(&mut out);
        out
    }

    /// The persisted form as (txn, start, pages, kind) tuples, for tests to compare.
    #[cfg(test)]
    pub(crate) fn entries(&self) -> Vec<(u64, u64, u64, u32)> {
        self.extents()
            .into_iter()
            .map(|e| (e.txn, e.start, e.pages, e.kind))
            .collect()
    }
}

/// Appends an entry, split into pieces of at most `u32::MAX` pages (the persisted length is a
/// u32). Release entries, whose `len` is a kind, are never split.
fn push_split(out: &mut Vec<Extent>, txn: u64, start: u64, len: u64, kind: u32) {
    if len <= u32::MAX as u64 || kind == KIND_RELEASE {
        out.push(Extent::new(txn, start, len, kind));
        return;
    }
    let end = start + len;
    let mut at = start;
    while at < end {
        let n = (end - at).min(u32::MAX as u64);
        out.push(Extent::new(txn, at, n, kind));
        at += n;
    }
}

/// Groups page ids into sorted extents.
#[cfg(test)]
pub(crate) fn to_extents(pages: &mut [u64]) -> Vec<(u64, u64)> {
    pages.sort_unstable();
    join_runs(pages.iter().map(|&p| (p, 1)))
}

/// Runs of pages (first page, pages), ascending, with each run that starts where the one
/// before it ends joined to it.
pub(crate) fn join_runs(runs: impl IntoIterator<Item = (u64, u64)>) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::new();
    for (start, pages) in runs {
        match out.last_mut() {
            Some((s, l)) if *s + *l == start => *l += pages,
            _ => out.push((start, pages)),
        }
    }
    out
}

/// Runs of pages as loaded from the file, where their births are not kept (0: every tree
/// before the freeing commit may reach them).
pub(crate) fn unborn(extents: &[(u64, u64)]) -> Vec<FreedRun> {
    extents
        .iter()
        .map(|&(start, pages)| FreedRun {
            start,
            pages,
            born: 0,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pager::page::PageRef;

    /// `entries` in order (a set's entries come out in no set order).
    fn sorted<T: Ord>(mut entries: Vec<T>) -> Vec<T> {
        entries.sort();
        entries
    }

    /// One page at `start`, written by commit `born`.
    fn freed(start: u64, born: u64) -> FreedRun {
        FreedRun {
            start,
            pages: 1,
            born,
        }
    }

    #[test]
    fn insert_coalesces_and_rejects_overlap() {
        let mut f = FreeSet::default();
        // Runs longer than SINGLES_RUN_MAX go to the map, which coalesces them.
        let r = SINGLES_RUN_MAX + 1;
        assert!(f.insert(100, r));
        assert!(f.insert(100 + 2 * r, r));
        assert!(f.insert(100 + r, r));
        assert_eq!(f.entries(), vec![(0, 100, 3 * r, KIND_FREE)]);
        assert!(!f.insert(100 + r + 5, 1));
        assert!(!f.insert(90, 11));
        assert_eq!(f.free_pages(), 3 * r);
        // Short runs are kept as single pages, coalesced when the singles are merged.
        assert!(f.insert(10, 2));
        assert!(f.insert(14, 2));
        assert!(f.insert(12, 2));
        assert!(!f.insert(15, 1));
        assert!(!f.insert(8, 3));
        assert_eq!(f.entry_count(), 7);
        f.merge_singles();
        assert_eq!(
            f.entries(),
            vec![(0, 10, 6, KIND_FREE), (0, 100, 3 * r, KIND_FREE)]
        );
        assert_eq!(f.free_pages(), 6 + 3 * r);
        f.insert(1000, u32::MAX as u64 + 5);
        assert_eq!(f.entry_count(), 4, "an extent past u32 is split in two");
        assert_eq!(f.entries().len(), 4);
    }

    #[test]
    fn single_pages_are_taken_from_the_front_of_the_lowest_extent() {
        let mut f = FreeSet::default();
        assert!(f.insert(1000, 1000));
        assert!(f.insert(2500, 1));
        let entries = f.entry_count();
        for p in 1000..1100 {
            assert_eq!(f.alloc(1), Some(p));
            assert_eq!(f.entry_count(), entries, "taking a page adds no entry");
        }
        assert_eq!(
            f.entries(),
            vec![(0, 1100, 900, KIND_FREE), (0, 2500, 1, KIND_FREE)]
        );
        // A lower page freed meanwhile comes first; a lower extent becomes the front.
        assert!(f.insert(1050, 1));
        assert_eq!(f.alloc(1), Some(1050));
        assert!(f.insert(500, 100));
        assert_eq!(f.alloc(1), Some(500));
        assert_eq!(f.alloc(1), Some(501));
        // A run that touches the front coalesces with it.
        assert!(f.insert(1080, 20));
        assert_eq!(
            sorted(f.entries()),
            vec![
                (0, 502, 98, KIND_FREE),
                (0, 1080, 920, KIND_FREE),
                (0, 2500, 1, KIND_FREE)
            ]
        );
        assert_eq!(f.alloc(200), Some(1080), "runs see the front extent too");
        assert_eq!(f.trim_tail(2501), 2500);
        let mut pages = 0;
        while let Some(p) = f.alloc(1) {
            assert!(p >= 502);
            pages += 1;
        }
        assert_eq!(pages, 98 + 720);
        assert_eq!(f.free_pages(), 0);
    }

    #[test]
    fn alloc_first_fit_and_tail_trim() {
        let mut f = FreeSet::default();
        f.insert(3, 1);
        f.insert(5, 4);
        assert_eq!(f.alloc(2), Some(5));
        assert_eq!(f.alloc(1), Some(3));
        assert_eq!(f.alloc(3), None);
        assert_eq!(f.trim_tail(9), 7);
        assert_eq!(f.free_pages(), 0);
    }

    #[test]
    fn pending_released_by_readers_and_durability() {
        let mut f = FreeSet::default();
        f.add_pending(5, KIND_READERS, &unborn(&[(20, 1)]));
        f.add_pending(7, KIND_READERS, &unborn(&[(21, 1)]));
        f.add_pending(6, KIND_DURABLE, &unborn(&[(30, 2)]));
        assert_eq!(f.pinned_pages(), 2);
        assert_eq!(f.entry_count(), f.entries().len());
        f.release(Some(6), 100).unwrap();
        assert_eq!(f.entry_count(), f.entries().len());
        assert_eq!(f.free_pages(), 3);
        assert_eq!(f.pending_pages(), 1);
        f.release(None, 5).unwrap();
        // Released pages of short runs are kept as single pages until merged.
        assert_eq!(
            sorted(f.entries()),
            vec![
                (0, 20, 1, KIND_FREE),
                (0, 21, 1, KIND_FREE),
                (0, 30, 1, KIND_FREE),
                (0, 31, 1, KIND_FREE)
            ]
        );
        f.merge_singles();
        assert_eq!(
            f.entries(),
            vec![(0, 20, 2, KIND_FREE), (0, 30, 2, KIND_FREE)]
        );
        assert_eq!(f.pinned_pages(), 0);
        let mut g = FreeSet::default();
        g.add_pending(9, KIND_DURABLE, &unborn(&[(3, 1)]));
        g.release(None, 8).unwrap();
        assert_eq!(
            g.pending_pages(),
            1,
            "durable pages wait for the durable point"
        );
    }

    #[test]
    fn pages_no_reader_reads_are_handed_out_once_to_leave_the_mapping() {
        let mut f = FreeSet::default();
        // Commit 5 frees page 20 (readers only); commit 6 frees 21-22, which the durable
        // commit 0 reaches (pinned until a later commit is durable).
        f.add_pending(5, KIND_READERS, &unborn(&[(20, 1)]));
        f.add_pending(6, KIND_DURABLE, &unborn(&[(21, 2)]));
        // A reader on tree 4 reads all of them.
        f.release(Some(4), 0).unwrap();
        assert!(f.take_unread().is_empty());
        // No reader older than 6: page 20 is free, 21-22 still pinned but read by no one;
        // neighbours come out as one run.
        f.release(Some(6), 0).unwrap();
        assert_eq!(f.pinned_pages(), 2);
        assert_eq!(f.take_unread(), vec![(20, 3)]);
        // Releasing the pinned run once 6 is durable hands nothing out again.
        f.release(Some(7), 6).unwrap();
        assert_eq!(f.pinned_pages(), 0);
        assert!(f.take_unread().is_empty());
        // With no reader at all, runs pinned by later commits are handed out at each release,
        // not only the first time.
        f.add_pending(8, KIND_DURABLE, &unborn(&[(30, 1)]));
        f.release(None, 6).unwrap();
        assert_eq!(f.take_unread(), vec![(30, 1)]);
        f.add_pending(9, KIND_DURABLE, &unborn(&[(40, 1)]));
        f.release(None, 6).unwrap();
        assert_eq!(f.take_unread(), vec![(40, 1)]);
        // Pinned by a commit no reader is older than: unread at once.
        f.add_pending(9, KIND_DURABLE, &unborn(&[(50, 1)]));
        assert_eq!(f.take_unread(), vec![(50, 1)]);
        // A run released by the scan of readers' trees is handed out too.
        f.add_pending(12, KIND_READERS, &[freed(60, 11)]);
        f.release(Some(10), 6).unwrap();
        assert!(f.take_unread().is_empty());
        let held = Held {
            trees: vec![10],
            foreign: None,
        };
        f.release_unreached(&held, 6).unwrap();
        assert_eq!(f.take_unread(), vec![(60, 1)]);
    }

    #[test]
    fn pending_runs_no_reader_reaches_are_released_wherever_they_are_queued() {
        let mut f = FreeSet::default();
        f.start_log();
        // Commit 20 freed a page written by 5 (reached from trees 5..19) and one written by
        // 15 (trees 15..19); commit 30 one written by 25 (trees 25..29).
        f.add_pending(20, KIND_READERS, &[freed(100, 5), freed(102, 15)]);
        f.add_pending(30, KIND_READERS, &[freed(104, 25)]);
        // Durable-kind: freed by 12, written by 3; freed by 40 (not yet durable), written by 2.
        f.add_pending(12, KIND_DURABLE, &[freed(110, 3)]);
        f.add_pending(40, KIND_DURABLE, &[freed(112, 2)]);
        // A reader on tree 10 holds back everything by the oldest reader's horizon.
        f.release(Some(10), 35).unwrap();
        assert_eq!(f.pending_pages(), 5);
        assert!(f.held_back(35));
        let held = Held {
            trees: vec![10],
            foreign: None,
        };
        f.release_unreached(&held, 35).unwrap();
        // Tree 10 reaches page 100 (5 <= 10 < 20) and page 110 (3 <= 10 < 12); page 112
        // waits for durability (40 > 35). Pages 102 and 104 are free.
        let pending = f.entries().into_iter().filter(|e| e.3 != KIND_FREE);
        assert_eq!(
            sorted(pending.collect()),
            vec![
                (12, 110, 1, KIND_DURABLE),
                (20, 100, 1, KIND_READERS),
                (40, 112, 1, KIND_DURABLE)
            ]
        );
        assert_eq!(f.free_pages(), 2);
        assert_eq!(f.pending_pages(), 3);
        assert_eq!(f.pinned_pages(), 2);
        // Out of order, so a delta cannot say it: the next persist writes a base.
        assert!(f.log().is_none());
        // A reader in another process counts as reading every tree from its oldest on.
        let mut g = FreeSet::default();
        g.add_pending(30, KIND_READERS, &[freed(104, 25)]);
        let foreign = Held {
            trees: vec![],
            foreign: Some(29),
        };
        g.release_unreached(&foreign, 0).unwrap();
        assert_eq!(g.pending_pages(), 1);
        let foreign = Held {
            trees: vec![],
            foreign: Some(30),
        };
        g.release_unreached(&foreign, 0).unwrap();
        assert_eq!(g.pending_pages(), 0);
        // Runs loaded from a file have no birth: every older tree reaches them.
        let mut h = FreeSet::default();
        h.add_pending(30, KIND_READERS, &unborn(&[(104, 1)]));
        h.release_unreached(&held, 0).unwrap();
        assert_eq!(h.pending_pages(), 1);
    }

    #[test]
    fn a_scan_is_due_when_the_pending_runs_have_doubled() {
        let mut f = FreeSet::default();
        let runs = |from: u64, n: u64| -> Vec<FreedRun> {
            (from..from + n).map(|p| freed(2 * p, 1)).collect()
        };
        f.add_pending(10, KIND_READERS, &runs(10, SCAN_RUNS_MIN as u64));
        assert!(!f.scan_due(), "not below the minimum");
        f.add_pending(11, KIND_READERS, &runs(5_000, 1));
        assert!(f.scan_due());
        // A reader on tree 1 reaches them all: the scan keeps them, and the next is due
        // once they have doubled.
        let held = Held {
            trees: vec![1],
            foreign: None,
        };
        f.release_unreached(&held, 0).unwrap();
        assert!(!f.scan_due());
        f.add_pending(12, KIND_READERS, &runs(10_000, SCAN_RUNS_MIN as u64));
        assert!(!f.scan_due());
        f.add_pending(13, KIND_READERS, &runs(20_000, 1));
        assert!(f.scan_due());
    }

    #[test]
    fn singles_are_lifo_guarded_and_merged_for_runs_and_the_tail() {
        let mut f = FreeSet::default();
        let r = SINGLES_RUN_MAX + 3;
        assert!(f.insert(7, 1));
        assert!(f.insert(9, 1));
        assert!(f.insert(40, r));
        assert!(!f.insert(9, 1), "a single freed twice");
        assert!(!f.insert(8, 2), "a run over a single");
        assert!(!f.insert(41, 1), "a single inside a run");
        assert_eq!(f.free_pages(), 2 + r);
        assert_eq!(f.alloc(1), Some(7), "the lowest single comes first");
        assert!(f.insert(7, 1), "and can be freed again");
        assert!(f.insert(25, 1));
        assert!(f.insert(3, 2));
        assert_eq!(f.alloc(1), Some(3), "a short run is kept as singles");
        assert!(f.insert(3, 1));
        assert_eq!(f.alloc(1), Some(3));
        assert_eq!(f.alloc(1), Some(4));
        assert_eq!(f.alloc(1), Some(7));
        assert!(f.insert(7, 1));
        assert_eq!(f.alloc(1), Some(7));
        assert_eq!(f.alloc(1), Some(9));
        assert!(f.insert(9, 1));
        assert!(f.insert(7, 1));
        assert!(f.insert(8, 1));
        // A run is taken from the map; only when none fits are the singles 7, 8, 9 merged.
        assert_eq!(f.alloc(3), Some(40));
        assert_eq!(f.alloc(r - 3), Some(43));
        assert_eq!(f.alloc(3), Some(7));
        assert_eq!(f.alloc(1), Some(25));
        assert_eq!(f.free_pages(), 0);
        assert_eq!(f.alloc(1), None);
        // A single at the end of the file is trimmed like a run.
        assert!(f.insert(80, 1));
        assert!(f.insert(81, 1));
        assert_eq!(f.trim_tail(82), 80);
        assert_eq!(f.free_pages(), 0);
        assert!(f.insert(80, 2), "trimmed pages are no longer free");
    }

    #[test]
    fn singles_stack_is_bounded() {
        let mut f = FreeSet::default();
        for p in 0..(SINGLES_MAX as u64 + 1) {
            assert!(f.insert(2 + 2 * p, 1));
        }
        assert!(f.singles_len() <= SINGLES_MAX);
        assert_eq!(f.entry_count(), SINGLES_MAX + 1);
        assert_eq!(f.entries().len(), SINGLES_MAX + 1);
    }

    #[test]
    fn settle_coalesces_singles_before_persisting() {
        let mut f = FreeSet::default();
        for p in 10..10 + 2 * SINGLES_SETTLE_MIN as u64 {
            assert!(f.insert(p, 1));
        }
        assert_eq!(f.entry_count(), 2 * SINGLES_SETTLE_MIN);
        f.settle();
        assert_eq!(
            f.entries(),
            vec![(0, 10, 2 * SINGLES_SETTLE_MIN as u64, KIND_FREE)]
        );
        // A few singles beside many extents stay as they are.
        for p in 0..4 {
            assert!(f.insert(1000 + 2 * p, 1));
        }
        f.settle();
        assert_eq!(f.singles_len(), 4);
    }

    #[test]
    fn page_round_trip() {
        let mut p = vec![0u8; 4096];
        let ext = vec![
            Extent::new(0, 5, 3, KIND_FREE),
            Extent::new(9, 12, 1, KIND_DURABLE),
        ];
        crate::pager::page::init_page(&mut p, crate::layout::kind::FREELIST);
        encode_page(&mut p, PageRef::new(77, 5), &ext);
        assert_eq!(decode_page(&p, 3).unwrap(), (PageRef::new(77, 5), ext));
    }

    #[test]
    fn extents_group_runs() {
        assert_eq!(
            to_extents(&mut [9, 3, 4, 5, 11]),
            vec![(3, 3), (9, 1), (11, 1)]
        );
    }

    /// Every page the set holds, with its state: free (txn 0, kind 0) or pending.
    fn canonical(f: &FreeSet) -> BTreeMap<u64, (u64, u32)> {
        let mut out = BTreeMap::new();
        for (txn, start, len, kind) in f.entries() {
            for p in start..start + len {
                assert!(out.insert(p, (txn, kind)).is_none(), "page {p} twice");
            }
        }
        out
    }

    /// Random changes to a free set, persisted after each "commit" either as a base (the whole
    /// set) or as a delta (the log), under the writer's rule for when a delta is allowed; the
    /// chain replayed from the start must equal the set in memory every time.
    #[test]
    fn replaying_bases_and_deltas_gives_back_the_set() {
        let mut seed = 0x1234_5678_9abc_def1u64;
        let mut rnd = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let mut f = FreeSet::default();
        f.start_log();
        let mut page_count = 2u64;
        let mut used: Vec<u64> = Vec::new();
        let mut chain: Vec<(u64, Vec<Extent>)> = Vec::new();
        let mut persisted_count = page_count;
        let mut deltas = 0;
        for txn in 2..400u64 {
            for _ in 0..rnd(40) {
                match rnd(6) {
                    0 | 1 => {
                        // Allocate (a run now and then), growing the file when nothing fits.
                        let n = if rnd(8) == 0 { 1 + rnd(3) } else { 1 };
                        let start = match f.alloc(n) {
                            Some(s) => s,
                            None => {
                                page_count += n;
                                page_count - n
                            }
                        };
                        used.extend(start..start + n);
                    }
                    2 if !used.is_empty() => {
                        // Freed by this commit: pending until readers (or durability) allow.
                        let p = used.swap_remove(rnd(used.len() as u64) as usize);
                        let kind = if rnd(3) == 0 {
                            KIND_DURABLE
                        } else {
                            KIND_READERS
                        };
                        let born = txn - rnd(15).min(txn - 1);
                        f.add_pending(txn, kind, &[freed(p, born)]);
                    }
                    3 if !used.is_empty() => {
                        // Allocated and freed in one commit: free at once.
                        let p = used.swap_remove(rnd(used.len() as u64) as usize);
                        assert!(f.insert(p, 1));
                    }
                    4 => {
                        let oldest = if rnd(2) == 0 {
                            None
                        } else {
                            Some(txn - rnd(20).min(txn - 1))
                        };
                        let durable = txn - rnd(30).min(txn - 1);
                        f.release(oldest, durable).unwrap();
                        if rnd(3) == 0 {
                            // Readers on a few trees since the oldest: released out of order.
                            let mut trees: Vec<u64> = oldest
                                .map(|o| (0..rnd(4)).map(|_| o + rnd(txn - o + 1)).collect())
                                .unwrap_or_default();
                            trees.extend(oldest);
                            trees.sort_unstable();
                            let held = Held {
                                trees,
                                foreign: None,
                            };
                            f.release_unreached(&held, durable).unwrap();
                        }
                    }
                    _ => {
                        f.settle();
                        let trimmed = f.trim_tail(page_count);
                        page_count = trimmed;
                    }
                }
            }
            let log_ok = page_count >= persisted_count
                && f.log().is_some_and(|log| {
                    log.iter()
                        .all(|e| e.kind == KIND_RELEASE || e.start + e.pages <= page_count)
                });
            if !chain.is_empty() && log_ok && rnd(4) != 0 {
                chain.push((txn, f.log().unwrap().to_vec()));
                deltas += 1;
            } else {
                chain = vec![(txn, f.extents())];
            }
            f.start_log();
            persisted_count = page_count;
            let back = replay(&chain, page_count, txn).unwrap();
            assert_eq!(canonical(&back), canonical(&f), "after txn {txn}");
            assert_eq!(back.pinned_pages(), f.pinned_pages());
        }
        assert!(deltas > 150, "only {deltas} deltas");
        // A removal of space that is not free is caught, naming the page.
        let mut bad = chain.clone();
        bad.push((999, vec![Extent::new(0, page_count + 5, 1, KIND_REMOVE)]));
        assert!(replay(&bad, page_count, 999).is_err());
        let mut bad = chain.clone();
        let used_page = *used.first().unwrap();
        bad.push((998, vec![Extent::new(0, used_page, 1, KIND_REMOVE)]));
        match replay(&bad, page_count, 999) {
            Err(Error::Corrupted { page, .. }) => assert_eq!(page, 998),
            other => panic!("{other:?}"),
        }
    }
}
