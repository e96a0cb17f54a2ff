"""Attacks on Dataset.changes(since, until): row operations (upsert, update_where,
delete_where), txn appends, checkpoints and garbage collection between the versions walked.
Oracle: the states themselves. Either the feed is exact (its changes applied to the files
of ``since`` give the files of ``until``, and its rows account for theirs), or a version in
the range was expired and the feed raises VersionExpired: never a partial answer."""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parquetry.dataset import Dataset
from parquetry.dataset.changes import files_of
from parquetry.errors import VersionExpired
from parquetry.store import MemoryStore


def _chunk(start: int, n: int) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table(
        {
            "p": pa.array([i % 3 for i in ids], pa.int64()),
            "id": pa.array(ids, pa.int64()),
            "v": pa.array([0] * n, pa.int64()),
        }
    )


def _ids(table: pa.Table) -> Counter[tuple[int, int]]:
    return Counter(zip(table.column("id").to_pylist(), table.column("v").to_pylist(), strict=True))


def _keys(ds: Dataset) -> dict[str, str]:
    return {label: f.key for label, f in files_of(ds.document).items()}


OPS = st.sampled_from(
    ["append", "txn", "upsert", "update", "delete", "compact", "restore", "checkpoint", "gc"]
)


def _step(ds: Dataset, op: str, n: int) -> Dataset:
    if op == "append":
        return ds.append(_chunk(100 * n, 4))
    if op == "txn":  # the second append of the same batch commits nothing
        ds = ds.append(_chunk(100 * n, 3), txn=("app", n))
        return ds.append(_chunk(100 * n + 50, 3), txn=("app", n))
    if op == "upsert":  # one key updated, one inserted
        data = _chunk(100 * (n - 1), 1).set_column(2, "v", pa.array([n], pa.int64()))
        return ds.upsert(pa.concat_tables([data, _chunk(100 * n + 7, 1)]), on=["id"])
    if op == "update":
        return ds.update_where([[("p", "==", 1)]], {"v": n})
    if op == "delete":
        return ds.delete_where([[("id", "<", 100 * n - 150)]])
    if op == "compact":
        return ds.compact()
    if op == "restore":
        try:
            return ds.restore(max(0, ds.version - 2))
        except VersionExpired:
            return ds
    if op == "checkpoint":
        return ds.checkpoint()
    ds.garbage_collect(retention=0)
    return Dataset.open(ds.store, ds.uuid)


def _live(store: MemoryStore, version: int) -> bool:
    try:
        Dataset.open(store, "ds", version=version)
    except VersionExpired:
        return False
    return True


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(OPS, min_size=1, max_size=14), data=st.data())
def test_changes_are_exact_or_expired_never_partial(ops: list[str], data: st.DataObject) -> None:
    store = MemoryStore()
    ds = Dataset.create(store, "ds", _chunk(0, 6), partition_on=["p"])
    for n, op in enumerate(ops, start=1):
        ds = _step(ds, op, n)
    v2 = data.draw(st.integers(0, ds.version), label="until")
    v1 = data.draw(st.integers(-1, v2), label="since")
    expired = not all(_live(store, v) for v in range(max(v1, 0), v2 + 1))
    try:
        feed = Dataset.open(store, "ds").changes(since=v1, until=v2)
        rows_added = feed.read_added()
        rows_removed = feed.read_added(files=feed.removed) if feed.removed else None
    except VersionExpired:
        assert expired, f"VersionExpired for live versions ({v1}, {v2}]"
        return
    assert not expired, f"a feed over expired versions ({v1}, {v2}] was answered"
    new = Dataset.open(store, "ds", version=v2)
    assert [v.version for v in feed.versions] == list(range(v1 + 1, v2 + 1))
    files = _keys(Dataset.open(store, "ds", version=v1)) if v1 >= 0 else {}
    for v in feed.versions:
        for f in v.removed:
            assert files.pop(f.label) == f.key
        for f in v.added:
            assert f.label not in files
            files[f.label] = f.key
    assert files == _keys(new)
    before = _ids(Dataset.open(store, "ds", version=v1).read()) if v1 >= 0 else Counter()
    removed = _ids(rows_removed) if rows_removed is not None else Counter()
    assert before - removed + _ids(rows_added) == _ids(new.read())


def test_opening_an_expired_version_says_it_expired() -> None:
    # It raised the generic DatasetNotFound, which a stream cannot tell from a dataset
    # that does not exist (VersionExpired is its subclass: callers catching it still do).
    store = MemoryStore()
    ds = Dataset.create(store, "ds", _chunk(0, 3)).append(_chunk(10, 3))
    ds.garbage_collect(retention=0)
    with pytest.raises(VersionExpired, match="expired"):
        Dataset.open(store, "ds", version=0)
