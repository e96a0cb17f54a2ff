"""Index pieces: immutable, content-addressed Parquet files of one column's index (format 2).

A piece has kartothek's index schema (``<column>``, ``partition: list<string>``), sorted by
value, in row groups of :data:`PIECE_ROW_GROUP` rows, with statistics on the value column
only (the label column's min/max are never used and would double the footer). Its key is
``<uuid>/_indices/<column>/<sha256 of the bytes>.parquet``: two writers building the same
piece (racing checkpoints) write the same key, so a lost create-if-absent race is fine and
leaves no orphan behind.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import struct
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from parquetry.dataset.indexfile import IndexFooter, footer_metadata, footer_of, ranged_table
from parquetry.dataset.indices import IndexData, _from_table
from parquetry.dataset.naming import index_piece_key
from parquetry.dataset.piecefiles import FILES_COLUMN, attach_records, matched_records
from parquetry.dataset.predicates import Literal, eval_array
from parquetry.errors import (
    AlreadyExists,
    InvalidFormat,
    MetadataCorrupted,
    NotFound,
    ParquetryError,
    out_of_memory,
)
from parquetry.parquet.footer import footer_from_tail
from parquetry.parquet.footer_check import pyarrow_hazard
from parquetry.store import PutMode, Store

__all__ = [
    "PIECE_ROW_GROUP",
    "normalise_pairs",
    "pairs_schema",
    "piece_metadata",
    "check_foreign_footer",
    "piece_pairs",
    "read_piece",
    "iter_piece_tables",
    "read_piece_table",
    "search_piece",
    "write_piece",
]

#: Pairs (labels) per row group of a piece, so a row group's size does not depend on how
#: many partitions hold each value (a group has at least one row). The footer (cached in
#: the checkpoint root) grows with the number of row groups (~230 bytes each); a point
#: lookup reads one group.
#: Measured (one label "p=<n>/<32 hex>" per value, 100k labels, zstd, pyarrow 26; first
#: with dictionary encoding to choose the group size, then the final settings):
#:
#: ============  ==========  ===========  ===============  ============
#: values        pairs/group footer       b64 in the root  lookup read
#: ============  ==========  ===========  ===============  ============
#: 1M int64      8,192       27.6 KiB     36.8 KiB         135 KiB
#: 1M int64      32,768      7.3 KiB      9.8 KiB          515 KiB
#: 10M int64     16,384      137 KiB      183 KiB          266 KiB
#: 10M int64     32,768      72 KiB       96 KiB           516 KiB
#: 10M int64     65,536      36 KiB       48 KiB           1,026 KiB
#: final: 10M    32,768      62 KiB       82 KiB (root)    443 KiB, 1 GET, ~25 ms
#: final: 10M s  32,768      59 KiB       79 KiB (root)    429 KiB, 1 GET
#: ============  ==========  ===========  ===============  ============
#:
#: 32,768 keeps both the root share of a 10M-value index (~80 KiB) and a point lookup
#: (~0.45 MiB, one ranged GET) well inside the 1 MiB open + plan budget.
PIECE_ROW_GROUP = 32_768

_ERRORS = (pa.ArrowException, OSError, ValueError, EOFError, IndexError, struct.error)


def pairs_schema(t: pa.DataType) -> pa.Schema:
    return pa.schema([("value", t), ("label", pa.string())])


def normalise_pairs(pairs: pa.Table, t: pa.DataType) -> pa.Table:
    """``(value, label)`` rows in type ``t``, null values and null labels dropped."""
    want = pairs_schema(t)
    pairs = pairs.select(["value", "label"])
    # Fast path (every entry's delta is normalised when a version is opened): skip the
    # cast and the filter when they would change nothing.
    if not pairs.schema.equals(want):
        pairs = pairs.cast(want)
    if pairs.column("value").null_count == 0 and pairs.column("label").null_count == 0:
        return pairs
    keep = pc.and_(pc.is_valid(pairs.column("value")), pc.is_valid(pairs.column("label")))
    return pairs.filter(keep)


def piece_metadata(footer: IndexFooter) -> pq.FileMetaData:
    """The Parquet metadata of a piece, parsed from its cached tail (no request)."""
    try:
        return footer_metadata(footer)
    except _ERRORS as exc:
        raise MetadataCorrupted(
            f"{footer.key}: the cached footer of the index piece is not Parquet ({exc})",
            key=footer.key,
        ) from None


def check_foreign_footer(footer: IndexFooter) -> None:
    """Refuse the tail of an index file another tool wrote (kartothek, format 1) before
    pyarrow parses it: pyarrow ``std::terminate``s (SIGABRT) on some damaged column-chunk
    metadata (footer_check.py). Pieces' tails come from parquetry's own writes and are not
    checked (0.8 ms per footer, every lookup that evicts them from the parse cache).

    Raises:
        MetadataCorrupted: naming the file.
    """
    try:
        hazard = pyarrow_hazard(footer_from_tail(footer.tail, footer.size, footer.key))
    except InvalidFormat as exc:
        hazard = str(exc)
    if hazard is not None:
        raise MetadataCorrupted(
            f"{footer.key}: not a readable index file ({hazard})", key=footer.key
        )


def piece_pairs(footer: IndexFooter) -> int:
    """``(value, label)`` pairs in a piece: the leaf values of its ``partition`` column."""
    md = piece_metadata(footer)
    if md.num_columns < 2:
        raise MetadataCorrupted(f"{footer.key}: an index piece needs 2 columns", key=footer.key)
    return sum(md.row_group(i).column(1).num_values for i in range(md.num_row_groups))


def write_piece(
    store: Store, uuid: str, column: str, pairs: pa.Table, files: pa.Table | None = None
) -> IndexFooter:
    """Write normalised ``pairs`` as one piece (create-if-absent) and return its footer.

    ``files``: ``(label, file)`` records (:mod:`parquetry.dataset.piecefiles`) to store with
    the labels, so a lookup needs no segment; labels without one get a null."""
    values, labels = _grouped(pairs)
    table = pa.table({column: values, "partition": labels})
    records = attach_records(labels, files)
    if records is not None:
        table = table.append_column(FILES_COLUMN, records)
    delta = _delta_values(table.schema.field(column).type)
    sink = io.BytesIO()
    with pq.ParquetWriter(
        sink,
        table.schema,
        compression=_codecs(table.schema, column, delta),
        # Measured on 1M string values: no dictionary makes a row group smaller (427 vs
        # 490 KiB) and 2.5x faster to decode (16 vs 41 ms): values are distinct. Labels
        # repeat (one per file, in every row group): dictionary-encoded they take 40 %
        # less space, and a batch lookup reading them as a dictionary decodes them 3.6x
        # faster (2M pairs of 1,000 labels: 0.06 vs 0.23 CPU s; indexlookup.py).
        use_dictionary=["partition.list.element"],
        column_encoding={column: "DELTA_BINARY_PACKED"} if delta else None,
        write_statistics=[column],
        store_schema=False,  # the type comes from the dataset schema; keeps the footer small
    ) as writer:
        for start, end in _groups(table.column(1).combine_chunks()):
            writer.write_table(table.slice(start, end - start), row_group_size=end - start)
    data = sink.getvalue()
    key = index_piece_key(uuid, column, hashlib.sha256(data).hexdigest()[:32])
    # Same name = same bytes: a concurrent checkpoint already wrote this very piece.
    with contextlib.suppress(AlreadyExists):
        store.put(key, data, mode=PutMode.CREATE)
    return footer_of(key, data)


def _delta_values(t: pa.DataType) -> bool:
    """Store the (sorted) values DELTA_BINARY_PACKED and uncompressed: Parquet INT32/INT64
    types only. Measured on a 262,144-value int64 piece (8 row groups, pyarrow 26): dense
    keys 6.5 KB instead of 268 KB (PLAIN + zstd), random 64-bit keys 1.58 MB instead of
    2.05 MB, and decoding 0.5-0.7 ms instead of 2.7-3.4 ms: the value column of every row
    group a batch lookup touches is decoded (indexlookup.py). Readers need nothing new:
    the encoding is in each page's header."""
    return bool(
        pa.types.is_integer(t)
        or pa.types.is_timestamp(t)
        or pa.types.is_date(t)
        or pa.types.is_time(t)
        or pa.types.is_duration(t)
    )


