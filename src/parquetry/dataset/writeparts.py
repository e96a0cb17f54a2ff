"""Parts of the write path (:mod:`parquetry.dataset.write`): splitting a flush into its
partitions and a written file's index values, each measured in docs/benchmarks.md."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["distinct_sorted", "split_partitions"]


def distinct_sorted(column: pa.ChunkedArray | pa.Array) -> pa.Array:
    """The distinct non-null values of ``column``, ascending (a file's index values).

    Integers (the usual index key) are sorted by numpy and deduplicated by comparing
    neighbours: 0.09 ms for 10,000 int64 instead of 1.1 ms for ``pc.unique(...).sort()``
    (whose sort dominates), measured in docs/benchmarks.md; every other type as before."""
    values = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    values = values.drop_null()
    if not pa.types.is_integer(values.type):
        return pc.unique(values).sort()
    ordered = np.sort(values.to_numpy())
    if len(ordered) > 1:
        first = np.empty(len(ordered), dtype=bool)
        first[0] = True
        np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
        ordered = ordered[first]
    return pa.array(ordered, type=values.type)


def split_partitions(
    table: pa.Table, keys: Sequence[str]
) -> list[tuple[tuple[tuple[str, Any], ...], pa.Table]]:
    """Split ``table`` into runs of equal partition values (partition columns dropped), in
    ascending partition order, rows in their input order within each (a stable sort).

    A null is a partition value of its own (stored as ``NULL_PARTITION``); NaN is refused
    when the label is made.

    A rewrite's buffer is usually already grouped (the kept rows of one file after
    another, one partition each): then only the runs are ordered, not every row, and the
    table is not copied (a sort and ``take`` of a 4 MiB buffer: ~4 ms per flush).
    """
    n = table.num_rows
    if n == 0:
        return []
    starts = _run_starts(table, keys)
    firsts = table.take(pa.array(starts, pa.int64())).select(list(keys))
    values = list(zip(*(firsts.column(k).to_pylist() for k in keys), strict=True))
    if not _each_once(values, [table.schema.field(k).type for k in keys]):
        # A partition in several runs (or float keys, where NaN != NaN): sort every row.
        # Field refs, not names: pyarrow reads a name like ".x" or "a[0]" as a nested path.
        order = pc.sort_indices(table, sort_keys=[(pc.field(k), "ascending") for k in keys])
        table = table.take(order)
        starts = _run_starts(table, keys)
        runs = list(range(len(starts)))
    else:
        # Each partition is one run: the runs in the order the sort would give them.
        sort_keys = [(pc.field(k), "ascending") for k in keys]
        runs = pc.sort_indices(firsts, sort_keys=sort_keys).to_pylist()
    bounds = [*starts, n]
    payload = table.drop_columns(list(keys))
    key_cols = [table.column(k) for k in keys]
    out = []
    for i in runs:
        s, e = bounds[i], bounds[i + 1]
        partition = tuple((k, c[s].as_py()) for k, c in zip(keys, key_cols, strict=True))
        out.append((partition, payload.slice(s, e - s)))
    return out


def _each_once(values: list[tuple[Any, ...]], types: list[pa.DataType]) -> bool:
    """Whether no partition value occurs twice (floats: never trusted, NaN != NaN)."""
    if any(pa.types.is_floating(t) for t in types):
        return False
    try:
        return len(set(values)) == len(values)
    except TypeError:  # an unhashable value: the sort decides
        return False


def _run_starts(table: pa.Table, keys: Sequence[str]) -> list[int]:
    """First rows of the runs of equal partition values, in table order."""
    n = table.num_rows
    change = None
    for k in keys:
        col = table.column(k).combine_chunks()
        after, before = col.slice(1), col.slice(0, n - 1)
        # not_equal is null next to a null: a run also changes where nullness does.
        diff = pc.or_(
            pc.fill_null(pc.not_equal(after, before), False),
            pc.not_equal(pc.is_null(after), pc.is_null(before)),
        )
        change = diff if change is None else pc.or_(change, diff)
    starts = [0]
    if change is not None:
        starts += [i + 1 for i in pc.indices_nonzero(change).to_pylist()]
    return starts
