"""Datasets move between parquetry and remote-store 0.33.0 in both directions, on the same
directory (LocalBackend) and through copied objects (MemoryBackend); manifests are
byte-identical up to the creation time."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow as pa
import pytest
from remote_store import Store as RsStore
from remote_store.backends import LocalBackend, MemoryBackend
from remote_store.ext.parquet import ParquetDatasetStore as RsPds
from snapshot_helpers import keys_under

from parquetry import ParquetDatasetStore
from parquetry.store import LocalStore, MemoryStore

TABLE = pa.table(
    {
        "id": pa.array([1, 2, 3, 4, 5], pa.int64()),
        "name": ["a", "b", None, "d", "e"],
        "tags": [[1], [], None, [2, 3], [4]],
        "ts": pa.array([1, 2, 3, 4, 5], pa.timestamp("us", tz="UTC")),
    }
).replace_schema_metadata({"origin": "test"})


@pytest.fixture
def both(tmp_path: Path) -> tuple[ParquetDatasetStore, RsStore]:
    return ParquetDatasetStore(LocalStore(tmp_path)), RsStore(LocalBackend(str(tmp_path)))


def _without_time(raw: bytes) -> bytes:
    return re.sub(rb'"created_at_utc": "[^"]*"', b'"created_at_utc": "T"', raw)


@pytest.mark.parametrize("max_rows", [None, 2])
def test_manifest_bytes_identical(
    both: tuple[ParquetDatasetStore, RsStore], max_rows: int | None
) -> None:
    ours, rs = both
    ours = ParquetDatasetStore(ours.store, max_rows_per_file=max_rows)
    theirs = RsPds(rs, max_rows_per_file=max_rows)
    kwargs = {"run_id": "r-1", "metadata": {"b": "2", "a": "ü"}}
    m_ours = ours.write_dataset(TABLE, "x/ours", **kwargs)  # type: ignore[arg-type]
    m_theirs = theirs.write_dataset(TABLE, "x/theirs", **kwargs)  # type: ignore[arg-type]
    raw_ours = ours.store.get("x/ours/manifest.json")
    raw_theirs = rs.read_bytes("x/theirs/manifest.json")
    assert _without_time(raw_ours).replace(b"x/ours", b"x/theirs") == _without_time(raw_theirs)
    assert not raw_ours.endswith(b"\n")
    assert m_ours.schema_hash == m_theirs.schema_hash
    assert m_ours.parts == m_theirs.parts
    # Same created_at_utc format: datetime.now(UTC).isoformat().
    pattern = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\+00:00"
    assert re.fullmatch(pattern, json.loads(raw_ours)["created_at_utc"])
    assert re.fullmatch(pattern, m_theirs.created_at_utc)
    assert ours.store.get("x/ours/_SUCCESS") == rs.read_bytes("x/theirs/_SUCCESS") == b""
    names = [k.rsplit("/", 1)[1] for k in keys_under(ours.store, "x/ours")]
    assert names == sorted(rs_name.name for rs_name in rs.list_files("x/theirs"))


@pytest.mark.parametrize("max_rows", [None, 2])
def test_parquetry_to_remote_store_local(
    both: tuple[ParquetDatasetStore, RsStore], max_rows: int | None
) -> None:
    ours, rs = both
    ours = ParquetDatasetStore(ours.store, max_rows_per_file=max_rows)
    ours.write_dataset(TABLE, "d")
    theirs = RsPds(rs)
    assert theirs.dataset_exists("d")
    assert theirs.read_dataset("d").equals(TABLE)
    assert theirs.read_dataset("d", columns=["name"]).column("name").to_pylist() == [
        "a",
        "b",
        None,
        "d",
        "e",
    ]
    assert theirs.read_manifest("d").to_json() == ours.read_manifest("d").to_json()
    # And after a parquetry overwrite (journal and staging are gone by then).
    ours.write_dataset(TABLE.slice(1), "d", overwrite=True)
    assert theirs.read_dataset("d").equals(TABLE.slice(1))


@pytest.mark.parametrize("max_rows", [None, 2])
def test_remote_store_to_parquetry_local(
    both: tuple[ParquetDatasetStore, RsStore], max_rows: int | None
) -> None:
    ours, rs = both
    RsPds(rs, max_rows_per_file=max_rows).write_dataset(TABLE, "d", run_id="rs")
    assert ours.dataset_exists("d")
    assert ours.read_dataset("d").equals(TABLE)
    assert ours.read_dataset("d", columns=["tags", "id"]).column_names == ["tags", "id"]
    assert ours.read_manifest("d").run_id == "rs"
    # parquetry overwrites a remote-store dataset, then remote-store overwrites it back.
    ours.write_dataset(TABLE.slice(0, 2), "d", overwrite=True)
    assert RsPds(rs).read_dataset("d").equals(TABLE.slice(0, 2))
    RsPds(rs, max_rows_per_file=max_rows).write_dataset(TABLE, "d", overwrite=True)
    assert ours.read_dataset("d").equals(TABLE)


def test_remote_store_crash_leftovers_cleaned(both: tuple[ParquetDatasetStore, RsStore]) -> None:
    ours, rs = both
    RsPds(rs, max_rows_per_file=1).write_dataset(TABLE, "d")
    rs.delete("d/_SUCCESS")  # a remote-store write that died before its marker
    ours.write_dataset(TABLE.slice(0, 1), "d")
    assert keys_under(ours.store, "d") == ["d/_SUCCESS", "d/data.parquet", "d/manifest.json"]
    assert RsPds(rs).read_dataset("d").equals(TABLE.slice(0, 1))


def _copy_memory(src: MemoryStore, dst: RsStore, prefix: str) -> None:
    for meta in src.list(prefix):
        dst.write(meta.key, src.get(meta.key), overwrite=True)


def test_memory_both_ways() -> None:
    ours = ParquetDatasetStore(MemoryStore(), max_rows_per_file=2)
    rs = RsStore(MemoryBackend())
    ours.write_dataset(TABLE, "m/ours")
    _copy_memory(ours.store, rs, "m/ours")  # type: ignore[arg-type]
    assert RsPds(rs).read_dataset("m/ours").equals(TABLE)
    RsPds(rs).write_dataset(TABLE, "m/theirs")
    for info in rs.list_files("m/theirs"):
        ours.store.put(str(info.path), rs.read_bytes(str(info.path)))
    assert ours.read_dataset("m/theirs").equals(TABLE)
