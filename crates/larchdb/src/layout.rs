//! The on-disk layout, byte by byte: every offset, field width and kind tag of the file format,
//! and the one rule that depends on them all (which bytes a page's checksum skips). The ground
//! floor of the engine: it depends on nothing but `bytes`, and every layer that reads or writes
//! a page takes its positions from here, as SQLite's btree code takes them from btreeInt.h.
//! docs/design/file-format.md is the prose for the same tables.
//!
//! ```text
//! every page   [0..4) checksum  [4] kind  [5] flags  [6..8) count  [8..16) page id
//!              [16..24) txn (the commit that wrote it)  [24..28) field A  [28..32) field B
//! leaf         header, slot u16 * keys, gap, cells          A = cells start  B = dead bytes
//! branch       header, child 0 ref, slot u16 * keys, gap, cells          (as a leaf)
//! overflow run header, value, gap (to the end of the run)   A = run pages    B = value bytes
//! freelist     header, next ref, extent * count, gap
//! meta slot    header, magic, version, ... (`meta`), gap (to the end of the page)
//! ```
//!
//! Fields A and B mean different things for each kind of page, so they have no generic
//! accessor: each kind's module names them for what they hold.

use crate::bytes::{get_u16, get_u32, get_u64, put_u16, put_u32, put_u64};

/// Meta slots occupy pages 0 and 1; page 0 is never a tree page, so page id 0 means "no page".
pub(crate) const META_SLOTS: u64 = 2;

/// A reference to a page: page id u64, then the id of the commit that wrote the page, u64.
pub(crate) const PAGE_REF_BYTES: usize = 16;

/// A table header (the catalog's in the meta page, each table's as its catalog value): root
/// reference, entries u64, depth u32, 4 bytes reserved (zero).
pub(crate) mod table_header {
    pub(crate) const ROOT_AT: usize = 0;
    pub(crate) const ENTRIES_AT: usize = 16;
    pub(crate) const DEPTH_AT: usize = 24;
    pub(crate) const BYTES: usize = 32;
    const _: () = assert!(ROOT_AT + super::PAGE_REF_BYTES == ENTRIES_AT);
}

/// Kind tags (byte 4 of the header).
pub(crate) mod kind {
    pub(crate) const META: u8 = 1;
    pub(crate) const BRANCH: u8 = 2;
    pub(crate) const LEAF: u8 = 3;
    pub(crate) const OVERFLOW: u8 = 4;
    pub(crate) const FREELIST: u8 = 5;
    /// A page of the list of pages reserved for large values (meta format 6), in the
    /// freelist page's layout.
    pub(crate) const RESERVE_LIST: u8 = 6;
}

/// The header at the start of every page (and of every overflow run).
pub(crate) mod header {
    use super::*;

    pub(crate) const CHECKSUM_AT: usize = 0;
    pub(crate) const KIND_AT: usize = 4;
    pub(crate) const FLAGS_AT: usize = 5;
    /// Keys of a node, extents of a freelist page; unused (zero) elsewhere.
    pub(crate) const COUNT_AT: usize = 6;
    pub(crate) const PAGE_ID_AT: usize = 8;
    pub(crate) const TXN_AT: usize = 16;
    /// Kind-specific fields A and B (see each kind's module).
    pub(crate) const FIELD_A_AT: usize = 24;
    pub(crate) const FIELD_B_AT: usize = 28;
    /// Bytes of the header.
    pub(crate) const BYTES: usize = 32;

    /// Where the checksum starts covering: everything after its own field.
    pub(crate) const CHECKED_FROM: usize = CHECKSUM_AT + 4;

