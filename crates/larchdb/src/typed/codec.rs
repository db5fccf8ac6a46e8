//! How typed keys and values become bytes and back.

use crate::error::{Error, Result};

/// A type stored as a table's keys or values.
///
/// `SelfType<'a>` is what reading returns: for borrowing types (`&str`, `&[u8]`) a view into
/// the transaction's pages, for the others an owned value. Writes take anything that borrows
/// as `SelfType`. Decoding is fallible: bytes written by another type, or damaged, are
/// [`Error::Decode`].
///
/// Implement it for a type of your own by giving its encoding; implement [`Key`] as well only
/// if the encoding's byte order is the type's order.
pub trait Value {
    /// The type reads return, borrowing from the transaction for at most `'a`.
    type SelfType<'a>
    where
        Self: 'a;

    /// The encoded form `as_bytes` returns.
    type AsBytes<'a>: AsRef<[u8]>
    where
        Self: 'a;

    /// Reads a stored key or value.
    fn from_bytes<'a>(bytes: &'a [u8]) -> Result<Self::SelfType<'a>>
    where
        Self: 'a;

    /// The bytes to store for `value`.
    fn as_bytes<'a, 'b: 'a>(value: &'a Self::SelfType<'b>) -> Result<Self::AsBytes<'a>>
    where
        Self: 'b;

    /// The name of the encoding, recorded with a table that [`crate::WriteTxn::open_table`]
    /// creates and compared when it is opened again: types that read each other's bytes
    /// (`&str` and `String`, `&[u8]` and `Vec<u8>`) share a name.
    fn type_name() -> String;

    /// The length of every encoding, for a type whose encodings all have one length
    /// (integers, floats, `bool`, `()`, and options, arrays and tuples of such types);
    /// `None`, the default, for the others. Tuples and arrays store a fixed-width element as
    /// it is; see [`Key`] for how they store the others.
    fn fixed_width() -> Option<usize> {
        None
    }

    /// Reads a value from bytes that do not outlive the call: an element of a tuple or an
    /// array that had to be unescaped. Types whose `SelfType` owns its data read it as
    /// `from_bytes` does; the default, for types that borrow (`&str`, `&[u8]`), is
    /// [`Error::Decode`], and a write that would need it is refused.
    #[doc(hidden)]
    fn from_owned_bytes<'a>(bytes: Vec<u8>) -> Result<Self::SelfType<'a>>
    where
        Self: 'a,
    {
        drop(bytes);
        Err(Error::Decode(format!(
            "a {} that holds a zero byte, in a tuple or an array before its last element, cannot \
             be read without a copy; use the owned type (String, Vec<u8>) there",
            Self::type_name()
        )))
    }
}

/// A [`Value`] whose encoding sorts as the type does, so that the table's order and its
/// ranges are the type's order.
///
/// Tuples (of up to 12 elements), arrays and `Option`s of keys are keys, ordered as Rust
/// orders them (`None` first, then tuples and arrays element by element). Their encoding
/// stores the elements one after the other: a fixed-width element ([`Value::fixed_width`]) as
/// it is, the last element as it is, and any other element with every zero byte followed by
/// 0xff and the two bytes 0x00 0x01 after it, so that a shorter element sorts before a longer
/// one it begins. Such an element read as a borrowing type (`&str`, `&[u8]`) comes without a
/// copy unless it holds a zero byte; a borrowing type cannot return one that does, so such a
/// write is refused with [`Error::Decode`]: use `String` or `Vec<u8>` in that position.
///
/// ```
/// use larchdb::{Database, Options, TableDefinition};
///
/// // Events by (user, time), newest first per user.
/// const EVENTS: TableDefinition<(&str, u64), Option<&str>> = TableDefinition::new("events");
/// # let dir = tempfile::tempdir().unwrap();
/// let db = Database::open(dir.path().join("db"), Options::default())?;
/// let mut w = db.begin_write()?;
/// {
///     let mut t = w.open_table(EVENTS)?;
///     t.put(("ada", 10), Some("login"))?;
///     t.put(("ada", 20), None)?;
///     t.put(("bob", 15), Some("login"))?;
///     t.put(("ad", 99), Some("shorter name first"))?;
/// }
/// w.commit()?;
/// let r = db.begin_read()?;
/// let t = r.open_table(EVENTS)?;
/// let ada: Vec<_> = t.range(("ada", 0)..=("ada", u64::MAX)).rev().collect::<Result<_, _>>()?;
/// assert_eq!(ada, [(("ada", 20), None), (("ada", 10), Some("login"))]);
/// assert_eq!(t.first()?, Some((("ad", 99), Some("shorter name first"))));
/// # Ok::<(), larchdb::Error>(())
/// ```
pub trait Key: Value {}

