"""Typed tables: keys and values as Python values, stored in the encodings of Rust's
``larchdb::typed``, so that a table written from one language reads from the other.

A definition names a table and the types of its keys and values, with Rust's names:
``u8`` .. ``u128`` and ``i8`` .. ``i128`` (Python ``int``), ``f32``/``f64`` (``float``),
``bool``, ``()`` (``None``: a set), ``str``, ``bytes``, ``json`` (any value ``json`` writes,
values only), ``Option<T>`` (``None`` or the value), arrays ``[T;N]`` (a list; ``bytes`` for
``[u8;N]``) and tuples ``(A,B,...)`` (a Python tuple; a tuple of names is accepted too).
Keys sort as the types do: integers as numbers, floats in IEEE total order, strings by code
point, tuples element by element.

>>> import larch, larch.typed, tempfile
>>> env = larch.open(tempfile.mkdtemp())
>>> SCORES = larch.typed.TableDefinition("scores", key=("str", "u64"), value="Option<u32>")
>>> with env.begin(write=True) as txn:
...     scores = SCORES.open(txn)         # created, its types recorded
...     scores[("ada", 2026)] = 10
...     scores[("ada", 2025)] = None
...     scores[("bob", 2026)] = 7
>>> with env.begin() as txn:
...     scores = SCORES.open(txn)
...     list(scores.range(("ada", 0), ("ada", 2**64 - 1), include_end=True, reverse=True))
[(('ada', 2026), 10), (('ada', 2025), None)]
>>> env.close()

A table created here records its types in its properties (``larch-types/1``), as Rust's
``open_table`` does; opening it with other types raises ``TableTypeError``. A table written
through the byte API has no record and opens with any types; bytes a type cannot read raise
``DecodeError``.
"""

import json as _json
import struct as _struct

from . import _errors
from ._errors import NotFoundError

__all__ = ["TableDefinition", "TypedTable", "TableTypeError", "DecodeError"]

_TYPES_TAG = "larch-types/1"
_ESCAPED_ZERO = 0xFF
_TERMINATOR = b"\x00\x01"


class DecodeError(_errors.Error):
    """Stored bytes that the table's types cannot read, or a value they cannot write."""


class TableTypeError(_errors.Error):
    """A table opened with other key or value types than it was created with."""


# ---------------------------------------------------------------------------------------
# Codecs
# ---------------------------------------------------------------------------------------


class _Codec:
    name = ""
    width = None  # fixed width in bytes, or None
    key = True  # whether the encoding sorts as the type does

    def encode(self, value):
        raise NotImplementedError

    def decode(self, data):
        raise NotImplementedError


class _Unsigned(_Codec):
    def __init__(self, bits):
        self.name = f"u{bits}"
        self.width = bits // 8

    def encode(self, value):
        if not isinstance(value, int) or isinstance(value, bool):
            raise DecodeError(f"a {self.name} is an int, not {type(value).__name__}")
        try:
            return value.to_bytes(self.width, "big")
        except OverflowError:
            raise DecodeError(f"{value} does not fit a {self.name}") from None

    def decode(self, data):
        _check_width(self, data)
        return int.from_bytes(data, "big")


class _Signed(_Codec):
    def __init__(self, bits):
        self.name = f"i{bits}"
        self.width = bits // 8
        self._flip = 1 << (bits - 1)

    def encode(self, value):
        if not isinstance(value, int) or isinstance(value, bool):
            raise DecodeError(f"a {self.name} is an int, not {type(value).__name__}")
        if not -self._flip <= value < self._flip:
            raise DecodeError(f"{value} does not fit an {self.name}")
        return (value + self._flip).to_bytes(self.width, "big")

    def decode(self, data):
        _check_width(self, data)
        return int.from_bytes(data, "big") - self._flip


class _Float(_Codec):
    def __init__(self, bits):
        self.name = f"f{bits}"
        self.width = bits // 8
        self._fmt = ">f" if bits == 32 else ">d"
        self._sign = 1 << (bits - 1)
        self._mask = (1 << bits) - 1

    def encode(self, value):
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise DecodeError(f"a {self.name} is a float, not {type(value).__name__}")
        try:
            raw = _struct.pack(self._fmt, value)
        except OverflowError:
            raise DecodeError(f"{value} does not fit an {self.name}") from None
        b = int.from_bytes(raw, "big")
        ordered = (~b & self._mask) if b & self._sign else (b ^ self._sign)
        return ordered.to_bytes(self.width, "big")

    def decode(self, data):
        _check_width(self, data)
        b = int.from_bytes(data, "big")
        bits = (b ^ self._sign) if b & self._sign else (~b & self._mask)
        return _struct.unpack(self._fmt, bits.to_bytes(self.width, "big"))[0]


