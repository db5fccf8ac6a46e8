//! Options of a database handle and the durability of commits.

use crate::error::{Error, Result};
use crate::limits::{PAGE_BYTES_DEFAULT, PAGE_BYTES_MAX, PAGE_BYTES_MIN, PINNED_BYTES_MAX_DEFAULT};

/// How durable a commit is when `commit` returns.
///
/// `#[non_exhaustive]`: a later level can be added without breaking a `match` on it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Durability {
    /// Durable when `commit` returns: the commit's pages, then its meta page, are synced.
    ///
    /// On a handle that writes the log (`Options::log`), the commit appends its record, lets
    /// the write lock go (the next transaction runs meanwhile), and returns once the log is
    /// synced up to its record: commits from several threads waiting at once share one sync
    /// (group commit). Readers, in this handle, see the commit only once it is durable, when
    /// its committer publishes it, or when a later commit publishes (a `None` commit or a
    /// checkpoint made meanwhile waits for that sync first). Read-only handles in other
    /// processes see it once the writer publishes it in the lock file, which it does as it
    /// publishes it here (they replay the log up to it: docs/design/concurrency.md).
    #[default]
    Immediate,
    /// Durable within a bound, without the committer waiting: the commit is written (a
    /// process crash loses nothing) and published at once, and a thread of the handle makes
    /// it durable within `Options::bounded_millis` of the oldest such commit not yet durable,
    /// or as soon as those commits' log records add up to `Options::bounded_bytes`, whichever
    /// comes first (plus the time the sync itself takes). A power loss loses at most the
    /// commits of that window, and never corrupts. Closing the handle makes them durable. On
    /// a handle that writes the log the thread syncs the log; on one that does not, it makes
    /// an empty durable commit (a sync and a meta page, under the write lock).
    Bounded,
    /// Not synced. A process crash loses nothing; a power loss or OS crash loses the commits
    /// since the last durable one, and never corrupts: their pages never overwrite anything
    /// the last durable commit can reach.
    None,
}

