"""Spec 042 behaviours beyond the upstream suite: input checks before any I/O, accepted
input kinds, the layout rules, and reads that refuse inconsistent datasets clearly."""

from __future__ import annotations

import json

import pandas as pd
import polars as pl
import pyarrow as pa
import pytest
from snapshot_helpers import keys_under

from parquetry import (
    DatasetIncomplete,
    ManifestCorrupted,
    NotFound,
    ParquetDatasetStore,
)
from parquetry.errors import InvalidArgument, InvalidKey, SchemaMismatch, UnknownColumn
from parquetry.store import MemoryStore, Store
from parquetry.testing import CountingStore


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        ({"max_rows_per_file": 0}, "max_rows_per_file"),
        ({"max_rows_per_file": -1}, "max_rows_per_file"),
        ({"max_rows_per_file": True}, "max_rows_per_file"),
        ({"max_rows_per_file": 2.5}, "max_rows_per_file"),
        ({"row_group_size": 0}, "row_group_size"),
        ({"compression": "bogus"}, "bogus"),
        ({"compression": None}, "compression"),
        ({"max_workers": 0}, "max_workers"),
    ],
)
def test_bad_options_refused_without_io(kwargs: dict[str, object], pattern: str) -> None:
    store = CountingStore(MemoryStore())
    with pytest.raises(InvalidArgument, match=pattern):
        ParquetDatasetStore(store, **kwargs)  # type: ignore[arg-type]
    assert store.total == 0


def test_not_a_store() -> None:
    with pytest.raises(InvalidArgument, match="Store"):
        ParquetDatasetStore("memory://x")  # type: ignore[arg-type]


@pytest.mark.parametrize("key", ["", "/abs", "a//b", "a/b/", "a/../b", "a/_SUCCESS", 7])
def test_bad_keys_refused_without_io(key: object, sample_table: pa.Table) -> None:
    store = CountingStore(MemoryStore())
    pds = ParquetDatasetStore(store)
    with pytest.raises(InvalidKey):
        pds.write_dataset(sample_table, key)  # type: ignore[arg-type]
    with pytest.raises(InvalidKey):
        pds.read_dataset(key)  # type: ignore[arg-type]
    assert store.total == 0


@pytest.mark.parametrize("data", [{"a": [1, 2]}, "text", b"bytes", 42, None, [1, 2], [], iter([])])
def test_non_table_input_refused_without_io(data: object) -> None:
    store = CountingStore(MemoryStore())
    with pytest.raises(InvalidArgument):
        ParquetDatasetStore(store).write_dataset(data, "ds/x")
    assert store.total == 0


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        ({"run_id": 5}, "run_id"),
        ({"metadata": {"a": 1}}, "metadata"),
        ({"metadata": "x"}, "metadata"),
        ({"overwrite": "yes"}, "overwrite"),
    ],
)
def test_bad_arguments_refused_without_io(
    kwargs: dict[str, object], pattern: str, sample_table: pa.Table
) -> None:
    store = CountingStore(MemoryStore())
    with pytest.raises(InvalidArgument, match=pattern):
        ParquetDatasetStore(store).write_dataset(sample_table, "ds/x", **kwargs)  # type: ignore[arg-type]
    assert store.total == 0


def test_accepted_input_kinds(memory_store: Store, sample_table: pa.Table) -> None:
    pds = ParquetDatasetStore(memory_store, max_rows_per_file=2)
    batches = sample_table.to_batches(max_chunksize=1)
    inputs: dict[str, object] = {
        "batch": sample_table.to_batches()[0],
        "reader": pa.RecordBatchReader.from_batches(sample_table.schema, batches),
        "list": batches,
        "generator": (b for b in batches),
        "tables": [sample_table.slice(0, 1), sample_table.slice(1)],
        "polars": pl.from_arrow(sample_table),
        "c_stream": sample_table.to_reader(),
    }
    for name, data in inputs.items():
        pds.write_dataset(data, f"in/{name}")
        out = pds.read_dataset(f"in/{name}")
        assert out.to_pydict() == sample_table.to_pydict(), name
    frame = pd.DataFrame({"id": [1, 2, 3], "name": ["a", "b", "c"]})
    pds.write_dataset(frame, "in/pandas")
    assert pds.read_dataset("in/pandas").to_pandas().equals(frame)


def test_iterable_with_changing_schema(memory_store: Store) -> None:
    pds = ParquetDatasetStore(memory_store, max_rows_per_file=1)
    items = [pa.record_batch({"a": [1]}), pa.record_batch({"a": ["x"]})]
    with pytest.raises(SchemaMismatch, match="item 1"):
        pds.write_dataset(items, "ds/bad")
    assert not pds.dataset_exists("ds/bad")
    assert keys_under(memory_store, "ds/bad") == []  # staged parts were removed


@pytest.mark.parametrize(
    ("rows", "max_rows", "parts"),
    [
        (3, None, ["data.parquet"]),
        (3, 3, ["data.parquet"]),
        (3, 100, ["data.parquet"]),
        (0, 2, ["data.parquet"]),
        (4, 2, ["part-00000.parquet", "part-00001.parquet"]),
    ],
)
def test_part_naming(
    memory_store: Store, rows: int, max_rows: int | None, parts: list[str]
) -> None:
    table = pa.table({"i": pa.array(range(rows), pa.int64())})
    pds = ParquetDatasetStore(memory_store, max_rows_per_file=max_rows)
    for name, data in (("table", table), ("stream", table.to_reader(max_chunksize=1))):
        m = pds.write_dataset(data, f"ds/{name}")
        assert m.parts == parts
        assert keys_under(memory_store, f"ds/{name}") == sorted(
            [f"ds/{name}/{p}" for p in parts] + [f"ds/{name}/_SUCCESS", f"ds/{name}/manifest.json"]
        )
        assert pds.read_dataset(f"ds/{name}").equals(table)


