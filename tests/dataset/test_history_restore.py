"""History (operation, parameters, metrics), detail, restore and vacuum of a Dataset."""

from __future__ import annotations

import datetime as dt
import json
import uuid

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parquetry.dataset import Dataset, write_files
from parquetry.dataset.metadata import VersionInfo, decode_document, encode_document
from parquetry.errors import CommitConflict, DatasetNotFound, InvalidArgument, MetadataCorrupted
from parquetry.store import MemoryStore

BASE = pa.table({"p": ["x", "y", "y"], "c": [1, 2, 3]})
MORE = pa.table({"p": ["y", "z"], "c": [7, 9]})


def _rows(ds: Dataset) -> list[tuple[str, int]]:
    t = ds.read()
    return sorted(zip(t["p"].to_pylist(), t["c"].to_pylist(), strict=True))


def test_history_records_operations_parameters_and_metrics() -> None:
    store = MemoryStore(uuid.uuid4().hex)
    v0 = Dataset.create(store, "d", BASE, partition_on=["p"], secondary_indices=["c"])
    v1 = v0.append(MORE, parameters={"job": "nightly", "attempt": 2})
    v1.update(delete_scope=[{"p": "y"}])
    files = write_files(store, "d", MORE.slice(1), partition_on=["p"], secondary_indices=["c"])
    v3 = Dataset.commit_files(
        store, "d", files, mode="overwrite", operation="overwrite", parameters={"mode": "x"}
    )
    v4 = v3.restore(1, parameters={"by": "test"})
    hist = v4.history()
    assert [h.version for h in hist] == [4, 3, 2, 1, 0]
    assert [h.operation for h in hist] == ["restore", "overwrite", "update", "append", "create"]
    assert [h.parameters for h in hist] == [
        {"version": "1", "by": "test"},
        {"mode": "x"},
        {"scope": '[{"p": "y"}]'},
        {"job": "nightly", "attempt": "2"},
        {},
    ]
    size = {lbl: f.size for lbl, f in v1.document.files.items()}
    y_labels = [lbl for lbl in v1.document.partitions if lbl.startswith("p=y/")]
    # v1 added 2 files (y, z); v2 removed both y files (one of v0, one of v1).
    m1, m2 = hist[3].metrics, hist[2].metrics
    assert (m1["rows_added"], m1["files_added"], m1["rows_removed"]) == (2, 2, 0)
    assert m1["bytes_added"] == sum(
        v1.document.files[lbl].size for lbl in v1.document.files if lbl not in v0.document.files
    )
    assert (m2["rows_removed"], m2["files_removed"]) == (3, 2)
    assert m2["bytes_removed"] == sum(size[lbl] for lbl in y_labels)
    m3, m4 = hist[1].metrics, hist[0].metrics
    assert (m3["rows_added"], m3["rows_removed"], m3["files_added"]) == (1, 2, 1)
    # Restore of v1 (5 rows in 4 files) over v3 (1 row in 1 file): every file differs.
    assert (m4["rows_added"], m4["rows_removed"], m4["files_added"], m4["files_removed"]) == (
        5,
        1,
        4,
        1,
    )
    times = [h.time for h in hist]
    assert times == sorted(times, reverse=True)
    assert all(t.tzinfo for t in times)
    assert [h.version for h in v4.history(limit=2)] == [4, 3]
    assert v4.history(limit=0) == []
    with pytest.raises(InvalidArgument):
        v4.history(limit=-1)


def test_restore_equals_the_old_version_and_keeps_indices() -> None:
    store = MemoryStore(uuid.uuid4().hex)
    v0 = Dataset.create(store, "d", BASE, partition_on=["p"], secondary_indices=["c"])
    v1 = v0.append(MORE)
    v2 = v1.update(pa.table({"p": ["y"], "c": [100]}), delete_scope=[{"p": "y"}])
    back = v2.restore(1)
    assert back.version == 3
    assert _rows(back) == _rows(Dataset.open(store, "d", version=1)) == _rows(v1)
    assert _rows(Dataset.open(store, "d")) == _rows(v1)
    assert back.document.partitions == v1.document.partitions
    # The secondary index answers as it did at version 1.
    assert back.read(predicates=[[("c", "==", 7)]]).num_rows == 1
    assert back.read(predicates=[[("c", "==", 100)]]).num_rows == 0
    assert len(back.plan([[("c", "==", 7)]]).files) == 1
    assert _rows(Dataset.open(store, "d", version=2)) == _rows(v2), "old versions untouched"
    # Appending after a restore works and keeps the restored rows.
    after = back.append(pa.table({"p": ["w"], "c": [5]}))
    assert _rows(after) == sorted([*_rows(v1), ("w", 5)])
    detail = after.detail()
    assert (detail.version, detail.files, detail.rows, detail.partitions) == (4, 5, 6, 4)
    assert detail.bytes == sum(f.size for f in after.document.files.values())
    assert detail.partition_keys == ("p",)
    assert detail.secondary_indices == ("c",)
    assert detail.schema.equals(after.schema)
    assert detail.created is not None
    assert detail.modified is not None
    assert detail.created <= detail.modified