    #[inline]
    pub(crate) fn kind(p: &[u8]) -> u8 {
        p[KIND_AT]
    }
    #[inline]
    pub(crate) fn checksum(p: &[u8]) -> u32 {
        get_u32(p, CHECKSUM_AT)
    }
    #[inline]
    pub(crate) fn set_checksum(p: &mut [u8], crc: u32) {
        put_u32(p, CHECKSUM_AT, crc)
    }
    /// The page id the page says it is.
    #[inline]
    pub(crate) fn page_id(p: &[u8]) -> u64 {
        get_u64(p, PAGE_ID_AT)
    }
    /// The commit that wrote the page.
    #[inline]
    pub(crate) fn txn(p: &[u8]) -> u64 {
        get_u64(p, TXN_AT)
    }
    #[inline]
    pub(crate) fn set_page_id_and_txn(p: &mut [u8], id: u64, txn: u64) {
        put_u64(p, PAGE_ID_AT, id);
        put_u64(p, TXN_AT, txn);
    }
    #[inline]
    pub(crate) fn count(p: &[u8]) -> u16 {
        get_u16(p, COUNT_AT)
    }
    #[inline]
    pub(crate) fn set_count(p: &mut [u8], n: u16) {
        put_u16(p, COUNT_AT, n)
    }
    #[inline]
    pub(crate) fn field_a(p: &[u8]) -> u32 {
        get_u32(p, FIELD_A_AT)
    }
    #[inline]
    pub(crate) fn field_b(p: &[u8]) -> u32 {
        get_u32(p, FIELD_B_AT)
    }
    #[inline]
    pub(crate) fn set_field_a(p: &mut [u8], v: u32) {
        put_u32(p, FIELD_A_AT, v)
    }
    #[inline]
    pub(crate) fn set_field_b(p: &mut [u8], v: u32) {
        put_u32(p, FIELD_B_AT, v)
    }
}

/// Leaf and branch pages (the B-tree's nodes): slotted pages whose cells grow down from the end
/// of the page and whose slot array (one u16 cell offset per key, sorted by key) grows up after
/// the header.
///
/// ```text
/// leaf cell:    klen u16, vword u32, key, value | overflow ref (vword: length, top bit = overflow)
/// branch cell:  klen u16, child ref, key   (cell i: separator key i and child i + 1)
/// ```
pub(crate) mod node {
    use super::*;

    /// Offset of the slot array in a leaf.
    pub(crate) const LEAF_SLOTS_AT: usize = header::BYTES;
    /// Offset of child 0's reference in a branch, and of its slot array after it.
    pub(crate) const BRANCH_CHILD0_AT: usize = header::BYTES;
    pub(crate) const BRANCH_SLOTS_AT: usize = BRANCH_CHILD0_AT + PAGE_REF_BYTES;
    /// Bytes of a slot.
    pub(crate) const SLOT_BYTES: usize = 2;
    /// Bytes before the key in a leaf cell (klen, vword) and in a branch cell (klen, child).
    pub(crate) const LEAF_CELL_HEADER_BYTES: usize = 2 + 4;
    pub(crate) const BRANCH_CELL_HEADER_BYTES: usize = 2 + PAGE_REF_BYTES;
    /// Offset of the vword in a leaf cell, and of the child reference in a branch cell.
    pub(crate) const LEAF_CELL_VWORD_AT: usize = 2;
    pub(crate) const BRANCH_CELL_CHILD_AT: usize = 2;
    /// Bit of a leaf cell's vword marking an overflow value; the low 31 bits are its length.
    pub(crate) const VWORD_OVERFLOW: u32 = 1 << 31;

    /// Where the slot array starts in a node of kind `leaf`.
    #[inline(always)]
    pub(crate) const fn slots_at(leaf: bool) -> usize {
        if leaf {
            LEAF_SLOTS_AT
        } else {
            BRANCH_SLOTS_AT
        }
    }

    /// Bytes before the key in a cell of a node of kind `leaf`.
    #[inline(always)]
    pub(crate) const fn cell_header_bytes(leaf: bool) -> usize {
        if leaf {
            LEAF_CELL_HEADER_BYTES
        } else {
            BRANCH_CELL_HEADER_BYTES
        }
    }

    /// Number of keys (slots).
    #[inline]
    pub(crate) fn keys(p: &[u8]) -> u16 {
        header::count(p)
    }
    #[inline]
    pub(crate) fn set_keys(p: &mut [u8], n: u16) {
        header::set_count(p, n)
    }
    /// Offset where the cell area starts (field A): cells lie in `[cells_start, page end)`.
    #[inline]
    pub(crate) fn cells_start(p: &[u8]) -> u32 {
        header::field_a(p)
    }
    #[inline]
    pub(crate) fn set_cells_start(p: &mut [u8], at: u32) {
        header::set_field_a(p, at)
    }
    /// Bytes of dead cells in the cell area, not yet compacted (field B).
    #[inline]
    pub(crate) fn dead_bytes(p: &[u8]) -> u32 {
        header::field_b(p)
    }
    #[inline]
    pub(crate) fn set_dead_bytes(p: &mut [u8], n: u32) {
        header::set_field_b(p, n)
    }
}

