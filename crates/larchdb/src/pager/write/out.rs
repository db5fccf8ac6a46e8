//! The write-out at commit: every dirty page sealed and made to reach the file, and the meta
//! fields written to their slot.

use super::dirty::Place;
use super::seal::seal_or_check;
use super::WritePages;
use crate::error::{Error, Result};
use crate::layout::{header, kind};
use crate::pager::PageSource;
use crate::storage::Storage;

/// Filled pages (`WritePages::new_page_filled`) waiting in owned buffers before
/// `spill_filled` writes them out: 256 KiB of 4 KiB pages, meant to be still in the core's
/// cache when copied (256 pages measured no different).
const SPILL_PAGES: usize = 64;

impl WritePages {
    /// Writes out the filled pages waiting in owned buffers once there are `SPILL_PAGES` of
    /// them: each sealed and written with a `write_at` of its own, then kept
    /// as pages of the mapping (sealed; a later write to one goes through the mapping and
    /// seals it again at commit) and their buffers reused. A checkpoint's merge fills tens of
    /// thousands of leaves: written as it goes, they neither wait in memory until the commit
    /// (the owned-buffer cap, past which they were placed in the mapping, populated and
    /// faulted) nor leave the cache before they are written (docs/design/write-path.md).
    /// Only for pages the mapping covers (`place` enters them).
    pub(crate) fn spill_filled(&mut self) -> Result<()> {
        if self.spill.len() < SPILL_PAGES {
            return Ok(());
        }
        self.write_spill(&[])
    }

    /// Writes out, between two changes of a transaction, the copies of cold reused pages
    /// (`Dirty::owned` for a page not in memory: `WriteMap::is_cold`) it holds in owned
    /// buffers, once they are more than `owned_max`, with the filled pages waiting
    /// (`spill_filled`), as LMDB spills a transaction's dirty pages. Beyond memory nearly
    /// every page a transaction takes is cold: a transaction that changed its pages put by
    /// put held a copy of every leaf it changed until its commit, and a memory cgroup killed
    /// the process (docs/design/write-path.md, "A transaction's copies of cold pages").
    /// Written out, a copy is a page of the file's cache, which the kernel writes back and
    /// takes under pressure; a later change to it goes through the mapping and seals it
    /// again at commit. Only between changes: no page is half written then.
    pub(crate) fn spill_cold(&mut self) -> Result<()> {
        if self.cold_owned.len() * self.page_bytes <= self.owned_max {
            return Ok(());
        }
        let mut cold = std::mem::take(&mut self.cold_owned);
        cold.sort_unstable();
        cold.dedup();
        self.spill.extend_from_slice(&cold);
        let r = self.write_spill(&cold);
        self.cold_spilled += cold.len() as u64;
        cold.clear();
        self.cold_owned = cold;
        r
    }

    /// The copies of cold pages `spill_cold` wrote out so far.
    pub(crate) fn cold_spilled(&self) -> u64 {
        self.cold_spilled
    }

