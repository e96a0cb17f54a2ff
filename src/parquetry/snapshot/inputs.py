"""Turn what callers pass to ``write_dataset`` into Arrow data, and cut it into parts.

Accepted before any I/O: ``pa.Table``, ``pa.RecordBatch``, ``pa.RecordBatchReader``, a pandas
DataFrame, anything with ``__arrow_c_stream__`` (Polars, DuckDB relations...) and an iterable
of record batches or tables. Everything else is refused with :class:`InvalidArgument`.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from parquetry.errors import InvalidArgument, SchemaMismatch

__all__ = ["ArrowInput", "as_arrow_input", "split_stream", "split_table"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ArrowInput:
    """Either a whole table (``table``) or a stream of batches (``batches``), plus the schema."""

    schema: pa.Schema
    table: pa.Table | None = None
    batches: Iterator[pa.RecordBatch] | None = None


def as_arrow_input(data: object, *, what: str = "table") -> ArrowInput:
    """Classify ``data`` without consuming more than the first batch of an iterable."""
    if isinstance(data, pa.Table):
        return ArrowInput(schema=data.schema, table=data)
    if isinstance(data, pa.RecordBatch):
        return ArrowInput(schema=data.schema, table=pa.Table.from_batches([data]))
    if isinstance(data, pa.RecordBatchReader):
        return ArrowInput(schema=data.schema, batches=iter(data))
    if type(data).__module__.split(".")[0] == "pandas" and hasattr(data, "columns"):
        try:
            return as_arrow_input(pa.Table.from_pandas(data), what=what)
        except (pa.ArrowException, TypeError, ValueError) as exc:
            raise InvalidArgument(f"cannot convert the pandas DataFrame to Arrow: {exc}") from None
    if hasattr(data, "__arrow_c_stream__"):
        return as_arrow_input(pa.RecordBatchReader.from_stream(data), what=what)
    if isinstance(data, str | bytes | bytearray | memoryview | Mapping) or not isinstance(
        data, Iterable
    ):
        raise InvalidArgument(
            f"{what} must be a pyarrow Table, RecordBatch or RecordBatchReader, a pandas or "
            f"Polars DataFrame, an object with __arrow_c_stream__, or an iterable of record "
            f"batches; got {type(data).__name__}"
        )
    return _from_iterable(data, what)


def _from_iterable(data: Iterable[Any], what: str) -> ArrowInput:
    items = iter(data)
    first = next(items, None)
    if first is None:
        raise InvalidArgument(f"{what} is an empty iterable: its schema is unknown")
    if not isinstance(first, pa.RecordBatch | pa.Table):
        raise InvalidArgument(
            f"{what} is an iterable of {type(first).__name__}; expected record batches or tables"
        )
    schema = first.schema
    return ArrowInput(schema=schema, batches=_checked(itertools.chain([first], items), schema))


def _checked(items: Iterator[Any], schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    for index, item in enumerate(items):
        if not isinstance(item, pa.RecordBatch | pa.Table):
            raise InvalidArgument(
                f"item {index} of the input is a {type(item).__name__}, not a record batch"
            )
        if not item.schema.equals(schema):
            raise SchemaMismatch(
                f"item {index} of the input has schema {item.schema} but the first item has "
                f"{schema}"
            )
        if isinstance(item, pa.Table):
            yield from item.to_batches()
        else:
            yield item


def split_table(table: pa.Table, max_rows: int | None) -> list[pa.Table]:
    """Zero-copy slices of at most ``max_rows`` rows; one part if it fits (or is empty)."""
    if max_rows is None or table.num_rows <= max_rows:
        return [table]
    return [table.slice(start, max_rows) for start in range(0, table.num_rows, max_rows)]


def split_stream(
    batches: Iterator[pa.RecordBatch], max_rows: int
) -> Iterator[list[pa.RecordBatch]]:
    """Group a stream into parts of exactly ``max_rows`` rows (the last may be shorter).

    Yields nothing for an empty stream; batches are sliced (zero-copy) at part boundaries.
    """
    part: list[pa.RecordBatch] = []
    rows = 0
    for batch in batches:
        offset = 0
        while offset < batch.num_rows:
            take = min(max_rows - rows, batch.num_rows - offset)
            part.append(batch.slice(offset, take))
            rows += take
            offset += take
            if rows == max_rows:
                yield part
                part, rows = [], 0
    if part:
        yield part
