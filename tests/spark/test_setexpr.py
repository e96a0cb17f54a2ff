"""parquetry.spark.setexpr: Spark SQL set expressions as pyarrow compute expressions,
checked against Python's own arithmetic (hypothesis) and Spark's semantics."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import hypothesis.strategies as st
import pyarrow as pa
import pyarrow.dataset as pads
import pytest
from hypothesis import given, settings

from parquetry.errors import InvalidArgument
from parquetry.spark.setexpr import parse_set_value

TABLE = pa.table({"a": [1, -2, 30], "b": [4, 5, -6], "s": ["x", None, "Zz"], "f": [0.5, 1.0, 2.0]})


def _eval(expr: Any) -> list[Any]:
    return pads.dataset(TABLE).to_table(columns={"v": expr}).column("v").to_pylist()


def test_literals_columns_and_functions() -> None:
    assert parse_set_value("42") == 42
    assert parse_set_value("-1.5", pa.float64()) == -1.5
    assert parse_set_value("1.5") == Decimal("1.5")
    assert parse_set_value("'it''s'") == "it's"
    assert parse_set_value("NULL") is None
    assert parse_set_value("true") is True
    assert parse_set_value("DATE '2025-01-02'") == dt.date(2025, 1, 2)
    assert _eval(parse_set_value("a + b * 2")) == [9, 8, 18]
    assert _eval(parse_set_value("(a + b) * 2")) == [10, 6, 48]
    assert _eval(parse_set_value("a / 2")) == [0.5, -1.0, 15.0], "Spark divides as doubles"
    assert _eval(parse_set_value("-a")) == [-1, 2, -30]
    assert _eval(parse_set_value("abs(a)")) == [1, 2, 30]
    assert _eval(parse_set_value("upper(s) || '!'")) == ["X!", None, "ZZ!"]
    assert _eval(parse_set_value("coalesce(s, 'none')")) == ["x", "none", "Zz"]
    assert _eval(parse_set_value("concat(lower(s), `s`)")) == ["xx", None, "zzZz"]
    assert _eval(parse_set_value("f * 2")) == [1.0, 2.0, 4.0]


@pytest.mark.parametrize(
    "text", ["", "sqrt(a)", "a %% 2", "a +", "(a", "a b", "case when a then 1 end", "a % 2"]
)
def test_unsupported_expressions_are_refused(text: str) -> None:
    with pytest.raises(InvalidArgument, match="SQL expression"):
        parse_set_value(text)


_OPS = st.sampled_from(["+", "-", "*"])


@st.composite
def _arith(draw: Any, depth: int = 0) -> str:
    if depth > 2 or draw(st.booleans()):
        return draw(st.sampled_from(["a", "b", str(draw(st.integers(0, 50)))]))
    left, right = draw(_arith(depth + 1)), draw(_arith(depth + 1))
    return (
        f"({left} {draw(_OPS)} {right})" if draw(st.booleans()) else f"{left} {draw(_OPS)} {right}"
    )


@settings(max_examples=60, deadline=None)
@given(text=_arith())
def test_integer_arithmetic_matches_python(text: str) -> None:
    """Python's precedence and arithmetic on integers is SQL's: the oracle."""
    value = parse_set_value(text)
    rows = TABLE.select(["a", "b"]).to_pylist()
    expected = [eval(text, {}, dict(r)) for r in rows]
    got = [value] * len(rows) if isinstance(value, int) else _eval(value)
    assert got == expected
