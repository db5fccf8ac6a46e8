//! The meta page: the root of everything. Two slots (pages 0 and 1); a commit writes the slot
//! that does not hold the last durable commit, so a torn meta write can only lose the commit
//! being written. On open the newest slot that is valid and trustworthy wins (see
//! docs/design/durability.md).

use super::page::{checksum_ok, init_page, seal_page, PageRef};
use crate::bytes::{get_u32, get_u64, put_u32, put_u64};
use crate::error::{Error, Result};
use crate::layout::meta::{
    BOOT_ID_AT as M_BOOT_ID, CATALOG_AT as M_CATALOG, CHECKSUM_ALGO_AT as M_CHECKSUM_ALGO,
    END as META_END, FLAGS_AT as M_FLAGS, FLAG_DURABLE, FLAG_LOG,
    FREELIST_HEAD_AT as M_FREELIST_HEAD, FREELIST_PAGES_AT as M_FREELIST_PAGES,
    LAST_DURABLE_AT as M_LAST_DURABLE, LOG_POSITION_AT as M_LOG_POSITION, MAGIC_AT as M_MAGIC,
    PAGE_BYTES_AT as M_PAGE_BYTES, PAGE_COUNT_AT as M_PAGE_COUNT, RESERVE_AT as M_RESERVE,
    RESERVE_LIST_AT as M_RESERVE_LIST, RESERVE_LIST_PAGES_AT as M_RESERVE_LIST_PAGES,
    RESERVE_TAIL_AT as M_RESERVE_TAIL, VERSION_AT as M_VERSION,
};
use crate::layout::{header, kind, table_header, META_SLOTS};
use crate::limits::{
    PAGE_BYTES_MAX, PAGE_BYTES_MIN, PAGE_COUNT_MAX, TABLE_PROPERTIES_BYTES_MAX, TREE_DEPTH_MAX,
};

/// File magic, at byte 32 of each meta page.
pub(crate) const MAGIC: [u8; 8] = *b"LARCHDB\0";
/// Format version this build writes and the newest it reads. Format 4: the log position may
/// come before records of commits the tree holds (a checkpoint by slices keeps the log from
/// the oldest record a slice still needs), and replay applies every commit record from it;
/// format 3 is read the same (its position has none). Format 2 (no log position) is read as
/// a commit with no log. Format 5: the pages reserved for large values written at their
/// commits, as two extents (`Meta::reserve_v5`); formats 3 and 4 are read with none. Format 6:
/// those pages as a list of extents in pages of their own (`Meta::reserve_list`), so that a
/// reservation takes free space in as many pieces as it is cut into.
pub(crate) const FORMAT_VERSION: u32 = 6;
/// Checksum algorithm id: 1 = CRC-32C (Castagnoli).
const CHECKSUM_CRC32C: u8 = 1;

const _: () = assert!(META_END <= PAGE_BYTES_MIN as usize);

/// Where a table's tree is: stored in the meta page for the catalog, and as the value of each
/// catalog entry for named tables.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct TableHeader {
    /// Root page (id 0 for an empty table) and the commit that wrote it.
    pub(crate) root: PageRef,
    /// Number of entries.
    pub(crate) entries: u64,
    /// Levels: 0 empty, 1 a single leaf, ...
    pub(crate) depth: u32,
}

impl TableHeader {
    pub(crate) const BYTES: usize = table_header::BYTES;

    pub(crate) fn encode(&self) -> [u8; Self::BYTES] {
        let mut b = [0u8; Self::BYTES];
        b[table_header::ROOT_AT..table_header::ROOT_AT + PageRef::BYTES]
            .copy_from_slice(&self.root.encode());
        put_u64(&mut b, table_header::ENTRIES_AT, self.entries);
        put_u32(&mut b, table_header::DEPTH_AT, self.depth);
        b
    }

    /// The application's properties of a table: the bytes of its catalog value after the
    /// header (empty if none). Requires: `b` passed `decode`.
    pub(crate) fn properties(b: &[u8]) -> &[u8] {
        debug_assert!(b.len() >= Self::BYTES);
        b.get(Self::BYTES..).unwrap_or(&[])
    }

