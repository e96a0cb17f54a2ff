"""Row groups of compaction inputs waiting to become output row groups (the part of
:mod:`parquetry.dataset.compact_copy` that groups, merges, stages and re-encodes them)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from parquetry.dataset.compact_stage import Stager
from parquetry.dataset.footer_stats import written_stats
from parquetry.dataset.plan import PlannedFile
from parquetry.dataset.read import read_whole_file
from parquetry.errors import InvalidFormat
from parquetry.parquet.utf8 import check_utf8

if TYPE_CHECKING:
    from parquetry.dataset.compact_copy import BinCopier, Input
    from parquetry.dataset.compact_write import Accumulator
    from parquetry.parquet.rgcopy import RowGroupAssembler

__all__ = ["Pending", "check_decodes"]


def check_decodes(item: Input, group: int, string_columns: Sequence[str]) -> None:
    """Decode a small row group whose pages are about to be concatenated with other files'
    (cheap: it is small): a page that decompresses but does not decode (no CRC caught it),
    or a string that is not UTF-8 (pyarrow does not check, every read path does), would
    otherwise make the merged chunk, and so the other files' rows, unreadable."""
    f = item.planned
    try:
        pf = pq.ParquetFile(pa.BufferReader(item.data), page_checksum_verification=True)
        table = pf.read_row_group(group, use_threads=False)
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise InvalidFormat(
            f"data file {f.key} of partition {f.label!r} is damaged: row group {group}: {exc}",
            key=f.key,
        ) from None
    for name in string_columns:
        if name in table.column_names:
            check_utf8(table.column(name), f.key, name)


class Pending:
    """Row groups waiting to become output row groups: small row groups whose pages will be
    concatenated (one list per layout, i.e. per combination of codecs), and decoded rows to
    re-encode. Each fills up to one output row group independently: a compaction does not
    keep the inputs' row order (which is the order of their random labels anyway)."""

    def __init__(self, copier: BinCopier, out: RowGroupAssembler, acc: Accumulator):
        self.c, self.out, self.acc = copier, out, acc
        self.parts: dict[tuple[Any, ...], list[tuple[bytes, dict[int, Any]]]] = {}
        self.part_bytes: dict[tuple[Any, ...], int] = {}
        self.tables: list[pa.Table] = []
        self.table_bytes = self.table_rows = 0
        # Decoded tables whose statistics and index values are not accounted for yet: taken
        # once per output row group (one vectorised pass over ~1M rows), not per input file
        # (thousands of tiny pyarrow calls, each giving up the GIL to the reading threads).
        self.unaccounted: list[pa.Table] = []
        self.staged = Stager(
            copier.template, copier.w.payload, copier.string_columns, copier.reread
        )

    def _full(self, size: int, rows: int) -> bool:
        if self.c.group_rows is not None:
            return rows >= self.c.group_rows
        return size >= self.c.group_bytes

    def merge(self, data: bytes, group: dict[int, Any], layout: tuple[Any, ...]) -> None:
        parts = self.parts.setdefault(layout, [])
        parts.append((data, group))
        size = self.part_bytes[layout] = self.part_bytes.get(layout, 0) + group.get(2, 0)
        if self._full(size, sum(g[3] for _, g in parts)):
            self._flush_parts(layout)

    def reencode(self, item: Input, group: int) -> None:
        """Decode one row group of a checked (copyable) file for re-encoding."""
        pf = pq.ParquetFile(pa.BufferReader(item.data))
        table = pf.read_row_group(group, use_threads=False)
        # Its statistics and index values were taken with the whole file's.
        self.add_table(table.cast(self.c.w.payload))

    def decode(self, item: Input) -> None:
        """A file that cannot be copied: decoded (and checked) by the ordinary read path."""
        w = self.c.w
        names = w.payload.names
        for table in read_whole_file(
            w.store, w.schema, item.planned, names, w.decryption, data=item.data
        ):
            self.add_table(table, account=True)

    def add_table(self, table: pa.Table, account: bool = False) -> None:
        """Rows to re-encode; ``account``: their statistics and index values are still to
        be taken (they were not, from the version document, with their whole file's)."""
        self.tables.append(table)
        if account:
            self.unaccounted.append(table)
        self.table_bytes += table.nbytes
        self.table_rows += table.num_rows
        if self._full(self.table_bytes, self.table_rows):
            self._flush_tables()

    def _flush_parts(self, layout: tuple[Any, ...]) -> None:
        parts = self.parts.pop(layout, [])
        self.part_bytes.pop(layout, None)
        if len(parts) == 1:
            self.out.add_whole(*parts[0])
        elif parts:
            self.out.add_merged(parts)

    def stage(self, planned: PlannedFile, data: bytes, meta: dict[int, Any]) -> None:
        """A small file to decode together with others (:mod:`compact_stage`)."""
        self.staged.add(planned, data, meta)
        if self._full(self.staged.bytes, self.staged.rows):
            self._take_staged()

    def _take_staged(self) -> None:
        for table in self.staged.take():
            self.add_table(table, account=True)

    def _flush_tables(self) -> None:
        # When every row to encode is still to be accounted for (the staged small files),
        # the statistics come from the footer pyarrow writes for them (footer_stats.py).
        whole = len(self.unaccounted) == len(self.tables) and all(
            a is b for a, b in zip(self.unaccounted, self.tables, strict=True)
        )
        accounted = pa.concat_tables(self.unaccounted) if self.unaccounted else None
        self.unaccounted = []
        if accounted is not None and not whole:
            self.acc.add(accounted)
        if self.tables:
            data, meta = self.c.reencoded(self.tables)
            self.tables, self.table_bytes, self.table_rows = [], 0, 0
            if accounted is not None and whole:
                self.acc.add_stats(written_stats(meta, accounted), accounted.num_rows)
                self.acc.add_values(accounted)
            for group in meta[4]:
                if group[3]:
                    self.out.add_whole(data, group)

    def flush(self) -> None:
        self._take_staged()
        for layout in list(self.parts):
            self._flush_parts(layout)
        self._flush_tables()
