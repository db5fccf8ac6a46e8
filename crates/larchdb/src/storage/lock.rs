//! The reader table that every process opening a database shares: a small lock file beside the
//! database (`<db>-lock`), mapped by each handle, as LMDB's `lock.mdb`. It holds the id of the
//! newest commit the writer published and one slot per read-only handle, naming the oldest
//! snapshot that handle's read transactions use. The writer takes the minimum over these slots
//! (and over its own process's readers) before it reuses pages; see docs/design/concurrency.md
//! for the protocol and its argument, docs/design/file-format.md for the layout.
//!
//! Promises:
//! - A slot is owned by whoever holds an OFD byte-range write lock on its bytes. The kernel
//!   drops that lock when the owner's descriptor is closed, so a killed process's slot is free
//!   for reuse at once, and a writer that meets a slot with a txn but no lock holder clears it:
//!   a dead reader never pins pages.
//! - Every handle holds a shared `flock` on the lock file while it lives. A handle that gets
//!   the exclusive lock instead is alone, so it may (and does) reinitialise the file: a corrupt,
//!   foreign or stale file is never trusted, and resetting it harms nobody. A file in use by
//!   others whose header is wrong is `Error::LockFileInvalid`.
//! - All shared words are 8-byte aligned `AtomicU64`s, accessed `SeqCst` but for the two
//!   log words (`publish_log`); nothing read from the file is used as an index or length.

use crate::error::{Error, Result};
use crate::limits::READERS_MAX;
use std::fs::{File, OpenOptions, TryLockError};
use std::io;
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Magic at byte 0 of the lock file.
pub(crate) const LOCK_MAGIC: [u8; 8] = *b"LARCHLCK";
/// Layout version of the lock file.
pub(crate) const LOCK_VERSION: u32 = 2;
/// Bytes of the header, and of each slot (a cache line, so that readers updating their slots
/// do not share lines).
pub(crate) const LOCK_HEADER_BYTES: usize = 64;
pub(crate) const LOCK_SLOT_BYTES: usize = 64;
/// Bytes of the writers' area after the slots (`T_*`).
pub(crate) const LOCK_WRITERS_BYTES: usize = 64;
/// Where the writers' area starts.
const LOCK_WRITERS_AT: usize = LOCK_HEADER_BYTES + READERS_MAX * LOCK_SLOT_BYTES;
/// Length of the lock file.
pub(crate) const LOCK_FILE_BYTES: usize = LOCK_WRITERS_AT + LOCK_WRITERS_BYTES;

const H_MAGIC: usize = 0;
const H_VERSION: usize = 8;
const H_SLOTS: usize = 12;
const H_SLOT_BYTES: usize = 16;
const H_HEADER_BYTES: usize = 20;
const H_PUBLISHED: usize = 24;
const H_SLOTS_USED: usize = 32;
/// The newest commit a writing handle published through its log, and the log position after
/// its record (0, 0: none, or a writer that does not write the log). Zero in a file written by
/// an older build, which never follows the log.
const H_LOG_TXN: usize = 40;
const H_LOG_END: usize = 48;
/// A log position the writer's log was synced past (the end of records a sync made durable):
/// an open that reads the log back to an earlier end knows the log lost durable records
/// (`engine::log`, `Shortfall`). Kept when the file is reset, so that it survives the writer's
/// crash until the next writer opens. Zero in a file written by an older build: no claim.
const H_LOG_SYNCED: usize = 56;
/// The writers' doorbell (a 32-bit futex word, in the writers' area): a writing handle that
/// waits for the database rings it (adds one and wakes its waiters), and the handle that
/// holds the database waits on it (`engine::owner`).
const T_DOORBELL: usize = LOCK_WRITERS_AT;
/// The byte on which each writing handle waiting for the database holds an OFD read lock
/// while it waits: the kernel drops it with the waiter, so a killed waiter leaves no request.
const T_WAITING: usize = LOCK_WRITERS_AT + 8;
/// The log end at which the last writing handle gave the file to another after a durable
/// checkpoint, its log intact and nothing appended past that end (0: none, or the file was
/// taken since): the next writer's open need not zero the rest of that segment
/// (`Log::close_tail`). Set by `engine::owner`'s handover, cleared by every writer's open.
const T_HANDED_AT: usize = LOCK_WRITERS_AT + 16;
const S_TXN: usize = 0;
const S_PID: usize = 8;