pub(super) fn wrong_width(type_name: &str, want: usize, got: usize) -> Error {
    Error::Decode(format!(
        "a {type_name} is {want} bytes, the stored one has {got}"
    ))
}

/// `bytes` as an array of exactly `N`, or [`Error::Decode`] naming `type_name`.
fn fixed<const N: usize>(type_name: &str, bytes: &[u8]) -> Result<[u8; N]> {
    bytes
        .try_into()
        .map_err(|_| wrong_width(type_name, N, bytes.len()))
}

macro_rules! unsigned {
    ($($t:ty),*) => {$(
        /// Stored big-endian, so that the byte order is the numeric order.
        impl Value for $t {
            type SelfType<'a> = $t;
            type AsBytes<'a> = [u8; std::mem::size_of::<$t>()];

            fn from_bytes<'a>(bytes: &'a [u8]) -> Result<$t> where Self: 'a, {
                let raw = fixed(stringify!($t), bytes)?;
                Ok(<$t>::from_be_bytes(raw))
            }

            fn as_bytes<'a, 'b: 'a>(value: &'a $t) -> Result<Self::AsBytes<'a>> where Self: 'b, {
                Ok(value.to_be_bytes())
            }

            fn type_name() -> String {
                stringify!($t).to_string()
            }

            fn fixed_width() -> Option<usize> {
                Some(std::mem::size_of::<$t>())
            }

            fn from_owned_bytes<'a>(bytes: Vec<u8>) -> Result<$t> where Self: 'a, {
                Self::from_bytes(&bytes)
            }
        }

        impl Key for $t {}
    )*};
}

unsigned!(u8, u16, u32, u64, u128);

macro_rules! signed {
    ($($t:ty : $u:ty),*) => {$(
        /// Stored big-endian with the sign bit flipped, so that negative numbers sort before
        /// positive ones.
        impl Value for $t {
            type SelfType<'a> = $t;
            type AsBytes<'a> = [u8; std::mem::size_of::<$t>()];

            fn from_bytes<'a>(bytes: &'a [u8]) -> Result<$t> where Self: 'a, {
                let raw = fixed(stringify!($t), bytes)?;
                Ok((<$u>::from_be_bytes(raw) ^ (1 << (<$u>::BITS - 1))) as $t)
            }

            fn as_bytes<'a, 'b: 'a>(value: &'a $t) -> Result<Self::AsBytes<'a>> where Self: 'b, {
                Ok(((*value as $u) ^ (1 << (<$u>::BITS - 1))).to_be_bytes())
            }

            fn type_name() -> String {
                stringify!($t).to_string()
            }

            fn fixed_width() -> Option<usize> {
                Some(std::mem::size_of::<$t>())
            }

            fn from_owned_bytes<'a>(bytes: Vec<u8>) -> Result<$t> where Self: 'a, {
                Self::from_bytes(&bytes)
            }
        }

        impl Key for $t {}
    )*};
}

signed!(i8: u8, i16: u16, i32: u32, i64: u64, i128: u128);

