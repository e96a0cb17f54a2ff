"""Batch lookups in a format-2 secondary index: many values at once (upsert, delete by key).

A point lookup (:meth:`IndexState.search`) costs one ranged GET per piece for one value;
10,000 keys that way would be 10,000 GETs per piece. :func:`lookup_values` instead reads
each piece's row groups that may hold *any* of the values once: the piece footer (cached in
the version, no request) gives every row group's min/max; a row group is read when a value
lies in ``[min, max]``. Adjacent chosen row groups are fetched by one ranged GET of at most
``max_request_bytes`` (so the bytes held at once stay bounded), decoded, filtered to the
looked-up values and dropped. Tail pairs (inline in the version) need no request.

Decoding, per row group: the value column first; the matching rows are found by a binary
search (integer pieces are sorted by value) or ``is_in``; the label lists are decoded only
if a row matches, as a dictionary when the piece stores them so (indices, not strings),
and only the matching rows are kept. The row groups of one request are decoded by
:data:`DECODE_THREADS` threads (pyarrow releases the GIL), each holding one group.

Requests: at most ``ceil(bytes of the chosen row groups / max_request_bytes)`` plus one per
separate run of chosen groups, per piece. Measured: 5,000 random keys in a 10M-value int64
index (one piece, 306 row groups) hit every group: 1 GET of 27 MiB instead of 5,000 GETs,
1.0 CPU s (labels dictionary-encoded; a piece written before that: 46 MiB in 2 GETs, 1.8
CPU s, and 2.3 CPU s before the value column was searched first); clustered keys (recent
ids) touch a few groups: one GET.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from parquetry.dataset.indexfile import IndexFooter, _group_range, _SparseFile
from parquetry.dataset.indexgroups import _chosen_groups, runs
from parquetry.dataset.indexpieces import _ERRORS, _missing, _unreadable, piece_metadata
from parquetry.dataset.indexstate import IndexState
from parquetry.dataset.indices import IndexData, _from_table
from parquetry.errors import InvalidArgument, NotFound, ParquetryError
from parquetry.store import Store

__all__ = ["MAX_REQUEST_BYTES", "BatchLookup", "lookup_values"]

#: One ranged GET reads at most this many bytes of adjacent row groups (one row group
#: larger than this is read alone): bounds memory and the time a retried request loses.
MAX_REQUEST_BYTES = 32 << 20
#: Threads decoding the row groups of one request (pyarrow releases the GIL while it
#: decompresses and decodes, ~85 % of a lookup's CPU): each holds one decoded group.
DECODE_THREADS = 2
#: Row groups whose value column one call decodes (~4 MiB of int64 at 32,768 pairs a group).
GROUPS_PER_CALL = 16


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchLookup:
    """The live ``(value, label)`` pairs of the looked-up values and the GETs it took."""

    pairs: pa.Table  # columns value, label; one row per (value, label), no duplicates
    request_keys: tuple[str, ...] = ()
    groups_read: int = 0
    bytes_read: int = 0

    @property
    def requests(self) -> int:
        return len(self.request_keys)

    def labels(self) -> set[str]:
        """Every label holding at least one of the values."""
        return set(pc.unique(self.pairs.column("label")).to_pylist())

    def mapping(self) -> dict[Any, set[str]]:
        """value -> labels (Python values; for small results and tests)."""
        out: dict[Any, set[str]] = {}
        for v, lbl in zip(
            self.pairs.column("value").to_pylist(),
            self.pairs.column("label").to_pylist(),
            strict=True,
        ):
            out.setdefault(v, set()).add(lbl)
        return out


def _sorted_values(state: IndexState, values: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    try:
        cast = values.cast(state.type) if values.type != state.type else values
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise InvalidArgument(
            f"values of type {values.type} cannot be looked up in the index of column "
            f"{state.column!r} ({state.type}): {exc}"
        ) from None
    distinct = pc.unique(cast.drop_null())
    return distinct.take(pc.sort_indices(distinct))


def _search_piece(
    store: Store,
    state: IndexState,
    footer: IndexFooter,
    dead: frozenset[str],
    values: pa.Array,
    limit: int,
    pool: Callable[[], ThreadPoolExecutor],
) -> tuple[list[pa.Table], int, int, int]:
    """Matching live pairs of one piece, its GETs, row groups and bytes read."""
    md = piece_metadata(footer)
    groups = _chosen_groups(md, values, state.type)
    parts: list[pa.Table] = []
    gets = nbytes = 0
    for run in runs(md, groups, limit):
        start, end = _group_range(md, run[0])[0], _group_range(md, run[-1])[1]
        try:
            data = store.get_range(footer.key, start, end)

            def decode(chunk: list[int], data: bytes = data, start: int = start) -> _Decoded:
                sparse = _SparseFile(store, footer, {start: data})
                pf = pq.ParquetFile(
                    sparse, metadata=md, pre_buffer=False, read_dictionary=_dictionary(md)
                )
                # At most GROUPS_PER_CALL row groups decoded at a time per thread: a run
                # of 32 MiB holds ~10x that decoded; only matching pairs are kept.
                found = [
                    _batch_pairs(
                        state, footer.key, pf, chunk[at : at + GROUPS_PER_CALL], values, dead
                    )
                    for at in range(0, len(chunk), GROUPS_PER_CALL)
                ]
                return found, sparse.fetches

            chunks = _split(run, DECODE_THREADS)
            one = len(chunks) == 1
            decoded = [decode(chunks[0])] if one else list(pool().map(decode, chunks))
        except NotFound:
            raise _missing(state.column, footer.key) from None
        except _ERRORS as exc:
            if isinstance(exc, ParquetryError):
                raise
            raise _unreadable(state.column, footer.key, exc) from None
        for found, fetches in decoded:
            parts += found
            gets += fetches
        gets += 1
        nbytes += end - start
        del data, decoded  # release the bytes before the next run is fetched
    return parts, gets, len(groups), nbytes


_Decoded = tuple[list[pa.Table], int]
_LABELS = "partition.list.element"


def _dictionary(md: pq.FileMetaData) -> list[str] | None:
    """Read the labels as a dictionary when the piece stores them dictionary-encoded
    (pieces written since: ~1,000 distinct labels per 32k-pair row group, decoded as
    indices instead of 32k strings); older pieces are plain, where a dictionary would be
    built by hashing every string (slower than decoding them)."""
    if md.num_row_groups == 0:
        return None
    group = md.row_group(0)
    for i in range(group.num_columns):
        column = group.column(i)
        if column.path_in_schema == _LABELS:
            return [_LABELS] if column.has_dictionary_page else None
    return None


def _split(run: list[int], n: int) -> list[list[int]]:
    """``run`` in at most ``n`` contiguous chunks of nearly equal length (in order)."""
    n = max(1, min(n, len(run)))
    size, extra = divmod(len(run), n)
    out, at = [], 0
    for i in range(n):
        step = size + (1 if i < extra else 0)
        out.append(run[at : at + step])
        at += step
    return out


def _batch_pairs(
    state: IndexState,
    key: str,
    pf: pq.ParquetFile,
    groups: list[int],
    values: pa.Array,
    dead: frozenset[str],
) -> pa.Table:
    """The matching live pairs of some row groups of a piece.

    The value column of the groups is decoded by one call and the matching rows found;
    the label lists (~85 % of a group's decoding before the values were delta-encoded)
    are decoded only for the groups holding a match (one call each: pyarrow reads a
    list of dictionary-encoded strings one row group at a time), and only the matching
    rows go on (for 5,000 random keys in a 10M-value index, a group of ~32k values has
    ~16 hits). One call per group for the values cost ~0.4 ms of Python and Arrow
    bookkeeping per group, as much as decoding it."""
    names = pf.schema_arrow.names
    if state.column not in names or "partition" not in names:
        # Not an index piece: the checks of _from_table name what is missing.
        parts = [
            _matching(state, key, pf.read_row_group(g, use_threads=False), values, dead)
            for g in groups
        ]
        return pa.concat_tables(parts) if len(parts) > 1 else parts[0]
    column = pf.read_row_groups(groups, columns=[state.column], use_threads=False).column(0)
    column = column.combine_chunks()
    if column.type != state.type:
        column = column.cast(state.type)
    rows = _hit_rows(column, values)
    if len(rows) == 0:
        return pa.table({"value": column.slice(0, 0), "label": pa.array([], pa.string())})
    md = pf.metadata
    starts = np.cumsum([0] + [md.row_group(g).num_rows for g in groups])
    which = np.searchsorted(starts, rows, "right") - 1  # the group (position) of each row
    bounds = np.flatnonzero(np.diff(which, prepend=-1))  # rows are ascending
    labels = []
    for i, at in enumerate(bounds):
        g = int(which[at])
        local = rows[at : bounds[i + 1] if i + 1 < len(bounds) else len(rows)] - starts[g]
        chunk = pf.read_row_group(groups[g], columns=["partition"], use_threads=False).column(0)
        labels.append(chunk.take(pa.array(local, pa.int64())))
    taken = pa.array(rows, pa.int64())
    part = pa.chunked_array(labels) if len(labels) > 1 else labels[0]
    table = pa.table({state.column: column.take(taken), "partition": _plain(part)})
    return _pairs(_from_table(state.column, table, key, state.type), dead)


def _plain(labels: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    """Label lists of several row groups as ``list<string>``: their dictionaries differ, so
    the few taken rows are decoded before the groups are concatenated."""
    if isinstance(labels, pa.ChunkedArray):
        return pa.chunked_array([_plain(c) for c in labels.chunks], pa.list_(pa.string()))
    if pa.types.is_dictionary(getattr(labels.type, "value_type", None) or pa.null()):
        return labels.cast(pa.list_(pa.string()))
    return labels


def _hit_rows(column: pa.Array, values: pa.Array) -> np.ndarray:
    """Row numbers of ``column`` whose value is one of ``values`` (sorted, distinct).

    Integer pieces are sorted by value (:func:`~parquetry.dataset.indexpieces.write_piece`):
    a binary search of the values within the group's range costs O(hits x log rows)
    where ``is_in`` hashes the whole value set again for every group. Other types, and
    pieces that are not sorted (kartothek's files), take ``is_in``."""
    if pa.types.is_integer(column.type) and column.null_count == 0 and len(column):
        a = column.to_numpy()
        w = values.to_numpy(zero_copy_only=False)
        if bool(np.all(a[1:] >= a[:-1])):
            w = w[np.searchsorted(w, a[0], "left") : np.searchsorted(w, a[-1], "right")]
            left = np.searchsorted(a, w, "left")
            right = np.searchsorted(a, w, "right")
            counts = right - left
            if not counts.any():
                return np.empty(0, dtype=np.int64)
            # Each value's run of equal rows [left, right) (one row in parquetry's pieces).
            starts = np.repeat(left, counts)
            offsets = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
            rows: np.ndarray = (starts + offsets).astype(np.int64)
            return rows
    hit = pc.fill_null(pc.is_in(column, value_set=values), False)
    return np.flatnonzero(hit.to_numpy(zero_copy_only=False))


def _matching(
    state: IndexState, key: str, table: pa.Table, values: pa.Array, dead: frozenset[str]
) -> pa.Table:
    if state.column in table.column_names:
        # Filter first: a group has ~32k values and a few hits; the cast and list work of
        # _from_table then runs on the hits only.
        column = table.column(state.column)
        if column.type != state.type:
            column = column.cast(state.type)
        hit = pc.is_in(column, value_set=values)  # nulls (none in an index) -> false
        table = table.filter(hit)
    index = _from_table(state.column, table, key, state.type)
    hit = pc.fill_null(pc.is_in(index.values, value_set=values), False)
    return _pairs(
        IndexData(
            column=index.column, values=index.values.filter(hit), labels=index.labels.filter(hit)
        ),
        dead,
    )


def _pairs(index: IndexData, dead: frozenset[str]) -> pa.Table:
    """``(value, label)`` rows of ``index`` (every row of it matched), live labels only."""
    lists = index.labels
    pairs = pa.table(
        {
            "value": index.values.take(pc.list_parent_indices(lists)),
            "label": pc.list_flatten(lists),
        }
    )
    return _alive(pairs, dead)


def _alive(pairs: pa.Table, dead: frozenset[str]) -> pa.Table:
    if not dead or pairs.num_rows == 0:
        return pairs
    gone = pc.is_in(pairs.column("label"), value_set=pa.array(sorted(dead), pa.string()))
    return pairs.filter(pc.invert(gone))


def lookup_values(
    store: Store,
    state: IndexState,
    values: pa.Array | pa.ChunkedArray,
    *,
    max_request_bytes: int = MAX_REQUEST_BYTES,
) -> BatchLookup:
    """The labels holding each of ``values`` (nulls ignored: an index holds none).

    Reads every piece's row groups that may hold any of the values once, in ranged GETs of
    at most ``max_request_bytes`` (see the module docstring); removed labels are left out.
    Memory: the values, one request's bytes, one decoded row group and the matching pairs.

    Raises:
        InvalidArgument: the values cannot be cast to the index's type.
        MetadataCorrupted: a piece is missing or unreadable.
    """
    if max_request_bytes <= 0:
        raise InvalidArgument(f"max_request_bytes must be > 0, got {max_request_bytes}")
    wanted = _sorted_values(state, values)
    empty = pa.table({"value": pa.array([], state.type), "label": pa.array([], pa.string())})
    if len(wanted) == 0:
        return BatchLookup(pairs=empty)
    sources = [(f, state.dead) for f in state.pieces]
    sources += [(tp.footer, tp.dead) for tp in state.tail_pieces]
    parts: list[pa.Table] = [empty]
    keys: list[str] = []
    groups = nbytes = 0
    # One pool for every piece, started at the first run worth splitting: a pool per run
    # started two threads per piece (78 for the bench's 39 pieces, ~1 ms each when loaded).
    with contextlib.ExitStack() as stack:
        started: list[ThreadPoolExecutor] = []

        def pool() -> ThreadPoolExecutor:
            if not started:
                started.append(stack.enter_context(ThreadPoolExecutor(DECODE_THREADS)))
            return started[0]

        for footer, dead in sources:
            found, gets, n_groups, n_bytes = _search_piece(
                store, state, footer, dead, wanted, max_request_bytes, pool
            )
            parts += [p.cast(empty.schema) for p in found]
            keys += [footer.key] * gets
            groups += n_groups
            nbytes += n_bytes
    if state.tail.num_rows:
        tail = state.tail.select(["value", "label"])
        hit = pc.fill_null(pc.is_in(tail.column("value"), value_set=wanted), False)
        parts.append(tail.filter(hit).cast(empty.schema))
    pairs = pa.concat_tables(parts).combine_chunks()
    if pairs.num_rows:
        pairs = pairs.group_by(["value", "label"], use_threads=False).aggregate([])
    return BatchLookup(
        pairs=pairs.select(["value", "label"]),
        request_keys=tuple(keys),
        groups_read=groups,
        bytes_read=nbytes,
    )
