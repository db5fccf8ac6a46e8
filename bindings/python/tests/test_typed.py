"""larch.typed: typed tables in the encodings of Rust's larchdb::typed (the byte vectors
below are asserted on the Rust side too, in crates/larchdb/tests/typed_compound.rs), their
order, ranges from both ends, the recorded types, and errors for what does not encode."""

import math
import random

import pytest

import larch
from larch.typed import DecodeError, TableDefinition, TableTypeError

# The same vectors as the Rust test `the_encodings_are_these_bytes`.
VECTORS = [
    ("u64", 7, b"\x00" * 7 + b"\x07"),
    ("i8", -128, b"\x00"),
    ("i8", 127, b"\xff"),
    ("i32", -1, b"\x7f\xff\xff\xff"),
    ("f64", -0.0, b"\x7f\xff\xff\xff\xff\xff\xff\xff"),
    ("f64", 1.0, b"\xbf\xf0\x00\x00\x00\x00\x00\x00"),
    ("bool", True, b"\x01"),
    ("()", None, b""),
    ("str", "é", "é".encode()),
    ("Option<u32>", None, b"\x00\x00\x00\x00\x00"),
    ("Option<u32>", 5, b"\x01\x00\x00\x00\x05"),
    ("Option<str>", "a", b"\x01a"),
    ("(str,u64)", ("a\x00b", 1), b"a\x00\xffb\x00\x01" + b"\x00" * 7 + b"\x01"),
    ("(bytes,str)", (b"", "z"), b"\x00\x01z"),
    ("[u16;2]", [1, 2], b"\x00\x01\x00\x02"),
    ("[u8;3]", b"abc", b"abc"),
    ("((u8,str),i16)", ((1, "x"), -1), b"\x01x\x00\x01\x7f\xff"),
]


@pytest.mark.parametrize("type_name,value,encoded", VECTORS)
def test_encodings_are_the_rust_ones(env, type_name, value, encoded):
    t = TableDefinition("t", key=type_name, value="()")
    assert t.key.name == type_name.replace(" ", "")
    assert t.key.encode(value) == encoded
    assert t.key.decode(encoded) == value
    with env.begin(write=True) as txn:
        t.open(txn)[value] = None
    with env.begin() as txn:
        db = env.open_db(b"t", txn=txn, create=False)
        assert [bytes(k) for k, _ in txn.cursor(db=db)] == [encoded]
        props = txn.get_properties(db=db)
        assert props == f"larch-types/1\nkey={type_name}\nvalue=()\n".encode()


def test_keys_sort_as_the_types_do(env):
    rng = random.Random(59)
    pairs = TableDefinition("pairs", key=("str", "i64", "Option<f64>"), value="u32")
    alphabet = ["\x00", "a", "b", "é", "\uffff"]
    keys = set()
    for _ in range(400):
        s = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 3)))
        f = rng.choice([None, -math.inf, -1.5, -0.0, 0.0, 2.0, math.inf])
        keys.add((s, rng.randint(-3, 3), f))
    keys = list(keys)

    def order(k):
        # Rust's order: None first, floats by total order (-0.0 before 0.0).
        s, i, f = k
        return (s, i, (0,) if f is None else (1, f, math.copysign(1, f)))

    with env.begin(write=True) as txn:
        t = pairs.open(txn)
        for n, k in enumerate(keys):
            t[k] = n
        assert len(t) == len(keys)
    want = sorted(keys, key=order)
    with env.begin() as txn:
        t = pairs.open(txn)
        assert list(t.keys()) == want
        assert list(t.keys(reverse=True)) == want[::-1]
        lo, hi = sorted(rng.sample(want, 2), key=order)
        between = [k for k in want if order(lo) <= order(k) < order(hi)]
        assert [k for k, _ in t.range(lo, hi)] == between
        assert [k for k, _ in t.range(lo, hi, reverse=True)] == between[::-1]
        upto = [k for k in want if order(lo) <= order(k) <= order(hi)]
        assert [k for k, _ in t.range(lo, hi, include_end=True)] == upto
        assert [k for k, _ in t.range(lo, hi, include_end=True, reverse=True)] == upto[::-1]
        assert [k for k, _ in t.range(end=hi)] == [k for k in want if order(k) < order(hi)]
        assert t.first()[0] == want[0] and t.last()[0] == want[-1]


def test_mapping_methods_prefixes_and_values(env):
    names = TableDefinition("names", key="str", value="json")
    with env.begin(write=True) as txn:
        t = names.open(txn)
        t["app"] = {"n": 1}
        t["apple"] = [1, 2]
        t["apply"] = "x"
        t["b"] = None
        assert t.put("b", 3, overwrite=False) is False
        assert "app" in t and "ap" not in t
        del t["b"]
        with pytest.raises(KeyError):
            del t["b"]
        with pytest.raises(KeyError):
            t["nope"]
        assert t.get("nope", 5) == 5
        assert [k for k, _ in t.prefix("app")] == ["app", "apple", "apply"]
        assert [k for k, _ in t.prefix("appl", reverse=True)] == ["apply", "apple"]
        assert dict(t.items()) == {"app": {"n": 1}, "apple": [1, 2], "apply": "x"}


