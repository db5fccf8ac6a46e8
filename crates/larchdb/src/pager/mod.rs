//! The pager: page headers and checksums, the meta slots, free-space accounting, and page
//! access for readers (snapshots) and for the writer (dirty pages).
//!
//! Page access goes through [`Snapshot::page`] and [`WritePages::page`]; the B-tree never sees
//! how a page got into memory. Today a snapshot reads through a shared mmap of the file (or,
//! for storages that cannot be mapped, through a per-snapshot buffer cache); stage 3 swaps in a
//! buffer pool behind the same two calls.

mod access;
pub(crate) mod freelist;
mod meta;
pub(crate) mod shift;
mod write;

pub(crate) use access::{Access, MapView};
pub(crate) use freelist::{decode_page as decode_freelist_page, FreeSet};
pub(crate) use meta::{Meta, MetaDefect, TableHeader, FORMAT_VERSION, META_END};
pub(crate) use write::{Carry, WriteMap, WritePages};

use crate::bytes::{get_u16, get_u32, get_u64, put_u16, put_u32, put_u64};
use crate::error::{Error, Result};
use std::sync::Arc;

/// Initial size of a mapping of the file; it doubles when the file outgrows it. This is
/// address space, not memory.
pub(crate) const MAP_BYTES_MIN: u64 = 1 << 30;

/// Bytes of the header at the start of every page (and of every overflow run).
pub(crate) const PAGE_HEADER_BYTES: usize = 32;
const _: () = assert!(PAGE_HEADER_BYTES == 32);

/// Page type tags (byte 4 of the header).
pub(crate) const PAGE_META: u8 = 1;
pub(crate) const PAGE_BRANCH: u8 = 2;
pub(crate) const PAGE_LEAF: u8 = 3;
pub(crate) const PAGE_OVERFLOW: u8 = 4;
pub(crate) const PAGE_FREELIST: u8 = 5;

/// Meta slots occupy pages 0 and 1; page 0 is never a tree page, so 0 means "no page".
pub(crate) const META_SLOTS: u64 = 2;

// Header field offsets. See docs/design/file-format.md.
pub(crate) const H_CHECKSUM: usize = 0;
const H_TYPE: usize = 4;
const H_FLAGS: usize = 5;
const H_COUNT: usize = 6;
const H_PAGE_ID: usize = 8;
const H_TXN: usize = 16;
const H_A: usize = 24;
const H_B: usize = 28;

#[inline]
pub(crate) fn page_type(p: &[u8]) -> u8 {
    p[H_TYPE]
}
#[inline]
pub(crate) fn page_count_field(p: &[u8]) -> u16 {
    get_u16(p, H_COUNT)
}
#[inline]
pub(crate) fn page_id_field(p: &[u8]) -> u64 {
    get_u64(p, H_PAGE_ID)
}
#[inline]
pub(crate) fn page_txn_field(p: &[u8]) -> u64 {
    get_u64(p, H_TXN)
}
#[inline]
pub(crate) fn page_a(p: &[u8]) -> u32 {
    get_u32(p, H_A)
}
#[inline]
pub(crate) fn page_b(p: &[u8]) -> u32 {
    get_u32(p, H_B)
}
#[inline]
pub(crate) fn set_page_count_field(p: &mut [u8], n: u16) {
    put_u16(p, H_COUNT, n)
}
#[inline]
pub(crate) fn set_page_a(p: &mut [u8], v: u32) {
    put_u32(p, H_A, v)
}
#[inline]
pub(crate) fn set_page_b(p: &mut [u8], v: u32) {
    put_u32(p, H_B, v)
}

/// Hints the CPU to bring `bytes[at]` into the cache. Never faults, never reads out of bounds
/// (an offset past the end is ignored); a no-op on targets without a prefetch instruction.
#[inline]
pub(crate) fn prefetch(bytes: &[u8], at: usize) {
    #[cfg(target_arch = "x86_64")]
    prefetch_hint::<{ std::arch::x86_64::_MM_HINT_T0 }>(bytes, at);
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (bytes, at);
}