    /// Seals and writes out the pages `spill` lists (`spill_filled`); `cold`, sorted: those
    /// among them that `spill_cold` added, which `appended_owned_bytes` does not count.
    fn write_spill(&mut self, cold: &[u64]) -> Result<()> {
        let mut ids = std::mem::take(&mut self.spill);
        ids.sort_unstable();
        ids.dedup();
        let ps = self.page_bytes;
        // Seal: only owned single pages (one freed since and reused otherwise is left as it is).
        ids.retain(|id| {
            let Some(d) = self.dirty.get_mut(id) else {
                return false;
            };
            let (sealed, cells, check) = (d.sealed, d.cells, d.check_derived);
            match &mut d.place {
                Place::Owned(b) if b.len() == ps => {
                    seal_or_check(b, *id, self.txn, (sealed, cells, check), &self.shifts);
                    d.sealed = true;
                    true
                }
                _ => false,
            }
        });
        let storage = self.wmap.storage.clone();
        if self.frames_behind(false) {
            self.spill_behind(&ids)?;
        } else {
            // Write, a page a call, consecutive ones too. A write of several pages puts them in
            // the page cache as one folio of that many (Linux 6.x, ext4), and once a page of it
            // is freed and taken again by a later merge, the write of that one page dirties the
            // whole folio, and is charged as the whole folio's bytes
            // (docs/design/performance.md, "A merge's pages a write each").
            for &id in &ids {
                match self.dirty.get(&id).map(|d| &d.place) {
                    Some(Place::Owned(b)) => {
                        storage.write_at(b, id * ps as u64)?;
                        // Read (and written, if ever) in its frame from now on, as below:
                        // copied there, or for new space loaded from the file where read.
                        if let Some(f) = self.wmap.frames() {
                            self.to_frame(f, id, b);
                        }
                    }
                    _ => {
                        return Err(Error::internal(format!(
                            "page {id}: spilled page not owned"
                        )))
                    }
                }
            }
        }
        if let Some(paced) = self.paced.as_mut().filter(|_| !self.behind) {
            let ps = ps as u64;
            for (page, pages) in crate::pager::freelist::join_runs(ids.iter().map(|&id| (id, 1))) {
                if let Err(e) = paced.start(&*storage, page * ps, pages * ps) {
                    self.writeback_failed = true;
                    return Err(e.into());
                }
            }
        }
        // From now on the pages are read (and written, if ever) through the mapping.
        for &id in &ids {
            if let Some(d) = self.dirty.get_mut(&id) {
                d.filed = true;
                if let Place::Owned(b) = std::mem::replace(&mut d.place, Place::Mapped(1)) {
                    if self.pool.len() < self.pool_max {
                        self.pool.push(b);
                    }
                }
            }
        }
        let counted = ids
            .iter()
            .filter(|id| cold.binary_search(id).is_err())
            .count();
        self.appended_owned_bytes = self.appended_owned_bytes.saturating_sub(counted * ps);
        ids.clear();
        self.spill = ids;
        Ok(())
    }

    /// Seals every dirty page (page id, txn id, checksum) and makes it reach the file: pages
    /// in the mapping are sealed in place; owned buffers are written with `write_at`, gathering
    /// consecutive pages into larger writes. Returns the bytes written or sealed.
    ///
    /// Where the mapping is frames, the pages sealed in them are written to the file as well,
    /// so that the file holds every page before a meta page names it, and the owned buffers
    /// written are copied into their frames, or left on the file for a reader to load
    /// (`to_frame`, pager/frames.rs).
    ///
    /// With frames, the pages go behind (`frames_behind`) where a sync follows the write-out
    /// (`synced`, or the transaction is `synced_soon`): that sync waits for the device
    /// anyway. A commit that is not synced writes through the page cache, and does not wait
    /// for the device at its meta page.
    pub(crate) fn write_out(&mut self, storage: &dyn Storage, synced: bool) -> Result<u64> {
        let behind = self.frames_behind(synced);
        if behind {
            // The spills' writes first: no page is in two writes in flight at once.
            self.drain_behind()?;
        }
        let written = self.write_out_sealed(storage, behind)?;
        self.write_out_frames(storage, behind)?;
        Ok(written)
    }

    /// True where the writer's pages are in frames, a sync follows their write-out (`synced`,
    /// or the transaction is `synced_soon`) and the storage writes behind: pages are written
    /// from their frames with `Storage::write_behind`, and owned buffers copied into their
    /// frames first (docs/design/buffer-pool.md, "Writes behind the frames").
    fn frames_behind(&self, synced: bool) -> bool {
        (synced || self.synced_soon)
            && self.wmap.frames().is_some()
            && self.wmap.storage.writes_behind()
    }

    /// Waits for the writes behind in flight (`Storage::drain`).
    pub(super) fn drain_behind(&mut self) -> Result<()> {
        self.behind = false;
        self.wmap.storage.drain()?;
        Ok(())
    }

