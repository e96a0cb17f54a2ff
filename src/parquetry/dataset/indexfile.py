"""Point lookups in large index files with one ranged GET.

parquetry writes index files sorted by value in row groups of :data:`INDEX_ROW_GROUP` rows
and keeps each file's Parquet footer (a few KiB) in the version document. A lookup parses
that cached footer, picks the row groups whose min/max may hold the value and fetches only
their bytes: one ranged GET for an equality, instead of downloading an index that can be
tens of MiB for a high-cardinality column. kartothek reads the same files whole.
"""

from __future__ import annotations

import base64
import bisect
import datetime as dt
import decimal
import functools
import io
import itertools
import json
import struct
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from parquetry.dataset.predicates import Literal, eval_stats
from parquetry.store import Store

__all__ = [
    "INDEX_ROW_GROUP",
    "IndexFooter",
    "footer_metadata",
    "footer_of",
    "coalesce",
    "may_hold",
    "ranged_table",
]

INDEX_ROW_GROUP = 8192
#: Beyond this share of the file's bytes a lookup of more than 2 row groups downloads the
#: whole file instead.
MAX_RANGED_SHARE = 0.5
#: An ``in`` or range lookup fetches the row groups it needs in at most this many ranged
#: GETs per file (issued together): byte-adjacent groups are one range, and the ranges
#: separated by the smallest gaps are joined until this many remain (reading the groups in
#: between). An equality reads one group: one GET.
MAX_RANGED_REQUESTS = 4


@dataclass(frozen=True, slots=True, kw_only=True)
class IndexFooter:
    """The tail (footer + length + magic) of one index file."""

    key: str
    size: int
    tail: bytes

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "size": self.size, "tail": base64.b64encode(self.tail).decode()}

    @classmethod
    def from_json(cls, doc: Any) -> IndexFooter:
        return cls(key=doc["key"], size=int(doc["size"]), tail=base64.b64decode(doc["tail"]))


def footer_of(key: str, data: bytes | memoryview) -> IndexFooter:
    (length,) = struct.unpack("<I", data[-8:-4])
    return IndexFooter(key=key, size=len(data), tail=bytes(data[-(length + 8) :]))


class _NoStore:
    """Where a footer-only file would fetch: parsing a cached footer never does."""

    def get_range(self, key: str, start: int, end: int) -> bytes:
        raise struct.error(f"{key}: the cached footer does not hold bytes {start}-{end}")


_NO_STORE: Any = _NoStore()


class _SparseFile(io.RawIOBase):
    """A file of known size whose tail and some ranges are in memory; the rest is fetched."""

    def __init__(self, store: Store, footer: IndexFooter, ranges: dict[int, bytes]):
        super().__init__()
        self.store, self.footer, self.ranges = store, footer, ranges
        self.ranges[footer.size - len(footer.tail)] = footer.tail
        self.pos = 0
        self.fetches = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.pos, io.SEEK_END: self.footer.size}[whence]
        self.pos = base + offset
        return self.pos

    def read(self, size: int = -1) -> bytes:
        end = (
            self.footer.size if size is None or size < 0 else min(self.footer.size, self.pos + size)
        )
        start, self.pos = self.pos, max(self.pos, end)
        if end <= start:
            return b""
        for offset, data in self.ranges.items():
            if offset <= start and end <= offset + len(data):
                return data[start - offset : end - offset]
        tail_start = self.footer.size - len(self.footer.tail)
        if end == self.footer.size and start < tail_start:
            # pyarrow's speculative footer read (the last 64 KiB) only parses the footer
            # out of the tail; column chunks are read separately, so the unknown prefix
            # of this read is never used.
            return bytes(tail_start - start) + self.footer.tail
        self.fetches += 1
        return self.store.get_range(self.footer.key, start, end)

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        memoryview(buffer)[: len(data)] = data
        return len(data)


#: Nanoseconds per Parquet timestamp unit.
_NS = {"milliseconds": 10**6, "microseconds": 10**3, "nanoseconds": 1}
_EPOCH_DATE = dt.date(1970, 1, 1)
_EPOCH = dt.datetime(1970, 1, 1)
_EPOCH_UTC = _EPOCH.replace(tzinfo=dt.UTC)


@dataclass(frozen=True, slots=True)
class _Order:
    """How an index file's values compare: ``kind`` is ``plain`` (integers, floats,
    strings: footer statistics and predicate values compare as they are), ``date`` (days
    since the epoch), ``timestamp`` (nanoseconds since the epoch, UTC when ``utc``),
    ``decimal`` (exact Decimals, whatever the scale) or ``bool``."""

    kind: str
    utc: bool = False
    ns: int = 1


