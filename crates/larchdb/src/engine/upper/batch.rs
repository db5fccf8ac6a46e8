//! A write transaction's own writes while it commits through the log (stage 2): kept here,
//! private, until the commit appends them to the log and inserts them into the overlay. An
//! aborted transaction never touches either.

use super::overlay::{key_hash, Inserted, Visible};
use crate::bytes::get_u32;
use crate::error::{Error, Result};
use std::cell::{Cell, Ref, RefCell};
use std::ops::Bound;

/// Writes a batch holds before it indexes them: up to here a lookup scans them, newest first
/// (a one-put transaction, most of them, then allocates nothing: a map of boxed keys and
/// values cost four allocations and frees a commit).
const SCAN_MAX: usize = 16;

/// Capacity a cleared batch keeps in each of its buffers.
const KEPT_BYTES_MAX: usize = 1 << 20;

/// `Write::value_len` of a deletion.
const DELETED: u32 = u32::MAX;

/// Bytes of each block of a batch's keys and values (`Data`) past its first: a large
/// transaction holds its records and at most a block more, where one buffer that doubled
/// took up to twice its records (20 MB of 1 KB values in 32 MiB). In a 64 MiB cgroup,
/// transactions of 20,000 such records had the process killed with the buffer, and completed
/// with the blocks (larch-bench's `memory_limit` tests).
const BLOCK_BYTES: usize = 1 << 20;

/// A batch's keys and values, in blocks of `BLOCK_BYTES` (a key or value larger than a block
/// in a block of its own), each written front to back; a position is a block's index in the
/// high 32 bits and an offset in it in the low ones. The first block grows by doubling up to
/// `BLOCK_BYTES`, and is kept from one transaction to the next.
#[derive(Default)]
struct Data {
    blocks: Vec<Vec<u8>>,
    /// The block small keys and values go to (`keep`).
    filling: usize,
}

impl Data {
    /// Appends `bytes`, returning their position.
    fn keep(&mut self, bytes: &[u8]) -> u64 {
        let fits = |b: &Vec<u8>| b.len() + bytes.len() <= b.capacity().max(BLOCK_BYTES);
        let i = if bytes.len() > BLOCK_BYTES {
            self.blocks.push(Vec::with_capacity(bytes.len()));
            self.blocks.len() - 1
        } else {
            if !self.blocks.get(self.filling).is_some_and(fits) {
                // The first block starts empty and grows; the others are made whole.
                let first = self.blocks.is_empty();
                self.blocks
                    .push(Vec::with_capacity(if first { 0 } else { BLOCK_BYTES }));
                self.filling = self.blocks.len() - 1;
            }
            self.filling
        };
        let block = &mut self.blocks[i];
        let at = block.len();
        let need = at + bytes.len();
        if need > block.capacity() {
            // The first block, growing: by doubling, up to a block.
            let to = (block.capacity() * 2).clamp(need, BLOCK_BYTES.max(need));
            block.reserve_exact(to - at);
        }
        block.extend_from_slice(bytes);
        ((i as u64) << 32) | at as u64
    }

    /// The `len` bytes kept at `at`.
    fn get(&self, at: u64, len: usize) -> &[u8] {
        &self.blocks[(at >> 32) as usize][(at & 0xffff_ffff) as usize..][..len]
    }

    /// Forgets every byte; keeps the first block, if it holds at most `KEPT_BYTES_MAX`.
    fn clear(&mut self) {
        self.filling = 0;
        self.blocks.truncate(1);
        if let Some(b) = self.blocks.first_mut() {
            b.clear();
            if b.capacity() > KEPT_BYTES_MAX {
                self.blocks.clear();
            }
        }
    }

    /// Bytes of the blocks' capacity.
    #[cfg(test)]
    fn capacity(&self) -> usize {
        self.blocks.iter().map(|b| b.capacity()).sum()
    }
}

/// What a transaction wrote for one key of one table: the key's and the value's bytes are in
/// the batch's `data`.
pub(crate) struct Write {
    table: u64,
    key_at: u64,
    key_len: u32,
    value_at: u64,
    /// `DELETED` for a deletion.
    value_len: u32,
    /// `Some` if a blind write (`WriteTable::set`) counted the key as new when neither this
    /// transaction nor the overlay had it: then whether the tree has it, once looked up
    /// (`WriteTable::len`).
    blind: Option<Cell<Option<bool>>>,
    /// The hash of table and key (`overlay::key_hash`), for `slots`: set when the write
    /// goes into them.
    hash: u64,
}

