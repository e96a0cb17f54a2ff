"""Dataset.changes: the files each commit added and removed, read from entries."""

from __future__ import annotations

import datetime as dt
from collections import Counter

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parquetry.dataset import Dataset
from parquetry.dataset.changes import FileChange, files_of
from parquetry.dataset.metadata import encode_document
from parquetry.dataset.naming import metadata_key, version_key
from parquetry.errors import (
    DatasetNotFound,
    InvalidArgument,
    ParquetryError,
    VersionExpired,
    VersionNotFound,
)
from parquetry.store import MemoryStore, Store
from parquetry.testing import CountingStore


def _chunk(start: int, n: int) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table(
        {"p": pa.array([i % 3 for i in ids], pa.int64()), "id": pa.array(ids, pa.int64())}
    )


def _ids(table: pa.Table) -> Counter[int]:
    return Counter(table.column("id").to_pylist())


def _keys(ds: Dataset) -> dict[str, str]:
    return {label: f.key for label, f in files_of(ds.document).items()}


def _apply(ds_since: Dataset, feed_versions: tuple) -> dict[str, str]:  # type: ignore[type-arg]
    files = _keys(ds_since)
    for v in feed_versions:
        for f in v.removed:
            assert files.pop(f.label) == f.key
        for f in v.added:
            assert f.label not in files
            files[f.label] = f.key
    return files


OPS = st.sampled_from(["append", "overwrite", "replace", "delete", "compact", "restore"])


def _step(ds: Dataset, op: str, n: int) -> Dataset:
    if op == "append":
        return ds.append(_chunk(100 * n, 4))
    if op == "overwrite":  # kartothek's partition replace: partition p=1 gets new rows
        return ds.update(_chunk(100 * n + 1, 1).slice(0, 1), delete_scope=[{"p": 1}])
    if op == "replace":
        return ds.replace_where([[("p", "==", 2)]], None)
    if op == "delete":
        return ds.delete_where([[("id", "<", 100 * n - 150)]])
    if op == "compact":
        return ds.compact()
    return ds.restore(max(0, ds.version - 2))


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(OPS, min_size=1, max_size=7), data=st.data())
def test_changes_applied_to_since_give_until(ops: list[str], data: st.DataObject) -> None:
    """Oracle: the per-version changes of (v1, v2] applied to the files of v1 are the files
    of v2; the net added/removed files account for the rows exactly."""
    store = MemoryStore()
    ds = Dataset.create(store, "ds", _chunk(0, 6), partition_on=["p"])
    for n, op in enumerate(ops, start=1):
        ds = _step(ds, op, n)
    v2 = data.draw(st.integers(0, ds.version), label="until")
    v1 = data.draw(st.integers(-1, v2), label="since")
    feed = ds.changes(since=v1, until=v2)
    new = Dataset.open(store, "ds", version=v2)
    old_rows = Dataset.open(store, "ds", version=v1).read() if v1 >= 0 else None
    assert [v.version for v in feed.versions] == list(range(v1 + 1, v2 + 1))
    if v1 >= 0:
        assert _apply(Dataset.open(store, "ds", version=v1), feed.versions) == _keys(new)
    else:
        assert {f.label: f.key for f in feed.added} == _keys(new)
    before = _ids(old_rows) if old_rows is not None else Counter()
    removed = _ids(feed.read_added(files=feed.removed)) if feed.removed else Counter()
    assert before - removed + _ids(feed.read_added()) == _ids(new.read())
    assert _ids(feed.scan_added().read_all()) == _ids(feed.read_added())
    for v in feed.versions:
        info = Dataset.open(store, "ds", version=v.version).info
        assert info is not None
        assert v.operation == info.operation
        if v.operation != "restore":  # a restore records the rows of its whole state
            assert sum(f.rows or 0 for f in v.added) == info.rows_added
            assert sum(f.rows or 0 for f in v.removed) == info.rows_removed
        assert v.data_change == (v.operation != "compact" and bool(v.added or v.removed))


