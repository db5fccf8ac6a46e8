//! The catalog: the tree of table names to table headers whose root the meta page holds.
//! Names are checked here, headers decoded here, a small catalog is decoded once per snapshot
//! (`CatalogCache`), and a write transaction's view of the tables it opened is kept here
//! (`TableStates`).

use crate::btree::{self, AppendHint, Cursor, PutHint};
use crate::error::{Error, Result};
use crate::limits::TABLE_NAME_BYTES_MAX;
use crate::pager::{PageSource, Snapshot, TableHeader};
use std::collections::HashMap;
use std::sync::OnceLock;

/// Checks a table name given by the caller.
pub(crate) fn check_name(name: &str) -> Result<()> {
    if name.is_empty() || name.len() > TABLE_NAME_BYTES_MAX {
        return Err(Error::InvalidTableName(name.to_string()));
    }
    Ok(())
}

/// Decodes a table's header from its catalog value (checked against the catalog's root).
pub(crate) fn decode_header(bytes: &[u8], catalog: &TableHeader) -> Result<TableHeader> {
    TableHeader::decode(bytes, catalog.root.id)
}

/// The header of table `name` and its catalog value (header and properties), if it exists.
pub(crate) fn lookup<'s, S: PageSource + ?Sized>(
    src: &'s S,
    catalog: &TableHeader,
    name: &str,
) -> Result<Option<(TableHeader, &'s [u8])>> {
    match btree::get(src, catalog, name.as_bytes())? {
        Some(bytes) => Ok(Some((decode_header(bytes, catalog)?, bytes))),
        None => Ok(None),
    }
}

/// Names of all tables, sorted.
pub(crate) fn list<S: PageSource + ?Sized>(src: &S, catalog: TableHeader) -> Result<Vec<String>> {
    let mut names = Vec::new();
    let mut c = Cursor::new(src, catalog);
    let mut ok = c.first()?;
    while ok {
        let key = c.key()?;
        let name = std::str::from_utf8(key)
            .map_err(|_| Error::corrupted(catalog.root.id, "table name is not UTF-8"))?;
        // A name no table can have is damage, not a name to hand back to the caller.
        if check_name(name).is_err() {
            return Err(Error::corrupted(
                catalog.root.id,
                format!("table name of {} bytes", name.len()),
            ));
        }
        names.push(name.to_string());
        ok = c.next()?;
    }
    Ok(names)
}

/// A table's name and header, as cached for a snapshot.
pub(crate) type CatalogEntry = (Box<[u8]>, TableHeader);

/// Catalogs up to this many tables are decoded once per snapshot and searched linearly.
const SMALL_CATALOG_TABLES_MAX: u64 = 32;

/// The catalog of one snapshot, decoded once on first use when it is small (a snapshot never
/// changes, so neither does this): opening a table is then a short scan, not a tree lookup.
/// It also numbers the tables for the overlay (`table_id`).
#[derive(Default)]
pub(crate) struct CatalogCache {
    small: OnceLock<Option<Vec<CatalogEntry>>>,
    /// Every table name, sorted, for catalogs too large for `small`.
    names: OnceLock<Vec<Box<[u8]>>>,
}

impl CatalogCache {
    /// The whole catalog of `snap` (whose cache this is), decoded on the first call, if it is
    /// small and sound; `None` sends lookups to the tree (`lookup`).
    #[inline]
    pub(crate) fn entries(&self, snap: &Snapshot) -> Option<&[CatalogEntry]> {
        self.small.get_or_init(|| small_catalog(snap)).as_deref()
    }

    /// The number of table `name` in `snap`'s catalog: its rank among the names. The overlay
    /// keys records by it; it stays the same for every commit built on this snapshot's tree,
    /// since tables are created and deleted only by commits that write pages.
    pub(crate) fn table_id(&self, snap: &Snapshot, name: &[u8]) -> Result<Option<u64>> {
        if let Some(list) = self.entries(snap) {
            return Ok(list
                .iter()
                .position(|(n, _)| **n == *name)
                .map(|i| i as u64));
        }
        let names = match self.names.get() {
            Some(names) => names,
            None => {
                let all = list(snap, snap.meta.catalog)?;
                self.names
                    .get_or_init(|| all.into_iter().map(|n| n.into_bytes().into()).collect())
            }
        };
        Ok(names
            .binary_search_by(|n| (**n).cmp(name))
            .ok()
            .map(|i| i as u64))
    }

