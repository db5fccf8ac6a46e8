//! `Database`: opening, the shared state behind transactions, and the commit protocol.

use crate::error::{Error, Result};
use crate::limits::{PAGE_BYTES_DEFAULT, PAGE_BYTES_MAX, PAGE_BYTES_MIN, PINNED_BYTES_MAX_DEFAULT};
use crate::pager::freelist_load;
use crate::pager::{
    Access, Carry, Meta, PageRef, PageSource, Snapshot, TableHeader, WriteMap, WritePages,
    MAP_BYTES_MIN,
};
use crate::storage::{FileLock, FileStorage, LockTable, Storage};
use crate::txn::{ReadTxn, WriteTxn};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// How durable a commit is when `commit` returns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Durability {
    /// Durable when `commit` returns: the commit's pages, then its meta page, are synced.
    #[default]
    Immediate,
    /// Not synced. A process crash loses nothing; a power loss or OS crash loses the commits
    /// since the last durable one, and never corrupts: their pages never overwrite anything
    /// the last durable commit can reach.
    None,
}

/// Options for [`Database::open`].
#[derive(Clone, Debug)]
pub struct Options {
    /// Page size for a new database: a power of two from 4 KiB to 64 KiB. Ignored when the
    /// file exists (its own page size is used).
    pub page_bytes: u32,
    /// Durability of `WriteTxn::commit`; `commit_with` overrides it per commit.
    pub durability: Durability,
    /// Open without writing anything; takes a shared lock.
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
    /// Let the kernel read ahead around each page fault in the memory map. Off by default: a
    /// B-tree's pages are visited in key order, not file order, so once the file is larger
    /// than the page cache, readahead turns every random read into megabytes of disk reads
    /// (`madvise(MADV_RANDOM)`, LMDB's `MDB_NORDAHEAD`). Turn it on for scans of a
    /// sequentially loaded file that does not fit in memory.
    pub readahead: bool,
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
            readahead: false,
        }
    }
}

impl Options {
    /// Sets the page size for a new database.
    pub fn page_bytes(mut self, bytes: u32) -> Options {
        self.page_bytes = bytes;
        self
    }
    /// Sets the default durability of commits.
    pub fn durability(mut self, d: Durability) -> Options {
        self.durability = d;
        self
    }
    /// Opens read-only.
    pub fn read_only(mut self, yes: bool) -> Options {
        self.read_only = yes;
        self
    }
    /// Creates the file if missing.
    pub fn create(mut self, yes: bool) -> Options {
        self.create = yes;
        self
    }
    /// Verifies checksums on every page read.
    pub fn verify_checksums(mut self, yes: bool) -> Options {
        self.verify_checksums = yes;
        self
    }
    /// Lets the kernel read ahead in the memory map (see [`Options::readahead`]).
    pub fn readahead(mut self, yes: bool) -> Options {
        self.readahead = yes;
        self
    }

    fn validate(&self) -> Result<()> {
        let p = self.page_bytes;
        if !(PAGE_BYTES_MIN..=PAGE_BYTES_MAX).contains(&p) || !p.is_power_of_two() {
            return Err(Error::InvalidOptions(format!(
                "page_bytes must be a power of two from {PAGE_BYTES_MIN} to {PAGE_BYTES_MAX}, got {p}"
            )));
        }
        Ok(())
    }
}

/// Readers and the snapshot they start from.
pub(crate) struct ReadState {
    pub(crate) current: Arc<Snapshot>,
    /// Snapshot txn -> number of live read transactions on it.
    pub(crate) readers: BTreeMap<u64, usize>,
}

/// State owned by whoever holds the write lock.
pub(crate) struct WriterState {
    /// Free set, page-buffer pool and writable mapping, lent to each write transaction.
    /// `None` only while a transaction holds them.
    pub(crate) carry: Option<Carry>,
    /// Meta slot holding the last durable commit; commits write the other one.
    pub(crate) durable_slot: u64,
    pub(crate) last_durable_txn: u64,
    /// Set by a failed sync or meta write: no more writes through this handle.
    pub(crate) poisoned: bool,
    /// The tables write transactions open (see `TableStates`).
    pub(crate) tables: crate::txn::TableStates,
}