const _: () = assert!(H_PUBLISHED.is_multiple_of(8) && LOCK_HEADER_BYTES.is_multiple_of(8));
const _: () = assert!(H_LOG_TXN.is_multiple_of(8) && H_LOG_SYNCED + 8 <= LOCK_HEADER_BYTES);
const _: () = assert!(LOCK_SLOT_BYTES.is_multiple_of(8) && S_PID + 8 <= LOCK_SLOT_BYTES);
const _: () = assert!(T_DOORBELL.is_multiple_of(8) && T_HANDED_AT + 8 <= LOCK_FILE_BYTES);
// The shared words are native-endian atomics; the documented layout is little-endian.
#[cfg(not(target_endian = "little"))]
compile_error!("the lock file layout assumes a little-endian target");

/// The write-ahead log of the database at `db` (`Options::log`): `<db>-log`, beside it.
///
/// ```
/// use larchdb::{storage::log_path, Database, Options};
/// use std::path::{Path, PathBuf};
/// assert_eq!(log_path(Path::new("/data/my.larch")), PathBuf::from("/data/my.larch-log"));
/// # let dir = tempfile::tempdir()?;
/// let path = dir.path().join("my.larch");
/// let db = Database::open(&path, Options::default().log(true))?;
/// db.put(b"k", b"v")?;
/// assert!(log_path(&path).exists());
/// # Ok::<(), larchdb::Error>(())
/// ```
pub fn log_path(db: &Path) -> PathBuf {
    let mut name = db.file_name().unwrap_or_default().to_os_string();
    name.push("-log");
    db.with_file_name(name)
}

/// The lock file of the database at `db`: `<db>-lock`, beside it.
///
/// ```
/// use larchdb::{storage::lock_path, Database, Options};
/// use std::path::{Path, PathBuf};
/// assert_eq!(lock_path(Path::new("/data/my.larch")), PathBuf::from("/data/my.larch-lock"));
/// # let dir = tempfile::tempdir()?;
/// let path = dir.path().join("my.larch");
/// let db = Database::open(&path, Options::default())?;
/// assert!(lock_path(&path).exists());
/// # Ok::<(), larchdb::Error>(())
/// ```
pub fn lock_path(db: &Path) -> PathBuf {
    let mut name = db.file_name().unwrap_or_default().to_os_string();
    name.push("-lock");
    db.with_file_name(name)
}

/// One handle's view of the lock file: its descriptor (which carries the handle's flock and,
/// for a read-only handle, the OFD lock on its slot) and the shared mapping.
pub(crate) struct LockTable {
    file: File,
    /// The lock file's path, for errors.
    path: PathBuf,
    map: memmap2::MmapRaw,
    /// The slot this handle owns (read-only handles, and a writing handle closed while its
    /// read transactions live on: `Database`'s drop), if any.
    own: std::sync::OnceLock<usize>,
    /// This handle found the file unused and reset it: no other handle, and so no writer, has
    /// the database open.
    alone: bool,
}

impl std::fmt::Debug for LockTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockTable").field("own", &self.own).finish()
    }
}

