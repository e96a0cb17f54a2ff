"""Dataset.evolve_schema (metadata only) and Dataset.restore on format 2 after table ops."""

from __future__ import annotations

import pyarrow as pa
import pytest

from parquetry.dataset import Dataset
from parquetry.errors import CommitConflict, InvalidArgument, SchemaMismatch, UnknownColumn
from parquetry.store import MemoryStore, Store


def _base(store: Store) -> Dataset:
    t = pa.table(
        {
            "p": ["a", "b", "a"],
            "n": pa.array([1, 2, 3], pa.int32()),
            "f": pa.array([0.5, 1.5, 2.5], pa.float32()),
            "k": pa.array([10, 20, 30], pa.int64()),
        }
    )
    return Dataset.create(store, "e", t, partition_on=["p"], secondary_indices=["k"])


def _data_keys(store: Store) -> set[str]:
    return {m.key for m in store.list("e/table/")}


def test_evolve_schema_adds_and_widens_without_writing_data() -> None:
    store = MemoryStore()
    ds = _base(store)
    files = _data_keys(store)
    out = ds.evolve_schema(
        add=[pa.field("tag", pa.string()), pa.field("when", pa.timestamp("ns"))],
        widen={"n": pa.int64(), "f": pa.float64()},
        parameters={"by": "test"},
    )
    assert _data_keys(store) == files  # metadata only: no data file written
    assert out.version == ds.version + 1
    assert out.schema.field("n").type == pa.int64()
    assert out.schema.field("f").type == pa.float64()
    assert out.schema.field("tag").type == pa.string()
    assert out.schema.field("when").type == pa.timestamp("us")  # the stored unit
    t = out.read().sort_by("k")
    assert t.column("n").to_pylist() == [1, 2, 3]
    assert t.column("n").type == pa.int64()
    assert t.column("f").to_pylist() == [0.5, 1.5, 2.5]
    assert t.column("tag").to_pylist() == [None] * 3
    assert t.column("when").null_count == 3
    info = out.info
    assert info is not None
    assert info.operation == "evolve_schema"
    assert info.parameters["add"] == "tag string, when timestamp[us]"
    assert info.parameters["widen"] == "n int32 -> int64, f float -> double"
    assert info.parameters["by"] == "test"
    assert (info.files_added, info.files_removed) == (0, 0)
    # New data in the evolved schema appends; old rows keep their nulls.
    more = pa.table(
        {"p": ["b"], "n": pa.array([2**40]), "f": [9.5], "k": [40], "tag": ["x"], "when": [None]},
        schema=out.schema,
    )
    after = Dataset.open(store, "e").append(more)
    assert after.read(predicates=[[("tag", "==", "x")]]).column("n").to_pylist() == [2**40]
    assert after.read(predicates=[[("n", ">", 2**32)]]).num_rows == 1
    # Old versions read their own schema.
    assert Dataset.open(store, "e", version=0).read().column("n").type == pa.int32()
    # Nothing to change: no commit.
    assert after.evolve_schema(widen={"n": pa.int64()}) is after


def test_evolve_schema_refusals_name_the_column() -> None:
    store = MemoryStore()
    ds = _base(store)
    with pytest.raises(InvalidArgument, match=r"'req'.*non-nullable"):
        ds.evolve_schema(add=[pa.field("req", pa.int64(), nullable=False)])
    with pytest.raises(SchemaMismatch, match=r"'n'.*from int32 to int16"):
        ds.evolve_schema(widen={"n": pa.int16()})
    with pytest.raises(SchemaMismatch, match=r"'k'.*from int64 to double"):
        ds.evolve_schema(widen={"k": pa.float64()})
    with pytest.raises(SchemaMismatch, match=r"'n'.*from int32 to string"):
        ds.evolve_schema(widen={"n": pa.string()})
    with pytest.raises(UnknownColumn, match="'zz'"):
        ds.evolve_schema(widen={"zz": pa.int64()})
    with pytest.raises(InvalidArgument, match=r"'n'.*already exists"):
        ds.evolve_schema(add=[pa.field("n", pa.int64())])
    with pytest.raises(SchemaMismatch, match=r"'N'.*only in case"):
        ds.evolve_schema(add=[pa.field("N", pa.int64())])
    # Refused before anything is committed.
    assert Dataset.open(store, "e").version == ds.version


def test_evolve_schema_merges_with_a_concurrent_evolution() -> None:
    store = MemoryStore()
    ds = _base(store)
    Dataset.open(store, "e").evolve_schema(add=[pa.field("a1", pa.int64())])
    out = ds.evolve_schema(add=[pa.field("a2", pa.string())])
    assert out.schema.names[-2:] == ["a1", "a2"]
    assert Dataset.open(store, "e").read().column("a2").null_count == 3
    # A concurrent evolution the other does not fit: conflict, nothing committed.
    stale = Dataset.open(store, "e")
    Dataset.open(store, "e").evolve_schema(add=[pa.field("a3", pa.int64())])
    with pytest.raises(CommitConflict):
        stale.evolve_schema(add=[pa.field("a3", pa.string())])


def test_restore_after_compact_and_evolve_on_format_2() -> None:
    store = MemoryStore()
    ds = _base(store)
    for i in range(3):
        ds = ds.append(
            pa.table(
                {
                    "p": ["a", "b"],
                    "n": pa.array([i, i], pa.int32()),
                    "f": pa.array([0.0, 1.0], pa.float32()),
                    "k": [100 + i, 200 + i],
                }
            )
        )
    rows = ds.read().sort_by("k")
    pairs = ds.index_pairs("k").sort_by("value").column("value").to_pylist()
    compacted = ds.compact(target_file_size=1 << 20)
    evolved = compacted.evolve_schema(add=[pa.field("extra", pa.string())])
    assert len(compacted.plan().files) == 2
    back = evolved.restore(ds.version)
    info = back.info
    assert info is not None
    assert info.operation == "restore"
    assert info.parameters == {"version": str(ds.version)}
    assert (info.files_added, info.files_removed) == (8, 2)  # the small files again
    assert info.rows_added == info.rows_removed == rows.num_rows
    reopened = Dataset.open(store, "e")
    assert reopened.schema.equals(ds.schema)
    assert reopened.read().sort_by("k").equals(rows)
    assert reopened.index_pairs("k").sort_by("value").column("value").to_pylist() == pairs
    labels = {f.label for f in reopened.plan().files}
    assert set(reopened.index_pairs("k").column("label").to_pylist()) <= labels
    assert reopened.read(predicates=[[("k", "==", 201)]]).num_rows == 1
    # Appends after the restore go on from the restored state.
    assert reopened.append(rows.slice(0, 1)).read().num_rows == rows.num_rows + 1
