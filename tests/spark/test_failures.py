"""Failures on Spark: a retried task never duplicates rows, a failed job leaves the dataset
as it was (orphans go to garbage collection), concurrent Spark jobs both commit."""

from __future__ import annotations

import datetime as dt
import threading
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from parquetry.dataset import Dataset, write_files
from parquetry.dataset.gc import GCReport, garbage_collect
from parquetry.dataset.intents import CLOCK_SKEW, DEFAULT_LEASE
from parquetry.spark import write_dataset
from parquetry.store import open_store


@pytest.fixture
def lake(tmp_path: Path) -> str:
    return (tmp_path / "lake").as_uri()


@pytest.fixture
def small_batches(spark: Any) -> Any:
    """100-row Arrow batches, so writers produce files before a task fails."""
    key = "spark.sql.execution.arrow.maxRecordsPerBatch"
    old = spark.conf.get(key)
    spark.conf.set(key, "100")
    yield
    spark.conf.set(key, old)


def _failing_ids(spark: Any, n: int, *, fail_at: int, partition: int, always: bool) -> Any:
    from pyspark.sql.functions import udf

    # No type hints: Spark would read them as a pandas UDF signature.
    @udf("long")
    def maybe_fail(i):  # type: ignore[no-untyped-def]
        import time

        from pyspark import TaskContext

        ctx = TaskContext.get()
        if ctx.partitionId() == partition and i == fail_at and (always or ctx.attemptNumber() == 0):
            time.sleep(3)  # lets the writer downstream write the rows before this one
            raise RuntimeError(f"injected failure at id {i}, attempt {ctx.attemptNumber()}")
        return i

    return spark.range(0, n, numPartitions=2).select(maybe_fail("id").alias("id"))


def _gc_after_leases(lake: str, uuid: str) -> GCReport:
    """GC with retention 0 at a time when the write intents of the failed attempts (which
    protect files of writes in flight) have expired."""
    later = dt.datetime.now(dt.UTC) + DEFAULT_LEASE + CLOCK_SKEW + dt.timedelta(seconds=5)
    return garbage_collect(open_store(lake), uuid, retention=0, now=later)


def _unreferenced(lake: str, uuid: str) -> set[str]:
    store = open_store(lake)
    stored = {m.key for m in store.list(f"{uuid}/table/") if m.key.endswith(".parquet")}
    return stored - {pf.key for pf in Dataset.open(store, uuid).plan().files}


def test_retried_task_does_not_duplicate_rows(spark: Any, lake: str, small_batches: Any) -> None:
    df = _failing_ids(spark, 4000, fail_at=1700, partition=0, always=False)
    df.selectExpr("id", "cast(id % 2 as string) as part").write.format("parquetry").option(
        "store", lake
    ).option("dataset", "retry").option("partition_on", "part").option("rows_per_file", "500").mode(
        "append"
    ).save()
    ds = Dataset.open(open_store(lake), "retry")
    ids = sorted(ds.read(columns=["id"]).column("id").to_pylist())
    assert ids == list(range(4000))
    # Spark feeds the writer only after the UDF stage returns, so attempt 0 usually fails before
    # writing; whatever it did write is unreferenced and garbage collection removes it.
    _gc_after_leases(lake, "retry")
    assert _unreferenced(lake, "retry") == set()
    assert sorted(Dataset.open(open_store(lake), "retry").read().column("id").to_pylist()) == ids


def test_failed_job_leaves_dataset_unchanged(spark: Any, lake: str, small_batches: Any) -> None:
    before = write_dataset(spark.range(0, 50), lake, "failjob")
    # Files an executor wrote but never got committed (what a crashed task leaves behind).
    orphans = {f.key for f in write_files(open_store(lake), "failjob", pa.table({"id": [7, 8]}))}
    df = _failing_ids(spark, 4000, fail_at=3500, partition=1, always=True)
    with pytest.raises(Exception, match="injected failure"):
        df.write.format("parquetry").option("store", lake).option("dataset", "failjob").option(
            "rows_per_file", "500"
        ).mode("overwrite").save()
    after = Dataset.open(open_store(lake), "failjob")
    assert after.version == before.version
    assert sorted(after.read().column("id").to_pylist()) == list(range(50))
    assert orphans <= _unreferenced(lake, "failjob")
    assert not orphans & set(after.garbage_collect(retention=0).deleted)  # intents protect
    report = _gc_after_leases(lake, "failjob")
    assert orphans <= set(report.deleted)
    assert _unreferenced(lake, "failjob") == set()
    assert sorted(Dataset.open(open_store(lake), "failjob").read().column("id").to_pylist()) == (
        list(range(50))
    )


def test_two_spark_jobs_appending_concurrently_both_commit(spark: Any, lake: str) -> None:
    write_dataset(spark.range(0, 10).selectExpr("id", "'seed' as job"), lake, "concurrent")
    errors: list[BaseException] = []

    def append(start: int, name: str) -> None:
        try:
            rows = spark.range(start, start + 300).selectExpr("id", f"'{name}' as job")
            write_dataset(rows, lake, "concurrent")
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [
        threading.Thread(target=append, args=(1000, "a")),
        threading.Thread(target=append, args=(2000, "b")),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [], [str(e)[:3000] for e in errors]
    ds = Dataset.open(open_store(lake), "concurrent")
    ids = sorted(ds.read(columns=["id"]).column("id").to_pylist())
    assert ids == [*range(10), *range(1000, 1300), *range(2000, 2300)]
    assert ds.version == 2