pub(crate) struct Inner {
    pub(crate) storage: Arc<dyn Storage>,
    pub(crate) options: Options,
    pub(crate) page_bytes: u32,
    pub(crate) read: Mutex<ReadState>,
    /// Txn id of `read.current`, readable without the lock (for `ReadTxn::renew`).
    pub(crate) current_txn: AtomicU64,
    pub(crate) writer: Mutex<WriterState>,
    boot_id: Option<[u8; 16]>,
    /// The lock file's reader table, for handles on a real file (see `storage/lock.rs`).
    /// A read-only handle owns a slot in it; the writer reads every slot.
    pub(crate) lock: Option<LockTable>,
}

impl Inner {
    pub(crate) fn read_state(&self) -> MutexGuard<'_, ReadState> {
        // No code panics while holding this lock; recover the state if a panic ever did.
        self.read.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The reader table, if this is a read-only handle registered in one: its snapshots come
    /// from the file (a writer in another process may have committed), and the oldest of them
    /// is published in its slot.
    #[inline]
    pub(crate) fn shared_reader(&self) -> Option<&LockTable> {
        if self.options.read_only {
            self.lock.as_ref()
        } else {
            None
        }
    }

    /// Registers a reader on the newest committed snapshot and returns it.
    #[inline]
    pub(crate) fn register_reader(&self) -> Result<Arc<Snapshot>> {
        let mut rs = self.read_state();
        if let Some(lock) = self.shared_reader() {
            self.refresh_shared(&mut rs, lock)?;
        }
        let snap = rs.current.clone();
        *rs.readers.entry(snap.meta.txn).or_insert(0) += 1;
        Ok(snap)
    }

    /// Removes one reader of snapshot `txn`; in the shared table, the handle's slot follows
    /// its oldest remaining reader (raising it is always safe: every remaining reader is at
    /// least as new).
    #[inline]
    pub(crate) fn unregister_reader(&self, rs: &mut ReadState, txn: u64) {
        if let Some(n) = rs.readers.get_mut(&txn) {
            *n -= 1;
            if *n == 0 {
                rs.readers.remove(&txn);
                if let Some(lock) = self.shared_reader() {
                    lock.set_reader(oldest_reader(rs).unwrap_or(0));
                }
            }
        }
    }

    /// Whether a writer may have published a snapshot newer than `txn`, seen without a lock.
    #[inline]
    pub(crate) fn newer_than(&self, txn: u64) -> bool {
        match self.shared_reader() {
            Some(lock) => lock.published() > txn,
            None => self.current_txn.load(Ordering::Acquire) != txn,
        }
    }

    /// For a read-only handle beside a writer in another process: makes `rs.current` the
    /// newest committed snapshot and makes sure the handle's slot protects it before any
    /// reader uses it. The protocol (LMDB's) and why it is enough are in
    /// docs/design/concurrency.md: publish a txn in the slot, then re-read the writer's
    /// published txn; if it is not newer than the snapshot chosen, every writer that could
    /// miss the slot started from that snapshot or an older one, so it releases no page the
    /// snapshot reaches.
    /// Requires: `rs` is this handle's read state. While the handle has readers, its slot holds
    /// the oldest of them, which protects every newer snapshot too.
    pub(crate) fn refresh_shared(&self, rs: &mut ReadState, lock: &LockTable) -> Result<()> {
        let current = rs.current.meta.txn;
        // Fast path: nothing newer was published. No syscall.
        if lock.published() <= current {
            if !rs.readers.is_empty() {
                return Ok(());
            }
            lock.set_reader(current);
            if lock.published() <= current {
                return Ok(());
            }
        }
        let set_slot = rs.readers.is_empty();
        let r = newest_protected(&*self.storage, self.boot_id, lock, set_slot, current);
        let meta = match r {
            Ok(meta) => meta,
            Err(e) => {
                if rs.readers.is_empty() {
                    lock.set_reader(0);
                }
                return Err(e);
            }
        };
        if meta.txn != current {
            let needed = meta.page_count * meta.page_bytes as u64;
            let access = match rs.current.access().mapped_bytes() {
                Some(mapped) if mapped >= needed => rs.current.access().clone(),
                _ => Arc::new(map_access(
                    &self.storage,
                    needed,
                    Some(rs.current.access()),
                    self.options.readahead,
                )?),
            };
            rs.current = Arc::new(Snapshot::new(meta, access, self.options.verify_checksums));
            self.current_txn.store(meta.txn, Ordering::Release);
        }
        Ok(())
    }
}

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
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Database")
            .field("page_bytes", &self.inner.page_bytes)
            .finish()
    }
}

