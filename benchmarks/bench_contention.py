"""Commit contention: 16 concurrent appenders on one kartothek-format dataset.

Each writer is a separate process (no shared GIL, like independent jobs) that appends one
row at a time, ``Dataset.open(...).append(...)``, to a dataset partitioned on ``p`` with a
secondary index on ``k`` (so every commit also rewrites an index file, the realistic case).
All writers start at one barrier. Reported per store (local disk, S3 on a moto server
started here):

- throughput: commits per second over the whole run (first start to last finish);
- commit latency p50 / p99 / max: one ``open + append`` call, retries included;
- failures (must be 0: losing races alone never fails an append) and lost rows (must be 0).

Then the issue 13 targets per store with PASS/MISS: 16 writers >= 15 commits/s, p99
latency < 2 s, 0 failures, 0 lost rows (the throughput and latency targets are the issue's
for local disk; S3 on moto is measured against the same numbers and reported as such).

Usage: ``.venv/bin/python benchmarks/bench_contention.py [--quick] [--writers N]
[--appends K] [--only local|s3]``.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa

UUID = "contention"

# Issue 13 targets (16 concurrent writers).
TARGET_WRITERS = 16
TARGET_COMMITS_PER_S = 15.0
TARGET_P99_S = 2.0


def _row(value: int) -> pa.Table:
    return pa.table({"p": [value % 3], "k": [value % 13], "w": [value]})


def _open(spec: tuple[Any, ...]) -> Any:
    from parquetry.store import LocalStore, open_store

    if spec[0] == "local":
        return LocalStore(spec[1], fsync=False)
    return open_store(spec[1], **spec[2])


def _kind(key: str) -> str:
    """The class of object a request touched (for --profile)."""
    for part, name in (
        ("/_versions/incarnation-", "incarnation"),
        ("/_versions/", "entry"),
        ("/_pending/", "pending"),
        ("/_head.json", "head"),
        ("/_turn.json", "turn"),
        ("/_intents/", "intent"),
        ("/_checkpoints/", "checkpoint"),
        ("/_segments/", "segment"),
        ("/indices/", "pointer index"),
        ("by-dataset-metadata", "pointer"),
    ):
        if part in key:
            return name
    return "data" if key.endswith(".parquet") else "other"


def _profiled(store: Any) -> tuple[Any, dict[str, float]]:
    """``store`` counting requests, and the commit loop's sleeps measured (``--profile``)."""
    import importlib

    from parquetry.testing.stores import CountingStore

    counting = CountingStore(store)
    slept = {"sleep_s": 0.0, "sleeps": 0.0}
    # The waits of the commit loop: turns' sleep and the random backoff of writers that do
    # not take turns (older code: only ``commit._backoff``).
    hooks = [("parquetry.dataset.turns", "sleep"), ("parquetry.dataset.commit", "_backoff")]
    for module_name, name in hooks:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        wait = getattr(module, name)

        def timed(*args: Any, _wait: Any = wait, **kwargs: Any) -> None:
            t0 = time.perf_counter()
            _wait(*args, **kwargs)
            slept["sleep_s"] += time.perf_counter() - t0
            slept["sleeps"] += 1

        setattr(module, name, timed)
    return counting, slept


def _writer(
    spec: tuple[Any, ...], w: int, appends: int, barrier: Any, out: Any, profile: bool = False
) -> None:
    from parquetry.dataset import Dataset
    from parquetry.errors import ParquetryError

    store = _open(spec)
    slept: dict[str, float] = {}
    if profile:
        store, slept = _profiled(store)
    latencies: list[float] = []
    failures: list[str] = []
    barrier.wait()
    start = time.time()
    cpu0 = time.process_time()
    for i in range(appends):
        t0 = time.perf_counter()
        try:
            Dataset.open(store, UUID).append(_row(w * 1000 + i))
        except ParquetryError as exc:
            failures.append(f"{type(exc).__name__}: {exc}")
            continue
        latencies.append(time.perf_counter() - t0)
    counts: dict[str, float] = dict(slept)
    for kind, key in getattr(store, "log", ()):
        name = f"{kind} {_kind(key)}"
        counts[name] = counts.get(name, 0) + 1
    out.put((w, start, time.time(), latencies, failures, counts, time.process_time() - cpu0))


