//! Keys and values made of others: `Option<T>`, arrays `[T; N]` and tuples of up to 12
//! elements. Their encodings sort as Rust orders the types when the parts are keys (see
//! [`Key`] for the layout).

use super::codec::{wrong_width, Key, Value};
use crate::error::{Error, Result};

/// The byte that follows a zero byte of an escaped element.
const ESCAPED_ZERO: u8 = 0xff;
/// What ends an escaped element: a zero byte not followed by [`ESCAPED_ZERO`], and 0x01
/// sorts below it, so that an element sorts before a longer one it begins.
const TERMINATOR: [u8; 2] = [0x00, 0x01];

/// Appends one element of a tuple or an array: as it is when it has a fixed width or is the
/// last, escaped and terminated otherwise. An escaped element holding a zero byte must read
/// back from a copy (`from_owned_bytes`); a type that cannot is refused here, before
/// anything is written.
fn put_element<'a, 'b: 'a, T: Value + 'b>(
    out: &mut Vec<u8>,
    value: &'a T::SelfType<'b>,
    last: bool,
) -> Result<()> {
    let encoded = T::as_bytes(value)?;
    let bytes = encoded.as_ref();
    match T::fixed_width() {
        Some(width) => {
            if bytes.len() != width {
                return Err(Error::Decode(format!(
                    "a {} is {width} bytes, its encoding gave {}",
                    T::type_name(),
                    bytes.len()
                )));
            }
            out.extend_from_slice(bytes);
        }
        None if last => out.extend_from_slice(bytes),
        None => {
            if bytes.contains(&0) {
                T::from_owned_bytes(bytes.to_vec())?;
            }
            out.reserve(bytes.len() + TERMINATOR.len());
            for &b in bytes {
                out.push(b);
                if b == 0 {
                    out.push(ESCAPED_ZERO);
                }
            }
            out.extend_from_slice(&TERMINATOR);
        }
    }
    Ok(())
}

/// One element's bytes, split off the front of `rest`.
enum Part<'a> {
    /// The element's bytes as stored.
    Raw(&'a [u8]),
    /// An escaped element that held zero bytes, unescaped.
    Unescaped(Vec<u8>),
}

fn truncated(type_name: &str) -> Error {
    Error::Decode(format!("the stored {type_name} ends inside an element"))
}

/// Splits the next element of a `T` off `rest`.
fn split_element<'a, T: Value>(rest: &mut &'a [u8], last: bool) -> Result<Part<'a>> {
    let bytes = *rest;
    match T::fixed_width() {
        Some(width) => {
            if bytes.len() < width {
                return Err(truncated(&T::type_name()));
            }
            let (part, tail) = bytes.split_at(width);
            *rest = tail;
            Ok(Part::Raw(part))
        }
        None if last => {
            *rest = &[];
            Ok(Part::Raw(bytes))
        }
        None => {
            let mut at = 0;
            let mut escaped = false;
            loop {
                let Some(zero) = bytes[at..].iter().position(|&b| b == 0) else {
                    return Err(truncated(&T::type_name()));
                };
                at += zero;
                match bytes.get(at + 1) {
                    Some(&b) if b == TERMINATOR[1] => break,
                    Some(&ESCAPED_ZERO) => {
                        escaped = true;
                        at += 2;
                    }
                    _ => {
                        return Err(Error::Decode(format!(
                            "the stored {} has a zero byte that neither escapes nor ends it",
                            T::type_name()
                        )))
                    }
                }
            }
            let (part, tail) = (&bytes[..at], &bytes[at + TERMINATOR.len()..]);
            *rest = tail;
            if !escaped {
                return Ok(Part::Raw(part));
            }
            let mut plain = Vec::with_capacity(part.len());
            let mut i = 0;
            while i < part.len() {
                plain.push(part[i]);
                // A zero byte is always followed by its escape here: skip it.
                i += if part[i] == 0 { 2 } else { 1 };
            }
            Ok(Part::Unescaped(plain))
        }
    }
}

