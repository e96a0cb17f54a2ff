"""Exact statistics of concatenated column chunks, from the chunks' own Statistics structs.

Used by the binary copier (:mod:`parquetry.parquet.rgcopy`) when it merges small row groups
by concatenating their pages: the merged chunk's ``Statistics`` must describe exactly its
values, so every field is either merged exactly or left out, never approximated:

- ``null_count``: the sum, only if every part has one;
- ``min_value``/``max_value``: the smallest minimum and largest maximum under the column's
  sort order (signed or unsigned integers, IEEE floats with ``-0.0``/``+0.0`` as the spec
  says, unsigned bytes, signed big-endian decimals), only if every part with values has
  both; parts without values (all null) contribute nothing. Types without a defined order
  (INT96, INTERVAL, FLOAT16, NaN bounds) lose their bounds;
- ``is_min_value_exact``/``is_max_value_exact``: true only if true in every part;
- the deprecated ``min``/``max`` and ``distinct_count``: left out (no exact merge).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["merge_statistics", "sort_key"]

# Physical types (parquet.thrift Type).
_BOOLEAN, _INT32, _INT64, _INT96, _FLOAT, _DOUBLE, _BYTE_ARRAY, _FLBA = range(8)
# ConvertedType ids.
_DECIMAL, _UINT_8, _UINT_16, _UINT_32, _UINT_64, _INTERVAL = 5, 11, 12, 13, 14, 21

SortKey = Callable[[bytes], Any]


def _unsigned(element: dict[int, Any]) -> bool:
    integer = (element.get(10) or {}).get(10)
    if integer is not None:
        return integer.get(2) is False
    return element.get(6) in (_UINT_8, _UINT_16, _UINT_32, _UINT_64)


def _decimal(element: dict[int, Any]) -> bool:
    return 5 in (element.get(10) or {}) or element.get(6) == _DECIMAL


def _float_key(fmt: str, width: int) -> SortKey:
    def key(raw: bytes) -> Any:
        if len(raw) != width:
            raise ValueError("statistics width")
        value = struct.unpack(fmt, raw)[0]
        if math.isnan(value):
            raise ValueError("NaN bound")
        # -0.0 sorts before +0.0: a merged minimum of zero stays -0.0, a maximum +0.0.
        return (value, math.copysign(1.0, value))

    return key


def _int_key(fmt: str, width: int) -> SortKey:
    def key(raw: bytes) -> Any:
        if len(raw) != width:
            raise ValueError("statistics width")
        return struct.unpack(fmt, raw)[0]

    return key


def _signed_be(raw: bytes) -> int:
    return int.from_bytes(raw, "big", signed=True)


def sort_key(element: dict[int, Any]) -> SortKey | None:
    """How the statistics of a leaf column (its SchemaElement) are ordered, or None when
    no order is defined (their bounds cannot be merged)."""
    physical, logical = element.get(1), element.get(10) or {}
    if physical == _BOOLEAN:
        return _int_key("<?", 1)
    if physical == _INT32:
        return _int_key("<I" if _unsigned(element) else "<i", 4)
    if physical == _INT64:
        return _int_key("<Q" if _unsigned(element) else "<q", 8)
    if physical == _FLOAT:
        return _float_key("<f", 4)
    if physical == _DOUBLE:
        return _float_key("<d", 8)
    if physical in (_BYTE_ARRAY, _FLBA):
        if 15 in logical or element.get(6) == _INTERVAL or logical.keys() & {16, 17, 18}:
            return None  # FLOAT16, INTERVAL, VARIANT, GEOMETRY, GEOGRAPHY: no byte order
        if _decimal(element):
            return _signed_be
        return bytes  # unsigned lexicographic: Python's bytes order
    return None  # INT96 and unknown types


def merge_statistics(
    parts: Sequence[tuple[dict[int, Any] | None, int]], element: dict[int, Any]
) -> dict[int, Any] | None:
    """The Statistics of the chunks ``parts`` (each ``(statistics, num_values)``) placed one
    after the other, for a leaf column described by ``element``; None if nothing is exact."""
    out: dict[int, Any] = {}
    if parts and all(s is not None and 3 in s for s, _ in parts):
        out[3] = sum(s[3] for s, _ in parts if s is not None)
    bounds = _bounds(parts, element)
    if bounds is not None:
        out[6], out[5] = bounds
        for flag in (7, 8):
            flags = [s.get(flag) for s, n in parts if s is not None and not _no_values(s, n)]
            if flags and all(f is not None for f in flags):
                out[flag] = all(flags)
    return out or None


def _no_values(stats: dict[int, Any], num_values: int) -> bool:
    """A part whose every level is a null (or empty list): it has no bounds to merge."""
    return 5 not in stats and 6 not in stats and stats.get(3) == num_values


def _bounds(
    parts: Sequence[tuple[dict[int, Any] | None, int]], element: dict[int, Any]
) -> tuple[bytes, bytes] | None:
    key = sort_key(element)
    if key is None:
        return None
    lows: list[bytes] = []
    highs: list[bytes] = []
    for stats, num_values in parts:
        if stats is None:
            return None
        if _no_values(stats, num_values):
            continue
        if 5 not in stats or 6 not in stats:
            return None
        lows.append(stats[6])
        highs.append(stats[5])
    if not lows:
        return None
    try:
        return min(lows, key=key), max(highs, key=key)
    except (ValueError, struct.error):
        return None
