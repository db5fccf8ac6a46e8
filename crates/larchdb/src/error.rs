//! The engine's one error type. Every failure a caller can cause or meet is a variant here.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// Result alias used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong, typed so that callers can react to each case.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// An I/O error from the storage layer that has no more specific variant.
    Io {
        /// What was being done: `"open"`, `"stat"`, `"lock"`, `"read"`, `"write"`, `"sync"`,
        /// `"resize"`, `"allocate"`, `"map"`, or `"I/O"` where the storage backend does not
        /// say (a [`crate::storage::Storage`] other than a file).
        op: &'static str,
        /// The file it was done to: the database, its log (`<db>-log`) or its lock file
        /// (`<db>-lock`); `None` for a backend that is not a file.
        path: Option<PathBuf>,
        /// The error the system returned.
        source: io::Error,
    },
    /// The device is full (ENOSPC or EDQUOT). Nothing of the failed transaction is visible;
    /// earlier commits are intact and writes succeed again once space is freed.
    DiskFull,
    /// The file is damaged: a checksum, a page header or a structural invariant does not hold.
    Corrupted {
        /// Page where the damage was found (0 or 1 for meta slots).
        page: u64,
        /// What was wrong.
        reason: String,
    },
    /// The write-ahead log is damaged: a record that was synced (a later record says so) does
    /// not check out, or the log's own header is wrong.
    CorruptedLog {
        /// Log position (bytes from the log's creation) where the damage was found.
        position: u64,
        /// What was wrong.
        reason: String,
    },
    /// The open found damage that it cannot get past without losing commits the database
    /// acknowledged (or cannot prove it would not): a damaged or cut-short meta slot, a data
    /// file missing, empty or shorter than its newest commit needs beside a log that holds
    /// commits, or a log that ends before where it was synced. Nothing was changed. Opening with
    /// [`crate::Options::recover`] (the `larch recover` command) opens the newest intact state
    /// instead, reports what it gives up ([`crate::Database::recovery`]) and keeps a copy of it
    /// aside (docs/design/durability.md, "Damage is never silent").
    WouldLoseData {
        /// What is damaged.
        damage: String,
        /// What opening the newest intact state would give up.
        lost: String,
    },
    /// The file is not a Larch database (no magic in either meta slot).
    NotADatabase,
    /// The file was written by a newer format version.
    UnsupportedVersion {
        /// Version found in the file.
        found: u32,
        /// Newest version this build reads.
        supported: u32,
    },
    /// Another process (or another handle in this process) holds the database open for writing.
    DatabaseLocked,
    /// `try_begin_write` found another write transaction in progress, or `begin_write` (or
    /// `put`, `delete`) was called on a thread whose own write transaction on this database
    /// is still open, which it would wait for forever.
    WriteBusy,
    /// The database was opened read-only.
    ReadOnly,
    /// A key is longer than the page size allows.
    KeyTooLarge {
        /// Length of the key passed.
        len: usize,
        /// Largest length allowed for this database's page size.
        max: usize,
    },
    /// A value is longer than [`crate::limits::VALUE_BYTES_MAX`].
    ValueTooLarge {
        /// Length of the value passed.
        len: usize,
        /// Largest length allowed.
        max: usize,
    },
    /// No table has this name.
    TableNotFound(String),
    /// `create_table` was given a name that exists.
    TableExists(String),
    /// A table name is empty or longer than [`crate::limits::TABLE_NAME_BYTES_MAX`].
    InvalidTableName(String),
    /// An option is out of range.
    InvalidOptions(String),
    /// An earlier write or sync failed after the commit started reaching the disk (fsync
    /// errors cannot be retried safely), so the handle refuses further writes. Reopen the
    /// database to continue from the last durable commit.
    Poisoned,
    /// `append` was given a key not greater than the table's last key.
    AppendOutOfOrder,
    /// An operation of this write transaction failed part-way, so the transaction can only be
    /// aborted (dropped); committing it returns this error.
    TxnFailed,
    /// The database would exceed [`crate::limits::PAGE_COUNT_MAX`] pages.
    DatabaseFull,
    /// Every slot of the shared reader table is taken by a live read-only handle
    /// ([`crate::limits::READERS_MAX`]); close one, or retry later.
    ReadersFull {
        /// Slots in the table.
        max: usize,
    },
    /// The lock file beside the database (`<db>-lock`) is in use by another process but is not
    /// a Larch lock file of this layout. It is never reset while another process uses it.
    LockFileInvalid(String),
    /// A typed table was opened with key or value types other than those it was created
    /// with ([`crate::WriteTxn::open_table`] records them).
    TableTypeMismatch {
        /// The table.
        table: String,
        /// The encodings recorded with the table, `key -> value`.
        stored: String,
        /// The encodings of the definition it was opened with.
        requested: String,
    },
    /// A typed table's key or value could not be read as its type (bytes of another width or
    /// form, written by another type or through the byte API), or a value could not be
    /// encoded (see [`crate::typed`]). Nothing was changed.
    Decode(String),
    /// A [`crate::Savepoint`] given to [`crate::WriteTxn::rollback_to`] or
    /// [`crate::WriteTxn::release`] is not one of the transaction's live savepoints: it was
    /// made by another transaction, released, or made after a savepoint the transaction has
    /// since rolled back to. Nothing was changed.
    SavepointInvalid,
    /// The engine broke one of its own invariants: a bug in Larch, not damage to the file (that
    /// is [`Error::Corrupted`]). The operation that met it fails, a write transaction can only
    /// be aborted, and nothing it did becomes visible. Please report it with the message.
    Internal(String),
}

