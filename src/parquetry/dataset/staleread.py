"""Reading a file of an operation's base version, which garbage collection may delete.

A row operation (upsert, delete_where, update_where) plans on its handle's version and then
reads the files it matched. When a newer version removed such a file and garbage
collection (retention 0) ran in between, the file is gone although nothing is corrupted:
the operation's base went stale, as when it loses a commit race. The reader then re-checks
the current state: a file the newest version still references is really missing
(MetadataCorrupted stays); otherwise :class:`BaseCollected`, a retryable CommitConflict.
A plain read of such a version (``Dataset.read``/``scan`` on a handle GC expired) raises
VersionExpired the same way (:func:`version_collected`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import pyarrow as pa

from parquetry.dataset.plan import PlannedFile
from parquetry.errors import CommitConflict, MetadataCorrupted, VersionExpired

if TYPE_CHECKING:
    from parquetry.dataset.reading import VersionReader as Dataset

__all__ = ["BaseCollected", "read_base_file", "version_collected", "version_expired"]


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


def read_base_file(
    ds: Dataset, planned: PlannedFile, operation: str, columns: Sequence[str] | None = None
) -> pa.Table:
    """``ds.read_file(planned, columns)``; a missing file the newest version no longer
    references raises :class:`BaseCollected` naming it (see the module docstring)."""
    try:
        return ds._read_planned(planned, columns)
    except MetadataCorrupted as exc:
        if exc.key != planned.key:
            raise
        number, keys = _newest_keys(ds)
        if planned.key in keys:
            raise  # the newest version needs it: really missing
        raise BaseCollected(
            f"dataset {ds.uuid!r}: data file {planned.key} (partition {planned.label!r}) of "
            f"version {ds.version}, which this {operation} read, was garbage collected while "
            f"it ran (the newest version, {number}, no longer references it); nothing is "
            f"committed: run it again on the newest version",
            key=planned.key,
            store=ds.store.url,
        ) from None


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
