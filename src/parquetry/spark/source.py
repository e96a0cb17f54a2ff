"""The ``parquetry`` PySpark data source: which reader and writer serve a read or a write.

Every method here runs in a short-lived Python worker that the driver JVM spawns, not in the
user's process: state reaches the workers only through options and pickled objects.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceWriter
from pyspark.sql.types import StructType

from parquetry.spark.options import SourceOptions

__all__ = ["ParquetryDataSource", "register"]

_NO_SPARK_PUSHDOWN = (
    "option pushdown=true is refused: Spark 4.1-4.3 runs the read planned for one scan's "
    "pushed filters for every other scan of the same DataFrame or view (self-joins, a query "
    "without WHERE after one with it), which would return wrong rows. Filters are evaluated "
    "by Spark; to prune files, pass option 'predicates' (kartothek DNF as JSON) or use "
    "parquetry.spark.read_dataset(..., predicates=...)"
)


def _current_version(options: SourceOptions) -> int | None:
    """The dataset version a read of ``options`` pins, or None: snapshots, an explicit
    ``version``, a dataset that does not exist yet (a write), or a state kartothek wrote last
    (it has no version number of its own to pin)."""
    if options.layout != "dataset" or options.version is not None:
        return None
    from parquetry.dataset import Dataset
    from parquetry.errors import DatasetNotFound

    assert options.dataset is not None
    try:
        dataset = Dataset.open(options.open_store(), options.dataset)
    except DatasetNotFound:
        return None
    # A kartothek-written state reports the parquetry version it builds on, not itself.
    return None if dataset._foreign else dataset.version


class ParquetryDataSource(DataSource):
    """Format ``parquetry``: kartothek-format datasets (``layout=dataset``, the default) and
    ParquetDatasetStore snapshots (``layout=snapshot``) on any parquetry store."""

    def __init__(self, options: Any) -> None:
        from parquetry.spark.sql import location_options

        super().__init__(options)
        # SQL statements hand over table LOCATION as 'path', or nothing at all (see sql.py).
        self.parsed = SourceOptions.parse(location_options(dict(options)))
        # Spark creates this object once per relation (per load()) and pickles it to every
        # worker that plans for it. Spark 4.1-4.3 plans some queries of a relation again and
        # reuses an earlier plan for others, so the version is fixed here, once: every query
        # of one DataFrame reads the same version.
        self.read_version = _current_version(self.parsed)

    @classmethod
    def name(cls) -> str:
        return "parquetry"

    def schema(self) -> StructType:
        from parquetry.spark.reader import source_arrow_schema
        from parquetry.spark.types import arrow_to_spark_schema

        return arrow_to_spark_schema(source_arrow_schema(self.parsed))

    def reader(self, schema: StructType) -> DataSourceReader:
        from parquetry.errors import InvalidArgument
        from parquetry.spark.reader import ParquetryReader

        if self.parsed.pushdown == "true":
            raise InvalidArgument(_NO_SPARK_PUSHDOWN)
        options = self.parsed
        if options.version is None and self.read_version is not None:
            options = replace(options, version=self.read_version)
        return ParquetryReader(options, schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from parquetry.spark.writer import DatasetArrowWriter, SnapshotArrowWriter

        if self.parsed.layout == "snapshot":
            return SnapshotArrowWriter(self.parsed, schema, overwrite)
        return DatasetArrowWriter(self.parsed, schema, overwrite)


def register(spark: SparkSession) -> None:
    """Register the ``parquetry`` format on ``spark``.

    Works whatever ``spark.sql.python.filterPushdown.enabled`` says: the reader takes no
    filters from Spark (see :mod:`parquetry.spark.reader`); option ``predicates`` prunes.
    """
    # Registering again works but makes Spark log a warning each time: once per session.
    if getattr(spark, "_parquetry_registered", False):
        return
    spark.dataSource.register(ParquetryDataSource)
    spark._parquetry_registered = True  # type: ignore[attr-defined]