impl LockTable {
    /// Opens (creating if needed) the lock file of the database at `db`, initialising it when
    /// this handle is its only user. I/O errors are returned as `Error::Io` (naming the lock file), or `DiskFull`, so
    /// that a read-only caller can tell a file system it cannot write to.
    pub(crate) fn open(db: &Path) -> Result<LockTable> {
        let path = lock_path(db);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| Error::io_at("open", &path, e))?;
        let mut alone = false;
        match file.try_lock() {
            Ok(()) => {
                // Alone: nobody maps the file, so resetting it cannot harm a live handle.
                alone = true;
                init(&file).map_err(|e| Error::io_at("write", &path, e))?;
                // Converting to shared is not atomic, but no handle uses the file before it
                // holds the shared lock, and whoever slips in between re-initialises an unused
                // file to the same state.
                file.unlock().map_err(|e| Error::io_at("lock", &path, e))?;
                file.lock_shared()
                    .map_err(|e| Error::io_at("lock", &path, e))?;
            }
            Err(TryLockError::WouldBlock) => {
                // Blocks only while another handle initialises the file (it holds the
                // exclusive lock for that).
                file.lock_shared()
                    .map_err(|e| Error::io_at("lock", &path, e))?;
            }
            Err(TryLockError::Error(e)) => return Err(Error::io_at("lock", &path, e)),
        }
        validate(&file, &path)?;
        let map = memmap2::MmapOptions::new()
            .len(LOCK_FILE_BYTES)
            .map_raw(&file)
            .map_err(|e| Error::io_at("map", &path, e))?;
        Ok(LockTable {
            file,
            path,
            map,
            own: std::sync::OnceLock::new(),
            alone,
        })
    }

    /// The shared word at `offset`. Requires: `offset + 8 <= LOCK_FILE_BYTES`, a multiple of 8.
    fn word(&self, offset: usize) -> &AtomicU64 {
        assert!(offset.is_multiple_of(8) && offset + 8 <= self.map.len());
        // SAFETY: the mapping is LOCK_FILE_BYTES long (checked against the file length in
        // `validate`, and the file is never shortened while any handle holds the shared flock),
        // page-aligned, and `offset` is in bounds and 8-byte aligned (asserted), so the pointer
        // is valid and aligned for an AtomicU64 for as long as `self.map` lives, which bounds
        // the returned reference. Every process accesses these words only atomically.
        unsafe { &*(self.map.as_ptr().add(offset) as *const AtomicU64) }
    }

    fn slot_word(&self, slot: usize, field: usize) -> &AtomicU64 {
        self.word(LOCK_HEADER_BYTES + slot * LOCK_SLOT_BYTES + field)
    }

    /// Id of the newest commit the writer published (0: none since the file was initialised).
    pub(crate) fn published(&self) -> u64 {
        self.word(H_PUBLISHED).load(Ordering::SeqCst)
    }

    /// Publishes commit `txn` as the newest. Called by the writer after the commit's meta page
    /// is in the file, and when it opens.
    pub(crate) fn publish(&self, txn: u64) {
        self.word(H_PUBLISHED).store(txn, Ordering::SeqCst)
    }

    /// Publishes commit `txn`, committed through the log, whose record ends at log position
    /// `end`: every record before `end` is in the log file (the page cache at least), so a
    /// read-only handle in another process may read them (`engine::readers`, following the
    /// log). The end is stored first, so a reader that loads the txn and then the end finds
    /// the txn's record before the end it loads. `(0, 0)`: this writer publishes nothing
    /// through the log.
    ///
    /// Release stores (a plain store on x86, where a `SeqCst` one is a locked exchange, on
    /// every commit): a reader that acquires the txn sees the end stored before it, and the
    /// records' bytes stored into the log's mapping before both. Nothing else is ordered
    /// against these words: the reader protocol's argument uses `published` and the slots.
    pub(crate) fn publish_log(&self, txn: u64, end: u64) {
        self.word(H_LOG_END).store(end, Ordering::Release);
        self.word(H_LOG_TXN).store(txn, Ordering::Release);
    }

    /// Records that the log was synced past position `synced` (`H_LOG_SYNCED`). A writer's
    /// open sets it to where its log was read back to, and each commit through the log raises
    /// it after a sync; 0 says nothing (a writer without a log).
    pub(crate) fn set_log_synced(&self, synced: u64) {
        self.word(H_LOG_SYNCED).store(synced, Ordering::Relaxed);
    }

    /// Makes `log_synced` durable (the lock file is otherwise never synced): done where the
    /// position goes back (a new log, whose positions start again at 0, or an open that gave
    /// up the end of its log), so that a power loss cannot bring back a higher claim about an
    /// older log.
    pub(crate) fn sync_log_synced(&self) -> Result<()> {
        self.map
            .flush_range(0, LOCK_HEADER_BYTES)
            .map_err(|e| Error::io_at("sync", &self.path, e))
    }

    /// The position the last writer's log was synced past, as it last recorded (0: no claim).
    pub(crate) fn log_synced(&self) -> u64 {
        self.word(H_LOG_SYNCED).load(Ordering::Relaxed)
    }

    /// The log end the last writer handed the file over at (`T_HANDED_AT`), if it did.
    pub(crate) fn handed_at(&self) -> Option<u64> {
        Some(self.word(T_HANDED_AT).load(Ordering::SeqCst)).filter(|&end| end != 0)
    }

    /// Records the log end a writer hands the file over at (0: none).
    pub(crate) fn set_handed_at(&self, end: u64) {
        self.word(T_HANDED_AT).store(end, Ordering::SeqCst)
    }

    /// The writers' doorbell (`T_DOORBELL`).
    fn doorbell(&self) -> &std::sync::atomic::AtomicU32 {
        // SAFETY: as `word`: in bounds (asserted at compile time), 8-byte aligned, valid for as
        // long as `self.map` lives; every process accesses the word only atomically.
        unsafe { &*(self.map.as_ptr().add(T_DOORBELL) as *const std::sync::atomic::AtomicU32) }
    }

    /// The doorbell's count, for `wait_for_bell`.
    pub(crate) fn bell(&self) -> u32 {
        self.doorbell().load(Ordering::SeqCst)
    }

    /// Rings the writers' doorbell: wakes the handle that holds the database (it then looks
    /// for waiting writers, `writer_waiting`) and anything else waiting on the bell.
    pub(crate) fn ring(&self) {
        self.doorbell().fetch_add(1, Ordering::SeqCst);
        futex_wake(self.doorbell());
    }

    /// Waits until the doorbell's count is no longer `seen` (at once if it is not), or a
    /// spurious wake-up.
    pub(crate) fn wait_for_bell(&self, seen: u32) {
        futex_wait(self.doorbell(), seen);
    }

    /// Marks this handle as waiting for the database (`on`), or no longer: an OFD read lock
    /// on the waiting byte, which the kernel drops with the descriptor.
    pub(crate) fn mark_waiting(&self, on: bool) -> Result<()> {
        let kind = if on { libc::F_RDLCK } else { libc::F_UNLCK };
        ofd_range(&self.file, libc::F_OFD_SETLKW, kind, T_WAITING, 1)
            .map(|_| ())
            .map_err(|e| Error::io_at("lock", &self.path, e))
    }

    /// Whether a writing handle other than this one waits for the database (`mark_waiting`).
    /// An error counts as one: giving the database back costs time, never data.
    pub(crate) fn writer_waiting(&self) -> bool {
        ofd_range(&self.file, libc::F_OFD_GETLK, libc::F_WRLCK, T_WAITING, 1).unwrap_or(true)
    }

    /// Whether this handle found the lock file unused when it opened it (it reset it): no
    /// other handle had the database open then.
    pub(crate) fn alone(&self) -> bool {
        self.alone
    }

    /// The newest commit published through the log (0: none), without the end.
    pub(crate) fn log_txn(&self) -> u64 {
        self.word(H_LOG_TXN).load(Ordering::Acquire)
    }

    /// The newest commit published through the log and a log position at or after the end
    /// of its record (`publish_log`).
    pub(crate) fn log_published(&self) -> (u64, u64) {
        let txn = self.word(H_LOG_TXN).load(Ordering::Acquire);
        (txn, self.word(H_LOG_END).load(Ordering::Acquire))
    }

    /// The log end a read-only handle reads up to: the one published, if a writer that writes
    /// the log has published since the file was reset.
    pub(crate) fn log_bound(&self) -> Option<u64> {
        let (txn, end) = self.log_published();
        (txn > 0).then_some(end)
    }

    /// Slots to scan: one past the highest slot ever claimed since initialisation, never
    /// more than the table holds (the shared word is not trusted beyond that).
    fn slots_used(&self) -> usize {
        let used = self.word(H_SLOTS_USED).load(Ordering::SeqCst);
        used.min(READERS_MAX as u64) as usize
    }

    /// Claims a free slot for this handle: the first one whose OFD lock is free. A slot left by
    /// a killed process has a free lock, so it is simply taken over.
    pub(crate) fn claim_slot(&self) -> Result<()> {
        if self.own.get().is_some() {
            return Ok(());
        }
        for slot in 0..READERS_MAX {
            if ofd_lock(&self.file, slot, true).map_err(|e| Error::io_at("lock", &self.path, e))? {
                self.slot_word(slot, S_TXN).store(0, Ordering::SeqCst);
                self.slot_word(slot, S_PID)
                    .store(std::process::id() as u64, Ordering::SeqCst);
                self.word(H_SLOTS_USED)
                    .fetch_max(slot as u64 + 1, Ordering::SeqCst);
                if self.own.set(slot).is_err() {
                    // Claimed meanwhile by another caller: this slot goes back.
                    self.slot_word(slot, S_PID).store(0, Ordering::SeqCst);
                    let _ = ofd_lock(&self.file, slot, false);
                }
                return Ok(());
            }
        }
        Err(Error::ReadersFull { max: READERS_MAX })
    }

    /// Sets this handle's slot to `txn`, the oldest snapshot its readers use (0: none).
    pub(crate) fn set_reader(&self, txn: u64) {
        if let Some(&slot) = self.own.get() {
            self.slot_word(slot, S_TXN).store(txn, Ordering::SeqCst);
        }
    }

    /// The oldest snapshot registered by other handles, and how many handles have one. A slot
    /// with a txn whose lock nobody holds belongs to a dead process: it is cleared here.
    pub(crate) fn oldest_reader(&self) -> (Option<u64>, usize) {
        let mut oldest: Option<u64> = None;
        let mut live = 0;
        for slot in 0..self.slots_used() {
            if let Some(txn) = self.live_reader(slot) {
                live += 1;
                oldest = Some(oldest.map_or(txn, |o| o.min(txn)));
            }
        }
        (oldest, live)
    }

    /// The other handles with a live read transaction: (process id, oldest snapshot), in slot
    /// order. Dead slots are cleared as by `oldest_reader`.
    pub(crate) fn readers(&self) -> Vec<(u32, u64)> {
        (0..self.slots_used())
            .filter_map(|slot| {
                let txn = self.live_reader(slot)?;
                let pid = self.slot_word(slot, S_PID).load(Ordering::SeqCst);
                Some((u32::try_from(pid).unwrap_or(0), txn))
            })
            .collect()
    }

    /// The snapshot slot `slot` of another handle holds, if that handle is alive. Taking the
    /// slot's lock succeeds only if no live handle owns it; an error counts as alive: keeping
    /// pages too long is safe, reusing them is not.
    fn live_reader(&self, slot: usize) -> Option<u64> {
        if Some(&slot) == self.own.get() {
            return None;
        }
        let txn = self.slot_word(slot, S_TXN).load(Ordering::SeqCst);
        if txn == 0 {
            return None;
        }
        if let Ok(true) = ofd_lock(&self.file, slot, true) {
            self.slot_word(slot, S_TXN).store(0, Ordering::SeqCst);
            self.slot_word(slot, S_PID).store(0, Ordering::SeqCst);
            let _ = ofd_lock(&self.file, slot, false);
            return None;
        }
        Some(txn)
    }
}

