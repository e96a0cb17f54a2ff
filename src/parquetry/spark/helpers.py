"""Function-style helpers: ``write_dataset`` / ``read_dataset`` (``table``).

``read_dataset`` plans with parquetry and hands the planned files to Spark's own Parquet
reader when Spark can open the store (see :mod:`parquetry.spark.native`).
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
from parquetry.spark.native import native_read, native_root
from parquetry.spark.options import STORE_OPTION_KEYS
from parquetry.store import LocalStore, Store, open_store

__all__ = ["dnf_to_column", "read_dataset", "table", "write_dataset"]


def _literal_op(column: str, op: str, value: Any = None) -> Column:
    # (column, "is null") without a value is valid DNF, as for validate_predicates.
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


SAVE_MODES = ("append", "overwrite", "error", "errorifexists", "ignore")
OVERWRITE_CONF = "spark.sql.sources.partitionOverwriteMode"


def _overwrite_mode(spark: SparkSession, given: str | None) -> str | None:
    """The argument, else the session's ``spark.sql.sources.partitionOverwriteMode``.

    The data source cannot read the session conf (it runs in Python workers the JVM starts),
    so only this helper honours it; an explicit option or argument wins.
    """
    if given is not None:
        return given
    try:
        value = spark.conf.get(OVERWRITE_CONF, None)
    except Exception:  # a conf Spark cannot answer is the default, static
        return None
    return value.lower() if value else None


def write_dataset(
    df: DataFrame,
    store: Store | str,
    uuid: str,
    *,
    partition_on: Sequence[str] = (),
    secondary_indices: Sequence[str] = (),
    mode: str = "append",
    merge_schema: bool = False,
    overwrite_schema: bool = False,
    replace_where: str | None = None,
    partition_overwrite_mode: str | None = None,
    partition_by: Sequence[str] | None = None,
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
        merge_schema: option ``mergeSchema``: add new columns/struct fields (nullable) and
            widen types losslessly; otherwise a schema mismatch fails before any task runs.
        overwrite_schema: option ``overwriteSchema`` (with ``mode="overwrite"``): replace the
            schema and partitioning.
        mode: ``"append"`` (creates a missing dataset), ``"overwrite"``, ``"error"`` /
            ``"errorifexists"`` (AlreadyExists if the dataset exists, nothing written) or
            ``"ignore"`` (return the existing dataset unchanged).
        replace_where: with ``mode="overwrite"``: replace only the rows matching this Spark
            SQL condition (every written row must match it).
        partition_overwrite_mode: ``"static"`` or ``"dynamic"`` (replace only the partitions
            ``df`` has); default: the session's ``spark.sql.sources.partitionOverwriteMode``.
        partition_by: Spark's name for ``partition_on`` (``DataFrameWriter.partitionBy`` is
            refused by Spark for Python data sources).
        parameters: entries recorded with the commit (the dataset's history), besides the
            write's own (mode, partitionBy...); option ``parameters`` as JSON.
        **store_options: ``endpoint``, ``region``, ``access_key_id``... for object stores.

    Raises:
        InvalidArgument: ``partition_by`` and ``partition_on`` name different columns.
    """
    from parquetry.dataset import Dataset
    from parquetry.errors import AlreadyExists, InvalidArgument

    if partition_by is not None:
        if partition_on and tuple(partition_on) != tuple(partition_by):
            raise InvalidArgument(
                f"partition_by={tuple(partition_by)} and partition_on={tuple(partition_on)} "
                "disagree: give one of them"
            )
        partition_on = tuple(partition_by)

    save_mode = mode.lower()
    if save_mode not in SAVE_MODES:
        raise InvalidArgument(f"mode must be one of {SAVE_MODES}, got {mode!r}")
    opened, options = _store_and_options(store, store_options)
    if save_mode in ("error", "errorifexists", "ignore") and Dataset.exists(opened, uuid):
        if save_mode == "ignore":
            return Dataset.open(opened, uuid)
        raise AlreadyExists(
            f"dataset {uuid!r} already exists in {opened.url} (mode {mode!r}): nothing written"
        )
    _activate(df.sparkSession)
    writer = df.write.format("parquetry").options(**options).option("dataset", uuid)
    writer = writer.option("partition_on", ",".join(partition_on))
    writer = writer.option("secondary_indices", ",".join(secondary_indices))
    writer = writer.option("mergeSchema", str(merge_schema).lower())
    writer = writer.option("overwriteSchema", str(overwrite_schema).lower())
    if save_mode in ("error", "errorifexists", "ignore"):
        # Spark accepts only append/overwrite from Python sources; the commit creates the
        # dataset and fails (or, for ignore, does nothing) if a racing writer created it.
        writer = writer.option("save_mode", save_mode)
        save_mode = "append"
    if replace_where is not None:
        writer = writer.option("replaceWhere", replace_where)
    if save_mode == "overwrite" and replace_where is None:
        dynamic = _overwrite_mode(df.sparkSession, partition_overwrite_mode)
        if dynamic is not None:
            writer = writer.option("partitionOverwriteMode", dynamic)
    if parameters:
        from parquetry.dataset.transact import string_parameters

        writer = writer.option("parameters", json.dumps(string_parameters(parameters)))
    writer.mode(save_mode).save()
    return Dataset.open(opened, uuid)


