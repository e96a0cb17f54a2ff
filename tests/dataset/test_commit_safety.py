"""Commits in flight versus GC, delete and a corrupted pointer (issue 11, "Trust").

- GC never deletes a file a commit in flight will reference (write intents), and a commit
  whose files GC reaped or that are missing fails before its commit point.
- A commit on a dataset deleted (and maybe re-created) meanwhile raises DatasetDeleted.
- A corrupted pointer does not block open, time travel or repair.
"""

from __future__ import annotations

import datetime as dt
import json
import time
import warnings

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parquetry.dataset import Dataset, FileDescription, intents, write_files
from parquetry.dataset.gc import garbage_collect
from parquetry.dataset.intents import CLOCK_SKEW, DEFAULT_LEASE
from parquetry.errors import DatasetDeleted, IntentExpired, PointerCorruptedWarning
from parquetry.store import MemoryStore, Store
from parquetry.store.base import ObjectMeta, PutMode
from parquetry.store.wrappers import WrapperStore

#: A GC clock past every lease of intents written "now".
AFTER_LEASE = DEFAULT_LEASE + CLOCK_SKEW + dt.timedelta(seconds=5)


def _later() -> dt.datetime:
    return dt.datetime.now(dt.UTC) + AFTER_LEASE


def _in_another_process(files: list[FileDescription]) -> list[FileDescription]:
    """The descriptions as a committer in another process (a Spark driver) gets them: this
    process forgets the intents it wrote, so the commit reads and claims them from the store.
    GC runs below with a clock far ahead, which only another machine could have."""
    intents._LOCAL.clear()
    return [FileDescription.from_json(json.loads(json.dumps(f.to_json()))) for f in files]


def _values(ds: Dataset) -> list[int]:
    return sorted(ds.read()["v"].to_pylist())


# --- 1. GC versus a commit in flight ------------------------------------------------------


def test_gc_keeps_files_of_a_commit_in_flight(any_store: Store) -> None:
    """The issue's repro: a commit slower than the retention used to lose its files."""
    ds = Dataset.create(any_store, "ds", pa.table({"v": [0]}))
    files = write_files(
        any_store, "ds", pa.table({"v": [1, 2]}), partition_on=(), secondary_indices=()
    )
    time.sleep(1.5)
    report = ds.garbage_collect(retention=1.0)
    assert not set(report.deleted) & {f.key for f in files}
    committed = Dataset.commit_files(any_store, "ds", files)
    assert _values(committed) == [0, 1, 2]
    assert _values(Dataset.open(any_store, "ds")) == [0, 1, 2]
    assert [m.key for m in any_store.list("ds/_intents")] == []  # released after the commit


def test_a_commit_whose_intent_gc_reaped_fails() -> None:
    store = MemoryStore()
    Dataset.create(store, "ds", pa.table({"v": [0]}), secondary_indices=["v"])
    files = write_files(store, "ds", pa.table({"v": [1, 2]}), secondary_indices=["v"])
    files = _in_another_process(files)
    report = garbage_collect(store, "ds", retention=0, now=_later())
    assert {f.key for f in files} <= set(report.deleted)
    assert report.reaped_intents == (files[0].intent,)
    with pytest.raises(IntentExpired, match="ds"):
        Dataset.commit_files(store, "ds", files)
    ds = Dataset.open(store, "ds")
    assert ds.version == 0
    assert _values(ds) == [0]
    assert ds.read(predicates=[[("v", "==", 0)]]).num_rows == 1


class _BeforeIntentCAS(WrapperStore):
    """Runs ``hook`` once, right before the first compare-and-swap of an intent."""

    def __init__(self, inner: Store, hook: object):
        super().__init__(inner)
        self.hook = hook

    def _put(
        self, key: str, data: bytes | memoryview, mode: PutMode, expected: str | None
    ) -> ObjectMeta:
        if mode is PutMode.UPDATE and "/_intents/" in key and self.hook is not None:
            hook, self.hook = self.hook, None
            hook()  # type: ignore[operator]
        return super()._put(key, data, mode, expected)


def test_a_commit_that_claims_first_beats_gc() -> None:
    """GC read the intent as expired, the commit claimed it before GC's CAS: GC backs off."""
    store = MemoryStore()
    Dataset.create(store, "ds", pa.table({"v": [0]}))
    files = _in_another_process(write_files(store, "ds", pa.table({"v": [1]})))
    acknowledged: list[Dataset] = []
    racing = _BeforeIntentCAS(
        store, lambda: acknowledged.append(Dataset.commit_files(store, "ds", files))
    )
    report = garbage_collect(racing, "ds", retention=0, now=_later())
    assert report.reaped_intents == ()
    assert files[0].key not in report.deleted
    assert len(acknowledged) == 1
    assert _values(Dataset.open(store, "ds")) == [0, 1]


