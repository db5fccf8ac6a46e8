"""The py-lmdb-shaped API: environments, transactions, tables, cursors, buffers."""

import os

import pytest

import larch
from conftest import fill


# -- Environment -------------------------------------------------------------------------


def test_open_creates_a_directory_with_the_data_file(tmp_path):
    path = tmp_path / "new"
    env = larch.open(str(path))
    assert os.path.isfile(path / larch.DATA_FILE)
    assert env.path() == str(path)
    assert env.file() == str(path / larch.DATA_FILE)
    assert not env.readonly()
    env.close()


def test_open_subdir_false_uses_the_path_as_the_file(tmp_path):
    path = tmp_path / "db.larch"
    env = larch.open(str(path), subdir=False)
    with env.begin(write=True) as txn:
        txn.put(b"k", b"v")
    env.close()
    assert os.path.isfile(path)
    env = larch.open(path, subdir=False)  # a PathLike works too
    with env.begin() as txn:
        assert txn.get(b"k") == b"v"
    env.close()


def test_py_lmdb_arguments_without_a_counterpart_are_accepted(tmp_path):
    env = larch.open(str(tmp_path), map_size=1 << 20, max_dbs=4, max_readers=8, metasync=False,
                     map_async=True, writemap=True, meminit=False, max_spare_txns=2, lock=True,
                     readahead=True, mode=0o700)
    # map_size is not a limit: the file grows past it.
    with env.begin(write=True) as txn:
        for i in range(2000):
            txn.put(b"%08d" % i, bytes(1000))
    assert env.info()["map_size"] > 1 << 20
    env.close()


def test_data_survives_close_and_reopen(tmp_path):
    env = larch.open(str(tmp_path))
    fill(env, 100)
    env.close()
    env = larch.open(str(tmp_path))
    with env.begin() as txn:
        assert txn.get(b"k00042") == b"v42"
        assert txn.count() == 100
    env.close()


def test_a_closed_environment_refuses_calls_and_closing_twice_is_harmless(tmp_path):
    env = larch.open(str(tmp_path))
    env.close()
    env.close()
    with pytest.raises(larch.Error, match="closed"):
        env.begin()
    with pytest.raises(larch.Error, match="closed"):
        env.stat()
    assert "closed" in repr(env)


def test_close_ends_open_transactions_and_cursors(tmp_path):
    env = larch.open(str(tmp_path))
    fill(env, 10)
    r = env.begin()
    c = r.cursor()
    assert c.first()
    w = env.begin(write=True)
    w.put(b"uncommitted", b"x")
    env.close()
    for call in (lambda: r.get(b"k00001"), lambda: w.put(b"a", b"b"), c.next, w.commit):
        with pytest.raises(larch.Error, match="ended"):
            call()
    # The write transaction was aborted, and the file is free for a new environment.
    env = larch.open(str(tmp_path))
    with env.begin() as txn:
        assert txn.get(b"uncommitted") is None
        assert txn.count() == 10
    env.close()


def test_context_manager_closes_the_environment(tmp_path):
    with larch.open(str(tmp_path)) as env:
        fill(env, 3)
    with pytest.raises(larch.Error):
        env.begin()


def test_stat_info_and_max_key_size(env):
    fill(env, 500)
    s = env.stat()
    for k in ("psize", "depth", "branch_pages", "leaf_pages", "overflow_pages", "entries"):
        assert k in s
    assert s["psize"] == 4096
    assert s["entries"] == 500
    assert s["leaf_pages"] >= 2 and s["depth"] >= 2
    assert s["tables"]["default"]["entries"] == 500
    info = env.info()
    assert info["map_size"] >= 4096 * s["page_count"] // 2
    assert info["last_txnid"] == s["txn"]
    assert env.max_key_size() == 1000
    big = larch.open(env.path() + "-64k", page_size=65536)
    assert big.max_key_size() > env.max_key_size()
    big.close()