    /// Decodes and sanity-checks a header read from `page`: the first `BYTES` of `b`. A
    /// catalog value may carry the table's properties after it (see `properties`).
    pub(crate) fn decode(b: &[u8], page: u64) -> Result<TableHeader> {
        if b.len() < Self::BYTES || b.len() > Self::BYTES + TABLE_PROPERTIES_BYTES_MAX {
            return Err(Error::corrupted(page, "table header has the wrong length"));
        }
        let h = TableHeader {
            root: PageRef::decode(&b[table_header::ROOT_AT..]),
            entries: get_u64(b, table_header::ENTRIES_AT),
            depth: get_u32(b, table_header::DEPTH_AT),
        };
        if h.depth as usize > TREE_DEPTH_MAX || h.root.is_none() != (h.depth == 0) {
            return Err(Error::corrupted(
                page,
                "table header has an impossible depth",
            ));
        }
        Ok(h)
    }
}

/// The decoded contents of a meta slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Meta {
    /// Transaction that wrote this meta; snapshots are named by it.
    pub(crate) txn: u64,
    pub(crate) page_bytes: u32,
    /// Pages in use, free ones included: the file's logical length.
    pub(crate) page_count: u64,
    /// The catalog tree: table name -> `TableHeader`.
    pub(crate) catalog: TableHeader,
    /// First page of the freelist chain, id 0 if none.
    pub(crate) freelist_head: PageRef,
    /// Pages in the freelist chain.
    pub(crate) freelist_pages: u64,
    /// Newest transaction known to be on stable storage when this meta was written.
    pub(crate) last_durable_txn: u64,
    /// Written with a sync (true) or without (false).
    pub(crate) durable: bool,
    /// Boot id of the machine when written (zero if unknown).
    pub(crate) boot_id: [u8; 16],
    /// Commits after this one may be in the log (`engine::log`), from `log_position`: open
    /// replays them. Set by every commit of a handle that writes the log.
    pub(crate) log: bool,
    /// The log position this commit covers everything before (its checkpoint position).
    pub(crate) log_position: u64,
    /// Format 6: the first page of the list of the pages reserved for the runs commits after
    /// this one write large values into, and of the part of the reservation before it they
    /// may still have written into (`Snapshot::reserved`); id 0 for none. Those pages are
    /// neither free nor in the tree; an open frees the pages no record it replays names
    /// (docs/design/large-values.md).
    pub(crate) reserve_list: PageRef,
    /// Pages of that list.
    pub(crate) reserve_list_pages: u64,
    /// Format 5: the same pages as two extents (first, count), the reservation and the tail;
    /// (0, 0) for none. Never written.
    pub(crate) reserve_v5: [(u64, u64); 2],
}

/// Why a meta slot could not be used.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum MetaDefect {
    /// No magic: not a Larch file (or the slot was never written).
    NoMagic,
    /// A newer format version.
    Version(u32),
    /// Magic present but something else is wrong.
    Damaged(String),
}

impl Meta {
    /// Encodes the meta fields for `slot`: the first `META_END` bytes of the slot's page. The
    /// rest of the page is unused (zero when the file was created) and not checksummed, so a
    /// commit writes only these bytes, a single sector.
    pub(crate) fn encode(&self, slot: u64) -> [u8; META_END] {
        let mut p = [0u8; META_END];
        init_page(&mut p, kind::META);
        p[M_MAGIC..M_MAGIC + 8].copy_from_slice(&MAGIC);
        put_u32(&mut p, M_VERSION, FORMAT_VERSION);
        p[M_CHECKSUM_ALGO] = CHECKSUM_CRC32C;
        p[M_FLAGS] =
            if self.durable { FLAG_DURABLE } else { 0 } | if self.log { FLAG_LOG } else { 0 };
        put_u32(&mut p, M_PAGE_BYTES, self.page_bytes);
        put_u64(&mut p, M_PAGE_COUNT, self.page_count);
        p[M_CATALOG..M_CATALOG + TableHeader::BYTES].copy_from_slice(&self.catalog.encode());
        p[M_FREELIST_HEAD..M_FREELIST_HEAD + PageRef::BYTES]
            .copy_from_slice(&self.freelist_head.encode());
        put_u64(&mut p, M_FREELIST_PAGES, self.freelist_pages);
        put_u64(&mut p, M_LAST_DURABLE, self.last_durable_txn);
        p[M_BOOT_ID..M_BOOT_ID + 16].copy_from_slice(&self.boot_id);
        put_u64(&mut p, M_LOG_POSITION, self.log_position);
        debug_assert_eq!(self.reserve_v5, [(0, 0); 2]);
        p[M_RESERVE_LIST..M_RESERVE_LIST + PageRef::BYTES]
            .copy_from_slice(&self.reserve_list.encode());
        put_u64(&mut p, M_RESERVE_LIST_PAGES, self.reserve_list_pages);
        seal_page(&mut p, slot, self.txn);
        p
    }