impl Drop for LockTable {
    fn drop(&mut self) {
        if let Some(&slot) = self.own.get() {
            self.slot_word(slot, S_TXN).store(0, Ordering::SeqCst);
            self.slot_word(slot, S_PID).store(0, Ordering::SeqCst);
        }
        // Closing the descriptor drops the slot's OFD lock and the flock.
    }
}

/// Resets the lock file: the header, every slot empty, the log's synced position kept
/// (`H_LOG_SYNCED`). Requires: the exclusive flock.
/// The whole image is written, never left to `set_len`: a hole would be allocated only when
/// a slot is first stored through the mapping, and on a full disk that is a SIGBUS. A write
/// fails with ENOSPC instead, and rewriting a file that already has its blocks needs no space.
fn init(file: &File) -> io::Result<()> {
    let mut image = vec![0u8; LOCK_FILE_BYTES];
    // The last writer's synced position survives the reset, if the file is one of this layout.
    let mut old = [0u8; LOCK_HEADER_BYTES];
    if file.read_exact_at(&mut old, 0).is_ok()
        && old[H_MAGIC..H_MAGIC + 8] == LOCK_MAGIC
        && old[H_VERSION..H_VERSION + 4] == LOCK_VERSION.to_le_bytes()
    {
        image[H_LOG_SYNCED..H_LOG_SYNCED + 8].copy_from_slice(&old[H_LOG_SYNCED..H_LOG_SYNCED + 8]);
    }
    image[H_MAGIC..H_MAGIC + 8].copy_from_slice(&LOCK_MAGIC);
    image[H_VERSION..H_VERSION + 4].copy_from_slice(&LOCK_VERSION.to_le_bytes());
    image[H_SLOTS..H_SLOTS + 4].copy_from_slice(&(READERS_MAX as u32).to_le_bytes());
    image[H_SLOT_BYTES..H_SLOT_BYTES + 4].copy_from_slice(&(LOCK_SLOT_BYTES as u32).to_le_bytes());
    image[H_HEADER_BYTES..H_HEADER_BYTES + 4]
        .copy_from_slice(&(LOCK_HEADER_BYTES as u32).to_le_bytes());
    file.write_all_at(&image, 0)?;
    file.set_len(LOCK_FILE_BYTES as u64)
}