/// Overflow runs: consecutive pages holding one value, with one header (on the first page).
pub(crate) mod overflow {
    use super::*;

    /// Offset of the value in the run.
    pub(crate) const VALUE_AT: usize = header::BYTES;

    /// Pages in the run (field A).
    #[inline]
    pub(crate) fn run_pages(p: &[u8]) -> u32 {
        header::field_a(p)
    }
    /// Bytes of the value (field B).
    #[inline]
    pub(crate) fn value_bytes(p: &[u8]) -> u32 {
        header::field_b(p)
    }
    #[inline]
    pub(crate) fn set_run(p: &mut [u8], pages: u32, value_bytes: u32) {
        header::set_field_a(p, pages);
        header::set_field_b(p, value_bytes);
    }
    /// Pages a run of a `value_bytes`-byte value takes at `page_bytes`.
    pub(crate) fn pages_for(value_bytes: usize, page_bytes: usize) -> u64 {
        (VALUE_AT + value_bytes).div_ceil(page_bytes) as u64
    }
}

/// Freelist pages: a chain, newest first, each holding extents (free or pending space, or
/// changes to it; see `pager::freelist`).
///
/// ```text
/// extent: txn u64 (freeing commit, 0 if free), start page u64, pages u32, kind u32
/// ```
pub(crate) mod freelist {
    use super::*;

    /// Offset of the reference to the next (older) page of the chain.
    pub(crate) const NEXT_AT: usize = header::BYTES;
    /// Offset of the first extent.
    pub(crate) const EXTENTS_AT: usize = NEXT_AT + PAGE_REF_BYTES;
    /// Bytes of one extent, and its fields.
    pub(crate) const EXTENT_BYTES: usize = 24;
    pub(crate) const EXTENT_TXN_AT: usize = 0;
    pub(crate) const EXTENT_START_AT: usize = 8;
    pub(crate) const EXTENT_PAGES_AT: usize = 16;
    pub(crate) const EXTENT_KIND_AT: usize = 20;

    /// Extents that fit in one page.
    pub(crate) const fn extents_per_page(page_bytes: usize) -> usize {
        (page_bytes - EXTENTS_AT) / EXTENT_BYTES
    }
    /// Number of extents on the page.
    #[inline]
    pub(crate) fn extents(p: &[u8]) -> u16 {
        header::count(p)
    }
    #[inline]
    pub(crate) fn set_extents(p: &mut [u8], n: u16) {
        header::set_count(p, n)
    }
}

/// The meta slots (pages 0 and 1): the header, then these fields; the rest of the page is not
/// checksummed.
pub(crate) mod meta {
    pub(crate) const MAGIC_AT: usize = 32;
    pub(crate) const VERSION_AT: usize = 40;
    pub(crate) const CHECKSUM_ALGO_AT: usize = 44;
    pub(crate) const FLAGS_AT: usize = 45;
    pub(crate) const PAGE_BYTES_AT: usize = 48;
    pub(crate) const PAGE_COUNT_AT: usize = 56;
    pub(crate) const CATALOG_AT: usize = 64;
    pub(crate) const FREELIST_HEAD_AT: usize = 96;
    pub(crate) const FREELIST_PAGES_AT: usize = 112;
    pub(crate) const LAST_DURABLE_AT: usize = 120;
    pub(crate) const BOOT_ID_AT: usize = 128;
    /// Format 3: where the log (`super::log`) continues after this commit; with
    /// `FLAG_LOG`, open replays the log's records from here.
    pub(crate) const LOG_POSITION_AT: usize = 144;
    /// Format 5: the reservation of pages the commits after this one write large values
    /// into (first page u64, pages u64), then the part of the reservation before it that
    /// commits may still have written into (first page u64, pages u64); zeros for none
    /// (docs/design/large-values.md).
    pub(crate) const RESERVE_AT: usize = 152;
    pub(crate) const RESERVE_TAIL_AT: usize = 168;
    /// Format 6, in their place: the first page of the list of those extents (a page
    /// reference: id u64, txn u64), and its pages (u64); zeros for none.
    pub(crate) const RESERVE_LIST_AT: usize = 152;
    pub(crate) const RESERVE_LIST_PAGES_AT: usize = 168;
    /// End of the meta fields: a commit writes only these bytes of its slot.
    pub(crate) const END: usize = 184;
    /// End of the meta fields in formats 3 and 4.
    pub(crate) const END_V4: usize = 152;
    /// End of the meta fields in format 2 (no log position).
    pub(crate) const END_V2: usize = 144;

