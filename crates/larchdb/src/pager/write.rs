//! The writer's view of pages: dirty copies made in this transaction, on top of the snapshot the
//! transaction started from. Copy-on-write: a committed page is never modified; `make_dirty`
//! copies it to a newly allocated page and records the old one as freed by this transaction.

use super::freelist::{
    encode_page, extents_per_page, to_extents, FreeSet, KIND_DURABLE, KIND_READERS,
};
use super::{
    init_page, overflow_pages, page_type, seal_page, Meta, PageSource, Snapshot, TableHeader,
    PAGE_FREELIST, PAGE_HEADER_BYTES,
};
use crate::error::{Error, Result};
use crate::limits::PAGE_COUNT_MAX;
use crate::storage::Storage;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

/// Hasher for page ids: one multiply. Page ids are dense integers, so this spreads them well.
#[derive(Default)]
pub(crate) struct IdHasher(u64);

impl Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ b as u64).wrapping_mul(0x0100_0000_01b3);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

type IdMap<V> = HashMap<u64, V, BuildHasherDefault<IdHasher>>;

/// Page buffers kept for reuse between transactions, so a commit-heavy workload does not
/// allocate and zero a page per copy.
const POOL_PAGES_MAX: usize = 4096;

/// Bytes gathered into one `write_at` when consecutive pages are written at commit.
const WRITE_BATCH_BYTES_MAX: usize = 1 << 20;

pub(crate) struct WritePages {
    pub(crate) base: Arc<Snapshot>,
    pub(crate) txn: u64,
    page_bytes: usize,
    dirty: IdMap<Box<[u8]>>,
    /// Free space; moved here from the writer state for the transaction's life.
    pub(crate) free: FreeSet,
    pub(crate) page_count: u64,
    /// Extents taken from `free`, given back on abort.
    taken: Vec<(u64, u64)>,
    /// Pages allocated and then freed in this transaction: reusable at once.
    spare: Vec<(u64, u64)>,
    /// Committed pages this transaction replaced or deleted, with the txn that wrote each:
    /// pending after commit.
    freed: Vec<(u64, u64, u64)>,
    /// The last durable commit when the transaction began.
    last_durable: u64,
    pub(crate) pool: Vec<Box<[u8]>>,
}

impl WritePages {
    pub(crate) fn new(
        base: Arc<Snapshot>,
        txn: u64,
        last_durable: u64,
        free: FreeSet,
        pool: Vec<Box<[u8]>>,
    ) -> WritePages {
        let page_bytes = base.page_bytes();
        let page_count = base.meta.page_count;
        WritePages {
            base,
            txn,
            page_bytes,
            dirty: IdMap::default(),
            free,
            page_count,
            taken: Vec::new(),
            spare: Vec::new(),
            freed: Vec::new(),
            last_durable,
            pool,
        }
    }

    /// Undoes this transaction's allocations and hands back the free set.
    pub(crate) fn abort(mut self) -> (FreeSet, Vec<Box<[u8]>>) {
        for (start, len) in std::mem::take(&mut self.taken) {
            // Cannot overlap: these pages were removed from this very set.
            let _ = self.free.insert(start, len);
        }
        self.recycle_dirty();
        (self.free, self.pool)
    }

    fn recycle_dirty(&mut self) {
        let page_bytes = self.page_bytes;
        for (_, buf) in self.dirty.drain() {
            if buf.len() == page_bytes && self.pool.len() < POOL_PAGES_MAX {
                self.pool.push(buf);
            }
        }
    }

    fn alloc(&mut self, n: u64) -> Result<u64> {
        if let Some(i) = self.spare.iter().position(|&(_, len)| len >= n) {
            let (start, len) = self.spare[i];
            if len == n {
                self.spare.swap_remove(i);
            } else {
                self.spare[i] = (start + n, len - n);
            }
            return Ok(start);
        }
        if let Some(start) = self.free.alloc(n) {
            self.taken.push((start, n));
            return Ok(start);
        }
        let start = self.page_count;
        if start + n > PAGE_COUNT_MAX {
            return Err(Error::DatabaseFull);
        }
        self.page_count += n;
        Ok(start)
    }

    fn buffer(&mut self) -> Box<[u8]> {
        self.pool
            .pop()
            .unwrap_or_else(|| vec![0u8; self.page_bytes].into_boxed_slice())
    }

    pub(crate) fn is_dirty(&self, id: u64) -> bool {
        self.dirty.contains_key(&id)
    }

