"""Attacks on the UTF-8 checks of reads and writes (parquet/utf8.py) with string columns in
other shapes than a plain ``string``: dictionary-encoded (a file written from pandas
categoricals, as kartothek writes, reads back dictionary-encoded: its damaged value was not
checked and surfaced as a raw UnicodeDecodeError), ``string_view`` (not checked either),
and nested lists/structs (the damaged row was misreported as row 0)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parquetry.dataset import Dataset
from parquetry.dataset.stats import compute_stats
from parquetry.dataset.write import FileDescription
from parquetry.errors import InvalidArgument, InvalidFormat
from parquetry.parquet.utf8 import first_invalid
from parquetry.store import MemoryStore


def _strings(values: list[bytes]) -> pa.Array:
    """A string array holding ``values`` as they are (no UTF-8 validation)."""
    offsets = [0]
    for v in values:
        offsets.append(offsets[-1] + len(v))
    return pa.Array.from_buffers(
        pa.string(),
        len(values),
        [None, pa.array(offsets, pa.int32()).buffers()[1], pa.py_buffer(b"".join(values))],
    )


def _shapes(s: pa.Array) -> dict[str, pa.Array]:
    """``s`` (one value per row) in every shape a string column can take."""
    n = len(s)
    one_each = pa.array(range(n + 1), pa.int32())
    return {
        "string": s,
        "large_string": s.cast(pa.large_string(), safe=False),
        "string_view": s.cast(pa.string_view(), safe=False),
        "dictionary": pa.DictionaryArray.from_arrays(pa.array(range(n), pa.int32()), s),
        "list": pa.ListArray.from_arrays(one_each, s),
        "struct": pa.StructArray.from_arrays([s], ["a"]),
        "map": pa.MapArray.from_arrays(one_each, s, s),
    }


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(st.binary(max_size=6), min_size=1, max_size=12),
    data=st.data(),
)
def test_the_first_invalid_row_is_found_in_every_shape(
    values: list[bytes], data: st.DataObject
) -> None:
    def valid(b: bytes) -> bool:
        try:
            b.decode("utf-8")
        except UnicodeDecodeError:
            return False
        return True

    expected = next((i for i, v in enumerate(values) if not valid(v)), None)
    for name, arr in _shapes(_strings(values)).items():
        assert first_invalid(arr) == expected, name
    # Dictionary entries no row refers to are not values of the column.
    unused = pa.DictionaryArray.from_arrays(
        pa.array([0] * len(values), pa.int32()), _strings([b"ok", b"\xff"])
    )
    assert first_invalid(unused) is None


def test_a_damaged_dictionary_encoded_file_reads_as_invalid_format() -> None:
    store = MemoryStore()
    Dataset.create(store, "c", pa.table({"s": ["x"], "id": pa.array([0], pa.int64())}))
    # As a pandas categorical column is written: the Arrow schema in the file says
    # dictionary, so pyarrow reads the column back dictionary-encoded.
    table = pa.table(
        {
            "s": pa.array(["okok", "abcd", "okok"]).dictionary_encode(),
            "id": pa.array([1, 2, 3], pa.int64()),
        }
    )
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    data = bytearray(sink.getvalue().to_pybytes())
    at = data.find(b"abcd")
    data[at + 1 : at + 3] = b"\xff\xfe"  # no page CRC written: the damage goes unseen
    key = "c/table/f.parquet"
    store.put(key, bytes(data))
    described = FileDescription(
        table="table",
        key=key,
        label="f",
        partition=(),
        rows=3,
        size=len(data),
        stats=compute_stats(table),
    )
    ds = Dataset.commit_files(store, "c", [described])
    with pytest.raises(InvalidFormat, match=r"f\.parquet.*column 's'.*row 1"):
        ds.read()


@pytest.mark.parametrize("shape", ["dictionary", "string_view"])
def test_writes_refuse_damaged_strings_in_every_shape(shape: str) -> None:
    store = MemoryStore()
    column = _shapes(_strings([b"ok", b"ok", b"a\xffb"]))[shape]
    with pytest.raises(InvalidArgument, match=r"column 's'.*row 2"):
        Dataset.create(store, "w", pa.table({"s": column}))
    assert not Dataset.exists(store, "w")


def test_commit_files_refuses_a_foreign_file_with_a_bad_indexed_string() -> None:
    # The file's index values went unchecked into the entry's index delta, whose decoding
    # then rejected it: MetadataCorrupted (damage) for what is a bad input file.
    store = MemoryStore()
    Dataset.create(store, "c", pa.table({"s": ["x"]}), secondary_indices=["s"])
    table = pa.table({"s": _strings([b"ok", b"\xff\xfe"])})
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    key = "c/table/f.parquet"
    store.put(key, sink.getvalue().to_pybytes())
    described = FileDescription(
        table="table", key=key, label="f", partition=(), rows=2, size=len(sink.getvalue())
    )
    with pytest.raises(InvalidArgument, match=r"f\.parquet.*column 's'.*UTF-8"):
        Dataset.commit_files(store, "c", [described])
    again = Dataset.open(store, "c")
    assert again.version == 0
    assert again.read().column("s").to_pylist() == ["x"]