    /// `spill_filled`'s writes where they go behind: each sealed page copied into its frame,
    /// and the frames written behind, consecutive ones in one write; pages past the frames
    /// written at once. The earlier spills' writes may still be in flight: they wrote other
    /// pages (a spilled page written again or freed waits for the drain first: `Dirty::filed`
    /// with `behind` set), so no page is in two writes at once, and the merge does not wait
    /// for the device at each spill.
    fn spill_behind(&mut self, ids: &[u64]) -> Result<()> {
        let ps = self.page_bytes;
        let storage = self.wmap.storage.clone();
        let Some(frames) = self.wmap.frames() else {
            return Err(Error::internal("writes behind without frames"));
        };
        let mut runs: Vec<(u64, u64)> = Vec::new();
        let mut fills: Vec<(u64, &[u8])> = Vec::new();
        for &id in ids {
            let Some(Place::Owned(b)) = self.dirty.get(&id).map(|d| &d.place) else {
                return Err(Error::internal(format!(
                    "page {id}: spilled page not owned"
                )));
            };
            if id < frames.pages() {
                fills.push((id, b));
                runs.push((id, 1));
            } else {
                storage.write_at(b, id * ps as u64)?;
            }
        }
        frames.fill_all(&fills);
        write_frames_behind(&*storage, frames, &runs, ps)?;
        self.behind |= !runs.is_empty();
        Ok(())
    }

    /// With frames: writes the pages sealed in their frames to the file, consecutive ones in
    /// one `pwritev`, but for those a merge spilled and nothing wrote since (`Dirty::filed`);
    /// the owned buffers `write_out_sealed` wrote are copied into their frames, or left to the
    /// file (`to_frame`).
    ///
    /// Where they go `behind`, every page written is in its frame (`write_out_sealed` copied
    /// the owned ones there), and the frames are written with `Storage::write_behind`,
    /// consecutive ones in one write.
    fn write_out_frames(&mut self, storage: &dyn Storage, behind: bool) -> Result<()> {
        let Some(frames) = self.wmap.frames() else {
            return Ok(());
        };
        let ps = self.page_bytes;
        let mut runs = std::mem::take(&mut self.ids);
        runs.clear();
        runs.extend(
            self.dirty
                .iter()
                .filter(|(&id, d)| match &d.place {
                    Place::Mapped(_) => !d.filed,
                    // Copied into their frames by `write_out_sealed` where they fit.
                    Place::Owned(b) => behind && id + (b.len() / ps) as u64 <= frames.pages(),
                })
                .map(|(&id, _)| id),
        );
        runs.sort_unstable();
        if behind {
            let pages: Vec<(u64, u64)> = runs
                .iter()
                .map(|&id| match self.dirty.get(&id).map(|d| &d.place) {
                    Some(Place::Owned(b)) => (id, (b.len() / ps) as u64),
                    Some(Place::Mapped(n)) => (id, *n),
                    None => (id, 1),
                })
                .collect();
            self.ids = runs;
            return write_frames_behind(storage, frames, &pages, ps);
        }
        let pages = runs.iter().map(|&id| {
            let n = match self.dirty.get(&id).map(|d| &d.place) {
                Some(Place::Mapped(n)) => *n,
                _ => 1,
            };
            frames.bytes(id, n).map(|b| (id * ps as u64, b))
        });
        let r = write_consecutive(storage, pages);
        self.ids = runs;
        r?;
        if self.any_owned {
            for (&id, d) in self.dirty.iter() {
                if let Place::Owned(b) = &d.place {
                    self.to_frame(frames, id, b);
                }
            }
        }
        Ok(())
    }

    /// An owned buffer just written to the file at page `id`, not behind: copied into its
    /// frames where they are reused space, left on the file alone where new space (their
    /// frames empty: a reader loads them from there, or the keeper reads them in a huge page
    /// at a time, `Frames::move_to_huge_page`). A load's pages are not first touched in fresh
    /// frames beside its writes (zeroed and mapped in), nor copied twice
    /// (docs/design/buffer-pool.md, "A load's pages on the file alone").
    fn to_frame(&self, frames: &crate::pager::Frames, id: u64, bytes: &[u8]) {
        if id < self.base.meta.page_count {
            frames.fill(id, bytes);
        } else {
            frames.forget_page(id, (bytes.len() / self.page_bytes) as u64);
        }
    }

