//! How a snapshot's pages reach memory. Two implementations behind one call, so the B-tree
//! does not know which is in use:
//! - `Mapped`: a shared read-only mmap of the file; a page is a slice of the map (zero copy,
//!   no syscall per read, as in LMDB). Checksums are not verified per access unless asked.
//! - `Buffered`: pages are read with `read_at` into buffers owned by the snapshot, verified
//!   once when loaded. Used for storages that cannot be mapped (the fault-injecting backend).
//!   Stage 3 replaces this with a shared, bounded buffer pool.

use super::checksum_ok;
use crate::error::{Error, Result};
use crate::storage::Storage;
use std::collections::HashMap;
use std::io;
use std::sync::{Arc, Mutex};

/// Pages and runs a buffered access has loaded, keyed by (first page, page count).
type PageCache = Mutex<HashMap<(u64, u64), Box<[u8]>>>;

pub(crate) enum Access {
    Mapped(memmap2::Mmap),
    Buffered {
        storage: Arc<dyn Storage>,
        /// Pages and runs loaded so far, keyed by (first page, page count). Entries are never
        /// removed or modified while the `Access` lives.
        cache: PageCache,
    },
}

impl Access {
    pub(crate) fn buffered(storage: Arc<dyn Storage>) -> Access {
        Access::Buffered {
            storage,
            cache: Mutex::new(HashMap::new()),
        }
    }

    pub(crate) fn is_mapped(&self) -> bool {
        matches!(self, Access::Mapped(_))
    }

    /// Bytes covered by the mapping, if mapped.
    pub(crate) fn mapped_bytes(&self) -> Option<u64> {
        match self {
            Access::Mapped(map) => Some(map.len() as u64),
            Access::Buffered { .. } => None,
        }
    }

    /// The bytes of `pages` pages from page `id`. Requires: the caller checked that the range
    /// lies within the snapshot's page count.
    #[inline]
    pub(crate) fn bytes(&self, id: u64, pages: u64, page_bytes: usize) -> Result<&[u8]> {
        let start = id as usize * page_bytes;
        let len = pages as usize * page_bytes;
        match self {
            Access::Mapped(map) => map
                .get(start..start + len)
                .ok_or_else(|| Error::corrupted(id, "page beyond the mapped file")),
            Access::Buffered { storage, cache } => {
                let mut cache = cache.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(buf) = cache.get(&(id, pages)) {
                    let ptr = buf.as_ptr();
                    let n = buf.len();
                    // SAFETY: the boxed slice is owned by the cache, which never removes or
                    // mutates an entry while `self` lives; moving the Box inside the map does
                    // not move its heap allocation. So the bytes stay valid and unchanged for
                    // the lifetime of `&self`.
                    return Ok(unsafe { std::slice::from_raw_parts(ptr, n) });
                }
                let mut buf = vec![0u8; len].into_boxed_slice();
                storage.read_at(&mut buf, start as u64).map_err(|e| {
                    if e.kind() == io::ErrorKind::UnexpectedEof {
                        Error::corrupted(id, "page beyond the end of the file")
                    } else {
                        Error::from_io(e)
                    }
                })?;
                if !checksum_ok(&buf) {
                    return Err(Error::corrupted(id, "checksum mismatch"));
                }
                let ptr = buf.as_ptr();
                cache.insert((id, pages), buf);
                // SAFETY: as above: the allocation now belongs to the cache and lives, unchanged,
                // as long as `self`.
                Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
            }
        }
    }
}