    /// Allocates a new dirty page of type `kind` with an empty body.
    pub(crate) fn new_page(&mut self, kind: u8) -> Result<u64> {
        let id = self.alloc(1)?;
        let mut buf = self.buffer();
        init_page(&mut buf, kind);
        self.dirty.insert(id, buf);
        Ok(id)
    }

    /// Allocates an overflow run for a value of `value_bytes`, copies the value in, and returns
    /// its first page.
    pub(crate) fn new_run(&mut self, value: &[u8]) -> Result<u64> {
        let pages = overflow_pages(value.len(), self.page_bytes);
        let id = self.alloc(pages)?;
        let mut buf = vec![0u8; pages as usize * self.page_bytes].into_boxed_slice();
        init_page(&mut buf, super::PAGE_OVERFLOW);
        super::set_page_a(&mut buf, pages as u32);
        super::set_page_b(&mut buf, value.len() as u32);
        buf[PAGE_HEADER_BYTES..PAGE_HEADER_BYTES + value.len()].copy_from_slice(value);
        self.dirty.insert(id, buf);
        Ok(id)
    }

    /// Returns a dirty, writable copy of page `id`: the page itself if this transaction already
    /// copied it, otherwise a copy at a newly allocated id. Returns the id to use from now on.
    pub(crate) fn make_dirty(&mut self, id: u64) -> Result<u64> {
        if self.dirty.contains_key(&id) {
            return Ok(id);
        }
        let mut buf = self.buffer();
        let old = self.base.page(id)?;
        let born = super::page_txn_field(old);
        buf.copy_from_slice(old);
        let new_id = self.alloc(1)?;
        self.freed.push((id, 1, born));
        self.dirty.insert(new_id, buf);
        Ok(new_id)
    }

    /// The writable bytes of dirty page `id`.
    pub(crate) fn page_mut(&mut self, id: u64) -> Result<&mut [u8]> {
        self.dirty
            .get_mut(&id)
            .map(|b| &mut b[..])
            .ok_or_else(|| Error::corrupted(id, "internal: writing a page that is not dirty"))
    }

    /// Frees `pages` pages at `id`: at once if this transaction allocated them, otherwise as
    /// pending once the transaction commits.
    pub(crate) fn free(&mut self, id: u64, pages: u64) -> Result<()> {
        if let Some(buf) = self.dirty.remove(&id) {
            if buf.len() == self.page_bytes && self.pool.len() < POOL_PAGES_MAX {
                self.pool.push(buf);
            }
            self.spare.push((id, pages));
        } else {
            let born = super::page_txn_field(self.base.run(id, pages)?);
            self.freed.push((id, pages, born));
        }
        Ok(())
    }

    /// True if the transaction changed nothing.
    pub(crate) fn is_clean(&self) -> bool {
        self.dirty.is_empty() && self.freed.is_empty() && self.spare.is_empty()
    }

    /// Builds the freelist chain for the new commit and returns the meta that names it.
    /// Requires: every tree change of the transaction is done (`catalog` is final).
    /// After this, the dirty pages are the complete set of pages the commit writes.
    pub(crate) fn prepare_commit(&mut self, catalog: TableHeader) -> Result<Meta> {
        // The old chain is replaced by this commit.
        for (id, _) in self.base.freelist_chain()? {
            let born = super::page_txn_field(self.base.page(id)?);
            self.freed.push((id, 1, born));
        }
        // Pages written after the last durable commit are not part of it: only readers can
        // still need them. Older pages are also needed by a recovery after a power loss.
        let mut after: Vec<u64> = Vec::new();
        let mut durable: Vec<u64> = Vec::new();
        for &(start, len, born) in &self.freed {
            let list = if born > self.last_durable {
                &mut after
            } else {
                &mut durable
            };
            list.extend(start..start + len);
        }
        self.freed.clear();
        let txn = self.txn;
        self.free
            .add_pending(txn, KIND_READERS, to_extents(&mut after));
        self.free
            .add_pending(txn, KIND_DURABLE, to_extents(&mut durable));
        for (start, len) in std::mem::take(&mut self.spare) {
            if !self.free.insert(start, len) {
                return Err(Error::corrupted(start, "internal: spare page already free"));
            }
        }
        loop {
            let trimmed = self.free.trim_tail(self.page_count);
            if trimmed == self.page_count {
                break;
            }
            self.page_count = trimmed;
        }
        // Allocating chain pages from the free set never adds extents (it takes the front of
        // one), so the page count computed first is enough.
        let per_page = extents_per_page(self.page_bytes);
        let needed = self.free.entries().len().div_ceil(per_page);
        let mut chain = Vec::with_capacity(needed);
        for _ in 0..needed {
            chain.push(self.new_page(PAGE_FREELIST)?);
        }
        let entries = self.free.entries();
        for (i, &id) in chain.iter().enumerate() {
            let from = (i * per_page).min(entries.len());
            let to = ((i + 1) * per_page).min(entries.len());
            let next = chain.get(i + 1).copied().unwrap_or(0);
            encode_page(self.page_mut(id)?, next, &entries[from..to]);
        }
        Ok(Meta {
            txn,
            page_bytes: self.page_bytes as u32,
            page_count: self.page_count,
            catalog,
            freelist_head: chain.first().copied().unwrap_or(0),
            freelist_pages: chain.len() as u64,
            last_durable_txn: self.base.meta.last_durable_txn,
            durable: false,
            boot_id: [0; 16],
        })
    }