impl Database {
    /// Opens the database file at `path`, creating it if `options.create` allows.
    ///
    /// Beside the file, a lock file (`<path>-lock`, see [`crate::storage::lock_path`]) holds
    /// the reader table that processes share: a read-only handle can read while a writer in
    /// another process commits. One writing handle at a time: a second gets
    /// [`Error::DatabaseLocked`]. A read-only handle that cannot open the lock file (a
    /// read-only directory) falls back to a shared lock on the database, which excludes
    /// writers.
    pub fn open(path: impl AsRef<Path>, options: Options) -> Result<Database> {
        options.validate()?;
        let path = path.as_ref();
        let (storage, lock) = if options.read_only {
            // The database first, so that a missing one creates no lock file.
            let storage = FileStorage::open_with(path, true, false, FileLock::None)?;
            match LockTable::open(path) {
                Ok(mut lock) => {
                    lock.claim_slot()?;
                    (storage, Some(lock))
                }
                Err(e) if cannot_write(&e) => {
                    drop(storage);
                    (FileStorage::open(path, true, false)?, None)
                }
                Err(e) => return Err(e),
            }
        } else {
            let storage = FileStorage::open(path, false, options.create)?;
            (storage, Some(LockTable::open(path)?))
        };
        Self::open_inner(Arc::new(storage), options, lock)
    }

    /// Opens a database on any [`Storage`] backend (for example the fault-injecting one).
    /// There is no lock file: the caller guarantees that no other process writes the storage.
    pub fn open_storage(storage: Arc<dyn Storage>, options: Options) -> Result<Database> {
        Self::open_inner(storage, options, None)
    }

    fn open_inner(
        storage: Arc<dyn Storage>,
        options: Options,
        lock: Option<LockTable>,
    ) -> Result<Database> {
        options.validate()?;
        let boot_id = storage.boot_id();
        let file_bytes = storage.len()?;
        if file_bytes == 0 {
            if options.read_only {
                return Err(Error::NotADatabase);
            }
            create(&*storage, options.page_bytes, boot_id)?;
        }
        let file_bytes = storage.len()?;
        let (mut meta, mut slot) = choose_meta(&*storage, file_bytes, boot_id)?;
        let shared_reader = options.read_only && lock.is_some();
        if let (true, Some(lock)) = (shared_reader, lock.as_ref()) {
            // A writer in another process may be committing: choose the snapshot through the
            // reader protocol, so that the freelist checked below cannot be reused meanwhile.
            meta = newest_protected(&*storage, boot_id, lock, true, 0)?;
            slot = 0; // unused by a read-only handle
        }
        let access = Arc::new(map_access(
            &storage,
            meta.page_count * meta.page_bytes as u64,
            None,
            options.readahead,
        )?);
        let snap = Snapshot::new(meta, access, options.verify_checksums);
        let loaded = freelist_load(&snap);
        if let (true, Some(lock)) = (shared_reader, lock.as_ref()) {
            lock.set_reader(0);
        }
        let mut free = loaded?;
        let (durable_slot, last_durable_txn) = if meta.durable {
            (slot, meta.txn)
        } else {
            (1 - slot, meta.last_durable_txn)
        };
        if options.read_only {
            // A read-only handle never writes: its free set is only checked, not used.
            free = Default::default();
        } else {
            // Readers in other processes may hold snapshots: publish this commit as the
            // newest, then read their slots (in this order; see concurrency.md).
            let mut oldest = None;
            if let Some(lock) = lock.as_ref() {
                lock.publish(meta.txn);
                oldest = lock.oldest_reader().0;
            }
            free.release(oldest, last_durable_txn)?;
        }
        let inner = Inner {
            page_bytes: meta.page_bytes,
            current_txn: AtomicU64::new(meta.txn),
            read: Mutex::new(ReadState {
                current: Arc::new(snap),
                readers: BTreeMap::new(),
            }),
            writer: Mutex::new(WriterState {
                carry: Some(Carry::new(
                    free,
                    WriteMap::new(
                        storage.clone(),
                        meta.page_bytes as usize,
                        file_bytes,
                        !options.read_only,
                        options.readahead,
                    ),
                )),
                durable_slot,
                last_durable_txn,
                poisoned: false,
                tables: Default::default(),
            }),
            storage,
            options,
            boot_id,
            lock,
        };
        Ok(Database {
            inner: Arc::new(inner),
        })
    }

