"""SQL access to parquetry datasets: what Spark 4.x hands a Python data source, and helpers.

Observed on pyspark 4.3.0 (tests/spark/test_sql.py):

- ``CREATE TABLE t USING parquetry OPTIONS (...)`` / ``LOCATION``, ``saveAsTable`` and
  ``writeTo(t).using("parquetry").create()`` store the table in Spark's catalog with its
  options, but Spark hands a Python data source only the options *of the statement* when it
  reads or writes a catalog table: ``SELECT * FROM t``, ``INSERT INTO t``, CTAS and
  ``writeTo(t).append()`` reach the source with no options at all.
- Options given with the statement do reach it: ``SELECT * FROM t WITH ('store' = ...)``,
  ``INSERT INTO t WITH (...) SELECT ...``, ``spark.read.options(...).table("t")``,
  ``df.writeTo("t").options(...).append()``.
- ``CREATE TEMPORARY VIEW v USING parquetry OPTIONS (...)`` keeps its options: SELECT,
  ``INSERT INTO v`` and ``INSERT OVERWRITE v`` work (reads pinned to the version current when
  the view was created).
- The planning workers run without a SparkSession (``getActiveSession()`` is None) and
  without the session conf, so a ``spark.parquetry.*`` session-conf fallback cannot work.

Nothing here imports pyspark at module level: :func:`location_options` runs inside the data
source's worker, the helpers take the user's session.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from parquetry.errors import InvalidArgument

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "NO_OPTIONS",
    "create_table",
    "create_view",
    "location_options",
    "split_location",
    "sql_options",
]

NO_OPTIONS = (
    "no options reached the parquetry data source. Spark 4.x passes a Python data source only "
    "the options of the statement itself, not those stored with a catalog table: SELECT/INSERT "
    "INTO a table created with CREATE TABLE ... USING parquetry, CTAS and "
    "writeTo(table).append() arrive without 'store' and 'dataset'. Give them with the "
    "statement: SELECT * FROM t WITH ('store' = 'file:///lake', 'dataset' = 'orders'), "
    "INSERT INTO t WITH (...) SELECT ..., spark.read.options(...).table('t'), "
    "df.writeTo('t').options(...).append(); or use a temporary view "
    "(CREATE TEMPORARY VIEW v USING parquetry OPTIONS (...), parquetry.spark.sql.create_view). "
    "See 'SQL' in docs/spark.md"
)

# Keys Spark adds to the options of CREATE TABLE (table properties), none of them ours.
_CATALOG_KEYS = ("provider", "owner", "location", "external", "is_managed_location", "comment")


def split_location(path: str) -> tuple[str, str]:
    """(store URL, dataset) of a table ``LOCATION`` by the ``<store URL>/<dataset>`` rule of
    ``load(path)`` (:func:`parquetry.spark.option_names.split_path`); Spark's ``file:/x``
    spelling of ``file:///x`` included.

    Raises:
        InvalidArgument: ``path`` has no store part or no last segment.
    """
    from parquetry.spark.option_names import split_path

    return split_path(path, None, None, "dataset")


def location_options(options: Mapping[str, str]) -> dict[str, str]:
    """The options a ``parquetry`` source was given, without the keys Spark adds to
    ``CREATE TABLE`` options; ``path`` (``LOCATION``) is split like ``load(path)``'s.

    Raises:
        InvalidArgument: no options at all (:data:`NO_OPTIONS`: a catalog table read or
            written without options).
    """
    opts = {str(k).lower(): v for k, v in options.items() if v is not None}
    opts = {k: v for k, v in opts.items() if k not in _CATALOG_KEYS and not k.startswith("option.")}
    if not opts:
        raise InvalidArgument(NO_OPTIONS)
    return opts


def _literal(value: object) -> str:
    """A SQL string literal: Spark's parser reads backslash escapes in '...' strings."""
    text = str(value).lower() if isinstance(value, bool) else str(value)
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def sql_options(store: str, dataset: str | None = None, **options: Any) -> str:
    """The ``('key' = 'value', ...)`` list for ``OPTIONS`` or ``WITH`` in a SQL statement.

    Values are escaped as SQL literals. Credentials placed here end up in the statement text
    (and, for ``CREATE TABLE ... OPTIONS``, in the catalog).
    """
    pairs: dict[str, Any] = {"store": store}
    if dataset is not None:
        pairs["dataset"] = dataset
    pairs.update({k: v for k, v in options.items() if v is not None})
    return "(" + ", ".join(f"{_literal(k)} = {_literal(v)}" for k, v in pairs.items()) + ")"


def _identifier(name: str) -> str:
    parts = name.split(".")
    if not all(parts):
        raise InvalidArgument(f"table or view name {name!r} has an empty part")
    return ".".join("`" + part.replace("`", "``") + "`" for part in parts)


def create_view(
    spark: SparkSession, name: str, store: str, dataset: str | None = None, **options: Any
) -> DataFrame:
    """``CREATE OR REPLACE TEMPORARY VIEW name USING parquetry OPTIONS (...)``.

    SQL can then ``SELECT`` from the view and ``INSERT INTO`` / ``INSERT OVERWRITE`` it. Like a
    loaded DataFrame, the view reads the version current when it was created: call this again
    to see later commits (its own inserts included).

    Returns:
        The view as a DataFrame.
    """
    from parquetry.spark.source import register

    register(spark)
    view = _identifier(name)
    spark.sql(
        f"CREATE OR REPLACE TEMPORARY VIEW {view} USING parquetry "
        f"OPTIONS {sql_options(store, dataset, **options)}"
    )
    return spark.table(view)


def create_table(
    spark: SparkSession,
    name: str,
    store: str,
    dataset: str | None = None,
    *,
    columns: str | None = None,
    **options: Any,
) -> str:
    """``CREATE TABLE IF NOT EXISTS name [(columns)] USING parquetry OPTIONS (...)`` in the
    session catalog.

    Args:
        columns: DDL column list (``"id BIGINT, name STRING"``) for a dataset that does not
            exist yet; without it Spark asks the dataset for its schema.

    Returns:
        The ``WITH (...)`` clause every later statement on the table needs (Spark does not
        hand the stored options to a Python data source), e.g.
        ``spark.sql(f"SELECT * FROM {name} {clause}")``.
    """
    from parquetry.spark.source import register

    register(spark)
    listed = sql_options(store, dataset, **options)
    schema = f" ({columns})" if columns else ""
    spark.sql(
        f"CREATE TABLE IF NOT EXISTS {_identifier(name)}{schema} USING parquetry OPTIONS {listed}"
    )
    return f"WITH {listed}"