/// Checks the header of a lock file that other handles use.
fn validate(file: &File, path: &Path) -> Result<()> {
    let bad = |why: String| Error::LockFileInvalid(format!("{}: {why}", path.display()));
    let len = file
        .metadata()
        .map_err(|e| Error::io_at("stat", path, e))?
        .len();
    if len != LOCK_FILE_BYTES as u64 {
        return Err(bad(format!(
            "length {len}, expected {LOCK_FILE_BYTES} (in use by another process, so it is \
             not reset)"
        )));
    }
    let mut h = [0u8; LOCK_HEADER_BYTES];
    file.read_exact_at(&mut h, 0)
        .map_err(|e| Error::io_at("read", path, e))?;
    let u32_at = |at: usize| u32::from_le_bytes([h[at], h[at + 1], h[at + 2], h[at + 3]]);
    if h[H_MAGIC..H_MAGIC + 8] != LOCK_MAGIC {
        return Err(bad("no Larch lock file magic".into()));
    }
    let fields = (
        u32_at(H_VERSION),
        u32_at(H_SLOTS),
        u32_at(H_SLOT_BYTES),
        u32_at(H_HEADER_BYTES),
    );
    let expected = (
        LOCK_VERSION,
        READERS_MAX as u32,
        LOCK_SLOT_BYTES as u32,
        LOCK_HEADER_BYTES as u32,
    );
    if fields != expected {
        return Err(bad(format!(
            "layout (version, slots, slot bytes, header bytes) {fields:?}, this build uses \
             {expected:?}"
        )));
    }
    Ok(())
}

