"""StoreFile: the footer costs one request; reads map onto ranged gets."""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from parquetry.errors import InvalidArgument
from parquetry.store import MemoryStore
from parquetry.store.rangefile import TAIL_PREFETCH
from parquetry.testing import CountingStore


def parquet_bytes(rows: int) -> bytes:
    buf = io.BytesIO()
    table = pa.table({"x": list(range(rows)), "y": [str(i) for i in range(rows)]})
    pq.write_table(table, buf, compression="none")
    return buf.getvalue()


def test_metadata_costs_one_ranged_get_with_known_size() -> None:
    data = parquet_bytes(100_000)
    assert len(data) > TAIL_PREFETCH
    store = CountingStore(MemoryStore())
    store.put("f.parquet", data)
    store.reset()
    pf = pq.ParquetFile(store.open("f.parquet", size=len(data)))
    assert pf.metadata.num_rows == 100_000
    assert store.counts == {"get_range": 1}
    assert store.bytes_read == TAIL_PREFETCH


def test_small_file_is_read_once() -> None:
    data = parquet_bytes(10)
    store = CountingStore(MemoryStore())
    store.put("f.parquet", data)
    store.reset()
    table = pq.read_table(store.open("f.parquet"))
    assert table.num_rows == 10
    assert store.counts["head"] == 1
    assert store.bytes_read == len(data)  # the tail block is the whole file, read once
    assert store.counts["get_range"] == 1


def test_seek_rules() -> None:
    store = MemoryStore()
    store.put("k", b"0123456789")
    f = store.open("k")
    assert f.seek(3) == 3
    assert f.seek(2, io.SEEK_CUR) == 5
    assert f.read(2) == b"56"
    assert f.seek(-1, io.SEEK_END) == 9
    assert f.read(100) == b"9"
    assert f.seek(50) == 50
    assert f.read() == b""
    with pytest.raises(InvalidArgument, match="'k'"):
        f.seek(-20, io.SEEK_END)
    with pytest.raises(InvalidArgument):
        f.seek(0, 7)
    assert f.readall() == b""
