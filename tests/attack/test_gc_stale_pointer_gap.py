"""GC with a stale kartothek pointer that names a version *several* commits behind the
head (each of the commits after it failed to publish the pointer), retention 0.

GC retained the pointer's version and the head but expired the versions between them. It
computes the keys retained versions need as one consecutive range (the first one's state
plus the later ones' changes) and their chains from the first one: the files the versions
in between added (still in the head) were deleted, and their entries turned into
tombstones the head's state is replayed through ("version 8 needs version 6, which is
gone"). Found by racing writers with failing pointer writes against checkpoints and GC.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parquetry.dataset import Dataset
from parquetry.errors import StoreUnavailable
from parquetry.store import LocalStore, PutMode, Store
from parquetry.store.base import ObjectMeta
from parquetry.store.wrappers import WrapperStore


class _PointerFails(WrapperStore):
    """Fails every put of the kartothek pointer while ``armed``."""

    def __init__(self, inner: Store):
        super().__init__(inner)
        self.armed = True

    def _put(
        self, key: str, data: bytes | memoryview, mode: PutMode, expected_version: str | None
    ) -> ObjectMeta:
        if self.armed and key.endswith(".by-dataset-metadata.json"):
            raise StoreUnavailable(f"injected: {key}", key=key)
        return self.inner._put(key, data, mode, expected_version)


def _data_files(root: Path) -> set[str]:
    return {
        p.relative_to(root).as_posix()
        for p in root.rglob("*.parquet")
        if "/table/" in p.relative_to(root).as_posix()
    }


def _head_files(store: Store) -> set[str]:
    ds = Dataset.open(store, "ds")
    return {key for files in ds.document.partitions.values() for key in files.values()}


def _chunk(start: int, n: int) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table({"p": [i % 2 for i in ids], "id": pa.array(ids, pa.int64())})


def _run(root: Path, before: int, stale: int, deletes: bool, indexed: bool) -> None:
    store = LocalStore(root, fsync=False)
    extra = {"secondary_indices": ["id"]} if indexed else {}
    ds = Dataset.create(store, "ds", _chunk(0, 4), partition_on=["p"], **extra)
    for k in range(1, before + 1):
        ds = ds.append(_chunk(10 * k, 4))
    failing = _PointerFails(store)
    expected = set(ds.read().column("id").to_pylist())
    for k in range(stale):
        try:
            handle = Dataset.open(failing, "ds")
            if deletes and k % 2:
                handle.delete_where([[("id", "==", 10 * (k + 1))]])
                expected.discard(10 * (k + 1))
            else:
                handle.append(_chunk(100 + 10 * k, 3))
                expected |= set(range(100 + 10 * k, 103 + 10 * k))
        except StoreUnavailable:
            pass  # the commit landed; its pointer did not
    for _ in range(2):
        Dataset.open(store, "ds").garbage_collect(retention=0)
        head = Dataset.open(store, "ds")
        assert set(head.read().column("id").to_pylist()) == expected
        if indexed:
            got = head.read(predicates=[[("id", "!=", -1)]]).column("id").to_pylist()
            assert set(got) == expected
    # Once the pointer moves on, nothing the stale pointer held stays on the store.
    Dataset.open(store, "ds").append(_chunk(1000, 1))
    Dataset.open(store, "ds").garbage_collect(retention=0)
    assert _data_files(root) == _head_files(store)
    assert set(Dataset.open(store, "ds").read().column("id").to_pylist()) == expected | {1000}


def test_the_versions_between_a_stale_pointer_and_the_head_keep_their_files(
    tmp_path: Path,
) -> None:
    _run(tmp_path, before=2, stale=3, deletes=False, indexed=False)


@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    before=st.integers(0, 3),
    stale=st.integers(1, 4),
    deletes=st.booleans(),
    indexed=st.booleans(),
)
def test_gc_under_a_stale_pointer_keeps_every_row_and_leaks_nothing_after(
    tmp_path_factory: object, before: int, stale: int, deletes: bool, indexed: bool
) -> None:
    root = tmp_path_factory.mktemp("gcgap")  # type: ignore[attr-defined]
    _run(root, before, stale, deletes, indexed)
