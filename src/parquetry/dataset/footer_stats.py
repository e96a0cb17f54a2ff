"""Statistics of rows pyarrow just encoded, read from the footer it wrote.

A compaction re-encodes about a million rows per output row group and then needs their
statistics (:func:`~parquetry.dataset.stats.compute_stats`: min/max and null counts,
~0.03 s per million rows of the benchmark's four columns, two thirds of it the strings'
``min_max``). pyarrow's writer has just computed the same values for the footer: for
integer and string columns they are exact, so :func:`written_stats` takes them from there
and computes only the other columns:

- integers (every width, signed or not): the footer's ``min_value``/``max_value`` in the
  column's physical width and sign, the writer's order is the column's;
- strings: the footer's bytes, compared by the writer as unsigned bytes, which for UTF-8
  is ``min_max``'s order (code points); the same length cap then applies
  (``MAX_STRING_STAT``, :func:`~parquetry.dataset.stats.encode_value`);
- null counts: the footer's, per row group, summed.

Anything the footer does not state exactly falls back to ``compute_stats`` for that
column: no statistics, no null count, a bound missing while the chunk has values (pyarrow
drops a bound longer than its ``max_statistics_size``), a bound flagged inexact (truncated),
a bound of an unexpected width, bytes that are not UTF-8 (``compute_stats`` names the
error), and floats (the writer skips NaN, the version document records no bounds then),
timestamps, decimals, dates, booleans and nested columns.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from parquetry.dataset.stats import ColumnStats, compute_stats, encode_value

__all__ = ["written_stats"]

_UNKNOWN = object()


def written_stats(meta: dict[int, Any], table: pa.Table) -> dict[str, ColumnStats]:
    """``compute_stats(table)``, for ``table`` just written by pyarrow as the whole file whose
    decoded footer (FileMetaData fields by id) is ``meta``."""
    found: dict[str, ColumnStats] = {}
    schema = table.schema
    try:
        rows = sum(group[3] for group in meta.get(4, []))
    except (KeyError, TypeError):
        rows = -1
    # Flat columns only: then chunk i is column i; and the footer must be of these rows.
    if rows == table.num_rows and not any(pa.types.is_nested(t) for t in schema.types):
        for i, field in enumerate(schema):
            stats = _column(meta, i, field)
            if stats is not None:
                found[field.name] = stats
    rest = [n for n in table.column_names if n not in found]
    if rest:
        found.update(compute_stats(table.select(rest)))
    return {n: found[n] for n in table.column_names}


def _decoder(t: pa.DataType) -> Any:
    """How a bound of an Arrow type is decoded from the footer's bytes, or None."""
    if pa.types.is_integer(t):
        width = 4 if t.bit_width <= 32 else 8  # INT32 or INT64 physical
        signed = pa.types.is_signed_integer(t)

        def integer(raw: bytes) -> Any:
            if len(raw) != width:
                return _UNKNOWN
            return int.from_bytes(raw, "little", signed=signed)

        return integer
    if pa.types.is_string(t) or pa.types.is_large_string(t):

        def string(raw: bytes) -> Any:
            try:
                return raw.decode("utf-8")
            except UnicodeDecodeError:
                return _UNKNOWN  # compute_stats raises the error naming the column

        return string
    return None


def _column(meta: dict[int, Any], i: int, field: pa.Field) -> ColumnStats | None:
    """The column's ``[min, max, nulls]`` as compute_stats gives it, or None when the
    footer does not say it exactly."""
    decode = _decoder(field.type)
    if decode is None:
        return None
    lo: Any = None
    hi: Any = None
    nulls = 0
    for group in meta.get(4, []):
        try:
            column = group[1][i][3]
            if column[3] != [field.name.encode()]:
                return None
            stats = column[12]
            chunk_nulls = stats[3]
            present = group[3] - chunk_nulls
        except (KeyError, IndexError, TypeError):
            return None
        if type(chunk_nulls) is not int or chunk_nulls < 0 or present < 0:
            return None
        nulls += chunk_nulls
        if not present:
            continue
        if stats.get(7) is False or stats.get(8) is False:
            return None  # truncated bounds
        raw_hi, raw_lo = stats.get(5), stats.get(6)
        if not isinstance(raw_lo, bytes) or not isinstance(raw_hi, bytes):
            return None
        a, b = decode(raw_lo), decode(raw_hi)
        if a is _UNKNOWN or b is _UNKNOWN:
            return None
        lo = a if lo is None or a < lo else lo
        hi = b if hi is None or b > hi else hi
    if lo is None:
        return [None, None, nulls]
    low, high = encode_value(lo, field.type), encode_value(hi, field.type)
    if low is None or high is None:
        return [None, None, nulls]
    return [low, high, nulls]
