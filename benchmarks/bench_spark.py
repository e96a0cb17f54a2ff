"""Spark: parquetry against Spark's native Parquet, same session, same data, cases interleaved.

Data: ``id long, value double, category string x 16, ts timestamp`` (cached), 2M rows.
Ratio = median of per-round ratios parquetry / native (--warmup rounds, then --rounds), with
the spread (lowest-highest round). Within a round the two sides of a case run one after the
other, the side going first alternating from round to round (so neither always gets the
warmer caches). Besides wall time, each case reports the CPU seconds of Spark's process tree
(the JVM plus its Python workers; Linux only): unlike wall time, CPU does not grow when other
processes compete for the cores, so it separates "more work" from "a busier machine". It is
approximate: a worker that exits during a case takes its CPU along unless its parent reaps
it (a low or even negative value), and a case that starts Python workers anew (Spark stops
workers idle for about a minute, so rounds longer than that under load) counts their start.

- write: ``format("parquetry")`` partitioned by category vs ``partitionBy("category").parquet``;
- native hand-off (``read_dataset``, planning included) vs ``spark.read.parquet`` of the same
  dataset directory (Spark's discovery included): full read (``noop`` sink), ``count()``,
  ``sum(value)``, partition filter (``category = 'cat_3'``, ``sum(value)``);
- data source: ``format("parquetry")`` full read (``noop`` sink) vs the same native read;
- indexed lookup: one id of a 1,000-partition dataset, ``read_dataset`` with a secondary
  index vs ``spark.read.parquet(root).filter(id = x)`` (discovery + filter).

Usage: ``.venv/bin/python benchmarks/bench_spark.py [--rows N] [--rounds R] [--warmup W]
[--reads-only] [--cases all|hand-off|source] [--quick]``; ``--reads-only`` writes each
dataset once and skips the write and lookup cases, ``--cases`` keeps only the hand-off's or
the data source's reads (more read rounds in the same time, and short rounds: Spark stops
Python workers idle for a minute, so long rounds would time the data source's worker start);
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


def _children(pid: int) -> list[int]:
    found: list[int] = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children", encoding="ascii") as f:
                found += [int(x) for x in f.read().split()]
    except OSError:
        pass
    return found


def tree_cpu() -> float:
    """CPU seconds (user + system, incl. reaped children) of every process this one started:
    the Spark JVM and its Python workers. 0.0 where /proc is missing."""
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    total, stack = 0.0, _children(os.getpid())
    while stack:
        pid = stack.pop()
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += sum(int(v) for v in fields[11:15]) / tick
        except (OSError, ValueError, IndexError):
            continue
        stack += _children(pid)
    return total


def _measured(fn: Callable[[], Any]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of Spark's process tree) of ``fn()``."""
    cpu = tree_cpu()
    wall = _timed(fn)
    return wall, tree_cpu() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--partitions", type=int, default=16)
    parser.add_argument("--lookup-rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--reads-only", action="store_true", help="write once; no lookup")
    parser.add_argument(
        "--cases",
        choices=("all", "hand-off", "source"),
        default="all",
        help="read cases to run: the native hand-off's, the data source's, or both",
    )
    parser.add_argument("--quick", action="store_true", help="200k rows, 1 round (smoke)")
    args = parser.parse_args()
    if args.quick or os.environ.get("PARQUETRY_BENCH_QUICK"):
        args.rows, args.lookup_rows, args.rounds, args.warmup = 200_000, 100_000, 1, 1

    from pyspark.sql import functions as F

    from parquetry.spark import local_session, read_dataset

    spark = local_session(driver_memory="4g")
    root = Path(tempfile.mkdtemp(prefix="parquetry-bench-spark-"))
    lake = root.as_uri()
    # case -> per measured round: (ours wall, native wall, ours cpu, native cpu)
    times: dict[str, list[tuple[float, float, float, float]]] = {}
    loads: list[float] = []

    def pair(case: str, rnd: int, ours: Callable[[], Any], native: Callable[[], Any]) -> str:
        """Both sides of a case, the first side alternating by round; recorded after warm-up."""
        if rnd % 2:
            theirs_m, ours_m = _measured(native), _measured(ours)
        else:
            ours_m, theirs_m = _measured(ours), _measured(native)
        if rnd >= args.warmup:
            times.setdefault(case, []).append((ours_m[0], theirs_m[0], ours_m[1], theirs_m[1]))
        return f"{ours_m[0]:.2f}/{theirs_m[0]:.2f}"

    def noop(df: Any) -> None:
        df.write.format("noop").mode("overwrite").save()

    def write_ours(name: str) -> None:
        df.write.format("parquetry").option("store", lake).option("dataset", name) \
            .option("partition_on", "category").mode("append").save()  # fmt: skip

    def write_native(directory: str) -> None:
        df.write.partitionBy("category").mode("overwrite").parquet(directory)

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
        print(
            f"rows={args.rows:,} partitions={args.partitions} warm-up={args.warmup} "
            f"rounds={args.rounds} reads-only={args.reads_only}"
        )
        print(f"load(1m) at start: {os.getloadavg()[0]:.1f}")

        reads: dict[str, Callable[[Any], Any]] = {
            "full read (noop sink)": noop,
            "count()": lambda d: d.count(),
            "sum(one column)": lambda d: d.agg(F.sum("value")).collect(),
            "partition filter, sum(one column)": (
                lambda d: d.filter(F.col("category") == "cat_3").agg(F.sum("value")).collect()
            ),
        }
        if args.reads_only:
            write_ours("once")
        for rnd in range(args.warmup + args.rounds):
            name = "once" if args.reads_only else f"w{rnd}-{uuid.uuid4().hex[:6]}"
            table_dir = str(root / name / "table")
            line = [f"round {rnd}{' (warm-up)' if rnd < args.warmup else ''}:"]
            if not args.reads_only:
                native_dir = str(root / f"native-{name}")
                shown = pair(
                    "write, partitioned by category",
                    rnd,
                    lambda n=name: write_ours(n),
                    lambda d=native_dir: write_native(d),
                )
                line.append(f"write {shown}")
            for case, action in reads.items() if args.cases != "source" else ():
                shown = pair(
                    f"hand-off: {case}",
                    rnd,
                    lambda a=action, n=name: a(read_dataset(spark, lake, n)),
                    lambda a=action, d=table_dir: a(spark.read.parquet(d)),
                )
                line.append(f"{case} {shown}")
            if args.cases == "hand-off":
                loads.append(os.getloadavg()[0])
                print("  ".join(line) + f"  load {loads[-1]:.1f}", flush=True)
                continue
            shown = pair(
                'format("parquetry"): full read (noop sink)',
                rnd,
                lambda n=name: noop(
                    spark.read.format("parquetry").option("store", lake).option("dataset", n).load()
                ),
                lambda d=table_dir: noop(spark.read.parquet(d)),
            )
            line.append(f"source full {shown}")
            loads.append(os.getloadavg()[0])
            print("  ".join(line) + f"  load {loads[-1]:.1f}", flush=True)

        if not args.reads_only:
            lookup_df = spark.range(0, args.lookup_rows, numPartitions=2).select(
                "id", (F.col("id") % 1000).alias("part"), F.rand(seed=2).alias("value")
            )
            lookup_df.write.format("parquetry").option("store", lake).option("dataset", "lookup") \
                .option("partition_on", "part").option("secondary_indices", "id") \
                .mode("append").save()  # fmt: skip
            lookup_df.write.partitionBy("part").mode("overwrite").parquet(
                str(root / "native-lookup")
            )
            for rnd in range(args.warmup + args.rounds):
                target = 7_919 * (rnd + 1) % args.lookup_rows
                shown = pair(
                    "lookup of one id, 1,000 partitions (indexed)",
                    rnd,
                    lambda target=target: read_dataset(
                        spark, lake, "lookup", predicates=[[("id", "==", target)]]
                    ).collect(),
                    lambda target=target: spark.read.parquet(str(root / "native-lookup"))
                    .filter(F.col("id") == target).collect(),
                )  # fmt: skip
                print(f"lookup round {rnd}: {shown}", flush=True)
        _report(times)
        spread = f"{min(loads):.1f}-{max(loads):.1f}" if loads else "-"
        print(f"load(1m) at end: {os.getloadavg()[0]:.1f}; after each round: {spread}")
    finally:
        spark.stop()
        shutil.rmtree(root, ignore_errors=True)


