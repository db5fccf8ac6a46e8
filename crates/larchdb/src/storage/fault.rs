//! An in-memory storage backend for tests that models what a disk may do at a power loss, in
//! the style of SQLite's crash-test VFS: it remembers which writes were synced, and a simulated
//! crash keeps only those (optionally a random subset of the rest, with the last one torn).
//! It can also fail the Nth write or sync with EIO or ENOSPC, or cap the space available.
//! Where it allocates (the engine's frames), its writes behind wait until a drain, which fails
//! if their bytes changed meanwhile, so an engine that changed their bytes before the drain,
//! or wrote a meta field or synced before it, is caught.

use super::Storage;
use std::io;
use std::sync::{Arc, Mutex, MutexGuard};

/// Which error an injected fault returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultKind {
    /// `EIO`: the device failed.
    Eio,
    /// `ENOSPC`: the device is full.
    Enospc,
}

impl FaultKind {
    fn error(self) -> io::Error {
        match self {
            FaultKind::Eio => io::Error::from_raw_os_error(5),
            FaultKind::Enospc => io::Error::from_raw_os_error(28),
        }
    }
}

/// What a simulated crash keeps of the writes that were not synced.
#[derive(Clone, Copy, Debug)]
pub enum CrashMode {
    /// Power loss with a disk that persisted nothing unsynced.
    DropUnsynced,
    /// Power loss with a disk that persisted a random subset of the unsynced writes, applied in
    /// random order, the last applied one torn at a random 512-byte boundary.
    KeepRandom {
        /// Seed of the choice, so that a failing case can be replayed.
        seed: u64,
    },
    /// A process crash (kill -9): everything written reached the kernel, nothing is lost, and
    /// the boot id stays the same. What was not synced is still not durable: a power loss of
    /// the returned storage loses it unless a sync came first, as the page cache's dirty pages
    /// are lost with the machine after the process that wrote them is gone.
    ProcessOnly,
}

#[derive(Clone)]
enum Op {
    Write { offset: u64, data: Vec<u8> },
    SetLen(u64),
}

struct State {
    /// What reads see now.
    data: Vec<u8>,
    /// What survives a power loss: `data` as of the last successful sync.
    durable: Vec<u8>,
    /// Writes and length changes since the last sync, in order.
    unsynced: Vec<Op>,
    /// Writes, syncs and (where it allocates) allocations attempted so far.
    op_count: u64,
    /// The attempt number that fails, its error, and whether every later attempt fails too.
    fail: Option<(u64, FaultKind, bool)>,
    /// Largest length the storage may grow to; growing past it is ENOSPC.
    space_bytes_max: Option<u64>,
    boot: u64,
    /// Set by a crash: the old handle no longer reaches the disk.
    dead: bool,
    /// How long each sync takes (a slow disk), spent before it takes effect.
    sync_delay: Option<std::time::Duration>,
    /// Syncs that succeeded.
    syncs: u64,
    /// Writebacks started (`Storage::start_writeback`), and the error every wait for one
    /// returns (`fail_writeback_waits`).
    writeback_starts: u64,
    fail_waits: Option<FaultKind>,
    /// `Storage::allocate` grows the storage and answers true (`FaultStorage::allocating`), so
    /// that the engine keeps its pages in frames where `Options::frames_bytes` asks for them.
    allocates: bool,
    /// The storage's name is durable (`sync_name`, or contents given by the test): without
    /// it, a power loss loses the whole storage, as a new file whose directory was never
    /// synced.
    named: bool,
    /// Writes behind not yet drained, where the storage allocates (and the engine keeps
    /// frames): the address and length of the caller's bytes, the offset, and a copy of the
    /// bytes as they were when the write started. The drain reads the caller's memory again,
    /// as a device reads a write's memory whenever it gets to it: bytes changed in between
    /// fail the drain (the caller broke `write_behind`'s contract). A crash drops them.
    behind: Vec<(usize, usize, u64, Vec<u8>)>,
    /// A drained write behind failed: every later drain fails the same way.
    behind_failed: Option<FaultKind>,
}

/// In-memory storage with fault injection. Clones share the same state, so a test keeps one
/// clone to drive faults while the database owns another.
#[derive(Clone)]
pub struct FaultStorage {
    state: Arc<Mutex<State>>,
}

