//! Transactions. A `ReadTxn` holds a published snapshot; a `WriteTxn` holds the write lock and
//! the dirty pages of the next snapshot. Both work on `engine::Shared`, not on `Database`.

mod read;
mod write;

pub use crate::engine::savepoint::Savepoint;
pub use read::ReadTxn;
pub use write::WriteTxn;
pub(crate) use write::{Keep, ThisThreadWrites};
