"""The reader of the ``parquetry`` data source: plan once, group files into few tasks, read them
as Arrow batches cast to exactly Spark's types.

Spark 4.1-4.3 keeps the read it planned (partitions *and* the pickled reader) on the relation,
not on the scan: every later scan of the same loaded DataFrame, temp view or self-join side
runs that same read, and scans without pushable filters never ask Python again. A read that
depended on one scan's pushed filters would therefore answer another scan's query. So nothing
here depends on what Spark pushes: the reader does not implement ``pushFilters`` (Spark then
evaluates every filter itself), the reader object holds only what the options say, and each
``InputPartition`` carries the exact predicates (option ``predicates``) and files it was
planned with, which ``read`` applies and checks.
"""

from __future__ import annotations

import itertools
import math
import os
import uuid
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from parquetry.parquet.files import open_parquet, read_table
from parquetry.spark.options import SourceOptions
from parquetry.spark.surface import message_first
from parquetry.spark.types import cast_to_spark, spark_to_arrow_schema

__all__ = [
    "FileTask",
    "ParquetryReader",
    "group_by_size",
    "source_arrow_schema",
]

_BATCH_ROWS = 65_536


@dataclass(frozen=True, slots=True)
class FileTask:
    """The files one Spark task reads (a picklable ``InputPartition`` value).

    ``predicates`` are the kartothek DNF the files were planned with: ``read`` filters rows by
    exactly these, so a task never depends on state kept elsewhere.
    """

    version: int | None
    files: tuple[Any, ...]
    predicates: tuple[tuple[tuple[str, str, Any], ...], ...] | None = None


def group_by_size(sizes: Sequence[int], tasks: int) -> list[list[int]]:
    """Indices of ``sizes`` packed into at most ``tasks`` groups of similar total size.

    Largest first onto the lightest group (LPT); groups keep their files in planned order.
    """
    if not sizes:
        return []
    count = max(1, min(tasks, len(sizes)))
    groups: list[list[int]] = [[] for _ in range(count)]
    loads = [0] * count
    for index in sorted(range(len(sizes)), key=lambda i: -sizes[i]):
        lightest = loads.index(min(loads))
        groups[lightest].append(index)
        loads[lightest] += sizes[index]
    return [sorted(group) for group in groups if group]


def task_count(total_bytes: int, files: int, options: SourceOptions) -> int:
    """Few tasks: each costs ~90 ms, but one per core keeps every core busy."""
    if options.max_tasks is not None:
        return max(1, min(options.max_tasks, files))
    wanted = max(os.cpu_count() or 2, math.ceil(total_bytes / options.task_bytes))
    return max(1, min(wanted, files))


def _open_dataset(options: SourceOptions, version: int | None = None) -> Any:
    from parquetry.dataset import Dataset

    assert options.dataset is not None
    return Dataset.open(options.open_store(), options.dataset, version=version)


def _snapshot_parts(options: SourceOptions) -> list[tuple[str, int]]:
    """(key, size) of every part of the committed snapshot, in row order."""
    from parquetry.snapshot import ParquetDatasetStore
    from parquetry.snapshot.layout import part_key

    assert options.key is not None
    store = options.open_store()
    manifest = ParquetDatasetStore(store).read_manifest(options.key)
    keys = [part_key(options.key, name) for name in manifest.parts]
    return [(key, store.head(key).size) for key in keys]


def source_arrow_schema(options: SourceOptions) -> pa.Schema:
    """The Arrow schema of what ``options`` name (dataset incl. partition columns, or snapshot),
    projected to option ``columns`` if given.

    Raises:
        UnknownColumn: a name in option ``columns`` is not in the dataset or snapshot.
    """
    if options.layout == "snapshot":
        parts = _snapshot_parts(options)
        if not parts:
            from parquetry.errors import DatasetIncomplete

            raise DatasetIncomplete(f"snapshot {options.key!r} has no parts to take a schema from")
        store = options.open_store()
        with store.open(parts[0][0], size=parts[0][1]) as handle:
            # open_parquet checks the footer first: pyarrow aborts on some footers.
            schema = open_parquet(handle, pre_buffer=False)[0].schema_arrow
        what = f"snapshot {options.key!r}"
    else:
        schema = _open_dataset(options, options.version).schema
        what = f"dataset {options.dataset!r}"
    return project(schema, options.columns, what)


def project(schema: pa.Schema, columns: Sequence[str] | None, what: str) -> pa.Schema:
    """``schema`` with only ``columns``, in that order (all if None)."""
    if columns is None:
        return schema
    from parquetry.errors import InvalidArgument, UnknownColumn

    if len(set(columns)) != len(columns):
        raise InvalidArgument(f"option 'columns' names a column twice: {','.join(columns)!r}")
    for name in columns:
        if name not in schema.names:
            raise UnknownColumn(
                f"option 'columns': column {name!r} is not in {what} "
                f"(columns: {', '.join(schema.names)})",
                column=name,
            )
    return pa.schema([schema.field(name) for name in columns], metadata=schema.metadata)


