"""Row operations racing garbage collection (retention 0) between their plan and a read.

An upsert, delete_where or update_where plans on its handle's version and then reads the
files it matched. If a newer version removed such a file and GC (retention 0) runs in
between, the file is gone. Nothing is corrupted: the operation's base went stale. Before
the fix this raised ``MetadataCorrupted("data file ... is missing")``, which sends a user
towards a repair or a restore. Now: upsert runs again on the newest version (its input is
complete), delete/update raise a retryable CommitConflict saying the base version was
garbage collected; a plain read of that version raises VersionExpired; a file missing from
the newest version still is MetadataCorrupted.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import pyarrow as pa
import pytest

from parquetry.dataset import Dataset
from parquetry.dataset.gc import garbage_collect
from parquetry.dataset.staleread import BaseCollected
from parquetry.errors import CommitConflict, MetadataCorrupted, VersionExpired
from parquetry.store import MemoryStore
from parquetry.store.base import ObjectMeta
from parquetry.store.wrappers import WrapperStore


class _GCOnRead(WrapperStore):
    """Runs one GC (retention 0, on the inner store) on the ``at``-th data file read."""

    def __init__(self, inner: MemoryStore, at: int) -> None:
        super().__init__(inner)
        self.at, self.reads = at, 0
        self.report: object = None

    def _hook(self, key: str) -> None:
        if "/table/" in key and key.endswith(".parquet") and self.report is None:
            self.reads += 1
            if self.reads == self.at:
                self.report = garbage_collect(self.inner, "ds", retention=dt.timedelta(0))

    def _get(self, key: str) -> bytes:
        self._hook(key)
        return super()._get(key)

    def _get_range(self, key: str, start: int, end: int) -> bytes:
        self._hook(key)
        return super()._get_range(key, start, end)

    def _get_ranges(self, key: str, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        self._hook(key)
        return super()._get_ranges(key, ranges)

    def _head(self, key: str) -> ObjectMeta:
        self._hook(key)
        return super()._head(key)


def _stale(at: int) -> tuple[MemoryStore, _GCOnRead, Dataset]:
    """A handle on version 0; version 1 (a delete) rewrote partition p=0's file."""
    store = MemoryStore()
    data = pa.table({"p": [0, 0, 0, 1], "id": [0, 1, 2, 10], "v": ["a", "b", "c", "d"]})
    Dataset.create(store, "ds", data, partition_on=["p"])
    racing = _GCOnRead(store, at)
    stale = Dataset.open(racing, "ds")
    Dataset.open(store, "ds").delete_where([[("id", "==", 2)]])
    return store, racing, stale


def _rows(store: MemoryStore) -> list[tuple[int, str]]:
    t = Dataset.open(store, "ds").read().sort_by("id")
    return list(zip(t.column("id").to_pylist(), t.column("v").to_pylist(), strict=True))


@pytest.mark.parametrize("at", [1, 2])  # GC at the key scan's read, at the rewrite's read
def test_upsert_racing_gc_runs_again_on_the_newest_version(at: int) -> None:
    store, racing, stale = _stale(at)
    new = pa.table({"p": [0, 1], "id": [0, 11], "v": ["A", "e"]})
    out = stale.upsert(new, on=["id"])
    assert racing.report is not None, "the GC hook never ran"
    assert 0 in racing.report.expired_versions  # type: ignore[attr-defined]
    assert out.version == 2
    assert _rows(store) == [(0, "A"), (1, "b"), (10, "d"), (11, "e")]


@pytest.mark.parametrize("operation", ["delete", "update"])
def test_delete_and_update_racing_gc_conflict_and_change_nothing(operation: str) -> None:
    store, racing, stale = _stale(1)
    run = {
        "delete": lambda: stale.delete_where([[("id", "==", 1)]]),
        "update": lambda: stale.update_where([[("id", "==", 1)]], set={"v": "B"}),
    }[operation]
    with pytest.raises(CommitConflict, match="garbage collected while") as caught:
        run()
    assert isinstance(caught.value, BaseCollected)
    assert not isinstance(caught.value, MetadataCorrupted)
    assert caught.value.key is not None
    assert "/p=0/" in caught.value.key
    assert "of version 0" in str(caught.value)
    assert "run it again" in str(caught.value)
    assert racing.report is not None
    assert Dataset.open(store, "ds").version == 1
    assert _rows(store) == [(0, "a"), (1, "b"), (10, "d")]
    # Retried on the newest version, as the message says, it succeeds.
    Dataset.open(store, "ds").delete_where([[("id", "==", 1)]])
    assert _rows(store) == [(0, "a"), (10, "d")]


@pytest.mark.parametrize("how", ["read", "scan"])
def test_reading_a_version_gc_collects_meanwhile_says_it_expired(how: str) -> None:
    store, racing, stale = _stale(1)
    with pytest.raises(VersionExpired, match="version 0 was garbage collected while") as caught:
        stale.read() if how == "read" else list(stale.scan())
    assert caught.value.key is not None
    assert "/p=0/" in caught.value.key
    assert "the newest version is 1" in str(caught.value)
    assert racing.report is not None
    assert _rows(store) == [(0, "a"), (1, "b"), (10, "d")]


def test_a_file_missing_from_the_newest_version_still_is_metadata_corrupted() -> None:
    store = MemoryStore()
    data = pa.table({"p": [0, 0, 1], "id": [0, 1, 10], "v": ["a", "b", "d"]})
    ds = Dataset.create(store, "ds", data, partition_on=["p"])
    key = next(k for k in ds.document.partitions.values() for k in k.values() if "/p=0/" in k)
    store.delete(key)
    with pytest.raises(MetadataCorrupted, match="is missing"):
        Dataset.open(store, "ds").delete_where([[("id", "==", 1)]])
    with pytest.raises(MetadataCorrupted, match="is missing"):
        Dataset.open(store, "ds").read()
    with pytest.raises(MetadataCorrupted, match="is missing"):
        list(Dataset.open(store, "ds").scan())
    with pytest.raises(MetadataCorrupted, match="is missing"):
        Dataset.open(store, "ds").upsert(pa.table({"p": [0], "id": [0], "v": ["A"]}), on=["id"])