impl Error {
    pub(crate) fn corrupted(page: u64, reason: impl Into<String>) -> Error {
        Error::Corrupted {
            page,
            reason: reason.into(),
        }
    }

    /// An engine bug found at run time (see [`Error::Internal`]).
    pub(crate) fn internal(reason: impl Into<String>) -> Error {
        Error::Internal(reason.into())
    }

    /// Maps an I/O error, giving a full disk its own variant, and taking the operation and
    /// the path from the context a file storage attached (`with_context`).
    pub(crate) fn from_io(e: io::Error) -> Error {
        if is_disk_full(&e) {
            return Error::DiskFull;
        }
        if e.get_ref().is_some_and(|i| i.is::<IoContext>()) {
            if let Some(inner) = e.into_inner() {
                if let Ok(c) = inner.downcast::<IoContext>() {
                    let IoContext { op, path, source } = *c;
                    return Error::Io {
                        op,
                        path: Some(path),
                        source,
                    };
                }
            }
            return Error::internal("an I/O error's context was lost");
        }
        Error::Io {
            op: "I/O",
            path: None,
            source: e,
        }
    }

    /// An I/O error of `op` on the file at `path`.
    pub(crate) fn io_at(op: &'static str, path: &Path, e: io::Error) -> Error {
        if is_disk_full(&e) {
            return Error::DiskFull;
        }
        Error::Io {
            op,
            path: Some(path.to_path_buf()),
            source: e,
        }
    }
}

/// What a file storage attaches to the errors it returns (as an `io::Error` of the same
/// kind), so that `Error::from_io` can say which operation on which file failed.
#[derive(Debug)]
pub(crate) struct IoContext {
    op: &'static str,
    path: PathBuf,
    source: io::Error,
}

impl fmt::Display for IoContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}: {}", self.op, self.path.display(), self.source)
    }
}

