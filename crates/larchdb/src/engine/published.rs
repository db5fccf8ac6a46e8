//! The committed state a reader starts from: a tree and the overlays above it.

use super::catalog::CatalogCache;
use super::counts::CountLog;
use super::upper::overlay::Overlay;
use super::upper::slices::Slices;
use super::upper::Overlays;
use crate::pager::Snapshot;
use std::sync::Arc;

/// A committed snapshot as published to readers: the tree of the last commit that wrote
/// pages (a checkpoint), its catalog decoded once on first use, and, for a handle that writes
/// the log, the overlays holding the commits since, up to commit `txn`, one per slice of the
/// key space, and the entry counts of the tables those commits changed. While a checkpoint
/// runs on its own thread (`engine::checkpoint`), the commits it writes into the tree are in
/// the `frozen` overlay, below `overlay` (the commits since it began).
pub(crate) struct Published {
    pub(crate) snap: Arc<Snapshot>,
    pub(crate) catalog: Arc<CatalogCache>,
    pub(crate) overlay: Option<Arc<Slices>>,
    pub(crate) frozen: Option<Arc<Overlay>>,
    /// The entry counts of the tables the overlays' commits changed (`None`: none did).
    counts: Option<Arc<CountLog>>,
    txn: u64,
}

impl Published {
    /// The runs of large values its overlays' versions name (`Overlay::runs`).
    pub(crate) fn runs(&self) -> Vec<(u64, u64)> {
        let page_bytes = crate::pager::PageSource::page_bytes(&*self.snap);
        let mut out = Vec::new();
        if let Some(o) = &self.overlay {
            for s in o.slices() {
                out.extend(s.overlay.runs(page_bytes));
            }
        }
        if let Some(f) = &self.frozen {
            out.extend(f.runs(page_bytes));
        }
        out
    }

    /// The snapshot of a commit that wrote pages: the tree is everything.
    pub(crate) fn new(snap: Snapshot) -> Arc<Published> {
        Arc::new(Published {
            txn: snap.meta.txn,
            snap: Arc::new(snap),
            catalog: Arc::default(),
            overlay: None,
            frozen: None,
            counts: None,
        })
    }

    /// Commit `txn`, in `overlay` on top of `tree`'s tree (and its frozen overlay, if any),
    /// with the entry counts `counts`.
    pub(crate) fn logged(
        tree: &Published,
        overlay: Arc<Slices>,
        txn: u64,
        counts: Option<Arc<CountLog>>,
    ) -> Arc<Published> {
        debug_assert!(txn >= tree.snap.meta.txn);
        Arc::new(Published {
            snap: tree.snap.clone(),
            catalog: tree.catalog.clone(),
            overlay: Some(overlay),
            frozen: tree.frozen.clone(),
            counts,
            txn,
        })
    }

    /// Whether this snapshot is made of the same parts as commits in `overlay` on top of
    /// `tree`'s tree, with the entry counts `counts`, would be (`Published::logged`): then
    /// only its id differs.
    pub(crate) fn same_parts(
        &self,
        tree: &Published,
        overlay: &Arc<Slices>,
        counts: &Arc<CountLog>,
    ) -> bool {
        self.has_parts(tree, Some(overlay), Some(counts))
    }

    /// Whether `other` differs from this snapshot in its commit id alone: the same tree,
    /// catalog, overlays and count log (`ReadState::shape`).
    pub(crate) fn same_shape(&self, other: &Published) -> bool {
        self.has_parts(other, other.overlay.as_ref(), other.counts.as_ref())
    }

    /// Whether this snapshot has `tree`'s tree, catalog and frozen overlay, and the active
    /// overlays `overlay` and count log `counts`.
    fn has_parts(
        &self,
        tree: &Published,
        overlay: Option<&Arc<Slices>>,
        counts: Option<&Arc<CountLog>>,
    ) -> bool {
        Arc::ptr_eq(&self.snap, &tree.snap)
            && Arc::ptr_eq(&self.catalog, &tree.catalog)
            && same(self.overlay.as_ref(), overlay)
            && same(self.frozen.as_ref(), tree.frozen.as_ref())
            && same(self.counts.as_ref(), counts)
    }

