"""Encode Arrow data into one Parquet file in memory, with parquetry's write options."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from parquetry.errors import SchemaViolation
from parquetry.parquet.options import WriteOptions
from parquetry.snapshot.inputs import split_stream

__all__ = ["DEFAULT_ROW_GROUP_ROWS", "encode_batches", "encode_table"]

#: Rows per row group when none is configured (pyarrow's own default).
DEFAULT_ROW_GROUP_ROWS = 1024 * 1024


def _kwargs(options: WriteOptions, schema: pa.Schema) -> tuple[dict[str, Any], int]:
    kwargs = dict(options.writer_kwargs(schema))
    # Tolerate a WriteOptions that starts to carry the row group size itself.
    rows = kwargs.pop("row_group_size", None) or options.row_group_size or DEFAULT_ROW_GROUP_ROWS
    return kwargs, int(rows)


def encode_table(table: pa.Table, options: WriteOptions, *, where: str) -> pa.Buffer:
    """One Parquet file holding ``table`` (``where`` names the target key in errors)."""
    kwargs, rows = _kwargs(options, table.schema)
    sink = pa.BufferOutputStream()
    try:
        pq.write_table(table, sink, row_group_size=rows, **kwargs)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        raise SchemaViolation(f"cannot encode {where} as Parquet: {exc}", key=where) from None
    return sink.getvalue()


def encode_batches(
    schema: pa.Schema, batches: Iterable[pa.RecordBatch], options: WriteOptions, *, where: str
) -> tuple[pa.Buffer, int]:
    """Stream batches into one Parquet file; holds at most one row group of Arrow data.

    Returns the file and its row count.
    """
    kwargs, group_rows = _kwargs(options, schema)
    sink = pa.BufferOutputStream()
    total = 0
    try:
        with pq.ParquetWriter(sink, schema, **kwargs) as writer:
            for group in split_stream(iter(batches), group_rows):
                table = pa.Table.from_batches(group, schema)
                writer.write_table(table, group_rows)
                total += table.num_rows
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        raise SchemaViolation(f"cannot encode {where} as Parquet: {exc}", key=where) from None
    return sink.getvalue(), total