class _Bool(_Codec):
    name = "bool"
    width = 1

    def encode(self, value):
        if not isinstance(value, bool):
            raise DecodeError(f"a bool is True or False, not {value!r}")
        return b"\x01" if value else b"\x00"

    def decode(self, data):
        if data == b"\x00":
            return False
        if data == b"\x01":
            return True
        raise DecodeError(f"a bool is one byte, 0 or 1; the stored one is {bytes(data)!r}")


class _Unit(_Codec):
    name = "()"
    width = 0

    def encode(self, value):
        if value is not None:
            raise DecodeError(f"a () is None, not {value!r}")
        return b""

    def decode(self, data):
        if data:
            raise DecodeError(f"a () is 0 bytes, the stored one has {len(data)}")
        return None


class _Str(_Codec):
    name = "str"

    def encode(self, value):
        if not isinstance(value, str):
            raise DecodeError(f"a str is a str, not {type(value).__name__}")
        return value.encode("utf-8")

    def decode(self, data):
        try:
            return bytes(data).decode("utf-8")
        except UnicodeDecodeError as e:
            raise DecodeError(f"the stored string is not UTF-8: {e}") from None


class _Bytes(_Codec):
    name = "bytes"

    def encode(self, value):
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise DecodeError(f"bytes are bytes, not {type(value).__name__}")
        return bytes(value)

    def decode(self, data):
        return bytes(data)


class _Json(_Codec):
    name = "json"
    key = False

    def encode(self, value):
        try:
            return _json.dumps(value, separators=(",", ":"), allow_nan=False).encode()
        except (TypeError, ValueError) as e:
            raise DecodeError(f"the value cannot be written as JSON: {e}") from None

    def decode(self, data):
        try:
            return _json.loads(bytes(data))
        except ValueError as e:
            raise DecodeError(f"the stored JSON does not read: {e}") from None


class _Option(_Codec):
    def __init__(self, inner):
        self.inner = inner
        self.name = f"Option<{inner.name}>"
        self.width = None if inner.width is None else inner.width + 1
        self.key = inner.key

    def encode(self, value):
        if value is None:
            return b"\x00" * (1 + (self.inner.width or 0))
        return b"\x01" + self.inner.encode(value)

    def decode(self, data):
        data = bytes(data)
        if data[:1] == b"\x00":
            pad = data[1:]
            if len(pad) != (self.inner.width or 0) or any(pad):
                raise DecodeError(f"a stored None of {self.name} has bytes after its tag")
            return None
        if data[:1] == b"\x01":
            return self.inner.decode(data[1:])
        raise DecodeError(
            f"an Option is stored as a tag byte 0 or 1 and the value; the stored one starts "
            f"{data[:1]!r}"
        )


class _Tuple(_Codec):
    """Tuples and arrays: the elements one after the other; a variable-width element other
    than the last escaped (each zero byte followed by 0xff) and ended by 0x00 0x01."""

    def __init__(self, elements, name, as_value=tuple):
        self.elements = elements
        self.name = name
        widths = [e.width for e in elements]
        self.width = None if None in widths else sum(widths)
        self.key = all(e.key for e in elements)
        self._as_value = as_value

    def encode(self, value):
        if isinstance(value, (str, bytes)) or not hasattr(value, "__len__"):
            raise DecodeError(f"a {self.name} is a sequence, not {type(value).__name__}")
        if len(value) != len(self.elements):
            raise DecodeError(
                f"a {self.name} has {len(self.elements)} elements, the value {len(value)}"
            )
        out = bytearray()
        last = len(self.elements) - 1
        for i, (codec, v) in enumerate(zip(self.elements, value)):
            b = codec.encode(v)
            if codec.width is not None:
                if len(b) != codec.width:
                    raise DecodeError(f"a {codec.name} is {codec.width} bytes")
                out += b
            elif i == last:
                out += b
            else:
                out += b.replace(b"\x00", b"\x00\xff") + _TERMINATOR
        return bytes(out)

    def decode(self, data):
        data = bytes(data)
        at = 0
        values = []
        last = len(self.elements) - 1
        for i, codec in enumerate(self.elements):
            if codec.width is not None:
                if len(data) - at < codec.width:
                    raise DecodeError(f"the stored {self.name} ends inside an element")
                values.append(codec.decode(data[at : at + codec.width]))
                at += codec.width
            elif i == last:
                values.append(codec.decode(data[at:]))
                at = len(data)
            else:
                part = bytearray()
                while True:
                    zero = data.find(b"\x00", at)
                    if zero < 0:
                        raise DecodeError(f"the stored {self.name} ends inside an element")
                    part += data[at:zero]
                    follow = data[zero + 1 : zero + 2]
                    if follow == b"\x01":
                        at = zero + 2
                        break
                    if follow == b"\xff":
                        part.append(0)
                        at = zero + 2
                        continue
                    raise DecodeError(
                        f"the stored {self.name} has a zero byte that neither escapes nor ends it"
                    )
                values.append(codec.decode(bytes(part)))
        if at != len(data):
            raise DecodeError(
                f"the stored {self.name} has {len(data) - at} bytes after its last element"
            )
        return self._as_value(values)