macro_rules! float {
    ($($t:ty : $u:ty),*) => {$(
        /// Stored in the byte form of IEEE 754's total order (positive numbers with the sign
        /// bit set, negative ones with every bit inverted): -NaN < -inf < ... < -0.0 < 0.0 <
        /// ... < inf < NaN, as `total_cmp` orders them. Every bit pattern comes back as
        /// written.
        impl Value for $t {
            type SelfType<'a> = $t;
            type AsBytes<'a> = [u8; std::mem::size_of::<$t>()];

            fn from_bytes<'a>(bytes: &'a [u8]) -> Result<$t> where Self: 'a, {
                let raw = fixed(stringify!($t), bytes)?;
                let sign = 1 << (<$u>::BITS - 1);
                let b = <$u>::from_be_bytes(raw);
                let bits = if b & sign != 0 { b ^ sign } else { !b };
                Ok(<$t>::from_bits(bits))
            }

            fn as_bytes<'a, 'b: 'a>(value: &'a $t) -> Result<Self::AsBytes<'a>> where Self: 'b, {
                let sign = 1 << (<$u>::BITS - 1);
                let b = value.to_bits();
                let ordered = if b & sign != 0 { !b } else { b ^ sign };
                Ok(ordered.to_be_bytes())
            }

            fn type_name() -> String {
                stringify!($t).to_string()
            }

            fn fixed_width() -> Option<usize> {
                Some(std::mem::size_of::<$t>())
            }

            fn from_owned_bytes<'a>(bytes: Vec<u8>) -> Result<$t> where Self: 'a, {
                Self::from_bytes(&bytes)
            }
        }

        impl Key for $t {}
    )*};
}

float!(f32: u32, f64: u64);

/// One byte, 0 or 1; any other byte is [`Error::Decode`].
impl Value for bool {
    type SelfType<'a> = bool;
    type AsBytes<'a> = [u8; 1];

    fn from_bytes<'a>(bytes: &'a [u8]) -> Result<bool>
    where
        Self: 'a,
    {
        match bytes {
            [0] => Ok(false),
            [1] => Ok(true),
            _ => Err(Error::Decode(format!(
                "a bool is one byte, 0 or 1; the stored one is {bytes:?}"
            ))),
        }
    }

    fn as_bytes<'a, 'b: 'a>(value: &'a bool) -> Result<[u8; 1]>
    where
        Self: 'b,
    {
        Ok([u8::from(*value)])
    }

    fn type_name() -> String {
        "bool".to_string()
    }

    fn fixed_width() -> Option<usize> {
        Some(1)
    }

    fn from_owned_bytes<'a>(bytes: Vec<u8>) -> Result<bool>
    where
        Self: 'a,
    {
        Self::from_bytes(&bytes)
    }
}

impl Key for bool {}

/// No bytes: a table of keys only (a set).
impl Value for () {
    type SelfType<'a> = ();
    type AsBytes<'a> = [u8; 0];

    fn from_bytes<'a>(bytes: &'a [u8]) -> Result<()>
    where
        Self: 'a,
    {
        if bytes.is_empty() {
            Ok(())
        } else {
            Err(wrong_width("()", 0, bytes.len()))
        }
    }

    fn as_bytes<'a, 'b: 'a>(_: &'a ()) -> Result<[u8; 0]>
    where
        Self: 'b,
    {
        Ok([])
    }

    fn type_name() -> String {
        "()".to_string()
    }

    fn fixed_width() -> Option<usize> {
        Some(0)
    }

    fn from_owned_bytes<'a>(bytes: Vec<u8>) -> Result<()>
    where
        Self: 'a,
    {
        Self::from_bytes(&bytes)
    }
}

impl Key for () {}

/// The bytes as they are, read without a copy.
impl Value for &[u8] {
    type SelfType<'a>
        = &'a [u8]
    where
        Self: 'a;
    type AsBytes<'a>
        = &'a [u8]
    where
        Self: 'a;

    fn from_bytes<'a>(bytes: &'a [u8]) -> Result<&'a [u8]>
    where
        Self: 'a,
    {
        Ok(bytes)
    }

    fn as_bytes<'a, 'b: 'a>(value: &'a &'b [u8]) -> Result<&'a [u8]>
    where
        Self: 'b,
    {
        Ok(value)
    }

    fn type_name() -> String {
        "bytes".to_string()
    }
}

impl Key for &[u8] {}

