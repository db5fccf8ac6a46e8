//! The writable mapping of the file, and the space allocated behind it.

use crate::error::{is_disk_full, Error, Result};
use crate::pager::{Access, MapView, MAP_BYTES_MIN};
use crate::storage::Storage;
use std::sync::Arc;

/// Largest number of allocations `WriteMap::is_cold` lets pass unchecked while it finds only
/// resident pages.
const COLD_CHECK_BACKOFF_MAX: u32 = 255;

/// Granularity of file growth through the writable mapping: fallocate is a journalled metadata
/// change, so it is not made for every few pages. A durable commit trims what is unused.
const ALLOCATE_STEP_BYTES: u64 = 4 << 20;

/// The writable mapping of the file and the length allocated behind it. Owned by the writer
/// state between transactions and by `WritePages` during one. The mapping is an `Access`
/// that commits also hand to the snapshots they publish, so readers and the writer share it.
pub(crate) struct WriteMap {
    pub(super) storage: Arc<dyn Storage>,
    pub(super) page_bytes: usize,
    pub(super) map: Option<Arc<Access>>,
    /// The pages of `map`, for reading dirty pages without the `Access` dispatch.
    pub(super) view: Option<MapView>,
    /// File length, all of it allocated when `enabled`.
    pub(crate) file_bytes: u64,
    /// False where the storage cannot allocate or map: dirty pages are owned buffers then.
    pub(super) enabled: bool,
    /// `Options::readahead`, applied to each new mapping by its length.
    pub(super) readahead: crate::pager::Readahead,
    /// Allocations left before `is_cold` checks again, and the current gap between checks.
    pub(super) cold_skip: u32,
    pub(super) cold_backoff: u32,
    /// New space from here to `file_bytes` is allocated but not yet populated (mapped in):
    /// it is populated when a page in it is first placed in the mapping.
    pub(super) unpopulated_from: u64,
    /// The last transaction appended pages (`WritePages::new_page_appended`): this one keeps
    /// its new single pages in owned buffers from the start.
    pub(super) appending: bool,
    /// The bytes of the file that frames may cover (`Options::frames_bytes`): the first mapping is
    /// frames where the file fits; `None` once the file outgrew them, or where frames are off.
    frames_bytes: Option<u64>,
    /// This transaction needed pages past its frames and placed them in owned buffers (the
    /// storage could not map the file for it: `frames_to_file`): the next one maps the file
    /// instead (`begin`).
    outgrown: bool,
}

impl WriteMap {
    pub(crate) fn new(
        storage: Arc<dyn Storage>,
        page_bytes: usize,
        file_bytes: u64,
        enabled: bool,
        readahead: crate::pager::Readahead,
        frames_bytes: Option<u64>,
        frames: Option<Arc<Access>>,
    ) -> WriteMap {
        let view = frames.as_ref().and_then(|a| a.view(page_bytes, u64::MAX));
        WriteMap {
            storage,
            page_bytes,
            map: frames,
            view,
            file_bytes,
            enabled,
            readahead,
            cold_skip: 0,
            cold_backoff: 0,
            unpopulated_from: file_bytes,
            appending: false,
            frames_bytes,
            outgrown: false,
        }
    }

    /// At the start of a write transaction: where the file outgrew the frames (the last
    /// transaction placed pages past them, or the file is longer), they are let go, and the
    /// next `ensure` maps the file. Snapshots that read the frames keep them until they end;
    /// every page they hold is in the file (`WritePages::write_out`), so the mapping reads the
    /// same bytes.
    pub(super) fn begin(&mut self) {
        let Some(frames) = self.frames() else {
            return;
        };
        if self.outgrown || self.file_bytes > frames.len() {
            self.view = None;
            self.map = None;
            self.frames_bytes = None;
            self.outgrown = false;
        }
    }

    /// At the end of a write transaction: it writes no frames any more (`Frames::written`).
    pub(super) fn written(&self) {
        if let Some(f) = self.frames() {
            f.written();
        }
    }

