"""Predicate values on wide decimal columns: the top of decimal(38, s) was computed in the
default 28-digit context, rounded up to 10**(38-s), so a value of 39 digits passed as
representable and pa.scalar raised a raw ArrowInvalid from Dataset.read."""

from __future__ import annotations

import decimal

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parquetry.dataset import Dataset
from parquetry.dataset.literals import Gap, representation
from parquetry.store import MemoryStore


@pytest.mark.parametrize(("precision", "scale"), [(38, 10), (38, 0), (30, 1), (29, 0)])
def test_values_just_past_a_wide_decimal_are_gaps(precision: int, scale: int) -> None:
    t = pa.decimal128(precision, scale)
    top = decimal.Decimal(f"{10**precision - 1}E-{scale}")
    low = top.copy_negate()  # exact (unary minus rounds to the 28-digit context)
    table = pa.table({"c": pa.array([top, low, decimal.Decimal(0)], t)})
    ds = Dataset.create(MemoryStore(), "d", table)
    past = decimal.Decimal(10 ** (precision - scale))
    assert ds.read(predicates=[[("c", "==", past)]]).num_rows == 0
    assert ds.read(predicates=[[("c", "<", past)]]).num_rows == 3
    assert ds.read(predicates=[[("c", ">", past.copy_negate())]]).num_rows == 3
    assert ds.read(predicates=[[("c", "==", top)]]).num_rows == 1
    assert ds.read(predicates=[[("c", "in", [low, past])]]).num_rows == 1


@settings(max_examples=200, deadline=None)
@given(
    precision=st.integers(1, 38),
    data=st.data(),
)
def test_representation_is_exact_or_a_tight_gap(precision: int, data: st.DataObject) -> None:
    scale = data.draw(st.integers(0, precision))
    t = pa.decimal128(precision, scale)
    digits = data.draw(st.integers(-(10 ** (precision + 2)), 10 ** (precision + 2)))
    value = decimal.Decimal(f"{digits}E-{data.draw(st.integers(0, scale + 2))}")
    rep = representation(value, t)
    if isinstance(rep, Gap):
        assert rep.below is None or rep.below.as_py() < value
        assert rep.above is None or value < rep.above.as_py()
        assert rep.below is not None or rep.above is not None
    else:
        assert rep.type == t
        assert rep.as_py() == value