/// Takes (`lock`) or drops the OFD write lock on `slot`'s bytes without waiting. Returns
/// false if another open file description holds it.
fn ofd_lock(file: &File, slot: usize, lock: bool) -> io::Result<bool> {
    let kind = if lock { libc::F_WRLCK } else { libc::F_UNLCK };
    let at = LOCK_HEADER_BYTES + slot * LOCK_SLOT_BYTES;
    ofd_range(file, libc::F_OFD_SETLK, kind, at, LOCK_SLOT_BYTES)
}

/// One OFD lock command `cmd` of type `kind` on bytes `[at, at + len)` of the lock file.
/// `F_OFD_SETLK`/`F_OFD_SETLKW`: whether the lock was taken (false: another open file
/// description holds a conflicting one). `F_OFD_GETLK`: whether another open file description
/// holds a lock that conflicts with `kind`.
fn ofd_range(
    file: &File,
    cmd: libc::c_int,
    kind: libc::c_int,
    at: usize,
    len: usize,
) -> io::Result<bool> {
    // SAFETY: an all-zero `flock` is a valid value of this plain C struct.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = kind as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    fl.l_start = at as libc::off_t;
    fl.l_len = len as libc::off_t;
    // OFD locks require l_pid = 0 (it is already zero).
    loop {
        // SAFETY: `fl` is a valid, initialised flock that outlives the call; the descriptor
        // is owned by `file` and open.
        let rc = unsafe { libc::fcntl(file.as_raw_fd(), cmd, &mut fl) };
        if rc == 0 {
            return Ok(match cmd {
                libc::F_OFD_GETLK => fl.l_type != libc::F_UNLCK as libc::c_short,
                _ => true,
            });
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EAGAIN) | Some(libc::EACCES) => return Ok(false),
            _ => return Err(e),
        }
    }
}

