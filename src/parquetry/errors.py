"""The one error tree of parquetry.

Every error raised on purpose derives from :class:`ParquetryError`. Where a builtin fits,
the error inherits it too, so ``except FileNotFoundError`` keeps working for callers that
do not know parquetry. Errors carry structured attributes (``key``, ``store``, ...) and a
message that names the thing at fault. Backend SDK exceptions are translated inside the
backend module that raised them, never matched by message text elsewhere.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "AlreadyExists",
    "CapabilityNotSupported",
    "ChangeCommitError",
    "CodecNotStreamable",
    "CommitConflict",
    "DatasetDeleted",
    "DatasetIncomplete",
    "DatasetNotFound",
    "EncryptionError",
    "InvalidArgument",
    "InvalidFormat",
    "IntentExpired",
    "InvalidKey",
    "ManifestCorrupted",
    "MetadataCorrupted",
    "NotFound",
    "ParquetryError",
    "ParquetryWarning",
    "PointerCorruptedWarning",
    "PreconditionFailed",
    "PredicateError",
    "ReplaceConditionViolated",
    "ResourceExhausted",
    "SchemaMismatch",
    "SchemaViolation",
    "SpillFailed",
    "StoreUnavailable",
    "UnknownColumn",
    "UnsafePath",
    "VersionExpired",
    "VersionNotFound",
]


class ParquetryError(Exception):
    """Root of every error parquetry raises on purpose.

    Args:
        message: Human-readable message; it names the key, file or field at fault.
        key: The store key involved, if any.
        store: A printable (secret-free) description of the store involved, if any.
    """

    def __init__(self, message: str = "", *, key: str | None = None, store: str | None = None):
        super().__init__(message)
        self.message = message
        self.key = key
        self.store = store

    def __str__(self) -> str:
        return self.message

    def __reduce__(self) -> tuple[Any, ...]:
        # Errors cross process boundaries (Spark executors, multiprocessing tests): keep
        # keyword attributes through pickling.
        return (_rebuild_error, (type(self), self.message, dict(self.__dict__)))


def _rebuild_error(cls: type[ParquetryError], message: str, state: dict[str, Any]) -> Any:
    err = cls.__new__(cls)
    Exception.__init__(err, message)
    err.__dict__.update(state)
    return err


# --- store layer -------------------------------------------------------------------------


class NotFound(ParquetryError, FileNotFoundError):
    """The key (or dataset) does not exist."""


class AlreadyExists(ParquetryError, FileExistsError):
    """A create-if-absent write found the key already present."""


class PreconditionFailed(ParquetryError):
    """A compare-and-swap lost: the object's version is not the expected one."""

    def __init__(
        self,
        message: str = "",
        *,
        key: str | None = None,
        store: str | None = None,
        expected: str | None = None,
        found: str | None = None,
    ):
        super().__init__(message, key=key, store=store)
        self.expected = expected
        self.found = found


class CapabilityNotSupported(ParquetryError, NotImplementedError):
    """The store lacks a capability the operation needs; raised before any I/O."""

    def __init__(self, message: str = "", *, capability: str, store: str | None = None):
        super().__init__(message, store=store)
        self.capability = capability


class InvalidKey(ParquetryError, ValueError):
    """A store key is malformed (``..``, empty segment, NUL, leading ``/``...)."""


class UnsafePath(InvalidKey):
    """A key of a local store crosses a symbolic link (or names a special file) inside the
    store's root: following it could read, write or delete outside the root, so it is
    refused."""


class ResourceExhausted(ParquetryError, MemoryError):
    """The process ran out of memory or could not start a thread: the data and the dataset
    are not at fault and were left as they were; retry with more memory or less work."""


def resource_failure(
    exc: BaseException, doing: str, key: str | None = None
) -> ResourceExhausted | None:
    """The :class:`ResourceExhausted` for a failed allocation (pyarrow's ArrowMemoryError is a
    ``MemoryError``) or a thread that could not start, or None for any other failure.

    Why: catch-alls around pyarrow calls would otherwise report a malloc failure as a corrupt
    file, and a user who believes it may delete good data."""
    if isinstance(exc, ParquetryError):
        return None
    if isinstance(exc, MemoryError):
        detail = str(exc).splitlines()[0][:200] if str(exc) else "out of memory"
        return ResourceExhausted(f"{doing}: out of memory ({detail})", key=key)
    if isinstance(exc, RuntimeError) and "can't start new thread" in str(exc):
        return ResourceExhausted(
            f"{doing}: cannot start a thread (the process is at its thread or memory limit)",
            key=key,
        )
    return None


def out_of_memory(exc: MemoryError, doing: str, key: str | None = None) -> MemoryError:
    """``exc`` as a :class:`ResourceExhausted` naming the work (itself if it already is one):
    for ``except MemoryError`` clauses placed before catch-alls that blame the bytes."""
    if isinstance(exc, ParquetryError):
        return exc
    return resource_failure(exc, doing, key) or exc


