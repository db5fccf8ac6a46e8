//! The C API of Larch: `liblarch.so`, `liblarch.a` and `include/larch.h` (generated from this
//! file by cbindgen; `tests/header.rs` fails when the checked-in header is not current).
//!
//! The design, and how it maps the Rust API, is in docs/design/c-api.md. In short:
//! - Every function returns an `int` code (`LARCH_OK`, `LARCH_NOTFOUND`, `LARCH_KEYEXIST`, or
//!   an error `LARCH_E...`); `larch_last_error()` gives the engine's message for the last
//!   error on the calling thread. No Rust panic crosses the boundary: each call catches one
//!   and returns `LARCH_EPANIC`.
//! - Handles (`larch_db *`, `larch_txn *`, `larch_cursor *`) are slot numbers with a
//!   generation, not pointers (`registry`): a handle used after it was freed (a transaction
//!   after its commit or abort, a cursor after its close or its transaction's end, a database
//!   after its close) is `LARCH_EBADHANDLE`, never a read of freed memory.
//! - Reads are zero-copy: `larch_get` and the cursor give a pointer and a length into the
//!   snapshot, valid until the transaction ends (in a write transaction, until its next
//!   change), as LMDB's `MDB_val`.
//! - A database handle may be used by many threads at once; a transaction, and its cursors,
//!   by one thread at a time (LMDB's rule).

#![allow(non_camel_case_types)]
#![deny(unsafe_op_in_unsafe_fn)]

mod registry;

use larchdb::{Database, Durability, Options, ReadTable, ReadTxn, Savepoint, WriteTxn};
use registry::{Handle, Registry};
use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_uint, CStr, CString};
use std::ops::Bound;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, RwLock};

#[cfg(not(target_pointer_width = "64"))]
compile_error!("the C API encodes handles in 64-bit pointers");

// ---------------------------------------------------------------------------------------
// Codes
// ---------------------------------------------------------------------------------------

/// Success.
pub const LARCH_OK: c_int = 0;
/// Not an error: the key is not there, or the cursor has no entry in that direction.
pub const LARCH_NOTFOUND: c_int = 1;
/// Not an error: `LARCH_NOOVERWRITE` and the key is there (nothing was written).
pub const LARCH_KEYEXIST: c_int = 2;
/// An argument is not valid: a null pointer where one is needed, a name that is not UTF-8,
/// an unknown flag or cursor operation.
pub const LARCH_EINVAL: c_int = 10;
/// The handle was freed (a transaction after its commit or abort, a cursor after its close or
/// its transaction's end, a database after its close), or is of another kind.
pub const LARCH_EBADHANDLE: c_int = 11;
/// `larch_close` with transactions still open on the database (nothing was closed).
pub const LARCH_EBUSY: c_int = 12;
/// An I/O error of the operating system; the message names the operation and the path.
pub const LARCH_EIO: c_int = 13;
/// The disk is full (`ENOSPC`, `EDQUOT`): nothing committed is lost.
pub const LARCH_EDISKFULL: c_int = 14;
/// The database is damaged: a page or log record failed its checks, an open found damage it
/// cannot get past without losing acknowledged commits (nothing was changed; `larch recover`
/// opens the newest intact state), or the lock file beside it is not a Larch lock file.
pub const LARCH_ECORRUPTED: c_int = 15;
/// The file is not a Larch database, or of a format version this library cannot read.
pub const LARCH_ENOTADB: c_int = 16;
/// Another process, or another handle in this process, holds the database open for writing.
pub const LARCH_ELOCKED: c_int = 17;
/// `LARCH_NOWAIT` and another write transaction is open; or this thread's own write
/// transaction on the database is still open, which a second `larch_begin` would wait for
/// forever.
pub const LARCH_EWRITEBUSY: c_int = 18;
/// A write to a read-only database handle, or in a read transaction.
pub const LARCH_EREADONLY: c_int = 19;
/// The key is longer than the engine's limit for the database's page size: a quarter page less
/// some bytes (1000 bytes at 4096-byte pages). The empty key is valid.
pub const LARCH_EKEYTOOLARGE: c_int = 20;
/// The value is longer than the engine's limit (1073741824 bytes: 1 GiB).
pub const LARCH_EVALUETOOLARGE: c_int = 21;
/// No table of that name.
pub const LARCH_ETABLENOTFOUND: c_int = 22;
/// A table of that name exists already.
pub const LARCH_ETABLEEXISTS: c_int = 23;
/// The table name is empty or longer than 255 bytes.
pub const LARCH_ETABLENAME: c_int = 24;
/// The options are not valid (the message says which).
pub const LARCH_EOPTIONS: c_int = 25;
/// A write to the file failed earlier; the handle accepts no more writes (reopen it).
pub const LARCH_EPOISONED: c_int = 26;
/// `LARCH_APPEND` with a key not greater than the table's last.
pub const LARCH_EAPPEND: c_int = 27;
/// An earlier call in this write transaction failed part way; it can only be aborted.
pub const LARCH_ETXNFAILED: c_int = 28;
/// The file has reached the largest size its page numbers can address.
pub const LARCH_EFULL: c_int = 29;
/// The lock file's reader table has no free slot.
pub const LARCH_EREADERSFULL: c_int = 30;
/// The table was created with other key or value types, or its bytes do not decode as them
/// (typed tables of the Rust API).
pub const LARCH_ETYPE: c_int = 31;
/// The savepoint was released, rolled past, or is another transaction's.
pub const LARCH_ESAVEPOINT: c_int = 32;
/// The engine panicked; the message says where. The handle involved may be unusable.
pub const LARCH_EPANIC: c_int = 33;
/// A failure of the engine's own invariants (a bug); the message says which.
pub const LARCH_EINTERNAL: c_int = 34;

// Flags of `larch_begin`.
/// `larch_begin`: a read transaction (a snapshot; never blocks, never blocks the writer).
pub const LARCH_RDONLY: c_uint = 1;
/// `larch_begin`: a write transaction that fails with `LARCH_EWRITEBUSY` instead of waiting
/// for the one open.
pub const LARCH_NOWAIT: c_uint = 2;

// Flags of `larch_put`.
/// `larch_put`: write only if the key is not there; `LARCH_KEYEXIST` otherwise.
pub const LARCH_NOOVERWRITE: c_uint = 1;
/// `larch_put`: the key is greater than every key in the table (a sorted load; faster);
/// `LARCH_EAPPEND` otherwise.
pub const LARCH_APPEND: c_uint = 2;

// Durability of `larch_commit` and of `larch_options.durability`.
/// `larch_commit`: the database's durability (`larch_options.durability`).
pub const LARCH_DURABILITY_DEFAULT: c_int = 0;
/// Durable when the commit returns (one sync, shared by the commits waiting at once).
pub const LARCH_DURABILITY_IMMEDIATE: c_int = 1;
/// Durable within a bound of time and bytes (with the log), without the committer waiting;
/// without the log, as `LARCH_DURABILITY_NONE`.
pub const LARCH_DURABILITY_BOUNDED: c_int = 2;
/// Never synced by the commit; a crash may lose it (and every later one), never corrupts.
pub const LARCH_DURABILITY_NONE: c_int = 3;

// Operations of `larch_cursor_get`.
/// The first entry (within the cursor's bounds).
pub const LARCH_FIRST: c_int = 0;
/// The last entry (within the cursor's bounds).
pub const LARCH_LAST: c_int = 1;
/// The entry after the cursor's (the first, on a cursor not placed yet).
pub const LARCH_NEXT: c_int = 2;
/// The entry before the cursor's (the last, on a cursor not placed yet).
pub const LARCH_PREV: c_int = 3;
/// The entry whose key is `*key` exactly.
pub const LARCH_SET_KEY: c_int = 4;
/// The first entry whose key is at or after `*key`.
pub const LARCH_SET_RANGE: c_int = 5;
/// The cursor's entry again.
pub const LARCH_GET_CURRENT: c_int = 6;

// ---------------------------------------------------------------------------------------
// Types
// ---------------------------------------------------------------------------------------

/// A database handle (opaque).
pub struct larch_db {
    _opaque: u8,
}

/// A transaction handle (opaque).
pub struct larch_txn {
    _opaque: u8,
}

/// A cursor handle (opaque).
pub struct larch_cursor {
    _opaque: u8,
}

/// A byte string: a key, or a value. What the library returns points into the database's
/// snapshot (no copy) and is valid until the transaction ends; in a write transaction, until
/// its next change.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct larch_val {
    /// The bytes (may be null when `len` is 0).
    pub data: *const u8,
    /// How many.
    pub len: usize,
}

/// `larch_options::frames_bytes` for no frames: the data file read through its mapping.
pub const LARCH_FRAMES_OFF: u64 = u64::MAX;

