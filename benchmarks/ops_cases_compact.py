"""Benchmark case: compaction of many small files, parquetry vs delta-rs, same bytes.

The same small Parquet files (``files`` of ``rows`` rows each, spread over ``partitions``
partitions of an int64 key) are laid out twice: as a parquetry dataset (one commit of the
files) and as a Hive-partitioned directory converted to a Delta table. Then each side
compacts in its own subprocess (``Dataset.compact`` vs ``DeltaTable.optimize.compact``, both
with a 128 MiB target), measuring wall time of the operation and the process's peak RSS.

``case(root_dir, quick)`` is what ``bench_ops.py`` calls; run alone:
``.venv/bin/python benchmarks/ops_cases_compact.py [--quick] [--dir PATH]``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import uuid as uuid_module
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

TARGET = 128 << 20
UUID = "events"


def _chunk(i: int, rows: int, partitions: int) -> tuple[int, pa.Table]:
    rng = np.random.default_rng(i)
    start = i * rows
    table = pa.table(
        {
            "id": pa.array(np.arange(start, start + rows), pa.int64()),
            "customer": pa.array(rng.integers(0, 100_000, rows), pa.int64()),
            "amount": pa.array(rng.random(rows) * 100),
            "status": pa.array(["new", "paid", "sent", "done"]).take(
                pa.array(rng.integers(0, 4, rows))
            ),
        }
    )
    return i % partitions, table


def build(root: Path, files: int, rows: int, partitions: int) -> dict[str, Any]:
    """Write the small files once, commit them to parquetry and convert them to Delta."""
    from deltalake import Field, Schema, convert_to_deltalake

    from parquetry.dataset import Dataset
    from parquetry.dataset.stats import compute_stats
    from parquetry.dataset.write import FileDescription
    from parquetry.store import LocalStore

    pq_root, delta_root = root / "parquetry", root / "delta"
    described, total = [], 0
    for i in range(files):
        p, table = _chunk(i, rows, partitions)
        base = uuid_module.uuid4().hex
        label = f"p={p}/{base}"
        key = f"{UUID}/table/{label}.parquet"
        for path in (pq_root / key, delta_root / f"p={p}" / f"{base}.parquet"):
            path.parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(table, path, compression="snappy")
        size = (pq_root / key).stat().st_size
        total += size
        described.append(
            FileDescription(
                table="table",
                key=key,
                label=label,
                partition=(("p", p),),
                rows=rows,
                size=size,
                stats=compute_stats(table),
            )
        )
    schema = pa.schema([("p", pa.int64()), *_chunk(0, 1, 1)[1].schema])
    Dataset.commit_files(
        LocalStore(pq_root), UUID, described, mode="create", schema=schema, partition_on=["p"]
    )
    convert_to_deltalake(
        str(delta_root),
        partition_by=Schema([Field("p", "long")]),
        partition_strategy="hive",
    )
    return {"files": files, "rows": files * rows, "partitions": partitions, "bytes": total}


#: ``--modes``: parquetry's ``binary_copy`` settings to measure (each on its own copy).
MODES = {"auto": "auto", "copy": True, "reencode": False}


def _child(side: str, path: str) -> dict[str, Any]:
    """One side's compaction (runs in its own process)."""
    if side.startswith("parquetry"):
        from parquetry.dataset import Dataset
        from parquetry.store import LocalStore

        mode = MODES[side.partition(":")[2] or "auto"]
        ds = Dataset.open(LocalStore(path), UUID)
        t0, c0 = time.perf_counter(), time.process_time()
        out = ds.compact(target_file_size=TARGET, binary_copy=mode)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        files_after = len(out.document.partitions)
        peak = peak_rss()  # of the compaction, before the reads below
        # Read speed of the output (many small row groups can read slower): a full read and
        # a read filtered on the (per file increasing) id, which row-group statistics prune.
        rows = out.info.rows_added if out.info else 0
        t1 = time.perf_counter()
        out.read()
        full = time.perf_counter() - t1
        t1 = time.perf_counter()
        out.read(predicates=[[("id", "<", rows // 100)]])
        filtered = time.perf_counter() - t1
        return {
            "seconds": wall,
            "cpu_seconds": cpu,
            "peak_rss": peak,
            "files_after": files_after,
            "read_full_seconds": full,
            "read_filtered_seconds": filtered,
        }
    else:
        from deltalake import DeltaTable

        dt = DeltaTable(path)
        t0, c0 = time.perf_counter(), time.process_time()
        dt.optimize.compact(target_size=TARGET)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        files_after = len(DeltaTable(path).file_uris())
    return {"seconds": wall, "cpu_seconds": cpu, "peak_rss": peak_rss(), "files_after": files_after}


def peak_rss() -> int:
    """This process's peak RSS in bytes. Not ``getrusage``: Linux keeps ``ru_maxrss`` across
    ``execve``, so a child would report its (larger) parent's peak; VmHWM is per process."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _run_side(side: str, path: Path) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.run(
        [sys.executable, __file__, "--child", side, str(path)],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    )
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def case(
    root_dir: Path, quick: bool, modes: tuple[str, ...] = ("auto",), large: bool = False
) -> dict[str, Any]:
    """Compaction of 10,000 small files (``quick``: 500) in 10 partitions, both sides;
    ``modes``: parquetry's ``binary_copy`` settings (:data:`MODES`), run one after the other
    on copies of the same files. ``large``: 8 files of 1M rows (one ~25 MB row group each)
    in one partition instead, where row groups are big enough to be copied whole."""
    import shutil

    files, rows = (500, 200) if quick else (10_000, 1_000)
    if large:
        files, rows = 8, 1_000_000
    data = build(root_dir, files, rows, partitions=1 if large else 10)
    extra: dict[str, Any] = {}
    for mode in modes[1:]:
        copy = root_dir / f"parquetry-{mode}"
        shutil.copytree(root_dir / "parquetry", copy)
        extra[f"parquetry_{mode}"] = {
            **_run_side(f"parquetry:{mode}", copy),
            "load_average": os.getloadavg(),
        }
        shutil.rmtree(copy)
    load = os.getloadavg()
    pqr = _run_side(f"parquetry:{modes[0]}", root_dir / "parquetry")
    pqr["load_average_before"], pqr["load_average"] = load, os.getloadavg()
    load = os.getloadavg()
    dlr = _run_side("delta", root_dir / "delta")
    dlr["load_average_before"], dlr["load_average"] = load, os.getloadavg()
    return {
        "case": "compact",
        **data,
        "load_average": os.getloadavg(),
        **extra,
        "parquetry": pqr,
        "binary_copy": modes[0],
        "deltalake": dlr,
        # > 1: parquetry faster. Wall time depends on the machine's load (both sides run
        # back to back); CPU time (``time.process_time``, every thread) much less.
        "speedup_vs_deltalake": dlr["seconds"] / pqr["seconds"],
        "cpu_speedup_vs_deltalake": dlr["cpu_seconds"] / pqr["cpu_seconds"],
        "rss_ratio": pqr["peak_rss"] / dlr["peak_rss"],
    }


def _exit_now() -> None:
    """End a worker right after its result is printed: pyarrow's and delta-rs' thread pools
    can abort the interpreter's teardown (``terminate called without an active exception``,
    apache/arrow#34314), which would turn a finished measurement into exit status -6."""
    sys.stderr.flush()
    os._exit(0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--large", action="store_true", help="8 files of 1M rows instead")
    parser.add_argument("--child", nargs=2, metavar=("SIDE", "PATH"))
    parser.add_argument(
        "--modes",
        default="auto",
        help="parquetry binary_copy settings, comma-separated, the last reported as "
        "'parquetry' (auto, copy, reencode); the others as parquetry_<mode>",
    )
    args = parser.parse_args()
    if args.child:
        print(json.dumps(_child(*args.child)), flush=True)
        _exit_now()
    root = args.dir or Path(tempfile.mkdtemp(prefix="bench-compact-"))
    modes = tuple(m for m in args.modes.split(",") if m)
    modes = modes[-1:] + modes[:-1]
    print(json.dumps(case(root, args.quick, modes, args.large), indent=2))


if __name__ == "__main__":
    main()
