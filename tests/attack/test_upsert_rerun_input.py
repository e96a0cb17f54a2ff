"""An upsert whose plan a concurrent commit made stale (it added files holding keys of the
data) runs again on the newest version. Data given as a RecordBatchReader, a generator or
any one-shot iterable was consumed by the first attempt: the re-run read no rows, committed
nothing and returned as if it had succeeded (the rows were lost). Every input kind must give
the rows a sequential upsert after the concurrent commits gives."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parquetry.dataset import Dataset, ops
from parquetry.store import MemoryStore

KINDS: dict[str, Callable[[pa.Table], Any]] = {
    "table": lambda t: t,
    "batch": lambda t: t.combine_chunks().to_batches()[0],
    "reader": lambda t: pa.RecordBatchReader.from_batches(t.schema, t.to_batches(2)),
    "generator": lambda t: (b for b in t.to_batches(2)),
    "iterator": lambda t: iter(t.to_batches(2)),
    "list": lambda t: t.to_batches(2),
}


def _rows(store: MemoryStore) -> dict[int, str]:
    table = Dataset.open(store, "ds").read()
    return dict(zip(table.column("id").to_pylist(), table.column("v").to_pylist(), strict=True))


def _table(rows: dict[int, str]) -> pa.Table:
    return pa.table({"id": pa.array(list(rows), pa.int64()), "v": pa.array(list(rows.values()))})


def _upsert_racing(store: MemoryStore, data: Any, concurrent: list[dict[int, str]]) -> list[int]:
    """Upsert ``data``; before each of its first commit attempts another writer appends
    one of ``concurrent`` (rows whose keys the data holds: the plan goes stale)."""
    real = ops._index_changes
    calls = [0]

    def racing(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        if calls[0] <= len(concurrent):
            Dataset.open(store, "ds").append(_table(concurrent[calls[0] - 1]))
        return real(*args, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ops, "_index_changes", racing)
        Dataset.open(store, "ds").upsert(data, on=["id"])
    return calls


def test_an_upsert_of_a_reader_re_run_after_a_concurrent_insert_keeps_its_rows() -> None:
    store = MemoryStore()
    Dataset.create(store, "ds", _table({1: "a", 2: "b"}))
    data = _table({2: "B", 3: "C", 4: "D"})
    reader = pa.RecordBatchReader.from_batches(data.schema, data.to_batches())
    calls = _upsert_racing(store, reader, [{3: "other"}])
    assert calls[0] >= 2  # the plan went stale and the upsert ran again
    assert _rows(store) == {1: "a", 2: "B", 3: "C", 4: "D"}


@settings(max_examples=25, deadline=None)
@given(
    kind=st.sampled_from(sorted(KINDS)),
    base=st.dictionaries(st.integers(0, 9), st.sampled_from("abc"), min_size=1, max_size=5),
    data=st.dictionaries(st.integers(0, 9), st.sampled_from("XYZ"), min_size=1, max_size=5),
    races=st.integers(0, 2),
)
def test_every_input_kind_upserts_as_a_sequential_upsert_after_the_race(
    kind: str, base: dict[int, str], data: dict[int, str], races: int
) -> None:
    store = MemoryStore()
    Dataset.create(store, "ds", _table(base))
    # Concurrent inserts of keys the data holds and the base does not (each one key).
    fresh = [k for k in data if k not in base][:races]
    concurrent = [{k: "concurrent"} for k in fresh]
    _upsert_racing(store, KINDS[kind](_table(data)), concurrent)
    want = dict(base)
    for rows in concurrent:
        want.update(rows)
    want.update(data)
    assert _rows(store) == want
