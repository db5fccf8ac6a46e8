//! The pager: page images and checksums, the meta slots, free-space accounting, and page
//! access for readers (snapshots) and for the writer (dirty pages).
//!
//! Page access goes through [`PageSource`], implemented by [`Snapshot`] and [`WritePages`]; the
//! B-tree never sees how a page got into memory. Today a snapshot reads through a shared mmap of
//! the file (or, for storages that cannot be mapped, through a per-snapshot buffer cache);
//! stage 3 swaps in a buffer pool behind the same calls.
//!
//! ```text
//! page.rs       page images: init, stamp, seal, checksum, header checks; PageRef
//! access.rs     how a snapshot's pages reach memory (mmap, shared writable map, buffers)
//! snapshot.rs   Snapshot: one committed state, read through an access
//! meta.rs       the meta fields and the table header, encoded and decoded
//! slots.rs      the meta-slot protocol on the file: create, choose at open
//! freelist/     free and pending space, its persisted chain and the replay that loads it
//! write/        WritePages: the writer's dirty pages, allocation, sealing, commit preparation
//! shift.rs      CRC-32C shift arithmetic for checksums derived instead of recomputed
//! ```

mod access;
mod frames;
pub(crate) mod freelist;
mod meta;
pub(crate) mod page;
pub(crate) mod shift;
mod slots;
mod snapshot;
mod write;

pub(crate) use access::{Access, MapView, Readahead};
pub(crate) use frames::Frames;
pub(crate) use freelist::FreeSet;
pub(crate) use meta::{Meta, TableHeader};
pub(crate) use page::{prefetch, PageRef};
pub(crate) use slots::{choose_meta, create, newer_pages, Chosen, Doubt};
pub(crate) use snapshot::Snapshot;
pub(crate) use write::{Carry, WriteMap, WritePages};

use crate::error::Result;

/// Initial size of a mapping of the file; it doubles when the file outgrows it. This is
/// address space, not memory.
pub(crate) const MAP_BYTES_MIN: u64 = 1 << 30;

/// Read access to pages, shared by the read path (snapshots) and the write path (dirty pages
/// first, then the snapshot the write transaction started from).
pub(crate) trait PageSource {
    /// The page `id`, header-checked. Requires: `id` is a single-page node or freelist page.
    fn page(&self, id: u64) -> Result<&[u8]>;
    /// The overflow run starting at `id`, spanning `pages` pages, header-checked.
    fn run(&self, id: u64, pages: u64) -> Result<&[u8]>;
    /// Page size in bytes.
    fn page_bytes(&self) -> usize;

    /// The page `r` refers to, checked to be the version the reference expects.
    #[inline]
    fn page_at(&self, r: PageRef) -> Result<&[u8]> {
        let p = self.page(r.id)?;
        r.check(p)?;
        Ok(p)
    }

    /// Hints the CPU to load all of page `id`, without reading it (no check; nothing
    /// happens if it is out of range or not mapped). For a page about to be read whole.
    #[inline]
    fn prefetch_page(&self, _id: u64) {}

    /// Like `prefetch_page`, for the first `lines` cache lines of the page only.
    #[inline]
    fn prefetch_head(&self, _id: u64, _lines: usize) {}

    /// The page `r` refers to, checked like `page_at`, only where it is in memory of the
    /// engine's own already (a ready frame): `None` where reading it could wait on a load or
    /// on the device. For a prefetch that reads a page's header to learn what to ask for,
    /// which must never read in a page that nothing may need.
    #[inline]
    fn page_ready(&self, _r: PageRef) -> Option<&[u8]> {
        None
    }

    /// The overflow run `r` refers to, checked like `page_at`.
    fn run_at(&self, r: PageRef, pages: u64) -> Result<&[u8]> {
        let p = self.run(r.id, pages)?;
        r.check(p)?;
        Ok(p)
    }
}