/// Like `prefetch`, asking for the line in a state this core can write (`PREFETCHW`): for a
/// page about to be written, so that its stores do not each wait for ownership. Only a hint:
/// `bytes` is not written (a CPU without the instruction treats it as a no-op).
#[inline]
pub(crate) fn prefetch_write(bytes: &[u8], at: usize) {
    #[cfg(target_arch = "x86_64")]
    prefetch_hint::<{ std::arch::x86_64::_MM_HINT_ET0 }>(bytes, at);
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (bytes, at);
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn prefetch_hint<const HINT: i32>(bytes: &[u8], at: usize) {
    if let Some(b) = bytes.get(at) {
        // SAFETY: `_mm_prefetch` is a hint: it reads and writes nothing architecturally and
        // cannot fault; the pointer is in bounds anyway. SSE is part of the x86_64 baseline.
        unsafe { std::arch::x86_64::_mm_prefetch::<HINT>(b as *const u8 as *const i8) };
    }
}

/// Starts a fresh page image of type `kind`: zeroes the header, except the page id and txn
/// fields (see `stamp_page`), which stay as stamped.
pub(crate) fn init_page(p: &mut [u8], kind: u8) {
    p[..H_PAGE_ID].fill(0);
    p[H_A..PAGE_HEADER_BYTES].fill(0);
    p[H_TYPE] = kind;
    p[H_FLAGS] = 0;
}

/// Writes the page id and the id of the transaction writing it. Done when a dirty page is
/// created, so that references to it check out during the transaction, and again when sealed.
pub(crate) fn stamp_page(p: &mut [u8], id: u64, txn: u64) {
    put_u64(p, H_PAGE_ID, id);
    put_u64(p, H_TXN, txn);
}

/// The checksum stored in a page's header.
#[inline]
pub(crate) fn page_checksum_field(p: &[u8]) -> u32 {
    get_u32(p, H_CHECKSUM)
}

#[inline]
pub(crate) fn set_page_checksum_field(p: &mut [u8], crc: u32) {
    put_u32(p, H_CHECKSUM, crc);
}

/// Stamps the page id and transaction id and computes the checksum, just before the page (or
/// overflow run) is written. `p` is the whole page or run.
pub(crate) fn seal_page(p: &mut [u8], id: u64, txn: u64) {
    stamp_page(p, id, txn);
    let crc = page_checksum(p);
    set_page_checksum_field(p, crc);
}

/// Where the slot array starts in a leaf and in a branch (the B-tree's node layout; the pager
/// needs it to know a node's unused gap).
pub(crate) const LEAF_SLOTS_AT: usize = PAGE_HEADER_BYTES;
pub(crate) const BRANCH_SLOTS_AT: usize = PAGE_HEADER_BYTES + PageRef::BYTES;

/// The unused gap of a page, `[start, end)`, which its checksum skips: between a node's slot
/// array and its cells, after a freelist page's last extent, after an overflow value, after the
/// meta fields. The bounds come from header fields that the checksum covers; if they are
/// impossible the gap is empty, so the whole page is checked (and the checksum fails).
pub(crate) fn unused_gap(p: &[u8]) -> (usize, usize) {
    let len = p.len();
    if len < PAGE_HEADER_BYTES {
        return (len, len);
    }
    let count = page_count_field(p) as usize;
    let (start, end) = match page_type(p) {
        PAGE_LEAF => (LEAF_SLOTS_AT + 2 * count, page_a(p) as usize),
        PAGE_BRANCH => (BRANCH_SLOTS_AT + 2 * count, page_a(p) as usize),
        PAGE_FREELIST => (
            freelist::FREELIST_EXTENTS_AT + freelist::EXTENT_BYTES * count,
            len,
        ),
        PAGE_OVERFLOW => (PAGE_HEADER_BYTES + page_b(p) as usize, len),
        PAGE_META => (META_END, len),
        _ => (len, len),
    };
    if start <= end && end <= len {
        (start, end)
    } else {
        (len, len)
    }
}

/// The page's checksum: CRC-32C of bytes 4.. to the end, skipping its unused gap.
///
/// Computed with `crc-fast`, which folds with carry-less multiplies (VPCLMULQDQ on AVX-512
/// machines, PCLMULQDQ elsewhere) instead of one `crc32` instruction per 8 bytes: sealing a
/// 4 KiB page at commit costs about a quarter of the time (docs/design/performance.md). The
/// value is the same CRC-32C, so the format does not change.
pub(crate) fn page_checksum(p: &[u8]) -> u32 {
    let (start, end) = unused_gap(p);
    let mut crc = crc_fast::Digest::new(crc_fast::CrcAlgorithm::Crc32Iscsi);
    crc.update(&p[H_CHECKSUM + 4..start]);
    crc.update(&p[end..]);
    crc.finalize() as u32
}

/// A reference to a page as its referrer (a parent branch, a leaf cell, a table header, the
/// meta page) records it: the page id and the commit that wrote the page. Reading through a
/// reference checks both, so a write that never reached the disk (the page still holds an
/// older version, with a valid checksum) or reached the wrong place is caught, not read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct PageRef {
    pub(crate) id: u64,
    pub(crate) txn: u64,
}