    /// Page size of this database.
    pub fn page_bytes(&self) -> u32 {
        self.inner.page_bytes
    }

    /// Starts a read transaction on the newest committed snapshot. Takes a short lock to
    /// register the reader; reads inside the transaction take none and make no syscall.
    ///
    /// On a read-only handle beside a writer in another process, the newest snapshot is found
    /// through the shared reader table: without a syscall when nothing was committed since the
    /// last look, with a read of the meta pages when something was.
    pub fn begin_read(&self) -> Result<ReadTxn> {
        ReadTxn::new(self.inner.clone())
    }

    /// Starts the write transaction, waiting while another one is in progress.
    pub fn begin_write(&self) -> Result<WriteTxn<'_>> {
        let guard = self.inner.writer.lock().unwrap_or_else(|e| e.into_inner());
        WriteTxn::new(self, guard)
    }

    /// Starts the write transaction, or fails with [`Error::WriteBusy`] if another is in
    /// progress.
    pub fn try_begin_write(&self) -> Result<WriteTxn<'_>> {
        let guard = match self.inner.writer.try_lock() {
            Ok(g) => g,
            Err(std::sync::TryLockError::WouldBlock) => return Err(Error::WriteBusy),
            Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
        };
        WriteTxn::new(self, guard)
    }

    /// Makes every earlier commit durable (a sync and a durable meta page), for callers that
    /// commit with `Durability::None` and want a durability point.
    pub fn sync(&self) -> Result<()> {
        let w = self.begin_write()?;
        w.commit_forced(Durability::Immediate, true)
    }

    /// Verifies the whole file: every page reachable from the newest snapshot or recorded as
    /// free is read and checksummed, every tree is checked for order, depth and counts, and
    /// every page is accounted for exactly once. Returns the first problem as
    /// [`Error::Corrupted`]; [`Database::verify_all`] lists them all.
    pub fn verify(&self) -> Result<crate::verify::VerifyReport> {
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
    pub fn verify_all(&self) -> Result<crate::verify::VerifyReport> {
        // A registered reader: the snapshot stays intact while it is checked, even with a
        // writer running in another process.
        let r = self.begin_read()?;
        Ok(crate::verify::verify(r.snapshot()))
    }

    /// Statistics of the newest snapshot: tree shape, pages by type, entries, space.
    pub fn stats(&self) -> Result<crate::verify::Stats> {
        let readers = self.inner.read_state().readers.values().sum();
        let r = self.begin_read()?;
        let mut stats = crate::verify::stats(r.snapshot())?;
        stats.file_bytes = self.inner.storage.len()?;
        stats.readers = readers;
        stats.other_readers = self.inner.lock.as_ref().map_or(0, |l| l.oldest_reader().1);
        Ok(stats)
    }

    /// What each page of the newest snapshot is (index = page id), for tests that damage pages
    /// of each kind. Not a stable API.
    #[doc(hidden)]
    pub fn page_roles(&self) -> Result<Vec<crate::verify::PageRole>> {
        let r = self.begin_read()?;
        crate::verify::page_roles(r.snapshot())
    }

    pub(crate) fn boot_id(&self) -> [u8; 16] {
        self.inner.boot_id.unwrap_or([0; 16])
    }
}