class StoreUnavailable(ParquetryError, OSError):
    """The store could not be reached or answered with an unexpected error."""


class InvalidArgument(ParquetryError, ValueError):
    """An argument is out of range or of the wrong kind; raised before any I/O."""


class SpillFailed(ParquetryError, OSError):
    """Local scratch space could not be used: the directory to spill to (an external sort
    past memory) could not be created in the temporary directory, or a file in it could not
    be written. The dataset is not at fault and was left as it was; point ``TMPDIR`` at a
    writable directory with room and retry.

    Args:
        path: The directory (or file) that could not be created or written.
        reason: The operating system's answer (``Permission denied``, ``Not a directory``).
    """

    def __init__(self, message: str = "", *, path: str | None = None, reason: str = ""):
        super().__init__(message)
        self.path = path
        self.reason = reason


# --- parquet file layer ------------------------------------------------------------------


class SchemaViolation(ParquetryError, ValueError):
    """A schema is invalid, or a record does not fit the schema."""

    def __init__(
        self,
        message: str = "",
        *,
        field: str | None = None,
        index: int | None = None,
        key: str | None = None,
    ):
        super().__init__(message, key=key)
        self.field = field
        self.index = index


class InvalidFormat(ParquetryError, ValueError):
    """Bytes that should be a Parquet file are not (empty, truncated, corrupt footer...)."""


class CodecNotStreamable(ParquetryError):
    """The codec cannot stream the requested way."""


class EncryptionError(ParquetryError):
    """Encrypted columns cannot be read or written (missing keys, KMS failure)."""

    def __init__(
        self,
        message: str = "",
        *,
        columns: tuple[str, ...] = (),
        key: str | None = None,
    ):
        super().__init__(message, key=key)
        self.columns = columns


class UnknownColumn(ParquetryError, KeyError):
    """A requested column is not in the schema."""

    def __init__(self, message: str = "", *, column: str, key: str | None = None):
        super().__init__(message, key=key)
        self.column = column

    def __str__(self) -> str:  # KeyError would otherwise repr() the message
        return self.message


class SchemaMismatch(ParquetryError, ValueError):
    """Data does not match the dataset's schema."""


# --- dataset layers ----------------------------------------------------------------------


class DatasetIncomplete(ParquetryError):
    """A snapshot dataset lacks ``_SUCCESS`` or a part its manifest lists."""


class ManifestCorrupted(ParquetryError):
    """A manifest exists but cannot be parsed or is structurally invalid."""

    def __init__(
        self,
        message: str = "",
        *,
        reason: str = "",
        key: str | None = None,
        store: str | None = None,
    ):
        super().__init__(message, key=key, store=store)
        self.reason = reason or message


class DatasetNotFound(NotFound):
    """No dataset with that uuid (or version) exists in the store."""


class VersionExpired(DatasetNotFound):
    """A version a change feed or stream needs was garbage collected (its entry is a
    tombstone, or a file it added is gone): the reader fell behind the retention."""


class VersionNotFound(DatasetNotFound):
    """A version a change feed or stream asks for is not written yet (or never was)."""


class ChangeCommitError(ParquetryError):
    """A stream met a commit that removed or rewrote rows (overwrite, update, delete,
    upsert) and was not told to skip or re-emit such commits."""


class MetadataCorrupted(ParquetryError):
    """Dataset metadata (kartothek v4 document, version document, index) is invalid."""


class CommitConflict(ParquetryError):
    """A concurrent commit changed what this commit depends on; retries exhausted."""


class IntentExpired(CommitConflict):
    """The write intent of a commit expired and garbage collection reaped it (its files may
    be gone), or a file the commit would reference is missing: nothing was committed."""


class DatasetDeleted(CommitConflict):
    """The dataset a commit builds on was deleted (and maybe created again) meanwhile."""


class PredicateError(ParquetryError, ValueError):
    """A predicate is malformed or its value does not fit the column's type."""

    def __init__(
        self,
        message: str = "",
        *,
        column: str | None = None,
        op: str | None = None,
    ):
        super().__init__(message)
        self.column = column
        self.op = op


class ReplaceConditionViolated(InvalidArgument):
    """Rows written by a replace (``replaceWhere``) do not all satisfy its predicate."""

    def __init__(self, message: str = "", *, predicate: str | None = None):
        super().__init__(message)
        self.predicate = predicate


# --- warnings ----------------------------------------------------------------------------


class ParquetryWarning(UserWarning):
    """Root of the warnings parquetry emits (something was off, but the operation worked)."""


class PointerCorruptedWarning(ParquetryWarning):
    """The pointer (kartothek metadata file) is unreadable; the newest readable version
    document was used instead (``Dataset.repair`` rewrites the pointer)."""
