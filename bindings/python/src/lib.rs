//! The `larch._larch` extension module: Larch from Python, in the shape of py-lmdb
//! (docs/design/python.md). `python/larch/__init__.py` re-exports it with `open()` and the
//! exception classes (`python/larch/_errors.py`).
//!
//! Objects and what they hold:
//!
//! - [`Environment`]: the `Arc<Database>` (dropped by `close()`), and weak references to its
//!   transactions, which `close()` ends first, as py-lmdb does.
//! - [`Transaction`]: a [`TxnCell`] shared with its cursors. A read transaction's state is an
//!   `Arc<ReadCore>` (the `ReadTxn`) with the tables it opened; a write transaction's is the
//!   `WriteTxn` and the `Arc<Database>` it borrows.
//! - [`Cursor`]: on a read transaction, its own `Arc<ReadCore>`, table and live iterator; on a
//!   write transaction, the current key and value, copied, and a seek per step.
//! - [`Snapshot`]: the exporter of a read transaction's `buffers=True` values: every
//!   `memoryview` of it holds it, and it holds the `Arc<ReadCore>`, so the bytes in the memory
//!   map stay valid for as long as any view of them lives, even past the transaction's end.

use larchdb::{Database, Durability, Options, ReadTable, ReadTxn, WriteTable, WriteTxn};
use pyo3::exceptions::PyTypeError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyDict, PyList, PyMemoryView, PyModule, PyString, PyTuple, PyType};
use std::borrow::Cow;
use std::ops::Bound as Edge;
use std::os::raw::c_int;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock, TryLockError, Weak};
use std::thread::ThreadId;

// ---------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------

/// `larch._errors`, where the exception classes are defined (in Python: several derive from
/// a built-in as well as from `larch.Error`, which PyO3's `create_exception!` cannot express).
static ERRORS: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

/// An exception of class `class` (a name in `larch._errors`) with `args`.
fn exception<A>(py: Python<'_>, class: &str, args: A) -> PyErr
where
    A: pyo3::PyErrArguments + Send + Sync + 'static,
{
    let module = match ERRORS.get_or_try_init(py, || {
        PyModule::import(py, "larch._errors").map(Bound::unbind)
    }) {
        Ok(m) => m.bind(py),
        Err(e) => return e,
    };
    match module
        .getattr(class)
        .and_then(|c| Ok(c.cast_into::<PyType>()?))
    {
        Ok(ty) => PyErr::from_type(ty, args),
        Err(e) => e,
    }
}

/// `larch.Error` (or the subclass `class`) with `message`: the binding's own errors.
fn error(py: Python<'_>, class: &str, message: impl Into<String>) -> PyErr {
    exception(py, class, (message.into(),))
}

/// The engine's error as the exception of its kind, carrying the engine's message.
fn engine_error(py: Python<'_>, e: larchdb::Error) -> PyErr {
    use larchdb::Error as E;
    let message = e.to_string();
    let class = match &e {
        E::Io { source, path, .. } => {
            let errno = source.raw_os_error().unwrap_or(match source.kind() {
                std::io::ErrorKind::AlreadyExists => EEXIST,
                std::io::ErrorKind::NotFound => ENOENT,
                std::io::ErrorKind::PermissionDenied => EACCES,
                _ => EIO,
            });
            let path = path.as_ref().map(|p| p.display().to_string());
            // Python's own subclass where there is one, as `open()` would raise.
            let class = match errno {
                EEXIST => "ExistsError",
                ENOENT => "MissingError",
                _ => "IoError",
            };
            return exception(py, class, (errno, message, path));
        }
        E::DiskFull => return exception(py, "DiskFullError", (ENOSPC, message)),
        E::Corrupted { .. } | E::CorruptedLog { .. } | E::WouldLoseData { .. } => "CorruptedError",
        E::NotADatabase => "InvalidError",
        E::UnsupportedVersion { .. } => "VersionMismatchError",
        E::DatabaseLocked | E::LockFileInvalid(_) => "LockError",
        E::WriteBusy => "BusyError",
        E::ReadOnly => "ReadonlyError",
        E::KeyTooLarge { .. } => "KeyTooLargeError",
        E::ValueTooLarge { .. } => "ValueTooLargeError",
        E::TableNotFound(_) => "NotFoundError",
        E::TableExists(_) => "TableExistsError",
        E::InvalidTableName(_) | E::InvalidOptions(_) => "InvalidParameterError",
        E::Poisoned => "PoisonedError",
        E::AppendOutOfOrder => "AppendOrderError",
        E::TxnFailed => "BadTxnError",
        E::DatabaseFull => "DatabaseFullError",
        E::ReadersFull { .. } => "ReadersFullError",
        E::Internal(_) => "InternalError",
        _ => "Error",
    };
    error(py, class, message)
}

/// Linux's `errno` values for the `OSError`s raised without one from the system.
const ENOSPC: i32 = 28;
const EIO: i32 = 5;
const EEXIST: i32 = 17;
const ENOENT: i32 = 2;
const EACCES: i32 = 13;

/// `Result<T, larchdb::Error>` into a `PyResult`.
trait OrRaise<T> {
    fn or_raise(self, py: Python<'_>) -> PyResult<T>;
}

impl<T> OrRaise<T> for larchdb::Result<T> {
    fn or_raise(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|e| engine_error(py, e))
    }
}

fn ended(py: Python<'_>) -> PyErr {
    error(
        py,
        "Error",
        "the transaction has ended (committed, aborted, or its environment closed)",
    )
}

// ---------------------------------------------------------------------------------------
// Arguments
// ---------------------------------------------------------------------------------------

/// A key or value argument: `bytes` (borrowed) or any object with the buffer protocol
/// (`bytearray`, `memoryview`, ...: copied). A `str` is refused, as py-lmdb refuses it: which
/// encoding is meant is the caller's to say.
fn bytes_arg<'a>(obj: &'a Bound<'_, PyAny>, what: &str) -> PyResult<Cow<'a, [u8]>> {
    if let Ok(b) = obj.cast::<PyBytes>() {
        return Ok(Cow::Borrowed(b.as_bytes()));
    }
    if obj.is_instance_of::<PyString>() {
        return Err(PyTypeError::new_err(format!(
            "{what} must be bytes or a buffer, not str (encode it, for example with .encode())"
        )));
    }
    match pyo3::buffer::PyBuffer::<u8>::get(obj) {
        Ok(buf) => Ok(Cow::Owned(buf.to_vec(obj.py())?)),
        Err(_) => Err(PyTypeError::new_err(format!(
            "{what} must be bytes or a buffer, not {}",
            obj.get_type().name()?
        ))),
    }
}

/// A table argument (`db=`): a [`Table`] from `Environment.open_db`, or `None` for the
/// transaction's own (from `begin(db=...)`).
fn table_arg(py: Python<'_>, db: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Option<Arc<str>>>> {
    match db {
        None => Ok(None),
        Some(d) if d.is_none() => Ok(None),
        Some(d) => match d.cast::<Table>() {
            Ok(t) => Ok(Some(t.get().name.clone())),
            Err(_) => Err(error(
                py,
                "InvalidParameterError",
                "db must be a table handle from Environment.open_db",
            )),
        },
    }
}

fn durability_arg(py: Python<'_>, d: Option<&str>) -> PyResult<Option<Durability>> {
    Ok(match d {
        None => None,
        Some("immediate") => Some(Durability::Immediate),
        Some("bounded") => Some(Durability::Bounded),
        Some("none") => Some(Durability::None),
        Some(other) => {
            return Err(error(
                py,
                "InvalidParameterError",
                format!("durability must be 'immediate', 'bounded' or 'none', not {other:?}"),
            ))
        }
    })
}

/// Lets a value that is not `Send` cross `Python::detach`, whose closure runs on the calling
/// thread (it only lets the GIL go meanwhile): nothing moves between threads.
struct SameThread<T>(T);
// SAFETY: `Python::detach` runs its closure on the thread that called it and returns there.
unsafe impl<T> Send for SameThread<T> {}

// ---------------------------------------------------------------------------------------
// Transactions' state
// ---------------------------------------------------------------------------------------

/// A read transaction, shared by its `Transaction`, its cursors and the buffers it returned.
struct ReadCore {
    txn: ReadTxn,
}

struct ReadState {
    /// Tables opened by this transaction, by name (`None`: the default table). Dropped before
    /// `core`, which they borrow.
    tables: Vec<(Option<Arc<str>>, ReadTable<'static>)>,
    core: Arc<ReadCore>,
    /// The exporter of `buffers=True` values, made at the first.
    snapshot: Option<Py<Snapshot>>,
}

struct WriteState {
    /// Borrows `*db` (as `'static`, see `begin`); dropped first.
    txn: WriteTxn<'static>,
    db: Arc<Database>,
}

enum TxnState {
    Read(ReadState),
    Write(Box<WriteState>),
    Done,
}

/// A transaction's state, shared with its cursors and its environment (which ends it at
/// `close()`).
struct TxnCell {
    state: Mutex<TxnState>,
    /// Set once the state is `Done`: read by read cursors without taking the lock.
    ended: AtomicBool,
    /// The thread that began a write transaction: the only one that may use it (the engine's
    /// `WriteTxn` holds its writer lock's guard, which is not `Send`). `None` for a read
    /// transaction, which any thread may use.
    owner: Option<ThreadId>,
}

// SAFETY: a `TxnCell` holding a `WriteTxn` is used only on its owner thread: every access goes
// through `Transaction::state`/`Transaction::writer`, which check `owner` first. The
// exceptions are ending it from another thread (`Environment.close`, or the garbage
// collector dropping the last reference there): the `WriteTxn` is then dropped there, which
// unlocks the engine's `std::sync::Mutex` from a thread other than the one that locked it.
// On Linux, the only platform Larch builds for, that mutex is a futex word with no owner: the
// unlock is an atomic store and a wake, valid from any thread (the `!Send` bound on the guard
// is for platforms whose native mutexes must be unlocked by their owner).
unsafe impl Send for TxnCell {}
// SAFETY: as above; the state is behind a mutex.
unsafe impl Sync for TxnCell {}

impl TxnCell {
    fn lock(&self) -> MutexGuard<'_, TxnState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Ends the transaction (an abort, unless already ended) and returns what it held, to be
    /// dropped by the caller (without the lock).
    fn end(&self) -> TxnState {
        let mut s = self.lock();
        self.ended.store(true, Ordering::Release);
        std::mem::replace(&mut *s, TxnState::Done)
    }
}

impl ReadState {
    /// The table `name` (`None`: the default table), opened once per transaction.
    fn table(&mut self, name: Option<&str>) -> larchdb::Result<&ReadTable<'static>> {
        if let Some(i) = self.tables.iter().position(|(n, _)| n.as_deref() == name) {
            return Ok(&self.tables[i].1);
        }
        let t = open_read_table(&self.core, name)?;
        self.tables.push((name.map(Arc::from), t));
        Ok(&self.tables.last().expect("just pushed").1)
    }
}

/// Opens table `name` of `core`'s snapshot, with the lifetime of `core`'s allocation.
fn open_read_table(
    core: &Arc<ReadCore>,
    name: Option<&str>,
) -> larchdb::Result<ReadTable<'static>> {
    let t = match name {
        Some(n) => core.txn.table(n)?,
        None => core.txn.default_table()?,
    };
    // SAFETY: the table borrows the `ReadTxn` inside `core`'s allocation, which does not move;
    // every holder of a `ReadTable<'static>` (`ReadState`, `ReadCursor`) holds an `Arc` of
    // that `ReadCore` in a field declared after the table, so the table is dropped first.
    Ok(unsafe { std::mem::transmute::<ReadTable<'_>, ReadTable<'static>>(t) })
}