    /// Where the pages go `behind`, the owned ones within the frames are copied into their
    /// frames once sealed, for `write_out_frames` to write from there, and only those past the
    /// frames are written here.
    fn write_out_sealed(&mut self, storage: &dyn Storage, behind: bool) -> Result<u64> {
        if cfg!(debug_assertions) {
            self.check_dirty_nodes()?;
        }
        let ps = self.page_bytes;
        if !self.any_owned {
            // Every dirty page is in the mapping: seal in place, in any order.
            let mut written = 0u64;
            for (&id, d) in self.dirty.iter_mut() {
                if let Place::Mapped(n) = d.place {
                    let len = n as usize * ps;
                    if d.sealed && !cfg!(debug_assertions) {
                        // Nothing to do (`seal_or_check`); a spilled page's frame may be
                        // empty, and is not loaded for it.
                        written += len as u64;
                        continue;
                    }
                    let page = self.wmap.bytes_mut(id, len, ps)?;
                    let state = (d.sealed, d.cells, d.check_derived);
                    seal_or_check(page, id, self.txn, state, &self.shifts);
                    written += len as u64;
                }
            }
            return Ok(written);
        }
        // Owned buffers are written in page order, consecutive ones in one `pwritev` from
        // where they lie (`write_consecutive`), not copied into one buffer first.
        let mut ids = std::mem::take(&mut self.ids);
        ids.clear();
        ids.extend(self.dirty.keys().copied());
        ids.sort_unstable();
        let mut written = 0u64;
        let mut sealing_failed = None;
        // Seal every page; those in the mapping are written there, and left out of `ids`.
        ids.retain(|&id| {
            let Some(d) = self.dirty.get_mut(&id) else {
                return false;
            };
            let state = (d.sealed, d.cells, d.check_derived);
            match &mut d.place {
                Place::Owned(buf) => {
                    debug_assert!(header::kind(buf) != 0);
                    seal_or_check(buf, id, self.txn, state, &self.shifts);
                    true
                }
                Place::Mapped(n) => {
                    let len = *n as usize * ps;
                    if state.0 && !cfg!(debug_assertions) {
                        // As above: nothing to do.
                        written += len as u64;
                        return false;
                    }
                    match self.wmap.bytes_mut(id, len, ps) {
                        Ok(page) => {
                            seal_or_check(page, id, self.txn, state, &self.shifts);
                            written += len as u64;
                        }
                        Err(e) => {
                            sealing_failed.get_or_insert(e);
                        }
                    }
                    false
                }
            }
        });
        if let Some(e) = sealing_failed {
            self.ids = ids;
            return Err(e);
        }
        if let Some(frames) = self.wmap.frames().filter(|_| behind) {
            let mut fills: Vec<(u64, &[u8])> = Vec::new();
            ids.retain(|&id| {
                let Some(Place::Owned(buf)) = self.dirty.get(&id).map(|d| &d.place) else {
                    return true;
                };
                if id + (buf.len() / ps) as u64 > frames.pages() {
                    return true;
                }
                fills.push((id, buf));
                written += buf.len() as u64;
                false
            });
            frames.fill_all(&fills);
        }
        let pages = ids
            .iter()
            .filter_map(|&id| match self.dirty.get(&id).map(|d| &d.place) {
                Some(Place::Owned(buf)) => Some(Ok((id * ps as u64, &buf[..]))),
                _ => None,
            });
        let r = write_consecutive(storage, pages);
        self.ids = ids;
        Ok(written + r?)
    }
}

/// The most pages one write behind takes: 1 MiB of 4 KiB pages.
const BEHIND_RUN_PAGES: u64 = 256;