def test_copy_verify_sync_checkpoint_compact(env, tmp_path):
    fill(env, 1000)
    copied = env.copy(str(tmp_path / "copy.larch"))
    assert copied["entries"] == 1000
    with pytest.raises(larch.IoError):
        env.copy(str(tmp_path / "copy.larch"))  # it exists
    c = larch.open(str(tmp_path / "copy.larch"), subdir=False, readonly=True)
    with c.begin() as txn:
        assert txn.get(b"k00999") == b"v999"
    assert c.verify()["problems"] == []
    c.close()
    report = env.verify()
    assert report["problems"] == [] and report["entries"] == 1000
    env.sync()
    env.sync(force=True)
    env.checkpoint()
    with env.begin(write=True) as txn:
        for i in range(1000):
            txn.delete(b"k%05d" % i)
    c = env.compact()
    assert c["data_bytes_after"] <= c["data_bytes_before"]


def test_readonly_environment_reads_and_refuses_writes(tmp_path):
    env = larch.open(str(tmp_path))
    fill(env, 5)
    env.close()
    ro = larch.open(str(tmp_path), readonly=True)
    assert ro.readonly()
    with ro.begin() as txn:
        assert txn.get(b"k00003") == b"v3"
    with pytest.raises(larch.ReadonlyError):
        ro.begin(write=True)
    ro.close()


# -- Transactions ------------------------------------------------------------------------


def test_get_put_replace_pop_delete(env):
    with env.begin(write=True) as txn:
        assert txn.put(b"a", b"1") is True
        assert txn.put(b"a", b"2", overwrite=False) is False
        assert txn.get(b"a") == b"1"
        assert txn.put(b"a", b"3") is True
        assert txn.get(b"a") == b"3"
        assert txn.get(b"missing") is None
        assert txn.get(b"missing", b"default") == b"default"
        assert txn.replace(b"a", b"4") == b"3"
        assert txn.replace(b"b", b"5") is None
        assert txn.pop(b"b") == b"5"
        assert txn.pop(b"b") is None
        assert txn.delete(b"a") is True
        assert txn.delete(b"a") is False
        assert txn.delete(b"never", b"ignored value") is False
        txn.put(b"empty", b"")
    with env.begin() as txn:
        assert txn.get(b"a") is None
        assert txn.get(b"empty") == b""


def test_keys_and_values_take_buffers_but_not_str(env):
    with env.begin(write=True) as txn:
        txn.put(bytearray(b"ba"), memoryview(b"mv"))
        assert txn.get(memoryview(b"ba")) == b"mv"
        with pytest.raises(TypeError, match="str"):
            txn.put("text", b"v")
        with pytest.raises(TypeError, match="str"):
            txn.get("text")
        with pytest.raises(TypeError):
            txn.put(b"k", 42)


def test_append_loads_sorted_keys_and_refuses_others(env):
    with env.begin(write=True) as txn:
        for i in range(1000):
            assert txn.put(b"%06d" % i, b"x", append=True)
        with pytest.raises(larch.AppendOrderError):
            txn.put(b"000005", b"y", append=True)
        # The refused append changed nothing: the transaction goes on and commits.
        assert txn.put(b"001000", b"z", append=True)
    with env.begin() as txn:
        assert txn.count() == 1001 and txn.get(b"000005") == b"x"


def test_with_block_commits_and_aborts_on_exception(env):
    with env.begin(write=True) as txn:
        txn.put(b"kept", b"1")

    class Boom(Exception):
        pass

    with pytest.raises(Boom):
        with env.begin(write=True) as txn:
            txn.put(b"dropped", b"1")
            raise Boom
    with env.begin() as txn:
        assert txn.get(b"kept") == b"1"
        assert txn.get(b"dropped") is None


def test_explicit_commit_abort_and_use_after_end(env):
    txn = env.begin(write=True)
    txn.put(b"a", b"1")
    txn.commit()
    with pytest.raises(larch.Error, match="ended"):
        txn.get(b"a")
    with pytest.raises(larch.Error, match="ended"):
        txn.commit()
    txn.abort()  # aborting an ended transaction does nothing
    txn = env.begin(write=True)
    txn.put(b"b", b"1")
    txn.abort()
    with env.begin() as r:
        assert r.get(b"a") == b"1" and r.get(b"b") is None
        assert "read" in repr(r) and not r.write


