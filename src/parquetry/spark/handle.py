"""A table handle for Spark users: Delta's ``DeltaTable`` for kartothek-format datasets.

``ParquetryTable.for_path(spark, "file:///lake/orders")`` names one dataset; its methods run
on the driver (the user's process) over the dataset layer: ``history()`` and ``detail()`` as
DataFrames shaped like Delta's ``DESCRIBE HISTORY`` / ``DESCRIBE DETAIL``, ``restore()`` as a
new commit, ``vacuum()`` as garbage collection with Delta's retention check, ``toDF()`` as a
``format("parquetry")`` read. ``delete_where`` / ``update_where`` / ``upsert`` / ``compact``
plan on the driver, rewrite files in Spark tasks and commit once on the driver
(:mod:`parquetry.spark.tableops`); each returns a one-row DataFrame of metrics like Delta's.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from parquetry.dataset import Dataset
from parquetry.dataset.history import HistoryEntry
from parquetry.errors import InvalidArgument
from parquetry.spark.helpers import _activate, _store_and_options
from parquetry.spark.types import arrow_to_spark_schema
from parquetry.store import Store

__all__ = [
    "COMPACT_SCHEMA",
    "DELETE_SCHEMA",
    "DETAIL_SCHEMA",
    "HISTORY_SCHEMA",
    "MERGE_SCHEMA",
    "ParquetryTable",
]

_STRING_MAP = T.MapType(T.StringType(), T.StringType())

#: Delta's history columns (plus nothing Delta lacks): one row per retained commit.
HISTORY_SCHEMA = T.StructType(
    [
        T.StructField("version", T.LongType(), False),
        T.StructField("timestamp", T.TimestampType(), False),
        T.StructField("operation", T.StringType(), False),
        T.StructField("operationParameters", _STRING_MAP, False),
        T.StructField("operationMetrics", _STRING_MAP, False),
    ]
)

DETAIL_SCHEMA = T.StructType(
    [
        T.StructField("format", T.StringType(), False),
        T.StructField("id", T.StringType(), False),
        T.StructField("location", T.StringType(), False),
        T.StructField("version", T.LongType(), False),
        T.StructField("createdAt", T.TimestampType(), True),
        T.StructField("lastModified", T.TimestampType(), True),
        T.StructField("partitionColumns", T.ArrayType(T.StringType(), False), False),
        T.StructField("secondaryIndices", T.ArrayType(T.StringType(), False), False),
        T.StructField("numFiles", T.LongType(), False),
        T.StructField("numPartitions", T.LongType(), False),
        T.StructField("numRows", T.LongType(), True),
        T.StructField("sizeInBytes", T.LongType(), True),
        T.StructField("schema", T.StringType(), False),
        T.StructField("properties", _STRING_MAP, False),
    ]
)


def _longs(*names: str) -> list[T.StructField]:
    return [T.StructField(n, T.LongType(), False) for n in names]


#: What delete_where / update_where return (Delta's SQL DELETE / UPDATE, plus the version).
DELETE_SCHEMA = T.StructType(_longs("num_affected_rows", "version"))
#: What upsert returns (Delta's SQL MERGE, plus the version).
MERGE_SCHEMA = T.StructType(
    _longs(
        "num_affected_rows",
        "num_updated_rows",
        "num_deleted_rows",
        "num_inserted_rows",
        "version",
    )
)
#: What compact returns (Delta's OPTIMIZE: the table's path and a metrics struct).
COMPACT_SCHEMA = T.StructType(
    [
        T.StructField("path", T.StringType(), False),
        T.StructField(
            "metrics",
            T.StructType(
                _longs(
                    "numFilesAdded",
                    "numFilesRemoved",
                    "numBytesAdded",
                    "numBytesRemoved",
                    "partitionsOptimized",
                    "totalConsideredFiles",
                    "totalFilesSkipped",
                )
            ),
            False,
        ),
        T.StructField("version", T.LongType(), False),
    ]
)

# Delta's metric names for the row-level operations' metrics (per operation, like Delta's
# DELETE / UPDATE / MERGE history).
_ROW_METRIC_NAMES = {
    "delete": {"rows_deleted": "numDeletedRows", "rows_copied": "numCopiedRows"},
    "update_where": {"rows_updated": "numUpdatedRows", "rows_copied": "numCopiedRows"},
    "upsert": {
        "rows_inserted": "numTargetRowsInserted",
        "rows_updated": "numTargetRowsUpdated",
        "rows_deleted": "numTargetRowsDeleted",
        "rows_copied": "numTargetRowsCopied",
    },
}
# Delta's metric names for the dataset layer's metrics.
_METRIC_NAMES = {
    "rows_added": "numOutputRows",
    "rows_removed": "numRemovedRows",
    "files_added": "numAddedFiles",
    "files_removed": "numRemovedFiles",
    "bytes_added": "numAddedBytes",
    "bytes_removed": "numRemovedBytes",
}


def split_table_url(url: str) -> tuple[str, str]:
    """``<store URL>/<dataset>`` -> (store URL, dataset uuid)."""
    stripped = url.rstrip("/")
    store, sep, dataset = stripped.rpartition("/")
    if not sep or not dataset or store.endswith(":/") or store.endswith(":"):
        raise InvalidArgument(
            f"table URL {url!r} must be '<store URL>/<dataset>', e.g. 'file:///lake/orders'"
        )
    return store, dataset


def _app_id(spark: SparkSession) -> str | None:
    try:
        return spark.conf.get("spark.app.id", None)
    except Exception:  # a session that cannot answer: the id is only informative
        return None


def _history_row(entry: HistoryEntry) -> tuple[Any, ...]:
    names = {**_METRIC_NAMES, **_ROW_METRIC_NAMES.get(entry.operation, {})}
    metrics = {names.get(k, k): str(v) for k, v in entry.metrics.items()}
    # Spark stores timestamps without zone: hand it naive UTC, the session zone shows it.
    when = entry.time.astimezone(dt.UTC).replace(tzinfo=None)
    return (entry.version, when, entry.operation, dict(entry.parameters), metrics)


class ParquetryTable:
    """One kartothek-format dataset, seen from Spark (create with :meth:`for_path` or
    :meth:`for_name`). Every method reads the newest version when it is called."""

    def __init__(
        self, spark: SparkSession, store: Store | str, dataset: str, **store_options: Any
    ) -> None:
        self.spark = spark
        self.store, self._options = _store_and_options(store, store_options)
        self.name = dataset
        Dataset.open(self.store, dataset)  # DatasetNotFound now rather than at first use

    @classmethod
    def for_path(cls, spark: SparkSession, url: str, **store_options: Any) -> ParquetryTable:
        """The dataset at ``<store URL>/<dataset>`` (``s3://bucket/lake/orders``: store
        ``s3://bucket/lake``, dataset ``orders``). ``store_options``: endpoint, region,
        credentials... as for ``open_store``."""
        store, dataset = split_table_url(url)
        return cls(spark, store, dataset, **store_options)

    @classmethod
    def for_name(
        cls, spark: SparkSession, store: Store | str, dataset: str, **store_options: Any
    ) -> ParquetryTable:
        """Dataset ``dataset`` in ``store`` (a URL, or a Store Spark's workers can open)."""
        return cls(spark, store, dataset, **store_options)

    def __repr__(self) -> str:
        return f"ParquetryTable({self.name!r}, store={self.store.url!r})"

    def dataset(self, version: int | None = None) -> Dataset:
        """The dataset layer's handle on the newest version (or ``version``)."""
        return Dataset.open(self.store, self.name, version=version)

    def toDF(self, version: int | None = None) -> DataFrame:  # Delta's name
        """The rows of the newest version (or ``version``), read by ``format("parquetry")``."""
        _activate(self.spark)
        reader = self.spark.read.format("parquetry").options(**self._options)
        reader = reader.option("dataset", self.name)
        if version is not None:
            reader = reader.option("version", str(version))
        return reader.load()

    def history(self, limit: int | None = None) -> DataFrame:
        """The retained commits, newest first: ``version``, ``timestamp``, ``operation``,
        ``operationParameters`` and ``operationMetrics`` (maps of strings, like Delta)."""
        entries = self.dataset().history(limit=limit)
        return self.spark.createDataFrame([_history_row(e) for e in entries], HISTORY_SCHEMA)

    def detail(self) -> DataFrame:
        """One row describing the newest version: files, partitions, rows, bytes, schema
        (Spark DDL), indices, creation and modification times."""
        d = self.dataset().detail()

        def naive(t: dt.datetime | None) -> dt.datetime | None:
            return None if t is None else t.astimezone(dt.UTC).replace(tzinfo=None)

        row = (
            "parquetry",
            d.uuid,
            f"{d.store.rstrip('/')}/{d.uuid}",
            d.version,
            naive(d.created),
            naive(d.modified),
            list(d.partition_keys),
            list(d.secondary_indices),
            d.files,
            d.partitions,
            d.rows,
            d.bytes,
            arrow_to_spark_schema(d.schema).simpleString(),
            {k: v if isinstance(v, str) else json.dumps(v) for k, v in d.metadata.items()},
        )
        return self.spark.createDataFrame([row], DETAIL_SCHEMA)

    def _parameters(self) -> dict[str, str]:
        params = {"engine": "spark"}
        app = _app_id(self.spark)
        if app:
            params["sparkAppId"] = app
        return params

    def delete_where(self, condition: Any, *, compression: str | None = None) -> DataFrame:
        """Delete the rows matching ``condition``: a Spark SQL condition (``"id > 3 AND
        part = 'a'"``, the subset of ``replaceWhere``) or kartothek DNF. One Spark task per
        file that may match; one commit (operation ``delete``). Returns ``num_affected_rows``
        and the version after it (unchanged when nothing matched)."""
        from parquetry.spark.operations import delete_where

        done = delete_where(
            self.spark, self.dataset(), self._options, condition, self._parameters(), compression
        )
        row = (done.metrics.get("rows_deleted", 0), done.version)
        return self.spark.createDataFrame([row], DELETE_SCHEMA)

    delete = delete_where  # Delta's name (the dataset layer's delete() drops the dataset)

    def update_where(
        self, condition: Any, set: Mapping[str, Any], *, compression: str | None = None
    ) -> DataFrame:
        """Set columns of the rows matching ``condition`` (as :meth:`delete_where`):
        ``set={column: value}``, a string being a Spark SQL expression over the old row
        (``"price * 2"``, ``"'gold'"``; see :mod:`parquetry.spark.setexpr`), any other value
        a literal, cast strictly (checked before any task runs). Operation ``update_where``.
        Returns ``num_affected_rows`` and the version after it."""
        from parquetry.spark.operations import update_where

        done = update_where(
            self.spark,
            self.dataset(),
            self._options,
            condition,
            set,
            self._parameters(),
            compression,
        )
        return self.spark.createDataFrame(
            [(done.metrics.get("rows_updated", 0), done.version)], DELETE_SCHEMA
        )

    def upsert(
        self,
        source: Any,
        on: Sequence[str] | str,
        *,
        when_matched: str = "update",
        when_not_matched: str = "insert",
        merge_schema: bool = False,
        compression: str | None = None,
    ) -> DataFrame:
        """MERGE ``source`` (a DataFrame or a pyarrow Table) into the table by the key
        columns ``on``, with the Python API's rules (:meth:`Dataset.upsert`). The source's
        key columns are collected to the driver (not its rows: see
        :mod:`parquetry.spark.merge`); matched files are rewritten and unmatched rows
        inserted by Spark tasks; one commit (operation ``upsert``). Returns Delta's MERGE
        counts and the version after it."""
        from parquetry.spark.merge import upsert

        done = upsert(
            self.spark,
            self.dataset(),
            self._options,
            source,
            on,
            when_matched=when_matched,
            when_not_matched=when_not_matched,
            merge_schema=merge_schema,
            parameters=self._parameters(),
            compression=compression,
        )
        m = done.metrics
        counts = [m.get(k, 0) for k in ("rows_updated", "rows_deleted", "rows_inserted")]
        return self.spark.createDataFrame([(sum(counts), *counts, done.version)], MERGE_SCHEMA)

    def compact(
        self,
        target_file_size: int | None = None,
        *,
        partitions: Any = None,
        sort_by: Any = None,
        min_files: int = 2,
        compression: str | None = None,
    ) -> DataFrame:
        """Bin-pack each partition's small files into files near ``target_file_size``
        (default 128 MiB), one Spark task per output file, one commit (operation
        ``compact``), as :meth:`Dataset.compact`: ``partitions`` a Spark SQL condition or
        DNF over partition keys, ``sort_by`` column(s). Returns Delta OPTIMIZE's ``path``
        and ``metrics`` and the version after it."""
        from parquetry.dataset.compact_plan import DEFAULT_TARGET_SIZE
        from parquetry.spark.operations import compact

        ds = self.dataset()
        done, plan = compact(
            self.spark,
            ds,
            self._options,
            target_file_size=DEFAULT_TARGET_SIZE if target_file_size is None else target_file_size,
            partitions=partitions,
            sort_by=sort_by,
            min_files=min_files,
            parameters=self._parameters(),
            compression=compression,
        )
        m = done.metrics
        metrics = (
            m.get("files_added", 0),
            m.get("files_compacted", 0),
            m.get("bytes_added", 0),
            m.get("bytes_compacted", 0),
            m.get("partitions_compacted", 0),
            plan.files_considered,
            plan.files_considered - plan.files_removed,
        )
        path = f"{self.store.url.rstrip('/')}/{self.name}"
        return self.spark.createDataFrame([(path, metrics, done.version)], COMPACT_SCHEMA)

    def restore(self, version: int) -> DataFrame:
        """Commit a new version equal to ``version`` (metadata only); returns its history
        row. Raises DatasetNotFound if ``version`` was garbage collected (nothing is
        committed then)."""
        params = self._parameters()
        restored = self.dataset().restore(version, parameters=params)
        return self.spark.createDataFrame(
            [_history_row(e) for e in restored.history(limit=1)], HISTORY_SCHEMA
        )

    restoreToVersion = restore  # Delta's name

    def vacuum(self, retention_hours: float | None = None, *, force: bool = False) -> DataFrame:
        """Delete files no version younger than ``retention_hours`` (default 168, 7 days)
        needs; shorter retentions need ``force=True``. Returns the deleted keys (``path``)."""
        ds = self.dataset()
        report = (
            ds.vacuum(force=force)
            if retention_hours is None
            else ds.vacuum(dt.timedelta(hours=retention_hours), force=force)
        )
        schema = T.StructType([T.StructField("path", T.StringType(), False)])
        return self.spark.createDataFrame([(k,) for k in report.deleted], schema)
