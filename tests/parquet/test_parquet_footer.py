"""The raw footer reader: agrees with pyarrow, never crashes on garbage."""

from __future__ import annotations

import contextlib
import io

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parquetry.errors import InvalidFormat
from parquetry.parquet.files import write_table_bytes
from parquetry.parquet.footer import footer_from_bytes, footer_from_file
from parquetry.parquet.thrift import ThriftError, read_struct

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
