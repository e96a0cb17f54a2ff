"""Readers of the ``parquetry`` data source: plan once, group files into few tasks, read them
as Arrow batches cast to exactly Spark's types."""

from __future__ import annotations

import math
import os
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql.datasource import DataSourceReader, Filter, InputPartition
from pyspark.sql.types import StructType

from parquetry.spark.filters import filter_table, translate_filters
from parquetry.spark.options import SourceOptions
from parquetry.spark.types import cast_to_spark, spark_to_arrow_schema

__all__ = [
    "FileTask",
    "ParquetryPushdownReader",
    "ParquetryReader",
    "group_by_size",
    "source_arrow_schema",
]

_BATCH_ROWS = 65_536


@dataclass(frozen=True, slots=True)
class FileTask:
    """The files one Spark task reads (a picklable ``InputPartition`` value)."""

    version: int | None
    files: tuple[Any, ...]


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
    """The Arrow schema of what ``options`` name (dataset incl. partition columns, or snapshot)."""
    if options.layout == "snapshot":
        parts = _snapshot_parts(options)
        if not parts:
            from parquetry.errors import DatasetIncomplete

            raise DatasetIncomplete(f"snapshot {options.key!r} has no parts to take a schema from")
        store = options.open_store()
        with store.open(parts[0][0], size=parts[0][1]) as handle:
            return pq.read_schema(handle)
    return _open_dataset(options, options.version).schema


def _trace(directory: str, task: FileTask) -> None:
    """Debugging aid (option ``trace_reads``): record the keys a task reads in a local file."""
    keys = [f if isinstance(f, str) else f.key for f in task.files]
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, f"{uuid.uuid4().hex}.txt"), "w", encoding="utf-8") as out:
        out.write("\n".join(keys))


class ParquetryReader(DataSourceReader):
    """Reads every planned file; Spark applies all filters itself."""

    def __init__(self, options: SourceOptions, schema: StructType) -> None:
        self.options = options
        self.spark_schema = schema
        self.arrow_schema = spark_to_arrow_schema(schema)
        self.accepted: tuple[Filter, ...] = ()
        self.predicates: list[list[tuple[str, str, Any]]] | None = None

    def partitions(self) -> list[InputPartition]:
        if self.options.layout == "snapshot":
            parts = _snapshot_parts(self.options)
            sizes = [size for _, size in parts]
            version = None
            files: list[Any] = [key for key, _ in parts]
        else:
            dataset = _open_dataset(self.options, self.options.version)
            plan = dataset.plan(self.predicates)
            files = list(plan.files)
            sizes = [max(1, int(f.size)) for f in files]
            version = dataset.version
        groups = group_by_size(sizes, task_count(sum(sizes), len(sizes), self.options))
        return [
            InputPartition(FileTask(version, tuple(files[i] for i in group))) for group in groups
        ]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        task: FileTask = partition.value
        if self.options.trace_reads:
            _trace(self.options.trace_reads, task)
        columns = list(self.arrow_schema.names)
        if self.options.layout == "snapshot":
            store = self.options.open_store()
            for key in task.files:
                with store.open(key) as handle:
                    table = pq.read_table(handle, columns=columns)
                yield from self._batches(table)
            return
        dataset = _open_dataset(self.options, task.version)
        for planned in task.files:
            yield from self._batches(dataset.read_file(planned, columns=columns))

    def _batches(self, table: pa.Table) -> Iterator[pa.RecordBatch]:
        # Filters run on Spark's types, the types they were translated against.
        table = filter_table(cast_to_spark(table, self.arrow_schema), self.accepted)
        if table.num_rows:
            yield from table.to_batches(max_chunksize=_BATCH_ROWS)


class ParquetryPushdownReader(ParquetryReader):
    """Also takes Spark's filters: exact ones prune partitions/files and filter rows here."""

    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:
        pushdown = translate_filters(filters, self.arrow_schema)
        self.accepted = pushdown.accepted
        self.predicates = pushdown.dnf() if self.options.layout == "dataset" else None
        return iter(pushdown.residual)