impl PageRef {
    pub(crate) const BYTES: usize = 16;

    pub(crate) fn new(id: u64, txn: u64) -> PageRef {
        PageRef { id, txn }
    }

    pub(crate) fn is_none(&self) -> bool {
        self.id == 0
    }

    pub(crate) fn encode(&self) -> [u8; 16] {
        let mut b = [0u8; 16];
        put_u64(&mut b, 0, self.id);
        put_u64(&mut b, 8, self.txn);
        b
    }

    /// Requires: `b` holds at least 16 bytes.
    pub(crate) fn decode(b: &[u8]) -> PageRef {
        PageRef {
            id: get_u64(b, 0),
            txn: get_u64(b, 8),
        }
    }

    /// Checks that page bytes `p`, read at `self.id`, were written by `self.txn`.
    #[inline]
    pub(crate) fn check(&self, p: &[u8]) -> Result<()> {
        let found = page_txn_field(p);
        if found != self.txn {
            return Err(Error::corrupted(
                self.id,
                format!(
                    "stale or misplaced page: written by txn {found}, its reference expects txn {}",
                    self.txn
                ),
            ));
        }
        Ok(())
    }
}

/// Checks a page's checksum. `p` is the whole page or run.
pub(crate) fn checksum_ok(p: &[u8]) -> bool {
    p.len() >= PAGE_HEADER_BYTES && page_checksum(p) == page_checksum_field(p)
}

/// The checks made on every page access, cheap enough for the read path: the page says it is
/// the page we asked for, of a type we expect, written no later than the snapshot.
/// Catches misdirected writes and most stale ones; checksums catch the rest (see
/// docs/design/durability.md for when they are verified).
#[inline]
pub(crate) fn check_header(p: &[u8], id: u64, snapshot_txn: u64) -> Result<()> {
    if page_id_field(p) != id {
        return Err(Error::corrupted(
            id,
            format!("page header names page {}", page_id_field(p)),
        ));
    }
    if page_txn_field(p) > snapshot_txn {
        return Err(Error::corrupted(
            id,
            format!(
                "page written by transaction {} after snapshot {}",
                page_txn_field(p),
                snapshot_txn
            ),
        ));
    }
    Ok(())
}

/// Read access to pages, shared by the read path (snapshots) and the write path (dirty pages
/// first, then the snapshot the write transaction started from).
pub(crate) trait PageSource {
    /// The page `id`, header-checked. Requires: `id` is a single-page node or freelist page.
    fn page(&self, id: u64) -> Result<&[u8]>;
    /// The overflow run starting at `id`, spanning `pages` pages, header-checked.
    fn run(&self, id: u64, pages: u64) -> Result<&[u8]>;
    /// Page size in bytes.
    fn page_bytes(&self) -> usize;

    /// The page `r` refers to, checked to be the version the reference expects.
    #[inline]
    fn page_at(&self, r: PageRef) -> Result<&[u8]> {
        let p = self.page(r.id)?;
        r.check(p)?;
        Ok(p)
    }

    /// Hints the CPU to load all of page `id`, without reading it (no check; nothing
    /// happens if it is out of range or not mapped). For a page about to be read whole.
    #[inline]
    fn prefetch_page(&self, _id: u64) {}

    /// Like `prefetch_page`, for the first `lines` cache lines of the page only.
    #[inline]
    fn prefetch_head(&self, _id: u64, _lines: usize) {}

