"""A Spark DataFrame planned on one version whose files garbage collection (retention 0)
deletes before the job runs: the job fails, never a smaller answer, through the parquetry
data source and the native Parquet path alike (docs/spark.md, "Snapshot consistency")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from parquetry.dataset import Dataset
from parquetry.store import open_store

# About 90 s on two shared cores: the Python data source retries the failing task.
pytestmark = [pytest.mark.spark, pytest.mark.slow]
pytest.importorskip("pyspark")


@pytest.mark.parametrize("native", [False, True])
def test_a_planned_read_whose_version_gc_collects_fails(
    spark: Any, tmp_path: Path, native: bool
) -> None:
    from parquetry.spark import read_dataset

    lake = (tmp_path / "lake").as_uri()
    store = open_store(lake)
    ds = Dataset.create(
        store, "ds", pa.table({"p": [1, 1, 2, 2], "id": [1, 2, 3, 4]}), partition_on=["p"]
    )
    ds = ds.append(pa.table({"p": [1, 3], "id": [5, 6]}))
    frame = read_dataset(spark, lake, "ds", version=ds.version, native=native)
    assert frame.count() == 6
    ds.compact().garbage_collect(retention=0)  # the planned files are gone
    try:
        rows = frame.collect()
    except Exception as exc:  # Spark wraps the cause in its own exception types
        text = str(exc)
    else:
        pytest.fail(f"read {len(rows)} rows of a version GC collected")  # never fewer rows
    assert "FileNotFound" in text or "expired" in text or "missing" in text, text[-2000:]
