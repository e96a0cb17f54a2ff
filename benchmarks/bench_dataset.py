"""Kartothek-format datasets: indexed point lookups, appends and writes vs the baselines.

Dataset: N rows in P partitions on two keys (region x day), a secondary index on an
unsorted high-cardinality ``customer`` column. In the same run:

- point lookup ``customer == x``: parquetry open + plan (time, store requests) and end to
  end, vs ``pyarrow.dataset`` over the same Hive-partitioned files (discovery + filter) and
  vs ``deltalake`` reading an equivalent Delta table with the same filter;
- append commit latency vs dataset size (must grow with metadata size only);
- write throughput: ``Dataset.create`` vs ``pyarrow.dataset.write_dataset``, same
  partitioning and codec.

Usage: ``.venv/bin/python benchmarks/bench_dataset.py [--quick] [--rows N] [--dir PATH]``.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads

from parquetry.dataset import Dataset, write_files
from parquetry.store import LocalStore
from parquetry.testing import CountingStore


def make_table(rows: int, regions: int, days: int, seed: int = 7) -> pa.Table:
    rng = np.random.default_rng(seed)
    region = rng.integers(0, regions, rows)
    return pa.table(
        {
            "region": pa.array([f"r{i:03d}" for i in range(regions)]).take(pa.array(region)),
            "day": pa.array(rng.integers(0, days, rows), pa.int32()),
            "customer": pa.array(rng.integers(0, max(rows // 5, 10), rows), pa.int64()),
            "amount": pa.array(rng.random(rows) * 100),
            "quantity": pa.array(rng.integers(1, 10, rows), pa.int32()),
        }
    )


def timed(fn: Callable[[], Any], repeat: int = 1) -> tuple[float, Any]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def bench_write(table: pa.Table, root: Path) -> dict[str, float]:
    store = LocalStore(root / "pq", fsync=False)
    t_ours, _ = timed(
        lambda: Dataset.create(
            store, "bench", table, partition_on=["region", "day"], secondary_indices=["customer"]
        )
    )
    t_files, _ = timed(lambda: write_files(store, "plain", table, partition_on=["region", "day"]))
    opts = pads.ParquetFileFormat().make_write_options(compression="zstd", compression_level=1)
    t_pa, _ = timed(
        lambda: pads.write_dataset(
            table,
            root / "hive",
            format="parquet",
            partitioning=["region", "day"],
            partitioning_flavor="hive",
            file_options=opts,
            max_partitions=1_000_000,
            existing_data_behavior="overwrite_or_ignore",
            # one open writer per partition (the default 1,024 thrashes: 10x more files)
            max_open_files=15_000,
            # buffer a partition's rows into one row group, like Dataset.create writes
            min_rows_per_group=1_000_000,
        )
    )
    return {"create": t_ours, "write_files": t_files, "pyarrow": t_pa}


def bench_delta_write(table: pa.Table, root: Path) -> float:
    from deltalake import write_deltalake

    t, _ = timed(
        lambda: write_deltalake(str(root / "delta"), table, partition_by=["region", "day"])
    )
    return t


def bench_lookup(table: pa.Table, root: Path, with_delta: bool) -> dict[str, Any]:
    customers = table["customer"].take(pa.array([11, 777, 4242 % table.num_rows])).to_pylist()
    store = LocalStore(root / "pq")
    plan_times, plan_requests, ours = [], [], []
    for c in customers:
        counting = CountingStore(store)
        t0 = time.perf_counter()
        ds = Dataset.open(counting, "bench")
        plan = ds.plan([[("customer", "==", c)]])
        plan_times.append(time.perf_counter() - t0)
        plan_requests.append(plan.requests)
        got = ds.read(predicates=[[("customer", "==", c)]])
        ours.append(time.perf_counter() - t0)
        want = table.filter(pc.equal(table["customer"], c)).num_rows
        assert got.num_rows == want, (c, got.num_rows, want)
    out: dict[str, Any] = {
        "plan_ms": statistics.median(plan_times) * 1e3,
        "plan_requests": max(plan_requests),
        "ours_s": statistics.median(ours),
    }
    pa_times = []
    for c in customers[:2]:
        t, got = timed(
            lambda c=c: pads.dataset(root / "hive", format="parquet", partitioning="hive").to_table(
                filter=pc.field("customer") == c
            )
        )
        pa_times.append(t)
    out["pyarrow_s"] = statistics.median(pa_times)
    if with_delta:
        from deltalake import DeltaTable

        d_times = []
        for c in customers[:2]:
            t, got = timed(
                lambda c=c: (
                    DeltaTable(str(root / "delta"))
                    .to_pyarrow_dataset()
                    .to_table(filter=pc.field("customer") == c)
                )
            )
            d_times.append(t)
        out["delta_s"] = statistics.median(d_times)
    return out


def bench_append(
    root: Path, shapes: list[tuple[int, int]], rows_per_partition: int
) -> list[tuple[int, int, float]]:
    """(partitions, pointer bytes, median ms) of a 100-row append vs dataset size."""
    store = LocalStore(root / "appends", fsync=False)
    out = []
    for regions, days in shapes:
        uuid = f"app{regions * days}"
        table = make_table(regions * days * rows_per_partition, regions, days)
        ds = Dataset.create(
            store, uuid, table, partition_on=["region", "day"], secondary_indices=["customer"]
        )
        small = table.filter(pc.equal(table["day"], 0)).filter(
            pc.equal(table.filter(pc.equal(table["day"], 0))["region"], "r000")
        )
        small = pa.concat_tables([small] * (100 // max(small.num_rows, 1) + 1)).slice(0, 100)
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            ds = ds.append(small)
            times.append(time.perf_counter() - t0)
        size = len(store.get(f"{uuid}.by-dataset-metadata.json"))
        out.append((len(ds.document.partitions), size, statistics.median(times) * 1e3))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="1M rows, 1,000 partitions")
    parser.add_argument("--rows", type=int, default=None)
    parser.add_argument("--no-delta", action="store_true")
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()
    rows = args.rows or (1_000_000 if args.quick else 10_000_000)
    regions, days = (20, 50) if args.quick else (100, 100)
    root = Path(tempfile.mkdtemp(prefix="bench-dataset-", dir=args.dir))
    try:
        table = make_table(rows, regions, days)
        print(f"{rows:,} rows, {regions * days:,} partitions (region x day), index on customer")
        w = bench_write(table, root)
        print(
            f"write: Dataset.create {w['create']:.2f}s (incl. index), write_files "
            f"{w['write_files']:.2f}s, pyarrow write_dataset {w['pyarrow']:.2f}s -> "
            f"ratio {w['write_files'] / w['pyarrow']:.2f}x (files), "
            f"{w['create'] / w['pyarrow']:.2f}x (create+index)"
        )
        if not args.no_delta:
            print(f"delta write_deltalake: {bench_delta_write(table, root):.2f}s")
        r = bench_lookup(table, root, not args.no_delta)
        print(
            f"point lookup: plan {r['plan_ms']:.1f} ms, {r['plan_requests']} store requests; "
            f"end to end {r['ours_s'] * 1e3:.1f} ms"
        )
        print(
            f"  pyarrow.dataset hive + filter: {r['pyarrow_s'] * 1e3:.0f} ms -> "
            f"{r['pyarrow_s'] / r['ours_s']:.0f}x faster"
        )
        if "delta_s" in r:
            print(
                f"  deltalake + filter: {r['delta_s'] * 1e3:.0f} ms -> "
                f"{r['delta_s'] / r['ours_s']:.0f}x faster"
            )
        shapes = [(10, 10), (20, 50)] if args.quick else [(10, 10), (20, 50), (100, 100)]
        for parts, size, ms in bench_append(root, shapes, rows // (regions * days)):
            print(
                f"append 100 rows to {parts:,} partitions (pointer {size / 1e6:.1f} MB): "
                f"{ms:.0f} ms"
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
