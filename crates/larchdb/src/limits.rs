//! Every limit of the engine, in one place. A breached limit is a typed error, never a panic.

/// Smallest page size a database can be created with.
pub const PAGE_BYTES_MIN: u32 = 4096;
/// Largest page size a database can be created with.
pub const PAGE_BYTES_MAX: u32 = 65536;
/// Page size used when `Options::page_bytes` is not set.
pub const PAGE_BYTES_DEFAULT: u32 = 4096;

/// Largest value, in bytes. Values whose leaf cell would exceed `inline_cell_bytes_max` (about
/// half a page) live on overflow pages.
pub const VALUE_BYTES_MAX: usize = 1 << 30;

/// Largest table name, in bytes (UTF-8).
pub const TABLE_NAME_BYTES_MAX: usize = 255;

/// Largest table properties (`WriteTxn::set_table_properties`), in bytes. Kept small so that a
/// catalog cell (a 255-byte name, the 32-byte table header, the properties) always fits inline
/// in a leaf of the smallest page size.
pub const TABLE_PROPERTIES_BYTES_MAX: usize = 512;

/// Deepest B+tree the engine will follow. A 4 KiB-page tree of 1000-byte keys holds more
/// than 2^64 entries long before this depth, so a deeper path means a corrupt file.
pub const TREE_DEPTH_MAX: usize = 32;

/// Largest number of pages in a file (2^40 pages: 4 PiB at 4 KiB pages).
pub const PAGE_COUNT_MAX: u64 = 1 << 40;

/// Largest key, in bytes, for a page size: a quarter of the page less some cell overhead, so
/// that no leaf or branch cell exceeds a third of a node's space and a split always produces
/// two pages that fit. 1000 bytes at 4 KiB pages, 16360 at 64 KiB.
///
/// ```
/// use larchdb::limits::key_bytes_max;
/// assert_eq!(key_bytes_max(4096), 1000);
/// # let dir = tempfile::tempdir()?;
/// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
/// db.put(&[1; 1000], b"v")?;
/// assert!(matches!(db.put(&[1; 1001], b"v"), Err(larchdb::Error::KeyTooLarge { len: 1001, max: 1000 })));
/// # Ok::<(), larchdb::Error>(())
/// ```
pub const fn key_bytes_max(page_bytes: u32) -> usize {
    page_bytes as usize / 4 - 24
}

/// Largest leaf cell stored inline, for a page size: two of them, with their slots, fill a
/// leaf exactly (2030 bytes at 4 KiB pages, as LMDB's node limit of about half a page). A
/// value whose cell would be larger goes to an overflow run and the cell keeps only a
/// reference. A leaf split then needs a split point chosen so that both halves fit, which
/// cells of at most half a leaf always allow (`btree::split_point`).
///
/// ```
/// assert_eq!(larchdb::limits::inline_cell_bytes_max(4096), 2030);
/// ```
pub const fn inline_cell_bytes_max(page_bytes: u32) -> usize {
    (page_bytes as usize - crate::layout::header::BYTES) / 2 - crate::layout::node::SLOT_BYTES
}

/// Read-only handles (in all processes together) that can read a database beside its writer:
/// slots of the shared reader table in the lock file (docs/design/file-format.md). Each
/// read-only handle takes one slot for its life, whatever the number of its read
/// transactions; one more is [`crate::Error::ReadersFull`]. LMDB's default `maxreaders` is 126.
pub const READERS_MAX: usize = 126;

/// Attempts a read-only handle makes to register on the newest snapshot while the writer keeps
/// publishing newer ones, before it gives up with an error. Each attempt is a few microseconds.
pub const READER_REGISTER_TRIES_MAX: u32 = 10_000;

/// Bytes of pages that unsynced commits may keep from reuse before a commit is made durable
/// anyway. A page that the last durable commit can reach cannot be reused until a newer commit
/// is durable (a power loss falls back to it), so this bounds the file growth an unsynced
/// workload can cause. The effective bound is the larger of this and a quarter of the file.
pub const PINNED_BYTES_MAX_DEFAULT: u64 = 64 << 20;

const _: () = assert!(key_bytes_max(PAGE_BYTES_MIN) == 1000);
const _: () = assert!(inline_cell_bytes_max(PAGE_BYTES_MIN) == 2030);
const _: () = assert!(PAGE_BYTES_MAX <= 65536, "slot offsets are u16");
const _: () = assert!(
    6 + TABLE_NAME_BYTES_MAX + 32 + TABLE_PROPERTIES_BYTES_MAX
        <= inline_cell_bytes_max(PAGE_BYTES_MIN)
);
