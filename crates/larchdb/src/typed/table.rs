//! Table definitions and the typed views over [`ReadTable`] and [`WriteTable`].

use super::codec::{Key, Value};
use crate::error::{Error, Result};
use crate::table::{Entry, Range, ReadTable, WriteTable};
use std::borrow::Borrow;
use std::marker::PhantomData;
use std::ops::{Bound, RangeBounds};

/// The key and value types a table view carries (it holds neither).
type Types<K, V> = PhantomData<(fn() -> K, fn() -> V)>;

/// A range's bounds, encoded.
type EncodedBounds = (Bound<Vec<u8>>, Bound<Vec<u8>>);

/// A table's name and the types of its keys and values, usually a constant:
/// `const USERS: TableDefinition<u64, &str> = TableDefinition::new("users");`. Opened with
/// [`crate::ReadTxn::open_table`] and [`crate::WriteTxn::open_table`].
pub struct TableDefinition<'n, K: Key + 'static, V: Value + 'static> {
    name: &'n str,
    types: Types<K, V>,
}

impl<'n, K: Key + 'static, V: Value + 'static> TableDefinition<'n, K, V> {
    /// A definition of the table called `name` (a table name as
    /// [`crate::WriteTxn::create_table`] takes it).
    ///
    /// ```
    /// use larchdb::TableDefinition;
    /// // A constant: the definition is a name and two types, nothing opened yet.
    /// const SCORES: TableDefinition<&str, u32> = TableDefinition::new("scores");
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// let mut w = db.begin_write()?;
    /// w.open_table(SCORES)?.put("alice", 10)?;
    /// w.commit()?;
    /// assert_eq!(db.begin_read()?.open_table(SCORES)?.get("alice")?, Some(10));
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub const fn new(name: &'n str) -> Self {
        TableDefinition {
            name,
            types: PhantomData,
        }
    }

    /// The table's name.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// const USERS: larchdb::TableDefinition<u64, &str> = larchdb::TableDefinition::new("users");
    /// assert_eq!(USERS.name(), "users");
    /// let mut w = db.begin_write()?;
    /// w.open_table(USERS)?;
    /// assert_eq!(w.list_tables()?, [USERS.name()]);
    /// # Ok::<(), larchdb::Error>(())
    /// ```
    pub fn name(&self) -> &'n str {
        self.name
    }
}

impl<K: Key + 'static, V: Value + 'static> Clone for TableDefinition<'_, K, V> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<K: Key + 'static, V: Value + 'static> Copy for TableDefinition<'_, K, V> {}

impl<K: Key + 'static, V: Value + 'static> std::fmt::Debug for TableDefinition<'_, K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "TableDefinition({:?}: {} -> {})",
            self.name,
            K::type_name(),
            V::type_name()
        )
    }
}

/// The first line of the properties in which a typed table's encodings are recorded.
const TYPES_TAG: &str = "larch-types/1";

/// The properties that record `K` and `V` for a table created typed.
pub(crate) fn type_record<K: Key, V: Value>() -> Vec<u8> {
    format!(
        "{TYPES_TAG}\nkey={}\nvalue={}\n",
        K::type_name(),
        V::type_name()
    )
    .into_bytes()
}

/// Checks the types recorded in table `name`'s properties, if any, against `K` and `V`.
pub(crate) fn check_types<K: Key, V: Value>(name: &str, props: &[u8]) -> Result<()> {
    let Some(rest) = props.strip_prefix(format!("{TYPES_TAG}\n").as_bytes()) else {
        return Ok(());
    };
    let recorded = String::from_utf8_lossy(rest);
    let mut key = None;
    let mut value = None;
    for line in recorded.lines() {
        if let Some(k) = line.strip_prefix("key=") {
            key = Some(k);
        } else if let Some(v) = line.strip_prefix("value=") {
            value = Some(v);
        }
    }
    let (want_key, want_value) = (K::type_name(), V::type_name());
    if key == Some(want_key.as_str()) && value == Some(want_value.as_str()) {
        return Ok(());
    }
    Err(Error::TableTypeMismatch {
        table: name.to_string(),
        stored: format!("{} -> {}", key.unwrap_or("?"), value.unwrap_or("?")),
        requested: format!("{want_key} -> {want_value}"),
    })
}

/// An entry decoded as `K` and `V`.
type TypedEntry<'a, K, V> = (<K as Value>::SelfType<'a>, <V as Value>::SelfType<'a>);

