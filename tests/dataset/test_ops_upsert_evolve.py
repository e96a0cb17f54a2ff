"""Dataset.upsert(merge_schema=True): a source adding nullable columns or widening types
evolves the schema in the upsert's own commit (one version), under evolve_schema's rules."""

from __future__ import annotations

import contextlib
from typing import Any

import hypothesis.strategies as st
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings

from parquetry.dataset import Dataset
from parquetry.errors import ParquetryError, SchemaMismatch
from parquetry.store import MemoryStore
from parquetry.testing import FaultyStore

from .ops_oracle import assert_index_exact, rows

SCHEMA = pa.schema([("p", pa.int64()), ("k", pa.int64()), ("v", pa.string()), ("x", pa.int32())])


def _old(n: int = 8) -> pa.Table:
    return pa.table(
        {
            "p": [k % 2 for k in range(n)],
            "k": list(range(n)),
            "v": [f"v{k}" for k in range(n)],
            "x": pa.array(range(n), pa.int32()),
        },
        schema=SCHEMA,
    )


def _source(keys: list[int], big: bool = True) -> pa.Table:
    # x as int64 (widens int32), w a new nullable column.
    return pa.table(
        {
            "p": [k % 2 for k in keys],
            "k": keys,
            "v": [f"new{k}" for k in keys],
            "x": pa.array([k + (2**40 if big else 0) for k in keys], pa.int64()),
            "w": [float(k) if k % 3 else None for k in keys],
        }
    )


def _expected(old: pa.Table, source: pa.Table) -> Any:
    """MERGE (update + insert) on Python rows, old rows padded with w = None."""
    new_by_key = {r["k"]: r for r in source.to_pylist()}
    out = [{**r, "w": None} for r in old.to_pylist() if r["k"] not in new_by_key]
    out += list(new_by_key.values())
    return rows(pa.Table.from_pylist(out), ["p", "k", "v", "x", "w"])


def _create(store: Any) -> Dataset:
    ds = Dataset.create(store, "e", _old().slice(0, 4), partition_on=["p"], secondary_indices=["k"])
    return ds.append(_old().slice(4))


def test_merge_schema_upsert_adds_and_widens_in_one_commit() -> None:
    store = MemoryStore()
    ds = _create(store)
    source = _source([1, 2, 20, 21])
    with pytest.raises(SchemaMismatch, match="'w'"):
        ds.upsert(source, on=["k"])  # without merge_schema: refused like append
    new = ds.upsert(source, on=["k"], merge_schema=True)
    assert new.version == ds.version + 1, "one commit: schema and rows together"
    reopened = Dataset.open(store, "e")
    assert reopened.schema.field("x").type == pa.int64()
    assert reopened.schema.field("w").type == pa.float64()
    assert reopened.schema.field("w").nullable
    assert rows(reopened.read(), ["p", "k", "v", "x", "w"]) == _expected(_old(), source)
    entry = reopened.history(limit=1)[0]
    assert entry.operation == "upsert"
    assert entry.metrics["rows_updated"] == 2
    assert entry.metrics["rows_inserted"] == 2
    assert_index_exact(reopened, "k")
    # The previous version keeps its schema and rows.
    before = Dataset.open(store, "e", version=ds.version)
    assert before.schema.equals(SCHEMA)
    assert rows(before.read()) == rows(_old())


def test_merge_schema_refusals_commit_nothing() -> None:
    store = MemoryStore()
    ds = _create(store)
    # A new column not in the source's data is added nullable (old rows have no value for
    # it), as append(merge_schema=True) does: never refused, never non-nullable.
    strict = _source([1]).cast(
        pa.schema([*SCHEMA.remove(3), ("x", pa.int64()), pa.field("w", pa.float64(), False)])
    )
    other = Dataset.create(MemoryStore(), "n", _old())
    assert other.upsert(strict, on=["k"], merge_schema=True).schema.field("w").nullable
    # A new key column cannot be upserted on (it is not in the dataset).
    with pytest.raises(ParquetryError, match="'w'"):
        ds.upsert(strict, on=["w"], merge_schema=True)
    # A partition key cannot be widened (its values are typed in the paths).
    small = Dataset.create(
        store, "s", pa.table({"p": pa.array([1], pa.int32()), "k": [1]}), partition_on=["p"]
    )
    wide = pa.table({"p": pa.array([1], pa.int64()), "k": [1]})
    with pytest.raises(ParquetryError, match="'p'"):
        small.upsert(wide, on=["k"], merge_schema=True)
    # A lossy change is no widening.
    lossy = _source([1]).set_column(3, "x", pa.array(["1"]))
    with pytest.raises(SchemaMismatch):
        ds.upsert(lossy, on=["k"], merge_schema=True)
    assert Dataset.open(store, "e").version == ds.version
    assert Dataset.open(store, "s").version == small.version


def test_merge_schema_upsert_after_a_concurrent_append() -> None:
    """The stale handle's upsert is re-applied on the newer version: the appended row
    stays (w = None) and the schema is the evolution of the newer one."""
    store = MemoryStore()
    stale = _create(store)
    Dataset.open(store, "e").append(_old(10).slice(8))
    source = _source([1, 30])
    new = stale.upsert(source, on=["k"], merge_schema=True)
    assert new.version == stale.version + 2
    got = Dataset.open(store, "e")
    assert got.schema.field("w").type == pa.float64()
    assert rows(got.read(), ["p", "k", "v", "x", "w"]) == _expected(_old(10), source)
    assert_index_exact(got, "k")


@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    keys=st.lists(st.integers(0, 14), unique=True, max_size=8),
    fail_at=st.integers(1, 40),
)
def test_merge_schema_upsert_with_a_fault_is_old_or_new(keys: list[int], fail_at: int) -> None:
    """Oracle + FaultyStore: after a failed store call the dataset opens at the old version
    (old schema, old rows) or the new one (evolved schema, merged rows), never between."""
    inner = MemoryStore()
    ds = _create(inner)
    source = _source(keys, big=False)
    faulty = FaultyStore(inner, fail_on=fail_at, after=fail_at % 2 == 0)
    with contextlib.suppress(ParquetryError):
        Dataset.open(faulty, "e").upsert(source, on=["k"], merge_schema=True)
    got = Dataset.open(inner, "e")
    if got.version == ds.version:
        assert got.schema.equals(SCHEMA)
        assert rows(got.read()) == rows(_old())
    else:
        assert got.version == ds.version + 1
        assert rows(got.read(), ["p", "k", "v", "x", "w"]) == _expected(_old(), source)
        assert_index_exact(got, "k")
