"""Function-style helpers: ``write_dataset`` / ``read_dataset``, and the native fast path.

For a local store the planned files are plain paths Spark's own Parquet reader can open, so
``read_dataset`` hands it exactly the planned files (no directory listing, no partition
discovery) and adds the typed partition columns itself.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from functools import reduce
from typing import Any

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from parquetry.dataset.predicates import dnf_to_json
from parquetry.errors import PredicateError
from parquetry.spark.options import STORE_OPTION_KEYS
from parquetry.spark.types import arrow_to_spark_schema, arrow_to_spark_type
from parquetry.store import LocalStore, Store, open_store

__all__ = ["MAX_NATIVE_PARTITIONS", "dnf_to_column", "read_dataset", "write_dataset"]

# Above this many distinct partitions in a plan, a union of per-partition native reads costs
# more planning than the data source's grouped tasks.
MAX_NATIVE_PARTITIONS = 64


def _literal_op(column: str, op: str, value: Any) -> Column:
    c = F.col(column)
    if op == "is null":
        return c.isNull()
    if op == "is not null":
        return c.isNotNull()
    if op == "in":
        return c.isin(list(value))
    comparisons = {
        "==": c.__eq__,
        "!=": c.__ne__,
        "<": c.__lt__,
        "<=": c.__le__,
        ">": c.__gt__,
        ">=": c.__ge__,
    }
    if op not in comparisons:
        raise PredicateError(
            f"operator {op!r} on column {column!r} is not supported", column=column, op=op
        )
    return comparisons[op](F.lit(value))


def dnf_to_column(predicates: Sequence[Sequence[tuple[str, str, Any]]]) -> Column:
    """A Spark condition equal to kartothek DNF ``predicates`` (OR of ANDs)."""
    conjunctions = [
        reduce(lambda a, b: a & b, [_literal_op(*literal) for literal in conj])
        if conj
        else F.lit(True)
        for conj in predicates
    ]
    return reduce(lambda a, b: a | b, conjunctions)


def _store_and_options(
    store: Store | str, store_options: dict[str, Any]
) -> tuple[Store, dict[str, str]]:
    if isinstance(store, str):
        opened = open_store(store, **store_options)
        url = store
    else:
        opened, url = store, store.url
    options = {"store": url}
    for key, value in store_options.items():
        if value is None:
            continue
        name = key if key in STORE_OPTION_KEYS else f"store.{key}"
        options[name] = str(value).lower() if isinstance(value, bool) else str(value)
    return opened, options


def _activate(spark: SparkSession) -> None:
    """Make ``spark`` the JVM's active session on this thread, with ``parquetry`` registered.

    Spark looks Python data sources up in the *active* session, which a py4j thread other than
    the one that created the session does not have (``DATA_SOURCE_NOT_FOUND``).
    """
    from parquetry.spark.source import register

    jvm = spark.sparkContext._jvm
    if jvm is not None:
        jvm.org.apache.spark.sql.SparkSession.setActiveSession(spark._jsparkSession)
    register(spark)


def write_dataset(
    df: DataFrame,
    store: Store | str,
    uuid: str,
    *,
    partition_on: Sequence[str] = (),
    secondary_indices: Sequence[str] = (),
    mode: str = "append",
    parameters: Mapping[str, Any] | None = None,
    **store_options: Any,
) -> Any:
    """Write ``df`` into the kartothek-format dataset ``uuid`` and return it, opened.

    Spark's ``save()`` returns nothing, so the dataset is re-opened on the driver afterwards
    to hand back the committed version.

    Args:
        df: the rows to write.
        store: a store URL (``file:///lake``, ``s3://bucket/prefix``) or a Store whose ``url``
            Spark's workers can open.
        uuid: the dataset's uuid.
        partition_on: Hive partition columns, e.g. ``("order_date",)``.
        secondary_indices: columns to index, e.g. ``("customer",)``.
        mode: ``"append"`` (creates a missing dataset) or ``"overwrite"``.
        parameters: entries recorded with the commit (the dataset's history), besides the
            write's own (mode, partitionBy...); option ``parameters`` as JSON.
        **store_options: ``endpoint``, ``region``, ``access_key_id``... for object stores.
    """
    from parquetry.dataset import Dataset

    opened, options = _store_and_options(store, store_options)
    _activate(df.sparkSession)
    writer = df.write.format("parquetry").options(**options).option("dataset", uuid)
    writer = writer.option("partition_on", ",".join(partition_on))
    writer = writer.option("secondary_indices", ",".join(secondary_indices))
    if parameters:
        from parquetry.dataset.transact import string_parameters

        writer = writer.option("parameters", json.dumps(string_parameters(parameters)))
    writer.mode(mode).save()
    return Dataset.open(opened, uuid)


def read_dataset(
    spark: SparkSession,
    store: Store | str,
    uuid: str,
    *,
    predicates: Sequence[Sequence[tuple[str, str, Any]]] | None = None,
    version: int | None = None,
    native: bool | None = None,
    **store_options: Any,
) -> DataFrame:
    """The rows of dataset ``uuid`` matching ``predicates``, as a DataFrame.

    For a local store (``native=None`` or ``True``) planning (index lookups, partition and
    statistics pruning) happens here, on the driver, and the planned files go straight to
    Spark's Parquet reader. Otherwise the ``parquetry`` data source reads with the
    predicates as its ``predicates`` option: it plans, prunes and filters rows itself.

    Args:
        spark: the session (the ``parquetry`` format is registered on it if needed).
        store: a store URL or Store.
        uuid: the dataset's uuid.
        predicates: kartothek DNF, e.g. ``[[("customer", "==", "Ana Tanaka 332")]]``.
        version: read this committed version instead of the latest.
        native: force (``True``) or avoid (``False``) Spark's native Parquet reader.
        **store_options: ``endpoint``, ``region``, credentials... for object stores.
    """
    from parquetry.dataset import Dataset

    opened, options = _store_and_options(store, store_options)
    if native is not False and isinstance(opened, LocalStore):
        dataset = Dataset.open(opened, uuid, version=version)
        plan = dataset.plan(predicates)
        groups: dict[tuple[tuple[str, Any], ...], list[str]] = {}
        for planned in plan.files:
            groups.setdefault(tuple(planned.partition), []).append(str(opened.path(planned.key)))
        if native or len(groups) <= MAX_NATIVE_PARTITIONS:
            df = _native_read(spark, dataset, groups)
            return df.filter(dnf_to_column(predicates)) if predicates else df
    _activate(spark)
    reader = spark.read.format("parquetry").options(**options).option("dataset", uuid)
    if version is not None:
        reader = reader.option("version", str(version))
    if predicates:
        # Part of the relation itself, so every scan of the DataFrame prunes and filters the
        # same way (Spark's pushed filters cannot be trusted to, see parquetry.spark.reader).
        reader = reader.option("predicates", json.dumps(dnf_to_json(predicates)))
    return reader.load()


def _native_read(
    spark: SparkSession, dataset: Any, groups: dict[tuple[tuple[str, Any], ...], list[str]]
) -> DataFrame:
    schema = dataset.schema
    partition_keys = set(dataset.partition_keys)
    full = arrow_to_spark_schema(schema)
    file_schema = arrow_to_spark_schema(
        pa.schema([f for f in schema if f.name not in partition_keys])
    )
    if not groups:
        return spark.createDataFrame([], full)
    parts = []
    for partition, paths in groups.items():
        values = dict(partition)
        df = spark.read.schema(file_schema).parquet(*paths)
        columns = [
            F.lit(values.get(f.name))
            .cast(arrow_to_spark_type(schema.field(f.name).type))
            .alias(f.name)
            if f.name in partition_keys
            else F.col(f.name)
            for f in full.fields
        ]
        parts.append(df.select(*columns))
    return reduce(DataFrame.unionAll, parts)
