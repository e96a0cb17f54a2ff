"""Per-value coercion rules of the record codec: the precise (slow) path.

Each ``coerce_*`` function takes one non-None Python value and returns what ``pa.array``
accepts for the target type, or raises :class:`Rejected` with a reason. The vectorised
path in :mod:`parquetry.parquet.convert` falls back to these whenever a column holds a type
it does not take wholesale, so these functions *are* the rules:

- **Integers** (INT32, INT64): ``int`` (numpy integers too); ``bool`` is not a number.
  Floats only when whole (``42.0`` ok; ``42.5``, NaN, ±Inf rejected). INT32 range
  [-2^31, 2^31-1]; INT64 range [-2^63, 2^63-1]; a float for INT64 only within ±2^53
  (where floats still hold every integer exactly).
- **Floats** (FLOAT32, FLOAT64): ``float`` (NaN and ±Inf kept) and ``int`` within ±2^53;
  ``bool`` rejected. A finite value beyond float32's range is rejected for FLOAT32 instead of
  silently becoming Inf; rounding to the nearest float32 is accepted.
- **STRING**: ``str`` that UTF-8 can encode (lone surrogates rejected); bytes are rejected.
- **BOOL**: ``bool`` (and ``numpy.bool_``) only; ``0``/``1`` are rejected.
- **BYTES**: ``bytes``, ``bytearray``, ``memoryview``, or ``str`` (stored as UTF-8).
- **TIMESTAMP** (stored as microseconds, UTC): aware ``datetime`` (converted to UTC);
  naive ``datetime`` is taken as UTC wall time (never local time); RFC 3339 strings
  ``YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`` (``T``/``Z`` in any case), normalised to UTC.
  A string without offset is rejected. Fractions up to 9 digits are read, but digits below
  the microsecond must be zero: a value that would lose precision is rejected, never
  truncated (the same holds for ``pandas.Timestamp`` with nanoseconds).
- **DATE**: ``datetime.date`` (not ``datetime``) or ``YYYY-MM-DD``.
- **DECIMAL(p, s)**: ``Decimal``, ``int`` or a numeric ``str``, exactly representable with
  ``s`` fractional digits and at most ``p`` digits; floats are rejected (binary floats are
  not exact decimals); NaN/Inf rejected.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import numbers
import re
from collections.abc import Callable
from typing import Any

import numpy as np

from parquetry.parquet.schema import ParquetType

__all__ = ["Rejected", "coercer_for", "UTC", "EPOCH"]

UTC = dt.UTC
EPOCH = dt.datetime(1970, 1, 1, tzinfo=UTC)
_ONE_US = dt.timedelta(microseconds=1)
FLOAT_EXACT_LIMIT = 2**53
FLOAT32_MAX = 3.4028234663852886e38

_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?"
    r"(?:([Zz])|([+-])(\d{2}):(\d{2}))"
)
_ISO_DATE = re.compile(r"(\d{4})-(\d{2})-(\d{2})")
_DECIMAL_CONTEXT = decimal.Context(prec=200, traps=[decimal.InvalidOperation])


class Rejected(Exception):
    """A value does not fit; ``reason`` says why (never includes the whole record)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def _kind(value: Any) -> str:
    return type(value).__name__


def _is_bool(value: Any) -> bool:
    return isinstance(value, bool | np.bool_)


def _int_coercer(bits: int) -> Callable[[Any], int]:
    low, high = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1

    def coerce(value: Any) -> int:
        if _is_bool(value):
            raise Rejected(f"expected an int{bits}, got a bool (True is not a number)")
        if isinstance(value, numbers.Integral):
            number = int(value)
        elif isinstance(value, numbers.Real):
            number = _whole_float(float(value), bits)
        else:
            raise Rejected(f"expected an int{bits}, got {_kind(value)}")
        if not low <= number <= high:
            raise Rejected(f"{number} is outside the int{bits} range [{low}, {high}]")
        return number

    return coerce


def _whole_float(value: float, bits: int) -> int:
    if math.isnan(value) or math.isinf(value):
        raise Rejected(f"{value} is not an integer")
    if not value.is_integer():
        raise Rejected(f"{value!r} has a fractional part")
    if bits == 64 and abs(value) > FLOAT_EXACT_LIMIT:
        raise Rejected(f"float {value!r} is beyond ±2^53, where floats stop being exact integers")
    return int(value)


def _float_coercer(bits: int) -> Callable[[Any], float]:
    def coerce(value: Any) -> float:
        if _is_bool(value):
            raise Rejected(f"expected a float{bits}, got a bool (True is not a number)")
        if isinstance(value, numbers.Integral):
            if abs(int(value)) > FLOAT_EXACT_LIMIT:
                raise Rejected(f"int {int(value)} is beyond ±2^53 and not exact as a float")
            number = float(int(value))
        elif isinstance(value, numbers.Real):
            number = float(value)
        else:
            raise Rejected(f"expected a float{bits}, got {_kind(value)}")
        if bits == 32 and math.isfinite(number) and abs(number) > FLOAT32_MAX:
            raise Rejected(f"{number!r} overflows float32")
        return number

    return coerce