/// A transaction's writes, one per table (by number, `CatalogCache::table_id`) and key, in the
/// order of their first write; the bytes of keys and values in blocks (`Data`), the first
/// kept with its capacity from one transaction to the next.
///
/// While every write comes in ascending order of table and key (a sequential load, the
/// common large batch), `writes` is its own index: a lookup is a binary search, and the
/// sorted view is `writes` itself. The first write out of order builds `slots`, a hash index
/// (a boxed key and a tree node a write, as a `BTreeMap` index had, were most of a 1000-put
/// batch's own time); the sorted view is then built when asked for (`ordered`: a range read
/// inside the transaction, a batch that turns to writing pages, a record of several tables),
/// not for every write: a commit through the log reads the writes in their own order.
#[derive(Default)]
pub(crate) struct Batch {
    data: Data,
    writes: Vec<Write>,
    /// The writes whose values the commit wrote into runs (`set_run`), ascending by write:
    /// (index in `writes`, the run's page id); the rest go into the log
    /// (docs/design/large-values.md). Apart from `writes`, which a field of 8 bytes a write
    /// would grow by a sixth for the few commits with large values.
    runs: Vec<(usize, u64)>,
    /// Open addressing over `writes` by `Write::hash`: each slot 0 (empty) or an index in
    /// `writes` plus one, linear probing, at most half full. Kept once there are more than
    /// `SCAN_MAX` writes and they are not all in ascending order (`ascending`); empty
    /// otherwise.
    slots: Vec<u32>,
    hasher: foldhash::fast::RandomState,
    /// The indexes in `writes` in ascending order of table and key, once built (`ordered`);
    /// dropped by a write of a new key.
    order: RefCell<Option<Vec<u32>>>,
    /// `writes` are in strictly ascending order of table and key, and `slots` is unused.
    /// Cleared by the first write out of order; true when empty (`clear`).
    ascending: bool,
    /// Writes that `WriteTable::append` made (each past the table's last key).
    appended: usize,
    /// Bytes of keys and values written, for the log record's size.
    bytes: usize,
}

/// Record operations in a log record's body.
const OP_PUT: u8 = 1;
const OP_DELETE: u8 = 2;
/// From log version 5: a put whose value the commit wrote into a run of the data file; the
/// record carries the value's length and the run's page id instead of the value (its txn
/// is the record's: docs/design/large-values.md).
const OP_PUT_RUN: u8 = 3;

impl Batch {
    /// Forgets every write. The buffers keep their capacity for the next transaction, up to
    /// `KEPT_BYTES_MAX` each: one large transaction does not hold its memory for the handle's
    /// life.
    pub(crate) fn clear(&mut self) {
        self.data.clear();
        self.writes.clear();
        self.runs.clear();
        if self.writes.capacity() * size_of::<Write>() > KEPT_BYTES_MAX {
            self.writes = Vec::new();
        }
        if self.slots.len() * size_of::<u32>() > KEPT_BYTES_MAX {
            self.slots = Vec::new();
        }
        self.slots.clear();
        *self.order.get_mut() = None;
        self.ascending = true;
        self.appended = 0;
        self.bytes = 0;
    }

    fn key(&self, w: &Write) -> &[u8] {
        self.data.get(w.key_at, w.key_len as usize)
    }

    fn value(&self, w: &Write) -> Option<&[u8]> {
        (w.value_len != DELETED).then(|| self.data.get(w.value_at, w.value_len as usize))
    }

    /// Whether the writes are in ascending order of table and key (`ascending`). A batch
    /// made with `Default` has the flag false until its first `clear`; an empty one is in
    /// order whatever the flag says.
    #[inline]
    fn in_order(&self) -> bool {
        self.ascending || self.writes.is_empty()
    }

    /// How `table`, `key` compare with write `w`.
    #[inline]
    fn order(&self, w: &Write, table: u64, key: &[u8]) -> std::cmp::Ordering {
        w.table.cmp(&table).then_with(|| self.key(w).cmp(key))
    }

    /// The index in `writes` of `key` of `table`.
    #[inline]
    fn find(&self, table: u64, key: &[u8]) -> Option<usize> {
        if self.writes.len() <= SCAN_MAX {
            return self
                .writes
                .iter()
                .rposition(|w| w.table == table && self.key(w) == key);
        }
        if self.in_order() {
            // Past the last write (an append): not here, without a search.
            let last = self.writes.last()?;
            if self.order(last, table, key).is_lt() {
                return None;
            }
            return self
                .writes
                .binary_search_by(|w| self.order(w, table, key))
                .ok();
        }
        let slot = self.slot_of(key_hash(&self.hasher, table, key), table, key);
        self.slots[slot].checked_sub(1).map(|i| i as usize)
    }