/// A write transaction's table `name` for writing (the default table is created if needed).
fn write_table<'a>(
    w: &'a mut WriteTxn<'static>,
    name: Option<&str>,
) -> larchdb::Result<WriteTable<'a>> {
    match name {
        Some(n) => w.table(n),
        None => w.default_table(),
    }
}

/// A write transaction's table `name` for reading: as `write_table`, but a default table that
/// does not exist yet is `None` (empty) instead of being created by a read.
fn write_table_to_read<'a>(
    w: &'a mut WriteTxn<'static>,
    name: Option<&str>,
) -> larchdb::Result<Option<WriteTable<'a>>> {
    match name {
        Some(n) => w.table(n).map(Some),
        None => match w.table(larchdb::DEFAULT_TABLE) {
            Ok(t) => Ok(Some(t)),
            Err(larchdb::Error::TableNotFound(_)) => Ok(None),
            Err(e) => Err(e),
        },
    }
}

// ---------------------------------------------------------------------------------------
// Buffers
// ---------------------------------------------------------------------------------------

/// A read transaction's snapshot as the exporter of `buffers=True` reads: each such read is a
/// `memoryview` of this object, made by setting `next` to the bytes and asking Python for a
/// view, whose `__getbuffer__` hands out `next` (and clears it). Every view holds a reference
/// to this object, which holds the snapshot (`core`): the bytes stay valid for as long as any
/// view of them lives, even past the transaction's end. One exporter per snapshot, not one
/// per value: a view costs one object, as py-lmdb's (which are not kept valid).
#[pyclass(frozen, module = "larch")]
struct Snapshot {
    /// The bytes the next view exports: address and length. Set and used under the GIL,
    /// within one call (`value_out`); empty otherwise, so that a view made some other way
    /// (`memoryview(view.obj)`) exports nothing.
    next_addr: AtomicUsize,
    next_len: AtomicUsize,
    /// Keeps the snapshot alive: never read, only held.
    _core: Arc<ReadCore>,
}

impl Snapshot {
    fn new(py: Python<'_>, core: &Arc<ReadCore>) -> PyResult<Py<Snapshot>> {
        Py::new(
            py,
            Snapshot {
                next_addr: AtomicUsize::new(0),
                next_len: AtomicUsize::new(0),
                _core: core.clone(),
            },
        )
    }
}

#[pymethods]
impl Snapshot {
    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut ffi::Py_buffer,
        flags: c_int,
    ) -> PyResult<()> {
        let snap = slf.get();
        // Relaxed: set and read by the thread holding the GIL, within one call.
        // (Loads and stores, not swaps: a swap is a locked instruction, and perf put most of
        // this function's own samples on the two swaps.)
        let addr = snap.next_addr.load(Ordering::Relaxed);
        let len = snap.next_len.load(Ordering::Relaxed);
        snap.next_addr.store(0, Ordering::Relaxed);
        snap.next_len.store(0, Ordering::Relaxed);
        // An empty view still needs an address; any non-null one will do.
        let buf = if len == 0 {
            std::ptr::NonNull::<u8>::dangling().as_ptr()
        } else {
            addr as *mut u8
        };
        // SAFETY: `view` is the caller's; `addr..addr + len` lies in the snapshot `core` keeps
        // alive, and `PyBuffer_FillInfo` takes a reference to `slf` for the view.
        let r = unsafe {
            ffi::PyBuffer_FillInfo(
                view,
                slf.as_ptr(),
                buf as *mut std::ffi::c_void,
                len as ffi::Py_ssize_t,
                1,
                flags,
            )
        };
        if r == -1 {
            return Err(PyErr::fetch(slf.py()));
        }
        Ok(())
    }
}

/// The exporter of `core`'s values kept in `slot` (made at the first use), if `buffers`.
fn exporter<'py>(
    py: Python<'py>,
    slot: &mut Option<Py<Snapshot>>,
    core: &Arc<ReadCore>,
    buffers: bool,
) -> PyResult<Option<Bound<'py, Snapshot>>> {
    if !buffers {
        return Ok(None);
    }
    if slot.is_none() {
        *slot = Some(Snapshot::new(py, core)?);
    }
    Ok(slot.as_ref().map(|s| s.bind(py).clone()))
}

/// `bytes` of `data`, or with `buffers` a `memoryview`: of the snapshot's bytes through
/// `snap` (a read transaction's, `data` lies in it), or of a copy (a write transaction, whose
/// pages its next write may move).
fn value_out<'py>(
    py: Python<'py>,
    data: &[u8],
    buffers: bool,
    snap: Option<&Bound<'py, Snapshot>>,
) -> PyResult<Bound<'py, PyAny>> {
    if !buffers {
        return Ok(PyBytes::new(py, data).into_any());
    }
    match snap {
        Some(snap) => {
            let s = snap.get();
            s.next_addr.store(data.as_ptr() as usize, Ordering::Relaxed);
            s.next_len.store(data.len(), Ordering::Relaxed);
            Ok(PyMemoryView::from(snap.as_any())?.into_any())
        }
        None => Ok(PyMemoryView::from(PyBytes::new(py, data).as_any())?.into_any()),
    }
}

// ---------------------------------------------------------------------------------------
// Environment
// ---------------------------------------------------------------------------------------

/// An open database (py-lmdb's `Environment`); made by `larch.open()`.
#[pyclass(frozen, module = "larch")]
struct Environment {
    db: RwLock<Option<Arc<Database>>>,
    /// Live transactions (weakly), ended by `close()`; dead entries are pruned as it grows.
    txns: Mutex<Vec<Weak<TxnCell>>>,
    path: String,
    file: PathBuf,
    readonly: bool,
    page_bytes: u32,
    /// The options it was opened with that `flags()` reports.
    durability: Durability,
    readahead: Option<bool>,
}

impl Environment {
    fn database(&self, py: Python<'_>) -> PyResult<Arc<Database>> {
        match &*self.db.read().unwrap_or_else(|e| e.into_inner()) {
            Some(db) => Ok(db.clone()),
            None => Err(error(py, "Error", "the environment is closed")),
        }
    }

    /// Runs `f` on the database without the GIL (for calls that may take long or wait).
    fn detached<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&Database) -> larchdb::Result<T> + Send,
    ) -> PyResult<T> {
        let db = self.database(py)?;
        py.detach(move || f(&db)).or_raise(py)
    }

    fn track(&self, cell: &Arc<TxnCell>) {
        let mut txns = self.txns.lock().unwrap_or_else(|e| e.into_inner());
        if txns.len() >= 64 && txns.len().is_power_of_two() {
            txns.retain(|w| w.strong_count() > 0);
        }
        txns.push(Arc::downgrade(cell));
    }

    /// A write transaction of this thread that has not ended, if any (a second one would
    /// wait for it forever).
    fn writer_of_this_thread(&self) -> bool {
        let me = std::thread::current().id();
        let txns = self.txns.lock().unwrap_or_else(|e| e.into_inner());
        txns.iter()
            .filter_map(Weak::upgrade)
            .any(|c| c.owner == Some(me) && !c.ended.load(Ordering::Acquire))
    }
}

