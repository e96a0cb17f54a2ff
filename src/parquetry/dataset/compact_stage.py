"""Decoding many small compaction inputs in one pyarrow call (the re-encoding side of
``binary_copy="auto"``).

Opening and decoding a 22 KB Parquet file costs pyarrow about 0.3-0.5 ms of CPU, nearly all
of it per-file work (the footer, the Arrow schema, the reader), with the GIL held between
the calls; decoding the same rows as one row group of a larger file costs about 0.15 ms.
So the small row groups that a compaction re-encodes are first copied byte for byte into
one in-memory *staging* file (:class:`~parquetry.parquet.leancopy.LeanAssembler`, with a
minimal footer), which pyarrow then decodes at once, in its own threads, with page CRCs
verified as every read path does; the rows are re-encoded into the output as before.

Only files whose footer parquetry's Thrift reader has checked (and found safe for pyarrow)
and whose Parquet schema is the output's are staged, and only when every column chunk lies
within the file's data (:func:`stageable`). If anything about the staging file fails to
decode (a damaged page, pyarrow's error, a string that is not UTF-8, other Arrow types),
each staged file is fetched and decoded again on its own by the ordinary read path (its
footer checked again), which raises the error naming the file at fault: staging changes
the cost, never an outcome.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from parquetry.dataset.plan import PlannedFile
from parquetry.dataset.read import READ_ERRORS
from parquetry.errors import InvalidFormat
from parquetry.parquet.footer import MAGIC
from parquetry.parquet.leancopy import LeanAssembler
from parquetry.parquet.rgcopy import chunk_range, repeated_leaves, rows_agree
from parquetry.parquet.utf8 import check_utf8

__all__ = ["Stager", "lean_read", "stageable"]

_REQUIRED = frozenset({1, 2, 3, 4, 5, 6, 7, 9})


def stageable(meta: dict[int, Any], footer_start: int, leaves: int) -> bool:
    """Whether the row groups of a checked, unencrypted footer ``meta`` (of the output's
    Parquet schema, ``leaves`` leaf columns) can be copied into a staging file: every
    column chunk is described completely and lies between the leading magic and the
    footer, and each row group's row count agrees with its chunks' value counts. (Pages
    are not walked: pyarrow decodes them as it would in the file itself.)"""
    try:
        repeated = repeated_leaves(meta.get(2, []))
        for group in meta.get(4, []):
            chunks = group.get(1, [])
            rows = group.get(3)
            if len(chunks) != leaves or not isinstance(rows, int) or rows < 0:
                return False
            for chunk in chunks:
                cmd = chunk.get(3)
                if cmd is None or 1 in chunk or 8 in chunk or 9 in chunk:
                    return False
                if not cmd.keys() >= _REQUIRED:
                    return False
                start, length = chunk_range(cmd)
                if start < len(MAGIC) or length <= 0 or start + length > footer_start:
                    return False
            if not rows_agree(group, repeated):
                return False  # pyarrow would shift rows between the staged files
    except (AttributeError, TypeError, ValueError):
        return False
    return True


class Stager:
    """Small files waiting to be decoded together (see the module doc). Each file's row
    groups are copied into the staging file when it is added (while the bin reads its
    inputs, compact_pipeline.py), so neither its bytes nor its decoded footer are held."""

    def __init__(
        self,
        template: dict[int, Any],
        payload: pa.Schema,
        string_columns: list[str],
        reread: Callable[[PlannedFile], list[pa.Table]],
    ):
        self.template, self.payload = template, payload
        self.string_columns = string_columns
        self.reread = reread  # the ordinary read of one file: its own GET, footer checked
        self.files: list[PlannedFile] = []
        self.out: LeanAssembler | None = None
        self.broken = False  # a footer the staging copy could not take: decode one by one
        self.rows = 0
        self.bytes = 0  # uncompressed, as the footers say: about the decoded size

    def add(self, planned: PlannedFile, data: bytes, meta: dict[int, Any]) -> None:
        self.files.append(planned)
        if self.out is None:
            self.out = LeanAssembler(self.template, b"parquetry staging")
        try:
            for group in meta.get(4, []):
                if group[3]:
                    self.out.add_whole(data, group)
                self.rows += group[3]
                self.bytes += group.get(2) or 0
        except (KeyError, IndexError, TypeError, ValueError):
            self.broken = True  # take() reads each file again: the read path names it

    def take(self) -> list[pa.Table]:
        """The rows of every staged file (then none is staged)."""
        files, out, broken = self.files, self.out, self.broken
        self.files, self.out, self.broken, self.rows, self.bytes = [], None, False, 0, 0
        if not files or out is None:
            return []
        try:
            if not broken:
                return [self._decode(out)]
        except (*READ_ERRORS, KeyError, IndexError, InvalidFormat):
            pass
        # One of them is damaged (or unusual): each file read again, on its own, by the
        # ordinary read path (footer checked again: these are new bytes) says which.
        del out
        return [t for f in files for t in self.reread(f)]

    def _decode(self, out: LeanAssembler) -> pa.Table:
        pf = pq.ParquetFile(
            pa.BufferReader(out.finish()),
            coerce_int96_timestamp_unit="us",
            page_checksum_verification=True,  # as every read path: a CRC mismatch raises
        )
        table = pf.read(use_threads=True)
        if not table.schema.equals(self.payload):
            raise InvalidFormat("staged row groups do not decode to the payload's types")
        for name in self.string_columns:  # pyarrow does not check UTF-8
            check_utf8(table.column(name), "<staging>", name)
        return table


def lean_read(
    f: PlannedFile, data: bytes, payload: pa.Schema, string_columns: list[str]
) -> list[pa.Table] | None:
    """The rows of one file whose checked footer has the output's Parquet schema, read
    without the general reader's per-column work (column lookup by name, casts: about a
    third of a 22 KB file's read), or None when its Arrow types are not ``payload``'s or
    pyarrow fails: the general read path then casts, or raises naming the file."""
    try:
        pf = pq.ParquetFile(
            pa.BufferReader(data),
            coerce_int96_timestamp_unit="us",
            page_checksum_verification=True,  # as every read path: a CRC mismatch raises
        )
        table = pf.read(use_threads=False)
    except (*READ_ERRORS, KeyError, IndexError):
        return None
    if not table.schema.equals(payload):
        return None
    for name in string_columns:  # pyarrow does not check UTF-8
        check_utf8(table.column(name), f.key, name)
    return [table]
