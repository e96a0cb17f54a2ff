"""kartothek's merged index file, written from a format-2 index state in bounded memory.

kartothek reads one Parquet file per indexed column (``indices/<column>/<ts>.by-dataset-
index.parquet``: ``<column>``, ``partition: list<string>``, one row per distinct value), so
every pointer write exports the whole state: pieces and tail pieces without their dead
labels, plus the tail pairs. Building that as one table costs ~200 bytes per pair at the
peak (2 GiB for 10M pairs; a 7M-key ``Dataset.checkpoint()`` failed under 300 MB of address
space). Instead the live pairs are streamed in ascending value order and the file is written
one row group at a time:

* pieces under ``_indices/`` are sorted by value (:func:`~parquetry.dataset.indexpieces.
  write_piece`), so each one is a sorted stream read one row group at a time;
* pieces whose value ranges (footer statistics) do not overlap are streamed one after the
  other; overlapping ones are merged (one row group held per piece of the overlap);
* the tail pairs and pieces written by other tools (a format-1 or kartothek index file
  adopted at migration: kartothek's are not sorted) go through a
  :class:`~parquetry.dataset.indexspill.PairSink`, which spills sorted runs past
  ``RUN_PAIRS`` pairs, and become one more sorted stream.

Memory: one row group per piece of the widest overlap (a checkpoint leaves value-disjoint
pieces of a rewrite plus at most 8 small ones), one run of the sink, one output row group,
and the compressed bytes of the file written (~5-10 bytes per pair: the put needs them).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from parquetry.dataset.indexfile import INDEX_ROW_GROUP, IndexFooter, _footer_info, footer_of
from parquetry.dataset.indexpieces import (
    _grouped,
    iter_piece_tables,
    normalise_pairs,
)
from parquetry.dataset.indexspill import RUN_PAIRS, PairSink, _by_value, _merge, _read_run
from parquetry.dataset.indexstate import IndexState
from parquetry.dataset.indices import _from_table
from parquetry.dataset.naming import index_key, is_index_piece_key
from parquetry.errors import AlreadyExists, MetadataCorrupted, out_of_memory
from parquetry.store import PutMode, Store

__all__ = ["live_chunks", "write_kartothek_index"]


def write_kartothek_index(
    store: Store,
    uuid: str,
    state: IndexState,
    *,
    row_group: int = INDEX_ROW_GROUP,
    run_pairs: int = RUN_PAIRS,
) -> IndexFooter:
    """Write ``state``'s live pairs as kartothek's index file under a new unique key
    (create-if-absent), sorted by value in row groups of ``row_group`` rows, snappy (what
    :func:`~parquetry.dataset.indices.write_index` writes for a whole table). Tests shrink
    ``row_group`` and ``run_pairs`` (the sink's spill threshold)."""
    schema = pa.schema([(state.column, state.type), ("partition", pa.list_(pa.string()))])
    out = pa.BufferOutputStream()
    held: list[pa.Table] = []
    rows = 0
    try:
        with pq.ParquetWriter(out, schema, compression="snappy") as writer:
            written = False
            for chunk in live_chunks(store, uuid, state, run_pairs=run_pairs):
                values, labels = _grouped(_unsigned_zero(chunk))
                held.append(pa.Table.from_arrays([values, labels], schema=schema))
                rows += len(values)
                if rows >= row_group:
                    table = pa.concat_tables(held)
                    cut = rows - rows % row_group
                    writer.write_table(table.slice(0, cut), row_group_size=row_group)
                    held, rows, written = [table.slice(cut)], rows - cut, True
            if rows or not written:
                table = pa.concat_tables(held) if held else schema.empty_table()
                writer.write_table(table, row_group_size=row_group)
            held = []
        data = memoryview(out.getvalue())  # no copy of the file's bytes
    except MemoryError as exc:
        raise out_of_memory(exc, f"writing kartothek's index of {state.column!r}") from None
    created = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    for _ in range(100):
        key = index_key(uuid, state.column, created)
        try:
            store.put(key, data, mode=PutMode.CREATE)
            return footer_of(key, data)
        except AlreadyExists:
            created += dt.timedelta(microseconds=1)
    raise MetadataCorrupted(f"could not find a free index file name for {state.column!r}")


def _unsigned_zero(chunk: pa.Table) -> pa.Table:
    """-0.0 as 0.0: kartothek loads the file into a dict, where the two are one key, so two
    rows would leave one of them (and its labels) out. A merge chunk never splits them:
    neither sorts before the other."""
    values = chunk.column("value")
    if not pa.types.is_floating(values.type):
        return chunk
    zero = pa.scalar(0, values.type)
    fixed = pc.if_else(pc.equal(values, zero), zero, values)
    return chunk.set_column(chunk.schema.get_field_index("value"), "value", fixed)


@dataclass(frozen=True, slots=True)
class _Stream:
    """One sorted source of pairs and its value range (None: unknown, overlaps all)."""

    open: Callable[[], Iterator[pa.Table]]
    low: Any = None
    high: Any = None

    @property
    def ranged(self) -> bool:
        return self.low is not None and self.high is not None


def live_chunks(
    store: Store, uuid: str, state: IndexState, *, run_pairs: int = RUN_PAIRS
) -> Iterator[pa.Table]:
    """Every live ``(value, label)`` pair of ``state`` in chunks of ascending, disjoint
    value ranges (unsorted within) that never split one value's pairs (a pair may repeat:
    callers sort and deduplicate each chunk)."""
    sources = [(f, state.dead) for f in state.pieces]
    sources += [(tp.footer, tp.dead) for tp in state.tail_pieces]
    ranged = _ranged_type(state.type)
    streams: list[_Stream] = []
    with PairSink(state.type, run_pairs=run_pairs) as sink:
        low = high = None
        for footer, dead in sources:
            if is_index_piece_key(uuid, footer.key):
                streams.append(_piece_stream(store, state, footer, dead, ranged))
                continue
            for part in _piece_pairs(store, state, footer, dead):
                sink.add(part)
                if ranged:
                    low, high = _widen(low, high, part)
        sink.add(state.tail)
        if ranged:
            # Only ranged types: as_py of a timestamp of year 1 in a zone west of UTC
            # raises OverflowError (and the bounds of other types are not used).
            low, high = _widen(low, high, state.tail)
        if sink.total:
            bounds = (low, high) if ranged else (None, None)
            streams.append(_Stream(lambda: _sink_chunks(sink), *bounds))
        for cluster in _clusters(streams):
            if len(cluster) == 1:
                yield from cluster[0].open()
            else:
                yield from _merge([s.open() for s in cluster])


def _ranged_type(t: pa.DataType) -> bool:
    """Types whose Python values (Parquet statistics, ``as_py``) order like Arrow sorts
    them. Floats are not (NaN: no statistics, sorted last); other types merge as one."""
    return bool(pa.types.is_integer(t) or pa.types.is_string(t) or pa.types.is_large_string(t))


def _piece_stream(
    store: Store, state: IndexState, footer: IndexFooter, dead: frozenset[str], ranged: bool
) -> _Stream:
    def open_() -> Iterator[pa.Table]:
        return _piece_pairs(store, state, footer, dead)

    if not ranged:
        return _Stream(open_)
    try:
        info = _footer_info(footer)
    except Exception:
        return _Stream(open_)  # the read that follows names the defect
    if info.mins is None or info.maxs is None or not info.mins:
        return _Stream(open_)
    return _Stream(open_, min(info.mins), max(info.maxs))


def _piece_pairs(
    store: Store, state: IndexState, footer: IndexFooter, dead: frozenset[str]
) -> Iterator[pa.Table]:
    """One piece's live pairs, a row group at a time."""
    for table in iter_piece_tables(store, state.column, footer):
        index = _from_table(state.column, table, footer.key, state.type)
        pairs = normalise_pairs(index.pairs(), state.type)
        if dead and pairs.num_rows:
            gone = pc.is_in(pairs.column("label"), value_set=pa.array(list(dead), pa.string()))
            pairs = pairs.filter(pc.invert(gone))
        yield pairs


def _sink_chunks(sink: PairSink) -> Iterator[pa.Table]:
    """The sink's pairs in ascending value order (spilled runs merged)."""
    if not sink.runs:
        yield _by_value(sink.table())
        return
    if sink.buffered:
        sink._spill()
    # _merge's chunks are unsorted within, and a stream must be sorted for an outer merge.
    for chunk in _merge([_read_run(p) for p in sink.runs]):
        yield _by_value(chunk)


def _widen(low: Any, high: Any, pairs: pa.Table) -> tuple[Any, Any]:
    if pairs.num_rows == 0:
        return low, high
    got = pc.min_max(pairs.column("value"))
    lo, hi = got["min"].as_py(), got["max"].as_py()
    if lo is None or hi is None:
        return low, high
    return (lo if low is None else min(low, lo)), (hi if high is None else max(high, hi))


def _clusters(streams: list[_Stream]) -> Iterator[list[_Stream]]:
    """Streams grouped so that groups are in ascending value order and no two groups'
    ranges overlap: a stream of unknown range joins one group with all the others."""
    if not all(s.ranged for s in streams):
        if streams:
            yield streams
        return
    group: list[_Stream] = []
    top: Any = None
    for s in sorted(streams, key=lambda s: s.low):
        if group and s.low > top:
            yield group
            group, top = [], None
        group.append(s)
        top = s.high if top is None else max(top, s.high)
    if group:
        yield group
