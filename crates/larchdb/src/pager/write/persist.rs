//! Commit preparation: the transaction's freed pages become pending, and the free set is
//! persisted as a freelist chain, a new base or a delta in front of the old chain.

use super::dirty::Place;
use super::{FreedRun, WritePages};
use crate::error::{Error, Result};
use crate::layout::freelist::extents_per_page;
use crate::layout::kind;
use crate::pager::freelist::{encode_page, Extent, KIND_DURABLE, KIND_READERS, KIND_RELEASE};
use crate::pager::page::PageRef;
use crate::pager::snapshot::{RESERVED_RESERVE, RESERVED_TAIL};
use crate::pager::{Meta, TableHeader};

/// A freelist chain may grow by deltas to twice a base's length plus this many pages before a
/// commit rewrites it as a base.
const DELTA_SLACK_PAGES: usize = 8;

impl WritePages {
    /// Builds the freelist chain for the new commit and returns the meta that names it.
    /// Requires: every tree change of the transaction is done (`catalog` is final).
    /// After this, the dirty pages are the complete set of pages the commit writes.
    ///
    /// The chain is either the old one with a delta in front (the free set's changes since the
    /// last commit, `FreeSet::log`) or a new base (the whole free set), whichever is shorter,
    /// except that deltas stop once the chain would be more than twice as long as a base plus
    /// `DELTA_SLACK_PAGES`: then a base replaces the chain. So a commit writes
    /// O(what it changed) freelist pages, amortised, and loading reads at most about three
    /// times a base.
    pub(crate) fn prepare_commit(&mut self, catalog: TableHeader) -> Result<Meta> {
        let old_chain: Vec<PageRef> = match self.chain.take() {
            Some(chain) => chain,
            None => self
                .base
                .freelist_chain()?
                .into_iter()
                .map(|c| PageRef::new(c.id, c.txn))
                .collect(),
        };
        let txn = self.txn;
        let (reserve_list, reserve_list_pages) = self.write_reserve_list()?;
        self.pend_freed();
        for &(start, len) in &self.spare {
            if !self.free.insert(start, len) {
                return Err(Error::internal(format!(
                    "spare page {start} (+{len}) already free"
                )));
            }
        }
        self.spare.clear();
        self.free.settle();
        self.trim();
        let per_page = extents_per_page(self.page_bytes);
        // A base would hold the free set plus the old chain's pages, which it frees.
        let base_pages = (self.free.entry_count() + old_chain.len()).div_ceil(per_page);
        // A delta holds the log plus one removal per page it allocates for itself.
        let delta_pages = self
            .free
            .log()
            .map(|log| (log.len() + 1).div_ceil(per_page).max(1))
            .unwrap_or(usize::MAX);
        // Every entry of a chain must lie below the page count of the commit that names the
        // chain (loading checks it). A chain built by deltas keeps that only while the page
        // count does not shrink and the delta's own entries lie below it: otherwise, a base.
        let use_delta = !old_chain.is_empty()
            && delta_pages < base_pages
            && old_chain.len() + delta_pages <= 2 * base_pages + DELTA_SLACK_PAGES
            && self.page_count >= self.base.meta.page_count
            && self.free.log().is_some_and(|log| {
                log.iter()
                    .all(|e| e.kind == KIND_RELEASE || e.start + e.pages <= self.page_count)
            });
        let chain = if use_delta {
            self.write_delta(old_chain)?
        } else {
            self.write_base(old_chain)?
        };
        self.free.start_log();
        let head = chain.first().copied().unwrap_or_default();
        let pages = chain.len() as u64;
        self.chain = Some(chain);
        Ok(Meta {
            txn,
            page_bytes: self.page_bytes as u32,
            page_count: self.page_count,
            catalog,
            freelist_head: head,
            freelist_pages: pages,
            last_durable_txn: self.base.meta.last_durable_txn,
            durable: false,
            boot_id: [0; 16],
            // Carried forward; a commit of a handle that writes the log sets them.
            log: self.base.meta.log,
            log_position: self.base.meta.log_position,
            reserve_list,
            reserve_list_pages,
            reserve_v5: [(0, 0); 2],
        })
    }

