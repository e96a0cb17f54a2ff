"""Restore racing garbage collection: GC may expire the very version a restore brings back.

A restore references that version's files again. GC runs here at three points of the
restore (right after its intent is written, during its file checks, right before its commit
point) with a zero retention that expires the target version. Either the restore fails
saying the version expired, leaving the dataset as it was, or it commits and every file of
the restored version is still there: never a committed version with deleted files (before
the fix, GC between the checks and the commit point deleted them).
"""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from parquetry.dataset import Dataset
from parquetry.dataset.gc import garbage_collect
from parquetry.errors import DatasetNotFound
from parquetry.store import MemoryStore, PutMode
from parquetry.store.base import ObjectMeta
from parquetry.store.wrappers import WrapperStore


class _GCAt(WrapperStore):
    """Runs one GC (retention 0, on the inner store) when the restore reaches ``point``."""

    def __init__(self, inner: MemoryStore, point: str) -> None:
        super().__init__(inner)
        self.point = point
        self.report: object = None

    def _gc(self) -> None:
        if self.report is None:
            self.report = garbage_collect(self.inner, "ds", retention=dt.timedelta(0))

    def _put(
        self, key: str, data: bytes | memoryview, mode: PutMode, expected: str | None
    ) -> ObjectMeta:
        meta = super()._put(key, data, mode, expected)
        if self.point == "intent" and "/_intents/" in key:
            self._gc()
        return meta

    def _head(self, key: str) -> ObjectMeta:
        if self.point == "head" and key.endswith(".parquet"):
            self._gc()
        return super()._head(key)


class _GCBeforeCommit(_GCAt):
    def _put(
        self, key: str, data: bytes | memoryview, mode: PutMode, expected: str | None
    ) -> ObjectMeta:
        if mode is PutMode.CREATE and "/_versions/" in key:
            self._gc()
        return super()._put(key, data, mode, expected)


def _two_versions() -> tuple[MemoryStore, pa.Table]:
    store = MemoryStore()
    old = pa.table({"p": [1, 1, 2], "v": [10, 11, 12]})
    Dataset.create(store, "ds", old, partition_on=["p"])
    Dataset.open(store, "ds").update(
        pa.table({"p": [3], "v": [99]}), delete_scope=[{"p": 1}, {"p": 2}]
    )
    return store, old


@pytest.mark.parametrize("point", ["intent", "head", "commit"])
def test_restore_racing_gc_never_commits_deleted_files(point: str) -> None:
    store, old = _two_versions()
    racing = _GCBeforeCommit(store, point) if point == "commit" else _GCAt(store, point)
    if point == "intent":
        # GC tombstoned version 0 before the restore looked at it: nothing is committed.
        with pytest.raises(DatasetNotFound, match="expired it while the restore ran"):
            Dataset.open(racing, "ds").restore(0)
        newest = Dataset.open(store, "ds")
        assert newest.version == 1
        assert newest.read().to_pydict() == {"p": [3], "v": [99]}
    else:
        restored = Dataset.open(racing, "ds").restore(0)
        assert restored.version == 2
        got = Dataset.open(store, "ds").read().sort_by("v")
        assert got.select(["p", "v"]).to_pydict() == old.to_pydict()
    assert racing.report is not None, "the GC hook never ran"
    assert 0 in racing.report.expired_versions  # type: ignore[attr-defined]
    # Later collections keep what the newest version references.
    garbage_collect(store, "ds", retention=dt.timedelta(0))
    assert Dataset.open(store, "ds").read().num_rows in (1, 3)
    assert not [m.key for m in store.list("ds/_intents")], "the restore's intent is released"