/// Options of `larch_open`. Fill with `larch_options_init`, then change fields.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct larch_options {
    /// `sizeof(larch_options)`, set by `larch_options_init`: a library of a later version
    /// reads only the fields a caller built against an earlier header knows.
    pub struct_bytes: u32,
    /// Page size of a new database: a power of two from 4096 to 65536; 0 for the default (4096).
    /// Ignored when the file exists (its own page size is used).
    pub page_bytes: u32,
    /// Non-zero: open for reading only (several processes may; beside one writer). Zero (the
    /// default): open for reading and writing.
    pub read_only: c_int,
    /// Non-zero (the default): create the file if it does not exist.
    pub create: c_int,
    /// Non-zero (the default): commit through a write-ahead log beside the file (small commits
    /// cost a log append; pages are written at checkpoints). Zero: every commit writes pages.
    pub log: c_int,
    /// The durability of `larch_commit(txn, LARCH_DURABILITY_DEFAULT)`:
    /// `LARCH_DURABILITY_IMMEDIATE` (the default), `_BOUNDED` or `_NONE`.
    pub durability: c_int,
    /// Non-zero: every page read is checked against its checksum, also through the memory map.
    /// Zero (the default): pages are checked when the file is opened (meta and free-space
    /// pages), by `larch_verify`, and by buffered reads (once per page per snapshot).
    pub verify_checksums: c_int,
    /// Non-zero (the default): compact the file when the last handle closes it.
    pub compact_on_close: c_int,
    /// With the log: bytes of log between checkpoints (at least); 0 for the default.
    pub checkpoint_bytes: u64,
    /// With the log: the memory, in bytes, the handle may hold for the writes its tree does
    /// not have yet, beyond which the writer is slowed and then waits for a checkpoint; 0 for
    /// the default (a quarter of the memory the process may use beyond 64 MiB: its cgroup's
    /// limit or the machine's memory). Set it where the process shares that memory with more
    /// than the engine. At least 4 MiB.
    pub memory_budget: u64,
    /// With the log: bytes the log keeps as a room of its own, so that checkpoints are made
    /// durable only when that room runs short; 0 for the default (the room the checkpoints
    /// call for, which keeps the open files near the data's size). Raised, small random
    /// writes run faster for that much more disk while the database is open.
    pub log_room_bytes: u64,
    /// How much of the data file a writing handle may keep in memory of its own (frames),
    /// in bytes; 0, the default: the engine's, half of the memory the process may use beyond
    /// 64 MiB; `LARCH_FRAMES_OFF`: none, the file read through its mapping of the page cache
    /// (the Rust API's `Options::frames_bytes`). At most that half, whatever is asked.
    pub frames_bytes: u64,
    /// Zero (as `larch_options_init` leaves it): room for options a later library adds
    /// without changing the struct's size, each meaning its default at zero. Non-zero is
    /// refused (`LARCH_EINVAL`): an option this library does not know.
    pub reserved: [u64; 5],
}

/// `larch_stats`' figures (see the Rust API's `Stats` for each one's exact meaning).
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct larch_stats {
    /// Bytes per page.
    pub page_bytes: u32,
    /// Depth of the deepest table's tree.
    pub depth: u32,
    /// The commit whose tree the page figures describe: the newest, or with the log the
    /// last checkpoint. (The entry counts are the newest commit's either way.)
    pub txn: u64,
    /// Pages in the file.
    pub page_count: u64,
    /// Bytes of the data file.
    pub file_bytes: u64,
    /// Branch pages of every table.
    pub branch_pages: u64,
    /// Leaf pages of every table.
    pub leaf_pages: u64,
    /// Overflow pages (large values).
    pub overflow_pages: u64,
    /// Pages holding the free-space record.
    pub freelist_pages: u64,
    /// Free pages, reusable now.
    pub free_pages: u64,
    /// Pages freed that a reader may still reach.
    pub pending_pages: u64,
    /// Entries in every table.
    pub entries: u64,
    /// Tables.
    pub tables: u64,
    /// Read transactions open on this handle.
    pub readers: u64,
    /// Read-only handles of other processes registered in the lock file.
    pub other_readers: u64,
    /// The oldest snapshot a live reader holds; 0 if none.
    pub oldest_reader: u64,
    /// Of the pending pages, those the oldest reader keeps from reuse.
    pub oldest_reader_pages: u64,
    /// Commits that succeeded on this handle since it was opened.
    pub commits: u64,
    /// Commits that failed.
    pub failed_commits: u64,
    /// Write transactions aborted.
    pub aborts: u64,
    /// Commits that went to the log only.
    pub logged_commits: u64,
    /// Commits that wrote pages.
    pub page_commits: u64,
    /// Checkpoints written.
    pub checkpoints: u64,
    /// Syncs of the log for commits.
    pub log_syncs: u64,
    /// Microseconds write transactions were held back so that checkpoints keep up.
    pub paced_micros: u64,
    /// Write transactions that waited for a checkpoint to give back room in the log.
    pub log_full_waits: u64,
    /// Microseconds those waits took.
    pub log_full_wait_micros: u64,
    /// Of the checkpoints, the ones made durable as they were written (the others are made
    /// durable by a later one; see `larch_options.log_room_bytes`).
    pub durable_checkpoints: u64,
}

/// `larch_verify`'s report.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct larch_verify_report {
    /// The commit verified.
    pub txn: u64,
    /// Pages in the file.
    pub page_count: u64,
    /// Pages read and checked.
    pub pages_checked: u64,
    /// Tables.
    pub tables: u64,
    /// Entries.
    pub entries: u64,
    /// Free pages.
    pub free_pages: u64,
    /// Pending pages.
    pub pending_pages: u64,
    /// Problems found (0: the database is sound); `larch_last_error` describes the first.
    pub problems: u64,
}

/// `larch_copy`'s figures.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct larch_copied {
    /// The commit copied.
    pub txn: u64,
    /// Tables copied.
    pub tables: u64,
    /// Entries copied.
    pub entries: u64,
    /// Bytes of the copy.
    pub bytes: u64,
}

/// `larch_compact`'s figures.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct larch_compacted {
    /// Data file bytes before.
    pub data_bytes_before: u64,
    /// Data file bytes after.
    pub data_bytes_after: u64,
    /// Log file bytes before.
    pub log_bytes_before: u64,
    /// Log file bytes after.
    pub log_bytes_after: u64,
    /// Non-zero if pages were moved.
    pub moved: c_int,
}

/// `larch_list_tables`' callback: called with each table's name (not NUL-terminated) and
/// `ctx`; a non-zero return stops the listing and is returned by `larch_list_tables`.
pub type larch_table_fn = Option<
    unsafe extern "C" fn(ctx: *mut std::ffi::c_void, name: *const c_char, len: usize) -> c_int,
>;

// ---------------------------------------------------------------------------------------
// State behind the handles
// ---------------------------------------------------------------------------------------

struct DbCell {
    db: Database,
    /// Transactions open on it (`larch_close` refuses while there are).
    txns: AtomicUsize,
}

struct TxnCell {
    kind: TxnKind,
    /// Cursors opened on it and not closed: their iterators end with it.
    cursors: Vec<Handle>,
    /// Savepoints by number (`larch_savepoint`); `None` once released.
    savepoints: Vec<Option<Savepoint>>,
    /// Dropped after `kind`, which borrows the database in it.
    db: Arc<DbCell>,
}

