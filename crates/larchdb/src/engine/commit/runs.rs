//! Large values written once (docs/design/large-values.md): a logged commit writes each value
//! too large to stay in its leaf into a run of the data file, from pages a checkpoint or a
//! page commit reserved, and its record names the run instead of carrying the value; the
//! merge puts the run's reference in the leaf as it is.
//!
//! A reservation is free space, in as many extents as the free space is cut into (up to
//! `RESERVE_EXTENTS_MAX`), then the file's end. The reservation a commit takes is named in
//! its meta page's list (`Meta::reserve_list`), and the writer starts on it only once that
//! commit is durable, so that after a crash the pages it wrote into are in extents the chosen
//! meta page names: that commit's reservation, or the one before from where the writer was
//! when that commit started (its tail). The open frees those pages no replayed record names.

use super::*;
use crate::engine::published::Published;
use crate::layout::{header, kind, overflow};
use crate::pager::page::{init_page, seal_page};

/// Pages a reservation takes, at least and at most: twice the large values of the last
/// reservation's interval (`RunSpace::size_next`), at most about 16,000 of seed 000's
/// 4,000-byte updates.
const RESERVE_PAGES_MIN: u64 = 64;
const RESERVE_PAGES_MAX: u64 = 16384;

/// Extents a reservation takes from the free space at most: the list its meta pages name
/// (`Meta::reserve_list`) stays within a few pages. Where the free space is in more pieces
/// than this, the reservation is smaller, not taken from the file's end.
const RESERVE_EXTENTS_MAX: usize = 2048;

/// Extents of pages (first page, pages), ascending and disjoint.
pub(crate) type Extents = Vec<(u64, u64)>;

/// Pages reserved for runs, and how far the writer took them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Reservation {
    /// Its pages: free space taken where the file had it, and the file's end after.
    pub(crate) extents: Extents,
    /// The next page the writer may take: in an extent, between two or past the last. Pages
    /// before it are taken, or were passed over and went to the leftovers (`RunSpace::take`).
    pub(crate) cursor: u64,
}

impl Reservation {
    fn new(extents: Extents) -> Reservation {
        let cursor = extents.first().map_or(0, |e| e.0);
        Reservation { extents, cursor }
    }

    /// The pages from the cursor on.
    fn remainder(&self) -> Extents {
        within(&self.extents, self.cursor, u64::MAX)
    }
}

/// The pages of `extents` in `[from, to)`.
fn within(extents: &[(u64, u64)], from: u64, to: u64) -> Extents {
    let i = extents.partition_point(|&(s, n)| s + n <= from);
    extents[i..]
        .iter()
        .take_while(|&&(s, _)| s < to)
        .map(|&(s, n)| (s.max(from), (s + n).min(to)))
        .filter(|&(s, e)| e > s)
        .map(|(s, e)| (s, e - s))
        .collect()
}

/// An open's extents (first page, pages) and the runs its replay named
/// (`RunSpace::open`).
type OpenExtents = (Extents, Vec<(u64, u64)>);

/// The writer's reservations (`Shared::runs`).
#[derive(Debug, Default)]
pub(crate) struct RunSpace {
    /// The reservation the writer takes pages from.
    pub(crate) current: Option<Reservation>,
    /// A checkpoint's reservation, and the checkpoint: the writer moves to it once that
    /// checkpoint is durable (`promote`).
    pub(crate) next: Option<(u64, Reservation)>,
    /// Pages no record names that the next checkpoint or page commit frees: a reservation's
    /// remainder once the writer moved on, pages it passed over, and what an open found
    /// unnamed.
    pub(crate) leftovers: Vec<(u64, u64)>,
    /// Pages the writer took since the last reservation was planned: with those of the
    /// large values that went into the log for want of room (`Shared::runs_missed`), what
    /// the next reservation is sized by.
    pub(crate) taken: u64,
    /// The longest run the writer took or wanted since the last reservation was planned: the
    /// shortest free extent the next one takes.
    pub(crate) longest: u64,
    /// The handle is closing (`close`): no more reservations.
    pub(crate) closing: bool,
    /// Until an open's replay is done: the extents its meta page named, and the runs the
    /// records replayed so far name (`at_open`).
    pub(crate) open: Option<OpenExtents>,
}