/// Options for [`crate::Database::open`].
///
/// Built from `Options::default()` with the setters below (or by assigning a field of a value
/// one has); `#[non_exhaustive]`, so that options can be added without breaking callers.
///
/// ```
/// use larchdb::{Durability, Options};
/// let options = Options::default()
///     .log(true)
///     .durability(Durability::None)
///     .checkpoint_bytes(64 << 20);
/// assert_eq!(options.checkpoint_bytes, 64 << 20);
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Options {
    /// Page size for a new database: a power of two from 4 KiB to 64 KiB. Ignored when the
    /// file exists (its own page size is used).
    pub page_bytes: u32,
    /// Durability of `WriteTxn::commit`; `commit_with` overrides it per commit.
    pub durability: Durability,
    /// Open without writing anything. The handle registers in the lock file's reader table
    /// and reads beside a writer in another process; where the lock file cannot be opened (a
    /// read-only directory) it takes a shared lock on the database instead, which excludes
    /// writers.
    pub read_only: bool,
    /// Create the file if it does not exist (default true; ignored when read-only).
    pub create: bool,
    /// Verify the checksum of every page on every read, even through the memory map. Off by
    /// default: checksums are always verified by `verify()`, when the file is opened (meta and
    /// freelist), and by the buffered page access (once per page per snapshot).
    pub verify_checksums: bool,
    /// Bytes of pages that `Durability::None` commits may keep from reuse, because the last
    /// durable commit still needs them, before a commit is made durable anyway (the effective
    /// bound is the larger of this and a quarter of the file); see
    /// [`crate::limits::PINNED_BYTES_MAX_DEFAULT`].
    pub pinned_bytes_max: u64,
    /// Whether the kernel reads ahead around each page fault in the memory map. `None`, the
    /// default: while the file's mapping fits in half the memory the process may use (the
    /// lowest of its cgroups' memory limits and the machine's memory), yes (`MADV_NORMAL`):
    /// such a file is read whole sooner or later, and after a restart readahead reads it in
    /// large requests instead of a fault a page; beyond that, no (`madvise(MADV_RANDOM)`,
    /// LMDB's `MDB_NORDAHEAD`): a B-tree's pages are visited in key order, not file order, and
    /// once the file is larger than the page cache readahead turns every random read into
    /// megabytes of disk reads. `Some(true)` reads ahead whatever the size (scans of a
    /// sequentially loaded file that does not fit in memory); `Some(false)` never does.
    pub readahead: Option<bool>,
    /// How much of the data file a writing handle may keep in memory of its own (frames,
    /// docs/design/buffer-pool.md), in bytes. By default ([`FRAMES_AUTO`]) the frames' share
    /// of memory: half of what the process may use (its cgroups' limit, or the machine's
    /// memory) beyond 64 MiB, none in a cgroup of 64 MiB or less, and none where that memory
    /// cannot be read. A number asks for that much at most, within the same share (frames are
    /// memory the kernel cannot take back); 0 turns them off.
    ///
    /// While the file fits, readers read the frames (from the handle's open) instead of the
    /// kernel's page cache through a mapping: a thread of the engine's reads the file in and
    /// moves the frames into huge pages while the file does not grow, and lets the page
    /// cache's copy go. The writer writes each page it changed to the file, from its frame
    /// with `O_DIRECT` where a sync follows. Once the file outgrows them, the handle maps the
    /// file, as it does with frames off. Off, the file's pages are page cache the kernel gives
    /// back under pressure and shares with other processes reading the file; on, point reads
    /// and scans of a file in memory are faster (docs/design/performance.md, "Frames on by
    /// default"), and the frames' memory (`Stats::frames_bytes`) is the engine's.
    pub frames_bytes: u64,
    /// Commit through a write-ahead log (on by default; docs/design/write-path.md): a commit
    /// appends its writes to the log file beside the database (`<path>-log`) and keeps them in
    /// memory, and the tree's pages are written at checkpoints, when the log has grown by
    /// `checkpoint_bytes` or the writer has been idle for `idle_checkpoint_millis`. A durable
    /// commit is one sync of the log, shared by the threads committing at once.
    ///
    /// Off, every commit writes its pages (the leaf-to-root path, the free space, a meta page:
    /// two syncs when durable), as LMDB does. That path keeps
    /// the files at the data's size and the process at its mapping; with the log the data
    /// file holds up to a few checkpoints' worth of pages kept for a power loss, the log file
    /// its ring (up to a third of the data file), and memory the commits since the last
    /// checkpoint. Compaction at close gives both back (`compact_on_close`).
    ///
    /// A database whose last commit was made through the log replays its log when opened,
    /// whatever this option says; the close that compacts marks the log as no longer needed,
    /// so a closed database is its data file alone. A database opened on one storage
    /// (`Database::open_storage`) has nowhere to put a log and writes pages.
    pub log: bool,
    /// Bytes of one segment of a new log (the log is at most `log_segments` of them; the file
    /// grows with zeros, 1 MiB at a time, as the log first reaches each part of it). Also
    /// bounds a logged transaction: one whose record exceeds half a segment writes pages.
    pub log_segment_bytes: u64,
    /// Segments of a new log, at most (at least 2). The log keeps every record since the
    /// last *durable* checkpoint. It goes round as many segments as the data file calls for
    /// (room for four checkpoints, `checkpoint_bytes` or a 32nd of the data file each, six of
    /// the smallest where the overlays are cut in slices: 7 of the default 8 MiB segments for
    /// a database under 256 MB, all 128, 1 GiB, from about 8 GB), and starts again at the
    /// first segment when it is free: the file holds what the database needs, not the largest
    /// log (docs/design/write-path.md, "The log follows the tree"), or `log_room_bytes` if
    /// that is more. After a power loss, open
    /// replays the log from the last durable checkpoint (at most the log's room); after a
    /// process crash, from the last checkpoint. The room is
    /// thus the bound on a power loss's recovery: replay takes about 1-1.5 us a record
    /// (measured on a 2-core VM: 5.5M one-put commits of 16-byte keys and 100-byte values,
    /// 968 MB of log, on a 10M-record database, replayed in 5.9-8.1 s from a cold page
    /// cache), so a full default room of 1 GiB is 6-9 s.
    pub log_segments: u64,
    /// `Durability::Bounded`: the most milliseconds a commit waits to be made durable
    /// (counted from the oldest commit not yet durable).
    pub bounded_millis: u64,
    /// `Durability::Bounded`, on a handle that writes the log: the log bytes of commits not
    /// yet durable that start a sync at once.
    pub bounded_bytes: u64,
    /// Bytes of records before a checkpoint, at least: in a database whose data file is over
    /// 32 times this, a 32nd of the file instead, so that a checkpoint brings as many records
    /// to each leaf whatever the tree's size, and the log stays within an eighth of the file.
    /// Counted in the log's growth where a checkpoint merges the whole overlay, and in the
    /// active overlays' memory where they are cut in slices (`checkpoint_slices`), there at
    /// least twice this (each slice gathers from empty to full between its merges, so the
    /// overlays hold about half the round the ring keeps). The least that open replays after
    /// a process crash, and that the overlays hold: with `checkpoint_thread` the writer goes
    /// on while a checkpoint is written, so both are this plus what was committed meanwhile,
    /// up to the log's room when the checkpoints lag. At
    /// most `log_segments - 1` segments. Smaller checkpoints keep the files and the memory
    /// closer to the records and write more of the tree per record.
    pub checkpoint_bytes: u64,
    /// Bytes of log the ring keeps for records not yet in a durable checkpoint, at least (0,
    /// the default: the ring the checkpoints call for, `log_segments`). Checkpoints are then
    /// made durable only when this room runs short (or their copies of the tree would pin
    /// more than a quarter of the data file), not each one: a sync writes what the
    /// checkpoints since the last durable one dirtied, and with more of them between two
    /// syncs the writer waits for fewer syncs and the device takes fewer requests a record
    /// (PostgreSQL's `max_wal_size`, RocksDB's `max_total_wal_size`). For update-heavy work in memory: YCSB A on 200K records of 1 KB
    /// ran 46K operations a second by default, 116K with 128 MiB, 146-149K with 256 MiB and
    /// 186K with 1016 MiB, while its files while open went from 434 MB to 631 MB, 770 MB and
    /// 1,557 MB (closed, 355-366 MB each; docs/design/performance.md, "Rarer durable
    /// checkpoints: the log's room as an option"). The cost: that much more log on disk while
    /// the database is open, up to that much replay after a power loss (about 1-1.5 us a
    /// record), the log's pages in the page cache, and the unsynced checkpoints' copies of
    /// reused pages held in memory until their commit (up to 64 MiB each). At most
    /// `log_segments - 1` segments.
    pub log_room_bytes: u64,
    /// Whether the checkpoints the log's growth calls for run on a thread of their own
    /// (the default), beside the writer and the readers: the writer freezes the commits since
    /// the last checkpoint and goes on committing while the thread writes them into the tree.
    /// Off, the write transaction that finds a checkpoint due writes it first, as with
    /// `Database::checkpoint` (docs/design/write-path.md).
    pub checkpoint_thread: bool,
    /// How many key ranges (slices) the overlays of a handle that writes the log (with
    /// `checkpoint_thread`) are cut into: each slice gathers its records in an overlay of its
    /// own, and a checkpoint merges one slice's, the one holding the most (or, when the log
    /// needs room back, the oldest records), while the others go on gathering; each such
    /// checkpoint is made durable. Copy-on-write rewrites every leaf a merge reaches, and
    /// random writes reach nearly all of them: a checkpoint that merges the whole overlay
    /// leaves the file holding a second copy of the tree (a third while the last durable one
    /// is kept); by slices it holds about two slices' leaves twice instead
    /// (docs/design/footprint.md). The price: every leaf a checkpoint rewrites is written to
    /// the device once per checkpoint, where unsynced whole checkpoints let the page cache
    /// take most rewrites of the same pages (docs/design/performance.md). 0, the default: one
    /// slice per `CHECKPOINT_SLICE_PAGES` pages of the data file, from 1 (the whole overlay at
    /// once, a file under two slices' pages) up to `CHECKPOINT_SLICES_MAX` (a slice is cut
    /// where it covers two of those shares of the tree, so there may be up to twice as many).
    /// 1: always the whole overlay, for a workload whose write rate matters more than its
    /// files' size; more: that many.
    pub checkpoint_slices: u32,
    /// On a handle that writes the log, with `checkpoint_thread`: once no commit has been
    /// made through the log for this many milliseconds, the checkpoint thread merges what the
    /// overlay holds into the tree, and the new tree is published as soon as it is written
    /// (not at the next write transaction), so that reads after a burst of writes go at the
    /// tree's speed: right after a 1M-record load, readseq through the overlay took 3-4x the
    /// time of readseq over the tree alone (docs/design/write-path.md). The checkpoint is
    /// written without a sync, as any other, and never waits for the write lock: an open
    /// transaction puts it off. Once every record is merged, a log file of more than a
    /// segment is given back but its header (a durable commit names a new start), so that an
    /// open database at rest takes about what a closed one does on disk. 0 turns it off: the
    /// overlay then stays until the log's growth calls for a checkpoint, and the log's file
    /// until the close. The default, 100, is what was measured.
    pub idle_checkpoint_millis: u64,
    /// Whether closing a handle that writes (dropping the last `Database`) compacts
    /// ([`crate::Database::compact`]): writes a final durable checkpoint, so that the next
    /// open replays nothing, cuts the log file to its header, and gives back the free space
    /// at the end of the data file, moving pages from there into free space below when that
    /// gives back at least an eighth of the file. On by default. Off, close only waits for a
    /// running checkpoint and for `Durability::Bounded` commits: it takes no time, and the
    /// next open replays the log (RocksDB's `avoid_flush_during_shutdown`).
    pub compact_on_close: bool,
    /// The memory, in bytes, the handle may hold for the writes its tree does not have yet (the
    /// overlays of the commits since the last checkpoint; 0, the default: a quarter of the
    /// memory this process may use beyond 64 MiB, and at least an eighth of it, that memory
    /// being the lowest of its cgroups' limits and the machine's memory). A checkpoint is due
    /// once the active overlay holds a quarter of it; a writer whose overlays hold half is
    /// slowed, to the rate at which what is left before three quarters lasts as long as a
    /// checkpoint takes, and one whose overlays reach them waits for a checkpoint before its
    /// transaction starts, so that a writer faster than its checkpoints is slowed instead of
    /// outgrowing the machine. At least 4 MiB. By default, while the tree is beyond memory and
    /// no reader reads (the writes alone, whose checkpoints are all the page cache serves), the
    /// overlays may hold half the memory beyond 64 MiB instead of a quarter, and give it back
    /// gradually once readers read again; a budget set here is kept as it is. Set
    /// it where the process shares its memory limit with more than the engine
    /// (docs/design/write-path.md, "Memory and space: what is bounded").
    pub memory_budget: u64,
    /// How many steps of nice value below the thread that starts them the handle's background
    /// work runs (0 to 19; Linux, ignored elsewhere): the checkpoint thread, the idle
    /// checkpointer and the thread that grows the log file. 0, the default, runs them as any
    /// thread of the application, except checkpoints that start beside readers, which write
    /// admission lowers by its own steps (docs/design/write-path.md, "Sharing the CPU with
    /// readers"). Raised, they yield the CPU to the application's threads when there are more
    /// runnable threads than cores: readers beside a busy writer keep more of it, and the
    /// writer, paced by the checkpoints it outruns, commits more slowly.
    /// Measured on 2 cores (readwhilewriting at 1M with 2 and 4 readers, medians of five
    /// runs, docs/design/write-path.md): at 0 the readers read 0.74x and 0.72x of LMDB's
    /// readers beside a writer 3.3x LMDB's; at 5, 0.93x and 0.99x beside 2.4x and 1.65x; at
    /// 8, 1.12x and 1.07x beside 1.8x and 1.4x. Without contention it changes nothing (1M
    /// one-put loads, no readers: the same rate). Where every core is busy with the
    /// application's threads, the checkpoints get less than a thread's share, and so does the
    /// writer they pace. Durability is not affected: the thread that syncs
    /// `Durability::Bounded` commits keeps its priority.
    pub background_nice: u8,
    /// Whether an open that finds damage it cannot get past without losing acknowledged
    /// commits opens the newest intact state anyway (default false: it fails with
    /// [`crate::Error::WouldLoseData`] and changes nothing). Set by whoever decided to give
    /// those commits up, as `larch recover` does: before it changes anything, the open copies
    /// both meta pages and the log aside into a folder beside the database
    /// (`<db>-recovered-<seconds since 1970>`), then opens the newest intact state, verifies
    /// it, makes it durable, and reports what it gave up ([`crate::Database::recovery`]). An open that
    /// finds no such damage is an ordinary open and keeps no copy.
    pub recover: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            page_bytes: PAGE_BYTES_DEFAULT,
            durability: Durability::Immediate,
            read_only: false,
            create: true,
            verify_checksums: false,
            pinned_bytes_max: PINNED_BYTES_MAX_DEFAULT,
            readahead: None,
            frames_bytes: FRAMES_AUTO,
            log: true,
            log_segment_bytes: LOG_SEGMENT_BYTES_DEFAULT,
            log_segments: LOG_SEGMENTS_DEFAULT,
            checkpoint_bytes: CHECKPOINT_BYTES_DEFAULT,
            log_room_bytes: 0,
            checkpoint_thread: true,
            checkpoint_slices: 0,
            idle_checkpoint_millis: IDLE_CHECKPOINT_MILLIS_DEFAULT,
            bounded_millis: BOUNDED_MILLIS_DEFAULT,
            bounded_bytes: BOUNDED_BYTES_DEFAULT,
            compact_on_close: true,
            memory_budget: 0,
            background_nice: 0,
            recover: false,
        }
    }
}