enum TxnKind {
    /// Field order is drop order: the tables borrow the transaction.
    Read {
        tables: Vec<(Option<Box<str>>, ReadTable<'static>)>,
        txn: Box<ReadTxn>,
    },
    Write(WriteTxn<'static>),
}

struct CursorCell {
    txn: Handle,
    table: Option<Box<str>>,
    lo: Option<Vec<u8>>,
    hi: Option<Vec<u8>>,
    /// The key of the entry the cursor is on, if placed.
    at: Option<Vec<u8>>,
    /// In a read transaction: the entry's bytes in the snapshot, and the iterator that found
    /// it, kept to step on in the same direction without a new descent (`reverse`).
    here: Option<(larch_val, larch_val)>,
    live: Option<(bool, larchdb::Range<'static>)>,
    /// The transaction ended: only `larch_cursor_close` is left.
    ended: bool,
}

struct Registries {
    dbs: RwLock<Registry<Arc<DbCell>>>,
    txns: Registry<TxnCell>,
    cursors: Registry<CursorCell>,
}

fn registries() -> &'static Registries {
    static R: OnceLock<Registries> = OnceLock::new();
    R.get_or_init(|| Registries {
        dbs: RwLock::new(Registry::new(1)),
        txns: Registry::new(2),
        cursors: Registry::new(3),
    })
}

// ---------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

/// A failed call: its code and message.
struct Failure(c_int, String);

type Outcome = Result<c_int, Failure>;

impl From<larchdb::Error> for Failure {
    fn from(e: larchdb::Error) -> Failure {
        use larchdb::Error as E;
        let code = match &e {
            E::Io { .. } => LARCH_EIO,
            E::DiskFull => LARCH_EDISKFULL,
            E::Corrupted { .. }
            | E::CorruptedLog { .. }
            | E::WouldLoseData { .. }
            | E::LockFileInvalid(_) => LARCH_ECORRUPTED,
            E::NotADatabase | E::UnsupportedVersion { .. } => LARCH_ENOTADB,
            E::DatabaseLocked => LARCH_ELOCKED,
            E::WriteBusy => LARCH_EWRITEBUSY,
            E::ReadOnly => LARCH_EREADONLY,
            E::KeyTooLarge { .. } => LARCH_EKEYTOOLARGE,
            E::ValueTooLarge { .. } => LARCH_EVALUETOOLARGE,
            E::TableNotFound(_) => LARCH_ETABLENOTFOUND,
            E::TableExists(_) => LARCH_ETABLEEXISTS,
            E::InvalidTableName(_) => LARCH_ETABLENAME,
            E::InvalidOptions(_) => LARCH_EOPTIONS,
            E::Poisoned => LARCH_EPOISONED,
            E::AppendOutOfOrder => LARCH_EAPPEND,
            E::TxnFailed => LARCH_ETXNFAILED,
            E::DatabaseFull => LARCH_EFULL,
            E::ReadersFull { .. } => LARCH_EREADERSFULL,
            E::TableTypeMismatch { .. } | E::Decode(_) => LARCH_ETYPE,
            E::SavepointInvalid => LARCH_ESAVEPOINT,
            _ => LARCH_EINTERNAL,
        };
        Failure(code, e.to_string())
    }
}

fn fail<T>(code: c_int, message: impl Into<String>) -> Result<T, Failure> {
    Err(Failure(code, message.into()))
}

/// Whether `code` is one a call returns without failing: `LARCH_OK` and the two answers that
/// are not errors. Every other code a call returns is a failure with its own message.
fn succeeded(code: c_int) -> bool {
    matches!(code, LARCH_OK | LARCH_NOTFOUND | LARCH_KEYEXIST)
}

/// Runs a call's body: catches a panic, records a failure's message for `larch_last_error`.
///
/// Every exported function that can fail runs through here, so that every failing call sets
/// the message: a failure carries its own; a failing code returned as an answer, or a failure
/// with an empty message, gets the code's fixed text (`larch_strerror`). Thus
/// `larch_last_error` never shows an earlier call's message after a later call failed.
fn call(body: impl FnOnce() -> Outcome) -> c_int {
    let failure = match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(code)) if succeeded(code) => return code,
        Ok(Ok(code)) => Failure(code, String::new()),
        Ok(Err(f)) => f,
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".into());
            Failure(LARCH_EPANIC, format!("the engine panicked: {what}"))
        }
    };
    let Failure(code, text) = failure;
    let text = if text.is_empty() {
        // SAFETY: `larch_strerror` returns a static, NUL-terminated string.
        unsafe { CStr::from_ptr(larch_strerror(code)) }
            .to_string_lossy()
            .into_owned()
    } else {
        text
    };
    let message = CString::new(text.replace('\0', " ")).unwrap_or_default();
    LAST_ERROR.with(|m| *m.borrow_mut() = message);
    code
}

/// The message of the last call on this thread that failed (returned a code other than
/// `LARCH_OK`, `LARCH_NOTFOUND` and `LARCH_KEYEXIST`), or "" if none did. Every call that fails
/// sets it, so it describes the last failure and never an earlier one; calls that succeed
/// leave it as it is (as `errno`), so that it can still be read after cleaning up (an abort, a
/// close). Valid until the next failing call on this thread; copy it to keep it.
#[no_mangle]
pub extern "C" fn larch_last_error() -> *const c_char {
    LAST_ERROR.with(|m| m.borrow().as_ptr())
}

/// A fixed description of a code (`LARCH_OK`, `LARCH_NOTFOUND`, ... ); never null.
#[no_mangle]
pub extern "C" fn larch_strerror(code: c_int) -> *const c_char {
    let s: &'static CStr = match code {
        LARCH_OK => c"success",
        LARCH_NOTFOUND => c"not found",
        LARCH_KEYEXIST => c"the key exists",
        LARCH_EINVAL => c"invalid argument",
        LARCH_EBADHANDLE => c"the handle was freed or is of another kind",
        LARCH_EBUSY => c"transactions are still open on the database",
        LARCH_EIO => c"I/O error",
        LARCH_EDISKFULL => c"the disk is full",
        LARCH_ECORRUPTED => c"the database, its log or its lock file is damaged",
        LARCH_ENOTADB => c"not a Larch database, or an unsupported version",
        LARCH_ELOCKED => c"another process or handle has the database open for writing",
        LARCH_EWRITEBUSY => c"another write transaction, or this thread's own, is open",
        LARCH_EREADONLY => c"the database or transaction is read-only",
        LARCH_EKEYTOOLARGE => c"the key is too large",
        LARCH_EVALUETOOLARGE => c"the value is too large",
        LARCH_ETABLENOTFOUND => c"no such table",
        LARCH_ETABLEEXISTS => c"the table exists",
        LARCH_ETABLENAME => c"invalid table name: empty or too long",
        LARCH_EOPTIONS => c"invalid options",
        LARCH_EPOISONED => c"an earlier write failed; reopen the database",
        LARCH_EAPPEND => c"append out of order",
        LARCH_ETXNFAILED => c"the transaction failed part way; abort it",
        LARCH_EFULL => c"the database reached its largest size",
        LARCH_EREADERSFULL => c"the reader table is full",
        LARCH_ETYPE => c"the table's types differ, or its bytes do not decode as them",
        LARCH_ESAVEPOINT => c"invalid savepoint",
        LARCH_EPANIC => c"the engine panicked",
        LARCH_EINTERNAL => c"internal error",
        _ => c"unknown code",
    };
    s.as_ptr()
}

/// The library's version, as "major.minor.patch".
#[no_mangle]
pub extern "C" fn larch_version() -> *const c_char {
    static V: &CStr =
        match CStr::from_bytes_with_nul(concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes()) {
            Ok(v) => v,
            Err(_) => c"?",
        };
    V.as_ptr()
}

// ---------------------------------------------------------------------------------------
// Arguments
// ---------------------------------------------------------------------------------------

fn handle<T>(p: *mut T) -> Handle {
    p as usize as u64
}

fn pointer<T>(h: Handle) -> *mut T {
    h as usize as *mut T
}

/// `bytes` of a `larch_val` given by the caller.
///
/// # Safety
/// `v.data` points to `v.len` readable bytes (or `v.len` is 0).
unsafe fn val<'a>(v: &larch_val) -> Result<&'a [u8], Failure> {
    if v.len == 0 {
        return Ok(&[]);
    }
    if v.data.is_null() {
        return fail(
            LARCH_EINVAL,
            "a value of non-zero length with a null pointer",
        );
    }
    // SAFETY: the caller's contract.
    Ok(unsafe { std::slice::from_raw_parts(v.data, v.len) })
}

fn out(b: &[u8]) -> larch_val {
    larch_val {
        data: b.as_ptr(),
        len: b.len(),
    }
}

/// A NUL-terminated UTF-8 string from C; `None` for null.
///
/// # Safety
/// `s` is null or a NUL-terminated string.
unsafe fn name<'a>(s: *const c_char) -> Result<Option<&'a str>, Failure> {
    if s.is_null() {
        return Ok(None);
    }
    // SAFETY: the caller's contract.
    let c = unsafe { CStr::from_ptr(s) };
    match c.to_str() {
        Ok(s) => Ok(Some(s)),
        Err(_) => fail(LARCH_EINVAL, "a name that is not UTF-8"),
    }
}

/// Stores `value` through `p` if the caller gave a place.
///
/// # Safety
/// `p` is null or valid for a write of `T`.
unsafe fn put_out<T>(p: *mut T, value: T) {
    if !p.is_null() {
        // SAFETY: the caller's contract.
        unsafe { p.write(value) };
    }
}

fn need<T>(p: *const T, what: &str) -> Result<(), Failure> {
    if p.is_null() {
        return fail(LARCH_EINVAL, format!("{what} is null"));
    }
    Ok(())
}

/// `LARCH_EBADHANDLE`'s messages, one per kind of handle.
const STALE_DB: &str = "the database handle was closed or is not one";
const STALE_TXN: &str = "the transaction has ended (committed or aborted) or the handle is not one";
const STALE_CURSOR: &str = "the cursor was closed or the handle is not one";

/// The database behind `db`. `for_txn`: counted as having one more transaction open, the
/// count raised under the registry's lock, so that `larch_close` (under the write lock)
/// either sees it and refuses, or ran first and this call finds the handle closed.
fn db_of(db: *mut larch_db, for_txn: bool) -> Result<Arc<DbCell>, Failure> {
    let dbs = registries().dbs.read().unwrap_or_else(|e| e.into_inner());
    // SAFETY: the object is only read (an `Arc` cloned) under the registry's read lock, and
    // removed only under its write lock.
    let Some(cell) = (unsafe { dbs.get(handle(db)) }) else {
        return fail(LARCH_EBADHANDLE, STALE_DB);
    };
    if for_txn {
        cell.txns.fetch_add(1, Ordering::AcqRel);
    }
    Ok(cell.clone())
}

fn txn_of<'a>(txn: *mut larch_txn) -> Result<&'a mut TxnCell, Failure> {
    // SAFETY: a transaction is used by one thread at a time (the API's rule), and is removed
    // only by `larch_commit`/`larch_abort` on that thread, after this reference's last use.
    match unsafe { registries().txns.get(handle(txn)) } {
        Some(cell) => Ok(cell),
        None => fail(LARCH_EBADHANDLE, STALE_TXN),
    }
}