def test_the_recorded_types_are_checked(env):
    with env.begin(write=True) as txn:
        TableDefinition("t", key="u32", value="str").open(txn)[1] = "one"
    with env.begin() as txn:
        with pytest.raises(TableTypeError, match="u32 -> str"):
            TableDefinition("t", key="i32", value="str").open(txn)
        with pytest.raises(larch.NotFoundError):
            TableDefinition("missing", key="u32", value="str").open(txn)
    # A table of the byte API has no record: any types open it; bytes they cannot read
    # raise DecodeError.
    with env.begin(write=True) as txn:
        db = env.open_db(b"raw", txn=txn)
        txn.put(b"\x00\x00\x00\x01", b"\xff", db=db)
    with env.begin() as txn:
        t = TableDefinition("raw", key="u32", value="str").open(txn)
        with pytest.raises(DecodeError, match="UTF-8"):
            t[1]
        assert isinstance(DecodeError("x"), larch.Error)


def test_values_that_do_not_encode_raise_and_write_nothing(env):
    t = TableDefinition("t", key=("str", "u8"), value="f32")
    with env.begin(write=True) as txn:
        table = t.open(txn)
        for key, value in [
            (("a", 256), 1.0),
            (("a", -1), 1.0),
            (("a", 1), "x"),
            (("a",), 1.0),
            ("a1", 1.0),
            (("a", 1), 1e300),
        ]:
            with pytest.raises(DecodeError):
                table[key] = value
        assert len(table) == 0
    with pytest.raises(ValueError, match="cannot be a key"):
        TableDefinition("j", key="json", value="u8")
    with pytest.raises(ValueError, match="unknown name"):
        TableDefinition("j", key="u7", value="u8")


def test_damaged_compound_bytes_raise_decode_errors():
    for type_name, data in [
        ("Option<u8>", b"\x02\x01"),
        ("Option<u8>", b"\x00\x01"),
        ("(str,u8)", b"abc"),
        ("(str,u8)", b"a\x00\x05\x01"),
        ("(u8,u8)", b"\x01\x02\x03"),
        ("bool", b"\x02"),
    ]:
        with pytest.raises(DecodeError):
            TableDefinition("t", key=type_name, value="()").key.decode(data)


def test_savepoints_roll_back_part_of_a_transaction(env):
    with env.begin(write=True) as txn:
        txn.put(b"order", b"paid")
        sp = txn.savepoint()
        txn.put(b"item", b"widget")
        txn.delete(b"order")
        txn.rollback_to(sp)
        assert txn.get(b"order") == b"paid" and txn.get(b"item") is None
        # As a context manager: an exception rolls back to it, then it is released.
        with pytest.raises(ValueError):
            with txn.savepoint():
                txn.put(b"bad", b"1")
                raise ValueError("undo")
        assert txn.get(b"bad") is None
        with txn.savepoint():
            txn.put(b"good", b"1")
        assert txn.get(b"good") == b"1"
        inner = txn.savepoint()
        txn.rollback_to(sp)
        with pytest.raises(larch.Error):
            txn.rollback_to(inner)
        txn.release(sp)
        with pytest.raises(larch.Error, match="released"):
            txn.rollback_to(sp)
        txn.put(b"after", b"1")
    with env.begin() as txn:
        assert dict(txn.cursor()) == {b"order": b"paid", b"after": b"1"}
        with pytest.raises(larch.ReadonlyError):
            txn.savepoint()


def test_compact_and_copy_report_progress(env, tmp_path):
    with env.begin(write=True) as txn:
        for i in range(60_000):
            txn.put(b"%08d" % i, b"x" * 20)
    with env.begin(write=True) as txn:
        for i in range(50_000):
            txn.delete(b"%08d" % i)
    steps = []
    env.compact(progress=steps.append)
    assert steps[-1] == {"step": "trimming"}
    assert all(s["step"] in ("checkpoint", "moving", "trimming") for s in steps)
    counts = []
    env.copy(str(tmp_path / "copy.larch"), progress=counts.append)
    assert counts[-1] == 10_000 and counts == sorted(counts)

    # An exception in the callback is raised once the work has ended, which it does not
    # stop, and the callback is not called again.
    calls = []

    def fails(n):
        calls.append(n)
        raise RuntimeError("stop")

    with pytest.raises(RuntimeError, match="stop"):
        env.copy(str(tmp_path / "copy2.larch"), progress=fails)
    assert len(calls) == 1
    assert (tmp_path / "copy2.larch").exists()


def test_the_module_examples_run():
    import doctest

    import larch.typed

    for module in (larch, larch.typed):
        failed, tried = doctest.testmod(module)
        assert tried > 0 and failed == 0, module.__name__