/// Reads the next element of a `T` off `rest`, borrowing where it can.
fn take_element<'a, T: Value + 'a>(rest: &mut &'a [u8], last: bool) -> Result<T::SelfType<'a>> {
    match split_element::<T>(rest, last)? {
        Part::Raw(bytes) => T::from_bytes(bytes),
        Part::Unescaped(bytes) => T::from_owned_bytes(bytes),
    }
}

/// Reads the next element of a `T` off `rest`, from a copy (for a compound read from a copy).
fn take_owned_element<'a, T: Value + 'a>(rest: &mut &[u8], last: bool) -> Result<T::SelfType<'a>> {
    match split_element::<T>(rest, last)? {
        Part::Raw(bytes) => T::from_owned_bytes(bytes.to_vec()),
        Part::Unescaped(bytes) => T::from_owned_bytes(bytes),
    }
}

/// [`Error::Decode`] unless every byte of a compound was read.
fn finished(rest: &[u8], type_name: impl FnOnce() -> String) -> Result<()> {
    if rest.is_empty() {
        Ok(())
    } else {
        Err(Error::Decode(format!(
            "the stored {} has {} bytes after its last element",
            type_name(),
            rest.len()
        )))
    }
}

/// A tag byte, 0 for `None` and 1 for `Some`, then the value; a `None` of a fixed-width type
/// is padded with zeros to the same width. `None` sorts first.
impl<T: Value> Value for Option<T> {
    type SelfType<'a>
        = Option<T::SelfType<'a>>
    where
        Self: 'a;
    type AsBytes<'a>
        = Vec<u8>
    where
        Self: 'a;

    fn from_bytes<'a>(bytes: &'a [u8]) -> Result<Self::SelfType<'a>>
    where
        Self: 'a,
    {
        match bytes.split_first() {
            Some((0, pad)) => none_padding::<T>(pad).map(|()| None),
            Some((1, v)) => T::from_bytes(v).map(Some),
            _ => Err(bad_tag(bytes)),
        }
    }

    fn as_bytes<'a, 'b: 'a>(value: &'a Self::SelfType<'b>) -> Result<Vec<u8>>
    where
        Self: 'b,
    {
        Ok(match value {
            None => vec![0; 1 + T::fixed_width().unwrap_or(0)],
            Some(v) => {
                let encoded = T::as_bytes(v)?;
                let mut out = Vec::with_capacity(1 + encoded.as_ref().len());
                out.push(1);
                out.extend_from_slice(encoded.as_ref());
                out
            }
        })
    }

    fn type_name() -> String {
        format!("Option<{}>", T::type_name())
    }

    fn fixed_width() -> Option<usize> {
        T::fixed_width().map(|w| w + 1)
    }

    fn from_owned_bytes<'a>(bytes: Vec<u8>) -> Result<Self::SelfType<'a>>
    where
        Self: 'a,
    {
        match bytes.split_first() {
            Some((0, pad)) => none_padding::<T>(pad).map(|()| None),
            Some((1, v)) => T::from_owned_bytes(v.to_vec()).map(Some),
            _ => Err(bad_tag(&bytes)),
        }
    }
}

impl<T: Key> Key for Option<T> {}

/// Checks what follows a `None`'s tag: zeros to the type's width.
fn none_padding<T: Value>(pad: &[u8]) -> Result<()> {
    let width = T::fixed_width().unwrap_or(0);
    if pad.len() != width {
        return Err(wrong_width(
            &format!("None of Option<{}>", T::type_name()),
            width + 1,
            pad.len() + 1,
        ));
    }
    if pad.iter().any(|&b| b != 0) {
        return Err(Error::Decode(format!(
            "a stored None of Option<{}> has bytes after its tag",
            T::type_name()
        )));
    }
    Ok(())
}

fn bad_tag(bytes: &[u8]) -> Error {
    Error::Decode(format!(
        "an Option is stored as a tag byte 0 or 1 and the value; the stored one starts {:?}",
        bytes.first()
    ))
}

/// The elements one after the other (see [`Key`]); `[u8; N]` is its `N` bytes.
impl<T: Value, const N: usize> Value for [T; N] {
    type SelfType<'a>
        = [T::SelfType<'a>; N]
    where
        Self: 'a;
    type AsBytes<'a>
        = Vec<u8>
    where
        Self: 'a;

    fn from_bytes<'a>(bytes: &'a [u8]) -> Result<Self::SelfType<'a>>
    where
        Self: 'a,
    {
        array::<T, N>(bytes, take_element::<T>)
    }

