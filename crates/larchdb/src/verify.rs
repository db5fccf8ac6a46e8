//! Whole-file verification and statistics. Both walk every tree from the snapshot's meta page;
//! verification also reads every page's checksum and accounts for every page of the file.

use crate::btree::{check_run, node::LeafValue, node::Node};
use crate::error::{Error, Result};
use crate::layout::{overflow, META_SLOTS};
use crate::pager::freelist::{self, Extent};
use crate::pager::{PageRef, PageSource, Snapshot, TableHeader};

/// One problem found by verification.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// The page where it was found.
    pub page: u64,
    /// What is wrong.
    pub reason: String,
}

/// What `verify` found.
#[derive(Clone, Debug, Default)]
pub struct VerifyReport {
    /// Snapshot (commit id) verified.
    pub txn: u64,
    /// Pages in the file (free ones included).
    pub page_count: u64,
    /// Pages read and checksummed.
    pub pages_checked: u64,
    /// Tables found.
    pub tables: u64,
    /// Entries in all tables.
    pub entries: u64,
    /// Free pages (reusable) and pending pages (freed, awaiting old snapshots).
    pub free_pages: u64,
    /// See `free_pages`.
    pub pending_pages: u64,
    /// Everything wrong, in the order found. Empty when the file is sound.
    pub problems: Vec<Problem>,
}

impl VerifyReport {
    /// True if no problem was found.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// db.put(b"k", b"v")?;
    /// let report = db.verify_all()?;
    /// assert!(report.is_clean());
    /// assert!(report.problems.is_empty());
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn is_clean(&self) -> bool {
        self.problems.is_empty()
    }
}

/// Shape and size of one table.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TableStats {
    /// Table name.
    pub name: String,
    /// Entries.
    pub entries: u64,
    /// Tree depth (0 empty, 1 a single leaf).
    pub depth: u32,
    /// Branch pages.
    pub branch_pages: u64,
    /// Leaf pages.
    pub leaf_pages: u64,
    /// Pages of overflow runs.
    pub overflow_pages: u64,
}

/// What one page of the file is, as the verification walk found it (for tests that damage
/// pages of each kind; not a stable API).
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PageRole {
    /// Neither reachable nor free (verification reports it).
    Unaccounted,
    /// Meta slot 0 or 1.
    Meta,
    /// A branch of the catalog tree.
    CatalogBranch,
    /// A leaf of the catalog tree.
    CatalogLeaf,
    /// The root page of a table (a branch, or a leaf for a one-page table).
    TableRoot,
    /// A branch of a table, below its root.
    Branch,
    /// A leaf of a table, below its root.
    Leaf,
    /// The first page of an overflow run: its header and checksum.
    OverflowHead,
    /// A later page of an overflow run, with no header of its own.
    OverflowContinuation,
    /// A page of the freelist chain.
    Freelist,
    /// A page of the list of pages reserved for large values.
    ReserveList,
    /// A free page (reusable now).
    Free,
    /// A freed page not yet reusable.
    Pending,
}

/// A live reader, as [`Stats::reader_list`] lists it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReaderInfo {
    /// The process that holds it.
    pub pid: u32,
    /// The commit whose tree its snapshot reads: pages that tree reaches are not reused while
    /// it lives.
    pub txn: u64,
    /// Read transactions on that snapshot: the count for this handle's own readers; 1 for
    /// another handle (the lock file's reader table holds one snapshot per handle, its oldest).
    pub count: usize,
    /// Whether it belongs to the handle `stats` was called on.
    pub this_handle: bool,
}

