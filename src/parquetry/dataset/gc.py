"""Garbage collection with a retention period.

A version is *retained* while it is the newest one or was current at some point within the
retention period (its successor was committed less than ``retention`` ago): a reader may
still be using it. GC first turns expired version documents into tombstones (so nobody can
open them any more, while the version numbers stay taken), then deletes every file under
``<uuid>/`` that no retained version (nor the current pointer) references and that is either
referenced by an expired version or older than the retention period (orphans of failed or
retried writes). Files younger than the retention period that nothing references are kept:
they may belong to a commit in flight.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass

from parquetry.dataset.metadata import DatasetDocument
from parquetry.dataset.naming import (
    common_metadata_key,
    metadata_key,
    version_key,
    version_number_from_key,
    versions_prefix,
)
from parquetry.dataset.versions import TOMBSTONE_KEY, read_pointer, tombstone_bytes
from parquetry.errors import InvalidArgument, NotFound
from parquetry.store import Store

__all__ = ["GCReport", "garbage_collect", "referenced_keys"]


@dataclass(frozen=True, slots=True, kw_only=True)
class GCReport:
    """What a garbage collection removed."""

    deleted: tuple[str, ...]
    expired_versions: tuple[int, ...]
    retained_versions: tuple[int, ...]


def referenced_keys(doc: DatasetDocument) -> set[str]:
    keys = {key for files in doc.partitions.values() for key in files.values()}
    keys |= {ref for ref in doc.indices.values() if isinstance(ref, str)}
    keys |= {common_metadata_key(doc.uuid, t) for t in doc.tables}
    return keys


def _parse_time(text: str) -> dt.datetime:
    value = dt.datetime.fromisoformat(text)
    return value if value.tzinfo else value.replace(tzinfo=dt.UTC)


def garbage_collect(
    store: Store,
    uuid: str,
    *,
    retention: dt.timedelta | float,
    now: dt.datetime | None = None,
) -> GCReport:
    if not isinstance(retention, dt.timedelta):
        retention = dt.timedelta(seconds=float(retention))
    if retention < dt.timedelta(0):
        raise InvalidArgument(f"retention must not be negative, got {retention}")
    now = now or dt.datetime.now(dt.UTC)
    cutoff = now - retention
    docs: dict[int, DatasetDocument | None] = {}
    for meta in store.list(versions_prefix(uuid)):
        n = version_number_from_key(meta.key)
        if n is None:
            continue
        data = store.get(meta.key)
        if data.startswith(b'{"' + TOMBSTONE_KEY.encode()):
            docs[n] = None
        else:
            from parquetry.dataset.metadata import decode_document

            docs[n] = decode_document(data, "json", key=meta.key)
    live = sorted(n for n, d in docs.items() if d is not None)
    retained: list[int] = []
    expired: list[int] = []
    for i, n in enumerate(live):
        successor = docs[live[i + 1]] if i + 1 < len(live) else None
        if (
            successor is None
            or successor.version is None
            or _parse_time(successor.version.committed_at) > cutoff
        ):
            retained.append(n)
        else:
            expired.append(n)
    keep: set[str] = set()
    for n in retained:
        keep |= referenced_keys(docs[n])  # type: ignore[arg-type]
    try:
        pointer, _, _ = read_pointer(store, uuid)
        keep |= referenced_keys(pointer)
    except NotFound:
        pass
    dropped: set[str] = set()
    for n in expired:
        dropped |= referenced_keys(docs[n])  # type: ignore[arg-type]
    stamp = now.isoformat()
    for n in expired:
        store.put(version_key(uuid, n), tombstone_bytes(n, stamp))
    deleted = _delete_unreferenced(store, uuid, keep, dropped, cutoff)
    deleted += _delete_stale_pointer(store, uuid)
    return GCReport(
        deleted=tuple(sorted(deleted)),
        expired_versions=tuple(expired),
        retained_versions=tuple(retained),
    )


def _delete_unreferenced(
    store: Store, uuid: str, keep: set[str], dropped: set[str], cutoff: dt.datetime
) -> list[str]:
    victims = []
    for meta in store.list(uuid):
        key = meta.key
        if key in keep or key.startswith(versions_prefix(uuid) + "/"):
            continue
        if key.endswith("/_common_metadata"):
            continue
        old = meta.modified is not None and meta.modified < cutoff
        if key in dropped or old:
            victims.append(key)
    _delete_all(store, victims)
    return victims


def _delete_all(store: Store, keys: Iterable[str]) -> None:
    store.delete_many(list(keys), missing_ok=True)


def _delete_stale_pointer(store: Store, uuid: str) -> list[str]:
    """kartothek reads JSON first: a msgpack pointer beside a JSON one is stale."""
    stale = metadata_key(uuid, "msgpack.zstd")
    if store.exists(metadata_key(uuid, "json")) and store.exists(stale):
        store.delete(stale, missing_ok=True)
        return [stale]
    return []