def _order(md: pq.FileMetaData) -> _Order | None:
    """The order of the value column from the Parquet types in the file's own footer (an
    index written by another tool may hold another unit or type than the dataset): None
    when its statistics cannot be compared with predicate values."""
    col = md.schema.column(0)
    t = md.schema.to_arrow_schema().field(0).type
    if pa.types.is_integer(t) or pa.types.is_floating(t):
        return _Order("plain")
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return _Order("plain")
    if pa.types.is_boolean(t):
        return _Order("bool")
    if pa.types.is_decimal(t):
        return _Order("decimal")
    logical = json.loads(col.logical_type.to_json())
    if pa.types.is_date(t) and col.physical_type == "INT32" and logical.get("Type") == "Date":
        return _Order("date")
    # Timestamps in INT64 only: INT96 statistics are not ordered as the values are.
    unit = logical.get("timeUnit")
    if pa.types.is_timestamp(t) and col.physical_type == "INT64" and unit in _NS:
        return _Order("timestamp", utc=bool(logical.get("isAdjustedToUTC")), ns=_NS[unit])
    return None


def _stat(order: _Order, st: Any, low: bool) -> Any:
    """A row group's minimum (``low``) or maximum as a key of ``order``."""
    if order.kind == "date":
        return int(st.min_raw if low else st.max_raw)
    if order.kind == "timestamp":
        return int(st.min_raw if low else st.max_raw) * order.ns
    value = st.min if low else st.max
    if order.kind == "decimal" and not (isinstance(value, decimal.Decimal) and value.is_finite()):
        raise TypeError(value)
    return value


def _key(order: _Order, value: Any) -> Any:
    """A predicate value as a key of ``order``, exactly; None when it cannot be compared
    (the lookup then reads every row group). Exact types only: a ``datetime`` is a
    ``date`` to Python, a pandas Timestamp a ``datetime`` with nanoseconds."""
    if order.kind == "plain":
        return value
    if order.kind == "bool":
        return value if type(value) is bool else None
    if order.kind == "decimal":
        ok = isinstance(value, decimal.Decimal) and value.is_finite()
        return value if ok else None
    if order.kind == "date":
        return (value - _EPOCH_DATE).days if type(value) is dt.date else None
    if type(value) is not dt.datetime or (value.tzinfo is not None) != order.utc:
        return None  # a naive value on a UTC column or the reverse: not comparable
    delta = value - (_EPOCH_UTC if order.utc else _EPOCH)
    return ((delta.days * 86400 + delta.seconds) * 10**6 + delta.microseconds) * 1000


def _keyed(order: _Order, lit: Literal) -> Literal | None:
    """``lit`` with its value(s) as keys of ``order`` (None: not comparable)."""
    if order.kind == "plain" or lit.op in ("is null", "is not null"):
        return lit
    if lit.op == "in":
        keys = tuple(_key(order, v) for v in lit.value)
        return None if any(k is None for k in keys) else replace(lit, value=keys)
    key = _key(order, lit.value)
    return None if key is None else replace(lit, value=key)


@dataclass(frozen=True, slots=True)
class _FooterInfo:
    """A parsed footer and its value statistics, kept across lookups (files are immutable)."""

    md: pq.FileMetaData
    order: _Order | None  # None: statistics not comparable with predicate values
    mins: list[Any] | None  # None: some row group has no min/max
    maxs: list[Any] | None
    rows: list[int]
    ascending: bool  # row groups sorted by value: min/max both non-decreasing


@functools.lru_cache(maxsize=32)
def _footer_info(footer: IndexFooter) -> _FooterInfo:
    md = pq.ParquetFile(_SparseFile(_NO_STORE, footer, {}), pre_buffer=False).metadata
    order = _order(md)
    mins: list[Any] | None = []
    maxs: list[Any] | None = []
    rows = []
    for i in range(md.num_row_groups):
        rows.append(md.row_group(i).num_rows)
        st = md.row_group(i).column(0).statistics
        if st is None or not st.has_min_max or mins is None or maxs is None or order is None:
            mins = maxs = None
            continue
        try:
            mins.append(_stat(order, st, True))
            maxs.append(_stat(order, st, False))
        except (TypeError, ValueError, OverflowError, pa.ArrowException):
            mins = maxs = None
    ascending = bool(
        order is not None
        and mins is not None
        and maxs is not None
        and all(type(x) in (int, str) for x in (*mins, *maxs))
        and len({type(x) for x in (*mins, *maxs)}) <= 1
        and all(a <= b for a, b in itertools.pairwise(mins))
        and all(a <= b for a, b in itertools.pairwise(maxs))
    )
    return _FooterInfo(md, order, mins, maxs, rows, ascending)


