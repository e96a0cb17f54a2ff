"""Reading planned files: payload columns from Parquet, typed partition columns restored.

Payload files may use any type whose normalised form matches the schema (kartothek writes
int32 payloads under an int64 schema), may carry pandas ``__index_level_N__`` columns, and
old pyarrow files may hold UTC-adjusted timestamps; everything is cast to the dataset
schema. Row groups are pruned with the footer statistics through the row filter.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.parquet as pq

from parquetry.dataset.plan import PlannedFile, ScanPlan
from parquetry.dataset.predicates import to_expression
from parquetry.errors import MetadataCorrupted, NotFound, SchemaMismatch
from parquetry.store import Store

__all__ = ["read_planned_file", "read_plan"]

#: Files read concurrently at a time (bounded memory: one table per file in flight).
READ_BATCH_FILES = 64


def _cast_column(arr: pa.ChunkedArray, t: pa.DataType, name: str, key: str) -> pa.ChunkedArray:
    if arr.type == t:
        return arr
    utc_adjusted = pa.types.is_timestamp(arr.type) and arr.type.tz is not None
    if utc_adjusted and pa.types.is_timestamp(t) and t.tz is None:
        # Old pyarrow wrote isAdjustedToUTC timestamps for naive data: same instant.
        arr = arr.cast(pa.timestamp(arr.type.unit, tz="UTC")).cast(pa.timestamp(arr.type.unit))
    try:
        return arr.cast(t)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise SchemaMismatch(
            f"{key}: column {name!r} is {arr.type}, the dataset has {t}: {exc}", key=key
        ) from None


def read_planned_file(
    store: Store,
    schema: pa.Schema,
    planned: PlannedFile,
    *,
    columns: Sequence[str] | None = None,
    row_filter: pc.Expression | None = None,
    filter_columns: Sequence[str] = (),
) -> pa.Table:
    """One file as a table with ``schema`` (projected to ``columns``), filtered by rows."""
    names = list(columns) if columns is not None else schema.names
    partition = dict(planned.partition)
    wanted = set(names)
    wanted |= set(filter_columns)
    payload_names = [n for n in schema.names if n in wanted and n not in partition]
    try:
        f = store.open(planned.key, size=planned.size)
        pf = pq.ParquetFile(f)
    except NotFound:
        raise MetadataCorrupted(
            f"data file {planned.key} of partition {planned.label!r} is missing", key=planned.key
        ) from None
    available = [n for n in payload_names if n in pf.schema_arrow.names]
    missing = [n for n in payload_names if n not in available]
    table = pf.read(columns=available, use_threads=False)
    arrays: dict[str, Any] = {}
    n = table.num_rows
    for name in schema.names:
        if name not in wanted:
            continue
        t = schema.field(name).type
        if name in partition:
            arrays[name] = pa.chunked_array([pa.repeat(pa.scalar(partition[name], type=t), n)])
        elif name in missing:
            arrays[name] = pa.chunked_array([pa.nulls(n, type=t)], type=t)
        else:
            arrays[name] = _cast_column(table.column(name), t, name, planned.key)
    fields = [schema.field(k) for k in arrays]
    out = pa.table(list(arrays.values()), schema=pa.schema(fields))
    if row_filter is not None:
        out = pads.dataset(out).to_table(filter=row_filter)
    return out.select(names)


def read_plan(
    store: Store, schema: pa.Schema, plan: ScanPlan, columns: Sequence[str] | None
) -> Iterator[pa.Table]:
    """The planned files' rows matching the plan's predicates, file by file, in plan order."""
    expr = to_expression(plan.predicates) if plan.predicates else None
    filter_columns = sorted({lit.column for conj in plan.predicates or () for lit in conj})

    def read(planned: PlannedFile) -> pa.Table:
        return read_planned_file(
            store,
            schema,
            planned,
            columns=columns,
            row_filter=expr,
            filter_columns=filter_columns,
        )

    for i in range(0, len(plan.files), READ_BATCH_FILES):
        yield from store.map_concurrent(read, plan.files[i : i + READ_BATCH_FILES])
