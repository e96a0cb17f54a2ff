"""Binary copy of Parquet row groups: a new file assembled from other files' column chunks.

No value is decoded. :func:`copy_check` says whether a file's footer (already parsed and
checked by :mod:`parquetry.parquet.footer`) can be copied into an output of a given schema:
same schema elements (physical and logical types, repetition, names, order), same column
orders, no encryption, every chunk inside the file and its pages walking exactly to the
chunk's end (:func:`walk_pages`). :class:`RowGroupAssembler` then either copies a row group
whole (its statistics unchanged) or merges several small row groups into one by
concatenating the pages of each column, which is valid when no chunk has a dictionary page
(a chunk holds at most one dictionary, first) and the codecs agree; the merged statistics
come from :func:`parquetry.parquet.statsmerge.merge_statistics` (exact or left out).

The output drops what refers to other bytes of the inputs or cannot be merged exactly:
page indexes (column/offset index), bloom filters, the deprecated ``min``/``max``
statistics, ``distinct_count``, and, for merged chunks, size statistics and sorting
columns. Page headers (with their CRCs) are copied verbatim: they do not hold offsets.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from parquetry.parquet.footer import MAGIC
from parquetry.parquet.statsmerge import merge_statistics
from parquetry.parquet.thrift import ThriftError, read_struct, write_struct
from parquetry.parquet.thrift_schema import FILE_META_DATA, PAGE_HEADER

__all__ = [
    "DamagedPage",
    "RowGroupAssembler",
    "UnreadableFooter",
    "chunk_range",
    "copy_check",
    "mergeable",
    "repeated_leaves",
    "rows_agree",
    "walk_pages",
]

_DICT_ENCODINGS = frozenset({2, 8})  # PLAIN_DICTIONARY, RLE_DICTIONARY
_DATA_PAGE, _DICTIONARY_PAGE, _DATA_PAGE_V2 = 0, 2, 3
_MAX_ORDINAL = (1 << 15) - 1
#: ColumnMetaData fields of a lean copy: type, encodings, path, codec, values, sizes,
#: data and dictionary page offsets.
_LEAN = (1, 2, 3, 4, 5, 6, 7, 9, 11)
#: Schema element fields that decide how bytes are read (not field_id, not the root name).
_ELEMENT_FIELDS = (1, 2, 3, 4, 5, 6, 7, 8, 10)


#: Parquet codecs whose pages are test-decompressed before being copied (LZO and the
#: Hadoop-framed LZ4 have no pyarrow codec of that exact framing: checked by CRC only).
_CODECS = {1: "snappy", 2: "gzip", 4: "brotli", 6: "zstd", 7: "lz4_raw"}


class UnreadableFooter(ValueError):
    """The assembled footer does not parse in pyarrow: an input carried a malformed struct
    parquetry's reader accepts (a PageEncodingStats without its required count...)."""


def repeated_leaves(elements: list[dict[int, Any]]) -> list[bool]:
    """For each leaf of a footer's schema (depth-first), whether it or an ancestor repeats."""
    out: list[bool] = []
    stack: list[tuple[int, bool]] = []  # (children left, repeated) of open groups
    for i, element in enumerate(elements):
        repeated = (bool(stack) and stack[-1][1]) or (i > 0 and element.get(3) == 2)
        if stack:
            left, parent = stack.pop()
            if left > 1:
                stack.append((left - 1, parent))
        children = element.get(5) or 0
        if i == 0 or children:
            stack.append((children, repeated))
        else:
            out.append(repeated)
    return out


def rows_agree(group: dict[int, Any], repeated: Sequence[bool]) -> bool:
    """Whether a row group's row count agrees with its column chunks' value counts: a flat
    leaf holds exactly one value (or null) per row, a repeated one at least one. pyarrow
    trusts the row count of a file whose chunks say otherwise: rows of a staging file or a
    copied row group would shift between files, or vanish."""
    rows = group[3]
    return all(
        (chunk[3][5] >= rows) if rep else (chunk[3][5] == rows)
        for chunk, rep in zip(group[1], repeated, strict=True)
    )


