"""A change feed at file granularity: which files each commit added and removed.

``Dataset.changes(since=v1, until=v2)`` walks the versions in ``(v1, v2]``. A format-2
version is an *entry* listing the files it added and removed (``replace_all`` removes every
file of its base), so the walk costs one GET per version after loading the state of ``v1``
once; the change is read from the entry, never from a diff of whole states. A format-1 or
migrated version (a full document) has no entry: its change is the difference between the
files of the state before it and its own (:attr:`VersionChanges.source` says
``"state diff"``). A version expired by garbage collection (a tombstone) raises
:class:`~parquetry.errors.VersionExpired` naming it; a version not written yet raises
:class:`~parquetry.errors.VersionNotFound`.

Applying the changes of ``(v1, v2]`` to the files of ``v1`` gives exactly the files of
``v2`` (tests/dataset/test_changes.py checks this on random operation sequences).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pyarrow as pa

from parquetry.dataset.format2 import read_version
from parquetry.dataset.metadata import DatasetDocument, VersionInfo
from parquetry.dataset.naming import NULL_PARTITION, parse_label, parse_partition_value
from parquetry.dataset.plan import PlannedFile
from parquetry.dataset.read import read_planned_file
from parquetry.dataset.versions import load_version
from parquetry.errors import (
    DatasetNotFound,
    InvalidArgument,
    MetadataCorrupted,
    VersionExpired,
    VersionNotFound,
)
from parquetry.parquet import DecryptionSettings
from parquetry.store import Store

__all__ = [
    "ChangeFeed",
    "added_only",
    "FileChange",
    "VersionChanges",
    "files_of",
    "read_change_file",
    "read_changes",
    "state_files",
    "typed_file",
    "walk_changes",
]

#: Operations that rewrite files without changing which rows the dataset holds (Delta's
#: ``dataChange = false``): a stream skips them silently.
NO_DATA_CHANGE = frozenset({"compact"})


@dataclass(frozen=True, slots=True, kw_only=True)
class FileChange:
    """One data file a commit added or removed."""

    label: str
    key: str
    #: Typed partition values ``((column, value), ...)`` from the label.
    partition: tuple[tuple[str, Any], ...] = ()
    rows: int | None = None
    size: int | None = None

    def planned(self, table: str) -> PlannedFile:
        return PlannedFile(
            label=self.label,
            key=self.key,
            table=table,
            partition=self.partition,
            rows=self.rows,
            size=self.size,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class VersionChanges:
    """What one commit changed, in the order its entry lists the files."""

    version: int
    operation: str
    committed_at: str
    added: tuple[FileChange, ...] = ()
    removed: tuple[FileChange, ...] = ()
    #: False for commits that keep the rows (compaction) or touch no file (metadata only).
    data_change: bool = True
    #: ``"entry"`` (read from the version's entry) or ``"state diff"`` (a format-1 document).
    source: str = "entry"

    @property
    def appends_only(self) -> bool:
        """Whether the commit only added files (its rows are new rows)."""
        return not self.removed


#: label -> the file of one state (what the walk keeps to resolve removes).
Files = dict[str, FileChange]


def _info_fields(info: Any) -> tuple[int | None, int | None]:
    """(rows, size) of an entry's or document's statistics (JSON text, list or FileInfo)."""
    if info is None:
        return None, None
    if hasattr(info, "rows"):
        return int(info.rows), int(info.size)
    raw = json.loads(info) if isinstance(info, str) else info
    try:
        return int(raw[0]), int(raw[1])
    except (TypeError, ValueError, IndexError):
        return None, None


def files_of(doc: DatasetDocument) -> Files:
    """The files of state ``doc`` (main table), label -> FileChange (untyped partitions)."""
    table = doc.tables[0] if doc.partitions else None
    out: Files = {}
    raw_infos = getattr(doc.files, "_entries", {})
    for label, keys in doc.partitions.items():
        key = keys.get(table) if table is not None else None
        if key is None:
            continue
        rows, size = _info_fields(raw_infos.get(label) if label in doc.files else None)
        out[label] = FileChange(label=label, key=key, rows=rows, size=size)
    return out


def typed_file(change: FileChange, schema: pa.Schema | None, cache: dict[Any, Any]) -> FileChange:
    if schema is None:
        return change
    values = []
    for column, raw in parse_label(change.label):
        if column not in schema.names:
            continue
        ck = (column, raw)
        if ck not in cache:
            t = schema.field(column).type
            cache[ck] = None if raw == NULL_PARTITION else parse_partition_value(raw, t)
        values.append((column, cache[ck]))
    return replace(change, partition=tuple(values))


def _missing(uuid: str, number: int, store: Store) -> VersionNotFound:
    return VersionNotFound(
        f"dataset {uuid!r} has no version {number} yet", key=f"{uuid}/_versions/{number}.json"
    )


def _expired(uuid: str, number: int, store: Store) -> VersionExpired:
    return VersionExpired(
        f"version {number} of dataset {uuid!r} expired (garbage collected): a change feed or "
        "stream must read every version within the retention of garbage collection",
        key=f"{uuid}/_versions/{number}.json",
        store=store.url,
    )


def state_files(store: Store, uuid: str, number: int) -> tuple[Files, pa.Schema | None, str]:
    """The files, schema and table name of version ``number`` (-1: the empty state before
    the dataset's creation)."""
    if number < 0:
        return {}, None, "table"
    try:
        doc = load_version(store, uuid, number)
    except DatasetNotFound as exc:
        if "expired" in str(exc):
            raise _expired(uuid, number, store) from None
        raise _missing(uuid, number, store) from None
    return files_of(doc), doc.schema, doc.tables[0] if doc.partitions else "table"


def _entry_change(
    number: int, body: Mapping[str, Any], files: Files, table: str
) -> tuple[VersionChanges, Files, Any]:
    """The change entry ``body`` makes on ``files``: (changes, the files after it, the new
    schema's b64 or None)."""
    info = VersionInfo.from_json(body["version"])
    listed: Files = {}
    for label, keys, stats in body["add"]:
        key = keys.get(table) or next(iter(keys.values()), None)
        if key is None:
            continue
        rows, size = _info_fields(stats)
        listed[label] = FileChange(label=label, key=key, rows=rows, size=size)
    if body.get("replace_all"):
        # The whole new state is listed (overwrite, restore): a file it lists again,
        # unchanged, was neither removed nor added.
        removed = [f for label, f in files.items() if listed.get(label) != f]
        added = [f for label, f in listed.items() if files.get(label) != f]
        after = listed
    else:
        removed = []
        for label in body["remove"]:
            if label not in files:
                raise MetadataCorrupted(
                    f"version {number} removes {label!r}, which the state before it does not hold",
                    key=label,
                )
            removed.append(files[label])
        added = list(listed.values())
        after = {k: v for k, v in files.items() if k not in set(body["remove"])}
        after.update(listed)
    change = VersionChanges(
        version=number,
        operation=info.operation,
        committed_at=info.committed_at,
        added=tuple(added),
        removed=tuple(removed),
        data_change=_data_change(info.operation, bool(added), bool(removed)),
    )
    return change, after, body.get("set", {}).get("schema")


def added_only(
    store: Store, uuid: str, number: int, table: str | None = None
) -> tuple[VersionChanges, pa.Schema | None] | None:
    """The change of version ``number`` read from its entry alone (one GET), when the entry
    needs no base state: it only adds files. None when it removes files, replaces the state
    or is a full document (:func:`walk_changes` with the state before it tells then). The
    schema is the entry's new schema, if it sets one.

    Raises:
        VersionNotFound: version ``number`` is not written yet.
        VersionExpired: it was garbage collected.
    """
    from parquetry.dataset.schema import schema_from_b64

    v = read_version(store, uuid, number)
    if v is None:
        raise _missing(uuid, number, store)
    kind, body, _ = v
    if kind == "tombstone":
        raise _expired(uuid, number, store)
    if kind != "entry" or body.get("replace_all") or body["remove"]:
        return None
    first = body["add"][0][1] if body["add"] else {}
    change, _, b64 = _entry_change(number, body, {}, table or next(iter(first), "table"))
    return change, schema_from_b64(b64) if b64 is not None else None


def _data_change(operation: str, added: bool, removed: bool) -> bool:
    if not added and not removed:
        return False
    return not (operation in NO_DATA_CHANGE and removed)


def _doc_change(number: int, doc: DatasetDocument, files: Files) -> tuple[VersionChanges, Files]:
    """A full document's change: the difference of its files and ``files``."""
    new = files_of(doc)
    removed = [f for label, f in files.items() if new.get(label, None) != f]
    added = [f for label, f in new.items() if files.get(label) != f]
    info = doc.version
    operation = info.operation if info is not None else "kartothek"
    change = VersionChanges(
        version=number,
        operation=operation,
        committed_at=info.committed_at if info is not None else "",
        added=tuple(added),
        removed=tuple(removed),
        data_change=_data_change(operation, bool(added), bool(removed)),
        source="state diff",
    )
    return change, new


def walk_changes(
    store: Store,
    uuid: str,
    since: int,
    until: int | None,
    files: Files,
    table: str,
    schema: pa.Schema | None,
) -> Iterator[tuple[VersionChanges, Files, pa.Schema | None]]:
    """The changes of each version in ``(since, until]`` (``until=None``: up to the newest
    written), with the files and schema after it. ``files``/``schema``: the state of
    ``since`` (:func:`state_files`); the walk does not modify it."""
    from parquetry.dataset.schema import schema_from_b64

    current = dict(files)
    number = since
    while until is None or number < until:
        number += 1
        v = read_version(store, uuid, number)
        if v is None:
            if until is None:
                return
            raise _missing(uuid, number, store)
        kind, value, _ = v
        if kind == "tombstone":
            raise _expired(uuid, number, store)
        if kind == "doc":
            change, current = _doc_change(number, value, current)
            schema = value.schema if value.schema is not None else schema
            if value.partitions:
                table = value.tables[0]
        else:
            change, current, b64 = _entry_change(number, value, current, table)
            if b64 is not None:
                schema = schema_from_b64(b64)
        yield change, current, schema


def read_change_file(
    store: Store,
    uuid: str,
    schema: pa.Schema,
    planned: PlannedFile,
    columns: Sequence[str] | None,
    *,
    row_filter: Any = None,
    filter_columns: Sequence[str] = (),
    decryption: DecryptionSettings | None = None,
) -> pa.Table:
    """One added file's rows (``schema`` projected to ``columns``, rows by ``row_filter``);
    a file garbage collection deleted raises VersionExpired naming it."""
    try:
        return read_planned_file(
            store,
            schema,
            planned,
            columns=columns,
            row_filter=row_filter,
            filter_columns=filter_columns,
            decryption=decryption,
        )
    except MetadataCorrupted as exc:
        if "is missing" not in str(exc):
            raise
        raise VersionExpired(
            f"data file {planned.key} (partition {planned.label!r}) of dataset {uuid!r} was "
            "garbage collected: read changes within the retention",
            key=planned.key,
            store=store.url,
        ) from None


@dataclass(frozen=True, slots=True, kw_only=True)
class ChangeFeed:
    """The changes of a dataset between two versions (``Dataset.changes``)."""

    store: Store
    uuid: str
    since: int
    until: int
    #: The schema of ``until`` (files of older versions read with it: nulls, widening).
    schema: pa.Schema
    table: str
    versions: tuple[VersionChanges, ...] = ()
    #: Net effect: files of ``until`` not in ``since``, files of ``since`` not in ``until``.
    added: tuple[FileChange, ...] = ()
    removed: tuple[FileChange, ...] = ()
    decryption: DecryptionSettings | None = field(default=None, repr=False)

    @property
    def appends_only(self) -> bool:
        """Whether no commit in the range removed a file: the added rows are new rows."""
        return all(v.appends_only for v in self.versions)

    def _planned(self, files: Sequence[FileChange] | None) -> list[PlannedFile]:
        return [f.planned(self.table) for f in (self.added if files is None else files)]

    def _read(self, planned: PlannedFile, columns: Sequence[str] | None) -> pa.Table:
        return read_change_file(
            self.store, self.uuid, self.schema, planned, columns, decryption=self.decryption
        )

    def read_added(
        self, columns: Sequence[str] | None = None, files: Sequence[FileChange] | None = None
    ) -> pa.Table:
        """The rows of the net added files (or of ``files``) as one table."""
        names = list(columns) if columns is not None else self.schema.names
        target = pa.schema([self.schema.field(c) for c in names])
        tables = [self._read(p, names) for p in self._planned(files)]
        return pa.concat_tables(tables) if tables else target.empty_table()

    def scan_added(
        self, columns: Sequence[str] | None = None, files: Sequence[FileChange] | None = None
    ) -> pa.RecordBatchReader:
        """:meth:`read_added` streamed file by file (one file in memory at a time); a
        ``RecordBatchReader`` Polars (``pl.from_arrow``) and DuckDB read directly."""
        names = list(columns) if columns is not None else self.schema.names
        target = pa.schema([self.schema.field(c) for c in names])
        planned = self._planned(files)

        def batches() -> Iterator[pa.RecordBatch]:
            for p in planned:
                yield from self._read(p, names).to_batches()

        return pa.RecordBatchReader.from_batches(target, batches())


def read_changes(
    store: Store,
    uuid: str,
    since: int,
    until: int,
    *,
    decryption: DecryptionSettings | None = None,
) -> ChangeFeed:
    """The :class:`ChangeFeed` of ``(since, until]`` (``since=-1``: from before creation)."""
    if since < -1 or until < since:
        raise InvalidArgument(
            f"changes of dataset {uuid!r}: need -1 <= since <= until, got since={since}, "
            f"until={until}"
        )
    if until >= 0 and read_version(store, uuid, until) is None:
        raise _missing(uuid, until, store)  # before loading anything
    files, schema, table = state_files(store, uuid, since)
    start = dict(files)
    versions = []
    current = files
    for change, after, after_schema in walk_changes(
        store, uuid, since, until, files, table, schema
    ):
        versions.append(change)
        current, schema = after, after_schema
    if schema is None:  # since == until == -1
        raise _missing(uuid, 0, store)
    cache: dict[Any, Any] = {}
    typed = [
        replace(
            v,
            added=tuple(typed_file(f, schema, cache) for f in v.added),
            removed=tuple(typed_file(f, schema, cache) for f in v.removed),
        )
        for v in versions
    ]
    added = [typed_file(f, schema, cache) for k, f in current.items() if start.get(k) != f]
    removed = [typed_file(f, schema, cache) for k, f in start.items() if current.get(k) != f]
    return ChangeFeed(
        store=store,
        uuid=uuid,
        since=since,
        until=until,
        schema=schema,
        table=table,
        versions=tuple(typed),
        added=tuple(added),
        removed=tuple(removed),
        decryption=decryption,
    )