fn decode<'a, K: Key + 'static, V: Value + 'static>(
    (k, v): (&'a [u8], &'a [u8]),
) -> Result<TypedEntry<'a, K, V>> {
    Ok((K::from_bytes(k)?, V::from_bytes(v)?))
}

/// The bounds of a typed range: any of std's ranges (`a..b`, `a..=b`, `a..`, `..b`, `..=b`,
/// `..`) or a pair of [`Bound`]s, over the key type or anything that borrows as it. A trait
/// of its own rather than `RangeBounds` so that `..` needs no type annotation.
pub trait KeyRange<'k, K: Key + 'static> {
    /// The bounds as the keys' bytes.
    #[doc(hidden)]
    fn encode(&self) -> Result<EncodedBounds>;
}

fn encode_bound<'k, K: Key + 'static, KR: Borrow<K::SelfType<'k>>>(
    b: Bound<&KR>,
) -> Result<Bound<Vec<u8>>> {
    Ok(match b {
        Bound::Included(k) => Bound::Included(K::as_bytes(k.borrow())?.as_ref().to_vec()),
        Bound::Excluded(k) => Bound::Excluded(K::as_bytes(k.borrow())?.as_ref().to_vec()),
        Bound::Unbounded => Bound::Unbounded,
    })
}

macro_rules! key_range {
    ($($range:ty),*) => {$(
        impl<'k, K: Key + 'static, KR: Borrow<K::SelfType<'k>>> KeyRange<'k, K> for $range {
            fn encode(&self) -> Result<EncodedBounds> {
                Ok((
                    encode_bound::<K, KR>(self.start_bound())?,
                    encode_bound::<K, KR>(self.end_bound())?,
                ))
            }
        }
    )*};
}

key_range!(
    std::ops::Range<KR>,
    std::ops::RangeInclusive<KR>,
    std::ops::RangeFrom<KR>,
    std::ops::RangeTo<KR>,
    std::ops::RangeToInclusive<KR>,
    (Bound<KR>, Bound<KR>)
);

impl<'k, K: Key + 'static> KeyRange<'k, K> for std::ops::RangeFull {
    fn encode(&self) -> Result<EncodedBounds> {
        Ok((Bound::Unbounded, Bound::Unbounded))
    }
}

/// A prefix's encoding.
fn encode_prefix<'k, K: Key + 'static>(prefix: &K::SelfType<'k>) -> Result<Vec<u8>> {
    Ok(K::as_bytes(prefix)?.as_ref().to_vec())
}

/// Iterator over a typed table's entries in a range, in the range's direction and, as a
/// `DoubleEndedIterator`, from its other end (see [`Range`]). After an error (bounds the key
/// type cannot encode, a damaged page, an entry the types cannot read) it ends at both ends.
pub struct TypedRange<'t, K: Key + 'static, V: Value + 'static> {
    inner: Option<Range<'t>>,
    /// Why there is no range: its bounds did not encode. Yielded first.
    failed: Option<Error>,
    done: bool,
    types: Types<K, V>,
}

impl<'t, K: Key + 'static, V: Value + 'static> TypedRange<'t, K, V> {
    fn new(inner: Range<'t>) -> Self {
        TypedRange {
            inner: Some(inner),
            failed: None,
            done: false,
            types: PhantomData,
        }
    }

    /// The range that `scan` makes of encoded bounds (or prefix), or one that yields why
    /// they did not encode.
    fn over<B>(encoded: Result<B>, scan: impl FnOnce(B) -> Range<'t>) -> Self {
        match encoded {
            Ok(b) => Self::new(scan(b)),
            Err(e) => TypedRange {
                inner: None,
                failed: Some(e),
                done: false,
                types: PhantomData,
            },
        }
    }

    fn take(&mut self, item: Option<Result<Entry<'t>>>) -> Option<Result<TypedEntry<'t, K, V>>> {
        if let Some(e) = self.failed.take() {
            self.done = true;
            return Some(Err(e));
        }
        let item = item?.and_then(decode::<K, V>);
        self.done = item.is_err();
        Some(item)
    }
}

impl<'t, K: Key + 'static, V: Value + 'static> Iterator for TypedRange<'t, K, V> {
    type Item = Result<TypedEntry<'t, K, V>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let item = self.inner.as_mut().and_then(Iterator::next);
        self.take(item)
    }
}