def _check_footer(footer: bytes) -> None:
    """Parse an assembled footer as readers will (pyarrow's Thrift reader: about 50 µs)."""
    import pyarrow.parquet as pq

    tail = struct.pack("<i", len(footer)) + MAGIC
    try:
        pq.read_metadata(pa.BufferReader(MAGIC + footer + tail))
    except (OSError, ValueError, pa.ArrowException) as exc:
        raise UnreadableFooter(str(exc)) from None


class DamagedPage(ValueError):
    """A page whose bytes fail their CRC or do not decompress: the file is damaged, and
    copying the page would carry the damage into the output (and, when pages of several
    files are concatenated, make the other files' rows of that chunk unreadable too)."""


def _check_body(
    data: bytes | memoryview, pos: int, body: int, header: dict[int, Any], codec: int
) -> None:
    size = header[3]
    crc = header.get(4)
    if isinstance(crc, int) and zlib.crc32(data[body : body + size]) != crc & 0xFFFFFFFF:
        raise DamagedPage(f"page at byte {pos} fails its CRC")
    name = _CODECS.get(codec)
    v2 = header.get(8) if header[1] == _DATA_PAGE_V2 else None
    if name is None or (v2 is not None and v2.get(7) is False):
        return
    skip = 0
    if v2 is not None:
        skip = (v2.get(5) or 0) + (v2.get(6) or 0)
    raw = header.get(2)
    if not isinstance(raw, int) or raw - skip < 0 or skip > size:
        raise DamagedPage(f"page at byte {pos} has impossible sizes")
    if raw - skip == 0:
        return
    try:
        pa.Codec(name).decompress(
            pa.py_buffer(bytes(data[body + skip : body + size])), decompressed_size=raw - skip
        )
    except (OSError, ValueError, pa.ArrowException) as exc:
        raise DamagedPage(f"page at byte {pos} does not decompress ({exc})") from None


def _element_key(element: dict[int, Any], root: bool) -> tuple[Any, ...]:
    return tuple(element.get(f) for f in _ELEMENT_FIELDS if not (root and f == 4))


def schema_key(meta: dict[int, Any]) -> tuple[Any, ...]:
    """What must be equal between two files for their chunks to be interchangeable."""
    elements = meta.get(2, [])
    return (
        tuple(_element_key(e, i == 0) for i, e in enumerate(elements)),
        repr(meta.get(7)),
    )


def chunk_range(cmd: dict[int, Any]) -> tuple[int, int]:
    """``(start, length)`` of a column chunk's bytes: its dictionary page (when it has one
    before the data pages, as parquet-cpp reads it) through its last data page."""
    start = cmd[9]
    dictionary = cmd.get(11)
    if dictionary is not None and 0 < dictionary < start:
        start = dictionary
    return start, cmd[7]


def walk_pages(
    data: bytes | memoryview, start: int, length: int, codec: int | None = None
) -> tuple[int, bool]:
    """Check that the pages of a chunk tile ``[start, start + length)`` exactly; return the
    number of values in its data pages and whether it holds a dictionary page. With the
    chunk's ``codec``, also check every page's CRC (when it has one) and that its body
    decompresses to the size its header says.

    Raises:
        ValueError: a page header is malformed or a page runs past the chunk.
        DamagedPage: (with ``codec``) a page fails its CRC or does not decompress.
    """
    pos, end, values, dictionary = start, start + length, 0, False
    while pos < end:
        try:
            header, body = read_struct(data, pos, PAGE_HEADER)
        except ThriftError as exc:
            raise ValueError(f"page header at byte {pos}: {exc}") from None
        size = header.get(3)
        if not isinstance(size, int) or size < 0 or body + size > end or 1 not in header:
            raise ValueError(f"page at byte {pos} runs past its column chunk")
        kind = header[1]
        if codec is not None:
            _check_body(data, pos, body, header, codec)
        if kind == _DICTIONARY_PAGE:
            if pos != start or 7 not in header:
                raise ValueError(f"dictionary page at byte {pos} is not the chunk's first page")
            dictionary = True
        elif kind in (_DATA_PAGE, _DATA_PAGE_V2):
            page = header.get(5 if kind == _DATA_PAGE else 8)
            if not page or not isinstance(page.get(1), int) or page[1] < 0:
                raise ValueError(f"data page at byte {pos} has no value count")
            values += page[1]
        pos = body + size
    return values, dictionary