    /// Writes the list of the pages reserved for large values that the meta page names
    /// (`name_reserved`, `Snapshot::reserved`), in pages of its own, and frees the base
    /// commit's list, which a reader of this commit's meta page never reads: pending like
    /// the freelist chain's pages. Returns the list's first page and its pages.
    fn write_reserve_list(&mut self) -> Result<(PageRef, u64)> {
        if self.base.meta.reserve_list_pages > 0 {
            let born = self.base.meta.reserve_list.txn;
            for id in self.base.reserved()?.list {
                self.freed.push(FreedRun {
                    start: id,
                    pages: 1,
                    born,
                });
            }
        }
        let mut entries = std::mem::take(&mut self.extents);
        entries.clear();
        for (extents, kind) in [
            (&self.reserve, RESERVED_RESERVE),
            (&self.reserve_tail, RESERVED_TAIL),
        ] {
            entries.extend(
                extents
                    .iter()
                    .map(|&(start, pages)| Extent::new(0, start, pages, kind)),
            );
        }
        let per_page = extents_per_page(self.page_bytes);
        let needed = entries.len().div_ceil(per_page);
        let mut list = Vec::with_capacity(needed);
        for _ in 0..needed {
            list.push(self.new_page(kind::RESERVE_LIST)?);
        }
        let txn = self.txn;
        for i in (0..list.len()).rev() {
            let from = i * per_page;
            let to = ((i + 1) * per_page).min(entries.len());
            let next = list
                .get(i + 1)
                .map_or_else(PageRef::default, |&id| PageRef::new(id, txn));
            encode_page(self.page_mut(list[i])?, next, &entries[from..to]);
        }
        self.extents = entries;
        let head = list
            .first()
            .map_or_else(PageRef::default, |&id| PageRef::new(id, txn));
        Ok((head, list.len() as u64))
    }

    /// Makes the pages this transaction freed pending. Pages written after the last durable
    /// commit are not part of it: only readers can still need them. Older pages are also
    /// needed by a recovery after a power loss. Neighbouring pages become one run, born at
    /// the oldest of their commits (a reader of any tree from it on may reach the run).
    fn pend_freed(&mut self) {
        if let Some(horizon) = self.defer_runs {
            let deferred = std::mem::take(&mut self.deferred);
            self.own_deferred.extend_from_slice(&deferred);
            self.free.defer(deferred);
            // Pending until this commit is durable (`KIND_DURABLE`), whoever wrote them: a
            // power loss before returns to a commit whose replay may read their records.
            let undeferred = self.free.undefer(horizon);
            if let Some(named) = &self.named {
                let mut named = named.lock().unwrap_or_else(|e| e.into_inner());
                named.committing(self.txn, horizon);
            }
            for run in &undeferred {
                self.freed.push(FreedRun { born: 0, ..*run });
            }
            self.undeferred.extend(undeferred);
        }
        let txn = self.txn;
        self.freed.sort_unstable_by_key(|r| r.start);
        for (kind, after_durable) in [(KIND_READERS, true), (KIND_DURABLE, false)] {
            self.runs.clear();
            for run in &self.freed {
                if (run.born > self.last_durable) != after_durable {
                    continue;
                }
                match self.runs.last_mut() {
                    Some(last) if last.start + last.pages == run.start => {
                        last.pages += run.pages;
                        last.born = last.born.min(run.born);
                    }
                    _ => self.runs.push(*run),
                }
            }
            self.free.add_pending(txn, kind, &self.runs);
            self.freed_runs
                .extend(self.runs.iter().map(|r| (r.start, r.pages)));
        }
        self.freed.clear();
        self.freed_forgotten = 0;
    }

