"""The exceptions Larch raises, in one hierarchy under :class:`Error`.

The names follow py-lmdb's where LMDB has the same case (``NotFoundError``,
``CorruptedError``, ``ReadonlyError``, ``BadValsizeError``, ``BadTxnError``, ...). Some also
derive from the built-in exception a Python caller would catch for that case: the size
errors and bad parameters are ``ValueError``s, the I/O errors ``OSError``s (with ``errno``
and ``filename``). Each carries the engine's message.
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
    """Another process (or another Environment in this one) has the database open for
    writing, or its lock file belongs to something else."""


class BusyError(LockError):
    """The write transaction is taken: ``begin(write=True, wait=False)`` found another one
    running, or this thread already has one open."""


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


class PoisonedError(Error):
    """A write or sync failed after a commit started reaching the disk: the environment
    refuses writes; reopen it to go on from the last durable commit."""


class DiskFullError(Error, OSError):
    """The device is full. Nothing of the failed transaction is visible; earlier commits are
    intact, and writes succeed again once space is freed."""


class DatabaseFullError(Error):
    """The file would exceed the largest page count Larch addresses."""


class IoError(Error, OSError):
    """An I/O error with no more specific class (``errno``, ``filename``)."""


class InternalError(Error):
    """Larch broke one of its own invariants: a bug, please report it with the message."""


__all__ = [name for name, value in list(globals().items()) if isinstance(value, type)]