impl<K: Key + 'static, V: Value + 'static> DoubleEndedIterator for TypedRange<'_, K, V> {
    fn next_back(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let item = self.inner.as_mut().and_then(DoubleEndedIterator::next_back);
        self.take(item)
    }
}

impl<K: Key + 'static, V: Value + 'static> std::iter::FusedIterator for TypedRange<'_, K, V> {}

/// A typed table opened in a read transaction ([`crate::ReadTxn::open_table`]). What it
/// returns borrows from the transaction, as [`ReadTable`]'s values do.
pub struct TypedReadTable<'t, K: Key + 'static, V: Value + 'static> {
    table: ReadTable<'t>,
    types: Types<K, V>,
}

impl<'t, K: Key + 'static, V: Value + 'static> TypedReadTable<'t, K, V> {
    pub(crate) fn new(table: ReadTable<'t>) -> Self {
        TypedReadTable {
            table,
            types: PhantomData,
        }
    }

    /// The value of `key`, if present.
    ///
    /// ```
    /// # use larchdb::TableDefinition;
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// const T: TableDefinition<u32, &str> = TableDefinition::new("t");
    /// let mut w = db.begin_write()?;
    /// w.open_table(T)?.put(7, "seven")?;
    /// w.commit()?;
    /// let r = db.begin_read()?;
    /// let t = r.open_table(T)?;
    /// assert_eq!(t.get(7)?, Some("seven"));
    /// assert_eq!(t.get(8)?, None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn get<'k>(&self, key: impl Borrow<K::SelfType<'k>>) -> Result<Option<V::SelfType<'t>>> {
        let k = K::as_bytes(key.borrow())?;
        self.table.get(k.as_ref())?.map(V::from_bytes).transpose()
    }

    /// The entry with the smallest key.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// const T: larchdb::TableDefinition<u64, &str> = larchdb::TableDefinition::new("t");
    /// # let mut w = db.begin_write()?;
    /// # let mut t = w.open_table(T)?;
    /// # t.put(1, "one")?;
    /// # t.put(2, "two")?;
    /// # t.put(3, "three")?;
    /// # w.commit()?;
    /// let r = db.begin_read()?;
    /// let t = r.open_table(T)?;
    /// assert_eq!(t.first()?, Some((1, "one")));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn first(&self) -> Result<Option<TypedEntry<'t, K, V>>> {
        self.table.first()?.map(decode::<K, V>).transpose()
    }

    /// The entry with the greatest key.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// const T: larchdb::TableDefinition<u64, &str> = larchdb::TableDefinition::new("t");
    /// # let mut w = db.begin_write()?;
    /// # let mut t = w.open_table(T)?;
    /// # t.put(1, "one")?;
    /// # t.put(2, "two")?;
    /// # t.put(3, "three")?;
    /// # w.commit()?;
    /// let r = db.begin_read()?;
    /// let t = r.open_table(T)?;
    /// assert_eq!(t.last()?, Some((3, "three")));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn last(&self) -> Result<Option<TypedEntry<'t, K, V>>> {
        self.table.last()?.map(decode::<K, V>).transpose()
    }

    /// The first entry whose key is `key` or greater.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// const T: larchdb::TableDefinition<u64, &str> = larchdb::TableDefinition::new("t");
    /// # let mut w = db.begin_write()?;
    /// # let mut t = w.open_table(T)?;
    /// # t.put(10, "ten")?;
    /// # t.put(20, "twenty")?;
    /// # t.put(30, "thirty")?;
    /// # w.commit()?;
    /// let r = db.begin_read()?;
    /// let t = r.open_table(T)?;
    /// assert_eq!(t.seek(15)?, Some((20, "twenty")));
    /// assert_eq!(t.seek(31)?, None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn seek<'k>(
        &self,
        key: impl Borrow<K::SelfType<'k>>,
    ) -> Result<Option<TypedEntry<'t, K, V>>> {
        let k = K::as_bytes(key.borrow())?;
        self.table.seek(k.as_ref())?.map(decode::<K, V>).transpose()
    }

    /// The entries with keys in `range` (any of std's range forms, `..` included), in key
    /// order; `.rev()` walks it from the greatest key. Bounds the key type cannot encode are
    /// the first item, an error.
    ///
    /// ```
    /// # use larchdb::TableDefinition;
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// const T: TableDefinition<i32, ()> = TableDefinition::new("t");
    /// let mut w = db.begin_write()?;
    /// let mut t = w.open_table(T)?;
    /// for i in -5..5 {
    ///     t.put(i, ())?;
    /// }
    /// w.commit()?;
    /// let r = db.begin_read()?;
    /// let keys: Vec<i32> = r.open_table(T)?.range(-2..1).map(|e| e.map(|(k, _)| k)).collect::<Result<_, _>>()?;
    /// assert_eq!(keys, vec![-2, -1, 0]);
    /// let t = r.open_table(T)?;
    /// let mut all = t.range(..);
    /// assert_eq!(all.next().transpose()?, Some((-5, ())));
    /// assert_eq!(all.next_back().transpose()?, Some((4, ())));
    /// let down: Vec<i32> = t.range(..=-3).rev().map(|e| e.map(|(k, _)| k)).collect::<Result<_, _>>()?;
    /// assert_eq!(down, [-3, -4, -5]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn range<'k>(&self, range: impl KeyRange<'k, K>) -> TypedRange<'t, K, V> {
        TypedRange::over(range.encode(), |b| self.table.range(b))
    }

    /// The entries with keys in `range`, greatest key first.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// const T: larchdb::TableDefinition<u64, &str> = larchdb::TableDefinition::new("t");
    /// # let mut w = db.begin_write()?;
    /// # let mut t = w.open_table(T)?;
    /// # t.put(1, "a")?;
    /// # t.put(2, "b")?;
    /// # t.put(3, "c")?;
    /// # t.put(4, "d")?;
    /// # t.put(5, "e")?;
    /// # w.commit()?;
    /// let r = db.begin_read()?;
    /// let t = r.open_table(T)?;
    /// let got: Vec<(u64, &str)> = t.range_rev(2..5).collect::<Result<_, _>>()?;
    /// assert_eq!(got, [(4, "d"), (3, "c"), (2, "b")]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn range_rev<'k>(&self, range: impl KeyRange<'k, K>) -> TypedRange<'t, K, V> {
        TypedRange::over(range.encode(), |b| self.table.range_rev(b))
    }

    /// The entries whose keys' encodings start with `prefix`'s, in key order: for strings and
    /// byte strings, the keys that start with `prefix`; for a tuple whose last element is a
    /// string, the keys with the same other elements and a last element that starts with
    /// it's. (For every key with a tuple's first elements, use a range from the smallest to
    /// the greatest last element.)
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// const T: larchdb::TableDefinition<&str, u32> = larchdb::TableDefinition::new("t");
    /// let mut w = db.begin_write()?;
    /// let mut t = w.open_table(T)?;
    /// for (i, k) in ["user/1", "user/2", "users", "usex"].into_iter().enumerate() {
    ///     t.put(k, i as u32)?;
    /// }
    /// drop(t);
    /// w.commit()?;
    /// let r = db.begin_read()?;
    /// let t = r.open_table(T)?;
    /// let users: Vec<(&str, u32)> = t.prefix("user/").collect::<Result<_, _>>()?;
    /// assert_eq!(users, [("user/1", 0), ("user/2", 1)]);
    /// let last: Vec<(&str, u32)> = t.prefix_rev("user").take(1).collect::<Result<_, _>>()?;
    /// assert_eq!(last, [("users", 2)]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn prefix<'k>(&self, prefix: impl Borrow<K::SelfType<'k>>) -> TypedRange<'t, K, V> {
        TypedRange::over(encode_prefix::<K>(prefix.borrow()), |p| {
            self.table.prefix(&p)
        })
    }

    /// [`TypedReadTable::prefix`]'s entries, greatest key first.
    pub fn prefix_rev<'k>(&self, prefix: impl Borrow<K::SelfType<'k>>) -> TypedRange<'t, K, V> {
        TypedRange::over(encode_prefix::<K>(prefix.borrow()), |p| {
            self.table.prefix_rev(&p)
        })
    }

    /// Every entry, in key order.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// const T: larchdb::TableDefinition<u64, &str> = larchdb::TableDefinition::new("t");
    /// # let mut w = db.begin_write()?;
    /// # let mut t = w.open_table(T)?;
    /// # t.put(1, "one")?;
    /// # t.put(2, "two")?;
    /// # t.put(3, "three")?;
    /// # w.commit()?;
    /// let r = db.begin_read()?;
    /// let t = r.open_table(T)?;
    /// let all: Vec<(u64, &str)> = t.iter().collect::<Result<_, _>>()?;
    /// assert_eq!(all, [(1, "one"), (2, "two"), (3, "three")]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn iter(&self) -> TypedRange<'t, K, V> {
        TypedRange::new(self.table.iter())
    }

    /// Every entry, greatest key first.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// const T: larchdb::TableDefinition<u64, &str> = larchdb::TableDefinition::new("t");
    /// # let mut w = db.begin_write()?;
    /// # let mut t = w.open_table(T)?;
    /// # t.put(1, "one")?;
    /// # t.put(2, "two")?;
    /// # t.put(3, "three")?;
    /// # w.commit()?;
    /// let r = db.begin_read()?;
    /// let t = r.open_table(T)?;
    /// let keys: Vec<u64> = t.iter_rev().map(|e| e.map(|(k, _)| k)).collect::<Result<_, _>>()?;
    /// assert_eq!(keys, [3, 2, 1]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn iter_rev(&self) -> TypedRange<'t, K, V> {
        TypedRange::new(self.table.iter_rev())
    }

    /// Number of entries.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// const T: larchdb::TableDefinition<u64, &str> = larchdb::TableDefinition::new("t");
    /// # let mut w = db.begin_write()?;
    /// # let mut t = w.open_table(T)?;
    /// # t.put(1, "one")?;
    /// # t.put(2, "two")?;
    /// # t.put(3, "three")?;
    /// # w.commit()?;
    /// let r = db.begin_read()?;
    /// let t = r.open_table(T)?;
    /// assert_eq!(t.len()?, 3);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn len(&self) -> Result<u64> {
        self.table.len()
    }

    /// Whether the table has no entries.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// const T: larchdb::TableDefinition<u64, &str> = larchdb::TableDefinition::new("t");
    /// const E: larchdb::TableDefinition<u64, &str> = larchdb::TableDefinition::new("e");
    /// let mut w = db.begin_write()?;
    /// w.open_table(T)?.put(1, "one")?;
    /// w.open_table(E)?; // creates it, empty
    /// w.commit()?;
    /// let r = db.begin_read()?;
    /// assert!(!r.open_table(T)?.is_empty()?);
    /// assert!(r.open_table(E)?.is_empty()?);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn is_empty(&self) -> Result<bool> {
        self.table.is_empty()
    }

    /// The table underneath, with the byte API (prefix scans, the keys' bytes).
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// const T: larchdb::TableDefinition<u64, &str> = larchdb::TableDefinition::new("t");
    /// # let mut w = db.begin_write()?;
    /// # let mut t = w.open_table(T)?;
    /// # t.put(7, "seven")?;
    /// # w.commit()?;
    /// let r = db.begin_read()?;
    /// let t = r.open_table(T)?;
    /// // A u64 key is stored as its 8 big-endian bytes.
    /// assert_eq!(t.bytes().get(&[0, 0, 0, 0, 0, 0, 0, 7])?, Some(&b"seven"[..]));
    /// assert_eq!(t.bytes().prefix(&[0; 7]).count(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn bytes(&self) -> &ReadTable<'t> {
        &self.table
    }
}

