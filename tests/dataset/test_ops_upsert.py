"""Dataset.upsert (MERGE by key) against a Python oracle, indices, requests, conflicts, faults."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings

from parquetry.dataset import Dataset
from parquetry.dataset.upsert import plan_upsert
from parquetry.errors import (
    CommitConflict,
    InvalidArgument,
    ParquetryError,
    SchemaMismatch,
    UnknownColumn,
)
from parquetry.store import LocalStore, MemoryStore
from parquetry.testing import CountingStore, FaultyStore

from .ops_oracle import assert_index_exact, orphan_data_files, rows

SCHEMA = pa.schema([("p", pa.int64()), ("k", pa.int64()), ("v", pa.string())])
NAMES = SCHEMA.names

Row = tuple[Any, ...]


def table(items: list[Row]) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(NAMES, r, strict=True)) for r in items], schema=SCHEMA)


def oracle(
    old: list[Row], data: list[Row], on: list[str], when_matched: str, when_not_matched: str
) -> Counter[Row]:
    """SQL MERGE semantics on Python tuples: a NULL key never matches."""
    pos = [NAMES.index(c) for c in on]

    def key(r: Row) -> tuple[Any, ...] | None:
        k = tuple(r[i] for i in pos)
        return None if any(x is None for x in k) else k

    by_key = {key(r): r for r in data if key(r) is not None}
    matched: set[tuple[Any, ...]] = set()
    out: list[Row] = []
    for r in old:
        k = key(r)
        if k is None or k not in by_key:
            out.append(r)
            continue
        matched.add(k)
        if when_matched == "update":
            out.append(by_key[k])
        elif when_matched == "ignore":
            out.append(r)
    if when_not_matched == "insert":
        out += [r for r in data if key(r) is None or key(r) not in matched]
    return Counter(out)


def dataset(store: Any, parts: list[list[Row]], partition_on: list[str], indexed: bool) -> Dataset:
    ds = Dataset.create(
        store,
        "u",
        table(parts[0]),
        partition_on=partition_on,
        secondary_indices=["k"] if indexed else [],
    )
    for more in parts[1:]:
        ds = ds.append(table(more))
    return ds


P = st.integers(0, 2)
K = st.none() | st.integers(0, 12)
V = st.sampled_from(["a", "b", "c"])
OLD_ROW = st.tuples(P, K, V)
LAYOUTS = {
    # name: (partition_on, on)
    "unpartitioned": ([], ["k"]),
    "partition in key": (["p"], ["p", "k"]),
    "partition not in key": (["p"], ["k"]),  # an update may move a row to another partition
}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    parts=st.lists(st.lists(OLD_ROW, min_size=1, max_size=6), min_size=1, max_size=3),
    data=st.lists(st.tuples(P, K, st.sampled_from(["x", "y"])), max_size=8),
    layout=st.sampled_from(sorted(LAYOUTS)),
    indexed=st.booleans(),
    when_matched=st.sampled_from(["update", "delete", "ignore"]),
    when_not_matched=st.sampled_from(["insert", "ignore"]),
)
def test_upsert_equals_the_merge_oracle(
    parts: list[list[Row]],
    data: list[Row],
    layout: str,
    indexed: bool,
    when_matched: str,
    when_not_matched: str,
) -> None:
    partition_on, on = LAYOUTS[layout]
    # Source keys are unique (duplicates are refused, tested below); NULL keys may repeat.
    seen: set[tuple[Any, ...]] = set()
    unique = []
    for r in data:
        k = tuple(r[NAMES.index(c)] for c in on)
        if None in k or k not in seen:
            unique.append(r)
            seen.add(k)
    ds = dataset(MemoryStore(), parts, partition_on, indexed)
    old = [r for part in parts for r in part]
    before = ds.version
    new = ds.upsert(
        table(unique), on=on, when_matched=when_matched, when_not_matched=when_not_matched
    )
    expected = oracle(old, unique, on, when_matched, when_not_matched)
    assert rows(new.read(columns=NAMES)) == expected
    assert rows(Dataset.open(new.store, "u").read(columns=NAMES)) == expected
    assert rows(ds.read(columns=NAMES)) == Counter(old)  # the old version is unchanged
    if indexed:
        assert_index_exact(new, "k")
    if new.version == before:
        assert expected == Counter(old)  # nothing to do: no commit
        return
    entry = new.history(limit=1)[0]
    assert entry.operation == "upsert"
    m = entry.metrics
    assert m["rows_inserted"] == (
        sum(expected.values()) - len(old) + m["rows_deleted"] if when_not_matched == "insert" else 0
    )
    assert m["rows_updated"] + m["rows_deleted"] + m["rows_copied"] == m["rows_removed"]
    assert m["rows_added"] == m["rows_updated"] + m["rows_copied"] + m["rows_inserted"]
    assert orphan_data_files(new.store, "u") == set()


def test_duplicate_keys_null_keys_and_argument_errors() -> None:
    ds = dataset(MemoryStore(), [[(0, 1, "a"), (1, 2, "b")]], ["p"], True)
    with pytest.raises(InvalidArgument, match=r"key \{'k': 7\} appears 2 times"):
        ds.upsert(table([(0, 7, "x"), (1, 7, "y"), (0, 8, "z")]), on=["k"])
    with pytest.raises(InvalidArgument, match=r"'p': 0, 'k': 7"):
        ds.upsert(table([(0, 7, "x"), (0, 7, "y")]), on=["p", "k"])
    # Same k in two partitions is not a duplicate of the key (p, k).
    ok = ds.upsert(table([(0, 7, "x"), (1, 7, "y")]), on=["p", "k"])
    assert ok.read(predicates=[[("k", "==", 7)]]).num_rows == 2
    # NULL keys never match (SQL): both rows are inserted, the NULL-key row of the dataset
    # stays, even under when_matched="delete".
    ds2 = ds.append(table([(1, None, "old")]))
    new = ds2.upsert(table([(1, None, "n1"), (2, None, "n2")]), on=["k"], when_matched="delete")
    assert sorted(r["v"] for r in new.read().to_pylist() if r["k"] is None) == ["n1", "n2", "old"]
    with pytest.raises(UnknownColumn, match="'nope'"):
        ds.upsert(table([(0, 1, "x")]), on=["nope"])
    with pytest.raises(InvalidArgument, match="when_matched"):
        ds.upsert(table([(0, 1, "x")]), on=["k"], when_matched="replace")
    with pytest.raises(InvalidArgument, match="when_not_matched"):
        ds.upsert(table([(0, 1, "x")]), on=["k"], when_not_matched="update")
    with pytest.raises(InvalidArgument, match="at least one key"):
        ds.upsert(table([(0, 1, "x")]), on=[])
    # The schema is checked like append's: a wrong type, a new column without merge_schema.
    with pytest.raises(SchemaMismatch):
        ds.upsert(pa.table({"p": [0], "k": ["1"], "v": ["x"]}), on=["k"])
    extra = pa.table({"p": [0], "k": [1], "v": ["x"], "w": [1.5]})
    with pytest.raises(SchemaMismatch, match="'w'"):
        ds.upsert(extra, on=["k"])
    # (merge_schema=True evolves it: tests/dataset/test_ops_upsert_evolve.py)
    assert Dataset.open(ds.store, "u").version == new.version  # nothing committed by errors


def test_reads_only_the_files_that_may_hold_a_key() -> None:
    """20 files with clustered keys. Indexed: the index names the one file holding the key,
    the only data file read (whole, once). Partitioned on a key column: that partition's
    file, its key columns first, then whole. Neither: statistics (min/max) prune likewise."""
    old = [(p, p * 100 + i, "a") for p in range(20) for i in range(5)]
    for indexed, partition_on, on, reads in (
        (True, ["p"], ["k"], 1),
        (False, ["p"], ["p", "k"], 2),
        (False, [], ["k"], 2),
    ):
        store = CountingStore(MemoryStore())
        parts = [[r for r in old if r[0] == p] for p in range(20)]
        ds = dataset(store, parts, partition_on, indexed)
        assert len(ds.document.partitions) == 20
        store.reset()
        new = ds.upsert(table([(7, 703, "new"), (7, 999, "ins")]), on=on)
        data_reads = [k for kind, k in store.log if kind.startswith("get") and "/table/" in k]
        assert len(data_reads) == reads, (indexed, partition_on, data_reads)
        assert len(set(data_reads)) == 1
        got = new.read(predicates=[[("k", "in", [703, 999])]]).sort_by("k")
        assert got.column("v").to_pylist() == ["new", "ins"]
        assert new.history(limit=1)[0].metrics["files_rewritten"] == 1


def test_plan_upsert_is_a_dry_run() -> None:
    ds = dataset(MemoryStore(), [[(0, 1, "a"), (1, 2, "b")], [(2, 3, "c")]], ["p"], False)
    plan = plan_upsert(ds, table([(0, 1, "x"), (2, 9, "y")]), on=["k"])
    assert len(plan.matched) == 1
    assert (plan.rows_matched, plan.rows_not_matched) == (1, 1)
    assert Dataset.open(ds.store, "u").version == ds.version


def test_concurrent_append_and_disjoint_upsert_both_land() -> None:
    ds = dataset(MemoryStore(), [[(0, 1, "a")], [(1, 2, "b")]], ["p"], True)
    other = Dataset.open(ds.store, "u").append(table([(0, 5, "appended")]))
    other = Dataset.open(ds.store, "u").upsert(table([(1, 2, "B")]), on=["k"])
    # ds is stale by two commits: its upsert touches p=0's first file, which is unchanged.
    new = ds.upsert(table([(0, 1, "A"), (2, 3, "C")]), on=["k"])
    assert new.version == other.version + 1
    assert rows(new.read(columns=NAMES)) == Counter(
        [(0, 1, "A"), (1, 2, "B"), (0, 5, "appended"), (2, 3, "C")]
    )
    assert_index_exact(new, "k")


def test_concurrent_upserts_of_the_same_file_conflict_then_retry_exactly() -> None:
    ds = dataset(MemoryStore(), [[(0, 1, "a"), (0, 2, "b")]], ["p"], True)
    first = Dataset.open(ds.store, "u").upsert(table([(0, 1, "first")]), on=["k"])
    with pytest.raises(CommitConflict, match="concurrent commit removed"):
        ds.upsert(table([(0, 2, "second"), (0, 9, "ins")]), on=["k"])
    assert orphan_data_files(ds.store, "u") == set()  # the loser's files are gone
    assert Dataset.open(ds.store, "u").version == first.version
    retried = Dataset.open(ds.store, "u").upsert(table([(0, 2, "second"), (0, 9, "ins")]), ["k"])
    assert rows(retried.read(columns=NAMES)) == Counter(
        [(0, 1, "first"), (0, 2, "second"), (0, 9, "ins")]
    )


def test_threads_upsert_while_appending() -> None:
    """Real threads: 4 appends race one upsert of existing keys. Appends remove no file, so
    the upsert is re-applied on whatever landed first: every row lands once."""
    store = MemoryStore()
    ds = dataset(store, [[(p, p, "a") for p in range(3)]], ["p"], True)
    barrier = threading.Barrier(5)
    errors: list[BaseException] = []

    def append(i: int) -> None:
        barrier.wait()
        try:
            Dataset.open(store, "u").append(table([(i % 3, 100 + i, "app")]))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=append, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    barrier.wait()
    new = ds.upsert(table([(p, p, "up") for p in range(3)]), on=["k"])
    for t in threads:
        t.join()
    assert not errors
    final = Dataset.open(store, "u")
    assert new.version <= final.version
    assert rows(final.read(columns=NAMES)) == Counter(
        [(p, p, "up") for p in range(3)] + [(i % 3, 100 + i, "app") for i in range(4)]
    )
    assert_index_exact(final, "k")


def test_faulty_store_at_every_call_leaves_the_old_or_the_new_version() -> None:
    """Fail the Nth store call of an upsert, for every N until one runs through: the dataset
    then opens at the old version (old rows) or the new one (the oracle's rows), never
    broken, and its index is exact."""
    base = [[(0, 1, "a"), (0, 2, "b")], [(1, 3, "c")]]
    data = [(0, 1, "A"), (1, 3, "C"), (2, 4, "D")]
    old = Counter(r for part in base for r in part)
    new_rows = oracle(list(old.elements()), data, ["k"], "update", "insert")
    n = 0
    while True:
        n += 1
        inner = MemoryStore()
        dataset(inner, base, ["p"], True)
        faulty = FaultyStore(inner)
        ds = Dataset.open(faulty, "u")
        faulty.fail_on = faulty.calls + n
        try:
            ds.upsert(table(data), on=["k"])
        except ParquetryError:
            assert faulty.failed
        if not faulty.failed:
            break
        after = Dataset.open(inner, "u")
        got = rows(after.read(columns=NAMES))
        assert got in (old, new_rows), n
        assert (got == new_rows) == (after.version == ds.version + 1), n
        assert_index_exact(after, "k")
    assert n > 5  # the upsert made several calls, each failed once


MEMORY_CHILD = """
import resource, sys
import pyarrow as pa
from parquetry.dataset import Dataset
from parquetry.store import LocalStore
ds = Dataset.open(LocalStore(sys.argv[1]), "m")
files, rows = int(sys.argv[3]), int(sys.argv[4])
# One existing key per file (each file is rewritten) and as many new keys.
keys = [f * rows + 7 for f in range(files)] + [10**12 + f for f in range(files)]
data = pa.table({"i": pa.array(keys, pa.int64()), "x": pa.array([-1.0] * len(keys))})
with open("/proc/self/status") as f:
    size = next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmSize:"))
limit = size + int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
out = ds.upsert(data, on=["i"])
m = out.history(limit=1)[0].metrics
print(m["files_rewritten"], m["rows_updated"], m["rows_inserted"])
"""


def test_upsert_memory_is_bounded_under_an_address_space_limit(tmp_path: Path) -> None:
    """128 MB of data (decoded) in 20 files, a key in every file: the upsert rewrites all
    20 with 80 MB of address space above what the process had after opening the dataset
    (one file at a time; holding every file would need 128 MB). pyarrow's system allocator
    and one glibc arena, so that every allocation counts against the limit."""
    import numpy as np

    store = LocalStore(tmp_path)
    rng = np.random.default_rng(1)
    files, rows = 20, 400_000  # 6.4 MB decoded per file
    ds = None
    for f in range(files):
        t = pa.table({"i": pa.array(np.arange(f * rows, (f + 1) * rows)), "x": rng.random(rows)})
        ds = Dataset.create(store, "m", t) if ds is None else ds.append(t)
    assert ds is not None
    proc = subprocess.run(
        [sys.executable, "-c", MEMORY_CHILD, str(tmp_path), str(80 << 20), str(files), str(rows)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "MALLOC_ARENA_MAX": "1", "ARROW_DEFAULT_MEMORY_POOL": "system"},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == [str(files), str(files), str(files)]
    after = Dataset.open(store, "m")
    assert sum(info.rows for info in after.document.files.values()) == files * rows + files
    got = after.read(predicates=[[("i", "in", [7, rows + 7, 10**12])]]).column("x").to_pylist()
    assert got == [-1.0, -1.0, -1.0]
