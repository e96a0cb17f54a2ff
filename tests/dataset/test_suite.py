"""The shared dataset suite: every behaviour on memory, local disk and S3 (moto)."""

from __future__ import annotations

import datetime as dt
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from parquetry.dataset import Dataset, FileDescription, write_files
from parquetry.dataset.gc import garbage_collect
from parquetry.dataset.intents import CLOCK_SKEW, DEFAULT_LEASE
from parquetry.errors import (
    AlreadyExists,
    DatasetNotFound,
    PredicateError,
    SchemaMismatch,
    UnknownColumn,
)
from parquetry.store import Store

from .helpers import sample_table, sort_rows


def test_create_open_read_round_trip(any_store: Store) -> None:
    t = sample_table()
    ds = Dataset.create(
        any_store,
        "ds",
        t,
        partition_on=["country", "day"],
        secondary_indices=["customer"],
        metadata={"owner": "me"},
    )
    assert Dataset.exists(any_store, "ds")
    opened = Dataset.open(any_store, "ds")
    assert opened.version == 0
    assert opened.schema == t.schema
    assert opened.partition_keys == ("country", "day")
    assert opened.metadata["owner"] == "me"
    assert "creation_time" in opened.metadata
    assert sort_rows(opened.read()) == sort_rows(t)
    assert sort_rows(ds.read(columns=["value", "country"])) == sort_rows(
        t.select(["value", "country"])
    )
    batches = list(opened.scan(predicates=[[("country", "==", "DE")]]))
    assert sum(b.num_rows for b in batches) == 10


def test_on_disk_layout_is_kartothek_v4(any_store: Store) -> None:
    Dataset.create(
        any_store, "lay", sample_table(8), partition_on=["country"], secondary_indices=["customer"]
    )
    doc = json.loads(any_store.get("lay.by-dataset-metadata.json"))
    assert list(doc)[:6] == [
        "dataset_metadata_version",
        "dataset_uuid",
        "indices",
        "metadata",
        "partitions",
        "partition_keys",
    ]
    assert doc["dataset_metadata_version"] == 4
    assert doc["partition_keys"] == ["country"]
    for label, entry in doc["partitions"].items():
        assert entry == {"files": {"table": f"lay/table/{label}.parquet"}}
        payload = pq.read_table(pa.BufferReader(any_store.get(f"lay/table/{label}.parquet")))
        assert "country" not in payload.column_names
    assert "country=a%2Fb%3Dc%25/" in "".join(doc["partitions"])
    idx_key = doc["indices"]["customer"]
    assert idx_key.startswith("lay/indices/customer/")
    assert idx_key.endswith(".by-dataset-index.parquet")
    idx = pq.read_table(pa.BufferReader(any_store.get(idx_key)))
    assert idx.schema.field("customer").type == pa.int64()
    assert idx.schema.field("partition").type.value_type == pa.string()
    common = pq.read_schema(pa.BufferReader(any_store.get("lay/table/_common_metadata")))
    assert common.names == ["country", "customer", "day", "name", "value"]
    assert common.field("day").type == pa.int64()  # normalised from int32
    assert b"pandas" in common.metadata


def test_create_twice_fails_and_keeps_data(any_store: Store) -> None:
    Dataset.create(any_store, "x", sample_table(4))
    with pytest.raises(AlreadyExists):
        Dataset.create(any_store, "x", sample_table(8))
    assert Dataset.open(any_store, "x").read().num_rows == 4


def test_open_missing(any_store: Store) -> None:
    with pytest.raises(DatasetNotFound):
        Dataset.open(any_store, "nope")
    assert not Dataset.exists(any_store, "nope")


def test_append_update_versions_time_travel(any_store: Store) -> None:
    ds = Dataset.create(
        any_store, "v", sample_table(20), partition_on=["country"], secondary_indices=["customer"]
    )
    ds1 = ds.append(sample_table(20, offset=100))
    assert ds1.version == 1
    assert ds1.read().num_rows == 40
    assert ds.read().num_rows == 20  # the old object reads its own version
    new = sample_table(4, offset=500)
    new = new.filter(pa.compute.equal(new["country"], "DE"))
    ds2 = ds1.update(new, delete_scope=[{"country": "DE"}])
    got = ds2.read()
    assert sorted(set(got["country"].to_pylist())) == ["DE", "FR", "NL", "a/b=c%"]
    assert got.filter(pa.compute.equal(got["country"], "DE")).num_rows == 1
    hist = ds2.versions()
    assert [(v.number, v.operation) for v in hist] == [(0, "create"), (1, "append"), (2, "update")]
    assert hist[1].rows_added == 20
    assert hist[2].rows_removed == 10
    assert Dataset.open(any_store, "v", version=1).read().num_rows == 40
    with pytest.raises(DatasetNotFound):
        Dataset.open(any_store, "v", version=9)
    # the index follows: a customer only present in removed partitions is gone
    de_customers = set(ds1.read(predicates=[[("country", "==", "DE")]])["customer"].to_pylist())
    for c in de_customers - {None}:
        rows = ds2.read(predicates=[[("customer", "==", c)]])
        assert all(r["country"] != "DE" or r["value"] >= 500 for r in rows.to_pylist())


