"""Statistics taken from the footer pyarrow wrote equal ``compute_stats`` of the rows.

Oracle: :func:`parquetry.dataset.stats.compute_stats` on the same table.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parquetry.dataset.footer_stats import written_stats
from parquetry.dataset.stats import compute_stats
from parquetry.parquet import WriteOptions
from parquetry.parquet.footer import footer_from_bytes

_INTS = {
    pa.int8(): (-(1 << 7), (1 << 7) - 1),
    pa.int16(): (-(1 << 15), (1 << 15) - 1),
    pa.int32(): (-(1 << 31), (1 << 31) - 1),
    pa.int64(): (-(1 << 63), (1 << 63) - 1),
    pa.uint8(): (0, (1 << 8) - 1),
    pa.uint16(): (0, (1 << 16) - 1),
    pa.uint32(): (0, (1 << 32) - 1),
    pa.uint64(): (0, (1 << 64) - 1),
}


def _written(table: pa.Table, rows_per_group: int, **extra: Any) -> dict[int, Any]:
    opts = WriteOptions(extra=extra)
    sink = pa.BufferOutputStream()
    pq.write_table(
        table, sink, row_group_size=rows_per_group, **opts.writer_kwargs(table.schema, table)
    )
    meta = footer_from_bytes(sink.getvalue().to_pybytes(), "t").metadata
    assert meta is not None
    return meta


@st.composite
def _tables(draw: st.DrawFn) -> pa.Table:
    rows = draw(st.integers(0, 30))
    columns: dict[str, pa.Array] = {}
    for t, (lo, hi) in _INTS.items():
        if draw(st.booleans()):
            # Narrow ranges too, so that bounds sit next to each other and to the extremes.
            a = draw(st.integers(lo, hi))
            b = draw(st.integers(a, min(hi, a + draw(st.sampled_from([3, 1000, hi - lo])))))
            values = st.one_of(st.none(), st.integers(a, b), st.sampled_from([lo, hi]))
            columns[f"i_{t}"] = pa.array(draw(st.lists(values, min_size=rows, max_size=rows)), t)
    text = st.one_of(
        st.none(),
        st.text(max_size=4),
        st.text(alphabet="ab\u00e9\u20ac\U0001f600\x00", max_size=70),
        st.sampled_from(["x" * 64, "x" * 65, "é" * 64, "é" * 65, "y" * 5000, ""]),
    )
    for t in (pa.string(), pa.large_string()):
        columns[f"s_{t}"] = pa.array(draw(st.lists(text, min_size=rows, max_size=rows)), t)
    floats = st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True))
    columns["f"] = pa.array(draw(st.lists(floats, min_size=rows, max_size=rows)), pa.float64())
    stamps = st.one_of(st.none(), st.datetimes(dt.datetime(1, 1, 2), dt.datetime(9999, 12, 30)))
    columns["ts"] = pa.array(
        draw(st.lists(stamps, min_size=rows, max_size=rows)), pa.timestamp("us")
    )
    columns["b"] = pa.array(
        draw(st.lists(st.one_of(st.none(), st.booleans()), min_size=rows, max_size=rows))
    )
    return pa.table(columns)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(table=_tables(), rows_per_group=st.integers(1, 40))
def test_footer_statistics_equal_compute_stats(table: pa.Table, rows_per_group: int) -> None:
    assert written_stats(_written(table, rows_per_group), table) == compute_stats(table)


def test_footers_without_exact_bounds_fall_back() -> None:
    table = pa.table(
        {
            "i": pa.array([3, None, -7], pa.int64()),
            "s": pa.array(["z" * 5000, "a", None]),  # pyarrow drops the 5000-byte bound
            "t": pa.array(["b", "a", None]),
        }
    )
    expected = compute_stats(table)
    assert written_stats(_written(table, 10), table) == expected
    assert written_stats(_written(table, 1, write_statistics=False), table) == expected
    assert written_stats({}, table) == expected  # no row groups at all: computed
    assert expected["s"] == [None, None, 1]
    assert expected["i"] == [-7, 3, 1]


def test_a_string_that_is_not_utf8_is_computed_and_named() -> None:
    table = pa.table({"s": pa.array([b"\xff", b"a"], pa.binary()).cast(pa.string(), safe=False)})
    meta = _written(table, 10)
    try:
        expected: Any = compute_stats(table)
    except Exception as exc:
        expected = type(exc)
    try:
        got: Any = written_stats(meta, table)
    except Exception as exc:
        got = type(exc)
    assert got == expected
