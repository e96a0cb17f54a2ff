"""Plain summaries of either kind of dataset, for the listing commands and the report.

This is the one module of the CLI that knows both dataset APIs (``Dataset`` and
``ParquetDatasetStore``); commands format what it returns.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from parquetry.cli.targets import DatasetRef, Kind

if TYPE_CHECKING:
    from parquetry.store import Store

__all__ = [
    "DatasetInfo",
    "FileRow",
    "VersionRow",
    "dataset_files",
    "dataset_history",
    "dataset_info",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class FileRow:
    """One data file of a dataset version."""

    key: str
    partition: str
    rows: int | None
    size: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class VersionRow:
    """One committed version (kartothek-format datasets only keep a history)."""

    number: int
    time: dt.datetime | None
    operation: str
    rows_added: int | None = None
    rows_removed: int | None = None
    files_added: int | None = None
    files_removed: int | None = None
    bytes_added: int | None = None
    bytes_removed: int | None = None
    #: What the commit was told (save mode, scope, the caller's entries); see Dataset.history.
    parameters: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        doc = asdict(self)
        doc["time"] = self.time.isoformat() if self.time else None
        return doc


@dataclass(frozen=True, slots=True, kw_only=True)
class DatasetInfo:
    """What ``ls`` and ``show`` print about one dataset."""

    name: str
    kind: Kind
    version: int | None
    rows: int | None
    bytes: int | None
    files: int
    partitions: int
    last_commit: dt.datetime | None
    schema: tuple[tuple[str, str], ...] = ()
    partition_keys: tuple[str, ...] = ()
    indices: tuple[str, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        doc = asdict(self)
        doc["last_commit"] = self.last_commit.isoformat() if self.last_commit else None
        doc["schema"] = [{"name": n, "type": t} for n, t in self.schema]
        return doc


def _sum(values: list[int | None]) -> int | None:
    return None if any(v is None for v in values) else sum(v for v in values if v is not None)


def _time(text: str | None) -> dt.datetime | None:
    if not text:
        return None
    value = dt.datetime.fromisoformat(text)
    return value if value.tzinfo else value.replace(tzinfo=dt.UTC)


# --- snapshot datasets ---------------------------------------------------------------------


def _snapshot_schema(store: Store, key: str, part: str) -> tuple[tuple[str, str], ...]:
    from parquetry.parquet.files import open_parquet

    with store.open(f"{key}/{part}") as handle:
        # open_parquet: the footer checked before pyarrow parses it (footer_check).
        schema = open_parquet(handle, pre_buffer=False)[0].schema_arrow
    return tuple((f.name, str(f.type)) for f in schema)


def _snapshot_info(store: Store, key: str, *, detail: bool) -> DatasetInfo:
    from parquetry.snapshot import ParquetDatasetStore

    manifest = ParquetDatasetStore(store).read_manifest(key)
    files = _snapshot_files(store, key)
    meta: dict[str, Any] = dict(manifest.metadata or {})
    if manifest.run_id is not None:
        meta["run_id"] = manifest.run_id
    meta["compression"] = manifest.compression
    meta["schema_hash"] = manifest.schema_hash
    return DatasetInfo(
        name=key,
        kind="snapshot",
        version=None,
        rows=manifest.row_count,
        bytes=_sum([f.size for f in files]),
        files=len(manifest.parts),
        partitions=1,
        last_commit=_time(manifest.created_at_utc),
        schema=_snapshot_schema(store, key, manifest.parts[0]) if detail and manifest.parts else (),
        metadata=meta,
    )


def _snapshot_files(store: Store, key: str) -> list[FileRow]:
    from parquetry.snapshot import ParquetDatasetStore

    manifest = ParquetDatasetStore(store).read_manifest(key)
    sizes = {m.key: m.size for m in store.list_dir(key).objects}
    return [
        FileRow(key=f"{key}/{part}", partition="", rows=None, size=sizes.get(f"{key}/{part}"))
        for part in manifest.parts
    ]


# --- kartothek-format datasets -------------------------------------------------------------


def _open(store: Store, uuid: str, version: int | None) -> Any:
    from parquetry.dataset import Dataset

    return Dataset.open(store, uuid, version=version)


def _kartothek_files(ds: Any) -> list[FileRow]:
    plan = ds.plan(None)
    return [
        FileRow(
            key=f.key,
            partition=f.label.rsplit("/", 1)[0] if "/" in f.label else "",
            rows=f.rows,
            size=f.size,
        )
        for f in plan.files
    ]


def _kartothek_info(store: Store, uuid: str, *, version: int | None) -> DatasetInfo:
    ds = _open(store, uuid, version)
    files = _kartothek_files(ds)
    versions = ds.versions()
    current = next((v for v in versions if v.number == ds.version), None)
    return DatasetInfo(
        name=uuid,
        kind="kartothek",
        version=ds.version,
        rows=_sum([f.rows for f in files]),
        bytes=_sum([f.size for f in files]),
        files=len(files),
        partitions=len({f.partition for f in files}),
        last_commit=_time(current.committed_at) if current is not None else None,
        schema=tuple((f.name, str(f.type)) for f in ds.schema),
        partition_keys=tuple(ds.partition_keys),
        indices=tuple(ds.secondary_indices),
        metadata=dict(ds.metadata),
    )


# --- entry points --------------------------------------------------------------------------


def dataset_info(
    store: Store, ref: DatasetRef, *, version: int | None = None, detail: bool = True
) -> DatasetInfo:
    """Summary of a dataset (at ``version`` for kartothek-format datasets)."""
    if ref.kind == "snapshot":
        _no_versions(ref, version)
        return _snapshot_info(store, ref.name, detail=detail)
    return _kartothek_info(store, ref.name, version=version)


def dataset_files(store: Store, ref: DatasetRef, *, version: int | None = None) -> list[FileRow]:
    """The data files of a dataset version."""
    if ref.kind == "snapshot":
        _no_versions(ref, version)
        return _snapshot_files(store, ref.name)
    return _kartothek_files(_open(store, ref.name, version))


def dataset_history(store: Store, ref: DatasetRef) -> list[VersionRow]:
    """Committed versions, oldest first; a snapshot has one implicit version (its write)."""
    if ref.kind == "snapshot":
        info = _snapshot_info(store, ref.name, detail=False)
        return [
            VersionRow(
                number=1,
                time=info.last_commit,
                operation="write",
                rows_added=info.rows,
                files_added=info.files,
            )
        ]
    ds = _open(store, ref.name, None)
    return [
        VersionRow(
            number=v.number,
            time=_time(v.committed_at),
            operation=v.operation,
            rows_added=v.rows_added,
            rows_removed=v.rows_removed,
            files_added=v.files_added,
            files_removed=v.files_removed,
            bytes_added=v.bytes_added,
            bytes_removed=v.bytes_removed,
            parameters=dict(v.parameters),
        )
        for v in sorted(ds.versions(), key=lambda v: v.number)
    ]


def _no_versions(ref: DatasetRef, version: int | None) -> None:
    from parquetry.errors import InvalidArgument

    if version is not None:
        raise InvalidArgument(
            f"{ref.name!r} is a snapshot dataset: it keeps no versions (drop --version)"
        )


ProgressFn = Callable[[int], None]