def footer_metadata(footer: IndexFooter) -> pq.FileMetaData:
    """The Parquet metadata parsed from a cached footer (no request; parsed once per file).
    Raises what pyarrow raises on a footer that is not Parquet."""
    return _footer_info(footer).md


def _candidate_groups(info: _FooterInfo, lit: Literal) -> list[int]:
    mins, maxs = info.mins, info.maxs
    assert mins is not None
    assert maxs is not None
    checks: Iterable[int] = range(len(info.rows))
    if (
        lit.op == "in"
        and info.ascending
        and mins
        and all(type(v) is type(mins[0]) for v in lit.value)
    ):
        # Sorted groups: bisect each value (O(values x log groups), not values x groups).
        chosen: set[int] = set()
        for v in lit.value:
            i = bisect.bisect_left(maxs, v)
            while i < len(mins) and mins[i] <= v:
                chosen.add(i)
                i += 1
        return sorted(chosen)
    if lit.op == "==" and info.ascending and mins and type(lit.value) is type(mins[0]):
        # Sorted groups: bisect to the first group whose max reaches the value, then the
        # few groups from there whose min does not pass it (O(log n), not O(n) per lookup).
        first = bisect.bisect_left(maxs, lit.value)
        checks = itertools.takewhile(lambda i: mins[i] <= lit.value, range(first, len(mins)))
    return [
        i for i in checks if eval_stats(lit, mins[i], maxs[i], 0, info.rows[i], nan_unknown=True)
    ]


def may_hold(footer: IndexFooter, lit: Literal) -> bool:
    """False when the cached footer's statistics show no row group can match ``lit`` (no
    request, no thread needed); True when unsure (a defective footer is reported by the
    read that follows)."""
    try:
        info = _footer_info(footer)
        if info.md.num_row_groups == 0:
            return False
        if info.order is None or lit.op in ("is null", "is not null") or info.mins is None:
            return True
        keyed = _keyed(info.order, lit)
        return keyed is None or bool(_candidate_groups(info, keyed))
    except Exception:
        return True


def ranged_table(store: Store, footer: IndexFooter, lit: Literal) -> tuple[pa.Table, int] | None:
    """Rows of the index that may match ``lit`` and the GETs used; None = read it whole."""
    info = _footer_info(footer)
    md = info.md
    if md.num_row_groups == 0:
        return md.schema.to_arrow_schema().empty_table(), 0
    if info.order is None or lit.op in ("is null", "is not null") or info.mins is None:
        return None
    keyed = _keyed(info.order, lit)
    if keyed is None:
        return None
    groups = _candidate_groups(info, keyed)
    if not groups:
        return md.schema.to_arrow_schema().empty_table(), 0
    merged = coalesce([_group_range(md, g) for g in groups], MAX_RANGED_REQUESTS)
    if len(groups) > 2 and sum(e - s for s, e in merged) > footer.size * MAX_RANGED_SHARE:
        return None  # most of the file: one whole GET (equalities stay ranged, as before)
    fetched = store.get_ranges(footer.key, merged)
    sparse = _SparseFile(store, footer, {s: d for (s, _), d in zip(merged, fetched, strict=True)})
    pf = pq.ParquetFile(sparse, metadata=md, pre_buffer=False)
    table = pf.read_row_groups(groups, use_threads=False)
    return table, len(merged) + sparse.fetches


def coalesce(ranges: Iterable[tuple[int, int]], most: int) -> list[tuple[int, int]]:
    """Byte ranges sorted, overlapping or adjacent ones joined, then the ranges separated
    by the smallest gaps joined until at most ``most`` remain."""
    merged: list[list[int]] = []
    for s, e in sorted(ranges):
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    while len(merged) > max(1, most):
        i = min(range(len(merged) - 1), key=lambda j: merged[j + 1][0] - merged[j][1])
        merged[i : i + 2] = [[merged[i][0], merged[i + 1][1]]]
    return [(s, e) for s, e in merged]


def _group_range(md: pq.FileMetaData, group: int) -> tuple[int, int]:
    rg = md.row_group(group)
    starts, ends = [], []
    for c in range(rg.num_columns):
        col = rg.column(c)
        start = col.data_page_offset
        if col.has_dictionary_page and col.dictionary_page_offset is not None:
            start = min(start, col.dictionary_page_offset)
        starts.append(start)
        ends.append(start + col.total_compressed_size)
    return min(starts), max(ends)