/// Default `Options::frames_bytes`: the frames' share of the memory the process may use.
pub const FRAMES_AUTO: u64 = u64::MAX;
/// Default `Options::log_segment_bytes`.
pub const LOG_SEGMENT_BYTES_DEFAULT: u64 = 8 << 20;
/// Default `Options::log_segments`.
pub const LOG_SEGMENTS_DEFAULT: u64 = 128;
/// Default `Options::bounded_millis` (PostgreSQL's `wal_writer_delay` is 200 ms,
/// MongoDB's journal interval 100 ms).
pub const BOUNDED_MILLIS_DEFAULT: u64 = 100;
/// Default `Options::bounded_bytes`.
pub const BOUNDED_BYTES_DEFAULT: u64 = 1 << 20;
/// Default `Options::idle_checkpoint_millis`.
pub const IDLE_CHECKPOINT_MILLIS_DEFAULT: u64 = 100;
/// The largest `Options::background_nice`: the nice scale's range (-20 to 19).
pub const BACKGROUND_NICE_MAX: u8 = 19;
/// Default `Options::checkpoint_bytes`.
pub const CHECKPOINT_BYTES_DEFAULT: u64 = 8 << 20;
/// With `Options::checkpoint_slices` 0: a slice per this many pages of the data file.
pub const CHECKPOINT_SLICE_PAGES: u64 = 2048;
/// With `Options::checkpoint_slices` 0: at most this many slices.
pub const CHECKPOINT_SLICES_MAX: u32 = 32;

