"""Each kartothek 5.3.0 bug we fix, reproduced as a test."""

from __future__ import annotations

import json
import threading
import uuid

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parquetry.dataset import Dataset
from parquetry.dataset.naming import make_label, parse_label, parse_partition_value
from parquetry.errors import PredicateError
from parquetry.store import LocalStore, MemoryStore


@settings(max_examples=100, deadline=None)
@given(st.text(min_size=0, max_size=12))
def test_label_quoting_round_trips_any_string(value: str) -> None:
    label = make_label((("k/=%", value),), "base")
    assert label.count("/") == 1  # "/" inside keys or values never adds a directory
    ((key, raw),) = parse_label(label)
    assert key == "k/=%"
    assert parse_partition_value(raw, pa.string()) == value


def test_slash_equals_percent_values_round_trip() -> None:
    store = MemoryStore()
    values = ["ü/x", "a=b", "100%", "x/y/z", "..", " sp ace"]
    t = pa.table({"s": values, "v": list(range(len(values)))})
    ds = Dataset.create(store, "slash", t, partition_on=["s"])
    assert sorted(ds.read()["s"].to_pylist()) == sorted(values)
    for i, v in enumerate(values):
        assert ds.read(predicates=[[("s", "==", v)]])["v"].to_pylist() == [i]


def test_bool_partition_values_read_back() -> None:
    store = MemoryStore()
    t = pa.table({"b": [True, False, False], "v": [1, 2, 3]})
    ds = Dataset.open(Dataset.create(store, "bools", t, partition_on=["b"]).store, "bools")
    got = {r["v"]: r["b"] for r in ds.read().to_pylist()}
    assert got == {1: True, 2: False, 3: False}
    assert ds.read(predicates=[[("b", "==", False)]])["v"].to_pylist() == [2, 3]


def test_delete_scope_on_unindexed_column_is_an_error() -> None:
    store = MemoryStore()
    t = pa.table({"p": ["x", "y"], "c": [1, 2], "v": [1.0, 2.0]})
    ds = Dataset.create(store, "scope", t, partition_on=["p"])
    with pytest.raises(PredicateError) as err:
        ds.update(delete_scope=[{"v": 1.0}])
    assert err.value.column == "v"
    assert Dataset.open(store, "scope").read().num_rows == 2
    assert Dataset.open(store, "scope").version == 0


def test_nulls_in_indexed_column_are_found() -> None:
    store = MemoryStore()
    t1 = pa.table({"p": ["x", "x"], "c": pa.array([None, None], pa.int64())})
    t2 = pa.table({"p": ["y"], "c": pa.array([5], pa.int64())})
    ds = Dataset.create(store, "nulls", t1, partition_on=["p"], secondary_indices=["c"])
    ds = ds.append(t2)
    assert ds.read(predicates=[[("c", "is null")]]).num_rows == 2
    assert ds.read(predicates=[[("c", "is not null")]])["c"].to_pylist() == [5]
    assert len(ds.plan([[("c", "is not null")]]).files) == 1


def test_no_stale_pointer_of_another_format() -> None:
    store = MemoryStore()
    ds = Dataset.create(store, "fmt", pa.table({"a": [1]}), metadata_format="msgpack.zstd")
    ds.append(pa.table({"a": [2]}))
    keys = sorted(m.key for m in store.list("") if ".by-dataset-metadata." in m.key)
    assert keys == ["fmt.by-dataset-metadata.msgpack.zstd"]


def test_local_pointer_never_torn_for_concurrent_readers(tmp_path: object) -> None:
    store = LocalStore(tmp_path)  # type: ignore[arg-type]
    ds = Dataset.create(store, "atomic", pa.table({"a": list(range(200))}))
    stop = threading.Event()
    bad: list[str] = []

    def reader() -> None:
        while not stop.is_set():
            raw = store.get("atomic.by-dataset-metadata.json")
            try:
                json.loads(raw)
            except ValueError:
                bad.append(raw[:40].decode(errors="replace"))

    th = threading.Thread(target=reader)
    th.start()
    try:
        for i in range(15):
            ds = ds.append(pa.table({"a": [i]}))
    finally:
        stop.set()
        th.join()
    assert bad == []
    assert Dataset.open(store, "atomic").read().num_rows == 215


def test_no_lost_update_between_two_stale_writers() -> None:
    store = MemoryStore()
    base = Dataset.create(store, "lost", pa.table({"a": [0]}))
    stale = Dataset.open(store, "lost")
    base.append(pa.table({"a": [1]}))
    stale.append(pa.table({"a": [2]}))  # built on version 0, must not hide version 1
    assert sorted(Dataset.open(store, "lost").read()["a"].to_pylist()) == [0, 1, 2]


def test_delete_scope_conflicts_when_its_partitions_changed() -> None:
    from parquetry.errors import CommitConflict

    store = MemoryStore(uuid.uuid4().hex)
    t = pa.table({"p": ["x", "y"], "v": [1, 2]})
    ds = Dataset.create(store, "conf", t, partition_on=["p"])
    ds.append(pa.table({"p": ["x"], "v": [3]}))  # another writer adds to partition x
    with pytest.raises(CommitConflict):
        ds.update(pa.table({"p": ["x"], "v": [9]}), delete_scope=[{"p": "x"}])
    assert sorted(Dataset.open(store, "conf").read()["v"].to_pylist()) == [1, 2, 3]
    ds.update(delete_scope=[{"p": "y"}])  # disjoint from the concurrent append: fine
    assert sorted(Dataset.open(store, "conf").read()["v"].to_pylist()) == [1, 3]