/// Statistics of a snapshot.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct Stats {
    /// Page size.
    pub page_bytes: u32,
    /// Commit id of the tree the page figures describe: the newest commit, or with the log
    /// ([`crate::Options::log`]) the last commit that wrote pages (a checkpoint). The entry
    /// counts, here and per table, are the newest commit's either way.
    pub txn: u64,
    /// Pages the file uses (the logical length), free ones included.
    pub page_count: u64,
    /// Physical file length.
    pub file_bytes: u64,
    /// Deepest table tree.
    pub depth: u32,
    /// Branch pages of all tables and the catalog.
    pub branch_pages: u64,
    /// Leaf pages of all tables and the catalog.
    pub leaf_pages: u64,
    /// Overflow pages.
    pub overflow_pages: u64,
    /// Freelist pages.
    pub freelist_pages: u64,
    /// Free pages, reusable by the next write transaction.
    pub free_pages: u64,
    /// Pages freed by recent commits and not yet reusable (a reader or the last durable
    /// commit may still reach them).
    pub pending_pages: u64,
    /// Entries in all tables.
    pub entries: u64,
    /// Live read transactions of this handle (not counting the one `stats` uses).
    pub readers: usize,
    /// Other handles, in this process or others, registered in the lock file's reader table
    /// with a live read transaction.
    pub other_readers: usize,
    /// Every live reader: this handle's read transactions by snapshot (oldest first), then
    /// the other handles registered in the lock file (LMDB's `mdb_stat -r`). The one `stats`
    /// itself uses is not listed.
    pub reader_list: Vec<ReaderInfo>,
    /// The oldest snapshot any live reader holds (the smallest `txn` of `reader_list`), if
    /// any: the commit from which on freed pages wait ([`Stats::pending_pages`]).
    pub oldest_reader: Option<u64>,
    /// Of the pending pages, those the oldest reader may still reach and so keeps from
    /// reuse: the pages freed by commits after its snapshot (0 without readers). An upper
    /// bound: it counts pages written after the reader's snapshot too, which the writer
    /// releases early (it knows, in memory, when each was written). Read from the
    /// snapshot's free-space record, which with the log ([`crate::Options::log`]) is the
    /// last commit that wrote pages.
    pub oldest_reader_pages: u64,
    /// Bytes of the file's pages this handle holds in frames of its own
    /// ([`crate::Options::frames_bytes`]): the pages loaded or written there, anonymous memory
    /// of the process. 0 without frames, or once the file outgrew them.
    pub frames_bytes: u64,
    /// Of the frames, the bytes the engine has put in huge pages (2 MiB each; some may hold
    /// pages past the file's end, which the file grows into).
    pub frames_huge_bytes: u64,
    /// Bytes of anonymous memory this handle's overlays hold (the commits since the last
    /// checkpoint, with the log: [`crate::Options::log`]): the published snapshot's, and
    /// those only readers of older snapshots still hold ([`Stats::pinned_overlay_bytes`]).
    /// Not counted: the overlay an open replayed the log into. 0 without the log.
    pub overlay_bytes: u64,
    /// Of the overlays' bytes, those only readers of older snapshots hold: a read
    /// transaction keeps the overlays of the snapshot it started from until it ends or
    /// renews, after checkpoints have merged them into the tree. What they hold beyond a
    /// quarter of the memory budget ([`crate::Options::memory_budget`]) comes out of the
    /// budget of the overlays being written, down to an eighth of it: the writer's
    /// checkpoints come sooner (docs/design/write-path.md, "Memory and space: what is
    /// bounded").
    pub pinned_overlay_bytes: u64,
    /// Bytes of the write-ahead log's file ([`crate::Options::log`]) where this handle
    /// writes it: the segments its records have reached, written ahead of them; only the
    /// file's header once the idle checkpoints have merged every record
    /// (docs/design/write-path.md, "The log's file at rest"). 0 for a read-only handle, or
    /// without the log.
    pub log_file_bytes: u64,
    /// Of the log, the record bytes not yet in a durable checkpoint: what an open after a
    /// crash now would read back and replay. 0 for a read-only handle, or without the log.
    pub log_kept_bytes: u64,
    /// The record bytes the log's ring has room for, planned from the data file's size and
    /// the overlays' (docs/design/write-path.md, "The log follows the tree"): as
    /// [`Stats::log_kept_bytes`] nears it, checkpoints are made durable and the writer is
    /// paced. 0 for a read-only handle, or without the log.
    pub log_room_bytes: u64,
    /// Per-table figures, sorted by name.
    pub tables: Vec<TableStats>,
    /// What this handle's write transactions did since it was opened.
    pub commits: CommitStats,
}

