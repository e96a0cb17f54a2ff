"""What a dataset's commits did (``Dataset.history``) and what a version holds (``detail``).

Both are read from version documents only: ``history`` costs one LIST of ``_versions`` and
one GET per version it returns (newest first, so ``limit`` bounds the GETs); ``detail``
costs nothing beyond the opened version.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field

import pyarrow as pa

from parquetry.dataset.metadata import DatasetDocument, VersionInfo
from parquetry.dataset.versions import list_version_numbers, load_version
from parquetry.errors import DatasetNotFound
from parquetry.store import Store

__all__ = ["DatasetDetail", "HistoryEntry", "dataset_detail", "read_history"]


def _time(text: str) -> dt.datetime:
    value = dt.datetime.fromisoformat(text)
    return value if value.tzinfo else value.replace(tzinfo=dt.UTC)


@dataclass(frozen=True, slots=True, kw_only=True)
class HistoryEntry:
    """One commit: Delta's ``DESCRIBE HISTORY`` row (version, timestamp, operation,
    operationParameters, operationMetrics)."""

    version: int
    time: dt.datetime
    operation: str
    parameters: Mapping[str, str] = field(default_factory=dict)
    #: ``rows_added``, ``rows_removed``, ``files_added``, ``files_removed``,
    #: ``bytes_added``, ``bytes_removed`` (bytes are 0 for versions written before they
    #: were recorded), plus the operation's own counts (:attr:`VersionInfo.extra`: e.g.
    #: ``rows_deleted``, ``rows_updated``, ``rows_copied``, ``files_rewritten``).
    metrics: Mapping[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, info: VersionInfo) -> HistoryEntry:
        return cls(
            version=info.number,
            time=_time(info.committed_at),
            operation=info.operation,
            parameters=dict(info.parameters),
            metrics={
                "rows_added": info.rows_added,
                "rows_removed": info.rows_removed,
                "files_added": info.files_added,
                "files_removed": info.files_removed,
                "bytes_added": info.bytes_added,
                "bytes_removed": info.bytes_removed,
                **info.extra,
            },
        )


def read_history(store: Store, uuid: str, *, limit: int | None = None) -> list[HistoryEntry]:
    """Retained commits of the current incarnation, newest first (at most ``limit``)."""
    out: list[HistoryEntry] = []
    incarnation: tuple[int, str] | None = None
    for n in reversed(list_version_numbers(store, uuid)):
        if limit is not None and len(out) >= limit:
            break
        try:
            doc = load_version(store, uuid, n)
        except DatasetNotFound:
            continue  # expired (a tombstone): not part of the retained history
        info = doc.version
        if info is None:
            continue
        ident = (info.epoch, info.incarnation)
        if incarnation is None:
            incarnation = ident
        elif ident != incarnation:
            break  # an earlier, deleted incarnation of the uuid
        out.append(HistoryEntry.of(info))
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class DatasetDetail:
    """What one version holds (Delta's ``DESCRIBE DETAIL``)."""

    uuid: str
    store: str
    version: int
    files: int
    #: Total size of the data files (None for a state kartothek wrote: it records no sizes).
    bytes: int | None
    rows: int | None
    #: Distinct partition-value directories (1 for a non-empty unpartitioned dataset).
    partitions: int
    partition_keys: tuple[str, ...]
    secondary_indices: tuple[str, ...]
    schema: pa.Schema
    created: dt.datetime | None
    modified: dt.datetime | None
    metadata: Mapping[str, object] = field(default_factory=dict)


def dataset_detail(store: Store, doc: DatasetDocument, number: int) -> DatasetDetail:
    files = [key for f in doc.partitions.values() for key in f.values()]
    # A label is "<k>=<v>/.../<file name>": its directory is one partition of Hive layout.
    cells = {label.rsplit("/", 1)[0] if "/" in label else "" for label in doc.partitions}
    known = all(label in doc.files for label in doc.partitions)
    created_text = doc.metadata.get("creation_time")
    created = _time(created_text) if isinstance(created_text, str) else None
    assert doc.schema is not None
    return DatasetDetail(
        uuid=doc.uuid,
        store=store.url,
        version=number,
        files=len(files),
        bytes=sum(doc.files[lbl].size for lbl in doc.partitions) if known else None,
        rows=sum(doc.files[lbl].rows for lbl in doc.partitions) if known else None,
        partitions=len(cells) if doc.partition_keys else min(len(files), 1),
        partition_keys=doc.partition_keys,
        secondary_indices=tuple(sorted(doc.indices)),
        schema=doc.schema,
        created=created,
        modified=_time(doc.version.committed_at) if doc.version is not None else None,
        metadata=dict(doc.metadata),
    )
