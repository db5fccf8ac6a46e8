//! A write transaction's own writes while it commits through the log (stage 2): kept here,
//! private, until the commit appends them to the log and inserts them into the overlay. An
//! aborted transaction never touches either.

use super::overlay::Visible;
use crate::bytes::get_u32;
use crate::error::{Error, Result};
use std::cell::Cell;
use std::collections::BTreeMap;
use std::ops::Bound;

/// One table's writes: key -> what was written.
pub(crate) type TableWrites = BTreeMap<Box<[u8]>, Write>;

/// What a transaction wrote for a key.
pub(crate) struct Write {
    /// The value, or `None` for a deletion.
    pub(crate) value: Option<Box<[u8]>>,
    /// `Some` if a blind write (`WriteTable::set`) counted the key as new when neither this
    /// transaction nor the overlay had it: then whether the tree has it, once looked up
    /// (`WriteTable::len`).
    pub(crate) blind: Option<Cell<Option<bool>>>,
}

/// A transaction's writes, by table number (`CatalogCache::table_id`).
#[derive(Default)]
pub(crate) struct Batch {
    tables: BTreeMap<u64, TableWrites>,
    /// Bytes of keys and values held, for the log record's size.
    bytes: usize,
}

/// Record operations in a log record's body.
const OP_PUT: u8 = 1;
const OP_DELETE: u8 = 2;

impl Batch {
    /// Forgets every write (keeping nothing: the maps are rebuilt per transaction).
    pub(crate) fn clear(&mut self) {
        self.tables.clear();
        self.bytes = 0;
    }

    /// How many of `table`'s keys that blind writes counted as new are in the tree (`in_tree`
    /// looks one up; each key once per transaction).
    pub(crate) fn blind_in_tree(
        &self,
        table: u64,
        mut in_tree: impl FnMut(&[u8]) -> Result<bool>,
    ) -> Result<u64> {
        let mut n = 0;
        let Some(writes) = self.tables.get(&table) else {
            return Ok(0);
        };
        for (key, w) in writes {
            let Some(found) = &w.blind else {
                continue;
            };
            let f = match found.get() {
                Some(f) => f,
                None => {
                    let f = in_tree(key)?;
                    found.set(Some(f));
                    f
                }
            };
            n += u64::from(f);
        }
        Ok(n)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.tables.is_empty()
    }

    /// Bytes of keys and values held.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// What this transaction wrote for `key` of table `table`: `Some(None)` a deletion.
    #[inline]
    pub(crate) fn get(&self, table: u64, key: &[u8]) -> Option<Option<&[u8]>> {
        self.tables
            .get(&table)?
            .get(key)
            .map(|w| w.value.as_deref())
    }

    /// Records a value (or a deletion, `None`) of `key`; `blind` if a blind write counted the
    /// key as new without knowing (a key written before in this transaction keeps what its
    /// first write said).
    pub(crate) fn put(&mut self, table: u64, key: &[u8], value: Option<&[u8]>, blind: bool) {
        let writes = self.tables.entry(table).or_default();
        self.bytes += key.len() + value.map_or(0, |v| v.len());
        match writes.get_mut(key) {
            Some(w) => w.value = value.map(Box::from),
            None => {
                let w = Write {
                    value: value.map(Box::from),
                    blind: blind.then(|| Cell::new(None)),
                };
                writes.insert(key.into(), w);
            }
        }
    }

    /// This transaction's writes to `table` with keys within the bounds, ascending.
    pub(crate) fn range<'b>(
        &'b self,
        table: u64,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
    ) -> impl Iterator<Item = Visible<'b>> + 'b {
        let writes = self.tables.get(&table);
        let iter = writes.map(|w| w.range::<[u8], _>((start, end)));
        iter.into_iter()
            .flatten()
            .map(|(k, w)| (&**k, w.value.as_deref()))
    }

    /// Tables written, with their writes, by number.
    pub(crate) fn tables(&self) -> impl Iterator<Item = (u64, &TableWrites)> {
        self.tables.iter().map(|(t, w)| (*t, w))
    }

    /// The body of this batch's log record, naming each table by `name(number)`:
    ///
    /// ```text
    /// tables u32, then per table: name bytes u16, name, records u32, then per record:
    ///   op u8 (1 put, 2 delete), key bytes u32, [value bytes u32, if a put], key, [value]
    /// ```
    pub(crate) fn encode<'n>(
        &self,
        mut name: impl FnMut(u64) -> Result<&'n [u8]>,
        out: &mut Vec<u8>,
    ) -> Result<()> {
        out.clear();
        out.reserve(self.bytes + 16 * self.tables.len() + 16);
        out.extend_from_slice(&(self.tables.len() as u32).to_le_bytes());
        for (table, writes) in &self.tables {
            let name = name(*table)?;
            out.extend_from_slice(&(name.len() as u16).to_le_bytes());
            out.extend_from_slice(name);
            out.extend_from_slice(&(writes.len() as u32).to_le_bytes());
            for (k, w) in writes {
                let v = &w.value;
                out.push(if v.is_some() { OP_PUT } else { OP_DELETE });
                out.extend_from_slice(&(k.len() as u32).to_le_bytes());
                if let Some(v) = v {
                    out.extend_from_slice(&(v.len() as u32).to_le_bytes());
                }
                out.extend_from_slice(k);
                if let Some(v) = v {
                    out.extend_from_slice(v);
                }
            }
        }
        Ok(())
    }
}

/// One table's records in a log record's body, decoded.
pub(crate) struct DecodedTable<'b> {
    pub(crate) name: &'b [u8],
    pub(crate) records: Vec<Visible<'b>>,
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
        for _ in 0..n {
            let op = take(1)?[0];
            let key_len = get_u32(take(4)?, 0) as usize;
            let value_len = match op {
                OP_PUT => Some(get_u32(take(4)?, 0) as usize),
                OP_DELETE => None,
                _ => return Err(bad("unknown operation")),
            };
            let key = take(key_len)?;
            let value = match value_len {
                Some(len) => Some(take(len)?),
                None => None,
            };
            records.push((key, value));
        }
        out.push(DecodedTable { name, records });
    }
    if at != body.len() {
        return Err(bad("trailing bytes"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