    /// The slot of `table`, `key` in `slots` (not empty), or the empty slot where it would go.
    #[inline]
    fn slot_of(&self, hash: u64, table: u64, key: &[u8]) -> usize {
        let mask = self.slots.len() - 1;
        let mut at = hash as usize & mask;
        loop {
            let Some(i) = self.slots[at].checked_sub(1) else {
                return at;
            };
            let w = &self.writes[i as usize];
            if w.hash == hash && w.table == table && self.key(w) == key {
                return at;
            }
            at = (at + 1) & mask;
        }
    }

    /// Puts every write into `slots`, sized for twice their number, hashing each.
    fn rebuild_slots(&mut self) {
        for i in 0..self.writes.len() {
            let w = &self.writes[i];
            self.writes[i].hash = key_hash(&self.hasher, w.table, self.key(w));
        }
        let len = (self.writes.len() * 2).next_power_of_two().max(64);
        self.slots.clear();
        self.slots.resize(len, 0);
        let mask = len - 1;
        for (i, w) in self.writes.iter().enumerate() {
            let mut at = w.hash as usize & mask;
            while self.slots[at] != 0 {
                at = (at + 1) & mask;
            }
            self.slots[at] = i as u32 + 1;
        }
    }

    /// The indexes in `writes` in ascending order of table and key, built once after the
    /// last write of a new key.
    fn ordered(&self) -> Ref<'_, [u32]> {
        if self.order.borrow().is_none() {
            let mut at: Vec<u32> = (0..self.writes.len() as u32).collect();
            if !self.in_order() {
                at.sort_unstable_by(|&a, &b| {
                    let (a, b) = (&self.writes[a as usize], &self.writes[b as usize]);
                    a.table
                        .cmp(&b.table)
                        .then_with(|| self.key(a).cmp(self.key(b)))
                });
            }
            *self.order.borrow_mut() = Some(at);
        }
        Ref::map(self.order.borrow(), |o| o.as_deref().unwrap_or_default())
    }

    /// Writes made by `WriteTable::append` (`append`).
    pub(crate) fn appended(&self) -> usize {
        self.appended
    }

    /// The number of keys written.
    pub(crate) fn len(&self) -> usize {
        self.writes.len()
    }

    /// How many of `table`'s keys that blind writes counted as new are in the tree (`in_tree`
    /// looks one up; each key once per transaction).
    pub(crate) fn blind_in_tree(
        &self,
        table: u64,
        mut in_tree: impl FnMut(&[u8]) -> Result<bool>,
    ) -> Result<u64> {
        let mut n = 0;
        for w in self.writes.iter().filter(|w| w.table == table) {
            let Some(found) = &w.blind else {
                continue;
            };
            let f = match found.get() {
                Some(f) => f,
                None => {
                    let f = in_tree(self.key(w))?;
                    found.set(Some(f));
                    f
                }
            };
            n += u64::from(f);
        }
        Ok(n)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.writes.is_empty()
    }

    /// Bytes of keys and values written.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// What this transaction wrote for `key` of table `table`: `Some(None)` a deletion.
    #[inline]
    pub(crate) fn get(&self, table: u64, key: &[u8]) -> Option<Option<&[u8]>> {
        let i = self.find(table, key)?;
        Some(self.value(&self.writes[i]))
    }

    /// Appends `bytes` to `data`, returning where they start.
    fn keep(&mut self, bytes: &[u8]) -> u64 {
        self.data.keep(bytes)
    }

    /// Records a value (or a deletion, `None`) of `key`; `blind` if a blind write counted the
    /// key as new without knowing (a key written before in this transaction keeps what its
    /// first write said).
    pub(crate) fn put(&mut self, table: u64, key: &[u8], value: Option<&[u8]>, blind: bool) {
        self.bytes += key.len() + value.map_or(0, |v| v.len());
        let value_at = self.keep(value.unwrap_or_default());
        let value_len = value.map_or(DELETED, |v| v.len() as u32);
        if let Some(i) = self.find(table, key) {
            let w = &mut self.writes[i];
            w.value_at = value_at;
            w.value_len = value_len;
            if !self.runs.is_empty() {
                self.runs.retain(|&(at, _)| at != i);
            }
            return;
        }
        let in_order = self.in_order() && self.past_last(table, key);
        self.add(table, key, (value_at, value_len), blind, in_order);
    }

    /// Records a value of `key` that `WriteTable::append` wrote, past every key of `table` the
    /// transaction sees. While the writes are ascending and the last is before `key`, no
    /// write has `key` and they stay ascending: one comparison, where `put` makes a lookup and
    /// another (two of a sequential load's few per record). Otherwise `put`: a deletion here
    /// may be of a key past the table's last.
    pub(crate) fn append(&mut self, table: u64, key: &[u8], value: &[u8]) {
        self.appended += 1;
        if !(self.in_order() && self.past_last(table, key)) {
            self.put(table, key, Some(value), false);
            return;
        }
        self.bytes += key.len() + value.len();
        let value_at = self.keep(value);
        self.add(table, key, (value_at, value.len() as u32), false, true);
    }

    /// Whether `table`, `key` sort after the last write (true if there is none).
    #[inline]
    fn past_last(&self, table: u64, key: &[u8]) -> bool {
        self.writes
            .last()
            .is_none_or(|w| self.order(w, table, key).is_lt())
    }

    /// Adds the write of a key not written before, its value at `value` (`Write::value_at`,
    /// `Write::value_len`); `in_order`: the writes stay ascending with it. Indexes it in
    /// `slots` once they are in use.
    fn add(&mut self, table: u64, key: &[u8], value: (u64, u32), blind: bool, in_order: bool) {
        self.ascending = in_order;
        *self.order.get_mut() = None;
        let key_at = self.keep(key);
        self.writes.push(Write {
            table,
            key_at,
            key_len: key.len() as u32,
            value_at: value.0,
            value_len: value.1,
            blind: blind.then(|| Cell::new(None)),
            hash: 0,
        });
        let n = self.writes.len();
        if n <= SCAN_MAX || in_order {
            return;
        }
        if self.slots.is_empty() || n * 2 > self.slots.len() {
            // The first write past the scanned ones or out of order, or a full table: every
            // write goes into the index.
            self.rebuild_slots();
        } else {
            let hash = key_hash(&self.hasher, table, key);
            self.writes[n - 1].hash = hash;
            let slot = self.slot_of(hash, table, key);
            self.slots[slot] = n as u32;
        }
    }

    /// This transaction's writes to `table` with keys within the bounds, ascending.
    pub(crate) fn range(
        &self,
        table: u64,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
    ) -> Vec<Visible<'_>> {
        // In ascending order (the writes, or the sorted view), the range is a slice.
        let below = |w: &Write, bound: Bound<&[u8]>, is_start: bool| {
            if w.table != table {
                return w.table < table;
            }
            match (bound, is_start) {
                (Bound::Unbounded, s) => !s,
                (Bound::Included(b), true) | (Bound::Excluded(b), false) => self.key(w) < b,
                (Bound::Excluded(b), true) | (Bound::Included(b), false) => self.key(w) <= b,
            }
        };
        if self.in_order() {
            let lo = self.writes.partition_point(|w| below(w, start, true));
            let hi = self.writes.partition_point(|w| below(w, end, false));
            return self.writes[lo..hi.max(lo)]
                .iter()
                .map(|w| (self.key(w), self.value(w)))
                .collect();
        }
        let order = self.ordered();
        let lo = order.partition_point(|&i| below(&self.writes[i as usize], start, true));
        let hi = order.partition_point(|&i| below(&self.writes[i as usize], end, false));
        order[lo..hi.max(lo)]
            .iter()
            .map(|&i| {
                let w = &self.writes[i as usize];
                (self.key(w), self.value(w))
            })
            .collect()
    }

    /// Every write in the order of the keys' first writes: table, key, value (`None`: a
    /// deletion), whether a blind write counted the key as new, and the page id of the run
    /// the commit wrote the value into (0: none).
    pub(crate) fn iter(&self) -> impl Iterator<Item = Inserted<'_>> {
        self.writes.iter().enumerate().map(|(i, w)| {
            (
                w.table,
                self.key(w),
                self.value(w),
                w.blind.is_some(),
                self.run_of(i),
            )
        })
    }

    /// The puts whose values the commit may write into runs of their own (`Batch::set_run`):
    /// (write, key, value) for each value of more than `min` bytes.
    pub(crate) fn large_values(&self, min: usize) -> impl Iterator<Item = (usize, &[u8], &[u8])> {
        self.writes.iter().enumerate().filter_map(move |(i, w)| {
            let v = self.value(w)?;
            (v.len() > min).then(|| (i, self.key(w), v))
        })
    }

    /// Write `i`'s value (`None`: a deletion, or no such write).
    pub(crate) fn value_of(&self, i: usize) -> Option<&[u8]> {
        self.value(self.writes.get(i)?)
    }

    /// Notes that write `i`'s value is in the run at page `run`. Called in ascending order of
    /// `i` (`runs::write_runs`).
    pub(crate) fn set_run(&mut self, i: usize, run: u64) {
        match self.runs.last() {
            Some(&(last, _)) if last >= i => {
                let at = self.runs.partition_point(|&(j, _)| j < i);
                match self.runs.get(at) {
                    Some(&(j, _)) if j == i => self.runs[at].1 = run,
                    _ => self.runs.insert(at, (i, run)),
                }
            }
            _ => self.runs.push((i, run)),
        }
    }

    /// The page id of the run write `i`'s value is in, or 0: none.
    fn run_of(&self, i: usize) -> u64 {
        if self.runs.is_empty() {
            return 0;
        }
        match self.runs.binary_search_by_key(&i, |&(j, _)| j) {
            Ok(at) => self.runs[at].1,
            Err(_) => 0,
        }
    }

    /// Forgets the runs of the writes' values: they go into the log or the pages after all.
    pub(crate) fn clear_runs(&mut self) {
        self.runs.clear();
    }

    /// The tables written, ascending, each with its writes ascending by key: while the writes
    /// are in order, each table's are a run of them, read in place (a sequential batch that
    /// writes its pages copies nothing more).
    pub(crate) fn by_table(&self) -> Vec<(u64, TableWrites<'_>)> {
        let mut tables: Vec<(u64, TableWrites<'_>)> = Vec::new();
        if self.in_order() {
            let mut start = 0;
            for (i, w) in self.writes.iter().enumerate() {
                if i + 1 == self.writes.len() || self.writes[i + 1].table != w.table {
                    let rows = Rows::Run(start, i + 1);
                    tables.push((w.table, TableWrites { batch: self, rows }));
                    start = i + 1;
                }
            }
            return tables;
        }
        let order = self.ordered();
        for &i in order.iter() {
            let table = self.writes[i as usize].table;
            match tables.last_mut() {
                Some((
                    t,
                    TableWrites {
                        rows: Rows::Picked(at),
                        ..
                    },
                )) if *t == table => at.push(i),
                _ => {
                    let rows = Rows::Picked(vec![i]);
                    tables.push((table, TableWrites { batch: self, rows }));
                }
            }
        }
        tables
    }

    /// The body of this batch's log record, naming each table by `name(number)`:
    ///
    /// ```text
    /// tables u32, then per table: name bytes u16, name, records u32, then per record:
    ///   op u8 (1 put, 2 delete), key bytes u32, [value bytes u32, if a put], key, [value]
    /// ```
    ///
    /// A table's records are in no particular order; each key appears once.
    pub(crate) fn encode<'n>(
        &self,
        mut name: impl FnMut(u64) -> Result<&'n [u8]>,
        out: &mut Vec<u8>,
    ) -> Result<()> {
        out.clear();
        out.reserve(self.bytes + 16 * self.writes.len() + 16);
        let first = self.writes.first().map(|w| w.table);
        if self.writes.iter().any(|w| Some(w.table) != first) {
            // Several tables: grouped through the sorted view.
            let grouped = self.by_table();
            out.extend_from_slice(&(grouped.len() as u32).to_le_bytes());
            for (table, writes) in &grouped {
                encode_table(name(*table)?, writes.iter_runs(), out);
            }
            return Ok(());
        }
        out.extend_from_slice(&u32::from(first.is_some()).to_le_bytes());
        if let Some(table) = first {
            let writes = self
                .writes
                .iter()
                .enumerate()
                .map(|(i, w)| (self.key(w), self.value(w), self.run_of(i)));
            encode_table(name(table)?, writes, out);
        }
        Ok(())
    }
}

