"""Threads: readers beside a committing writer, the GIL let go while waiting and committing."""

import threading

import larch


def test_readers_in_threads_see_consistent_snapshots_while_a_writer_commits(env):
    # The writer moves one unit between two keys per commit: every snapshot sums to 1000.
    with env.begin(write=True) as txn:
        txn.put(b"a", b"1000")
        txn.put(b"b", b"0")
    stop = threading.Event()
    failures, reads = [], [0]

    def reader():
        while not stop.is_set():
            with env.begin() as txn:
                a, b = int(txn.get(b"a")), int(txn.get(b"b"))
                if a + b != 1000:
                    failures.append((a, b))
                n = sum(1 for _ in txn.cursor())
                if n != 2:
                    failures.append(("entries", n))
            reads[0] += 1

    readers = [threading.Thread(target=reader) for _ in range(3)]
    for t in readers:
        t.start()
    for i in range(500):
        with env.begin(write=True) as txn:
            a, b = int(txn.get(b"a")), int(txn.get(b"b"))
            txn.put(b"a", b"%d" % (a - 1))
            txn.put(b"b", b"%d" % (b + 1))
    stop.set()
    for t in readers:
        t.join(30)
    assert failures == []
    assert reads[0] > 0
    with env.begin() as txn:
        assert (txn.get(b"a"), txn.get(b"b")) == (b"500", b"500")


def test_a_writer_waiting_for_another_threads_transaction_lets_the_gil_go(env):
    # If begin(write=True) waited holding the GIL, the first writer could never commit.
    first = env.begin(write=True)
    first.put(b"k", b"first")
    done = threading.Event()

    def second():
        with env.begin(write=True) as txn:
            assert txn.get(b"k") == b"first"
            txn.put(b"k", b"second")
        done.set()

    t = threading.Thread(target=second)
    t.start()
    assert not done.wait(0.2)
    first.commit()
    t.join(10)
    assert done.is_set()
    with env.begin() as txn:
        assert txn.get(b"k") == b"second"


def test_writers_in_several_threads_take_turns(env):
    def writer(n):
        for i in range(200):
            with env.begin(write=True) as txn:
                txn.put(b"t%d-%05d" % (n, i), b"v")

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    with env.begin() as txn:
        assert txn.count() == 800


def test_one_read_transaction_shared_by_threads(env):
    with env.begin(write=True) as txn:
        for i in range(3000):
            txn.put(b"%05d" % i, b"%d" % i)
    txn = env.begin(buffers=True)
    results = []

    def scan():
        c = txn.cursor()
        results.append(sum(int(bytes(v)) for _, v in c))

    threads = [threading.Thread(target=scan) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert results == [sum(range(3000))] * 4
    txn.abort()


def test_a_cursor_used_by_two_threads_at_once_is_an_error_not_a_wait(env):
    # Iteration fetches without the GIL while holding the cursor: a second thread calling the
    # same cursor meanwhile gets an error (never a deadlock). Run many times to meet it.
    with env.begin(write=True) as txn:
        for i in range(20000):
            txn.put(b"%06d" % i, bytes(10))
    txn = env.begin()
    c = txn.cursor()
    errors, counts = [], []

    def scan():
        n = 0
        try:
            for _ in c.iternext():
                n += 1
        except larch.Error as e:
            errors.append(str(e))
        counts.append(n)

    threads = [threading.Thread(target=scan) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert all("in use by another thread" in e for e in errors)
    assert len(counts) == 3
    txn.abort()
