"""Lookups that scan an index piece (``!=``, ``is not null``, wide ranges) in bounded memory.

A point lookup reads the one row group of a piece that may hold its value. A literal such as
``id != x`` or ``id is not null`` matches (nearly) every value: its footer statistics exclude
no row group. Reading such a piece whole, decoding it and grouping it by value held ~110 MB
per 262,144-pair piece of UUID keys, 16 pieces at a time (890 MB of peak RSS for 2M keys).
:func:`scan_piece` instead fetches the row groups that may match (all of them for those
literals) in ranged GETs of at most :data:`SCAN_REQUEST_BYTES` of adjacent groups, decodes
one row group at a time and keeps only the matching labels (and their file records): the
result is bounded by the number of files, not of values.

Memory: one request's bytes and one decoded row group (32,768 pairs in a piece, 8,192 in a
format-1 index file) per piece searched at a time (:data:`SCAN_THREADS`), plus the labels
found and their file records. Requests: a 262,144-pair piece of UUID keys (5.4 MB) takes 3
ranged GETs where it took one GET.
"""

from __future__ import annotations

import struct

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from parquetry.dataset.indexfile import (
    IndexFooter,
    _candidate_groups,
    _footer_info,
    _group_range,
    _keyed,
    _SparseFile,
)
from parquetry.dataset.indexgroups import runs
from parquetry.dataset.indices import _from_table
from parquetry.dataset.piecefiles import FILES_COLUMN
from parquetry.dataset.predicates import Literal, eval_array
from parquetry.errors import MetadataCorrupted, NotFound
from parquetry.store import Store
from parquetry.store.rangefile import TAIL_PREFETCH

__all__ = ["SCAN_REQUEST_BYTES", "SCAN_THREADS", "fetch_footer", "scan_groups", "scan_piece"]

#: A scan fetches adjacent row groups in ranged GETs of at most this many bytes (a row
#: group larger than this alone).
SCAN_REQUEST_BYTES = 2 << 20
#: Pieces scanned at the same time by one lookup (each holds one request and one group).
SCAN_THREADS = 4


def fetch_footer(store: Store, column: str, key: str) -> tuple[IndexFooter, int]:
    """The footer of index file ``key`` read by ranged GETs (a format-1 or kartothek index
    file whose footer the version does not cache), and the requests it took."""
    try:
        size = store.head(key).size
        tail = store.get_range(key, max(0, size - TAIL_PREFETCH), size)
        used = 2
        if len(tail) < 12 or tail[-4:] != b"PAR1":
            raise MetadataCorrupted(f"{key}: not a Parquet index file", key=key)
        (length,) = struct.unpack("<I", tail[-8:-4])
        if length + 8 > size:
            raise MetadataCorrupted(f"{key}: not a Parquet index file", key=key)
        if length + 8 > len(tail):
            tail = store.get_range(key, size - length - 8, size)
            used += 1
    except NotFound:
        raise MetadataCorrupted(
            f"index file {key!r} of column {column!r} is missing", key=key
        ) from None
    return IndexFooter(key=key, size=size, tail=bytes(tail[-(length + 8) :])), used


def scan_groups(footer: IndexFooter, lit: Literal) -> list[int]:
    """The row groups of the piece that may hold a value matching ``lit``."""
    info = _footer_info(footer)
    every = list(range(info.md.num_row_groups))
    if info.order is None or lit.op in ("is null", "is not null") or info.mins is None:
        return every
    keyed = _keyed(info.order, lit)
    return every if keyed is None else _candidate_groups(info, keyed)


def scan_piece(
    store: Store,
    column: str,
    footer: IndexFooter,
    lit: Literal,
    t: pa.DataType,
    *,
    request_bytes: int = SCAN_REQUEST_BYTES,
) -> tuple[set[str], int, dict[str, str]]:
    """What :func:`~parquetry.dataset.indexpieces.search_piece` returns (labels matching
    ``lit``, GETs, file records of those labels), one row group decoded at a time. Errors
    are the caller's to translate (it names the piece)."""
    md = _footer_info(footer).md
    found: set[str] = set()
    records: dict[str, str] = {}
    gets = 0
    for run in runs(md, scan_groups(footer, lit), request_bytes):
        start, end = _group_range(md, run[0])[0], _group_range(md, run[-1])[1]
        data = store.get_range(footer.key, start, end)
        sparse = _SparseFile(store, footer, {start: data})
        pf = pq.ParquetFile(sparse, metadata=md, pre_buffer=False)
        for g in run:
            table = pf.read_row_group(g, use_threads=False)
            if table.num_rows == 0:
                continue
            index = _from_table(column, table, footer.key, t)
            mask = eval_array(lit, index.values)
            if not pc.any(mask).as_py():
                continue
            labels = pc.list_flatten(index.labels.filter(mask))
            found.update(pc.unique(labels).to_pylist())
            records.update(_records(table, mask))
        gets += 1 + sparse.fetches
        del data, sparse, pf
    return found, gets, records


def _records(table: pa.Table, mask: pa.Array) -> dict[str, str]:
    """:func:`~parquetry.dataset.piecefiles.matched_records`, one record per label: a
    scan matches most rows of a group (32,768 pairs over ~1,000 labels), whose labels
    repeat from row to row."""
    if FILES_COLUMN not in table.column_names:
        return {}
    files = pc.list_flatten(pc.filter(table.column(FILES_COLUMN).combine_chunks(), mask))
    labels = pc.list_flatten(pc.filter(table.column("partition").combine_chunks(), mask))
    if len(files) != len(labels):
        return {}  # a malformed column: the lookup falls back to the segments
    pairs = pa.table({"label": labels, "file": files}).filter(pc.is_valid(files))
    first = pairs.group_by("label", use_threads=False).aggregate([("file", "first")])
    names, texts = first.column("label").to_pylist(), first.column("file_first").to_pylist()
    return dict(zip(names, texts, strict=True))
