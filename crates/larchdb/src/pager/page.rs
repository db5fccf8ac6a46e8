//! Page images: starting, stamping and sealing a page, its checksum, the checks made on every
//! access, and the reference (`PageRef`) through which a page is reached. Field positions come
//! from `crate::layout`.

use crate::bytes::{get_u64, put_u64};
use crate::error::{Error, Result};
use crate::layout::{header, unused_gap, PAGE_REF_BYTES};

/// Starts a fresh page image of kind `kind`: zeroes the header, except the page id and txn
/// fields (see `stamp_page`), which stay as stamped.
pub(crate) fn init_page(p: &mut [u8], kind: u8) {
    p[..header::PAGE_ID_AT].fill(0);
    p[header::FIELD_A_AT..header::BYTES].fill(0);
    p[header::KIND_AT] = kind;
    p[header::FLAGS_AT] = 0;
}

/// Writes the page id and the id of the transaction writing it. Done when a dirty page is
/// created, so that references to it check out during the transaction, and again when sealed.
#[inline]
pub(crate) fn stamp_page(p: &mut [u8], id: u64, txn: u64) {
    header::set_page_id_and_txn(p, id, txn);
}

/// Stamps the page id and transaction id and computes the checksum, just before the page (or
/// overflow run) is written. `p` is the whole page or run.
pub(crate) fn seal_page(p: &mut [u8], id: u64, txn: u64) {
    stamp_page(p, id, txn);
    let crc = page_checksum(p);
    header::set_checksum(p, crc);
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
    crc.update(&p[header::CHECKED_FROM..start]);
    crc.update(&p[end..]);
    crc.finalize() as u32
}

/// Checks a page's checksum. `p` is the whole page or run.
pub(crate) fn checksum_ok(p: &[u8]) -> bool {
    p.len() >= header::BYTES && page_checksum(p) == header::checksum(p)
}

/// The checks made on every page access, cheap enough for the read path: the page says it is
/// the page we asked for, written no later than the snapshot. Catches misdirected writes and
/// most stale ones; checksums catch the rest (see docs/design/durability.md for when they are
/// verified).
#[inline]
pub(crate) fn check_header(p: &[u8], id: u64, snapshot_txn: u64) -> Result<()> {
    if header::page_id(p) != id {
        return Err(Error::corrupted(
            id,
            format!("page header names page {}", header::page_id(p)),
        ));
    }
    if header::txn(p) > snapshot_txn {
        return Err(Error::corrupted(
            id,
            format!(
                "page written by transaction {} after snapshot {}",
                header::txn(p),
                snapshot_txn
            ),
        ));
    }
    Ok(())
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
    pub(crate) const BYTES: usize = PAGE_REF_BYTES;

    pub(crate) fn new(id: u64, txn: u64) -> PageRef {
        PageRef { id, txn }
    }

    pub(crate) fn is_none(&self) -> bool {
        self.id == 0
    }

    pub(crate) fn encode(&self) -> [u8; PAGE_REF_BYTES] {
        let mut b = [0u8; PAGE_REF_BYTES];
        put_u64(&mut b, 0, self.id);
        put_u64(&mut b, 8, self.txn);
        b
    }

    /// Requires: `b` holds at least 16 bytes.
    pub(crate) fn decode(b: &[u8]) -> PageRef {
        debug_assert!(b.len() >= PAGE_REF_BYTES);
        PageRef {
            id: get_u64(b, 0),
            txn: get_u64(b, 8),
        }
    }

    /// Checks that page bytes `p`, read at `self.id`, were written by `self.txn`.
    #[inline]
    pub(crate) fn check(&self, p: &[u8]) -> Result<()> {
        let found = header::txn(p);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::{kind, node};

    /// The format says CRC-32C of the page minus its checksum field and unused gap: checked
    /// against an independent CRC-32C implementation, for every gap shape and page size.
    #[test]
    fn checksum_is_crc32c_skipping_the_gap() {
        for page_bytes in [4096usize, 65536] {
            for (k, count, a) in [
                (kind::LEAF, 3u16, 3000u32),
                (kind::BRANCH, 0, 4096),
                (kind::LEAF, 0, 32),
            ] {
                let mut p: Vec<u8> = (0..page_bytes).map(|i| (i * 131 % 251) as u8).collect();
                init_page(&mut p, k);
                node::set_keys(&mut p, count);
                node::set_cells_start(&mut p, a.min(page_bytes as u32));
                let (start, end) = unused_gap(&p);
                let reference = crc32c::crc32c_append(crc32c::crc32c(&p[4..start]), &p[end..]);
                assert_eq!(page_checksum(&p), reference, "{k} {count} {a} {page_bytes}");
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