/// Counts of what a handle's write transactions did since it was opened ([`Stats::commits`]).
/// Transactions the engine runs itself (checkpoints, a compaction's page moves, the empty
/// durable commits of [`crate::Database::sync`] and of the `Bounded` flusher) are counted
/// only as `checkpoints` where they are one; [`crate::Database::put`] and
/// [`crate::Database::delete`] are transactions like any.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CommitStats {
    /// `commit` and `commit_with` calls that succeeded, including those with nothing to
    /// write.
    pub commits: u64,
    /// `commit` and `commit_with` calls that failed (the transaction's changes are gone).
    pub failed_commits: u64,
    /// Write transactions ended without a call to commit (`abort`, or dropped).
    pub aborts: u64,
    /// Commits that went to the write-ahead log and the overlay only
    /// ([`crate::Options::log`]), writing no page.
    pub logged_commits: u64,
    /// Of those, commits whose log record was packed, compressed as one LZ4 block: a record
    /// of 256 bytes or more that packs at least an eighth smaller, appended while the log's
    /// room holds the writer back, or fills with no other writer waiting
    /// (docs/design/write-path.md, "Packed commits").
    pub packed_commits: u64,
    /// Large values (too large for a leaf) that a logged commit wrote into runs of the data
    /// file from a checkpoint's reservation, its record naming the run instead of carrying
    /// the value (docs/design/large-values.md).
    pub runs_written: u64,
    /// Time the committer spent writing those runs to the data file, in microseconds: the
    /// share of the writer's work that the log's append took before.
    pub run_write_micros: u64,
    /// Commits that wrote pages and a meta page: every commit that wrote something on a handle
    /// without the log; with it, those that changed the catalog, were too large for the log,
    /// or were sequential loads that write their pages directly.
    pub page_commits: u64,
    /// Page commits that put only a mark in the log, not their writes: `Durability::None`
    /// sequential loads that write their pages directly (docs/design/write-path.md, "Large
    /// sequential batches, and marks").
    pub marked_commits: u64,
    /// Commits that had to be durable and first made such a commit durable (a sync of the
    /// data file and of its meta page, or a commit by pages while a checkpoint was written).
    pub marks_settled: u64,
    /// Write transactions whose writes outgrew what one may hold (a quarter of the memory
    /// budget, [`crate::Options::memory_budget`]; at least half a log segment) and which then
    /// wrote pages for the rest: what a
    /// transaction holds in memory stays within that bound whatever its size
    /// (docs/design/write-path.md, "Memory and space: what is bounded").
    pub switched_to_pages: u64,
    /// Copies of cold pages (reused pages not in memory) that write transactions wrote to the
    /// file before their commits or rollbacks, once they held more of them than their bound in
    /// memory (the memory budget, at most 64 MiB): how a transaction that changes more of a
    /// tree beyond memory than memory holds stays within it (docs/design/write-path.md, "A
    /// transaction's copies of cold pages").
    pub cold_pages_spilled: u64,
    /// Chunks of savepoints' undo records written to their temporary file: past an eighth
    /// of a transaction's bound above (at least 1 MiB), what a live savepoint records
    /// goes there, so that a savepoint before a large change stays within memory too
    /// (docs/design/savepoints.md).
    pub undo_spills: u64,
    /// Rounds of this handle's open: where the log held more than the overlays' share of the
    /// memory budget, the open merged what it had replayed into the tree as a durable
    /// checkpoint and went on replaying from there, so that it stays within the budget
    /// (docs/design/write-path.md, "Memory and space: what is bounded").
    pub replay_rounds: u64,
    /// Runs those rounds freed and then took back: with the overlays cut in slices the log
    /// is kept from the oldest record a slice still needs, so a round may apply an older
    /// record of a key whose value the tree holds in a run a later record names; the run's
    /// free waits, and the round that replays the later record takes it back
    /// (docs/design/large-values.md, "Replay, an open, followers").
    pub replay_runs_revived: u64,
    /// Checkpoints written: by the checkpoint thread, by [`crate::Database::checkpoint`] and
    /// compaction, and by transactions that applied the overlay before writing pages.
    pub checkpoints: u64,
    /// Of those, checkpoints that merged one key range of an overlay cut into several
    /// ([`crate::Options::checkpoint_slices`]): each is made durable, unless
    /// [`crate::Options::log_room_bytes`] keeps a room of its own.
    pub checkpoint_slices: u64,
    /// Checkpoints made durable as they were written (synced on the checkpoint's thread, or
    /// on a thread of their own right after): the others become durable with the next such
    /// one, or with a durable commit.
    pub durable_checkpoints: u64,
    /// Syncs of the write-ahead log for commits: `Immediate` commits (several share one
    /// under group commit) and the flushes of `Bounded` ones.
    pub log_syncs: u64,
    /// Microseconds write transactions were held back at their start so that the log's
    /// checkpoints keep up with the writer (the room left in the log's ring must last as long
    /// as a checkpoint takes): the writer's rate was limited instead of the log filling
    /// (docs/design/write-path.md, "The writer paced by the checkpoints").
    pub paced_micros: u64,
    /// Microseconds write transactions were held back at their start for the CPU time of
    /// checkpoints that ran beside readers while the cores were contended, and for the
    /// writer's share of the device beside readers that waited on it (write admission:
    /// docs/design/write-path.md, "Sharing the CPU with readers" and "Sharing the device with
    /// readers").
    pub share_micros: u64,
    /// Write transactions that waited, at their start, for a checkpoint to give back room in
    /// a nearly full log: a writer faster than the checkpoints for longer than the pacing
    /// could absorb.
    pub log_full_waits: u64,
    /// Microseconds those waits took in all.
    pub log_full_wait_micros: u64,
    /// Pages the checkpoints' merges hinted to be read ahead (`MADV_WILLNEED`): the leaves of
    /// a tree beyond memory, asked for while the merge works through the ones before; the
    /// kernel reads those not cached (docs/design/write-path.md, "The merge").
    pub read_ahead_pages: u64,
    /// The hints those pages took: consecutive leaves are asked for in one.
    pub read_ahead_requests: u64,
    /// Microseconds the checkpoints' merges took: the overlay's records gathered and merged
    /// into the tree, its pages written (docs/design/write-path.md, "The merge").
    pub checkpoint_merge_micros: u64,
    /// Microseconds the checkpoints' syncs took on their own threads: the log to the records
    /// a checkpoint needs, the data file, and its meta page made durable (`Settling`).
    pub checkpoint_sync_micros: u64,
    /// Microseconds waited for a checkpoint's sync to end: by the next commit that writes a
    /// meta page (a checkpoint after another, above all), or by a checkpoint the log's room
    /// calls to be durable at once, for its own. Where it nears `checkpoint_merge_micros`,
    /// the syncs pace the checkpoints.
    pub checkpoint_sync_wait_micros: u64,
}

