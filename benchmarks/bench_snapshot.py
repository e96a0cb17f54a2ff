"""Snapshot datasets: parquetry vs raw pyarrow vs remote-store 0.33.0, in one run.

Scenarios (zstd, local disk unless noted):
  raw            pq.write_table / pq.read_table of one file (the baseline)
  rs_single      remote-store 0.33.0 ParquetDatasetStore over LocalBackend, one part
  rs_multi_1M    the same with max_rows_per_file=1M
  pq_single      parquetry ParquetDatasetStore over LocalStore(fsync=False), one part
  pq_multi_1M    the same with max_rows_per_file=1M (parts encoded in parallel)
  s3 projection  parquetry on S3 (moto): read 1 of 4 columns, bytes fetched vs chunk bytes
  streaming      20M rows from a batch generator, 1M-row parts, peak RSS growth (subprocess)

Neither raw nor remote-store fsyncs, so parquetry runs with fsync=False here too.
Usage: .venv/bin/python benchmarks/bench_snapshot.py [--quick] [--rows N] [--rounds R]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq


def make_table(rows: int, seed: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed)
    categories = pa.array([f"category-{i:03d}" for i in range(100)])
    return pa.table(
        {
            "id": pa.array(np.arange(rows, dtype=np.int64)),
            "value": pa.array(rng.random(rows)),
            "category": categories.take(pa.array(rng.integers(0, 100, rows))),
            "ts": pa.array(
                1_700_000_000_000_000 + np.arange(rows, dtype=np.int64) * 1000, pa.timestamp("us")
            ),
        }
    )


def timed(fn: Callable[[], object]) -> tuple[float, float]:
    gc.collect()
    w0, c0 = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - w0, time.process_time() - c0


def local_scenarios(
    table: pa.Table, root: Path, part_rows: int
) -> dict[str, tuple[Callable[[str], object], Callable[[str], object]]]:
    from remote_store import Store as RsStore
    from remote_store.backends import LocalBackend
    from remote_store.ext.parquet import ParquetDatasetStore as RsPds

    from parquetry import ParquetDatasetStore
    from parquetry.store import LocalStore

    rs = RsStore(LocalBackend(str(root / "rs")))
    ours = LocalStore(root / "pq", fsync=False)
    rs_single, rs_multi = RsPds(rs), RsPds(rs, max_rows_per_file=part_rows)
    pq_single = ParquetDatasetStore(ours)
    pq_multi = ParquetDatasetStore(ours, max_rows_per_file=part_rows)
    raw_dir = root / "raw"
    raw_dir.mkdir(parents=True, exist_ok=True)
    return {
        "raw": (
            lambda k: pq.write_table(table, raw_dir / f"{k}.parquet", compression="zstd"),
            lambda k: pq.read_table(raw_dir / f"{k}.parquet"),
        ),
        "rs_single": (
            lambda k: rs_single.write_dataset(table, k),
            lambda k: rs_single.read_dataset(k),
        ),
        "rs_multi_1M": (
            lambda k: rs_multi.write_dataset(table, k),
            lambda k: rs_multi.read_dataset(k),
        ),
        "pq_single": (
            lambda k: pq_single.write_dataset(table, k),
            lambda k: pq_single.read_dataset(k),
        ),
        "pq_multi_1M": (
            lambda k: pq_multi.write_dataset(table, k),
            lambda k: pq_multi.read_dataset(k),
        ),
    }


def bench_local(table: pa.Table, rounds: int, part_rows: int) -> dict[str, dict[str, float]]:
    results: dict[str, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        scenarios = local_scenarios(table, Path(tmp), part_rows)
        for r in range(rounds):  # rounds interleaved: load changes hit every scenario alike
            for name, (write, read) in scenarios.items():
                key = f"{name}-{r}"
                ww, wc = timed(lambda: write(key))  # noqa: B023
                rw, rc = timed(lambda: read(key))  # noqa: B023
                res = results.setdefault(name, {"w": [], "wc": [], "r": [], "rc": []})
                for field, value in (("w", ww), ("wc", wc), ("r", rw), ("rc", rc)):
                    res[field].append(value)
    return {
        name: {f: statistics.median(v) for f, v in res.items()} for name, res in results.items()
    }


def bench_s3_projection(table: pa.Table, part_rows: int) -> dict[str, float]:
    from parquetry import ParquetDatasetStore
    from parquetry.store import open_store
    from parquetry.testing import CountingStore
    from parquetry.testing.moto import start_moto_server

    server = start_moto_server()
    try:
        store = open_store(server.url(), **server.options())
        ParquetDatasetStore(store, max_rows_per_file=part_rows).write_dataset(table, "ds")
        counting = CountingStore(store)
        pds = ParquetDatasetStore(counting)
        parts = pds.read_manifest("ds").parts
        chunk_bytes = file_bytes = 0
        for part in parts:
            size = store.head(f"ds/{part}").size
            file_bytes += size
            meta = pq.ParquetFile(store.open(f"ds/{part}", size=size)).metadata
            for rg in range(meta.num_row_groups):
                for col in range(meta.num_columns):
                    chunk = meta.row_group(rg).column(col)
                    if chunk.path_in_schema == "value":
                        chunk_bytes += chunk.total_compressed_size
        counting.reset()
        wall, _ = timed(lambda: pds.read_dataset("ds", columns=["value"]))
        fetched, requests = counting.bytes_read, counting.total
        counting.reset()
        full_wall, _ = timed(lambda: pds.read_dataset("ds"))
        return {
            "chunk_bytes": chunk_bytes,
            "fetched": fetched,
            "file_bytes": file_bytes,
            "requests": requests,
            "wall": wall,
            "full_wall": full_wall,
            "full_fetched": counting.bytes_read,
        }
    finally:
        server.stop()


_STREAM_CHILD = r"""
import json, sys, threading, time, tempfile, psutil
sys.path.insert(0, sys.argv[3])
from bench_snapshot import make_table
from parquetry import ParquetDatasetStore
from parquetry.store import LocalStore
rows, part_rows = int(sys.argv[1]), int(sys.argv[2])
batch_rows = 65_536
template = make_table(batch_rows)
part_arrow = make_table(part_rows).nbytes
proc = psutil.Process()
def batches():
    for start in range(0, rows, batch_rows):
        n = min(batch_rows, rows - start)
        yield template.slice(0, n).to_batches()[0]