impl Default for FaultStorage {
    fn default() -> Self {
        Self::new()
    }
}

impl FaultStorage {
    /// An empty storage.
    ///
    /// ```
    /// use larchdb::storage::FaultStorage;
    /// use larchdb::{Database, Options};
    /// use std::sync::Arc;
    /// let disk = FaultStorage::new();
    /// assert!(disk.contents().is_empty());
    /// // The database gets a clone; this one drives faults and inspects the bytes.
    /// let db = Database::open_storage(Arc::new(disk.clone()), Options::default())?;
    /// db.put(b"k", b"v")?;
    /// assert!(!disk.contents().is_empty());
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn new() -> FaultStorage {
        Self::with_contents(Vec::new(), 1, false)
    }

    fn with_contents(data: Vec<u8>, boot: u64, named: bool) -> FaultStorage {
        FaultStorage {
            state: Arc::new(Mutex::new(State {
                durable: data.clone(),
                data,
                unsynced: Vec::new(),
                op_count: 0,
                fail: None,
                space_bytes_max: None,
                boot,
                dead: false,
                sync_delay: None,
                syncs: 0,
                writeback_starts: 0,
                fail_waits: None,
                allocates: false,
                named,
                behind: Vec::new(),
                behind_failed: None,
            })),
        }
    }

