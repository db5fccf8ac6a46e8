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

/// Writes the two meta slots of an empty database and syncs them and the file's name.
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
        reserve_list: PageRef::default(),
        reserve_list_pages: 0,
        reserve_v5: [(0, 0); 2],
    };
    // Both slot pages in full (zero beyond the meta fields), then the fields.
    storage.write_at(&vec![0u8; 2 * page_bytes as usize], 0)?;
    storage.write_at(&meta.encode(0), 0)?;
    meta.txn = 0;
    meta.last_durable_txn = 0;
    storage.write_at(&meta.encode(1), page_bytes as u64)?;
    storage.sync()?;
    // The file may be new: its name, too, must survive a power loss.
    storage.sync_name()?;
    Ok(())
}

/// The slot a meta page was read from, and what it holds.
pub(crate) struct Chosen {
    pub(crate) meta: Meta,
    pub(crate) slot: u64,
    /// The other slot, if it could not be used and may hold a newer commit.
    pub(crate) doubt: Option<Doubt>,
}

/// A meta slot that could not be used and may hold a commit newer than the one chosen: the
/// open must prove that it loses nothing by passing it over (`engine::open`), or refuse. A
/// slot that is intact but unsynced from an earlier boot is not one: a power loss was free to
/// drop it. Nor is an intact slot older than the chosen one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Doubt {
    /// Intact, but the file is shorter than its commit `txn` needs (`needs` bytes, the file
    /// has `has`): the file was cut short.
    Short {
        slot: u64,
        txn: u64,
        needs: u64,
        has: u64,
    },
    /// Damaged: its checksum or fields do not hold (a meta slot's fields are one sector,
    /// which a device writes whole or not at all, so this is damage, not a torn commit).
    /// `claims` is the commit its header names, not to be trusted.
    Damaged { slot: u64, why: String, claims: u64 },
}

impl Doubt {
    /// What is damaged, in words.
    pub(crate) fn damage(&self) -> String {
        match self {
            Doubt::Short {
                slot,
                txn,
                needs,
                has,
            } => format!(
                "the data file is {has} bytes, shorter than the {needs} bytes that commit {txn} \
                 (meta slot {slot}) needs: it was cut short"
            ),
            Doubt::Damaged { slot, why, claims } => format!(
                "meta slot {slot} is damaged ({why}; it claims commit {claims}, unverified)"
            ),
        }
    }

    /// The slot's page number.
    pub(crate) fn slot(&self) -> u64 {
        match self {
            Doubt::Short { slot, .. } | Doubt::Damaged { slot, .. } => *slot,
        }
    }

    /// The commit the slot holds, if that is known: one the open must reach.
    pub(crate) fn txn(&self) -> Option<u64> {
        match self {
            Doubt::Short { txn, .. } => Some(*txn),
            Doubt::Damaged { .. } => None,
        }
    }
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
    // Slots passed over that may be newer than the one chosen: (doubt, its txn if known).
    let mut doubts: Vec<Doubt> = Vec::new();
    for slot in 0..2u64 {
        let Some(page) = read(slot * ps as u64, ps as usize) else {
            reasons.push(format!("slot {slot}: beyond end of file"));
            continue;
        };
        match Meta::decode(&page, slot) {
            Ok(m) => {
                let trusted = m.durable || (boot_id.is_some() && Some(m.boot_id) == boot_id);
                let needs = m.page_count * ps as u64;
                if !trusted {
                    reasons.push(format!("slot {slot}: unsynced commit from an earlier boot"));
                } else if needs > file_bytes {
                    reasons.push(format!("slot {slot}: file shorter than its page count"));
                    doubts.push(Doubt::Short {
                        slot,
                        txn: m.txn,
                        needs,
                        has: file_bytes,
                    });
                } else if best.as_ref().is_none_or(|b| m.txn > b.meta.txn) {
                    best = Some(Chosen {
                        meta: m,
                        slot,
                        doubt: None,
                    });
                }
            }
            Err(MetaDefect::Version(found)) => {
                return Err(Error::UnsupportedVersion {
                    found,
                    supported: FORMAT_VERSION,
                })
            }
            Err(MetaDefect::NoMagic) => {
                reasons.push(format!("slot {slot}: no magic"));
                doubts.push(Doubt::Damaged {
                    slot,
                    why: "no magic".into(),
                    claims: crate::layout::header::txn(&page),
                });
            }
            Err(MetaDefect::Damaged(why)) => {
                reasons.push(format!("slot {slot}: {why}"));
                doubts.push(Doubt::Damaged {
                    slot,
                    why,
                    claims: crate::layout::header::txn(&page),
                });
            }
        }
    }
    let mut chosen = best.ok_or_else(|| {
        Error::corrupted(0, format!("no usable meta slot ({})", reasons.join("; ")))
    })?;
    chosen.doubt = doubts.into_iter().find(|d| match d.txn() {
        Some(txn) => txn > chosen.meta.txn,
        None => d.slot() != chosen.slot,
    });
    Ok(chosen)
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

/// Pages per read while looking for newer pages (`newer_pages`).
const SCAN_PAGES: u64 = 256;

/// The intact pages of the file that a commit after `txn` wrote: a page (or overflow run)
/// that names itself, checks out, and carries a later commit's id. Returns how many, and the
/// newest commit among them. A meta slot that cannot be read proves nothing by itself: with
/// no such page, no commit after `txn` changed anything in the file, so a damaged slot cannot
/// hold one that would be lost (`engine::open`). Reads the whole file.
pub(crate) fn newer_pages(
    storage: &dyn Storage,
    page_bytes: u32,
    file_bytes: u64,
    txn: u64,
) -> Result<(u64, u64)> {
    use crate::layout::{header, kind, overflow};
    let ps = page_bytes as u64;
    let pages = file_bytes / ps;
    let (mut found, mut newest) = (0u64, 0u64);
    let mut buf = vec![0u8; (SCAN_PAGES * ps) as usize];
    let mut first = crate::layout::META_SLOTS;
    while first < pages {
        let n = SCAN_PAGES.min(pages - first);
        let chunk = &mut buf[..(n * ps) as usize];
        storage.read_at(chunk, first * ps)?;
        for i in 0..n {
            let id = first + i;
            let p = &chunk[(i * ps) as usize..((i + 1) * ps) as usize];
            let k = header::kind(p);
            if header::page_id(p) != id
                || header::txn(p) <= txn
                || !matches!(
                    k,
                    kind::BRANCH
                        | kind::LEAF
                        | kind::FREELIST
                        | kind::OVERFLOW
                        | kind::RESERVE_LIST
                )
            {
                continue;
            }
            let intact = if k == kind::OVERFLOW {
                let run = overflow::run_pages(p) as u64;
                if run == 0 || id + run > pages {
                    false
                } else {
                    let mut whole = vec![0u8; (run * ps) as usize];
                    storage.read_at(&mut whole, id * ps)?;
                    super::page::checksum_ok(&whole)
                }
            } else {
                super::page::checksum_ok(p)
            };
            if intact {
                found += 1;
                newest = newest.max(header::txn(p));
            }
        }
        first += n;
    }
    Ok((found, newest))
}
