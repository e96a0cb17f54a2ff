"""The ``parquetry`` data source on a real local[2,2] session: round trips of every type,
modes, layouts, pruning by option ``predicates`` (files read, not just rows), versions and
the helpers."""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

import pytest

from parquetry.dataset import Dataset
from parquetry.dataset.predicates import dnf_to_json
from parquetry.snapshot import ParquetDatasetStore
from parquetry.spark import read_dataset, write_dataset
from parquetry.store import open_store

TYPES_SQL = [
    "id",
    "cast(id % 3 as string) as part",
    "cast(id as int) as i32",
    "cast(id % 120 as tinyint) as i8",
    "cast(id as smallint) as i16",
    "cast(id / 3 as float) as f32",
    "id / 7 as f64",
    "id % 2 = 0 as flag",
    "cast(id * 1.25 as decimal(12, 2)) as dec",
    "if(id % 5 = 0, null, concat('s', id)) as s",
    "cast(concat('b', id) as binary) as bin",
    "date_add(date'2024-02-27', cast(id % 4 as int)) as d",
    "timestamp_micros(1700000000000000 + id * 1000001) as ts",
    "cast(timestamp_micros(1700000000000000 + id) as timestamp_ntz) as ntz",
    "array(id, if(id % 4 = 0, null, id + 1)) as arr",
    "if(id % 6 = 0, null, named_struct('x', id, 'y', concat('y', id))) as st",
    "array(named_struct('sku', concat('SKU', id % 9), 'q', id % 5)) as items",
    "map(concat('k', id % 3), id) as m",
]


@pytest.fixture
def lake(tmp_path: Path) -> str:
    return (tmp_path / "lake").as_uri()


def _by_id(rows: list[Any]) -> dict[int, Any]:
    return {row["id"]: row.asDict(recursive=True) for row in rows}


def _source(spark: Any, lake: str, **options: str) -> Any:
    return spark.read.format("parquetry").option("store", lake).options(**options)


def test_dataset_round_trip_of_every_type(spark: Any, lake: str) -> None:
    df = spark.range(0, 600, numPartitions=2).selectExpr(*TYPES_SQL)
    df.write.format("parquetry").option("store", lake).option("dataset", "types").option(
        "partition_on", "part,d"
    ).option("secondary_indices", "i32").mode("append").save()
    back = _source(spark, lake, dataset="types").load()
    assert _by_id(back.collect()) == _by_id(df.collect())
    assert set(back.columns) == set(df.columns)
    ds = Dataset.open(open_store(lake), "types")
    assert ds.partition_keys == ("part", "d")
    assert ds.secondary_indices == ("i32",)
    assert str(ds.schema.field("ts").type) == "timestamp[us, tz=UTC]"


def test_snapshot_round_trip_modes_and_run_id(spark: Any, lake: str) -> None:
    df = spark.range(0, 300, numPartitions=3).selectExpr(*TYPES_SQL)
    writer = df.write.format("parquetry").option("store", lake).option("layout", "snapshot")
    writer.option("key", "snap/a").option("run_id", "run-1").mode("append").save()
    manifest = ParquetDatasetStore(open_store(lake)).read_manifest("snap/a")
    assert manifest.run_id == "run-1"
    assert manifest.row_count == 300
    assert manifest.parts == ["part-00000.parquet", "part-00001.parquet", "part-00002.parquet"]
    back = _source(spark, lake, layout="snapshot", key="snap/a").load()
    assert _by_id(back.collect()) == _by_id(df.collect())
    # A snapshot is replaced whole: append onto an existing one is refused, overwrite replaces.
    with pytest.raises(Exception, match="already exists"):
        writer.option("key", "snap/a").mode("append").save()
    df.limit(10).write.format("parquetry").option("store", lake).option(
        "layout", "snapshot"
    ).option("key", "snap/a").mode("overwrite").save()
    assert _source(spark, lake, layout="snapshot", key="snap/a").load().count() == 10
    assert ParquetDatasetStore(open_store(lake)).read_manifest("snap/a").parts == ["data.parquet"]


def test_append_overwrite_and_reading_a_version(spark: Any, lake: str) -> None:
    first = spark.range(0, 100).selectExpr("id", "cast(id % 2 as string) as part")
    second = spark.range(100, 150).selectExpr("id", "cast(id % 2 as string) as part")
    write = first.write.format("parquetry").option("store", lake).option("dataset", "modes")
    write.option("partition_on", "part").mode("append").save()
    second.write.format("parquetry").option("store", lake).option("dataset", "modes").mode(
        "append"
    ).save()
    assert _source(spark, lake, dataset="modes").load().count() == 150
    second.write.format("parquetry").option("store", lake).option("dataset", "modes").mode(
        "overwrite"
    ).save()
    ds = Dataset.open(open_store(lake), "modes")
    assert ds.version == 2
    assert sorted(r.id for r in _source(spark, lake, dataset="modes").load().collect()) == list(
        range(100, 150)
    )
    for version, expected in ((0, 100), (1, 150), (2, 50)):
        assert (
            _source(spark, lake, dataset="modes", version=str(version)).load().count() == expected
        )