/// Writes the two meta slots of an empty database and syncs.
fn create(storage: &dyn Storage, page_bytes: u32, boot_id: Option<[u8; 16]>) -> Result<()> {
    let mut meta = Meta {
        txn: 1,
        page_bytes,
        page_count: 2,
        catalog: TableHeader::default(),
        freelist_head: PageRef::default(),
        freelist_pages: 0,
        last_durable_txn: 1,
        durable: true,
        boot_id: boot_id.unwrap_or([0; 16]),
    };
    // Both slot pages in full (zero beyond the meta fields), then the fields.
    storage.write_at(&vec![0u8; 2 * page_bytes as usize], 0)?;
    storage.write_at(&meta.encode(0), 0)?;
    meta.txn = 0;
    meta.last_durable_txn = 0;
    storage.write_at(&meta.encode(1), page_bytes as u64)?;
    storage.sync()?;
    Ok(())
}

/// Picks the meta slot to open from: the newest that is intact, fits in the file, and is
/// either durable or written during this boot (so its unsynced pages are in the page cache).
fn choose_meta(
    storage: &dyn Storage,
    file_bytes: u64,
    boot_id: Option<[u8; 16]>,
) -> Result<(Meta, u64)> {
    use crate::pager::MetaDefect;
    let head_bytes = crate::pager::META_END;
    let read = |offset: u64, len: usize| -> Option<Vec<u8>> {
        if offset + len as u64 > file_bytes {
            return None;
        }
        let mut buf = vec![0u8; len];
        storage.read_at(&mut buf, offset).ok().map(|_| buf)
    };
    // The page size is in each slot; slot 1 sits one page in, so try each possible size.
    let mut page_bytes = None;
    let mut newer_version = None;
    let mut candidates = vec![0u64];
    let mut size = PAGE_BYTES_MIN as u64;
    while size <= PAGE_BYTES_MAX as u64 {
        candidates.push(size);
        size *= 2;
    }
    for offset in candidates {
        let Some(head) = read(offset, head_bytes) else {
            continue;
        };
        match Meta::peek_page_bytes(&head) {
            Ok(ps) if offset == 0 || offset == ps as u64 => {
                page_bytes = Some(ps);
                break;
            }
            Err(MetaDefect::Version(v)) => newer_version = Some(v),
            _ => {}
        }
    }
    let Some(ps) = page_bytes else {
        return Err(match newer_version {
            Some(found) => Error::UnsupportedVersion {
                found,
                supported: crate::pager::FORMAT_VERSION,
            },
            None => Error::NotADatabase,
        });
    };
    let mut best: Option<(Meta, u64)> = None;
    let mut reasons = Vec::new();
    for slot in 0..2u64 {
        let Some(page) = read(slot * ps as u64, ps as usize) else {
            reasons.push(format!("slot {slot}: beyond end of file"));
            continue;
        };
        match Meta::decode(&page, slot) {
            Ok(m) => {
                let trusted = m.durable || (boot_id.is_some() && Some(m.boot_id) == boot_id);
                if !trusted {
                    reasons.push(format!("slot {slot}: unsynced commit from an earlier boot"));
                } else if m.page_count * ps as u64 > file_bytes {
                    reasons.push(format!("slot {slot}: file shorter than its page count"));
                } else if best.as_ref().is_none_or(|(b, _)| m.txn > b.txn) {
                    best = Some((m, slot));
                }
            }
            Err(MetaDefect::Version(found)) => {
                return Err(Error::UnsupportedVersion {
                    found,
                    supported: crate::pager::FORMAT_VERSION,
                })
            }
            Err(MetaDefect::NoMagic) => reasons.push(format!("slot {slot}: no magic")),
            Err(MetaDefect::Damaged(why)) => reasons.push(format!("slot {slot}: {why}")),
        }
    }
    best.ok_or_else(|| Error::corrupted(0, format!("no usable meta slot ({})", reasons.join("; "))))
}

