"""A commit whose base predates versions that garbage collection expired meanwhile (their
entries are tombstones when it rolls forward). The commit loop skipped tombstones, so it
built on a state missing those versions' changes: a txn replay committed its batch twice
and a partition replace missed a concurrent replace of the same partition (stale rows
kept). Found by a thread race of appends, upserts, deletes and GC (retention 0)."""

from __future__ import annotations

import warnings

import pyarrow as pa
import pytest

from parquetry.dataset import Dataset
from parquetry.dataset.format2 import load_state
from parquetry.dataset.versions import roll_forward
from parquetry.errors import CommitConflict
from parquetry.store import MemoryStore


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