    /// The frames the writer writes its pages in, if it does.
    #[inline]
    pub(super) fn frames(&self) -> Option<&crate::pager::Frames> {
        self.map.as_ref().and_then(|m| m.frames())
    }

    /// The writer placed pages `[id, id + n)`, free until now, in the mapping (`in_map`) or
    /// in an owned buffer: frames take note (`Frames::placed`, `Frames::forget_page`).
    #[inline]
    pub(super) fn placed(&self, id: u64, n: u64, in_map: bool) {
        if let Some(f) = self.frames() {
            if in_map {
                f.placed(id, n);
            } else {
                f.forget_page(id, n);
            }
        }
    }

    /// Whether bytes `[0, end)` reach past the frames the writer writes its pages in, and it
    /// has not found this transaction that the file cannot be mapped instead (`outgrown`).
    #[inline]
    pub(super) fn past_frames(&self, end: u64) -> bool {
        !self.outgrown
            && self.frames().is_some()
            && self
                .map
                .as_ref()
                .and_then(|m| m.mapped_bytes())
                .unwrap_or(0)
                < end
    }

    /// Maps the file for writing in place of the frames, in the middle of a transaction that
    /// needs bytes `[0, end)` past them (`WritePages::leave_frames`), as the next transaction
    /// would (`begin`). Returns the frames, for the caller to copy the pages the transaction
    /// wrote there; `None`, with the frames kept, where the storage cannot map (the
    /// transaction's further pages then stay in owned buffers).
    pub(super) fn frames_to_file(&mut self, end: u64) -> Option<Arc<Access>> {
        let mut len = MAP_BYTES_MIN;
        while len < end.max(self.file_bytes) {
            len *= 2;
        }
        let Some(Ok(map)) = self.storage.map_mut(len) else {
            // Owned buffers for this transaction's further pages, as before the frames could
            // be left (`ensure`), and not another try at each page.
            self.outgrown = true;
            return None;
        };
        let access = Access::Shared(map);
        access.advise_readahead(self.readahead.for_len(len));
        self.view = access.view(self.page_bytes, u64::MAX);
        let frames = self.map.replace(Arc::new(access));
        self.frames_bytes = None;
        self.outgrown = false;
        // New space is mapped in by the page faults of its first writes.
        self.unpopulated_from = self.file_bytes;
        frames
    }

    /// Frames for a writing handle's file at open, where `frames_bytes` asks for them and
    /// the storage allocates (as `ensure` would make them at the first write): the open's
    /// snapshot then reads through them, and the keeper warms them, so that a handle that
    /// only reads after its open reads from frames too. `None` otherwise: the open maps the
    /// file.
    pub(crate) fn frames_at_open(
        storage: &Arc<dyn Storage>,
        page_bytes: usize,
        file_bytes: u64,
        frames_bytes: Option<u64>,
    ) -> Option<Arc<Access>> {
        let bytes = frames_bytes.filter(|&b| file_bytes <= b)?;
        // What `ensure` asks of the storage before it makes frames; a file already this long
        // changes only where it has holes.
        if !storage.allocate(file_bytes).unwrap_or(false) {
            return None;
        }
        kept_frames(storage, page_bytes, bytes)
    }