def test_a_read_transaction_is_a_snapshot_and_renew_moves_it(env):
    fill(env, 3)
    r = env.begin()
    first = r.id()
    with env.begin(write=True) as w:
        w.put(b"new", b"1")
        assert w.id() > first
    assert r.get(b"new") is None
    r.renew()
    assert r.id() > first
    assert r.get(b"new") == b"1"
    r.abort()


def test_a_read_transaction_cannot_write(env):
    with env.begin() as txn:
        for call in (lambda: txn.put(b"k", b"v"), lambda: txn.delete(b"k"),
                     lambda: txn.pop(b"k"), lambda: txn.replace(b"k", b"v")):
            with pytest.raises(larch.ReadonlyError):
                call()


def test_durability_levels(tmp_path):
    for level in (larch.IMMEDIATE, larch.BOUNDED, larch.NONE):
        env = larch.open(str(tmp_path / level), durability=level)
        with env.begin(write=True) as txn:
            txn.put(b"k", level.encode())
        with env.begin(write=True, durability=larch.NONE) as txn:
            txn.put(b"k2", b"x")
        txn = env.begin(write=True)
        txn.put(b"k3", b"y")
        txn.commit(durability=larch.IMMEDIATE)
        env.close()
        env = larch.open(str(tmp_path / level))
        with env.begin() as txn:
            assert txn.get(b"k") == level.encode()
            assert txn.get(b"k2") == b"x" and txn.get(b"k3") == b"y"
        env.close()
    with pytest.raises(larch.InvalidParameterError):
        larch.open(str(tmp_path / "x"), durability="sometimes")


def test_sync_false_means_durability_none_and_the_log_works_the_same(tmp_path):
    for kwargs in ({"sync": False}, {"log": True}, {"log": True, "durability": larch.BOUNDED}):
        path = str(tmp_path / str(sorted(kwargs.items())))
        env = larch.open(path, **kwargs)
        fill(env, 200)
        with env.begin(write=True) as txn:
            txn.delete(b"k00007")
        with env.begin() as txn:
            assert txn.count() == 199
        assert env.stat()["entries"] == 199
        env.close()
        env = larch.open(path)
        with env.begin() as txn:
            assert txn.count() == 199 and txn.get(b"k00008") == b"v8"
        env.close()


# -- Tables ------------------------------------------------------------------------------


def test_named_tables_are_separate(env):
    fruit = env.open_db(b"fruit")
    veg = env.open_db("veg")  # str names work too
    assert fruit.name == "fruit" and env.open_db(None).name is None
    assert fruit == env.open_db(b"fruit") and hash(fruit) == hash(env.open_db(b"fruit"))
    with env.begin(write=True) as txn:
        txn.put(b"k", b"apple", db=fruit)
        txn.put(b"k", b"leek", db=veg)
        txn.put(b"k", b"default")
    with env.begin(db=fruit) as txn:
        assert txn.get(b"k") == b"apple"
        assert txn.get(b"k", db=veg) == b"leek"
        assert txn.get(b"k", db=env.open_db()) == b"default"
        assert txn.stat()["entries"] == 1
    assert env.tables() == ["fruit", "veg"]


def test_open_db_without_create_and_within_a_transaction(env):
    with pytest.raises(larch.NotFoundError):
        env.open_db(b"absent", create=False)
    with env.begin(write=True) as txn:
        t = env.open_db(b"inside", txn=txn)
        txn.put(b"k", b"v", db=t)
        with pytest.raises(larch.NotFoundError):
            env.open_db(b"absent", txn=txn, create=False)
        # A second write transaction on this thread would wait for this one forever.
        with pytest.raises(larch.BusyError):
            env.open_db(b"other")
    assert env.open_db(b"inside", create=False).name == "inside"
    with pytest.raises(larch.InvalidParameterError, match="dupsort"):
        env.open_db(b"dups", dupsort=True)
    with pytest.raises(larch.InvalidParameterError):
        env.open_db(b"\xff\xfe")
    with pytest.raises(larch.InvalidParameterError):
        env.open_db(b"x" * 300)