    /// This storage with `Storage::allocate` answering that it grew (as a file system with
    /// `fallocate` does), so that a database opened on it with `Options::frames_bytes` keeps
    /// its pages in frames: the fault tests then reach the frames' write-out. Without it, the
    /// engine writes every page with `write_at` from buffers of its own, as on any storage that
    /// can neither allocate nor map. Storages a crash or `durable_copy` returns keep it.
    ///
    /// ```
    /// use larchdb::storage::FaultStorage;
    /// use larchdb::{Database, Options};
    /// use std::sync::Arc;
    /// let disk = FaultStorage::new().allocating();
    /// let options = Options::default().frames_bytes(64 << 20);
    /// let db = Database::open_storage(Arc::new(disk.clone()), options)?;
    /// db.put(b"k", b"v")?;
    /// db.checkpoint()?;
    /// assert_eq!(db.get(b"k")?, Some(b"v".to_vec()));
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn allocating(self) -> FaultStorage {
        self.lock().allocates = true;
        self
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding this lock can only come from a test assertion; the state is
        // still consistent, so recover it.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Number of writes and syncs attempted so far (and allocations, on an `allocating`
    /// storage).
    ///
    /// ```
    /// # use larchdb::storage::{CrashMode, FaultKind, FaultStorage};
    /// # use larchdb::{Database, Durability, Error, Options};
    /// # use std::sync::Arc;
    /// # let disk = FaultStorage::new();
    /// # let db = Database::open_storage(Arc::new(disk.clone()), Options::default())?;
    /// let before = disk.op_count();
    /// db.put(b"k", b"v")?;
    /// assert!(disk.op_count() > before); // its writes and syncs
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn op_count(&self) -> u64 {
        self.lock().op_count
    }

    /// Number of syncs that succeeded so far.
    ///
    /// ```
    /// # use larchdb::storage::{CrashMode, FaultKind, FaultStorage};
    /// # use larchdb::{Database, Durability, Error, Options};
    /// # use std::sync::Arc;
    /// # let disk = FaultStorage::new();
    /// let options = Options::default().durability(Durability::None);
    /// let db = Database::open_storage(Arc::new(disk.clone()), options)?;
    /// let before = disk.sync_count();
    /// db.put(b"k", b"v")?;
    /// assert_eq!(disk.sync_count(), before);
    /// db.sync()?;
    /// assert!(disk.sync_count() > before);
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn sync_count(&self) -> u64 {
        self.lock().syncs
    }

    /// Makes the `n`th write or sync from now (1 = the next one) fail with `kind`; with
    /// `sticky`, every later one fails too.
    ///
    /// ```
    /// # use larchdb::storage::{CrashMode, FaultKind, FaultStorage};
    /// # use larchdb::{Database, Durability, Error, Options};
    /// # use std::sync::Arc;
    /// # let disk = FaultStorage::new();
    /// # let db = Database::open_storage(Arc::new(disk.clone()), Options::default())?;
    /// db.put(b"k", b"v1")?;
    /// disk.fail_after(1, FaultKind::Eio, false);
    /// assert!(matches!(db.put(b"k", b"v2"), Err(Error::Io { .. })));
    /// assert_eq!(db.get(b"k")?, Some(b"v1".to_vec()));
    /// db.put(b"k", b"v3")?; // not sticky: the next write succeeds
    /// assert_eq!(db.get(b"k")?, Some(b"v3".to_vec()));
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn fail_after(&self, n: u64, kind: FaultKind, sticky: bool) {
        let mut s = self.lock();
        let at = s.op_count + n.max(1);
        s.fail = Some((at, kind, sticky));
    }

    /// Writebacks the engine started so far (`Storage::start_writeback`: a checkpoint's pages
    /// written back a few at a time beside readers that wait on the device). In this storage
    /// they do nothing else: only a sync makes writes durable.
    pub fn writeback_starts(&self) -> u64 {
        self.lock().writeback_starts
    }

    /// Makes every wait for a writeback (`Storage::wait_writeback`) fail with `kind`, or none
    /// (`None`). Waits are not counted among the writes and syncs `fail_after` counts.
    pub fn fail_writeback_waits(&self, kind: Option<FaultKind>) {
        self.lock().fail_waits = kind;
    }

    /// Removes any planned failure.
    ///
    /// ```
    /// # use larchdb::storage::{CrashMode, FaultKind, FaultStorage};
    /// # use larchdb::{Database, Durability, Error, Options};
    /// # use std::sync::Arc;
    /// # let disk = FaultStorage::new();
    /// # let db = Database::open_storage(Arc::new(disk.clone()), Options::default())?;
    /// disk.fail_after(1, FaultKind::Eio, true);
    /// disk.clear_faults();
    /// db.put(b"k", b"v")?;
    /// assert_eq!(db.get(b"k")?, Some(b"v".to_vec()));
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn clear_faults(&self) {
        self.lock().fail = None;
    }

    /// Makes every sync take `delay` before it takes effect (without holding up other
    /// operations meanwhile), as a disk with much to write does: what runs beside a sync
    /// (the engine syncs a checkpoint on a thread of its own) gets time to run.
    ///
    /// ```
    /// # use larchdb::storage::{CrashMode, FaultKind, FaultStorage};
    /// # use larchdb::{Database, Durability, Error, Options};
    /// # use std::sync::Arc;
    /// # let disk = FaultStorage::new();
    /// # let db = Database::open_storage(Arc::new(disk.clone()), Options::default())?;
    /// disk.set_sync_delay(Some(std::time::Duration::from_millis(5)));
    /// let before = disk.sync_count();
    /// db.put(b"k", b"v")?; // its syncs each take 5 ms longer
    /// assert!(disk.sync_count() > before);
    /// disk.set_sync_delay(None);
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn set_sync_delay(&self, delay: Option<std::time::Duration>) {
        self.lock().sync_delay = delay;
    }

    /// Caps the storage's length; a write or `set_len` past it fails with ENOSPC.
    ///
    /// ```
    /// # use larchdb::storage::{CrashMode, FaultKind, FaultStorage};
    /// # use larchdb::{Database, Durability, Error, Options};
    /// # use std::sync::Arc;
    /// # let disk = FaultStorage::new();
    /// # let db = Database::open_storage(Arc::new(disk.clone()), Options::default())?;
    /// db.put(b"small", b"v")?;
    /// disk.set_space_limit(Some(disk.contents().len() as u64));
    /// assert!(matches!(db.put(b"big", &[7u8; 100_000]), Err(Error::DiskFull)));
    /// assert_eq!(db.get(b"small")?, Some(b"v".to_vec()));
    /// disk.set_space_limit(None);
    /// db.put(b"big", &[7u8; 100_000])?;
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn set_space_limit(&self, bytes: Option<u64>) {
        self.lock().space_bytes_max = bytes;
    }

    /// A copy of the current contents (what reads see).
    ///
    /// ```
    /// # use larchdb::storage::{CrashMode, FaultKind, FaultStorage};
    /// # use larchdb::{Database, Durability, Error, Options};
    /// # use std::sync::Arc;
    /// # let disk = FaultStorage::new();
    /// # let db = Database::open_storage(Arc::new(disk.clone()), Options::default())?;
    /// db.put(b"key", b"hello larch")?;
    /// let bytes = disk.contents();
    /// assert_eq!(bytes.len() % db.page_bytes() as usize, 0);
    /// assert!(bytes.windows(11).any(|w| w == b"hello larch"));
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn contents(&self) -> Vec<u8> {
        self.lock().data.clone()
    }

    /// A copy of what a power loss would keep now: the contents as of the last sync.
    ///
    /// ```
    /// # use larchdb::storage::{CrashMode, FaultKind, FaultStorage};
    /// # use larchdb::{Database, Durability, Error, Options};
    /// # use std::sync::Arc;
    /// # let disk = FaultStorage::new();
    /// let options = Options::default().durability(Durability::None);
    /// let db = Database::open_storage(Arc::new(disk.clone()), options)?;
    /// db.put(b"k", b"v")?;
    /// assert_ne!(disk.durable_contents(), disk.contents());
    /// db.sync()?;
    /// assert_eq!(disk.durable_contents(), disk.contents());
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn durable_contents(&self) -> Vec<u8> {
        self.lock().durable.clone()
    }

    /// A new storage holding what a power loss would keep of this one now (its synced
    /// contents), leaving this one working: what a crash at this moment would reopen, while
    /// the workload goes on.
    ///
    /// ```
    /// # use larchdb::storage::{CrashMode, FaultKind, FaultStorage};
    /// # use larchdb::{Database, Durability, Error, Options};
    /// # use std::sync::Arc;
    /// # let disk = FaultStorage::new();
    /// # let db = Database::open_storage(Arc::new(disk.clone()), Options::default())?;
    /// db.put(b"a", b"1")?;
    /// let mut w = db.begin_write()?;
    /// w.default_table()?.put(b"b", b"2")?;
    /// w.commit_with(Durability::None)?;
    /// let copy = Database::open_storage(Arc::new(disk.durable_copy()), Options::default())?;
    /// assert_eq!(copy.get(b"a")?, Some(b"1".to_vec()));
    /// assert_eq!(copy.get(b"b")?, None);
    /// assert_eq!(db.get(b"b")?, Some(b"2".to_vec())); // the original goes on
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn durable_copy(&self) -> FaultStorage {
        let durable = self.durable_contents();
        let (boot, named, allocates) = {
            let s = self.lock();
            (s.boot, s.named, s.allocates)
        };
        let copy =
            FaultStorage::with_contents(if named { durable } else { Vec::new() }, boot + 1, named);
        copy.lock().allocates = allocates;
        copy
    }

    /// Replaces the contents, as if synced (for corruption tests).
    ///
    /// ```
    /// # use larchdb::storage::{CrashMode, FaultKind, FaultStorage};
    /// # use larchdb::{Database, Durability, Error, Options};
    /// # use std::sync::Arc;
    /// # let disk = FaultStorage::new();
    /// # let db = Database::open_storage(Arc::new(disk.clone()), Options::default())?;
    /// # db.put(b"k", b"v")?;
    /// let mut bytes = disk.contents();
    /// bytes[..2 * db.page_bytes() as usize].fill(0xab); // both meta pages
    /// let damaged = FaultStorage::new();
    /// damaged.set_contents(bytes);
    /// let r = Database::open_storage(Arc::new(damaged), Options::default());
    /// assert!(matches!(r, Err(Error::NotADatabase)));
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn set_contents(&self, bytes: Vec<u8>) {
        let mut s = self.lock();
        s.durable = bytes.clone();
        s.data = bytes;
        s.unsynced.clear();
        s.named = true;
    }

    /// Whether the storage's name is durable: `Storage::sync_name` was called (or the contents
    /// were given by `set_contents`). A power loss before that loses the whole storage.
    ///
    /// ```
    /// use larchdb::storage::FaultStorage;
    /// use larchdb::{Database, Options};
    /// use std::sync::Arc;
    /// let disk = FaultStorage::new();
    /// assert!(!disk.name_synced());
    /// let _db = Database::open_storage(Arc::new(disk.clone()), Options::default())?;
    /// // Creating the database made its name durable.
    /// assert!(disk.name_synced());
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn name_synced(&self) -> bool {
        self.lock().named
    }

    /// Simulates a crash. This handle (and its clones) stop working; the returned storage holds
    /// what the disk kept, with a new boot id unless the mode is `ProcessOnly`.
    ///
    /// ```
    /// # use larchdb::storage::{CrashMode, FaultKind, FaultStorage};
    /// # use larchdb::{Database, Durability, Error, Options};
    /// # use std::sync::Arc;
    /// # let disk = FaultStorage::new();
    /// let options = Options::default().durability(Durability::None);
    /// let db = Database::open_storage(Arc::new(disk.clone()), options)?;
    /// db.put(b"a", b"1")?;
    /// db.sync()?;
    /// db.put(b"b", b"2")?; // not synced
    /// let after = disk.crash(CrashMode::DropUnsynced);
    /// let db = Database::open_storage(Arc::new(after), Options::default())?;
    /// assert_eq!(db.get(b"a")?, Some(b"1".to_vec()));
    /// assert_eq!(db.get(b"b")?, None);
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn crash(&self, mode: CrashMode) -> FaultStorage {
        let mut s = self.lock();
        s.dead = true;
        // Writes behind in flight at the crash never reach the disk (nor is their memory
        // read: the process that lent it is gone).
        s.behind.clear();
        let named = s.named;
        let after = match mode {
            CrashMode::ProcessOnly => {
                let after = FaultStorage::with_contents(s.data.clone(), s.boot, named);
                {
                    let mut a = after.lock();
                    a.durable = s.durable.clone();
                    a.unsynced = s.unsynced.clone();
                }
                after
            }
            // A name never synced is lost with everything under it.
            _ if !named => FaultStorage::with_contents(Vec::new(), s.boot + 1, false),
            CrashMode::DropUnsynced => {
                FaultStorage::with_contents(s.durable.clone(), s.boot + 1, named)
            }
            CrashMode::KeepRandom { seed } => {
                let mut rng = SplitMix(seed);
                let mut kept: Vec<Op> = s
                    .unsynced
                    .iter()
                    .filter(|_| rng.next().is_multiple_of(2))
                    .cloned()
                    .collect();
                // Random order: the disk may persist writes in any order.
                for i in (1..kept.len()).rev() {
                    let j = (rng.next() % (i as u64 + 1)) as usize;
                    kept.swap(i, j);
                }
                let mut data = s.durable.clone();
                let last = kept.len().saturating_sub(1);
                for (i, op) in kept.into_iter().enumerate() {
                    match op {
                        Op::SetLen(len) => data.resize(len as usize, 0),
                        Op::Write {
                            offset,
                            data: mut bytes,
                        } => {
                            if i == last && bytes.len() > 512 {
                                let sectors = bytes.len() / 512;
                                let keep = (rng.next() % sectors as u64) as usize * 512;
                                bytes.truncate(keep);
                            }
                            apply_write(&mut data, offset, &bytes);
                        }
                    }
                }
                FaultStorage::with_contents(data, s.boot + 1, named)
            }
        };
        after.lock().allocates = s.allocates;
        after
    }

    /// Writes the writes behind, each an attempt as a `write_at`, the last started first:
    /// writes in flight at once land in any order, so two of the same bytes would leave the
    /// older. The first that fails drops the rest and fails every drain after it.
    fn drain_locked(s: &mut State) -> io::Result<()> {
        if let Some(kind) = s.behind_failed {
            return Err(kind.error());
        }
        if s.dead {
            return Err(io::Error::other("storage crashed"));
        }
        for (at, len, offset, bytes) in std::mem::take(&mut s.behind).into_iter().rev() {
            if let Err(e) = Self::attempt(s) {
                let kind = match e.raw_os_error() {
                    Some(libc::ENOSPC) => FaultKind::Enospc,
                    _ => FaultKind::Eio,
                };
                s.behind_failed = Some(kind);
                return Err(e);
            }
            // SAFETY: `write_behind`'s caller keeps these bytes valid until the drain.
            if unsafe { std::slice::from_raw_parts(at as *const u8, len) } != &bytes[..] {
                s.behind_failed = Some(FaultKind::Eio);
                return Err(io::Error::other(format!(
                    "the {len} bytes written behind at {offset} changed before the drain"
                )));
            }
            apply_write(&mut s.data, offset, &bytes);
            s.unsynced.push(Op::Write {
                offset,
                data: bytes,
            });
        }
        Ok(())
    }

    /// Counts an attempt and returns the planned failure, if this attempt is one.
    fn attempt(s: &mut State) -> io::Result<()> {
        if s.dead {
            return Err(io::Error::other("storage crashed"));
        }
        s.op_count += 1;
        if let Some((at, kind, sticky)) = s.fail {
            if s.op_count == at || (sticky && s.op_count > at) {
                return Err(kind.error());
            }
        }
        Ok(())
    }
}

fn apply_write(data: &mut Vec<u8>, offset: u64, bytes: &[u8]) {
    let end = offset as usize + bytes.len();
    if data.len() < end {
        data.resize(end, 0);
    }
    data[offset as usize..end].copy_from_slice(bytes);
}

/// A small deterministic generator, so that the crash model needs no dependency.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

impl Storage for FaultStorage {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let s = self.lock();
        if s.dead {
            return Err(io::Error::other("storage crashed"));
        }
        let start = usize::try_from(offset).map_err(|_| io::ErrorKind::UnexpectedEof)?;
        let end = start
            .checked_add(buf.len())
            .ok_or(io::ErrorKind::UnexpectedEof)?;
        if end > s.data.len() {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        buf.copy_from_slice(&s.data[start..end]);
        Ok(())
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        let mut s = self.lock();
        Self::drain_locked(&mut s)?;
        Self::attempt(&mut s)?;
        let end = offset + buf.len() as u64;
        if let Some(max) = s.space_bytes_max {
            if end > max && end > s.data.len() as u64 {
                return Err(FaultKind::Enospc.error());
            }
        }
        apply_write(&mut s.data, offset, buf);
        s.unsynced.push(Op::Write {
            offset,
            data: buf.to_vec(),
        });
        Ok(())
    }