def test_build_index_and_plan_reasons(any_store: Store) -> None:
    ds = Dataset.create(any_store, "bi", sample_table(40), partition_on=["country"])
    ds = ds.build_index("customer")
    assert ds.secondary_indices == ("customer",)
    plan = ds.plan([[("customer", "==", 7919 % 97), ("country", "==", "FR")]])
    reasons = {p.reason for p in plan.pruned}
    assert reasons <= {"secondary index", "partition key"}
    assert plan.pruned
    expected = sample_table(40).to_pylist()
    want = [r for r in expected if r["customer"] == 7919 % 97 and r["country"] == "FR"]
    got = ds.read(predicates=[[("customer", "==", 7919 % 97), ("country", "==", "FR")]])
    assert sort_rows(got) == sorted(want, key=repr)
    stats_plan = ds.plan([[("value", "<", 2.0)]])
    assert {p.reason for p in stats_plan.pruned} == {"statistics"}
    assert len(stats_plan.files) == 2


def test_streaming_inputs(any_store: Store) -> None:
    t = sample_table(30)
    ds = Dataset.create(
        any_store, "it", iter(t.to_batches(max_chunksize=7)), partition_on=["country"]
    )
    assert ds.read().num_rows == 30
    reader = pa.RecordBatchReader.from_batches(t.schema, t.to_batches(max_chunksize=5))
    assert ds.append(reader).read().num_rows == 60
    import polars as pl

    ds = Dataset.create(any_store, "pl", pl.from_arrow(t))
    assert sort_rows(ds.read()) == sort_rows(t)
    assert ds.schema.field("name").type == pa.string()


def test_schema_mismatch_leaves_data(any_store: Store) -> None:
    ds = Dataset.create(any_store, "sm", sample_table(4), partition_on=["country"])
    with pytest.raises(SchemaMismatch):
        ds.append(pa.table({"country": ["DE"], "other": [1]}))
    with pytest.raises(UnknownColumn):
        ds.read(columns=["nope"])
    assert Dataset.open(any_store, "sm").read().num_rows == 4


def test_predicate_errors_name_column_op_types(any_store: Store) -> None:
    ds = Dataset.create(any_store, "pe", sample_table(4))
    with pytest.raises(PredicateError) as err:
        ds.read(predicates=[[("value", "==", "x")]])
    assert err.value.column == "value"
    assert err.value.op == "=="
    assert "str" in str(err.value)
    assert "double" in str(err.value)
    with pytest.raises(PredicateError):
        ds.plan([[("missing", "==", 1)]])


def test_write_files_then_commit_files(any_store: Store) -> None:
    t = sample_table(24)
    files = write_files(
        any_store, "wf", t, partition_on=["country"], secondary_indices=["customer"]
    )
    assert {f.partition for f in files} == {(("country", c),) for c in ["DE", "FR", "NL", "a/b=c%"]}
    rt = [FileDescription.from_json(json.loads(json.dumps(f.to_json()))) for f in files]
    assert [(f.key, f.rows, f.stats) for f in rt] == [(f.key, f.rows, f.stats) for f in files]
    ds = Dataset.commit_files(
        any_store, "wf", rt, mode="append", partition_on=["country"], secondary_indices=["customer"]
    )
    assert sort_rows(ds.read()) == sort_rows(t)
    more = write_files(
        any_store,
        "wf",
        sample_table(8, 50),
        partition_on=["country"],
        secondary_indices=["customer"],
        schema=ds.schema,
    )
    ds2 = Dataset.commit_files(any_store, "wf", more, mode="overwrite")
    assert sort_rows(ds2.read()) == sort_rows(sample_table(8, 50))
    plan = ds2.plan([[("country", "==", "FR")]])
    part = ds2.read_file(plan.files[0])
    assert part.schema == ds2.schema
    assert set(part["country"].to_pylist()) == {"FR"}


def test_to_pyarrow_dataset_is_a_snapshot(any_store: Store) -> None:
    ds = Dataset.create(any_store, "pa", sample_table(12), partition_on=["country"])
    snap = ds.to_pyarrow_dataset()
    ds.append(sample_table(12, 40))
    assert snap.to_table().num_rows == 12
    de = snap.to_table(filter=pa.compute.field("country") == "DE")
    assert de.num_rows == 3
    assert set(de["country"].to_pylist()) == {"DE"}


