"""build_index on a column added by schema evolution (evolve_schema, merge_schema append).

Files written before the column was added do not have it (they read as null). build_index
read each file's column with ``read_table(columns=[c])`` and took ``.column(c)``: a raw
``KeyError: 'Field "c" does not exist in schema'`` for every dataset whose column was added
after its first write, so such a column could never be indexed.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from parquetry.dataset import Dataset, write_files
from parquetry.dataset.staleread import BaseCollected
from parquetry.errors import MetadataCorrupted
from parquetry.store import MemoryStore


@pytest.mark.parametrize("how", ["evolve_schema", "merge_schema"])
def test_build_index_on_an_added_column_indexes_the_new_files_only(how: str) -> None:
    store = MemoryStore()
    ds = Dataset.create(store, "e", pa.table({"p": ["a", "b"], "k": [1, 2]}), partition_on=["p"])
    more = pa.table({"p": ["a", "b"], "k": [3, 4], "c": pa.array(["x", None], pa.string())})
    if how == "evolve_schema":
        ds = ds.evolve_schema(add=[pa.field("c", pa.string())]).append(more)
    else:
        ds = ds.append(more, merge_schema=True)
    indexed = ds.build_index("c")
    assert indexed.secondary_indices == ("c",)
    pairs = indexed.index_pairs("c")
    assert pairs.column("value").to_pylist() == ["x"]
    assert indexed.read(predicates=[[("c", "==", "x")]]).column("k").to_pylist() == [3]
    assert sorted(indexed.read(predicates=[[("c", "is null")]]).column("k").to_pylist()) == [
        1,
        2,
        4,
    ]
    # Later writes keep the index up to date.
    after = indexed.append(pa.table({"p": ["b"], "k": [5], "c": ["x"]}))
    got = Dataset.open(store, "e").read(predicates=[[("c", "==", "x")]])
    assert sorted(got.column("k").to_pylist()) == [3, 5]
    assert after.version == Dataset.open(store, "e").version


def test_commit_files_lacking_a_nullable_indexed_column_with_merge_schema() -> None:
    """The same read at commit time: files written without an indexed nullable column and
    committed with ``merge_schema`` (the column reads as null for them) raised a raw
    KeyError from the commit's index delta (ops._index_values); nothing was committed."""
    store = MemoryStore()
    Dataset.create(store, "e", pa.table({"k": [1, 2], "c": ["x", None]}), secondary_indices=["c"])
    files = write_files(store, "e", pa.table({"k": [3]}))
    out = Dataset.commit_files(
        store, "e", files, schema=pa.schema([("k", pa.int64())]), merge_schema=True
    )
    assert sorted(out.read().column("k").to_pylist()) == [1, 2, 3]
    assert out.read(predicates=[[("c", "is null")]]).column("k").to_pylist() == [2, 3]
    assert out.index_pairs("c").column("value").to_pylist() == ["x"]
    assert out.read(predicates=[[("c", "==", "x")]]).column("k").to_pylist() == [1]


def test_build_index_on_a_stale_version_after_a_concurrent_widening() -> None:
    """build_index typed the index by the schema of the version it was called on; a
    concurrent evolve_schema widened the column (int32 to double) and appended 1.5: the
    retry on the newest version cast 1.5 to int64, a raw ArrowInvalid ('Float value 1.500000
    was truncated'). The index is now typed by the version it is committed on."""
    store = MemoryStore()
    stale = Dataset.create(
        store,
        "e",
        pa.table({"p": ["a", "b"], "k": [1, 2], "n": pa.array([1, 2], pa.int32())}),
        partition_on=["p"],
    )
    newer = stale.evolve_schema(widen={"n": pa.float64()})
    newer.append(pa.table({"p": ["a"], "k": [3], "n": [1.5]}))
    indexed = stale.build_index("n")
    assert indexed.schema.field("n").type == pa.float64()
    pairs = indexed.index_pairs("n")
    assert pairs.column("value").type == pa.float64()
    assert sorted(pairs.column("value").to_pylist()) == [1.0, 1.5, 2.0]
    got = Dataset.open(store, "e").read(predicates=[[("n", "==", 1.5)]])
    assert got.column("k").to_pylist() == [3]
    assert Dataset.open(store, "e").read(predicates=[[("n", "<", 1.7)]]).num_rows == 2


@pytest.mark.parametrize("indexed", ["n", "k"])
def test_build_index_on_a_stale_version_whose_files_gc_collected(indexed: str) -> None:
    """A newer version compacted the files and GC (retention 0) deleted the old ones: a
    build_index on the stale handle read them and raised a bare NotFound of the key. The
    index covers every file of the version it commits on, so it is built on the newest."""
    store = MemoryStore()
    stale = Dataset.create(
        store,
        "e",
        pa.table({"p": ["a", "b"], "k": [1, 2], "n": pa.array([1, 2], pa.int32())}),
        partition_on=["p"],
    ).append(pa.table({"p": ["a", "b"], "k": [3, 4], "n": pa.array([3, 4], pa.int32())}))
    Dataset.open(store, "e").compact().garbage_collect(retention=0)
    indexed_ds = stale.build_index(indexed)
    newest = Dataset.open(store, "e")
    assert newest.version == indexed_ds.version
    assert newest.secondary_indices == (indexed,)
    assert sorted(newest.index_pairs(indexed).column("value").to_pylist()) == [1, 2, 3, 4]
    assert newest.read(predicates=[[(indexed, "==", 3)]]).column("k").to_pylist() == [3]


def test_build_index_still_names_a_file_the_newest_version_lost() -> None:
    # Not a stale read: the newest version references the missing file (MetadataCorrupted).
    store = MemoryStore()
    ds = Dataset.create(store, "e", pa.table({"k": [1, 2]}))
    (planned,) = ds.plan().files
    store.delete(planned.key)
    with pytest.raises(MetadataCorrupted, match="is missing") as info:
        ds.build_index("k")
    assert info.value.key == planned.key


def test_stale_compact_after_gc_says_the_base_was_collected() -> None:
    store = MemoryStore()
    stale = Dataset.create(store, "e", pa.table({"p": ["a"], "k": [1]}), partition_on=["p"])
    stale = stale.append(pa.table({"p": ["a"], "k": [2]}))
    Dataset.open(store, "e").compact().garbage_collect(retention=0)
    Dataset.open(store, "e").append(pa.table({"p": ["a"], "k": [3]}))
    with pytest.raises(BaseCollected):
        stale.compact()
