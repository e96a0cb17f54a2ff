"""Row operations on a stale handle whose base version garbage collection expired, index
pieces included: delete_where/update_where raise BaseCollected (a CommitConflict naming the
versions), upsert runs again on the newest version; nothing is committed by a failure."""

from __future__ import annotations

import pyarrow as pa
import pytest

from parquetry.dataset import Dataset
from parquetry.dataset.staleread import BaseCollected
from parquetry.errors import CommitConflict
from parquetry.store import MemoryStore


def _rows(start: int, n: int) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table(
        {
            "p": pa.array([i % 2 for i in ids], pa.int64()),
            "id": pa.array(ids, pa.int64()),
            "k": pa.array([i % 700 for i in ids], pa.int64()),
        }
    )


def _stale_with_pieces() -> tuple[Dataset, Dataset]:
    """(a handle on a version whose index has pieces, the newest version after GC)."""
    store = MemoryStore()
    ds = Dataset.create(store, "ds", _rows(0, 2), partition_on=["p"], secondary_indices=["k"])
    ds.append(_rows(2, 1400)).checkpoint()
    old = Dataset.open(store, "ds")
    assert old.document.index_states["k"].pieces, "the index should have pieces"
    new = old.update_where([[("k", "==", 3)]], {"k": 4}).compact().checkpoint()
    new.garbage_collect(retention=0)
    return old, Dataset.open(store, "ds")


def test_delete_and_update_on_a_collected_base_are_a_conflict() -> None:
    old, new = _stale_with_pieces()
    for call, name in (
        (lambda: old.delete_where([[("k", "==", 3)]]), "delete_where"),
        (lambda: old.update_where([[("k", "==", 5)]], {"k": 6}), "update_where"),
    ):
        with pytest.raises(BaseCollected) as info:
            call()
        assert isinstance(info.value, CommitConflict)
        message = str(info.value)
        assert f"version {old.version}, which this {name} read" in message
        assert f"the newest version, {new.version}" in message
        assert "index piece" in message
    assert Dataset.open(new.store, "ds").version == new.version  # nothing committed


def test_upsert_on_a_collected_base_runs_on_the_newest_version() -> None:
    old, new = _stale_with_pieces()
    before = new.read()
    # Keys 4 (present in the newest version, 6 rows since the update) and 2000 (new).
    data = pa.table(
        {
            "p": pa.array([0, 1], pa.int64()),
            "id": pa.array([-1, -2], pa.int64()),
            "k": pa.array([4, 2000], pa.int64()),
        }
    )
    done = old.upsert(data, on=["p", "k"])
    assert done.version == new.version + 1
    after = done.read()
    # Oracle: the upsert applied to the newest version's rows.
    expected = {}
    for r in before.to_pylist():
        expected.setdefault((r["p"], r["k"]), []).append(r)
    for r in data.to_pylist():
        expected[(r["p"], r["k"])] = [r] * max(1, len(expected.get((r["p"], r["k"]), [])))
    want = sorted((r["p"], r["k"], r["id"]) for rs in expected.values() for r in rs)
    got = sorted((r["p"], r["k"], r["id"]) for r in after.to_pylist())
    assert got == want


def test_replace_where_on_a_collected_base_is_a_conflict() -> None:
    store = MemoryStore()
    old = Dataset.create(store, "ds", pa.table({"p": [1, 2], "a": [1, 2]}), partition_on=["p"])
    Dataset.open(store, "ds").update(pa.table({"p": [1], "a": [5]}), delete_scope=[{"p": 1}])
    Dataset.open(store, "ds").garbage_collect(retention=0)
    newest = Dataset.open(store, "ds").version
    # Before: read_file of the collected file claimed corruption (MetadataCorrupted).
    with pytest.raises(BaseCollected, match=r"data file .* of version 0, which this replace"):
        old.replace_where([[("a", "<", 3)]], pa.table({"p": [2], "a": [0]}))
    again = Dataset.open(store, "ds")
    assert again.version == newest
    assert sorted(again.read().column("a").to_pylist()) == [2, 5]
