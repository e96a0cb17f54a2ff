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

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pyarrow as pa

from parquetry.dataset.change_walk import (
    FileChange,
    VersionChanges,
    added_only,
    files_of,
    missing_version,
    state_files,
    typed_file,
    walk_changes,
)
from parquetry.dataset.format2 import read_version
from parquetry.dataset.plan import PlannedFile
from parquetry.dataset.read import DataFileMissing, read_planned_file
from parquetry.errors import InvalidArgument, VersionExpired
from parquetry.parquet import DecryptionSettings
from parquetry.store import Store

# The walk's names are re-exported: callers import the change feed from one module.
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
    except DataFileMissing:
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
        raise missing_version(uuid, until, store)  # before loading anything
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
        raise missing_version(uuid, 0, store)
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
