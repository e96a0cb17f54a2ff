"""Predicate values against column types: exact representation and Spark's float order.

A predicate value need not be a value of its column's type: ``1000`` on an int8 column,
``Decimal("1.255")`` on decimal(6,2), ``2**53 + 1`` or ``0.1`` on float32, a datetime past
2262 on timestamp[ns]. Comparisons stay exact, as in SQL engines that compare in a wider
type: such a value lies strictly between two adjacent values of the type (a :class:`Gap`), so
``==`` matches nothing, ``!=`` every non-null row, ``< v`` the rows ``<=`` the value below it
and ``> v`` the rows ``>=`` the value above it.

Floating-point columns follow Spark: ``NaN = NaN``, NaN is greater than every other value
(infinity included) and ``-0.0 = 0.0``. :func:`compare` is that order for Python values
(partition values, statistics); the Arrow side lives in :mod:`parquetry.dataset.predicates`.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

__all__ = ["Gap", "compare", "is_nan", "representation"]

_INT64 = (-(2**63), 2**63 - 1)
_US_PER_UNIT = {"s": 10**6, "ms": 10**3, "us": 1}
_EPOCH = dt.datetime(1970, 1, 1)
_EPOCH_UTC = _EPOCH.replace(tzinfo=dt.UTC)
_FLOATS: dict[int, Any] = {16: np.float16, 32: np.float32, 64: np.float64}


@dataclass(frozen=True, slots=True)
class Gap:
    """A value strictly between two adjacent values of a type (``None``: no value there)."""

    below: pa.Scalar | None
    above: pa.Scalar | None


def is_nan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)


def compare(op: str, a: Any, b: Any) -> bool:
    """``a op b`` for non-null Python values, NaN equal to itself and above everything."""
    if is_nan(a) or is_nan(b):
        order = int(is_nan(a)) - int(is_nan(b))
        a, b = order, 0
    if op == "==":
        return bool(a == b)
    if op == "!=":
        return bool(a != b)
    if op == "<":
        return bool(a < b)
    if op == "<=":
        return bool(a <= b)
    if op == ">":
        return bool(a > b)
    return bool(a >= b)


def representation(value: Any, t: pa.DataType) -> pa.Scalar | Gap:
    """``value`` as an Arrow scalar of ``t`` if exactly representable, else its :class:`Gap`.

    ``value`` has already been checked to belong to the type's class (see ``_coerce``).
    """
    if pa.types.is_integer(t):
        lo, hi = _int_range(t)
        return _ranged(value, lo, hi, t)
    if pa.types.is_floating(t):
        return _float(value, t)
    if pa.types.is_decimal(t):
        return _decimal(value, t)
    if pa.types.is_timestamp(t):
        return _timestamp(value, t)
    return pa.scalar(value, type=t)


def _int_range(t: pa.DataType) -> tuple[int, int]:
    bits = t.bit_width
    if pa.types.is_signed_integer(t):
        return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    return 0, 2**bits - 1


def _ranged(value: Any, lo: Any, hi: Any, t: pa.DataType) -> pa.Scalar | Gap:
    if value > hi:
        return Gap(pa.scalar(hi, type=t), None)
    if value < lo:
        return Gap(None, pa.scalar(lo, type=t))
    return pa.scalar(value, type=t)


def _float(value: int | float, t: pa.DataType) -> pa.Scalar | Gap:
    ftype: Any = _FLOATS[t.bit_width]  # numpy's stubs do not follow nextafter on scalars
    near: Any
    if is_nan(value):
        return pa.scalar(value, type=t)
    try:
        with np.errstate(over="ignore"):
            near = ftype(value)
    except OverflowError:  # an int beyond every float: rounds to infinity
        near = ftype(math.inf if value > 0 else -math.inf)
    if float(near) == value:
        return pa.scalar(float(near), type=t)
    # Python compares int/float exactly: ``near`` is the nearest float, on one side of value.
    if float(near) > value:
        below, above = np.nextafter(near, ftype(-math.inf)), near
    else:
        below, above = near, np.nextafter(near, ftype(math.inf))
    return Gap(pa.scalar(float(below), type=t), pa.scalar(float(above), type=t))


def _decimal(value: decimal.Decimal, t: pa.DataType) -> pa.Scalar | Gap:
    # Exact arithmetic: the default context (28 digits) rounded the top of decimal(38, s)
    # up to 10**(38-s), which let a value of 39 digits through to pa.scalar (ArrowInvalid).
    ctx = decimal.Context(prec=t.precision + 2)
    step = decimal.Decimal(1).scaleb(-t.scale, context=ctx)
    top = ctx.subtract(decimal.Decimal(10 ** (t.precision - t.scale)), step)
    if value > top:
        return Gap(pa.scalar(top, type=t), None)
    bottom = top.copy_negate()  # exact: unary minus rounds to the context
    if value < bottom:
        return Gap(None, pa.scalar(bottom, type=t))
    floor = value.quantize(step, rounding=decimal.ROUND_FLOOR, context=ctx)
    if floor == value:
        return pa.scalar(floor, type=t)
    ceil = value.quantize(step, rounding=decimal.ROUND_CEILING, context=ctx)
    return Gap(pa.scalar(floor, type=t), pa.scalar(ceil, type=t))


def _timestamp(value: dt.datetime, t: pa.DataType) -> pa.Scalar | Gap:
    epoch = _EPOCH if value.tzinfo is None else _EPOCH_UTC
    micros = (value - epoch) // dt.timedelta(microseconds=1)
    if t.unit == "ns":
        ticks, rest = micros * 1000, 0
    else:
        ticks, rest = divmod(micros, _US_PER_UNIT[t.unit])

    def scalar(n: int) -> pa.Scalar:
        return pa.scalar(n, type=pa.int64()).cast(t)

    if ticks > _INT64[1]:
        return Gap(scalar(_INT64[1]), None)
    if ticks < _INT64[0]:
        return Gap(None, scalar(_INT64[0]))
    if rest:
        return Gap(scalar(ticks), scalar(ticks + 1))
    return scalar(ticks)
