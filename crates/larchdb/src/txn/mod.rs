//! Transactions. A `ReadTxn` holds a published snapshot; a `WriteTxn` holds the write lock and
//! the dirty pages of the next snapshot. Both work on `engine::Shared`, not on `Database`.

mod read;
pub(crate) mod savepoint;
mod write;

pub use read::ReadTxn;
pub use savepoint::Savepoint;
pub(crate) use savepoint::UndoSink;
pub use write::WriteTxn;
