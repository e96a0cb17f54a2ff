"""``parquetry demo --streaming``: a Structured Streaming job killed and restarted, exactly once.

1. write ``batches`` Parquet files of click events (a replayable file source);
2. start a Spark driver in a child process streaming them, one file per 1-second micro-batch,
   into the dataset ``clicks`` (partitioned by day, secondary index on ``user``);
3. query the dataset while it grows (row count, and one user's rows through the index);
4. SIGKILL the whole driver (Python, JVM, workers) in the middle of the stream;
5. restart it from its checkpoint (``Trigger.AvailableNow``) and check that every event is
   there exactly once: the sink records (query id, batch id) with each commit, so the
   batches Spark replays after the crash commit nothing twice.

The driver runs as ``python -m parquetry.demo_stream <spec JSON>`` so that it can be killed
without killing the demo; pyspark is imported only there.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["StreamDemoResult", "run_streaming_demo"]

DATASET = "clicks"
USERS = 997
DAYS = ("2025-01-01", "2025-01-02", "2025-01-03")


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamDemoResult:
    """What the demo saw, for tests and scripts."""

    rows: int  # rows in the dataset at the end
    distinct_ids: int
    expected: int  # rows in the input files
    rows_when_killed: int
    versions: int  # commits of the dataset (one per micro-batch that had rows)
    user_rows: int  # rows of one user read through the index at the end
    seconds: float


def _write_input(directory: Path, batches: int, rows: int) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq

    directory.mkdir(parents=True, exist_ok=True)
    for b in range(batches):
        ids = list(range(b * rows, (b + 1) * rows))
        table = pa.table(
            {
                "id": pa.array(ids, pa.int64()),
                "user": pa.array([i % USERS for i in ids], pa.int64()),
                "day": pa.array([DAYS[i % len(DAYS)] for i in ids]),
                "ms": pa.array([(i * 37) % 5000 for i in ids], pa.int64()),
            }
        )
        # Written under a temporary name first: the file source must never see half a file.
        tmp = directory / f".{b:05d}.tmp"
        pq.write_table(table, tmp)
        tmp.rename(directory / f"clicks-{b:05d}.parquet")
    return batches * rows


def _driver(spec: dict[str, Any]) -> subprocess.Popen[bytes]:
    # A session of its own: the demo kills the driver's whole process group (JVM included).
    return subprocess.Popen(
        [sys.executable, "-m", "parquetry.demo_stream", json.dumps(spec)],
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _kill(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _count(store: Any) -> tuple[int, int, int]:
    """(rows, version, rows of user 42 through the index) of the dataset now; zeros if absent."""
    from parquetry.dataset import Dataset
    from parquetry.errors import DatasetNotFound

    try:
        ds = Dataset.open(store, DATASET)
    except DatasetNotFound:
        return 0, -1, 0
    user = ds.read(columns=["id"], predicates=[[("user", "==", 42)]]).num_rows
    return ds.detail().rows or 0, ds.version, user


def run_streaming_demo(
    *,
    store_url: str,
    work: Path,
    batches: int = 12,
    rows: int = 2000,
    timeout: float = 600.0,
    out: Callable[[str], None] = print,
) -> StreamDemoResult:
    """Run the demo (see the module docstring); ``work`` holds the input and the checkpoint."""
    from parquetry.dataset import Dataset
    from parquetry.errors import InvalidArgument
    from parquetry.store import open_store

    if batches < 4:
        raise InvalidArgument(f"--batches must be >= 4 to kill the stream midway, got {batches}")
    started = time.monotonic()
    store = open_store(store_url)
    # A rerun starts over: the previous run's input, checkpoint and dataset would change
    # the counts (and an old checkpoint would resume instead of starting).
    if work.exists():
        shutil.rmtree(work)
    if Dataset.exists(store, DATASET):
        Dataset.open(store, DATASET).delete()
    expected = _write_input(work / "input", batches, rows)
    spec = {
        "store": store_url,
        "input": str(work / "input"),
        "checkpoint": str((work / "checkpoint").resolve()),
        "available_now": False,
    }
    out(f"input: {batches} files of {rows:,} click events in {work / 'input'}")
    out(f"streaming them into {store_url} dataset {DATASET!r} (partition day, index user)")
    proc = _driver(spec)
    killed_at = 0
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"the streaming driver exited early (status {proc.returncode})")
            if time.monotonic() > deadline:
                raise TimeoutError(f"the stream committed nothing in {timeout:.0f} s")
            total, version, user = _count(store)
            if version >= 0:
                out(f"  version {version}: {total:,} rows so far; user 42 has {user} (index)")
            if total >= expected // 2:
                killed_at = total
                break
            time.sleep(1.0)
    finally:
        _kill(proc)
    out(f"killed the driver (SIGKILL, JVM included) with {killed_at:,} of {expected:,} rows in")
    out("restarting from the checkpoint (Trigger.AvailableNow) ...")
    restart = _driver({**spec, "available_now": True})
    try:
        code = restart.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill(restart)
        raise TimeoutError(f"the restarted stream did not finish in {timeout:.0f} s") from None
    if code != 0:
        raise RuntimeError(f"the restarted streaming driver failed (status {code})")
    ds = Dataset.open(store, DATASET)
    table = ds.read(columns=["id"])
    distinct = len(set(table.column("id").to_pylist()))
    user = ds.read(columns=["id"], predicates=[[("user", "==", 42)]]).num_rows
    out(
        f"after the restart: {table.num_rows:,} rows, {distinct:,} distinct ids, "
        f"{len(ds.versions())} versions; user 42 has {user} rows"
    )
    verdict = "exactly once" if table.num_rows == distinct == expected else "MISMATCH"
    out(f"{verdict}: {expected:,} events in, {table.num_rows:,} rows out")
    return StreamDemoResult(
        rows=table.num_rows,
        distinct_ids=distinct,
        expected=expected,
        rows_when_killed=killed_at,
        versions=len(ds.versions()),
        user_rows=user,
        seconds=time.monotonic() - started,
    )


def _main(spec: dict[str, Any]) -> None:
    from parquetry.spark import local_session

    spark = local_session("local[2]", app_name="parquetry-demo-stream")
    source = (
        spark.readStream.schema("id long, user long, day string, ms long")
        .option("maxFilesPerTrigger", 1)
        .parquet(spec["input"])
    )
    writer = (
        source.writeStream.format("parquetry")
        .option("store", spec["store"])
        .option("dataset", DATASET)
        .option("partition_on", "day")
        .option("secondary_indices", "user")
        .option("checkpointLocation", spec["checkpoint"])
    )
    if spec["available_now"]:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime="1 second")
    writer.start().awaitTermination()
    spark.stop()


if __name__ == "__main__":
    _main(json.loads(sys.argv[1]))
