"""A footer whose row count was lowered: rows must never go missing silently.

pyarrow returns exactly a row group's ``num_rows`` rows whatever its pages hold, so a lowered
count drops rows without an error (checked below). Every read checks, before pyarrow reads:
the row groups' counts sum to the file's ``num_rows``, a non-repeated column holds one value
per row, and the rows equal what the dataset version recorded for the file. A row operation
refuses such a file and commits nothing: rewriting a truncated read would lose the rows for
good. On the old code every read below returned the truncated rows.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest

from parquetry.dataset import Dataset
from parquetry.errors import InvalidFormat
from parquetry.parquet.footer import MAGIC, footer_from_bytes
from parquetry.parquet.options import WriteOptions
from parquetry.parquet.thrift import write_struct
from parquetry.parquet.thrift_schema import FILE_META_DATA
from parquetry.snapshot import ParquetDatasetStore
from parquetry.store import MemoryStore


def _rows(start: int) -> pa.Table:
    ids = range(start, start + 10)
    return pa.table({"id": pa.array(ids, pa.int64()), "s": [f"v{i}" for i in ids]})


def _lower_group(meta: dict[int, Any]) -> None:
    meta[4][0][3] -= 3  # the row group says 2 rows, its pages hold 5


def _lower_group_and_file(meta: dict[int, Any]) -> None:
    _lower_group(meta)
    meta[3] -= 3


def _lower_everything(meta: dict[int, Any]) -> None:
    """Row group, file and every chunk's value count: only the version's record tells."""
    _lower_group_and_file(meta)
    for chunk in meta[4][0][1]:
        chunk[3][5] -= 3


LOWERED: dict[str, Callable[[dict[int, Any]], None]] = {
    "row group": _lower_group,
    "row group and file": _lower_group_and_file,
    "row group, file and values": _lower_everything,
}


def _rewritten(data: bytes, change: Callable[[dict[int, Any]], None]) -> bytes:
    raw = footer_from_bytes(data)
    assert raw.metadata is not None
    change(raw.metadata)
    footer = write_struct(raw.metadata, FILE_META_DATA)
    assert len(footer) == raw.footer_length  # same size: the version's record still fits
    body = data[: len(data) - raw.footer_length - 8]
    return body + footer + struct.pack("<i", len(footer)) + MAGIC


def _damaged(kind: str) -> tuple[MemoryStore, Dataset, str]:
    store = MemoryStore()
    options = WriteOptions(row_group_size=5)
    ds = Dataset.create(store, "c", _rows(0), write_options=options)
    ds = ds.append(_rows(10), write_options=options)
    victim = ds.plan().files[0].key
    store.put(victim, _rewritten(store.get(victim), LOWERED[kind]))
    return store, Dataset.open(store, "c"), victim


def test_pyarrow_trusts_a_lowered_row_count() -> None:
    """Why the checks exist: pyarrow drops the rows without an error."""
    store, _, victim = _damaged("row group, file and values")
    assert pq.ParquetFile(pa.BufferReader(store.get(victim))).read().num_rows == 7


@pytest.mark.parametrize("kind", sorted(LOWERED))
def test_every_read_refuses_a_lowered_row_count_naming_the_file(kind: str) -> None:
    _, ds, victim = _damaged(kind)
    reads: dict[str, Callable[[], Any]] = {
        "read": ds.read,
        "predicates": lambda: ds.read(predicates=[[("id", "<", 100)]]),
        "scan": lambda: list(ds.scan()),
        "read_file": lambda: [ds.read_file(f) for f in ds.plan().files],
        "pyarrow dataset": lambda: ds.to_pyarrow_dataset().to_table(filter=pads.field("id") < 100),
    }
    for name, read in reads.items():
        with pytest.raises(InvalidFormat) as caught:
            read()
        assert victim in str(caught.value), name
    if kind == "row group, file and values":
        assert "recorded 10 rows" in str(caught.value)
        assert "says 7" in str(caught.value)


OPS: dict[str, Callable[[Dataset], Any]] = {
    "delete_where": lambda ds: ds.delete_where([[("id", "in", [1, 11])]]),
    "update_where": lambda ds: ds.update_where([[("id", "in", [1, 11])]], set={"s": "x"}),
    "upsert": lambda ds: ds.upsert(
        pa.table({"id": pa.array([1, 11], pa.int64()), "s": ["x", "y"]}), on=["id"]
    ),
}


@pytest.mark.parametrize("kind", sorted(LOWERED))
@pytest.mark.parametrize("op", sorted(OPS))
def test_row_operations_refuse_a_lowered_row_count_and_commit_nothing(kind: str, op: str) -> None:
    store, ds, victim = _damaged(kind)
    with pytest.raises(InvalidFormat, match=victim):
        OPS[op](ds)
    assert Dataset.open(store, "c").version == ds.version


@pytest.mark.parametrize("mode", ["auto", True, False])
def test_compaction_never_commits_a_lowered_row_count(mode: Any) -> None:
    store, ds, victim = _damaged("row group, file and values")
    try:
        out = ds.compact(target_file_size=1 << 20, binary_copy=mode)
    except InvalidFormat as exc:
        error = str(exc)
    else:  # compaction may only commit every row
        assert out.read().num_rows == 20
        return
    assert victim in error
    assert Dataset.open(store, "c").version == ds.version


def test_a_snapshot_part_with_a_lowered_row_count_is_refused() -> None:
    store = MemoryStore()
    snap = ParquetDatasetStore(store, max_rows_per_file=10, row_group_size=5)
    snap.write_dataset(pa.concat_tables([_rows(0), _rows(10)]), "s/ds")
    part = "s/ds/part-00000.parquet"
    for kind in ("row group", "row group and file"):
        original = store.get(part)
        store.put(part, _rewritten(original, LOWERED[kind]))
        with pytest.raises(InvalidFormat, match="part-00000"):
            snap.read_dataset("s/ds")
        store.put(part, original)