#[pymethods]
impl Environment {
    /// Opens (by default creates) the database file `file`; `larch.open()` is the documented
    /// way in (it maps py-lmdb's arguments onto these).
    #[new]
    #[pyo3(signature = (path, file, *, readonly=false, create=true, durability="immediate",
        log=true, page_size=None, readahead=None, verify_checksums=false,
        compact_on_close=true, checkpoint_thread=true, memory_budget=None,
        log_room_bytes=None, frames_bytes=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        path: String,
        file: PathBuf,
        readonly: bool,
        create: bool,
        durability: &str,
        log: bool,
        page_size: Option<u32>,
        readahead: Option<bool>,
        verify_checksums: bool,
        compact_on_close: bool,
        checkpoint_thread: bool,
        memory_budget: Option<u64>,
        log_room_bytes: Option<u64>,
        frames_bytes: Option<u64>,
    ) -> PyResult<Environment> {
        let mut options = Options::default()
            .read_only(readonly)
            .create(create)
            .log(log)
            .verify_checksums(verify_checksums)
            .compact_on_close(compact_on_close)
            .checkpoint_thread(checkpoint_thread);
        if let Some(yes) = readahead {
            options = options.readahead(yes);
        }
        let durability = durability_arg(py, Some(durability))?.unwrap_or_default();
        options = options.durability(durability);
        if let Some(p) = page_size {
            options = options.page_bytes(p);
        }
        if let Some(bytes) = memory_budget {
            options = options.memory_budget(bytes);
        }
        if let Some(bytes) = log_room_bytes {
            options = options.log_room_bytes(bytes);
        }
        if let Some(bytes) = frames_bytes {
            options = options.frames_bytes(bytes);
        }
        let opened = {
            let file = file.clone();
            // Opening may replay a log: without the GIL.
            py.detach(move || Database::open(file, options))
        };
        let db = opened.or_raise(py)?;
        let page_bytes = db.page_bytes();
        Ok(Environment {
            db: RwLock::new(Some(Arc::new(db))),
            txns: Mutex::new(Vec::new()),
            path,
            file,
            readonly,
            page_bytes,
            durability,
            readahead,
        })
    }

    /// Begins a transaction: a read transaction (a snapshot of the newest commit), or with
    /// `write=True` the write transaction (waiting, without the GIL, for one running in
    /// another thread or process: a writer in another process hands the database over once
    /// it is between transactions; `wait=False` raises `BusyError` instead). `db` is the table
    /// its calls use when they are given none; `buffers=True` makes reads return
    /// `memoryview`s instead of `bytes`; `durability` overrides the environment's for its
    /// commit.
    #[pyo3(signature = (db=None, write=false, buffers=false, durability=None, wait=true))]
    fn begin(
        slf: &Bound<'_, Self>,
        db: Option<&Bound<'_, PyAny>>,
        write: bool,
        buffers: bool,
        durability: Option<&str>,
        wait: bool,
    ) -> PyResult<Transaction> {
        let py = slf.py();
        let env = slf.get();
        let table = table_arg(py, db)?.unwrap_or(None);
        let durability = durability_arg(py, durability)?;
        let database = env.database(py)?;
        let (state, owner) = if write {
            if env.writer_of_this_thread() {
                return Err(error(
                    py,
                    "BusyError",
                    "this thread has a write transaction open already: commit or abort it first",
                ));
            }
            let begun = if wait {
                // Waits for a writer in another thread: without the GIL, which
                // that thread may need to finish.
                py.detach(|| SameThread(database.begin_write())).0
            } else {
                database.try_begin_write()
            };
            // SAFETY: the transaction borrows `*database`; the `WriteState` below keeps that
            // `Arc` in a field dropped after the transaction.
            let begun =
                begun.map(|w| unsafe { std::mem::transmute::<WriteTxn<'_>, WriteTxn<'static>>(w) });
            let txn = begun.or_raise(py)?;
            let state = TxnState::Write(Box::new(WriteState { txn, db: database }));
            (state, Some(std::thread::current().id()))
        } else {
            let txn = database.begin_read().or_raise(py)?;
            let state = TxnState::Read(ReadState {
                tables: Vec::new(),
                core: Arc::new(ReadCore { txn }),
                snapshot: None,
            });
            (state, None)
        };
        let cell = Arc::new(TxnCell {
            state: Mutex::new(state),
            ended: AtomicBool::new(false),
            owner,
        });
        env.track(&cell);
        Ok(Transaction {
            cell,
            env: slf.clone().unbind(),
            write,
            buffers,
            table,
            durability,
        })
    }

    /// A handle on table `key` (`bytes` or `str`, UTF-8; `None`: the default table), created
    /// if missing unless `create=False` (`NotFoundError`). Created within `txn` if given (a
    /// read transaction only checks that the table is in its snapshot), else in a write
    /// transaction of its own. py-lmdb's flags for tables with duplicate
    /// keys or integer keys are refused: a Larch table has one value per key, ordered by
    /// bytes.
    #[pyo3(signature = (key=None, txn=None, reverse_key=false, dupsort=false, create=true,
        integerkey=false, integerdup=false, dupfixed=false))]
    #[allow(clippy::too_many_arguments)]
    fn open_db(
        slf: &Bound<'_, Self>,
        key: Option<&Bound<'_, PyAny>>,
        txn: Option<&Bound<'_, Transaction>>,
        reverse_key: bool,
        dupsort: bool,
        create: bool,
        integerkey: bool,
        integerdup: bool,
        dupfixed: bool,
    ) -> PyResult<Table> {
        let py = slf.py();
        for (set, flag) in [
            (reverse_key, "reverse_key"),
            (dupsort, "dupsort"),
            (integerkey, "integerkey"),
            (integerdup, "integerdup"),
            (dupfixed, "dupfixed"),
        ] {
            if set {
                return Err(error(
                    py,
                    "InvalidParameterError",
                    format!(
                        "{flag} is not supported: a Larch table has one value per key, \
                         ordered by its bytes"
                    ),
                ));
            }
        }
        let name: Option<Arc<str>> = match key {
            None => None,
            Some(k) if k.is_none() => None,
            Some(k) => {
                if let Ok(s) = k.cast::<PyString>() {
                    Some(Arc::from(s.to_str()?))
                } else {
                    let b = bytes_arg(k, "key")?;
                    match std::str::from_utf8(&b) {
                        Ok(s) => Some(Arc::from(s)),
                        Err(_) => {
                            return Err(error(
                                py,
                                "InvalidParameterError",
                                "a table name must be UTF-8",
                            ))
                        }
                    }
                }
            }
        };
        let env = slf.get();
        if let Some(n) = name.as_deref() {
            match txn {
                Some(t) if t.get().write => {
                    let t = t.get();
                    let mut w = t.writer(py)?;
                    if create {
                        w.ensure_table(n).or_raise(py)?;
                    } else {
                        write_table_to_read(&mut w, Some(n)).or_raise(py)?;
                    }
                }
                // A read transaction: the table must exist in its snapshot.
                Some(t) => {
                    let mut guard = t.get().state(py)?;
                    let TxnState::Read(r) = &mut *guard else {
                        return Err(ended(py));
                    };
                    match r.table(Some(n)) {
                        Ok(_) => {}
                        Err(larchdb::Error::TableNotFound(_)) if create => {
                            return Err(error(
                                py,
                                "ReadonlyError",
                                format!("table {n:?} does not exist and a read transaction cannot create it"),
                            ))
                        }
                        Err(e) => return Err(engine_error(py, e)),
                    }
                }
                None if create && !env.readonly => {
                    if env.writer_of_this_thread() {
                        return Err(error(
                            py,
                            "BusyError",
                            "this thread has a write transaction open: pass it as txn= to \
                             create the table within it",
                        ));
                    }
                    let d = env.database(py)?;
                    let name = n.to_owned();
                    py.detach(move || {
                        let mut w = d.begin_write()?;
                        if w.ensure_table(&name)? {
                            w.commit()?;
                        }
                        Ok(())
                    })
                    .or_raise(py)?;
                }
                None => {
                    env.database(py)?
                        .begin_read()
                        .or_raise(py)?
                        .table(n)
                        .or_raise(py)?;
                }
            }
        }
        Ok(Table { name })
    }

    /// Ends every transaction of this environment (their cursors with them) and closes the
    /// database, compacting it first unless opened with `compact_on_close=False`. Values
    /// returned with `buffers=True` stay readable. Closing twice does nothing.
    fn close(&self, py: Python<'_>) {
        let txns = std::mem::take(&mut *self.txns.lock().unwrap_or_else(|e| e.into_inner()));
        for cell in txns.iter().filter_map(Weak::upgrade) {
            drop(cell.end());
        }
        let db = self.db.write().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(db) = db {
            // Dropping the last handle compacts and syncs: without the GIL.
            py.detach(move || drop(db));
        }
    }

    /// The path given to `open()`.
    fn path(&self) -> &str {
        &self.path
    }

    /// The database file (in `path` with `subdir=True`).
    fn file(&self) -> String {
        self.file.to_string_lossy().into_owned()
    }

    fn readonly(&self) -> bool {
        self.readonly
    }

    /// The longest key a table of this database takes.
    fn max_key_size(&self) -> usize {
        larchdb::limits::key_bytes_max(self.page_bytes)
    }

    /// The database's figures, with py-lmdb's names (`psize`, `depth`, `branch_pages`,
    /// `leaf_pages`, `overflow_pages` over the whole file; `entries` of the main database,
    /// as LMDB counts it) and Larch's own (`all_entries`: every table's).
    fn stat<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.detached(py, |db| db.stats())?;
        let d = PyDict::new(py);
        d.set_item("psize", s.page_bytes)?;
        d.set_item("depth", s.depth)?;
        d.set_item("branch_pages", s.branch_pages)?;
        d.set_item("leaf_pages", s.leaf_pages)?;
        d.set_item("overflow_pages", s.overflow_pages)?;
        // LMDB's `entries` counts the main database: its records, one for each named
        // database among them. `all_entries` counts every table's.
        let named = s
            .tables
            .iter()
            .filter(|t| t.name != larchdb::DEFAULT_TABLE)
            .count() as u64;
        let main = s
            .tables
            .iter()
            .find(|t| t.name == larchdb::DEFAULT_TABLE)
            .map_or(0, |t| t.entries);
        d.set_item("entries", main + named)?;
        d.set_item("all_entries", s.entries)?;
        d.set_item("txn", s.txn)?;
        d.set_item("page_count", s.page_count)?;
        d.set_item("file_bytes", s.file_bytes)?;
        d.set_item("freelist_pages", s.freelist_pages)?;
        d.set_item("free_pages", s.free_pages)?;
        d.set_item("pending_pages", s.pending_pages)?;
        d.set_item("readers", s.readers)?;
        d.set_item("other_readers", s.other_readers)?;
        d.set_item("commits", s.commits.commits)?;
        d.set_item("aborts", s.commits.aborts)?;
        d.set_item("checkpoints", s.commits.checkpoints)?;
        d.set_item("durable_checkpoints", s.commits.durable_checkpoints)?;
        d.set_item("paced_micros", s.commits.paced_micros)?;
        d.set_item("share_micros", s.commits.share_micros)?;
        d.set_item("log_full_waits", s.commits.log_full_waits)?;
        d.set_item("frames_bytes", s.frames_bytes)?;
        d.set_item("frames_huge_bytes", s.frames_huge_bytes)?;
        d.set_item("overlay_bytes", s.overlay_bytes)?;
        d.set_item("pinned_overlay_bytes", s.pinned_overlay_bytes)?;
        d.set_item("log_file_bytes", s.log_file_bytes)?;
        d.set_item("log_kept_bytes", s.log_kept_bytes)?;
        d.set_item("log_room_bytes", s.log_room_bytes)?;
        let tables = PyDict::new(py);
        for t in &s.tables {
            let td = PyDict::new(py);
            td.set_item("entries", t.entries)?;
            td.set_item("depth", t.depth)?;
            td.set_item("branch_pages", t.branch_pages)?;
            td.set_item("leaf_pages", t.leaf_pages)?;
            td.set_item("overflow_pages", t.overflow_pages)?;
            tables.set_item(&t.name, td)?;
        }
        d.set_item("tables", tables)?;
        Ok(d)
    }

    /// py-lmdb's `info()`: `map_size` is the file's length (Larch has no map size to set).
    fn info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.detached(py, |db| db.stats())?;
        let d = PyDict::new(py);
        d.set_item("map_size", s.file_bytes)?;
        d.set_item("last_pgno", s.page_count.saturating_sub(1))?;
        d.set_item("last_txnid", s.txn)?;
        d.set_item("max_readers", larchdb::limits::READERS_MAX)?;
        d.set_item("num_readers", s.readers + s.other_readers)?;
        Ok(d)
    }

    /// Writes a compact copy of the newest commit, without the GIL, while other threads read
    /// and write, and returns what it copied. `path` is an existing directory (py-lmdb's
    /// form: the copy is `path/data.larch`) or the new file's path; either way the file must
    /// not exist (`ExistsError`, a `FileExistsError`). py-lmdb's `compact` and `txn` are
    /// accepted: the copy is always compact, of the newest commit.
    /// `progress`, if given, is called with the number of entries copied so far, after every
    /// 50,000 and at the end.
    #[pyo3(signature = (path, compact=true, txn=None, progress=None))]
    fn copy<'py>(
        &self,
        py: Python<'py>,
        path: PathBuf,
        compact: bool,
        txn: Option<&Bound<'py, PyAny>>,
        progress: Option<Py<PyAny>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let _ = (compact, txn);
        let target = if path.is_dir() {
            path.join(DATA_FILE)
        } else {
            path
        };
        let mut report = Progress::new(progress);
        let c = self.detached(py, |db| {
            db.copy_to_with_progress(target, |n| {
                report.call(|py| Ok(n.into_pyobject(py)?.into_any()))
            })
        });
        report.raise(py)?;
        copied(py, &c?)
    }

    /// py-lmdb's `copyfd`: writes a compact copy of the newest commit to the open file
    /// descriptor `fd` (a pipe, a socket, a file), which stays open. The copy is built in the
    /// temporary directory first, then written out.
    #[pyo3(signature = (fd, compact=true, txn=None))]
    fn copyfd<'py>(
        &self,
        py: Python<'py>,
        fd: c_int,
        compact: bool,
        txn: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let _ = (compact, txn);
        let db = self.database(py)?;
        let c = py.detach(move || copy_to_fd(&db, fd)).or_raise(py)?;
        copied(py, &c)
    }

    /// py-lmdb's `set_mapsize`: accepted, no effect (the file grows and shrinks on its own).
    fn set_mapsize(&self, py: Python<'_>, map_size: u64) -> PyResult<()> {
        let _ = map_size;
        self.database(py).map(drop)
    }

    /// py-lmdb's `max_readers()`: how many read-only handles in other processes may read at
    /// once (the lock file's slots). Read transactions in this process are not counted.
    fn max_readers(&self, py: Python<'_>) -> PyResult<usize> {
        self.database(py)?;
        Ok(larchdb::limits::READERS_MAX)
    }

    /// py-lmdb's `readers()`: the live readers as LMDB's `mdb_reader_list` prints them, a line
    /// each under a header (`pid`, `thread`, `txnid`; Larch does not record the thread), or
    /// `(no active readers)`.
    fn readers(&self, py: Python<'_>) -> PyResult<String> {
        let s = self.detached(py, |db| db.stats())?;
        if s.reader_list.is_empty() {
            return Ok("(no active readers)\n".into());
        }
        let mut out = String::from("    pid     thread     txnid\n");
        for r in &s.reader_list {
            for _ in 0..r.count.max(1) {
                out.push_str(&format!("{:>10} {:>10} {:>9}\n", r.pid, "-", r.txn));
            }
        }
        Ok(out)
    }

    /// py-lmdb's `reader_check()`: clears the reader slots of processes that died and returns
    /// how many it cleared. Always 0: a slot is held by a lock the kernel drops when its
    /// process ends, so a dead process's slot is free at once.
    fn reader_check(&self, py: Python<'_>) -> PyResult<u32> {
        self.database(py)?;
        Ok(0)
    }

    /// py-lmdb's `flags()`: the options the environment was opened with, under py-lmdb's
    /// names (`metasync`, `meminit` and `lock` are always true, `map_async` and `writemap`
    /// false; `readahead` is None where Larch decides from the file's size and memory).
    fn flags<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.database(py)?;
        let d = PyDict::new(py);
        d.set_item("subdir", self.file != Path::new(&self.path))?;
        d.set_item("readonly", self.readonly)?;
        d.set_item("metasync", true)?;
        d.set_item("sync", self.durability == Durability::Immediate)?;
        d.set_item("map_async", false)?;
        d.set_item("readahead", self.readahead)?;
        d.set_item("writemap", false)?;
        d.set_item("meminit", true)?;
        d.set_item("lock", true)?;
        Ok(d)
    }

    /// Makes every commit so far durable (a `bounded` or `none` one); `force` is accepted for
    /// py-lmdb's signature.
    #[pyo3(signature = (force=false))]
    fn sync(&self, py: Python<'_>, force: bool) -> PyResult<()> {
        let _ = force;
        self.detached(py, |db| db.sync())
    }

    /// Checks every page of the newest snapshot (checksums, structure, free space), without
    /// the GIL. Returns the report; `problems` is empty for a sound database.
    fn verify<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let r = self.detached(py, |db| db.verify())?;
        let d = PyDict::new(py);
        d.set_item("txn", r.txn)?;
        d.set_item("page_count", r.page_count)?;
        d.set_item("pages_checked", r.pages_checked)?;
        d.set_item("tables", r.tables)?;
        d.set_item("entries", r.entries)?;
        d.set_item("free_pages", r.free_pages)?;
        d.set_item("pending_pages", r.pending_pages)?;
        let problems: Vec<(u64, String)> =
            r.problems.into_iter().map(|p| (p.page, p.reason)).collect();
        d.set_item("problems", problems)?;
        Ok(d)
    }

    /// With the log: writes the commits since the last checkpoint into the tree (without the
    /// GIL). Without it, nothing to do.
    fn checkpoint(&self, py: Python<'_>) -> PyResult<()> {
        self.detached(py, |db| db.checkpoint())
    }

    /// Gives the free space at the end of the file back to the file system (and cuts the log
    /// to its header), without the GIL. Returns the sizes before and after. `progress`, if
    /// given, is called with each step as a dict: `{"step": "checkpoint"}`, `{"step":
    /// "moving", "pass": 0, "tables_done": 1, "tables": 3}`, `{"step": "trimming"}`.
    #[pyo3(signature = (progress=None))]
    fn compact<'py>(
        &self,
        py: Python<'py>,
        progress: Option<Py<PyAny>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let mut report = Progress::new(progress);
        let c = self.detached(py, |db| {
            db.compact_with_progress(|step| report.call(|py| compact_step(py, step)))
        });
        report.raise(py)?;
        let c = c?;
        let d = PyDict::new(py);
        d.set_item("data_bytes_before", c.data_bytes_before)?;
        d.set_item("data_bytes_after", c.data_bytes_after)?;
        d.set_item("log_bytes_before", c.log_bytes_before)?;
        d.set_item("log_bytes_after", c.log_bytes_after)?;
        Ok(d)
    }

    /// Names of the named tables (not the default table), sorted.
    fn tables(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        let db = self.database(py)?;
        let r = db.begin_read().or_raise(py)?;
        let mut names = r.list_tables().or_raise(py)?;
        names.retain(|n| n != larchdb::DEFAULT_TABLE);
        Ok(names)
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, PyTuple>) -> bool {
        self.close(py);
        false
    }

    fn __repr__(&self) -> String {
        let state = if self.db.read().unwrap_or_else(|e| e.into_inner()).is_some() {
            "open"
        } else {
            "closed"
        };
        format!("<larch.Environment {:?} {state}>", self.path)
    }
}