def run(spec: tuple[Any, ...], writers: int, appends: int, profile: bool = False) -> dict[str, Any]:
    from parquetry.dataset import Dataset

    store = _open(spec)
    Dataset.create(store, UUID, _row(-1), partition_on=["p"], secondary_indices=["k"])
    # New datasets are format 2 (entries + head): the head is what tells.
    assert store.exists(f"{UUID}/_head.json"), "the benchmark expects a format-2 dataset"
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(writers)
    out = ctx.Queue()
    procs = [
        ctx.Process(target=_writer, args=(spec, w, appends, barrier, out, profile))
        for w in range(writers)
    ]
    for p in procs:
        p.start()
    results = [out.get(timeout=1800) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    # CPU seconds the writers used appending (user + system, without process start and
    # imports): what a commit costs whatever the load.
    cpu = sum(r[6] for r in results)
    starts = [r[1] for r in results]
    ends = [r[2] for r in results]
    latencies = sorted(x for r in results for x in r[3])
    failures = [f for r in results for f in r[4]]
    final = Dataset.open(store, UUID)
    rows = sorted(final.read()["w"].to_pylist())
    acknowledged = len(latencies)
    intended = {-1} | {r[0] * 1000 + i for r in results for i in range(appends)}
    # A failed append is legitimately missing; anything else missing is lost work.
    lost = len(intended - set(rows)) - len(failures)
    missing = sorted(intended - set(rows))
    profiled: dict[str, float] = {}
    for r in results:
        for name, n in r[5].items():
            profiled[name] = profiled.get(name, 0) + n
    wall = max(ends) - min(starts)
    return {
        "commits": acknowledged,
        "wall": wall,
        "throughput": acknowledged / wall,
        "p50": statistics.median(latencies),
        "p99": latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))],
        "max": latencies[-1],
        "failures": len(failures),
        "failure_example": failures[0] if failures else "",
        "lost": max(lost, 0),
        "versions": final.version,
        "cpu_per_commit": cpu / max(acknowledged, 1),
        # Diagnostics for a loss: the rows missing (writer * 1000 + append index) and
        # whether a version is missing too (versions = acknowledged commits if none is).
        "missing": missing[:20],
        # --profile: requests by kind and object, and sleeps, per acknowledged append.
        "profile": {k: v / max(acknowledged, 1) for k, v in sorted(profiled.items())},
    }


def targets(r: dict[str, Any]) -> list[tuple[str, str, str, bool]]:
    """(measurement, value, target, met) for one store's run."""
    return [
        (
            "throughput",
            f"{r['throughput']:.1f} commits/s",
            f">= {TARGET_COMMITS_PER_S:g}",
            r["throughput"] >= TARGET_COMMITS_PER_S,
        ),
        (
            "commit latency p99",
            f"{r['p99']:.2f} s",
            f"< {TARGET_P99_S:g} s",
            r["p99"] < TARGET_P99_S,
        ),
        ("failed appends", str(r["failures"]), "0", r["failures"] == 0),
        ("lost rows", str(r["lost"]), "0", r["lost"] == 0),
    ]


def print_targets(rows: list[tuple[str, dict[str, Any]]], writers: int) -> None:
    note = "" if writers == TARGET_WRITERS else f" (run with {writers} writers, not 16)"
    print(f"\nissue 13 targets, {TARGET_WRITERS} writers{note}:")
    print(f"  {'store':<12} {'measurement':<20} {'value':>16} {'target':>10}  result")
    for name, r in rows:
        for what, value, target, ok in targets(r):
            print(f"  {name:<12} {what:<20} {value:>16} {target:>10}  {'PASS' if ok else 'MISS'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="4 appends per writer")
    parser.add_argument("--writers", type=int, default=16)
    parser.add_argument("--appends", type=int, default=10)
    parser.add_argument("--only", choices=["local", "s3"])
    parser.add_argument(
        "--profile", action="store_true", help="requests and sleeps per append (by object)"
    )
    args = parser.parse_args()
    appends = 4 if args.quick else args.appends
    rows = []
    if args.only in (None, "local"):
        with tempfile.TemporaryDirectory() as tmp:
            rows.append(
                (
                    "local disk",
                    run(("local", str(Path(tmp) / "s")), args.writers, appends, args.profile),
                )
            )
    if args.only in (None, "s3"):
        from parquetry.testing.moto import start_moto_server

        server = start_moto_server()
        try:
            rows.append(
                (
                    "S3 (moto)",
                    run(
                        ("s3", server.url(), server.options()), args.writers, appends, args.profile
                    ),
                )
            )
        finally:
            server.stop()
    print(f"\n{args.writers} writers x {appends} appends (one row each, partitioned + indexed)")
    print(f"load average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print(
        f"{'store':<12} {'commits':>7} {'commits/s':>10} {'p50 s':>7} {'p99 s':>7} "
        f"{'max s':>7} {'failed':>6} {'lost':>5} {'CPU s/commit':>12}"
    )
    for name, r in rows:
        print(
            f"{name:<12} {r['commits']:>7} {r['throughput']:>10.1f} {r['p50']:>7.2f} "
            f"{r['p99']:>7.2f} {r['max']:>7.2f} {r['failures']:>6} {r['lost']:>5} "
            f"{r['cpu_per_commit']:>12.3f}"
        )
        if r["failure_example"]:
            print(f"  first failure: {r['failure_example']}")
        if r["lost"] or r["versions"] != r["commits"]:
            print(
                f"  newest version {r['versions']} after {r['commits']} acknowledged appends "
                f"on version 0; rows missing: {r['missing']}"
            )
    if args.profile:
        for name, r in rows:
            print(f"\nper acknowledged append, {name}:")
            for what, n in r["profile"].items():
                print(f"  {what:<24} {n:8.2f}")
    print_targets(rows, args.writers)


if __name__ == "__main__":
    main()
