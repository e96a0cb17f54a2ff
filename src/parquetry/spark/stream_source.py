"""The streaming source of the ``parquetry`` format: ``spark.readStream.format("parquetry")``.

Offsets are dataset versions (``{"version": n, "files": k, "snapshot": true}``, see
:mod:`parquetry.spark.stream_offsets`, which also holds admission control). Each micro-batch
emits the rows of the files added in ``(start, end]``, in commit order, each commit's files
in the order its entry lists them (so a restart from the checkpoint replans
exactly the same files). The first batch's end offset also records where the stream started
(``"from"``): Spark asks the source for its initial offset again when it replays a first
batch after a crash, and that offset (the newest version, for the default start or
``latest``) has moved if commits landed meanwhile.

Commits that only add files are read. Compaction (Delta's ``dataChange = false``) and
metadata-only commits (index, schema, settings, a restore to identical files) are skipped.
Commits that remove or rewrite rows (overwrite, update, delete, upsert, restore) fail the
query with :class:`~parquetry.errors.ChangeCommitError` naming the version, unless
``skipChangeCommits`` (skip them whole), ``ignoreChanges`` (emit their added files: rewritten
rows come again) or, for commits that only remove files, ``ignoreDeletes``.

The reader lives in one long-lived Python process per query (Spark's streaming source
runner): it keeps the files of the version it has walked to and the file lists of the
versions ahead, so each trigger costs one GET per new version (one when nothing is new).
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadLimit,
    ReadMaxBytes,
    ReadMaxFiles,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from parquetry.spark.options import SourceOptions
from parquetry.spark.stream_offsets import limits_of, make_offset, parse_offset
from parquetry.spark.stream_options import StreamOptions
from parquetry.spark.surface import message_first
from parquetry.spark.types import cast_to_spark, spark_to_arrow_schema

__all__ = ["ParquetryStreamReader", "StreamTask"]


@dataclass(frozen=True, slots=True)
class StreamTask:
    """The files one task of a micro-batch reads and the dataset schema to read them with."""

    files: tuple[Any, ...]
    schema: pa.Schema


@dataclass(frozen=True, slots=True)
class _Unit:
    """One step of the stream: a commit (or the starting snapshot) and the files it emits."""

    version: int
    snapshot: bool
    files: tuple[Any, ...]  # FileChange, typed partitions
    schema: pa.Schema | None


class ParquetryStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches of the rows each new commit of a dataset added."""

    def __init__(self, options: SourceOptions, stream: StreamOptions, schema: StructType):
        self.options = options
        self.stream = stream
        self.spark_schema = schema
        self.arrow_schema = spark_to_arrow_schema(schema)
        self._target: int | None = None  # Trigger.AvailableNow: the newest version to read
        self._units: dict[tuple[int, bool], _Unit] = {}
        # The files of the state the walk has reached (label -> FileChange, untyped).
        self._state: tuple[int, dict[str, Any], pa.Schema | None, str] | None = None
        self._cache: dict[Any, Any] = {}
        self._latest_schema: pa.Schema | None = None
        self._initial: dict[str, Any] | None = None  # what initialOffset returned

    # --- the dataset -----------------------------------------------------------------------

    def _store(self) -> Any:
        if not hasattr(self, "_opened"):
            self._opened = self.options.open_store()
        return self._opened

    def _uuid(self) -> str:
        assert self.options.dataset is not None
        return self.options.dataset

    def _newest(self) -> int:
        from parquetry.dataset import Dataset

        return Dataset.open(self._store(), self._uuid()).version

    def _base(self, version: int) -> tuple[int, dict[str, Any], pa.Schema | None, str]:
        """The walk's state at ``version`` (loaded again only when the walk is elsewhere)."""
        from parquetry.dataset.change_walk import state_files

        if self._state is None or self._state[0] != version:
            files, schema, table = state_files(self._store(), self._uuid(), version)
            self._state = (version, files, schema, table)
        return self._state

    def _snapshot(self, version: int) -> _Unit:
        from parquetry.dataset.change_walk import typed_file

        key = (version, True)
        if key not in self._units:
            _, files, schema, _ = self._base(version)
            typed = tuple(typed_file(files[k], schema, self._cache) for k in sorted(files))
            self._units[key] = _Unit(version, True, typed, schema)
        return self._units[key]

    def _schema(self) -> pa.Schema:
        """The newest schema (a superset of older ones: evolution only adds and widens)."""
        if self._latest_schema is None:
            from parquetry.dataset import Dataset

            self._latest_schema = Dataset.open(self._store(), self._uuid()).schema
        return self._latest_schema

    def _commit_unit(self, version: int) -> _Unit | None:
        """The files commit ``version`` emits, or None if it is not written yet.

        A commit that only adds files is read from its entry alone (one GET, no state: a
        stream that only sees appends never loads a whole state). Others need the state
        before them, which must still be retained (else VersionExpired names it)."""
        from parquetry.dataset.change_walk import added_only, typed_file, walk_changes
        from parquetry.errors import VersionNotFound

        key = (version, False)
        if key in self._units:
            return self._units[key]
        if self._target is not None and version > self._target:
            return None
        try:
            found = added_only(self._store(), self._uuid(), version)
            if found is not None:
                change, new_schema = found
                if new_schema is not None:
                    self._latest_schema = new_schema
                schema = self._schema()
                if self._state is not None and self._state[0] == version - 1:
                    _, files, _, table = self._state
                    after = {**files, **{f.label: f for f in change.added}}
                    self._state = (version, after, schema, table)
            else:
                since, files, schema, table = self._base(version - 1)
                change, after, schema = next(
                    walk_changes(self._store(), self._uuid(), since, version, files, table, schema)
                )
                self._state = (version, after, schema, table)
        except VersionNotFound:
            return None
        emitted = self._emitted(change)
        typed = tuple(typed_file(f, schema, self._cache) for f in emitted)
        unit = _Unit(version, False, typed, schema)
        self._units[key] = unit
        return unit

    def _emitted(self, change: Any) -> tuple[Any, ...]:
        """The files of ``change`` the stream reads, by Delta's rules (module docstring)."""
        from parquetry.errors import ChangeCommitError

        if change.appends_only:
            return tuple(change.added)
        if not change.data_change:
            return ()  # compaction: the same rows in new files
        s = self.stream
        if s.skip_change_commits or (s.ignore_deletes and not change.added):
            return ()
        if s.ignore_changes:
            return tuple(change.added)
        raise ChangeCommitError(
            f"version {change.version} of dataset {self._uuid()!r} ({change.operation}) "
            f"removed or rewrote {len(change.removed)} file(s): a stream reads only commits "
            "that add rows. Set option 'skipChangeCommits' to skip such commits, or "
            "'ignoreChanges' to read their new files too (rewritten rows come again)",
            key=f"{self._uuid()}/_versions/{change.version}.json",
        )

    def _unit(self, version: int, snapshot: bool) -> _Unit | None:
        return self._snapshot(version) if snapshot else self._commit_unit(version)

    # --- offsets ---------------------------------------------------------------------------

    @message_first
    def initialOffset(self) -> dict[str, Any]:
        self._initial = self._initial_offset()
        return self._initial

    def _initial_offset(self) -> dict[str, Any]:
        s = self.stream
        if s.starting_version is not None:
            return make_offset(s.starting_version - 1, False, None)
        newest = self._newest()
        if s.starting_latest:
            return make_offset(newest, False, None)
        if s.starting_timestamp is not None:
            return make_offset(self._first_at(s.starting_timestamp, newest) - 1, False, None)
        if not self._snapshot(newest).files:
            return make_offset(newest, False, None)
        return make_offset(newest, True, 0)

    def _first_at(self, instant: datetime.datetime, newest: int) -> int:
        """The first retained version committed at or after ``instant`` (newest + 1: none)."""
        from parquetry.dataset.history import read_history

        history = read_history(self._store(), self._uuid())
        later = [h.version for h in history if h.time >= instant]
        return min(later) if later else newest + 1

    def getDefaultReadLimit(self) -> ReadLimit:
        s = self.stream
        if s.max_bytes is not None and not s.max_files_given:
            return ReadMaxBytes(s.max_bytes)
        return ReadMaxFiles(s.max_files or 1)

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._newest()

    @message_first
    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        end = self._latest(start, limit)
        if end != start and start == self._initial:
            # The first batch: its end keeps its start, for a replay after a crash
            # (module docstring).
            end = {**end, "from": dict(start)}
        return end

    def _latest(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        version, snapshot, done = parse_offset(start)
        limits = limits_of(limit, self.stream)
        if done is None:  # the whole of `version` read: the next commit is next
            version, snapshot, done = version + 1, False, 0
        end = start
        while True:
            unit = self._unit(version, snapshot)
            if unit is None:
                return end
            i = done
            while i < len(unit.files) and limits.admits(unit.files[i]):
                limits.take(unit.files[i])
                i += 1
            if i < len(unit.files):
                # Nothing of this unit fits any more: the batch ends where the last one did.
                return make_offset(version, snapshot, i) if i > 0 else end
            end = make_offset(version, False, None)
            version, snapshot, done = version + 1, False, 0

    @message_first
    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        from parquetry.spark.reader import group_by_size, task_count

        files, schema = self._files_between(start, end)
        if files and schema is not None and self.options.predicates is not None:
            dnf = self._dnf(schema)  # partition pruning; rows are filtered in read()
            files = [f for f in files if _may_match(f, dnf)]
        if not files:
            return []
        assert schema is not None
        sizes = [max(1, int(f.size or 1)) for f in files]
        groups = group_by_size(sizes, task_count(sum(sizes), len(sizes), self.options))
        return [
            InputPartition(StreamTask(tuple(files[i] for i in group), schema)) for group in groups
        ]

    def _files_between(
        self, start: dict[str, Any], end: dict[str, Any]
    ) -> tuple[list[Any], pa.Schema | None]:
        # A replayed first batch gets a fresh initial offset as its start: the one the
        # batch was planned from is in its end.
        origin = end.get("from")
        version, snapshot, done = parse_offset(origin if isinstance(origin, dict) else start)
        last, last_snapshot, last_files = parse_offset(end)
        if done is None:
            version, snapshot, done = version + 1, False, 0
        out: list[Any] = []
        schema: pa.Schema | None = None
        while (version, not snapshot) <= (last, not last_snapshot):
            unit = self._unit(version, snapshot)
            if unit is None:  # cannot happen for an end Spark got from latestOffset
                from parquetry.errors import VersionNotFound

                raise VersionNotFound(
                    f"dataset {self._uuid()!r} has no version {version} (stream offset {end})"
                )
            stop = len(unit.files)
            if (version, snapshot) == (last, last_snapshot) and last_files is not None:
                stop = last_files
            out.extend(unit.files[done:stop])
            schema = unit.schema or schema
            version, snapshot, done = version + 1, False, 0
        return out, schema

    @message_first
    def commit(self, end: dict[str, Any]) -> None:
        version, _, done = parse_offset(end)
        finished = version if done is None else version - 1
        for key in [k for k in self._units if k[0] <= finished]:
            del self._units[key]

    # --- executors -------------------------------------------------------------------------

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        from parquetry.dataset.changes import read_change_file
        from parquetry.dataset.predicates import to_expression

        task = partition.value
        assert isinstance(task, StreamTask)
        store = self.options.open_store()
        names = list(self.arrow_schema.names)
        missing = [n for n in names if n not in task.schema.names]
        if missing:
            from parquetry.errors import UnknownColumn

            raise UnknownColumn(
                f"column {missing[0]!r} of the stream is not in dataset {self._uuid()!r}",
                column=missing[0],
            )
        dnf = self._dnf(task.schema)
        row_filter = to_expression(dnf) if dnf else None
        filter_columns = sorted({lit.column for conj in dnf or () for lit in conj})
        for f in task.files:
            table = read_change_file(
                store,
                self._uuid(),
                task.schema,
                f.planned("table"),
                names,
                row_filter=row_filter,
                filter_columns=filter_columns,
            )
            if table.num_rows:
                yield from cast_to_spark(table, self.arrow_schema).to_batches(max_chunksize=65_536)

    def _dnf(self, schema: pa.Schema) -> Any:
        """Option ``predicates`` checked against ``schema`` (None without the option)."""
        from parquetry.dataset.predicates import validate_predicates

        given = self.options.predicates
        if given is None:
            return None
        return validate_predicates([list(conj) for conj in given], schema)


def _may_match(f: Any, dnf: Any) -> bool:
    """Whether file ``f`` may hold rows of ``dnf``, judged by its partition values alone."""
    from parquetry.dataset.predicates import eval_scalar

    values = dict(f.partition)
    return any(
        all(eval_scalar(lit, values[lit.column]) for lit in conj if lit.column in values)
        for conj in dnf
    )