/// One table's writes in a batch, ascending by key (`Batch::by_table`).
pub(crate) struct TableWrites<'b> {
    batch: &'b Batch,
    rows: Rows,
}

/// Where a table's writes are in `Batch::writes`.
enum Rows {
    /// `writes[start..end]`, while the writes are in order.
    Run(usize, usize),
    /// These indexes, in key order.
    Picked(Vec<u32>),
}

impl<'b> TableWrites<'b> {
    pub(crate) fn len(&self) -> usize {
        match &self.rows {
            Rows::Run(start, end) => end - start,
            Rows::Picked(at) => at.len(),
        }
    }

    /// The `i`th write, `i` below `len`.
    #[inline]
    pub(crate) fn get(&self, i: usize) -> Visible<'b> {
        let at = match &self.rows {
            Rows::Run(start, _) => start + i,
            Rows::Picked(at) => at[i] as usize,
        };
        let w = &self.batch.writes[at];
        (self.batch.key(w), self.batch.value(w))
    }

    #[cfg(test)]
    pub(crate) fn iter(&self) -> impl ExactSizeIterator<Item = Visible<'b>> + '_ {
        (0..self.len()).map(|i| self.get(i))
    }

    /// Each write's key, value and run (`Batch::runs`), in key order.
    fn iter_runs(&self) -> impl ExactSizeIterator<Item = (&'b [u8], Option<&'b [u8]>, u64)> + '_ {
        (0..self.len()).map(|i| {
            let at = match &self.rows {
                Rows::Run(start, _) => start + i,
                Rows::Picked(at) => at[i] as usize,
            };
            let w = &self.batch.writes[at];
            (
                self.batch.key(w),
                self.batch.value(w),
                self.batch.run_of(at),
            )
        })
    }
}

