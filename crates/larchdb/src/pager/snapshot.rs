//! `Snapshot`: one committed state of the database, read through the page access it was
//! published with.

use super::access::{Access, MapView};
use super::freelist::{self, decode_page as decode_freelist_page, Extent, FreeSet};
use super::meta::Meta;
use super::page::{check_header, checksum_ok, prefetch};
use super::{PageRef, PageSource};
use crate::error::{Error, Result};
use crate::layout::META_SLOTS;
use std::sync::Arc;

/// One committed state of the database: a meta page and the means to read the pages it
/// reaches. Immutable; shared by every read transaction that began while it was current.
pub(crate) struct Snapshot {
    pub(crate) meta: Meta,
    access: Arc<Access>,
    page_bytes: usize,
    verify_checksums: bool,
    /// The pages of the mapping up to `meta.page_count`, for single-page reads (and
    /// prefetches) without the `Access` dispatch; `None` for a buffered access. Reads that
    /// verify checksums take `bytes`.
    view: Option<MapView>,
}

/// The pages a meta page names as reserved for large values (`Meta::reserve_list`), as read
/// back: the reservation, the tail of the one before (each ascending), and the list's pages.
#[derive(Debug, Default)]
pub(crate) struct Reserved {
    pub(crate) reserve: Vec<(u64, u64)>,
    pub(crate) tail: Vec<(u64, u64)>,
    pub(crate) list: Vec<u64>,
}

impl Reserved {
    /// The reservation's extents and the tail's, ascending.
    pub(crate) fn all(self) -> Vec<(u64, u64)> {
        let mut all = self.reserve;
        all.extend(self.tail);
        all.sort_unstable();
        all
    }
}

/// Kinds of the entries of a reserved pages' list: the reservation's extents, and the tail's.
pub(crate) const RESERVED_RESERVE: u32 = 0;
pub(crate) const RESERVED_TAIL: u32 = 1;

/// One page of a freelist chain, as read back: its id, the commit that wrote it, its entries.
pub(crate) struct ChainPage {
    pub(crate) id: u64,
    pub(crate) txn: u64,
    pub(crate) extents: Vec<Extent>,
}

impl Snapshot {
    pub(crate) fn new(meta: Meta, access: Arc<Access>, verify_checksums: bool) -> Snapshot {
        let page_bytes = meta.page_bytes as usize;
        // A buffered access verifies each page once, when it loads it.
        let verify_checksums = verify_checksums && access.is_mapped();
        let view = access.view(page_bytes, meta.page_count);
        Snapshot {
            meta,
            access,
            page_bytes,
            verify_checksums,
            view,
        }
    }

    pub(crate) fn access(&self) -> &Arc<Access> {
        &self.access
    }

    fn bytes(&self, id: u64, pages: u64) -> Result<&[u8]> {
        self.bytes_by(id, pages, self.meta.txn)
    }

    /// The overflow run `r` refers to, written by a commit after this tree's (`r.txn`): a
    /// logged commit's run of a large value that a page commit's merge put in the tree it
    /// builds on this one (docs/design/large-values.md). Checked like any page, against that
    /// commit instead of this tree's.
    pub(crate) fn run_after(&self, r: PageRef, pages: u64) -> Result<&[u8]> {
        let p = self.bytes_by(r.id, pages, r.txn)?;
        r.check(p)?;
        Ok(p)
    }

    fn bytes_by(&self, id: u64, pages: u64, newest: u64) -> Result<&[u8]> {
        let end = id
            .checked_add(pages)
            .ok_or_else(|| Error::corrupted(id, "page id overflow"))?;
        if id < META_SLOTS || end > self.meta.page_count {
            return Err(Error::corrupted(
                id,
                format!(
                    "page reference out of range (file has {} pages)",
                    self.meta.page_count
                ),
            ));
        }
        let p = self.access.bytes(id, pages, self.page_bytes)?;
        if self.verify_checksums && !checksum_ok(p) {
            return Err(Error::corrupted(id, "checksum mismatch"));
        }
        check_header(p, id, newest)?;
        Ok(p)
    }

    /// Asks for pages `id..id + pages` to be read from the device into the page cache now,
    /// without waiting (`Access::will_need`): pages a merge will read soon, beyond memory.
    /// A range that reaches a meta slot or past the file's pages is not asked for at all.
    /// Returns the pages the kernel was asked for (0 where nothing was).
    pub(crate) fn will_need(&self, id: u64, pages: u64) -> u64 {
        let in_range = id
            .checked_add(pages)
            .is_some_and(|end| end <= self.meta.page_count);
        let page_bytes = self.page_bytes as u64;
        let bytes = |n: u64| {
            n.checked_mul(page_bytes)
                .and_then(|b| usize::try_from(b).ok())
        };
        match (bytes(id), bytes(pages)) {
            (Some(at), Some(len)) if id >= META_SLOTS && in_range => {
                self.access.will_need(at, len) as u64 / page_bytes
            }
            _ => 0,
        }
    }

    /// See `PageSource::prefetch_page`.
    #[inline]
    pub(crate) fn prefetch_mapped_page(&self, id: u64) {
        self.prefetch_mapped_head(id, self.page_bytes.div_ceil(64));
    }

    /// Like `prefetch_mapped_page`, for the first `lines` cache lines of the page only
    /// (its header, slots and first cells): a page's 64 lines at once fill the core's line
    /// fill buffers, and the instructions behind the prefetches wait for them.
    #[inline]
    pub(crate) fn prefetch_mapped_head(&self, id: u64, lines: usize) {
        if id < META_SLOTS {
            return;
        }
        if let Some(p) = self.view.as_ref().and_then(|v| v.page(id)) {
            let mut at = 0;
            while at < lines * 64 {
                prefetch(p, at);
                at += 64;
            }
        }
    }

