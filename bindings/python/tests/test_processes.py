"""Writers in more than one process (multiprocessing), as py-lmdb allows: each write
transaction waits for the database, starts from the newest commit whoever made it, and a
process killed while it holds the database frees it."""

import multiprocessing
import os
import signal
import struct
import time

import pytest

import larch

TURNS = 100


def _increment(path, name, turns, log):
    env = larch.open(path, log=log)
    for i in range(turns):
        with env.begin(write=True) as txn:
            count = struct.unpack(">Q", txn.get(b"count") or bytes(8))[0]
            txn.put(b"count", struct.pack(">Q", count + 1))
            txn.put(f"{name}-{i:04}".encode(), struct.pack(">Q", count))
    env.close()


def _hold(path, ready):
    env = larch.open(path)
    with env.begin(write=True) as txn:
        txn.put(b"acked", b"1")
    txn = env.begin(write=True)
    txn.put(b"in-flight", b"1")
    ready.set()
    time.sleep(600)


@pytest.mark.parametrize("log", [True, False])
def test_processes_write_in_turns_and_see_each_others_commits(tmp_path, log):
    path = str(tmp_path / "db")
    larch.open(path, log=log).close()
    ctx = multiprocessing.get_context("spawn")
    workers = [ctx.Process(target=_increment, args=(path, n, TURNS, log)) for n in "ab"]
    for w in workers:
        w.start()
    # This process writes in turns with them.
    _increment(path, "parent", TURNS // 4, log)
    for w in workers:
        w.join(120)
        assert w.exitcode == 0
    env = larch.open(path, log=log)
    total = 2 * TURNS + TURNS // 4
    with env.begin() as txn:
        assert struct.unpack(">Q", txn.get(b"count"))[0] == total
        # Every increment saw a different count: no transaction started from a stale commit.
        seen = sorted(struct.unpack(">Q", v)[0] for k, v in txn.cursor() if k != b"count")
    assert seen == list(range(total))
    env.close()


def test_a_writer_waits_for_a_holder_and_a_killed_holder_frees_the_database(tmp_path):
    path = str(tmp_path / "db")
    larch.open(path).close()
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Event()
    holder = ctx.Process(target=_hold, args=(path, ready))
    holder.start()
    assert ready.wait(60)
    env = larch.open(path)
    with pytest.raises(larch.BusyError):
        env.begin(write=True, wait=False)
    os.kill(holder.pid, signal.SIGKILL)
    holder.join(30)
    started = time.monotonic()
    with env.begin(write=True) as txn:
        assert txn.get(b"acked") == b"1"
        assert txn.get(b"in-flight") is None
        txn.put(b"after", b"1")
    assert time.monotonic() - started < 5
    with env.begin() as txn:
        assert txn.get(b"after") == b"1"
    env.close()


def test_forked_workers_write_beside_a_parent_that_holds_the_database(tmp_path):
    # The pre-fork server's way: the parent has the database open (and has written) when it
    # forks; each worker opens its own environment.
    path = str(tmp_path / "db")
    env = larch.open(path)
    with env.begin(write=True) as txn:
        txn.put(b"count", struct.pack(">Q", 0))
    ctx = multiprocessing.get_context("fork")
    workers = [ctx.Process(target=_increment, args=(path, n, TURNS, True)) for n in "ab"]
    for w in workers:
        w.start()
    for w in workers:
        w.join(120)
        assert w.exitcode == 0
    with env.begin(write=True) as txn:
        count = struct.unpack(">Q", txn.get(b"count"))[0]
        assert count == 2 * TURNS
        txn.put(b"count", struct.pack(">Q", count + 1))
    env.close()