impl Options {
    /// Sets the page size for a new database.
    ///
    /// ```
    /// # use larchdb::{Database, Durability, Error, Options};
    /// # let dir = tempfile::tempdir()?;
    /// let db = Database::open(dir.path().join("db"), Options::default().page_bytes(8192))?;
    /// assert_eq!(db.page_bytes(), 8192);
    /// let odd = Options::default().page_bytes(5000);
    /// assert!(matches!(Database::open(dir.path().join("x"), odd), Err(Error::InvalidOptions(_))));
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn page_bytes(mut self, bytes: u32) -> Options {
        self.page_bytes = bytes;
        self
    }
    /// Sets the default durability of commits.
    ///
    /// ```
    /// # use larchdb::{Database, Durability, Error, Options};
    /// # let dir = tempfile::tempdir()?;
    /// let o = Options::default().durability(Durability::None);
    /// assert_eq!(o.durability, Durability::None);
    /// let db = Database::open(dir.path().join("db"), o)?;
    /// db.put(b"k", b"v")?; // committed without a sync
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn durability(mut self, d: Durability) -> Options {
        self.durability = d;
        self
    }
    /// Opens read-only.
    ///
    /// ```
    /// # use larchdb::{Database, Durability, Error, Options};
    /// # let dir = tempfile::tempdir()?;
    /// # let path = dir.path().join("db");
    /// # Database::open(&path, Options::default())?.put(b"k", b"v")?;
    /// let db = Database::open(&path, Options::default().read_only(true))?;
    /// assert_eq!(db.get(b"k")?, Some(b"v".to_vec()));
    /// assert!(matches!(db.put(b"k", b"w"), Err(Error::ReadOnly)));
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn read_only(mut self, yes: bool) -> Options {
        self.read_only = yes;
        self
    }
    /// Creates the file if missing.
    ///
    /// ```
    /// # use larchdb::{Database, Durability, Error, Options};
    /// # let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("missing");
    /// let r = Database::open(&path, Options::default().create(false));
    /// assert!(matches!(r, Err(Error::Io { .. })));
    /// assert!(!path.exists());
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn create(mut self, yes: bool) -> Options {
        self.create = yes;
        self
    }
    /// Verifies checksums on every page read.
    ///
    /// ```
    /// # use larchdb::{Database, Durability, Error, Options};
    /// # let dir = tempfile::tempdir()?;
    /// let o = Options::default().verify_checksums(true);
    /// assert!(o.verify_checksums);
    /// let db = Database::open(dir.path().join("db"), o)?;
    /// db.put(b"k", b"v")?;
    /// assert_eq!(db.get(b"k")?, Some(b"v".to_vec())); // its pages checked as they are read
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn verify_checksums(mut self, yes: bool) -> Options {
        self.verify_checksums = yes;
        self
    }
    /// Has the kernel read ahead in the memory map (true) or not (false) whatever the file's
    /// size, instead of deciding by the size (see [`Options::readahead`]).
    ///
    /// ```
    /// # use larchdb::{Database, Durability, Error, Options};
    /// # let dir = tempfile::tempdir()?;
    /// let o = Options::default().readahead(true);
    /// assert_eq!(o.readahead, Some(true));
    /// let db = Database::open(dir.path().join("db"), o)?;
    /// db.put(b"k", b"v")?;
    /// assert_eq!(db.get(b"k")?, Some(b"v".to_vec()));
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn readahead(mut self, yes: bool) -> Options {
        self.readahead = Some(yes);
        self
    }

