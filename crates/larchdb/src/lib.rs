//! # larchdb
//!
//! An embedded, persistent, ACID key-value engine: a copy-on-write B+tree in one file, with
//! lock-free snapshot readers, crash-safe commits (the file always holds a complete tree and is
//! never repaired; an open after a crash replays the write-ahead log's commits since the last
//! checkpoint, a bounded amount), and a checksum on every page.
//!
//! - **Transactions.** Any number of [`ReadTxn`]s, each on one committed snapshot for its whole
//!   life, never blocked by the writer; one [`WriteTxn`] at a time (a second waits, or gets
//!   [`Error::WriteBusy`] from [`Database::try_begin_write`]).
//! - **Durability.** [`Durability::Immediate`] commits are on stable storage when `commit`
//!   returns; [`Durability::None`] commits are not synced but can never corrupt the file.
//! - **Tables.** Named, ordered byte-key tables with get, put, delete, first/last, seek, range
//!   scans both ways, O(1) counts, and [`WriteTable::append`] for sorted loads.
//! - **Limits.** Keys up to [`limits::key_bytes_max`] (1000 bytes at 4 KiB pages; the empty key
//!   is a valid key), values up to [`limits::VALUE_BYTES_MAX`] (1 GiB, on overflow pages);
//!   beyond them, [`Error::KeyTooLarge`] and [`Error::ValueTooLarge`].
//!
//! ```
//! use larchdb::{Database, Durability, Options};
//! # let dir = tempfile::tempdir().unwrap();
//! let db = Database::open(dir.path().join("data.larch"), Options::default())?;
//!
//! let mut w = db.begin_write()?;
//! w.create_table("users")?;
//! {
//!     let mut users = w.table("users")?;
//!     users.put(b"alice", b"admin")?;
//!     users.put(b"bob", b"staff")?;
//! }
//! w.commit_with(Durability::Immediate)?;
//!
//! let r = db.begin_read()?;
//! let users = r.table("users")?;
//! assert_eq!(users.get(b"bob")?, Some(&b"staff"[..]));
//! let names: Vec<&[u8]> = users.iter().map(|e| e.map(|(k, _)| k)).collect::<Result<_, _>>()?;
//! assert_eq!(names, vec![&b"alice"[..], &b"bob"[..]]);
//! # Ok::<(), larchdb::Error>(())
//! ```
//!
//! The design and the file format are in the repository,
//! [github.com/larch-db/larch](https://github.com/larch-db/larch):
//! [ARCHITECTURE.md](https://github.com/larch-db/larch/blob/main/ARCHITECTURE.md) and
//! [docs/design/](https://github.com/larch-db/larch/tree/main/docs/design) (file-format.md,
//! durability.md, concurrency.md, write-path.md). Paths such as docs/design/durability.md in
//! these docs name files there; this crate does not ship them.

#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

// The engine relies on Linux: open file description locks (`F_OFD_SETLK`) for the shared
// reader table, `fallocate`, `MADV_POPULATE_WRITE`, and the boot id in /proc. A build
// elsewhere stops here with the reason, not deep inside a system call it does not have.
#[cfg(not(target_os = "linux"))]
compile_error!(
    "larchdb supports Linux only (OFD locks, fallocate, MADV_POPULATE_WRITE, \
     /proc/sys/kernel/random/boot_id); see \"Platforms\" in the README"
);

mod btree;
mod bytes;
mod copy;
mod cpu;
mod db;
mod engine;
mod error;
mod layout;
pub mod limits;
mod options;
mod pager;
pub mod storage;
mod table;
#[cfg(feature = "test-support")]
pub mod testing;
mod txn;
pub mod typed;
mod verify;

pub use copy::Copied;
pub use db::{CompactStep, Compacted, Database, DEFAULT_TABLE};
pub use engine::admission::share::{CHECKPOINT_NICE_BESIDE_READERS, CHECKPOINT_NICE_WRITERS_CORE};
pub use engine::recovery::{GivenUp, Recovery};
pub use error::{Error, Result};
pub use options::{
    Durability, Options, BOUNDED_BYTES_DEFAULT, BOUNDED_MILLIS_DEFAULT, CHECKPOINT_BYTES_DEFAULT,
    CHECKPOINT_SLICES_MAX, CHECKPOINT_SLICE_PAGES, FRAMES_AUTO, IDLE_CHECKPOINT_MILLIS_DEFAULT,
    LOG_SEGMENTS_DEFAULT, LOG_SEGMENT_BYTES_DEFAULT,
};
pub use table::{Entry, Range, ReadTable, WriteTable};
pub use txn::{ReadTxn, Savepoint, WriteTxn};
pub use typed::{TableDefinition, TypedRange, TypedReadTable, TypedWriteTable};
#[doc(hidden)]
pub use verify::PageRole;
pub use verify::{CommitStats, Problem, ReaderInfo, Stats, TableStats, VerifyReport};