/// The database file in an environment's directory (`larch.DATA_FILE`).
const DATA_FILE: &str = "data.larch";

/// What `copy` and `copyfd` return.
fn copied<'py>(py: Python<'py>, c: &larchdb::Copied) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("txn", c.txn)?;
    d.set_item("tables", c.tables)?;
    d.set_item("entries", c.entries)?;
    d.set_item("bytes", c.bytes)?;
    Ok(d)
}

/// A Python progress callback called from work that runs without the GIL: each call takes
/// the GIL for itself. An exception the callback raises does not stop the work (the engine's
/// progress reports cannot); the first one is raised when the work has ended, and the
/// callback is not called again.
struct Progress {
    callback: Option<Py<PyAny>>,
    failed: Option<PyErr>,
}

impl Progress {
    fn new(callback: Option<Py<PyAny>>) -> Progress {
        Progress {
            callback,
            failed: None,
        }
    }

    /// Calls the callback with the argument `arg` builds.
    fn call(&mut self, arg: impl for<'py> FnOnce(Python<'py>) -> PyResult<Bound<'py, PyAny>>) {
        let (Some(callback), None) = (&self.callback, &self.failed) else {
            return;
        };
        let r = Python::attach(|py| arg(py).and_then(|a| callback.call1(py, (a,))).map(drop));
        if let Err(e) = r {
            self.failed = Some(e);
        }
    }

    /// The callback's exception, if it raised one.
    fn raise(self, _py: Python<'_>) -> PyResult<()> {
        match self.failed {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// A compaction step as `compact(progress=...)` reports it.
fn compact_step(py: Python<'_>, step: larchdb::CompactStep) -> PyResult<Bound<'_, PyAny>> {
    let d = PyDict::new(py);
    match step {
        larchdb::CompactStep::Checkpoint => d.set_item("step", "checkpoint")?,
        larchdb::CompactStep::Moving {
            pass,
            tables_done,
            tables,
        } => {
            d.set_item("step", "moving")?;
            d.set_item("pass", pass)?;
            d.set_item("tables_done", tables_done)?;
            d.set_item("tables", tables)?;
        }
        larchdb::CompactStep::Trimming => d.set_item("step", "trimming")?,
        // A step a later engine adds: named by its Debug form.
        other => d.set_item("step", format!("{other:?}").to_lowercase())?,
    }
    Ok(d.into_any())
}

/// An I/O error of the binding's own file work, as the engine reports its own.
fn io_error(op: &'static str, path: &Path, source: std::io::Error) -> larchdb::Error {
    larchdb::Error::Io {
        op,
        path: Some(path.to_path_buf()),
        source,
    }
}

/// Copies `db` into a temporary directory, then writes the file to `fd` (left open).
fn copy_to_fd(db: &Database, fd: c_int) -> larchdb::Result<larchdb::Copied> {
    use std::io::Write;
    use std::os::fd::FromRawFd;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let dir = std::env::temp_dir().join(format!("larch-copyfd-{}-{nanos}", std::process::id()));
    std::fs::create_dir(&dir).map_err(|e| io_error("create", &dir, e))?;
    let file = dir.join(DATA_FILE);
    let written = (|| {
        let c = db.copy_to(&file)?;
        let mut src = std::fs::File::open(&file).map_err(|e| io_error("open", &file, e))?;
        // SAFETY: `fd` is the caller's open descriptor, borrowed for this call; ManuallyDrop
        // keeps it from being closed here.
        let mut dst = std::mem::ManuallyDrop::new(unsafe { std::fs::File::from_raw_fd(fd) });
        let to = Path::new("<fd>");
        std::io::copy(&mut src, &mut *dst).map_err(|e| io_error("write", to, e))?;
        dst.flush().map_err(|e| io_error("write", to, e))?;
        Ok(c)
    })();
    let _ = std::fs::remove_dir_all(&dir);
    written
}

// ---------------------------------------------------------------------------------------
// Tables
// ---------------------------------------------------------------------------------------

/// A table handle (py-lmdb's `_Database`), from `Environment.open_db`: passed as `db=`.
#[pyclass(frozen, module = "larch")]
struct Table {
    name: Option<Arc<str>>,
}

#[pymethods]
impl Table {
    /// The table's name; `None` for the default table.
    #[getter]
    fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    fn __repr__(&self) -> String {
        match &self.name {
            Some(n) => format!("<larch.Table {n:?}>"),
            None => "<larch.Table (default)>".to_owned(),
        }
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other
            .cast::<Table>()
            .is_ok_and(|o| o.get().name == self.name)
    }

    fn __hash__(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.name.hash(&mut h);
        h.finish()
    }
}

// ---------------------------------------------------------------------------------------
// Transaction
// ---------------------------------------------------------------------------------------

/// A transaction, from `Environment.begin`. As a context manager it commits when the block
/// ends normally and aborts when it raises.
#[pyclass(frozen, module = "larch")]
struct Transaction {
    cell: Arc<TxnCell>,
    env: Py<Environment>,
    write: bool,
    buffers: bool,
    /// The table of calls given no `db=` (`None`: the default table).
    table: Option<Arc<str>>,
    durability: Option<Durability>,
}

fn write_of<'a>(guard: &'a mut TxnState, py: Python<'_>) -> PyResult<&'a mut WriteState> {
    match guard {
        TxnState::Write(w) => Ok(w),
        TxnState::Read(_) => Err(error(
            py,
            "ReadonlyError",
            "a read transaction cannot write",
        )),
        TxnState::Done => Err(ended(py)),
    }
}

/// A write transaction's `WriteTxn`, under its cell's lock (`Transaction::writer`, which
/// checked that the state is a write transaction's).
struct Writer<'a>(MutexGuard<'a, TxnState>);

impl std::ops::Deref for Writer<'_> {
    type Target = WriteTxn<'static>;

    fn deref(&self) -> &WriteTxn<'static> {
        match &*self.0 {
            TxnState::Write(w) => &w.txn,
            _ => unreachable!("Transaction::writer checked the state"),
        }
    }
}

