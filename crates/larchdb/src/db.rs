//! `Database`: the handle an application holds. It opens the file and starts transactions;
//! the state it shares with them is `engine::Shared`.

use crate::engine::admission;
use crate::engine::log::LogSource;
use crate::engine::open::open_file;
use crate::engine::owner::{checkpoint_on, open_writing, restart_log, Handle};
use crate::engine::recovery::{Aside, Recovery};
use crate::engine::txn::Txn;
use crate::engine::Shared;
use crate::error::{Error, Result};
use crate::options::{Durability, Options};
use crate::storage::Storage;
use crate::txn::{Keep, ReadTxn, ThisThreadWrites, WriteTxn};
use crate::verify;
use std::path::Path;
use std::sync::Arc;

/// The name of the default table: the one [`Database::get`], [`Database::put`] and
/// [`Database::delete`] use, and [`crate::ReadTxn::default_table`] and
/// [`crate::WriteTxn::default_table`] open (LMDB's unnamed database, RocksDB's default column
/// family). An ordinary table otherwise: it is listed, and it can be opened by this name.
pub const DEFAULT_TABLE: &str = "default";

/// An open database. Cheap to share between threads (`&Database` or `Arc<Database>`).
///
/// ```
/// use larchdb::{Database, Options};
/// # let dir = tempfile::tempdir().unwrap();
/// let db = Database::open(dir.path().join("my.larch"), Options::default())?;
/// let mut w = db.begin_write()?;
/// w.create_table("fruit")?;
/// w.table("fruit")?.put(b"apple", b"red")?;
/// w.commit()?;
///
/// let r = db.begin_read()?;
/// let fruit = r.table("fruit")?;
/// assert_eq!(fruit.get(b"apple")?, Some(&b"red"[..]));
/// # Ok::<(), larchdb::Error>(())
/// ```
pub struct Database {
    /// The states transactions start on (one for the handle's life, or, for a writing
    /// handle, one per period it holds the file and one between: `engine::owner`).
    handle: Arc<Handle>,
    page_bytes: u32,
    /// What the open gave up (`Options::recover`).
    recovery: Option<Recovery>,
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Database")
            .field("page_bytes", &self.page_bytes)
            .finish()
    }
}

impl Drop for Database {
    fn drop(&mut self) {
        // The file stays with the state it is on from here (no handover).
        self.handle.stop();
        let shared = self.shared();
        // Every background thread stops, after its work: `Durability::Bounded` commits not yet
        // durable are made durable, a checkpoint on its own thread is put in place.
        shared.background.stop(&shared);
        let poisoned = shared.lock_writer().poisoned;
        let writes = !poisoned && !shared.options.read_only;
        // No more runs of large values: the close's commits free the reservations.
        shared
            .runs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .close();
        // A failure leaves the database as the last step that succeeded left it (each step is
        // a commit), and a close has no one to report it to: the next open reports what it
        // finds.
        if writes && shared.options.compact_on_close && self.compact().is_ok() {
            let _ = self.detach_log(&shared);
        }
        if writes {
            // The overflow runs deferred and the reservations given up are in no free set
            // on the file: a last commit frees them (docs/design/large-values.md).
            let _ = self.free_runs_held(&shared);
        }
        if !shared.options.read_only {
            shared.hand_over_to_readers();
        }
    }
}

impl Database {
    /// At close, after a compaction that left the log holding nothing: one more durable
    /// commit, whose meta page says the database has no log, so that the data file alone is
    /// the whole database (a copy of it opens without its `-log` file; the next handle that
    /// writes the log starts a new one). Nothing is committed after it: the handle is closing.
    fn detach_log(&self, shared: &Arc<Shared>) -> Result<()> {
        let Some(log) = shared.log.as_ref() else {
            return Ok(());
        };
        let guard = shared.lock_writer();
        if !log.holds_nothing() || !shared.writer_base().snap.meta.durable {
            return Ok(());
        }
        shared
            .log_detached
            .store(true, std::sync::atomic::Ordering::Relaxed);
        Txn::new(shared, guard)?.checkpoint(Durability::Immediate)
    }

    /// At close: a durable checkpoint, if runs of large values are held outside the free set
    /// (deferred frees, reservations' remainders), which frees them: every record is in the
    /// tree by now, and no replay reads one that names them.
    fn free_runs_held(&self, shared: &Arc<Shared>) -> Result<()> {
        if shared.log.is_none() {
            return Ok(());
        }
        let guard = shared.lock_writer();
        let deferred = guard
            .disk
            .as_ref()
            .and_then(|d| d.carry.as_ref())
            .is_some_and(|c| !c.free.deferred_runs().is_empty());
        let leftovers = !shared
            .runs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .leftovers
            .is_empty();
        if !deferred && !leftovers {
            return Ok(());
        }
        Txn::new(shared, guard)?.checkpoint(Durability::Immediate)
    }