fn cursor_of<'a>(cursor: *mut larch_cursor) -> Result<&'a mut CursorCell, Failure> {
    // SAFETY: as `txn_of`: a cursor is used by its transaction's thread only.
    match unsafe { registries().cursors.get(handle(cursor)) } {
        Some(cell) => Ok(cell),
        None => fail(LARCH_EBADHANDLE, STALE_CURSOR),
    }
}

// ---------------------------------------------------------------------------------------
// Database
// ---------------------------------------------------------------------------------------

/// Fills `*options` with the defaults (and `struct_bytes`): the engine's, those of
/// `Options::default()` in the Rust API.
///
/// # Safety
/// `options` is null (nothing is done) or points to a `larch_options`.
#[no_mangle]
pub unsafe extern "C" fn larch_options_init(options: *mut larch_options) {
    // Taken from the engine's defaults rather than written again here, so that the two
    // cannot drift apart.
    let d = Options::default();
    let o = larch_options {
        struct_bytes: std::mem::size_of::<larch_options>() as u32,
        page_bytes: 0,
        read_only: d.read_only as c_int,
        create: d.create as c_int,
        log: d.log as c_int,
        durability: durability_code(d.durability),
        verify_checksums: d.verify_checksums as c_int,
        compact_on_close: d.compact_on_close as c_int,
        checkpoint_bytes: 0,
        memory_budget: d.memory_budget,
        log_room_bytes: d.log_room_bytes,
        frames_bytes: 0,
        reserved: [0; 5],
    };
    // SAFETY: the caller's contract.
    unsafe { put_out(options, o) };
}

/// The C code of an engine durability.
fn durability_code(d: Durability) -> c_int {
    match d {
        Durability::Immediate => LARCH_DURABILITY_IMMEDIATE,
        Durability::Bounded => LARCH_DURABILITY_BOUNDED,
        Durability::None => LARCH_DURABILITY_NONE,
        // A durability added to the engine and not yet to the C API: the database's own.
        _ => LARCH_DURABILITY_DEFAULT,
    }
}

fn durability(d: c_int) -> Result<Option<Durability>, Failure> {
    match d {
        LARCH_DURABILITY_DEFAULT => Ok(None),
        LARCH_DURABILITY_IMMEDIATE => Ok(Some(Durability::Immediate)),
        LARCH_DURABILITY_BOUNDED => Ok(Some(Durability::Bounded)),
        LARCH_DURABILITY_NONE => Ok(Some(Durability::None)),
        other => fail(LARCH_EINVAL, format!("unknown durability {other}")),
    }
}

fn options_of(o: &larch_options) -> Result<Options, Failure> {
    let full = std::mem::size_of::<larch_options>();
    if o.struct_bytes as usize != full {
        return fail(
            LARCH_EINVAL,
            format!(
                "larch_options.struct_bytes is {}, not this library's {full}: fill the options \
                 with larch_options_init, from the larch.h of this library",
                o.struct_bytes
            ),
        );
    }
    if let Some(i) = o.reserved.iter().position(|&r| r != 0) {
        return fail(
            LARCH_EINVAL,
            format!(
                "larch_options.reserved[{i}] is not zero: an option this library does not know"
            ),
        );
    }
    let mut options = Options::default()
        .read_only(o.read_only != 0)
        .create(o.create != 0)
        .log(o.log != 0)
        .verify_checksums(o.verify_checksums != 0)
        .compact_on_close(o.compact_on_close != 0);
    if o.page_bytes != 0 {
        options = options.page_bytes(o.page_bytes);
    }
    if o.checkpoint_bytes != 0 {
        options = options.checkpoint_bytes(o.checkpoint_bytes);
    }
    options = options
        .memory_budget(o.memory_budget)
        .log_room_bytes(o.log_room_bytes)
        .frames_bytes(match o.frames_bytes {
            0 => larchdb::FRAMES_AUTO,
            LARCH_FRAMES_OFF => 0,
            n => n,
        });
    if let Some(d) = durability(o.durability)? {
        options = options.durability(d);
    }
    Ok(options)
}

/// Opens (or creates) the database at `path` with `options` (null: the defaults) and stores
/// its handle in `*db`. Several handles may be open on one file in one process only if all
/// but one are read-only.
///
/// # Safety
/// `path` is a NUL-terminated string; `options` is null or points to options filled by
/// `larch_options_init`; `db` points to a place for the handle.
#[no_mangle]
pub unsafe extern "C" fn larch_open(
    path: *const c_char,
    options: *const larch_options,
    db: *mut *mut larch_db,
) -> c_int {
    call(|| {
        need(path, "path")?;
        need(db, "db")?;
        // SAFETY: the caller's contract.
        let path = unsafe { name(path) }?.unwrap_or_default();
        let options = if options.is_null() {
            Options::default()
        } else {
            // SAFETY: the caller's contract.
            options_of(unsafe { &*options })?
        };
        let database = Database::open(path, options)?;
        let cell = Arc::new(DbCell {
            db: database,
            txns: AtomicUsize::new(0),
        });
        let dbs = registries().dbs.write().unwrap_or_else(|e| e.into_inner());
        let Some(h) = dbs.insert(Box::new(cell)) else {
            return fail(LARCH_EINTERNAL, "too many open database handles");
        };
        // SAFETY: the caller's contract.
        unsafe { db.write(pointer(h)) };
        Ok(LARCH_OK)
    })
}

/// Closes the database: its files are synced as its durability asks and closed (compacted
/// first if `compact_on_close`). `LARCH_EBUSY` (and nothing closed) while transactions are
/// open on it: end them first. A closed handle is `LARCH_EBADHANDLE` from then on.
#[no_mangle]
pub extern "C" fn larch_close(db: *mut larch_db) -> c_int {
    call(|| {
        let dbs = registries().dbs.write().unwrap_or_else(|e| e.into_inner());
        // SAFETY: under the registry's write lock, no other thread reads the object.
        let Some(cell) = (unsafe { dbs.get(handle(db)) }) else {
            return fail(LARCH_EBADHANDLE, STALE_DB);
        };
        let open = cell.txns.load(Ordering::Acquire);
        if open > 0 {
            return fail(
                LARCH_EBUSY,
                format!(
                    "{open} transaction(s) still open on the database: end them before closing it"
                ),
            );
        }
        let cell = dbs.remove(handle(db));
        drop(dbs);
        // Outside the lock: dropping the last reference closes the files. A call running on
        // another thread (`larch_stat`, `larch_copy`, ...) holds one until it returns, and
        // the files close then.
        drop(cell);
        Ok(LARCH_OK)
    })
}

/// Runs `f` on the database behind `db`.
fn with_db(db: *mut larch_db, f: impl FnOnce(&Database) -> Outcome) -> c_int {
    call(|| f(&db_of(db, false)?.db))
}

/// Writes the pages changed since the last checkpoint (with the log; nothing to do without).
#[no_mangle]
pub extern "C" fn larch_checkpoint(db: *mut larch_db) -> c_int {
    with_db(db, |d| {
        d.checkpoint()?;
        Ok(LARCH_OK)
    })
}

/// Makes every commit so far durable.
#[no_mangle]
pub extern "C" fn larch_sync(db: *mut larch_db) -> c_int {
    with_db(db, |d| {
        d.sync()?;
        Ok(LARCH_OK)
    })
}

/// Figures about the database into `*stats`.
///
/// # Safety
/// `stats` points to a `larch_stats`.
#[no_mangle]
pub unsafe extern "C" fn larch_stat(db: *mut larch_db, stats: *mut larch_stats) -> c_int {
    with_db(db, |d| {
        need(stats, "stats")?;
        let s = d.stats()?;
        let c = s.commits;
        let out = larch_stats {
            page_bytes: s.page_bytes,
            depth: s.depth,
            txn: s.txn,
            page_count: s.page_count,
            file_bytes: s.file_bytes,
            branch_pages: s.branch_pages,
            leaf_pages: s.leaf_pages,
            overflow_pages: s.overflow_pages,
            freelist_pages: s.freelist_pages,
            free_pages: s.free_pages,
            pending_pages: s.pending_pages,
            entries: s.entries,
            tables: s.tables.len() as u64,
            readers: s.readers as u64,
            other_readers: s.other_readers as u64,
            oldest_reader: s.oldest_reader.unwrap_or(0),
            oldest_reader_pages: s.oldest_reader_pages,
            commits: c.commits,
            failed_commits: c.failed_commits,
            aborts: c.aborts,
            logged_commits: c.logged_commits,
            page_commits: c.page_commits,
            checkpoints: c.checkpoints,
            log_syncs: c.log_syncs,
            paced_micros: c.paced_micros,
            log_full_waits: c.log_full_waits,
            log_full_wait_micros: c.log_full_wait_micros,
            durable_checkpoints: c.durable_checkpoints,
        };
        // SAFETY: the caller's contract.
        unsafe { stats.write(out) };
        Ok(LARCH_OK)
    })
}