    /// The name of the table numbered `id` by `table_id`.
    pub(crate) fn name(&self, snap: &Snapshot, id: u64) -> Result<Option<&[u8]>> {
        if let Some(list) = self.entries(snap) {
            return Ok(list.get(id as usize).map(|(n, _)| &**n));
        }
        self.table_id(snap, b"")?;
        Ok(self
            .names
            .get()
            .and_then(|names| names.get(id as usize))
            .map(|n| &**n))
    }
}

/// The whole catalog of a snapshot, if it is small and sound; `None` sends lookups to the tree
/// (which then reports any damage where it is met).
fn small_catalog(snap: &Snapshot) -> Option<Vec<CatalogEntry>> {
    let catalog = snap.meta.catalog;
    if catalog.entries > SMALL_CATALOG_TABLES_MAX {
        return None;
    }
    let mut out = Vec::with_capacity(catalog.entries as usize);
    let mut c = Cursor::new(snap, catalog);
    let mut more = c.first().ok()?;
    while more {
        let (name, value) = c.entry().ok()?;
        out.push((name.into(), decode_header(value, &catalog).ok()?));
        if out.len() as u64 > SMALL_CATALOG_TABLES_MAX {
            return None;
        }
        more = c.next().ok()?;
    }
    Some(out)
}

/// Per-table state inside a write transaction.
pub(crate) struct TableState {
    pub(crate) hdr: TableHeader,
    pub(crate) dirty: bool,
    /// Where the last append landed, for the next one (see `btree::append`).
    pub(crate) append_hint: Option<AppendHint>,
    /// Where the last upsert landed, for the next one (see `btree::PutHint`).
    pub(crate) put_hint: PutHint,
    /// The table's properties, written after the header in its catalog value.
    pub(crate) props: Vec<u8>,
    /// The table's greatest key, if known (transactions that commit through the log keep it
    /// for `append`; `Some(empty)` for an empty table). Valid across commits like `hdr`.
    pub(crate) last_key: Option<Vec<u8>>,
    /// The transaction (`TableStates::generation`) this state belongs to.
    generation: u64,
    /// The tree (`TableStates::tree_epoch`) `hdr` describes.
    tree_epoch: u64,
}

/// The tables a write transaction has opened, by name. Kept in the writer state from one
/// transaction to the next, so that opening the same table again allocates nothing and, after
/// a commit, reads nothing: with a fresh map per transaction, the name's `String` and the
/// map's growth were a measurable part of a one-put commit, and so was looking the table up in
/// the catalog again. An entry carries the transaction (generation) that last used it; it is
/// valid if that generation is at least `valid_from`.
///
/// Each name keeps its slot while it is in the map (a table opened again after the tree
/// changed is opened in the same slot), so a `WriteTable` names its table by slot: each of its
/// calls reaches the state without hashing the name.
#[derive(Default)]
pub(crate) struct TableStates {
    map: HashMap<String, usize, foldhash::fast::RandomState>,
    /// The states, with their names; a removed table's slot is in `free`, its generation 0
    /// (below every `valid_from`).
    slots: Vec<(String, TableState)>,
    free: Vec<usize>,
    generation: u64,
    /// Entries of earlier generations down to this one describe the current transaction's base
    /// exactly: each transaction since committed, and each commit was the next one's base.
    valid_from: u64,
    /// Set when the transaction of `generation` committed (or changed nothing): the commit
    /// its states describe.
    committed: Option<(u64, u64)>,
    /// Counts the trees the states have been made stale by (`tree_changed`). An entry of an
    /// older tree has a header naming that tree's pages, but its `last_key` still holds.
    tree_epoch: u64,
}

impl TableStates {
    /// Starts a transaction on commit `base_txn`. The entries stay valid if the previous
    /// transaction committed and produced that commit (this handle is the only writer, so it
    /// always did, unless the previous transaction aborted or failed); otherwise all of them
    /// become stale.
    pub(crate) fn begin(&mut self, base_txn: u64) {
        let carried = self.committed.take() == Some((self.generation, base_txn));
        self.generation += 1;
        if !carried {
            self.valid_from = self.generation;
        }
    }

    /// The current transaction ended as commit `txn` (its base, if it changed nothing).
    pub(crate) fn committed(&mut self, txn: u64) {
        self.committed = Some((self.generation, txn));
    }

    pub(crate) fn get(&mut self, name: &str) -> Option<&TableState> {
        self.get_mut(name).map(|s| &*s)
    }

    pub(crate) fn get_mut(&mut self, name: &str) -> Option<&mut TableState> {
        let slot = *self.map.get(name)?;
        self.at_mut(slot).map(|(_, s)| s)
    }

