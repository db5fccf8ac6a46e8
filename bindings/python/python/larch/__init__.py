"""Larch: an embedded, persistent, ACID key-value engine, with an API shaped like py-lmdb.

>>> import larch, tempfile
>>> env = larch.open(tempfile.mkdtemp())
>>> with env.begin(write=True) as txn:
...     txn.put(b"apple", b"red")
True
>>> with env.begin() as txn:
...     txn.get(b"apple")
b'red'
>>> env.close()

See the package README for where it differs from py-lmdb, and why.
"""

import os as _os

from ._errors import *  # noqa: F401,F403  (the exception classes)
from ._errors import __all__ as _error_names
from ._larch import (
    DATA_FILE,
    DEFAULT_TABLE,
    ENGINE_VERSION,
    VALUE_BYTES_MAX,
    Cursor,
    Environment,
    Savepoint,
    Table,
    Transaction,
)

__version__ = ENGINE_VERSION

#: DATA_FILE: the file in an environment's directory (``subdir=True``, the default) that
#: holds the database; the lock file and the log sit beside it (``data.larch-lock``,
#: ``data.larch-log``).

#: Durability levels, for ``open(durability=...)``, ``begin(durability=...)`` and
#: ``commit(durability=...)``.
IMMEDIATE = "immediate"
BOUNDED = "bounded"
NONE = "none"


def open(  # noqa: A001  (py-lmdb's name)
    path,
    map_size=None,
    subdir=True,
    readonly=False,
    metasync=True,
    sync=True,
    map_async=False,
    mode=0o755,
    create=True,
    readahead=None,
    writemap=False,
    meminit=True,
    max_readers=126,
    max_dbs=0,
    max_spare_txns=1,
    lock=True,
    *,
    durability=None,
    log=True,
    page_size=None,
    verify_checksums=False,
    compact_on_close=True,
    checkpoint_thread=True,
    memory_budget=None,
    log_room_bytes=None,
    frames_bytes=None,
):
    """Opens (by default creates) a database and returns its :class:`Environment`.

    ``path`` is a directory holding ``data.larch`` (``subdir=True``, created with ``mode`` if
    missing), or with ``subdir=False`` the database file itself.

    Larch's own options (keyword only):

    - ``durability``: what ``commit()`` waits for by default: ``"immediate"`` (durable when
      it returns), ``"bounded"`` (made durable by a background sync within 100 ms) or
      ``"none"`` (not synced: a process crash loses nothing, a power loss loses the commits
      since the last sync and never corrupts). ``sync=False`` means ``"none"``.
    - ``log``: commit through the write-ahead log (the default: one log append per small
      commit, the pages written at checkpoints); ``False`` writes pages at every commit.
    - ``page_size``: for a new database, a power of two from 4096 to 65536.
    - ``verify_checksums``: check every page's checksum on every read.
    - ``compact_on_close``: ``close()`` gives free space back to the file system.
    - ``checkpoint_thread``: with the log, checkpoints run on a thread of their own.
    - ``memory_budget``: with the log, the bytes the handle may hold for writes its tree does
      not have yet; beyond half of it the writer is slowed, at three quarters it waits for a
      checkpoint. None (the default): a quarter of the memory the process may use beyond 64
      MiB (its cgroup's limit or the machine's). Set it where the process shares that memory
      with more than the database. At least 4 MiB.
    - ``log_room_bytes``: with the log, bytes the log keeps as a room of its own, so that
      checkpoints are made durable only when it runs short: small random writes run faster,
      for that much more disk while the database is open. None (the default): the room the
      checkpoints call for, which keeps the open files near the data's size.
    - ``frames_bytes``: how much of the data file a writing handle may keep in memory of its
      own (frames) instead of reading it through the page cache, which makes point reads and
      scans of a file in memory faster. At most half the memory the process may use beyond
      64 MiB, whatever is asked; ``stat()["frames_bytes"]`` is what they hold. None (the
      default): that half; 0: no frames, the file read through its mapping of the page
      cache, which the kernel gives back under pressure.

    py-lmdb's arguments that have no counterpart are accepted and have no effect:
    ``map_size`` (the file grows and shrinks on its own), ``max_dbs`` (tables are not
    counted), ``max_readers`` (readers in this process are not counted; other processes
    have 126 slots), ``max_spare_txns``, ``metasync`` (one meta page per commit, synced with
    it), ``map_async``, ``writemap``, ``meminit`` and ``lock`` (Larch always locks: one
    writer at a time, across processes). ``readahead`` defaults to None, unlike py-lmdb's
    True: read ahead while the file fits in half the memory the process may use (it is read
    whole sooner or later), not beyond (B-tree pages are read in key order, not file order);
    True or False forces it either way.
    """
    del map_size, metasync, map_async, writemap, meminit, max_readers, max_dbs
    del max_spare_txns, lock
    path = _os.fspath(path)
    if isinstance(path, bytes):
        path = _os.fsdecode(path)
    if durability is None:
        durability = IMMEDIATE if sync else NONE
    if subdir:
        if not readonly and create:
            _os.makedirs(path, mode=mode, exist_ok=True)
        file = _os.path.join(path, DATA_FILE)
    else:
        file = path
    return Environment(
        path,
        file,
        readonly=readonly,
        create=create,
        durability=durability,
        log=log,
        page_size=page_size,
        readahead=readahead,
        verify_checksums=verify_checksums,
        compact_on_close=compact_on_close,
        checkpoint_thread=checkpoint_thread,
        memory_budget=memory_budget,
        log_room_bytes=log_room_bytes,
        frames_bytes=frames_bytes,
    )


__all__ = [
    "open",
    "Environment",
    "Transaction",
    "Cursor",
    "Savepoint",
    "Table",
    "DATA_FILE",
    "DEFAULT_TABLE",
    "VALUE_BYTES_MAX",
    "IMMEDIATE",
    "BOUNDED",
    "NONE",
    *_error_names,
]

from . import typed  # noqa: E402  (larch.typed: typed tables, after the names it uses)
