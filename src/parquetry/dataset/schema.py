"""Dataset schemas: kartothek's type normalisation, ``_common_metadata`` and payload casting.

A dataset has one schema (partition columns included). parquetry keeps it, with the user's
column order and types, in every version document; ``_common_metadata`` carries the
normalised schema in kartothek's column order with a ``pandas`` entry so kartothek 5.3.0 can
read *and update* the dataset.
"""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from parquetry.dataset.evolve import storable
from parquetry.errors import InvalidFormat, MetadataCorrupted, SchemaMismatch, out_of_memory
from parquetry.parquet.footer import footer_from_bytes
from parquetry.parquet.footer_check import check_plaintext_footer

__all__ = [
    "INDEX_LEVEL_PREFIX",
    "cast_to_schema",
    "check_required",
    "common_metadata_bytes",
    "kartothek_schema",
    "normalise_type",
    "read_common_metadata",
    "schema_from_b64",
    "schema_to_b64",
]

INDEX_LEVEL_PREFIX = "__index_level_"


def normalise_type(t: pa.DataType) -> pa.DataType:
    """kartothek's normalisation: widest int/uint/float, dictionaries as values, lists inside."""
    if pa.types.is_dictionary(t):
        return normalise_type(t.value_type)
    if pa.types.is_signed_integer(t):
        return pa.int64()
    if pa.types.is_unsigned_integer(t):
        return pa.uint64()
    if pa.types.is_floating(t):
        return pa.float64()
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return pa.string()
    if pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return pa.binary()
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return pa.list_(normalise_type(t.value_type))
    return t


def _pandas_types(t: pa.DataType) -> tuple[str, str, dict[str, object] | None]:
    """(pandas_type, numpy_type, metadata) as pyarrow's pandas_compat writes them."""
    if pa.types.is_boolean(t):
        return "bool", "bool", None
    if pa.types.is_integer(t) or pa.types.is_floating(t):
        name = {"double": "float64", "float": "float32", "halffloat": "float16"}.get(str(t), str(t))
        return name, name, None
    if pa.types.is_string(t):
        return "unicode", "object", None
    if pa.types.is_binary(t):
        return "bytes", "object", None
    if pa.types.is_timestamp(t):
        if t.tz is not None:
            return "datetimetz", "datetime64[ns]", {"timezone": t.tz}
        return "datetime", "datetime64[ns]", None
    if pa.types.is_date(t):
        return "date", "object", None
    if pa.types.is_decimal(t):
        return "decimal", "object", {"precision": t.precision, "scale": t.scale}
    if pa.types.is_list(t):
        inner, _, _ = _pandas_types(t.value_type)
        return f"list[{inner}]", "object", None
    if pa.types.is_null(t):
        return "empty", "object", None
    return "object", "object", None


def _pandas_metadata(schema: pa.Schema) -> bytes:
    columns = []
    for f in schema:
        pandas_type, numpy_type, meta = _pandas_types(f.type)
        columns.append(
            {
                "field_name": f.name,
                "metadata": meta,
                "name": f.name,
                "numpy_type": numpy_type,
                "pandas_type": pandas_type,
            }
        )
    doc = {
        "column_indexes": [
            {
                "field_name": None,
                "metadata": {"encoding": "UTF-8"},
                "name": None,
                "numpy_type": "object",
                "pandas_type": "unicode",
            }
        ],
        "columns": columns,
        "creator": {"library": "pyarrow", "version": pa.__version__},
        "index_columns": [{"kind": "range", "name": None, "start": 0, "step": 1, "stop": 0}],
        # The pandas release kartothek 5.3.0 is pinned with; readers only use it to decide
        # on pre-0.24 compatibility paths.
        "pandas_version": "1.3.5",
    }
    return json.dumps(doc).encode()


def kartothek_schema(schema: pa.Schema, partition_on: Sequence[str]) -> pa.Schema:
    """Normalised types in kartothek's order (partition keys, then the rest sorted) + pandas."""
    fields = {f.name: f for f in schema}
    names = list(partition_on) + sorted(n for n in fields if n not in partition_on)
    out = pa.schema([pa.field(n, normalise_type(fields[n].type)) for n in names])
    return out.with_metadata({b"pandas": _pandas_metadata(out)})


def common_metadata_bytes(schema: pa.Schema, partition_on: Sequence[str]) -> bytes:
    sink = io.BytesIO()
    pq.write_metadata(kartothek_schema(schema, partition_on), sink, coerce_timestamps="us")
    return sink.getvalue()


def read_common_metadata(data: bytes, key: str) -> pa.Schema:
    """The schema of a ``_common_metadata`` file, without pandas metadata or index columns."""
    try:
        # parquetry's reader checks the footer before pyarrow parses it (footer_check).
        check_plaintext_footer(footer_from_bytes(data, key), key)
        schema = pq.read_schema(pa.BufferReader(data))
    except InvalidFormat as exc:
        raise MetadataCorrupted(f"{key}: not a Parquet schema file: {exc}", key=key) from None
    except MemoryError as exc:
        raise out_of_memory(exc, f"reading schema file {key}", key=key) from None
    except (pa.ArrowException, OSError, ValueError) as exc:  # ValueError: bad UTF-8 names
        raise MetadataCorrupted(f"{key}: not a Parquet schema file: {exc}", key=key) from None
    keep = [f for f in schema if not f.name.startswith(INDEX_LEVEL_PREFIX)]
    return pa.schema(keep)


def schema_to_b64(schema: pa.Schema) -> str:
    return base64.b64encode(schema.remove_metadata().serialize().to_pybytes()).decode("ascii")


