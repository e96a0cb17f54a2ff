"""The vectorised converters agree with the per-value rules on every mix of value types.

``parquetry.parquet.convert`` hands whole columns to Arrow (type inference, typed
conversion, epoch arithmetic for datetimes) and only falls back to the per-value rules of
``parquetry.parquet.coerce`` when a column holds something the fast path cannot take
exactly. A fast path that accepts what a rule rejects, or converts a value differently, is
a silent data bug; hypothesis mixes the tricky types (bools among numbers, whole and huge
floats, numpy scalars, bytes among strings, naive and aware datetimes, dates among
datetimes, ...) and compares the converter against the rules applied one value at a time.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parquetry.codec import ParquetField, ParquetType, SchemaViolation
from parquetry.parquet.coerce import Rejected, coercer_for
from parquetry.parquet.convert import compile_converters
from parquetry.parquet.schema import SIMPLE_KINDS

# Types by name: hypothesis prints the arguments of a failing case, and a name reads better.
TYPE_NAMES = [*SIMPLE_KINDS, "decimal(9,2)"]

PLUS_TWO = dt.timezone(dt.timedelta(hours=2))
_datetimes = st.datetimes(min_value=dt.datetime(1900, 1, 1), max_value=dt.datetime(2200, 1, 1))
INTS = st.one_of(
    st.integers(-(2**31) - 2, 2**31 + 1),
    st.sampled_from([2**53, 2**53 + 1, 2**63 - 1, -(2**63), 2**63, -(2**63) - 1, 2**64]),
)
FLOATS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-(2**40), 2**40).map(float),  # whole floats
    st.sampled_from([2.0**53, 2.0**53 + 2, 3.5e38, -3.5e38, 3.4028234663852886e38, 0.5]),
)
VALUES = st.one_of(
    st.none(),
    INTS,
    FLOATS,
    st.booleans(),
    st.builds(np.bool_, st.booleans()),
    st.builds(np.int64, st.integers(-(2**63), 2**63 - 1)),
    st.builds(np.int32, st.integers(-(2**31), 2**31 - 1)),
    st.builds(np.uint64, st.integers(0, 2**64 - 1)),
    st.builds(np.float32, st.floats(width=32)),
    st.text(max_size=5),
    st.sampled_from(["\ud800", "2024-01-02T03:04:05Z", "2024-01-02", "12.34", "1e3"]),
    st.binary(max_size=5),
    st.builds(bytearray, st.binary(max_size=3)),
    _datetimes,
    _datetimes.map(lambda d: d.replace(tzinfo=dt.UTC)),
    _datetimes.map(lambda d: d.replace(tzinfo=PLUS_TWO)),
    st.dates(min_value=dt.date(1900, 1, 1), max_value=dt.date(2200, 1, 1)),
    st.decimals(
        allow_nan=False, allow_infinity=False, places=3, min_value=-(10**6), max_value=10**6
    ),
)


def _oracle(ptype: ParquetType, values: list[Any]) -> pa.Array | int:
    """The array the per-value rules build, or the index of the first rejected value."""
    coerce = coercer_for(ptype)
    out = []
    for index, value in enumerate(values):
        if value is None:
            out.append(None)
            continue
        try:
            out.append(coerce(value))
        except Rejected:
            return index
    arrow_type = ptype.arrow_type()
    if ptype.kind == "timestamp":  # the rule returns microseconds since the epoch
        return pa.array(out, type=pa.int64()).cast(arrow_type)
    return pa.array(out, type=arrow_type)


def _comparable(array: pa.Array) -> list[Any]:
    return ["NaN" if isinstance(v, float) and math.isnan(v) else v for v in array.to_pylist()]


def _check(ptype: ParquetType, values: list[Any]) -> None:
    converter = compile_converters([ParquetField("v", ptype, nullable=True)])[0]
    expected = _oracle(ptype, values)
    if isinstance(expected, int):
        with pytest.raises(SchemaViolation) as info:
            converter.convert(values, base_index=100)
        assert info.value.index == 100 + expected
        assert info.value.field == "v"
        return
    actual = converter.convert(values, base_index=100)
    assert actual.type == expected.type
    assert _comparable(actual) == _comparable(expected)


@pytest.mark.parametrize("type_name", TYPE_NAMES)
@settings(max_examples=150, deadline=None)
@given(values=st.lists(VALUES, max_size=8))
def test_converter_matches_the_per_value_rules(type_name: str, values: list[Any]) -> None:
    _check(ParquetType.from_json(type_name), values)


# Mostly-right columns reach the fast paths (a random mix rarely does): one kind of value,
# with at most one intruder of another type.
_COLUMNS = {
    "int": st.lists(INTS | st.none(), min_size=1, max_size=8),
    "float": st.lists(FLOATS | st.none(), min_size=1, max_size=8),
    "str": st.lists(st.text(max_size=5) | st.none(), min_size=1, max_size=8),
    "bool": st.lists(st.booleans() | st.none(), min_size=1, max_size=8),
    "bytes": st.lists(st.binary(max_size=5) | st.none(), min_size=1, max_size=8),
    "aware": st.lists(_datetimes.map(lambda d: d.replace(tzinfo=PLUS_TWO)), min_size=1),
    "naive": st.lists(_datetimes, min_size=1, max_size=8),
    "date": st.lists(st.dates(), min_size=1, max_size=8),
}


@pytest.mark.parametrize("type_name", TYPE_NAMES)
@settings(max_examples=120, deadline=None)
@given(data=st.data())
def test_converter_matches_the_rules_on_nearly_uniform_columns(
    type_name: str, data: st.DataObject
) -> None:
    values = list(data.draw(st.sampled_from(list(_COLUMNS.values())).flatmap(lambda s: s)))
    if data.draw(st.booleans()):
        position = data.draw(st.integers(0, len(values)))
        values.insert(position, data.draw(VALUES))
    _check(ParquetType.from_json(type_name), values)


@pytest.mark.parametrize(
    ("ptype", "values"),
    [
        (ParquetType.FLOAT64, [1.5, True]),  # Arrow's inference would take True as 1.0
        (ParquetType.INT64, [1, True]),
        (ParquetType.BOOL, [True, 1]),
        (ParquetType.STRING, ["a", b"b"]),  # Arrow infers binary for the mix
        (ParquetType.DATE, [dt.date(2024, 1, 1), dt.datetime(2024, 1, 1, 12)]),  # truncation
        (
            ParquetType.TIMESTAMP,
            [dt.datetime(2024, 1, 1), dt.datetime(2024, 1, 1, tzinfo=PLUS_TWO)],
        ),
        (ParquetType.INT32, [2**31]),
        (ParquetType.INT64, [np.uint64(2**63)]),
        (ParquetType.FLOAT32, [3.5e38]),
        (ParquetType.DECIMAL(9, 2), [decimal.Decimal("1.234")]),
    ],
    ids=repr,
)
def test_known_traps_of_arrow_conversion(ptype: ParquetType, values: list[Any]) -> None:
    _check(ptype, values)
