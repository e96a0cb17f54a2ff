"""The change each version of a dataset made, walked version by version.

A format-2 version is an *entry* listing the files it added and removed (``replace_all``
removes every file of its base): its change is read from the entry alone, one GET per
version once the state it starts from is loaded. A format-1 or migrated version (a full
document) has no entry: its change is the difference of the files of the state before it
and its own (``source="state diff"``). A tombstone (a version garbage collection expired)
raises :class:`~parquetry.errors.VersionExpired`; a version not written yet raises
:class:`~parquetry.errors.VersionNotFound`. :mod:`parquetry.dataset.changes` builds the
change feed on this walk; the streaming source walks it one commit per trigger.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa

from parquetry.dataset.format2 import read_version
from parquetry.dataset.metadata import DatasetDocument, VersionInfo
from parquetry.dataset.naming import NULL_PARTITION, parse_label, parse_partition_value
from parquetry.dataset.plan import PlannedFile
from parquetry.dataset.versions import load_version
from parquetry.errors import DatasetNotFound, MetadataCorrupted, VersionExpired, VersionNotFound
from parquetry.store import Store

__all__ = [
    "NO_DATA_CHANGE",
    "FileChange",
    "Files",
    "VersionChanges",
    "added_only",
    "expired_version",
    "files_of",
    "missing_version",
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


def missing_version(uuid: str, number: int, store: Store) -> VersionNotFound:
    return VersionNotFound(
        f"dataset {uuid!r} has no version {number} yet", key=f"{uuid}/_versions/{number}.json"
    )


def expired_version(uuid: str, number: int, store: Store) -> VersionExpired:
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
    except VersionExpired:
        raise expired_version(uuid, number, store) from None
    except DatasetNotFound:
        raise missing_version(uuid, number, store) from None
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
        raise missing_version(uuid, number, store)
    kind, body, _ = v
    if kind == "tombstone":
        raise expired_version(uuid, number, store)
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
            raise missing_version(uuid, number, store)
        kind, value, _ = v
        if kind == "tombstone":
            raise expired_version(uuid, number, store)
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
