"""Concurrent upserts of the same keys: each key ends exactly once (the trust defect of two
upserts inserting the same new key, both committed), with stale snapshots (a hypothesis
oracle in commit order), threads, processes and a FaultyStore at every call."""

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
from parquetry.dataset.upsert import _check_added, upsert
from parquetry.dataset.upsertkeys import added_holding_keys, key_table
from parquetry.errors import CommitConflict, ParquetryError
from parquetry.store import LocalStore, MemoryStore
from parquetry.testing import FaultyStore

from .ops_oracle import assert_index_exact, orphan_data_files, rows

SCHEMA = pa.schema([("p", pa.int64()), ("k", pa.int64()), ("v", pa.string())])
NAMES = SCHEMA.names
Row = tuple[Any, ...]
LAYOUTS = {
    # name: (partition_on, indexed, on)
    "unpartitioned": ([], False, ["k"]),
    "indexed, partition not in key": (["p"], True, ["k"]),
    "partition not in key": (["p"], False, ["k"]),
    "partition in key": (["p"], True, ["p", "k"]),
}


def table(items: list[Row]) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(NAMES, r, strict=True)) for r in items], schema=SCHEMA)


def create(store: Any, layout: str, first: list[Row]) -> Dataset:
    partition_on, indexed, _ = LAYOUTS[layout]
    return Dataset.create(
        store, "u", table(first), partition_on=partition_on, secondary_indices=["k"] * indexed
    )


def merge(old: Counter[Row], data: list[Row], on: list[str]) -> Counter[Row]:
    """Serial upsert (update + insert) on Python rows; keys are unique in ``old``."""
    pos = [NAMES.index(c) for c in on]
    by_key = {tuple(r[i] for i in pos): r for r in data}
    out = Counter(r for r in old.elements() if tuple(r[i] for i in pos) not in by_key)
    return out + Counter(data)


def keys_once(ds: Dataset, on: list[str]) -> Counter[tuple[Any, ...]]:
    got = ds.read(columns=on)
    return Counter(zip(*(got.column(c).to_pylist() for c in on), strict=True))


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("order", ["a first", "b first"])
def test_two_stale_upserts_of_the_same_new_key_keep_it_once(layout: str, order: str) -> None:
    """Both read a version without key 5; the second to commit re-runs on the first's
    result and updates the row the first inserted instead of inserting it again."""
    store = MemoryStore()
    on = LAYOUTS[layout][2]
    create(store, layout, [(0, 1, "a")])
    a, b = Dataset.open(store, "u"), Dataset.open(store, "u")
    da, db = [(1, 5, "A"), (0, 1, "A")], [(1, 5, "B"), (1, 6, "B")]
    if order == "b first":
        (a, da), (b, db) = (b, db), (a, da)
    a.upsert(table(da), on=on)
    new = b.upsert(table(db), on=on)
    final = Dataset.open(store, "u")
    assert new.version == final.version == 2
    assert rows(final.read(columns=NAMES)) == merge(merge(Counter([(0, 1, "a")]), da, on), db, on)
    assert max(keys_once(final, on).values()) == 1
    # The re-run updated key 5 (and 1 when it is in the second upsert's data).
    assert final.history(limit=1)[0].metrics["rows_updated"] == 1 + (order == "b first")
    if LAYOUTS[layout][1]:
        assert_index_exact(final, "k")
    assert orphan_data_files(store, "u") == set()  # the stale attempt's files are gone


def test_only_concurrent_files_holding_a_key_conflict_and_the_conflict_names_them() -> None:
    store = MemoryStore()
    create(store, "indexed, partition not in key", [(0, 1, "a")])
    stale = Dataset.open(store, "u")
    # The same partition, other keys (one inside the data's key range): no conflict.
    Dataset.open(store, "u").upsert(table([(1, 7, "x"), (1, 3, "x")]), on=["k"])
    other = Dataset.open(store, "u").append(table([(1, 2, "y"), (2, 5, "y")]))
    data = table([(1, 5, "s"), (1, 4, "s")])
    keys = key_table(data, ["k"])
    added = [lbl for lbl in other.document.partitions if lbl not in stale.document.partitions]
    assert len(added) == 3
    held = added_holding_keys(stale, other.document, added, keys, ["k"])
    assert held == [lbl for lbl in added if lbl.startswith("p=2/")]
    with pytest.raises(CommitConflict, match="holding keys of this upsert") as info:
        _check_added(stale, keys, ["k"])(other.document, added)
    assert held[0] in str(info.value)
    assert info.value.key == other.document.partitions[held[0]][other.document.tables[0]]
    new = stale.upsert(data, on=["k"])
    assert rows(new.read(columns=NAMES)) == Counter(
        [(0, 1, "a"), (1, 7, "x"), (1, 3, "x"), (1, 2, "y"), (1, 5, "s"), (1, 4, "s")]
    )
    assert orphan_data_files(store, "u") == set()


def test_upsert_after_a_concurrent_append_of_its_key_updates_the_appended_row() -> None:
    """An append that committed first holds a key this upsert inserts: the upsert, committed
    after it, sees it (re-run), as in serial commit order."""
    store = MemoryStore()
    create(store, "partition not in key", [(0, 1, "a")])
    stale = Dataset.open(store, "u")
    Dataset.open(store, "u").append(table([(2, 5, "appended")]))
    final = stale.upsert(table([(1, 5, "up"), (1, 1, "up")]), on=["k"])
    assert rows(final.read(columns=NAMES)) == Counter([(1, 5, "up"), (1, 1, "up")])