def test_drop_deletes_or_empties_a_table(env):
    t = env.open_db(b"t")
    fill(env, 10, db=t)
    fill(env, 10)
    with env.begin(write=True) as txn:
        txn.drop(t, delete=False)
        assert txn.count(db=t) == 0
        txn.drop(env.open_db())  # the default table can only be emptied
    with env.begin() as txn:
        assert txn.count() == 0
    assert env.tables() == ["t"]
    with env.begin(write=True) as txn:
        txn.drop(t)
    assert env.tables() == []
    with env.begin() as txn:
        with pytest.raises(larch.NotFoundError):
            txn.get(b"k", db=t)
    with env.begin(write=True) as txn:
        with pytest.raises(larch.NotFoundError):
            txn.drop(t)
    with env.begin() as txn:
        with pytest.raises(larch.InvalidParameterError):
            txn.get(b"k", db="not a table handle")


def test_the_default_table_is_not_created_by_a_read(env):
    with env.begin(write=True) as txn:
        assert txn.get(b"k") is None
        assert txn.count() == 0
        assert list(txn.cursor()) == []
    assert env.stat()["tables"] == {}


# -- Cursors -----------------------------------------------------------------------------


@pytest.fixture(params=["read", "write"])
def cursor_txn(request, env):
    fill(env, 100)
    txn = env.begin(write=request.param == "write")
    yield txn
    txn.abort()


def test_cursor_moves(cursor_txn):
    c = cursor_txn.cursor()
    assert c.key() == b"" and c.value() == b"" and c.item() == (b"", b"")
    assert c.first() and c.item() == (b"k00000", b"v0")
    assert c.next() and c.key() == b"k00001"
    assert c.prev() and c.prev() is False  # before the first: unpositioned
    assert c.key() == b""
    assert c.last() and c.key() == b"k00099"
    assert c.next() is False and c.key() == b""
    assert c.next() and c.key() == b"k00000"  # unpositioned: next() is first()
    c2 = cursor_txn.cursor()
    assert c2.prev() and c2.key() == b"k00099"  # unpositioned: prev() is last()
    assert c.set_key(b"k00050") and c.value() == b"v50"
    assert c.set_key(b"k00050x") is False and c.key() == b""
    assert c.set_range(b"k00050x") and c.key() == b"k00051"
    assert c.set_range(b"k") and c.key() == b"k00000"
    assert c.set_range(b"z") is False
    assert c.get(b"k00010") == b"v10" and c.key() == b"k00010"
    assert c.get(b"nope", b"dflt") == b"dflt"
    c.close()
    c.close()
    with pytest.raises(larch.Error, match="closed"):
        c.first()


def test_cursor_iteration(cursor_txn):
    c = cursor_txn.cursor()
    items = list(c)
    assert len(items) == 100 and items[0] == (b"k00000", b"v0") and items[-1][0] == b"k00099"
    assert [k for k, _ in items] == sorted(k for k, _ in items)
    assert c.set_key(b"k00097")
    assert list(c.iternext(values=False)) == [b"k00097", b"k00098", b"k00099"]
    assert c.set_key(b"k00002")
    assert list(c.iterprev(keys=False)) == [b"v2", b"v1", b"v0"]
    c = cursor_txn.cursor()
    assert [k for k in c.iterprev(values=False)][:2] == [b"k00099", b"k00098"]
    # A cursor moved during iteration: the iterator goes on from where it stands.
    c = cursor_txn.cursor()
    seen = []
    for k, _ in c:
        seen.append(k)
        if k == b"k00003":
            assert c.set_key(b"k00090")
    assert seen == [b"k00000", b"k00001", b"k00002", b"k00003"] + [b"k%05d" % i for i in range(91, 100)]
    assert list(cursor_txn.cursor(db=None).iternext()) == items