    /// The state new transactions start on.
    fn shared(&self) -> Arc<Shared> {
        self.handle.current()
    }
}

/// Moves of pages to the start of the file that `Database::compact` makes at most: each moves
/// what the one before copied past the pages in use (`Txn::relocate`).
const COMPACT_PASSES_MAX: usize = 3;

/// A step of [`Database::compact_with_progress`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CompactStep {
    /// A durable checkpoint writes every commit into the tree (only if one is needed).
    Checkpoint,
    /// Pass `pass` (from 0; up to three) moves the pages at the end of the file into free
    /// space below: the trees of `tables_done` of the `tables` tables are done (the catalog's
    /// own tree last, after the count reaches `tables`). Not reported when there is too
    /// little to give back to be worth a move.
    Moving {
        /// The pass, from 0.
        pass: u32,
        /// Tables whose pages this pass has moved.
        tables_done: u64,
        /// Tables in the database.
        tables: u64,
    },
    /// The file's end is given back, and the log restarted and cut.
    Trimming,
}

/// What [`Database::compact`] gave back: the bytes of the data file and of the log file,
/// before and after.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Compacted {
    /// Length of the data file before.
    pub data_bytes_before: u64,
    /// Length of the data file after.
    pub data_bytes_after: u64,
    /// Length of the log file before (0 without a log).
    pub log_bytes_before: u64,
    /// Length of the log file after.
    pub log_bytes_after: u64,
    /// Whether pages were moved from the end of the data file into free space below.
    pub moved: bool,
}