def test_overwrite_removes_stale_files(memory_store: Store) -> None:
    table = pa.table({"i": list(range(10))})
    many = ParquetDatasetStore(memory_store, max_rows_per_file=3)
    many.write_dataset(table, "ds/s")
    memory_store.put("ds/s/part-00042.parquet", b"left by a crashed writer")
    memory_store.put("ds/s/_staging/old-write/00000.parquet", b"crashed staging")
    ParquetDatasetStore(memory_store).write_dataset(table, "ds/s", overwrite=True)
    # Another write's staging is left alone while it may still be alive (staging_grace).
    assert keys_under(memory_store, "ds/s/_staging") == ["ds/s/_staging/old-write/00000.parquet"]
    ParquetDatasetStore(memory_store, staging_grace=0).write_dataset(table, "ds/s", overwrite=True)
    assert keys_under(memory_store, "ds/s") == [
        "ds/s/_SUCCESS",
        "ds/s/data.parquet",
        "ds/s/manifest.json",
    ]


def test_nested_dataset_survives_parent_overwrite(
    memory_store: Store, sample_table: pa.Table
) -> None:
    pds = ParquetDatasetStore(memory_store)
    pds.write_dataset(sample_table, "a/child")
    pds.write_dataset(sample_table, "a")
    pds.write_dataset(sample_table.slice(1), "a", overwrite=True)
    assert pds.read_dataset("a/child").num_rows == 3


# --- reads refuse inconsistent datasets ------------------------------------------------


@pytest.fixture
def written(any_store: Store) -> ParquetDatasetStore:
    pds = ParquetDatasetStore(any_store, max_rows_per_file=2)
    pds.write_dataset(pa.table({"id": [1, 2, 3], "s": ["a", "b", "c"]}), "ds/r")
    return pds


def _patch_manifest(pds: ParquetDatasetStore, **changes: object) -> None:
    data = json.loads(pds.store.get("ds/r/manifest.json"))
    data.update(changes)
    pds.store.put("ds/r/manifest.json", json.dumps(data).encode())


def test_non_utf8_manifest(written: ParquetDatasetStore) -> None:
    written.store.put("ds/r/manifest.json", b'{"dataset_key": "\xff"}')
    for read in (written.read_dataset, written.read_manifest):
        with pytest.raises(ManifestCorrupted, match="UTF-8"):
            read("ds/r")


@pytest.mark.parametrize(
    ("changes", "pattern"),
    [
        ({"parts": []}, "no parts"),
        ({"row_count": 4}, "row_count"),
        ({"row_count": -1}, "row_count"),
        ({"schema_hash": "0000000000000000"}, "schema_hash"),
        ({"parts": ["part-00000.parquet", "part-00000.parquet"]}, "twice"),
        ({"parts": ["../x.parquet"]}, "invalid part"),
    ],
)
def test_manifest_disagreeing_with_parts(
    written: ParquetDatasetStore, changes: dict[str, object], pattern: str
) -> None:
    _patch_manifest(written, **changes)
    with pytest.raises(ManifestCorrupted, match=pattern):
        written.read_dataset("ds/r")
    with pytest.raises(ManifestCorrupted, match=pattern):
        written.read_dataset("ds/r", columns=["id"])


def test_schema_hash_checked_per_part(written: ParquetDatasetStore) -> None:
    other = ParquetDatasetStore(written.store)
    other.write_dataset(pa.table({"id": ["x"], "s": ["y"]}), "ds/other")
    written.store.copy("ds/other/data.parquet", "ds/r/part-00001.parquet")
    with pytest.raises(ManifestCorrupted, match="part-00001"):
        written.read_dataset("ds/r")


def test_corrupt_part_is_invalid_format(written: ParquetDatasetStore) -> None:
    from parquetry.errors import InvalidFormat

    written.store.put("ds/r/part-00001.parquet", b"not parquet at all")
    with pytest.raises(InvalidFormat, match="part-00001"):
        written.read_dataset("ds/r")


def test_unknown_column(written: ParquetDatasetStore) -> None:
    with pytest.raises(UnknownColumn, match="nope") as info:
        written.read_dataset("ds/r", columns=["id", "nope"])
    assert info.value.column == "nope"
    with pytest.raises(InvalidArgument, match="columns"):
        written.read_dataset("ds/r", columns="id")


def test_projection_order_and_empty(written: ParquetDatasetStore) -> None:
    assert written.read_dataset("ds/r", columns=["s", "id"]).column_names == ["s", "id"]
    assert written.read_dataset("ds/r", columns=[]).num_columns == 0


def test_success_without_manifest(written: ParquetDatasetStore) -> None:
    written.store.delete("ds/r/manifest.json")
    with pytest.raises(DatasetIncomplete, match="manifest"):
        written.read_dataset("ds/r")
    with pytest.raises(NotFound, match="ds/r"):
        written.read_manifest("ds/r")


def test_never_written(written: ParquetDatasetStore) -> None:
    with pytest.raises(DatasetIncomplete, match="_SUCCESS"):
        written.read_dataset("ds/none")
    with pytest.raises(NotFound):
        written.read_manifest("ds/none")


def test_delete_removes_everything(written: ParquetDatasetStore) -> None:
    written.store.put("ds/r/_staging/w/00000.parquet", b"x")
    written.delete_dataset("ds/r")
    assert keys_under(written.store, "ds/r") == []