def _traced_keys(directory: Path) -> list[str]:
    return sorted(k for f in directory.glob("*.txt") for k in f.read_text().split("\n") if k)


def test_predicates_option_reads_only_the_planned_files(
    spark: Any, lake: str, tmp_path: Path
) -> None:
    df = spark.range(0, 2000, numPartitions=2).selectExpr(
        "id", "cast(id % 10 as string) as part", "id % 97 as customer"
    )
    write_dataset(df, lake, "pruned", partition_on=("part",), secondary_indices=("customer",))
    all_files = {pf.key for pf in Dataset.open(open_store(lake), "pruned").plan().files}
    assert len(all_files) == 20  # 10 partitions x 2 tasks
    trace = tmp_path / "trace"
    predicates = json.dumps(dnf_to_json([[("part", "==", "3"), ("customer", "==", 13)]]))
    query = _source(
        spark, lake, dataset="pruned", trace_reads=str(trace), predicates=predicates
    ).load()
    rows = query.collect()
    assert sorted(r.id for r in rows) == [i for i in range(2000) if i % 10 == 3 and i % 97 == 13]
    read = _traced_keys(trace)
    assert 0 < len(read) <= 2
    assert all("part=3/" in key for key in read)
    # Spark keeps its own filters: the reader takes none of them (see docs/spark.md).
    full = _source(spark, lake, dataset="pruned").load()
    plan = full.filter("part = '3'")._jdf.queryExecution().executedPlan().toString()
    assert "Filter (" in plan
    assert full.filter("cast(id as double) / 2 > 999.0").count() == 1


def test_reading_with_pushdown_switched_off(spark: Any, lake: str, tmp_path: Path) -> None:
    df = spark.range(0, 400).selectExpr("id", "cast(id % 4 as string) as part")
    ds = write_dataset(df, lake, "nopush", partition_on=("part",))
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "false")
    try:
        trace = tmp_path / "trace"
        query = _source(spark, lake, dataset="nopush", trace_reads=str(trace)).load()
        assert query.filter("part = '1'").count() == 100
        # Nothing depends on the conf: every planned file is read, Spark filters the rows.
        assert _traced_keys(trace) == sorted(pf.key for pf in ds.plan().files)
    finally:
        spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")


def test_read_dataset_native_fast_path_adds_typed_partition_columns(spark: Any, lake: str) -> None:
    df = spark.range(0, 500).selectExpr(
        "id", "date_add(date'2025-01-01', cast(id % 5 as int)) as day", "id % 50 as customer"
    )
    ds = write_dataset(df, lake, "fast", partition_on=("day",), secondary_indices=("customer",))
    assert ds.version == 0
    predicates = [[("day", ">=", datetime.date(2025, 1, 4)), ("customer", "in", [3, 4])]]
    native = read_dataset(spark, lake, "fast", predicates=predicates)
    through_source = read_dataset(spark, lake, "fast", predicates=predicates, native=False)
    expected = sorted(i for i in range(500) if i % 5 >= 3 and i % 50 in (3, 4))
    assert sorted(r.id for r in native.collect()) == expected
    assert sorted(r.id for r in through_source.collect()) == expected
    assert dict(native.dtypes)["day"] == "date"
    plan = native._jdf.queryExecution().executedPlan().toString()
    assert "FileScan parquet" in plan


def test_reusing_a_dataframe_after_a_filtered_query(spark: Any, lake: str) -> None:
    write_dataset(spark.range(0, 100), lake, "reuse")
    df = _source(spark, lake, dataset="reuse").load()
    assert df.filter("id < 10").count() == 10
    assert df.count() == 100


def test_empty_dataframes_commit_empty_datasets(spark: Any, lake: str) -> None:
    empty = spark.range(0).selectExpr("id", "cast(id as string) as part")
    empty.write.format("parquetry").option("store", lake).option("layout", "snapshot").option(
        "key", "empty"
    ).mode("overwrite").save()
    assert ParquetDatasetStore(open_store(lake)).read_manifest("empty").row_count == 0
    assert _source(spark, lake, layout="snapshot", key="empty").load().count() == 0
    ds = write_dataset(empty, lake, "empty", partition_on=("part",))
    assert ds.read().num_rows == 0
    assert ds.partition_keys == ("part",)
    assert _source(spark, lake, dataset="empty").load().columns == ["id", "part"]
