"""Merging spilled runs into index pieces a piece at a time (indexspill.py's merge).

The runs (each sorted by value, read back :data:`~parquetry.dataset.indexspill.MERGE_BATCH`
pairs at a time) are merged straight into pieces: the greedy longest prefix of whole values
(every pair of a value in one piece) holding at most ``max_pairs`` pairs, or one value
alone when it has more. The merge before this one produced chunks of about one batch each
(two merge steps per batch read, each step testing every run): a rewrite of 10M pairs in
38 runs took 88,838 such tests, 3.5 s of Python, more than writing the pieces. Here a step
reads one batch (of the run whose last value read is the smallest) and tests the runs only
once more pairs are held than a piece takes: the pieces are the same (the same pairs, so
the same bytes and keys), found with a few numpy searches per batch read.

Values are compared as Arrow sorts them: numbers and times as numpy numbers (NaN last, -0.0
equal to 0.0, one value of a piece as before), other types (text, binary, decimal) with
Arrow's kernels.

Memory: the pairs read and not yet in a piece: about ``max_pairs`` plus up to two batches
per run (the batches past the bound, and those a read's new bound made complete at once;
more only while one value has more pairs than a piece, held whole as before), and at a cut
one copy of the values below the bound (numpy's partition, Arrow's for texts).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["merged_pieces"]


def _native(t: pa.DataType) -> pa.DataType | None:
    """The type whose numpy array sorts ``t``'s values as Arrow does, or None (Arrow's
    kernels then)."""
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t):
        return t
    if pa.types.is_temporal(t) and t.bit_width in (32, 64):
        # A date, time, timestamp or duration is its integer (same order, same equality).
        return pa.int64() if t.bit_width == 64 else pa.int32()
    return None


class _Keys:
    """The sorted values of one run's held pairs, searchable."""

    def __init__(self, t: pa.DataType) -> None:
        self.native = _native(t)
        self.values: Any = np.empty(0, self.native.to_pandas_dtype()) if self.native else None

    def of(self, col: pa.ChunkedArray) -> Any:
        if self.native is None:
            return col
        arr = col.combine_chunks()
        if arr.type != self.native:
            arr = arr.view(self.native)
        return arr.to_numpy(zero_copy_only=False)

    def join(self, a: Any, b: Any) -> Any:
        if self.native is None:
            # Chunks, not a copy: copying a run's held texts at every batch read cost
            # ~50 MB of peak memory (the allocator's fragments) on 2.4M UUID texts.
            return b if a is None else pa.chunked_array(a.chunks + b.chunks, b.type)
        return np.concatenate([a, b]) if len(a) else b

    def below(self, values: Any, x: Any, *, right: bool = False) -> int:
        """How many of the sorted ``values`` sort before ``x`` (``right``: or equal it)."""
        if self.native is not None:
            return int(np.searchsorted(values, x, "right" if right else "left"))
        test = pc.less_equal(values, x) if right else pc.less(values, x)
        return int(pc.sum(test.cast(pa.int64())).as_py() or 0)

    def least(self, held: list[Any]) -> int:
        """Which of the sorted, non-empty ``held`` arrays has the first last value."""
        if self.native is not None:
            lasts = np.array([v[-1] for v in held], self.values.dtype)
            return int(np.argsort(lasts, kind="stable")[0])
        lasts = pa.concat_arrays([v.slice(len(v) - 1).combine_chunks() for v in held])
        return int(pc.sort_indices(lasts)[0].as_py())

    def last(self, values: Any) -> Any:
        return values[len(values) - 1]

    def kth(self, parts: list[Any], k: int) -> Any:
        """The value at position ``k`` (from 0) of ``parts`` sorted together."""
        if self.native is not None:
            return np.partition(np.concatenate(parts), k)[k]
        arr = pa.chunked_array([c for p in parts for c in p.chunks], parts[0].type)
        arr = arr.combine_chunks()
        at = pc.partition_nth_indices(arr, pivot=k)[k].as_py()
        # A scalar of its own: one of the array would keep all of it alive.
        return pa.scalar(arr[at].as_py(), arr.type)


class _Run:
    """One run's source and the pairs read from it and not yet in a piece."""

    def __init__(self, source: Iterator[pa.Table], keys: _Keys) -> None:
        self.source = source
        self.keys = keys
        self.table: pa.Table | None = None
        self.values: Any = keys.values
        self.live = True  # the source may hold more

    @property
    def size(self) -> int:
        return 0 if self.table is None else int(self.table.num_rows)

    def read(self) -> int:
        """Read one more batch; the pairs read (0 at the end of the run)."""
        nxt = next(self.source, None)
        while nxt is not None and nxt.num_rows == 0:
            nxt = next(self.source, None)
        if nxt is None:
            self.live = False
            return 0
        self.table = nxt if self.table is None else pa.concat_tables([self.table, nxt])
        self.values = self.keys.join(self.values, self.keys.of(nxt.column("value")))
        return int(nxt.num_rows)

    def take(self, n: int) -> pa.Table:
        assert self.table is not None
        head, self.table = self.table.slice(0, n), self.table.slice(n)
        self.values = self.values[n:]
        return head


def merged_pieces(
    sources: list[Iterator[pa.Table]], t: pa.DataType, max_pairs: int
) -> Iterator[pa.Table]:
    """The pairs of runs sorted by value as pieces in ascending, disjoint value ranges
    (unsorted within): each the longest run of whole values with at most ``max_pairs``
    pairs, or one value alone when it has more."""
    keys = _Keys(t)
    runs = [_Run(s, keys) for s in sources]
    held = sum(r.read() for r in runs)
    while held:
        live = [r for r in runs if r.live]
        if not live:
            if held <= max_pairs:
                yield _piece(runs, [r.size for r in runs])
                return
            complete = [r.size for r in runs]
        else:
            # Every value below the smallest last value of a run that may hold more has
            # all its pairs held: a piece is cut there once more than a piece is below it
            # (never tested while no more than a piece is held at all).
            at = live[keys.least([r.values for r in live])]
            bound = keys.last(at.values)
            complete = [keys.below(r.values, bound) for r in runs] if held > max_pairs else []
            if sum(complete) <= max_pairs:
                held += at.read()  # too few pairs known complete: read on where the bound is
                continue
        # The value at position max_pairs (from 0) is the first that does not fit.
        parts = [r.values[:n] for r, n in zip(runs, complete, strict=True) if n]
        first_out = keys.kth(parts, max_pairs)
        cut = [keys.below(r.values, first_out) for r in runs]
        if not any(cut):
            # One value with more pairs than a piece: a piece of its own.
            cut = [keys.below(r.values, first_out, right=True) for r in runs]
        piece = _piece(runs, cut)
        held -= piece.num_rows
        for r in runs:
            if r.live and r.size == 0:
                held += r.read()  # a run emptied by the piece bounds nothing until read
        yield piece


def _piece(runs: list[_Run], counts: list[int]) -> pa.Table:
    return pa.concat_tables([r.take(n) for r, n in zip(runs, counts, strict=True) if n])