impl std::ops::DerefMut for Writer<'_> {
    fn deref_mut(&mut self) -> &mut WriteTxn<'static> {
        match &mut *self.0 {
            TxnState::Write(w) => &mut w.txn,
            _ => unreachable!("Transaction::writer checked the state"),
        }
    }
}

impl Transaction {
    /// The write transaction, for a call that writes: refused in a read transaction, on
    /// another thread than the one that began it, and once it has ended.
    fn writer(&self, py: Python<'_>) -> PyResult<Writer<'_>> {
        if !self.write {
            return Err(error(
                py,
                "ReadonlyError",
                "a read transaction cannot write",
            ));
        }
        let mut guard = self.state(py)?;
        write_of(&mut guard, py)?;
        Ok(Writer(guard))
    }

    /// The state, checked for the thread (a write transaction's own thread only).
    fn state(&self, py: Python<'_>) -> PyResult<MutexGuard<'_, TxnState>> {
        self.check_thread(py)?;
        Ok(self.cell.lock())
    }

    /// A write transaction is used only by the thread that began it.
    fn check_thread(&self, py: Python<'_>) -> PyResult<()> {
        match self.cell.owner {
            Some(owner) if owner != std::thread::current().id() => Err(error(
                py,
                "Error",
                "a write transaction can only be used by the thread that began it",
            )),
            _ => Ok(()),
        }
    }

    fn table_of(&self, db: Option<Option<Arc<str>>>) -> Option<Arc<str>> {
        match db {
            Some(t) => t,
            None => self.table.clone(),
        }
    }

    /// The value of `key` in `table` as a Python object, or `None`.
    fn get_value<'py>(
        &self,
        py: Python<'py>,
        key: &[u8],
        table: Option<&str>,
        buffers: bool,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let mut guard = self.state(py)?;
        match &mut *guard {
            TxnState::Read(r) => {
                let Some(v) = r.table(table).or_raise(py)?.get(key).or_raise(py)? else {
                    return Ok(None);
                };
                let snap = exporter(py, &mut r.snapshot, &r.core, buffers)?;
                Ok(Some(value_out(py, v, buffers, snap.as_ref())?))
            }
            TxnState::Write(w) => match write_table_to_read(&mut w.txn, table).or_raise(py)? {
                Some(t) => match t.get(key).or_raise(py)? {
                    Some(v) => Ok(Some(value_out(py, v, buffers, None)?)),
                    None => Ok(None),
                },
                None => Ok(None),
            },
            TxnState::Done => Err(ended(py)),
        }
    }

    /// Commits, without the GIL (the state is taken out of the cell first, so that nothing
    /// waits on its lock meanwhile).
    fn commit_inner(&self, py: Python<'_>, durability: Option<Durability>) -> PyResult<()> {
        let state = {
            self.check_thread(py)?;
            self.cell.end()
        };
        match state {
            TxnState::Write(w) => {
                let d = durability.or(self.durability);
                let job = SameThread(*w);
                let r = py.detach(move || {
                    let WriteState { txn, db } = { job }.0;
                    let r = match d {
                        Some(d) => txn.commit_with(d),
                        None => txn.commit(),
                    };
                    // The last handle, if the environment was closed meanwhile: closing
                    // compacts, still without the GIL.
                    drop(db);
                    r
                });
                r.or_raise(py)
            }
            TxnState::Read(_) => Ok(()),
            TxnState::Done => Err(ended(py)),
        }
    }
}

#[pymethods]
impl Transaction {
    /// The value of `key`, or `default` when it is absent.
    #[pyo3(signature = (key, default=None, db=None))]
    fn get<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        default: Option<Bound<'py, PyAny>>,
        db: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let table = self.table_of(table_arg(py, db)?);
        let key = bytes_arg(key, "key")?;
        match self.get_value(py, &key, table.as_deref(), self.buffers)? {
            Some(v) => Ok(Some(v)),
            None => Ok(default),
        }
    }

    /// Stores `value` under `key`. Returns `True`, or `False` when `overwrite=False` and the
    /// key exists (nothing changed). `append=True` takes the key as greater than every key of
    /// the table (a fast load of sorted keys; `AppendOrderError` otherwise). `dupdata` is
    /// accepted for py-lmdb's signature (Larch tables have one value per key).
    #[pyo3(signature = (key, value, dupdata=true, overwrite=true, append=false, db=None))]
    #[allow(clippy::too_many_arguments)]
    fn put(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        dupdata: bool,
        overwrite: bool,
        append: bool,
        db: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        let _ = dupdata;
        let table = self.table_of(table_arg(py, db)?);
        let key = bytes_arg(key, "key")?;
        let value = bytes_arg(value, "value")?;
        let mut w = self.writer(py)?;
        let mut t = write_table(&mut w, table.as_deref()).or_raise(py)?;
        put_into(py, &mut t, &key, &value, overwrite, append)
    }