    /// The overflow run `r` refers to, checked like `page_at`.
    fn run_at(&self, r: PageRef, pages: u64) -> Result<&[u8]> {
        let p = self.run(r.id, pages)?;
        r.check(p)?;
        Ok(p)
    }
}

/// A table's name and header, as cached by a snapshot.
pub(crate) type CatalogEntry = (Box<[u8]>, TableHeader);

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
    /// The catalog, decoded once on first use when it is small (a snapshot never changes, so
    /// neither does this): opening a table is then a short scan, not a tree lookup.
    pub(crate) tables: std::sync::OnceLock<Option<Vec<CatalogEntry>>>,
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
            tables: std::sync::OnceLock::new(),
        }
    }

    pub(crate) fn access(&self) -> &Arc<Access> {
        &self.access
    }

    fn bytes(&self, id: u64, pages: u64) -> Result<&[u8]> {
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
        check_header(p, id, self.meta.txn)?;
        Ok(p)
    }
}

impl Snapshot {
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

    /// Like `page`/`run`, but always verifies the checksum (for open-time loads and `verify`).
    pub(crate) fn bytes_verified(&self, id: u64, pages: u64) -> Result<&[u8]> {
        let p = self.bytes(id, pages)?;
        if !self.verify_checksums && !checksum_ok(p) {
            return Err(Error::corrupted(id, "checksum mismatch"));
        }
        Ok(p)
    }

    /// The freelist chain's pages, newest first, each checksum-verified: id, the commit that
    /// wrote it, and its entries.
    pub(crate) fn freelist_chain(&self) -> Result<Vec<(u64, u64, Vec<freelist::Extent>)>> {
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
            out.push((next.id, next.txn, extents));
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
}

/// Loads the free set a snapshot records: its freelist chain replayed oldest page first, every
/// entry checked against the file (`freelist::replay`).
pub(crate) fn freelist_load(snap: &Snapshot) -> Result<FreeSet> {
    let mut pages: Vec<(u64, Vec<freelist::Extent>)> = snap
        .freelist_chain()?
        .into_iter()
        .map(|(id, _, entries)| (id, entries))
        .collect();
    pages.reverse();
    freelist::replay(&pages, snap.meta.page_count, snap.meta.txn)
}

impl PageSource for Snapshot {
    #[inline]
    fn page(&self, id: u64) -> Result<&[u8]> {
        // Meta slots are never tree or freelist pages: they take the slow path's error.
        if let Some(p) = self
            .view
            .as_ref()
            .filter(|_| id >= META_SLOTS && !self.verify_checksums)
            .and_then(|v| v.page(id))
        {
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
}

/// Pages an overflow run of `value_bytes` needs at `page_bytes`.
pub(crate) fn overflow_pages(value_bytes: usize, page_bytes: usize) -> u64 {
    (PAGE_HEADER_BYTES + value_bytes).div_ceil(page_bytes) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The format says CRC-32C of the page minus its checksum field and unused gap: checked
    /// against an independent CRC-32C implementation, for every gap shape and page size.
    #[test]
    fn checksum_is_crc32c_skipping_the_gap() {
        for page_bytes in [4096usize, 65536] {
            for (kind, count, a) in [
                (PAGE_LEAF, 3u16, 3000u32),
                (PAGE_BRANCH, 0, 4096),
                (PAGE_LEAF, 0, 32),
            ] {
                let mut p: Vec<u8> = (0..page_bytes).map(|i| (i * 131 % 251) as u8).collect();
                init_page(&mut p, kind);
                set_page_count_field(&mut p, count);
                set_page_a(&mut p, a.min(page_bytes as u32));
                let (start, end) = unused_gap(&p);
                let reference = crc32c::crc32c_append(crc32c::crc32c(&p[4..start]), &p[end..]);
                assert_eq!(
                    page_checksum(&p),
                    reference,
                    "{kind} {count} {a} {page_bytes}"
                );
            }
        }
        let whole: Vec<u8> = (0..4096).map(|i| (i % 7) as u8).collect();
        assert_eq!(
            page_checksum(&whole),
            crc32c::crc32c(&whole[4..]),
            "no gap: all of it"
        );
    }
}