impl Database {
    /// Opens the database file at `path`, creating it if `options.create` allows.
    ///
    /// Beside the file, a lock file (`<path>-lock`, see [`crate::storage::lock_path`]) holds
    /// the reader table that processes share: a read-only handle can read while a writer in
    /// another process commits. Writing handles in several processes take turns: one opened
    /// while another process holds the database follows that writer, and its write
    /// transactions wait for the database, which the holder hands over once it is between
    /// transactions ([`Database::begin_write`]). One writing handle per file in a process: a
    /// second gets [`Error::DatabaseLocked`]. A read-only handle that cannot open the lock
    /// file (a read-only directory) falls back to a shared lock on the database, which
    /// excludes writers.
    ///
    /// An existing empty file is made a database only if `options.create` allows; a file that
    /// is not a database is refused ([`Error::NotADatabase`]) and the open leaves nothing
    /// behind (no lock file it would have created).
    ///
    /// ```
    /// use larchdb::{Database, Error, Options};
    /// # let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("my.larch");
    /// let db = Database::open(&path, Options::default())?;
    /// db.put(b"k", b"v")?;
    /// assert!(larchdb::storage::lock_path(&path).exists());
    /// assert!(matches!(Database::open(&path, Options::default()), Err(Error::DatabaseLocked)));
    /// drop(db);
    /// let db = Database::open(&path, Options::default().create(false))?;
    /// assert_eq!(db.get(b"k")?, Some(b"v".to_vec()));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open(path: impl AsRef<Path>, options: Options) -> Result<Database> {
        options.validate()?;
        let path = path.as_ref();
        let lock_existed = crate::storage::lock_path(path).exists();
        let data_existed = path.exists();
        let log_path = crate::storage::log_path(path);
        let opened = match options.read_only {
            true => open_file(path, &options).and_then(|(storage, lock)| {
                let log = LogSource::File(log_path);
                Shared::open(storage, options, lock, log).map(Handle::fixed)
            }),
            false => open_writing(path, &options, |storage, lock| {
                // A recovering open keeps a copy of what it may give up before it changes
                // anything (under the database's lock: no writer changes the files meanwhile).
                let aside = match options.recover {
                    true => Some(Aside::take(path, &log_path)?),
                    false => None,
                };
                let log = LogSource::File(log_path.clone());
                match Shared::open(storage, options.clone(), Some(lock), log) {
                    Ok(mut shared) => {
                        match (shared.recovery.as_mut(), aside) {
                            (Some(r), Some(aside)) => r.kept = Some(aside.dir),
                            (_, aside) => aside.into_iter().for_each(Aside::discard),
                        }
                        Ok(shared)
                    }
                    Err(e) => {
                        aside.into_iter().for_each(Aside::discard);
                        Err(e)
                    }
                }
            }),
        };
        match opened {
            Ok(handle) => Database::opened(handle),
            Err(e) => {
                // A file that is not a database has no readers: a lock file this open created
                // for it is removed (the storage and the lock table are closed by now, dropped
                // with the failed state). After any other failure the lock file stays, since
                // a reader of a real database may have found it meanwhile.
                if !lock_existed && matches!(e, Error::NotADatabase) {
                    let _ = std::fs::remove_file(crate::storage::lock_path(path));
                }
                // Nor does a refused open leave behind a data file it created empty beside
                // the log it refused to discard.
                if !data_existed && matches!(e, Error::WouldLoseData { .. }) {
                    let _ = std::fs::remove_file(path);
                }
                Err(e)
            }
        }
    }

    /// The handle on an opened `shared`. After an open that gave damage up
    /// (`Options::recover`), the state it opened is verified, then made durable at once, in
    /// both meta slots, so that the next open finds no damage: a durable checkpoint writes the
    /// slot the open did not use, and a second one the other.
    fn opened(handle: Arc<Handle>) -> Result<Database> {
        let shared = handle.current();
        // An open whose log held more than the overlays' share of the memory budget replays
        // the rest in rounds before anything reads the handle.
        shared.finish_replay()?;
        let db = Database {
            page_bytes: shared.page_bytes,
            recovery: shared.recovery.clone(),
            handle,
        };
        if db.recovery.is_some() {
            // The state opened is checked in full before it is made durable: an older tree
            // whose free pages a later commit reused is damaged too, and is not sealed in.
            db.verify()?;
            for _ in 0..2 {
                Txn::new(&shared, shared.lock_writer())?.checkpoint(Durability::Immediate)?;
            }
        }
        Ok(db)
    }

    /// What the open gave up to open a damaged database, if it was opened with
    /// [`Options::recover`] and found damage (`None` otherwise): the commit it opened at, each
    /// piece of damage with what it cost, and where the copies taken before the open changed
    /// anything are kept.
    ///
    /// ```
    /// use larchdb::{Database, Error, Options};
    /// # let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("db");
    /// // Closed without compacting, the log keeps the commits.
    /// let db = Database::open(&path, Options::default().compact_on_close(false))?;
    /// db.put(b"k", b"v")?;
    /// db.put(b"l", b"w")?;
    /// drop(db);
    /// // The data file is lost. An open refuses to start a new database beside a log that
    /// // holds commits of the old one...
    /// std::fs::remove_file(&path)?;
    /// let r = Database::open(&path, Options::default());
    /// assert!(matches!(r, Err(Error::WouldLoseData { .. })));
    /// // ...unless told to give them up: it keeps a copy of the log aside, and says so.
    /// let db = Database::open(&path, Options::default().recover(true))?;
    /// let recovery = db.recovery().expect("damage was given up");
    /// assert_eq!(recovery.given_up.len(), 1);
    /// assert!(recovery.kept.as_ref().unwrap().join("log").exists());
    /// assert_eq!(db.get(b"k")?, None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn recovery(&self) -> Option<&Recovery> {
        self.recovery.as_ref()
    }

    /// Opens a database on any [`Storage`] backend (for example the fault-injecting one of
    /// the `test-support` feature). There is no lock file: the caller guarantees that no other
    /// process writes the storage. There is no log either: commits write pages, whatever
    /// `Options::log` says ([`Database::open_storage_with_log`] gives one), and a database
    /// whose last commit says its log holds commits is refused (`Error::CorruptedLog`).
    ///
    /// ```
    /// use larchdb::storage::FaultStorage;
    /// use larchdb::{Database, Options};
    /// use std::sync::Arc;
    /// let storage = FaultStorage::new();
    /// let db = Database::open_storage(Arc::new(storage.clone()), Options::default())?;
    /// db.put(b"k", b"v")?;
    /// assert_eq!(db.get(b"k")?, Some(b"v".to_vec()));
    /// assert!(!storage.contents().is_empty());
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn open_storage(storage: Arc<dyn Storage>, options: Options) -> Result<Database> {
        let shared = Shared::open(storage, options, None, LogSource::None)?;
        Database::opened(Handle::fixed(shared))
    }

    /// Like [`Database::open_storage`], with `log` as the write-ahead log's storage (used when
    /// `options.log` is set, or when the database's last commit says its log holds commits).
    ///
    /// ```
    /// use larchdb::{storage::FaultStorage, Database, Options};
    /// # use std::sync::Arc;
    /// let (data, log) = (Arc::new(FaultStorage::new()), Arc::new(FaultStorage::new()));
    /// let options = Options::default().log(true).compact_on_close(false);
    /// let db = Database::open_storage_with_log(data.clone(), log.clone(), options.clone())?;
    /// db.put(b"k", b"v")?;
    /// db.put(b"k", b"w")?;
    /// assert!(db.stats()?.commits.logged_commits >= 1);
    /// drop(db);
    /// // Reopened, the commits still in the log are replayed.
    /// let db = Database::open_storage_with_log(data, log, options)?;
    /// assert_eq!(db.get(b"k")?, Some(b"w".to_vec()));
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn open_storage_with_log(
        storage: Arc<dyn Storage>,
        log: Arc<dyn Storage>,
        options: Options,
    ) -> Result<Database> {
        let shared = Shared::open(storage, options, None, LogSource::Storage(log))?;
        Database::opened(Handle::fixed(shared))
    }

    /// Page size of this database.
    ///
    /// ```
    /// use larchdb::{Database, Options};
    /// # let dir = tempfile::tempdir()?;
    /// # let path = dir.path().join("db");
    /// let db = Database::open(&path, Options::default().page_bytes(16 * 1024))?;
    /// assert_eq!(db.page_bytes(), 16 * 1024);
    /// drop(db);
    /// // An existing file keeps its own page size.
    /// let db = Database::open(&path, Options::default())?;
    /// assert_eq!(db.page_bytes(), 16 * 1024);
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn page_bytes(&self) -> u32 {
        self.page_bytes
    }

    /// Starts a read transaction on the newest committed snapshot. Takes a short lock to
    /// register the reader; reads inside the transaction take none and make no syscall.
    ///
    /// On a read-only handle beside a writer in another process, the newest snapshot is found
    /// through the shared reader table: without a syscall when nothing was committed since the
    /// last look, with a read of the meta pages when something was.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// db.put(b"k", b"old")?;
    /// let r = db.begin_read()?;
    /// db.put(b"k", b"new")?;
    /// // The transaction keeps reading the snapshot it started on.
    /// assert_eq!(r.default_table()?.get(b"k")?, Some(&b"old"[..]));
    /// let r2 = db.begin_read()?;
    /// assert_eq!(r2.default_table()?.get(b"k")?, Some(&b"new"[..]));
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn begin_read(&self) -> Result<ReadTxn> {
        ReadTxn::new(self.shared())
    }

    /// The value of `key` in the default table ([`DEFAULT_TABLE`]), copied out: a read
    /// transaction of its own. Many reads are cheaper in one [`Database::begin_read`], whose
    /// values are borrowed.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// assert_eq!(db.get(b"k")?, None);
    /// db.put(b"k", b"v")?;
    /// assert_eq!(db.get(b"k")?, Some(b"v".to_vec()));
    /// assert!(db.delete(b"k")?);
    /// assert_eq!(db.get(b"k")?, None);
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let r = self.begin_read()?;
        let v = r.default_table()?.get(key)?.map(<[u8]>::to_vec);
        Ok(v)
    }

    /// Inserts or replaces `key` in the default table ([`DEFAULT_TABLE`]), in a write
    /// transaction of its own committed with the handle's durability
    /// ([`crate::Options::durability`]); creates the table the first time.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// db.put(b"k", b"v1")?;
    /// db.put(b"k", b"v2")?;
    /// assert_eq!(db.get(b"k")?, Some(b"v2".to_vec()));
    /// assert_eq!(db.begin_read()?.list_tables()?, vec![larchdb::DEFAULT_TABLE]);
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        let mut w = self.begin_write()?;
        w.default_table()?.set(key, value)?;
        w.commit()
    }

    /// Deletes `key` from the default table ([`DEFAULT_TABLE`]), in a write transaction of
    /// its own. Returns true if it was present.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// db.put(b"k", b"v")?;
    /// assert!(db.delete(b"k")?);
    /// assert!(!db.delete(b"k")?);
    /// assert_eq!(db.get(b"k")?, None);
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn delete(&self, key: &[u8]) -> Result<bool> {
        let mut w = self.begin_write()?;
        let existed = match w.table(DEFAULT_TABLE) {
            Ok(mut t) => t.delete(key)?,
            Err(Error::TableNotFound(_)) => return Ok(false),
            Err(e) => return Err(e),
        };
        if existed {
            w.commit()?;
        }
        Ok(existed)
    }

    /// Starts the write transaction, waiting while another one is in progress, in this process
    /// or in another: a writing handle in another process that holds the database gives it to
    /// this one once it is between transactions (after a durable checkpoint), and the
    /// transaction starts from the newest commit, whoever made it (a handover costs the giver
    /// a checkpoint and the taker an open; docs/design/concurrency.md). On a thread that has
    /// one open on this
    /// database already, it returns [`Error::WriteBusy`] at once (so do `put` and `delete`):
    /// waiting would never end.
    ///
    /// A `WriteTxn` stays on the thread that began it (it holds the write lock's guard, which
    /// is not `Send`). In async code, run the whole transaction in one blocking task
    /// (`tokio::task::spawn_blocking(move || { let mut w = db.begin_write()?; ...; w.commit() })`),
    /// not across an `.await`.
    ///
    /// On a handle that writes the log, a checkpoint that is due (the log grew by
    /// `Options::checkpoint_bytes` since the last) is started first, on a thread of its own
    /// (`Options::checkpoint_thread`), or written first.
    ///
    /// ```
    /// use larchdb::Error;
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// let mut w = db.begin_write()?;
    /// w.create_table("t")?;
    /// w.table("t")?.put(b"k", b"v")?;
    /// // Nothing is visible to readers before the commit.
    /// assert!(matches!(db.begin_read()?.table("t"), Err(Error::TableNotFound(_))));
    /// w.commit()?;
    /// assert_eq!(db.begin_read()?.table("t")?.get(b"k")?, Some(&b"v"[..]));
    ///
    /// let w = db.begin_write()?;
    /// assert!(matches!(db.begin_write(), Err(Error::WriteBusy)));
    /// assert!(matches!(db.put(b"k", b"v"), Err(Error::WriteBusy)));
    /// drop(w);
    /// db.put(b"k", b"v")?;
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn begin_write(&self) -> Result<WriteTxn<'_>> {
        self.begin_txn(true)
    }

    /// `begin_write` (`wait`) or `try_begin_write`, below the API: on the state that holds
    /// the file, taking it first if another process has it.
    fn begin_txn(&self, wait: bool) -> Result<WriteTxn<'_>> {
        let mut handed = false;
        loop {
            let mut shared = self.handle.current();
            if shared.options.read_only || handed {
                // Another process holds the file, or is being given it (or this is a read-only
                // handle): wait for the turn, and then for the file.
                shared = self.handle.writer(wait)?.1;
            }
            // A second one on the thread that holds the first would wait for itself.
            if ThisThreadWrites::writing(&shared) {
                return Err(Error::WriteBusy);
            }
            let keep = Keep::new(shared);
            // SAFETY: the transaction that borrows the state is returned beside `keep`, in the
            // `WriteTxn` that drops it last.
            let shared = unsafe { keep.get() };
            let guard = match wait {
                true => shared.lock_writer(),
                false => shared.try_lock_writer().ok_or(Error::WriteBusy)?,
            };
            if shared.handing.load(std::sync::atomic::Ordering::Acquire) {
                // The file goes to a writer in another process: this transaction waits for
                // its turn after it.
                drop(guard);
                if !wait {
                    return Err(Error::WriteBusy);
                }
                handed = true;
                continue;
            }
            match admission::make_room(shared, guard)? {
                Some(guard) => return Txn::new(shared, guard).map(|t| WriteTxn::on(t, keep)),
                // Paced: waited outside the lock (a `try_begin_write` then waits for the lock,
                // as it always did).
                None if wait => continue,
                None => return self.begin_txn(true),
            }
        }
    }

    /// A transaction of the engine's own on `shared`, which the caller holds the file for
    /// (`Handle::writer`'s turn).
    fn txn_on(shared: &Arc<Shared>) -> Result<Txn<'_>> {
        loop {
            if let Some(guard) = admission::make_room(shared, shared.lock_writer())? {
                return Txn::new(shared, guard);
            }
        }
    }

    /// Writes every commit in the log to the tree, durably, and lets the log's space be
    /// reused: a checkpoint (`Options::log`). Without a log, the same as [`Database::sync`].
    /// Where the overlays are cut in slices ([`Options::checkpoint_slices`]), each slice is
    /// merged first, a durable checkpoint of its own, so that the file never holds a second
    /// copy of every leaf they reach.
    ///
    /// ```
    /// use larchdb::{Database, Options};
    /// # let dir = tempfile::tempdir()?;
    /// let db = Database::open(dir.path().join("db"), Options::default().log(true))?;
    /// db.put(b"k", b"v1")?;
    /// db.put(b"k", b"v2")?;
    /// let before = db.stats()?.commits.checkpoints;
    /// db.checkpoint()?;
    /// assert_eq!(db.stats()?.commits.checkpoints, before + 1);
    /// assert_eq!(db.get(b"k")?, Some(b"v2".to_vec()));
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn checkpoint(&self) -> Result<()> {
        let (_turn, shared) = self.handle.writer(true)?;
        checkpoint_on(&shared, Durability::Immediate)
    }

    /// Gives back the space the database does not need, without stopping readers:
    ///
    /// 1. a durable checkpoint (`checkpoint`): every commit is in the tree, and the pages the
    ///    checkpoints before it freed become reusable;
    /// 2. if at least an eighth of the data file would come back, the pages of every tree
    ///    that lie past the pages in use are copied into free space below, in a durable
    ///    commit, and again (up to three passes) for the branches the copies rewrote, while
    ///    that gives back 64 pages or more (pages held by readers are not moved: with readers
    ///    on old snapshots, this step waits for a later call);
    /// 3. a durable commit that gives back the free space at the end of the data file, and
    ///    on a handle that writes the log, names the start of a new cycle as the log's
    ///    replay position; the log file is then cut to its header.
    ///
    /// Run when a handle that writes is closed ([`Options::compact_on_close`]). Returns the
    /// files' sizes before and after.
    ///
    /// ```
    /// use larchdb::{Database, Options};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = Database::open(dir.path().join("my.larch"), Options::default())?;
    /// let mut w = db.begin_write()?;
    /// w.create_table("t")?;
    /// for i in 0..10_000u32 {
    ///     w.table("t")?.put(&i.to_be_bytes(), &[7u8; 100])?;
    /// }
    /// w.commit()?;
    /// let mut w = db.begin_write()?;
    /// for i in 0..10_000u32 {
    ///     w.table("t")?.delete(&i.to_be_bytes())?;
    /// }
    /// w.commit()?;
    /// let c = db.compact()?;
    /// assert!(c.data_bytes_after < c.data_bytes_before);
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn compact(&self) -> Result<Compacted> {
        self.compact_with_progress(|_| {})
    }

    /// [`Database::compact`], calling `progress` as each step starts, and during a move of
    /// pages after each table's tree. During a move the callback runs under the write lock:
    /// it must not begin a write transaction on this handle (that would wait for ever).
    ///
    /// ```
    /// use larchdb::{CompactStep, Database, Options};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = Database::open(dir.path().join("my.larch"), Options::default())?;
    /// # let mut w = db.begin_write()?;
    /// # for i in 0..20_000u32 {
    /// #     w.default_table()?.put(&i.to_be_bytes(), &[7u8; 100])?;
    /// # }
    /// # w.commit()?;
    /// # let mut w = db.begin_write()?;
    /// # w.default_table()?.delete_range(&0u32.to_be_bytes()[..]..&19_000u32.to_be_bytes()[..])?;
    /// # w.commit()?;
    /// let mut steps = Vec::new();
    /// db.compact_with_progress(|step| steps.push(step))?;
    /// assert!(steps.contains(&CompactStep::Moving { pass: 0, tables_done: 1, tables: 1 }));
    /// assert_eq!(steps.last(), Some(&CompactStep::Trimming));
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn compact_with_progress(
        &self,
        mut progress: impl FnMut(CompactStep),
    ) -> Result<Compacted> {
        // The file stays this handle's to the end.
        let (_turn, shared) = self.handle.writer(true)?;
        let shared = &shared;
        let mut c = Compacted {
            data_bytes_before: shared.storage.len()?,
            log_bytes_before: log_bytes(shared)?,
            ..Compacted::default()
        };
        if checkpoint_needed(shared) {
            progress(CompactStep::Checkpoint);
            checkpoint_on(shared, Durability::Immediate)?;
        }
        for pass in 0..COMPACT_PASSES_MAX {
            let mut moving = |tables_done, tables| {
                progress(CompactStep::Moving {
                    pass: pass as u32,
                    tables_done,
                    tables,
                })
            };
            let w = Txn::new(shared, shared.lock_writer())?;
            if !w.relocate(pass == 0, &mut moving)? {
                break;
            }
            c.moved = true;
        }
        progress(CompactStep::Trimming);
        restart_log(shared, shared.lock_writer(), c.moved)?;
        let mut guard = shared.lock_writer();
        // The durable commit's file length exactly, without the slack kept for the next
        // commits' growth (`WriteMap::trim`).
        let meta = shared.writer_base().snap.meta;
        if let Some(disk) = guard.disk.as_mut() {
            if let (Some(carry), true) = (disk.carry.as_mut(), disk.last_durable_txn == meta.txn) {
                carry
                    .wmap
                    .trim_exact(meta.page_count * self.page_bytes() as u64);
            }
        }
        drop(guard);
        c.data_bytes_after = shared.storage.len()?;
        c.log_bytes_after = log_bytes(shared)?;
        Ok(c)
    }

    /// Starts the write transaction, or fails with [`Error::WriteBusy`] if another is in
    /// progress, or if a writing handle in another process holds the database.
    ///
    /// ```
    /// use larchdb::Error;
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// let w = db.begin_write()?;
    /// assert!(matches!(db.try_begin_write(), Err(Error::WriteBusy)));
    /// drop(w);
    /// let mut w = db.try_begin_write()?;
    /// w.default_table()?.put(b"k", b"v")?;
    /// w.commit()?;
    /// assert_eq!(db.get(b"k")?, Some(b"v".to_vec()));
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn try_begin_write(&self) -> Result<WriteTxn<'_>> {
        self.begin_txn(false)
    }

    /// Makes every earlier commit durable (a sync and a durable meta page), for callers that
    /// commit with `Durability::None` and want a durability point.
    ///
    /// ```
    /// use larchdb::storage::{CrashMode, FaultStorage};
    /// use larchdb::{Database, Durability, Options};
    /// # use std::sync::Arc;
    /// let disk = FaultStorage::new();
    /// let options = Options::default().durability(Durability::None);
    /// let db = Database::open_storage(Arc::new(disk.clone()), options.clone())?;
    /// db.put(b"k", b"v")?;
    /// db.sync()?;
    /// // A power loss now keeps the commit.
    /// let db = Database::open_storage(Arc::new(disk.crash(CrashMode::DropUnsynced)), options)?;
    /// assert_eq!(db.get(b"k")?, Some(b"v".to_vec()));
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn sync(&self) -> Result<()> {
        if self.handle.held_elsewhere() {
            // Its commits were made durable when it gave the file back.
            return Ok(());
        }
        let (_turn, shared) = self.handle.writer(true)?;
        let done = Database::txn_on(&shared)?.commit(Durability::Immediate, true);
        done
    }

    /// Verifies the whole file: every page reachable from the newest snapshot or recorded as
    /// free is read and checksummed, every tree is checked for order, depth and counts, and
    /// every page is accounted for exactly once. Returns the first problem as
    /// [`Error::Corrupted`]; [`Database::verify_all`] lists them all. Commits still in the
    /// log (checked by their own checksums when they were read back) are in the pages from
    /// the next checkpoint on: the figures are the pages' ([`Database::checkpoint`] first to
    /// count every commit).
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// db.put(b"a", b"1")?;
    /// db.put(b"b", b"2")?;
    /// db.checkpoint()?; // the two commits, from the log into the pages
    /// let report = db.verify()?;
    /// assert!(report.is_clean());
    /// assert_eq!((report.tables, report.entries), (1, 2));
    /// assert!(report.pages_checked > 0);
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn verify(&self) -> Result<verify::VerifyReport> {
        let report = self.verify_all()?;
        match report.problems.first() {
            Some(p) => Err(Error::Corrupted {
                page: p.page,
                reason: p.reason.clone(),
            }),
            None => Ok(report),
        }
    }

    /// Like [`Database::verify`], but returns every problem found in the report.
    ///
    /// ```
    /// # use larchdb::{storage::FaultStorage, Database, Error, Options};
    /// # use std::sync::Arc;
    /// # let disk = FaultStorage::new();
    /// # let db = Database::open_storage(Arc::new(disk.clone()), Options::default())?;
    /// # let mut w = db.begin_write()?;
    /// # for i in 0..2000u32 {
    /// #     w.default_table()?.put(&i.to_be_bytes(), &[7u8; 100])?;
    /// # }
    /// # w.commit()?;
    /// # assert!(db.verify_all()?.is_clean());
    /// # drop(db);
    /// // Bit rot in two pages in the middle of `disk`, a database's `FaultStorage`.
    /// let mut bytes = disk.contents();
    /// let page = bytes.len() / 4096 / 2;
    /// bytes[page * 4096 + 100] ^= 0xff;
    /// bytes[(page + 1) * 4096 + 100] ^= 0xff;
    /// disk.set_contents(bytes);
    /// let db = Database::open_storage(Arc::new(disk), Options::default())?;
    /// let pages: Vec<u64> = db.verify_all()?.problems.iter().map(|p| p.page).collect();
    /// assert!(pages.contains(&(page as u64)) && pages.contains(&(page as u64 + 1)));
    /// assert!(matches!(db.verify(), Err(Error::Corrupted { .. })));
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn verify_all(&self) -> Result<verify::VerifyReport> {
        // A registered reader: the snapshot stays intact while it is checked, even with a
        // writer running in another process.
        let shared = self.shared();
        let (r, held) = shared.read_with_runs_held(
            || crate::txn::ReadTxn::new(shared.clone()),
            |r| r.published().runs(),
        )?;
        Ok(verify::verify_owning(r.snapshot(), &held))
    }

    /// Statistics of the newest snapshot: tree shape, pages by type, entries, space.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// db.put(b"k", b"v")?;
    /// let held = db.begin_read()?;
    /// db.put(b"k", b"w")?;
    /// let s = db.stats()?;
    /// assert_eq!(s.entries, 1);
    /// assert_eq!(s.readers, 1);
    /// assert_eq!(s.oldest_reader, Some(held.id()));
    /// assert_eq!(s.reader_list[0].pid, std::process::id());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn stats(&self) -> Result<verify::Stats> {
        let own: Vec<(u64, usize)> = {
            let shared = self.shared();
            let rs = shared.read_state();
            rs.readers.iter().map(|(&t, &n)| (t, n)).collect()
        };
        let pid = std::process::id();
        let mut reader_list: Vec<verify::ReaderInfo> = own
            .iter()
            .map(|&(txn, count)| verify::ReaderInfo {
                pid,
                txn,
                count,
                this_handle: true,
            })
            .collect();
        let others = self
            .shared()
            .lock
            .as_ref()
            .map(|l| l.readers())
            .unwrap_or_default();
        let other_readers = others.len();
        reader_list.extend(others.into_iter().map(|(pid, txn)| verify::ReaderInfo {
            pid,
            txn,
            count: 1,
            this_handle: false,
        }));
        let oldest = reader_list.iter().map(|r| r.txn).min();
        let r = self.begin_read()?;
        let mut stats = verify::stats(r.snapshot(), oldest)?;
        // With the log, the walk counted the entries of the last checkpoint's tree; the
        // commits since are in the overlay, which each table's count includes.
        if r.id() != stats.txn {
            for t in &mut stats.tables {
                t.entries = r.table(&t.name)?.len()?;
            }
            stats.entries = stats.tables.iter().map(|t| t.entries).sum();
        }
        stats.file_bytes = self.shared().storage.len()?;
        if let Some(frames) = r.snapshot().access().frames() {
            (stats.frames_bytes, stats.frames_huge_bytes) = frames.held_bytes();
        }
        stats.commits = self.shared().commit_stats();
        stats.overlay_bytes = self.shared().spare.held() as u64;
        stats.pinned_overlay_bytes = self.shared().pinned_bytes();
        if let Some(log) = self.shared().log.as_ref() {
            let p = log.pressure();
            (stats.log_kept_bytes, stats.log_room_bytes) = (p.kept, p.room);
            stats.log_file_bytes = log.file_bytes()?;
        }
        stats.readers = own.iter().map(|&(_, n)| n).sum();
        stats.other_readers = other_readers;
        stats.reader_list = reader_list;
        Ok(stats)
    }

    /// What this handle's write transactions and checkpoints did since it was opened: the
    /// same counts as [`Stats::commits`](verify::Stats::commits), without the walk of the tree
    /// `stats` makes (a few atomic loads), for monitoring a running database.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// db.put(b"k", b"v")?;
    /// let c = db.commit_stats();
    /// assert_eq!((c.commits, c.failed_commits), (1, 0));
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn commit_stats(&self) -> verify::CommitStats {
        self.shared().commit_stats()
    }

    /// The engine behind the handle, for the crate's tests.
    #[cfg(test)]
    pub(crate) fn engine(&self) -> Arc<Shared> {
        self.shared()
    }

    /// What each page of the newest snapshot is (index = page id), for tests that damage pages
    /// of each kind. Not a stable API.
    #[doc(hidden)]
    pub fn page_roles(&self) -> Result<Vec<verify::PageRole>> {
        let r = self.begin_read()?;
        verify::page_roles(r.snapshot())
    }
}

/// Whether a checkpoint would write anything: commits in the overlay (or being written by a
/// checkpoint thread), or a newest commit that is not durable.
fn checkpoint_needed(shared: &Shared) -> bool {
    let guard = shared.lock_writer();
    let base = shared.writer_base();
    let durable = guard.disk.as_ref().map(|d| d.last_durable_txn);
    guard.pending.is_some()
        || base.has_overlay()
        || base.frozen.is_some()
        || durable != Some(base.snap.meta.txn)
}

/// Bytes of the log file (0 without one).
fn log_bytes(shared: &Shared) -> Result<u64> {
    match shared.log.as_ref() {
        Some(l) => l.file_bytes(),
        None => Ok(0),
    }
}