    /// Stores `value` under `key` and returns the value it replaced, or `None`.
    #[pyo3(signature = (key, value, db=None))]
    fn replace<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        value: &Bound<'py, PyAny>,
        db: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let table = self.table_of(table_arg(py, db)?);
        let key = bytes_arg(key, "key")?;
        let value = bytes_arg(value, "value")?;
        let mut w = self.writer(py)?;
        let mut t = write_table(&mut w, table.as_deref()).or_raise(py)?;
        let old = t
            .get(&key)
            .or_raise(py)?
            .map(|v| PyBytes::new(py, v).into_any());
        t.set(&key, &value).or_raise(py)?;
        Ok(old)
    }

    /// Deletes `key` and returns its value, or `None` when it was absent.
    #[pyo3(signature = (key, db=None))]
    fn pop<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        db: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let table = self.table_of(table_arg(py, db)?);
        let key = bytes_arg(key, "key")?;
        let mut w = self.writer(py)?;
        let Some(mut t) = write_table_to_read(&mut w, table.as_deref()).or_raise(py)? else {
            return Ok(None);
        };
        let Some(old) = t
            .get(&key)
            .or_raise(py)?
            .map(|v| PyBytes::new(py, v).into_any())
        else {
            return Ok(None);
        };
        t.delete(&key).or_raise(py)?;
        Ok(Some(old))
    }

    /// Deletes `key`; `True` if it was there. `value` is accepted for py-lmdb's signature
    /// and, as in LMDB for a table without duplicates, not compared.
    #[pyo3(signature = (key, value=None, db=None))]
    fn delete(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: Option<&Bound<'_, PyAny>>,
        db: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        let _ = value;
        let table = self.table_of(table_arg(py, db)?);
        let key = bytes_arg(key, "key")?;
        let mut w = self.writer(py)?;
        match write_table_to_read(&mut w, table.as_deref()).or_raise(py)? {
            Some(mut t) => t.delete(&key).or_raise(py),
            None => Ok(false),
        }
    }

    /// Deletes table `db` (`delete=True`) or only its entries (`delete=False`). The default
    /// table can only be emptied.
    #[pyo3(signature = (db, delete=true))]
    fn drop(&self, py: Python<'_>, db: &Bound<'_, PyAny>, delete: bool) -> PyResult<()> {
        let table = table_arg(py, Some(db))?.unwrap_or(None);
        let mut w = self.writer(py)?;
        match table.as_deref() {
            Some(n) if delete => {
                if !w.delete_table(n).or_raise(py)? {
                    return Err(engine_error(
                        py,
                        larchdb::Error::TableNotFound(n.to_owned()),
                    ));
                }
            }
            name => {
                if let Some(mut t) = write_table_to_read(&mut w, name).or_raise(py)? {
                    t.clear().or_raise(py)?;
                }
            }
        }
        Ok(())
    }

    /// A cursor on table `db` (default: the transaction's).
    #[pyo3(signature = (db=None))]
    fn cursor(slf: &Bound<'_, Self>, db: Option<&Bound<'_, PyAny>>) -> PyResult<Cursor> {
        let py = slf.py();
        let t = slf.get();
        let table = t.table_of(table_arg(py, db)?);
        Cursor::open(slf, table)
    }

    /// Figures of table `db` (default: the transaction's) as of this transaction: `entries`,
    /// `depth` (of its tree; 0 in a write transaction, whose tree is being written) and
    /// `psize`.
    #[pyo3(signature = (db=None))]
    fn stat<'py>(
        &self,
        py: Python<'py>,
        db: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let table = self.table_of(table_arg(py, db)?);
        let (entries, depth) = {
            let mut guard = self.state(py)?;
            match &mut *guard {
                TxnState::Read(r) => {
                    let t = r.table(table.as_deref()).or_raise(py)?;
                    (t.len().or_raise(py)?, t.depth())
                }
                TxnState::Write(w) => {
                    match write_table_to_read(&mut w.txn, table.as_deref()).or_raise(py)? {
                        Some(t) => (t.len().or_raise(py)?, 0),
                        None => (0, 0),
                    }
                }
                TxnState::Done => return Err(ended(py)),
            }
        };
        let d = PyDict::new(py);
        d.set_item("psize", self.env.get().page_bytes)?;
        d.set_item("entries", entries)?;
        d.set_item("depth", depth)?;
        Ok(d)
    }

    /// The number of entries of table `db` (default: the transaction's).
    #[pyo3(signature = (db=None))]
    fn count(&self, py: Python<'_>, db: Option<&Bound<'_, PyAny>>) -> PyResult<u64> {
        let table = self.table_of(table_arg(py, db)?);
        let mut guard = self.state(py)?;
        match &mut *guard {
            TxnState::Read(r) => r.table(table.as_deref()).and_then(|t| t.len()).or_raise(py),
            TxnState::Write(w) => {
                match write_table_to_read(&mut w.txn, table.as_deref()).or_raise(py)? {
                    Some(t) => t.len().or_raise(py),
                    None => Ok(0),
                }
            }
            TxnState::Done => Err(ended(py)),
        }
    }

    /// Commits a write transaction (with `durability`, default the one given to `begin` or
    /// the environment's), without the GIL; ends a read transaction. The transaction cannot
    /// be used afterwards, whatever the outcome.
    #[pyo3(signature = (durability=None))]
    fn commit(&self, py: Python<'_>, durability: Option<&str>) -> PyResult<()> {
        let d = durability_arg(py, durability)?;
        self.commit_inner(py, d)
    }

    /// Ends the transaction, discarding its writes. Aborting an ended transaction does
    /// nothing.
    fn abort(&self, py: Python<'_>) -> PyResult<()> {
        self.check_thread(py)?;
        let state = self.cell.end();
        drop(state);
        Ok(())
    }

    /// A read transaction moves to the newest commit (py-lmdb's `reset()` + `renew()`).
    /// Its cursors stay on the snapshot they were opened on.
    fn renew(&self, py: Python<'_>) -> PyResult<()> {
        let mut guard = self.state(py)?;
        match &mut *guard {
            TxnState::Read(r) => {
                let txn = self.env.get().database(py)?.begin_read().or_raise(py)?;
                // The tables borrow the old core: dropped first. Cursors and buffers keep the
                // old snapshot through their own `Arc`.
                r.tables.clear();
                r.snapshot = None;
                r.core = Arc::new(ReadCore { txn });
                Ok(())
            }
            TxnState::Write(_) => Err(error(py, "Error", "only a read transaction can be renewed")),
            TxnState::Done => Err(ended(py)),
        }
    }

    /// The commit this transaction reads (a read transaction) or will make (a write one).
    fn id(&self, py: Python<'_>) -> PyResult<u64> {
        let guard = self.state(py)?;
        match &*guard {
            TxnState::Read(r) => Ok(r.core.txn.id()),
            TxnState::Write(w) => Ok(w.txn.id()),
            TxnState::Done => Err(ended(py)),
        }
    }

    /// A savepoint: a point inside this write transaction that `rollback_to` returns it to
    /// (nested; SQL's `SAVEPOINT`). As a context manager, an exception inside the block rolls
    /// the transaction back to it; either way it is released at the end of the block.
    ///
    /// ```text
    /// with txn.savepoint():
    ///     txn.put(b"item", b"bad")
    ///     raise ValueError("undo the item")   # the put is undone, the txn goes on
    /// ```
    fn savepoint(slf: &Bound<'_, Self>) -> PyResult<Savepoint> {
        let py = slf.py();
        let sp = slf.get().writer(py)?.savepoint().or_raise(py)?;
        Ok(Savepoint {
            sp: Mutex::new(Some(sp)),
            txn: slf.clone().unbind(),
        })
    }

    /// Undoes every change made since `savepoint` (keys, tables created or dropped, table
    /// properties); `savepoint` stays usable, those made after it are not (`Error`).
    fn rollback_to(&self, py: Python<'_>, savepoint: &Savepoint) -> PyResult<()> {
        let guard = savepoint.lock();
        let sp = guard.as_ref().ok_or_else(|| released(py))?;
        self.writer(py)?.rollback_to(sp).or_raise(py)
    }

    /// Releases `savepoint` and those made after it, keeping their changes (SQL's
    /// `RELEASE`). Releasing one twice does nothing.
    fn release(&self, py: Python<'_>, savepoint: &Savepoint) -> PyResult<()> {
        let mut guard = savepoint.lock();
        let Some(sp) = guard.take() else {
            return Ok(());
        };
        self.writer(py)?.release(sp).or_raise(py)
    }

    /// The properties of table `db` (default: the transaction's): bytes the application
    /// attached to it with `set_properties`, empty if none. The typed tables of
    /// `larch.typed` record their key and value types there, as Rust's do.
    #[pyo3(signature = (db=None))]
    fn get_properties<'py>(
        &self,
        py: Python<'py>,
        db: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let table = self.table_of(table_arg(py, db)?);
        let name = table.as_deref().unwrap_or(larchdb::DEFAULT_TABLE);
        let mut guard = self.state(py)?;
        let props = match &mut *guard {
            TxnState::Read(r) => r.core.txn.table_properties(name).or_raise(py)?.to_vec(),
            TxnState::Write(w) => w.txn.table_properties(name).or_raise(py)?,
            TxnState::Done => return Err(ended(py)),
        };
        Ok(PyBytes::new(py, &props))
    }

    /// Sets the properties of table `db` (default: the transaction's), up to 16 KiB kept
    /// with the table until set again.
    #[pyo3(signature = (properties, db=None))]
    fn set_properties(
        &self,
        py: Python<'_>,
        properties: &Bound<'_, PyAny>,
        db: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let props = bytes_arg(properties, "properties")?;
        let table = self.table_of(table_arg(py, db)?);
        let name = table.as_deref().unwrap_or(larchdb::DEFAULT_TABLE);
        self.writer(py)?
            .set_table_properties(name, &props)
            .or_raise(py)
    }

    /// The environment this transaction belongs to.
    #[getter]
    fn env(&self, py: Python<'_>) -> Py<Environment> {
        self.env.clone_ref(py)
    }

    /// Whether this is a write transaction.
    #[getter]
    fn write(&self) -> bool {
        self.write
    }

    #[getter]
    fn buffers(&self) -> bool {
        self.buffers
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (exc_type=None, _exc=None, _tb=None))]
    fn __exit__(
        &self,
        py: Python<'_>,
        exc_type: Option<&Bound<'_, PyAny>>,
        _exc: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        if self.cell.ended.load(Ordering::Acquire) {
            return Ok(false);
        }
        if exc_type.is_some_and(|t| !t.is_none()) {
            self.abort(py)?;
        } else {
            self.commit_inner(py, None)?;
        }
        Ok(false)
    }

    fn __repr__(&self) -> String {
        let kind = if self.write { "write" } else { "read" };
        let state = if self.cell.ended.load(Ordering::Acquire) {
            " ended"
        } else {
            ""
        };
        format!("<larch.Transaction {kind}{state}>")
    }
}

/// `put` with py-lmdb's `overwrite` and `append`.
fn put_into(
    py: Python<'_>,
    t: &mut WriteTable<'_>,
    key: &[u8],
    value: &[u8],
    overwrite: bool,
    append: bool,
) -> PyResult<bool> {
    if !overwrite && t.get(key).or_raise(py)?.is_some() {
        return Ok(false);
    }
    if append {
        t.append(key, value).or_raise(py)?;
    } else {
        t.set(key, value).or_raise(py)?;
    }
    Ok(true)
}

// ---------------------------------------------------------------------------------------
// Cursor
// ---------------------------------------------------------------------------------------

type Slice = &'static [u8];

/// A read transaction's cursor: its own table (and snapshot) and a live iterator.
struct ReadCursor {
    /// Iterator positioned just past `cur` in its direction (true: forward), if `live`.
    range: Option<(bool, larchdb::Range<'static>)>,
    table: ReadTable<'static>,
    /// Keeps the snapshot `table`, `range` and `cur` point into alive; declared last, so
    /// dropped last.
    core: Arc<ReadCore>,
    cur: Option<(Slice, Slice)>,
    /// The exporter of `buffers=True` values, made at the first.
    snapshot: Option<Py<Snapshot>>,
}

// SAFETY: everything here points into the snapshot `core` keeps alive, which is immutable and
// shared by threads (`ReadTxn` is `Send + Sync`); the iterator is used under the cursor's lock.
unsafe impl Send for ReadCursor {}

impl ReadCursor {
    fn step(&mut self, forward: bool) -> larchdb::Result<bool> {
        let live = matches!(&self.range, Some((f, _)) if *f == forward);
        if !live {
            let r = match (self.cur, forward) {
                (None, true) => self.table.iter(),
                (None, false) => self.table.iter_rev(),
                (Some((k, _)), true) => self
                    .table
                    .range::<[u8], _>((Edge::Excluded(k), Edge::Unbounded)),
                (Some((k, _)), false) => self
                    .table
                    .range_rev::<[u8], _>((Edge::Unbounded, Edge::Excluded(k))),
            };
            self.range = Some((forward, r));
        }
        let (_, r) = self.range.as_mut().expect("set above");
        match r.next().transpose()? {
            Some(e) => {
                self.cur = Some(e);
                Ok(true)
            }
            None => {
                self.cur = None;
                self.range = None;
                Ok(false)
            }
        }
    }

