"""Spark: parquetry against Spark's native Parquet, same session, same data, cases interleaved.

Data: ``id long, value double, category string x 16, ts timestamp`` (cached), 2M rows.
Ratio = median of per-round ratios parquetry / native (1 warm-up round, then --rounds).

- write: ``format("parquetry")`` partitioned by category vs ``partitionBy("category").parquet``;
- native hand-off (``read_dataset``, planning included) vs ``spark.read.parquet`` of the same
  dataset directory (Spark's discovery included): full read (``noop`` sink), ``count()``,
  ``sum(value)``, partition filter (``category = 'cat_3'``, ``sum(value)``);
- data source: ``format("parquetry")`` full read (``noop`` sink) vs the same native read;
- indexed lookup: one id of a 1,000-partition dataset, ``read_dataset`` with a secondary
  index vs ``spark.read.parquet(root).filter(id = x)`` (discovery + filter).

Usage: ``.venv/bin/python benchmarks/bench_spark.py [--rows N] [--rounds R] [--quick]``;
``PARQUETRY_BENCH_QUICK=1`` is ``--quick`` (200k rows, 1 round: a smoke run, not a measurement).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--partitions", type=int, default=16)
    parser.add_argument("--lookup-rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="200k rows, 1 round (smoke)")
    args = parser.parse_args()
    if args.quick or os.environ.get("PARQUETRY_BENCH_QUICK"):
        args.rows, args.lookup_rows, args.rounds = 200_000, 100_000, 1

    from pyspark.sql import functions as F

    from parquetry.spark import local_session, read_dataset

    spark = local_session(driver_memory="4g")
    root = Path(tempfile.mkdtemp(prefix="parquetry-bench-spark-"))
    lake = root.as_uri()
    times: dict[str, tuple[list[float], list[float]]] = {}

    def record(case: str, ours: float, theirs: float) -> None:
        times.setdefault(case, ([], []))
        times[case][0].append(ours)
        times[case][1].append(theirs)

    def noop(df: Any) -> None:
        df.write.format("noop").mode("overwrite").save()

    try:
        df = spark.range(0, args.rows, numPartitions=2).select(
            "id",
            F.rand(seed=1).alias("value"),
            F.concat(F.lit("cat_"), (F.col("id") % args.partitions).cast("string")).alias(
                "category"
            ),
            F.timestamp_seconds(F.lit(1_700_000_000) + F.col("id")).alias("ts"),
        )
        df.cache().count()
        print(f"rows={args.rows:,} partitions={args.partitions} rounds={args.rounds}")
        print(f"load(1m) at start: {os.getloadavg()[0]:.1f}")

        reads: dict[str, tuple[Callable[[Any], Any], ...]] = {
            "full read (noop sink)": (noop,),
            "count()": (lambda d: d.count(),),
            "sum(one column)": (lambda d: d.agg(F.sum("value")).collect(),),
            "partition filter, sum(one column)": (
                lambda d: d.filter(F.col("category") == "cat_3").agg(F.sum("value")).collect(),
            ),
        }
        for rnd in range(args.rounds + 1):  # round 0 warms up
            name = f"w{rnd}-{uuid.uuid4().hex[:6]}"
            table_dir = str(root / name / "table")
            native_dir = str(root / f"native-{name}")
            t_ours = _timed(
                lambda name=name: df.write.format("parquetry").option("store", lake)
                .option("dataset", name).option("partition_on", "category")
                .mode("append").save()
            )  # fmt: skip
            t_native = _timed(
                lambda d=native_dir: df.write.partitionBy("category").mode("overwrite").parquet(d)
            )
            line = [f"round {rnd}: write {t_ours:.2f}/{t_native:.2f}"]
            if rnd:
                record("write, partitioned by category", t_ours, t_native)
            for case, (action,) in reads.items():
                ours = _timed(lambda a=action, n=name: a(read_dataset(spark, lake, n)))
                theirs = _timed(lambda a=action, d=table_dir: a(spark.read.parquet(d)))
                line.append(f"{case} {ours:.2f}/{theirs:.2f}")
                if rnd:
                    record(f"hand-off: {case}", ours, theirs)
            ours = _timed(
                lambda n=name: noop(
                    spark.read.format("parquetry").option("store", lake).option("dataset", n).load()
                )
            )
            theirs = _timed(lambda d=table_dir: noop(spark.read.parquet(d)))
            line.append(f"source full {ours:.2f}/{theirs:.2f}")
            if rnd:
                record('format("parquetry"): full read (noop sink)', ours, theirs)
            print("  ".join(line), flush=True)

        lookup_df = spark.range(0, args.lookup_rows, numPartitions=2).select(
            "id", (F.col("id") % 1000).alias("part"), F.rand(seed=2).alias("value")
        )
        lookup_df.write.format("parquetry").option("store", lake).option("dataset", "lookup") \
            .option("partition_on", "part").option("secondary_indices", "id") \
            .mode("append").save()  # fmt: skip
        lookup_df.write.partitionBy("part").mode("overwrite").parquet(str(root / "native-lookup"))
        for rnd in range(args.rounds + 1):
            target = 7_919 * (rnd + 1) % args.lookup_rows
            t_ours = _timed(
                lambda target=target: read_dataset(
                    spark, lake, "lookup", predicates=[[("id", "==", target)]]
                ).collect()
            )
            t_native = _timed(
                lambda target=target: spark.read.parquet(str(root / "native-lookup"))
                .filter(F.col("id") == target).collect()
            )  # fmt: skip
            print(f"lookup round {rnd}: {t_ours:.2f}/{t_native:.2f}", flush=True)
            if rnd:
                record("lookup of one id, 1,000 partitions (indexed)", t_ours, t_native)

        goals = {
            "write, partitioned by category": "<= 1.0",
            'format("parquetry"): full read (noop sink)': "<= 1.3",
            "lookup of one id, 1,000 partitions (indexed)": ">= 20x faster",
        }
        print("\n| case | parquetry (s) | native (s) | ratio | goal |")
        print("|---|---|---|---|---|")
        for case, (ours_t, theirs_t) in times.items():
            ratio = statistics.median(a / b for a, b in zip(ours_t, theirs_t, strict=True))
            goal = goals.get(case, "<= 1.1")
            shown = f"{1 / ratio:.1f}x faster" if "faster" in goal else f"{ratio:.2f}"
            print(
                f"| {case} | {statistics.median(ours_t):.2f} | "
                f"{statistics.median(theirs_t):.2f} | {shown} | {goal} |"
            )
        print(f"load(1m) at end: {os.getloadavg()[0]:.1f}")
    finally:
        spark.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