    /// Makes bytes `[0, end)` of the file allocated and mapped for writing. Returns false if
    /// the storage cannot (callers fall back to owned buffers).
    pub(super) fn ensure(&mut self, end: u64) -> Result<bool> {
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
                Err(e) if step > end && is_disk_full(&e) => {
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
        if mapped < end && self.frames().is_some() {
            // Past the frames, where `WritePages::leave_frames` could not map the file: this
            // transaction's further pages go to owned buffers, and the next one maps the file
            // (`begin`).
            self.outgrown = true;
            return Ok(false);
        }
        if mapped < end && self.map.is_none() {
            let frames = self
                .frames_bytes
                .filter(|&b| self.file_bytes.max(end) <= b)
                .and_then(|b| kept_frames(&self.storage, self.page_bytes, b));
            if let Some(access) = frames {
                self.view = access.view(self.page_bytes, u64::MAX);
                self.map = Some(access);
                return Ok(true);
            }
        }
        if mapped < end {
            let mut len = MAP_BYTES_MIN.max(mapped);
            while len < end {
                len *= 2;
            }
            match self.storage.map_mut(len) {
                // Snapshots that hold the smaller mapping keep it alive until they end.
                Some(map) => {
                    let access = Access::Shared(map?);
                    let readahead = self.readahead.for_len(len);
                    access.advise_readahead(readahead);
                    // The new view before the new map: the old map stays alive (held by
                    // `self.map`) until the view that points into it is gone.
                    self.view = access.view(self.page_bytes, u64::MAX);
                    let access = Arc::new(access);
                    if let Some(old) = self
                        .map
                        .as_ref()
                        .filter(|_| readahead && mapped > 0 && self.readahead.fits(len))
                    {
                        // A mapping that replaces a smaller one, of a file that fits in
                        // memory: the pages the writer wrote are in the page cache, and are
                        // mapped in for the readers once the smaller one is gone. Not the
                        // first mapping at open: its pages may be on disk only, and the first
                        // reads of them read ahead.
                        access
                            .map_in_behind(end.min(self.file_bytes) as usize, Arc::downgrade(old));
                    }
                    self.map = Some(access);
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

    /// The database's page size.
    pub(crate) fn page_bytes(&self) -> usize {
        self.page_bytes
    }

    /// Drops runs of pages (first page, pages) from the process's resident set: pages no
    /// reader of this handle reads any more (`FreeSet::take_unread`).
    pub(crate) fn forget(&self, runs: &[(u64, u64)]) {
        if let Some(map) = self.map.as_ref() {
            map.forget_runs(self.page_bytes, runs);
        }
    }

    /// Before a page ending at byte `end` is written through the mapping: maps in the new
    /// space not populated yet, in one call rather than one page fault per page as the writer
    /// reaches it. Only a hint: older kernels refuse it, and that changes nothing.
    #[inline]
    pub(super) fn populate_to(&mut self, end: u64) {
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
        self.trim_to(target);
    }

    /// `trim` without the slack: the file ends at `needed` bytes (`Database::compact`).
    /// Requires the same: the last commit is durable and its pages end at `needed`.
    pub(crate) fn trim_exact(&mut self, needed: u64) {
        self.trim_to(needed);
    }

    fn trim_to(&mut self, target: u64) {
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
    pub(super) fn is_cold(&mut self, id: u64, page_bytes: usize) -> bool {
        if self.cold_skip > 0 {
            self.cold_skip -= 1;
            return false;
        }
        // A frame is never read from the file to be written over: only the mapping's are.
        if self.frames().is_some() {
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

    pub(super) fn bytes(&self, id: u64, len: usize, page_bytes: usize) -> Result<&[u8]> {
        match self.map.as_ref() {
            Some(m) => m.bytes(id, (len / page_bytes) as u64, page_bytes),
            None => Err(Error::internal(format!(
                "page {id}: dirty page outside the writable mapping"
            ))),
        }
    }

    /// Requires: `id` is a dirty page (or run) of the current write transaction, or, for
    /// `write_meta`, a meta slot; either way no snapshot reads it.
    pub(super) fn bytes_mut(
        &mut self,
        id: u64,
        len: usize,
        page_bytes: usize,
    ) -> Result<&mut [u8]> {
        self.slice_mut(id as usize * page_bytes, len)
            .ok_or_else(|| {
                Error::internal(format!(
                    "page {id}: dirty page outside the writable mapping"
                ))
            })
    }

    pub(super) fn slice_mut(&mut self, at: usize, len: usize) -> Option<&mut [u8]> {
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

/// Frames of `bytes` for the file, with their keeper started (`Access::keep_frames`); `None`
/// where the system refuses the reservation.
fn kept_frames(storage: &Arc<dyn Storage>, page_bytes: usize, bytes: u64) -> Option<Arc<Access>> {
    let frames = crate::pager::Frames::new(storage.clone(), page_bytes, bytes)?;
    let access = Arc::new(Access::Frames(frames));
    access.keep_frames();
    Some(access)
}
