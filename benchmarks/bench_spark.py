"""Spark: parquetry's data source against Spark's native Parquet, same session, same data.

Cases (medians of --rounds, cases interleaved per round, ratio = parquetry / native):
- write: ``id long, value double, category string x 100, ts timestamp`` partitioned by
  category, through ``format("parquetry")`` vs ``df.write.partitionBy("category").parquet``;
- full read: every column materialised with the ``noop`` sink;
- indexed lookup: one id on a 1,000-partition dataset, ``read_dataset`` with a secondary
  index vs ``spark.read.parquet(root).filter(id = x)`` (partition discovery + filter).

Usage: ``.venv/bin/python benchmarks/bench_spark.py [--rows N] [--quick] [--rounds R]``.
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


def _median_ratio(ours: list[float], theirs: list[float]) -> float:
    return statistics.median(a / b for a, b in zip(ours, theirs, strict=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--lookup-rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="500k rows, 2 rounds")
    args = parser.parse_args()
    if args.quick:
        args.rows, args.lookup_rows, args.rounds = 500_000, 200_000, 2

    from pyspark.sql import functions as F

    from parquetry.spark import local_session, read_dataset

    spark = local_session(driver_memory="4g")
    root = Path(tempfile.mkdtemp(prefix="parquetry-bench-spark-"))
    lake = root.as_uri()
    try:
        df = spark.range(0, args.rows, numPartitions=2).select(
            "id",
            F.rand(seed=1).alias("value"),
            F.concat(F.lit("cat_"), (F.col("id") % 100).cast("string")).alias("category"),
            F.timestamp_seconds(F.lit(1_700_000_000) + F.col("id")).alias("ts"),
        )
        df.cache().count()
        load = os.getloadavg()[0]
        print(f"rows={args.rows:,} rounds={args.rounds} load(1m)={load:.1f}")

        writes: dict[str, list[float]] = {"parquetry": [], "native": []}
        reads: dict[str, list[float]] = {"parquetry": [], "native": []}
        for rnd in range(args.rounds + 1):  # round 0 warms up
            name = f"w{rnd}-{uuid.uuid4().hex[:6]}"
            t_ours = _timed(
                lambda name=name: df.write.format("parquetry").option("store", lake)
                .option("dataset", name).option("partition_on", "category")
                .mode("append").save()
            )  # fmt: skip
            t_native = _timed(
                lambda name=name: df.write.partitionBy("category").mode("overwrite")
                .parquet(str(root / f"native-{name}"))
            )  # fmt: skip
            r_ours = _timed(
                lambda name=name: spark.read.format("parquetry").option("store", lake)
                .option("dataset", name).load().write.format("noop").mode("overwrite").save()
            )  # fmt: skip
            r_native = _timed(
                lambda name=name: spark.read.parquet(str(root / f"native-{name}"))
                .write.format("noop").mode("overwrite").save()
            )  # fmt: skip
            print(
                f"round {rnd}: write {t_ours:.2f}/{t_native:.2f}  read {r_ours:.2f}/{r_native:.2f}"
            )
            if rnd:
                writes["parquetry"].append(t_ours)
                writes["native"].append(t_native)
                reads["parquetry"].append(r_ours)
                reads["native"].append(r_native)

        lookup_df = spark.range(0, args.lookup_rows, numPartitions=2).select(
            "id", (F.col("id") % 1000).alias("part"), F.rand(seed=2).alias("value")
        )
        lookup_df.write.format("parquetry").option("store", lake).option("dataset", "lookup") \
            .option("partition_on", "part").option("secondary_indices", "id") \
            .mode("append").save()  # fmt: skip
        lookup_df.write.partitionBy("part").mode("overwrite").parquet(str(root / "native-lookup"))
        lookups: dict[str, list[float]] = {"parquetry": [], "native": []}
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
            print(f"lookup round {rnd}: {t_ours:.2f}/{t_native:.2f}")
            if rnd:
                lookups["parquetry"].append(t_ours)
                lookups["native"].append(t_native)

        print("\n| case | parquetry (s) | native (s) | ratio | goal |")
        print("|---|---|---|---|---|")
        for case, data, goal in (
            ("write, partitioned by category", writes, "<= 1.3"),
            ("full read (noop sink)", reads, "<= 1.3"),
            ("lookup of one id, 1,000 partitions", lookups, ">= 5x faster"),
        ):
            ours, theirs = statistics.median(data["parquetry"]), statistics.median(data["native"])
            ratio = _median_ratio(data["parquetry"], data["native"])
            shown = (
                f"{ratio:.2f}" if "read" in case or "write" in case else f"{1 / ratio:.1f}x faster"
            )
            print(f"| {case} | {ours:.2f} | {theirs:.2f} | {shown} | {goal} |")
        print(f"load(1m) at end: {os.getloadavg()[0]:.1f}")
    finally:
        spark.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