def _trace(directory: str | None, files: Sequence[Any]) -> None:
    """Debugging aid (option ``trace_reads``): record the keys a task reads in a local file."""
    if not directory:
        return
    keys = [f if isinstance(f, str) else f.key for f in files]
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, f"{uuid.uuid4().hex}.txt"), "w", encoding="utf-8") as out:
        out.write("\n".join(keys))


class ParquetryReader(DataSourceReader):
    """Reads the files planned for the options' ``predicates``; Spark applies its own filters.

    Deliberately without ``pushFilters``: see the module docstring.
    """

    def __init__(self, options: SourceOptions, schema: StructType) -> None:
        self.options = options
        self.spark_schema = schema
        self.arrow_schema = spark_to_arrow_schema(schema)

    @message_first
    def partitions(self) -> list[InputPartition]:
        predicates = self.options.predicates
        if self.options.layout == "snapshot":
            parts = _snapshot_parts(self.options)
            sizes = [size for _, size in parts]
            version = None
            files: list[Any] = [key for key, _ in parts]
        else:
            dataset = _open_dataset(self.options, self.options.version)
            plan = dataset.plan(_as_lists(predicates))
            files = list(plan.files)
            sizes = [max(1, int(f.size)) for f in files]
            version = dataset.version
        # An empty plan still gets one (empty) task: Spark would add InputPartition(None).
        groups = group_by_size(sizes, task_count(sum(sizes), len(sizes), self.options)) or [[]]
        return [
            InputPartition(FileTask(version, tuple(files[i] for i in group), predicates))
            for group in groups
        ]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        task = partition.value
        if not isinstance(task, FileTask) or task.predicates != self.options.predicates:
            from parquetry.errors import InvalidArgument

            # Cannot happen through Spark today; if a future Spark paired partitions with
            # another reader, rows must not come back filtered by the wrong predicates.
            raise InvalidArgument(
                f"read task planned for predicates {getattr(task, 'predicates', None)!r} "
                f"reached a reader for {self.options.predicates!r}; load the DataFrame again"
            )
        columns = list(self.arrow_schema.names)
        if self.options.layout == "snapshot":
            store = self.options.open_store()
            _trace(self.options.trace_reads, task.files)

            def read_part(key: str) -> pa.Table:
                with store.open(key) as handle:
                    # ParquetFile, not read_table: see parquetry.dataset.indices. Opened by
                    # open_parquet: its footer checked before pyarrow sees it.
                    return self._cast(read_table(handle, columns=columns))

            yield from _batches(prefetched(read_part, task.files))
            return
        from parquetry.dataset.predicates import to_expression, validate_predicates
        from parquetry.dataset.read import read_planned_file

        dataset = _open_dataset(self.options, task.version)
        for name in columns:
            if name not in dataset.schema.names:
                from parquetry.errors import UnknownColumn

                raise UnknownColumn(
                    f"column {name!r} is not in dataset {dataset.uuid!r}", column=name
                )
        dnf = validate_predicates(_as_lists(task.predicates), dataset.schema)
        row_filter = to_expression(dnf) if dnf else None
        filter_columns = sorted({lit.column for conj in dnf or () for lit in conj})
        _trace(self.options.trace_reads, task.files)

        def read_file(planned: Any) -> pa.Table:
            table = read_planned_file(
                dataset.store,
                dataset.schema,
                planned,
                columns=columns,
                row_filter=row_filter,
                filter_columns=filter_columns,
            )
            return self._cast(table)

        yield from _batches(prefetched(read_file, task.files))

    def _cast(self, table: pa.Table) -> pa.Table:
        return cast_to_spark(table, self.arrow_schema)


def _batches(tables: Iterator[pa.Table]) -> Iterator[pa.RecordBatch]:
    for table in tables:
        if table.num_rows:
            yield from table.to_batches(max_chunksize=_BATCH_ROWS)


_T = TypeVar("_T")
_R = TypeVar("_R")


def prefetched(fn: Callable[[_T], _R], items: Sequence[_T], ahead: int = 1) -> Iterator[_R]:
    """``fn(item)`` for each item in order, computing up to ``ahead`` items in advance on one
    background thread.

    Spark consumes a task's batches on the JVM while the Python worker produces them; without
    this, the worker decodes the next file only after the JVM took the previous one, so reading
    and converting alternate instead of overlapping. pyarrow decodes without the GIL. If the
    consumer stops early (``limit``), queued reads are cancelled.
    """
    if ahead <= 0 or len(items) <= 1:
        for item in items:
            yield fn(item)
        return
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="parquetry-prefetch")
    try:
        pending: deque[Future[_R]] = deque()
        rest = iter(items)
        for item in itertools.islice(rest, ahead):
            pending.append(pool.submit(fn, item))
        while pending:
            result = pending.popleft().result()
            for item in itertools.islice(rest, 1):
                pending.append(pool.submit(fn, item))
            yield result
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def _as_lists(
    predicates: tuple[tuple[tuple[str, str, Any], ...], ...] | None,
) -> list[list[tuple[str, str, Any]]] | None:
    return None if predicates is None else [list(conj) for conj in predicates]
