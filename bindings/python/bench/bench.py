"""Larch beside py-lmdb from Python: the same workloads through each package's own API.

    python bench/bench.py [--num 1000000] [--runs 3] [--dir DIR] [--json FILE]

Records: 16-byte keys (the record number, big-endian, zero-padded), 100-byte values.
Workloads, each on a fresh database per engine and run:

- fillseq_batch:   keys in order, 1000 puts per write transaction (``append=True``)
- fillrandom_batch: keys in random order, 1000 puts per write transaction
- readrandom:      one get per key in random order, in one read transaction
- readseq:         a cursor over every record (``for key, value in txn.cursor()``)
- readseq_buffers: the same with ``buffers=True`` (zero-copy ``memoryview`` values)
- put_nosync:      one put per write transaction, commit not synced (a tenth of --num)
- put_sync:        one put per write transaction, each commit durable (1/500 of --num)
- put_sync_pages:  the same, Larch opened with ``log=False`` (every commit writes its pages
                   and syncs twice, as before the log was the default; py-lmdb as in put_sync)

Configurations (printed with the results): LMDB ``map_size`` 8 GiB, ``readahead=False``;
``sync=False`` for the not-synced commits (MDB_NOSYNC), the default ``sync=True`` for the
durable ones. Larch's defaults (commits through its log); ``durability="none"`` and ``"immediate"``.
The figure per workload is the median over the runs of the operations per second; the ratio
is Larch's over py-lmdb's.
"""

import argparse
import json
import os
import platform
import random
import shutil
import statistics
import sys
import tempfile
import time

import larch
import lmdb

VALUE = bytes(range(100))


def key(i):
    return b"%016d" % i


class Engine:
    def __init__(self, name, directory):
        self.name = name
        self.dir = directory

    def open(self, sync, pages=False):
        raise NotImplementedError


class Larch(Engine):
    config = "larch.open(dir, durability='none' | 'immediate'), readahead off (its default), the log on (its default) but in put_sync_pages"

    def open(self, sync, pages=False):
        return larch.open(self.dir, durability="immediate" if sync else "none", log=not pages)


class Lmdb(Engine):
    config = "lmdb.open(dir, map_size=8 GiB, readahead=False, sync=False | True)"

    def open(self, sync, pages=False):
        return lmdb.open(self.dir, map_size=8 << 30, readahead=False, sync=sync)


def fill(env, keys, append):
    start = time.perf_counter()
    for b in range(0, len(keys), 1000):
        with env.begin(write=True) as txn:
            for k in keys[b : b + 1000]:
                txn.put(k, VALUE, append=append)
    return len(keys) / (time.perf_counter() - start)


def puts(env, keys):
    start = time.perf_counter()
    for k in keys:
        with env.begin(write=True) as txn:
            txn.put(k, VALUE)
    return len(keys) / (time.perf_counter() - start)


def readrandom(env, keys):
    with env.begin() as txn:
        get = txn.get
        start = time.perf_counter()
        found = 0
        for k in keys:
            if get(k) is not None:
                found += 1
        elapsed = time.perf_counter() - start
    assert found == len(keys), (found, len(keys))
    return len(keys) / elapsed


def readseq(env, n, buffers):
    with env.begin(buffers=buffers) as txn:
        start = time.perf_counter()
        count = 0
        total = 0
        for _k, v in txn.cursor():
            count += 1
            total += len(v)
        elapsed = time.perf_counter() - start
    assert count == n and total == 100 * n, (count, total)
    return n / elapsed


def run_one(engine_cls, workload, num, base):
    d = tempfile.mkdtemp(dir=base)
    engine = engine_cls(engine_cls.__name__.lower(), d)
    try:
        ordered = [key(i) for i in range(num)]
        shuffled = ordered[:]
        random.Random(42).shuffle(shuffled)
        if workload == "fillseq_batch":
            env = engine.open(sync=False)
            r = fill(env, ordered, append=True)
        elif workload == "fillrandom_batch":
            env = engine.open(sync=False)
            r = fill(env, shuffled, append=False)
        elif workload in ("readrandom", "readseq", "readseq_buffers"):
            env = engine.open(sync=False)
            fill(env, ordered, append=True)
            if workload == "readrandom":
                r = readrandom(env, shuffled)
            else:
                r = readseq(env, num, workload == "readseq_buffers")
        elif workload == "put_nosync":
            env = engine.open(sync=False)
            r = puts(env, shuffled[: max(1, num // 10)])
        elif workload in ("put_sync", "put_sync_pages"):
            env = engine.open(sync=True, pages=workload == "put_sync_pages")
            r = puts(env, shuffled[: max(1, num // 500)])
        else:
            raise ValueError(workload)
        env.close()
        return r
    finally:
        shutil.rmtree(d, ignore_errors=True)


WORKLOADS = [
    "fillseq_batch",
    "fillrandom_batch",
    "readrandom",
    "readseq",
    "readseq_buffers",
    "put_nosync",
    "put_sync",
    "put_sync_pages",
]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--num", type=int, default=1_000_000)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--dir", default=None, help="where the databases go (default: a temporary directory)")
    p.add_argument("--workloads", default=",".join(WORKLOADS))
    p.add_argument("--json", default=None, help="also write every measurement here")
    a = p.parse_args()
    base = a.dir or tempfile.mkdtemp(prefix="larch-pybench-")
    os.makedirs(base, exist_ok=True)
    print(f"python {platform.python_version()}, larch {larch.__version__}, lmdb {lmdb.__version__} "
          f"(LMDB {'.'.join(map(str, lmdb.version()))}), {a.num} records, {a.runs} runs, median ops/s")
    print(f"  larch: {Larch.config}")
    print(f"  lmdb:  {Lmdb.config}")
    print(f"  databases in {base}")
    rows = []
    print(f"| workload | larch ops/s | py-lmdb ops/s | larch / py-lmdb |")
    print(f"| --- | ---: | ---: | ---: |")
    for w in a.workloads.split(","):
        figures = {}
        for run in range(a.runs):
            # Alternate which engine goes first, so that neither always meets a warmer cache.
            order = [Larch, Lmdb] if run % 2 == 0 else [Lmdb, Larch]
            for cls in order:
                figures.setdefault(cls.__name__, []).append(run_one(cls, w, a.num, base))
        lm = statistics.median(figures["Larch"])
        ld = statistics.median(figures["Lmdb"])
        rows.append({"workload": w, "larch": figures["Larch"], "lmdb": figures["Lmdb"],
                     "larch_median": lm, "lmdb_median": ld, "ratio": lm / ld})
        print(f"| {w} | {lm:,.0f} | {ld:,.0f} | {lm / ld:.2f}x |", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
    if not a.dir:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