    fn seek(&mut self, key: &[u8], exact: bool) -> larchdb::Result<bool> {
        self.range = None;
        self.cur = match self.table.seek(key)? {
            Some((k, v)) if !exact || k == key => Some((k, v)),
            _ => None,
        };
        Ok(self.cur.is_some())
    }
}

/// A cursor movement.
#[derive(Clone, Copy)]
enum Move<'k> {
    First,
    Last,
    /// The next entry; the first when unpositioned.
    Next,
    /// The previous entry; the last when unpositioned.
    Prev,
    /// This key exactly.
    Key(&'k [u8]),
    /// The first key at or after this one.
    Range(&'k [u8]),
}

impl ReadCursor {
    fn go(&mut self, m: Move<'_>) -> larchdb::Result<bool> {
        match m {
            Move::First | Move::Last => {
                self.cur = None;
                self.range = None;
                self.step(matches!(m, Move::First))
            }
            Move::Next => self.step(true),
            Move::Prev => self.step(false),
            Move::Key(k) => self.seek(k, true),
            Move::Range(k) => self.seek(k, false),
        }
    }
}

enum CursorState {
    Read(Box<ReadCursor>),
    /// A write transaction's cursor: the current entry, copied; each step seeks from it.
    Write {
        cur: Option<(Vec<u8>, Vec<u8>)>,
    },
    Closed,
}

/// A cursor (py-lmdb's `Cursor`), from `Transaction.cursor()`: a position in one table.
/// Unpositioned at first; `next()`/`prev()` on an unpositioned cursor go to the first/last
/// entry, as in py-lmdb.
#[pyclass(frozen, module = "larch")]
struct Cursor {
    txn: Py<Transaction>,
    cell: Arc<TxnCell>,
    table: Option<Arc<str>>,
    buffers: bool,
    state: Mutex<CursorState>,
}

/// What a write cursor's step does.
enum Seek<'k> {
    First,
    Last,
    After(&'k [u8]),
    Before(&'k [u8]),
    AtLeast(&'k [u8]),
    Exactly(&'k [u8]),
}

fn seek_write(t: &WriteTable<'_>, how: Seek<'_>) -> larchdb::Result<Option<(Vec<u8>, Vec<u8>)>> {
    let e = match how {
        Seek::First => t.first()?,
        Seek::Last => t.last()?,
        Seek::After(k) => t
            .range::<[u8], _>((Edge::Excluded(k), Edge::Unbounded))
            .next()
            .transpose()?,
        Seek::Before(k) => t
            .range_rev::<[u8], _>((Edge::Unbounded, Edge::Excluded(k)))
            .next()
            .transpose()?,
        Seek::AtLeast(k) => t.seek(k)?,
        Seek::Exactly(k) => t.seek(k)?.filter(|(found, _)| *found == k),
    };
    Ok(e.map(|(k, v)| (k.to_vec(), v.to_vec())))
}

impl Cursor {
    fn open(txn: &Bound<'_, Transaction>, table: Option<Arc<str>>) -> PyResult<Cursor> {
        let py = txn.py();
        let t = txn.get();
        let state = {
            let mut guard = t.state(py)?;
            match &mut *guard {
                TxnState::Read(r) => {
                    let core = r.core.clone();
                    let table = open_read_table(&core, table.as_deref()).or_raise(py)?;
                    CursorState::Read(Box::new(ReadCursor {
                        range: None,
                        table,
                        core,
                        cur: None,
                        snapshot: None,
                    }))
                }
                TxnState::Write(w) => {
                    // Checks that the table exists (`NotFoundError` now, not at the first step).
                    write_table_to_read(&mut w.txn, table.as_deref()).or_raise(py)?;
                    CursorState::Write { cur: None }
                }
                TxnState::Done => return Err(ended(py)),
            }
        };
        Ok(Cursor {
            txn: txn.clone().unbind(),
            cell: t.cell.clone(),
            table,
            buffers: t.buffers,
            state: Mutex::new(state),
        })
    }

    /// The cursor's state, for one call: a cursor is used by one thread at a time (a second
    /// one gets an error, never a wait: the first may be running without the GIL).
    fn lock(&self, py: Python<'_>) -> PyResult<MutexGuard<'_, CursorState>> {
        if self.cell.ended.load(Ordering::Acquire) {
            return Err(ended(py));
        }
        match self.state.try_lock() {
            Ok(g) => Ok(g),
            Err(TryLockError::Poisoned(e)) => Ok(e.into_inner()),
            Err(TryLockError::WouldBlock) => {
                Err(error(py, "Error", "the cursor is in use by another thread"))
            }
        }
    }

    /// Runs `f` on the write transaction's table for reading (`None`: a default table not
    /// created yet).
    fn with_write_table<R>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(Option<&mut WriteTable<'_>>) -> larchdb::Result<R>,
    ) -> PyResult<R> {
        let mut w = self.txn.get().writer(py)?;
        let mut table = write_table_to_read(&mut w, self.table.as_deref()).or_raise(py)?;
        f(table.as_mut()).or_raise(py)
    }

    /// Moves the cursor; returns whether it is positioned. On an error a write
    /// transaction's cursor stays where it was.
    fn go(&self, py: Python<'_>, m: Move<'_>) -> PyResult<bool> {
        let mut guard = self.lock(py)?;
        match &mut *guard {
            CursorState::Read(r) => r.go(m).or_raise(py),
            CursorState::Write { cur } => {
                let at = cur.take();
                let seek = match (m, at.as_ref()) {
                    (Move::First, _) | (Move::Next, None) => Seek::First,
                    (Move::Last, _) | (Move::Prev, None) => Seek::Last,
                    (Move::Next, Some((k, _))) => Seek::After(k),
                    (Move::Prev, Some((k, _))) => Seek::Before(k),
                    (Move::Key(k), _) => Seek::Exactly(k),
                    (Move::Range(k), _) => Seek::AtLeast(k),
                };
                let found = self.with_write_table(py, |t| match t {
                    Some(t) => seek_write(t, seek),
                    None => Ok(None),
                });
                match found {
                    Ok(found) => {
                        *cur = found;
                        Ok(cur.is_some())
                    }
                    Err(e) => {
                        *cur = at;
                        Err(e)
                    }
                }
            }
            CursorState::Closed => Err(closed(py)),
        }
    }

    fn current<'py>(
        &self,
        py: Python<'py>,
        want_key: bool,
        want_value: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let mut guard = self.lock(py)?;
        let (k, v, snap) = match &mut *guard {
            CursorState::Read(r) => match r.cur {
                Some((k, v)) => (k, v, exporter(py, &mut r.snapshot, &r.core, self.buffers)?),
                None => (&b""[..], &b""[..], None),
            },
            CursorState::Write { cur: Some((k, v)) } => (k.as_slice(), v.as_slice(), None),
            CursorState::Write { cur: None } => (&b""[..], &b""[..], None),
            CursorState::Closed => return Err(closed(py)),
        };
        item_out(py, k, v, want_key, want_value, self.buffers, snap.as_ref())
    }
}

fn closed(py: Python<'_>) -> PyErr {
    error(py, "Error", "the cursor is closed")
}

/// The key, the value, or a `(key, value)` tuple.
fn item_out<'py>(
    py: Python<'py>,
    k: &[u8],
    v: &[u8],
    want_key: bool,
    want_value: bool,
    buffers: bool,
    snap: Option<&Bound<'py, Snapshot>>,
) -> PyResult<Bound<'py, PyAny>> {
    match (want_key, want_value) {
        (true, false) => value_out(py, k, buffers, snap),
        (false, true) => value_out(py, v, buffers, snap),
        _ => {
            let k = value_out(py, k, buffers, snap)?;
            let v = value_out(py, v, buffers, snap)?;
            Ok(PyTuple::new(py, [k, v])?.into_any())
        }
    }
}

#[pymethods]
impl Cursor {
    /// py-lmdb's constructor, `larch.Cursor(db, txn)`: the same as `txn.cursor(db)` (`db`
    /// None: the transaction's table).
    #[new]
    fn new(db: &Bound<'_, PyAny>, txn: &Bound<'_, Transaction>) -> PyResult<Cursor> {
        let py = txn.py();
        let table = txn.get().table_of(table_arg(py, Some(db))?);
        Cursor::open(txn, table)
    }

    /// Moves to the first entry; `False` if the table is empty.
    fn first(&self, py: Python<'_>) -> PyResult<bool> {
        self.go(py, Move::First)
    }

    /// Moves to the last entry; `False` if the table is empty.
    fn last(&self, py: Python<'_>) -> PyResult<bool> {
        self.go(py, Move::Last)
    }

    /// Moves to the next entry (the first, when unpositioned); `False` past the end
    /// (the cursor is then unpositioned).
    fn next(&self, py: Python<'_>) -> PyResult<bool> {
        self.go(py, Move::Next)
    }

    /// Moves to the previous entry (the last, when unpositioned); `False` before the first.
    fn prev(&self, py: Python<'_>) -> PyResult<bool> {
        self.go(py, Move::Prev)
    }

    /// Moves to `key`; `False` (unpositioned) if it is absent.
    fn set_key(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        let key = bytes_arg(key, "key")?;
        self.go(py, Move::Key(&key))
    }

    /// Moves to the first key at or after `key`; `False` (unpositioned) if there is none.
    fn set_range(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        let key = bytes_arg(key, "key")?;
        self.go(py, Move::Range(&key))
    }

    /// The current key (`b''` when unpositioned).
    fn key<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.current(py, true, false)
    }

    /// The current value (`b''` when unpositioned).
    fn value<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.current(py, false, true)
    }

    /// The current `(key, value)`.
    fn item<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.current(py, true, true)
    }

    /// Moves to `key` and returns its value, or `default` (unpositioned) if it is absent.
    #[pyo3(signature = (key, default=None))]
    fn get<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        default: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        if self.set_key(py, key)? {
            Ok(Some(self.current(py, false, true)?))
        } else {
            Ok(default)
        }
    }

    /// py-lmdb's `getmulti`: `(key, value)` for each of `keys` that is present, in the order
    /// given (the cursor ends on the last one found). Larch has no duplicate keys: `dupdata`
    /// changes nothing, and `dupfixed_bytes` and `keyfixed` (packed duplicates) are refused.
    #[pyo3(signature = (keys, dupdata=false, dupfixed_bytes=None, keyfixed=false))]
    fn getmulti<'py>(
        &self,
        py: Python<'py>,
        keys: &Bound<'py, PyAny>,
        dupdata: bool,
        dupfixed_bytes: Option<usize>,
        keyfixed: bool,
    ) -> PyResult<Bound<'py, PyList>> {
        let _ = dupdata;
        if dupfixed_bytes.is_some() || keyfixed {
            return Err(error(
                py,
                "InvalidParameterError",
                "dupfixed_bytes and keyfixed pack duplicate values (dupsort), which Larch does not have",
            ));
        }
        let out = PyList::empty(py);
        for key in keys.try_iter()? {
            if self.set_key(py, &key?)? {
                out.append(self.current(py, true, true)?)?;
            }
        }
        Ok(out)
    }

    /// An iterator from the current entry forward (from the first, when unpositioned),
    /// yielding `(key, value)`, or keys or values only.
    #[pyo3(signature = (keys=true, values=true))]
    fn iternext(slf: &Bound<'_, Self>, keys: bool, values: bool) -> PyResult<CursorIter> {
        CursorIter::new(slf, true, keys, values)
    }

    /// An iterator from the current entry backward (from the last, when unpositioned).
    #[pyo3(signature = (keys=true, values=true))]
    fn iterprev(slf: &Bound<'_, Self>, keys: bool, values: bool) -> PyResult<CursorIter> {
        CursorIter::new(slf, false, keys, values)
    }

    fn __iter__(slf: &Bound<'_, Self>) -> PyResult<CursorIter> {
        CursorIter::new(slf, true, true, true)
    }

    /// Stores `value` under `key` (as `Transaction.put`) and moves to it.
    #[pyo3(signature = (key, value, dupdata=true, overwrite=true, append=false))]
    fn put(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        dupdata: bool,
        overwrite: bool,
        append: bool,
    ) -> PyResult<bool> {
        let _ = dupdata;
        let key = bytes_arg(key, "key")?;
        let value = bytes_arg(value, "value")?;
        let mut guard = self.lock(py)?;
        let CursorState::Write { cur } = &mut *guard else {
            return Err(match &*guard {
                CursorState::Closed => closed(py),
                _ => error(py, "ReadonlyError", "a read transaction cannot write"),
            });
        };
        let t = self.txn.get();
        let mut w = t.writer(py)?;
        let mut table = write_table(&mut w, self.table.as_deref()).or_raise(py)?;
        let stored = put_into(py, &mut table, &key, &value, overwrite, append)?;
        *cur = seek_write(&table, Seek::Exactly(&key)).or_raise(py)?;
        Ok(stored)
    }

    /// Stores each `(key, value)` of `items`; returns `(consumed, added)`: items read, and
    /// those stored (with `overwrite=False`, keys that existed are not).
    #[pyo3(signature = (items, dupdata=true, overwrite=true, append=false))]
    fn putmulti(
        &self,
        py: Python<'_>,
        items: &Bound<'_, PyAny>,
        dupdata: bool,
        overwrite: bool,
        append: bool,
    ) -> PyResult<(u64, u64)> {
        let _ = dupdata;
        let guard = self.lock(py)?;
        if matches!(&*guard, CursorState::Closed) {
            return Err(closed(py));
        }
        drop(guard);
        let t = self.txn.get();
        let mut w = t.writer(py)?;
        let mut table = write_table(&mut w, self.table.as_deref()).or_raise(py)?;
        let (mut consumed, mut added) = (0, 0);
        for item in items.try_iter()? {
            let item = item?;
            let (k, v): (Bound<'_, PyAny>, Bound<'_, PyAny>) = item.extract()?;
            consumed += 1;
            let k = bytes_arg(&k, "key")?;
            let v = bytes_arg(&v, "value")?;
            if put_into(py, &mut table, &k, &v, overwrite, append)? {
                added += 1;
            }
        }
        Ok((consumed, added))
    }

    /// Deletes the current entry and moves to the next; `False` when unpositioned.
    fn delete(&self, py: Python<'_>) -> PyResult<bool> {
        let mut guard = self.lock(py)?;
        let CursorState::Write { cur } = &mut *guard else {
            return Err(match &*guard {
                CursorState::Closed => closed(py),
                _ => error(py, "ReadonlyError", "a read transaction cannot write"),
            });
        };
        let Some((k, _)) = cur.take() else {
            return Ok(false);
        };
        *cur = self.with_write_table(py, |t| match t {
            Some(t) => {
                t.delete(&k)?;
                seek_write(t, Seek::After(&k))
            }
            None => Ok(None),
        })?;
        Ok(true)
    }

    /// Deletes `key` and returns its value, or `None` (as `Transaction.pop`).
    fn pop<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.check_open(py)?;
        let table = Bound::new(
            py,
            Table {
                name: self.table.clone(),
            },
        )?;
        self.txn.get().pop(py, key, Some(table.as_any()))
    }

    /// Stores `value` under `key` and returns the old value, or `None`.
    fn replace<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        value: &Bound<'py, PyAny>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.check_open(py)?;
        let table = Bound::new(
            py,
            Table {
                name: self.table.clone(),
            },
        )?;
        self.txn.get().replace(py, key, value, Some(table.as_any()))
    }

    /// Closes the cursor (its transaction goes on). Closing twice does nothing.
    fn close(&self) {
        let mut guard = self.state.lock().unwrap_or_else(|e| e.into_inner());
        *guard = CursorState::Closed;
    }

    /// The transaction this cursor belongs to.
    #[getter]
    fn txn(&self, py: Python<'_>) -> Py<Transaction> {
        self.txn.clone_ref(py)
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, _args: &Bound<'_, PyTuple>) -> bool {
        self.close();
        false
    }
}

