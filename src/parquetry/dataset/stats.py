"""Per-file column statistics kept in version documents: ``{column: [min, max, nulls]}``.

Values are JSON-encoded by column type (dates/timestamps as ISO strings, decimals as
strings). ``min``/``max`` are ``None`` when unknown: all-null columns, NaN in a float
column (predicates order NaN above infinity, as Spark does; JSON cannot hold it), infinite
bounds, strings longer than :data:`MAX_STRING_STAT`, nested types. ``-0.0`` and ``0.0``
bounds are interchangeable: predicates treat them as equal.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from parquetry.errors import InvalidArgument, InvalidFormat
from parquetry.parquet.utf8 import first_invalid

__all__ = ["ColumnStats", "MAX_STRING_STAT", "compute_stats", "decode_stats", "encode_value"]

MAX_STRING_STAT = 64

#: ``[min, max, null_count]`` with JSON-encoded values.
ColumnStats = list[Any]


def _supported(t: pa.DataType) -> bool:
    return bool(
        pa.types.is_integer(t)
        or pa.types.is_floating(t)
        or pa.types.is_boolean(t)
        or pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_date(t)
        or pa.types.is_timestamp(t)
        or pa.types.is_decimal(t)
    )


def encode_value(value: Any, t: pa.DataType) -> Any:
    if value is None:
        return None
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, str):
        return value if len(value) <= MAX_STRING_STAT else None
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, bool | int):
        return value
    return None


def decode_value(value: Any, t: pa.DataType) -> Any:
    if value is None:
        return None
    if pa.types.is_timestamp(t):
        out = dt.datetime.fromisoformat(value)
        return out
    if pa.types.is_date(t):
        return dt.date.fromisoformat(value)
    if pa.types.is_decimal(t):
        return Decimal(value)
    if pa.types.is_floating(t):
        return float(value)
    return value


def compute_stats(table: pa.Table, *, source: str | None = None) -> dict[str, ColumnStats]:
    """Statistics of every column of ``table`` (nested/binary columns: null count only).

    ``source``: the file ``table`` was read from, named by the error when a string column
    holds a value that is not UTF-8 (InvalidFormat then; InvalidArgument for data given in
    memory, ``source`` None). Writers check UTF-8 before; this keeps any other caller (a
    foreign file, an Arrow array built without validation) from meeting a raw
    UnicodeDecodeError.
    """
    out: dict[str, ColumnStats] = {}
    for name, column in zip(table.column_names, table.columns, strict=True):
        nulls = column.null_count
        t = column.type
        lo = hi = None
        if pa.types.is_dictionary(t):
            column = column.cast(t.value_type)
            t = t.value_type
        if pa.types.is_float16(t):
            # pyarrow has no min_max (nor is_nan) kernel for float16; float32 holds every
            # float16 value exactly.
            column = column.cast(pa.float32())
        if _supported(t) and nulls < len(column):
            if pa.types.is_floating(t) and pc.any(pc.is_nan(column)).as_py():
                lo = hi = None
            else:
                mm = pc.min_max(column)
                try:
                    lo = encode_value(mm["min"].as_py(), t)
                    hi = encode_value(mm["max"].as_py(), t)
                except UnicodeDecodeError:
                    raise _not_utf8(column, name, source) from None
                except OverflowError:
                    # A timestamp of year 1 in a zone west of UTC (or of 9999 east of it)
                    # has no Python datetime: no statistics, the file is never pruned.
                    lo = hi = None
                if lo is None or hi is None:
                    lo = hi = None
        out[name] = [lo, hi, nulls]
    return out


def _not_utf8(column: pa.ChunkedArray, name: str, source: str | None) -> Exception:
    row = first_invalid(column)
    where = f"row {row}" if row is not None else "its minimum or maximum"
    if source is None:
        return InvalidArgument(
            f"column {name!r} holds a string value that is not valid UTF-8 ({where})"
        )
    return InvalidFormat(
        f"{source}: column {name!r} holds a string value that is not valid UTF-8 ({where})",
        key=source,
    )


def decode_stats(
    stats: Mapping[str, ColumnStats], column: str, t: pa.DataType
) -> tuple[Any, Any, int] | None:
    """Typed ``(min, max, nulls)`` of one column, or None if not recorded."""
    entry = stats.get(column)
    if entry is None:
        return None
    lo, hi, nulls = entry
    return decode_value(lo, t), decode_value(hi, t), int(nulls)