    fn sync(&self) -> io::Result<()> {
        let delay = self.lock().sync_delay;
        if let Some(d) = delay {
            std::thread::sleep(d);
        }
        let mut s = self.lock();
        Self::drain_locked(&mut s)?;
        Self::attempt(&mut s)?;
        s.syncs += 1;
        let ops = std::mem::take(&mut s.unsynced);
        for op in ops {
            match op {
                Op::Write { offset, data } => apply_write(&mut s.durable, offset, &data),
                Op::SetLen(len) => s.durable.resize(len as usize, 0),
            }
        }
        Ok(())
    }

    unsafe fn write_behind(&self, writes: &[(*const u8, usize, u64)]) -> io::Result<()> {
        let mut s = self.lock();
        if !s.allocates {
            drop(s);
            for &(buf, len, offset) in writes {
                // SAFETY: the caller's requirement: `len` readable bytes at `buf`.
                self.write_at(unsafe { std::slice::from_raw_parts(buf, len) }, offset)?;
            }
            return Ok(());
        }
        if let Some(kind) = s.behind_failed {
            return Err(kind.error());
        }
        if s.dead {
            return Err(io::Error::other("storage crashed"));
        }
        s.behind.extend(writes.iter().map(|&(buf, len, offset)| {
            // SAFETY: the caller's requirement: `len` readable bytes at `buf`.
            let bytes = unsafe { std::slice::from_raw_parts(buf, len) }.to_vec();
            (buf as usize, len, offset, bytes)
        }));
        Ok(())
    }