    /// Keeps at most `bytes` of the data file in frames of the handle's own (0: none, the file
    /// mapped; [`FRAMES_AUTO`], the default: the frames' share of memory); see
    /// [`Options::frames_bytes`].
    ///
    /// ```
    /// # use larchdb::{Database, Durability, Error, Options};
    /// # let dir = tempfile::tempdir()?;
    /// let o = Options::default().frames_bytes(256 << 20);
    /// let db = Database::open(dir.path().join("db"), o)?;
    /// db.put(b"k", b"v")?;
    /// assert_eq!(db.get(b"k")?, Some(b"v".to_vec()));
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn frames_bytes(mut self, bytes: u64) -> Options {
        self.frames_bytes = bytes;
        self
    }

    /// Commits through a write-ahead log, the default, or (false) writes pages at every
    /// commit (see [`Options::log`]).
    ///
    /// ```
    /// # use larchdb::{Database, Durability, Error, Options};
    /// # let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("db");
    /// let db = Database::open(&path, Options::default())?;
    /// db.put(b"k", b"v")?;
    /// assert!(larchdb::storage::log_path(&path).exists());
    /// drop(db);
    /// // A bulk load in key order, pages only.
    /// let bulk = dir.path().join("bulk");
    /// let db = Database::open(&bulk, Options::default().log(false))?;
    /// db.put(b"k", b"v")?;
    /// assert!(!larchdb::storage::log_path(&bulk).exists());
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn log(mut self, yes: bool) -> Options {
        self.log = yes;
        self
    }

