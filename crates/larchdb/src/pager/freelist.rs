//! Free-space accounting. A page is in exactly one of: reachable from the newest commit, free
//! (reusable now), or pending (freed by a commit, but still reachable from an older snapshot
//! that a reader or a crash could need). Pending pages become free once the reuse horizon
//! passes the commit that freed them.
//!
//! Persisted at each commit as a chain of freelist pages holding (txn, start, len) extents;
//! txn 0 marks a free extent, any other txn a pending one freed by that commit.

use crate::bytes::{get_u64, put_u64};
use crate::error::{Error, Result};
use std::collections::BTreeMap;

/// A persisted extent: (freeing txn or 0 for free, first page, page count).
pub(crate) type Extent = (u64, u64, u64);

/// Bytes of one persisted extent.
pub(crate) const EXTENT_BYTES: usize = 24;
/// Body offset of the next-page link, and of the first extent, in a freelist page.
pub(crate) const FREELIST_NEXT_AT: usize = super::PAGE_HEADER_BYTES;
pub(crate) const FREELIST_EXTENTS_AT: usize = FREELIST_NEXT_AT + 8;

/// Extents that fit in one freelist page.
pub(crate) fn extents_per_page(page_bytes: usize) -> usize {
    (page_bytes - FREELIST_EXTENTS_AT) / EXTENT_BYTES
}

#[derive(Clone, Debug, Default)]
pub(crate) struct FreeSet {
    /// Free extents: start -> length, coalesced and disjoint.
    free: BTreeMap<u64, u64>,
    free_pages: u64,
    /// Pending extents by the transaction that freed them.
    pending: BTreeMap<u64, Vec<(u64, u64)>>,
    pending_pages: u64,
}

impl FreeSet {
    #[cfg(test)]
    pub(crate) fn free_pages(&self) -> u64 {
        self.free_pages
    }

    #[cfg(test)]
    pub(crate) fn pending_pages(&self) -> u64 {
        self.pending_pages
    }

    /// Adds a free extent, merging with neighbours. Returns false (and changes nothing) if it
    /// overlaps a free extent: a double free, which only a corrupt freelist can cause.
    pub(crate) fn insert(&mut self, start: u64, len: u64) -> bool {
        if len == 0 {
            return true;
        }
        let end = start + len;
        let mut new_start = start;
        let mut new_len = len;
        if let Some((&s, &l)) = self.free.range(..=start).next_back() {
            if s + l > start {
                return false;
            }
            if s + l == start {
                new_start = s;
                new_len += l;
            }
        }
        if let Some((&s, &l)) = self.free.range(start..).next() {
            if s < end {
                return false;
            }
            if s == end {
                new_len += l;
                self.free.remove(&s);
            }
        }
        self.free.insert(new_start, new_len);
        self.free_pages += len;
        true
    }

    /// Takes `n` contiguous free pages: the lowest page for one, first fit for a run.
    pub(crate) fn alloc(&mut self, n: u64) -> Option<u64> {
        let (&start, &len) = if n == 1 {
            self.free.iter().next()?
        } else {
            self.free.iter().find(|(_, &len)| len >= n)?
        };
        self.free.remove(&start);
        if len > n {
            self.free.insert(start + n, len - n);
        }
        self.free_pages -= n;
        Some(start)
    }

    /// Records pages freed by commit `txn`.
    pub(crate) fn add_pending(&mut self, txn: u64, extents: Vec<(u64, u64)>) {
        if extents.is_empty() {
            return;
        }
        self.pending_pages += extents.iter().map(|e| e.1).sum::<u64>();
        self.pending.entry(txn).or_default().extend(extents);
    }

    /// Makes reusable every pending extent freed by a commit `<= horizon`: no snapshot that
    /// must be preserved is older than such a commit.
    pub(crate) fn release(&mut self, horizon: u64) -> Result<()> {
        while let Some(entry) = self.pending.first_entry() {
            if *entry.key() > horizon {
                break;
            }
            let (txn, extents) = entry.remove_entry();
            for (start, len) in extents {
                self.pending_pages -= len;
                if !self.insert(start, len) {
                    return Err(Error::corrupted(
                        start,
                        format!("page freed twice (by txn {txn})"),
                    ));
                }
            }
        }
        Ok(())
    }

