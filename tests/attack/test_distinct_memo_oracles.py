"""Differential attacks on two fast paths of compaction (found no defect): the bitmap
distinct count (parquet/distinct.py) against pyarrow's count_distinct, and the footer
memo (parquet/footer_memo.py) against the Thrift reader on mutated footers."""

from __future__ import annotations

import io
import itertools

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from hypothesis import given, settings
from hypothesis import strategies as st

from parquetry.parquet.distinct import count_distinct
from parquetry.parquet.footer_memo import FooterMemo
from parquetry.parquet.thrift import decode_struct
from parquetry.parquet.thrift_schema import FILE_META_DATA

INTS = [
    pa.int8(),
    pa.int16(),
    pa.int32(),
    pa.int64(),
    pa.uint8(),
    pa.uint16(),
    pa.uint32(),
    pa.uint64(),
]


@st.composite
def _column(draw: st.DrawFn) -> pa.Array | pa.ChunkedArray:
    t = draw(st.sampled_from(INTS))
    info = np.iinfo(t.to_pandas_dtype())
    lo, hi = int(info.min), int(info.max)
    base = draw(st.sampled_from([lo, hi, 0]) | st.integers(lo, hi))
    near = st.integers(-300, 300).map(lambda d: min(hi, max(lo, base + d)))
    values = draw(st.lists(st.none() | st.sampled_from([lo, hi]) | near, max_size=40))
    cuts = sorted(draw(st.lists(st.integers(0, len(values)), max_size=3)))
    if not draw(st.booleans()):
        return pa.array(values, t)
    bounds = [0, *cuts, len(values)]
    return pa.chunked_array([pa.array(values[a:b], t) for a, b in itertools.pairwise(bounds)], t)


@settings(max_examples=120, deadline=None)
@given(column=_column(), offset=st.integers(0, 3))
def test_count_distinct_equals_pyarrows(column: pa.Array | pa.ChunkedArray, offset: int) -> None:
    column = column.slice(min(offset, len(column)))
    assert count_distinct(column) == pc.count_distinct(column).as_py()


def _footer(table: pa.Table, **options: object) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink, **options)  # type: ignore[arg-type]
    data = sink.getvalue()
    length = int.from_bytes(data[-8:-4], "little")
    return data[-8 - length : -8]


FOOTERS = [
    _footer(
        pa.table(
            {
                "a": pa.array([1, -(2**63), 2**63 - 1], pa.int64()),
                "s": ["x", None, "zz"],
                "d": [1.5, float("nan"), None],
            }
        ),
        row_group_size=2,
    ),
    _footer(
        pa.table({"u": pa.array([2**64 - 1, 0], pa.uint64()), "l": [[1, 2], None]}),
        compression="zstd",
        write_page_index=True,
    ),
]


@settings(max_examples=120, deadline=None)
@given(
    which=st.sampled_from(range(len(FOOTERS))),
    changes=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), min_size=1, max_size=3),
)
def test_the_memo_decodes_a_mutated_footer_as_the_thrift_reader_or_not_at_all(
    which: int, changes: list[tuple[int, int]]
) -> None:
    footer = FOOTERS[which]
    memo = FooterMemo()
    memo.learn(footer)
    data = bytearray(footer)
    for at, byte in changes:
        data[at % len(data)] = byte
    got = memo.decode(bytes(data))
    if got is None:
        return  # decoded the usual way by the caller
    want, end, dropped = decode_struct(bytes(data), 0, FILE_META_DATA)
    assert (want, end, dropped) == (got, len(data), 0)
