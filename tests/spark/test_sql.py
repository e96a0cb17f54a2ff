"""SQL on parquetry datasets: what Spark 4.x lets a Python data source do (docs/spark.md, "SQL").

Spark hands a Python source only the options of the statement, never those stored with a
catalog table, so catalog tables work with ``WITH (...)`` options on each statement and
temporary views ``USING parquetry`` keep theirs; statements that cannot carry options fail
with parquetry's message naming the fix.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pyspark.errors import AnalysisException

from parquetry.dataset import Dataset
from parquetry.errors import InvalidArgument
from parquetry.spark.options import SourceOptions
from parquetry.spark.sql import (
    NO_OPTIONS,
    create_table,
    create_view,
    location_options,
    split_location,
    sql_options,
)
from parquetry.store import open_store


def _lake(tmp_path: Path) -> str:
    return tmp_path.resolve().as_uri()


def _version(lake: str, uuid: str) -> int:
    return Dataset.open(open_store(lake), uuid).version


def _one(spark: Any, query: str) -> Any:
    return spark.sql(query).collect()[0][0]


def _ids(spark: Any, query: str) -> list[int]:
    return sorted(row[0] for row in spark.sql(query).collect())


def _seed(spark: Any, lake: str, uuid: str, n: int) -> None:
    spark.range(0, n).write.format("parquetry").option("store", lake).option("dataset", uuid).mode(
        "append"
    ).save()


def test_catalog_table_reads_and_inserts_with_statement_options(spark: Any, tmp_path: Path):
    lake = _lake(tmp_path)
    _seed(spark, lake, "orders", 10)
    with_ = create_table(spark, "pq_sql_orders", lake, "orders")
    try:
        assert with_ == f"WITH ('store' = '{lake}', 'dataset' = 'orders')"
        assert _one(spark, f"SELECT count(*) FROM pq_sql_orders {with_}") == 10

        spark.sql(f"INSERT INTO pq_sql_orders {with_} SELECT id FROM range(10, 15)")
        assert _one(spark, f"SELECT count(*) FROM pq_sql_orders {with_}") == 15
        assert _version(lake, "orders") == 1
        spark.sql(f"INSERT INTO pq_sql_orders {with_} VALUES (100), (101)")
        assert _ids(spark, f"SELECT id FROM pq_sql_orders {with_}") == [
            *range(15),
            100,
            101,
        ]
        assert _version(lake, "orders") == 2

        spark.sql(f"INSERT OVERWRITE pq_sql_orders {with_} SELECT id FROM range(200, 203)")
        assert _ids(spark, f"SELECT id FROM pq_sql_orders {with_}") == [200, 201, 202]
        assert _version(lake, "orders") == 3
        # The overwrite is a new version: the one before it stays readable.
        old = spark.read.options(store=lake, dataset="orders", version="2").table("pq_sql_orders")
        assert old.count() == 17

        spark.range(300, 304).writeTo("pq_sql_orders").options(
            store=lake, dataset="orders"
        ).append()
        assert _version(lake, "orders") == 4
        table = spark.read.options(store=lake, dataset="orders").table("pq_sql_orders")
        assert table.count() == 7
        # The catalog keeps the dataset's schema.
        assert [r[0] for r in spark.sql("DESCRIBE TABLE pq_sql_orders").collect()] == ["id"]
    finally:
        spark.sql("DROP TABLE IF EXISTS pq_sql_orders")


def test_create_table_location_for_a_new_dataset(spark: Any, tmp_path: Path):
    lake = _lake(tmp_path)
    try:
        spark.sql(
            "CREATE TABLE pq_sql_people (id BIGINT, name STRING) USING parquetry "
            f"LOCATION '{lake}/people'"
        )
        assert not (tmp_path / "people").exists() or not any((tmp_path / "people").iterdir())
        with_ = f"WITH ('path' = '{lake}/people')"
        spark.sql(f"INSERT INTO pq_sql_people {with_} VALUES (1, 'a'), (2, 'b'), (3, 'c')")
        assert _version(lake, "people") == 0
        assert _one(spark, f"SELECT name FROM pq_sql_people {with_} WHERE id = 2") == "b"

        # A second table over the now existing dataset: Spark asks it for the schema.
        spark.sql(f"CREATE TABLE pq_sql_people2 USING parquetry LOCATION '{lake}/people'")
        described = spark.sql("DESCRIBE TABLE pq_sql_people2").collect()
        assert [(r[0], r[1]) for r in described] == [("id", "bigint"), ("name", "string")]
        spark.sql(f"INSERT INTO pq_sql_people2 {with_} VALUES (4, 'd')")
        assert _one(spark, f"SELECT count(*) FROM pq_sql_people {with_}") == 4
        assert _version(lake, "people") == 1
    finally:
        spark.sql("DROP TABLE IF EXISTS pq_sql_people")
        spark.sql("DROP TABLE IF EXISTS pq_sql_people2")
    # External tables: dropping them leaves the dataset.
    assert _version(lake, "people") == 1


def test_statements_without_options_fail_with_the_fix(spark: Any, tmp_path: Path):
    lake = _lake(tmp_path)
    _seed(spark, lake, "orders", 5)
    create_table(spark, "pq_sql_bare", lake, "orders")
    statements = {
        "select": lambda: spark.sql("SELECT count(*) FROM pq_sql_bare").collect(),
        "insert": lambda: spark.sql("INSERT INTO pq_sql_bare SELECT id FROM range(3)"),
        "insert overwrite": lambda: spark.sql("INSERT OVERWRITE pq_sql_bare SELECT 1L"),
        "writeTo append": lambda: spark.range(3).writeTo("pq_sql_bare").append(),
        "ctas": lambda: spark.sql(
            "CREATE TABLE pq_sql_ctas USING parquetry "
            f"OPTIONS ('store' = '{lake}', 'dataset' = 'ctas') AS SELECT id FROM range(4)"
        ),
    }
    try:
        for name, run in statements.items():
            with pytest.raises(AnalysisException, match="no options reached the parquetry") as e:
                run()
            assert "WITH ('store'" in str(e.value), name
        # Nothing was written, and CTAS left no table behind.
        assert _version(lake, "orders") == 0
        assert not (tmp_path / "ctas").exists()
        assert not spark.catalog.tableExists("pq_sql_ctas")
    finally:
        spark.sql("DROP TABLE IF EXISTS pq_sql_bare")


def test_temporary_view_select_insert_and_overwrite(spark: Any, tmp_path: Path):
    lake = _lake(tmp_path)
    _seed(spark, lake, "events", 10)
    create_view(spark, "pq_sql_events", lake, "events")
    try:
        assert _one(spark, "SELECT count(*) FROM pq_sql_events") == 10
        spark.sql("INSERT INTO pq_sql_events SELECT id FROM range(10, 15)")
        assert _version(lake, "events") == 1
        # The view reads the version it was created at, like a loaded DataFrame ...
        assert _one(spark, "SELECT count(*) FROM pq_sql_events") == 10
        # ... and sees later commits once created again.
        create_view(spark, "pq_sql_events", lake, "events")
        assert _one(spark, "SELECT count(*) FROM pq_sql_events") == 15

        spark.sql("INSERT OVERWRITE pq_sql_events SELECT id FROM range(50, 52)")
        assert _version(lake, "events") == 2
        spark.sql(
            "CREATE OR REPLACE TEMPORARY VIEW pq_sql_events USING parquetry "
            f"OPTIONS {sql_options(lake, 'events')}"
        )
        assert _ids(spark, "SELECT id FROM pq_sql_events") == [50, 51]
        # A view over one version, by option.
        first = create_view(spark, "pq_sql_events_v0", lake, "events", version=0)
        assert first.count() == 10
    finally:
        spark.catalog.dropTempView("pq_sql_events")
        spark.catalog.dropTempView("pq_sql_events_v0")


def test_save_as_table_and_write_to_create(spark: Any, tmp_path: Path):
    lake = _lake(tmp_path)
    try:
        spark.range(0, 3).write.format("parquetry").options(store=lake, dataset="saved").mode(
            "append"
        ).saveAsTable("pq_sql_saved")
        assert _version(lake, "saved") == 0
        assert spark.catalog.tableExists("pq_sql_saved")
        read = spark.read.options(store=lake, dataset="saved").table("pq_sql_saved")
        assert read.count() == 3

        spark.range(0, 4).writeTo("pq_sql_created").using("parquetry").options(
            store=lake, dataset="created"
        ).create()
        spark.range(4, 6).writeTo("pq_sql_created").options(store=lake, dataset="created").append()
        assert _version(lake, "created") == 1
        with_ = f"WITH {sql_options(lake, 'created')}"
        assert _ids(spark, f"SELECT id FROM pq_sql_created {with_}") == list(range(6))
    finally:
        spark.sql("DROP TABLE IF EXISTS pq_sql_saved")
        spark.sql("DROP TABLE IF EXISTS pq_sql_created")


def test_sql_literals_survive_spark_parsing(spark: Any):
    tricky = ["plain", "it's", "back\\slash", "\\'", "new\nline", "tab\t", "ünï", "'); DROP"]
    prefix = "('store' = 'x', 'dataset' = "
    literals = []
    for value in tricky:
        listed = sql_options("x", value)
        assert listed.startswith(prefix)
        assert listed.endswith(")")
        literals.append(listed[len(prefix) : -1])
    assert list(spark.sql("SELECT " + ", ".join(literals)).collect()[0]) == tricky
    assert sql_options("s", flag=True, skipped=None) == "('store' = 's', 'flag' = 'true')"


def test_location_split_rule():
    assert split_location("file:/tmp/lake/orders") == ("file:///tmp/lake", "orders")
    assert split_location("file:///tmp/lake/orders/") == ("file:///tmp/lake", "orders")
    assert split_location("s3://bucket/prefix/orders") == ("s3://bucket/prefix", "orders")
    assert split_location("s3://bucket/orders") == ("s3://bucket", "orders")
    for bad in ("s3://bucket", "file:///orders", "orders", "", "s3://"):
        with pytest.raises(InvalidArgument, match="store"):
            split_location(bad)

    def parsed(options: dict[str, str]) -> tuple[str, str | None, str | None]:
        opts = SourceOptions.parse(location_options(options))
        return opts.store_url, opts.dataset, opts.key

    assert parsed({"path": "file:/l/o", "provider": "parquetry", "owner": "x"}) == (
        "file:///l",
        "o",
        None,
    )
    assert parsed({"PATH": "s3://b/k", "layout": "snapshot"}) == ("s3://b", None, "k")
    # With the dataset named as well, the path must end with it (docs/spark.md "Paths").
    assert parsed({"path": "file:///l/o", "dataset": "o"}) == ("file:///l", "o", None)
    with pytest.raises(InvalidArgument, match="does not end with"):
        parsed({"path": "file:///l", "dataset": "o"})
    # CREATE TABLE adds 'option.'-prefixed copies and catalog keys: dropped.
    assert location_options(
        {"store": "file:///l", "option.store": "file:///l", "dataset": "o", "external": "true"}
    ) == {"store": "file:///l", "dataset": "o"}
    for empty in ({}, {"provider": "parquetry", "owner": "root"}):
        with pytest.raises(InvalidArgument, match="no options reached"):
            location_options(empty)
    assert "WITH ('store'" in NO_OPTIONS