type KeyValue = (Vec<u8>, Vec<u8>);
/// A page to visit: (reference, level, lower bound inclusive, upper bound exclusive).
type Visit = (PageRef, u32, Option<Vec<u8>>, Option<Vec<u8>>);

/// What claimed a page during the walk: each page may be claimed once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Owner {
    None,
    Tree,
    Overflow,
    Freelist,
    ReserveList,
    /// Free or pending space.
    Free,
    /// Reserved for large values, or a run of one outside the tree (`verify_owning`).
    Held,
}

impl Owner {
    fn name(self) -> &'static str {
        match self {
            Owner::Tree => "tree page",
            Owner::Overflow => "overflow page",
            Owner::Freelist => "freelist page",
            Owner::ReserveList => "reserved pages' list page",
            Owner::Free => "free page",
            Owner::Held => "reserved page",
            Owner::None => "nothing",
        }
    }
}

struct Walk<'s> {
    snap: &'s Snapshot,
    checksums: bool,
    owner: Vec<Owner>,
    /// What each page is, for `page_roles`.
    roles: Vec<PageRole>,
    problems: Vec<Problem>,
    pages_checked: u64,
    /// Pending extents: the commit that freed each, and its pages.
    pending: Vec<(u64, u64)>,
    /// The extents the meta page names as reserved for large values (`Snapshot::reserved`):
    /// the reservation's, then its tail's.
    reserved: Vec<(u64, u64)>,
}