    /// Reads the page size a meta slot claims, from its first `PAGE_HEADER_BYTES + 24` bytes,
    /// without trusting it beyond range checks.
    pub(crate) fn peek_page_bytes(head: &[u8]) -> std::result::Result<u32, MetaDefect> {
        if head.len() < META_END || head[M_MAGIC..M_MAGIC + 8] != MAGIC {
            return Err(MetaDefect::NoMagic);
        }
        let version = get_u32(head, M_VERSION);
        if version > FORMAT_VERSION {
            // A newer version is believed only from an intact slot: its CRC-32C (over the
            // fields, which is all a meta checksum covers) verifies, or it names another
            // checksum algorithm, as a later format may. Why: a flipped bit in one slot's
            // version field is damage to that slot, and the other slot must still open.
            if head[M_CHECKSUM_ALGO] == CHECKSUM_CRC32C && !checksum_ok(&head[..META_END]) {
                return Err(MetaDefect::Damaged("meta checksum mismatch".into()));
            }
            return Err(MetaDefect::Version(version));
        }
        let page_bytes = get_u32(head, M_PAGE_BYTES);
        if !(PAGE_BYTES_MIN..=PAGE_BYTES_MAX).contains(&page_bytes) || !page_bytes.is_power_of_two()
        {
            return Err(MetaDefect::Damaged(format!(
                "impossible page size {page_bytes}"
            )));
        }
        Ok(page_bytes)
    }

    /// Decodes and validates a whole meta page read from `slot`.
    pub(crate) fn decode(p: &[u8], slot: u64) -> std::result::Result<Meta, MetaDefect> {
        let page_bytes = Self::peek_page_bytes(p)?;
        if p.len() != page_bytes as usize {
            return Err(MetaDefect::Damaged("meta page truncated".into()));
        }
        if !checksum_ok(p) {
            return Err(MetaDefect::Damaged("meta checksum mismatch".into()));
        }
        if header::kind(p) != kind::META || header::page_id(p) != slot {
            return Err(MetaDefect::Damaged("meta header names another page".into()));
        }
        if p[M_CHECKSUM_ALGO] != CHECKSUM_CRC32C {
            return Err(MetaDefect::Damaged(format!(
                "unknown checksum algorithm {}",
                p[M_CHECKSUM_ALGO]
            )));
        }
        let catalog = TableHeader::decode(&p[M_CATALOG..M_CATALOG + TableHeader::BYTES], slot)
            .map_err(|e| MetaDefect::Damaged(e.to_string()))?;
        let mut boot_id = [0u8; 16];
        boot_id.copy_from_slice(&p[M_BOOT_ID..M_BOOT_ID + 16]);
        let mut meta = Meta {
            txn: header::txn(p),
            page_bytes,
            page_count: get_u64(p, M_PAGE_COUNT),
            catalog,
            freelist_head: PageRef::decode(&p[M_FREELIST_HEAD..M_FREELIST_HEAD + PageRef::BYTES]),
            freelist_pages: get_u64(p, M_FREELIST_PAGES),
            last_durable_txn: get_u64(p, M_LAST_DURABLE),
            durable: p[M_FLAGS] & FLAG_DURABLE != 0,
            boot_id,
            log: p[M_FLAGS] & FLAG_LOG != 0,
            log_position: if crate::layout::meta::end(p) >= M_LOG_POSITION + 8 {
                get_u64(p, M_LOG_POSITION)
            } else {
                0
            },
            reserve_list: PageRef::default(),
            reserve_list_pages: 0,
            reserve_v5: [(0, 0); 2],
        };
        match get_u32(p, M_VERSION) {
            5 => meta.reserve_v5 = [extent_at(p, M_RESERVE), extent_at(p, M_RESERVE_TAIL)],
            6.. => {
                meta.reserve_list =
                    PageRef::decode(&p[M_RESERVE_LIST..M_RESERVE_LIST + PageRef::BYTES]);
                meta.reserve_list_pages = get_u64(p, M_RESERVE_LIST_PAGES);
            }
            _ => {}
        }
        let pc = meta.page_count;
        let in_range = |id: u64| id == 0 || (id >= META_SLOTS && id < pc);
        if !(META_SLOTS..=PAGE_COUNT_MAX).contains(&pc)
            || !in_range(meta.catalog.root.id)
            || !in_range(meta.freelist_head.id)
            || meta.catalog.root.txn > meta.txn
            || meta.freelist_head.txn > meta.txn
            || meta.freelist_pages > pc
            || meta.last_durable_txn > meta.txn
            || !meta.reserve_v5.iter().all(|&e| extent_in(e, pc))
            || !in_range(meta.reserve_list.id)
            || meta.reserve_list.txn > meta.txn
            || meta.reserve_list_pages > pc
            || meta.reserve_list.is_none() != (meta.reserve_list_pages == 0)
        {
            return Err(MetaDefect::Damaged("meta fields out of range".into()));
        }
        Ok(meta)
    }
}