impl std::error::Error for IoContext {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// `e` with the operation and the file it happened to (see `IoContext`); its kind is kept.
pub(crate) fn with_context(op: &'static str, path: &Path, e: io::Error) -> io::Error {
    io::Error::new(
        e.kind(),
        IoContext {
            op,
            path: path.to_path_buf(),
            source: e,
        },
    )
}

/// Whether an I/O error means the device (or the user's quota) is full.
pub(crate) fn is_disk_full(e: &io::Error) -> bool {
    let e = match e.get_ref().and_then(|i| i.downcast_ref::<IoContext>()) {
        Some(c) => &c.source,
        None => e,
    };
    matches!(e.raw_os_error(), Some(28) | Some(122)) // ENOSPC, EDQUOT
        || e.kind() == io::ErrorKind::StorageFull
}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Error {
        Error::from_io(e)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io {
                op,
                path: Some(path),
                source,
            } => write!(f, "I/O error: {op} {}: {source}", path.display()),
            Error::Io {
                op,
                path: None,
                source,
            } => write!(f, "I/O error: {op}: {source}"),
            Error::DiskFull => write!(f, "disk full"),
            Error::Corrupted { page, reason } => {
                write!(f, "database corrupted at page {page}: {reason}")
            }
            Error::CorruptedLog { position, reason } => {
                write!(
                    f,
                    "write-ahead log corrupted at position {position}: {reason}"
                )
            }
            Error::WouldLoseData { damage, lost } => write!(
                f,
                "opening would lose acknowledged data: {damage}; {lost}. Nothing was changed; \
                 open with Options::recover (larch recover) to open the newest intact state, \
                 which keeps a copy of what it gives up"
            ),
            Error::NotADatabase => write!(f, "not a Larch database"),
            Error::UnsupportedVersion { found, supported } => {
                write!(
                    f,
                    "file format version {found} is newer than supported version {supported}"
                )
            }
            Error::DatabaseLocked => write!(f, "database is locked by another writer"),
            Error::WriteBusy => write!(f, "another write transaction is in progress"),
            Error::ReadOnly => write!(f, "database is open read-only"),
            Error::KeyTooLarge { len, max } => {
                write!(f, "key of {len} bytes exceeds the maximum of {max}")
            }
            Error::ValueTooLarge { len, max } => {
                write!(f, "value of {len} bytes exceeds the maximum of {max}")
            }
            Error::TableNotFound(name) => write!(f, "table {name:?} does not exist"),
            Error::TableExists(name) => write!(f, "table {name:?} already exists"),
            Error::InvalidTableName(name) => write!(f, "invalid table name {name:?}"),
            Error::InvalidOptions(why) => write!(f, "invalid options: {why}"),
            Error::Poisoned => write!(
                f,
                "an earlier I/O failure left this handle read-only; reopen the database to continue"
            ),
            Error::AppendOutOfOrder => {
                write!(f, "append key is not greater than the table's last key")
            }
            Error::TxnFailed => write!(
                f,
                "an earlier operation in this transaction failed; abort it"
            ),
            Error::DatabaseFull => write!(f, "database reached the maximum page count"),
            Error::ReadersFull { max } => write!(
                f,
                "all {max} reader slots of the lock file are taken by live read-only handles"
            ),
            Error::LockFileInvalid(why) => write!(f, "invalid lock file: {why}"),
            Error::TableTypeMismatch {
                table,
                stored,
                requested,
            } => write!(
                f,
                "table {table:?} holds {stored}, not the requested {requested}"
            ),
            Error::Decode(why) => write!(f, "cannot decode: {why}"),
            Error::SavepointInvalid => write!(
                f,
                "not a live savepoint of this transaction (another transaction's, released, \
                 or rolled past)"
            ),
            Error::Internal(why) => write!(f, "internal error (a bug in Larch): {why}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_storage_error_keeps_its_operation_path_and_kind() {
        let path = Path::new("/data/db");
        let e = with_context("sync", path, io::Error::from_raw_os_error(5));
        assert_eq!(e.kind(), io::Error::from_raw_os_error(5).kind());
        match Error::from_io(e) {
            Error::Io {
                op: "sync",
                path: Some(p),
                source,
            } => {
                assert_eq!(p, path);
                assert_eq!(source.raw_os_error(), Some(5));
            }
            other => panic!("{other:?}"),
        }
        // A full disk is its own variant, through the context too.
        for errno in [28, 122] {
            let e = with_context("write", path, io::Error::from_raw_os_error(errno));
            assert!(is_disk_full(&e));
            assert!(matches!(Error::from_io(e), Error::DiskFull));
        }
        // An error from a backend that is not a file has no path.
        assert!(matches!(
            Error::from_io(io::Error::other("x")),
            Error::Io {
                op: "I/O",
                path: None,
                ..
            }
        ));
    }
}