def test_gc_that_reaps_first_beats_the_commit() -> None:
    """The commit read the intent, GC reaped it before the commit's CAS: the commit fails."""
    store = MemoryStore()
    Dataset.create(store, "ds", pa.table({"v": [0]}))
    files = _in_another_process(write_files(store, "ds", pa.table({"v": [1]})))
    racing = _BeforeIntentCAS(
        store, lambda: garbage_collect(store, "ds", retention=0, now=_later())
    )
    with pytest.raises(IntentExpired):
        Dataset.commit_files(racing, "ds", files)
    assert _values(Dataset.open(store, "ds")) == [0]
    assert not store.exists(files[0].key)


def test_intents_cover_every_file_of_a_long_write() -> None:
    """Each flush records its keys before writing them (and renews the lease)."""
    store = MemoryStore()
    data = pa.table({"p": [i % 5 for i in range(500)], "v": list(range(500))})
    files = write_files(
        store, "ds", data.to_batches(max_chunksize=50), partition_on=["p"], flush_bytes=1
    )
    (intent,) = {f.intent for f in files}
    doc = json.loads(store.get(f"ds/_intents/{intent}.json"))
    assert doc["state"] == "open"
    assert {f.key for f in files} == set(doc["keys"])
    assert len(files) > 5  # several flushes, several intent updates


def test_gc_lists_no_data_files_for_intent_datasets() -> None:
    """Steps on intents and versions list only ``_intents`` and ``_versions``."""
    from parquetry.testing import CountingStore

    store = MemoryStore()
    ds = Dataset.create(store, "ds", pa.table({"v": [0]})).append(pa.table({"v": [1]}))
    write_files(store, "ds", pa.table({"v": [2]}))
    counting = CountingStore(store)
    report = garbage_collect(counting, "ds", retention=0, now=_later())
    assert report.swept is False
    assert len(report.reaped_intents) == 1
    listed = {k for kind, k in counting.log if kind == "list"}
    # Format 2 also lists its own metadata prefixes (checkpoints, segments): never data.
    assert listed == {"ds/_intents", "ds/_versions", "ds/_checkpoints", "ds/_segments"}
    assert _values(ds) == [0, 1]


def test_gc_sweeps_orphans_of_writes_without_intents() -> None:
    """Old orphans (written before intents, or by kartothek) still go by the age rule."""
    store = MemoryStore()
    Dataset.create(store, "ds", pa.table({"v": [0]}))
    store.put("ds/table/stray.parquet", b"x")
    report = garbage_collect(store, "ds", retention=0, sweep=True)
    assert report.deleted == ("ds/table/stray.parquet",)
    assert _values(Dataset.open(store, "ds")) == [0]


# --- 5. missing files ---------------------------------------------------------------------


@pytest.mark.parametrize("with_intent", [True, False])
def test_commit_of_a_missing_file_fails_before_the_commit_point(with_intent: bool) -> None:
    store = MemoryStore()
    Dataset.create(store, "ds", pa.table({"v": [0]}))
    files = write_files(store, "ds", pa.table({"v": [1]})) + write_files(
        store, "ds", pa.table({"v": [2]})
    )
    if not with_intent:  # a description from before intents existed
        files = [FileDescription.from_json({**f.to_json(), "intent": None}) for f in files]
    store.delete(files[1].key)
    with pytest.raises(IntentExpired, match=files[1].key):
        Dataset.commit_files(store, "ds", files)
    assert Dataset.open(store, "ds").version == 0


# --- 2. delete versus a writer holding an old Dataset ------------------------------------


def test_append_after_delete_raises(any_store: Store) -> None:
    old = Dataset.create(any_store, "ds", pa.table({"v": [0]})).append(pa.table({"v": [1]}))
    Dataset.open(any_store, "ds").delete()
    with pytest.raises(DatasetDeleted, match="'ds'"):
        old.append(pa.table({"v": [2]}))
    assert not Dataset.exists(any_store, "ds")
    assert [m.key for m in any_store.list("ds")] == []  # the failed append cleaned up