def test_cursor_iteration_over_many_batches(env):
    n = 5000
    fill(env, n)
    with env.begin() as txn:
        c = txn.cursor()
        keys = [k for k, _ in c]
        assert keys == [b"k%05d" % i for i in range(n)]
        back = list(txn.cursor().iterprev(values=False))
        assert back == keys[::-1]
        # Stopping part-way leaves the cursor at the last entry yielded.
        c = txn.cursor()
        it = c.iternext()
        for _ in range(300):
            k, v = next(it)
        assert c.key() == k == b"k00299"
        assert c.next() and c.key() == b"k00300"


def test_write_cursor_sees_the_transactions_writes(env):
    fill(env, 10)
    with env.begin(write=True) as txn:
        c = txn.cursor()
        assert c.first()
        txn.put(b"a", b"before everything")
        assert c.key() == b"k00000"
        assert c.prev() and c.key() == b"a"
        assert c.put(b"k00004x", b"new") and c.key() == b"k00004x"
        assert c.next() and c.key() == b"k00005"
        assert c.put(b"k00005", b"same", overwrite=False) is False
        assert c.delete() and c.key() == b"k00006"
        assert c.pop(b"k00001") == b"v1"
        assert c.replace(b"k00002", b"two") == b"v2"
        assert c.putmulti([(b"m1", b"1"), (b"m2", b"2"), (b"k00002", b"x")], overwrite=False) == (3, 2)
        keys = [k for k, _ in txn.cursor()]
        assert keys == [b"a", b"k00000", b"k00002", b"k00003", b"k00004", b"k00004x",
                        b"k00006", b"k00007", b"k00008", b"k00009", b"m1", b"m2"]
    with env.begin() as txn:
        c = txn.cursor()
        with pytest.raises(larch.ReadonlyError):
            c.put(b"k", b"v")
        with pytest.raises(larch.ReadonlyError):
            c.delete()
        assert c.delete is not None


def test_cursor_on_an_ended_transaction_raises(env):
    fill(env, 5)
    txn = env.begin()
    c = txn.cursor()
    txn.abort()
    with pytest.raises(larch.Error, match="ended"):
        c.first()
    with pytest.raises(larch.Error, match="ended"):
        txn.cursor()


def test_cursor_constructor_and_context_manager(env):
    t = env.open_db(b"t")
    fill(env, 3, db=t)
    with env.begin() as txn:
        with larch.Cursor(t, txn) as c:
            assert c.first() and c.key() == b"k00000"
            assert c.txn is txn
        with pytest.raises(larch.Error):
            c.key()


# -- Buffers -----------------------------------------------------------------------------


def test_buffers_are_zero_copy_views_that_outlive_the_transaction(env):
    fill(env, 100)
    with env.begin(buffers=True) as txn:
        v = txn.get(b"k00042")
        assert isinstance(v, memoryview) and v.readonly and bytes(v) == b"v42"
        c = txn.cursor()
        c.set_key(b"k00007")
        k, val = c.item()
        assert isinstance(k, memoryview) and bytes(k) == b"k00007"
        items = [(bytes(a), bytes(b)) for a, b in c.iternext()]
        assert items[0] == (b"k00007", b"v7") and len(items) == 93
        with pytest.raises(TypeError):
            v[0] = 1
        assert bytes(v[1:]) == b"42"
    # The views keep their snapshot: readable after the transaction, writes, and close.
    with env.begin(write=True) as w:
        for i in range(100):
            w.put(b"k%05d" % i, b"overwritten")
    env.close()
    assert bytes(v) == b"v42" and bytes(k) == b"k00007" and bytes(val) == b"v7"
    # A view made from the exporter itself exports nothing.
    assert bytes(memoryview(v.obj)) == b""


def test_buffers_in_a_write_transaction_are_copies(env):
    with env.begin(write=True, buffers=True) as txn:
        txn.put(b"k", b"first")
        v = txn.get(b"k")
        txn.put(b"k", b"second")
        assert isinstance(v, memoryview) and bytes(v) == b"first"