/// Checks every page reachable from the newest commit (`all` non-zero: and every page of the
/// file, free ones included) and stores the figures in `*report` (may be null). Returns
/// `LARCH_OK` if the database is sound, `LARCH_ECORRUPTED` if problems were found (the
/// report counts them; `larch_last_error` describes the first).
///
/// # Safety
/// `report` is null or points to a `larch_verify_report`.
#[no_mangle]
pub unsafe extern "C" fn larch_verify(
    db: *mut larch_db,
    all: c_int,
    report: *mut larch_verify_report,
) -> c_int {
    with_db(db, |d| {
        let r = if all != 0 {
            d.verify_all()?
        } else {
            d.verify()?
        };
        let out = larch_verify_report {
            txn: r.txn,
            page_count: r.page_count,
            pages_checked: r.pages_checked,
            tables: r.tables,
            entries: r.entries,
            free_pages: r.free_pages,
            pending_pages: r.pending_pages,
            problems: r.problems.len() as u64,
        };
        // SAFETY: the caller's contract.
        unsafe { put_out(report, out) };
        match r.problems.first() {
            None => Ok(LARCH_OK),
            Some(p) => fail(
                LARCH_ECORRUPTED,
                format!(
                    "{} problem(s); the first, on page {}: {}",
                    r.problems.len(),
                    p.page,
                    p.reason
                ),
            ),
        }
    })
}

/// Writes a compact copy of the newest commit to a new file at `path` (a consistent snapshot;
/// writers go on meanwhile), and its figures to `*copied` (may be null).
///
/// # Safety
/// `path` is a NUL-terminated string; `copied` is null or points to a `larch_copied`.
#[no_mangle]
pub unsafe extern "C" fn larch_copy(
    db: *mut larch_db,
    path: *const c_char,
    copied: *mut larch_copied,
) -> c_int {
    with_db(db, |d| {
        need(path, "path")?;
        // SAFETY: the caller's contract.
        let path = unsafe { name(path) }?.unwrap_or_default();
        let c = d.copy_to(path)?;
        let out = larch_copied {
            txn: c.txn,
            tables: c.tables,
            entries: c.entries,
            bytes: c.bytes,
        };
        // SAFETY: the caller's contract.
        unsafe { put_out(copied, out) };
        Ok(LARCH_OK)
    })
}

/// Compacts the database in place (moves pages down and gives the file's free end back), and
/// stores the figures in `*compacted` (may be null). Waits for the write lock.
///
/// # Safety
/// `compacted` is null or points to a `larch_compacted`.
#[no_mangle]
pub unsafe extern "C" fn larch_compact(
    db: *mut larch_db,
    compacted: *mut larch_compacted,
) -> c_int {
    with_db(db, |d| {
        let c = d.compact()?;
        let out = larch_compacted {
            data_bytes_before: c.data_bytes_before,
            data_bytes_after: c.data_bytes_after,
            log_bytes_before: c.log_bytes_before,
            log_bytes_after: c.log_bytes_after,
            moved: c.moved as c_int,
        };
        // SAFETY: the caller's contract.
        unsafe { put_out(compacted, out) };
        Ok(LARCH_OK)
    })
}

// ---------------------------------------------------------------------------------------
// Transactions
// ---------------------------------------------------------------------------------------

/// Begins a transaction on `db` and stores its handle in `*txn`: a read transaction with
/// `LARCH_RDONLY` (a snapshot of the newest commit), else the write transaction (one at a
/// time per database: waits for the open one, or with `LARCH_NOWAIT` fails with
/// `LARCH_EWRITEBUSY`). End it with `larch_commit` or `larch_abort`, on the thread that uses
/// it.
///
/// # Safety
/// `txn` points to a place for the handle.
#[no_mangle]
pub unsafe extern "C" fn larch_begin(
    db: *mut larch_db,
    flags: c_uint,
    txn: *mut *mut larch_txn,
) -> c_int {
    call(|| {
        need(txn, "txn")?;
        if flags & !(LARCH_RDONLY | LARCH_NOWAIT) != 0 {
            return fail(LARCH_EINVAL, format!("unknown flags {flags:#x}"));
        }
        let cell = db_of(db, true)?;
        let begun = if flags & LARCH_RDONLY != 0 {
            cell.db.begin_read().map(|r| TxnKind::Read {
                tables: Vec::new(),
                txn: Box::new(r),
            })
        } else {
            let w = if flags & LARCH_NOWAIT != 0 {
                cell.db.try_begin_write()
            } else {
                cell.db.begin_write()
            };
            // SAFETY: the transaction borrows the database inside `cell`, an `Arc` the
            // transaction's cell holds and drops after it (`TxnCell`'s field order).
            w.map(|w| {
                TxnKind::Write(unsafe { std::mem::transmute::<WriteTxn<'_>, WriteTxn<'static>>(w) })
            })
        };
        let kind = match begun {
            Ok(kind) => kind,
            Err(e) => {
                cell.txns.fetch_sub(1, Ordering::AcqRel);
                return Err(e.into());
            }
        };
        let counted = cell.clone();
        let t = TxnCell {
            kind,
            cursors: Vec::new(),
            savepoints: Vec::new(),
            db: cell,
        };
        let Some(h) = registries().txns.insert(Box::new(t)) else {
            counted.txns.fetch_sub(1, Ordering::AcqRel);
            return fail(LARCH_EINTERNAL, "too many open transactions");
        };
        // SAFETY: the caller's contract.
        unsafe { txn.write(pointer(h)) };
        Ok(LARCH_OK)
    })
}

/// Ends a transaction's cursors (their handles stay until closed) and frees it.
fn end(txn: *mut larch_txn) -> Result<Box<TxnCell>, Failure> {
    let Some(cell) = registries().txns.remove(handle(txn)) else {
        return fail(LARCH_EBADHANDLE, STALE_TXN);
    };
    for &c in &cell.cursors {
        // SAFETY: the cursors are used by this thread (the transaction's).
        if let Some(cursor) = unsafe { registries().cursors.get(c) } {
            cursor.live = None;
            cursor.here = None;
            cursor.ended = true;
        }
    }
    cell.db.txns.fetch_sub(1, Ordering::AcqRel);
    Ok(cell)
}

/// Commits a write transaction with `durability` (`LARCH_DURABILITY_DEFAULT`: the database's),
/// or ends a read transaction. The handle is freed whatever the outcome: after a failed
/// commit nothing of the transaction was written.
#[no_mangle]
pub extern "C" fn larch_commit(txn: *mut larch_txn, durability_level: c_int) -> c_int {
    call(|| {
        let d = durability(durability_level);
        let cell = end(txn)?;
        let d = d?;
        let TxnCell { kind, .. } = *cell;
        match kind {
            TxnKind::Read { .. } => Ok(LARCH_OK),
            TxnKind::Write(w) => {
                match d {
                    Some(d) => w.commit_with(d)?,
                    None => w.commit()?,
                }
                Ok(LARCH_OK)
            }
        }
    })
}

/// Ends a transaction without writing anything, and frees its handle.
#[no_mangle]
pub extern "C" fn larch_abort(txn: *mut larch_txn) -> c_int {
    call(|| {
        end(txn)?;
        Ok(LARCH_OK)
    })
}

/// The id of the commit the transaction sees (a write transaction: the one it will be).
///
/// # Safety
/// `id` points to a `uint64_t`.
#[no_mangle]
pub unsafe extern "C" fn larch_txn_id(txn: *mut larch_txn, id: *mut u64) -> c_int {
    call(|| {
        need(id, "id")?;
        let cell = txn_of(txn)?;
        let v = match &cell.kind {
            TxnKind::Read { txn, .. } => txn.id(),
            TxnKind::Write(w) => w.id(),
        };
        // SAFETY: the caller's contract.
        unsafe { id.write(v) };
        Ok(LARCH_OK)
    })
}

/// Moves a read transaction to the newest commit (cheaper than ending it and beginning
/// another). Its cursors must be placed again; values read before are no longer valid.
#[no_mangle]
pub extern "C" fn larch_txn_renew(txn: *mut larch_txn) -> c_int {
    call(|| {
        let cell = txn_of(txn)?;
        let TxnKind::Read { tables, txn: t } = &mut cell.kind else {
            return fail(
                LARCH_EINVAL,
                "larch_txn_renew renews read transactions only",
            );
        };
        for &c in &cell.cursors {
            // SAFETY: the cursors are used by this thread (the transaction's).
            if let Some(cursor) = unsafe { registries().cursors.get(c) } {
                cursor.live = None;
                cursor.here = None;
                cursor.at = None;
            }
        }
        tables.clear();
        t.renew();
        Ok(LARCH_OK)
    })
}

// ---------------------------------------------------------------------------------------
// Tables
// ---------------------------------------------------------------------------------------

/// A read transaction's table `name` (`None`: the default table), opened once per
/// transaction.
fn read_table<'a>(
    tables: &'a mut Vec<(Option<Box<str>>, ReadTable<'static>)>,
    txn: &ReadTxn,
    name: Option<&str>,
) -> Result<&'a ReadTable<'static>, Failure> {
    if let Some(i) = tables.iter().position(|(n, _)| n.as_deref() == name) {
        return Ok(&tables[i].1);
    }
    let t = match name {
        Some(n) => txn.table(n)?,
        None => txn.default_table()?,
    };
    // SAFETY: the table borrows the transaction, boxed in the same `TxnKind::Read`, which
    // drops the tables first and never moves the box's contents.
    let t = unsafe { std::mem::transmute::<ReadTable<'_>, ReadTable<'static>>(t) };
    tables.push((name.map(Into::into), t));
    Ok(&tables.last().expect("just pushed").1)
}