def copy_check(
    meta: dict[int, Any],
    expected: tuple[Any, ...],
    data: bytes | memoryview,
    footer_start: int,
) -> str | None:
    """Why the row groups of a file (its footer ``meta``, its bytes ``data`` whose footer
    starts at ``footer_start``) cannot be copied into a file of schema ``expected``
    (:func:`schema_key`), or None when they can.

    Raises:
        DamagedPage: a page of the file fails its CRC or does not decompress (a damaged
            file, which must not be copied nor silently decoded).
    """
    if 8 in meta:
        return "encrypted"
    if schema_key(meta) != expected:
        return "schema differs"
    paths = expected[0]
    leaves = sum(1 for e in paths[1:] if not e[4])
    repeated = repeated_leaves(meta.get(2, []))
    for n, group in enumerate(meta.get(4, [])):
        chunks = group.get(1, [])
        if len(chunks) != leaves or not isinstance(group.get(3), int) or group[3] < 0:
            return f"row group {n} does not match the schema"
        for chunk in chunks:
            cmd = chunk.get(3)
            if cmd is None or 1 in chunk or 8 in chunk or 9 in chunk:
                return f"row group {n} has external or encrypted column chunks"
            if not {1, 3, 4, 5, 6, 7, 9} <= cmd.keys():
                return f"row group {n} has incomplete column metadata"
            start, length = chunk_range(cmd)
            if start < len(MAGIC) or length <= 0 or start + length > footer_start:
                return f"a column chunk of row group {n} lies outside the file's data"
            try:
                values, dictionary = walk_pages(data, start, length, cmd[4])
            except DamagedPage as exc:
                raise DamagedPage(f"row group {n}: {exc}") from None
            except ValueError as exc:
                return f"row group {n}: {exc}"
            if values != cmd[5]:
                return f"a column chunk of row group {n} holds {values} values, not {cmd[5]}"
            if dictionary and not (cmd.get(11) or 0) > 0:
                # mergeable() decides from the footer: an undeclared dictionary page would
                # be concatenated into the middle of a merged chunk.
                return f"a column chunk of row group {n} has an undeclared dictionary page"
        if not rows_agree(group, repeated):
            return f"the value counts of row group {n} contradict its {group[3]} rows"
    return None


def mergeable(group: dict[int, Any]) -> tuple[Any, ...] | None:
    """The layout key under which a (checked) row group's pages may be concatenated with
    other row groups of the same key (its columns' codecs), or None when a chunk has a
    dictionary (which cannot be shared)."""
    codecs = []
    for chunk in group[1]:
        cmd = chunk[3]
        if (cmd.get(11) or 0) > 0 or _DICT_ENCODINGS.intersection(cmd.get(2) or ()):
            return None
        codecs.append(cmd[4])
    return tuple(codecs)


def _clean_stats(stats: dict[int, Any] | None) -> dict[int, Any] | None:
    if not stats:
        return None
    kept = {k: v for k, v in stats.items() if k not in (1, 2, 4)}
    return kept or None


