"""remote-store 0.33.0's own ext.parquet tests (tests/ext/test_parquet.py, ids W/R/E/D/X of
the fact sheet), translated to parquetry and run on memory, local disk and S3 (moto)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from parquetry import (
    AlreadyExists,
    CapabilityNotSupported,
    DatasetIncomplete,
    ManifestCorrupted,
    NotFound,
    ParquetDatasetStore,
)
from parquetry.store import Capability, MemoryStore, Store
from parquetry.testing import CountingStore, LimitedStore


def test_constructor_defaults(any_store: Store) -> None:  # W1
    pds = ParquetDatasetStore(any_store)
    assert pds.compression == "zstd"
    assert pds.max_rows_per_file is None
    assert pds.row_group_size is None
    assert pds.store is any_store


def test_write_single_file(pds: ParquetDatasetStore, sample_table: pa.Table) -> None:  # W2
    pds.write_dataset(sample_table, "ds/single")
    for name in ("data.parquet", "manifest.json", "_SUCCESS"):
        assert pds.store.exists(f"ds/single/{name}")


def test_write_multi_part(any_store: Store, sample_table: pa.Table) -> None:  # W3
    pds = ParquetDatasetStore(any_store, max_rows_per_file=1)
    pds.write_dataset(sample_table, "ds/multi")
    for i in range(3):
        assert any_store.exists(f"ds/multi/part-{i:05d}.parquet")
    assert any_store.exists("ds/multi/manifest.json")
    assert any_store.exists("ds/multi/_SUCCESS")


def test_write_creates_manifest(pds: ParquetDatasetStore, sample_table: pa.Table) -> None:  # W4
    m = pds.write_dataset(sample_table, "ds/manifest-check")
    assert m.dataset_key == "ds/manifest-check"
    assert m.row_count == 3
    assert m.compression == pds.compression
    assert len(m.parts) >= 1
    assert m.schema_hash


def test_success_marker(pds: ParquetDatasetStore, sample_table: pa.Table) -> None:  # W5
    pds.write_dataset(sample_table, "ds/success")
    assert pds.store.get("ds/success/_SUCCESS") == b""


def test_already_exists(pds: ParquetDatasetStore, sample_table: pa.Table) -> None:  # W6
    pds.write_dataset(sample_table, "ds/dup")
    with pytest.raises(AlreadyExists, match="ds/dup"):
        pds.write_dataset(sample_table, "ds/dup")


def test_overwrite_replaces(pds: ParquetDatasetStore, sample_table: pa.Table) -> None:  # W7
    pds.write_dataset(sample_table, "ds/ow")
    m = pds.write_dataset(sample_table.slice(0, 2), "ds/ow", overwrite=True)
    assert m.row_count == 2
    assert pds.read_dataset("ds/ow").num_rows == 2


def test_run_id_and_metadata(pds: ParquetDatasetStore, sample_table: pa.Table) -> None:  # W8/W9
    m = pds.write_dataset(
        sample_table, "ds/run", run_id="run-42", metadata={"pipeline": "etl", "version": "3"}
    )
    assert m.run_id == "run-42"
    assert m.metadata == {"pipeline": "etl", "version": "3"}
    assert pds.read_manifest("ds/run") == m


def test_overwrite_requires_delete(sample_table: pa.Table) -> None:  # W10
    inner = CountingStore(MemoryStore())
    pds = ParquetDatasetStore(LimitedStore(inner, {Capability.ATOMIC_WRITE, Capability.READ}))
    with pytest.raises(CapabilityNotSupported, match=r"DELETE|delete") as info:
        pds.write_dataset(sample_table, "ds/x", overwrite=True)
    assert info.value.capability == "delete"
    assert inner.total == 0


def test_requires_atomic_write(sample_table: pa.Table) -> None:  # W12
    inner = CountingStore(MemoryStore())
    caps = {Capability.READ, Capability.WRITE, Capability.LIST, Capability.DELETE}
    pds = ParquetDatasetStore(LimitedStore(inner, caps))
    for overwrite in (False, True):
        with pytest.raises(CapabilityNotSupported, match="atomic_write") as info:
            pds.write_dataset(sample_table, "ds/x", overwrite=overwrite)
        assert info.value.capability == "atomic_write"
    assert inner.total == 0  # checked before any I/O


def test_schema_hash_deterministic(pds: ParquetDatasetStore, sample_table: pa.Table) -> None:
    a = pds.write_dataset(sample_table, "ds/h1")  # W11
    b = pds.write_dataset(sample_table, "ds/h2")
    assert a.schema_hash == b.schema_hash


def test_roundtrip_single(pds: ParquetDatasetStore, sample_table: pa.Table) -> None:  # R1
    pds.write_dataset(sample_table, "ds/rt")
    out = pds.read_dataset("ds/rt")
    assert out.num_rows == sample_table.num_rows
    assert out.schema.equals(sample_table.schema)
    assert out.to_pydict() == sample_table.to_pydict()


def test_roundtrip_multi_part(any_store: Store, sample_table: pa.Table) -> None:  # R2
    pds = ParquetDatasetStore(any_store, max_rows_per_file=2)
    m = pds.write_dataset(sample_table, "ds/rtm")
    assert m.parts == ["part-00000.parquet", "part-00001.parquet"]
    assert pds.read_dataset("ds/rtm").to_pydict() == sample_table.to_pydict()


def test_missing_success(pds: ParquetDatasetStore, sample_table: pa.Table) -> None:  # R3
    pds.write_dataset(sample_table, "ds/ms")
    pds.store.delete("ds/ms/_SUCCESS")
    with pytest.raises(DatasetIncomplete, match="_SUCCESS"):
        pds.read_dataset("ds/ms")


def test_missing_part(pds: ParquetDatasetStore, sample_table: pa.Table) -> None:  # R4
    pds.write_dataset(sample_table, "ds/mp")
    pds.store.delete("ds/mp/data.parquet")
    with pytest.raises(DatasetIncomplete, match=r"part|data.parquet"):
        pds.read_dataset("ds/mp")


def test_projection(pds: ParquetDatasetStore, sample_table: pa.Table) -> None:  # R5
    pds.write_dataset(sample_table, "ds/proj")
    out = pds.read_dataset("ds/proj", columns=["id", "name"])
    assert out.column_names == ["id", "name"]
    assert out.num_rows == 3


def test_read_manifest_only(pds: ParquetDatasetStore, sample_table: pa.Table) -> None:  # R6
    pds.write_dataset(sample_table, "ds/mo")
    m = pds.read_manifest("ds/mo")
    assert m.dataset_key == "ds/mo"
    assert m.row_count == 3


def test_corrupted_manifest(pds: ParquetDatasetStore, sample_table: pa.Table) -> None:  # R7
    pds.write_dataset(sample_table, "ds/cm")
    pds.store.put("ds/cm/manifest.json", b"{{garbage")
    with pytest.raises(ManifestCorrupted, match=r"[Jj]son|[Pp]ars|[Cc]orrupt"):
        pds.read_dataset("ds/cm")
    with pytest.raises(ManifestCorrupted, match=r"[Jj]son|[Pp]ars|[Cc]orrupt"):
        pds.read_manifest("ds/cm")


def test_dataset_exists(pds: ParquetDatasetStore, sample_table: pa.Table) -> None:  # E1/E2
    pds.write_dataset(sample_table, "ds/ex")
    assert pds.dataset_exists("ds/ex")
    assert not pds.dataset_exists("ds/never")


def test_delete(pds: ParquetDatasetStore, sample_table: pa.Table) -> None:  # D1/D2
    pds.write_dataset(sample_table, "ds/del")
    pds.delete_dataset("ds/del")
    assert not pds.dataset_exists("ds/del")
    assert not pds.store.exists("ds/del/data.parquet")
    assert not pds.store.exists("ds/del/manifest.json")
    with pytest.raises(NotFound, match="ds/ghost"):
        pds.delete_dataset("ds/ghost")


def test_nested_key(pds: ParquetDatasetStore, sample_table: pa.Table) -> None:  # X1
    pds.write_dataset(sample_table, "silver/orders/2026-03-28")
    assert pds.read_dataset("silver/orders/2026-03-28").num_rows == 3


def test_empty_table(pds: ParquetDatasetStore) -> None:  # X2
    empty = pa.table({"id": pa.array([], pa.int64()), "name": pa.array([], pa.string())})
    m = pds.write_dataset(empty, "ds/empty")
    assert m.parts == ["data.parquet"]
    assert m.row_count == 0
    out = pds.read_dataset("ds/empty")
    assert out.num_rows == 0
    assert out.schema.equals(empty.schema)


def test_many_parts(any_store: Store) -> None:  # X3
    table = pa.table({"i": list(range(100))})
    pds = ParquetDatasetStore(any_store, max_rows_per_file=7)
    m = pds.write_dataset(table, "ds/many")
    assert len(m.parts) == 15
    assert pds.read_dataset("ds/many").equals(table)


@pytest.mark.parametrize("codec", ["zstd", "snappy", "none"])
def test_codecs(any_store: Store, sample_table: pa.Table, codec: str) -> None:  # X4
    pds = ParquetDatasetStore(any_store, compression=codec)
    m = pds.write_dataset(sample_table, f"ds/{codec}")
    assert m.compression == codec
    assert pds.read_dataset(f"ds/{codec}").to_pydict() == sample_table.to_pydict()


def test_example_demo(memory_store: Store, sample_table: pa.Table) -> None:  # test_examples
    pds = ParquetDatasetStore(memory_store)
    assert pds.write_dataset(sample_table, "demo/one").parts == ["data.parquet"]
    assert pds.read_dataset("demo/one", columns=["id", "name"]).column_names == ["id", "name"]
    multi = ParquetDatasetStore(memory_store, max_rows_per_file=2)
    assert len(multi.write_dataset(sample_table, "demo/two").parts) == 2
    multi.write_dataset(sample_table.slice(0, 2), "demo/two", overwrite=True)
    assert multi.read_dataset("demo/two").num_rows == 2
    assert multi.read_manifest("demo/two").compression == "zstd"
    assert pds.dataset_exists("demo/one")
    assert not pds.dataset_exists("demo/none")
