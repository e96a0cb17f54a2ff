"""Peak memory of index maintenance and of scanning index lookups (docs/benchmarks.md,
"Index values of a rewrite, scanning lookups").

Writes ``--files`` files of ``--rows`` rows (``part``: one partition per file, ``id``: a
unique key, indexed, int64 or a 36-character UUID text, ``v = row % 1000``) into a local
dataset, then, in a child process per case on a fresh copy:

* ``rewrite``: ``update_where(v == 7, set v = -7)``, which rewrites every file and re-adds
  every key to the index;
* ``not_equal`` / ``not_null``: ``Dataset.plan`` of ``id != <a key>`` / ``id is not null``
  (the index is scanned: every label holding another value).

Each child prints, as JSON, how much its peak RSS (``VmHWM``) grew over its RSS after
opening the dataset and a warm-up, and pyarrow's own peak allocation. The child uses the
system allocator with two arenas (jemalloc keeps freed pages, which would hide what is in
use). The code measured is whatever ``parquetry`` the interpreter imports (set
``PYTHONPATH`` to compare two source trees).

    python benchmarks/index_memory.py --files 40 --rows 50000 --key uuid
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
from typing import Any

import numpy as np
import pyarrow as pa

CHILD = """
import json, sys, time
import pyarrow as pa
from parquetry.dataset import Dataset
from parquetry.store import LocalStore

def status(field):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(field))

ds = Dataset.open(LocalStore(sys.argv[1]), "m")
case, key = sys.argv[2], sys.argv[3]
probe = ds.read_file(ds.plan().files[0], ["id"]).column("id")[0].as_py()
ds.plan([[("id", "==", probe)]])  # warm-up: imports, one piece footer
base = status("VmRSS:")
pa.default_memory_pool().release_unused()
arrow0 = pa.total_allocated_bytes()
t0 = time.process_time()
if case == "rewrite":
    out = ds.update_where([[("v", "==", 7)]], set={"v": -7})
    result = dict(out.history(limit=1)[0].metrics)
elif case == "not_equal":
    result = {"files": len(ds.plan([[("id", "!=", probe)]]).files)}
else:
    result = {"files": len(ds.plan([[("id", "is not null")]]).files)}
print(json.dumps({
    "case": case,
    "rss_growth_mib": round((status("VmHWM:") - base) / 2**20, 1),
    "arrow_peak_mib": round((pa.default_memory_pool().max_memory() - arrow0) / 2**20, 1),
    "cpu_s": round(time.process_time() - t0, 2),
    **result,
}))
"""

_HEX = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)


def uuid_strings(rng: np.random.Generator, n: int) -> pa.Array:
    """n random UUID4-like texts (36 characters) built as one byte buffer."""
    raw = rng.integers(0, 256, size=(n, 16), dtype=np.uint8)
    digits = np.empty((n, 32), dtype=np.uint8)
    digits[:, 0::2] = _HEX[raw >> 4]
    digits[:, 1::2] = _HEX[raw & 0x0F]
    text = np.full((n, 36), ord("-"), dtype=np.uint8)
    for start, stop, dst in ((0, 8, 0), (8, 12, 9), (12, 16, 14), (16, 20, 19), (20, 32, 24)):
        text[:, dst : dst + stop - start] = digits[:, start:stop]
    offsets = pa.py_buffer(np.arange(0, 36 * (n + 1), 36, dtype=np.int32).tobytes())
    return pa.Array.from_buffers(pa.string(), n, [None, offsets, pa.py_buffer(text.tobytes())])


def build(root: Path, files: int, rows: int, key: str) -> None:
    from parquetry.dataset import Dataset
    from parquetry.store import LocalStore

    rng = np.random.default_rng(5)
    i = np.arange(rows, dtype=np.int64)
    t = pa.string() if key == "uuid" else pa.int64()
    schema = pa.schema([("part", pa.int64()), ("id", t), ("v", pa.int64())])

    def batches() -> Any:
        for f in range(files):
            ids = uuid_strings(rng, rows) if key == "uuid" else pa.array(i + f * rows)
            yield pa.record_batch([pa.array(np.full(rows, f)), ids, pa.array(i % 1000)], schema)

    reader = pa.RecordBatchReader.from_batches(schema, batches())
    Dataset.create(LocalStore(root), "m", reader, partition_on=["part"], secondary_indices=["id"])


def run(source: Path, case: str, key: str, tree: str | None = None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="index-memory-") as tmp:
        copy = Path(tmp) / "copy"
        shutil.copytree(source, copy)
        env = {**os.environ, "ARROW_DEFAULT_MEMORY_POOL": "system", "MALLOC_ARENA_MAX": "2"}
        if tree is not None:
            env["PYTHONPATH"] = tree
        t0 = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-c", CHILD, str(copy), case, key],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        if proc.returncode != 0:
            return {"case": case, "failed": proc.stderr[-2000:]}
        out: dict[str, Any] = json.loads(proc.stdout.splitlines()[-1])
        out["wall_s"] = round(time.perf_counter() - t0, 1)
        return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=40)
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--key", choices=["uuid", "int"], default="uuid")
    parser.add_argument("--cases", default="rewrite,not_equal,not_null")
    parser.add_argument(
        "--trees",
        default="",
        help="comma-separated source trees (PYTHONPATH of the children) to compare on the "
        "same data, one child each per case in turn; default: the interpreter's own",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="index-memory-src-") as tmp:
        root = Path(tmp)
        build(root, args.files, args.rows, args.key)
        print(json.dumps({"files": args.files, "rows": args.files * args.rows, "key": args.key}))
        trees: list[str | None] = [t for t in args.trees.split(",") if t] or [None]
        for case in args.cases.split(","):
            for tree in trees:
                print(json.dumps({"tree": tree, **run(root, case, args.key, tree)}), flush=True)


if __name__ == "__main__":
    main()
