"""Bad input gets a typed exception carrying the engine's message, and loses nothing."""

import errno
import os
import threading

import pytest

import larch
from conftest import fill


def test_every_exception_is_a_larch_error():
    names = [n for n in dir(larch) if n.endswith("Error")]
    assert len(names) >= 20
    for n in names:
        assert issubclass(getattr(larch, n), larch.Error), n
    assert issubclass(larch.KeyTooLargeError, larch.BadValsizeError)
    assert issubclass(larch.KeyTooLargeError, ValueError)
    assert issubclass(larch.InvalidParameterError, ValueError)
    assert issubclass(larch.DiskFullError, OSError)
    assert issubclass(larch.IoError, OSError)
    assert issubclass(larch.BusyError, larch.LockError)
    assert issubclass(larch.NotFoundError, KeyError)


def test_key_too_large(env):
    with env.begin(write=True) as txn:
        with pytest.raises(larch.KeyTooLargeError, match="1001 bytes exceeds the maximum of 1000"):
            txn.put(b"k" * 1001, b"v")
        assert txn.put(b"k" * 1000, b"v")
        # Looking up or deleting a key too long to exist is an answer, not an error.
        assert txn.get(b"k" * 5000) is None
        assert txn.delete(b"k" * 5000) is False
    with env.begin() as txn:
        assert txn.count() == 1


def test_a_file_that_is_not_a_database(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_bytes(b"hello, this is not a database\n" * 1000)
    with pytest.raises(larch.InvalidError):
        larch.open(str(path), subdir=False)
    assert path.read_bytes().startswith(b"hello")


def test_a_damaged_file_is_corrupted_not_a_crash(tmp_path):
    env = larch.open(str(tmp_path), compact_on_close=False)
    fill(env, 3000)
    env.close()
    data = tmp_path / larch.DATA_FILE
    size = os.path.getsize(data)
    with open(data, "r+b") as f:
        # Scribble over every page past the two meta pages.
        for off in range(2 * 4096 + 100, size, 4096):
            f.seek(off)
            f.write(b"\xde\xad\xbe\xef" * 8)
    try:
        env = larch.open(str(tmp_path), compact_on_close=False)
    except larch.CorruptedError:
        return
    with pytest.raises(larch.CorruptedError):
        with env.begin() as txn:
            for _ in txn.cursor():
                pass
    try:
        assert env.verify()["problems"]
    except larch.CorruptedError:
        pass
    env.close()


def test_a_missing_directory_is_an_os_error_with_errno(tmp_path):
    with pytest.raises(larch.IoError) as e:
        larch.open(str(tmp_path / "no" / "such" / "file"), subdir=False)
    assert e.value.errno == errno.ENOENT
    assert "no/such/file" in (e.value.filename or "")
    assert isinstance(e.value, OSError)
    with pytest.raises(larch.IoError):
        larch.open(str(tmp_path / "absent"), subdir=False, create=False)


def test_a_second_environment_on_the_same_file_is_locked(tmp_path):
    env = larch.open(str(tmp_path))
    with pytest.raises(larch.LockError):
        larch.open(str(tmp_path))
    env.close()
    larch.open(str(tmp_path)).close()


def test_a_second_write_transaction_on_one_thread_is_refused_not_a_deadlock(env):
    w = env.begin(write=True)
    with pytest.raises(larch.BusyError, match="this thread"):
        env.begin(write=True)
    w.abort()
    env.begin(write=True).abort()


def test_nowait_write_transaction_while_another_thread_writes(env):
    started, release = threading.Event(), threading.Event()

    def writer():
        with env.begin(write=True) as txn:
            txn.put(b"k", b"v")
            started.set()
            release.wait(10)

    t = threading.Thread(target=writer)
    t.start()
    assert started.wait(10)
    with pytest.raises(larch.BusyError):
        env.begin(write=True, wait=False)
    release.set()
    t.join(10)
    with env.begin(write=True, wait=False) as txn:
        assert txn.get(b"k") == b"v"


def test_a_write_transaction_is_bound_to_its_thread(env):
    w = env.begin(write=True)
    w.put(b"k", b"v")
    errors = []

    def other():
        for call in (lambda: w.put(b"x", b"y"), lambda: w.get(b"k"), w.commit, w.cursor):
            try:
                call()
            except larch.Error as e:
                errors.append(str(e))

    t = threading.Thread(target=other)
    t.start()
    t.join(10)
    assert len(errors) == 4 and all("thread that began it" in e for e in errors)
    w.commit()
    with env.begin() as r:
        assert r.get(b"k") == b"v" and r.get(b"x") is None


def test_invalid_parameters(tmp_path):
    with pytest.raises(larch.InvalidParameterError, match="page"):
        larch.open(str(tmp_path / "a"), page_size=1000)
    env = larch.open(str(tmp_path / "b"))
    with pytest.raises(larch.InvalidParameterError):
        env.begin(durability="fast")
    with env.begin(write=True) as txn:
        with pytest.raises(larch.InvalidParameterError):
            txn.commit(durability="later")
    with pytest.raises(TypeError):
        env.begin(parent=None)  # nested transactions: not in Larch (savepoints are, in Rust)
    env.close()


def _full_fs(tmp_path):
    """A 2 MiB tmpfs, or None where this process cannot mount one."""
    mnt = tmp_path / "full"
    mnt.mkdir()
    if os.geteuid() != 0 or os.system(f"mount -t tmpfs -o size=2m tmpfs {mnt} 2>/dev/null") != 0:
        return None
    return mnt


def test_a_full_disk_is_disk_full_and_loses_nothing(tmp_path):
    mnt = _full_fs(tmp_path)
    if mnt is None:
        pytest.skip("cannot mount a small tmpfs here (needs root)")
    try:
        env = larch.open(str(mnt), compact_on_close=False)
        committed = 0
        with pytest.raises(larch.DiskFullError) as e:
            for batch in range(1000):
                with env.begin(write=True) as txn:
                    for i in range(100):
                        txn.put(b"%08d" % (batch * 100 + i), os.urandom(100))
                committed = (batch + 1) * 100
        assert e.value.errno == errno.ENOSPC
        assert committed > 0
        with env.begin() as txn:
            assert txn.count() == committed
        env.close()
        env = larch.open(str(mnt), compact_on_close=False)
        with env.begin() as txn:
            assert txn.count() == committed
        assert env.verify()["problems"] == []
        env.close()
    finally:
        os.system(f"umount {mnt}")