impl RunSpace {
    /// The reservations after an open from a meta page that named `reserved` (its
    /// reservation and its tail, `Snapshot::reserved`): none current (the first checkpoint
    /// takes one), and the pages of those extents that no record the open replayed names
    /// (`named`: runs as first page and pages) freed by that checkpoint. An open that replays
    /// the rest in rounds (`rounds`) names the extents, trimmed as the rounds go
    /// (`trim_open`), in the rounds' meta pages until the last round (`open_done`).
    pub(crate) fn at_open(reserved: Extents, named: Vec<(u64, u64)>, rounds: bool) -> RunSpace {
        let mut space = RunSpace {
            open: Some((reserved, named)),
            ..RunSpace::default()
        };
        if rounds {
            space.trim_open();
        } else {
            space.open_done();
        }
        space
    }

    /// The runs a round of the open's replay named (`Shared::finish_replay`).
    pub(crate) fn open_named(&mut self, named: Vec<(u64, u64)>) {
        if let Some((_, all)) = self.open.as_mut() {
            all.extend(named);
        }
        self.trim_open();
    }

    /// Between rounds of an open's replay: the records replayed so far name runs of each of
    /// the open's extents up to some page, and the records after them none below it (the
    /// writer took an extent's pages in order, for its records in the log's order), so the
    /// next round's meta page names each extent from there. The pages below are the tree's
    /// (named by a replayed record: in the tree, or freed by a round that replaced them) or
    /// named by no record (to the leftovers, which the round's checkpoint frees). A reopen
    /// from a round's meta page then frees no page that round's tree holds or freed.
    fn trim_open(&mut self) {
        let RunSpace {
            open, leftovers, ..
        } = self;
        let Some((extents, named)) = open.as_mut() else {
            return;
        };
        for extent in extents.iter_mut() {
            let (start, end) = (extent.0, extent.0 + extent.1);
            let inside = |id: u64| id >= start && id < end;
            let mut runs: Vec<(u64, u64)> = named
                .iter()
                .copied()
                .filter(|&(id, _)| inside(id))
                .collect();
            let Some(to) = runs.iter().map(|&(id, n)| (id + n).min(end)).max() else {
                continue;
            };
            runs.sort_unstable();
            let mut at = start;
            for (id, n) in runs {
                if id > at {
                    leftovers.push((at, id - at));
                }
                at = at.max(id + n);
            }
            *extent = if to < end { (to, end - to) } else { (0, 0) };
            named.retain(|&(id, _)| !(id >= start && id < to));
        }
        extents.retain(|&(_, n)| n > 0);
    }

    /// Every record of the open's log is replayed: the pages of the extents the open's meta
    /// page named that no record names go to the leftovers.
    pub(crate) fn open_done(&mut self) {
        let Some((extents, mut named)) = self.open.take() else {
            return;
        };

        named.sort_unstable();

        for (start, pages) in extents {
            let end = start + pages;
            let mut at = start;
            let from = named.partition_point(|&(id, n)| id + n <= start);
            for &(id, n) in named[from..].iter().take_while(|&&(id, _)| id < end) {
                if id > at {
                    self.leftovers.push((at, id - at));
                }
                at = at.max(id + n);
            }
            if end > at {
                self.leftovers.push((at, end - at));
            }
        }
    }

    /// Pages for a commit's new reservation, twice what the writer took or `missed` (values
    /// that went into the log for want of room) since the last, within
    /// `RESERVE_PAGES_MIN..=RESERVE_PAGES_MAX`, and the shortest free extent worth taking for
    /// it: the longest run the writer took or wanted meanwhile.
    pub(crate) fn size_next(&mut self, missed: u64) -> Option<(u64, u64)> {
        let wanted = 2 * (self.taken + missed);
        let longest = self.longest.max(1);
        (self.taken, self.longest) = (0, 0);
        let takes = !self.closing && self.open.is_none() && wanted > 0;
        takes.then(|| (wanted.clamp(RESERVE_PAGES_MIN, RESERVE_PAGES_MAX), longest))
    }