    /// Seals and writes every dirty page, gathering consecutive pages into larger writes.
    /// Returns the bytes written.
    pub(crate) fn write_out(&mut self, storage: &dyn Storage) -> Result<u64> {
        let mut ids: Vec<u64> = self.dirty.keys().copied().collect();
        ids.sort_unstable();
        let ps = self.page_bytes as u64;
        let mut batch: Vec<u8> = Vec::new();
        let mut batch_start = 0u64;
        let mut written = 0u64;
        for id in ids {
            let buf = self.dirty.get_mut(&id).expect("id taken from the map");
            debug_assert!(page_type(buf) != 0);
            seal_page(buf, id, self.txn);
            let contiguous = !batch.is_empty() && batch_start + batch.len() as u64 == id * ps;
            if !contiguous || batch.len() + buf.len() > WRITE_BATCH_BYTES_MAX {
                if !batch.is_empty() {
                    storage.write_at(&batch, batch_start)?;
                    written += batch.len() as u64;
                    batch.clear();
                }
                batch_start = id * ps;
            }
            if buf.len() > WRITE_BATCH_BYTES_MAX {
                storage.write_at(buf, id * ps)?;
                written += buf.len() as u64;
                batch_start = (id + buf.len() as u64 / ps) * ps;
                continue;
            }
            batch.extend_from_slice(buf);
        }
        if !batch.is_empty() {
            storage.write_at(&batch, batch_start)?;
            written += batch.len() as u64;
        }
        Ok(written)
    }

    /// Seals every dirty page and copies it into `map`, a writable mapping of the file (the
    /// commit path of LMDB's MDB_WRITEMAP, minus writing in place: one copy, no syscall).
    /// Requires: the mapping covers `page_count` pages, all of them allocated.
    pub(crate) fn write_into(&mut self, map: &mut [u8]) -> Result<u64> {
        let ps = self.page_bytes;
        let mut ids: Vec<u64> = self.dirty.keys().copied().collect();
        ids.sort_unstable();
        let mut written = 0u64;
        for id in ids {
            let buf = self.dirty.get_mut(&id).expect("id taken from the map");
            seal_page(buf, id, self.txn);
            let at = id as usize * ps;
            let dst = map.get_mut(at..at + buf.len()).ok_or_else(|| {
                Error::corrupted(id, "internal: page beyond the writable mapping")
            })?;
            dst.copy_from_slice(buf);
            written += buf.len() as u64;
        }
        Ok(written)
    }

    /// After a successful commit: hands back the free set and the buffers.
    pub(crate) fn finish(mut self) -> (FreeSet, Vec<Box<[u8]>>) {
        self.recycle_dirty();
        (self.free, self.pool)
    }
}

impl PageSource for WritePages {
    #[inline]
    fn page(&self, id: u64) -> Result<&[u8]> {
        match self.dirty.get(&id) {
            Some(b) => Ok(b),
            None => self.base.page(id),
        }
    }

    fn run(&self, id: u64, pages: u64) -> Result<&[u8]> {
        match self.dirty.get(&id) {
            Some(b) if b.len() as u64 == pages * self.page_bytes as u64 => Ok(b),
            Some(_) => Err(Error::corrupted(id, "overflow run length mismatch")),
            None => self.base.run(id, pages),
        }
    }

    #[inline]
    fn page_bytes(&self) -> usize {
        self.page_bytes
    }
}