/// Waits on the futex `word` (shared between processes: no `FUTEX_PRIVATE_FLAG`) while it
/// holds `seen`; returns at once if it does not, or on a wake-up or a signal.
fn futex_wait(word: &std::sync::atomic::AtomicU32, seen: u32) {
    // SAFETY: `word` is a valid, aligned 32-bit word in a shared mapping that outlives the
    // call; a null timeout waits without limit; the other arguments are unused.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT,
            seen,
            std::ptr::null::<libc::timespec>(),
        );
    }
}

/// Wakes every waiter on the futex `word`, in any process.
fn futex_wake(word: &std::sync::atomic::AtomicU32) {
    // SAFETY: as `futex_wait`; wakes at most `i32::MAX` waiters.
    unsafe {
        libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE, i32::MAX);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_claimed_released_and_reclaimed_from_the_dead() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("db");
        let writer = LockTable::open(&db).unwrap();
        let a = LockTable::open(&db).unwrap();
        let mut b = LockTable::open(&db).unwrap();
        a.claim_slot().unwrap();
        b.claim_slot().unwrap();
        assert_ne!(a.own, b.own);
        assert_eq!(writer.oldest_reader(), (None, 0));
        a.set_reader(7);
        b.set_reader(5);
        assert_eq!(writer.oldest_reader(), (Some(5), 2));
        assert_eq!(
            a.oldest_reader(),
            (Some(5), 1),
            "a handle skips its own slot"
        );
        // A slot whose owner is gone (its descriptor closed without clearing it, as after a
        // kill) is cleared by the next scan.
        let slot = b.own.take().unwrap(); // forgotten, so Drop does not clear it
        drop(b);
        assert_eq!(writer.slot_word(slot, S_TXN).load(Ordering::SeqCst), 5);
        assert_eq!(writer.oldest_reader(), (Some(7), 1));
        assert_eq!(writer.slot_word(slot, S_TXN).load(Ordering::SeqCst), 0);
        writer.publish(9);
        assert_eq!(a.published(), 9);
    }

    #[test]
    fn full_table_is_a_typed_error() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("db");
        let mut held = Vec::new();
        for _ in 0..READERS_MAX {
            let t = LockTable::open(&db).unwrap();
            t.claim_slot().unwrap();
            held.push(t);
        }
        let one_more = LockTable::open(&db).unwrap();
        assert!(matches!(
            one_more.claim_slot(),
            Err(Error::ReadersFull { max: READERS_MAX })
        ));
        held.pop();
        one_more.claim_slot().unwrap();
    }

    #[test]
    fn a_damaged_file_is_reset_when_alone_and_refused_when_shared() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("db");
        std::fs::write(lock_path(&db), b"junk").unwrap();
        let first = LockTable::open(&db).unwrap();
        assert_eq!(first.published(), 0);
        first.publish(3);
        // Damage it while in use: the next opener must refuse, not reset it.
        let f = OpenOptions::new().write(true).open(lock_path(&db)).unwrap();
        f.write_all_at(b"X", 0).unwrap();
        assert!(matches!(
            LockTable::open(&db),
            Err(Error::LockFileInvalid(_))
        ));
        drop(first);
        let again = LockTable::open(&db).unwrap();
        assert_eq!(again.published(), 0, "reset once nobody used it");
    }
}
