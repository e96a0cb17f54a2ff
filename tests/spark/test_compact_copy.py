"""Spark reads a dataset compacted by binary copy (row groups copied whole and merged by
page concatenation into one file per partition)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa

from parquetry.dataset import Dataset
from parquetry.parquet import WriteOptions
from parquetry.spark import read_dataset
from parquetry.store import LocalStore


def _chunk(start: int, n: int) -> pa.Table:
    ids = range(start, start + n)
    return pa.table(
        {
            "p": pa.array([i % 2 for i in ids], pa.int64()),
            "id": pa.array(ids, pa.int64()),
            "tag": [None if i % 5 == 0 else f"t{i % 11}" for i in ids],
            "ts": [dt.datetime(2024, 1, 1) + dt.timedelta(minutes=i) for i in ids],
            "d": pa.array([Decimal(i) / 100 for i in ids], pa.decimal128(10, 2)),
        }
    )


def test_spark_reads_a_binary_copied_dataset(spark: Any, tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "lake")
    ds = Dataset.create(store, "c", _chunk(0, 40), partition_on=["p"])
    for i, dictionary in enumerate([False, True, False, False]):
        ds = ds.append(_chunk((i + 1) * 40, 40), write_options=WriteOptions(dictionary=dictionary))
    before = ds.read().sort_by("id")
    out = ds.compact(target_file_size=1 << 20, binary_copy=True)
    assert len(out.plan().files) == 2
    rows = read_dataset(spark, store.url, "c").orderBy("id").collect()
    assert [r["id"] for r in rows] == before.column("id").to_pylist()
    assert [r["tag"] for r in rows] == before.column("tag").to_pylist()
    assert [r["d"] for r in rows] == before.column("d").to_pylist()
    assert [r["ts"] for r in rows] == before.column("ts").to_pylist()
    filtered = read_dataset(spark, store.url, "c").where("id >= 100 AND id < 130").count()
    assert filtered == 30
