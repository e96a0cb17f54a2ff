"""LeanAssembler writes exactly the bytes of RowGroupAssembler(lean=True), and pyarrow reads
them as the rows of the copied row groups."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from parquetry.parquet.footer import footer_from_bytes
from parquetry.parquet.leancopy import LeanAssembler
from parquetry.parquet.rgcopy import RowGroupAssembler


def _file(k: int, **kwargs: object) -> bytes:
    table = pa.table(
        {
            "id": pa.array(range(10 * k, 10 * k + 10), pa.int64()),
            "s": pa.array([None if i % 4 == 0 else f"v{i % 3}" for i in range(10)]),
            "l": pa.array([[i, i + 1] for i in range(10)], pa.list_(pa.int32())),
        }
    )
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, row_group_size=4, **kwargs)  # type: ignore[arg-type]
    return bytes(sink.getvalue().to_pybytes())


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"use_dictionary": False, "compression": "zstd"},
        {"sorting_columns": [pq.SortingColumn(0)]},
    ],
)
def test_same_bytes_as_the_generic_writer_and_the_same_rows(kwargs: dict[str, object]) -> None:
    files = [_file(k, **kwargs) for k in range(3)]
    metas = [footer_from_bytes(data).metadata for data in files]
    template = metas[0]
    assert template is not None
    lean, generic = LeanAssembler(template, b"x"), RowGroupAssembler(template, b"x", lean=True)
    for data, meta in zip(files, metas, strict=True):
        assert meta is not None
        for group in meta[4]:
            lean.add_whole(data, group)
            generic.add_whole(data, group)
    out = lean.finish()
    assert out == generic.finish()
    table = pq.ParquetFile(pa.BufferReader(bytes(out)), page_checksum_verification=True).read()
    expected = pa.concat_tables(pq.read_table(pa.BufferReader(d)) for d in files)
    assert table.equals(expected)
    assert pq.ParquetFile(pa.BufferReader(bytes(out))).metadata.num_row_groups == 9


def test_more_than_fourteen_row_groups_and_columns_use_long_list_headers() -> None:
    table = pa.table({f"c{i}": pa.array(range(40), pa.int64()) for i in range(16)})
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, row_group_size=2)
    data = bytes(sink.getvalue().to_pybytes())
    meta = footer_from_bytes(data).metadata
    assert meta is not None
    lean, generic = LeanAssembler(meta, b"x"), RowGroupAssembler(meta, b"x", lean=True)
    for group in meta[4]:
        lean.add_whole(data, group)
        generic.add_whole(data, group)
    out = lean.finish()
    assert out == generic.finish()
    assert pq.read_table(pa.BufferReader(bytes(out))).equals(table)
