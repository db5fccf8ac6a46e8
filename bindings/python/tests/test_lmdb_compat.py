"""What code written for py-lmdb finds after ``import larch as lmdb``: its exception names,
its environment calls, ``Cursor`` as a class with ``getmulti``, and ``stat()``'s counts."""

import os
import subprocess
import sys

import pytest

import larch
import larch as lmdb
from conftest import fill

# Every exception class py-lmdb defines.
PY_LMDB_ERRORS = [
    "Error", "KeyExistsError", "NotFoundError", "PageNotFoundError", "CorruptedError",
    "PanicError", "VersionMismatchError", "InvalidError", "MapFullError", "DbsFullError",
    "ReadersFullError", "TlsFullError", "TxnFullError", "CursorFullError", "PageFullError",
    "MapResizedError", "IncompatibleError", "BadDbiError", "BadRslotError", "BadTxnError",
    "BadValsizeError", "ReadonlyError", "InvalidParameterError", "LockError", "MemoryError",
    "DiskError",
]  # fmt: skip


def test_every_py_lmdb_exception_name_exists_under_error():
    for name in PY_LMDB_ERRORS:
        cls = getattr(lmdb, name)
        assert isinstance(cls, type) and issubclass(cls, lmdb.Error), name
    # Larch's own cases under the py-lmdb class that names them.
    assert issubclass(larch.PoisonedError, lmdb.PanicError)
    assert issubclass(larch.DatabaseFullError, lmdb.MapFullError)
    assert issubclass(larch.DiskFullError, lmdb.DiskError)
    assert issubclass(larch.IoError, lmdb.DiskError)
    assert issubclass(larch.ExistsError, FileExistsError)
    assert issubclass(larch.MissingError, FileNotFoundError)
    # The module's MemoryError is py-lmdb's, not the built-in.
    assert lmdb.MemoryError is not MemoryError


def test_environment_calls_py_lmdb_code_makes(env):
    env.set_mapsize(1 << 30)  # accepted: the file grows on its own
    assert env.max_readers() == 126
    assert env.reader_check() == 0
    assert env.readers() == "(no active readers)\n"
    with env.begin() as txn:
        txn.get(b"x")
        listing = env.readers()
        lines = listing.splitlines()
        assert lines[0].split() == ["pid", "thread", "txnid"]
        assert len(lines) == 2 and lines[1].split()[0] == str(os.getpid())
    flags = env.flags()
    assert flags["subdir"] is True and flags["readonly"] is False
    assert flags["sync"] is True and flags["lock"] is True and flags["writemap"] is False
    env.close()
    with pytest.raises(lmdb.Error):
        env.set_mapsize(1)


def test_flags_follow_the_open_arguments(tmp_path):
    e = larch.open(str(tmp_path / "f.larch"), subdir=False, sync=False, readahead=False)
    flags = e.flags()
    assert flags["subdir"] is False and flags["sync"] is False
    assert flags["readahead"] is False
    e.close()


def test_copy_into_a_directory_and_file_exists(env, tmp_path):
    fill(env, 300)
    target = tmp_path / "backup"
    target.mkdir()
    assert env.copy(str(target))["entries"] == 300
    assert (target / larch.DATA_FILE).exists()
    with pytest.raises(FileExistsError) as caught:
        env.copy(str(target))
    assert caught.value.errno == 17 and isinstance(caught.value, lmdb.Error)
    c = lmdb.open(str(target), readonly=True)
    with c.begin() as txn:
        assert txn.get(b"k00299") == b"v299"
    c.close()


def test_copyfd_writes_a_database_to_a_descriptor(env, tmp_path):
    fill(env, 200)
    out = tmp_path / "fd.larch"
    with open(out, "wb") as f:
        assert env.copyfd(f.fileno())["entries"] == 200
        f.write(b"")  # the descriptor is still open
    c = larch.open(str(out), subdir=False, readonly=True)
    with c.begin() as txn:
        assert txn.get(b"k00199") == b"v199"
    c.close()
    r, w = os.pipe()
    os.close(r)
    with pytest.raises(lmdb.Error):
        env.copyfd(w)  # a pipe nobody reads: EPIPE, as an exception
    os.close(w)


def test_cursor_is_a_class_with_getmulti(env):
    fill(env, 10)
    with env.begin() as txn:
        c = lmdb.Cursor(None, txn)
        assert isinstance(c, lmdb.Cursor) and isinstance(txn.cursor(), lmdb.Cursor)
        got = c.getmulti([b"k00003", b"missing", b"k00001"])
        assert got == [(b"k00003", b"v3"), (b"k00001", b"v1")]
        assert c.getmulti([b"k00002"], dupdata=True) == [(b"k00002", b"v2")]
        with pytest.raises(lmdb.InvalidParameterError):
            c.getmulti([b"k00002"], dupfixed_bytes=4)


def test_stat_entries_count_the_main_database(env):
    fill(env, 50)
    t = env.open_db(b"other")
    fill(env, 20, db=t)
    s = env.stat()
    assert s["entries"] == 51  # the main database's records, one a named database
    assert s["all_entries"] == 70


SCRIPT = """
import larch as lmdb, sys
env = lmdb.open(sys.argv[1], map_size=1 << 20, max_dbs=4)
env.set_mapsize(1 << 30)
db = env.open_db(b"people")
with env.begin(write=True) as txn:
    txn.put(b"ada", b"1815", db=db)
    txn.put(b"alan", b"1912", db=db)
try:
    with env.begin() as txn:
        cur = lmdb.Cursor(db, txn)
        print(cur.getmulti([b"ada", b"alan"]))
        print(env.stat()["entries"], env.info()["last_txnid"] > 0, env.max_readers())
except (lmdb.MapFullError, lmdb.ReadersFullError, lmdb.DiskError) as e:
    print("failed", e)
print(env.reader_check())
env.close()
"""


def test_a_py_lmdb_script_runs_unchanged(tmp_path):
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "db")],
        capture_output=True, text=True, check=True,
    ).stdout.splitlines()  # fmt: skip
    assert out == ["[(b'ada', b'1815'), (b'alan', b'1912')]", "1 True 126", "0"]


def test_the_type_stubs_declare_every_public_method():
    import ast
    import pathlib

    stub = pathlib.Path(larch._larch.__file__).with_name("_larch.pyi")
    tree = ast.parse(stub.read_text())
    declared = {
        c.name: {f.name for f in c.body if isinstance(f, ast.FunctionDef)}
        for c in tree.body
        if isinstance(c, ast.ClassDef)
    }
    for cls in (larch.Environment, larch.Transaction, larch.Cursor, larch.Table):
        public = {n for n in vars(cls) if not n.startswith("_")}
        assert public <= declared[cls.__name__], (cls.__name__, public - declared[cls.__name__])
