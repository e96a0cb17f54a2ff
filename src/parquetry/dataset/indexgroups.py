"""Which row groups of an index piece a lookup reads, and in which ranged GETs.

Shared by the batch lookup (indexlookup.py) and the scan of a piece (indexscan.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from parquetry.dataset.indexfile import _group_range

__all__ = ["may_hold", "runs"]


def may_hold(values: pa.Array, lo: Any, hi: Any, t: pa.DataType) -> bool:
    """Does some value lie in ``[lo, hi]`` (a row group's or a file's statistics)? True
    when they cannot be compared (read the group or file)."""
    try:
        low, high = pa.scalar(lo, t), pa.scalar(hi, t)
        inside = pc.and_(pc.greater_equal(values, low), pc.less_equal(values, high))
        return bool(pc.any(inside).as_py())
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        return True  # statistics we cannot compare: read the group


def _chosen_groups(md: pq.FileMetaData, values: pa.Array, t: pa.DataType) -> list[int]:
    # Parquet statistics leave NaN out: a NaN value may be in any group of a float piece.
    nan = pa.types.is_floating(t) and bool(pc.any(pc.is_nan(values)).as_py())
    fast = _integer_groups(md, values) if pa.types.is_integer(t) else None
    if fast is not None:
        return fast
    chosen = []
    for i in range(md.num_row_groups):
        st = md.row_group(i).column(0).statistics
        if nan or st is None or not st.has_min_max or may_hold(values, st.min, st.max, t):
            chosen.append(i)
    return chosen


def _integer_groups(md: pq.FileMetaData, values: pa.Array) -> list[int] | None:
    """:func:`_chosen_groups` of an integer piece by binary search of the (sorted,
    distinct) values: a group is chosen when some value lies in its ``[min, max]``, as
    :func:`may_hold` decides, in 10 instead of 21 ms for 306 groups. None when a group's
    statistics are missing or do not fit the values' type (the general path decides)."""
    lows, highs = [], []
    for i in range(md.num_row_groups):
        st = md.row_group(i).column(0).statistics
        if st is None or not st.has_min_max or type(st.min) is not int or type(st.max) is not int:
            return None
        lows.append(st.min)
        highs.append(st.max)
    w = values.to_numpy(zero_copy_only=False)
    try:
        lo, hi = np.array(lows, dtype=w.dtype), np.array(highs, dtype=w.dtype)
    except (OverflowError, ValueError):
        return None
    inside = np.searchsorted(w, hi, "right") > np.searchsorted(w, lo, "left")
    return [int(g) for g in np.flatnonzero(inside)]


def runs(md: pq.FileMetaData, groups: list[int], limit: int) -> Iterator[list[int]]:
    """``groups`` (ascending) in runs of byte-adjacent groups of at most ``limit`` bytes each
    (a group larger than ``limit`` alone): one ranged GET per run."""
    run: list[int] = []
    start = end = 0
    for g in groups:
        s, e = _group_range(md, g)
        if run and s == end and e - start <= limit:
            run.append(g)
            end = e
            continue
        if run:
            yield run
        run, start, end = [g], s, e
    if run:
        yield run