fn write_table<'a>(
    w: &'a mut WriteTxn<'static>,
    name: Option<&str>,
) -> Result<larchdb::WriteTable<'a>, Failure> {
    Ok(match name {
        Some(n) => w.table(n)?,
        None => w.default_table()?,
    })
}

/// A write transaction's table `name` for reading: as `write_table`, but the default table,
/// if it does not exist yet, is `None` (empty) instead of being created by a read.
fn write_table_to_read<'a>(
    w: &'a mut WriteTxn<'static>,
    name: Option<&str>,
) -> Result<Option<larchdb::WriteTable<'a>>, Failure> {
    match name {
        Some(n) => Ok(Some(w.table(n)?)),
        None => match w.table(larchdb::DEFAULT_TABLE) {
            Ok(t) => Ok(Some(t)),
            Err(larchdb::Error::TableNotFound(_)) => Ok(None),
            Err(e) => Err(e.into()),
        },
    }
}

fn writer(cell: &mut TxnCell) -> Result<&mut WriteTxn<'static>, Failure> {
    match &mut cell.kind {
        TxnKind::Write(w) => Ok(w),
        TxnKind::Read { .. } => fail(LARCH_EREADONLY, "a read transaction cannot write"),
    }
}

/// Creates table `name` in a write transaction (`LARCH_ETABLEEXISTS` if it exists).
///
/// # Safety
/// `table` is a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn larch_table_create(txn: *mut larch_txn, table: *const c_char) -> c_int {
    call(|| {
        need(table, "table")?;
        // SAFETY: the caller's contract.
        let n = unsafe { name(table) }?.unwrap_or_default();
        writer(txn_of(txn)?)?.create_table(n)?;
        Ok(LARCH_OK)
    })
}

/// Creates table `name` unless it exists; `*created` (may be null) says whether it did.
///
/// # Safety
/// `table` is a NUL-terminated string; `created` is null or points to an `int`.
#[no_mangle]
pub unsafe extern "C" fn larch_table_ensure(
    txn: *mut larch_txn,
    table: *const c_char,
    created: *mut c_int,
) -> c_int {
    call(|| {
        need(table, "table")?;
        // SAFETY: the caller's contract.
        let n = unsafe { name(table) }?.unwrap_or_default();
        let made = writer(txn_of(txn)?)?.ensure_table(n)?;
        // SAFETY: the caller's contract.
        unsafe { put_out(created, made as c_int) };
        Ok(LARCH_OK)
    })
}

/// Deletes table `name` and everything in it; `LARCH_NOTFOUND` if there is none.
///
/// # Safety
/// `table` is a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn larch_table_delete(txn: *mut larch_txn, table: *const c_char) -> c_int {
    call(|| {
        need(table, "table")?;
        // SAFETY: the caller's contract.
        let n = unsafe { name(table) }?.unwrap_or_default();
        let existed = writer(txn_of(txn)?)?.delete_table(n)?;
        Ok(if existed { LARCH_OK } else { LARCH_NOTFOUND })
    })
}

/// Calls `f(ctx, name, len)` for each table, in name order. A non-zero return from `f` stops
/// the listing and is returned (`larch_last_error` then says which table it stopped at).
///
/// # Safety
/// `f` is a function that may be called with `ctx`.
#[no_mangle]
pub unsafe extern "C" fn larch_list_tables(
    txn: *mut larch_txn,
    f: larch_table_fn,
    ctx: *mut std::ffi::c_void,
) -> c_int {
    call(|| {
        let Some(f) = f else {
            return fail(LARCH_EINVAL, "the callback is null");
        };
        let cell = txn_of(txn)?;
        let names = match &mut cell.kind {
            TxnKind::Read { txn, .. } => txn.list_tables()?,
            TxnKind::Write(w) => w.list_tables()?,
        };
        for n in names {
            // SAFETY: the caller's contract.
            let r = unsafe { f(ctx, n.as_ptr().cast(), n.len()) };
            if r != 0 {
                // A non-zero return reads as a failure to a caller that checks for
                // `LARCH_OK`, so it carries a message, as every failure does.
                return fail(
                    r,
                    format!("the larch_list_tables callback returned {r} at table {n:?}"),
                );
            }
        }
        Ok(LARCH_OK)
    })
}

/// Entries in table `name` (null: the default table), as the transaction sees them.
///
/// # Safety
/// `table` is null or a NUL-terminated string; `count` points to a `uint64_t`.
#[no_mangle]
pub unsafe extern "C" fn larch_table_len(
    txn: *mut larch_txn,
    table: *const c_char,
    count: *mut u64,
) -> c_int {
    call(|| {
        need(count, "count")?;
        // SAFETY: the caller's contract.
        let n = unsafe { name(table) }?;
        let cell = txn_of(txn)?;
        let len = match &mut cell.kind {
            TxnKind::Read { tables, txn } => read_table(tables, txn, n)?.len()?,
            TxnKind::Write(w) => match write_table_to_read(w, n)? {
                Some(t) => t.len()?,
                None => 0,
            },
        };
        // SAFETY: the caller's contract.
        unsafe { count.write(len) };
        Ok(LARCH_OK)
    })
}

// ---------------------------------------------------------------------------------------
// Reads and writes
// ---------------------------------------------------------------------------------------

/// Looks `key` up in table `table` (null: the default table). Found: `LARCH_OK` and `*value`
/// points to the value in the snapshot (valid until the transaction ends; in a write
/// transaction, until its next change). Not found: `LARCH_NOTFOUND`.
///
/// # Safety
/// `table` is null or a NUL-terminated string; `key` points to a `larch_val` describing
/// readable bytes; `value` points to a `larch_val`.
#[no_mangle]
pub unsafe extern "C" fn larch_get(
    txn: *mut larch_txn,
    table: *const c_char,
    key: *const larch_val,
    value: *mut larch_val,
) -> c_int {
    call(|| {
        need(key, "key")?;
        need(value, "value")?;
        // SAFETY: the caller's contract.
        let (n, k) = unsafe { (name(table)?, val(&*key)?) };
        let cell = txn_of(txn)?;
        let found = match &mut cell.kind {
            TxnKind::Read { tables, txn } => read_table(tables, txn, n)?.get(k)?.map(out),
            TxnKind::Write(w) => match write_table_to_read(w, n)? {
                Some(t) => t.get(k)?.map(out),
                None => None,
            },
        };
        match found {
            Some(v) => {
                // SAFETY: the caller's contract.
                unsafe { value.write(v) };
                Ok(LARCH_OK)
            }
            None => Ok(LARCH_NOTFOUND),
        }
    })
}

/// Writes `key` -> `value` in table `table` (null: the default table) in a write
/// transaction. `flags`: 0, `LARCH_NOOVERWRITE` (write only a new key; `LARCH_KEYEXIST` if it
/// is there), `LARCH_APPEND` (the key is greater than every key in the table).
///
/// # Safety
/// `table` is null or a NUL-terminated string; `key` and `value` point to `larch_val`s
/// describing readable bytes.
#[no_mangle]
pub unsafe extern "C" fn larch_put(
    txn: *mut larch_txn,
    table: *const c_char,
    key: *const larch_val,
    value: *const larch_val,
    flags: c_uint,
) -> c_int {
    call(|| {
        need(key, "key")?;
        need(value, "value")?;
        if flags & !(LARCH_NOOVERWRITE | LARCH_APPEND) != 0 {
            return fail(LARCH_EINVAL, format!("unknown flags {flags:#x}"));
        }
        // SAFETY: the caller's contract.
        let (n, k, v) = unsafe { (name(table)?, val(&*key)?, val(&*value)?) };
        let w = writer(txn_of(txn)?)?;
        let mut t = write_table(w, n)?;
        if flags & LARCH_NOOVERWRITE != 0 && t.get(k)?.is_some() {
            return Ok(LARCH_KEYEXIST);
        }
        if flags & LARCH_APPEND != 0 {
            t.append(k, v)?;
        } else {
            t.set(k, v)?;
        }
        Ok(LARCH_OK)
    })
}

/// Deletes `key` from table `table` (null: the default table); `LARCH_NOTFOUND` if it was not
/// there.
///
/// # Safety
/// `table` is null or a NUL-terminated string; `key` points to a `larch_val` describing
/// readable bytes.
#[no_mangle]
pub unsafe extern "C" fn larch_delete(
    txn: *mut larch_txn,
    table: *const c_char,
    key: *const larch_val,
) -> c_int {
    call(|| {
        need(key, "key")?;
        // SAFETY: the caller's contract.
        let (n, k) = unsafe { (name(table)?, val(&*key)?) };
        let w = writer(txn_of(txn)?)?;
        let existed = write_table(w, n)?.delete(k)?;
        Ok(if existed { LARCH_OK } else { LARCH_NOTFOUND })
    })
}

/// The bound of a range from an optional `larch_val`.
///
/// # Safety
/// `v` is null or points to a `larch_val` describing readable bytes.
unsafe fn bound(v: *const larch_val, inclusive: bool) -> Result<Bound<Vec<u8>>, Failure> {
    if v.is_null() {
        return Ok(Bound::Unbounded);
    }
    // SAFETY: the caller's contract.
    let b = unsafe { val(&*v) }?.to_vec();
    Ok(if inclusive {
        Bound::Included(b)
    } else {
        Bound::Excluded(b)
    })
}

