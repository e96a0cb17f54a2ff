"""Attacks on the spilling index sinks a rewrite fills as it writes (indexsinks.py) when
its commit is retried: another writer commits between the rewrite's first attempt and its
retry (an append, a schema change widening the indexed column, another rewrite of other
partitions). The retry encodes the same sinks again on the newer base; with tiny spill
thresholds (runs spilled, several pieces per delta) the index must still equal the one
rebuilt from the data files, for every operation that rewrites."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parquetry.dataset import Dataset, ops
from parquetry.store import MemoryStore

from .test_index_pieces_attacks import _check, _chunk, rebuilt_index_pairs
from .test_index_pieces_attacks import tiny_thresholds as tiny_thresholds

WIDTH = 4  # k = (5 i) % 4: every value in many files


def _race(monkeypatch: pytest.MonkeyPatch, other: Callable[[], object], times: int) -> list[int]:
    """Run ``other`` (a concurrent commit) before each of the first ``times`` attempts of
    a rewrite's commit: each attempt then loses and is retried on a newer base."""
    real = ops._index_changes
    calls = [0]

    def racing(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        if calls[0] <= times:
            other()
        return real(*args, **kwargs)

    monkeypatch.setattr(ops, "_index_changes", racing)
    return calls


def _operation(ds: Dataset, op: str) -> Dataset:
    if op == "delete":
        return ds.delete_where([[("k", "==", 1)]])
    if op == "update":
        return ds.update_where([[("p", "==", 0)]], {"k": 3})
    if op == "upsert":
        data = _chunk(500, 3, WIDTH).set_column(1, "id", pa.array([0, 1, 502], pa.int64()))
        return ds.upsert(data, on=["id"])
    return ds.compact()


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    op=st.sampled_from(["delete", "update", "upsert", "compact"]),
    times=st.integers(1, 2),
    rows=st.integers(6, 20),
)
def test_a_retried_rewrite_commits_an_exact_index(
    tiny_thresholds: str, op: str, times: int, rows: int
) -> None:
    store = MemoryStore()
    ds = Dataset.create(
        store, "ds", _chunk(0, rows, WIDTH), partition_on=["p"], secondary_indices=["k"]
    )
    ds = ds.append(_chunk(100, 6, WIDTH))
    n = [0]

    def append() -> None:
        n[0] += 1
        Dataset.open(store, "ds").append(_chunk(1000 * n[0], 5, WIDTH))

    with pytest.MonkeyPatch.context() as mp:
        calls = _race(mp, append, times)
        ds = _operation(ds, op)
    assert calls[0] >= times + 1, calls  # the commit was retried
    _check(ds, WIDTH)
    assert n[0] == times


def test_a_retry_after_a_widening_schema_change_takes_the_files_values(
    tiny_thresholds: str,
) -> None:
    # A concurrent evolve_schema widened the indexed column (int32 -> int64) between the
    # attempts: the sinks hold int32 pairs, the retry must take the files' values instead.
    store = MemoryStore()
    table = _chunk(0, 12, WIDTH)
    table = table.set_column(2, "k", table.column("k").cast(pa.int32()))
    ds = Dataset.create(store, "ds", table, partition_on=["p"], secondary_indices=["k"])

    def widen() -> None:
        Dataset.open(store, "ds").evolve_schema(widen={"k": pa.int64()})

    with pytest.MonkeyPatch.context() as mp:
        calls = _race(mp, widen, 1)
        ds = ds.delete_where([[("id", "==", 3)]])
    assert calls[0] >= 2, calls  # the commit was retried on the widened schema
    fresh = Dataset.open(store, "ds")
    assert fresh.schema.field("k").type == pa.int64()
    pairs = fresh.index_pairs("k")
    got = set(
        zip(pairs.column("value").to_pylist(), pairs.column("label").to_pylist(), strict=True)
    )
    assert got == rebuilt_index_pairs(fresh, "k")