    /// If the last free extent ends at `page_count`, removes it and returns the new, smaller
    /// page count: space at the end of the file is given back rather than kept free.
    pub(crate) fn trim_tail(&mut self, page_count: u64) -> u64 {
        match self.free.iter().next_back() {
            Some((&start, &len)) if start + len == page_count => {
                self.free.remove(&start);
                self.free_pages -= len;
                start
            }
            _ => page_count,
        }
    }

    /// Persisted form: free extents (txn 0) then pending ones.
    pub(crate) fn entries(&self) -> Vec<(u64, u64, u64)> {
        let mut out: Vec<(u64, u64, u64)> = self.free.iter().map(|(&s, &l)| (0, s, l)).collect();
        for (&txn, extents) in &self.pending {
            out.extend(extents.iter().map(|&(s, l)| (txn, s, l)));
        }
        out
    }

    /// Adds one persisted entry read from freelist page `page`. Requires: pages are checked
    /// against the file's page count by the caller.
    pub(crate) fn load_entry(&mut self, txn: u64, start: u64, len: u64, page: u64) -> Result<()> {
        if txn == 0 {
            if !self.insert(start, len) {
                return Err(Error::corrupted(
                    page,
                    format!("freelist extent {start}+{len} overlaps"),
                ));
            }
        } else {
            self.add_pending(txn, vec![(start, len)]);
        }
        Ok(())
    }
}

/// Groups page ids into sorted extents.
pub(crate) fn to_extents(pages: &mut [u64]) -> Vec<(u64, u64)> {
    pages.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::new();
    for &p in pages.iter() {
        match out.last_mut() {
            Some((s, l)) if *s + *l == p => *l += 1,
            _ => out.push((p, 1)),
        }
    }
    out
}

/// Writes extents into a freelist page body. Requires: `extents.len() <= extents_per_page`.
pub(crate) fn encode_page(p: &mut [u8], next: u64, extents: &[(u64, u64, u64)]) {
    put_u64(p, FREELIST_NEXT_AT, next);
    for (i, &(txn, start, len)) in extents.iter().enumerate() {
        let at = FREELIST_EXTENTS_AT + i * EXTENT_BYTES;
        put_u64(p, at, txn);
        put_u64(p, at + 8, start);
        put_u64(p, at + 16, len);
    }
    super::set_page_count_field(p, extents.len() as u16);
}

/// Reads a freelist page: the next link and its extents. Validates the count against the page.
pub(crate) fn decode_page(p: &[u8], id: u64) -> Result<(u64, Vec<Extent>)> {
    if super::page_type(p) != super::PAGE_FREELIST {
        return Err(Error::corrupted(id, "expected a freelist page"));
    }
    let n = super::page_count_field(p) as usize;
    if n > extents_per_page(p.len()) {
        return Err(Error::corrupted(id, "freelist page count too large"));
    }
    let next = get_u64(p, FREELIST_NEXT_AT);
    let extents = (0..n)
        .map(|i| {
            let at = FREELIST_EXTENTS_AT + i * EXTENT_BYTES;
            (get_u64(p, at), get_u64(p, at + 8), get_u64(p, at + 16))
        })
        .collect();
    Ok((next, extents))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_coalesces_and_rejects_overlap() {
        let mut f = FreeSet::default();
        assert!(f.insert(10, 2));
        assert!(f.insert(14, 2));
        assert!(f.insert(12, 2));
        assert_eq!(f.entries(), vec![(0, 10, 6)]);
        assert!(!f.insert(15, 1));
        assert!(!f.insert(8, 3));
        assert_eq!(f.free_pages(), 6);
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
    fn pending_released_by_horizon() {
        let mut f = FreeSet::default();
        f.add_pending(5, vec![(20, 1)]);
        f.add_pending(7, vec![(21, 1)]);
        f.release(6).unwrap();
        assert_eq!(f.free_pages(), 1);
        assert_eq!(f.pending_pages(), 1);
        f.release(7).unwrap();
        assert_eq!(f.entries(), vec![(0, 20, 2)]);
    }

    #[test]
    fn extents_group_runs() {
        assert_eq!(
            to_extents(&mut [9, 3, 4, 5, 11]),
            vec![(3, 3), (9, 1), (11, 1)]
        );
    }
}
