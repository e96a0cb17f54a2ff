"""Streaming sink: small files with and without autoCompact, and sustained throughput.

1. **Small files** (no Spark: the sink's commit path without the JVM). ``--batches``
   micro-batches of ``--batch-rows`` rows over 4 partitions, each committed as the sink
   commits it (``Dataset.append(txn=(query, batch))``); with ``autoCompact`` N the
   partitions the batch wrote are compacted after every N-th batch, as the sink does
   (``Dataset.compact(partitions=...)``). Reports data files in the newest version, commits,
   total commit time, and the time of a full read (``Dataset.read()``, median of 3).
2. **Throughput** (Spark, ``local[2]``): a ``rate`` source at ``--rate`` rows/s,
   ``trigger(processingTime="1 second")``, for ``--seconds``, into ``format("parquetry")``
   vs the baseline ``foreachBatch`` + ``df.write.mode("append").parquet(path)`` (Spark's
   native Parquet). Reports rows committed per second of run, batches, and the per-batch
   ``addBatch`` time from ``query.recentProgress`` (median / p95 / max): the commit latency
   of a micro-batch (tasks + commit).

Times depend on the machine's load: the script prints ``os.getloadavg()`` with each result.
Usage: ``nice .venv/bin/python benchmarks/bench_streaming.py [--batches N] [--every N]
[--seconds S] [--rate R] [--skip-spark] [--skip-small] [--quick]`` (``--quick``: 20 batches, 8 s of
streaming: a smoke run, not a measurement).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa


def _load() -> str:
    return "load {:.1f} {:.1f} {:.1f}".format(*os.getloadavg())


class _Written:
    """What ``partitions_predicate`` reads of a written file: its partition values."""

    def __init__(self, partition: tuple[tuple[str, Any], ...]) -> None:
        self.partition = partition


def small_files(root: Path, batches: int, batch_rows: int, every: int | None) -> dict[str, Any]:
    """Commit ``batches`` micro-batches as the sink does; the resulting layout and read time."""
    from parquetry.dataset import Dataset
    from parquetry.dataset.replace import partitions_predicate
    from parquetry.store import open_store

    store = open_store(root.as_uri())
    first = pa.table({"id": pa.array([], pa.int64()), "k": pa.array([], pa.int64())})
    ds = Dataset.create(store, "events", first, partition_on=["k"])
    commit_seconds = 0.0
    for batch in range(batches):
        ids = list(range(batch * batch_rows, (batch + 1) * batch_rows))
        table = pa.table({"id": ids, "k": [i % 4 for i in ids]})
        start = time.perf_counter()
        ds = ds.append(table, txn=("bench-query", batch))
        if every and (batch + 1) % every == 0:
            # The sink compacts the partitions the batch wrote (here all four), with the
            # predicate it builds from the batch's files.
            written = [_Written((("k", k),)) for k in sorted(set(table["k"].to_pylist()))]
            ds = ds.compact(partitions=partitions_predicate(written, ds.partition_keys))
        commit_seconds += time.perf_counter() - start
    reads = []
    for _ in range(3):
        start = time.perf_counter()
        rows = Dataset.open(store, "events").read().num_rows
        reads.append(time.perf_counter() - start)
    assert rows == batches * batch_rows, (rows, batches * batch_rows)
    latest = Dataset.open(store, "events")
    return {
        "auto_compact": every,
        "batches": batches,
        "rows": rows,
        "files": len(latest._doc.files),
        "versions": latest.version + 1,
        "commit_s_total": round(commit_seconds, 2),
        "full_read_s_median": round(statistics.median(reads), 4),
        "load": _load(),
    }


def _latencies(query: Any) -> list[float]:
    return [
        p["durationMs"].get("addBatch", 0) / 1000
        for p in query.recentProgress
        if p["numInputRows"] > 0
    ]


def throughput(spark: Any, root: Path, seconds: float, rate: int) -> list[dict[str, Any]]:
    """The rate source streamed into parquetry and into native Parquet via foreachBatch."""
    from parquetry.dataset import Dataset
    from parquetry.store import open_store

    out = []
    lake = (root / "lake").as_uri()

    def source() -> Any:
        return (
            spark.readStream.format("rate")
            .option("rowsPerSecond", rate)
            .load()
            .selectExpr("value as id", "value % 4 as k", "timestamp as ts")
        )

    def native_batch(df: Any, batch_id: int) -> None:
        df.write.mode("append").partitionBy("k").parquet(str(root / "native"))

    for case in ("parquetry", "native"):
        writer = source().writeStream.trigger(processingTime="1 second")
        checkpoint = str(root / f"checkpoint-{case}")
        if case == "parquetry":
            writer = (
                writer.format("parquetry")
                .option("store", lake)
                .option("dataset", "stream")
                .option("partition_on", "k")
            )
        else:
            writer = writer.foreachBatch(native_batch)
        query = writer.option("checkpointLocation", checkpoint).start()
        # The first batch pays the workers' start; measure from the first progress on.
        while not query.recentProgress:
            time.sleep(0.2)
        started = time.perf_counter()
        first_rows = sum(p["numInputRows"] for p in query.recentProgress)
        time.sleep(seconds)
        query.stop()
        elapsed = time.perf_counter() - started
        rows = sum(p["numInputRows"] for p in query.recentProgress) - first_rows
        lat = sorted(_latencies(query)[1:]) or [0.0]
        result = {
            "case": case,
            "seconds": round(elapsed, 1),
            "batches": len(lat),
            "rows_per_s": round(rows / elapsed, 1),
            "add_batch_s_median": round(statistics.median(lat), 3),
            "add_batch_s_p95": round(lat[min(len(lat) - 1, int(0.95 * len(lat)))], 3),
            "add_batch_s_max": round(lat[-1], 3),
            "load": _load(),
        }
        if case == "parquetry":
            ds = Dataset.open(open_store(lake), "stream")
            result["files"] = len(ds._doc.files)
            result["committed_rows"] = ds.read(columns=["id"]).num_rows
        out.append(result)
    return out


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batches", type=int, default=1000)
    parser.add_argument("--batch-rows", type=int, default=100)
    parser.add_argument("--every", type=int, default=10, help="autoCompact N")
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--rate", type=int, default=10_000)
    parser.add_argument("--skip-spark", action="store_true")
    parser.add_argument("--skip-small", action="store_true", help="only the Spark part")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.seconds, args.rate = 8, 1000
        args.batches = min(args.batches, 20)
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-streaming-") as tmp:
        root = Path(tmp)
        for every in () if args.skip_small else (None, args.every):
            path = root / f"small-{every}"
            path.mkdir()
            result = small_files(path, args.batches, args.batch_rows, every)
            print(json.dumps(result), flush=True)
            results.append(result)
            shutil.rmtree(path)
        if not args.skip_spark:
            from parquetry.spark import local_session

            spark = local_session("local[2]", app_name="bench-streaming")
            try:
                for result in throughput(spark, root, args.seconds, args.rate):
                    print(json.dumps(result), flush=True)
                    results.append(result)
            finally:
                spark.stop()
    return results


if __name__ == "__main__":
    main()
