import pytest

import larch


@pytest.fixture
def env(tmp_path):
    e = larch.open(str(tmp_path / "db"))
    yield e
    e.close()


def fill(env, n, db=None, prefix=b"k"):
    """Keys prefix + %05d, values b"v%d"."""
    with env.begin(write=True, db=db) as txn:
        for i in range(n):
            txn.put(prefix + b"%05d" % i, b"v%d" % i)