class RowGroupAssembler:
    """One output file, built row group by row group (see the module doc): written to
    ``sink`` (a binary stream: ``write(bytes)``) as it is assembled, or, without a sink,
    gathered in memory and returned by :meth:`finish`."""

    def __init__(
        self, template: dict[int, Any], created_by: bytes, sink: Any = None, lean: bool = False
    ):
        self.template = template  # FileMetaData whose schema/key-values the output gets
        self.created_by = created_by
        # lean: only what a reader needs to find and decode the pages (a file decoded at
        # once and dropped, see compact_stage): no statistics, fewer footer bytes to write.
        self.lean = lean
        self.leaves = [e for e in template.get(2, [])[1:] if not e.get(5)]
        self.sink = sink
        self.out = bytearray()
        self.size = 0  # bytes of the output so far (offsets of what comes next)
        self.groups: list[dict[int, Any]] = []
        self.rows = 0
        self._emit(MAGIC)

    def _emit(self, data: bytes | memoryview) -> None:
        if self.sink is None:
            self.out += data
        else:
            self.sink.write(data)
        self.size += len(data)

    def _copy(self, data: bytes | memoryview, cmd: dict[int, Any]) -> tuple[int, int, int]:
        start, length = chunk_range(cmd)
        at = self.size
        self._emit(memoryview(data)[start : start + length])
        return start, at, length

    def _group(self, chunks: list[dict[int, Any]], rows: int, extra: dict[int, Any]) -> None:
        first = chunks[0][2] if chunks else self.size
        group = {1: chunks, 3: rows, 5: first, **extra}
        group[2] = sum(c[3][6] for c in chunks)
        group[6] = sum(c[3][7] for c in chunks)
        if len(self.groups) <= _MAX_ORDINAL:
            group[7] = len(self.groups)
        self.groups.append(group)
        self.rows += rows

    def add_whole(self, data: bytes | memoryview, group: dict[int, Any]) -> None:
        """Copy one row group as it is (offsets moved)."""
        chunks = []
        for chunk in group[1]:
            cmd = chunk[3]
            cmd = {k: cmd[k] for k in _LEAN if k in cmd} if self.lean else dict(cmd)
            start, at, _ = self._copy(data, cmd)
            shift = at - start
            cmd[9] += shift
            if (cmd.get(11) or 0) > 0:
                cmd[11] += shift
            else:
                cmd.pop(11, None)
            for field in (10, 14, 15):  # index page, bloom filter: not copied
                cmd.pop(field, None)
            stats = _clean_stats(cmd.pop(12, None))
            if stats is not None:
                cmd[12] = stats
            chunks.append({2: at, 3: cmd})
        extra = {4: group[4]} if group.get(4) and not self.lean else {}
        self._group(chunks, group[3], extra)

    def add_merged(self, parts: Sequence[tuple[bytes | memoryview, dict[int, Any]]]) -> None:
        """Merge row groups of one :func:`mergeable` key into one by concatenating pages."""
        chunks = []
        for column, leaf in enumerate(self.leaves):
            cmds = [group[1][column][3] for _, group in parts]
            at = self.size
            for (data, _), cmd in zip(parts, cmds, strict=True):
                self._copy(data, cmd)
            first = cmds[0]
            encodings: list[int] = []
            for cmd in cmds:
                encodings += [e for e in cmd[2] if e not in encodings]
            merged = {
                1: first[1],
                2: encodings,
                3: first[3],
                4: first[4],
                5: sum(c[5] for c in cmds),
                6: sum(c[6] for c in cmds),
                7: sum(c[7] for c in cmds),
                9: at,
            }
            stats = merge_statistics([(c.get(12), c[5]) for c in cmds], leaf)
            if stats is not None:
                merged[12] = stats
            if all(13 in c for c in cmds):
                merged[13] = _merge_encoding_stats([c[13] for c in cmds])
            chunks.append({2: at, 3: merged})
        self._group(chunks, sum(group[3] for _, group in parts), {})

    def finish(self) -> bytearray:
        """Append the footer; return the whole file (empty when written to a sink)."""
        t = self.template
        meta = {1: t.get(1, 2), 2: t[2], 3: self.rows, 4: self.groups, 6: self.created_by}
        for field in (5, 7):  # key-value metadata (the Arrow schema), column orders
            if field in t:
                meta[field] = t[field]
        footer = write_struct(meta, FILE_META_DATA)
        _check_footer(footer)
        self._emit(footer + struct.pack("<i", len(footer)) + MAGIC)
        data, self.out = self.out, bytearray()
        return data  # not copied: without a sink, the output is the largest thing held


def _merge_encoding_stats(lists: Sequence[list[dict[int, Any]]]) -> list[dict[int, Any]]:
    counts: dict[tuple[int, int], int] = {}
    for entries in lists:
        for e in entries:
            key = (e.get(1, 0), e.get(2, 0))
            counts[key] = counts.get(key, 0) + e.get(3, 0)
    return [{1: p, 2: enc, 3: n} for (p, enc), n in counts.items()]
