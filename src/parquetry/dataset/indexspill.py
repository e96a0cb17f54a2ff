"""Writing index pieces from pairs that need not fit in memory (an external sort).

A commit that rewrites 1,000 files re-adds every key of them (10M pairs for a 10M-row
dataset indexed on a unique key), and a checkpoint's full rewrite or merge reads every pair
of the pieces it merges. Sorting those in memory (one piece) costs ~200 bytes per pair at
the peak: 2 GiB for 10M pairs. :class:`PairSink` instead keeps at most :data:`RUN_PAIRS`
pairs in memory: past that it sorts them and spills them as a run (a local temporary Arrow
IPC file), and :meth:`PairSink.write` merges the runs batch by batch into pieces of about
:data:`PIECE_MAX_PAIRS` pairs each whose value ranges are disjoint (a value's labels are all
in one piece), so a point lookup still reads at most one of them (the others' footer
statistics exclude the value). The merge cuts whole pieces (indexmerge.py); :func:`_merge`
(chunks of about one batch each) remains for the export of kartothek's index file
(indexexport.py), which sorts each chunk.

Memory: one run or one piece being written (at most ``PIECE_MAX_PAIRS`` pairs unless one
value has more labels; ~40 MB at the peak for int64 values and 40-byte labels) plus one
batch (:data:`MERGE_BATCH` pairs) per run: 8,192 pairs more per 256k pairs spilled.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from parquetry.dataset.indexfile import IndexFooter
from parquetry.dataset.indexmerge import merged_pieces
from parquetry.dataset.indexpieces import normalise_pairs, pairs_schema, write_piece
from parquetry.dataset.spilldir import SpillDir, spill_failed
from parquetry.store import Store

__all__ = ["MERGE_BATCH", "PIECE_MAX_PAIRS", "RUN_PAIRS", "PairSink", "label_pairs"]

#: Pairs a sink holds in memory before it spills a sorted run.
RUN_PAIRS = 1 << 18
#: Pairs per piece written from spilled runs (16 row groups of PIECE_ROW_GROUP).
PIECE_MAX_PAIRS = 1 << 18
#: Rows per batch of a run (read back one batch per run at a time while merging).
MERGE_BATCH = 1 << 13


def label_pairs(label: str, values: pa.Array, t: pa.DataType) -> pa.Table:
    """``(value, label)`` rows of one file's distinct values (the label repeated by Arrow,
    not as a Python list)."""
    if values.type != t:
        values = values.cast(t)
    return pa.table(
        {"value": values, "label": pa.repeat(pa.scalar(label, pa.string()), len(values))}
    )


class PairSink:
    """Collects ``(value, label)`` tables; spills sorted runs past ``run_pairs`` pairs.

    Use as a context manager (the spill directory is removed on exit; one a killed process
    left behind is removed by the next sink that spills: :mod:`parquetry.dataset.spilldir`)."""

    def __init__(self, t: pa.DataType, *, run_pairs: int = RUN_PAIRS) -> None:
        self.type = t
        self.run_pairs = run_pairs
        self.buffer: list[pa.Table] = []
        self.buffered = 0
        self.total = 0
        self.runs: list[str] = []
        self._dir: SpillDir | None = None

    def __enter__(self) -> PairSink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.buffer, self.buffered = [], 0
        if self._dir is not None:
            with contextlib.suppress(OSError):
                self._dir.cleanup()
            self._dir = None

    def add(self, pairs: pa.Table) -> None:
        pairs = normalise_pairs(pairs, self.type)
        if pairs.num_rows == 0:
            return
        self.buffer.append(pairs)
        self.buffered += pairs.num_rows
        self.total += pairs.num_rows
        if self.buffered >= self.run_pairs:
            self._spill()

    @property
    def spilled(self) -> bool:
        return bool(self.runs)

    def table(self) -> pa.Table:
        """The pairs held in memory (all of them when nothing was spilled)."""
        if not self.buffer:
            return pairs_schema(self.type).empty_table()
        return pa.concat_tables(self.buffer)

    def _spill(self) -> None:
        run = _by_value(self.table())
        self.buffer, self.buffered = [], 0
        if self._dir is None:
            # Named and locked so that a sink of a later process reclaims it when this
            # process is killed before close (spilldir.py).
            self._dir = SpillDir()  # SpillFailed names the directory and the reason
        path = os.path.join(self._dir.name, f"run{len(self.runs)}.arrow")
        try:
            with pa.OSFile(path, "wb") as f, pa.ipc.new_file(f, run.schema) as w:
                for batch in run.to_batches(max_chunksize=MERGE_BATCH):
                    w.write_batch(batch)
        except OSError as exc:
            raise spill_failed(f"spilling index pairs to {path}", path, exc) from exc
        self.runs.append(path)

    def write(
        self,
        store: Store,
        uuid: str,
        column: str,
        files: pa.Table | None = None,
        *,
        max_pairs: int = PIECE_MAX_PAIRS,
    ) -> list[tuple[IndexFooter, int]]:
        """Write every pair as pieces (create-if-absent): one piece when nothing was
        spilled (the same bytes as :func:`write_piece` of all pairs), else pieces of about
        ``max_pairs`` pairs with disjoint value ranges. Returns (footer, pairs) each."""
        if not self.runs:
            pairs = self.table()
            if pairs.num_rows == 0:
                return []
            return [(write_piece(store, uuid, column, pairs, files), pairs.num_rows)]
        if self.buffered:
            self._spill()
        pieces = merged_pieces([_read_run(p) for p in self.runs], self.type, max_pairs)
        return [_write(store, uuid, column, piece, files) for piece in pieces]


def _write(
    store: Store, uuid: str, column: str, pairs: pa.Table, files: pa.Table | None
) -> tuple[IndexFooter, int]:
    return write_piece(store, uuid, column, pairs, files), pairs.num_rows


def _by_value(pairs: pa.Table) -> pa.Table:
    """``pairs`` in ascending value order (Arrow's: NaN last); the order of a value's
    labels does not matter (a piece's bytes come from write_piece's own sort)."""
    values = pairs.column("value")
    if pa.types.is_integer(values.type) and values.null_count == 0:
        # numpy's unstable sort: a third of Arrow's stable sort_indices' CPU on a run of
        # 262,144 int64 (8 vs 25 ms), and stability is not needed (see above).
        order = np.argsort(values.combine_chunks().to_numpy())
        return pairs.take(pa.array(order))
    return pairs.take(pc.sort_indices(pairs, sort_keys=[("value", "ascending")]))


def _read_run(path: str) -> Iterator[pa.Table]:
    # Not memory-mapped: a mapping would count the whole run against the address space.
    with pa.OSFile(path, "rb") as f:
        reader = pa.ipc.open_file(f)
        for i in range(reader.num_record_batches):
            yield pa.Table.from_batches([reader.get_batch(i)])


def _merge(sources: list[Iterator[pa.Table]]) -> Iterator[pa.Table]:
    """Merge runs sorted by value into chunks of ascending, disjoint value ranges (unsorted
    within), each holding every pair of its values (a chunk boundary never splits a
    value), one batch per run held."""
    k = len(sources)
    empty = None
    bufs: list[pa.Table | None] = [None] * k
    live = [True] * k

    def fill(i: int) -> None:
        while live[i] and (bufs[i] is None or bufs[i].num_rows == 0):  # type: ignore[union-attr]
            nxt = next(sources[i], empty)
            if nxt is None:
                live[i] = False
            else:
                bufs[i] = nxt

    def extend(i: int) -> None:
        nxt = next(sources[i], empty)
        if nxt is None:
            live[i] = False
        else:
            bufs[i] = pa.concat_tables([bufs[i], nxt])

    for i in range(k):
        fill(i)
    while True:
        held = [i for i in range(k) if bufs[i] is not None and bufs[i].num_rows]  # type: ignore[union-attr]
        if not held:
            return
        bounded = [i for i in held if live[i]]
        if not bounded:
            yield pa.concat_tables([bufs[i] for i in held])
            return
        lasts = pa.concat_arrays([_last(bufs[i]) for i in bounded])
        first = int(pc.sort_indices(lasts)[0].as_py())
        pivot, at = lasts[first], bounded[first]
        counts = {i: _below(bufs[i].column("value"), pivot) for i in held}  # type: ignore[union-attr]
        if not any(counts.values()):
            # Every pair left in the pivot's run has the pivot's value: read on.
            extend(at)
            continue
        parts = []
        for i, n in counts.items():
            if n:
                b = bufs[i]
                assert b is not None
                parts.append(b.slice(0, n))
                bufs[i] = b.slice(n)
                fill(i)
        yield pa.concat_tables(parts)


def _last(table: pa.Table) -> pa.Array:
    col = table.column("value")
    return col.slice(len(col) - 1).combine_chunks()


def _below(values: pa.ChunkedArray, pivot: Any) -> int:
    """How many leading values (ascending, Arrow's sort order) sort before ``pivot``."""
    arr = values.combine_chunks()
    if pa.types.is_integer(arr.type):
        # Sorted within the batch: a binary search, not a comparison of every value.
        return int(np.searchsorted(arr.to_numpy(zero_copy_only=False), pivot.as_py(), "left"))
    if pa.types.is_floating(arr.type):
        # Arrow sorts NaN last; "<" is false for it both ways.
        np_values = arr.to_numpy(zero_copy_only=False)
        p = pivot.as_py()
        if p != p:
            return int(np.count_nonzero(~np.isnan(np_values)))
        return int(np.count_nonzero(np_values < p))
    return int(pc.sum(pc.less(arr, pivot).cast(pa.int64())).as_py() or 0)