    fn as_bytes<'a, 'b: 'a>(value: &'a Self::SelfType<'b>) -> Result<Vec<u8>>
    where
        Self: 'b,
    {
        let mut out = Vec::with_capacity(Self::fixed_width().unwrap_or(0));
        for (i, v) in value.iter().enumerate() {
            put_element::<T>(&mut out, v, i + 1 == N)?;
        }
        Ok(out)
    }

    fn type_name() -> String {
        format!("[{};{N}]", T::type_name())
    }

    fn fixed_width() -> Option<usize> {
        if N == 0 {
            return Some(0);
        }
        T::fixed_width().map(|w| w * N)
    }

    fn from_owned_bytes<'a>(bytes: Vec<u8>) -> Result<Self::SelfType<'a>>
    where
        Self: 'a,
    {
        array::<T, N>(&bytes, take_owned_element::<T>)
    }
}

impl<T: Key, const N: usize> Key for [T; N] {}

/// An array of `N` elements read off `bytes` by `take` (borrowing, or from a copy), which must
/// all be read.
fn array<'a, 'b, T: Value + 'a, const N: usize>(
    mut rest: &'b [u8],
    take: fn(&mut &'b [u8], bool) -> Result<T::SelfType<'a>>,
) -> Result<[T::SelfType<'a>; N]> {
    let mut out = Vec::with_capacity(N);
    for i in 0..N {
        out.push(take(&mut rest, i + 1 == N)?);
    }
    finished(rest, <[T; N]>::type_name)?;
    out.try_into()
        .map_err(|_| Error::Decode(format!("an array of {N} elements read fewer")))
}

macro_rules! tuple {
    ($last:tt; $($name:ident $i:tt),+) => {
        /// The elements one after the other (see [`Key`]).
        impl<$($name: Value),+> Value for ($($name,)+) {
            type SelfType<'a>
                = ($($name::SelfType<'a>,)+)
            where
                Self: 'a;
            type AsBytes<'a>
                = Vec<u8>
            where
                Self: 'a;

            fn from_bytes<'a>(bytes: &'a [u8]) -> Result<Self::SelfType<'a>>
            where
                Self: 'a,
            {
                let mut rest = bytes;
                let value = ($(take_element::<$name>(&mut rest, $i == $last)?,)+);
                finished(rest, Self::type_name)?;
                Ok(value)
            }

            fn as_bytes<'a, 'b: 'a>(value: &'a Self::SelfType<'b>) -> Result<Vec<u8>>
            where
                Self: 'b,
            {
                let mut out = Vec::with_capacity(Self::fixed_width().unwrap_or(0));
                $(put_element::<$name>(&mut out, &value.$i, $i == $last)?;)+
                Ok(out)
            }

            fn type_name() -> String {
                let names: Vec<String> = vec![$($name::type_name()),+];
                if names.len() == 1 {
                    format!("({},)", names[0])
                } else {
                    format!("({})", names.join(","))
                }
            }

            fn fixed_width() -> Option<usize> {
                Some(0 $(+ $name::fixed_width()?)+)
            }

            fn from_owned_bytes<'a>(bytes: Vec<u8>) -> Result<Self::SelfType<'a>>
            where
                Self: 'a,
            {
                let mut rest = &bytes[..];
                let value = ($(take_owned_element::<$name>(&mut rest, $i == $last)?,)+);
                finished(rest, Self::type_name)?;
                Ok(value)
            }
        }

        impl<$($name: Key),+> Key for ($($name,)+) {}
    };
}

tuple!(0; A 0);
tuple!(1; A 0, B 1);
tuple!(2; A 0, B 1, C 2);
tuple!(3; A 0, B 1, C 2, D 3);
tuple!(4; A 0, B 1, C 2, D 3, E 4);
tuple!(5; A 0, B 1, C 2, D 3, E 4, F 5);
tuple!(6; A 0, B 1, C 2, D 3, E 4, F 5, G 6);
tuple!(7; A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7);
tuple!(8; A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8);
tuple!(9; A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9);
tuple!(10; A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10);
tuple!(11; A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11);