    fn drain(&self) -> io::Result<()> {
        Self::drain_locked(&mut self.lock())
    }

    fn writes_behind(&self) -> bool {
        self.lock().allocates
    }

    fn start_writeback(&self, _offset: u64, _len: u64) -> io::Result<()> {
        let mut s = self.lock();
        if s.dead {
            return Err(io::Error::other("storage crashed"));
        }
        s.writeback_starts += 1;
        Ok(())
    }

    fn wait_writeback(&self, _offset: u64, _len: u64) -> io::Result<()> {
        let s = self.lock();
        if s.dead {
            return Err(io::Error::other("storage crashed"));
        }
        s.fail_waits.map_or(Ok(()), |k| Err(k.error()))
    }

    fn sync_name(&self) -> io::Result<()> {
        let mut s = self.lock();
        Self::attempt(&mut s)?;
        s.named = true;
        Ok(())
    }

    fn len(&self) -> io::Result<u64> {
        let s = self.lock();
        if s.dead {
            return Err(io::Error::other("storage crashed"));
        }
        Ok(s.data.len() as u64)
    }

    fn allocate(&self, len: u64) -> io::Result<bool> {
        let mut s = self.lock();
        if !s.allocates {
            return Ok(false);
        }
        Self::drain_locked(&mut s)?;
        // A metadata change that can fail as a write does (`fallocate`'s EIO or ENOSPC).
        Self::attempt(&mut s)?;
        if len <= s.data.len() as u64 {
            return Ok(true);
        }
        if let Some(max) = s.space_bytes_max {
            if len > max {
                return Err(FaultKind::Enospc.error());
            }
        }
        s.data.resize(len as usize, 0);
        s.unsynced.push(Op::SetLen(len));
        Ok(true)
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        let mut s = self.lock();
        Self::drain_locked(&mut s)?;
        if let Some(max) = s.space_bytes_max {
            if len > max && len > s.data.len() as u64 {
                return Err(FaultKind::Enospc.error());
            }
        }
        s.data.resize(len as usize, 0);
        s.unsynced.push(Op::SetLen(len));
        Ok(())
    }

