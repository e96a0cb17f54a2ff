"""Compiled per-field converters: a column of Python values → a checked Arrow array.

The fast path looks at the *set of value types* in a column (one C-level pass) and, when
every type is one Arrow converts exactly as the codec's rules demand, hands the whole list
to ``pa.array``. Anything else (floats for an int column, RFC 3339 strings, numpy scalars,
a wrong type) goes through the per-value rules of :mod:`parquetry.parquet.coerce`, which
also produce the precise :class:`SchemaViolation` naming record index and field.
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import repeat
from operator import sub
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from parquetry.errors import SchemaViolation
from parquetry.parquet.coerce import FLOAT32_MAX, Rejected, coercer_for
from parquetry.parquet.schema import ParquetField

__all__ = ["FieldConverter", "compile_converters"]

_NONE = type(None)
_ARROW_ERRORS = (pa.ArrowException, OverflowError, UnicodeError, ValueError, TypeError)

# Types ``pa.array`` converts exactly as the rules say, per kind. Everything else is checked
# value by value. ``bool`` is absent from every numeric set on purpose: it is not a number.
_FAST_TYPES: dict[str, frozenset[type]] = {
    "int32": frozenset({int}),
    "int64": frozenset({int}),
    "float32": frozenset({float, int}),
    "float64": frozenset({float, int}),
    "string": frozenset({str}),
    "bool": frozenset({bool}),
    "bytes": frozenset({bytes, bytearray}),
    "timestamp": frozenset({dt.datetime}),
    "date": frozenset({dt.date}),
    "decimal": frozenset({decimal.Decimal, int}),
}

# Kinds whose values Arrow's *type inference* checks exactly as the rules do: it infers
# ``string`` only from ``str``, ``bool`` only from bools (an int among them raises) and
# ``binary`` only from bytes-likes and ``str`` (UTF-8, as the BYTES rule says). Inferring
# does the type check and the conversion in one C++ pass, where a Python type set plus a
# typed conversion take two. Left out, because inference is lenient there: integers (it
# takes a ``numpy.bool_`` or even a complex after an int), floats (a bool after a float
# becomes 1.0) and dates (a ``datetime`` among dates is truncated to its day).
# tests/parquet/test_codec_fastpath.py checks every fast path against the rules.
_INFERRED: dict[str, Callable[[pa.DataType], bool]] = {
    "string": pa.types.is_string,
    "bool": pa.types.is_boolean,
    "bytes": pa.types.is_binary,
}

# Subtracting an epoch in C (``datetime - datetime``) applies each value's ``utcoffset`` the
# same way Arrow does, at a quarter of ``pa.array``'s cost for aware values.
_AWARE_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_NAIVE_EPOCH = dt.datetime(1970, 1, 1)
_DURATION_US = pa.duration("us")

# Strings the Arrow ISO-8601 cast parses the same way as the RFC 3339 rule (≤ 6 fraction
# digits, upper-case T and Z); other strings take the per-value path.
_FAST_RFC3339 = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?(Z|[+-](0\d|1\d|2[0-3]):[0-5]\d)$"


@dataclass(frozen=True, slots=True)
class FieldConverter:
    """Turns one column of Python values into an Arrow array of the field's type."""

    field: ParquetField
    arrow_type: pa.DataType
    fast_types: frozenset[type]
    coerce: Callable[[Any], Any]

    def convert(self, values: list[Any], base_index: int = 0) -> pa.Array:
        """Build the array; raise SchemaViolation naming the first bad record."""
        inferred_ok = _INFERRED.get(self.field.type.kind)
        if inferred_ok is not None:
            array = self._try_inferred(values, inferred_ok)
            if array is not None:
                return array
        types = set(map(type, values))
        has_none = _NONE in types
        types.discard(_NONE)
        if types <= self.fast_types:
            array = self._try_fast(values, has_none)
            if array is not None:
                return array
        elif types == {str} and self.field.type.kind == "timestamp":
            array = self._try_fast_timestamp_strings(values)
            if array is not None:
                return array
        return self._convert_slow(values, base_index)

    def _try_inferred(
        self, values: list[Any], inferred_ok: Callable[[pa.DataType], bool]
    ) -> pa.Array | None:
        try:
            array = pa.array(values)
        except _ARROW_ERRORS:
            return None  # a value of another type: the checks below name it
        if isinstance(array, pa.ChunkedArray):  # over 2 GiB of strings: keep it simple
            return None
        if array.type == self.arrow_type:
            return array
        if not (inferred_ok(array.type) or pa.types.is_null(array.type)):
            return None
        try:
            # Safe casts check ranges exactly (an int64 past int32's range fails here).
            return array.cast(self.arrow_type, safe=True)
        except _ARROW_ERRORS:
            return None

    def _try_fast(self, values: list[Any], has_none: bool) -> pa.Array | None:
        try:
            if self.field.type.kind == "float32":
                wide = pa.array(values, type=pa.float64())
                too_big = pc.and_(pc.is_finite(wide), pc.greater(pc.abs(wide), FLOAT32_MAX))
                if pc.any(too_big).as_py():
                    return None
                return wide.cast(pa.float32(), safe=False)
            if self.field.type.kind == "timestamp":
                return self._fast_datetimes(values, has_none)
            return pa.array(values, type=self.arrow_type)
        except _ARROW_ERRORS:
            return None

    def _fast_datetimes(self, values: list[Any], has_none: bool) -> pa.Array:
        """Exact ``datetime`` values: aware ones normalised to UTC, naive ones as UTC wall
        time (the rule); a column mixing both takes Arrow's own conversion."""
        for epoch in (_AWARE_EPOCH, _NAIVE_EPOCH):
            try:
                if has_none:
                    deltas = [None if v is None else v - epoch for v in values]
                else:
                    deltas = list(map(sub, values, repeat(epoch)))
            except TypeError:  # naive minus aware (or the reverse)
                continue
            return pa.array(deltas, type=_DURATION_US).view(self.arrow_type)
        # Converting to a naive type normalises aware values to UTC and keeps naive ones as
        # wall time (the rule) at ~60% of the cost of a tz-aware target.
        return pa.array(values, type=pa.timestamp("us")).cast(self.arrow_type)

    def _try_fast_timestamp_strings(self, values: list[Any]) -> pa.Array | None:
        try:
            strings = pa.array(values, type=pa.string())
        except _ARROW_ERRORS:  # e.g. a lone surrogate: the per-value rule names it
            return None
        matched = pc.match_substring_regex(strings, _FAST_RFC3339)
        if not pc.all(matched).as_py():
            return None
        try:
            return strings.cast(self.arrow_type)
        except _ARROW_ERRORS:
            return None

    def _convert_slow(self, values: list[Any], base_index: int) -> pa.Array:
        coerce = self.coerce
        out: list[Any] = []
        append = out.append
        for position, value in enumerate(values):
            if value is None:
                append(None)
                continue
            try:
                append(coerce(value))
            except Rejected as exc:
                index = base_index + position
                name = self.field.name
                raise SchemaViolation(
                    f"record {index}: field {name!r} ({self.field.type}): {exc.reason}",
                    field=name,
                    index=index,
                ) from None
        return pa.array(out, type=self.arrow_type)


def compile_converters(fields: Sequence[ParquetField]) -> tuple[FieldConverter, ...]:
    """One converter per field, built once per codec."""
    return tuple(
        FieldConverter(
            field=f,
            arrow_type=f.type.arrow_type(),
            fast_types=_FAST_TYPES[f.type.kind],
            coerce=coercer_for(f.type),
        )
        for f in fields
    )