/// A typed table opened in a write transaction ([`crate::WriteTxn::open_table`]).
pub struct TypedWriteTable<'t, K: Key + 'static, V: Value + 'static> {
    table: WriteTable<'t>,
    types: Types<K, V>,
}

impl<'t, K: Key + 'static, V: Value + 'static> TypedWriteTable<'t, K, V> {
    pub(crate) fn new(table: WriteTable<'t>) -> Self {
        TypedWriteTable {
            table,
            types: PhantomData,
        }
    }

    /// Inserts or replaces. Returns true if it replaced an existing value. A key or value
    /// the types cannot encode is [`Error::Decode`] and changes nothing; past the size limits,
    /// [`Error::KeyTooLarge`] and [`Error::ValueTooLarge`] as in [`WriteTable::put`].
    ///
    /// ```
    /// # use larchdb::TableDefinition;
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// const T: TableDefinition<&str, u64> = TableDefinition::new("t");
    /// let mut w = db.begin_write()?;
    /// let mut t = w.open_table(T)?;
    /// assert!(!t.put("a", 1)?);
    /// assert!(t.put("a", 2)?);
    /// assert_eq!(t.get("a")?, Some(2));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn put<'k, 'v>(
        &mut self,
        key: impl Borrow<K::SelfType<'k>>,
        value: impl Borrow<V::SelfType<'v>>,
    ) -> Result<bool> {
        let k = K::as_bytes(key.borrow())?;
        let v = V::as_bytes(value.borrow())?;
        self.table.put(k.as_ref(), v.as_ref())
    }

    /// Inserts a key greater than every key in the table (see [`WriteTable::append`]):
    /// [`Error::AppendOutOfOrder`] otherwise, changing nothing.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// const T: larchdb::TableDefinition<u64, &str> = larchdb::TableDefinition::new("t");
    /// let mut w = db.begin_write()?;
    /// let mut t = w.open_table(T)?;
    /// t.append(1, "one")?;
    /// t.append(2, "two")?;
    /// assert!(matches!(t.append(1, "again"), Err(larchdb::Error::AppendOutOfOrder)));
    /// assert_eq!(t.len()?, 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn append<'k, 'v>(
        &mut self,
        key: impl Borrow<K::SelfType<'k>>,
        value: impl Borrow<V::SelfType<'v>>,
    ) -> Result<()> {
        let k = K::as_bytes(key.borrow())?;
        let v = V::as_bytes(value.borrow())?;
        self.table.append(k.as_ref(), v.as_ref())
    }

    /// Deletes `key`. Returns true if it was there.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// const T: larchdb::TableDefinition<u64, &str> = larchdb::TableDefinition::new("t");
    /// let mut w = db.begin_write()?;
    /// let mut t = w.open_table(T)?;
    /// t.put(1, "one")?;
    /// assert!(t.delete(1)?);
    /// assert!(!t.delete(1)?);
    /// assert_eq!(t.get(1)?, None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn delete<'k>(&mut self, key: impl Borrow<K::SelfType<'k>>) -> Result<bool> {
        let k = K::as_bytes(key.borrow())?;
        self.table.delete(k.as_ref())
    }

    /// Deletes the entries with keys in `range` (see [`WriteTable::delete_range`]). Returns
    /// how many it deleted.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// const T: larchdb::TableDefinition<u64, &str> = larchdb::TableDefinition::new("t");
    /// let mut w = db.begin_write()?;
    /// let mut t = w.open_table(T)?;
    /// for k in 1..=5 {
    ///     t.put(k, "x")?;
    /// }
    /// assert_eq!(t.delete_range(2..4)?, 2);
    /// let keys: Vec<u64> = t.iter().map(|e| e.map(|(k, _)| k)).collect::<Result<_, _>>()?;
    /// assert_eq!(keys, [1, 4, 5]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn delete_range<'k>(&mut self, range: impl KeyRange<'k, K>) -> Result<u64> {
        self.table.delete_range(range.encode()?)
    }

    /// Deletes every entry. Returns how many there were.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// const T: larchdb::TableDefinition<u64, &str> = larchdb::TableDefinition::new("t");
    /// let mut w = db.begin_write()?;
    /// let mut t = w.open_table(T)?;
    /// t.put(1, "one")?;
    /// t.put(2, "two")?;
    /// assert_eq!(t.clear()?, 2);
    /// assert!(t.is_empty()?);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn clear(&mut self) -> Result<u64> {
        self.table.clear()
    }

    /// Keeps only the entries for which `keep(key, value)` returns true, in key order.
    /// Returns how many it deleted. An entry the types cannot read stops it with
    /// [`Error::Decode`]; the deletions made before stay in the transaction (abort it to undo
    /// them).
    ///
    /// ```
    /// # use larchdb::TableDefinition;
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// const T: TableDefinition<u32, u32> = TableDefinition::new("t");
    /// let mut w = db.begin_write()?;
    /// let mut t = w.open_table(T)?;
    /// for i in 0..10 {
    ///     t.put(i, i * i)?;
    /// }
    /// assert_eq!(t.retain(|_, square| square % 2 == 0)?, 5);
    /// assert_eq!(t.len()?, 5);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn retain(
        &mut self,
        mut keep: impl for<'a> FnMut(K::SelfType<'a>, V::SelfType<'a>) -> bool,
    ) -> Result<u64> {
        let mut failed = None;
        let deleted = self.table.retain(|k, v| {
            if failed.is_some() {
                return true;
            }
            match decode::<K, V>((k, v)) {
                Ok((k, v)) => keep(k, v),
                Err(e) => {
                    failed = Some(e);
                    true
                }
            }
        })?;
        match failed {
            Some(e) => Err(e),
            None => Ok(deleted),
        }
    }

    /// The value of `key` as this transaction sees it, if present.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// const T: larchdb::TableDefinition<u64, &str> = larchdb::TableDefinition::new("t");
    /// let mut w = db.begin_write()?;
    /// let mut t = w.open_table(T)?;
    /// t.put(1, "one")?;
    /// assert_eq!(t.get(1)?, Some("one"));
    /// assert_eq!(t.get(2)?, None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn get<'k>(&self, key: impl Borrow<K::SelfType<'k>>) -> Result<Option<V::SelfType<'_>>> {
        let k = K::as_bytes(key.borrow())?;
        self.table.get(k.as_ref())?.map(V::from_bytes).transpose()
    }

    /// The entry with the smallest key.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// const T: larchdb::TableDefinition<u64, &str> = larchdb::TableDefinition::new("t");
    /// let mut w = db.begin_write()?;
    /// let mut t = w.open_table(T)?;
    /// t.put(2, "two")?;
    /// t.put(1, "one")?;
    /// assert_eq!(t.first()?, Some((1, "one")));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn first(&self) -> Result<Option<TypedEntry<'_, K, V>>> {
        self.table.first()?.map(decode::<K, V>).transpose()
    }

    /// The entry with the greatest key.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// const T: larchdb::TableDefinition<u64, &str> = larchdb::TableDefinition::new("t");
    /// let mut w = db.begin_write()?;
    /// let mut t = w.open_table(T)?;
    /// t.put(2, "two")?;
    /// t.put(1, "one")?;
    /// assert_eq!(t.last()?, Some((2, "two")));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn last(&self) -> Result<Option<TypedEntry<'_, K, V>>> {
        self.table.last()?.map(decode::<K, V>).transpose()
    }

    /// The first entry whose key is `key` or greater.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// const T: larchdb::TableDefinition<u64, &str> = larchdb::TableDefinition::new("t");
    /// let mut w = db.begin_write()?;
    /// let mut t = w.open_table(T)?;
    /// t.put(10, "ten")?;
    /// t.put(20, "twenty")?;
    /// assert_eq!(t.seek(11)?, Some((20, "twenty")));
    /// assert_eq!(t.seek(21)?, None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn seek<'k>(
        &self,
        key: impl Borrow<K::SelfType<'k>>,
    ) -> Result<Option<TypedEntry<'_, K, V>>> {
        let k = K::as_bytes(key.borrow())?;
        self.table.seek(k.as_ref())?.map(decode::<K, V>).transpose()
    }

    /// The entries with keys in `range`, in key order, as this transaction sees them.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// const T: larchdb::TableDefinition<u64, &str> = larchdb::TableDefinition::new("t");
    /// let mut w = db.begin_write()?;
    /// let mut t = w.open_table(T)?;
    /// for (k, v) in [(1, "a"), (2, "b"), (3, "c"), (4, "d")] {
    ///     t.put(k, v)?;
    /// }
    /// let got: Vec<(u64, &str)> = t.range(2..=3).collect::<Result<_, _>>()?;
    /// assert_eq!(got, [(2, "b"), (3, "c")]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn range<'k>(&self, range: impl KeyRange<'k, K>) -> TypedRange<'_, K, V> {
        TypedRange::over(range.encode(), |b| self.table.range(b))
    }

    /// The entries with keys in `range`, greatest key first.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// const T: larchdb::TableDefinition<u64, &str> = larchdb::TableDefinition::new("t");
    /// let mut w = db.begin_write()?;
    /// let mut t = w.open_table(T)?;
    /// for (k, v) in [(1, "a"), (2, "b"), (3, "c"), (4, "d"), (5, "e")] {
    ///     t.put(k, v)?;
    /// }
    /// let got: Vec<(u64, &str)> = t.range_rev(2..5).collect::<Result<_, _>>()?;
    /// assert_eq!(got, [(4, "d"), (3, "c"), (2, "b")]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn range_rev<'k>(&self, range: impl KeyRange<'k, K>) -> TypedRange<'_, K, V> {
        TypedRange::over(range.encode(), |b| self.table.range_rev(b))
    }

    /// The entries whose keys' encodings start with `prefix`'s, as this transaction sees
    /// them (see [`TypedReadTable::prefix`]).
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// const T: larchdb::TableDefinition<&str, u32> = larchdb::TableDefinition::new("t");
    /// let mut w = db.begin_write()?;
    /// let mut t = w.open_table(T)?;
    /// t.put("a/1", 1)?;
    /// t.put("a/2", 2)?;
    /// t.put("b/1", 3)?;
    /// assert_eq!(t.prefix("a/").count(), 2);
    /// assert_eq!(t.prefix_rev("a/").next().transpose()?, Some(("a/2", 2)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn prefix<'k>(&self, prefix: impl Borrow<K::SelfType<'k>>) -> TypedRange<'_, K, V> {
        TypedRange::over(encode_prefix::<K>(prefix.borrow()), |p| {
            self.table.prefix(&p)
        })
    }

    /// [`TypedWriteTable::prefix`]'s entries, greatest key first.
    pub fn prefix_rev<'k>(&self, prefix: impl Borrow<K::SelfType<'k>>) -> TypedRange<'_, K, V> {
        TypedRange::over(encode_prefix::<K>(prefix.borrow()), |p| {
            self.table.prefix_rev(&p)
        })
    }

    /// Every entry, in key order.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// const T: larchdb::TableDefinition<u64, &str> = larchdb::TableDefinition::new("t");
    /// let mut w = db.begin_write()?;
    /// let mut t = w.open_table(T)?;
    /// t.put(2, "two")?;
    /// t.put(1, "one")?;
    /// let all: Vec<(u64, &str)> = t.iter().collect::<Result<_, _>>()?;
    /// assert_eq!(all, [(1, "one"), (2, "two")]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn iter(&self) -> TypedRange<'_, K, V> {
        TypedRange::new(self.table.iter())
    }

    /// Every entry, greatest key first.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// const T: larchdb::TableDefinition<u64, &str> = larchdb::TableDefinition::new("t");
    /// let mut w = db.begin_write()?;
    /// let mut t = w.open_table(T)?;
    /// t.put(1, "one")?;
    /// t.put(2, "two")?;
    /// let all: Vec<(u64, &str)> = t.iter_rev().collect::<Result<_, _>>()?;
    /// assert_eq!(all, [(2, "two"), (1, "one")]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn iter_rev(&self) -> TypedRange<'_, K, V> {
        TypedRange::new(self.table.iter_rev())
    }

    /// Number of entries, as this transaction sees them.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// const T: larchdb::TableDefinition<u64, &str> = larchdb::TableDefinition::new("t");
    /// let mut w = db.begin_write()?;
    /// let mut t = w.open_table(T)?;
    /// t.put(1, "one")?;
    /// t.put(2, "two")?;
    /// t.put(1, "uno")?; // replaces
    /// assert_eq!(t.len()?, 2);
    /// t.delete(2)?;
    /// assert_eq!(t.len()?, 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn len(&self) -> Result<u64> {
        self.table.len()
    }

    /// Whether the table has no entries.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// const T: larchdb::TableDefinition<u64, &str> = larchdb::TableDefinition::new("t");
    /// let mut w = db.begin_write()?;
    /// let mut t = w.open_table(T)?;
    /// assert!(t.is_empty()?);
    /// t.put(1, "one")?;
    /// assert!(!t.is_empty()?);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn is_empty(&self) -> Result<bool> {
        self.table.is_empty()
    }

    /// The table underneath, with the byte API.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// const T: larchdb::TableDefinition<u64, &str> = larchdb::TableDefinition::new("t");
    /// let mut w = db.begin_write()?;
    /// let mut t = w.open_table(T)?;
    /// t.put(1, "one")?;
    /// // A u64 key is stored as its 8 big-endian bytes.
    /// assert_eq!(t.bytes().get(&1u64.to_be_bytes())?, Some(&b"one"[..]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn bytes(&self) -> &WriteTable<'t> {
        &self.table
    }

    /// The table underneath, for writing with the byte API (`set`, `pop_first`, ...).
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// # let db = larchdb::Database::open(dir.path().join("db"), Default::default())?;
    /// const T: larchdb::TableDefinition<u64, &str> = larchdb::TableDefinition::new("t");
    /// let mut w = db.begin_write()?;
    /// let mut t = w.open_table(T)?;
    /// t.bytes_mut().set(&1u64.to_be_bytes(), b"one")?;
    /// assert_eq!(t.get(1)?, Some("one"));
    /// let popped = t.bytes_mut().pop_first()?;
    /// assert_eq!(popped, Some((1u64.to_be_bytes().to_vec(), b"one".to_vec())));
    /// assert!(t.is_empty()?);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn bytes_mut(&mut self) -> &mut WriteTable<'t> {
        &mut self.table
    }
}
