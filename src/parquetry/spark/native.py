"""The native hand-off: parquetry plans, Spark's own Parquet reader reads.

``read_dataset`` plans on the driver (partition keys, secondary indices, statistics: a few
metadata requests, no listing) and gives Spark's Parquet reader *one* scan over exactly the
planned files of one dataset version. Spark then does what a Python data source cannot:
column pruning, ``count()`` from footers, vectorised decoding, row-group skipping.

Partition columns come from the directory names (Spark's ``basePath`` discovery limited to
the given files) with the types of the dataset schema, not strings inferred by Spark. Only
values whose directory spelling Spark parses back to the same value take this path (see
:func:`_spark_parses_back`); anything else, and stores Spark cannot open, uses the
``parquetry`` data source instead.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from parquetry.errors import DatasetIncomplete
from parquetry.spark.types import arrow_to_spark_schema
from parquetry.store import LocalStore, Store
from parquetry.store.objectstore import ObjectStore

__all__ = ["DEFAULT_NATIVE_SCHEMES", "native_read", "native_root"]

# parquetry store scheme -> Hadoop FileSystem scheme Spark reads it with. file:// always works;
# the others need the connector (hadoop-aws, gcs-connector) on the cluster, which is checked
# before use (pip's pyspark has none of them). Azure needs the account in the URL
# (abfss://container@account.dfs.core.windows.net): pass your own mapping for az://.
DEFAULT_NATIVE_SCHEMES: Mapping[str, str] = {"file": "file", "s3": "s3a", "gs": "gs"}

# Listing more root paths than this makes Spark start a distributed job per load just to stat
# the files (spark.sql.sources.parallelPartitionDiscovery.threshold, default 32).
_DISCOVERY_THRESHOLD = "spark.sql.sources.parallelPartitionDiscovery.threshold"
_SERIAL_DISCOVERY_UP_TO = 100_000

_SAFE_PARTITION_TYPES = (pa.types.is_integer, pa.types.is_string, pa.types.is_date32)


def _has_filesystem(spark: SparkSession, scheme: str) -> bool:
    """Whether the JVM has a Hadoop FileSystem for ``scheme`` (a connector on the classpath)."""
    jvm = spark.sparkContext._jvm
    if jvm is None:
        return False
    try:
        conf = spark.sparkContext._jsc.hadoopConfiguration()
        jvm.org.apache.hadoop.fs.FileSystem.getFileSystemClass(scheme, conf)
    except Exception:  # py4j wraps the JVM's "No FileSystem for scheme"
        return False
    return True


def native_root(
    spark: SparkSession,
    store: Store,
    schemes: Mapping[str, str] | None = None,
) -> str | None:
    """The URL under which Spark's native reader finds ``store``'s keys, or None if it cannot.

    ``schemes`` maps parquetry's store scheme to the Hadoop scheme (default
    :data:`DEFAULT_NATIVE_SCHEMES`; ``{}`` disables the hand-off).
    """
    mapping = DEFAULT_NATIVE_SCHEMES if schemes is None else schemes
    if isinstance(store, LocalStore):
        if "file" not in mapping:
            return None
        return str(store.root)
    if isinstance(store, ObjectStore):
        target = mapping.get(store.scheme)
        if not target or not _has_filesystem(spark, target):
            return None
        rest = f"{store.bucket}/{store.prefix}" if store.prefix else store.bucket
        return f"{target}://{rest}"
    return None  # memory://, test wrappers: not visible to the JVM


def _spark_parses_back(schema: pa.Schema, files: Sequence[Any]) -> bool:
    """Whether Spark's partition discovery yields exactly the planned partition values.

    parquetry quotes values with ``urllib.parse.quote``; Spark unescapes ``%XX`` one byte per
    character and reads ``k=`` / ``__HIVE_DEFAULT_PARTITION__`` as null. ASCII strings,
    integers and dates agree; other values (non-ASCII text, timestamps, floats...) do not
    reliably, so those datasets are read by the data source.
    """
    for planned in files:
        for name, value in planned.partition:
            field_type = schema.field(name).type
            if value is None or not any(check(field_type) for check in _SAFE_PARTITION_TYPES):
                return False
            if isinstance(value, str) and (
                not value or not value.isascii() or value == "__HIVE_DEFAULT_PARTITION__"
            ):
                return False
        # Spark skips files and directories whose names start with "_" or "." as hidden.
        label = planned.key.split("/", 2)[-1]
        if any(part[:1] in ("_", ".") for part in label.split("/")):
            return False
    return True


# Threads of one driver may plan reads at once: the first to enter saves the session's value
# and the last to leave restores it (a plain save/restore per call would let an inner call
# "restore" the outer one's raised value, leaving it raised for good).
_discovery_lock = threading.Lock()
_discovery_users: dict[int, tuple[int, str | None]] = {}


@contextmanager
def _serial_discovery(spark: SparkSession) -> Iterator[None]:
    key = id(spark)
    with _discovery_lock:
        users, previous = _discovery_users.get(key, (0, None))
        if users == 0:
            previous = spark.conf.get(_DISCOVERY_THRESHOLD, None)
            spark.conf.set(_DISCOVERY_THRESHOLD, str(_SERIAL_DISCOVERY_UP_TO))
        _discovery_users[key] = (users + 1, previous)
    try:
        yield
    finally:
        with _discovery_lock:
            users, previous = _discovery_users.pop(key)
            if users > 1:
                _discovery_users[key] = (users - 1, previous)
            elif previous is None:
                spark.conf.unset(_DISCOVERY_THRESHOLD)
            else:
                spark.conf.set(_DISCOVERY_THRESHOLD, previous)


def native_read(
    spark: SparkSession, dataset: Any, files: Sequence[Any], root: str
) -> DataFrame | None:
    """One native Parquet scan over exactly ``files`` (planned from ``dataset``), columns in
    the dataset schema's order and types; None if Spark would not read the same values.

    Raises:
        DatasetIncomplete: a planned file is missing (e.g. garbage-collected after planning);
            Spark is told not to skip missing files, so a file vanishing later fails the job.
    """
    schema: pa.Schema = dataset.schema
    full = arrow_to_spark_schema(schema)
    if not files:
        return spark.createDataFrame([], full)
    if not _spark_parses_back(schema, files):
        return None
    tables = {planned.table for planned in files}
    if len(tables) != 1:
        return None
    base = f"{root}/{dataset.uuid}/{tables.pop()}"
    paths = [f"{root}/{planned.key}" for planned in files]
    reader = (
        spark.read.schema(full)
        .option("basePath", base)
        # A planned file that is gone must fail the read, not shrink the answer.
        .option("ignoreMissingFiles", "false")
        .option("mergeSchema", "false")
    )
    try:
        with _serial_discovery(spark):
            df = reader.parquet(*paths)
    except Exception as exc:
        if "PATH_NOT_FOUND" in str(exc) or "Path does not exist" in str(exc):
            missing = _first_missing(dataset, files)
            raise DatasetIncomplete(
                f"dataset {dataset.uuid!r} version {dataset.version}: planned file "
                f"{missing!r} is missing (garbage-collected or deleted after planning?)"
            ) from None
        raise
    return df.select(*full.fieldNames())


def _first_missing(dataset: Any, files: Sequence[Any]) -> str:
    from parquetry.errors import NotFound

    for planned in files:
        try:
            dataset.store.head(planned.key)
        except NotFound:
            return str(planned.key)
    return "?"
