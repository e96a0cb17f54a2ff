"""Executors doing S3 I/O through parquetry's Store (moto server), options passed through."""

from __future__ import annotations

from typing import Any

import pytest

from parquetry.dataset import Dataset
from parquetry.snapshot import ParquetDatasetStore
from parquetry.spark import read_dataset, write_dataset
from parquetry.store import open_store

pytestmark = pytest.mark.s3


def test_dataset_and_snapshot_on_s3_from_executors(spark: Any, moto_server: Any) -> None:
    url = moto_server.url()
    options = moto_server.options()
    df = spark.range(0, 1000, numPartitions=2).selectExpr(
        "id", "cast(id % 4 as string) as part", "id % 37 as customer"
    )
    ds = write_dataset(
        df, url, "orders", partition_on=("part",), secondary_indices=("customer",), **options
    )
    assert ds.version == 0
    back = read_dataset(spark, url, "orders", predicates=[[("customer", "==", 5)]], **options)
    assert sorted(r.id for r in back.collect()) == [i for i in range(1000) if i % 37 == 5]
    reader = spark.read.format("parquetry").option("store", url).options(**options)
    assert reader.option("dataset", "orders").load().filter("part = '2'").count() == 250

    df.write.format("parquetry").option("store", url).options(**options).option(
        "layout", "snapshot"
    ).option("key", "daily/revenue").option("run_id", "s3-run").mode("overwrite").save()
    store = open_store(url, **options)
    assert ParquetDatasetStore(store).read_manifest("daily/revenue").run_id == "s3-run"
    snapshot = reader.option("layout", "snapshot").option("key", "daily/revenue").load()
    assert snapshot.count() == 1000
    assert Dataset.open(store, "orders").version == 0
