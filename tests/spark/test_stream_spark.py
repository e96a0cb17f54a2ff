"""readStream.format("parquetry") in real Spark queries: memory sink, checkpoints, restarts,
Trigger.AvailableNow and a change commit stopping the query (the shared local session)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from parquetry.dataset import Dataset
from parquetry.store import Store, open_store


def _chunk(start: int, n: int) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table(
        {"id": pa.array(ids, pa.int64()), "p": pa.array([i % 2 for i in ids], pa.int64())}
    )


def _lake(tmp_path: Path) -> tuple[str, Store]:
    (tmp_path / "lake").mkdir()
    url = (tmp_path / "lake").resolve().as_uri()
    return url, open_store(url)


# --- real Spark queries ----------------------------------------------------------------------


def test_spark_stream_follows_appends_restarts_exactly_and_stops_on_change(
    spark: Any, tmp_path: Path
) -> None:
    url, store = _lake(tmp_path)
    ds = Dataset.create(store, "ds", _chunk(0, 20), partition_on=["p"])
    checkpoint, out = str(tmp_path / "checkpoint"), str(tmp_path / "out")

    def start(**options: str) -> Any:
        reader = spark.readStream.format("parquetry").option("store", url).option("dataset", "ds")
        for key, value in options.items():
            reader = reader.option(key, value)
        # The file sink is exactly-once across restarts (its own log of committed batches).
        return (
            reader.load()
            .writeStream.format("parquet")
            .option("path", out)
            .option("checkpointLocation", checkpoint)
        )

    def ids() -> Counter[int]:
        return Counter(r[0] for r in spark.read.parquet(out).select("id").collect())

    query = start(maxFilesPerTrigger="1").start()
    try:
        query.processAllAvailable()
        ds = ds.append(_chunk(20, 10))
        query.processAllAvailable()
        assert ids() == Counter(range(30))
        rows = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
        assert rows == [10, 10, 5, 5]  # one file per micro-batch
        end = query.lastProgress["sources"][0]["endOffset"]
        assert (json.loads(end) if isinstance(end, str) else end) == {"version": 1}
    finally:
        query.stop()
    # Commits land while the query is down; restarted from the checkpoint it reads exactly
    # them (AvailableNow: everything committed at its start, then it stops by itself).
    ds = ds.append(_chunk(30, 6)).compact().append(_chunk(40, 2))
    query = start().trigger(availableNow=True).start()
    query.awaitTermination(600)
    assert query.exception() is None
    assert ids() == Counter([*range(36), 40, 41])
    # A commit that rewrote rows stops the query with the message naming the version.
    ds.delete_where([[("id", "==", 3)]])
    query = start().trigger(availableNow=True).start()
    with pytest.raises(Exception, match=r"version 5 of dataset 'ds' \(delete\)"):
        query.awaitTermination(600)
    ds = Dataset.open(store, "ds").append(_chunk(50, 1))
    query = start(skipChangeCommits="true").trigger(availableNow=True).start()
    query.awaitTermination(600)
    assert query.exception() is None
    assert ids() == Counter([*range(36), 40, 41, 50])


def test_stream_options_on_a_batch_read_are_ignored_as_delta_does(
    spark: Any, tmp_path: Path
) -> None:
    """Delta ignores startingVersion & co. on a batch read (they mean something to readStream
    only); so does parquetry: the read is the current version, not a change feed or a time
    travel (that is versionAsOf)."""
    url, store = _lake(tmp_path)
    Dataset.create(store, "ds", _chunk(0, 4)).append(_chunk(4, 3))

    def batch(**options: str) -> list[int]:
        reader = spark.read.format("parquetry").option("store", url).option("dataset", "ds")
        for key, value in options.items():
            reader = reader.option(key, value)
        return sorted(r[0] for r in reader.load().select("id").collect())

    every = list(range(7))
    assert batch(startingVersion="1", maxFilesPerTrigger="1", ignoreChanges="true") == every
    assert batch(startingTimestamp="2000-01-01", skipChangeCommits="true") == every
    assert batch(startingVersion="1", versionAsOf="0") == list(range(4))
