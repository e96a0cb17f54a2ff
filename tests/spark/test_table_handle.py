"""ParquetryTable: history/detail/restore/vacuum/toDF on a real local SparkSession, and what
Spark writes record in the history (operation, parameters, metrics)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from parquetry.dataset import Dataset
from parquetry.errors import DatasetNotFound, InvalidArgument
from parquetry.spark import ParquetryTable
from parquetry.spark.handle import split_table_url
from parquetry.spark.history import spark_app_id_from_env
from parquetry.store import open_store


def _write(spark: Any, lake: str, rows: range, mode: str, **options: str) -> None:
    df = spark.range(rows.start, rows.stop).selectExpr("id", "cast(id % 3 as string) as part")
    writer = df.write.format("parquetry").option("store", lake).option("dataset", "t")
    writer.options(**options).mode(mode).save()


def _ids(df: Any) -> list[int]:
    return sorted(r["id"] for r in df.select("id").collect())


def test_history_detail_restore_and_todf(spark: Any, tmp_path: Path) -> None:
    lake = tmp_path.as_uri()
    _write(spark, lake, range(0, 30), "append", partition_on="part", compression="snappy")
    _write(spark, lake, range(30, 40), "append", parameters='{"job": "Nightly", "n": 3}')
    _write(spark, lake, range(100, 105), "overwrite")
    table = ParquetryTable.for_path(spark, f"{lake}/t")
    hist = table.history().collect()
    assert [r["version"] for r in hist] == [2, 1, 0]
    assert [r["operation"] for r in hist] == ["overwrite", "append", "append"]
    first = hist[2]["operationParameters"]
    assert first["mode"] == "Append"
    assert first["partitionBy"] == '["part"]'
    assert first["compression"] == "snappy"
    assert first["engine"] == "spark"
    assert "store" not in first
    assert not any("secret" in k for k in first)
    assert hist[1]["operationParameters"]["partitionBy"] == '["part"]', "layout of the dataset"
    assert hist[1]["operationParameters"]["job"] == "Nightly", "case kept"
    assert hist[1]["operationParameters"]["n"] == "3"
    assert "parameters" not in hist[1]["operationParameters"]
    assert hist[0]["operationParameters"]["mode"] == "Overwrite"
    assert hist[2]["operationMetrics"]["numOutputRows"] == "30"
    assert hist[1]["operationMetrics"]["numOutputRows"] == "10"
    assert hist[0]["operationMetrics"]["numRemovedRows"] == "40"
    assert int(hist[0]["operationMetrics"]["numAddedBytes"]) > 0
    assert hist[0]["timestamp"] >= hist[2]["timestamp"]
    assert table.history(limit=1).count() == 1
    assert _ids(table.toDF()) == list(range(100, 105))
    assert _ids(table.toDF(version=1)) == list(range(40))

    detail = table.detail().collect()[0]
    assert (detail["format"], detail["id"], detail["version"]) == ("parquetry", "t", 2)
    assert detail["location"] == f"{lake.rstrip('/')}/t"
    assert detail["partitionColumns"] == ["part"]
    assert detail["numRows"] == 5
    assert detail["numPartitions"] == 3
    ds = Dataset.open(open_store(lake), "t")
    assert detail["numFiles"] == len(ds.document.partitions)
    assert detail["sizeInBytes"] == sum(f.size for f in ds.document.files.values())
    assert "id:bigint" in detail["schema"]
    assert detail["createdAt"] <= detail["lastModified"]

    restored = table.restoreToVersion(1).collect()[0]
    assert (restored["version"], restored["operation"]) == (3, "restore")
    assert restored["operationParameters"]["version"] == "1"
    assert restored["operationParameters"]["sparkAppId"] == spark.sparkContext.applicationId
    assert restored["operationMetrics"]["numOutputRows"] == "40"
    assert restored["operationMetrics"]["numRemovedRows"] == "5"
    assert _ids(table.toDF()) == list(range(40))
    assert [r["version"] for r in table.history().collect()] == [3, 2, 1, 0]


def test_vacuum_and_restore_of_a_vacuumed_version(spark: Any, tmp_path: Path) -> None:
    lake = tmp_path.as_uri()
    _write(spark, lake, range(0, 20), "append", partition_on="part")
    _write(spark, lake, range(50, 60), "overwrite")
    table = ParquetryTable.for_name(spark, lake, "t")
    with pytest.raises(InvalidArgument, match="force=True"):
        table.vacuum(retention_hours=1)
    assert table.vacuum().count() == 0, "nothing is 7 days old"
    assert _ids(table.toDF(version=0)) == list(range(20))
    first = Dataset.open(open_store(lake), "t", version=0).document
    old_files = {key for files in first.partitions.values() for key in files.values()}
    deleted = [r["path"] for r in table.vacuum(retention_hours=0, force=True).collect()]
    assert set(deleted) == old_files
    with pytest.raises(DatasetNotFound, match="expired"):
        table.restore(0)
    assert [r["version"] for r in table.history().collect()] == [1], "nothing committed"
    assert _ids(table.toDF()) == list(range(50, 60))


def test_table_urls_and_app_id_sources(spark: Any, tmp_path: Path) -> None:
    assert split_table_url("s3://bucket/lake/orders") == ("s3://bucket/lake", "orders")
    assert split_table_url("file:///tmp/lake/orders/") == ("file:///tmp/lake", "orders")
    for bad in ("orders", "s3://orders", "file:///"):
        with pytest.raises(InvalidArgument, match="store URL"):
            split_table_url(bad)
    with pytest.raises(DatasetNotFound):
        ParquetryTable.for_path(spark, f"{tmp_path.as_uri()}/missing")
    assert spark_app_id_from_env({"SPARK_APPLICATION_ID": "spark-abc"}) == "spark-abc"
    container = "container_e17_1410901177871_0001_01_000005"
    assert spark_app_id_from_env({"CONTAINER_ID": container}) == "application_1410901177871_0001"
    assert spark_app_id_from_env({"CONTAINER_ID": "other"}) is None
    assert spark_app_id_from_env({}) is None


def test_write_parameters_from_options_without_spark() -> None:
    """What a write records, from options alone (defaults and secrets left out)."""
    from parquetry.spark.history import write_parameters
    from parquetry.spark.options import SourceOptions

    options = SourceOptions.parse(
        {
            "store": "s3://bucket/lake",
            "secret_access_key": "SECRET",
            "dataset": "t",
            "partition_on": "a,b",
            "rows_per_file": "1000",
            "task_bytes": "5",
            "parameters": '{"job": "x", "mode": "mine"}',
        }
    )
    assert SourceOptions.parse(options.to_spark()) == options
    assert write_parameters(options, False, app_id="app-1") == {
        "job": "x",
        "engine": "spark",
        "mode": "Append",
        "partitionBy": '["a", "b"]',
        "rowsPerFile": "1000",
        "sparkAppId": "app-1",
    }
    with pytest.raises(InvalidArgument, match="JSON object"):
        SourceOptions.parse({"store": "file:///x", "dataset": "t", "parameters": "[1]"})
    with pytest.raises(InvalidArgument, match="not JSON"):
        SourceOptions.parse({"store": "file:///x", "dataset": "t", "parameters": "{"})
