"""Attacks on compact(binary_copy=True) with hostile footers: a file whose footer hides its
dictionary page (no ``dictionary_page_offset``, no dictionary encoding listed) looked
mergeable, and its pages were concatenated with other files' (a dictionary page in the
middle of a column chunk: the output could not be read)."""

from __future__ import annotations

import struct

import pyarrow as pa
import pyarrow.parquet as pq

from parquetry.dataset import Dataset
from parquetry.dataset.stats import compute_stats
from parquetry.dataset.write import FileDescription
from parquetry.parquet.footer import MAGIC, footer_from_bytes
from parquetry.parquet.thrift import write_struct
from parquetry.parquet.thrift_schema import FILE_META_DATA
from parquetry.store import MemoryStore


def _hiding_its_dictionary(table: pa.Table) -> bytes:
    """``table`` dictionary-encoded by pyarrow, its footer rewritten to hide the fact."""
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, use_dictionary=True, compression="none", write_statistics=True)
    data = sink.getvalue().to_pybytes()
    raw = footer_from_bytes(data)
    meta = raw.metadata
    assert meta is not None
    for group in meta[4]:
        for chunk in group[1]:
            cmd = chunk[3]
            start = cmd.pop(11)  # the dictionary page, now the "first data page"
            cmd[9] = start
            cmd[2] = [0, 3]  # PLAIN, RLE
            cmd.pop(13, None)  # encoding stats would name the dictionary
            chunk[2] = start
    body = data[: len(data) - raw.footer_length - 8]
    footer = write_struct(meta, FILE_META_DATA)
    return body + footer + struct.pack("<i", len(footer)) + MAGIC


def test_a_hidden_dictionary_page_is_not_concatenated_into_another_files_chunk() -> None:
    store = MemoryStore()
    ids = pa.array(range(6), pa.int64())
    ds = Dataset.create(store, "c", pa.table({"id": ids, "s": ["a", "b"] * 3}))
    for n in range(3):
        table = pa.table(
            {"id": pa.array(range(10 * n + 10, 10 * n + 16), pa.int64()), "s": ["x", "y"] * 3}
        )
        data = _hiding_its_dictionary(table)
        key = f"c/table/hidden{n}.parquet"
        store.put(key, data)
        assert pq.read_table(pa.BufferReader(data)).equals(table)  # pyarrow reads it
        f = FileDescription(
            table="table",
            key=key,
            label=f"hidden{n}",
            partition=(),
            rows=6,
            size=len(data),
            stats=compute_stats(table),
        )
        ds = Dataset.commit_files(store, "c", [f])
    before = ds.read().sort_by("id")
    out = ds.compact(target_file_size=1 << 20, binary_copy=True)
    assert out.read().sort_by("id").equals(before)