def read_dataset(
    spark: SparkSession,
    store: Store | str,
    uuid: str,
    *,
    predicates: Sequence[Sequence[tuple[str, str, Any]]] | None = None,
    version: int | None = None,
    columns: Sequence[str] | None = None,
    native: bool | None = None,
    native_schemes: Mapping[str, str] | None = None,
    **store_options: Any,
) -> DataFrame:
    """The rows of dataset ``uuid`` matching ``predicates``, as a DataFrame.

    Planning (partition keys, secondary indices, statistics) happens here, on the driver,
    against one dataset version. When Spark can open the store itself (``file://``; ``s3a://``
    or ``gs://`` with the connector installed: see ``native_schemes``), the planned files go
    to Spark's Parquet reader as one scan with typed partition columns, and the predicates
    are applied as a Spark filter. Otherwise (memory stores, encrypted datasets, partition
    values Spark would parse differently, ``native=False``) the ``parquetry`` data source
    reads with the predicates as its ``predicates`` option.

    Args:
        spark: the session (the ``parquetry`` format is registered on it if needed).
        store: a store URL or Store.
        uuid: the dataset's uuid.
        predicates: kartothek DNF, e.g. ``[[("customer", "==", "Ana Tanaka 332")]]``.
        version: read this committed version instead of the latest.
        columns: only these columns, in this order (default: all).
        native: ``False`` always uses the data source; ``True`` refuses to fall back;
            ``None`` (default) hands off when possible.
        native_schemes: store scheme -> Hadoop scheme for the hand-off (default
            ``parquetry.spark.native.DEFAULT_NATIVE_SCHEMES``: file, s3 -> s3a, gs; ``{}``
            disables it).
        **store_options: ``endpoint``, ``region``, credentials... for object stores.

    Raises:
        UnknownColumn: a name in ``columns`` is not in the dataset.
        DatasetIncomplete: a planned file is missing when the read is set up.
        InvalidArgument: ``native=True`` but the read cannot be handed off.
    """
    from parquetry.dataset import Dataset

    opened, options = _store_and_options(store, store_options)
    wanted = list(columns) if columns is not None else None
    if native is not False:
        # Credentials given to parquetry do not reach a Hadoop connector: only the cluster's
        # own configuration does, so such reads stay with parquetry unless forced.
        foreign_config = not isinstance(opened, LocalStore) and (
            bool(store_options) or bool(getattr(opened, "_options", None))
        )
        root = None if foreign_config and not native else native_root(spark, opened, native_schemes)
        dataset = Dataset.open(opened, uuid, version=version) if root is not None else None
        if root is not None and dataset is not None and dataset._doc.encryption is None:
            _check_columns(dataset.schema, wanted)
            plan = dataset.plan(predicates)
            df = native_read(spark, dataset, plan.files, root)
            if df is not None:
                if predicates:
                    df = df.filter(dnf_to_column(predicates))
                return df.select(*wanted) if wanted is not None else df
        if native:
            from parquetry.errors import InvalidArgument

            raise InvalidArgument(
                f"dataset {uuid!r} on {opened.url} cannot be read by Spark's native Parquet "
                "reader (store scheme without a connector, encrypted dataset, or partition "
                "values Spark parses differently); use native=None to fall back"
            )
    _activate(spark)
    reader = spark.read.format("parquetry").options(**options).option("dataset", uuid)
    if version is not None:
        reader = reader.option("version", str(version))
    if wanted is not None:
        reader = reader.option("columns", ",".join(wanted))
    if predicates:
        # Part of the relation itself, so every scan of the DataFrame prunes and filters the
        # same way (Spark's pushed filters cannot be trusted to, see parquetry.spark.reader).
        reader = reader.option("predicates", json.dumps(dnf_to_json(predicates)))
    return reader.load()


def table(
    spark: SparkSession,
    url: Store | str,
    dataset: str,
    *,
    predicates: Sequence[Sequence[tuple[str, str, Any]]] | None = None,
    version: int | None = None,
    columns: Sequence[str] | None = None,
    **options: Any,
) -> DataFrame:
    """Dataset ``dataset`` of the store at ``url`` as a DataFrame: :func:`read_dataset`."""
    return read_dataset(
        spark, url, dataset, predicates=predicates, version=version, columns=columns, **options
    )


def _check_columns(schema: pa.Schema, columns: Sequence[str] | None) -> None:
    from parquetry.errors import UnknownColumn

    for name in columns or ():
        if name not in schema.names:
            raise UnknownColumn(
                f"column {name!r} is not in the dataset (columns: {', '.join(schema.names)})",
                column=name,
            )
