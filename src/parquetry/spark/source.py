"""The ``parquetry`` PySpark data source: which reader and writer serve a read or a write.

Every method here runs in a short-lived Python worker that the driver JVM spawns, not in the
user's process: state reaches the workers only through options and pickled objects.
"""

from __future__ import annotations

import sys
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceWriter
from pyspark.sql.types import StructType

from parquetry.spark.options import SourceOptions

__all__ = ["ParquetryDataSource", "pushdown_enabled_here", "register"]

_PLAN_WORKER = "pyspark.sql.worker.plan_data_source_read"
_PUSHDOWN_WORKER = "pyspark.sql.worker.data_source_pushdown_filters"


def pushdown_enabled_here() -> bool:
    """Whether the Spark worker planning this read has filter pushdown switched on.

    Spark (4.1+) fails a read whose reader *defines* ``pushFilters`` while
    ``spark.sql.python.filterPushdown.enabled`` is false, and the conf is not visible to the
    data source. The planning worker holds the decision in its ``enable_pushdown`` local (or
    is the pushdown worker itself), so it is read from the calling frames. Unknown callers get
    ``False``: a reader without ``pushFilters`` works in every case.
    """
    frame = sys._getframe(1)
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if module == _PUSHDOWN_WORKER or frame.f_code.co_filename.endswith(
            "data_source_pushdown_filters.py"
        ):
            return True
        in_planner = module == _PLAN_WORKER or frame.f_code.co_filename.endswith(
            "plan_data_source_read.py"
        )
        if in_planner and "enable_pushdown" in frame.f_locals:
            return bool(frame.f_locals["enable_pushdown"])
        frame = frame.f_back  # type: ignore[assignment]
    return False


class ParquetryDataSource(DataSource):
    """Format ``parquetry``: kartothek-format datasets (``layout=dataset``, the default) and
    ParquetDatasetStore snapshots (``layout=snapshot``) on any parquetry store."""

    def __init__(self, options: Any) -> None:
        super().__init__(options)
        self.parsed = SourceOptions.parse(dict(options))

    @classmethod
    def name(cls) -> str:
        return "parquetry"

    def schema(self) -> StructType:
        from parquetry.spark.reader import source_arrow_schema
        from parquetry.spark.types import arrow_to_spark_schema

        return arrow_to_spark_schema(source_arrow_schema(self.parsed))

    def reader(self, schema: StructType) -> DataSourceReader:
        from parquetry.spark.reader import ParquetryPushdownReader, ParquetryReader

        wanted = self.parsed.pushdown
        if wanted == "true" or (wanted == "auto" and pushdown_enabled_here()):
            return ParquetryPushdownReader(self.parsed, schema)
        return ParquetryReader(self.parsed, schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from parquetry.spark.writer import DatasetArrowWriter, SnapshotArrowWriter

        if self.parsed.layout == "snapshot":
            return SnapshotArrowWriter(self.parsed, schema, overwrite)
        return DatasetArrowWriter(self.parsed, schema, overwrite)


def register(spark: SparkSession) -> None:
    """Register the ``parquetry`` format on ``spark``.

    Turn on ``spark.sql.python.filterPushdown.enabled`` to let filters prune partitions and
    files; without it reads still work but every planned file is read.
    """
    # Registering again works but makes Spark log a warning each time: once per session.
    if getattr(spark, "_parquetry_registered", False):
        return
    spark.dataSource.register(ParquetryDataSource)
    spark._parquetry_registered = True  # type: ignore[attr-defined]
