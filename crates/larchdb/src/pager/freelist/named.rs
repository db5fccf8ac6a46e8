//! The overflow runs a log record names (docs/design/large-values.md, "When a freed logged
//! run can be reused"): a run a logged commit wrote its value into, whose record a replay
//! after a crash may read again. Only those wait, once freed, for a commit whose replay reads
//! no record naming them (`FreeSet::defer`); a run a checkpoint or a page commit wrote is
//! named by no record, and is freed as any page is. A run is kept here while a replay from
//! the last durable commit's meta page may read its record (its commit is at or after that
//! commit's horizon), and is matched by its first page and the commit that wrote it, so a
//! page reused since by a run no record names is not taken for it.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The runs log records name, from the last durable commit's horizon on (`NamedRuns::names`),
/// shared by the writer (which writes them, `insert`) and the commits that free them.
#[derive(Debug, Default)]
pub(crate) struct NamedRuns {
    /// A run's first page, and the commit that wrote it (its record's) and its pages.
    runs: HashMap<u64, (u64, u64)>,
    /// The pages of `runs`, read without the lock (`pages_kept`).
    pages: Arc<AtomicU64>,
    /// The horizons of commits not yet durable (`committing`): commit, the first commit a
    /// replay from its meta page reads.
    horizons: BTreeMap<u64, u64>,
    /// The greatest horizon of the durable commits (`durable`): no replay reads a record of a
    /// commit before it.
    durable_horizon: u64,
}

impl NamedRuns {
    /// Commit `txn`'s record names the run of `pages` pages at `page` (written by the
    /// committer, or read back by a replay).
    pub(crate) fn insert(&mut self, page: u64, txn: u64, pages: u64) {
        if txn >= self.durable_horizon {
            let old = self.runs.insert(page, (txn, pages)).map_or(0, |r| r.1);
            self.pages.fetch_add(pages, Ordering::Relaxed);
            self.pages.fetch_sub(old, Ordering::Relaxed);
        }
    }

    /// Whether a record a replay may read names the run at `page` that commit `txn` wrote.
    pub(crate) fn names(&self, page: u64, txn: u64) -> bool {
        self.runs.get(&page).map(|r| r.0) == Some(txn)
    }

    /// The pages of the runs kept, kept current as runs come and go: the pages a replay may
    /// read, which the runs freed meanwhile hold from reuse.
    pub(crate) fn pages_kept(&self) -> Arc<AtomicU64> {
        self.pages.clone()
    }

    /// Commit `txn`'s meta page names a replay's first commit, `horizon` (0 where not known).
    pub(crate) fn committing(&mut self, txn: u64, horizon: u64) {
        if horizon > 0 {
            self.horizons.insert(txn, horizon);
        }
    }

    /// Commit `txn` failed: its horizon is no durable commit's.
    pub(crate) fn forget(&mut self, txn: u64) {
        self.horizons.remove(&txn);
    }

    /// Commit `txn` is durable, and so are those before it: the runs of records no replay
    /// from its meta page reads are let go.
    pub(crate) fn durable(&mut self, txn: u64) {
        let later = self.horizons.split_off(&txn.saturating_add(1));
        let done = std::mem::replace(&mut self.horizons, later);
        let Some(&horizon) = done.values().max() else {
            return;
        };
        if horizon > self.durable_horizon {
            self.durable_horizon = horizon;
            let mut gone = 0;
            self.runs.retain(|_, &mut (t, pages)| {
                gone += if t >= horizon { 0 } else { pages };
                t >= horizon
            });
            self.pages.fetch_sub(gone, Ordering::Relaxed);
        }
    }

    /// How many runs are kept.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.runs.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_is_named_until_a_durable_commits_replay_reads_no_record_of_its_commit() {
        let mut n = NamedRuns::default();
        let kept = n.pages_kept();
        n.insert(10, 5, 1);
        n.insert(20, 7, 3);
        assert_eq!(kept.load(Ordering::Relaxed), 4);
        assert!(n.names(10, 5));
        // The same page, written by another commit (reused since): not the named run.
        assert!(!n.names(10, 6));
        assert!(!n.names(30, 5));
        // Commit 8's replay would start at 6, commit 9's at 8: neither durable yet.
        n.committing(8, 6);
        n.committing(9, 8);
        n.committing(10, 0);
        assert!(n.names(10, 5) && n.names(20, 7));
        n.durable(8);
        assert!(!n.names(10, 5), "before commit 8's horizon");
        assert!(n.names(20, 7));
        assert_eq!(kept.load(Ordering::Relaxed), 3);
        // A horizon not known (0) lets nothing go; a later durable commit does.
        n.durable(10);
        assert!(
            !n.names(20, 7),
            "before commit 9's horizon, durable with commit 10"
        );
        assert_eq!(n.len(), 0);
        assert_eq!(kept.load(Ordering::Relaxed), 0);
        // A record before the durable horizon names nothing a replay reads.
        n.insert(40, 7, 1);
        assert!(!n.names(40, 7));
        n.insert(40, 8, 2);
        assert!(n.names(40, 8));
        assert_eq!(kept.load(Ordering::Relaxed), 2);
    }
}