class _ByteArray(_Codec):
    """``[u8;N]``: its N bytes, as ``bytes``."""

    def __init__(self, n):
        self.name = f"[u8;{n}]"
        self.width = n

    def encode(self, value):
        if not isinstance(value, (bytes, bytearray, memoryview)):
            value = bytes(value)
        if len(value) != self.width:
            raise DecodeError(f"a {self.name} is {self.width} bytes, the value {len(value)}")
        return bytes(value)

    def decode(self, data):
        _check_width(self, data)
        return bytes(data)


def _check_width(codec, data):
    if len(data) != codec.width:
        raise DecodeError(f"a {codec.name} is {codec.width} bytes, the stored one has {len(data)}")


_ATOMS = {
    **{f"u{b}": (lambda b=b: _Unsigned(b)) for b in (8, 16, 32, 64, 128)},
    **{f"i{b}": (lambda b=b: _Signed(b)) for b in (8, 16, 32, 64, 128)},
    "f32": lambda: _Float(32),
    "f64": lambda: _Float(64),
    "bool": _Bool,
    "()": _Unit,
    "str": _Str,
    "bytes": _Bytes,
    "json": _Json,
}


def _codec(spec):
    """The codec of a type name (Rust's), or of a tuple of type specs."""
    if isinstance(spec, _Codec):
        return spec
    if isinstance(spec, tuple):
        elements = [_codec(s) for s in spec]
        names = ",".join(e.name for e in elements)
        return _Tuple(elements, f"({names},)" if len(elements) == 1 else f"({names})")
    if not isinstance(spec, str):
        raise TypeError(f"a type is a name such as 'u64' or a tuple of them, not {spec!r}")
    codec, rest = _parse(spec.replace(" ", ""), 0)
    if rest != len(spec.replace(" ", "")):
        raise ValueError(f"cannot read the type {spec!r}")
    return codec


def _parse(s, at):
    """Parses one type name from ``s[at:]``; returns the codec and where it ended."""
    if s.startswith("Option<", at):
        inner, at = _parse(s, at + len("Option<"))
        if s[at : at + 1] != ">":
            raise ValueError(f"cannot read the type {s!r}: '>' expected at {at}")
        return _Option(inner), at + 1
    if s.startswith("()", at):
        return _Unit(), at + 2
    if s[at : at + 1] == "(":
        elements = []
        at += 1
        while True:
            e, at = _parse(s, at)
            elements.append(e)
            if s[at : at + 2] == ",)":
                at += 2
                break
            if s[at : at + 1] == ")":
                at += 1
                break
            if s[at : at + 1] != ",":
                raise ValueError(f"cannot read the type {s!r}: ',' or ')' expected at {at}")
            at += 1
        names = ",".join(e.name for e in elements)
        return _Tuple(elements, f"({names},)" if len(elements) == 1 else f"({names})"), at
    if s[at : at + 1] == "[":
        inner, at = _parse(s, at + 1)
        end = s.find("]", at)
        if s[at : at + 1] != ";" or end < 0 or not s[at + 1 : end].isdigit():
            raise ValueError(f"cannot read the type {s!r}: ';N]' expected at {at}")
        n = int(s[at + 1 : end])
        if inner.name == "u8":
            return _ByteArray(n), end + 1
        return _Tuple([inner] * n, f"[{inner.name};{n}]", as_value=list), end + 1
    for name, make in _ATOMS.items():
        if s.startswith(name, at):
            nxt = s[at + len(name) : at + len(name) + 1]
            if nxt == "" or nxt in ",)>;]":
                return make(), at + len(name)
    raise ValueError(f"cannot read the type {s!r} at {at}: unknown name")


# ---------------------------------------------------------------------------------------
# Tables
# ---------------------------------------------------------------------------------------


