"""``distinct_sorted``: a written file's index values, equal to ``pc.unique(...).sort()``.

The integer path (numpy sort, neighbours compared) replaced ``pc.unique(...).sort()`` for
speed (docs/benchmarks.md, "Row operations: per-file costs"); it must give the same array,
type included, on every integer type, with nulls, duplicates, extremes and chunks."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import given, settings
from hypothesis import strategies as st

from parquetry.dataset.write import distinct_sorted

INT_TYPES = [
    pa.int8(),
    pa.int16(),
    pa.int32(),
    pa.int64(),
    pa.uint8(),
    pa.uint16(),
    pa.uint32(),
    pa.uint64(),
]


def _bounds(t: pa.DataType) -> tuple[int, int]:
    bits = t.bit_width
    if pa.types.is_signed_integer(t):
        return -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return 0, (1 << bits) - 1


@st.composite
def int_columns(draw: st.DrawFn) -> pa.ChunkedArray:
    t = draw(st.sampled_from(INT_TYPES))
    lo, hi = _bounds(t)
    values = st.one_of(st.integers(lo, hi), st.sampled_from([lo, hi, 0]), st.none())
    chunks = draw(st.lists(st.lists(values, max_size=30), min_size=1, max_size=4))
    return pa.chunked_array([pa.array(c, type=t) for c in chunks], type=t)


@settings(max_examples=300, deadline=None)
@given(int_columns())
def test_integers_equal_unique_then_sort(column: pa.ChunkedArray) -> None:
    expected = pc.unique(column.combine_chunks().drop_null()).sort()
    got = distinct_sorted(column)
    assert got.type == column.type
    assert got.equals(expected)


def test_other_types_take_the_general_path() -> None:
    for values in (["b", None, "a", "b"], [1.5, -0.5, None, 1.5], [b"x", b"x"]):
        column = pa.chunked_array([pa.array(values)])
        expected = pc.unique(column.combine_chunks().drop_null()).sort()
        assert distinct_sorted(column).equals(expected)


def test_empty_and_all_null() -> None:
    for column in (pa.chunked_array([], pa.int64()), pa.chunked_array([[None, None]], pa.int32())):
        got = distinct_sorted(column)
        assert len(got) == 0
        assert got.type == column.type