/// A page access for a snapshot whose pages end at `needed_bytes`: the current mapping if it
/// covers them, a larger one if not, or buffered reads where the storage cannot be mapped.
pub(crate) fn map_access(
    storage: &Arc<dyn Storage>,
    needed_bytes: u64,
    current: Option<&Arc<Access>>,
    readahead: bool,
) -> Result<Access> {
    let mut len = MAP_BYTES_MIN;
    if let Some(cur) = current.and_then(|c| c.mapped_bytes()) {
        len = len.max(cur);
    }
    while len < needed_bytes {
        len *= 2;
    }
    match storage.map(len) {
        Some(map) => {
            let access = Access::Mapped(map?);
            access.advise_readahead(readahead);
            Ok(access)
        }
        None => Ok(Access::buffered(storage.clone())),
    }
}

/// What a commit produces, for `WriteTxn` to publish.
pub(crate) fn commit(
    inner: &Inner,
    boot_id: [u8; 16],
    guard: &mut WriterState,
    mut pages: WritePages,
    catalog: TableHeader,
    durability: Durability,
) -> Result<()> {
    let mut meta = match pages.prepare_commit(catalog) {
        Ok(m) => m,
        Err(e) => return Err(fail_commit(guard, pages, e, false)),
    };
    let page_bytes = inner.page_bytes as u64;
    // Unsynced commits cannot reuse pages the last durable commit reaches; once those add up,
    // this commit is made durable so that they can be released.
    let pinned_bytes = pages.free.pinned_pages() * page_bytes;
    let pinned_bytes_max = inner
        .options
        .pinned_bytes_max
        .max(meta.page_count * page_bytes / 4);
    let sync = durability == Durability::Immediate || pinned_bytes > pinned_bytes_max;
    meta.durable = sync;
    meta.boot_id = boot_id;
    meta.last_durable_txn = if sync {
        meta.txn
    } else {
        guard.last_durable_txn
    };
    let slot = 1 - guard.durable_slot;
    let storage = &*inner.storage;

    // 1. The commit's pages, to space no preserved snapshot can reach. A failure here leaves
    //    nothing visible, so the transaction is simply rolled back.
    let needed = meta.page_count * page_bytes;
    if let Err(e) = pages.write_out(storage) {
        return Err(fail_commit(guard, pages, e, false));
    }
    // 2. Sync them, then write and sync the meta page. A failure from here on may leave the
    //    disk in an unknown state (an fsync error can drop dirty pages), so the handle stops
    //    writing: fail-stop, as PostgreSQL does after the fsync-gate findings.
    let mut publish = || -> Result<()> {
        if sync {
            storage.sync()?;
        }
        pages.write_meta(&meta.encode(slot), slot * page_bytes, storage)?;
        if sync {
            storage.sync()?;
        }
        Ok(())
    };
    let publish = publish();
    if let Err(e) = publish {
        return Err(fail_commit(guard, pages, e, true));
    }
    if sync {
        guard.durable_slot = slot;
        guard.last_durable_txn = meta.txn;
    }
    let mut carry = pages.finish();

    // 3. Publish the snapshot to new readers.
    let mut rs = inner.read_state();
    // The writer's mapping, which readers then share, where there is one (it covers every
    // page this commit wrote); else the current read mapping, grown if needed.
    let shared = carry
        .wmap
        .access()
        .filter(|a| a.mapped_bytes().is_some_and(|m| m >= needed));
    let access = match (shared, rs.current.access().mapped_bytes()) {
        (Some(a), _) => a.clone(),
        (None, Some(mapped)) if mapped >= needed => rs.current.access().clone(),
        _ => match map_access(
            &inner.storage,
            needed,
            Some(rs.current.access()),
            inner.options.readahead,
        ) {
            Ok(a) => Arc::new(a),
            Err(e) => {
                // The commit is on disk but cannot be read through a new mapping; stop here
                // rather than publish a snapshot that cannot be read. Reopening reads it.
                guard.poisoned = true;
                guard.carry = Some(carry);
                return Err(e);
            }
        },
    };
    rs.current = Arc::new(Snapshot::new(meta, access, inner.options.verify_checksums));
    inner.current_txn.store(meta.txn, Ordering::Release);
    drop(rs);
    // ... and to readers in other processes. After the meta page is in the file, so that a
    // reader that sees this id finds the page.
    if let Some(lock) = inner.lock.as_ref() {
        lock.publish(meta.txn);
    }

    // 4. Give space at the end of the file back, once it is durably unused.
    if sync {
        carry.wmap.trim(needed);
    }
    guard.carry = Some(carry);
    Ok(())
}

