"""Streaming Parquet writes: row group after row group, footer at close.

Lode claims Parquet cannot stream because the footer comes last. It can: the footer only
describes row groups already written, so a writer needs to hold one row group of data at
a time, never the whole file. :class:`ParquetStreamWriter` buffers at most
``row_group_size`` rows of Arrow data (plus the records of the current ``write`` call),
and one more row group being encoded on a background thread while the next is converted
(:mod:`parquetry.parquet.rowgroups`).

To a Store key the file is spooled to a temporary file and uploaded with one atomic put at
close (object stores have no append); the upload reads the spool through ``mmap``, so the
process does not hold the file in its heap.
"""

from __future__ import annotations

import mmap
import tempfile
from collections.abc import Iterable
from typing import IO, TYPE_CHECKING, Any

import pyarrow as pa

from parquetry.errors import CodecNotStreamable, InvalidArgument, SchemaViolation
from parquetry.parquet.options import WriteOptions
from parquetry.parquet.records import CompiledSchema, no_gc
from parquetry.parquet.rowgroups import RECORD_ROW_GROUP_ROWS, RowGroupWriter
from parquetry.parquet.schema import ParquetSchema
from parquetry.parquet.stats import FileStats, compute_stats
from parquetry.store.writer import PublishOnExit

if TYPE_CHECKING:
    from parquetry.store.base import ObjectMeta, PutMode, Store

__all__ = ["DEFAULT_STREAM_ROW_GROUP", "ParquetStreamWriter"]

#: Rows per row group when the options name none.
DEFAULT_STREAM_ROW_GROUP = RECORD_ROW_GROUP_ROWS


