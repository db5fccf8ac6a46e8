"""A writer process killed mid-stream: every commit it had acknowledged is there after."""

import os
import signal
import subprocess
import sys
import textwrap

import pytest

import larch

WRITER = textwrap.dedent(
    """
    import sys, larch
    path, durability, log = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
    env = larch.open(path, durability=durability, log=log)
    i = 0
    while True:
        with env.begin(write=True) as txn:
            txn.put(b"%08d" % i, b"value-%d" % i * 10)
            if i % 7 == 0:
                txn.delete(b"%08d" % (i // 2))
        # Acknowledged: the commit returned.
        sys.stdout.write("%d\\n" % i)
        sys.stdout.flush()
        i += 1
    """
)


@pytest.mark.parametrize("log", [False, True], ids=["pages", "log"])
@pytest.mark.parametrize("durability", ["immediate", "none"])
def test_a_killed_writer_loses_no_acknowledged_commit(tmp_path, durability, log):
    path = str(tmp_path / "db")
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, path, durability, "1" if log else "0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    acked = -1
    target = 300 if durability == "immediate" else 3000
    for line in proc.stdout:
        acked = int(line)
        if acked >= target:
            break
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    # Acknowledgements the writer printed before the kill that we had not read yet.
    rest = proc.stdout.read().split()
    if rest:
        acked = int(rest[-1])
    assert acked >= target

    env = larch.open(path)
    with env.begin() as txn:
        # The commit in flight at the kill may have landed too, unacknowledged.
        last = acked + 1 if txn.get(b"%08d" % (acked + 1)) is not None else acked
        deleted = {i // 2 for i in range(0, last + 1, 7)}
        for i in range(last + 1):
            v = txn.get(b"%08d" % i)
            if i in deleted:
                assert v is None, i
            else:
                assert v == b"value-%d" % i * 10, i
        assert txn.count() == last + 1 - len(deleted)
    assert env.verify()["problems"] == []
    env.close()
