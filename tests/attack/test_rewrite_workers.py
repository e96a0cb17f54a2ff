"""Attacks on the row operations' concurrent rewrite (rewrite_walk, two small files at a time
in worker threads): a store failing its Nth call of any kind, a corrupt input among many,
KeyboardInterrupt and MemoryError raised in a worker, and random store latency (workers
finishing in any order). Oracle: the operation commits exactly the expected rows or
nothing; after an error, garbage collection (retention 0) leaves only the files of the
head; plans and metrics do not depend on which worker finished first.
"""

from __future__ import annotations

import json
import random
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from parquetry.dataset import Dataset
from parquetry.errors import ParquetryError
from parquetry.store import LocalStore, Store
from parquetry.store.wrappers import WrapperStore
from parquetry.testing import FaultyStore
from parquetry.testing.stores import KINDS

FILES = 8


def _batch(k: int) -> pa.Table:
    ids = range(10 * k, 10 * k + 10)
    return pa.table({"id": pa.array(ids, pa.int64()), "v": [f"r{i}" for i in ids]})


def _dataset(store: Store) -> Dataset:
    ds = Dataset.create(store, "ds", _batch(0))
    for k in range(1, FILES):
        ds = ds.append(_batch(k))
    return ds


def _ids(ds: Dataset) -> list[int]:
    return sorted(ds.read().column("id").to_pylist())


def _files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*.parquet")}


def _head_files(store: Store) -> set[str]:
    ds = Dataset.open(store, "ds")
    return {key for files in ds.document.partitions.values() for key in files.values()}


def _pointer_files(root: Path) -> set[str]:
    """Files of the version the kartothek pointer names: a commit whose pointer put failed
    leaves it at an older version, whose files GC keeps for kartothek readers."""
    pointer = json.loads((root / "ds.by-dataset-metadata.json").read_bytes())
    return {key for p in pointer["partitions"].values() for key in p["files"].values()}


def _intent_files(root: Path) -> set[str]:
    return {
        key
        for path in (root / "ds" / "_intents").glob("*.json")
        for key in json.loads(path.read_bytes()).get("keys", [])
        if json.loads(path.read_bytes()).get("state") == "open"
    }


def _op(ds: Dataset, name: str) -> Dataset:
    if name == "delete":
        return ds.delete_where([[("id", "in", [3, 15, 27, 41, 55, 69])]])
    if name == "update":
        return ds.update_where([[("id", "<", 45)]], {"v": "u"})
    return ds.upsert(
        pa.table({"id": pa.array([5, 25, 45, 100], pa.int64()), "v": ["a"] * 4}), on=["id"]
    )


def _expected(name: str) -> list[int]:
    all_ids = list(range(10 * FILES))
    if name == "delete":
        return sorted(set(all_ids) - {3, 15, 27, 41, 55, 69})
    if name == "update":
        return all_ids
    return sorted([*all_ids, 100])