def coerce_string(value: Any) -> str:
    if not isinstance(value, str):
        raise Rejected(f"expected a str, got {_kind(value)}")
    _check_utf8(value)
    return value


def _check_utf8(value: str) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise Rejected(f"string is not valid UTF-8 at position {exc.start}") from None


def coerce_bool(value: Any) -> bool:
    if not _is_bool(value):
        raise Rejected(f"expected a bool, got {_kind(value)}")
    return bool(value)


def coerce_bytes(value: Any) -> bytes:
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    if isinstance(value, str):
        _check_utf8(value)
        return value.encode("utf-8")
    raise Rejected(f"expected bytes or str, got {_kind(value)}")


def coerce_timestamp(value: Any) -> int:
    """Microseconds since the Unix epoch, UTC."""
    if isinstance(value, dt.datetime):
        if getattr(value, "nanosecond", 0):
            raise Rejected("timestamp has nanoseconds; only microseconds are stored")
        aware = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
        return (aware - EPOCH) // _ONE_US
    if isinstance(value, str):
        return _parse_rfc3339(value)
    raise Rejected(f"expected a datetime or an RFC 3339 string, got {_kind(value)}")


def _parse_rfc3339(text: str) -> int:
    match = _RFC3339.fullmatch(text)
    if match is None:
        raise Rejected(f"{text[:40]!r} is not an RFC 3339 timestamp with an offset")
    year, month, day, hour, minute, second, fraction, zulu, sign, off_h, off_m = match.groups()
    micros = 0
    if fraction:
        padded = fraction.ljust(9, "0")
        if padded[6:] != "000":
            raise Rejected(f"{text!r} has sub-microsecond digits; only microseconds are stored")
        micros = int(padded[:6])
    offset = dt.timedelta(0)
    if not zulu:
        offset = dt.timedelta(hours=int(off_h), minutes=int(off_m))
        if sign == "-":
            offset = -offset
    try:
        tz = dt.timezone(offset)
        parsed = dt.datetime(
            int(year), int(month), int(day), int(hour), int(minute), int(second), micros, tz
        )
    except ValueError as exc:
        raise Rejected(f"{text!r} is not a valid timestamp: {exc}") from None
    return (parsed - EPOCH) // _ONE_US


def coerce_date(value: Any) -> dt.date:
    if isinstance(value, dt.datetime):
        raise Rejected("expected a date, got a datetime (pass .date() explicitly)")
    if isinstance(value, dt.date):
        return value
    if isinstance(value, str):
        match = _ISO_DATE.fullmatch(value)
        if match is not None:
            try:
                return dt.date(*(int(g) for g in match.groups()))
            except ValueError as exc:
                raise Rejected(f"{value!r} is not a valid date: {exc}") from None
        raise Rejected(f"{value[:40]!r} is not a YYYY-MM-DD date")
    raise Rejected(f"expected a date, got {_kind(value)}")


def _decimal_coercer(precision: int, scale: int) -> Callable[[Any], decimal.Decimal]:
    limit = 10**precision

    def coerce(value: Any) -> decimal.Decimal:
        if _is_bool(value):
            raise Rejected("expected a decimal, got a bool")
        if isinstance(value, decimal.Decimal):
            number = value
        elif isinstance(value, numbers.Integral):
            number = decimal.Decimal(int(value))
        elif isinstance(value, str):
            try:
                number = decimal.Decimal(value.strip())
            except decimal.InvalidOperation:
                raise Rejected(f"{value[:40]!r} is not a decimal number") from None
        else:
            raise Rejected(f"expected a Decimal, int or numeric str, got {_kind(value)}")
        if not number.is_finite():
            raise Rejected(f"{number} is not a finite decimal")
        scaled = number.scaleb(scale, _DECIMAL_CONTEXT)
        if scaled != scaled.to_integral_value(context=_DECIMAL_CONTEXT):
            raise Rejected(f"{number} has more than {scale} fractional digits")
        if abs(int(scaled)) >= limit:
            raise Rejected(f"{number} does not fit decimal({precision},{scale})")
        return decimal.Decimal(int(scaled)).scaleb(-scale, _DECIMAL_CONTEXT)

    return coerce


def coercer_for(ptype: ParquetType) -> Callable[[Any], Any]:
    """The per-value rule for one type (see the module docstring)."""
    kind = ptype.kind
    if kind in ("int32", "int64"):
        return _int_coercer(int(kind[3:]))
    if kind in ("float32", "float64"):
        return _float_coercer(int(kind[5:]))
    if kind == "decimal":
        assert ptype.precision is not None
        assert ptype.scale is not None
        return _decimal_coercer(ptype.precision, ptype.scale)
    simple: dict[str, Callable[[Any], Any]] = {
        "string": coerce_string,
        "bool": coerce_bool,
        "bytes": coerce_bytes,
        "timestamp": coerce_timestamp,
        "date": coerce_date,
    }
    return simple[kind]
