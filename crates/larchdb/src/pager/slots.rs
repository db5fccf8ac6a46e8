//! The meta-slot protocol on the file: writing the two slots of a new database, and choosing
//! the slot to open from. Commits write the slot that does not hold the last durable commit
//! (`engine::commit`); open takes the newest slot that is intact and trustworthy. There is no
//! other recovery step (docs/design/durability.md).

use super::meta::{Meta, MetaDefect, TableHeader, FORMAT_VERSION};
use super::page::PageRef;
use crate::error::{Error, Result};
use crate::layout::meta::END as META_END;
use crate::limits::{PAGE_BYTES_MAX, PAGE_BYTES_MIN};
use crate::storage::Storage;

/// Writes the two meta slots of an empty database and syncs.
pub(crate) fn create(
    storage: &dyn Storage,
    page_bytes: u32,
    boot_id: Option<[u8; 16]>,
) -> Result<()> {
    let mut meta = Meta {
        txn: 1,
        page_bytes,
        page_count: 2,
        catalog: TableHeader::default(),
        freelist_head: PageRef::default(),
        freelist_pages: 0,
        last_durable_txn: 1,
        durable: true,
        boot_id: boot_id.unwrap_or([0; 16]),
        log: false,
        log_position: 0,
    };
    // Both slot pages in full (zero beyond the meta fields), then the fields.
    storage.write_at(&vec![0u8; 2 * page_bytes as usize], 0)?;
    storage.write_at(&meta.encode(0), 0)?;
    meta.txn = 0;
    meta.last_durable_txn = 0;
    storage.write_at(&meta.encode(1), page_bytes as u64)?;
    storage.sync()?;
    Ok(())
}

/// The slot a meta page was read from, and what it holds.
pub(crate) struct Chosen {
    pub(crate) meta: Meta,
    pub(crate) slot: u64,
}

/// Picks the meta slot to open from: the newest that is intact, fits in the file, and is
/// either durable or written during this boot (so its unsynced pages are in the page cache).
pub(crate) fn choose_meta(
    storage: &dyn Storage,
    file_bytes: u64,
    boot_id: Option<[u8; 16]>,
) -> Result<Chosen> {
    let read = |offset: u64, len: usize| -> Option<Vec<u8>> {
        if offset + len as u64 > file_bytes {
            return None;
        }
        let mut buf = vec![0u8; len];
        storage.read_at(&mut buf, offset).ok().map(|_| buf)
    };
    let ps = find_page_bytes(&read)?;
    let mut best: Option<Chosen> = None;
    let mut reasons = Vec::new();
    for slot in 0..2u64 {
        let Some(page) = read(slot * ps as u64, ps as usize) else {
            reasons.push(format!("slot {slot}: beyond end of file"));
            continue;
        };
        match Meta::decode(&page, slot) {
            Ok(m) => {
                let trusted = m.durable || (boot_id.is_some() && Some(m.boot_id) == boot_id);
                if !trusted {
                    reasons.push(format!("slot {slot}: unsynced commit from an earlier boot"));
                } else if m.page_count * ps as u64 > file_bytes {
                    reasons.push(format!("slot {slot}: file shorter than its page count"));
                } else if best.as_ref().is_none_or(|b| m.txn > b.meta.txn) {
                    best = Some(Chosen { meta: m, slot });
                }
            }
            Err(MetaDefect::Version(found)) => {
                return Err(Error::UnsupportedVersion {
                    found,
                    supported: FORMAT_VERSION,
                })
            }
            Err(MetaDefect::NoMagic) => reasons.push(format!("slot {slot}: no magic")),
            Err(MetaDefect::Damaged(why)) => reasons.push(format!("slot {slot}: {why}")),
        }
    }
    best.ok_or_else(|| Error::corrupted(0, format!("no usable meta slot ({})", reasons.join("; "))))
}

/// The page size the meta slots claim. It is in each slot, and slot 1 sits one page in, so
/// each possible size is tried.
fn find_page_bytes(read: &dyn Fn(u64, usize) -> Option<Vec<u8>>) -> Result<u32> {
    let mut newer_version = None;
    let mut candidates = vec![0u64];
    let mut size = PAGE_BYTES_MIN as u64;
    while size <= PAGE_BYTES_MAX as u64 {
        candidates.push(size);
        size *= 2;
    }
    for offset in candidates {
        let Some(head) = read(offset, META_END) else {
            continue;
        };
        match Meta::peek_page_bytes(&head) {
            Ok(ps) if offset == 0 || offset == ps as u64 => return Ok(ps),
            Err(MetaDefect::Version(v)) => newer_version = Some(v),
            _ => {}
        }
    }
    Err(match newer_version {
        Some(found) => Error::UnsupportedVersion {
            found,
            supported: FORMAT_VERSION,
        },
        None => Error::NotADatabase,
    })
}