class _Slow(WrapperStore):
    """Random latency on data file reads: the two workers finish in any order."""

    def __init__(self, inner: Store, seed: int):
        super().__init__(inner)
        self.rng = random.Random(seed)
        self.lock = threading.Lock()

    def _pause(self, key: str) -> None:
        if key.endswith(".parquet"):
            with self.lock:
                delay = self.rng.choice([0.0, 0.03])
            time.sleep(delay)

    def _get(self, key: str) -> bytes:
        self._pause(key)
        return self.inner._get(key)

    def _read_buffer(self, key: str) -> Any:
        self._pause(key)
        return self.inner._read_buffer(key)

    def _get_range(self, key: str, start: int, end: int) -> bytes:
        self._pause(key)
        return self.inner._get_range(key, start, end)


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@example(name="delete", fail_on=4, kind="put")  # the pointer's put fails: it stays behind
@given(
    name=st.sampled_from(["delete", "update", "upsert"]),
    fail_on=st.integers(1, 60),
    kind=st.sampled_from([None, "get", "put", "write", "head"]),
)
def test_a_store_failing_in_a_worker_commits_all_or_nothing_and_gc_cleans_up(
    tmp_path_factory: pytest.TempPathFactory, name: str, fail_on: int, kind: str | None
) -> None:
    root = tmp_path_factory.mktemp("rw")
    base = LocalStore(root, fsync=False)
    ds = _dataset(base)
    version = ds.version
    faulty = FaultyStore(base, fail_on=fail_on, kinds=(kind,) if kind else KINDS)
    try:
        done = _op(Dataset.open(faulty, "ds"), name)
    except ParquetryError:
        done = Dataset.open(base, "ds")
        if done.version == version:
            assert _ids(done) == list(range(10 * FILES))
        else:  # the commit landed, only its acknowledgement (or what follows it) failed
            assert _ids(done) == _expected(name)
    else:
        assert _ids(Dataset.open(base, "ds")) == _expected(name)
        assert done.version > version
    Dataset.open(base, "ds").garbage_collect(retention=0)
    # Left: the head's files, and outputs of a failed commit whose write intent is still
    # open (GC cannot tell them from a writer in flight until the intent's lease ends).
    left = _files(root) - {"ds/_common_metadata"} - _head_files(base) - _pointer_files(root)
    assert left <= _intent_files(root)
    # A commit moves a stale pointer on (a failed pointer publication); then GC leaves
    # nothing else either.
    Dataset.open(base, "ds").append(_batch(FILES)).garbage_collect(retention=0)
    left = _files(root) - {"ds/_common_metadata"} - _head_files(base)
    assert left <= _intent_files(root)


class _FailingRead(WrapperStore):
    """Raises ``error`` instead of the Nth read of a data file (in a rewrite worker)."""

    def __init__(self, inner: Store, n: int, error: type[BaseException]):
        super().__init__(inner)
        self.n, self.error, self.lock = n, error, threading.Lock()

    def _fail(self, key: str) -> None:
        if key.endswith(".parquet"):
            with self.lock:
                self.n -= 1
                if self.n == 0:
                    raise self.error(key)

    def _get(self, key: str) -> bytes:
        self._fail(key)
        return self.inner._get(key)

    def _read_buffer(self, key: str) -> Any:
        self._fail(key)
        return self.inner._read_buffer(key)

    def _get_range(self, key: str, start: int, end: int) -> bytes:
        self._fail(key)
        return self.inner._get_range(key, start, end)

    def _get_ranges(self, key: str, ranges: Any) -> list[bytes]:
        self._fail(key)
        return self.inner._get_ranges(key, ranges)


@pytest.mark.parametrize("error", [KeyboardInterrupt, MemoryError])
def test_an_interrupt_in_a_worker_commits_nothing_and_gc_cleans_up(
    tmp_path: Path, error: type[BaseException]
) -> None:
    base = LocalStore(tmp_path, fsync=False)
    ds = _dataset(base)
    for n in (1, 2, 4, 5):  # update_where id < 45 reads 5 files
        with pytest.raises(error):
            _op(Dataset.open(_FailingRead(base, n, error), "ds"), "update")
        assert Dataset.open(base, "ds").version == ds.version
    Dataset.open(base, "ds").garbage_collect(retention=0)
    assert _files(tmp_path) - {"ds/_common_metadata"} == _head_files(base)
    assert _ids(Dataset.open(base, "ds")) == list(range(10 * FILES))


def test_plans_and_metrics_do_not_depend_on_which_worker_finishes_first(tmp_path: Path) -> None:
    results: set[Any] = set()
    rows: set[Any] = set()
    for seed in range(6):
        base = LocalStore(tmp_path / str(seed), fsync=False)
        _dataset(base)
        slow = _Slow(base, seed)
        ds = Dataset.open(slow, "ds").update_where([[("id", "<", 45)]], {"v": "u"})
        results.add(repr(ds.history(limit=1)[0].metrics))
        rows.add(repr(sorted(ds.read().to_pylist(), key=lambda r: r["id"])))
    assert len(rows) == 1
    assert len(results) == 1, results
