"""Compaction outputs are streamed (Store.open_writer): each is covered by a write intent
before it becomes visible, and an output that fails while it is being written leaves
nothing behind (no object, no temporary file, no intent entry), the dataset unchanged."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from parquetry.dataset import Dataset
from parquetry.dataset.intents import list_intents, read_intent
from parquetry.store import LocalStore, ObjectMeta, PutMode, Store, WrapperStore
from parquetry.store.writer import Upload
from parquetry.testing import FaultyStore, InjectedFault

ROWS = 40_000


def _dataset(store: Store) -> Dataset:
    """Six files of 40,000 rows (~330 KB each: random doubles): one output of ~2 MB, so
    the writer hands pieces (1 MiB) to the store while the output is being written."""
    rng = np.random.default_rng(3)
    ds = None
    for i in range(6):
        ids = pa.array(np.arange(i * ROWS, (i + 1) * ROWS, dtype=np.int64))
        t = pa.table({"id": ids, "x": rng.random(ROWS)})
        ds = Dataset.create(store, "c", t) if ds is None else ds.append(t)
    assert ds is not None
    return ds


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


class _Covered(Upload):
    def __init__(self, store: IntentChecking, key: str, inner: Upload):
        self.store, self.key, self.inner = store, key, inner

    def write(self, data: memoryview) -> None:
        self.inner.write(data)

    def commit(self) -> ObjectMeta:
        self.store.check_covered(self.key)
        self.store.committed.append(self.key)
        return self.inner.commit()

    def abort(self) -> None:
        self.inner.abort()


class IntentChecking(WrapperStore):
    """Checks, as each streamed object is about to become visible, that an intent lists it."""

    def __init__(self, inner: Store):
        super().__init__(inner)
        self.committed: list[str] = []

    def check_covered(self, key: str) -> None:
        uuid = key.split("/", 1)[0]
        keys: set[str] = set()
        for meta in list_intents(self.inner, uuid):
            state, _ = read_intent(self.inner, uuid, meta.key.rsplit("/", 1)[1][: -len(".json")])
            keys |= set(state.keys)
        assert key in keys, f"{key} becomes visible without an intent"

    def _open_upload(self, key: str, mode: PutMode, expected_version: str | None) -> Upload:
        return _Covered(self, key, self.inner._open_upload(key, mode, expected_version))


@pytest.mark.parametrize("binary_copy", [False, True])
def test_outputs_are_covered_by_an_intent_before_they_are_visible(
    tmp_path: Path, binary_copy: bool
) -> None:
    _dataset(LocalStore(tmp_path))
    store = IntentChecking(LocalStore(tmp_path))
    out = Dataset.open(store, "c").compact(target_file_size=8 << 20, binary_copy=binary_copy)
    assert len(store.committed) == len(out.plan().files) == 1
    assert out.read().num_rows == 6 * ROWS


@pytest.mark.parametrize("binary_copy", [False, True])
def test_a_stream_failing_leaves_nothing_behind(tmp_path: Path, binary_copy: bool) -> None:
    ds = _dataset(LocalStore(tmp_path))
    before = _files(tmp_path)
    # The first piece of the output fails, while it is being written: nothing is left, not
    # even an intent (recorded only before the commit).
    faulty = FaultyStore(LocalStore(tmp_path), fail_on=1, kinds=("write",))
    with pytest.raises(InjectedFault):
        Dataset.open(faulty, "c").compact(target_file_size=8 << 20, binary_copy=binary_copy)
    assert _files(tmp_path) == before
    # The commit fails (the intent, put 1, lists the key): no object, no temporary file;
    # the intent is garbage collection's, as for any write that failed.
    faulty = FaultyStore(LocalStore(tmp_path), fail_on=2, kinds=("put",))
    with pytest.raises(InjectedFault):
        Dataset.open(faulty, "c").compact(target_file_size=8 << 20, binary_copy=binary_copy)
    assert [f for f in _files(tmp_path) if "/_intents/" not in f] == before
    now = Dataset.open(LocalStore(tmp_path), "c")
    assert now.version == ds.version
    assert now.read().num_rows == 6 * ROWS
    out = now.compact(target_file_size=8 << 20, binary_copy=binary_copy)
    assert len(out.plan().files) == 1
    assert out.read().num_rows == 6 * ROWS
