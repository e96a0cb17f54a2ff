"""String columns holding invalid UTF-8 (a damaged file) raise InvalidFormat when read.

pyarrow's Parquet reader does not check UTF-8: before the fix ``Dataset.read()`` returned
such a column without complaint and the user met a raw UnicodeDecodeError later
(``to_pylist``, pandas). The damage here is on disk, after the write: bytes inside a string
value are replaced in a file written without compression and without page CRCs, so
nothing but the UTF-8 check can notice it.
"""

from __future__ import annotations

import io
import itertools

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parquetry.dataset import Dataset
from parquetry.dataset.plan import PlannedFile
from parquetry.dataset.read import read_planned_file, read_whole_file
from parquetry.errors import InvalidArgument, InvalidFormat, ParquetryError
from parquetry.parquet import WriteOptions
from parquetry.parquet.utf8 import check_utf8
from parquetry.store import MemoryStore


def _damaged() -> tuple[MemoryStore, str]:
    store = MemoryStore()
    values = [f"row-{i:03d}" for i in range(200)]
    values[57] = "caf\u00e9-MARKER-57"
    table = pa.table({"id": pa.array(range(200), pa.int64()), "s": values})
    ds = Dataset.create(store, "ds", table, write_options=WriteOptions(compression="none"))
    (key,) = (k for files in ds.document.partitions.values() for k in files.values())
    data = store.get(key)
    at = data.index(b"MARKER")  # the first copy: the page's value (stats come later)
    store.put(key, data[:at] + b"\xff\xfeRKER" + data[at + 6 :])
    return store, key


def test_reading_a_damaged_string_column_names_the_file_and_column() -> None:
    store, key = _damaged()
    ds = Dataset.open(store, "ds")
    reads = {
        "read": lambda: ds.read(),
        "read s": lambda: ds.read(columns=["s"]),
        "scan": lambda: list(ds.scan()),
        "filtered": lambda: ds.read(predicates=[[("id", ">", 10)]]),
    }
    for what, read in reads.items():
        with pytest.raises(InvalidFormat, match="not valid UTF-8") as caught:
            read()
        assert caught.value.key == key, what
        assert key in str(caught.value), what
        assert "column 's'" in str(caught.value), what
        assert "row 57" in str(caught.value), what
    # Columns without the damage still read.
    assert ds.read(columns=["id"]).num_rows == 200


def _string_array(values: list[bytes], large: bool) -> pa.Array:
    """A string array holding exactly these bytes (unchecked, as the reader builds it)."""
    offsets = np.cumsum([0, *map(len, values)]).astype(np.int64 if large else np.int32)
    make = pa.LargeStringArray if large else pa.StringArray
    return make.from_buffers(len(values), pa.py_buffer(offsets), pa.py_buffer(b"".join(values)))


def _valid(value: bytes) -> bool:
    try:
        value.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


_BYTES = st.one_of(
    st.binary(max_size=12),
    st.text(max_size=6).map(lambda s: s.encode()),  # valid, often multi-byte
    st.text(max_size=6).map(lambda s: s.encode()[1:]),  # may start mid-character
    st.text(max_size=6).map(lambda s: s.encode()[:-1]),  # may end mid-character
)


@st.composite
def _cut_text(draw: st.DrawFn) -> list[bytes]:
    """Valid UTF-8 text cut into values at random bytes: the buffer of all values is
    valid, a value is not when a cut falls inside a character."""
    data = draw(st.text(max_size=20)).encode()
    cuts = sorted(draw(st.lists(st.integers(0, len(data)), max_size=8)))
    bounds = [0, *cuts, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds)]


@settings(max_examples=300, deadline=None)
@given(
    values=st.one_of(st.lists(_BYTES, max_size=30), _cut_text()),
    large=st.booleans(),
    cut=st.integers(0, 30),
    nested=st.booleans(),
)
def test_check_utf8_agrees_with_python_decoding(
    values: list[bytes], large: bool, cut: int, nested: bool
) -> None:
    """Oracle: bytes.decode. Arrays are sliced (offsets not starting at 0) and chunked,
    values split where a character continues in the next value, and nested in lists."""
    arr = _string_array(values, large)
    start = min(cut, len(values))
    chunks = [arr.slice(0, start), arr.slice(start)]
    if nested:
        chunks = [pa.ListArray.from_arrays(pa.array([0, len(c)], pa.int32()), c) for c in chunks]
    column = pa.chunked_array(chunks, type=chunks[0].type)
    bad = [i for i, v in enumerate(values) if not _valid(v)]
    if not bad:
        check_utf8(column, "k.parquet", "s")
        return
    with pytest.raises(InvalidFormat, match="'s' holds a string value") as caught:
        check_utf8(column, "k.parquet", "s")
    if not nested:
        assert f"(row {bad[0]} " in str(caught.value)


@settings(max_examples=60, deadline=None)
@given(values=st.lists(_BYTES, min_size=1, max_size=20))
def test_reading_a_file_of_random_bytes_raises_or_returns_them(values: list[bytes]) -> None:
    """Through the reader (both paths): a file whose string column holds these bytes
    reads them back exactly when all are UTF-8, else raises InvalidFormat naming it."""
    buf = io.BytesIO()
    ids = pa.array(range(len(values)), pa.int64())
    table = pa.table({"id": ids, "s": _string_array(values, False)})
    pq.write_table(table, buf, compression="none")
    store = MemoryStore()
    store.put("ds/table/f.parquet", buf.getvalue())
    planned = PlannedFile(
        label="f", key="ds/table/f.parquet", table="table", partition=(), rows=None, size=None
    )
    schema = pa.schema([("id", pa.int64()), ("s", pa.string())])
    reads = [
        lambda: read_planned_file(store, schema, planned),
        lambda: pa.concat_tables(read_whole_file(store, schema, planned, ["id", "s"])),
    ]
    for read in reads:
        if all(map(_valid, values)):
            got = read().column("s").to_pylist()
            assert got == [v.decode() for v in values]
        else:
            with pytest.raises(ParquetryError) as caught:
                read()
            assert isinstance(caught.value, InvalidFormat)
            assert caught.value.key == "ds/table/f.parquet"


def test_writing_invalid_utf8_is_refused_naming_the_column() -> None:
    """Regression: an unvalidated Arrow string array (``from_buffers``) failed with a raw
    UnicodeDecodeError while statistics were collected, after its file was written."""
    values = [b"ok", b"caf\xc3\xa9", b"\xff\xfe", b"fine"]
    table = pa.table({"id": pa.array(range(4), pa.int64()), "s": _string_array(values, False)})
    store = MemoryStore()
    with pytest.raises(InvalidArgument, match=r"column 's' .* not valid UTF-8 \(row 2 "):
        Dataset.create(store, "ds", table)
    good = pa.table({"id": pa.array([9], pa.int64()), "s": ["x"]})
    ds = Dataset.create(store, "ds", good)
    with pytest.raises(InvalidArgument, match="not valid UTF-8"):
        ds.append(table)
    assert Dataset.open(store, "ds").read().to_pydict() == {"id": [9], "s": ["x"]}
    assert [m.key for m in store.list("ds/table") if m.key.endswith(".parquet")] == [
        k for files in ds.document.partitions.values() for k in files.values()
    ]
