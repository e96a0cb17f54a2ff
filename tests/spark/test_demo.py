"""The ``parquetry demo`` pipeline at reduced size, on local disk and on S3 (moto)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from parquetry.dataset import Dataset
from parquetry.demo import DATASET, SNAPSHOT, run_demo
from parquetry.snapshot import ParquetDatasetStore
from parquetry.store import open_store


def _check(result: Any, lines: list[str], rows: int, store: Any) -> None:
    text = "\n".join(lines)
    assert result.rows == rows
    assert result.versions == 2
    ds = Dataset.open(store, DATASET)
    assert ds.partition_keys == ("order_date",)
    assert ds.secondary_indices == ("customer",)
    assert ds.read(columns=["order_id"]).num_rows == rows
    # The index lookup and the date range read fewer files than the whole dataset.
    assert 0 < result.customer_files < result.total_files
    assert 0 < result.range_files < result.total_files
    expected = ds.read(columns=["order_id"], predicates=[[("customer", "==", result.customer)]])
    assert result.customer_rows == expected.num_rows > 0
    manifest = ParquetDatasetStore(store).read_manifest(SNAPSHOT)
    assert manifest.run_id
    assert manifest.run_id.startswith("demo-")
    assert manifest.row_count == result.revenue_rows > 0
    assert result.csv_bytes > 3 * result.lake_bytes
    for needle in ("Versions of the orders dataset", "v1", "parquetry inspect", "run_id", "CSV"):
        assert needle in text


def test_demo_on_local_disk(spark: Any, tmp_path: Path) -> None:
    lines: list[str] = []
    steps: list[str] = []
    url = (tmp_path / "demo-lake").as_uri()
    # 5,000 rows give the same files as 20,000 (22, 4 of them in the date range) in about
    # half the time; the S3 test runs the same size.
    result = run_demo(rows=5_000, store_url=url, progress=steps.append, out=lines.append,
                      spark=spark)  # fmt: skip
    _check(result, lines, 5_000, open_store(url))
    assert steps[0].startswith("starting Spark")
    assert len(steps) >= 6


@pytest.mark.s3
def test_demo_on_s3(spark: Any, moto_server: Any) -> None:
    url = moto_server.url()
    lines: list[str] = []
    result = run_demo(rows=5_000, store_url=url, out=lines.append, spark=spark,
                      store_options=moto_server.options())  # fmt: skip
    _check(result, lines, 5_000, open_store(url, **moto_server.options()))