impl<'s> Walk<'s> {
    fn problem(&mut self, page: u64, reason: impl Into<String>) {
        self.problems.push(Problem {
            page,
            reason: reason.into(),
        });
    }

    fn note_err(&mut self, e: Error, fallback_page: u64) {
        match e {
            Error::Corrupted { page, reason } => self.problem(page, reason),
            other => self.problem(fallback_page, other.to_string()),
        }
    }

    /// Claims `pages` pages from `id` for `owner`. Returns false if any was already claimed
    /// (the caller must not descend again) or is out of range.
    fn claim(&mut self, id: u64, pages: u64, owner: Owner) -> bool {
        let end = id.saturating_add(pages);
        if id < META_SLOTS || end > self.owner.len() as u64 {
            self.problem(id, format!("page range {id}+{pages} outside the file"));
            return false;
        }
        let mut ok = true;
        for p in id..end {
            let prev = self.owner[p as usize];
            if prev != Owner::None {
                self.problem(
                    p,
                    format!(
                        "page claimed twice (as {} and {})",
                        prev.name(),
                        owner.name()
                    ),
                );
                ok = false;
            } else {
                self.owner[p as usize] = owner;
            }
        }
        ok
    }

    /// Reads what `r` refers to and checks it is the version the reference expects.
    fn read(&mut self, r: PageRef, pages: u64) -> Result<&'s [u8]> {
        self.pages_checked += pages;
        let p = if self.checksums {
            self.snap.bytes_verified(r.id, pages)?
        } else if pages == 1 {
            self.snap.page(r.id)?
        } else {
            self.snap.run(r.id, pages)?
        };
        r.check(p)?;
        Ok(p)
    }

    /// The keys of `node`, checked to ascend and to lie in `[lo, hi)`; `None` (with the
    /// problems noted) if they do not.
    fn node_keys(
        &mut self,
        node: &Node<'s>,
        lo: Option<&[u8]>,
        hi: Option<&[u8]>,
    ) -> Option<Vec<&'s [u8]>> {
        let id = node.id;
        let mut prev: Option<&[u8]> = None;
        let mut keys = Vec::with_capacity(node.n);
        let mut bad = false;
        for i in 0..node.n {
            match node.key(i) {
                Ok(k) => {
                    if prev.is_some_and(|q| q >= k) {
                        self.problem(id, "keys out of order");
                        bad = true;
                    }
                    if lo.is_some_and(|l| k < l) || hi.is_some_and(|h| k >= h) {
                        self.problem(id, "key outside the bounds set by its parent");
                        bad = true;
                    }
                    prev = Some(k);
                    keys.push(k);
                }
                Err(e) => {
                    self.note_err(e, id);
                    return None;
                }
            }
        }
        (!bad).then_some(keys)
    }

    /// Pushes the children of branch `node` (at `level`, its keys bounded by `[lo, hi)`) to
    /// visit, each with the bounds its separators set.
    fn push_children(
        &mut self,
        node: &Node<'s>,
        keys: &[&[u8]],
        (level, lo, hi): (u32, Option<Vec<u8>>, Option<Vec<u8>>),
        stack: &mut Vec<Visit>,
    ) {
        for ci in 0..=node.n {
            let child = match node.child(ci) {
                Ok(c) => c,
                Err(e) => {
                    self.note_err(e, node.id);
                    continue;
                }
            };
            let clo = if ci == 0 {
                lo.clone()
            } else {
                Some(keys[ci - 1].to_vec())
            };
            let chi = if ci == node.n {
                hi.clone()
            } else {
                Some(keys[ci].to_vec())
            };
            stack.push((child, level + 1, clo, chi));
        }
    }

    /// The bytes of a leaf value: inline, or its overflow run, claimed, read and checked.
    /// `None` (with the problem noted) if the run cannot be read.
    fn value_bytes(&mut self, value: LeafValue<'s>, st: &mut TableStats) -> Option<&'s [u8]> {
        let (run_ref, len) = match value {
            LeafValue::Inline(b) => return Some(b),
            LeafValue::Overflow { run, len } => (run, len),
        };
        let page = run_ref.id;
        let pages = overflow::pages_for(len, self.snap.page_bytes());
        st.overflow_pages += pages;
        if !self.claim(page, pages, Owner::Overflow) {
            return None;
        }
        self.roles[page as usize] = PageRole::OverflowHead;
        for p in page + 1..page + pages {
            self.roles[p as usize] = PageRole::OverflowContinuation;
        }
        let read = self.read(run_ref, pages).and_then(|run| {
            check_run(run, page, pages, len)?;
            Ok(&run[overflow::VALUE_AT..overflow::VALUE_AT + len])
        });
        match read {
            Ok(b) => Some(b),
            Err(e) => {
                self.note_err(e, page);
                None
            }
        }
    }

    /// Walks one tree, checking order, bounds, depth and the entry count. Returns the leaf
    /// entries' values when `collect` (for the catalog) and the table's figures.
    fn tree(&mut self, name: &str, hdr: TableHeader, collect: bool) -> (Vec<KeyValue>, TableStats) {
        // Only the catalog's entries are collected.
        let catalog = collect;
        let mut st = TableStats {
            name: name.to_string(),
            depth: hdr.depth,
            ..Default::default()
        };
        let mut collected = Vec::new();
        if hdr.root.is_none() {
            if hdr.entries != 0 {
                self.problem(
                    0,
                    format!("table {name:?}: empty tree with {} entries", hdr.entries),
                );
            }
            return (collected, st);
        }
        let mut entries = 0u64;
        // (page, level, lower bound inclusive, upper bound exclusive)
        let mut stack: Vec<Visit> = vec![(hdr.root, 1, None, None)];
        while let Some((r, level, lo, hi)) = stack.pop() {
            let id = r.id;
            if !self.claim(id, 1, Owner::Tree) {
                continue;
            }
            let p = match self.read(r, 1) {
                Ok(p) => p,
                Err(e) => {
                    self.note_err(e, id);
                    continue;
                }
            };
            let node = match Node::parse(p, id) {
                Ok(n) => n,
                Err(e) => {
                    self.note_err(e, id);
                    continue;
                }
            };
            self.roles[id as usize] = match (catalog, level, node.leaf) {
                (true, _, true) => PageRole::CatalogLeaf,
                (true, _, false) => PageRole::CatalogBranch,
                (false, 1, _) => PageRole::TableRoot,
                (false, _, true) => PageRole::Leaf,
                (false, _, false) => PageRole::Branch,
            };
            if node.leaf != (level == hdr.depth) {
                self.problem(
                    id,
                    format!(
                        "table {name:?}: node at level {level} of {} has the wrong kind",
                        hdr.depth
                    ),
                );
                continue;
            }
            let Some(keys) = self.node_keys(&node, lo.as_deref(), hi.as_deref()) else {
                continue;
            };
            if node.leaf {
                st.leaf_pages += 1;
                entries += node.n as u64;
                for (i, key) in keys.iter().enumerate() {
                    let value = match node.value(i) {
                        Ok(v) => v,
                        Err(e) => {
                            self.note_err(e, id);
                            continue;
                        }
                    };
                    let bytes = self.value_bytes(value, &mut st);
                    if collect {
                        if let Some(b) = bytes {
                            collected.push((key.to_vec(), b.to_vec()));
                        }
                    }
                }
            } else {
                st.branch_pages += 1;
                self.push_children(&node, &keys, (level, lo, hi), &mut stack);
            }
        }
        if entries != hdr.entries {
            self.problem(
                hdr.root.id,
                format!(
                    "table {name:?}: header says {} entries, tree has {entries}",
                    hdr.entries
                ),
            );
        }
        st.entries = entries;
        (collected, st)
    }
}

