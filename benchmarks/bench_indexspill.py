"""The commit's index maintenance of a rewrite, alone: a spilling ``PairSink`` (indexspill.py).

``files`` files of ``pairs / files`` distinct int64 keys each (a seeded permutation of
``range(pairs)``: every file's keys span the whole range, as bench_ops.py's spread upsert
rewrites them) or UUID texts (``--type str``), one label ``p=<n>/<32 hex>.parquet`` per
file, go into one sink file by file (``add``: sorting and spilling runs, done while a
rewrite writes its files), then ``write`` merges the runs into pieces on a local store
(the commit's part). Reports CPU (``time.process_time``, every thread) and wall
(``time.perf_counter``) of each phase with the 1-minute load average, and a digest of the
piece keys (same digest = same pieces, byte for byte).

Usage::

    PYTHONPATH=src .venv/bin/python benchmarks/bench_indexspill.py [--pairs 2000000]
        [--files 200] [--type int|str] [--repeat 1]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import tempfile
import time
import uuid
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa


def _files(pairs: int, files: int, kind: str) -> list[pa.Table]:
    rng = np.random.default_rng(15)
    keys: Any = rng.permutation(pairs).astype(np.int64)
    if kind == "str":
        keys = np.array([str(uuid.UUID(int=int(k) * 7919 + 1)) for k in keys], dtype=object)
    per = pairs // files
    out = []
    for f in range(files):
        label = f"p={f}/{hashlib.md5(str(f).encode()).hexdigest()}.parquet"
        values = pa.array(keys[f * per : (f + 1) * per], pa.string() if kind == "str" else None)
        out.append(pa.table({"value": values, "label": pa.repeat(label, len(values))}))
    return out


def run(pairs: int, files: int, kind: str) -> dict[str, Any]:
    from parquetry.dataset.indexspill import PairSink
    from parquetry.store import LocalStore

    tables = _files(pairs, files, kind)
    t = pa.string() if kind == "str" else pa.int64()
    with tempfile.TemporaryDirectory() as root, PairSink(t) as sink:
        store = LocalStore(root)
        c0, w0 = time.process_time(), time.perf_counter()
        for table in tables:
            sink.add(table)
        c1, w1 = time.process_time(), time.perf_counter()
        written = sink.write(store, "u", "k")
        c2, w2 = time.process_time(), time.perf_counter()
    digest = hashlib.sha256("".join(f.key for f, _ in written).encode()).hexdigest()[:16]
    return {
        "pairs": pairs,
        "files": files,
        "type": kind,
        "runs": len(sink.runs),
        "pieces": len(written),
        "add_cpu": round(c1 - c0, 2),
        "add_wall": round(w1 - w0, 2),
        "write_cpu": round(c2 - c1, 2),
        "write_wall": round(w2 - w1, 2),
        "load": round(os.getloadavg()[0], 2),
        "digest": digest,
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--pairs", type=int, default=2_000_000)
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--type", choices=["int", "str"], default="int")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args(argv)
    for _ in range(args.repeat):
        print(json.dumps(run(args.pairs, args.files, args.type)), flush=True)


if __name__ == "__main__":
    main()