    /// The slot of `name`'s state, if it is valid in this transaction.
    pub(crate) fn slot(&mut self, name: &str) -> Option<usize> {
        let slot = *self.map.get(name)?;
        self.at_mut(slot).map(|_| slot)
    }

    /// The name and state in `slot`, if valid in this transaction.
    pub(crate) fn at_mut(&mut self, slot: usize) -> Option<(&str, &mut TableState)> {
        let (generation, valid_from) = (self.generation, self.valid_from);
        let tree_epoch = self.tree_epoch;
        let (name, s) = self.slots.get_mut(slot)?;
        if s.generation < valid_from || s.tree_epoch != tree_epoch {
            return None;
        }
        if s.generation != generation {
            // Carried over: its header and properties are the base's catalog entry. Nothing
            // is changed yet in this transaction, and the append hint named a page of an
            // earlier one.
            s.generation = generation;
            s.dirty = false;
            s.append_hint = None;
            s.put_hint.reset();
        }
        Some((name.as_str(), s))
    }

    /// The state in `slot`, if this transaction has used it and it describes the present
    /// tree (`at_mut`, or `open`, brought it to this transaction).
    pub(crate) fn at(&self, slot: usize) -> Option<&TableState> {
        let (_, s) = self.slots.get(slot)?;
        (s.generation == self.generation && s.tree_epoch == self.tree_epoch).then_some(s)
    }

    /// The name of the table in `slot`.
    pub(crate) fn name_of(&self, slot: usize) -> Option<&str> {
        self.slots.get(slot).map(|(n, _)| n.as_str())
    }

    /// Records `name` as opened in this transaction with header `hdr` and properties
    /// `props`, unchanged so far. Reuses the entry (and its buffers) left by an earlier
    /// transaction, and its greatest key if that entry still describes this transaction's
    /// table on an older tree (`tree_changed`). Returns its slot: a name keeps its slot
    /// while it is in the map.
    pub(crate) fn open(&mut self, name: &str, hdr: TableHeader, props: &[u8]) -> usize {
        let (generation, valid_from, tree_epoch) =
            (self.generation, self.valid_from, self.tree_epoch);
        let slot = match self.map.get(name) {
            Some(&slot) => {
                let s = &mut self.slots[slot].1;
                if s.generation < valid_from {
                    s.last_key = None;
                }
                slot
            }
            None => {
                let fresh = TableState {
                    hdr,
                    dirty: false,
                    append_hint: None,
                    put_hint: PutHint::default(),
                    props: Vec::new(),
                    last_key: None,
                    generation,
                    tree_epoch,
                };
                let slot = match self.free.pop() {
                    Some(slot) => {
                        self.slots[slot] = (name.to_string(), fresh);
                        slot
                    }
                    None => {
                        self.slots.push((name.to_string(), fresh));
                        self.slots.len() - 1
                    }
                };
                self.map.insert(name.to_string(), slot);
                slot
            }
        };
        let state = &mut self.slots[slot].1;
        state.hdr = hdr;
        state.dirty = false;
        state.append_hint = None;
        state.put_hint.reset();
        state.props.clear();
        state.props.extend_from_slice(props);
        state.generation = generation;
        state.tree_epoch = tree_epoch;
        slot
    }

    pub(crate) fn remove(&mut self, name: &str) {
        if let Some(slot) = self.map.remove(name) {
            let (n, s) = &mut self.slots[slot];
            n.clear();
            s.generation = 0;
            s.last_key = None;
            self.free.push(slot);
        }
    }

    /// The tree changed under the states (a checkpoint was installed, or a transaction
    /// turned to writing pages): their headers name the old tree's pages, so each table is
    /// opened again from the catalog. What they know of the tables' keys (`last_key`) still
    /// holds: a sequential load keeps appending after a checkpoint without looking for its
    /// last key again, which merges the overlay's keys.
    pub(crate) fn tree_changed(&mut self) {
        self.tree_epoch += 1;
    }

    /// Tables this transaction changed, sorted by name.
    pub(crate) fn changed(&self) -> Vec<(&str, &TableState)> {
        let mut out: Vec<(&str, &TableState)> = self.changed_unordered().collect();
        out.sort_unstable_by(|a, b| a.0.cmp(b.0));
        out
    }

    /// Tables this transaction changed, in no particular order (no allocation: a logged
    /// commit's entry counts, once per commit).
    pub(crate) fn changed_unordered(&self) -> impl Iterator<Item = (&str, &TableState)> {
        self.slots
            .iter()
            .filter(|(_, s)| {
                s.generation == self.generation && s.tree_epoch == self.tree_epoch && s.dirty
            })
            .map(|(n, s)| (n.as_str(), s))
    }
}
