"""Reading a file of an operation's base version, which garbage collection may delete.

A row operation (upsert, delete_where, update_where) plans on its handle's version and then
reads the files it matched. When a newer version removed such a file and garbage
collection (retention 0) ran in between, the file is gone although nothing is corrupted:
the operation's base went stale, as when it loses a commit race. The reader then re-checks
the current state: a file the newest version still references is really missing
(MetadataCorrupted stays); otherwise :class:`BaseCollected`, a CommitConflict: upsert runs
again by itself on the newest version, delete_where and update_where raise it (the caller
chose the predicate for the version it read). The same holds when the operation's plan
meets the expiry first, e.g. an index piece of its version collected (:func:`base_reads`).
A plain read of such a version (``Dataset.read``/``scan`` on a handle GC expired) raises
VersionExpired the same way (:func:`version_collected`). Where the reads ran elsewhere and
their error arrives as text only (Spark tasks), :func:`collected_base` asks the store.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

import pyarrow as pa

from parquetry.dataset.plan import PlannedFile
from parquetry.dataset.read import DataFileMissing, read_whole_file
from parquetry.errors import (
    CommitConflict,
    InvalidFormat,
    MetadataCorrupted,
    NotFound,
    VersionExpired,
)
from parquetry.parquet.footer_memo import FooterMemo

if TYPE_CHECKING:
    from parquetry.dataset.reading import VersionReader as Dataset

__all__ = [
    "SMALL_FILE_BYTES",
    "BaseCollected",
    "base_reads",
    "collected_base",
    "read_base_file",
    "version_collected",
    "version_expired",
]


class BaseCollected(CommitConflict):
    """A file of the operation's base version was garbage collected while it ran (a newer
    version no longer references it): nothing is committed, running again is safe."""


def _newest_keys(ds: Dataset) -> tuple[int, set[str]]:
    from parquetry.dataset.dataset import Dataset

    newest = Dataset.open(ds.store, ds.uuid, decryption=ds._decryption)
    return newest.version, _version_keys(newest)


def _version_keys(ds: Dataset) -> set[str]:
    """The data files and index pieces of ``ds``'s version (what GC may collect)."""
    doc = ds.document
    keys = {key for files in doc.partitions.values() for key in files.values()}
    for state in doc.index_states.values():
        keys |= state.piece_keys()
    return keys


#: Files of at most this many bytes are read by one GET when a footer memo is given
#: (:func:`read_base_file`): the encoded bytes are held while they are decoded, which a
#: large file, read column chunk by column chunk, does not need.
SMALL_FILE_BYTES = 4 << 20


def read_base_file(
    ds: Dataset,
    planned: PlannedFile,
    operation: str,
    columns: Sequence[str] | None = None,
    memo: FooterMemo | None = None,
) -> pa.Table:
    """``ds.read_file(planned, columns)``; a missing file the newest version no longer
    references raises :class:`BaseCollected` naming it (see the module docstring).

    ``memo``: a small file (every column, unencrypted dataset) is read with one GET and its
    footer decoded through the memo's templates, then checked as every read checks it
    (:func:`~parquetry.dataset.read.read_whole_file`): a row operation's per-file cost."""
    try:
        if memo is not None and _small(ds, planned, columns):
            data = _get_whole(ds, planned)
            names = ds.schema.names
            tables = read_whole_file(ds.store, ds.schema, planned, names, data=data, memo=memo)
            return tables[0] if len(tables) == 1 else pa.concat_tables(tables)
        return ds._read_planned(planned, columns)
    except MetadataCorrupted as exc:
        if exc.key != planned.key:
            raise
        number, keys = _newest_keys(ds)
        if planned.key in keys:
            raise  # the newest version needs it: really missing
        what = f"data file {planned.key} (partition {planned.label!r})"
        raise _collected(ds, what, planned.key, operation, number) from None


def _get_whole(ds: Dataset, planned: PlannedFile) -> bytes:
    """The file's bytes, which must be as many as the version records: a file of another
    size is not the one committed (the ranged read, which trusts the recorded size to find
    the footer, refuses it too)."""
    try:
        data = ds.store.get(planned.key)
    except NotFound:
        raise DataFileMissing(
            f"data file {planned.key} of partition {planned.label!r} is missing", key=planned.key
        ) from None
    if len(data) != planned.size:
        raise InvalidFormat(
            f"data file {planned.key} of partition {planned.label!r} is {len(data)} bytes, "
            f"the version records {planned.size}: it is not the file committed",
            key=planned.key,
        )
    return data