def test_gc_keeps_retained_versions(any_store: Store) -> None:
    ds = Dataset.create(
        any_store, "gc", sample_table(8), partition_on=["country"], secondary_indices=["customer"]
    )
    ds1 = ds.update(
        sample_table(8, 10), delete_scope=[{"country": c} for c in ["DE", "FR", "NL", "a/b=c%"]]
    )
    orphan = write_files(any_store, "gc", sample_table(2))[0].key
    report = ds1.garbage_collect(retention=dt.timedelta(hours=1))
    assert report.deleted == ()
    assert report.expired_versions == ()
    assert Dataset.open(any_store, "gc", version=0).read().num_rows == 8
    report = ds1.garbage_collect(retention=0)
    assert report.expired_versions == (0,)
    assert orphan not in report.deleted  # its write intent is live: a commit may follow
    assert all(not any_store.exists(k) for k in report.deleted)
    later = dt.datetime.now(dt.UTC) + DEFAULT_LEASE + CLOCK_SKEW + dt.timedelta(seconds=5)
    report = garbage_collect(any_store, "gc", retention=0, now=later)
    assert orphan in report.deleted
    assert not any_store.exists(orphan)
    assert len(report.reaped_intents) == 1
    assert [m.key for m in any_store.list("gc/_intents")] == []
    with pytest.raises(DatasetNotFound, match="expired"):
        Dataset.open(any_store, "gc", version=0)
    assert sort_rows(Dataset.open(any_store, "gc").read()) == sort_rows(sample_table(8, 10))
    assert [v.number for v in ds1.versions()] == [1]


def test_delete(any_store: Store) -> None:
    ds = Dataset.create(any_store, "del", sample_table(8), partition_on=["country"])
    Dataset.create(any_store, "del2", sample_table(2))
    ds.delete()
    assert not Dataset.exists(any_store, "del")
    assert [m.key for m in any_store.list("del")] == []
    assert Dataset.open(any_store, "del2").read().num_rows == 2
    Dataset.create(any_store, "del", sample_table(3))  # the uuid can be reused


def test_msgpack_metadata(any_store: Store) -> None:
    ds = Dataset.create(
        any_store, "mp", sample_table(8), partition_on=["country"], metadata_format="msgpack.zstd"
    )
    assert any_store.exists("mp.by-dataset-metadata.msgpack.zstd")
    assert not any_store.exists("mp.by-dataset-metadata.json")
    ds.append(sample_table(4))
    assert not any_store.exists("mp.by-dataset-metadata.json")
    assert Dataset.open(any_store, "mp").read().num_rows == 12


def test_recreate_after_delete_that_left_versions(any_store: Store) -> None:
    """kartothek's delete_dataset leaves <uuid>/_versions: a new incarnation starts after it."""
    from parquetry.dataset import create as create_module

    ds = Dataset.create(any_store, "re", sample_table(4))
    ds.append(sample_table(2))
    any_store.delete("re.by-dataset-metadata.json")
    # the schema file is still there and the versions are recent: maybe a create in flight
    with pytest.raises(AlreadyExists, match="concurrently"):
        Dataset.create(any_store, "re", sample_table(3))
    old_grace = create_module.LEFTOVER_GRACE
    create_module.LEFTOVER_GRACE = dt.timedelta(0)
    try:
        ds = Dataset.create(any_store, "re", sample_table(3))
    finally:
        create_module.LEFTOVER_GRACE = old_grace
    assert ds.version == 2
    assert [(v.number, v.operation) for v in ds.versions()] == [(2, "create")]
    with pytest.raises(DatasetNotFound, match="deleted earlier"):
        Dataset.open(any_store, "re", version=1)
    # like kartothek's delete_dataset: everything but the version documents goes
    for meta in list(any_store.list("re")):
        if "/_versions/" not in meta.key:
            any_store.delete(meta.key)
    any_store.delete("re.by-dataset-metadata.json")
    ds = Dataset.create(any_store, "re", sample_table(5))
    assert ds.version == 3
    assert Dataset.open(any_store, "re").read().num_rows == 5
    assert [v.operation for v in ds.versions()] == ["create"]


def test_commit_files_rejects_files_of_another_partition_layout() -> None:
    import pyarrow as pa

    from parquetry.dataset import Dataset, write_files
    from parquetry.errors import InvalidArgument
    from parquetry.store import MemoryStore

    store = MemoryStore()
    table = pa.table({"day": ["d1", "d2"], "v": [1, 2]})
    Dataset.create(store, "parts", table, partition_on=["day"])
    loose = write_files(store, "parts", table)  # written without the partition column split
    with pytest.raises(InvalidArgument, match="partitioned on"):
        Dataset.commit_files(store, "parts", loose, mode="append")
    assert Dataset.open(store, "parts").read().num_rows == 2
