"""Kill and restart a real Spark driver (Python process, JVM and workers: SIGKILL of its
process group) streaming a parquetry dataset into a parquetry dataset, on local disk and on
S3 (moto). One query exercises both ends: the source's offsets (dataset versions, a version
split over micro-batches) must resume from the checkpoint, and the sink must commit every
batch exactly once, while the test keeps appending to the source."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from parquetry.dataset import Dataset
from parquetry.spark.stream_sink import PARK_ENV
from parquetry.store import Store, open_store

DRIVER = Path(__file__).with_name("stream_driver.py")
ROWS = 20  # per source commit: two files (k = 0, 1), one micro-batch each


def _chunk(version: int) -> pa.Table:
    ids = list(range(version * ROWS, (version + 1) * ROWS))
    return pa.table({"id": pa.array(ids, pa.int64()), "k": pa.array([i % 2 for i in ids])})


def _killed_at(
    spec: dict[str, Any], park: str, marker: Path, while_parked: Any, timeout: float = 900
) -> None:
    """Run the driver until the sink parks at ``park``, call ``while_parked`` (the driver is
    mid-batch), then SIGKILL the driver's process group."""
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
        while_parked()
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)


def _ids(store: Store, name: str) -> Counter[int]:
    return Counter(Dataset.open(store, name).read(columns=["id"])["id"].to_pylist())


def _source_offsets(checkpoint: Path) -> list[Any]:
    """The source offset Spark logged for each batch (``offsets/<n>``: version line,
    metadata line, then one offset per source)."""
    batches = sorted(int(p.name) for p in (checkpoint / "offsets").iterdir() if p.name.isdigit())
    return [
        json.loads((checkpoint / "offsets" / str(n)).read_text().splitlines()[2]) for n in batches
    ]


@pytest.mark.slow
@pytest.mark.timeout(1800)  # two Spark drivers; minutes on a loaded 2-core machine
@pytest.mark.parametrize("where", ["local", "s3"])
def test_source_and_sink_are_exactly_once_across_driver_kills(
    spark: Any, where: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if where == "s3":
        server = request.getfixturevalue("moto_server")
        url, store_options = server.url(), server.options()
    else:
        url, store_options = (tmp_path / "lake").as_uri(), {}
    store = open_store(url, **store_options)
    Dataset.create(store, "src", _chunk(0), partition_on=["k"])
    checkpoint = tmp_path / "checkpoint"
    spec = {
        "store": url,
        "source": "src",
        "dataset": "events",
        "checkpoint": str(checkpoint),
        "options": {f"store.{k}": str(v) for k, v in store_options.items()},
    }

    def append(version: int) -> Any:
        return lambda: Dataset.open(store, "src").append(_chunk(version))

    # (a) Batch 0 (half of version 0, the starting snapshot) is logged and its tasks wrote
    # their files; the driver dies before the sink's commit. Meanwhile the source receives
    # version 1, so the restarted driver's initial offset differs from the logged batch's.
    _killed_at(spec, "before:0", tmp_path / "a.marker", append(1))
    query = json.loads((checkpoint / "metadata").read_text())["id"]
    assert not Dataset.exists(store, "events")  # its first commit never happened
    assert (checkpoint / "offsets" / "0").exists()
    assert not (checkpoint / "commits" / "0").exists()
    # (b) Restarted: batch 0 runs again (the same file of version 0), batch 1 the other one,
    # batch 2 the first file of version 1; killed right after batch 2's parquetry commit,
    # before Spark records it (commits/2). Meanwhile the source receives version 2.
    _killed_at(spec, "after:2", tmp_path / "b.marker", append(2))
    got = _ids(store, "events")
    # Version 0 whole, then one partition (one file) of version 1, each row once.
    assert set(got.values()) == {1}
    assert len(got) == 3 * ROWS // 2
    assert set(range(ROWS)) <= set(got) <= set(range(2 * ROWS))
    assert len({i % 2 for i in got if i >= ROWS}) == 1
    assert Dataset.open(store, "events").transactions == {query: 2}
    assert not (checkpoint / "commits" / "2").exists()
    versions = Dataset.open(store, "events").version
    # Restarted again (in this process): Spark replays batch 2 (a no-op for the sink), then
    # reads the rest: the second file of version 1 and both files of version 2.
    from stream_driver import start  # type: ignore[import-not-found]

    start(spark, spec).awaitTermination(900)
    ds = Dataset.open(store, "events")
    # Every source row exactly once: no duplicate, no loss.
    assert _ids(store, "events") == _ids(store, "src") == Counter(range(3 * ROWS))
    assert ds.transactions == {query: 5}
    assert ds.version == versions + 3  # batches 3, 4 and 5; none for the replay of 2
    assert (checkpoint / "commits" / "5").exists()
    # The source's offsets: half a version per batch, resumed where the log left them.
    assert _source_offsets(checkpoint) == [
        {
            "version": 0,
            "files": 1,
            "snapshot": True,
            "from": {"version": 0, "files": 0, "snapshot": True},
        },
        {"version": 0},
        {"version": 1, "files": 1},
        {"version": 1},
        {"version": 2, "files": 1},
        {"version": 2},
    ]
    # The layout and the index are the batch writer's.
    assert ds.partition_keys == ("k",)
    assert "id" in ds.secondary_indices
    assert sorted(ds.read(predicates=[[("id", "==", 33)]])["id"].to_pylist()) == [33]