    /// Bit of the flags byte: the commit was written with a sync.
    pub(crate) const FLAG_DURABLE: u8 = 1;
    /// Bit of the flags byte: commits after this one may be in the log, from the log position.
    pub(crate) const FLAG_LOG: u8 = 2;

    /// End of the meta fields of the meta page `p`, by its format version (covered by the
    /// checksum, like every field before the end).
    pub(crate) fn end(p: &[u8]) -> usize {
        match (p.len() >= VERSION_AT + 4).then(|| crate::bytes::get_u32(p, VERSION_AT)) {
            Some(2) => END_V2,
            Some(3 | 4) => END_V4,
            _ => END,
        }
    }

    const _: () = assert!(MAGIC_AT == super::header::BYTES);
    const _: () = assert!(CATALOG_AT + super::table_header::BYTES == FREELIST_HEAD_AT);
    const _: () = assert!(FREELIST_HEAD_AT + super::PAGE_REF_BYTES == FREELIST_PAGES_AT);
    const _: () = assert!(BOOT_ID_AT + 16 == LOG_POSITION_AT && LOG_POSITION_AT + 8 == END_V4);
    const _: () = assert!(RESERVE_AT == END_V4 && RESERVE_TAIL_AT + 16 == END);
    const _: () = assert!(BOOT_ID_AT + 16 == END_V2);
}

/// The write-ahead log (`engine::log`), a file beside the database: a file header, then equal
/// segments used round robin, each a segment header and then records, 8-byte aligned. A
/// position (log sequence number) counts bytes from the log's creation; position `p` lies in
/// segment slot `(p / segment_bytes) % segments`, at offset `p % segment_bytes` in it, and the
/// slot starts at byte `FILE_HEADER_BYTES + slot * segment_bytes` of the file. The file may be
/// shorter than its geometry (it grows as the log reaches it): bytes past its end read as
/// zeros, never written.
///
/// ```text
/// file header     magic "LARCHWAL", version u32, 0 u32, segment bytes u64, segments u64,
///                 crc u32 (of 0..32); written once, when the log is created
/// segment header  magic "LARCHSEG", base u64 (the position of the segment's first byte),
///                 crc u32 (of 0..16), 0 u32
/// record          crc u32, body bytes u32, kind u8, reserved 7 bytes (0), txn u64,
///                 synced u64 (the log was synced up to this position when the record was
///                 appended), body, zeros to the next multiple of 8
/// ```
///
/// Kinds: 1, a commit (the body: its writes, `engine::batch`); 2, a pad to the segment's end
/// (its txn field: 0, or from version 2 the position the log jumps to); 3, from version 3, a
/// mark: a commit that wrote its pages, whose writes are not in the log (no body); 4, from
/// version 4, a commit whose body is packed (its unpacked length, u32, then the unpacked body
/// as one LZ4 block). A version-2 log is read and written to as before, without marks, and a
/// version-3 one without packed commits; new logs are version 4.
///
/// A record's CRC-32C covers its position (u64, little-endian), then its header from byte 4,
/// then its body: a record left by an earlier cycle of a reused segment, intact but at another
/// position, does not check out.
pub(crate) mod log {
    pub(crate) const FILE_MAGIC: [u8; 8] = *b"LARCHWAL";
    /// Version 5: a commit record may name runs of the data file (`OP_PUT_RUN`). Version 4: a
    /// commit's body may be packed (`KIND_PACKED`). Version 3: a record may be
    /// a mark (`KIND_MARK`). Version 2: a pad record's txn field may name a jump to the next
    /// cycle's first position (`engine::log`, `Log::append`).
    pub(crate) const FILE_VERSION: u32 = 5;
    /// The last version whose commit records never name runs (`OP_PUT_RUN`,
    /// docs/design/large-values.md).
    pub(crate) const FILE_VERSION_NO_RUNS: u32 = 4;
    /// The version before packed commits, still read (and written to without them).
    pub(crate) const FILE_VERSION_NO_PACKED: u32 = 3;
    /// The version before marks, still read (and written to without marks).
    pub(crate) const FILE_VERSION_NO_MARKS: u32 = 2;
    /// The version before jumps, still read (and written to without jumps or marks).
    pub(crate) const FILE_VERSION_NO_JUMPS: u32 = 1;
    pub(crate) const FILE_MAGIC_AT: usize = 0;
    pub(crate) const FILE_VERSION_AT: usize = 8;
    pub(crate) const FILE_SEGMENT_BYTES_AT: usize = 16;
    pub(crate) const FILE_SEGMENTS_AT: usize = 24;
    pub(crate) const FILE_CRC_AT: usize = 32;
    /// Bytes reserved for the file header (one block, so that segments stay aligned).
    pub(crate) const FILE_HEADER_BYTES: u64 = 4096;

