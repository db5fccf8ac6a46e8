//! Sealing dirty pages (stamping their id and commit, and their checksum): early, while a page
//! is still in the CPU cache, or at commit; with the checksum derived from the copied page's
//! where the edits were tracked (`shift`).

use super::dirty::Place;
use super::WritePages;
use crate::layout::{header, kind, unused_gap};
use crate::pager::page::{checksum_ok, page_checksum, seal_page, stamp_page};
use crate::pager::shift::Shifts;

/// How many pages a transaction dirtied most recently are left unsealed. When a leaf or
/// overflow page leaves this window it is sealed at once, while its bytes are still in the
/// CPU cache, instead of at commit: a 1000-put random commit dirties about 1,400 pages, 5.6 MB,
/// which is out of the core's cache by commit time, so sealing them there cost a second trip
/// to memory per page (docs/design/performance.md). A page written again after its early seal
/// is sealed again at commit.
pub(super) const RECENT_PAGES: usize = 16;

/// Fewer branches than this leaving the window in one transaction say too little about the
/// workload: the next transaction keeps the current `BranchSealing` decision.
const BRANCH_SEAL_SAMPLE_MIN: u64 = 64;

/// Whether branches are sealed early, as leaves are, decided from what the last transaction
/// saw. Most of a random commit's branches are written again after they leave the window of
/// recent pages when the commit's puts outnumber the branches above the leaves (1000 puts
/// over the 550 such branches of a 1M-record tree): sealing them early would be wasted, so
/// they are sealed at commit. When the branches outnumber the puts (5,500 of them at 10M
/// records), most are written once: sealing them at commit reads each back from memory, and
/// sealing them early is the cheaper one (docs/design/performance.md). The writer counts the
/// branches that leave the window and those written again afterwards, and seals branches
/// early in the next transaction if fewer than half came back.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct BranchSealing {
    pub(super) early: bool,
    /// Branches that left the window in this transaction.
    pub(super) out: u64,
    /// Of those, branches written again afterwards.
    pub(super) back: u64,
}

impl BranchSealing {
    /// The decision for the next transaction.
    pub(super) fn next(self) -> BranchSealing {
        let early = if self.out < BRANCH_SEAL_SAMPLE_MIN {
            self.early
        } else {
            self.back * 2 < self.out
        };
        BranchSealing {
            early,
            out: 0,
            back: 0,
        }
    }
}

impl WritePages {
    /// Records that dirty page `id` was just written, and seals the page this pushes out of the
    /// window of recent pages (`RECENT_PAGES`).
    #[inline]
    pub(super) fn touched(&mut self, id: u64) {
        let slot = self.recent_at % RECENT_PAGES;
        self.recent_at = self.recent_at.wrapping_add(1);
        let out = std::mem::replace(&mut self.recent[slot], id);
        if out != 0 {
            self.seal_early(out);
        }
    }

    /// Seals dirty page `id` now if it is not sealed. Sealing early is always safe: a later
    /// write clears the flag and the page is sealed again.
    fn seal_early(&mut self, id: u64) {
        let ps = self.page_bytes;
        let txn = self.txn;
        let Some(d) = self.dirty.get_mut(&id) else {
            // Freed again in this transaction.
            return;
        };
        if d.sealed {
            return;
        }
        let page: &mut [u8] = match &mut d.place {
            Place::Owned(b) => b,
            Place::Mapped(n) => match self.wmap.bytes_mut(id, *n as usize * ps, ps) {
                Ok(p) => p,
                // Left for the commit, which reports it.
                Err(_) => return,
            },
        };
        if header::kind(page) == kind::BRANCH {
            // A branch is written again whenever one of its children is copied: sealed early
            // only while most branches are not (`BranchSealing`).
            d.out = true;
            self.branch_sealing.out += 1;
            if !self.branch_sealing.early {
                return;
            }
        }
        seal(page, id, txn, d.cells, d.check_derived, &self.shifts);
        d.sealed = true;
    }
}

/// Seals a dirty page at commit, unless it was sealed early and not written since (debug
/// builds check that claim: a write that bypassed `page_mut` would show here). The page's
/// state is (sealed, cells, check_derived) of its `Dirty`.
#[inline]
pub(super) fn seal_or_check(
    page: &mut [u8],
    id: u64,
    txn: u64,
    (sealed, cells, check): (bool, Option<u32>, bool),
    shifts: &Shifts,
) {
    if sealed {
        // A derived checksum of a copy of a damaged page rightly does not match.
        debug_assert!(
            (cells.is_some() && !check) || (checksum_ok(page) && header::page_id(page) == id),
            "page {id} written after its early seal"
        );
    } else {
        seal(page, id, txn, cells, check, shifts);
    }
}

/// Stamps and checksums a dirty page: from its derived cell-area CRC when there is one (the
/// same checksum, without reading the cell area), otherwise over the whole page.
#[inline]
pub(super) fn seal(
    page: &mut [u8],
    id: u64,
    txn: u64,
    cells: Option<u32>,
    check: bool,
    shifts: &Shifts,
) {
    let Some(cells) = cells else {
        seal_page(page, id, txn);
        return;
    };
    stamp_page(page, id, txn);
    let (start, end) = unused_gap(page);
    let len = page.len();
    let head = &page[header::CHECKED_FROM..start];
    let crc =
        shifts.shift(shifts.crc0(head), len - end) ^ cells ^ shifts.zeros(head.len() + (len - end));
    debug_assert!(
        !check || crc == page_checksum(page),
        "derived checksum of page {id} differs"
    );
    header::set_checksum(page, crc);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn branches_are_sealed_early_after_a_transaction_where_most_did_not_come_back() {
        let start = BranchSealing::default();
        assert!(!start.early);
        let seen = |early, out, back| BranchSealing { early, out, back }.next().early;
        // Most came back (1M records, 1000-put commits): sealed at commit.
        assert!(!seen(false, 330, 264));
        assert!(!seen(true, 330, 264));
        // Most did not (10M records): sealed early.
        assert!(seen(false, 946, 163));
        // Exactly half came back: at commit.
        assert!(!seen(true, 200, 100));
        // Too few to judge: the decision stands.
        assert!(seen(true, BRANCH_SEAL_SAMPLE_MIN - 1, 0));
        assert!(!seen(false, BRANCH_SEAL_SAMPLE_MIN - 1, 0));
        // The counters start again.
        let next = BranchSealing {
            early: false,
            out: 500,
            back: 10,
        }
        .next();
        assert_eq!((next.out, next.back), (0, 0));
    }
}