def _codecs(schema: pa.Schema, column: str, delta: bool) -> dict[str, str]:
    """zstd for every leaf column (a codec per column: a leaf left out of the mapping
    would be written uncompressed), none for delta-encoded values: zstd saves little there
    (dense keys 1.7 instead of 6.5 KB per 262,144 values, random 64-bit keys nothing) and
    costs 40-50 % more decoding."""
    out = {}
    for field in schema:
        leaf = f"{field.name}.list.element" if pa.types.is_list(field.type) else field.name
        out[leaf] = "zstd"
    if delta:
        out[column] = "none"
    return out


def _groups(labels: pa.ListArray) -> list[tuple[int, int]]:
    """Row ranges holding about PIECE_ROW_GROUP pairs each (at least one row): a value in
    many partitions makes a long list, and a lookup reads its whole row group."""
    if len(labels) == 0:
        return []  # a file without row groups
    ends = np.cumsum(pc.list_value_length(labels).to_numpy(zero_copy_only=False))
    out, start = [], 0
    while start < len(labels):
        before = int(ends[start - 1]) if start else 0
        end = int(np.searchsorted(ends, before + PIECE_ROW_GROUP, side="right"))
        end = max(end, start + 1)
        out.append((start, end))
        start = end
    return out


def _grouped(pairs: pa.Table) -> tuple[pa.Array, pa.ListArray]:
    """Distinct values in ascending order and the sorted distinct labels of each: the bytes
    of a piece (hence its key) depend on the set of pairs only."""
    if pa.types.is_floating(pairs.schema.field("value").type):
        # Sorting would merge -0.0 with 0.0 and keep NaNs apart: group exact values.
        g = pairs.group_by("value", use_threads=False).aggregate([("label", "distinct")])
        g = g.take(pc.sort_indices(g.column("value")))
        flat = g.column("label_distinct").combine_chunks().cast(pa.list_(pa.string()))
        order = pc.sort_indices(
            pa.table({"p": pc.list_parent_indices(flat), "l": pc.list_flatten(flat)}),
            sort_keys=[("p", "ascending"), ("l", "ascending")],
        )
        lists = pa.ListArray.from_arrays(flat.offsets, pc.list_flatten(flat).take(order))
        return g.column("value").combine_chunks(), lists
    # One sort by (value, label) then run boundaries: 3x faster than a hash "distinct".
    order = pc.sort_indices(pairs, sort_keys=[("value", "ascending"), ("label", "ascending")])
    ordered = pairs.take(order).combine_chunks()
    v, lbl = ordered.column("value").chunk(0), ordered.column("label").chunk(0)
    if len(v) == 0:
        return v, pa.ListArray.from_arrays(pa.array([0], pa.int32()), lbl)
    new_value = pc.invert(pc.equal(v[1:], v[:-1])).to_numpy(zero_copy_only=False)
    new_label = pc.invert(pc.equal(lbl[1:], lbl[:-1])).to_numpy(zero_copy_only=False)
    keep = np.concatenate([[True], new_value | new_label])
    starts = np.flatnonzero(np.concatenate([[True], new_value])[keep])
    v, lbl = v.filter(pa.array(keep)), lbl.filter(pa.array(keep))
    offsets = pa.array(np.append(starts, len(v)).astype(np.int32))
    return v.take(pa.array(starts)), pa.ListArray.from_arrays(offsets, lbl)