    pub(crate) const SEGMENT_MAGIC: [u8; 8] = *b"LARCHSEG";
    pub(crate) const SEG_MAGIC_AT: usize = 0;
    pub(crate) const SEG_BASE_AT: usize = 8;
    pub(crate) const SEG_CRC_AT: usize = 16;
    /// Bytes of the segment header; the first record of a segment starts after it.
    pub(crate) const SEGMENT_HEADER_BYTES: usize = 24;

    pub(crate) const REC_CRC_AT: usize = 0;
    pub(crate) const REC_LEN_AT: usize = 4;
    pub(crate) const REC_KIND_AT: usize = 8;
    pub(crate) const REC_TXN_AT: usize = 16;
    pub(crate) const REC_SYNCED_AT: usize = 24;
    /// Bytes of a record header.
    pub(crate) const RECORD_HEADER_BYTES: usize = 32;
    /// Records start at multiples of this.
    pub(crate) const RECORD_ALIGN: usize = 8;

    /// Record kinds.
    pub(crate) const KIND_COMMIT: u8 = 1;
    /// Fills the rest of a segment that the next record does not fit in.
    pub(crate) const KIND_PAD: u8 = 2;
    /// A commit that wrote its pages and a meta page, and whose writes are not in the log (a
    /// large sequential batch with `Durability::None`, its meta page not yet synced; or a
    /// commit that changes what the log does not hold, a table created or dropped, its meta
    /// page durable): no body. Reading back from a tree older than it ends the log there (the
    /// records after it were made on top of its pages, which a power loss may have taken
    /// away, or a damaged meta page lost).
    pub(crate) const KIND_MARK: u8 = 3;
    /// A commit whose body is packed: its unpacked length (u32, little-endian), then the
    /// unpacked body (as a `KIND_COMMIT` record's) compressed as one LZ4 block. Read back as
    /// the commit it packs.
    pub(crate) const KIND_PACKED: u8 = 4;
    /// Where a packed body's LZ4 block starts (after its unpacked length).
    pub(crate) const PACKED_BLOCK_AT: usize = 4;

    const _: () = assert!(SEGMENT_HEADER_BYTES.is_multiple_of(RECORD_ALIGN));
    const _: () = assert!(RECORD_HEADER_BYTES.is_multiple_of(RECORD_ALIGN));
    const _: () = assert!(FILE_CRC_AT + 4 <= FILE_HEADER_BYTES as usize);
}

/// The unused gap of a page, `[start, end)`, which its checksum skips: between a node's slot
/// array and its cells, after a freelist page's last extent, after an overflow value, after the
/// meta fields. The bounds come from header fields that the checksum covers; if they are
/// impossible the gap is empty, so the whole page is checked (and the checksum fails).
pub(crate) fn unused_gap(p: &[u8]) -> (usize, usize) {
    let len = p.len();
    if len < header::BYTES {
        return (len, len);
    }
    let count = header::count(p) as usize;
    let (start, end) = match header::kind(p) {
        kind::LEAF => (
            node::LEAF_SLOTS_AT + node::SLOT_BYTES * count,
            node::cells_start(p) as usize,
        ),
        kind::BRANCH => (
            node::BRANCH_SLOTS_AT + node::SLOT_BYTES * count,
            node::cells_start(p) as usize,
        ),
        kind::FREELIST | kind::RESERVE_LIST => {
            (freelist::EXTENTS_AT + freelist::EXTENT_BYTES * count, len)
        }
        kind::OVERFLOW => (overflow::VALUE_AT + overflow::value_bytes(p) as usize, len),
        kind::META => (meta::end(p), len),
        _ => (len, len),
    };
    if start <= end && end <= len {
        (start, end)
    } else {
        (len, len)
    }
}