    /// Page `id` from the view, unchecked, where the fast path may take it: not a meta slot
    /// (never a tree or freelist page: the slow path gives its error), and no checksum to
    /// verify at each access.
    #[inline(always)]
    fn view_page(&self, id: u64) -> Option<&[u8]> {
        self.view
            .as_ref()
            .filter(|_| id >= META_SLOTS && !self.verify_checksums)
            .and_then(|v| v.page(id))
    }

    /// Like `page`/`run`, but always verifies the checksum (for open-time loads and `verify`).
    pub(crate) fn bytes_verified(&self, id: u64, pages: u64) -> Result<&[u8]> {
        let p = self.bytes(id, pages)?;
        if !self.verify_checksums && !checksum_ok(p) {
            return Err(Error::corrupted(id, "checksum mismatch"));
        }
        Ok(p)
    }

    /// The pages the meta page names as reserved for large values: its list's (format 6),
    /// each page checksum-verified and each extent checked to lie in the file past the meta
    /// slots, or its two extents (format 5).
    pub(crate) fn reserved(&self) -> Result<Reserved> {
        let mut out = Reserved::default();
        let [reserve, tail] = self.meta.reserve_v5;
        out.reserve.extend(Some(reserve).filter(|e| e.1 > 0));
        out.tail.extend(Some(tail).filter(|e| e.1 > 0));
        let mut next = self.meta.reserve_list;
        while !next.is_none() {
            if out.list.len() as u64 >= self.meta.reserve_list_pages {
                return Err(Error::corrupted(
                    next.id,
                    "reserved pages' list longer than recorded",
                ));
            }
            let p = self.bytes_verified(next.id, 1)?;
            next.check(p)?;
            let (link, extents) = freelist::decode_reserve_page(p, next.id)?;
            for e in extents {
                let end = e.start.checked_add(e.pages);
                if e.start < META_SLOTS
                    || e.pages == 0
                    || end.is_none_or(|end| end > self.meta.page_count)
                {
                    return Err(Error::corrupted(
                        next.id,
                        "a reserved extent outside the file",
                    ));
                }
                match e.kind {
                    RESERVED_RESERVE => out.reserve.push((e.start, e.pages)),
                    RESERVED_TAIL => out.tail.push((e.start, e.pages)),
                    _ => return Err(Error::corrupted(next.id, "a reserved extent of no kind")),
                }
            }
            out.list.push(next.id);
            next = link;
        }
        if out.list.len() as u64 != self.meta.reserve_list_pages {
            return Err(Error::corrupted(
                self.meta.reserve_list.id,
                "reserved pages' list shorter than recorded",
            ));
        }
        out.reserve.sort_unstable();
        out.tail.sort_unstable();
        let mut all: Vec<(u64, u64)> = out.reserve.iter().chain(&out.tail).copied().collect();
        all.sort_unstable();
        if all.windows(2).any(|w| w[0].0 + w[0].1 > w[1].0) {
            return Err(Error::corrupted(
                self.meta.reserve_list.id,
                "reserved extents overlap",
            ));
        }
        Ok(out)
    }

    /// The freelist chain's pages, newest first, each checksum-verified.
    pub(crate) fn freelist_chain(&self) -> Result<Vec<ChainPage>> {
        let mut out = Vec::new();
        let mut next = self.meta.freelist_head;
        while !next.is_none() {
            if out.len() as u64 >= self.meta.freelist_pages {
                return Err(Error::corrupted(
                    next.id,
                    "freelist chain longer than recorded",
                ));
            }
            let p = self.bytes_verified(next.id, 1)?;
            next.check(p)?;
            let (link, extents) = decode_freelist_page(p, next.id)?;
            out.push(ChainPage {
                id: next.id,
                txn: next.txn,
                extents,
            });
            next = link;
        }
        if out.len() as u64 != self.meta.freelist_pages {
            let head = self.meta.freelist_head.id;
            return Err(Error::corrupted(
                head,
                "freelist chain shorter than recorded",
            ));
        }
        Ok(out)
    }

    /// The free set this snapshot records: its freelist chain replayed oldest page first,
    /// every entry checked against the file (`freelist::replay`).
    pub(crate) fn load_free_set(&self) -> Result<FreeSet> {
        let mut pages: Vec<(u64, Vec<Extent>)> = self
            .freelist_chain()?
            .into_iter()
            .map(|c| (c.id, c.extents))
            .collect();
        pages.reverse();
        freelist::replay(&pages, self.meta.page_count, self.meta.txn)
    }
}

impl PageSource for Snapshot {
    #[inline]
    fn page(&self, id: u64) -> Result<&[u8]> {
        if let Some(p) = self.view_page(id) {
            check_header(p, id, self.meta.txn)?;
            return Ok(p);
        }
        self.bytes(id, 1)
    }

    fn run(&self, id: u64, pages: u64) -> Result<&[u8]> {
        self.bytes(id, pages)
    }

    #[inline]
    fn page_bytes(&self) -> usize {
        self.page_bytes
    }

    #[inline]
    fn prefetch_page(&self, id: u64) {
        self.prefetch_mapped_page(id);
    }

    #[inline]
    fn prefetch_head(&self, id: u64, lines: usize) {
        self.prefetch_mapped_head(id, lines);
    }

    #[inline]
    fn page_ready(&self, r: PageRef) -> Option<&[u8]> {
        // Through a mapping the view's slice is there whether the page is in memory or not;
        // frames' views hold only the ready pages.
        if self.access.reads_fault() {
            return None;
        }
        let p = self.view_page(r.id)?;
        (check_header(p, r.id, self.meta.txn).is_ok() && r.check(p).is_ok()).then_some(p)
    }
}
