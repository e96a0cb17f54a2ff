"""16 concurrent writers x 5 appends: every append is present, 80 commits after creation."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest

from parquetry.dataset import Dataset
from parquetry.dataset.gc import referenced_keys
from parquetry.dataset.versions import read_pointer
from parquetry.store import LocalStore, MemoryStore, Store
from parquetry.store.base import ObjectMeta, PutMode
from parquetry.store.wrappers import WrapperStore

WRITERS = 16
APPENDS = 5


def _check(store: Store, uuid: str) -> None:
    ds = Dataset.open(store, uuid)
    values = sorted(ds.read()["w"].to_pylist())
    assert values == sorted([-1] + [w * 100 + i for w in range(WRITERS) for i in range(APPENDS)])
    hist = ds.versions()
    assert [v.number for v in hist] == list(range(WRITERS * APPENDS + 1))
    assert sum(v.operation == "append" for v in hist) == WRITERS * APPENDS
    assert ds.version == WRITERS * APPENDS
    # the index saw every append too
    assert ds.read(predicates=[[("k", "==", 7)]]).num_rows == sum(
        1 for w in range(WRITERS) for i in range(APPENDS) if (w * 100 + i) % 13 == 7
    )


def _row(value: int) -> pa.Table:
    return pa.table({"p": [value % 3], "k": [value % 13], "w": [value]})


def _threads(store: Store, uuid: str) -> None:
    Dataset.create(
        store,
        uuid,
        _row(-1).set_column(1, "k", pa.array([99])),
        partition_on=["p"],
        secondary_indices=["k"],
    )
    errors: list[BaseException] = []
    start = threading.Barrier(WRITERS)

    def writer(w: int) -> None:
        try:
            start.wait()
            for i in range(APPENDS):
                Dataset.open(store, uuid).append(_row(w * 100 + i))
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(WRITERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    _check(store, uuid)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["local", "s3"])
def test_concurrent_thread_appends(kind: str, store_factory: Callable[[str], Store]) -> None:
    _threads(store_factory(kind), "conc")


WORKER = textwrap.dedent(
    """
    import sys
    import pyarrow as pa
    from parquetry.dataset import Dataset
    from parquetry.store import LocalStore
    store, w = LocalStore(sys.argv[1], fsync=False), int(sys.argv[2])
    for i in range(5):
        v = w * 100 + i
        Dataset.open(store, "procs").append(
            pa.table({"p": [v % 3], "k": [v % 13], "w": [v]}))
    print("appended", flush=True)
    # Leave without interpreter finalization: pyarrow may abort a process there, after all
    # its work, when a native thread pool is torn down (apache/arrow#34314, open).
    import os
    os._exit(0)
    """
)


@pytest.mark.slow
def test_concurrent_process_appends_on_local_disk(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "s", fsync=False)
    Dataset.create(
        store,
        "procs",
        _row(-1).set_column(1, "k", pa.array([99])),
        partition_on=["p"],
        secondary_indices=["k"],
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(store.root), str(w)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for w in range(WRITERS)
    ]
    # Wait for every worker before judging any, so none outlives the test.
    outputs = [p.communicate(timeout=300) for p in procs]
    for p, (out, err) in zip(procs, outputs, strict=True):
        assert (p.returncode, out.decode().strip()) == (0, "appended"), err.decode()[-2000:]
    _check(store, "procs")


class _RivalFirst(WrapperStore):
    """Before each of the first ``times`` version creations, a rival append takes the slot."""

    def __init__(self, inner: Store, times: int):
        super().__init__(inner)
        self.times = times
        self.rivals = 0

    def _put(
        self, key: str, data: bytes | memoryview, mode: PutMode, expected: str | None
    ) -> ObjectMeta:
        if mode is PutMode.CREATE and "/_versions/" in key and self.rivals < self.times:
            self.rivals += 1
            Dataset.open(self.inner, "lose").append(_row(1000 + self.rivals))
        return super()._put(key, data, mode, expected)


def test_an_append_losing_many_races_in_a_row_still_commits() -> None:
    """Pure contention never fails an append (it gave up after 64 lost races before)."""
    store = MemoryStore()
    Dataset.create(store, "lose", _row(-1), partition_on=["p"], secondary_indices=["k"])
    rival = _RivalFirst(store, 70)
    ds = Dataset.open(rival, "lose").append(_row(7))
    assert rival.rivals == 70
    assert ds.version == 71
    values = sorted(Dataset.open(store, "lose").read()["w"].to_pylist())
    assert values == sorted([-1, 7] + [1000 + i for i in range(1, 71)])
    assert Dataset.open(store, "lose").read(predicates=[[("k", "==", 7)]]).num_rows == sum(
        1 for v in [-1, 7, *range(1001, 1071)] if v % 13 == 7
    )
    # Lost attempts write no index object (format 2: the delta is inline in the entry);
    # everything under _indices/ is named by some version's index state.
    referenced = {
        key
        for n in range(72)
        for key in referenced_keys(Dataset.open(store, "lose", version=n).document)
    }
    assert {m.key for m in store.list("lose/_indices")} <= referenced
    # kartothek's index files are written with the pointer only (not by attempts).
    pointer = read_pointer(store, "lose")[0]
    assert set(pointer.indices.values()) <= {m.key for m in store.list("lose/indices")}
    assert list(store.list("lose/_intents")) == []
