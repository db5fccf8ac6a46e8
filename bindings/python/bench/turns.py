"""Writers in several processes taking turns, Larch beside py-lmdb, through each package's own
API: PROCS processes (forked, each opening its own environment) each make TXNS durable write
transactions as fast as they can, all incrementing one counter, so that the database changes
hands at most transactions; the same transactions in one process are the baseline.

    python bench/turns.py [--procs 2] [--txns 2000] [--runs 3] [--dir DIR]

Configurations: LMDB ``map_size`` 1 GiB, its default ``sync=True``; Larch's defaults. Prints
the median over the runs of the microseconds per transaction, in turns and alone.
"""

import argparse
import importlib
import multiprocessing
import shutil
import statistics
import struct
import tempfile
import time


def work(module, path, txns):
    m = importlib.import_module(module)
    env = m.open(path, map_size=1 << 30) if module == "lmdb" else m.open(path)
    for _ in range(txns):
        with env.begin(write=True) as txn:
            count = struct.unpack(">Q", txn.get(b"count") or bytes(8))[0]
            txn.put(b"count", struct.pack(">Q", count + 1))
    env.close()


def count(module, path):
    m = importlib.import_module(module)
    env = m.open(path, map_size=1 << 30) if module == "lmdb" else m.open(path)
    with env.begin() as txn:
        value = struct.unpack(">Q", txn.get(b"count"))[0]
    env.close()
    return value


def run(module, procs, txns, root):
    ctx = multiprocessing.get_context("fork")
    alone = tempfile.mkdtemp(dir=root)
    started = time.monotonic()
    work(module, alone, procs * txns)
    one = time.monotonic() - started
    shared = tempfile.mkdtemp(dir=root)
    started = time.monotonic()
    workers = [ctx.Process(target=work, args=(module, shared, txns)) for _ in range(procs)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
        assert w.exitcode == 0, f"{module}: a writer process failed"
    turns = time.monotonic() - started
    assert count(module, shared) == procs * txns
    per = 1e6 / (procs * txns)
    return turns * per, one * per


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--procs", type=int, default=2)
    p.add_argument("--txns", type=int, default=2000)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--dir", default=None)
    a = p.parse_args()
    root = tempfile.mkdtemp(dir=a.dir)
    try:
        for module in ("lmdb", "larch"):
            results = [run(module, a.procs, a.txns, root) for _ in range(a.runs)]
            turns = statistics.median(r[0] for r in results)
            alone = statistics.median(r[1] for r in results)
            print(
                f"{module}: {a.procs} processes x {a.txns} transactions: {turns:.0f} us a "
                f"transaction in turns, {alone:.0f} us in one process (medians of {a.runs})"
            )
    finally:
        shutil.rmtree(root)


if __name__ == "__main__":
    main()