    /// Runs checkpoints on a thread of their own (see [`Options::checkpoint_thread`]).
    ///
    /// ```
    /// # use larchdb::{Database, Durability, Error, Options};
    /// # let dir = tempfile::tempdir()?;
    /// let o = Options::default().log(true).checkpoint_thread(false);
    /// assert!(!o.checkpoint_thread);
    /// let db = Database::open(dir.path().join("db"), o)?;
    /// db.put(b"k", b"v")?;
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn checkpoint_thread(mut self, yes: bool) -> Options {
        self.checkpoint_thread = yes;
        self
    }

    /// Sets how long the writer is idle before the overlay is checkpointed (see
    /// [`Options::idle_checkpoint_millis`]; 0 turns it off).
    ///
    /// ```
    /// # use larchdb::{Database, Durability, Error, Options};
    /// # let dir = tempfile::tempdir()?;
    /// let o = Options::default().log(true).idle_checkpoint_millis(10);
    /// assert_eq!(o.idle_checkpoint_millis, 10);
    /// let db = Database::open(dir.path().join("db"), o)?;
    /// db.put(b"k", b"v")?; // creates the default table: writes pages
    /// db.put(b"k", b"w")?; // through the log
    /// // About 10 ms after the last commit, a checkpoint merges it into the tree.
    /// let start = std::time::Instant::now();
    /// while db.stats()?.commits.checkpoints == 0 {
    ///     assert!(start.elapsed().as_secs() < 60);
    ///     std::thread::sleep(std::time::Duration::from_millis(5));
    /// }
    /// assert_eq!(db.get(b"k")?, Some(b"w".to_vec()));
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn idle_checkpoint_millis(mut self, millis: u64) -> Options {
        self.idle_checkpoint_millis = millis;
        self
    }

    /// Sets the memory the overlays may hold (see [`Options::memory_budget`]; 0: from the
    /// machine).
    ///
    /// ```
    /// # use larchdb::{Database, Options};
    /// # let dir = tempfile::tempdir()?;
    /// let o = Options::default().memory_budget(64 << 20);
    /// assert_eq!(o.memory_budget, 64 << 20);
    /// let db = Database::open(dir.path().join("db"), o)?;
    /// db.put(b"k", b"v")?;
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn memory_budget(mut self, bytes: u64) -> Options {
        self.memory_budget = bytes;
        self
    }

    /// Compacts when the handle is closed (see [`Options::compact_on_close`]).
    ///
    /// ```
    /// # use larchdb::{Database, Durability, Error, Options};
    /// # let dir = tempfile::tempdir()?;
    /// let o = Options::default().log(true).compact_on_close(false);
    /// assert!(!o.compact_on_close);
    /// # let path = dir.path().join("db");
    /// let db = Database::open(&path, o)?;
    /// db.put(b"k", b"v")?;
    /// db.put(b"k", b"w")?;
    /// drop(db); // fast: the log is left for the next open to replay
    /// assert_eq!(Database::open(&path, Options::default())?.get(b"k")?, Some(b"w".to_vec()));
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn compact_on_close(mut self, yes: bool) -> Options {
        self.compact_on_close = yes;
        self
    }

    /// Opens the newest intact state of a damaged database (see [`Options::recover`]).
    ///
    /// ```
    /// # use larchdb::{Database, Options};
    /// # let dir = tempfile::tempdir()?;
    /// # let path = dir.path().join("db");
    /// let db = Database::open(&path, Options::default().recover(true))?;
    /// // Nothing was damaged: an ordinary open, with nothing to report.
    /// assert!(db.recovery().is_none());
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn recover(mut self, yes: bool) -> Options {
        self.recover = yes;
        self
    }