    fn boot_id(&self) -> Option<[u8; 16]> {
        let boot = self.lock().boot;
        let mut id = [0u8; 16];
        id[..8].copy_from_slice(&boot.to_le_bytes());
        id[8] = 1; // never all zeros
        Some(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes behind land at the drain, last started first; bytes changed before it fail the
    /// drain and every one after; a crash drops those not drained; a storage that does not
    /// allocate writes them at once.
    #[test]
    fn writes_behind_land_at_the_drain_and_must_not_change_before_it() {
        let s = FaultStorage::new().allocating();
        assert!(s.writes_behind());
        s.write_at(&[0; 8192], 0).unwrap();
        let (a, b) = ([1u8; 4096], [2u8; 4096]);
        let writes = [(a.as_ptr(), 4096, 0), (b.as_ptr(), 4096, 0)];
        // SAFETY: `a` and `b` live, unchanged, past the drain.
        unsafe { s.write_behind(&writes) }.unwrap();
        let mut page = [9u8; 4096];
        s.read_at(&mut page, 0).unwrap();
        assert_eq!(page, [0; 4096], "not landed before the drain");
        s.drain().unwrap();
        s.read_at(&mut page, 0).unwrap();
        assert_eq!(
            page, [1; 4096],
            "two in flight at once: the older landed last"
        );

        let mut c = vec![3u8; 4096];
        // SAFETY: `c` lives past the drain (it changes: the drain must say so).
        unsafe { s.write_behind(&[(c.as_ptr(), 4096, 4096)]) }.unwrap();
        c[100] = 4;
        let e = s.drain().unwrap_err();
        assert!(e.to_string().contains("changed before the drain"), "{e}");
        assert!(s.drain().is_err() && s.write_at(&[1], 0).is_err() && s.sync().is_err());

        let s = FaultStorage::new().allocating();
        s.write_at(&[0; 4096], 0).unwrap();
        s.sync().unwrap();
        s.sync_name().unwrap();
        // SAFETY: `a` lives past the crash, which drops the write without reading it.
        unsafe { s.write_behind(&[(a.as_ptr(), 4096, 0)]) }.unwrap();
        let after = s.crash(CrashMode::ProcessOnly);
        after.read_at(&mut page, 0).unwrap();
        assert_eq!(page, [0; 4096], "dropped by the crash");

        let plain = FaultStorage::new();
        assert!(!plain.writes_behind());
        // SAFETY: `a` lives through the call, which writes at once.
        unsafe { plain.write_behind(&[(a.as_ptr(), 4096, 0)]) }.unwrap();
        plain.read_at(&mut page, 0).unwrap();
        assert_eq!(page, [1; 4096], "written at once");
    }
}