/// Writes the frames of `pages` (first page, pages; ascending) to the file with
/// `Storage::write_behind`, consecutive ones in one write of at most `BEHIND_RUN_PAGES`.
/// Requires: the pages are ready in the frames and stay unchanged until the next drain (the
/// writer's pages of this transaction: no snapshot reaches them, and the writer writes one
/// again only after a drain).
fn write_frames_behind(
    storage: &dyn Storage,
    frames: &crate::pager::Frames,
    pages: &[(u64, u64)],
    page_bytes: usize,
) -> Result<()> {
    let mut runs: Vec<(u64, u64)> = Vec::new();
    for &(id, n) in pages {
        match runs.last_mut() {
            Some((first, len)) if *first + *len == id && *len + n <= BEHIND_RUN_PAGES => *len += n,
            _ => runs.push((id, n)),
        }
    }
    if runs.is_empty() {
        return Ok(());
    }
    let mut writes = Vec::with_capacity(runs.len());
    for &(id, n) in &runs {
        let bytes = frames.bytes(id, n)?;
        writes.push((bytes.as_ptr(), bytes.len(), id * page_bytes as u64));
    }
    // SAFETY: the frames outlive the writes (`Frames` drains its storage before it lets its
    // memory go), and the requirement above keeps the bytes unchanged until drained.
    unsafe { storage.write_behind(&writes) }?;
    Ok(())
}

/// Writes `pages` (each its file offset and bytes, in ascending order), consecutive ones in
/// one `write_vectored_at` (`pwritev`) from where they lie; returns the bytes written. The
/// first `Err` among them is returned, after the pages before it are written.
fn write_consecutive<'a>(
    storage: &dyn Storage,
    pages: impl IntoIterator<Item = Result<(u64, &'a [u8])>>,
) -> Result<u64> {
    let write = |run: &[&[u8]], at: u64| -> Result<u64> {
        match run {
            [] => {}
            [one] => storage.write_at(one, at)?,
            _ => storage.write_vectored_at(run, at)?,
        }
        Ok(run.iter().map(|b| b.len() as u64).sum())
    };
    let mut run: Vec<&[u8]> = Vec::new();
    let (mut run_start, mut run_end) = (0u64, 0u64);
    let mut written = 0u64;
    for page in pages {
        let (at, buf) = page?;
        if !run.is_empty() && run_end != at {
            written += write(&run, run_start)?;
            run.clear();
        }
        if run.is_empty() {
            run_start = at;
        }
        run.push(buf);
        run_end = at + buf.len() as u64;
    }
    Ok(written + write(&run, run_start)?)
}

impl WritePages {
    /// Debug builds: parses and checks every dirty leaf and branch (`NodeCheck`) before the
    /// commit seals and writes it. A node that fails is an engine bug (or damage that the
    /// read path's checks let through, as a key flipped on disk and then copied): the commit
    /// fails with `Error::Internal` and nothing of it becomes visible.
    fn check_dirty_nodes(&self) -> Result<()> {
        for &id in self.dirty.keys() {
            let Ok(p) = self.page(id) else {
                continue;
            };
            if matches!(header::kind(p), kind::LEAF | kind::BRANCH) {
                if let Err(why) = (self.check_node)(p) {
                    return Err(Error::internal(format!(
                        "page {id}: a dirty node fails its check before sealing: {why}"
                    )));
                }
            }
        }
        Ok(())
    }

    /// Writes the meta fields at `offset` (a meta slot) with one `write_at`, never through the
    /// writable mapping: a process killed in the middle of a copy into the mapping leaves
    /// the slot torn in the page cache, which the next open cannot tell from damage
    /// (`WouldLoseData`, though the commit never returned). A `pwrite` of the fields, within
    /// one page, is copied whole or not at all when a process is killed (the kernel checks for
    /// a fatal signal between pages); `tests/crash_kill.rs` found the torn slot after a
    /// SIGKILL.
    pub(crate) fn write_meta(
        &mut self,
        bytes: &[u8],
        offset: u64,
        storage: &dyn Storage,
    ) -> Result<()> {
        storage.write_at(bytes, offset)?;
        Ok(())
    }
}
