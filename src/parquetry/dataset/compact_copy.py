"""Compaction outputs assembled from the inputs' bytes (``binary_copy``), without decoding.

Each input file is fetched whole (small files read ahead in threads), its footer parsed and
checked by parquetry's own Thrift reader, and :func:`parquetry.parquet.rgcopy.copy_check`
decides whether its row groups can be copied: same Parquet schema as the output (the one
pyarrow writes for the dataset's payload schema with the dataset's write options), no
encryption, every chunk's pages walking exactly to its end, and version-document
statistics for every column (the output's document statistics are merged from them).
Then per row group:

- at least :data:`KEEP_FRACTION` of the output row-group size (uncompressed bytes, or rows
  when ``row_group_size`` is set): copied whole;
- smaller, without dictionary pages: concatenated page by page with the following small row
  groups of the same codecs into one row group of up to the output row-group size;
- smaller, with dictionary pages (pyarrow's default encoding): copied whole with
  ``binary_copy=True``; decoded and re-encoded with the rows that need it under ``"auto"``
  (see docs/benchmarks.md, "Binary copy", for the read speed that motivates it), decoded
  many files at once through a staging file (:mod:`parquetry.dataset.compact_stage`).

A page failing its CRC or its decompression, or a small row group to be merged that does
not decode, or a footer entry that pyarrow cannot parse (the output's footer is parsed before it
is written), stops the compaction with InvalidFormat naming the input (nothing committed).
Everything else (another schema, encrypted or malformed files, files kartothek wrote without
statistics in the document) is decoded and re-encoded by pyarrow with the dataset's write
options, and those row groups are copied into the same output. Rows do not keep the inputs'
order (small row groups wait for others of their kind to fill an output row group).

Memory: the output is streamed to the store as it is assembled
(:meth:`~parquetry.store.Store.open_writer`: a 1 MiB piece, plus an object store's parts
in flight), so what is held is the inputs read ahead
(:data:`~parquetry.dataset.compact_write.READ_AHEAD_BYTES`), the inputs whose small row
groups wait to be merged (less than one output row group of them per codec layout) or to
be decoded together (their staging copy: less than one output row group, uncompressed),
less than two output row groups decoded for re-encoding, and the output's footer. Two bins
are in flight (:mod:`parquetry.dataset.compact_pipeline`): the next one holds its inputs
read ahead and its staging copy on top.

What the output does not carry over: page indexes and bloom filters (they point into the
inputs), and the inputs keep their codec and encodings (the dataset's ``compression`` and
``dictionary`` options apply to re-encoded row groups only).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from parquetry.dataset.compact_pending import Pending, check_decodes
from parquetry.dataset.compact_pipeline import NO_TURN, Turn
from parquetry.dataset.compact_stage import lean_read, stageable
from parquetry.dataset.compact_write import READ_AHEAD_FILES, READ_THREADS, Accumulator
from parquetry.dataset.naming import data_key, make_label, new_base_label
from parquetry.dataset.plan import PlannedFile
from parquetry.dataset.read import read_whole_file
from parquetry.dataset.write import FileDescription
from parquetry.errors import InvalidFormat, MetadataCorrupted, NotFound
from parquetry.parquet.footer import footer_from_bytes
from parquetry.parquet.footer_memo import FooterMemo
from parquetry.parquet.rgcopy import (
    DamagedPage,
    RowGroupAssembler,
    UnreadableFooter,
    copy_check,
    mergeable,
    schema_key,
)
from parquetry.parquet.utf8 import holds_strings
from parquetry.store import PutMode

if TYPE_CHECKING:
    from parquetry.dataset.compact_write import BinWriter
    from parquetry.dataset.metadata import FileInfo

__all__ = ["KEEP_FRACTION", "BinCopier", "Input"]

#: A row group of at least this fraction of the output row-group size is copied whole.
KEEP_FRACTION = 0.25


@dataclass(slots=True)
class Input:
    """One input file fetched and checked (by a read-ahead thread)."""

    planned: PlannedFile
    data: bytes
    meta: dict[int, Any] | None  # the checked footer when the file can be copied
    tables: list[pa.Table] | None = None  # the rows, when decoded while read ahead
    staged: dict[int, Any] | None = None  # its footer, when decoded with others (staging)


class BinCopier:
    """Writes compaction outputs by binary copy where possible (see the module doc)."""

    def __init__(self, writer: BinWriter, files: Mapping[str, FileInfo], small_dict: str):
        self.w = writer
        self.files = files
        self.copy_small_dict = small_dict == "copy"
        sink = pa.BufferOutputStream()
        pq.write_table(
            self.w.payload.empty_table(), sink, **self.w.opts.writer_kwargs(self.w.payload)
        )
        template = footer_from_bytes(sink.getvalue().to_pybytes(), "<template>").metadata
        assert template is not None  # written just now, unencrypted
        self.template = template
        self.expected = schema_key(template)
        from parquetry import __version__

        self.created_by = f"parquetry version {__version__} (build binary-copy)".encode()
        rows = self.w.opts.row_group_size
        self.group_rows = rows
        self.group_bytes = self.w.group_bytes
        self.string_columns = [f.name for f in self.w.payload if holds_strings(f.type)]
        self.leaves = sum(1 for e in self.expected[0][1:] if not e[4])
        # Inputs written alike have footers differing only in some values: decoded through
        # templates of recent ones (about 2x cheaper than the Thrift reader's fast path).
        self.memo = FooterMemo()
        self._schema_seen: tuple[Any, Any] | None = None  # (schema, column orders) == expected

    # --- inputs ------------------------------------------------------------------------------

    def _fetch(self, f: PlannedFile) -> Input:
        try:
            data = self.w.store.get(f.key)
        except NotFound:
            raise MetadataCorrupted(
                f"data file {f.key} of partition {f.label!r} is missing", key=f.key
            ) from None
        if f.size is not None and len(data) != f.size:
            raise InvalidFormat(
                f"data file {f.key} of partition {f.label!r} is {len(data)} bytes, the "
                f"version records {f.size}: it is not the file committed",
                key=f.key,
            )
        meta, safe, same = self._copyable(f, data)
        if meta is None and safe:
            start = len(data) - 8 - int.from_bytes(data[-8:-4], "little")
            if same is not None and stageable(same, start, self.leaves):
                return Input(f, data, None, staged=same)  # decoded with others (compact_stage)
            # Decoded here, in a read-ahead thread (pyarrow releases the GIL), as the
            # re-encoding compaction does; its footer was checked just now.
            return Input(f, data, None, self._one_by_one(f, data, same is not None))
        return Input(f, data, meta)

    def _one_by_one(self, f: PlannedFile, data: bytes, same: bool = True) -> list[pa.Table]:
        """The rows of one file whose footer was checked and found safe."""
        tables = lean_read(f, data, self.w.payload, self.string_columns) if same else None
        if tables is None:
            names = self.w.payload.names
            tables = read_whole_file(
                self.w.store, self.w.schema, f, names, None, data=data, checked=True
            )
        return tables

    def reread(self, f: PlannedFile) -> list[pa.Table]:
        """The rows of one staged file, fetched again and read by the ordinary read path
        (footer checked again): the staging decode failed, this says which file is at fault."""
        names = self.w.payload.names
        return read_whole_file(self.w.store, self.w.schema, f, names, None)

    def _reencode_all(self, meta: dict[int, Any]) -> bool:
        """Under ``"auto"``: every row group is small and dictionary-encoded."""
        try:
            return all(not self._big(g) and mergeable(g) is None for g in meta.get(4, []))
        except (KeyError, TypeError, IndexError, AttributeError):
            return False  # malformed: copy_check refuses it, the read path names the fault

    def _copyable(
        self, f: PlannedFile, data: bytes
    ) -> tuple[dict[int, Any] | None, bool, dict[int, Any] | None]:
        """The footer when the file's row groups can be copied; whether its footer is safe
        for pyarrow (a file neither copyable nor safe takes the checked read path); and,
        for a file to decode, its footer when it has the output's Parquet schema (then it
        may be staged, or read by :func:`~parquetry.dataset.compact_stage.lean_read`)."""
        try:
            raw, hazard = self.memo.checked_footer(data, f.key)
        except (InvalidFormat, RecursionError):
            return None, False, None  # the decoding path raises the error naming the file
        meta = raw.metadata
        if meta is None or raw.encrypted or hazard is not None:
            return None, False, None
        if f.rows is not None and meta.get(3) != f.rows:  # FileMetaData.num_rows
            # Another file under the committed name (replaced, even by one of the same size).
            raise InvalidFormat(
                f"data file {f.key} of partition {f.label!r} holds {meta.get(3)} rows, the "
                f"version records {f.rows}: it is not the file committed",
                key=f.key,
            )
        same = meta if self._same_schema(meta) else None
        if not self.copy_small_dict and self._reencode_all(meta):
            return None, True, same
        info = self.files.get(f.label)
        names = self.w.payload.names
        if info is None or not all(n in info.stats for n in names):
            return None, True, same  # statistics to merge come from the document: decoded
        start = len(data) - raw.footer_length - 8
        try:
            reason = copy_check(meta, self.expected, data, start)
        except DamagedPage as exc:
            # Not decoded instead: pyarrow does not check CRCs and may read such a page
            # without an error; the compaction stops, nothing is committed.
            raise InvalidFormat(
                f"data file {f.key} of partition {f.label!r} is damaged: {exc}", key=f.key
            ) from None
        if reason is not None:
            # Decoded: pyarrow raises on damaged pages, named by the read path.
            return None, True, None
        return meta, True, None

    def _same_schema(self, meta: dict[int, Any]) -> bool:
        """``schema_key(meta) == self.expected``, remembering the last schema that was (a
        comparison of the decoded lists is cheaper than building the key)."""
        seen = self._schema_seen
        if seen is not None and meta.get(2) == seen[0] and meta.get(7) == seen[1]:
            return True
        if schema_key(meta) != self.expected:
            return False
        self._schema_seen = (meta.get(2), meta.get(7))
        return True

    def _inputs(self, files: Sequence[PlannedFile], turn: Turn) -> Iterator[Input]:
        """Every input fetched and checked, in order, a bounded number of bytes ahead, in
        the bin's ``turn`` (compact_pipeline.py)."""
        ahead_limit = self.w.ahead_bytes
        turn.begin()
        with ThreadPoolExecutor(max_workers=READ_THREADS) as pool:
            pending: list[tuple[PlannedFile, Future[Input]]] = []
            i = 0
            try:
                while i < len(files) or pending:
                    ahead = sum(f.size or 0 for f, _ in pending)
                    while i < len(files) and len(pending) < READ_AHEAD_FILES:
                        f = files[i]
                        if pending and ahead + (f.size or 0) > ahead_limit:
                            break
                        pending.append((f, pool.submit(self._fetch, f)))
                        ahead += f.size or 0
                        i += 1
                    turn.check()
                    yield pending.pop(0)[1].result()
            finally:
                for _, fut in pending:
                    fut.cancel()
        turn.end()  # all read: the next bin may read while this one finishes

    # --- output ------------------------------------------------------------------------------

    def _big(self, group: dict[int, Any]) -> bool:
        if self.group_rows is not None:
            return bool(group[3] >= self.group_rows * KEEP_FRACTION)
        return bool(group.get(2, 0) >= self.group_bytes * KEEP_FRACTION)

    def write(
        self,
        partition: tuple[tuple[str, Any], ...],
        files: Sequence[PlannedFile],
        turn: Turn = NO_TURN,
    ) -> FileDescription:
        """One output file holding every row of ``files``, read in ``turn``."""
        label = make_label(partition, new_base_label())
        key = data_key(self.w.uuid, self.w.table, label)
        with self.w.store.open_writer(key, mode=PutMode.CREATE) as sink:
            try:
                out = RowGroupAssembler(self.template, self.created_by, sink)
                acc = self._assemble(files, out, turn)
            except UnreadableFooter as exc:
                raise self._unreadable(files, exc) from None
            self.w.intent.record([key])  # before the commit makes it visible (compact_write)
        stats, values = acc.result()
        return FileDescription(
            table=self.w.table,
            key=key,
            label=label,
            partition=partition,
            rows=acc.rows,
            size=sink.commit().size,
            stats=stats,
            index_values=values,
            intent=self.w.intent.id,
        )

    def _unreadable(self, files: Sequence[PlannedFile], exc: UnreadableFooter) -> InvalidFormat:
        """The error naming the input whose footer pyarrow cannot parse (what it carried
        into the output's footer: pyarrow reads the inputs only now, on this rare path)."""
        for f in files:
            try:
                pq.read_metadata(pa.BufferReader(self.w.store.get(f.key)))
            except (OSError, ValueError, pa.ArrowException) as bad:
                return InvalidFormat(
                    f"data file {f.key} of partition {f.label!r} is damaged: its footer "
                    f"does not parse ({bad})",
                    key=f.key,
                )
        keys = [f.key for f in files]
        return InvalidFormat(f"compacting {keys}: the output's footer does not parse ({exc})")

    def _assemble(
        self, files: Sequence[PlannedFile], out: RowGroupAssembler, turn: Turn
    ) -> Accumulator:
        """Write every row of ``files`` into ``out``; the statistics of what was written."""
        acc = Accumulator(self.w.payload, self.w.indices)
        state = Pending(self, out, acc)
        for item in self._inputs(files, turn):
            if item.staged is not None:
                state.stage(item.planned, item.data, item.staged)
                continue
            if item.tables is not None:
                for table in item.tables:
                    state.add_table(table, account=True)
                continue
            if item.meta is None:
                state.decode(item)
                continue
            info = self.files[item.planned.label]
            acc.add_stats(dict(info.stats), sum(g[3] for g in item.meta[4]))
            if self.w.indices:
                acc.add_values(self._index_columns(item))
            for n, group in enumerate(item.meta[4]):
                if not group[3]:
                    continue
                layout = None if self._big(group) else mergeable(group)
                if layout is not None:
                    check_decodes(item, n, self.string_columns)
                    state.merge(item.data, group, layout)
                elif self._big(group) or self.copy_small_dict:
                    out.add_whole(item.data, group)
                else:
                    state.reencode(item, n)
        turn.finish()  # one bin's last row groups in pyarrow at a time: memory
        state.flush()
        out.finish()
        return acc

    def _index_columns(self, item: Input) -> pa.Table:
        """The secondary-index columns of a copied file (its footer is checked and safe)."""
        names = list(self.w.indices)
        table = pq.read_table(pa.BufferReader(item.data), columns=names, use_threads=False)
        return table.cast(pa.schema([self.w.payload.field(n) for n in names]))

    def reencoded(self, tables: Sequence[pa.Table]) -> tuple[memoryview, dict[int, Any]]:
        """``tables`` written by pyarrow with the dataset's options, as bytes and footer
        (a view of pyarrow's buffer: no copy of an encoded output row group)."""
        data = pa.concat_tables(tables)
        sink = pa.BufferOutputStream()
        kwargs = self.w.opts.writer_kwargs(self.w.payload, data)
        rg = self.w.opts.row_group_size or data.num_rows or 1
        pq.write_table(data, sink, row_group_size=rg, **kwargs)
        encoded = memoryview(sink.getvalue())
        meta = footer_from_bytes(encoded, "<re-encoded row group>").metadata
        if meta is None or schema_key(meta) != self.expected:  # pragma: no cover - invariant
            raise InvalidFormat("re-encoded row groups do not have the output's schema")
        return encoded, meta