/// Walks everything; with `checksums` it verifies every page read and accounts for all pages.
fn walk(snap: &Snapshot, checksums: bool) -> (Walk<'_>, Stats, VerifyReport) {
    let meta = snap.meta;
    let mut w = Walk {
        snap,
        checksums,
        owner: vec![Owner::None; meta.page_count as usize],
        roles: vec![PageRole::Unaccounted; meta.page_count as usize],
        problems: Vec::new(),
        pages_checked: 0,
        pending: Vec::new(),
        reserved: Vec::new(),
    };
    let mut stats = Stats {
        page_bytes: meta.page_bytes,
        txn: meta.txn,
        page_count: meta.page_count,
        ..Default::default()
    };
    let mut report = VerifyReport {
        txn: meta.txn,
        page_count: meta.page_count,
        ..Default::default()
    };
    let (tables, cat_stats) = w.tree("(catalog)", meta.catalog, true);
    stats.branch_pages += cat_stats.branch_pages;
    stats.leaf_pages += cat_stats.leaf_pages;
    for (name, value) in tables {
        if name.is_empty() || name.len() > crate::limits::TABLE_NAME_BYTES_MAX {
            w.problem(
                meta.catalog.root.id,
                format!("table name of {} bytes", name.len()),
            );
        }
        let name = String::from_utf8_lossy(&name).into_owned();
        match TableHeader::decode(&value, meta.catalog.root.id) {
            Ok(hdr) => {
                let (_, st) = w.tree(&name, hdr, false);
                stats.depth = stats.depth.max(st.depth);
                stats.branch_pages += st.branch_pages;
                stats.leaf_pages += st.leaf_pages;
                stats.overflow_pages += st.overflow_pages;
                stats.entries += st.entries;
                stats.tables.push(st);
            }
            Err(e) => w.note_err(e, meta.catalog.root.id),
        }
    }
    report.tables = stats.tables.len() as u64;
    report.entries = stats.entries;
    match snap.freelist_chain() {
        Ok(chain) => {
            for page in &chain {
                if w.claim(page.id, 1, Owner::Freelist) {
                    w.roles[page.id as usize] = PageRole::Freelist;
                }
                w.pages_checked += 1;
                stats.freelist_pages += 1;
            }
            // The chain is newest first; its entries apply oldest first. The replay checks
            // each entry against the ones before it; what it leaves is the free set.
            let pages: Vec<(u64, Vec<Extent>)> =
                chain.into_iter().rev().map(|c| (c.id, c.extents)).collect();
            match freelist::replay(&pages, meta.page_count, meta.txn) {
                Ok(set) => {
                    let mut entries = Vec::new();
                    set.entries_into(&mut entries);
                    for Extent {
                        txn,
                        start,
                        pages: len,
                        ..
                    } in entries
                    {
                        if w.claim(start, len, Owner::Free) {
                            let role = if txn == 0 {
                                PageRole::Free
                            } else {
                                PageRole::Pending
                            };
                            for p in start..start + len {
                                w.roles[p as usize] = role;
                            }
                            if txn == 0 {
                                stats.free_pages += len;
                            } else {
                                stats.pending_pages += len;
                                w.pending.push((txn, len));
                            }
                        }
                    }
                }
                Err(e) => w.note_err(e, meta.freelist_head.id),
            }
        }
        Err(e) => w.note_err(e, meta.freelist_head.id),
    }
    match snap.reserved() {
        Ok(reserved) => {
            for &id in &reserved.list {
                if w.claim(id, 1, Owner::ReserveList) {
                    w.roles[id as usize] = PageRole::ReserveList;
                }
                w.pages_checked += 1;
            }
            w.reserved = reserved.reserve;
            w.reserved.extend(reserved.tail);
        }
        Err(e) => w.note_err(e, meta.reserve_list.id),
    }
    report.free_pages = stats.free_pages;
    report.pending_pages = stats.pending_pages;
    (w, stats, report)
}