    /// The runs of pages (first page, pages) the commit writes so far, ascending and joined
    /// where consecutive: its dirty pages and overflow runs, for a writeback paced beside
    /// readers (`engine::commit::Settling`). Pages the commit adds later (its free set's) are
    /// not among them.
    pub(crate) fn dirty_runs(&self) -> Vec<(u64, u64)> {
        let ps = self.page_bytes as u64;
        let mut pages: Vec<(u64, u64)> = self
            .dirty
            .iter()
            .map(|(&id, d)| {
                let n = match &d.place {
                    Place::Owned(b) => b.len() as u64 / ps,
                    Place::Mapped(n) => *n,
                };
                (id, n.max(1))
            })
            .collect();
        pages.sort_unstable();
        crate::pager::freelist::join_runs(pages)
    }

    /// The runs of pages (first page, pages) the commit freed: pages of the base tree it
    /// replaced, which only readers of that tree (or older ones) read.
    pub(crate) fn take_freed(&mut self) -> Vec<(u64, u64)> {
        std::mem::take(&mut self.freed_runs)
    }

    /// Gives back free space at the end of the file.
    fn trim(&mut self) {
        loop {
            let trimmed = self.free.trim_tail(self.page_count);
            if trimmed == self.page_count {
                break;
            }
            self.page_count = trimmed;
        }
    }

    /// Writes the whole free set as a new chain, freeing the old chain's pages. Returns the new
    /// chain, newest (head) first.
    fn write_base(&mut self, old_chain: Vec<PageRef>) -> Result<Vec<PageRef>> {
        let txn = self.txn;
        self.freed.extend(old_chain.into_iter().map(|r| FreedRun {
            start: r.id,
            pages: 1,
            born: r.txn,
        }));
        self.pend_freed();
        self.free.settle();
        self.trim();
        // Allocating chain pages from the free set never adds extents (it takes the front of
        // one), so the page count computed first is enough.
        let per_page = extents_per_page(self.page_bytes);
        let needed = self.free.entry_count().div_ceil(per_page);
        let mut chain = Vec::with_capacity(needed);
        for _ in 0..needed {
            chain.push(PageRef::new(self.new_page(kind::FREELIST)?, txn));
        }
        let mut entries = std::mem::take(&mut self.extents);
        entries.clear();
        self.free.entries_into(&mut entries);
        if entries.len() > chain.len() * per_page {
            return Err(Error::internal(format!(
                "freelist chain of {} pages too short for {} entries",
                chain.len(),
                entries.len()
            )));
        }
        for i in 0..chain.len() {
            let from = (i * per_page).min(entries.len());
            let to = ((i + 1) * per_page).min(entries.len());
            let next = chain.get(i + 1).copied().unwrap_or_default();
            encode_page(self.page_mut(chain[i].id)?, next, &entries[from..to]);
        }
        self.extents = entries;
        Ok(chain)
    }

    /// Puts the free set's changes since the last commit in front of the old chain. Returns
    /// the new chain, newest (head) first.
    fn write_delta(&mut self, old_chain: Vec<PageRef>) -> Result<Vec<PageRef>> {
        let txn = self.txn;
        let per_page = extents_per_page(self.page_bytes);
        // Each page allocated here adds at most one removal to the log it records.
        let mut pages: Vec<u64> = Vec::new();
        loop {
            let Some(len) = self.free.log().map(|l| l.len()) else {
                return Err(Error::internal("freelist log lost before a delta"));
            };
            if pages.len() * per_page >= len {
                break;
            }
            pages.push(self.new_page(kind::FREELIST)?);
        }
        let mut entries = std::mem::take(&mut self.extents);
        entries.clear();
        entries.extend_from_slice(self.free.log().unwrap_or(&[]));
        // Replay reads the chain from its tail: the delta's first entries go in the page
        // nearest the old chain, its last ones in the new head.
        let mut next = old_chain.first().copied().unwrap_or_default();
        for (i, &id) in pages.iter().enumerate() {
            let from = (i * per_page).min(entries.len());
            let to = ((i + 1) * per_page).min(entries.len());
            encode_page(self.page_mut(id)?, next, &entries[from..to]);
            next = PageRef::new(id, txn);
        }
        self.extents = entries;
        let mut chain: Vec<PageRef> = pages
            .iter()
            .rev()
            .map(|&id| PageRef::new(id, txn))
            .collect();
        chain.extend(old_chain);
        Ok(chain)
    }
}