@pytest.mark.parametrize("new_versions", [1, 4])
def test_append_after_delete_and_recreate_raises(new_versions: int) -> None:
    store = MemoryStore()
    old = Dataset.create(store, "ds", pa.table({"v": [0]}))
    old = old.append(pa.table({"v": [1]})).append(pa.table({"v": [2]}))
    Dataset.open(store, "ds").delete()
    new = Dataset.create(store, "ds", pa.table({"v": [10]}))
    for i in range(new_versions - 1):
        new = new.append(pa.table({"v": [11 + i]}))
    with pytest.raises(DatasetDeleted):
        old.append(pa.table({"v": [3]}))
    with pytest.raises(DatasetDeleted):
        old.update(delete_scope=None)
    now = Dataset.open(store, "ds")
    assert now.version == new.version
    assert _values(now) == [10 + i for i in range(new_versions)]
    assert now.append(pa.table({"v": [99]})).version == new.version + 1


# --- 3. corrupted pointer -----------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["json", "msgpack.zstd"])
@pytest.mark.parametrize("garbage", [b"", b'{"dataset_uuid": ', b"\x00\xff" * 7])
def test_corrupted_pointer_falls_back_to_the_newest_version(fmt: str, garbage: bytes) -> None:
    store = MemoryStore()
    ds = Dataset.create(store, "ds", pa.table({"v": [0]}), metadata_format=fmt)
    ds.append(pa.table({"v": [1]}))
    store.put(f"ds.by-dataset-metadata.{fmt}", garbage)
    with pytest.warns(PointerCorruptedWarning, match="newest readable"):
        assert _values(Dataset.open(store, "ds")) == [0, 1]
    with pytest.warns(PointerCorruptedWarning):
        assert _values(Dataset.open(store, "ds", version=0)) == [0]
    with pytest.warns(PointerCorruptedWarning):
        assert "rewrote" in Dataset.repair(store, "ds")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        reopened = Dataset.open(store, "ds")
        assert reopened.version == 1
        assert _values(reopened.append(pa.table({"v": [2]}))) == [0, 1, 2]


# --- property: acknowledged commits stay readable, whatever GC does meanwhile -------------

_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("write"), st.integers(0, 2)),
        st.tuples(st.just("commit"), st.integers(0, 2)),
        st.tuples(st.just("gc"), st.sampled_from([0, 2, 20, 60])),  # minutes from now
    ),
    max_size=12,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=_OPS)
def test_gc_never_breaks_an_acknowledged_commit(ops: list[tuple[str, int]]) -> None:
    """Oracle: rows of acknowledged commits; every commit is acknowledged or IntentExpired."""
    store = MemoryStore()
    Dataset.create(store, "ds", pa.table({"v": [-1]}), secondary_indices=["v"])
    expected = [-1]
    pending: dict[int, tuple[int, list[FileDescription]]] = {}
    counter = 0
    for op, arg in ops:
        if op == "write":
            counter += 1
            pending[arg] = (
                counter,
                write_files(store, "ds", pa.table({"v": [counter]}), secondary_indices=["v"]),
            )
        elif op == "commit" and arg in pending:
            value, files = pending.pop(arg)
            files = _in_another_process(files)
            try:
                Dataset.commit_files(store, "ds", files)
            except IntentExpired:
                continue
            expected.append(value)
        elif op == "gc":
            now = dt.datetime.now(dt.UTC) + dt.timedelta(minutes=arg)
            garbage_collect(store, "ds", retention=0, now=now)
        ds = Dataset.open(store, "ds")
        assert _values(ds) == sorted(expected)
        for v in expected:
            assert ds.read(predicates=[[("v", "==", v)]]).num_rows == 1


def test_sweep_keeps_a_young_index_file_whatever_the_retention() -> None:
    """Index files carry no intent (a commit attempt writes one just before its commit
    point): the sweep leaves unreferenced ones alone for a lease, then takes them."""
    store = MemoryStore()
    Dataset.create(store, "ds", pa.table({"v": [0]}), secondary_indices=["v"])
    store.put("ds/indices/v/in-flight.by-dataset-index.parquet", b"x")
    store.put("ds/table/stray.parquet", b"x")
    report = garbage_collect(store, "ds", retention=0, sweep=True)
    assert report.deleted == ("ds/table/stray.parquet",)
    report = garbage_collect(store, "ds", retention=0, sweep=True, now=_later())
    assert report.deleted == ("ds/indices/v/in-flight.by-dataset-index.parquet",)
    assert Dataset.open(store, "ds").read(predicates=[[("v", "==", 0)]]).num_rows == 1