    /// The handle is closing: the writer writes no more runs, and the reservations' pages
    /// go to the pages the next commit frees (`leftovers`).
    pub(crate) fn close(&mut self) {
        self.closing = true;
        if let Some(r) = self.current.take() {
            self.leftovers.extend(r.remainder());
        }
        if let Some((_, r)) = self.next.take() {
            self.leftovers.extend(r.extents);
        }
    }

    /// What a meta page written now names (`Meta::reserve_list`): the reservation of a
    /// commit not yet durable (`None` where none waits), and the current one from the
    /// writer's cursor.
    pub(crate) fn named(&self) -> (Option<Extents>, Extents) {
        if let Some((extents, _)) = &self.open {
            return (Some(extents.clone()).filter(|e| !e.is_empty()), Vec::new());
        }
        let pending = self.next.as_ref().map(|(_, r)| r.extents.clone());
        (
            pending,
            self.current
                .as_ref()
                .map_or_else(Vec::new, |r| r.remainder()),
        )
    }

    /// A checkpoint or page commit (`txn`) reserved `extents`.
    pub(crate) fn offer(&mut self, txn: u64, extents: Extents) {
        if let Some((_, old)) = self.next.replace((txn, Reservation::new(extents))) {
            // Never named again: no commit takes one while another waits.
            self.leftovers.extend(old.extents);
        }
    }

    /// Commit `durable` is durable: the writer moves to the reservation of a commit no
    /// later, and the current one's remainder goes to the leftovers. Returns whether it
    /// moved.
    pub(crate) fn promote(&mut self, durable: u64) -> bool {
        if self.next.as_ref().is_none_or(|&(txn, _)| txn > durable) {
            return false;
        }
        if let Some((_, r)) = self.next.take() {
            if let Some(old) = self.current.replace(r) {
                self.leftovers.extend(old.remainder());
            }
        }
        true
    }

    /// `pages` contiguous pages for a run, from the current reservation, or `None` if it has
    /// no room. Pages of the reservation passed over for want of room in their extent go to
    /// the leftovers: the cursor only moves forward, so that a meta page names what is left
    /// as the pages from it on.
    fn take(&mut self, pages: u64) -> Option<u64> {
        self.longest = self.longest.max(pages);
        let r = self.current.as_mut()?;
        let i = r.extents.partition_point(|&(s, n)| s + n <= r.cursor);
        let &(start, n) = r.extents[i..]
            .iter()
            .find(|&&(s, n)| s + n - s.max(r.cursor) >= pages)?;
        let id = start.max(r.cursor);
        debug_assert!(id + pages <= start + n);
        self.leftovers.extend(within(&r.extents, r.cursor, id));
        r.cursor = id + pages;
        self.taken += pages;
        Some(id)
    }
}

/// What `reserve` did: the reservation it took, and the leftovers its commit frees.
pub(crate) type Reserved = (Option<Extents>, Vec<(u64, u64)>);