peak = [0]
stop = threading.Event()
def sample():
    while not stop.is_set():
        peak[0] = max(peak[0], proc.memory_info().rss); time.sleep(0.002)
with tempfile.TemporaryDirectory() as tmp:
    pds = ParquetDatasetStore(LocalStore(tmp, fsync=False), max_rows_per_file=part_rows)
    import gc; gc.collect()
    base = proc.memory_info().rss
    t = threading.Thread(target=sample); t.start()
    t0 = time.perf_counter()
    m = pds.write_dataset(batches(), "stream")
    wall = time.perf_counter() - t0
    stop.set(); t.join()
print(json.dumps({"growth": peak[0] - base, "part_arrow": part_arrow, "parts": len(m.parts),
                  "rows": m.row_count, "wall": wall}))
"""


def bench_streaming(rows: int, part_rows: int) -> dict[str, float]:
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            _STREAM_CHILD,
            str(rows),
            str(part_rows),
            str(Path(__file__).parent),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="500k rows, 1 round")
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--stream-rows", type=int, default=20_000_000)
    args = parser.parse_args()
    rows, rounds, stream_rows = args.rows, args.rounds, args.stream_rows
    if args.quick:
        rows, rounds, stream_rows = 500_000, 1, 3_000_000
    part_rows = max(1, rows // 5)
    table = make_table(rows)
    print(
        f"rows={rows:,} parts of {part_rows:,} rows, arrow {table.nbytes / 1e6:.1f} MB, "
        f"rounds={rounds}, cpus={os.cpu_count()}, load={os.getloadavg()[0]:.1f}"
    )

    res = bench_local(table, rounds, part_rows)
    base = res["raw"]
    print(
        f"\n{'scenario':<14}{'write s':>9}{'x raw':>7}{'cpu w':>8}{'read s':>9}{'x raw':>7}"
        f"{'cpu r':>8}"
    )
    for name, r in res.items():
        print(
            f"{name:<14}{r['w']:>9.3f}{r['w'] / base['w']:>7.2f}{r['wc']:>8.2f}"
            f"{r['r']:>9.3f}{r['r'] / base['r']:>7.2f}{r['rc']:>8.2f}"
        )
    for ours, theirs in (("pq_single", "rs_single"), ("pq_multi_1M", "rs_multi_1M")):
        print(
            f"{ours} vs {theirs}: write x{res[ours]['w'] / res[theirs]['w']:.2f}, "
            f"read x{res[ours]['r'] / res[theirs]['r']:.2f}"
        )

    s3 = bench_s3_projection(table, part_rows)
    print(
        f"\nS3 (moto) projection of 'value': fetched {s3['fetched'] / 1e6:.2f} MB in "
        f"{s3['requests']} requests; projected chunks {s3['chunk_bytes'] / 1e6:.2f} MB "
        f"(x{s3['fetched'] / s3['chunk_bytes']:.3f}); whole files {s3['file_bytes'] / 1e6:.2f}"
        f" MB; {s3['wall']:.2f} s vs full read {s3['full_wall']:.2f} s "
        f"({s3['full_fetched'] / 1e6:.2f} MB)"
    )

    st = bench_streaming(stream_rows, 1_000_000)  # the real part size, even with --quick
    print(
        f"\nstreaming {st['rows']:,} rows into {st['parts']} parts in {st['wall']:.1f} s: "
        f"peak RSS growth {st['growth'] / 1e6:.0f} MB = x{st['growth'] / st['part_arrow']:.2f} "
        f"one part's Arrow size ({st['part_arrow'] / 1e6:.0f} MB)"
    )


if __name__ == "__main__":
    main()