/// Deletes every key from `start` (inclusive; null: the first) to `end` (exclusive; null: past
/// the last) in table `table` (null: the default table); `*deleted` (may be null) is how
/// many.
///
/// # Safety
/// `table` is null or a NUL-terminated string; `start` and `end` are null or point to
/// `larch_val`s describing readable bytes; `deleted` is null or points to a `uint64_t`.
#[no_mangle]
pub unsafe extern "C" fn larch_delete_range(
    txn: *mut larch_txn,
    table: *const c_char,
    start: *const larch_val,
    end: *const larch_val,
    deleted: *mut u64,
) -> c_int {
    call(|| {
        // SAFETY: the caller's contract.
        let (n, lo, hi) = unsafe { (name(table)?, bound(start, true)?, bound(end, false)?) };
        let w = writer(txn_of(txn)?)?;
        let count = write_table(w, n)?
            .delete_range::<[u8], _>((lo.as_ref().map(|b| &b[..]), hi.as_ref().map(|b| &b[..])))?;
        // SAFETY: the caller's contract.
        unsafe { put_out(deleted, count) };
        Ok(LARCH_OK)
    })
}

// ---------------------------------------------------------------------------------------
// Savepoints
// ---------------------------------------------------------------------------------------

/// Marks the write transaction's state now; `*savepoint` is its number, for
/// `larch_rollback_to` and `larch_release`. Savepoints nest.
///
/// # Safety
/// `savepoint` points to a `uint64_t`.
#[no_mangle]
pub unsafe extern "C" fn larch_savepoint(txn: *mut larch_txn, savepoint: *mut u64) -> c_int {
    call(|| {
        need(savepoint, "savepoint")?;
        let cell = txn_of(txn)?;
        let sp = writer(cell)?.savepoint()?;
        cell.savepoints.push(Some(sp));
        // SAFETY: the caller's contract.
        unsafe { savepoint.write(cell.savepoints.len() as u64) };
        Ok(LARCH_OK)
    })
}

fn savepoint_of(cell: &TxnCell, n: u64) -> Result<usize, Failure> {
    let i = (n as usize).wrapping_sub(1);
    match cell.savepoints.get(i) {
        Some(Some(_)) => Ok(i),
        _ => fail(
            LARCH_ESAVEPOINT,
            format!("savepoint {n} was released or is not this transaction's"),
        ),
    }
}

/// Undoes every change the transaction made since savepoint `savepoint`, which stays; later
/// savepoints end.
#[no_mangle]
pub extern "C" fn larch_rollback_to(txn: *mut larch_txn, savepoint: u64) -> c_int {
    call(|| {
        let cell = txn_of(txn)?;
        let i = savepoint_of(cell, savepoint)?;
        let TxnCell {
            kind, savepoints, ..
        } = cell;
        let TxnKind::Write(w) = kind else {
            return fail(LARCH_EREADONLY, "a read transaction has no savepoints");
        };
        if let Some(sp) = &savepoints[i] {
            w.rollback_to(sp)?;
        }
        for later in &mut savepoints[i + 1..] {
            *later = None;
        }
        Ok(LARCH_OK)
    })
}

/// Ends savepoint `savepoint` and every later one, keeping their changes.
#[no_mangle]
pub extern "C" fn larch_release(txn: *mut larch_txn, savepoint: u64) -> c_int {
    call(|| {
        let cell = txn_of(txn)?;
        let i = savepoint_of(cell, savepoint)?;
        let TxnCell {
            kind, savepoints, ..
        } = cell;
        let TxnKind::Write(w) = kind else {
            return fail(LARCH_EREADONLY, "a read transaction has no savepoints");
        };
        if let Some(sp) = savepoints[i].take() {
            w.release(sp)?;
        }
        for later in &mut savepoints[i + 1..] {
            *later = None;
        }
        Ok(LARCH_OK)
    })
}

// ---------------------------------------------------------------------------------------
// Cursors
// ---------------------------------------------------------------------------------------

/// Opens a cursor on table `table` (null: the default table) in `txn`, not placed yet, and
/// stores its handle in `*cursor`. Close it with `larch_cursor_close` (also after its
/// transaction ended; until then its calls are `LARCH_EBADHANDLE`).
///
/// # Safety
/// `table` is null or a NUL-terminated string; `cursor` points to a place for the handle.
#[no_mangle]
pub unsafe extern "C" fn larch_cursor_open(
    txn: *mut larch_txn,
    table: *const c_char,
    cursor: *mut *mut larch_cursor,
) -> c_int {
    call(|| {
        need(cursor, "cursor")?;
        // SAFETY: the caller's contract.
        let n = unsafe { name(table) }?;
        let cell = txn_of(txn)?;
        // The table must exist (the default one always does).
        match &mut cell.kind {
            TxnKind::Read { tables, txn } => {
                read_table(tables, txn, n)?;
            }
            TxnKind::Write(w) => {
                write_table_to_read(w, n)?;
            }
        }
        let c = CursorCell {
            txn: handle(txn),
            table: n.map(Into::into),
            lo: None,
            hi: None,
            at: None,
            here: None,
            live: None,
            ended: false,
        };
        let Some(h) = registries().cursors.insert(Box::new(c)) else {
            return fail(LARCH_EINTERNAL, "too many open cursors");
        };
        cell.cursors.push(h);
        // SAFETY: the caller's contract.
        unsafe { cursor.write(pointer(h)) };
        Ok(LARCH_OK)
    })
}

/// Limits the cursor to keys from `start` (inclusive; null: no limit) to `end` (exclusive;
/// null: no limit): `LARCH_FIRST`, `LARCH_LAST`, `LARCH_NEXT`, `LARCH_PREV` and the seeks stay
/// within them. The cursor is no longer placed.
///
/// # Safety
/// `start` and `end` are null or point to `larch_val`s describing readable bytes.
#[no_mangle]
pub unsafe extern "C" fn larch_cursor_bounds(
    cursor: *mut larch_cursor,
    start: *const larch_val,
    end: *const larch_val,
) -> c_int {
    call(|| {
        let c = live_cursor(cursor)?;
        // SAFETY: the caller's contract.
        unsafe {
            c.lo = if start.is_null() {
                None
            } else {
                Some(val(&*start)?.to_vec())
            };
            c.hi = if end.is_null() {
                None
            } else {
                Some(val(&*end)?.to_vec())
            };
        }
        c.at = None;
        c.here = None;
        c.live = None;
        Ok(LARCH_OK)
    })
}

fn live_cursor<'a>(cursor: *mut larch_cursor) -> Result<&'a mut CursorCell, Failure> {
    let c = cursor_of(cursor)?;
    if c.ended {
        return fail(LARCH_EBADHANDLE, "the cursor's transaction has ended");
    }
    Ok(c)
}

/// Moves the cursor as `op` says; on `LARCH_OK` stores the entry in `*key` and `*value` (each
/// may be null). `LARCH_SET_KEY` and `LARCH_SET_RANGE` read the key to look for from `*key`.
/// `LARCH_NOTFOUND` leaves the cursor on the entry it was on.
///
/// # Safety
/// `key` and `value` are null or point to `larch_val`s; for the seeks, `key` points to one
/// describing readable bytes.
#[no_mangle]
pub unsafe extern "C" fn larch_cursor_get(
    cursor: *mut larch_cursor,
    key: *mut larch_val,
    value: *mut larch_val,
    op: c_int,
) -> c_int {
    call(|| {
        let c = live_cursor(cursor)?;
        let cell = txn_of(pointer(c.txn))?;
        let reading = matches!(cell.kind, TxnKind::Read { .. });
        // Where the step starts, which way it goes, and the key it must find exactly, if any.
        let (from, reverse, exact) = match op {
            LARCH_FIRST => (Bound::Unbounded, false, None),
            LARCH_LAST => (Bound::Unbounded, true, None),
            LARCH_NEXT | LARCH_PREV => {
                let reverse = op == LARCH_PREV;
                // In a read transaction, the iterator that found the entry goes on.
                if let Some((way, range)) = c.live.as_mut().filter(|_| reading) {
                    if *way == reverse && c.at.is_some() {
                        let next = range.next().transpose()?;
                        let found = next.map(|(k, v)| (out(k), out(v)));
                        if found.is_none() {
                            // Spent: a step the other way needs a new one.
                            c.live = None;
                        }
                        return place(c, found, key, value);
                    }
                }
                match &c.at {
                    Some(k) => (Bound::Excluded(k.clone()), reverse, None),
                    None => (Bound::Unbounded, reverse, None),
                }
            }
            LARCH_SET_KEY | LARCH_SET_RANGE => {
                need(key, "key")?;
                // SAFETY: the caller's contract.
                let k = unsafe { val(&*key) }?.to_vec();
                let exact = (op == LARCH_SET_KEY).then(|| k.clone());
                (Bound::Included(k), false, exact)
            }
            LARCH_GET_CURRENT => {
                let Some(k) = c.at.clone() else {
                    return fail(LARCH_EINVAL, "the cursor is not placed");
                };
                if let Some(here) = c.here.filter(|_| reading) {
                    // SAFETY: the caller's contract.
                    unsafe {
                        put_out(key, here.0);
                        put_out(value, here.1);
                    }
                    return Ok(LARCH_OK);
                }
                (Bound::Included(k.clone()), false, Some(k))
            }
            other => return fail(LARCH_EINVAL, format!("unknown cursor operation {other}")),
        };
        let (lo, hi) = clamp(&c.lo, &c.hi, from, reverse);
        let bounds = (lo.as_ref().map(|b| &b[..]), hi.as_ref().map(|b| &b[..]));
        let (found, live) = match &mut cell.kind {
            TxnKind::Read { tables, txn } => {
                let t = read_table(tables, txn, c.table.as_deref())?;
                let mut range = if reverse {
                    t.range_rev::<[u8], _>(bounds)
                } else {
                    t.range::<[u8], _>(bounds)
                };
                let first = range.next().transpose()?;
                (first.map(|(k, v)| (out(k), out(v))), Some((reverse, range)))
            }
            TxnKind::Write(w) => {
                let Some(t) = write_table_to_read(w, c.table.as_deref())? else {
                    return Ok(LARCH_NOTFOUND);
                };
                let first = if reverse {
                    t.range_rev::<[u8], _>(bounds).next().transpose()?
                } else {
                    t.range::<[u8], _>(bounds).next().transpose()?
                };
                (first.map(|(k, v)| (out(k), out(v))), None)
            }
        };
        // An exact seek that found a later key found nothing.
        let found = found.filter(|(k, _)| {
            // SAFETY: `k` points into the snapshot or the transaction, alive now.
            let k = unsafe { bytes_of(k) };
            exact.as_deref().is_none_or(|e| e == k)
        });
        // The iterator goes on from the entry found; after a miss, the next step starts from
        // the cursor's entry again.
        c.live = if found.is_some() { live } else { None };
        place(c, found, key, value)
    })
}