class ParquetStreamWriter(PublishOnExit):
    """Write a Parquet file incrementally to a binary sink or a Store key.

    Args:
        sink: A writable binary file (or pyarrow stream). Mutually exclusive with ``store``.
        schema: A :class:`ParquetSchema` (records are validated with the codec's rules) or a
            ``pa.Schema`` (Arrow batches only).
        options: Write options; ``row_group_size`` sets the rows per row group
            (default :data:`DEFAULT_STREAM_ROW_GROUP`, 128 Ki).
        store, key, mode: Write to ``key`` of ``store`` with one put at :meth:`close`.

    Use as a context manager: leaving the block normally closes (footer, upload); leaving
    it with an exception aborts (nothing is uploaded; a sink is left incomplete).

    Full row groups are written to the sink from one background thread, never two writes
    at once; the last group and the footer are written by the thread that calls
    :meth:`close`. Not for concurrent use: one writer per thread.
    """

    def __init__(
        self,
        sink: IO[bytes] | Any | None = None,
        *,
        schema: ParquetSchema | pa.Schema,
        options: WriteOptions | None = None,
        store: Store | None = None,
        key: str | None = None,
        mode: PutMode | None = None,
    ):
        if (sink is None) == (store is None) or (store is not None and not key):
            raise InvalidArgument("give either a sink, or a store and a key")
        if sink is not None and not callable(getattr(sink, "write", None)):
            raise CodecNotStreamable(
                f"cannot stream Parquet into a {type(sink).__name__}: it needs a binary sink "
                "with write(), or a store and a key"
            )
        self.options = options or WriteOptions()
        if isinstance(schema, ParquetSchema):
            self._compiled: CompiledSchema | None = CompiledSchema.compile(schema)
            self.arrow_schema = self._compiled.arrow_schema
        else:
            self._compiled = None
            self.arrow_schema = schema
        self.row_group_size = self.options.row_group_size or DEFAULT_STREAM_ROW_GROUP
        self._store, self._key, self._mode = store, key, mode
        # Closed by close()/abort(), not by a with block: it lives as long as the writer.
        self._spool = tempfile.TemporaryFile() if store is not None else None  # noqa: SIM115
        self._sink = self._spool if self._spool is not None else sink
        fields = self._compiled.schema.fields if self._compiled is not None else None
        self._groups = RowGroupWriter(self._sink, self.arrow_schema, self.options, fields)
        self._pending: list[pa.Table] = []
        self._pending_rows = 0
        self._handed_over = 0
        self.closed = False
        self.result: ObjectMeta | None = None

    # --- writing ----------------------------------------------------------------------------

    def write(self, data: Iterable[Any] | pa.RecordBatch | pa.Table) -> None:
        """Append records (mappings; needs a ParquetSchema) or an Arrow batch/table."""
        if self.closed:
            raise InvalidArgument("the stream writer is closed")
        table = self._as_table(data)
        if table.num_rows == 0:
            return
        self._pending.append(table)
        self._pending_rows += table.num_rows
        while self._pending_rows >= self.row_group_size:
            self._flush(self.row_group_size)

    def _as_table(self, data: Iterable[Any] | pa.RecordBatch | pa.Table) -> pa.Table:
        base = self._handed_over + self._pending_rows
        if isinstance(data, pa.RecordBatch | pa.Table):
            table = pa.Table.from_batches([data]) if isinstance(data, pa.RecordBatch) else data
            try:
                return table.select(self.arrow_schema.names).cast(self.arrow_schema)
            except (KeyError, pa.ArrowException, ValueError) as exc:
                raise SchemaViolation(f"batch does not fit the stream's schema: {exc}") from None
        if self._compiled is None:
            raise InvalidArgument("records need a ParquetSchema; this stream takes Arrow data")
        with no_gc():
            return self._compiled.table(data, base_index=base)

    def _flush(self, rows: int, *, last: bool = False) -> None:
        pending = pa.concat_tables(self._pending)
        group, rest = pending.slice(0, rows), pending.slice(rows)
        self._groups.write(group, last=last)
        self._handed_over += group.num_rows
        # Keep only the remainder (a copy) so the flushed group's buffers can be freed.
        self._pending = [rest.combine_chunks()] if rest.num_rows else []
        self._pending_rows = rest.num_rows

    @property
    def rows_written(self) -> int:
        """Rows in row groups finished so far (a group may still be in flight)."""
        return self._groups.rows_written

    @property
    def row_groups_written(self) -> int:
        """Row groups finished so far."""
        return self._groups.row_groups_written

    # --- finishing --------------------------------------------------------------------------

    def close(self) -> ObjectMeta | None:
        """Flush the last row group, write the footer, upload to the store key if any."""
        if self.closed:
            return self.result
        try:
            try:
                if self._pending_rows:
                    self._flush(self._pending_rows, last=True)
                self._groups.close()  # with no rows at all, still a valid, empty file
            except BaseException:
                self._groups.abort()
                raise
            if self._store is not None:
                self.result = self._upload()
        finally:
            self.closed = True
            self._discard_spool()
        return self.result

    def _upload(self) -> ObjectMeta:
        from parquetry.store.base import PutMode

        assert self._spool is not None
        assert self._store is not None
        assert self._key is not None
        self._spool.flush()
        with mmap.mmap(self._spool.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            view = memoryview(mapped)
            try:
                return self._store.put(self._key, view, mode=self._mode or PutMode.OVERWRITE)
            finally:
                view.release()

    def abort(self) -> None:
        """Stop without a footer; nothing is uploaded."""
        self.closed = True
        self._groups.abort()
        self._discard_spool()

    def _discard_spool(self) -> None:
        if self._spool is not None:
            self._spool.close()
            self._spool = None

    def stats(self) -> FileStats | None:
        """Statistics of the rows written so far (ParquetSchema streams only)."""
        stats = self._groups.stats
        if stats is None and self._compiled is not None:
            empty = self._compiled.arrow_schema.empty_table()
            return compute_stats(self._compiled.schema.fields, empty)
        return stats

    def _publish_on_exit(self) -> ObjectMeta | None:
        return self.close()
