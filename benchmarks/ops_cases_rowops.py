"""bench_ops cases for row-level delete and update, against delta-rs, same data, same run.

``case(root_dir, quick) -> list of results`` (the interface of ``benchmarks/bench_ops.py``,
which discovers ``ops_cases_*.py``). The table is bench_ops' own (``bench_ops.build``: 10M
rows in 1,000 partitions, one file each, ``k`` a random permutation indexed on the
parquetry side; ``--quick``: 200,000 rows in 100 partitions), built once here:

- **delete 1 % by key**: ``k < rows / 100``. The keys are a permutation, so every file holds
  some (min/max statistics and the index cannot skip any): every file is rewritten on both
  sides. parquetry ``delete_where([[("k", "<", n)]])``, delta-rs ``delete("k < n")``.
- **update where range (column)**: ``s = 'updated'`` where ``v < 0.01`` (1 % of the rows,
  in every file). parquetry ``update_where([[("v", "<", 0.01)]], set={"s": "updated"})``,
  delta-rs ``update(new_values={"s": "updated"}, predicate="v < 0.01")``.
- **update where range (partition)**: the same ``set`` where ``p < partitions / 100``
  (1 % of the partitions, all their rows): partition pruning on both sides.

Each side runs in its own subprocess on its own hard-linked copy of the table and reports
the wall time of open + operation and its peak RSS (as bench_ops' upsert); the result is
checked afterwards (rows left, a changed value), outside the measurement.

Run alone: ``python benchmarks/ops_cases_rowops.py [--quick]`` (needs bench_ops.py beside).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

HERE = Path(__file__).resolve().parent


def _bench_ops() -> ModuleType:
    """bench_ops.py from this directory (the table builder, cloning, peak memory)."""
    found = sys.modules.get("bench_ops")
    if found is not None:
        return found
    spec = importlib.util.spec_from_file_location("bench_ops", HERE / "bench_ops.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_ops"] = module
    spec.loader.exec_module(module)
    return module


# --- the two sides (each in its own process) ---------------------------------------------


def parquetry_side(path: str, op: dict[str, Any]) -> dict[str, Any]:
    from parquetry.dataset import Dataset
    from parquetry.store import LocalStore

    bench = _bench_ops()
    t0, c0 = time.perf_counter(), time.process_time()
    ds = Dataset.open(LocalStore(path), bench.UUID)
    if op["kind"] == "delete":
        new = ds.delete_where([[(op["column"], "<", op["below"])]])
    else:
        new = ds.update_where([[(op["column"], "<", op["below"])]], set={"s": "updated"})
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    out: dict[str, Any] = {"seconds": seconds, "cpu_s": cpu, **bench._peak()}
    metrics = new.history(limit=1)[0].metrics
    out["metrics"] = {k: v for k, v in metrics.items() if k.startswith(("rows_", "files_"))}
    out["rows_after"] = sum(info.rows for info in new.document.files.values())
    out["updated_rows"] = new.read(columns=["k"], predicates=[[("s", "==", "updated")]]).num_rows
    return out


def delta_side(path: str, op: dict[str, Any]) -> dict[str, Any]:
    import pyarrow as pa
    import pyarrow.compute as pc
    from deltalake import DeltaTable

    bench = _bench_ops()
    predicate = f"{op['column']} < {op['below']}"
    t0, c0 = time.perf_counter(), time.process_time()
    dt = DeltaTable(path)
    if op["kind"] == "delete":
        metrics = dt.delete(predicate)
    else:
        metrics = dt.update(new_values={"s": "updated"}, predicate=predicate)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    out: dict[str, Any] = {"seconds": seconds, "cpu_s": cpu, **bench._peak(), "metrics": metrics}
    dt = DeltaTable(path)
    actions = pa.table(dt.get_add_actions(flatten=True))  # arro3 -> pyarrow
    out["rows_after"] = int(pc.sum(actions.column("num_records")).as_py())
    table = dt.to_pyarrow_dataset().to_table(columns=["s"])  # delta-rs writes string_view
    out["updated_rows"] = int(pc.sum(pc.equal(table["s"].cast(pa.string()), "updated")).as_py())
    return out


def expected(op: dict[str, Any], rows: int, partitions: int, base: str) -> dict[str, int]:
    """Rows left and rows updated, computed from the parquetry table (outside timing)."""
    from parquetry.dataset import Dataset
    from parquetry.store import LocalStore

    ds = Dataset.open(LocalStore(base), _bench_ops().UUID)
    hits = ds.read(columns=["k"], predicates=[[(op["column"], "<", op["below"])]]).num_rows
    if op["kind"] == "delete":
        return {"rows_after": rows - hits, "updated_rows": 0}
    return {"rows_after": rows, "updated_rows": hits}


WORKERS = {"parquetry": parquetry_side, "deltalake": delta_side, "expected": expected}


def _run(name: str, *args: Any) -> dict[str, Any]:
    result: dict[str, Any] = _bench_ops().run_worker(name, *args, script=__file__)
    return result


def operations(rows: int, partitions: int) -> list[tuple[str, dict[str, Any]]]:
    return [
        ("delete 1% by key", {"kind": "delete", "column": "k", "below": rows // 100}),
        ("update where v range", {"kind": "update", "column": "v", "below": 0.01}),
        (
            "update where p range",
            {"kind": "update", "column": "p", "below": max(1, partitions // 100)},
        ),
    ]


def case(root_dir: Path, quick: bool, size: dict[str, int] | None = None) -> list[dict[str, Any]]:
    """Every row-level case on one table (built once; each side works on a clone).
    ``size``: ``{"rows": .., "partitions": ..}`` instead of bench_ops' (smoke tests)."""
    bench = _bench_ops()
    size = size or (bench.QUICK if quick else bench.FULL)
    rows, partitions = size["rows"], size["partitions"]
    base = root_dir / "base"
    base.mkdir(parents=True, exist_ok=True)
    built = bench.run_worker("build", str(base), rows, partitions)
    out = []
    for name, op in operations(rows, partitions):
        want = _run("expected", op, rows, partitions, str(base / "parquetry"))
        sides = {}
        for side, sub in (("parquetry", "parquetry"), ("deltalake", "delta")):
            work = root_dir / f"{op['kind']}-{op['column']}-{side}"
            bench.clone(base / sub, work)
            sides[side] = _run(side, str(work), op)
            shutil.rmtree(work)
        for got in sides.values():
            got["correct"] = all(got[k] == v for k, v in want.items())
        pq_side, dl_side = sides["parquetry"], sides["deltalake"]
        out.append(
            {
                "case": name,
                "rows": rows,
                "partitions": partitions,
                "build": built,
                "expected": want,
                "load_average": os.getloadavg(),
                "parquetry": pq_side,
                "deltalake": dl_side,
                "speedup_vs_deltalake": dl_side["seconds"] / pq_side["seconds"],
                "rss_ratio": pq_side["peak_rss"] / dl_side["peak_rss"],
            }
        )
    return out


def _exit_now() -> None:
    """End a worker right after its result is printed: pyarrow's and delta-rs' thread pools
    can abort the interpreter's teardown (``terminate called without an active exception``,
    apache/arrow#34314), which would turn a finished measurement into exit status -6."""
    sys.stderr.flush()
    os._exit(0)


def main(argv: list[str]) -> None:
    if argv[:1] == ["--worker"]:
        name, payload = argv[1], argv[2]
        print(json.dumps(WORKERS[name](*json.loads(payload)), default=str), flush=True)
        _exit_now()
    import tempfile

    root = Path(tempfile.mkdtemp(prefix="bench-rowops-"))
    try:
        results = case(root, "--quick" in argv)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    _bench_ops().report(results)
    print(json.dumps(results, indent=2, default=str))


if __name__ == "__main__":
    main(sys.argv[1:])
