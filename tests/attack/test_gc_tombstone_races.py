"""A commit whose base predates versions that garbage collection expired meanwhile (their
entries are tombstones when it rolls forward). The commit loop skipped tombstones, so it
built on a state missing those versions' changes: a txn replay committed its batch twice
and a partition replace missed a concurrent replace of the same partition (stale rows
kept). Found by a thread race of appends, upserts, deletes and GC (retention 0)."""

from __future__ import annotations

import contextlib
import random
import threading
import warnings
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

import pyarrow as pa
import pytest

from parquetry.dataset import Dataset
from parquetry.dataset.format2 import load_state
from parquetry.dataset.versions import roll_forward
from parquetry.errors import CommitConflict, MetadataCorrupted, VersionExpired
from parquetry.store import LocalStore, MemoryStore


def _rows(p: int, ids: list[int]) -> pa.Table:
    return pa.table({"p": pa.array([p] * len(ids), pa.int64()), "id": pa.array(ids, pa.int64())})


def _ids(store: MemoryStore) -> list[int]:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # and the head written after it is valid
        return sorted(Dataset.open(store, "ds").read().column("id").to_pylist())


def test_a_txn_replay_across_expired_versions_commits_nothing() -> None:
    store = MemoryStore()
    Dataset.create(store, "ds", _rows(0, [0]))
    stale = Dataset.open(store, "ds")  # a driver's handle, from before batch 1
    Dataset.open(store, "ds").append(_rows(0, [1]), txn=("query", 1))
    Dataset.open(store, "ds").append(_rows(0, [2]))
    Dataset.open(store, "ds").garbage_collect(retention=0)  # versions 0 and 1 expire
    out = stale.append(_rows(0, [1]), txn=("query", 1))  # the driver replays batch 1
    assert out.version == 2
    assert out.transactions == {"query": 1}
    assert _ids(store) == [0, 1, 2]


def test_a_partition_replace_across_an_expired_replace_conflicts() -> None:
    store = MemoryStore()
    Dataset.create(store, "ds", _rows(0, [0, 1]), partition_on=["p"])
    stale = Dataset.open(store, "ds")
    Dataset.open(store, "ds").update(_rows(0, [10, 11]), delete_scope=[{"p": 0}])
    Dataset.open(store, "ds").append(_rows(1, [20]))
    Dataset.open(store, "ds").garbage_collect(retention=0)
    # As without GC: the partition changed since this writer read it.
    with pytest.raises(CommitConflict, match="partitions this update removes"):
        stale.update(_rows(0, [30]), delete_scope=[{"p": 0}])
    assert _ids(store) == [10, 11, 20]


def test_rolling_a_state_forward_over_a_tombstone_reloads_it() -> None:
    store = MemoryStore()
    ds = Dataset.create(store, "ds", _rows(0, [0]))
    base = load_state(store, "ds", 0)
    ds.append(_rows(0, [1])).append(_rows(0, [2])).garbage_collect(retention=0)
    newer, number, _ = roll_forward(store, "ds", 0, base)
    assert number == 2
    assert newer is not None
    assert sorted(newer.files) == sorted(Dataset.open(store, "ds").document.files)


def test_upserts_appends_and_deletes_racing_gc_lose_and_duplicate_nothing(tmp_path: Path) -> None:
    """Oracle: keys 0..9 (only ever upserted) exist exactly once in every state a reader
    sees and at the end; every acknowledged append is there. Before the fix a run of this
    race (more iterations) ended with partition p=0's keys duplicated."""
    store = LocalStore(tmp_path)
    Dataset.create(store, "ds", _rows3(range(10), 0), partition_on=["p"])
    problems: list[str] = []
    appended: list[int] = []
    stop = threading.Event()

    def upserter(w: int) -> None:
        rng = random.Random(w)
        for i in range(8):
            keys = sorted({rng.randint(0, 9), rng.randint(0, 9), 5000 + rng.randint(0, 3)})
            try:
                Dataset.open(store, "ds").upsert(_rows3(keys, w * 100 + i), on=["id"])
            except CommitConflict:
                pass
            except MetadataCorrupted as exc:  # a file GC deleted is a stale base, retried
                problems.append(repr(exc))

    def appender() -> None:
        for i in range(8):
            Dataset.open(store, "ds").append(_rows3([1000 + i], -1))
            appended.append(1000 + i)

    def deleter() -> None:
        for i in range(4):
            with contextlib.suppress(CommitConflict):
                Dataset.open(store, "ds").delete_where([[("id", "==", 5000 + i % 4)]])

    def collector() -> None:
        while not stop.is_set():
            Dataset.open(store, "ds").garbage_collect(retention=0)

    def reader() -> None:
        while not stop.is_set():
            try:
                ids = Dataset.open(store, "ds").read().column("id").to_pylist()
            except VersionExpired:
                continue  # a file of the version opened was collected meanwhile
            except MetadataCorrupted as exc:  # nothing is corrupted here
                problems.append(f"a reader got {exc!r}")
                continue
            counts = Counter(i for i in ids if i < 10)
            if sorted(counts.items()) != [(k, 1) for k in range(10)]:
                problems.append(f"a reader saw keys {sorted(counts.items())}")

    writers = [threading.Thread(target=upserter, args=(w,)) for w in (1, 2)]
    writers += [threading.Thread(target=appender), threading.Thread(target=deleter)]
    background = [threading.Thread(target=collector), threading.Thread(target=reader)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a head rewritten while read is warned about
        for t in writers + background:
            t.start()
        for t in writers:
            t.join()
        stop.set()
        for t in background:
            t.join()
    ids = Dataset.open(store, "ds").read().column("id").to_pylist()
    assert not problems, problems[:3]
    assert sorted(Counter(i for i in ids if i < 10).items()) == [(k, 1) for k in range(10)]
    assert set(appended) <= set(ids)


def _rows3(ids: Iterable[int], v: int) -> pa.Table:
    ids = list(ids)
    return pa.table(
        {
            "p": pa.array([i % 2 for i in ids], pa.int64()),
            "id": pa.array(ids, pa.int64()),
            "v": pa.array([v] * len(ids), pa.int64()),
        }
    )
