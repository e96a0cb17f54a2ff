"""Index lookups on date, timestamp, decimal and bool columns prune pieces and row groups
by footer statistics (indexfile.py), exactly: the pruned lookup equals the row filter run
over every pair, for edge values (the type's min/max, every unit, time zones, decimals of
other scales than the column's). Before, these types were not "orderable": every piece of
the index was read for a point lookup.

NaN: ``== nan`` on a float index still reads every piece. Parquet statistics leave NaN out
and carry no NaN count, so a piece whose min/max are finite may hold NaN; no footer fact
excludes it.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import sys
from typing import Any
from unittest import mock

import hypothesis.strategies as st
import pyarrow as pa
import pytest
from hypothesis import assume, given, settings

from parquetry.dataset import indexpieces
from parquetry.dataset.indexpieces import normalise_pairs, write_piece
from parquetry.dataset.indexstate import IndexState
from parquetry.dataset.predicates import eval_array, validate_predicates
from parquetry.dataset.schema import normalise_type
from parquetry.errors import PredicateError
from parquetry.store import MemoryStore
from parquetry.testing import CountingStore

INT64 = (-(2**63), 2**63 - 1)
#: Ticks per second of each unit, and the years 1-9999 in that unit (Python's datetime).
PER_S = {"s": 1, "ms": 10**3, "us": 10**6, "ns": 10**9}
FIRST_S, LAST_S = -62135596800, 253402300799


def _tick_range(unit: str) -> tuple[int, int]:
    if unit == "ns":
        return INT64
    return FIRST_S * PER_S[unit], LAST_S * PER_S[unit] + PER_S[unit] - 1


TYPES: list[pa.DataType] = [
    pa.date32(),
    pa.date64(),
    *(pa.timestamp(u) for u in PER_S),
    *(pa.timestamp(u, tz="UTC") for u in ("s", "us", "ns")),
    pa.timestamp("ms", tz="Asia/Kolkata"),
    pa.timestamp("us", tz="America/St_Johns"),
    pa.decimal128(5, 2),
    pa.decimal128(18, 0),
    pa.decimal128(38, 10),
    pa.bool_(),
    pa.float64(),  # unchanged path, here for -0.0, infinities and NaN next to the others
]

_FLOAT_EDGES = [-0.0, 0.0, math.inf, -math.inf, math.nan, sys.float_info.max, -sys.float_info.max]


def _stored(t: pa.DataType) -> st.SearchStrategy[Any]:
    """Values of ``t`` as arrow builds them (ints for timestamps: every tick of the unit)."""
    if pa.types.is_timestamp(t):
        lo, hi = _tick_range(t.unit)
        return st.one_of(st.integers(lo, hi), st.sampled_from([lo, hi, 0, -1, 1]))
    if pa.types.is_date(t):
        return st.one_of(st.dates(), st.sampled_from([dt.date.min, dt.date.max]))
    if pa.types.is_decimal(t):
        most = 10**t.precision - 1  # unscaled: every value of decimal(precision, scale)
        unscaled = st.one_of(st.integers(-most, most), st.sampled_from([most, -most, 0, 1, -1]))
        return unscaled.map(lambda n: decimal.Decimal(f"{n}E-{t.scale}"))  # exact
    if pa.types.is_floating(t):
        return st.one_of(st.floats(), st.sampled_from(_FLOAT_EDGES))
    return st.booleans()


def _array(values: list[Any], t: pa.DataType) -> pa.Array:
    if pa.types.is_timestamp(t):
        return pa.array(values, pa.int64()).cast(t)
    return pa.array(values, t)


def _literal_value(t: pa.DataType, stored: list[Any], data: st.DataObject) -> Any:
    """A predicate value: one of the stored values (so that == hits) or any of the type's
    Python values, of another scale for decimals, naive or aware for timestamps."""
    if stored and data.draw(st.booleans()):
        v = _array([data.draw(st.sampled_from(stored))], t)
        if pa.types.is_timestamp(t):
            # As a user would write it: a datetime (µs), in UTC for a column with a zone.
            v = v.cast(pa.timestamp("us", tz=t.tz), safe=False)
            value = v[0].as_py() if _us_fits(v) else None
            assume(value is not None)
            return value.astimezone(dt.UTC) if t.tz else value
        return v[0].as_py()
    if pa.types.is_timestamp(t):
        aware = st.datetimes(timezones=st.just(dt.UTC)) if t.tz else st.datetimes()
        return data.draw(st.one_of(aware, st.sampled_from([dt.datetime.min, dt.datetime.max])))
    if pa.types.is_date(t):
        return data.draw(st.dates())
    if pa.types.is_decimal(t):
        return data.draw(
            st.decimals(
                min_value=-(10**t.precision),
                max_value=10**t.precision,
                allow_nan=False,
                allow_infinity=False,
                places=data.draw(st.integers(0, t.scale + 3)),
            )
        )
    if pa.types.is_floating(t):
        return data.draw(st.one_of(st.floats(), st.sampled_from(_FLOAT_EDGES)))
    return data.draw(st.booleans())


def _us_fits(v: pa.Array) -> bool:
    try:
        v[0].as_py()
    except (ValueError, OverflowError):
        return False
    return True


def _state(store: CountingStore, pieces: list[list[Any]], t: pa.DataType) -> IndexState:
    state = IndexState.empty("c", t)
    for i, values in enumerate(pieces):
        pairs = pa.table(
            {"value": _array(values, t), "label": [f"p=x/{i}-{j}" for j in range(len(values))]}
        )
        pairs = normalise_pairs(pairs, normalise_type(t))
        with mock.patch.object(indexpieces, "PIECE_ROW_GROUP", 4):
            footer = write_piece(store, "u", "c", pairs)
        state = state.with_piece(footer, pairs.num_rows)
    store.reset()
    return state


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_pruned_typed_lookups_equal_the_row_filter_over_every_pair(data: st.DataObject) -> None:
    t = data.draw(st.sampled_from(TYPES), label="type")
    pieces = data.draw(
        st.lists(st.lists(_stored(t), min_size=1, max_size=12), min_size=1, max_size=3)
    )
    sort = data.draw(st.booleans())
    if sort:  # disjoint sorted pieces, as a checkpoint writes them
        flat = sorted(v for p in pieces for v in p)
        n = len(pieces)
        pieces = [flat[i * len(flat) // n : (i + 1) * len(flat) // n] for i in range(n)]
        pieces = [p for p in pieces if p]
    op = data.draw(st.sampled_from(["==", "!=", "<", "<=", ">", ">=", "in"]))
    stored = [v for p in pieces for v in p]
    if op == "in":
        value: Any = [_literal_value(t, stored, data) for _ in range(data.draw(st.integers(1, 4)))]
    else:
        value = _literal_value(t, stored, data)
    try:
        dnf = validate_predicates([[("c", op, value)]], pa.schema([("c", t)]))
    except PredicateError:
        assume(False)
    assert dnf is not None
    (lit,) = dnf[0]
    store = CountingStore(MemoryStore())
    state = _state(store, pieces, t)
    labels, _ = state.search(store, lit)
    # Oracle: the row filter over every pair, no statistics involved.
    everything = _array(stored, t)
    mask = eval_array(lit, everything).to_pylist()
    all_labels = [f"p=x/{i}-{j}" for i, p in enumerate(pieces) for j in range(len(p))]
    assert labels == {lbl for lbl, hit in zip(all_labels, mask, strict=True) if hit}


@pytest.mark.parametrize(
    ("t", "pieces", "wanted"),
    [
        (
            pa.date32(),
            [
                [dt.date(2020, 1, d) for d in range(1, 9)],
                [dt.date(2021, 5, 1)],
                [dt.date(2022, 1, d) for d in range(1, 5)],
            ],
            dt.date(2021, 5, 1),
        ),
        (
            pa.date64(),
            [[dt.date(1, 1, 1)], [dt.date(2000, 1, 1)], [dt.date(9999, 12, 31)]],
            dt.date(9999, 12, 31),
        ),
        (
            pa.timestamp("ns", tz="UTC"),
            [[INT64[0], -1], [0, 1000], [10**18, INT64[1]]],
            dt.datetime(1970, 1, 1, 0, 0, 0, 1, tzinfo=dt.UTC),
        ),
        (pa.timestamp("ms"), [[0, 5], [86_400_000], [10**12]], dt.datetime(1970, 1, 2)),
        (
            pa.decimal128(10, 3),
            [
                [decimal.Decimal("-1.5"), decimal.Decimal("0")],
                [decimal.Decimal("2.250")],
                [decimal.Decimal("9999999.999")],
            ],
            decimal.Decimal("2.25"),
        ),
    ],
)
def test_a_point_lookup_reads_at_most_one_piece(
    t: pa.DataType, pieces: list[list[Any]], wanted: Any
) -> None:
    store = CountingStore(MemoryStore())
    state = _state(store, pieces, t)
    dnf = validate_predicates([[("c", "==", wanted)]], pa.schema([("c", t)]))
    assert dnf is not None
    labels, keys = state.search(store, dnf[0][0])
    assert len(set(keys)) <= 1, keys  # before: one GET per piece
    assert store.total <= 1
    stored = [v for p in pieces for v in p]
    mask = eval_array(dnf[0][0], _array(stored, t)).to_pylist()
    all_labels = [f"p=x/{i}-{j}" for i, p in enumerate(pieces) for j in range(len(p))]
    assert labels == {lbl for lbl, hit in zip(all_labels, mask, strict=True) if hit}
    assert labels  # the wanted value is stored
