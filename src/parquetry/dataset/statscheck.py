"""Checks of the per-file statistics in version documents (``[rows, size, {column:
[min, max, nulls]}]`` as JSON text per partition), against the column types.

Used by :class:`~parquetry.dataset.metadata.FileInfos` when an entry is first decoded, and
by ``parquetry validate`` for all of them.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Callable, Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

import pyarrow as pa

__all__ = [
    "Check",
    "decode_file_entry",
    "file_entry_problems",
    "reject_constant",
    "short_repr",
    "stats_checkers",
]

INT64_MIN, UINT64_MAX = -(2**63), 2**64 - 1


def short_repr(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a valid JSON number")


Check = Callable[[Any], bool]


def _is_int(v: Any) -> bool:
    return type(v) is int and INT64_MIN <= v <= UINT64_MAX


def _is_float(v: Any) -> bool:
    return (type(v) is float and math.isfinite(v)) or _is_int(v)


def _is_iso(parse: Callable[[str], Any]) -> Check:
    def check(v: Any) -> bool:
        if type(v) is not str:
            return False
        try:
            parse(v)
        except ValueError:
            return False
        return True

    return check


def _is_decimal(v: Any) -> bool:
    if type(v) is not str:
        return False
    try:
        return Decimal(v).is_finite()
    except (InvalidOperation, ValueError):
        return False


def _checker(t: pa.DataType) -> Check:
    """Accepts the JSON values ``encode_value`` writes for a column of type ``t``."""
    if pa.types.is_dictionary(t):
        t = t.value_type
    if pa.types.is_boolean(t):
        return lambda v: type(v) is bool
    if pa.types.is_integer(t):
        return _is_int
    if pa.types.is_floating(t):
        return _is_float
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return lambda v: type(v) is str
    if pa.types.is_timestamp(t):
        return _is_iso(dt.datetime.fromisoformat)
    if pa.types.is_date(t):
        return _is_iso(dt.date.fromisoformat)
    if pa.types.is_decimal(t):
        return _is_decimal
    return lambda v: False  # other types record null counts only


def stats_checkers(schema: pa.Schema | None) -> dict[str, Check] | None:
    """Per-column value checkers for :func:`file_entry_problems` (None: shape only)."""
    return None if schema is None else {f.name: _checker(f.type) for f in schema}


def decode_file_entry(text: Any) -> Any:
    """One partition's ``[rows, size, statistics]`` from its JSON text (ValueError if bad)."""
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text, parse_constant=reject_constant)
    except RecursionError:
        raise ValueError("nested too deeply") from None


def file_entry_problems(entry: Any, checks: Mapping[str, Check] | None, path: str) -> list[str]:
    """Problems of one decoded per-file entry ``[rows, size, {column: [min, max, nulls]}]``."""
    out: list[str] = []
    if type(entry) is not list or len(entry) != 3:
        return [f"{path}: expected [rows, size, statistics], found {short_repr(entry)}"]
    rows, size, stats = entry
    for name, value in (("rows", rows), ("size", size)):
        if type(value) is not int or not 0 <= value < 2**63:
            out.append(f"{path}: {name} must be an integer >= 0, found {short_repr(value)}")
    if type(stats) is not dict:
        return [*out, f"{path}: statistics must be an object, found {short_repr(stats)}"]
    for column, st in stats.items():
        check = checks.get(column) if checks is not None else _is_any
        if check is None:
            out.append(f"{path}.{column}: statistics of a column not in the schema")
            continue
        if type(st) is not list or len(st) != 3:
            out.append(f"{path}.{column}: expected [min, max, nulls], found {short_repr(st)}")
            continue
        lo, hi, nulls = st
        if type(nulls) is not int or not 0 <= nulls < 2**63:
            out.append(f"{path}.{column}: null count {short_repr(nulls)} is not an integer >= 0")
        if (lo is None) != (hi is None) or not (lo is None or (check(lo) and check(hi))):
            out.append(
                f"{path}.{column}: min/max {short_repr(lo)}, {short_repr(hi)} do not fit the column"
            )
    return out


def _is_any(v: Any) -> bool:
    return v is None or isinstance(v, bool | int | str) or (type(v) is float and math.isfinite(v))