def schema_from_b64(text: str) -> pa.Schema:
    try:
        return pa.ipc.read_schema(pa.py_buffer(base64.b64decode(text)))
    except (ValueError, pa.ArrowInvalid) as exc:
        raise MetadataCorrupted(f"invalid schema in version document: {exc}") from None


def _first_lossy_row(column: pa.ChunkedArray, t: pa.DataType) -> int | None:
    """The first row whose value does not survive the cast to ``t`` unchanged."""
    there = column.cast(t, safe=False)
    back = there.cast(column.type, safe=False)
    changed = pc.not_equal(column, back)
    if pa.types.is_floating(column.type):
        # NaN is stored as NaN; any other value must come back exactly (no rounding).
        changed = pc.and_(changed, pc.invert(pc.is_nan(column)))
    changed = pc.fill_null(changed, False)
    rows = pc.indices_nonzero(changed.combine_chunks() if changed.num_chunks else changed)
    return rows[0].as_py() if len(rows) else None


def _show(value: pa.Scalar) -> str:
    try:
        return str(value.as_py()) if not pa.types.is_timestamp(value.type) else str(value)
    except (OverflowError, ValueError, pa.ArrowInvalid):  # beyond Python's datetime
        return f"{value.cast(pa.int64()).as_py()} {value.type.unit} since 1970"


def _cast_column(
    column: pa.ChunkedArray, t: pa.DataType, name: str, where: str, row_offset: int
) -> pa.ChunkedArray:
    if column.type == t:
        return column
    try:
        out = column.cast(t)
        # Arrow narrows floats silently, even 1e300 to inf.
        bad = _first_lossy_row(column, t) if pa.types.is_floating(column.type) else None
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        try:
            bad = _first_lossy_row(column, t)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            bad = None  # nested types: no row-wise comparison; report Arrow's reason
        if bad is None:
            raise SchemaMismatch(
                f"{where}: column {name!r} is {column.type}, the dataset has {t}: {exc}"
            ) from None
    if bad is None:
        return out
    value = _show(column[bad])
    raise SchemaMismatch(
        f"{where}: column {name!r} is {column.type}, the dataset has {t}: row "
        f"{row_offset + bad} holds {value}, which {t} cannot hold exactly"
    )


def _first_null(column: pa.ChunkedArray | pa.Array, field: pa.Field, path: str) -> str | None:
    """``path[row]`` of the first null where ``field`` (or a struct field in it) is required."""
    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if not field.nullable and arr.null_count:
        rows = pc.indices_nonzero(pc.is_null(arr))
        return f"column {path!r} is NOT NULL but row {rows[0].as_py()} is null"
    if pa.types.is_struct(field.type) and pa.types.is_struct(arr.type) and len(arr):
        valid = pc.is_valid(arr)
        for child in field.type:
            i = arr.type.get_field_index(child.name)
            if i < 0:
                continue  # not in the data: filled with nulls if nullable, else refused by type
            # A null struct has no field values to check.
            values = pc.filter(arr.field(i), valid) if arr.null_count else arr.field(i)
            found = _first_null(values, child, f"{path}.{child.name}")
            if found is not None:
                return found
    return None


def check_required(table: pa.Table, schema: pa.Schema, *, where: str, row_offset: int = 0) -> None:
    """Raise SchemaMismatch naming the column if a required (NOT NULL) field holds a null."""
    for f in schema:
        if f.name in table.column_names and (not f.nullable or pa.types.is_struct(f.type)):
            found = _first_null(table.column(f.name), f, f.name)
            if found is not None:
                raise SchemaMismatch(
                    f"{where}: {found} (rows counted from {row_offset}); nothing is written"
                )


def cast_to_schema(
    table: pa.Table,
    schema: pa.Schema,
    *,
    where: str,
    row_offset: int = 0,
    fill_missing: bool = False,
) -> pa.Table:
    """Select and cast ``table`` to ``schema`` (missing columns are an error).

    Types convert when the dataset's type holds every value exactly: integer and float
    widths (every value checked, floats must round-trip exactly), lossless widenings,
    string/binary kinds, dictionaries, structs by field name (missing nullable fields
    become null), timestamp units of one time zone (``timestamp[ns]`` into
    ``timestamp[us]`` when every value is a whole microsecond). A null in a required (NOT
    NULL) field is refused. Otherwise :class:`SchemaMismatch` names the column and the
    first offending row (counted from ``row_offset``) and value. ``fill_missing``: nullable
    columns the table lacks become nulls (a ``merge_schema`` write) instead of an error.
    """
    missing = [n for n in schema.names if n not in table.column_names]
    extra = [n for n in table.column_names if n not in schema.names]
    if fill_missing and not extra and all(schema.field(n).nullable for n in missing):
        for n in missing:
            table = table.append_column(
                schema.field(n), pa.nulls(table.num_rows, schema.field(n).type)
            )
        missing = []
    if missing or extra:
        raise SchemaMismatch(
            f"{where}: columns differ from the dataset schema (missing {missing}, "
            f"unexpected {extra})"
        )
    table = table.select(schema.names)
    check_required(table, schema, where=where, row_offset=row_offset)
    if table.schema.remove_metadata().equals(schema.remove_metadata()):
        return table
    for f in schema:
        have = table.schema.field(f.name).type
        if not storable(have, f.type):
            raise SchemaMismatch(f"{where}: column {f.name!r} is {have}, the dataset has {f.type}")
    try:
        columns = [
            _cast_column(table.column(i), f.type, f.name, where, row_offset)
            for i, f in enumerate(schema)
        ]
        return pa.Table.from_arrays(columns, schema=schema.remove_metadata())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise SchemaMismatch(f"{where}: cannot cast to the dataset schema: {exc}") from None
