//! Typed tables: a table definition names a table and the types of its keys and values, and
//! the tables it opens take and return those types instead of bytes.
//!
//! The engine stores bytes and orders keys by their bytes, so a key type's encoding must
//! sort as the type does: integers are stored big-endian (signed ones with the sign bit
//! flipped), floats in the IEEE total order's byte form, strings and byte strings as they
//! are. Values that borrow (`&str`, `&[u8]`) are returned without a copy, as the byte API
//! returns them. The byte API stays: [`TypedReadTable::bytes`] and
//! [`TypedWriteTable::bytes_mut`] give the table underneath.
//!
//! A table created by [`crate::WriteTxn::open_table`] records the names of its key and value
//! encodings in its properties; opening it later with types of other encodings is
//! [`crate::Error::TableTypeMismatch`]. A table created through the byte API, or whose properties
//! were set by the application, has no record and opens with any types; a stored key or value
//! that the requested type cannot read is then [`crate::Error::Decode`], never a panic.
//!
//! ```
//! use larchdb::{Database, Options, TableDefinition};
//!
//! const SCORES: TableDefinition<&str, u64> = TableDefinition::new("scores");
//!
//! # let dir = tempfile::tempdir().unwrap();
//! let db = Database::open(dir.path().join("db"), Options::default())?;
//! let mut w = db.begin_write()?;
//! {
//!     let mut scores = w.open_table(SCORES)?;
//!     scores.put("alice", 10)?;
//!     scores.put("bob", 7)?;
//! }
//! w.commit()?;
//!
//! let r = db.begin_read()?;
//! let scores = r.open_table(SCORES)?;
//! assert_eq!(scores.get("alice")?, Some(10));
//! let all: Vec<(&str, u64)> = scores.iter().collect::<Result<_, _>>()?;
//! assert_eq!(all, vec![("alice", 10), ("bob", 7)]);
//! # Ok::<(), larchdb::Error>(())
//! ```

mod codec;
mod compound;
pub(crate) mod table;

#[cfg(feature = "serde")]
pub use codec::Json;
pub use codec::{Key, Value};
pub use table::{KeyRange, TableDefinition, TypedRange, TypedReadTable, TypedWriteTable};
