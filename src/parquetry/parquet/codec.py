"""The explicit-schema record codec (Lode's Parquet codec contract, in Python).

``encode`` validates every record against the schema (see :mod:`parquetry.parquet.coerce`
for the exact coercion rules), converts whole columns through Arrow and writes one
complete Parquet file, in row groups of ``row_group_size`` rows (128 Ki by default): each
group is encoded on a background thread while the next one is converted. ``decode`` reads
any standard Parquet file **by column name**.
Beyond Lode: µs UTC timestamps (Spark reads them), DATE and DECIMAL types, zstd and lz4,
and :class:`~parquetry.parquet.stream.ParquetStreamWriter` for bounded-memory streaming.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import IO, TYPE_CHECKING, Any

import pyarrow as pa

from parquetry.errors import ParquetryError
from parquetry.parquet.encryption import DecryptionSettings
from parquetry.parquet.files import Source, open_parquet, read_failure
from parquetry.parquet.options import WriteOptions
from parquetry.parquet.records import SLICE_ROWS, CompiledSchema, no_gc, record_sequence
from parquetry.parquet.rowgroups import RECORD_ROW_GROUP_ROWS, RowGroupWriter
from parquetry.parquet.schema import ParquetCompression, ParquetSchema
from parquetry.parquet.stats import FileStats, compute_stats
from parquetry.parquet.stream import ParquetStreamWriter

if TYPE_CHECKING:
    from parquetry.store.base import Store

__all__ = ["ParquetCodec"]

# gzip's own default (9) is ~70x slower than zstd for a few percent of size: use 6.
_DEFAULT_LEVELS = {ParquetCompression.ZSTD: 1, ParquetCompression.GZIP: 6}


class ParquetCodec:
    """Encode records (mappings) to Parquet with an explicit schema, and decode them back.

    Args:
        schema: The fields; validated here (bad type, empty or duplicate name →
            :class:`SchemaViolation`). An empty schema is valid.
        compression: Column-chunk compression (Lode's default, snappy). Ignored when
            ``options`` is given.
        options: Full :class:`WriteOptions` (zstd level 1 by default there).
        decryption: Keys for reading encrypted files.

    A codec is stateless apart from :meth:`file_stats`, which describes the last successful
    :meth:`encode` of *this* codec instance; use one instance per thread.
    """

    name = "parquet"

    def __init__(
        self,
        schema: ParquetSchema,
        *,
        compression: ParquetCompression = ParquetCompression.SNAPPY,
        options: WriteOptions | None = None,
        decryption: DecryptionSettings | None = None,
    ):
        self.schema = schema
        self.compiled = CompiledSchema.compile(schema)
        if not isinstance(compression, ParquetCompression):
            compression = ParquetCompression(compression)
        self.compression = compression
        self.options = options or WriteOptions(
            compression=compression.value,
            compression_level=_DEFAULT_LEVELS.get(compression),
        )
        self.decryption = decryption
        self._stats: FileStats | None = None

    def __repr__(self) -> str:
        fields = list(self.schema.names)
        return f"ParquetCodec(fields={fields!r}, compression={self.options.compression!r})"

    # --- encode -----------------------------------------------------------------------------

    def to_table(self, records: Iterable[Any], base_index: int = 0) -> pa.Table:
        """Validate and convert records to an Arrow table of the schema (no file written)."""
        with no_gc():
            return self.compiled.table(records, base_index)

    def encode(self, sink: IO[bytes] | Any, records: Iterable[Any]) -> None:
        """Write one complete Parquet file of ``records`` to a binary ``sink``.

        Nothing is written to ``sink`` unless every record is valid; :meth:`file_stats`
        is reset first, so it is ``None`` after a failure.
        """
        self._stats = None
        data, stats = self._encode(records)
        sink.write(data)
        self._stats = stats

    def encode_bytes(self, records: Iterable[Any]) -> bytes:
        """:meth:`encode` into bytes."""
        self._stats = None
        data, stats = self._encode(records)
        self._stats = stats
        encoded: bytes = data.to_pybytes()
        return encoded

    def _encode(self, records: Iterable[Any]) -> tuple[pa.Buffer, FileStats]:
        rows = record_sequence(records)
        size = self.options.row_group_size or RECORD_ROW_GROUP_ROWS
        buffer = pa.BufferOutputStream()
        compiled = self.compiled
        groups = RowGroupWriter(buffer, compiled.arrow_schema, self.options, self.schema.fields)
        try:
            with no_gc():
                for start in range(0, len(rows), size):
                    chunk = rows if len(rows) <= size else rows[start : start + size]
                    table = compiled.table(chunk, base_index=start)
                    groups.write(table, last=start + size >= len(rows))
            groups.close()
        except BaseException:
            groups.abort()
            raise
        stats = groups.stats or compute_stats(
            self.schema.fields, compiled.arrow_schema.empty_table()
        )
        return buffer.getvalue(), stats

    def file_stats(self) -> FileStats | None:
        """Statistics of the last successful encode (None before one, or after a failure)."""
        return self._stats

    # --- decode -----------------------------------------------------------------------------

    def _read(self, source: Source) -> tuple[pa.Table, str]:
        names = list(self.schema.names)
        parquet_file, raw, name = open_parquet(source, columns=names, decryption=self.decryption)
        present = [c for c in names if c in parquet_file.schema_arrow.names]
        # Schema problems first, before any data is read, exactly as iter_records does: a
        # column that cannot be cast is a SchemaViolation whether or not pyarrow could read it.
        self.compiled.conform(parquet_file.schema_arrow.empty_table().select(present), name)
        try:
            return parquet_file.read(columns=present), name
        except ParquetryError:
            raise
        except (pa.ArrowException, OSError, ValueError, EOFError) as exc:
            raise read_failure(raw, name, exc) from None

    def decode_table(self, source: Source) -> pa.Table:
        """The schema's columns of a Parquet file, by name, cast to the schema's types."""
        table, name = self._read(source)
        conformed = self.compiled.conform(table, name)
        return pa.Table.from_arrays(conformed, schema=self.compiled.arrow_schema)

    def decode(self, source: Source) -> list[dict[str, Any]]:
        """Records of a Parquet file as dicts of the schema's fields (``None`` for nulls).

        Columns are matched by name, so files from other writers with other column orders
        or extra columns decode correctly. A nullable field missing from the file decodes as
        ``None``; a missing required field raises :class:`SchemaViolation`. Anything that is
        not a readable Parquet file raises :class:`InvalidFormat`; an encrypted file without
        keys raises :class:`EncryptionError`.
        """
        table, name = self._read(source)
        with no_gc():
            return self.compiled.records(table, name)

    def iter_records(
        self, source: Source, *, batch_rows: int = SLICE_ROWS
    ) -> Iterator[dict[str, Any]]:
        """The records of :meth:`decode`, ``batch_rows`` at a time, in bounded memory.

        For files too big for one list. ``source`` may be ``store.open(key)``: an
        object-store file is then read by ranges, a column chunk at a time. A missing
        required column, or a column type with no cast to the schema's, is raised before the
        first record; a value that does not convert, or a file that breaks mid-way, is raised
        where it is met (:class:`SchemaViolation`, :class:`InvalidFormat`).
        """
        names = list(self.schema.names)
        parquet_file, raw, name = open_parquet(
            source, columns=names, decryption=self.decryption, pre_buffer=False
        )
        present = [c for c in names if c in parquet_file.schema_arrow.names]
        empty = parquet_file.schema_arrow.empty_table().select(present)
        self.compiled.conform(empty, name)  # raises the schema problems up front
        if not names:
            yield from ({} for _ in range(parquet_file.metadata.num_rows))
            return
        batches = parquet_file.iter_batches(batch_size=batch_rows, columns=present)
        first_row = 0
        while True:
            try:
                batch = next(batches)
            except StopIteration:
                return
            except ParquetryError:
                raise
            except (pa.ArrowException, OSError, ValueError, EOFError) as exc:
                raise read_failure(raw, name, exc) from None
            with no_gc():
                rows = self.compiled.records(pa.Table.from_batches([batch]), name, first_row)
            first_row += batch.num_rows
            yield from rows

    def stream_writer(
        self,
        sink: IO[bytes] | Any | None = None,
        *,
        store: Store | None = None,
        key: str | None = None,
    ) -> ParquetStreamWriter:
        """A :class:`ParquetStreamWriter` with this codec's schema and options.

        Unlike Lode (whose Parquet codec raises ``ErrCodecNotStreamable``), records stream
        row group by row group; :class:`CodecNotStreamable` is raised only for a sink that
        cannot be written to.
        """
        return ParquetStreamWriter(
            sink, schema=self.schema, options=self.options, store=store, key=key
        )

    def with_options(self, options: WriteOptions) -> ParquetCodec:
        """The same schema with other write options."""
        return ParquetCodec(self.schema, options=options, decryption=self.decryption)