_GOALS = {
    "write, partitioned by category": "<= 1.0",
    'format("parquetry"): full read (noop sink)': "<= 1.3",
    "lookup of one id, 1,000 partitions (indexed)": ">= 20x faster",
}


def _report(times: dict[str, list[tuple[float, float, float, float]]]) -> None:
    print(
        "\n| case | parquetry / native (s), medians | ratio (median) | lowest-highest round "
        "| CPU s parquetry / native | goal |"
    )
    print("|---|---|---|---|---|---|")
    for case, rounds in times.items():
        ratios = sorted(o / n for o, n, _, _ in rounds)
        ratio = statistics.median(ratios)
        goal = _GOALS.get(case, "<= 1.1")
        faster = "faster" in goal
        shown = f"{1 / ratio:.1f}x faster" if faster else f"{ratio:.2f}"
        spread = (
            f"{1 / ratios[-1]:.1f}-{1 / ratios[0]:.1f}x" if faster
            else f"{ratios[0]:.2f}-{ratios[-1]:.2f}"
        )  # fmt: skip
        ours, theirs, ours_cpu, theirs_cpu = (
            statistics.median(r[i] for r in rounds) for i in range(4)
        )
        print(
            f"| {case} | {ours:.2f} / {theirs:.2f} | {shown} | {spread} "
            f"| {ours_cpu:.2f} / {theirs_cpu:.2f} | {goal} |"
        )


if __name__ == "__main__":
    main()