/// Cleans up after a commit that failed: the free set is reloaded from the last committed
/// snapshot (which it equals by construction: each commit persists exactly its free set), so
/// the half-prepared commit leaves no trace. With `poison`, the handle refuses further writes.
fn fail_commit(guard: &mut WriterState, pages: WritePages, e: Error, poison: bool) -> Error {
    let base = pages.base.clone();
    let mut carry = pages.finish();
    carry.chain = None;
    match freelist_load(&base) {
        Ok(free) => carry.free = free,
        Err(_) => guard.poisoned = true,
    }
    guard.carry = Some(carry);
    if poison {
        guard.poisoned = true;
    }
    e
}

/// Oldest snapshot that a live reader of this handle holds, if any.
pub(crate) fn oldest_reader(rs: &ReadState) -> Option<u64> {
    rs.readers.keys().next().copied()
}

/// Reads the newest committed meta page from the file and, if `set_slot`, publishes it in
/// this handle's slot, retrying until no newer commit was published meanwhile. Never
/// returns a snapshot older than `floor`.
fn newest_protected(
    storage: &dyn Storage,
    boot_id: Option<[u8; 16]>,
    lock: &LockTable,
    set_slot: bool,
    floor: u64,
) -> Result<Meta> {
    let mut last_err = None;
    for _ in 0..crate::limits::READER_REGISTER_TRIES_MAX {
        // The file may have grown since the last look; a meta page whose pages it does not
        // hold yet is rejected by `choose_meta` and retried.
        let chosen = storage
            .len()
            .map_err(Error::from_io)
            .and_then(|len| choose_meta(storage, len, boot_id));
        match chosen {
            Ok((meta, _)) if meta.txn >= floor => {
                if set_slot {
                    lock.set_reader(meta.txn);
                }
                if lock.published() <= meta.txn {
                    return Ok(meta);
                }
            }
            Ok(_) => {}
            // A meta slot being rewritten reads as damaged for a moment; retry.
            Err(e @ Error::Corrupted { .. }) => last_err = Some(e),
            Err(e) => return Err(e),
        }
        std::thread::yield_now();
    }
    Err(last_err.unwrap_or_else(|| {
        Error::Io(std::io::Error::other(
            "could not register a reader: the writer kept publishing newer commits",
        ))
    }))
}

/// Whether an error means the lock file cannot be created or written here (a read-only
/// directory or file system, a full disk), so a read-only handle falls back to the v1 shared
/// lock.
fn cannot_write(e: &Error) -> bool {
    match e {
        Error::DiskFull => true,
        Error::Io(e) => {
            e.kind() == std::io::ErrorKind::PermissionDenied
                || e.kind() == std::io::ErrorKind::ReadOnlyFilesystem
                || e.raw_os_error() == Some(libc::EROFS)
        }
        _ => false,
    }
}

impl PageSource for Arc<Snapshot> {
    fn page(&self, id: u64) -> Result<&[u8]> {
        (**self).page(id)
    }
    fn run(&self, id: u64, pages: u64) -> Result<&[u8]> {
        (**self).run(id, pages)
    }
    fn page_bytes(&self) -> usize {
        (**self).page_bytes()
    }
    #[inline]
    fn prefetch_page(&self, id: u64) {
        self.prefetch_mapped_page(id);
    }
    #[inline]
    fn prefetch_head(&self, id: u64, lines: usize) {
        self.prefetch_mapped_head(id, lines);
    }
}
