"""Compaction with several bins in flight (compact_pipeline.py) under a store failing at
its Nth call, for every N: the failure is a ParquetryError naming a key (a MemoryError
in a worker a ResourceExhausted, a KeyboardInterrupt itself), nothing is committed, no
output file is left in the store (not even before GC), no bin thread keeps running, and the
dataset then compacts fine."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from parquetry.dataset import Dataset
from parquetry.errors import ParquetryError, ResourceExhausted
from parquetry.store import LocalStore, Store
from parquetry.testing import FaultyStore
from parquetry.testing.stores import KINDS, InjectedFault


def _chunk(start: int, n: int) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table(
        {
            "p": pa.array([i % 2 for i in ids], pa.int64()),
            "id": pa.array(ids, pa.int64()),
            "tag": [f"t{i % 5}" for i in ids],
            "v": [float(i) / 3 for i in ids],
        }
    )


def _build(store: Store) -> Dataset:
    ds = Dataset.create(store, "c", _chunk(0, 20), partition_on=["p"], secondary_indices=["tag"])
    for i in range(1, 4):
        ds = ds.append(_chunk(i * 20, 20))
    return ds


def _target(ds: Dataset) -> int:
    # About two inputs an output: each partition is several bins.
    return 2 * max(f.size or 0 for f in ds.plan().files) + 1


def _keys(store: Store) -> set[str]:
    return {m.key for m in store.list("")}


def _threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("compact-bin")]


def _sorted(t: pa.Table) -> pa.Table:
    return t.select(sorted(t.column_names)).sort_by("id")


def _index_exact(ds: Dataset) -> None:
    oracle = set()
    for f in ds.plan().files:
        values = pc.unique(ds.read_file(f, columns=["tag"]).column("tag")).drop_null()
        oracle |= {(v, f.label) for v in values.to_pylist()}
    t = ds.index_pairs("tag")
    pairs = set(zip(t.column("value").to_pylist(), t.column("label").to_pylist(), strict=True))
    assert pairs == oracle


class _Recording(FaultyStore):
    """Remembers the call it failed (kind, key)."""

    last: tuple[str, str] | None = None

    def _check(self, kind: str, key: str) -> None:
        try:
            super()._check(kind, key)
        except BaseException:
            self.last = (kind, key)
            raise


ERRORS: dict[str, Callable[[str, str], BaseException]] = {
    "fault": lambda kind, key: InjectedFault(f"injected fault on {kind} {key!r}", key=key),
    "memory": lambda kind, key: MemoryError(),
    "interrupt": lambda kind, key: KeyboardInterrupt(),
}


@pytest.mark.parametrize("error", list(ERRORS))
def test_every_call_failing_in_a_multi_bin_compaction(tmp_path: Path, error: str) -> None:
    proto = LocalStore(str(tmp_path / "proto"))
    ds0 = _build(proto)
    target = _target(ds0)
    # A MemoryError or KeyboardInterrupt is raised by the reads (in the bins' threads).
    kinds = KINDS if error == "fault" else ("get", "get_range")
    counter = FaultyStore(LocalStore(str(tmp_path / "count")), kinds=kinds)
    _build(counter.inner)
    counter.calls = 0
    plan = Dataset.open(counter, "c").compact(target_file_size=target, dry_run=True)
    assert len(plan.bins) >= 4, plan  # several bins a partition
    counter.calls = 0
    Dataset.open(counter, "c").compact(target_file_size=target)
    total = counter.calls
    assert total > 10
    for n in range(1, total + 1):
        inner = LocalStore(str(tmp_path / f"s{error}{n}"))
        ds = _build(inner)
        rows = _sorted(ds.read())
        before = _keys(inner)
        faulty = _Recording(inner, fail_on=n, kinds=kinds, error=ERRORS[error])
        raised: BaseException | None = None
        try:
            Dataset.open(faulty, "c").compact(target_file_size=target)
        except BaseException as exc:  # classified below
            raised = exc
        assert not _threads(), n
        now = Dataset.open(inner, "c")
        if raised is None:
            assert now.version == ds.version + 1, n
        else:
            if error == "fault":
                assert isinstance(raised, ParquetryError), (n, raised)
                assert raised.key, (n, raised)
            elif error == "memory":
                assert isinstance(raised, ResourceExhausted | MemoryError), (n, raised)
            else:
                assert isinstance(raised, KeyboardInterrupt | ParquetryError), (n, raised)
            if now.version == ds.version and "c/table/p=" in repr(faulty.last):
                # A bin failed (not the commit, whose files GC reaps): the outputs
                # written so far are deleted at once.
                leaked = {k for k in _keys(inner) - before if k.startswith("c/table/p=")}
                assert not leaked, (n, raised, leaked)
        assert _sorted(now.read()).equals(rows), n
        _index_exact(now)
        now.garbage_collect(retention=0)
        now = Dataset.open(inner, "c")
        # Every version that still opens (GC keeps the one a stale kartothek pointer names).
        referenced = {
            f.key
            for v in now.versions()
            for f in Dataset.open(inner, "c", version=v.number).plan().files
        }
        data_left = {k for k in _keys(inner) if k.startswith("c/table/p=")}
        # A commit that failed keeps its open intent (and its files) until the intent
        # expires: GC reaps them then, never before.
        intents = set()
        for m in inner.list("c/_intents/"):
            intents |= set(json.loads(inner.get(m.key))["keys"])
        assert data_left - referenced <= intents, (n, raised, data_left - referenced)
        done = now.compact(target_file_size=target)
        assert _sorted(done.read()).equals(rows), n
        _index_exact(done)