/// Full verification of a snapshot, with `held`'s pages (first page, pages) owned beside the
/// tree and the free set:
/// the pages reserved for large values (`Snapshot::reserved`), the runs the overlays' versions
/// name and those merged out and not freed yet (docs/design/large-values.md). A page of them
/// the tree or the free set owns too is a problem, as one owned twice is.
pub(crate) fn verify_owning(snap: &Snapshot, held: &[(u64, u64)]) -> VerifyReport {
    let (mut w, _, mut report) = walk(snap, true);
    let meta = snap.meta;
    let reserved = std::mem::take(&mut w.reserved);
    for &(start, pages) in reserved.iter().chain(held) {
        if pages == 0 {
            continue;
        }
        if start
            .checked_add(pages)
            .is_none_or(|end| end > meta.page_count)
        {
            w.problem(start, "a reserved page or run outside the file");
            continue;
        }
        // The extents overlap (a run of the reservation's tail that a version names); a run
        // an overlay names may be in the tree already (a record a replay applied again), and
        // a run merged out may be still (the tree before the merge's).
        for p in start..start + pages {
            match w.owner[p as usize] {
                Owner::None => w.owner[p as usize] = Owner::Held,
                Owner::Held | Owner::Overflow => {}
                other => {
                    let reason = format!("a reserved page or run is a {} too", other.name());
                    w.problem(p, reason);
                }
            }
        }
    }
    let leaked: Vec<u64> = (META_SLOTS..snap.meta.page_count)
        .filter(|&p| w.owner[p as usize] == Owner::None)
        .collect();
    for p in leaked.iter().take(100) {
        w.problem(*p, "page neither reachable nor free");
    }
    if leaked.len() > 100 {
        w.problem(
            leaked[100],
            format!(
                "{} more pages neither reachable nor free",
                leaked.len() - 100
            ),
        );
    }
    report.pages_checked = w.pages_checked;
    report.problems = w.problems;
    report
}