/// The reservations for large values in the commit `pages` writes, a checkpoint's or a
/// commit of pages on the writer's thread: its meta page names the writer's current one
/// from its cursor as `named` found it (`RunSpace::named`: a pending one, `None` where none
/// waits, and the current one's remainder), and either the pending one or, with none, a new
/// one it takes, returned for the caller to offer (`RunSpace::offer`) once its commit is
/// written. It frees the pages the writer left behind that its meta page does not name,
/// returned too: a commit that fails gives them back (`keep_leftovers`).
pub(crate) fn reserve(
    shared: &Shared,
    pages: &mut WritePages,
    named: (Option<Extents>, Extents),
) -> Result<Reserved> {
    let (pending, tail) = named;
    // Without runs (no log, or one of an older version) no reservation is taken, but the
    // pages an open found unnamed are freed all the same.
    let allowed = shared.log.as_ref().is_some_and(|l| l.runs_allowed());
    let sized = allowed && pending.is_none();
    let reserve = match sized {
        false => None,
        true => {
            let mut space = shared.runs.lock().unwrap_or_else(|e| e.into_inner());
            // Read, not reset: they call for the durable checkpoint (`runs_due`) that makes
            // the reservation taken here the writer's, which resets them (`promote`).
            let missed = shared.runs_missed.load(Ordering::Relaxed);
            space.size_next(missed)
        }
    };
    let created = match reserve {
        Some((n, shortest)) => {
            // At most the runs of two intervals between checkpoints: the named runs and the
            // values that missed a reservation call for a durable one after an interval's
            // bytes of them (`runs_due`, `Pressure::runs`), and it takes the next
            // reservation.
            let interval = shared.log.as_ref().map_or(u64::MAX, |l| {
                l.pressure().runs / u64::from(shared.page_bytes)
            });
            // And room for the longest value wanted meanwhile, or the next like it misses
            // again.
            let n = n
                .min(2 * interval)
                .max(RESERVE_PAGES_MIN)
                .max(shortest.min(RESERVE_PAGES_MAX));
            pages.reserve_pages(n, shortest, RESERVE_EXTENTS_MAX)?
        }
        None => None,
    };
    if let Some(&(start, n)) = created.as_ref().and_then(|c| c.last()) {
        // The file covers the reservation before the meta page that names it: nothing is
        // written there yet, and an open checks the file's length against `page_count`.
        let end = (start + n) * shared.page_bytes as u64;
        if shared.storage.len()? < end {
            shared.storage.set_len(end)?;
        }
    }
    // Taken once nothing else here can fail. Not the pages this meta page names as the
    // writer's (a remainder left after `named` was read): an open from it frees those itself.
    let leftovers = {
        let mut space = shared.runs.lock().unwrap_or_else(|e| e.into_inner());
        if sized && created.is_none() {
            // No reservation comes of them (none wanted, or no room): counted afresh, so
            // that they call for a checkpoint an interval later, not at every commit.
            shared.runs_missed.store(0, Ordering::Relaxed);
        }
        let overlaps = |&(s, p): &(u64, u64)| {
            let i = tail.partition_point(|&(start, n)| start + n <= s);
            tail.get(i).is_some_and(|&(start, _)| start < s + p)
        };
        let (named, free): (Vec<_>, Vec<_>) = std::mem::take(&mut space.leftovers)
            .into_iter()
            .partition(overlaps);
        space.leftovers = named;
        free
    };
    for &(start, n) in &leftovers {
        pages.free_unused(start, n);
    }
    let reserve = created.clone().or(pending).unwrap_or_default();
    pages.name_reserved(reserve, tail);
    Ok((created, leftovers))
}

/// A commit that `reserve` prepared failed: the leftovers it was to free wait for the next.
pub(crate) fn keep_leftovers(shared: &Shared, freed: Vec<(u64, u64)>) {
    let mut space = shared.runs.lock().unwrap_or_else(|e| e.into_inner());
    space.leftovers.extend(freed);
}

/// The runs named by the records an open replayed (first page, pages, the commit that wrote
/// it), and by those it left for its rounds (first page, commit): those a replay may read
/// again (`NamedRuns`).
pub(crate) fn named_at_open(
    named: &[(u64, u64, u64)],
    later: &[(u64, u64)],
) -> crate::pager::freelist::NamedRuns {
    let mut runs = crate::pager::freelist::NamedRuns::default();
    for &(page, pages, txn) in named {
        runs.insert(page, txn, pages);
    }
    // Their lengths are read when their rounds replay them: a page each until then.
    for &(page, txn) in later {
        runs.insert(page, txn, 1);
    }
    runs
}

