"""Conflict-safe commits: create-if-absent of the next version document is the commit point.

A commit is a function ``make(base, number) -> DatasetDocument`` applied to the newest state.
If another writer created version ``number`` first, the writer rolls forward to the newest
version and calls ``make`` again; ``make`` raises :class:`CommitConflict` when its change
overlaps the other commits (e.g. a ``delete_scope`` whose partitions changed). Retries are
bounded, with jittered exponential backoff.

After the commit point the pointer (the kartothek metadata file) is rewritten. Pointer
writes are unconditional (kartothek writes it the same way), so a slow writer could put an
older state back; every writer therefore probes for the next version after publishing and
republishes the newest one until no newer version exists. Readers also probe one version
ahead, so a commit whose pointer update failed is still visible.
"""

from __future__ import annotations

import datetime as dt
import random
import time
from collections.abc import Callable

from parquetry.dataset.metadata import DatasetDocument, encode_document
from parquetry.dataset.naming import metadata_key, version_key
from parquetry.dataset.versions import latest_version_number, roll_forward
from parquetry.errors import AlreadyExists, CommitConflict, ParquetryError
from parquetry.store import PutMode, Store

__all__ = ["MAX_RETRIES", "MakeVersion", "commit", "now_iso", "publish_pointer"]

MAX_RETRIES = 64

#: Builds the new document from the newest base (None when creating) and the new number.
MakeVersion = Callable[[DatasetDocument | None, int], DatasetDocument]


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat()


def _backoff(attempt: int) -> None:
    time.sleep(random.uniform(0, min(0.5, 0.005 * 2 ** min(attempt, 7))))


def commit(
    store: Store,
    uuid: str,
    base: DatasetDocument | None,
    number: int,
    make: MakeVersion,
    *,
    max_retries: int = MAX_RETRIES,
    pointer_format: str = "json",
    stale_format: str | None = None,
) -> DatasetDocument:
    """Commit ``make(base, number + 1)``; ``number`` < 0 means "find the newest by listing".

    Returns the committed document. Raises CommitConflict when retries are exhausted or
    ``make`` reports an overlapping change.
    """
    if number < 0:
        number = latest_version_number(store, uuid)
    attempt = 0
    while True:
        doc = make(base, number + 1)
        data = encode_document(doc, "json")
        try:
            store.put(version_key(uuid, number + 1), data, mode=PutMode.CREATE)
        except AlreadyExists:
            attempt += 1
            if attempt > max_retries:
                raise CommitConflict(
                    f"dataset {uuid!r}: version {number + 1} was taken by another writer "
                    f"{attempt} times in a row; giving up after {max_retries} retries",
                    key=version_key(uuid, number + 1),
                ) from None
            newer, number, _ = roll_forward(store, uuid, number)
            if newer is not None:
                base = newer
            _backoff(attempt)
            continue
        publish_pointer(store, uuid, doc, data, number + 1, pointer_format, stale_format)
        return doc


def publish_pointer(
    store: Store,
    uuid: str,
    doc: DatasetDocument,
    data: bytes,
    number: int,
    fmt: str,
    stale_format: str | None = None,
) -> None:
    """Point the kartothek metadata file at the newest committed version.

    Failures here do not undo the commit (the version document is the commit point and
    readers roll forward to it), so they are swallowed: raising would make a caller retry
    a write that already happened.
    """
    try:
        for _ in range(16):
            payload = data if fmt == "json" else encode_document(doc, fmt)
            store.put(metadata_key(uuid, fmt), payload)
            if stale_format is not None and stale_format != fmt:
                store.delete(metadata_key(uuid, stale_format), missing_ok=True)
                stale_format = None
            newer, newest, _ = roll_forward(store, uuid, number)
            if newer is None:
                return
            doc, number = newer, newest
            data = encode_document(doc, "json")
    except ParquetryError:
        return