    /// Sets the bytes of pages `Durability::None` commits may pin (see
    /// [`Options::pinned_bytes_max`]).
    ///
    /// ```
    /// # use larchdb::{Database, Durability, Error, Options};
    /// # let dir = tempfile::tempdir()?;
    /// let o = Options::default().durability(Durability::None).pinned_bytes_max(1 << 20);
    /// assert_eq!(o.pinned_bytes_max, 1 << 20);
    /// let db = Database::open(dir.path().join("db"), o)?;
    /// db.put(b"k", b"v")?;
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn pinned_bytes_max(mut self, bytes: u64) -> Options {
        self.pinned_bytes_max = bytes;
        self
    }

    /// Sets the bytes of a new log's segment (see [`Options::log_segment_bytes`]).
    ///
    /// ```
    /// # use larchdb::{Database, Durability, Error, Options};
    /// # let dir = tempfile::tempdir()?;
    /// let o = Options::default().log(true).log_segment_bytes(1 << 20);
    /// assert_eq!(o.log_segment_bytes, 1 << 20);
    /// let db = Database::open(dir.path().join("db"), o)?;
    /// db.put(b"k", b"v")?;
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn log_segment_bytes(mut self, bytes: u64) -> Options {
        self.log_segment_bytes = bytes;
        self
    }

    /// Sets the most segments of a new log (see [`Options::log_segments`]).
    ///
    /// ```
    /// # use larchdb::{Database, Durability, Error, Options};
    /// # let dir = tempfile::tempdir()?;
    /// let o = Options::default().log(true).log_segments(4);
    /// assert_eq!(o.log_segments, 4);
    /// Database::open(dir.path().join("db"), o)?.put(b"k", b"v")?;
    /// let one = Options::default().log(true).log_segments(1);
    /// assert!(matches!(Database::open(dir.path().join("x"), one), Err(Error::InvalidOptions(_))));
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn log_segments(mut self, segments: u64) -> Options {
        self.log_segments = segments;
        self
    }

    /// Sets the bytes of log between checkpoints, at least (see [`Options::checkpoint_bytes`]).
    ///
    /// ```
    /// # use larchdb::{Database, Durability, Error, Options};
    /// # let dir = tempfile::tempdir()?;
    /// let o = Options::default().log(true).checkpoint_bytes(4 << 20);
    /// assert_eq!(o.checkpoint_bytes, 4 << 20);
    /// Database::open(dir.path().join("db"), o)?.put(b"k", b"v")?;
    /// let r = Database::open(dir.path().join("x"), Options::default().checkpoint_bytes(0));
    /// assert!(matches!(r, Err(Error::InvalidOptions(_))));
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn checkpoint_bytes(mut self, bytes: u64) -> Options {
        self.checkpoint_bytes = bytes;
        self
    }

    /// Sets the bytes of log kept for records not yet in a durable checkpoint, at least (see
    /// [`Options::log_room_bytes`]; 0, the default, sizes it from the checkpoints).
    ///
    /// ```
    /// # use larchdb::{Database, Error, Options};
    /// # let dir = tempfile::tempdir()?;
    /// let o = Options::default().log_room_bytes(256 << 20);
    /// assert_eq!(o.log_room_bytes, 256 << 20);
    /// Database::open(dir.path().join("db"), o)?.put(b"k", b"v")?;
    /// // More than 127 of the default 128 segments of 8 MiB.
    /// let r = Database::open(dir.path().join("x"), Options::default().log_room_bytes(2 << 30));
    /// assert!(matches!(r, Err(Error::InvalidOptions(_))));
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn log_room_bytes(mut self, bytes: u64) -> Options {
        self.log_room_bytes = bytes;
        self
    }

    /// Sets how many key ranges the overlays are cut into, each merged by checkpoints of its
    /// own (see [`Options::checkpoint_slices`]).
    ///
    /// ```
    /// # use larchdb::{Database, Options};
    /// # let dir = tempfile::tempdir()?;
    /// let o = Options::default().checkpoint_slices(1);
    /// assert_eq!(o.checkpoint_slices, 1);
    /// Database::open(dir.path().join("db"), o)?.put(b"k", b"v")?;
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn checkpoint_slices(mut self, slices: u32) -> Options {
        self.checkpoint_slices = slices;
        self
    }

    /// Lowers the priority of the handle's background threads (see
    /// [`Options::background_nice`]).
    ///
    /// ```
    /// # use larchdb::{Database, Durability, Error, Options};
    /// # let dir = tempfile::tempdir()?;
    /// let o = Options::default().log(true).background_nice(8);
    /// assert_eq!(o.background_nice, 8);
    /// Database::open(dir.path().join("db"), o)?.put(b"k", b"v")?;
    /// let r = Database::open(dir.path().join("x"), Options::default().background_nice(20));
    /// assert!(matches!(r, Err(Error::InvalidOptions(_))));
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn background_nice(mut self, steps: u8) -> Options {
        self.background_nice = steps;
        self
    }