class TableDefinition:
    """A table's name and the types of its keys and values (see the module's doc)."""

    def __init__(self, name, key, value):
        if not isinstance(name, str) or not name:
            raise ValueError("a table name is a non-empty str")
        self.name = name
        self.key = _codec(key)
        self.value = _codec(value)
        if not self.key.key:
            raise ValueError(f"{self.key.name} cannot be a key: its bytes do not sort as it does")

    def _record(self):
        return f"{_TYPES_TAG}\nkey={self.key.name}\nvalue={self.value.name}\n".encode()

    def _check(self, props):
        tag = f"{_TYPES_TAG}\n".encode()
        if not props.startswith(tag):
            return
        fields = dict(
            line.split("=", 1)
            for line in props[len(tag) :].decode("utf-8", "replace").splitlines()
            if "=" in line
        )
        stored = (fields.get("key", "?"), fields.get("value", "?"))
        if stored != (self.key.name, self.value.name):
            raise TableTypeError(
                f"table {self.name!r} holds {stored[0]} -> {stored[1]}, not the requested "
                f"{self.key.name} -> {self.value.name}"
            )

    def open(self, txn):
        """The table in transaction ``txn``: in a write transaction created if missing (its
        types recorded), in a read one ``NotFoundError`` if missing."""
        env = txn.env
        try:
            db = env.open_db(self.name.encode(), txn=txn, create=False)
        except NotFoundError:
            if not txn.write:
                raise
            db = env.open_db(self.name.encode(), txn=txn, create=True)
            txn.set_properties(self._record(), db=db)
        else:
            self._check(bytes(txn.get_properties(db=db)))
        return TypedTable(self, txn, db)

    def __repr__(self):
        return f"TableDefinition({self.name!r}: {self.key.name} -> {self.value.name})"


class TypedTable:
    """A typed table in one transaction (``TableDefinition.open``). Reads return decoded
    values; writes encode them. Iteration yields ``(key, value)`` pairs in key order."""

    def __init__(self, definition, txn, db):
        self.definition = definition
        self.txn = txn
        self.db = db
        self._k = definition.key
        self._v = definition.value

    def get(self, key, default=None):
        data = self.txn.get(self._k.encode(key), db=self.db)
        return default if data is None else self._v.decode(data)

    def put(self, key, value, overwrite=True):
        """Stores ``value`` under ``key``; ``False`` if ``overwrite=False`` and the key exists."""
        return self.txn.put(self._k.encode(key), self._v.encode(value), db=self.db,
                            overwrite=overwrite)

    def delete(self, key):
        """Deletes ``key``; whether it was there."""
        return self.txn.delete(self._k.encode(key), db=self.db)

    def __getitem__(self, key):
        data = self.txn.get(self._k.encode(key), db=self.db)
        if data is None:
            raise KeyError(key)
        return self._v.decode(data)

    def __setitem__(self, key, value):
        self.put(key, value)

    def __delitem__(self, key):
        if not self.delete(key):
            raise KeyError(key)

    def __contains__(self, key):
        return self.txn.get(self._k.encode(key), db=self.db) is not None

    def __len__(self):
        return self.txn.count(db=self.db)

    def __iter__(self):
        return self.items()

    def items(self, reverse=False):
        return self.range(reverse=reverse)

    def keys(self, reverse=False):
        return (k for k, _ in self.range(reverse=reverse))

    def values(self, reverse=False):
        return (v for _, v in self.range(reverse=reverse))

    def first(self):
        return next(self.range(), None)

    def last(self):
        return next(self.range(reverse=True), None)

    def range(self, start=None, end=None, include_end=False, reverse=False):
        """The entries with ``start <= key < end`` (``<= end`` with ``include_end``; ``None``:
        unbounded), ascending, or descending with ``reverse``."""
        lo = None if start is None else self._k.encode(start)
        hi = None if end is None else self._k.encode(end)
        return self._scan(lo, hi, include_end, reverse)

    def prefix(self, prefix, reverse=False):
        """The entries whose keys' encodings start with ``prefix``'s: for ``str`` and
        ``bytes`` keys, the keys that start with ``prefix``."""
        p = self._k.encode(prefix)
        return self._scan(p, _after_prefix(p), False, reverse)

    def _scan(self, lo, hi, include_end, reverse):
        """Decoded entries with keys from ``lo`` (included) to ``hi`` (bytes; ``None``:
        unbounded)."""
        with self.txn.cursor(db=self.db) as c:
            if not reverse:
                more = c.first() if lo is None else c.set_range(lo)
                while more:
                    k = bytes(c.key())
                    if hi is not None and (k > hi or (k == hi and not include_end)):
                        return
                    yield self._k.decode(k), self._v.decode(c.value())
                    more = c.next()
                return
            if hi is None:
                more = c.last()
            elif not c.set_range(hi):
                more = c.last()
            elif include_end and bytes(c.key()) == hi:
                more = True
            else:
                more = c.prev()
            while more:
                k = bytes(c.key())
                if lo is not None and k < lo:
                    return
                yield self._k.decode(k), self._v.decode(c.value())
                more = c.prev()

    def __repr__(self):
        return f"<larch.typed.TypedTable {self.definition!r}>"


def _after_prefix(p):
    """The smallest byte string above every key starting with ``p`` (``None``: none)."""
    p = bytearray(p)
    while p and p[-1] == 0xFF:
        p.pop()
    if not p:
        return None
    p[-1] += 1
    return bytes(p)