/// The bytes as they are, read into a vector.
impl Value for Vec<u8> {
    type SelfType<'a> = Vec<u8>;
    type AsBytes<'a> = &'a [u8];

    fn from_bytes<'a>(bytes: &'a [u8]) -> Result<Vec<u8>>
    where
        Self: 'a,
    {
        Ok(bytes.to_vec())
    }

    fn from_owned_bytes<'a>(bytes: Vec<u8>) -> Result<Vec<u8>>
    where
        Self: 'a,
    {
        Ok(bytes)
    }

    fn as_bytes<'a, 'b: 'a>(value: &'a Vec<u8>) -> Result<&'a [u8]>
    where
        Self: 'b,
    {
        Ok(value)
    }

    fn type_name() -> String {
        "bytes".to_string()
    }
}

impl Key for Vec<u8> {}

fn utf8(bytes: &[u8]) -> Result<&str> {
    std::str::from_utf8(bytes)
        .map_err(|e| Error::Decode(format!("the stored string is not UTF-8: {e}")))
}

/// UTF-8, read without a copy; byte order is the order of the strings' code points.
impl Value for &str {
    type SelfType<'a>
        = &'a str
    where
        Self: 'a;
    type AsBytes<'a>
        = &'a [u8]
    where
        Self: 'a;

    fn from_bytes<'a>(bytes: &'a [u8]) -> Result<&'a str>
    where
        Self: 'a,
    {
        utf8(bytes)
    }

    fn as_bytes<'a, 'b: 'a>(value: &'a &'b str) -> Result<&'a [u8]>
    where
        Self: 'b,
    {
        Ok(value.as_bytes())
    }

    fn type_name() -> String {
        "str".to_string()
    }
}

impl Key for &str {}

/// UTF-8, read into a `String`.
impl Value for String {
    type SelfType<'a> = String;
    type AsBytes<'a> = &'a [u8];

    fn from_bytes<'a>(bytes: &'a [u8]) -> Result<String>
    where
        Self: 'a,
    {
        utf8(bytes).map(str::to_string)
    }

    fn from_owned_bytes<'a>(bytes: Vec<u8>) -> Result<String>
    where
        Self: 'a,
    {
        String::from_utf8(bytes)
            .map_err(|e| Error::Decode(format!("the stored string is not UTF-8: {e}")))
    }

    fn as_bytes<'a, 'b: 'a>(value: &'a String) -> Result<&'a [u8]>
    where
        Self: 'b,
    {
        Ok(value.as_bytes())
    }

    fn type_name() -> String {
        "str".to_string()
    }
}

impl Key for String {}

/// Any type serde can write and read, stored as JSON (feature `serde`). A value type only:
/// JSON's byte order is not a type's order, so it is not a [`Key`]. A value serde cannot
/// write (a map with keys that are not strings) or bytes it cannot read are
/// [`Error::Decode`].
///
/// ```
/// use larchdb::{typed::Json, Database, Options, TableDefinition};
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Serialize, Deserialize, Debug, PartialEq)]
/// struct User {
///     name: String,
///     admin: bool,
/// }
///
/// const USERS: TableDefinition<u64, Json<User>> = TableDefinition::new("users");
/// # let dir = tempfile::tempdir().unwrap();
/// let db = Database::open(dir.path().join("db"), Options::default())?;
/// let mut w = db.begin_write()?;
/// w.open_table(USERS)?.put(1, User { name: "ada".into(), admin: true })?;
/// w.commit()?;
/// let r = db.begin_read()?;
/// assert_eq!(
///     r.open_table(USERS)?.get(1)?,
///     Some(User { name: "ada".into(), admin: true })
/// );
/// # Ok::<(), larchdb::Error>(())
/// ```
#[cfg(feature = "serde")]
pub struct Json<T>(std::marker::PhantomData<fn() -> T>);

#[cfg(feature = "serde")]
impl<T: serde::Serialize + serde::de::DeserializeOwned> Value for Json<T> {
    type SelfType<'a>
        = T
    where
        Self: 'a;
    type AsBytes<'a>
        = Vec<u8>
    where
        Self: 'a;