def read_piece(store: Store, column: str, footer: IndexFooter, t: pa.DataType) -> IndexData:
    """The whole piece (one GET)."""
    return _from_table(column, read_piece_table(store, column, footer), footer.key, t)


def read_piece_table(store: Store, column: str, footer: IndexFooter) -> pa.Table:
    """The whole piece as stored (one GET), its ``files`` column included."""
    try:
        data = store.get(footer.key)
    except NotFound:
        raise _missing(column, footer.key) from None
    try:
        return pq.ParquetFile(pa.BufferReader(data)).read(use_threads=False)
    except MemoryError as exc:
        raise out_of_memory(exc, f"reading index piece {footer.key}", key=footer.key) from None
    except _ERRORS as exc:
        raise _unreadable(column, footer.key, exc) from None


def iter_piece_tables(store: Store, column: str, footer: IndexFooter) -> Iterator[pa.Table]:
    """The piece as stored, one row group at a time (a ranged GET each; the footer comes
    from the cache): a merge reads a piece of any size in the memory of one row group."""
    md = piece_metadata(footer)
    try:
        source = store.open(footer.key, size=footer.size)
        pf = pq.ParquetFile(source, metadata=md)
        for i in range(md.num_row_groups):
            yield pf.read_row_group(i, use_threads=False)
    except NotFound:
        raise _missing(column, footer.key) from None
    except MemoryError as exc:
        raise out_of_memory(exc, f"reading index piece {footer.key}", key=footer.key) from None
    except _ERRORS as exc:
        if isinstance(exc, ParquetryError):
            raise
        raise _unreadable(column, footer.key, exc) from None


def search_piece(
    store: Store, column: str, footer: IndexFooter, lit: Literal, t: pa.DataType
) -> tuple[set[str], int, dict[str, str]]:
    """Labels in one piece matching ``lit``, the GETs it took (0 when the footer's
    statistics exclude the value, 1 for an equality otherwise) and the file records
    (``files`` texts) the piece holds for them. A lookup that would read most of the
    piece (``!=``, ``is not null``, a wide range) scans it one row group at a time
    (indexscan.py)."""
    from parquetry.dataset.indexscan import scan_piece

    try:
        got = ranged_table(store, footer, lit)
        if got is None:
            return scan_piece(store, column, footer, lit, t)
        table, used = got
        if table.num_rows == 0:
            return set(), used, {}
        # Decoding the labels is part of reading the piece: a damaged page can hold bytes
        # that are not UTF-8 (a raw UnicodeDecodeError otherwise).
        index = _from_table(column, table, footer.key, t)
        found = index.lookup(lit)
        records = matched_records(table, eval_array(lit, index.values)) if found else {}
    except NotFound:
        raise _missing(column, footer.key) from None
    except MemoryError as exc:
        raise out_of_memory(exc, f"searching index piece {footer.key}", key=footer.key) from None
    except _ERRORS as exc:
        if isinstance(exc, ParquetryError):
            raise
        raise _unreadable(column, footer.key, exc) from None
    return found, used, records


def _missing(column: str, key: str) -> MetadataCorrupted:
    return MetadataCorrupted(f"index piece {key!r} of column {column!r} is missing", key=key)


def _unreadable(column: str, key: str, exc: BaseException) -> MetadataCorrupted:
    detail = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
    return MetadataCorrupted(
        f"{key}: index piece of column {column!r} is unreadable ({detail})", key=key
    )
