"""Peak memory of a compaction (docs/benchmarks.md, "Compaction memory").

Writes ``--files`` appends of ``--rows`` rows (int64 ``k``, random double ``v``: ~8 bytes a
row encoded, 16 decoded) into one partition of a local dataset, then compacts a fresh copy
of it in a child process per ``binary_copy`` mode and prints, as JSON lines, how much the
child's peak RSS (``VmHWM``) grew over its RSS after a warm-up compaction of a tiny dataset,
and pyarrow's own peak allocation. The child uses the system allocator with one arena
(jemalloc and glibc's per-thread arenas keep freed pages, which would hide what is in use).
The code measured is whatever ``parquetry`` the interpreter imports (set ``PYTHONPATH`` to
compare two source trees).

    python benchmarks/compact_memory.py --files 40 --rows 250000 --target-mib 32
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

CHILD = """
import json, sys
import pyarrow as pa
from parquetry.dataset import Dataset
from parquetry.store import LocalStore, MemoryStore

def status(field):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(field))

tiny = Dataset.create(MemoryStore(), "t", pa.table({"k": [1], "v": [0.5]}))
tiny.append(pa.table({"k": [2], "v": [1.5]})).compact()
ds = Dataset.open(LocalStore(sys.argv[1]), "m")
base = status("VmRSS:")
out = ds.compact(target_file_size=int(sys.argv[2]), binary_copy=sys.argv[3] == "True")
print(json.dumps({
    "rss_growth_mib": round((status("VmHWM:") - base) / 2**20, 1),
    "arrow_peak_mib": round(pa.default_memory_pool().max_memory() / 2**20, 1),
    "files_before": len(ds.plan().files),
    "files_after": len(out.plan().files),
}))
"""


def build(root: Path, files: int, rows: int) -> None:
    from parquetry.dataset import Dataset
    from parquetry.store import LocalStore

    rng = np.random.default_rng(5)
    i = np.arange(rows, dtype=np.int64)
    ds = None
    for f in range(files):
        t = pa.table({"k": i + f * rows, "v": rng.random(rows)})
        ds = Dataset.create(LocalStore(root), "m", t) if ds is None else ds.append(t)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=40)
    parser.add_argument("--rows", type=int, default=250_000)
    parser.add_argument("--target-mib", type=int, default=32)
    parser.add_argument("--modes", default="False,True")
    args = parser.parse_args()
    env = {**os.environ, "ARROW_DEFAULT_MEMORY_POOL": "system", "MALLOC_ARENA_MAX": "1"}
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "base"
        build(base, args.files, args.rows)
        encoded = sum(p.stat().st_size for p in base.rglob("*.parquet"))
        for mode in args.modes.split(","):
            work = Path(tmp) / "work"
            shutil.rmtree(work, ignore_errors=True)
            shutil.copytree(base, work)
            start = time.perf_counter()
            proc = subprocess.run(
                [sys.executable, "-c", CHILD, str(work), str(args.target_mib << 20), mode],
                capture_output=True,
                text=True,
                env=env,
                check=True,
            )
            result = json.loads(proc.stdout.splitlines()[-1])
            result.update(
                binary_copy=mode,
                target_mib=args.target_mib,
                encoded_mb=round(encoded / 1e6, 1),
                decoded_mb=round(args.files * args.rows * 16 / 1e6, 1),
                seconds=round(time.perf_counter() - start, 1),
                load_1min=round(os.getloadavg()[0], 1),
            )
            print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