/// The extent (first page, pages) at `at` of meta page `p`, where its format has one.
fn extent_at(p: &[u8], at: usize) -> (u64, u64) {
    if crate::layout::meta::end(p) >= at + 16 {
        (get_u64(p, at), get_u64(p, at + 8))
    } else {
        (0, 0)
    }
}

/// Whether the extent `e` is none, or pages of the file that are not meta pages.
fn extent_in((start, pages): (u64, u64), page_count: u64) -> bool {
    (start, pages) == (0, 0)
        || (start >= META_SLOTS
            && pages > 0
            && start.checked_add(pages).is_some_and(|e| e <= page_count))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Meta {
        Meta {
            txn: 7,
            page_bytes: 4096,
            page_count: 10,
            catalog: TableHeader {
                root: PageRef::new(3, 6),
                entries: 2,
                depth: 1,
            },
            freelist_head: PageRef::new(4, 7),
            freelist_pages: 1,
            last_durable_txn: 6,
            durable: true,
            boot_id: [9; 16],
            log: true,
            log_position: 1 << 40,
            reserve_list: PageRef::new(5, 7),
            reserve_list_pages: 1,
            reserve_v5: [(0, 0); 2],
        }
    }

    /// A whole meta page as it sits in the file.
    fn page(m: &Meta, slot: u64) -> Vec<u8> {
        let mut p = vec![0u8; m.page_bytes as usize];
        p[..META_END].copy_from_slice(&m.encode(slot));
        p
    }

    #[test]
    fn round_trip() {
        let m = sample();
        let p = page(&m, 1);
        assert_eq!(Meta::decode(&p, 1), Ok(m));
    }

    #[test]
    fn wrong_slot_and_bit_flip_are_rejected() {
        let m = sample();
        let p = page(&m, 1);
        assert!(matches!(Meta::decode(&p, 0), Err(MetaDefect::Damaged(_))));
        for byte in [0usize, 5, 60, 100, META_END - 1] {
            let mut q = p.clone();
            q[byte] ^= 0x10;
            assert!(Meta::decode(&q, 1).is_err(), "flip at {byte} accepted");
        }
    }

    #[test]
    fn a_format_5_slot_names_its_two_extents() {
        let m = Meta {
            reserve_list: PageRef::default(),
            reserve_list_pages: 0,
            ..sample()
        };
        let mut p = page(&m, 1);
        put_u32(&mut p, M_VERSION, 5);
        put_u64(&mut p, M_RESERVE, 5);
        put_u64(&mut p, M_RESERVE + 8, 2);
        put_u64(&mut p, M_RESERVE_TAIL, 8);
        put_u64(&mut p, M_RESERVE_TAIL + 8, 1);
        seal_page(&mut p[..META_END], 1, m.txn);
        let want = Meta {
            reserve_v5: [(5, 2), (8, 1)],
            ..m
        };
        assert_eq!(Meta::decode(&p, 1), Ok(want));
        // An extent past the file is a damaged slot.
        put_u64(&mut p, M_RESERVE + 8, 20);
        seal_page(&mut p[..META_END], 1, m.txn);
        assert!(matches!(Meta::decode(&p, 1), Err(MetaDefect::Damaged(_))));
    }

    #[test]
    fn newer_version_is_reported() {
        let m = sample();
        let mut p = page(&m, 0);
        put_u32(&mut p, M_VERSION, FORMAT_VERSION + 1);
        // Without a valid checksum it is a damaged slot (a flipped bit), not a newer format...
        assert!(matches!(Meta::decode(&p, 0), Err(MetaDefect::Damaged(_))));
        // ...unless it names another checksum algorithm, as a later format may.
        let mut q = p.clone();
        q[M_CHECKSUM_ALGO] = 2;
        assert_eq!(
            Meta::decode(&q, 0),
            Err(MetaDefect::Version(FORMAT_VERSION + 1))
        );
        // With its checksum intact, it is a newer format.
        seal_page(&mut p[..META_END], 0, m.txn);
        assert_eq!(
            Meta::decode(&p, 0),
            Err(MetaDefect::Version(FORMAT_VERSION + 1))
        );
    }
}
