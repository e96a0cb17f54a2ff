"""count_distinct (the bitmap for small integer ranges) equals pyarrow's count_distinct."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import given, settings
from hypothesis import strategies as st

from parquetry.parquet.distinct import count_distinct
from parquetry.parquet.options import low_cardinality_columns

_TYPES = {
    "int8": (pa.int8(), -(2**7), 2**7 - 1),
    "uint8": (pa.uint8(), 0, 2**8 - 1),
    "int32": (pa.int32(), -(2**31), 2**31 - 1),
    "uint32": (pa.uint32(), 0, 2**32 - 1),
    "int64": (pa.int64(), -(2**63), 2**63 - 1),
    "uint64": (pa.uint64(), 0, 2**64 - 1),
}


@st.composite
def _columns(draw: st.DrawFn) -> pa.ChunkedArray:
    t, lo, hi = _TYPES[draw(st.sampled_from(sorted(_TYPES)))]
    # Values near one end of the type's range, near zero, or anywhere: small and wide spans.
    base = draw(st.sampled_from([lo, hi, 0, draw(st.integers(lo, hi))]))
    span = draw(st.sampled_from([0, 3, 50, 100, 200, 10_000, 40_000, hi - lo]))
    value = st.integers(max(lo, base - span), min(hi, base + span))
    chunks = draw(
        st.lists(st.lists(st.one_of(st.none(), value), max_size=40), min_size=1, max_size=4)
    )
    return pa.chunked_array([pa.array(c, t) for c in chunks], t)


@settings(max_examples=300, deadline=None)
@given(_columns())
def test_count_distinct_equals_pyarrows(column: pa.ChunkedArray) -> None:
    expected = pc.count_distinct(column).as_py()
    assert count_distinct(column) == expected
    assert count_distinct(column.combine_chunks()) == expected


def test_other_types_and_the_dictionary_choice_are_unchanged() -> None:
    strings = pa.chunked_array([["a", "b", None], ["a"]])
    assert count_distinct(strings) == 2
    assert count_distinct(pa.array([0.5, 0.5, None])) == 1
    assert count_distinct(pa.array([], pa.int64())) == 0
    assert count_distinct(pa.array([None, None], pa.int16())) == 0
    # 200,000 rows: customer ids in a small range (bitmap), unique ids (probe), strings.
    n = 200_000
    table = pa.table(
        {
            "customer": pa.array([(i * 7919) % 15_000 for i in range(n)], pa.int64()),
            "id": pa.array(range(n), pa.int64()),
            "spread": pa.array([(i * 7919) % 150_000 for i in range(n)], pa.int64()),
            "status": pa.array(["new", "paid"] * (n // 2)),
        }
    )
    assert low_cardinality_columns(table, 0.1) == ["customer", "status"]


def test_small_types_whose_offsets_exceed_their_own_range() -> None:
    """int8 values -100..100: value - min reaches 200, past int8's 127 (it must not wrap)."""
    values = [-100, -27, 28, 100] * 10  # range 200 within 8x the values: the bitmap
    assert count_distinct(pa.array(values, pa.int8())) == 4
    assert count_distinct(pa.array([-30_000, -5_000, 30_536, 30_000] * 10_000, pa.int16())) == 4


def test_dense_random_subsets_of_small_types() -> None:
    """Seeded dense draws (the bitmap path taken) over every small type's whole range."""
    rng = np.random.default_rng(11)
    for name in ("int8", "uint8", "int16", "uint16", "int32"):
        t, lo, hi = _TYPES.get(name) or (getattr(pa, name)(), *_bounds(name))
        for _ in range(40):
            a, b = sorted(rng.integers(max(lo, -70_000), min(hi, 70_000) + 1, 2).tolist())
            values = rng.integers(a, b + 1, max(1, (b - a) // 4 + 1)).tolist()
            column = pa.array(values, t)
            assert count_distinct(column) == pc.count_distinct(column).as_py(), (name, a, b)


def _bounds(name: str) -> tuple[int, int]:
    info = np.iinfo(name)
    return int(info.min), int(info.max)
