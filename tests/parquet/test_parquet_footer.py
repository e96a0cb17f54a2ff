"""The raw footer reader: agrees with pyarrow, never crashes on garbage."""

from __future__ import annotations

import contextlib
import io
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parquetry.errors import InvalidFormat, ParquetryError
from parquetry.parquet.files import write_table_bytes
from parquetry.parquet.footer import footer_from_bytes, footer_from_file
from parquetry.parquet.inspect import inspect_file, render
from parquetry.parquet.options import WriteOptions
from parquetry.parquet.thrift import ThriftError, read_struct, write_struct
from parquetry.parquet.thrift_schema import FILE_META_DATA
from parquetry.store import MemoryStore

TABLE = pa.table({"a": [1, 2, None], "s": ["x", None, "z"], "n": [[1], [], None]})


def test_raw_footer_agrees_with_pyarrow() -> None:
    data = write_table_bytes(TABLE)
    raw = footer_from_bytes(data)
    md = pq.ParquetFile(io.BytesIO(data)).metadata
    assert raw.metadata is not None
    assert raw.metadata[3] == md.num_rows == 3
    assert raw.metadata[6].decode() == md.created_by
    assert raw.leaf_paths() == [md.schema.column(i).path for i in range(md.num_columns)]
    assert raw.footer_length == md.serialized_size
    assert not raw.encrypted
    assert raw.encrypted_columns() == ()
    with io.BytesIO(data) as file:
        file.seek(5)
        assert footer_from_file(file).metadata == raw.metadata
        assert file.tell() == 5
    assert pq.read_metadata(pa.BufferReader(raw.tail)).num_rows == 3


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=200))
def test_thrift_reader_raises_only_thrift_errors(data: bytes) -> None:
    with contextlib.suppress(ThriftError):
        read_struct(data)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_flipped_footer_bytes_give_invalid_format_or_a_footer(data: st.DataObject) -> None:
    original = bytearray(write_table_bytes(TABLE))
    length = int.from_bytes(original[-8:-4], "little")
    position = data.draw(st.integers(len(original) - 8 - length, len(original) - 9))
    original[position] ^= data.draw(st.integers(1, 255))
    with contextlib.suppress(InvalidFormat):
        footer_from_bytes(bytes(original))


def test_deep_nesting_is_rejected() -> None:
    # A struct field (type 12) nested in itself 200 times.
    with pytest.raises(ThriftError, match="deep"):
        read_struct(b"\x1c" * 200)


def _rich_file() -> bytes:
    table = pa.table(
        {
            "i": pa.array([1, None, -3], pa.int64()),
            "d": pa.array([Decimal("1.50"), None, Decimal("-2.25")], pa.decimal128(6, 2)),
            "t": pa.array([0, 1, None], pa.timestamp("us", "UTC")),
            "s": ["x", None, "zz"],
            "b": [True, False, None],
            "n": [[1], [], None],
            "m": pa.array([{"a": 1}, None, {"b": 2}], pa.map_(pa.string(), pa.int64())),
        }
    )
    return write_table_bytes(table, WriteOptions(row_group_size=2))


RICH = _rich_file()


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_damaged_footers_give_a_report_or_parquetry_error(data: st.DataObject) -> None:
    """Bit flips, byte rewrites and truncations of a real footer never escape as raw errors."""
    damaged = bytearray(RICH)
    length = int.from_bytes(damaged[-8:-4], "little")
    start = len(damaged) - 8 - length
    for _ in range(data.draw(st.integers(1, 4))):
        position = data.draw(st.integers(start, len(damaged) - 9))
        if data.draw(st.booleans()):
            damaged[position] ^= 1 << data.draw(st.integers(0, 7))
        else:
            damaged[position] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        # Cut the footer short but keep the trailer: the length now overruns.
        cut = data.draw(st.integers(1, length - 1))
        damaged = damaged[: len(damaged) - 8 - cut] + damaged[-8:]
    store = MemoryStore()
    store.put("f.parquet", bytes(damaged))
    try:
        report = inspect_file(store, "f.parquet")
    except ParquetryError:
        return
    report.to_json()
    render(report)


@pytest.mark.parametrize("spec", [None, FILE_META_DATA])
def test_thrift_type_checks_drop_mismatched_fields(spec: dict[int, object] | None) -> None:
    # FileMetaData with row_groups (field 4) sent as an i32 instead of a list.
    data = bytes([0x15, 0x04, 0x19, 0x0C, 0x16, 0x06, 0x15, 0x02, 0x00])
    decoded, end = read_struct(data, 0, spec)
    assert end == len(data)
    if spec is None:
        assert decoded == {1: 2, 2: [], 3: 3, 4: 1}
    else:
        assert decoded == {1: 2, 2: [], 3: 3}  # the i32 "row_groups" is dropped


def test_thrift_ints_out_of_range_are_dropped() -> None:
    # version (i32) = 2**40 as a zigzag varint: out of range for its declared width.
    varint = bytearray()
    n = 2**41
    while n >= 0x80:
        varint.append(n & 0x7F | 0x80)
        n >>= 7
    varint.append(n)
    decoded, _ = read_struct(bytes([0x15, *varint, 0x00]), 0, FILE_META_DATA)
    assert decoded == {}


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 5), st.booleans())
def test_thrift_writer_round_trips_real_footers(row_group_size: int, dictionary: bool) -> None:
    data = write_table_bytes(
        TABLE, WriteOptions(row_group_size=row_group_size, dictionary=dictionary)
    )
    length = int.from_bytes(data[-8:-4], "little")
    footer = data[-8 - length : -8]
    decoded, _ = read_struct(footer, 0, FILE_META_DATA)
    assert write_struct(decoded, FILE_META_DATA) == footer


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=300))
def test_typed_reader_raises_only_thrift_errors(data: bytes) -> None:
    with contextlib.suppress(ThriftError):
        read_struct(data, 0, FILE_META_DATA)