/// What each page of the file is (index = page id), from a full verification walk; the first
/// problem, if verification finds any.
pub(crate) fn page_roles(snap: &Snapshot) -> Result<Vec<PageRole>> {
    let (mut w, _, _) = walk(snap, true);
    if let Some(p) = w.problems.into_iter().next() {
        return Err(Error::Corrupted {
            page: p.page,
            reason: p.reason,
        });
    }
    for slot in 0..META_SLOTS.min(w.roles.len() as u64) {
        w.roles[slot as usize] = PageRole::Meta;
    }
    Ok(w.roles)
}

/// Statistics of a snapshot (a structural walk without checksums), with `oldest_reader` the
/// oldest snapshot a live reader holds.
pub(crate) fn stats(snap: &Snapshot, oldest_reader: Option<u64>) -> Result<Stats> {
    let (w, mut stats, _) = walk(snap, false);
    stats.oldest_reader = oldest_reader;
    // A page freed by commit `c` was in the trees before `c`: a reader of tree `s` may reach
    // it if `s < c`.
    stats.oldest_reader_pages = oldest_reader.map_or(0, |s| {
        w.pending
            .iter()
            .filter(|&&(c, _)| s < c)
            .map(|&(_, n)| n)
            .sum()
    });
    match w.problems.into_iter().next() {
        Some(p) => Err(Error::Corrupted {
            page: p.page,
            reason: p.reason,
        }),
        None => Ok(stats),
    }
}
