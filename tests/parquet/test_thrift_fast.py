"""The Thrift reader's fast path decodes exactly what the general reader decodes, or gives up.

Oracle: the general reader (``thrift._Reader``), which checks every field against its spec.
"""

from __future__ import annotations

import datetime as dt
import decimal
import struct
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parquetry.parquet import thrift
from parquetry.parquet.thrift_fast import fast_decode
from parquetry.parquet.thrift_schema import FILE_META_DATA, PAGE_HEADER


def _general(data: bytes, pos: int, spec: dict[int, Any]) -> tuple[Any, int, int] | None:
    reader = thrift._Reader(data, pos)
    try:
        result = reader.struct(0, spec)
    except (thrift.ThriftError, RecursionError):
        return None
    return result, reader.pos, reader.dropped


def _file(**kwargs: Any) -> bytes:
    table = pa.table(
        {
            "i8": pa.array([1, -2, None], pa.int8()),
            "u32": pa.array([1, 2, 3], pa.uint32()),
            "i64": pa.array([1, 2**40, -5], pa.int64()),
            "f": pa.array([0.5, None, -1.0], pa.float32()),
            "d": pa.array([0.5, 2.0, -1.0]),
            "s": pa.array(["a", "bb", None]),
            "b": pa.array([b"x", b"", b"\xff"]),
            "flag": pa.array([True, False, None]),
            "day": pa.array([dt.date(2020, 1, 1)] * 3),
            "ts": pa.array([dt.datetime(2020, 1, 1, 12)] * 3, pa.timestamp("us", tz="UTC")),
            "dec": pa.array([decimal.Decimal("1.25")] * 3, pa.decimal128(9, 2)),
            "lst": pa.array([[1, 2], [], None], pa.list_(pa.int32())),
            "st": pa.array([{"x": 1, "y": "a"}] * 3),
            "dict": pa.array(["p", "q", "p"]).dictionary_encode(),
        }
    )
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, **kwargs)
    return bytes(sink.getvalue().to_pybytes())


def _footer(data: bytes) -> bytes:
    (length,) = struct.unpack("<i", data[-8:-4])
    return data[-8 - length : -8]


FILES = [
    _file(),
    _file(compression="zstd", write_page_index=True, use_dictionary=False),
    _file(data_page_version="2.0", write_page_checksum=True, row_group_size=2),
    _file(compression="gzip", write_statistics=False, version="1.0"),
    _file(sorting_columns=[pq.SortingColumn(2)], store_schema=False),
]


@pytest.mark.parametrize("data", FILES, ids=range(len(FILES)))
def test_footers_pyarrow_writes_take_the_fast_path_and_decode_identically(data: bytes) -> None:
    footer = _footer(data)
    fast = fast_decode(footer, 0, FILE_META_DATA)
    assert fast is not None  # the common case must not fall back (that is the speed)
    assert _general(footer, 0, FILE_META_DATA) == (fast[0], fast[1], 0)
    # Page headers too (the binary copy walks them): the first page of every column chunk.
    for group in fast[0][4]:
        for chunk in group[1]:
            meta = chunk[3]
            start = meta.get(11) or meta[9]
            page = fast_decode(data, start, PAGE_HEADER)
            assert page is not None
            assert _general(data, start, PAGE_HEADER) == (page[0], page[1], 0)
    # Through the public entry point, a memoryview (general path) gives the same result.
    assert thrift.decode_struct(footer, 0, FILE_META_DATA) == (fast[0], fast[1], 0)
    assert thrift.decode_struct(memoryview(footer), 0, FILE_META_DATA) == (fast[0], fast[1], 0)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    which=st.integers(0, len(FILES) - 1),
    edits=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), max_size=4),
    cut=st.integers(0, 10**6),
)
def test_mutated_footers_decode_as_the_general_reader_says(
    which: int, edits: list[tuple[int, int]], cut: int
) -> None:
    """Any bytes: when the fast path answers, the general reader decodes the same struct,
    to the same end, dropping nothing; and the public entry point agrees with it."""
    footer = bytearray(_footer(FILES[which]))
    for at, value in edits:
        footer[at % len(footer)] = value
    data = bytes(footer[: len(footer) - cut % (len(footer) // 4 + 1)])
    expected = _general(data, 0, FILE_META_DATA)
    fast = fast_decode(data, 0, FILE_META_DATA)
    if fast is not None:
        assert expected == (fast[0], fast[1], 0)
    try:
        public = thrift.decode_struct(data, 0, FILE_META_DATA)
    except thrift.ThriftError:
        public = None
    assert public == expected


def test_gives_up_on_what_it_does_not_check() -> None:
    """Unknown fields, other wire types, out-of-range integers, truncation: None (general)."""
    i32_field_1 = bytes([0x15, 0x04, 0x00])  # field 1, i32, zigzag(2) = 4, stop
    spec: dict[int, Any] = {1: "i32"}
    assert fast_decode(i32_field_1, 0, spec) == ({1: 2}, 3)
    assert fast_decode(i32_field_1, 0, {2: "i32"}) is None  # unknown field
    assert fast_decode(i32_field_1, 0, {1: "i64"}) is None  # other width
    assert fast_decode(i32_field_1[:2], 0, spec) is None  # truncated
    too_big = bytes([0x15, 0xFE, 0xFF, 0xFF, 0xFF, 0x1F, 0x00])  # zigzag -> 2**32 - 1
    assert fast_decode(too_big, 0, spec) is None
    assert _general(too_big, 0, spec) == ({}, 7, 1)  # dropped by the general reader
    assert fast_decode(memoryview(i32_field_1), 0, spec) is None  # not bytes