def test_restore_of_a_collected_version_fails_and_commits_nothing() -> None:
    store = MemoryStore(uuid.uuid4().hex)
    v0 = Dataset.create(store, "d", BASE, partition_on=["p"])
    v1 = v0.update(MORE, delete_scope=[{"p": "x"}, {"p": "y"}])
    v1.garbage_collect(retention=0)
    with pytest.raises(DatasetNotFound, match=r"version 0 .*expired"):
        v1.restore(0)
    with pytest.raises(DatasetNotFound, match="no version 7"):
        v1.restore(7)
    # A retained version whose data file vanished: named, nothing committed.
    v2 = v1.append(BASE)
    victim = next(
        iter(
            v2.document.partitions[lbl]["table"]
            for lbl in v2.document.partitions
            if lbl not in v1.document.partitions
        )
    )
    v3 = v2.append(MORE)
    store.delete(victim)
    with pytest.raises(DatasetNotFound, match=victim.replace("+", r"\+")) as info:
        v3.restore(2)
    assert info.value.key == victim
    assert Dataset.open(store, "d").version == 3
    assert [h.version for h in Dataset.open(store, "d").history()] == [3, 2, 1]


def test_restore_refuses_to_discard_a_concurrent_commit() -> None:
    store = MemoryStore(uuid.uuid4().hex)
    v0 = Dataset.create(store, "d", BASE, partition_on=["p"])
    v1 = v0.append(MORE)
    v1.append(BASE)  # lands after v1 was opened
    with pytest.raises(CommitConflict, match="another commit landed"):
        v1.restore(0)
    assert Dataset.open(store, "d").version == 2
    # Time travel then restore: the old handle is not the newest state either.
    with pytest.raises(CommitConflict, match="newest is now 2"):
        Dataset.open(store, "d", version=0).restore(0)
    assert Dataset.open(store, "d").version == 2
    assert Dataset.open(store, "d").restore(0).read().num_rows == 3


def test_vacuum_refuses_short_retention_unless_forced() -> None:
    store = MemoryStore(uuid.uuid4().hex)
    v0 = Dataset.create(store, "d", BASE, partition_on=["p"])
    v1 = v0.update(MORE, delete_scope=[{"p": "x"}])
    with pytest.raises(InvalidArgument, match="force=True"):
        v1.vacuum(dt.timedelta(hours=1))
    kept = v1.vacuum()  # default: 7 days, nothing is that old
    assert kept.deleted == ()
    assert kept.retained_versions == (0, 1)
    assert Dataset.open(store, "d", version=0).read().num_rows == 3
    report = v1.vacuum(0, force=True)
    assert report.expired_versions == (0,)
    assert any(k.startswith("d/table/p=x/") for k in report.deleted)
    with pytest.raises(DatasetNotFound):
        Dataset.open(store, "d", version=0)
    assert _rows(Dataset.open(store, "d")) == _rows(v1)


def test_documents_without_parameters_still_load_and_bad_ones_are_named() -> None:
    store = MemoryStore(uuid.uuid4().hex)
    ds = Dataset.create(store, "d", BASE, partition_on=["p"])
    ds = ds.append(MORE, parameters={"k": "v"})
    # A format-1 document of version 1 (format 2 stores an entry; its state encodes as one).
    data = encode_document(Dataset.open(store, "d", version=1).document)
    doc = json.loads(data)
    old = dict(doc["parquetry"]["version"])
    for name in ("parameters", "bytes_added", "bytes_removed"):
        old.pop(name)
    info = VersionInfo.from_json(old)
    assert (info.parameters, info.bytes_added, info.bytes_removed) == ({}, 0, 0)
    doc["parquetry"]["version"] = old
    legacy = decode_document(json.dumps(doc).encode(), "json", key="k")
    assert legacy.version is not None
    assert legacy.version.parameters == {}
    doc["parquetry"]["version"]["parameters"] = {"k": 3}
    with pytest.raises(MetadataCorrupted, match=r"parameters\['k'\]"):
        decode_document(json.dumps(doc).encode(), "json", key="k")
    # Unset fields are not written: a plain commit's document has none of them.
    plain = json.loads(encode_document(Dataset.open(store, "d", version=0).document))
    assert "parameters" not in plain["parquetry"]["version"]
    with pytest.raises(InvalidArgument, match="cannot be recorded"):
        ds.append(MORE, parameters={"bad": object.__new__(_Unserialisable)})
    assert Dataset.open(store, "d").version == 1


class _Unserialisable:
    def __str__(self) -> str:
        raise TypeError("no text form")


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=st.lists(
        st.tuples(st.sampled_from(["append", "update"]), st.integers(0, 3)), min_size=1, max_size=5
    ),
    data=st.data(),
)
def test_restore_matches_the_old_version_property(
    steps: list[tuple[str, int]], data: st.DataObject
) -> None:
    """Oracle: the rows each version had when it was written."""
    store = MemoryStore(uuid.uuid4().hex)
    ds = Dataset.create(store, "d", BASE, partition_on=["p"], secondary_indices=["c"])
    seen = {0: _rows(ds)}
    for i, (op, k) in enumerate(steps):
        part = ["x", "y", "z", "w"][k]
        batch = pa.table({"p": [part], "c": [10 + i]})
        ds = ds.append(batch) if op == "append" else ds.update(batch, delete_scope=[{"p": part}])
        seen[ds.version] = _rows(ds)
    target = data.draw(st.sampled_from(sorted(seen)))
    restored = ds.restore(target)
    assert _rows(restored) == seen[target]
    assert _rows(Dataset.open(store, "d")) == seen[target]
    for c in range(1, 10 + len(steps)):
        expected = sum(1 for _, v in seen[target] if v == c)
        assert restored.read(predicates=[[("c", "==", c)]]).num_rows == expected