def test_changes_details_partitions_and_costs() -> None:
    store = CountingStore(MemoryStore())
    ds = Dataset.create(store, "ds", _chunk(0, 6), partition_on=["p"])
    for i in range(1, 6):
        ds = ds.append(_chunk(10 * i, 3))
    ds = ds.delete_where([[("p", "==", 0)]])
    store.reset()
    feed = ds.changes(since=3)
    # One GET per version walked, after the state of `since` (checkpoint + entries).
    walked = [k for kind, k in store.log if kind == "get" and "/_versions/" in k]
    assert [version_key("ds", n) for n in (4, 5, 6)] == walked[-3:]
    assert not any("/p=" in k for _, k in store.log)  # no data file read to find changes
    assert [(v.version, v.operation, v.appends_only) for v in feed.versions] == [
        (4, "append", True),
        (5, "append", True),
        (6, "delete", False),
    ]
    added = feed.versions[0].added
    assert all(isinstance(f, FileChange) and f.size and f.rows for f in added)
    assert sorted(dict(f.partition)["p"] for f in added) == [0, 1, 2]  # typed, from labels
    # p=0 files are removed by version 6: the net feed no longer adds those of 4 and 5.
    assert all(dict(f.partition)["p"] != 0 for f in feed.added)
    assert {dict(f.partition)["p"] for f in feed.removed} == {0}
    assert feed.read_added(columns=["id"]).column_names == ["id"]
    assert not feed.appends_only
    assert ds.changes(since=ds.version).versions == ()


def test_changes_errors_name_the_version() -> None:
    store = MemoryStore()
    ds = Dataset.create(store, "ds", _chunk(0, 6), partition_on=["p"])
    for i in range(1, 4):
        ds = ds.append(_chunk(10 * i, 3))
    with pytest.raises(VersionNotFound, match="no version 7"):
        ds.changes(since=1, until=7)
    with pytest.raises(InvalidArgument, match="since <= until"):
        ds.changes(since=3, until=1)
    ds.garbage_collect(retention=dt.timedelta(0))
    with pytest.raises(VersionExpired, match="version 1 of dataset 'ds' expired") as err:
        ds.changes(since=1)
    assert isinstance(err.value, DatasetNotFound)
    assert isinstance(err.value, ParquetryError)
    with pytest.raises(VersionExpired, match="version 0 of dataset 'ds' expired"):
        Dataset.open(store, "ds").changes(since=-1, until=2)
    assert ds.changes(since=ds.version).versions == ()


def _as_format_1(store: Store, newest: int) -> None:
    docs = {k: Dataset.open(store, "ds", version=k).document for k in range(newest + 1)}
    for k, doc in docs.items():
        store.put(version_key("ds", k), encode_document(doc))
    store.put(metadata_key("ds"), encode_document(docs[newest]))
    for meta in list(store.list("ds/_checkpoints")) + list(store.list("ds/_head")):
        store.delete(meta.key)


def test_format_1_versions_fall_back_to_a_state_diff() -> None:
    store = MemoryStore()
    ds = Dataset.create(store, "ds", _chunk(0, 6), partition_on=["p"])
    ds = ds.append(_chunk(10, 3)).delete_where([[("p", "==", 1)]])
    expected = {v.version: (len(v.added), len(v.removed)) for v in ds.changes(-1).versions}
    _as_format_1(store, 2)
    feed = Dataset.open(store, "ds").changes(-1)
    assert {v.version: (len(v.added), len(v.removed)) for v in feed.versions} == expected
    assert {v.source for v in feed.versions} == {"state diff"}
    assert _ids(feed.read_added()) == _ids(Dataset.open(store, "ds").read())


def test_a_file_collected_after_planning_raises_version_expired() -> None:
    """GC racing a reader: the feed was planned, then the file went (as a GC with a retention
    shorter than the reader's pause deletes it): an error naming the file, never fewer rows."""
    store = MemoryStore()
    ds = Dataset.create(store, "ds", _chunk(0, 6), partition_on=["p"]).append(_chunk(10, 3))
    feed = ds.changes(since=0)
    gone = feed.added[0]
    store.delete(gone.key)
    with pytest.raises(VersionExpired, match=f"data file {gone.key} .* garbage collected"):
        feed.read_added()
    with pytest.raises(VersionExpired, match="garbage collected"):
        feed.scan_added().read_all()