/// One table's part of a log record's body (see `Batch::encode`).
fn encode_table<'a>(
    name: &[u8],
    writes: impl ExactSizeIterator<Item = (&'a [u8], Option<&'a [u8]>, u64)>,
    out: &mut Vec<u8>,
) {
    out.extend_from_slice(&(name.len() as u16).to_le_bytes());
    out.extend_from_slice(name);
    out.extend_from_slice(&(writes.len() as u32).to_le_bytes());
    for (k, v, run) in writes {
        out.push(match (v, run) {
            (None, _) => OP_DELETE,
            (Some(_), 0) => OP_PUT,
            (Some(_), _) => OP_PUT_RUN,
        });
        out.extend_from_slice(&(k.len() as u32).to_le_bytes());
        if let Some(v) = v {
            out.extend_from_slice(&(v.len() as u32).to_le_bytes());
        }
        out.extend_from_slice(k);
        match (v, run) {
            (Some(v), 0) => out.extend_from_slice(v),
            (Some(_), run) => out.extend_from_slice(&run.to_le_bytes()),
            (None, _) => {}
        }
    }
}

/// One table's records in a log record's body, decoded.
pub(crate) struct DecodedTable<'b> {
    pub(crate) name: &'b [u8],
    /// Each record's key and value (`None`: a deletion); a value in a run (`runs`) is empty
    /// here.
    pub(crate) records: Vec<Visible<'b>>,
    /// The records whose values are in runs: (index in `records`, value length, page id).
    pub(crate) runs: Vec<(usize, u32, u64)>,
}