def _small(ds: Dataset, planned: PlannedFile, columns: Sequence[str] | None) -> bool:
    return bool(
        columns is None
        and ds._decryption is None
        and ds._doc.encryption is None
        and planned.size is not None
        and planned.size <= SMALL_FILE_BYTES
    )


@contextmanager
def base_reads(ds: Dataset, operation: str) -> Iterator[None]:
    """Around a row operation's reads of its base version ``ds`` (its plan, index lookups):
    the version expiring under them (VersionExpired, or a file or index piece the newest
    version no longer references gone) raises :class:`BaseCollected`, as a lost commit
    race does, instead of VersionExpired: the operation, not the caller's read, is stale."""
    try:
        yield
    except VersionExpired as exc:
        number, _ = _newest_keys(ds)
        raise _collected(ds, _what(ds, exc.key), exc.key, operation, number) from None
    except MetadataCorrupted as exc:
        if version_collected(ds, exc) is None:
            raise
        number, _ = _newest_keys(ds)
        raise _collected(ds, _what(ds, exc.key), exc.key, operation, number) from None


def collected_base(ds: Dataset, labels: Sequence[str], operation: str) -> BaseCollected | None:
    """:class:`BaseCollected` if ``ds``'s version was garbage collected under an operation
    that read the files of ``labels`` elsewhere and failed: one of those files is gone
    and the newest version no longer references it, or the version is a tombstone; None
    if the base is intact (the failure had another cause). One HEAD per file."""
    number, newest = _newest_keys(ds)
    for label in labels:
        for key in ds.document.partitions.get(label, {}).values():
            if key not in newest and not ds.store.exists(key):
                what = f"data file {key} (partition {label!r})"  # as read_base_file says
                return _collected(ds, what, key, operation, number)
    expired = version_expired(ds)
    if expired is not None:
        return _collected(ds, "a file", expired.key, operation, number)
    return None


def _what(ds: Dataset, key: str | None) -> str:
    if key is None:
        return "a file"
    data = {k for f in ds.document.partitions.values() for k in f.values()}
    return f"data file {key}" if key in data else f"index piece {key}"


def _collected(
    ds: Dataset, what: str, key: str | None, operation: str, number: int
) -> BaseCollected:
    return BaseCollected(
        f"dataset {ds.uuid!r}: {what} of version {ds.version}, which this {operation} read, "
        f"was garbage collected while it ran (the newest version, {number}, no longer "
        "references it); nothing is committed: run it again on the newest version",
        key=key,
        store=ds.store.url,
    )


def version_collected(ds: Dataset, exc: MetadataCorrupted) -> VersionExpired | None:
    """VersionExpired when ``exc`` (a data file or index piece of ``ds``'s version is
    missing) is due to garbage collection: the newest version no longer references it;
    else None."""
    key = exc.key
    if key is None or key not in _version_keys(ds):
        return None
    number, keys = _newest_keys(ds)
    if key in keys:
        return None  # the newest version needs it: really missing
    data = {k for f in ds.document.partitions.values() for k in f.values()}
    what = "data file" if key in data else "index piece"
    return VersionExpired(
        f"dataset {ds.uuid!r}: version {ds.version} was garbage collected while it was read "
        f"(its {what} {key} is gone; the newest version is {number}): open the dataset "
        "again to read the newest version",
        key=key,
        store=ds.store.url,
    )


def version_expired(ds: Dataset) -> VersionExpired | None:
    """VersionExpired when ``ds``'s version is a tombstone (one GET): garbage collection
    turns an expired version into one before it deletes the files only it referenced."""
    from parquetry.dataset.format2 import read_version
    from parquetry.dataset.naming import version_key

    if ds._foreign:
        return None  # a kartothek pointer has no version file of its own
    v = read_version(ds.store, ds.uuid, ds.version)
    if v is None or v[0] != "tombstone":
        return None
    return VersionExpired(
        f"dataset {ds.uuid!r}: version {ds.version} was garbage collected (its files may be "
        "gone): open the dataset again to read the newest version",
        key=version_key(ds.uuid, ds.version),
        store=ds.store.url,
    )