def test_frames(tmp_path):
    """A handle with frames reads and writes its pages there (``stat()`` shows what they
    hold, within what was asked), and the file reads the same without them after a reopen."""
    n = 3000
    path = str(tmp_path / "frames")
    env = larch.open(path, durability=larch.NONE, frames_bytes=64 << 20)
    for i in range(n):
        with env.begin(write=True) as txn:
            txn.put(b"k%08d" % i, b"%015d" % i)
    env.close()
    # Reopened, every record is in the tree, which readers read through the frames.
    env = larch.open(path, frames_bytes=64 << 20)
    with env.begin() as txn:
        assert all(bytes(txn.get(b"k%08d" % i)) == b"%015d" % i for i in range(n))
    s = env.stat()
    assert 0 < s["frames_bytes"] <= 64 << 20
    # Whole huge pages, within the frames; the last may hold pages past the file's end, so
    # it may be more than the pages loaded (none may be moved yet).
    assert s["frames_huge_bytes"] % (2 << 20) == 0
    assert s["frames_huge_bytes"] <= 64 << 20
    env.close()
    env = larch.open(path, frames_bytes=0)
    assert env.stat()["frames_bytes"] == 0
    with env.begin() as txn:
        assert all(bytes(txn.get(b"k%08d" % i)) == b"%015d" % i for i in range(n))
    env.close()


def test_readers_pin_the_overlays_they_started_from(tmp_path):
    """A reader held while checkpoints merge the overlays of its snapshot keeps them: stat()
    counts them apart (`pinned_overlay_bytes`, within `overlay_bytes`), and the reader still
    reads its snapshot."""
    env = larch.open(str(tmp_path / "db"), durability=larch.NONE, memory_budget=4 << 20)
    value = b"v" * 1024
    for i in range(500):
        with env.begin(write=True) as txn:
            txn.put(b"k%08d" % i, value)
    reader = env.begin()
    before = env.stat()["checkpoints"]
    i = 500
    while env.stat()["checkpoints"] < before + 4:
        with env.begin(write=True) as txn:
            txn.put(b"k%08d" % (i % 4000), value)
        i += 1
    s = env.stat()
    assert 0 < s["pinned_overlay_bytes"] <= s["overlay_bytes"]
    assert bytes(reader.get(b"k%08d" % 499)) == value
    assert reader.get(b"k%08d" % 500) is None
    reader.abort()
    env.close()


def test_memory_budget_and_log_room(tmp_path):
    """A small memory budget makes checkpoints of what it holds (more than the default's
    for the same writes), a room of the log's own makes fewer of them durable, and neither
    loses a record, before or after a reopen; a room larger than the log is refused."""
    n = 6000
    value = b"v" * 1024

    def run(name, **options):
        path = str(tmp_path / name)
        env = larch.open(path, durability=larch.NONE, **options)
        for i in range(n):
            with env.begin(write=True) as txn:
                txn.put(b"k%08d" % (i * 7919 % n), b"%015d" % i + value[15:])
        s = env.stat()
        assert s["entries"] == n
        assert s["durable_checkpoints"] <= s["checkpoints"]
        # The log's ring has at least the room asked for; its file grows as records reach it.
        assert s["log_room_bytes"] >= options.get("log_room_bytes", 1)
        assert s["log_file_bytes"] > 0
        env.close()
        env = larch.open(path, **options)
        with env.begin() as txn:
            for i in range(n):
                got = txn.get(b"k%08d" % (i * 7919 % n))
                assert got is not None and got[:15] == b"%015d" % i and len(got) == 1024
        env.close()
        return s["checkpoints"]

    default = run("default")
    budget = run("budget", memory_budget=4 << 20)
    room = run("room", memory_budget=4 << 20, log_room_bytes=64 << 20)
    assert budget > default and room > default
    with pytest.raises(larch.InvalidParameterError, match="log_room_bytes"):
        larch.open(str(tmp_path / "too-large"), log_room_bytes=1 << 40)
