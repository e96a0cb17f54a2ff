"""Commits that scale (issue 13): metadata cost of appends and opens at 1k-100k partitions.

For each size (P partitions x F files per partition, 10 rows per file, a secondary index on
the high-cardinality column ``k`` with 10 distinct values per file), local disk:

- **build**: tiny Parquet files written directly with pyarrow on a thread pool, described
  as :class:`FileDescription` (stats, index values, one write intent per 2,500 files, as
  Spark tasks do) and committed with one ``Dataset.commit_files(mode="create")``;
- **append**: N one-row ``ds.append(...)`` calls through a ``CountingStore``: metadata
  bytes written per append (everything but the data file itself), amortised over the N
  appends (so periodic checkpoints count), by kind of object; median / p90 latency;
- **open + plan**: ``Dataset.open`` of the newest version + ``plan(k == x)`` on a fresh
  ``CountingStore``: requests, bytes read, time (median of several lookups);
- **open after many commits**: a small table that received C one-row appends (10,000 by
  default), ``Dataset.open`` (+ the same indexed plan);
- **delta-rs** (``deltalake``) in the same run: a Delta table over the very same data files
  (its ``_delta_log`` is written directly from a template that ``write_deltalake`` produced:
  no second copy of a million files, same file count), checkpointed like a Delta writer
  would have; append latency (``write_deltalake(mode="append")`` of one row) and open
  latency (``DeltaTable(path)``, + ``file_uris`` with a partition filter, and + ``file_uris``
  for ``k = x``, which Delta can only prune with min/max statistics); and a Delta table
  with C commits (one real append replicated in the log, data files hard-linked), opened
  without and with a checkpoint.

Prints every measurement and the issue's targets with PASS/MISS. APIs of the coming format
(``Dataset.checkpoint``) are used when present. Usage::

    .venv/bin/python benchmarks/bench_scale.py [--quick] [--sizes 1k,10k,100k]
        [--appends N] [--commits C] [--budget S] [--many-budget S] [--no-delta] [--dir PATH]
        [--json OUT]
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid as uuid_module
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from parquetry.dataset import Dataset, FileDescription
from parquetry.dataset.intents import Intent
from parquetry.dataset.naming import data_key, make_label, new_base_label
from parquetry.store import LocalStore, PutMode, Store
from parquetry.testing import CountingStore

UUID = "scale"
MANY = "many"
TABLE = "table"
ROWS_PER_FILE = 10
FILES_PER_INTENT = 2_500  # files per write task and intent (a Spark task's share)
KIB = 1024
SCHEMA = pa.schema([("p", pa.int64()), ("k", pa.int64()), ("v", pa.int64())])
FILE_SCHEMA = pa.schema([("k", pa.int64()), ("v", pa.int64())])
# Tiny files: no compression, no dictionary, no stored Arrow schema (what pyarrow spends
# most of its per-file time on); the benchmark is about metadata, not data encoding.
FILE_OPTS: dict[str, Any] = {"compression": "none", "use_dictionary": False, "store_schema": False}
# k values: a seeded random permutation of range(M), so each file's 10 values are spread
# over the whole range (min/max statistics cannot prune, only the index can) and neighbouring
# values belong to unrelated files, as with real ids. (A multiplicative permutation kept a
# file's values close together at some sizes, which made the index file compress 3-4x
# better than real data would.)
K_SEED = 13
_PERMUTATIONS: dict[int, np.ndarray] = {}

SIZES = {"1k": 1_000, "10k": 10_000, "100k": 100_000}
MIN_SAMPLES = 3  # a loop stops at its time budget only after this many samples

# Issue 13 targets (at 100,000 partitions; printed for every size).
T_APPEND_BYTES = 64 * KIB
T_COMMIT_S = 0.100
T_OPEN_REQUESTS = 4
T_OPEN_BYTES = 1024 * KIB
T_OPEN_S = 0.100
T_MANY_OPEN_S = 0.100


# --- helpers -------------------------------------------------------------------------------


def permutation(total: int) -> np.ndarray:
    """k of every row: the same for a given ``total`` in every run."""
    if total not in _PERMUTATIONS:
        _PERMUTATIONS.clear()  # one size at a time (80 MB at 10M values)
        _PERMUTATIONS[total] = np.random.default_rng(K_SEED).permutation(total).astype(np.int64)
    return _PERMUTATIONS[total]


def k_values(first_row: int, n: int, total: int) -> np.ndarray:
    return permutation(total)[first_row : first_row + n]


def median(xs: Sequence[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def pct(xs: Sequence[float], q: float) -> float:
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


class MeteredStore(CountingStore):
    """A CountingStore that also remembers the bytes of every put, by key."""

    def __init__(self, inner: Store):
        super().__init__(inner)
        self.puts: list[tuple[str, int]] = []

    def reset(self) -> None:
        super().reset()
        with self._lock:
            self.puts.clear()

    def _put(
        self, key: str, data: bytes | memoryview, mode: PutMode, expected_version: str | None
    ) -> Any:
        with self._lock:
            self.puts.append((key, len(data)))
        return super()._put(key, data, mode, expected_version)


def kind_of(key: str, uuid: str) -> str:
    """What a written object is (for the breakdown of metadata bytes)."""
    if key.startswith(f"{uuid}/{TABLE}/") and key.endswith(".parquet"):
        return "data"
    if key.startswith(f"{uuid}.by-dataset-metadata"):
        return "pointer"
    for part, name in (
        ("/_head", "head"),
        ("/_checkpoints/", "checkpoint"),
        ("/_segments/", "segment"),
        ("/_indices/", "index-piece"),
        ("/indices/", "index"),
        ("/_intents/", "intent"),
        ("/_versions/", "entry"),
    ):
        if part in key:
            return name
    return "other"


# --- building the big table ------------------------------------------------------------


@dataclass
class Built:
    partitions: int
    files: int
    index_values: int
    write_s: float
    commit_s: float
    checkpoint_s: float | None
    #: (label, size, stats) of every file, in file order (for the Delta log).
    infos: list[tuple[str, int, dict[str, Any]]] = field(repr=False)


class FileTemplate:
    """One tiny Parquet file written by pyarrow, reused with other values.

    With PLAIN encoding, no compression and no statistics, the 10 ``k`` and 10 ``v``
    values are two runs of 80 bytes in the file and nothing else in it depends on them
    (no page checksums by default): copying the template and overwriting the runs gives a
    valid file with those values in ~5 us instead of ~150 us for ``pq.write_table``. The
    build reads a sample back with pyarrow to check this.
    """

    MARK_K, MARK_V = 0x5EED_0000_0000, 0x7EED_0000_0000

    def __init__(self) -> None:
        marks_k = np.arange(self.MARK_K, self.MARK_K + ROWS_PER_FILE, dtype=np.int64)
        marks_v = np.arange(self.MARK_V, self.MARK_V + ROWS_PER_FILE, dtype=np.int64)
        sink = pa.BufferOutputStream()
        pq.write_table(
            pa.table([pa.array(marks_k), pa.array(marks_v)], schema=FILE_SCHEMA),
            sink,
            write_statistics=False,
            **FILE_OPTS,
        )
        self.data = sink.getvalue().to_pybytes()
        self.at_k = self._find(marks_k.tobytes())
        self.at_v = self._find(marks_v.tobytes())

    def _find(self, run: bytes) -> int:
        at = self.data.find(run)
        assert at >= 0, "template layout changed"
        assert self.data.find(run, at + 1) < 0, "template layout changed"
        return at

    def file(self, ks: np.ndarray, vs: np.ndarray) -> bytes:
        buf = bytearray(self.data)
        n = ROWS_PER_FILE * 8
        buf[self.at_k : self.at_k + n] = ks.astype(np.int64).tobytes()
        buf[self.at_v : self.at_v + n] = vs.astype(np.int64).tobytes()
        return bytes(buf)


def _write_chunk(
    store: LocalStore,
    root: Path,
    template: FileTemplate,
    first: int,
    count: int,
    fpp: int,
    total: int,
) -> list[FileDescription]:
    """Files ``first .. first+count`` (file f is in partition f // fpp), one intent."""
    intent = Intent(store, UUID)
    named = []
    for f in range(first, first + count):
        label = make_label((("p", f // fpp),), new_base_label())
        named.append((f, label, data_key(UUID, TABLE, label)))
    intent.record([key for _, _, key in named])
    out = []
    made: set[str] = set()
    base = str(root)
    size = len(template.data)
    for f, label, key in named:
        ks = k_values(f * ROWS_PER_FILE, ROWS_PER_FILE, total)
        vs = np.arange(f * ROWS_PER_FILE, (f + 1) * ROWS_PER_FILE, dtype=np.int64)
        path = f"{base}/{key}"
        parent = path.rsplit("/", 1)[0]
        if parent not in made:
            os.makedirs(parent, exist_ok=True)
            made.add(parent)
        with open(path, "wb") as out_file:
            out_file.write(template.file(ks, vs))
        sorted_ks = np.sort(ks)
        out.append(
            FileDescription(
                table=TABLE,
                key=key,
                label=label,
                partition=(("p", f // fpp),),
                rows=ROWS_PER_FILE,
                size=size,
                stats={
                    "k": [int(sorted_ks[0]), int(sorted_ks[-1]), 0],
                    "v": [int(vs[0]), int(vs[-1]), 0],
                },
                index_values={"k": pa.array(sorted_ks)},
                intent=intent.id,
            )
        )
    return out


def build(root: Path, partitions: int, fpp: int, workers: int = 4) -> tuple[Dataset, Built]:
    """The big table: write files on a thread pool, then one ``commit_files``."""
    store = LocalStore(root, fsync=False)
    files = partitions * fpp
    total = files * ROWS_PER_FILE
    t0 = time.perf_counter()
    chunks = [(s, min(FILES_PER_INTENT, files - s)) for s in range(0, files, FILES_PER_INTENT)]
    described: list[FileDescription] = []
    template = FileTemplate()
    permutation(total)  # made once, before the threads share it
    with cf.ThreadPoolExecutor(workers) as pool:
        for part in pool.map(
            lambda c: _write_chunk(store, root, template, c[0], c[1], fpp, total), chunks
        ):
            described.extend(part)
    for d in described[:: max(1, len(described) // 20)]:
        f = int(d.stats["v"][0]) // ROWS_PER_FILE
        got = pq.read_table(root / d.key)
        assert got["k"].to_pylist() == k_values(f * ROWS_PER_FILE, ROWS_PER_FILE, total).tolist()
        assert got["v"].to_pylist() == list(range(f * ROWS_PER_FILE, (f + 1) * ROWS_PER_FILE))
    t1 = time.perf_counter()
    ds = Dataset.commit_files(
        store,
        UUID,
        described,
        mode="create",
        schema=SCHEMA,
        partition_on=["p"],
        secondary_indices=["k"],
        operation="bench-build",
    )
    t2 = time.perf_counter()
    checkpoint_s = None
    checkpoint = getattr(ds, "checkpoint", None)
    if callable(checkpoint):
        checkpoint()
        checkpoint_s = time.perf_counter() - t2
    infos = [(d.label, d.size, d.stats) for d in described]
    return ds, Built(partitions, files, total, t1 - t0, t2 - t1, checkpoint_s, infos)


# --- parquetry measurements ------------------------------------------------------------


@dataclass
class Appends:
    n: int
    median_s: float
    p90_s: float
    meta_bytes: float  # per append, amortised
    read_bytes: float  # per append
    requests: float  # per append
    by_kind: dict[str, float]  # metadata bytes per append by kind
    budget_hit: bool


def one_row(i: int, partitions: int, total: int) -> pa.Table:
    # k values above the build's range: new index values, like fresh ids.
    return pa.table(
        {"p": [i % partitions], "k": [total + i], "v": [-(i + 1)]},
        schema=SCHEMA,
    )


def measure_appends(
    root: Path, uuid: str, n: int, partitions: int, total: int, budget: float
) -> Appends:
    metered = MeteredStore(LocalStore(root, fsync=False))
    ds = Dataset.open(metered, uuid)
    metered.reset()
    times = []
    start = time.perf_counter()
    for i in range(n):
        t0 = time.perf_counter()
        ds = ds.append(one_row(i, partitions, total))
        times.append(time.perf_counter() - t0)
        if time.perf_counter() - start > budget and len(times) >= MIN_SAMPLES:
            break
    done = len(times)
    by_kind: Counter[str] = Counter()
    for key, size in metered.puts:
        by_kind[kind_of(key, uuid)] += size
    data = by_kind.pop("data", 0)
    meta = metered.bytes_written - data
    return Appends(
        n=done,
        median_s=median(times),
        p90_s=pct(times, 0.9),
        meta_bytes=meta / done,
        read_bytes=metered.bytes_read / done,
        requests=metered.total / done,
        by_kind={k: v / done for k, v in sorted(by_kind.items())},
        budget_hit=done < n,
    )


@dataclass
class Open:
    median_s: float
    open_s: float
    requests: int
    bytes_read: int
    request_kinds: dict[str, int]
    matched_files: int


def measure_open_plan(root: Path, uuid: str, lookups: Sequence[int], repeats: int = 5) -> Open:
    """Open the newest version + plan ``k == x`` on a fresh counting store, per lookup."""
    times, opens, requests, nbytes = [], [], [], []
    kinds: Counter[str] = Counter()
    matched = 0
    for r in range(repeats):
        x = lookups[r % len(lookups)]
        counting = CountingStore(LocalStore(root, fsync=False))
        t0 = time.perf_counter()
        ds = Dataset.open(counting, uuid)
        t1 = time.perf_counter()
        plan = ds.plan([[("k", "==", x)]])
        t2 = time.perf_counter()
        times.append(t2 - t0)
        opens.append(t1 - t0)
        requests.append(counting.total)
        nbytes.append(counting.bytes_read)
        kinds = Counter(counting.counts)
        matched = max(matched, len(plan.files))
    return Open(
        median_s=median(times),
        open_s=median(opens),
        requests=max(requests),
        bytes_read=max(nbytes),
        request_kinds=dict(kinds),
        matched_files=matched,
    )


def check_lookup(root: Path, uuid: str, x: int, want_v: int) -> None:
    """The planned lookup really finds the row (the benchmark measures a correct plan)."""
    got = Dataset.open(LocalStore(root), uuid).read(predicates=[[("k", "==", x)]])
    assert got["v"].to_pylist() == [want_v], (x, got.to_pydict(), want_v)


@dataclass
class Many:
    commits: int
    build_s: float
    open_s: float
    open_plan_s: float
    requests: int
    bytes_read: int
    budget_hit: bool


def measure_many(root: Path, commits: int, budget: float) -> Many:
    """A small table (10 partitions) after ``commits`` one-row appends."""
    store = LocalStore(root, fsync=False)
    seed = pa.table(
        {"p": list(range(10)), "k": list(range(10)), "v": list(range(10))}, schema=SCHEMA
    )
    ds = Dataset.create(store, MANY, seed, partition_on=["p"], secondary_indices=["k"])
    t0 = time.perf_counter()
    done = 0
    for i in range(commits):
        ds = ds.append(pa.table({"p": [i % 10], "k": [10 + i], "v": [10 + i]}, schema=SCHEMA))
        done += 1
        if time.perf_counter() - t0 > budget:
            break
    build_s = time.perf_counter() - t0
    opens, plans = [], []
    requests, nbytes = 0, 0
    for r in range(5):
        counting = CountingStore(LocalStore(root, fsync=False))
        t1 = time.perf_counter()
        opened = Dataset.open(counting, MANY)
        t2 = time.perf_counter()
        opened.plan([[("k", "==", 10 + (r * 7919) % done)]])
        t3 = time.perf_counter()
        opens.append(t2 - t1)
        plans.append(t3 - t1)
        requests, nbytes = max(requests, counting.total), max(nbytes, counting.bytes_read)
    return Many(done, build_s, median(opens), median(plans), requests, nbytes, done < commits)


# --- delta-rs ------------------------------------------------------------------------------


def _template(tmp: Path) -> list[dict[str, Any]]:
    """delta-rs's own version 0 without its add actions (commitInfo, protocol, metaData)."""
    from deltalake import write_deltalake

    seed = pa.table({"p": [0], "k": [0], "v": [0]}, schema=SCHEMA)
    write_deltalake(str(tmp), seed, partition_by=["p"])
    log = tmp / "_delta_log"
    v0 = [json.loads(x) for x in (log / f"{0:020d}.json").read_text().splitlines() if x]
    return [a for a in v0 if "add" not in a]


def _add_action(path: str, p: int, size: int, stats: dict[str, Any], ts: int) -> str:
    return json.dumps(
        {
            "add": {
                "path": path,
                "partitionValues": {"p": str(p)},
                "size": size,
                "modificationTime": ts,
                "dataChange": True,
                "stats": json.dumps(
                    {
                        "numRecords": ROWS_PER_FILE,
                        "minValues": {"k": stats["k"][0], "v": stats["v"][0]},
                        "maxValues": {"k": stats["k"][1], "v": stats["v"][1]},
                        "nullCount": {"k": 0, "v": 0},
                    }
                ),
            }
        }
    )


def _commit_info(ts: int, files: int) -> str:
    return json.dumps(
        {
            "commitInfo": {
                "timestamp": ts,
                "operation": "WRITE",
                "operationParameters": {"mode": "Append"},
                "engineInfo": "bench_scale",
                "operationMetrics": {"num_added_files": files},
            }
        }
    )


@dataclass
class DeltaBig:
    build_s: float
    checkpoint_s: float
    append_median_s: float
    append_p90_s: float
    appends: int
    open_s: float
    open_partition_plan_s: float
    open_stats_plan_s: float


def delta_big(
    root: Path, work: Path, built: Built, appends: int, budget: float, lookup: tuple[int, int]
) -> DeltaBig:
    """A Delta table over the parquetry table's data files (``<uuid>/table`` is its root)."""
    from deltalake import DeltaTable, write_deltalake

    head = _template(work / "template-big")
    table_root = root / UUID / TABLE
    log = table_root / "_delta_log"
    log.mkdir(parents=True, exist_ok=True)
    ts = int(time.time() * 1000)
    t0 = time.perf_counter()
    infos = built.infos
    per_commit = 100_000
    for n, s in enumerate(range(0, len(infos), per_commit)):
        lines = [json.dumps(a) for a in head] if n == 0 else [_commit_info(ts, per_commit)]
        for label, size, stats in infos[s : s + per_commit]:
            lines.append(_add_action(label + ".parquet", _p(label), size, stats, ts))
        (log / f"{n:020d}.json").write_text("\n".join(lines) + "\n")
    t1 = time.perf_counter()
    DeltaTable(str(table_root)).create_checkpoint()
    t2 = time.perf_counter()
    dt = DeltaTable(str(table_root))
    assert len(dt.file_uris()) == built.files, (len(dt.file_uris()), built.files)
    times = []
    start = time.perf_counter()
    for i in range(appends):
        row = one_row(i, built.partitions, built.index_values)
        t3 = time.perf_counter()
        write_deltalake(str(table_root), row, partition_by=["p"], mode="append")
        times.append(time.perf_counter() - t3)
        if time.perf_counter() - start > budget and len(times) >= MIN_SAMPLES:
            break
    x, p = lookup
    opens, part_plans, stats_plans = [], [], []
    for _ in range(3):
        t3 = time.perf_counter()
        dt = DeltaTable(str(table_root))
        t4 = time.perf_counter()
        uris = dt.file_uris(file_pruning_predicate=[("p", "=", p)])
        t5 = time.perf_counter()
        opens.append(t4 - t3)
        part_plans.append(t5 - t3)
        assert uris
        # No index in Delta: a point lookup prunes files by min/max statistics only.
        t6 = time.perf_counter()
        uris = DeltaTable(str(table_root)).file_uris(file_pruning_predicate=f"k = {x}")
        stats_plans.append(time.perf_counter() - t6)
        assert uris
    return DeltaBig(
        build_s=t1 - t0,
        checkpoint_s=t2 - t1,
        append_median_s=median(times),
        append_p90_s=pct(times, 0.9),
        appends=len(times),
        open_s=median(opens),
        open_partition_plan_s=median(part_plans),
        open_stats_plan_s=median(stats_plans),
    )


def _p(label: str) -> int:
    return int(label.split("/", 1)[0].split("=", 1)[1])


@dataclass
class DeltaMany:
    commits: int
    build_s: float
    open_no_checkpoint_s: float
    open_checkpoint_s: float
    checkpoint_s: float


def delta_many(work: Path, commits: int) -> DeltaMany:
    """A small Delta table with ``commits`` one-row appends: one real append by delta-rs,
    replicated in the log (new data file names are hard links of its file)."""
    from deltalake import DeltaTable, write_deltalake

    path = work / "delta-many"
    seed = pa.table(
        {"p": list(range(10)), "k": list(range(10)), "v": list(range(10))}, schema=SCHEMA
    )
    write_deltalake(str(path), seed, partition_by=["p"])
    write_deltalake(str(path), seed.slice(0, 1), partition_by=["p"], mode="append")
    log = path / "_delta_log"
    lines = [json.loads(x) for x in (log / f"{1:020d}.json").read_text().splitlines() if x]
    add = next(a for a in lines if "add" in a)["add"]
    src = path / add["path"]
    t0 = time.perf_counter()
    for n in range(2, commits + 1):
        name = f"p=0/part-00000-{uuid_module.uuid4()}-c000.snappy.parquet"
        os.link(src, path / name)
        ts = int(time.time() * 1000)
        body = [
            _commit_info(ts, 1),
            json.dumps({"add": {**add, "path": name, "modificationTime": ts}}),
        ]
        (log / f"{n:020d}.json").write_text("\n".join(body) + "\n")
    build_s = time.perf_counter() - t0

    def open_once() -> float:
        t = time.perf_counter()
        dt = DeltaTable(str(path))
        dt.file_uris(file_pruning_predicate=[("p", "=", 0)])
        return time.perf_counter() - t

    no_cp = [open_once() for _ in range(3)]
    assert DeltaTable(str(path)).version() == commits
    t1 = time.perf_counter()
    DeltaTable(str(path)).create_checkpoint()
    cp_s = time.perf_counter() - t1
    with_cp = [open_once() for _ in range(5)]
    return DeltaMany(commits, build_s, median(no_cp), median(with_cp), cp_s)


# --- report --------------------------------------------------------------------------------


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def run_size(
    name: str, partitions: int, fpp: int, args: argparse.Namespace, base: Path
) -> dict[str, Any]:
    root = base / f"size-{name}"
    pq_root = root / "pq"
    out: dict[str, Any] = {"size": name, "partitions": partitions}
    print(
        f"\n== {name}: {partitions:,} partitions x {fpp} files, {ROWS_PER_FILE} rows/file ==",
        flush=True,
    )
    _, built = build(pq_root, partitions, fpp)
    out["build"] = {k: v for k, v in built.__dict__.items() if k != "infos"}
    print(
        f"build: {built.files:,} files, {built.index_values:,} index values: write "
        f"{built.write_s:.1f} s, commit_files {built.commit_s:.1f} s"
        + (f", checkpoint {built.checkpoint_s:.1f} s" if built.checkpoint_s is not None else ""),
        flush=True,
    )
    total = built.index_values
    # Lookup values and the row (v) each must find: row r has k = permutation[r].
    rows = [7, total // 3, total - 5, total // 2 + 1, 12345 % total]
    lookups = [int(permutation(total)[r]) for r in rows]
    check_lookup(pq_root, UUID, lookups[0], rows[0])
    repeats = 5 if built.files < 500_000 else 3  # a format-1 open of 1M files takes seconds
    o0 = measure_open_plan(pq_root, UUID, lookups, repeats)
    out["open_before_appends"] = o0.__dict__
    a = measure_appends(pq_root, UUID, args.appends, partitions, total, args.budget)
    out["appends"] = a.__dict__
    print(
        f"append 1 row x {a.n}{' (time budget hit)' if a.budget_hit else ''}: median "
        f"{a.median_s * 1e3:.1f} ms, p90 {a.p90_s * 1e3:.1f} ms; metadata written "
        f"{a.meta_bytes / KIB:,.1f} KiB/append ("
        + ", ".join(f"{k} {v / KIB:,.1f}" for k, v in a.by_kind.items())
        + f"), read {a.read_bytes / KIB:,.1f} KiB/append, {a.requests:.1f} requests/append",
        flush=True,
    )
    o = measure_open_plan(pq_root, UUID, lookups, repeats)
    out["open"] = o.__dict__
    print(
        f"open + plan k == x: {o.median_s * 1e3:.1f} ms (open {o.open_s * 1e3:.1f} ms), "
        f"{o.requests} requests {o.request_kinds}, {o.bytes_read / KIB:,.1f} KiB read, "
        f"{o.matched_files} file(s) planned (before the appends: {o0.median_s * 1e3:.1f} ms, "
        f"{o0.requests} requests, {o0.bytes_read / KIB:,.1f} KiB)",
        flush=True,
    )
    if not args.no_delta:
        d = delta_big(
            pq_root,
            root,
            built,
            args.delta_appends,
            args.budget,
            (lookups[1], _p(built.infos[rows[1] // ROWS_PER_FILE][0])),
        )
        out["delta"] = d.__dict__
        print(
            f"delta-rs (same files): log {d.build_s:.1f} s, checkpoint {d.checkpoint_s:.1f} s; "
            f"append 1 row x {d.appends}: median {d.append_median_s * 1e3:.1f} ms, p90 "
            f"{d.append_p90_s * 1e3:.1f} ms; open {d.open_s * 1e3:.1f} ms, + partition-filtered "
            f"file_uris {d.open_partition_plan_s * 1e3:.1f} ms, open + file_uris pruned by "
            f"stats for k == x {d.open_stats_plan_s * 1e3:.1f} ms",
            flush=True,
        )
    out["targets"] = targets(out)
    return out


def targets(r: dict[str, Any]) -> list[tuple[str, str, str, bool]]:
    a, o = r["appends"], r["open"]
    rows = [
        (
            "metadata written per 1-row append (amortised)",
            f"{a['meta_bytes'] / KIB:,.1f} KiB",
            "<= 64 KiB",
            a["meta_bytes"] <= T_APPEND_BYTES,
        ),
        (
            "append commit latency, median",
            f"{a['median_s'] * 1e3:.1f} ms",
            "<= 100 ms",
            a["median_s"] <= T_COMMIT_S,
        ),
        (
            "open + plan indexed lookup: requests",
            str(o["requests"]),
            "<= 4",
            o["requests"] <= T_OPEN_REQUESTS,
        ),
        (
            "open + plan indexed lookup: bytes read",
            f"{o['bytes_read'] / KIB:,.1f} KiB",
            "<= 1024 KiB",
            o["bytes_read"] <= T_OPEN_BYTES,
        ),
        (
            "open + plan indexed lookup: time",
            f"{o['median_s'] * 1e3:.1f} ms",
            "< 100 ms",
            o["median_s"] < T_OPEN_S,
        ),
    ]
    d = r.get("delta")
    if d:
        ra = a["median_s"] / d["append_median_s"]
        ro = o["median_s"] / d["open_partition_plan_s"]
        rows += [
            (
                "append latency / delta-rs",
                f"{ra:.2f}x ({d['append_median_s'] * 1e3:.1f} ms)",
                "< 1",
                ra < 1,
            ),
            (
                "open+plan / delta-rs open+partition plan",
                f"{ro:.2f}x ({d['open_partition_plan_s'] * 1e3:.1f} ms)",
                "< 1",
                ro < 1,
            ),
        ]
    return rows


def many_targets(m: Many, d: DeltaMany | None) -> list[tuple[str, str, str, bool]]:
    rows = [
        (
            f"open after {m.commits:,} commits",
            f"{m.open_s * 1e3:.1f} ms",
            "< 100 ms",
            m.open_s < T_MANY_OPEN_S,
        )
    ]
    if d:
        for name, ref in (
            ("no checkpoint", d.open_no_checkpoint_s),
            ("checkpointed", d.open_checkpoint_s),
        ):
            ratio = m.open_plan_s / ref
            rows.append(
                (
                    f"open+plan after many commits / delta-rs {name}",
                    f"{ratio:.2f}x ({ref * 1e3:.1f} ms)",
                    "< 1",
                    ratio < 1,
                )
            )
    return rows


def print_targets(title: str, rows: list[tuple[str, str, str, bool]]) -> None:
    print(f"\n{title}")
    print(f"  {'measurement':<50} {'value':>22} {'target':>12}  result")
    for what, value, target, ok in rows:
        print(f"  {what:<50} {value:>22} {target:>12}  {verdict(ok)}")


def parse_sizes(text: str) -> list[tuple[str, int]]:
    """``1k,10k,100k`` or numbers; ``none`` (or empty): no size (only the many commits)."""
    out = []
    for item in text.split(","):
        item = item.strip()
        if item in ("", "none"):
            continue
        out.append((item, SIZES[item] if item in SIZES else int(item)))
    return out


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help="CI-sized: 1k and 4k partitions x 1 file, 10 appends, 100 commits",
    )
    parser.add_argument("--sizes", default=None, help="comma list of 1k,10k,100k or numbers")
    parser.add_argument("--files-per-partition", type=int, default=None)
    parser.add_argument("--appends", type=int, default=None, help="1-row appends (>= 200)")
    parser.add_argument("--delta-appends", type=int, default=None)
    parser.add_argument("--commits", type=int, default=None, help="commits of the many table")
    parser.add_argument(
        "--budget",
        type=float,
        default=None,
        help="seconds per append loop before stopping early",
    )
    parser.add_argument(
        "--many-budget",
        type=float,
        default=None,
        help="seconds for the many-commits loop before stopping early (1800; quick: 60)",
    )
    parser.add_argument("--no-delta", action="store_true")
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--keep", action="store_true", help="keep the tables")
    parser.add_argument("--json", type=Path, default=None, help="write results here")
    args = parser.parse_args(argv)
    q = args.quick
    sizes = parse_sizes(
        args.sizes if args.sizes is not None else ("1k,4000" if q else "1k,10k,100k")
    )
    fpp = args.files_per_partition or (1 if q else 10)
    args.appends = args.appends or (10 if q else 200)
    args.delta_appends = args.delta_appends or (5 if q else 50)
    args.commits = args.commits if args.commits is not None else (100 if q else 10_000)
    args.budget = args.budget or (15.0 if q else 300.0)
    # 10,000 real one-row appends take ~6 minutes on this machine (~36 ms each): the
    # many-commits loop has its own budget, so it reaches the 10,000.
    args.many_budget = args.many_budget or (60.0 if q else 1800.0)
    base = Path(tempfile.mkdtemp(prefix="bench-scale-", dir=args.dir))
    results: dict[str, Any] = {"sizes": [], "files_per_partition": fpp, "quick": q}
    print(f"parquetry {_version()}, deltalake {_delta_version()}, files under {base}")
    try:
        for name, parts in sizes:
            results["sizes"].append(run_size(name, parts, fpp, args, base))
            if not args.keep:
                shutil.rmtree(base / f"size-{name}", ignore_errors=True)
        many = None
        dmany = None
        if args.commits:
            many = measure_many(base / "many", args.commits, args.many_budget)
            results["many"] = many.__dict__
            print(
                f"\nsmall table after {many.commits:,} one-row appends"
                f"{' (time budget hit)' if many.budget_hit else ''} (built in "
                f"{many.build_s:.1f} s): open {many.open_s * 1e3:.1f} ms, open + plan "
                f"{many.open_plan_s * 1e3:.1f} ms, {many.requests} requests, "
                f"{many.bytes_read / KIB:,.1f} KiB",
                flush=True,
            )
            if not args.no_delta:
                # As many commits as the parquetry table reached (its loop may stop at the budget).
                dmany = delta_many(base / "delta", many.commits)
                results["delta_many"] = dmany.__dict__
                print(
                    f"delta-rs after {dmany.commits:,} commits (log written in "
                    f"{dmany.build_s:.1f} s): open + file_uris "
                    f"{dmany.open_no_checkpoint_s * 1e3:.1f} ms without checkpoint, "
                    f"{dmany.open_checkpoint_s * 1e3:.1f} ms with one "
                    f"(create_checkpoint {dmany.checkpoint_s:.1f} s)",
                    flush=True,
                )
        for r in results["sizes"]:
            print_targets(f"targets at {r['partitions']:,} partitions:", r["targets"])
        if many is not None:
            rows = many_targets(many, dmany)
            results["many_targets"] = rows
            print_targets("targets, many commits:", rows)
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, default=str))
    return results


def _version() -> str:
    import parquetry

    return getattr(parquetry, "__version__", "?") + (
        " (format 2 API present)" if hasattr(Dataset, "checkpoint") else " (format 1)"
    )


def _delta_version() -> str:
    try:
        import deltalake

        return str(deltalake.__version__)
    except ImportError:
        return "not installed"


if __name__ == "__main__":
    main(sys.argv[1:])