impl Cursor {
    fn check_open(&self, py: Python<'_>) -> PyResult<()> {
        match &*self.lock(py)? {
            CursorState::Closed => Err(closed(py)),
            _ => Ok(()),
        }
    }
}

// ---------------------------------------------------------------------------------------
// Iteration
// ---------------------------------------------------------------------------------------

/// Entries a read cursor's iterator fetches at once without the GIL.
const BATCH: usize = 128;

/// The iterator of `Cursor.iternext`/`iterprev`: yields the current entry, then steps.
/// On a read transaction it fetches the entries in batches with the GIL let go (a scan of a
/// database larger than memory waits on the disk without holding up other threads).
#[pyclass(module = "larch")]
struct CursorIter {
    cursor: Py<Cursor>,
    forward: bool,
    keys: bool,
    values: bool,
    /// Entries fetched and not yet yielded (read transactions), in order.
    batch: std::collections::VecDeque<(Slice, Slice)>,
    /// The cursor's iterator, positioned after the last entry of `batch`: given back to the
    /// cursor when the batch is used up (the cursor then stands at that entry).
    ahead: Option<(bool, larchdb::Range<'static>)>,
    /// The key (its address) of the entry last yielded, where this iterator left the cursor:
    /// if the cursor stands elsewhere, it was moved meanwhile, and iteration goes on from there.
    at: Option<usize>,
    /// The first call yields the cursor's current entry.
    started: bool,
    done: bool,
    /// Keeps the snapshot `batch` and `ahead` point into alive; declared last, dropped last.
    core: Option<Arc<ReadCore>>,
}

// SAFETY: `batch` and `ahead` point into the snapshot `core` keeps alive, which is immutable
// and shared by threads; PyO3 gives `&mut` access to the iterator only under its borrow flag.
unsafe impl Send for CursorIter {}
// SAFETY: as above.
unsafe impl Sync for CursorIter {}

impl CursorIter {
    fn new(c: &Bound<'_, Cursor>, forward: bool, keys: bool, values: bool) -> PyResult<CursorIter> {
        let py = c.py();
        let cursor = c.get();
        let positioned = {
            let guard = cursor.lock(py)?;
            match &*guard {
                CursorState::Read(r) => r.cur.is_some(),
                CursorState::Write { cur } => cur.is_some(),
                CursorState::Closed => return Err(closed(py)),
            }
        };
        if !positioned {
            if forward {
                cursor.first(py)?;
            } else {
                cursor.last(py)?;
            }
        }
        Ok(CursorIter {
            cursor: c.clone().unbind(),
            forward,
            keys,
            values,
            batch: Default::default(),
            ahead: None,
            at: None,
            started: false,
            done: false,
            core: None,
        })
    }
}

#[pymethods]
impl CursorIter {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        if self.done {
            return Ok(None);
        }
        let cursor = self.cursor.get();
        let buffers = cursor.buffers;
        let mut guard = cursor.lock(py)?;
        match &mut *guard {
            CursorState::Read(r) => {
                if !self.started {
                    self.started = true;
                    self.core = Some(r.core.clone());
                    if let Some(e) = r.cur {
                        self.batch.push_back(e);
                    }
                } else if r.cur.map(|(k, _)| k.as_ptr() as usize) != self.at {
                    // The cursor was moved since the last entry yielded: go on after where it
                    // stands now (as py-lmdb's iterator, which steps the cursor each time).
                    self.batch.clear();
                    self.ahead = None;
                    if r.cur.is_none() {
                        self.done = true;
                        return Ok(None);
                    }
                }
                if self.batch.is_empty() {
                    // Fetch the next entries without the GIL (the cursor's lock is held:
                    // another thread using it gets an error, not a wait).
                    let forward = self.forward;
                    let mut job = SameThread((&mut **r, &mut self.batch));
                    let fetched = py.detach(move || {
                        let (r, batch) = &mut job.0;
                        for _ in 0..BATCH {
                            match r.step(forward) {
                                Ok(true) => batch.push_back(r.cur.expect("positioned")),
                                Ok(false) => break,
                                Err(e) => return SameThread(Err(e)),
                            }
                        }
                        SameThread(Ok(()))
                    });
                    fetched.0.or_raise(py)?;
                    // The cursor is moved back to each entry as it is yielded; its iterator
                    // waits here until the batch is used up.
                    self.ahead = r.range.take();
                }
                match self.batch.pop_front() {
                    Some((k, v)) => {
                        r.cur = Some((k, v));
                        self.at = Some(k.as_ptr() as usize);
                        if self.batch.is_empty() {
                            if let Some(ahead) = self.ahead.take() {
                                r.range = Some(ahead);
                            }
                        }
                        let snap = exporter(py, &mut r.snapshot, &r.core, buffers)?;
                        let (keys, values) = (self.keys, self.values);
                        Ok(Some(item_out(
                            py,
                            k,
                            v,
                            keys,
                            values,
                            buffers,
                            snap.as_ref(),
                        )?))
                    }
                    None => {
                        self.done = true;
                        Ok(None)
                    }
                }
            }
            CursorState::Write { .. } => {
                drop(guard);
                if self.started {
                    let moved = if self.forward {
                        cursor.next(py)?
                    } else {
                        cursor.prev(py)?
                    };
                    if !moved {
                        self.done = true;
                        return Ok(None);
                    }
                } else {
                    self.started = true;
                    let guard = cursor.lock(py)?;
                    if matches!(&*guard, CursorState::Write { cur: None }) {
                        self.done = true;
                        return Ok(None);
                    }
                }
                Ok(Some(cursor.current(py, self.keys, self.values)?))
            }
            CursorState::Closed => Err(closed(py)),
        }
    }
}

/// A point inside a write transaction (`Transaction.savepoint()`).
#[pyclass(frozen, module = "larch")]
struct Savepoint {
    /// `None` once released.
    sp: Mutex<Option<larchdb::Savepoint>>,
    txn: Py<Transaction>,
}

impl Savepoint {
    fn lock(&self) -> MutexGuard<'_, Option<larchdb::Savepoint>> {
        self.sp.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn released(py: Python<'_>) -> PyErr {
    error(py, "Error", "the savepoint was released")
}

#[pymethods]
impl Savepoint {
    /// `txn.rollback_to(self)`.
    fn rollback(&self, py: Python<'_>) -> PyResult<()> {
        self.txn.get().rollback_to(py, self)
    }

    /// `txn.release(self)`.
    fn release(&self, py: Python<'_>) -> PyResult<()> {
        self.txn.get().release(py, self)
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Rolls back to the savepoint if the block raised, then releases it; the exception goes
    /// on.
    fn __exit__(
        &self,
        py: Python<'_>,
        exc_type: Option<&Bound<'_, PyAny>>,
        _exc: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        if exc_type.is_some_and(|t| !t.is_none()) && self.lock().is_some() {
            self.rollback(py)?;
        }
        self.release(py)?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        if self.lock().is_some() {
            "<larch.Savepoint>".to_string()
        } else {
            "<larch.Savepoint released>".to_string()
        }
    }
}

// ---------------------------------------------------------------------------------------
// Module
// ---------------------------------------------------------------------------------------

#[pymodule]
fn _larch(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Environment>()?;
    m.add_class::<Transaction>()?;
    m.add_class::<Table>()?;
    m.add_class::<Cursor>()?;
    m.add_class::<CursorIter>()?;
    m.add_class::<Savepoint>()?;
    m.add_class::<Snapshot>()?;
    m.add("VALUE_BYTES_MAX", larchdb::limits::VALUE_BYTES_MAX)?;
    m.add("DEFAULT_TABLE", larchdb::DEFAULT_TABLE)?;
    m.add("DATA_FILE", DATA_FILE)?;
    m.add("ENGINE_VERSION", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