    /// Sets `Durability::Bounded`'s time bound (see [`Options::bounded_millis`]).
    ///
    /// ```
    /// # use larchdb::{Database, Durability, Error, Options};
    /// # let dir = tempfile::tempdir()?;
    /// let o = Options::default().durability(Durability::Bounded).bounded_millis(10);
    /// assert_eq!(o.bounded_millis, 10);
    /// let db = Database::open(dir.path().join("db"), o)?;
    /// db.put(b"k", b"v")?; // returns at once; a thread makes it durable within ~10 ms
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn bounded_millis(mut self, millis: u64) -> Options {
        self.bounded_millis = millis;
        self
    }

    /// Sets `Durability::Bounded`'s byte bound (see [`Options::bounded_bytes`]).
    ///
    /// ```
    /// # use larchdb::{Database, Durability, Error, Options};
    /// # let dir = tempfile::tempdir()?;
    /// let o = Options::default()
    ///     .log(true)
    ///     .durability(Durability::Bounded)
    ///     .bounded_bytes(64 << 10);
    /// assert_eq!(o.bounded_bytes, 64 << 10);
    /// let db = Database::open(dir.path().join("db"), o)?;
    /// db.put(b"k", b"v")?;
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn bounded_bytes(mut self, bytes: u64) -> Options {
        self.bounded_bytes = bytes;
        self
    }

    /// The slices a checkpoint cuts the overlays into over a data file of `pages` pages
    /// (`checkpoint_slices`; 0: one per `CHECKPOINT_SLICE_PAGES` pages of the file, from 1 to
    /// `CHECKPOINT_SLICES_MAX`).
    pub(crate) fn slices_for(&self, pages: u64) -> usize {
        match self.checkpoint_slices {
            0 => {
                (pages / CHECKPOINT_SLICE_PAGES).clamp(1, u64::from(CHECKPOINT_SLICES_MAX)) as usize
            }
            n => n as usize,
        }
    }

    /// The largest batch a logged transaction commits through the log: half a segment.
    /// Larger ones write pages.
    pub(crate) fn log_batch_bytes_max(&self) -> usize {
        (self.log_segment_bytes / 2) as usize
    }

    pub(crate) fn validate(&self) -> Result<()> {
        let p = self.page_bytes;
        if !(PAGE_BYTES_MIN..=PAGE_BYTES_MAX).contains(&p) || !p.is_power_of_two() {
            return Err(Error::InvalidOptions(format!(
                "page_bytes must be a power of two from {PAGE_BYTES_MIN} to {PAGE_BYTES_MAX}, got {p}"
            )));
        }
        let room = self.log_segments.saturating_sub(1) * self.log_segment_bytes;
        if self.log_segments < 2 || self.checkpoint_bytes == 0 || self.checkpoint_bytes > room {
            return Err(Error::InvalidOptions(format!(
                "checkpoint_bytes ({}) must be from 1 to (log_segments - 1) x log_segment_bytes \
                 ({room}), with at least 2 segments",
                self.checkpoint_bytes
            )));
        }
        if self.log_room_bytes > room {
            return Err(Error::InvalidOptions(format!(
                "log_room_bytes ({}) must be at most (log_segments - 1) x log_segment_bytes \
                 ({room})",
                self.log_room_bytes
            )));
        }
        if self.recover && self.read_only {
            return Err(Error::InvalidOptions(
                "recover writes the recovered state: it needs a handle that writes, not read_only"
                    .into(),
            ));
        }
        if self.background_nice > BACKGROUND_NICE_MAX {
            return Err(Error::InvalidOptions(format!(
                "background_nice must be from 0 to {BACKGROUND_NICE_MAX}, got {}",
                self.background_nice
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// By default a checkpoint merges the whole overlay while the data file holds fewer than
    /// two slices' pages, and cuts it by the file's size beyond that, up to the cap; a number
    /// set is kept.
    #[test]
    fn checkpoint_slices_follow_the_file() {
        let o = Options::default();
        let pages = |bytes: u64| bytes / 4096;
        let slice = CHECKPOINT_SLICE_PAGES * 4096;
        assert_eq!(o.slices_for(0), 1);
        assert_eq!(o.slices_for(pages(slice)), 1);
        assert_eq!(o.slices_for(pages(2 * slice)), 2);
        assert_eq!(o.slices_for(pages(5 * slice + 1)), 5);
        assert_eq!(o.slices_for(pages(5 << 30)), CHECKPOINT_SLICES_MAX as usize);
        let set = Options::default().checkpoint_slices(1);
        assert_eq!(set.slices_for(pages(5 << 30)), 1);
        let set = Options::default().checkpoint_slices(7);
        assert_eq!(set.slices_for(1), 7);
    }
}