    /// Makes this snapshot commit `txn` (a spare one of `same_parts`, which no reader holds).
    pub(crate) fn set_txn(&mut self, txn: u64) {
        debug_assert!(txn >= self.snap.meta.txn);
        self.txn = txn;
    }

    /// The same commit, with `frozen`, one of its overlays, frozen for a checkpoint
    /// (`engine::checkpoint`), and `active` the overlays the commits after it go to.
    pub(crate) fn frozen(
        &self,
        active: Option<Arc<Slices>>,
        frozen: Arc<Overlay>,
    ) -> Arc<Published> {
        debug_assert!(self.frozen.is_none(), "one checkpoint at a time");
        self.on_tree(active, Some(frozen), self.txn)
    }

    /// The same tree and overlays as commit `txn`, a commit of no records: the id a slice's
    /// checkpoint gives its tree (`engine::checkpoint`), so that each tree a reader may hold
    /// has an id of its own.
    pub(crate) fn renumbered(&self, txn: u64) -> Arc<Published> {
        debug_assert!(txn > self.txn);
        self.on_tree(self.overlay.clone(), self.frozen.clone(), txn)
    }

    /// This snapshot's tree (and its decoded catalog) under `overlay` and `frozen`, as `txn`.
    fn on_tree(
        &self,
        overlay: Option<Arc<Slices>>,
        frozen: Option<Arc<Overlay>>,
        txn: u64,
    ) -> Arc<Published> {
        Arc::new(Published {
            snap: self.snap.clone(),
            catalog: self.catalog.clone(),
            overlay,
            frozen,
            counts: self.counts.clone(),
            txn,
        })
    }

    /// Commit `txn`, whose tree is `snap` (a checkpoint written on its own thread) and whose
    /// later commits are in `overlay`; for a slice of a checkpoint by slices, still read under
    /// `frozen` (it holds the slices not merged yet; the merged ones' records are the same in
    /// both), with the entry counts `counts`.
    pub(crate) fn checkpointed(
        snap: Snapshot,
        overlay: Option<Arc<Slices>>,
        frozen: Option<Arc<Overlay>>,
        txn: u64,
        counts: Option<Arc<CountLog>>,
    ) -> Arc<Published> {
        debug_assert!(txn >= snap.meta.txn);
        Arc::new(Published {
            snap: Arc::new(snap),
            catalog: Arc::default(),
            overlay,
            frozen,
            counts,
            txn,
        })
    }

    /// What is read before the tree.
    #[inline]
    pub(crate) fn overlays(&self) -> Overlays<'_> {
        Overlays {
            active: self.overlay.as_deref(),
            frozen: self.frozen.as_deref(),
            counts: self.counts.as_deref(),
        }
    }

    /// The entry counts of the tables the overlays' commits changed.
    #[inline]
    pub(crate) fn counts(&self) -> Option<&Arc<CountLog>> {
        self.counts.as_ref()
    }

    /// Table `table`'s entry count at this snapshot, if a commit in its overlays changed it.
    pub(crate) fn count(&self, table: u64) -> Option<u64> {
        self.counts.as_ref()?.get(table, self.txn)
    }

    /// Whether commits lie above the tree (in an overlay).
    #[inline]
    pub(crate) fn has_overlay(&self) -> bool {
        self.overlay.is_some() || self.frozen.is_some()
    }

    /// The commit this snapshot is.
    #[inline]
    pub(crate) fn txn(&self) -> u64 {
        self.txn
    }

    /// The commit whose tree it is: readers are registered by it, since it names the pages
    /// they need. (A snapshot's own commit would not do: a checkpoint written on its own
    /// thread frees pages of tree S as commit F, while the commits after F are still read
    /// through tree S until the new tree is in place.)
    #[inline]
    pub(crate) fn tree_txn(&self) -> u64 {
        self.snap.meta.txn
    }
}

/// Whether `a` and `b` are the same part, or both absent.
fn same<T>(a: Option<&Arc<T>>, b: Option<&Arc<T>>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => Arc::ptr_eq(a, b),
        (a, b) => a.is_none() && b.is_none(),
    }
}
