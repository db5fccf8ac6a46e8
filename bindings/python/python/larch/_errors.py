"""The exceptions Larch raises, in one hierarchy under :class:`Error`.

Every name py-lmdb defines is here, so that code written for it (``except
lmdb.MapFullError:``) still runs after ``import larch as lmdb``. Where LMDB and Larch have the
same case, Larch raises py-lmdb's class or a subclass of it: ``NotFoundError``,
``CorruptedError``, ``ReadonlyError``, ``BadValsizeError`` (``KeyTooLargeError``,
``ValueTooLargeError``), ``BadTxnError``, ``LockError``, ``ReadersFullError``,
``InvalidError``, ``VersionMismatchError``, ``InvalidParameterError``, ``PanicError``
(``PoisonedError``), ``MapFullError`` (``DatabaseFullError``), ``DiskError`` (``IoError``,
``DiskFullError``). The others name limits Larch does not have (a map size, a count of
databases, of dirty pages, of thread-local slots), duplicate-key features, or LMDB internals;
Larch never raises them: ``KeyExistsError``, ``PageNotFoundError``, ``DbsFullError``,
``TlsFullError``, ``TxnFullError``, ``CursorFullError``, ``PageFullError``,
``MapResizedError``, ``IncompatibleError``, ``BadDbiError``, ``BadRslotError``,
``MemoryError`` (Python raises its own).

Some also derive from the built-in exception a Python caller would catch for that case: the
size errors and bad parameters are ``ValueError``s, the I/O errors ``OSError``s (with
``errno`` and ``filename``; ``FileExistsError`` and ``FileNotFoundError`` where Python's
``open`` would raise those). Each carries the engine's message.
"""


class Error(Exception):
    """Base of every exception Larch raises."""


class NotFoundError(Error, KeyError):
    """A table does not exist (``open_db(create=False)``, ``db=`` of a deleted table)."""

    def __str__(self):  # KeyError would quote the message
        return Exception.__str__(self)


class TableExistsError(Error):
    """A table was created under a name that exists."""


class CorruptedError(Error):
    """The file or its log is damaged: a checksum or a structural check failed."""


class InvalidError(Error):
    """The file is not a Larch database."""


class VersionMismatchError(Error):
    """The file was written by a newer version of Larch."""


class LockError(Error):
    """Another Environment in this process has the database open for writing (writers in
    other processes take turns instead), or its lock file belongs to something else."""


class BusyError(LockError):
    """The write transaction is taken: ``begin(write=True, wait=False)`` found another one
    running (in this process, or a writer in another process holds the database), or this
    thread already has one open."""


class ReadersFullError(Error):
    """Every slot of the lock file's reader table is taken by read-only handles."""


class ReadonlyError(Error):
    """A write on a read-only environment or in a read transaction."""


class BadValsizeError(Error, ValueError):
    """A key or value is too large (py-lmdb's name)."""


class KeyTooLargeError(BadValsizeError):
    """A key is longer than ``Environment.max_key_size()``."""


class ValueTooLargeError(BadValsizeError):
    """A value is longer than ``larch.VALUE_BYTES_MAX``."""


class InvalidParameterError(Error, ValueError):
    """An argument is out of range: a table name, an option, a py-lmdb flag Larch has no
    counterpart for."""


class AppendOrderError(InvalidParameterError):
    """``put(append=True)`` was given a key not greater than the table's last key."""


class BadTxnError(Error):
    """An operation of the write transaction failed part-way: it can only be aborted."""


class PanicError(Error):
    """py-lmdb's name for a fatal error of the environment (LMDB's ``MDB_PANIC``)."""


class PoisonedError(PanicError):
    """A write or sync failed after a commit started reaching the disk: the environment
    refuses writes; reopen it to go on from the last durable commit."""


class DiskError(Error, OSError):
    """py-lmdb's name for an I/O error (``EIO``): the base of Larch's I/O errors."""


class DiskFullError(DiskError):
    """The device is full. Nothing of the failed transaction is visible; earlier commits are
    intact, and writes succeed again once space is freed."""


class MapFullError(Error):
    """py-lmdb's name for a full map. Larch has no map size; it raises the subclass
    :class:`DatabaseFullError` at the largest file it addresses."""


class DatabaseFullError(MapFullError):
    """The file would exceed the largest page count Larch addresses."""


class IoError(DiskError):
    """An I/O error with no more specific class (``errno``, ``filename``)."""


class ExistsError(IoError, FileExistsError):
    """A file Larch would create exists (``EEXIST``): the target of ``copy``."""


class MissingError(IoError, FileNotFoundError):
    """A file Larch needs does not exist (``ENOENT``)."""


# py-lmdb's names for cases Larch never raises (see the module's text).


class KeyExistsError(Error):
    """LMDB's ``MDB_KEYEXIST``; Larch's ``put(overwrite=False)`` returns False instead."""


class PageNotFoundError(Error):
    """LMDB's ``MDB_PAGE_NOTFOUND``; Larch raises :class:`CorruptedError`."""


class DbsFullError(Error):
    """LMDB's ``max_dbs`` reached; Larch does not count tables."""


class TlsFullError(Error):
    """LMDB's thread-local slots full; Larch has none."""


class TxnFullError(Error):
    """LMDB's dirty-page limit of a transaction; Larch has none."""


class CursorFullError(Error):
    """LMDB's cursor stack limit (internal)."""


class PageFullError(Error):
    """LMDB's page full (internal)."""


class MapResizedError(Error):
    """LMDB's map grown by another process; Larch has no map size."""


class IncompatibleError(Error):
    """LMDB's database flags changed; Larch tables have none."""


class BadDbiError(Error):
    """LMDB's database handle changed; Larch raises :class:`NotFoundError` for a dropped
    table."""


class BadRslotError(Error):
    """LMDB's reader slot misuse; Larch's slots are its own."""


class MemoryError(Error):  # noqa: A001  (py-lmdb's name)
    """LMDB's ``ENOMEM``; Python raises its built-in ``MemoryError``."""


class InternalError(Error):
    """Larch broke one of its own invariants: a bug, please report it with the message."""


__all__ = [name for name, value in list(globals().items()) if isinstance(value, type)]
