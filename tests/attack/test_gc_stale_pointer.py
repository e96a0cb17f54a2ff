"""A kartothek pointer that names an older version than the head: a commit whose pointer
could not be published (the commit itself landed), or the pointer policy ``manual`` (the
pointer moves only at checkpoints; ``auto`` above 24 KiB likewise), then garbage collection
(retention 0).

GC kept the files the stale pointer references (kartothek readers use them) but turned the
pointer's version into a tombstone: no later GC knew those files any more, and they stayed
on the store for ever, however often the pointer moved on and GC ran again. Found by the
rewrite-worker fault attack (tests/attack/test_rewrite_workers.py).
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from parquetry.dataset import Dataset
from parquetry.errors import StoreUnavailable
from parquetry.store import LocalStore, PutMode, Store
from parquetry.store.base import ObjectMeta
from parquetry.store.wrappers import WrapperStore


class _PointerFails(WrapperStore):
    """Fails the next put of the kartothek pointer."""

    def __init__(self, inner: Store):
        super().__init__(inner)
        self.armed = True

    def _put(
        self, key: str, data: bytes | memoryview, mode: PutMode, expected_version: str | None
    ) -> ObjectMeta:
        if self.armed and key.endswith(".by-dataset-metadata.json"):
            self.armed = False
            raise StoreUnavailable(f"injected: {key}", key=key)
        return self.inner._put(key, data, mode, expected_version)


def _data_files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*.parquet")}


def _head_files(store: Store) -> set[str]:
    ds = Dataset.open(store, "ds")
    return {key for files in ds.document.partitions.values() for key in files.values()}


def test_files_a_manual_pointer_kept_are_collected_after_the_next_checkpoint(
    tmp_path: Path,
) -> None:
    store = LocalStore(tmp_path, fsync=False)
    ds = Dataset.create(
        store, "ds", pa.table({"id": pa.array(range(10), pa.int64())}), pointer_policy="manual"
    )
    for k in range(1, 4):
        ds = ds.append(pa.table({"id": pa.array(range(10 * k, 10 * k + 10), pa.int64())}))
    ds = ds.compact(target_file_size=1 << 20)
    ds.garbage_collect(retention=0)
    assert _data_files(tmp_path) > _head_files(store)  # the pointer's files stay
    ds.checkpoint()
    Dataset.open(store, "ds").garbage_collect(retention=0)
    assert _data_files(tmp_path) - {"ds/_common_metadata"} == _head_files(store)
    assert Dataset.open(store, "ds").read().num_rows == 40


@pytest.mark.parametrize("operation", ["delete", "compact"])
def test_files_a_stale_pointer_kept_are_collected_once_it_moves_on(
    tmp_path: Path, operation: str
) -> None:
    store = LocalStore(tmp_path, fsync=False)
    ds = Dataset.create(store, "ds", pa.table({"id": pa.array(range(10), pa.int64())}))
    for k in range(1, 4):
        ds = ds.append(pa.table({"id": pa.array(range(10 * k, 10 * k + 10), pa.int64())}))
    failing = Dataset.open(_PointerFails(store), "ds")
    try:
        if operation == "delete":
            failing.delete_where([[("id", "in", [3, 13, 23])]])
        else:
            failing.compact(target_file_size=1 << 20)
    except StoreUnavailable:
        pass  # whether the failure is reported or not, the commit itself landed
    head = Dataset.open(store, "ds")
    assert head.version == ds.version + 1
    head.garbage_collect(retention=0)
    # The pointer still names the previous version: its files stay for kartothek readers.
    assert _data_files(tmp_path) > _head_files(store)
    head = head.append(pa.table({"id": pa.array([99], pa.int64())}))  # moves the pointer on
    Dataset.open(store, "ds").garbage_collect(retention=0)
    assert _data_files(tmp_path) - {"ds/_common_metadata"} == _head_files(store)
    assert sorted(Dataset.open(store, "ds").read().column("id").to_pylist())[-1] == 99
