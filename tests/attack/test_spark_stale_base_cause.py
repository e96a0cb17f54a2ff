"""A Spark row operation's failed job becomes BaseCollected only when garbage collection is
what failed it: the driver gets the task's error as text and asks the store
(tableops.stale_base). A task that failed for another reason (a damaged data file: the
task quotes parquetry.errors.InvalidFormat naming it) while GC expired the base version
meanwhile (an append then GC: every file of the base still referenced, the version a
tombstone) must stay a SparkTaskFailed naming the damaged file, as the Python API raises
InvalidFormat there, not a BaseCollected claiming a file was garbage collected.

No Spark session: the job's failure is raised as run_tasks raises it."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

pytest.importorskip("pyspark")

from parquetry.dataset import Dataset
from parquetry.dataset.staleread import BaseCollected
from parquetry.spark.tableops import SparkTaskFailed, stale_base
from parquetry.store import LocalStore


def _failed(quoted: str) -> SparkTaskFailed:
    # As run_tasks words it, quoting the task's error line (_spark_message).
    return SparkTaskFailed(
        "dataset 't': a Spark task failed, nothing is committed (the dataset stays at "
        f"version 0; files written by tasks are left to garbage collection): {quoted}"
    )


def _expired_base(tmp_path: Path) -> tuple[Dataset, str, list[str]]:
    store = LocalStore(tmp_path / "lake")
    Dataset.create(store, "t", pa.table({"p": [0, 1], "k": [1, 2]}), partition_on=["p"])
    stale = Dataset.open(store, "t")
    Dataset.open(store, "t").append(pa.table({"p": [0], "k": [3]}))
    assert Dataset.open(store, "t").garbage_collect(retention=0).expired_versions == (0,)
    labels = [f.label for f in stale.plan().files]
    key = stale.plan().files[0].key
    assert store.exists(key)  # the base's files are all still there (and referenced)
    return stale, key, labels


def test_a_task_failing_on_a_damaged_file_is_no_base_collected(tmp_path: Path) -> None:
    stale, key, labels = _expired_base(tmp_path)
    quoted = (
        f"parquetry.errors.InvalidFormat: data file {key} of partition 'p=0' is damaged "
        "(its footer cannot be decoded)"
    )
    with (
        pytest.raises(SparkTaskFailed, match="InvalidFormat"),
        stale_base(stale, labels, "update_where"),
    ):
        raise _failed(quoted)


def test_a_task_failing_on_the_expired_version_is_base_collected(tmp_path: Path) -> None:
    stale, _, labels = _expired_base(tmp_path)
    quoted = (
        "parquetry.errors.VersionExpired: dataset 't': version 0 was garbage collected (its "
        "files may be gone): open the dataset again to read the newest version"
    )
    with pytest.raises(BaseCollected), stale_base(stale, labels, "update_where"):
        raise _failed(quoted)


def test_a_task_failing_in_the_worker_itself_is_no_base_collected(tmp_path: Path) -> None:
    """The text a job failing in a worker without obstore gave (seen with a session
    whose workers ran another interpreter), while GC expired the base."""
    stale, _, labels = _expired_base(tmp_path)
    quoted = "ModuleNotFoundError: No module named 'obstore'"
    with (
        pytest.raises(SparkTaskFailed, match="ModuleNotFoundError"),
        stale_base(stale, labels, "delete_where"),
    ):
        raise _failed(quoted)


def test_a_task_failing_without_naming_an_error_asks_the_store(tmp_path: Path) -> None:
    """An executor lost (no Python error quoted): the store says the base was collected."""
    stale, _, labels = _expired_base(tmp_path)
    quoted = "Job aborted due to stage failure: ExecutorLostFailure (executor 1 exited)"
    with pytest.raises(BaseCollected), stale_base(stale, labels, "delete_where"):
        raise _failed(quoted)