    fn from_bytes<'a>(bytes: &'a [u8]) -> Result<T>
    where
        Self: 'a,
    {
        serde_json::from_slice(bytes)
            .map_err(|e| Error::Decode(format!("the stored JSON does not read as the type: {e}")))
    }

    fn as_bytes<'a, 'b: 'a>(value: &'a T) -> Result<Vec<u8>>
    where
        Self: 'b,
    {
        serde_json::to_vec(value)
            .map_err(|e| Error::Decode(format!("the value cannot be written as JSON: {e}")))
    }

    fn type_name() -> String {
        "json".to_string()
    }

    fn from_owned_bytes<'a>(bytes: Vec<u8>) -> Result<T>
    where
        Self: 'a,
    {
        Self::from_bytes(&bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc<T: Value>(v: T::SelfType<'_>) -> Vec<u8> {
        T::as_bytes(&v).unwrap().as_ref().to_vec()
    }

    #[test]
    fn integers_sort_as_their_bytes() {
        let xs = [i64::MIN, -1_000_000, -2, -1, 0, 1, 2, 1 << 40, i64::MAX];
        for w in xs.windows(2) {
            assert!(enc::<i64>(w[0]) < enc::<i64>(w[1]), "{} {}", w[0], w[1]);
        }
        for x in xs {
            assert_eq!(i64::from_bytes(&enc::<i64>(x)).unwrap(), x);
        }
        let us = [0u16, 1, 255, 256, u16::MAX];
        for w in us.windows(2) {
            assert!(enc::<u16>(w[0]) < enc::<u16>(w[1]));
        }
        assert_eq!(enc::<i8>(-128), vec![0]);
        assert_eq!(enc::<i8>(127), vec![255]);
    }

    #[test]
    fn floats_sort_in_total_order_and_keep_every_bit() {
        let xs = [
            -f64::NAN,
            f64::NEG_INFINITY,
            -1e300,
            -1.5,
            -f64::MIN_POSITIVE,
            -0.0,
            0.0,
            f64::MIN_POSITIVE,
            2.5,
            f64::INFINITY,
            f64::NAN,
        ];
        for w in xs.windows(2) {
            assert!(w[0].total_cmp(&w[1]).is_lt());
            assert!(enc::<f64>(w[0]) < enc::<f64>(w[1]), "{} {}", w[0], w[1]);
        }
        for x in xs {
            assert_eq!(
                f64::from_bytes(&enc::<f64>(x)).unwrap().to_bits(),
                x.to_bits()
            );
        }
        assert!(enc::<f32>(-1.0) < enc::<f32>(1.0));
    }

    #[test]
    fn bytes_of_the_wrong_width_or_form_are_decode_errors() {
        assert!(matches!(u64::from_bytes(b"abc"), Err(Error::Decode(_))));
        assert!(matches!(i32::from_bytes(b""), Err(Error::Decode(_))));
        assert!(matches!(f32::from_bytes(&[0; 8]), Err(Error::Decode(_))));
        assert!(matches!(bool::from_bytes(&[2]), Err(Error::Decode(_))));
        assert!(matches!(<()>::from_bytes(&[0]), Err(Error::Decode(_))));
        assert!(matches!(
            <[u8; 4]>::from_bytes(b"abc"),
            Err(Error::Decode(_))
        ));
        assert!(matches!(<&str>::from_bytes(&[0xff]), Err(Error::Decode(_))));
        assert!(matches!(String::from_bytes(&[0xc3]), Err(Error::Decode(_))));
        let msg = u64::from_bytes(b"abc").unwrap_err().to_string();
        assert!(
            msg.contains("u64") && msg.contains('8') && msg.contains('3'),
            "{msg}"
        );
    }

    #[test]
    fn names_are_shared_by_types_that_read_each_other() {
        assert_eq!(<&str>::type_name(), String::type_name());
        assert_eq!(<&[u8]>::type_name(), <Vec<u8>>::type_name());
        assert_ne!(<[u8; 4]>::type_name(), <&[u8]>::type_name());
        assert_ne!(u32::type_name(), i32::type_name());
    }
}
