"""Table operations (issue 14) against delta-rs (``deltalake``), same data, same run.

Upsert (MERGE by key) of 10,000 rows into 10M rows in 1,000 partitions, the key indexed on
the parquetry side (``--quick``: 1,000 rows into 200,000 rows in 100 partitions):

- data: ``p`` (int64, the partition), ``k`` (int64 key: a seeded random permutation of
  ``range(rows)``, so every file's keys span the whole range and min/max statistics cannot
  prune, only an index can), ``v`` (float64), ``s`` (string from a small vocabulary);
  ``rows / partitions`` rows per partition, one file per partition on both sides (written
  by one streamed ``Dataset.create`` and one ``write_deltalake``);
- the upsert source: half existing keys (updated: new ``v`` and ``s``, same ``p``), half new
  keys (inserted), two variants: **recent** (the existing keys lie in the last 1 % of the
  partitions, as the updates of a change feed usually do) and **spread** (uniform over all
  partitions: every file is rewritten on both sides);
- parquetry: ``Dataset.open`` + ``upsert(src, on=["k"])``; delta-rs: ``DeltaTable(path)``
  + ``merge(predicate="t.k = s.k").when_matched_update_all().when_not_matched_insert_all()``.

Each side runs in its own subprocess on its own copy of the table (data files hard-linked)
and reports the wall time of open + operation, its CPU time (``time.process_time``: every
thread of the process, Rust's included; the figure to compare on a loaded machine) and its
peak RSS
(``resource.getrusage(RUSAGE_SELF).ru_maxrss``; this orchestrating process imports neither
pyarrow nor the libraries, so the value a child inherits across ``execve`` is small; VmHWM
is reported too). The result is checked afterwards (row count, one updated and one inserted
key), outside the measurement.

Other cases come from ``benchmarks/ops_cases_*.py`` modules (delete, update, compaction),
each exposing ``case(root_dir: Path, quick: bool) -> dict``; they run after the upsert.

Usage::

    .venv/bin/python benchmarks/bench_ops.py [--quick] [--cases upsert,compact,...]
        [--dir PATH] [--keep] [--json OUT]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
UUID = "ops"
VOCAB = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"]
FULL = {"rows": 10_000_000, "partitions": 1_000, "upsert": 10_000}
QUICK = {"rows": 200_000, "partitions": 100, "upsert": 1_000}
SEED = 14


# --- data (run in worker processes only) ---------------------------------------------------


def _permutation(rows: int) -> Any:
    import numpy as np

    return np.random.default_rng(SEED).permutation(rows).astype(np.int64)


def _batches(rows: int, partitions: int, per_batch: int = 50) -> Iterator[Any]:
    """The dataset in partition order, ``per_batch`` partitions per record batch."""
    import numpy as np
    import pyarrow as pa

    perm = _permutation(rows)
    rpp = rows // partitions
    vocab = pa.array(VOCAB)
    rng = np.random.default_rng(SEED + 1)
    for first in range(0, partitions, per_batch):
        last = min(partitions, first + per_batch)
        lo, hi = first * rpp, last * rpp
        n = hi - lo
        yield pa.record_batch(
            {
                "p": pa.array(np.repeat(np.arange(first, last, dtype=np.int64), rpp)),
                "k": pa.array(perm[lo:hi]),
                "v": pa.array(rng.random(n)),
                "s": vocab.take(pa.array(rng.integers(0, len(VOCAB), n))),
            }
        )


def _schema() -> Any:
    import pyarrow as pa

    return pa.schema(
        [("p", pa.int64()), ("k", pa.int64()), ("v", pa.float64()), ("s", pa.string())]
    )


def build(root: str, rows: int, partitions: int) -> dict[str, Any]:
    """Both tables over the same rows (one file per partition each)."""
    import pyarrow as pa
    from deltalake import write_deltalake

    from parquetry.dataset import Dataset
    from parquetry.store import LocalStore

    out: dict[str, Any] = {}
    t0 = time.perf_counter()
    reader = pa.RecordBatchReader.from_batches(_schema(), _batches(rows, partitions))
    ds = Dataset.create(
        LocalStore(Path(root) / "parquetry"),
        UUID,
        reader,
        partition_on=["p"],
        secondary_indices=["k"],
    )
    out["parquetry_build_s"] = time.perf_counter() - t0
    out["parquetry_files"] = len(ds.document.partitions)
    t0 = time.perf_counter()
    reader = pa.RecordBatchReader.from_batches(_schema(), _batches(rows, partitions))
    write_deltalake(str(Path(root) / "delta"), reader, partition_by=["p"])
    out["delta_build_s"] = time.perf_counter() - t0
    return out


def make_source(root: str, rows: int, partitions: int, n: int, variant: str) -> dict[str, Any]:
    """The upsert source: n/2 existing keys (same partition, new values), n/2 new keys."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    perm = _permutation(rows)
    rpp = rows // partitions
    rng = np.random.default_rng(SEED + 2)
    half = n // 2
    if variant == "recent":
        recent = max(1, partitions // 100)
        first = (partitions - recent) * rpp
        pos = rng.choice(np.arange(first, rows), size=half, replace=False)
    else:
        pos = rng.choice(rows, size=half, replace=False)
    new_keys = np.arange(rows, rows + (n - half), dtype=np.int64)
    recent_p = np.arange(max(0, partitions - max(1, partitions // 100)), partitions)
    table = pa.table(
        {
            "p": pa.array(np.concatenate([pos // rpp, rng.choice(recent_p, n - half)])),
            "k": pa.array(np.concatenate([perm[pos], new_keys])),
            "v": pa.array(rng.random(n) + 10.0),  # >= 10: every new value differs
            "s": pa.array(["updated"] * n),
        },
        schema=_schema(),
    )
    path = Path(root) / f"source-{variant}.parquet"
    pq.write_table(table, path)
    return {
        "path": str(path),
        "updated_key": int(perm[pos[0]]),
        "inserted_key": int(new_keys[0]),
        "rows": n,
        "updates": half,
        "inserts": n - half,
    }


# --- the two sides (each in its own process) -----------------------------------------------


def _vmhwm() -> int:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _peak() -> dict[str, int]:
    return {
        "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "vmhwm": _vmhwm(),
    }


def parquetry_upsert(path: str, source: dict[str, Any]) -> dict[str, Any]:
    import pyarrow.parquet as pq

    from parquetry.dataset import Dataset
    from parquetry.store import LocalStore

    src = pq.read_table(source["path"])
    t0, c0 = time.perf_counter(), time.process_time()
    ds = Dataset.open(LocalStore(path), UUID)
    new = ds.upsert(src, on=["k"])
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    out = {"seconds": seconds, "cpu_s": cpu, **_peak()}
    metrics = new.history(limit=1)[0].metrics
    out["metrics"] = {k: v for k, v in metrics.items() if k.startswith(("rows_", "files_"))}
    out["rows_after"] = sum(info.rows for info in new.document.files.values())
    for name in ("updated_key", "inserted_key"):
        got = new.read(predicates=[[("k", "==", source[name])]])
        out[name] = got.to_pylist()
    return out


def delta_upsert(path: str, source: dict[str, Any]) -> dict[str, Any]:
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
    from deltalake import DeltaTable

    src = pq.read_table(source["path"])
    t0, c0 = time.perf_counter(), time.process_time()
    dt = DeltaTable(path)
    metrics = (
        dt.merge(source=src, predicate="t.k = s.k", source_alias="s", target_alias="t")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    out = {"seconds": seconds, "cpu_s": cpu, **_peak(), "metrics": metrics}
    dt = DeltaTable(path)
    actions = pa.table(dt.get_add_actions(flatten=True))  # arro3 -> pyarrow
    out["rows_after"] = int(pc.sum(actions.column("num_records")).as_py())
    ds = dt.to_pyarrow_dataset()
    for name in ("updated_key", "inserted_key"):
        got = ds.to_table(filter=pc.field("k") == source[name])
        out[name] = got.select(["p", "k", "v", "s"]).to_pylist()
    return out


WORKERS = {
    "build": build,
    "source": make_source,
    "parquetry_upsert": parquetry_upsert,
    "delta_upsert": delta_upsert,
}


# --- orchestration (no pyarrow in this process) --------------------------------------------


def run_worker(name: str, *args: Any, script: str = __file__) -> dict[str, Any]:
    """``WORKERS[name](*args)`` of ``script`` (this file, or a case module with the same
    ``--worker NAME ARGS`` entry) in a fresh Python process; its JSON result."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    proc = subprocess.run(
        [sys.executable, script, "--worker", name, json.dumps(args)],
        capture_output=True,
        text=True,
        env=env,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"worker {name} failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def clone(src: Path, dst: Path) -> None:
    """A copy of a table whose Parquet files are hard links (they are never modified)."""

    def link_or_copy(s: str, d: str) -> None:
        if s.endswith(".parquet"):
            os.link(s, d)
        else:
            shutil.copy2(s, d)

    shutil.copytree(src, dst, copy_function=link_or_copy)


def _mib(n: int) -> float:
    return n / (1 << 20)


def upsert_cases(
    root: Path, quick: bool, size: dict[str, int] | None = None
) -> list[dict[str, Any]]:
    size = size or (QUICK if quick else FULL)
    rows, partitions, n = size["rows"], size["partitions"], size["upsert"]
    base = root / "base"
    base.mkdir(parents=True, exist_ok=True)
    built = run_worker("build", str(base), rows, partitions)
    out = []
    for variant in ("recent", "spread"):
        source = run_worker("source", str(root), rows, partitions, n, variant)
        sides = {}
        for side, worker, sub in (
            ("parquetry", "parquetry_upsert", "parquetry"),
            ("deltalake", "delta_upsert", "delta"),
        ):
            work = root / f"{variant}-{side}"
            clone(base / sub, work)
            sides[side] = run_worker(worker, str(work), source)
            shutil.rmtree(work)
        expected_rows = rows + source["inserts"]
        for got in sides.values():
            got["correct"] = bool(
                got["rows_after"] == expected_rows
                and len(got["updated_key"]) == 1
                and got["updated_key"][0]["s"] == "updated"
                and len(got["inserted_key"]) == 1
            )
        pq_side, dl_side = sides["parquetry"], sides["deltalake"]
        out.append(
            {
                "case": f"upsert ({variant})",
                "rows": rows,
                "partitions": partitions,
                "source_rows": n,
                "build": built,
                "load_average": os.getloadavg(),
                "parquetry": pq_side,
                "deltalake": dl_side,
                "speedup_vs_deltalake": dl_side["seconds"] / pq_side["seconds"],
                "rss_ratio": pq_side["peak_rss"] / dl_side["peak_rss"],
            }
        )
    return out


def case_modules() -> list[tuple[str, Path]]:
    return [(p.stem.removeprefix("ops_cases_"), p) for p in sorted(HERE.glob("ops_cases_*.py"))]


def run_case_module(name: str, path: Path, root: Path, quick: bool) -> dict[str, Any]:
    spec = importlib.util.spec_from_file_location(f"ops_cases_{name}", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    root.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = module.case(root, quick)
    return result


def report(results: Sequence[dict[str, Any]]) -> None:
    print()
    print(
        f"{'case':<22} {'parquetry':>11} {'delta-rs':>11} {'speedup':>8} "
        f"{'pq cpu':>8} {'dl cpu':>8} "
        f"{'pq peak':>10} {'dl peak':>10} {'mem ratio':>9}  load avg"
    )
    nan = float("nan")
    for r in results:
        pq_side, dl_side = r.get("parquetry"), r.get("deltalake")
        if not isinstance(pq_side, dict) or not isinstance(dl_side, dict):
            print(f"{r.get('case', '?'):<22} (no parquetry/deltalake sides: see JSON)")
            continue
        load = r.get("load_average") or ()
        print(
            f"{r.get('case', '?'):<22} {pq_side['seconds']:>10.2f}s {dl_side['seconds']:>10.2f}s "
            f"{dl_side['seconds'] / pq_side['seconds']:>7.1f}x "
            f"{pq_side.get('cpu_s', nan):>7.2f}s {dl_side.get('cpu_s', nan):>7.2f}s "
            f"{_mib(pq_side['peak_rss']):>7.0f}MiB {_mib(dl_side['peak_rss']):>7.0f}MiB "
            f"{pq_side['peak_rss'] / dl_side['peak_rss']:>9.2f}  "
            + " ".join(f"{x:.2f}" for x in load)
        )


def _exit_now() -> None:
    """End a worker right after its result is printed: pyarrow's and delta-rs' thread pools
    can abort the interpreter's teardown (``terminate called without an active exception``,
    apache/arrow#34314), which would turn a finished measurement into exit status -6."""
    sys.stderr.flush()
    os._exit(0)


def main(argv: Sequence[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="CI-sized smoke run")
    parser.add_argument("--cases", default=None, help="comma-separated: upsert and/or modules")
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--keep", action="store_true", help="keep the tables")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument(
        "--size",
        default=None,
        help="upsert case size ROWS,PARTITIONS,SOURCE_ROWS (smoke tests), e.g. 2000,10,100",
    )
    parser.add_argument("--worker", nargs=2, metavar=("NAME", "ARGS"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        name, payload = args.worker
        print(json.dumps(WORKERS[name](*json.loads(payload)), default=str), flush=True)
        _exit_now()
    wanted = set(args.cases.split(",")) if args.cases else None
    root = args.dir or Path(tempfile.mkdtemp(prefix="bench-ops-"))
    root.mkdir(parents=True, exist_ok=True)
    results: list[dict[str, Any]] = []
    print(f"bench_ops {'quick' if args.quick else 'full'} run under {root}", flush=True)
    try:
        if wanted is None or "upsert" in wanted:
            size = None
            if args.size:
                rows, partitions, n = (int(x) for x in args.size.split(","))
                size = {"rows": rows, "partitions": partitions, "upsert": n}
            results += upsert_cases(root / "upsert", args.quick, size)
        for name, path in case_modules():
            if wanted is None or name in wanted:
                got = run_case_module(name, path, root / name, args.quick)
                results += got if isinstance(got, list) else [got]
    finally:
        if not args.keep:
            for child in root.iterdir() if root.exists() else ():
                if child != args.json:
                    shutil.rmtree(child, ignore_errors=True) if child.is_dir() else None
    report(results)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2, default=str))
    return results


if __name__ == "__main__":
    main()
