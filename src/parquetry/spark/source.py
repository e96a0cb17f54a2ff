"""The ``parquetry`` PySpark data source: which reader and writer serve a read or a write.

Every method here runs in a short-lived Python worker that the driver JVM spawns, not in the
user's process: state reaches the workers only through options and pickled objects.
"""

from __future__ import annotations

import datetime
from dataclasses import replace
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from parquetry.spark.options import SourceOptions
from parquetry.spark.surface import message_first

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
    (it has no version number of its own to pin). ``timestampAsOf`` resolves here, once.

    Raises:
        DatasetNotFound: ``timestampAsOf`` names a dataset that does not exist.
        NotFound: no retained version was committed at or before ``timestampAsOf``.
    """
    if options.layout != "dataset" or options.version is not None:
        return None
    from parquetry.dataset import Dataset
    from parquetry.errors import DatasetNotFound

    assert options.dataset is not None
    try:
        dataset = Dataset.open(options.open_store(), options.dataset)
    except DatasetNotFound:
        if options.timestamp_as_of is not None:
            raise
        return None
    if options.timestamp_as_of is not None:
        return version_at(dataset, options.timestamp_as_of)
    # A kartothek-written state reports the parquetry version it builds on, not itself.
    return None if dataset._foreign else dataset.version


def version_at(dataset: Any, instant: datetime.datetime) -> int:
    """The newest retained version of ``dataset`` committed at or before ``instant``.

    Raises:
        NotFound: every retained version is newer (the message names the oldest).
    """
    from parquetry.errors import NotFound

    versions = dataset.versions()
    older = [v for v in versions if _committed(v.committed_at) <= instant]
    if older:
        return int(max(older, key=lambda v: v.number).number)
    oldest = min(versions, key=lambda v: v.number) if versions else None
    since = (
        f"; its oldest retained version {oldest.number} was committed at {oldest.committed_at}"
        if oldest is not None
        else ""
    )
    raise NotFound(
        f"dataset {dataset.uuid!r} has no version committed at or before "
        f"{instant.isoformat()} (option 'timestampAsOf'){since}",
        key=dataset.uuid,
        store=dataset.store.url,
    )


def _committed(text: str) -> datetime.datetime:
    value = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    return value if value.tzinfo else value.replace(tzinfo=datetime.UTC)


class ParquetryDataSource(DataSource):
    """Format ``parquetry``: kartothek-format datasets (``layout=dataset``, the default) and
    ParquetDatasetStore snapshots (``layout=snapshot``) on any parquetry store."""

    @message_first
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

    @message_first
    def schema(self) -> StructType:
        from parquetry.spark.reader import source_arrow_schema
        from parquetry.spark.types import arrow_to_spark_schema

        return arrow_to_spark_schema(source_arrow_schema(self.parsed))

    @message_first
    def reader(self, schema: StructType) -> DataSourceReader:
        from parquetry.errors import InvalidArgument
        from parquetry.spark.reader import ParquetryReader

        if self.parsed.pushdown == "true":
            raise InvalidArgument(_NO_SPARK_PUSHDOWN)
        options = self.parsed
        if options.version is None and self.read_version is not None:
            options = replace(options, version=self.read_version)
        return ParquetryReader(options, schema)

    @message_first
    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """``spark.readStream``: the rows each new commit adds (see :mod:`.stream_source`)."""
        from parquetry.errors import InvalidArgument
        from parquetry.spark.stream_options import StreamOptions
        from parquetry.spark.stream_source import ParquetryStreamReader

        if self.parsed.layout != "dataset":
            raise InvalidArgument("readStream needs layout=dataset (a snapshot has no commits)")
        return ParquetryStreamReader(self.parsed, StreamOptions.parse(self.options), schema)

    @message_first
    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from parquetry.spark.writer import DatasetArrowWriter, SnapshotArrowWriter

        if self.parsed.layout == "snapshot":
            return SnapshotArrowWriter(self.parsed, schema, overwrite)
        return DatasetArrowWriter(self.parsed, schema, overwrite)

    @message_first
    def streamWriter(self, schema: StructType, overwrite: bool) -> Any:
        from parquetry.spark.stream_sink import stream_writer

        return stream_writer(self.parsed, schema, overwrite)


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