/// Decodes a log record's body (see `Batch::encode`); damage is `Error::CorruptedLog` at
/// `position`, the record's.
pub(crate) fn decode(body: &[u8], position: u64) -> Result<Vec<DecodedTable<'_>>> {
    let bad = |what: &str| Error::CorruptedLog {
        position,
        reason: format!("commit record: {what}"),
    };
    let mut at = 0usize;
    let mut take = |n: usize| -> Result<&[u8]> {
        let end = at.checked_add(n).filter(|&e| e <= body.len());
        let end = end.ok_or_else(|| bad("truncated"))?;
        let s = &body[at..end];
        at = end;
        Ok(s)
    };
    let tables = get_u32(take(4)?, 0);
    let mut out = Vec::new();
    for _ in 0..tables {
        let name_len = u16::from_le_bytes(take(2)?.try_into().map_err(|_| bad("name"))?);
        let name = take(name_len as usize)?;
        let n = get_u32(take(4)?, 0) as usize;
        let mut records = Vec::with_capacity(n.min(body.len() / 5));
        let mut runs = Vec::new();
        for _ in 0..n {
            let op = take(1)?[0];
            let key_len = get_u32(take(4)?, 0) as usize;
            let value_len = match op {
                OP_PUT | OP_PUT_RUN => Some(get_u32(take(4)?, 0) as usize),
                OP_DELETE => None,
                _ => return Err(bad("unknown operation")),
            };
            let key = take(key_len)?;
            let value = match (op, value_len) {
                (OP_PUT_RUN, Some(len)) => {
                    let id = u64::from_le_bytes(take(8)?.try_into().map_err(|_| bad("run"))?);
                    if id == 0 || len > u32::MAX as usize {
                        return Err(bad("a run with no page"));
                    }
                    runs.push((records.len(), len as u32, id));
                    Some(&[][..])
                }
                (_, Some(len)) => Some(take(len)?),
                (_, None) => None,
            };
            records.push((key, value));
        }
        out.push(DecodedTable {
            name,
            records,
            runs,
        });
    }
    if at != body.len() {
        return Err(bad("trailing bytes"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn a_batch_round_trips_through_its_record_body() {
        let mut b = Batch::default();
        b.put(0, b"k1", Some(b"v1"), true);
        b.put(0, b"k0", Some(b""), false);
        b.put(2, b"gone", None, false);
        b.put(0, b"k1", Some(b"v2"), false);
        let names = [&b"alpha"[..], b"beta", b"gamma"];
        let mut body = Vec::new();
        b.encode(|t| Ok(names[t as usize]), &mut body).unwrap();
        let d = decode(&body, 64).unwrap();
        assert_eq!(d.len(), 2);
        assert_eq!(d[0].name, b"alpha");
        assert_eq!(
            d[0].records,
            vec![(&b"k0"[..], Some(&b""[..])), (b"k1", Some(b"v2"))]
        );
        assert_eq!(d[1].name, b"gamma");
        assert_eq!(d[1].records, vec![(&b"gone"[..], None)]);
        // Every truncation and a trailing byte are damage, never a shorter batch.
        for cut in 0..body.len() {
            assert!(decode(&body[..cut], 64).is_err(), "cut at {cut}");
        }
        let mut long = body.clone();
        long.extend_from_slice(&0u32.to_le_bytes());
        assert!(matches!(
            decode(&long, 64),
            Err(Error::CorruptedLog { position: 64, .. })
        ));
    }

    /// Puts and deletions of keys in three tables, against a model, as the batch grows from
    /// scanned to indexed: every lookup, range, the sorted view, the record iteration and the
    /// log record's body agree with the model after each write.
    #[test]
    fn a_batch_matches_a_model_scanned_and_indexed() {
        use rand::{Rng, SeedableRng};
        type Model = BTreeMap<(u64, Vec<u8>), (Option<Vec<u8>>, bool)>;
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        for round in 0..20 {
            let mut b = Batch::default();
            b.clear();
            let mut model: Model = BTreeMap::new();
            // The keys in the order of their first writes.
            let mut firsts: Vec<(u64, Vec<u8>)> = Vec::new();
            let tables = if round % 2 == 0 { 1 } else { 3 };
            // Rounds 10 on write in ascending order (a sequential load), the last five of
            // them with one write out of order somewhere: the batch is its own index until it.
            // Odd rounds long enough for the hash index to grow twice.
            let steps = if round % 2 == 0 {
                SCAN_MAX * 3
            } else {
                SCAN_MAX * 12
            };
            let ascending = round >= 10;
            let out_of_order = if round >= 15 {
                rng.gen_range(1..steps)
            } else {
                usize::MAX
            };
            let mut appended = 0;
            for step in 0..steps {
                let value = rng.gen_bool(0.8).then(|| format!("v{step}").into_bytes());
                // Appends (`WriteTable::append`): in ascending rounds any write of a value; in
                // the others a key past the table's live ones, which may be one deleted here.
                let append = value.is_some()
                    && step != out_of_order
                    && rng.gen_bool(if ascending { 0.5 } else { 0.2 });
                let (table, k) = if step == out_of_order {
                    (0, 0)
                } else if ascending {
                    ((step * tables as usize / steps) as u64, step + 1)
                } else if append {
                    let t = rng.gen_range(0..tables);
                    let live = model
                        .range((t, Vec::new())..(t + 1, Vec::new()))
                        .filter(|(_, (v, _))| v.is_some())
                        .map(|((_, k), _)| std::str::from_utf8(&k[1..]).unwrap().parse().unwrap())
                        .max();
                    (t, live.map_or(0, |l: usize| l + 1) + rng.gen_range(0..3))
                } else {
                    (rng.gen_range(0..tables), rng.gen_range(0..steps * 5 / 6))
                };
                let key = format!("k{k:03}").into_bytes();
                let blind = !append && rng.gen_bool(0.5);
                if append {
                    b.append(table, &key, value.as_deref().unwrap());
                    appended += 1;
                } else {
                    b.put(table, &key, value.as_deref(), blind);
                }
                assert_eq!(b.appended(), appended, "round {round} step {step}");
                if !model.contains_key(&(table, key.clone())) {
                    firsts.push((table, key.clone()));
                }
                model
                    .entry((table, key))
                    .and_modify(|e| e.0 = value.clone())
                    .or_insert((value, blind));
                let sorted = firsts.windows(2).all(|w| w[0] < w[1]);
                assert_eq!(b.in_order(), sorted, "round {round} step {step}");
                if ascending {
                    assert_eq!(sorted, step < out_of_order, "round {round} step {step}");
                }
                for t in 0..3 {
                    for k in 0..=steps {
                        let key = format!("k{k:03}").into_bytes();
                        let want = model.get(&(t, key.clone())).map(|e| e.0.as_deref());
                        assert_eq!(b.get(t, &key), want, "round {round} step {step}");
                    }
                    let mine: Vec<_> = model
                        .range((t, b"k010".to_vec())..(t, b"k030".to_vec()))
                        .map(|((_, k), (v, _))| (&k[..], v.as_deref()))
                        .collect();
                    let range = b.range(
                        t,
                        Bound::Included(&b"k010"[..]),
                        Bound::Excluded(&b"k030"[..]),
                    );
                    assert_eq!(range, mine, "round {round} step {step} table {t}");
                    // The other bounds, on the sorted slice and through the index.
                    let mine: Vec<_> = model
                        .range((Bound::Excluded((t, b"k010".to_vec())), Bound::Unbounded))
                        .take_while(|((mt, _), _)| *mt == t)
                        .map(|((_, k), (v, _))| (&k[..], v.as_deref()))
                        .collect();
                    let range = b.range(t, Bound::Excluded(&b"k010"[..]), Bound::Unbounded);
                    assert_eq!(range, mine, "round {round} step {step} table {t}");
                    let mine: Vec<_> = model
                        .range((t, Vec::new())..=(t, b"k020".to_vec()))
                        .map(|((_, k), (v, _))| (&k[..], v.as_deref()))
                        .collect();
                    let range = b.range(t, Bound::Unbounded, Bound::Included(&b"k020"[..]));
                    assert_eq!(range, mine, "round {round} step {step} table {t}");
                }
                let by_table: Vec<(u64, Vec<Visible<'_>>)> = b
                    .by_table()
                    .iter()
                    .map(|(t, w)| (*t, w.iter().collect()))
                    .collect();
                let mut want: Vec<(u64, Vec<Visible<'_>>)> = Vec::new();
                for ((t, k), (v, _)) in &model {
                    match want.last_mut() {
                        Some((wt, w)) if wt == t => w.push((k, v.as_deref())),
                        _ => want.push((*t, vec![(&k[..], v.as_deref())])),
                    }
                }
                assert_eq!(by_table, want);
                let mut iter: Vec<_> = b.iter().collect();
                iter.sort();
                let want: Vec<_> = model
                    .iter()
                    .map(|((t, k), (v, blind))| (*t, &k[..], v.as_deref(), *blind, 0))
                    .collect();
                assert_eq!(iter, want);
                let names = [&b"a"[..], b"b", b"c"];
                let mut body = Vec::new();
                b.encode(|t| Ok(names[t as usize]), &mut body).unwrap();
                let mut decoded: Vec<_> = decode(&body, 0)
                    .unwrap()
                    .into_iter()
                    .flat_map(|d| {
                        let t = names.iter().position(|n| *n == d.name).unwrap() as u64;
                        d.records.into_iter().map(move |(k, v)| (t, k, v))
                    })
                    .collect();
                decoded.sort();
                let want: Vec<_> = model
                    .iter()
                    .map(|((t, k), (v, _))| (*t, &k[..], v.as_deref()))
                    .collect();
                assert_eq!(decoded, want);
            }
            b.clear();
            assert!(b.is_empty() && b.get(0, b"k01").is_none() && b.bytes() == 0);
        }
    }

    /// A large batch holds its keys and values and at most a block more (a buffer that
    /// doubled held up to twice them), and reads back every one, a record larger than a block
    /// included.
    #[test]
    fn a_large_batch_holds_its_bytes_and_a_block_more() {
        let mut b = Batch::default();
        let value = |i: u32| vec![(i % 251) as u8; 1000 + (i % 7) as usize];
        let mut bytes = 0;
        for i in 0..20_000u32 {
            let (k, v) = (i.wrapping_mul(2_654_435_761).to_be_bytes(), value(i));
            bytes += k.len() + v.len();
            b.put(0, &k, Some(&v), false);
        }
        let huge = vec![9u8; 3 * BLOCK_BYTES + 5];
        b.put(1, b"huge", Some(&huge), false);
        bytes += 4 + huge.len();
        assert_eq!(b.bytes(), bytes);
        assert!(
            b.data.capacity() <= bytes + BLOCK_BYTES,
            "{} bytes held for {bytes}",
            b.data.capacity()
        );
        for i in 0..20_000u32 {
            let k = i.wrapping_mul(2_654_435_761).to_be_bytes();
            assert_eq!(b.get(0, &k), Some(Some(&value(i)[..])));
        }
        assert_eq!(b.get(1, b"huge"), Some(Some(&huge[..])));
        b.clear();
        assert!(b.data.capacity() <= KEPT_BYTES_MAX);
        assert!(b.get(1, b"huge").is_none());
    }

    /// A batch cleared after a large transaction gives its memory back; after a small one it
    /// keeps its buffers.
    #[test]
    fn a_cleared_batch_keeps_only_small_buffers() {
        let mut b = Batch::default();
        b.put(0, b"k", Some(&[7u8; 100]), false);
        b.clear();
        let kept = b.data.capacity();
        assert!(kept >= 100);
        let big = vec![1u8; KEPT_BYTES_MAX];
        for k in 0..3u32 {
            b.put(0, &k.to_be_bytes(), Some(&big), false);
        }
        assert!(b.data.capacity() > KEPT_BYTES_MAX);
        b.clear();
        assert!(b.data.capacity() <= KEPT_BYTES_MAX);
        for k in 0..100_000u32 {
            b.put(1, &k.to_be_bytes(), None, false);
        }
        b.clear();
        assert!(b.writes.capacity() * size_of::<Write>() <= KEPT_BYTES_MAX);
        assert!(b.is_empty() && b.get(1, &5u32.to_be_bytes()).is_none());
    }
}