/// The bytes a `larch_val` the library made points to.
///
/// # Safety
/// `v` points into a snapshot or transaction still alive.
unsafe fn bytes_of<'a>(v: &larch_val) -> &'a [u8] {
    if v.len == 0 {
        return &[];
    }
    // SAFETY: the caller's contract.
    unsafe { std::slice::from_raw_parts(v.data, v.len) }
}

/// The bounds of a step from `from` in a direction, within the cursor's `[lo, hi)`.
fn clamp(
    lo: &Option<Vec<u8>>,
    hi: &Option<Vec<u8>>,
    from: Bound<Vec<u8>>,
    reverse: bool,
) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    let lo_b = lo.clone().map_or(Bound::Unbounded, Bound::Included);
    let hi_b = hi.clone().map_or(Bound::Unbounded, Bound::Excluded);
    if reverse {
        // `from` is an upper bound: the tighter of it and `hi`.
        let upper = match (&from, &hi_b) {
            (Bound::Unbounded, _) => hi_b.clone(),
            (_, Bound::Unbounded) => from.clone(),
            (Bound::Included(f) | Bound::Excluded(f), Bound::Excluded(h)) => {
                if f < h {
                    from.clone()
                } else {
                    hi_b.clone()
                }
            }
            _ => from.clone(),
        };
        (lo_b, upper)
    } else {
        let lower = match (&from, &lo_b) {
            (Bound::Unbounded, _) => lo_b.clone(),
            (_, Bound::Unbounded) => from.clone(),
            (Bound::Included(f) | Bound::Excluded(f), Bound::Included(l)) => {
                if f >= l {
                    from.clone()
                } else {
                    lo_b.clone()
                }
            }
            _ => from.clone(),
        };
        (lower, hi_b)
    }
}

/// Places the cursor on `found` (if any) and gives it to the caller.
fn place(
    c: &mut CursorCell,
    found: Option<(larch_val, larch_val)>,
    key: *mut larch_val,
    value: *mut larch_val,
) -> Outcome {
    let Some((k, v)) = found else {
        return Ok(LARCH_NOTFOUND);
    };
    // SAFETY: `k` points into the snapshot or the transaction, alive now.
    c.at = Some(unsafe { bytes_of(&k) }.to_vec());
    c.here = Some((k, v));
    // SAFETY: `key` and `value` are null or valid for writes (larch_cursor_get's contract).
    unsafe {
        put_out(key, k);
        put_out(value, v);
    }
    Ok(LARCH_OK)
}

/// Frees a cursor (also after its transaction ended).
#[no_mangle]
pub extern "C" fn larch_cursor_close(cursor: *mut larch_cursor) -> c_int {
    call(|| {
        let Some(c) = registries().cursors.remove(handle(cursor)) else {
            return fail(LARCH_EBADHANDLE, STALE_CURSOR);
        };
        if !c.ended {
            // SAFETY: the cursor's transaction is used by this thread.
            if let Some(t) = unsafe { registries().txns.get(c.txn) } {
                t.cursors.retain(|&h| h != handle(cursor));
            }
        }
        Ok(LARCH_OK)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use larchdb::Error as E;

    fn text(code: c_int) -> String {
        // SAFETY: `larch_strerror` returns a static, NUL-terminated string.
        unsafe { CStr::from_ptr(larch_strerror(code)) }
            .to_string_lossy()
            .into_owned()
    }

    /// Each of the engine's errors has its code, and that code's fixed text covers it (a word
    /// of the text names what the engine's error is about).
    #[test]
    fn every_engine_error_has_a_code_whose_text_covers_it() {
        let io = || std::io::Error::from_raw_os_error(5);
        let cases: Vec<(E, c_int, &str)> = vec![
            (
                E::Io {
                    op: "read",
                    path: None,
                    source: io(),
                },
                LARCH_EIO,
                "I/O",
            ),
            (E::DiskFull, LARCH_EDISKFULL, "disk"),
            (
                E::Corrupted {
                    page: 3,
                    reason: "x".into(),
                },
                LARCH_ECORRUPTED,
                "database",
            ),
            (
                E::CorruptedLog {
                    position: 3,
                    reason: "x".into(),
                },
                LARCH_ECORRUPTED,
                "log",
            ),
            (
                E::WouldLoseData {
                    damage: "x".into(),
                    lost: "y".into(),
                },
                LARCH_ECORRUPTED,
                "damaged",
            ),
            (
                E::LockFileInvalid("x".into()),
                LARCH_ECORRUPTED,
                "lock file",
            ),
            (E::NotADatabase, LARCH_ENOTADB, "not a Larch database"),
            (
                E::UnsupportedVersion {
                    found: 9,
                    supported: 1,
                },
                LARCH_ENOTADB,
                "version",
            ),
            (E::DatabaseLocked, LARCH_ELOCKED, "handle"),
            (E::WriteBusy, LARCH_EWRITEBUSY, "this thread's own"),
            (E::ReadOnly, LARCH_EREADONLY, "read-only"),
            (
                E::KeyTooLarge {
                    len: 1001,
                    max: 1000,
                },
                LARCH_EKEYTOOLARGE,
                "key",
            ),
            (
                E::ValueTooLarge { len: 2, max: 1 },
                LARCH_EVALUETOOLARGE,
                "value",
            ),
            (E::TableNotFound("t".into()), LARCH_ETABLENOTFOUND, "table"),
            (E::TableExists("t".into()), LARCH_ETABLEEXISTS, "table"),
            (E::InvalidTableName("".into()), LARCH_ETABLENAME, "empty"),
            (E::InvalidOptions("x".into()), LARCH_EOPTIONS, "options"),
            (E::Poisoned, LARCH_EPOISONED, "reopen"),
            (E::AppendOutOfOrder, LARCH_EAPPEND, "append"),
            (E::TxnFailed, LARCH_ETXNFAILED, "abort"),
            (E::DatabaseFull, LARCH_EFULL, "largest size"),
            (E::ReadersFull { max: 126 }, LARCH_EREADERSFULL, "reader"),
            (
                E::TableTypeMismatch {
                    table: "t".into(),
                    stored: "a".into(),
                    requested: "b".into(),
                },
                LARCH_ETYPE,
                "types differ",
            ),
            (E::Decode("x".into()), LARCH_ETYPE, "decode"),
            (E::SavepointInvalid, LARCH_ESAVEPOINT, "savepoint"),
            (E::Internal("x".into()), LARCH_EINTERNAL, "internal"),
        ];
        for (e, code, word) in cases {
            let what = format!("{e:?}");
            let Failure(got, message) = Failure::from(e);
            assert_eq!(got, code, "{what}");
            assert!(!message.is_empty(), "{what}");
            let t = text(code);
            assert!(t.contains(word), "{what}: {t:?} does not say {word:?}");
        }
        // The key limit's text says nothing of the empty key, which is valid.
        assert!(!text(LARCH_EKEYTOOLARGE).contains("empty"));
    }

    /// Every code has its own text.
    #[test]
    fn every_code_has_a_text() {
        let mut seen = std::collections::HashSet::new();
        for code in (LARCH_OK..=LARCH_KEYEXIST).chain(LARCH_EINVAL..=LARCH_EINTERNAL) {
            let t = text(code);
            assert_ne!(t, "unknown code", "{code}");
            assert!(seen.insert(t), "{code}: a text shared with another code");
        }
        assert_eq!(text(LARCH_EINTERNAL + 1), "unknown code");
    }
}
