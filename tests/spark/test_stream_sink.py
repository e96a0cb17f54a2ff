"""The streaming sink: exactly once across driver crashes (SIGKILL of the whole driver:
Python process, JVM and workers) before and after the parquetry commit of a batch."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from parquetry.dataset import Dataset
from parquetry.spark.stream_sink import PARK_ENV
from parquetry.store import Store, open_store

DRIVER = Path(__file__).with_name("stream_driver.py")
FILES, ROWS = 4, 50


def _inputs(directory: Path) -> None:
    directory.mkdir()
    now = time.time() - 3600
    for i in range(FILES):
        ids = list(range(i * ROWS, (i + 1) * ROWS))
        path = directory / f"in-{i}.parquet"
        pq.write_table(pa.table({"id": ids, "k": [x % 3 for x in ids]}), path)
        # Spark's file source takes files oldest first: batch i reads file i.
        os.utime(path, (now + i, now + i))


def _killed_at(spec: dict[str, Any], park: str, marker: Path, timeout: float = 600) -> None:
    """Run the driver until the sink parks at ``park``, then SIGKILL its process group."""
    env = {**os.environ, PARK_ENV: f"{park}:{marker}"}
    log = marker.with_suffix(".log")
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, str(DRIVER), json.dumps(spec)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: the JVM and workers join it
        )
    try:
        deadline = time.monotonic() + timeout
        while not marker.exists():
            if proc.poll() is not None:
                pytest.fail(f"driver exited ({proc.returncode}) before {park}: {log.read_text()}")
            if time.monotonic() > deadline:
                pytest.fail(f"driver did not reach {park} in {timeout} s")
            time.sleep(0.2)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)


def _ids(store: Store) -> list[int]:
    return sorted(Dataset.open(store, "events").read(columns=["id"])["id"].to_pylist())


@pytest.mark.slow
@pytest.mark.timeout(1800)  # three Spark drivers; minutes on a loaded 2-core machine
@pytest.mark.parametrize("where", ["local", "s3"])
def test_sink_is_exactly_once_across_driver_kills(
    spark: Any, where: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if where == "s3":
        server = request.getfixturevalue("moto_server")
        url, store_options = server.url(), server.options()
    else:
        url, store_options = (tmp_path / "lake").as_uri(), {}
    store = open_store(url, **store_options)
    _inputs(tmp_path / "in")
    checkpoint = tmp_path / "checkpoint"
    spec = {
        "store": url,
        "dataset": "events",
        "input": str(tmp_path / "in"),
        "checkpoint": str(checkpoint),
        "options": {f"store.{k}": str(v) for k, v in store_options.items()},
    }
    # (a) Killed after batch 1's tasks wrote their files, before its commit.
    _killed_at(spec, "before:1", tmp_path / "a.marker")
    query = json.loads((checkpoint / "metadata").read_text())["id"]
    assert _ids(store) == list(range(ROWS))
    assert Dataset.open(store, "events").transactions == {query: 0}
    # (b) Restarted: batch 1 runs again; killed right after batch 2's parquetry commit,
    # before Spark records it (commits/2).
    _killed_at(spec, "after:2", tmp_path / "b.marker")
    assert _ids(store) == list(range(3 * ROWS))
    assert Dataset.open(store, "events").transactions == {query: 2}
    assert not (checkpoint / "commits" / "2").exists()
    versions = Dataset.open(store, "events").version
    # Restarted again (in this process): Spark replays batch 2 (a no-op), then batch 3.
    from stream_driver import start  # type: ignore[import-not-found]

    start(spark, spec).awaitTermination()
    ds = Dataset.open(store, "events")
    assert _ids(store) == list(range(FILES * ROWS))  # no duplicate, no loss
    assert ds.transactions == {query: FILES - 1}
    assert ds.version == versions + 1  # one commit for batch 3; none for the replay
    assert (checkpoint / "commits" / "3").exists()
    # The layout and the index are the batch writer's.
    assert ds.partition_keys == ("k",)
    assert "id" in ds.secondary_indices
    assert sorted(ds.read(predicates=[[("id", "==", 123)]])["id"].to_pylist()) == [123]