UPSERTS = st.lists(
    st.tuples(
        st.lists(st.tuples(st.integers(0, 2), st.integers(0, 8)), max_size=5),
        st.sampled_from(["x", "y", "z"]),
    ),
    min_size=2,
    max_size=4,
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    upserts=UPSERTS,
    layout=st.sampled_from(sorted(LAYOUTS)),
    stale=st.lists(st.booleans(), min_size=4, max_size=4),
)
def test_stale_upserts_of_overlapping_keys_equal_the_serial_merge(
    upserts: list[tuple[list[tuple[int, int]], str]], layout: str, stale: list[bool]
) -> None:
    """Upserts of overlapping key sets, each from the initial version or the newest one,
    committed one after another: the result is the serial MERGE of the committed ones in
    commit order (each key once), whatever version each read."""
    on = LAYOUTS[layout][2]
    store = MemoryStore()
    first = [(0, 0, "init")]
    create(store, layout, first)
    snapshots = [Dataset.open(store, "u") for _ in upserts]
    expected = Counter(first)
    for i, (pairs, value) in enumerate(upserts):
        pos = [NAMES.index(c) for c in on]
        data: dict[tuple[Any, ...], Row] = {}
        for p, k in pairs:
            r = (p, k, value)
            data[tuple(r[j] for j in pos)] = r
        ds = snapshots[i] if stale[i] else Dataset.open(store, "u")
        try:
            ds.upsert(table(list(data.values())), on=on)
        except CommitConflict as exc:
            # A file this upsert rewrites was rewritten meanwhile (its input changed): not
            # committed, as the spec says; files added meanwhile are never the reason.
            if "concurrent commit removed" not in str(exc) or not stale[i]:
                raise
            continue
        expected = merge(expected, list(data.values()), on)
    final = Dataset.open(store, "u")
    assert rows(final.read(columns=NAMES)) == expected
    if LAYOUTS[layout][1]:
        assert_index_exact(final, "k")


def test_threads_upserting_overlapping_new_keys_leave_each_key_once() -> None:
    """4 threads, 5 rounds: each round all upsert overlapping sets of new keys at once
    (whoever commits second either re-runs by itself or, when a file it rewrites was
    rewritten, gets CommitConflict and runs again)."""
    store = MemoryStore()
    create(store, "indexed, partition not in key", [(0, -1, "init")])
    n, rounds = 4, 5
    barrier = threading.Barrier(n)
    errors: list[BaseException] = []

    def work(t: int) -> None:
        for r in range(rounds):
            barrier.wait()
            keys = [100 * r + t + j for j in range(3)]  # thread t overlaps t-1 and t+1
            try:
                while True:
                    try:
                        upsert(
                            Dataset.open(store, "u"),
                            table([(k % 3, k, f"t{t}") for k in keys]),
                            on=["k"],
                            max_retries=None,
                        )
                        break
                    except CommitConflict as exc:
                        # Another thread rewrote a file this one rewrites: run it again on
                        # the new version (files added meanwhile re-run it by themselves).
                        if "concurrent commit removed" not in str(exc):
                            raise
            except BaseException as exc:
                errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors
    final = Dataset.open(store, "u")
    got = keys_once(final, ["k"])
    expected = {(-1,)} | {
        (100 * r + t + j,) for r in range(rounds) for t in range(n) for j in range(3)
    }
    assert set(got) == expected
    assert max(got.values()) == 1
    assert_index_exact(final, "k")


CHILD = """
import sys
import pyarrow as pa
from parquetry.dataset import Dataset
from parquetry.dataset.upsert import upsert
from parquetry.errors import CommitConflict
from parquetry.store import LocalStore
store, me, rounds = LocalStore(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
for r in range(rounds):
    # Process 0 goes up, 1 down: in some rounds each one commits first.
    r = r if me == 0 else rounds - 1 - r
    keys = [10 * r + me + j for j in range(4)]
    data = pa.table({"p": [k % 3 for k in keys], "k": keys, "v": [f"proc{me}"] * 4})
    while True:
        try:
            upsert(Dataset.open(store, "u"), data, on=["k"], max_retries=None)
            break
        except CommitConflict as exc:
            assert "concurrent commit removed" in str(exc), exc
print("ok")
"""


def test_processes_upserting_overlapping_new_keys_leave_each_key_once(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "s")
    create(store, "partition not in key", [(0, -1, "init")])
    rounds = 8
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, str(tmp_path / "s"), str(me), str(rounds)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for me in (0, 1)
    ]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-2000:]
        assert out.strip() == "ok"
    final = Dataset.open(store, "u")
    got = keys_once(final, ["k"])
    assert set(got) == {(-1,)} | {
        (10 * r + me + j,) for r in range(rounds) for me in (0, 1) for j in range(4)
    }
    assert max(got.values()) == 1


def test_faulty_store_at_every_call_of_a_re_run_upsert() -> None:
    """A stale upsert whose key another upsert inserted meanwhile, the Nth store call failed
    for every N: the dataset is at the other upsert's version or the serial result, never
    with the key twice, and its index is exact."""
    base = [(0, 1, "a")]
    first, second = [(1, 5, "first")], [(2, 5, "second"), (0, 1, "second")]
    after_first = merge(Counter(base), first, ["k"])
    after_both = merge(after_first, second, ["k"])
    n = 0
    while True:
        n += 1
        inner = MemoryStore()
        create(inner, "indexed, partition not in key", base)
        faulty = FaultyStore(inner)
        stale = Dataset.open(faulty, "u")
        Dataset.open(inner, "u").upsert(table(first), on=["k"])
        faulty.fail_on = faulty.calls + n
        try:
            stale.upsert(table(second), on=["k"])
        except ParquetryError:
            assert faulty.failed
        if not faulty.failed:
            break
        after = Dataset.open(inner, "u")
        got = rows(after.read(columns=NAMES))
        assert got in (after_first, after_both), n
        assert_index_exact(after, "k")
    assert n > 5