/// Writes the batch's values too large to stay inline into runs of their own, as far as the
/// current reservation has room, for commit `txn` (docs/design/large-values.md): each run is
/// sealed and written to the data file, and its write in the batch names it
/// (`Batch::set_run`), so that the record carries the run's id instead of the value. The log
/// is told a run was written (`GroupLog::runs_written`): it syncs the data file before a
/// sync that makes such a record durable. Returns whether any value went into a run.
pub(crate) fn write_runs(
    shared: &Shared,
    guard: &mut WriterState,
    base: &Published,
    txn: u64,
) -> Result<bool> {
    let page_bytes = shared.page_bytes as usize;
    let inline_max = crate::limits::inline_cell_bytes_max(page_bytes as u32);
    // A cell holds its key, its value and a small header: no value under half the inline
    // limit goes to a run, whatever its key.
    let large: Vec<(usize, usize)> = guard
        .batch
        .large_values(inline_max / 2)
        .filter(|(_, key, v)| !crate::btree::stays_inline(page_bytes, key, v.len()))
        .map(|(i, _, v)| (i, v.len()))
        .collect();
    // Most commits have none: no lock taken for them.
    if large.is_empty() {
        return Ok(false);
    }
    let mut space = shared.runs.lock().unwrap_or_else(|e| e.into_inner());
    if space.closing {
        return Ok(false);
    }
    let mut any = false;
    let mut buf = std::mem::take(&mut guard.run_buffer);
    for (i, len) in large {
        let pages = overflow::pages_for(len, page_bytes);
        let Some(id) = space.take(pages) else {
            // Into the log; the next reservation is sized to hold such values too, and they
            // count toward the durable checkpoint that takes it (`runs_due`).
            shared.runs_missed.fetch_add(pages, Ordering::Relaxed);
            continue;
        };
        let value = guard
            .batch
            .value_of(i)
            .ok_or_else(|| Error::Internal("a large value vanished from its batch".into()))?;
        buf.clear();
        buf.resize(pages as usize * page_bytes, 0);
        init_page(&mut buf, kind::OVERFLOW);
        overflow::set_run(&mut buf, pages as u32, len as u32);
        buf[overflow::VALUE_AT..overflow::VALUE_AT + len].copy_from_slice(value);
        seal_page(&mut buf, id, txn);
        debug_assert_eq!(header::txn(&buf), txn);
        let started = std::time::Instant::now();
        shared
            .storage
            .write_apart(&buf, id * page_bytes as u64)
            .map_err(Error::from_io)?;
        // In nanoseconds: a run's write takes a few microseconds.
        let nanos = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        shared
            .counters
            .run_write_nanos
            .fetch_add(nanos, std::sync::atomic::Ordering::Relaxed);
        // Whatever a frame of these pages holds is stale (the frames' keeper may have loaded
        // them while they were free): a reader loads them from the file once a checkpoint
        // has put the run in the tree. The checkpoint thread may be writing other frames
        // meanwhile: the chunks are not marked as its transaction's.
        if let Some(frames) = base.snap.access().frames() {
            frames.forget_written_apart(id, pages);
        }
        shared
            .named_runs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, txn, pages);
        guard.batch.set_run(i, id);
        guard.run_pages.push((id, pages));
        crate::engine::Counters::add(&shared.counters.runs_written);
        any = true;
    }
    if buf.capacity() <= RUN_BUFFER_KEPT_BYTES {
        guard.run_buffer = buf;
    }
    Ok(any)
}

/// The batch goes to pages after all (the log had no room for its record): the runs
/// `write_runs` wrote for it are named by no record, and the next checkpoint frees them.
pub(crate) fn runs_unused(shared: &Shared, guard: &mut WriterState) {
    guard.batch.clear_runs();
    if guard.run_pages.is_empty() {
        return;
    }
    let mut space = shared.runs.lock().unwrap_or_else(|e| e.into_inner());
    let first = guard.run_pages.first().map_or(0, |r| r.0);
    let end = guard.run_pages.last().map_or(0, |r| r.0 + r.1);
    let pages: u64 = guard.run_pages.iter().map(|r| r.1).sum();
    match space.current.as_mut() {
        // Taken one after the other from the front of the current reservation, which is
        // still current, none passed over between them: given back to it, named with its
        // remainder by the next meta page.
        Some(r)
            if r.cursor == end
                && end - first == pages
                && within(&r.extents, first, end)
                    .iter()
                    .map(|e| e.1)
                    .sum::<u64>()
                    == pages =>
        {
            r.cursor = first;
            guard.run_pages.clear();
        }
        _ => space.leftovers.append(&mut guard.run_pages),
    }
}

/// Capacity the writer's run buffer (`WriterState::run_buffer`) keeps between commits.
const RUN_BUFFER_KEPT_BYTES: usize = 1 << 20;
