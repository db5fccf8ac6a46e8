//! Freelist pages: encoding extents into a page and reading them back.

use super::Extent;
use crate::bytes::{get_u32, get_u64};
use crate::error::{Error, Result};
use crate::layout::freelist::{
    extents, extents_per_page, set_extents, EXTENTS_AT, EXTENT_BYTES, EXTENT_KIND_AT,
    EXTENT_PAGES_AT, EXTENT_START_AT, EXTENT_TXN_AT, NEXT_AT,
};
use crate::layout::{header, kind};
use crate::pager::page::PageRef;

/// Writes extents into a freelist page body. Requires: `extents.len() <= extents_per_page`.
pub(crate) fn encode_page(p: &mut [u8], next: PageRef, extents: &[Extent]) {
    debug_assert!(extents.len() <= extents_per_page(p.len()));
    p[NEXT_AT..EXTENTS_AT].copy_from_slice(&next.encode());
    let cells = p[EXTENTS_AT..].chunks_exact_mut(EXTENT_BYTES);
    for (cell, e) in cells.zip(extents) {
        cell[EXTENT_TXN_AT..EXTENT_TXN_AT + 8].copy_from_slice(&e.txn.to_le_bytes());
        cell[EXTENT_START_AT..EXTENT_START_AT + 8].copy_from_slice(&e.start.to_le_bytes());
        cell[EXTENT_PAGES_AT..EXTENT_PAGES_AT + 4].copy_from_slice(&(e.pages as u32).to_le_bytes());
        cell[EXTENT_KIND_AT..EXTENT_KIND_AT + 4].copy_from_slice(&e.kind.to_le_bytes());
    }
    set_extents(p, extents.len() as u16);
}

/// Reads a freelist page: the next link and its extents. Validates the count against the page.
pub(crate) fn decode_page(p: &[u8], id: u64) -> Result<(PageRef, Vec<Extent>)> {
    if header::kind(p) != kind::FREELIST {
        return Err(Error::corrupted(id, "expected a freelist page"));
    }
    decode_extents(p, id)
}

/// Reads a page of the list of reserved pages (`kind::RESERVE_LIST`, laid out as a freelist
/// page): the next link and its extents.
pub(crate) fn decode_reserve_page(p: &[u8], id: u64) -> Result<(PageRef, Vec<Extent>)> {
    if header::kind(p) != kind::RESERVE_LIST {
        return Err(Error::corrupted(
            id,
            "expected a page of the reserved pages' list",
        ));
    }
    decode_extents(p, id)
}

fn decode_extents(p: &[u8], id: u64) -> Result<(PageRef, Vec<Extent>)> {
    let n = extents(p) as usize;
    if n > extents_per_page(p.len()) {
        return Err(Error::corrupted(id, "freelist page count too large"));
    }
    let next = PageRef::decode(&p[NEXT_AT..EXTENTS_AT]);
    let extents = (0..n)
        .map(|i| {
            let at = EXTENTS_AT + i * EXTENT_BYTES;
            Extent::new(
                get_u64(p, at + EXTENT_TXN_AT),
                get_u64(p, at + EXTENT_START_AT),
                get_u32(p, at + EXTENT_PAGES_AT) as u64,
                get_u32(p, at + EXTENT_KIND_AT),
            )
        })
        .collect();
    Ok((next, extents))
}
