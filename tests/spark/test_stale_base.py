"""A Spark row operation whose base version garbage collection collected while it ran
raises BaseCollected (a CommitConflict: run it again), as the Python API does, not a
SparkTaskFailed quoting the task's VersionExpired; nothing is committed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from parquetry.dataset import Dataset
from parquetry.dataset.staleread import BaseCollected
from parquetry.spark import ParquetryTable, operations
from parquetry.spark.tableops import SparkTaskFailed
from parquetry.store import LocalStore


def _collected_under(tmp_path: Path, spark: Any) -> tuple[ParquetryTable, Dataset]:
    """(the table, a handle on version 0 planned on before a newer version removed its
    files and garbage collection deleted them: an operation in flight on it)."""
    root = tmp_path / "lake"
    store = LocalStore(root)
    rows = pa.table({"p": [0, 0, 1, 1], "k": [1, 2, 3, 4], "v": ["a", "b", "c", "d"]})
    Dataset.create(store, "t", rows, partition_on=["p"])
    table = ParquetryTable.for_path(spark, f"{root.as_uri()}/t")
    stale = Dataset.open(store, "t")
    Dataset.open(store, "t").delete_where([[("k", ">=", 0)]])
    assert Dataset.open(store, "t").garbage_collect(retention=0).expired_versions == (0,)
    return table, stale


def test_delete_and_update_raise_base_collected(spark: Any, tmp_path: Path) -> None:
    table, stale = _collected_under(tmp_path, spark)
    with pytest.raises(BaseCollected) as python:
        stale.delete_where([[("k", "<", 2)]])
    params = {"engine": "spark"}
    with pytest.raises(BaseCollected) as deleted:
        operations.delete_where(spark, stale, table._options, "k < 2", params)
    # The tasks ran and failed on the collected files: the driver asked the store why.
    assert isinstance(deleted.value.__cause__, SparkTaskFailed)
    assert deleted.value.key == python.value.key
    assert str(deleted.value).startswith(str(python.value).split(" which this ")[0])
    with pytest.raises(BaseCollected) as updated:
        operations.update_where(spark, stale, table._options, "k < 2", {"v": "'z'"}, params)
    assert isinstance(updated.value.__cause__, SparkTaskFailed)
    assert table.dataset().version == 1  # nothing committed
    assert table.dataset().read().num_rows == 0


def test_a_failure_with_the_base_intact_stays_a_task_failure(spark: Any, tmp_path: Path) -> None:
    """Only a collected base becomes BaseCollected: a task failing for another reason is
    still SparkTaskFailed."""
    root = tmp_path / "lake"
    store = LocalStore(root)
    Dataset.create(store, "t", pa.table({"p": [0, 1], "k": [1, 2]}), partition_on=["p"])
    table = ParquetryTable.for_path(spark, f"{root.as_uri()}/t")
    ds = Dataset.open(store, "t")
    bad = {**table._options, "store": (tmp_path / "elsewhere").as_uri()}  # tasks cannot open it
    with pytest.raises(SparkTaskFailed):
        operations.delete_where(spark, ds, bad, "k < 2", {"engine": "spark"})
    assert Dataset.open(store, "t").version == 0
