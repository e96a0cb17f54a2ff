"""Arrow <-> Spark type mapping, and casting Arrow data to exactly what Spark expects.

Spark 4.2+ compares the Arrow schema of a data source's first batch with
``to_arrow_schema(schema, timezone="UTC")`` using ``Schema.equals``: the types, the nested field
names (``element``, ``key``/``value``) and the nullability must all match, so every batch is
cast to :func:`spark_to_arrow_schema` of the declared schema.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.types as pat
from pyspark.sql import types as st

from parquetry.errors import SchemaMismatch

__all__ = [
    "arrow_to_spark_schema",
    "arrow_to_spark_type",
    "cast_to_spark",
    "normalize_written",
    "spark_to_arrow_schema",
    "spark_to_arrow_type",
    "utc_schema",
]

_SIMPLE_TO_SPARK: tuple[tuple[object, st.DataType], ...] = (
    (pat.is_boolean, st.BooleanType()),
    (pat.is_int8, st.ByteType()),
    (pat.is_int16, st.ShortType()),
    (pat.is_int32, st.IntegerType()),
    (pat.is_int64, st.LongType()),
    (pat.is_uint8, st.ShortType()),
    (pat.is_uint16, st.IntegerType()),
    (pat.is_uint32, st.LongType()),
    (pat.is_float16, st.FloatType()),
    (pat.is_float32, st.FloatType()),
    (pat.is_float64, st.DoubleType()),
    (pat.is_string, st.StringType()),
    (pat.is_large_string, st.StringType()),
    (pat.is_binary, st.BinaryType()),
    (pat.is_large_binary, st.BinaryType()),
    (pat.is_fixed_size_binary, st.BinaryType()),
    (pat.is_date, st.DateType()),
    (pat.is_null, st.NullType()),
)


def arrow_to_spark_type(arrow_type: pa.DataType, *, name: str = "") -> st.DataType:
    """The Spark type holding values of ``arrow_type``.

    Timezone-aware timestamps become ``TimestampType``, naive ones ``TimestampNTZType`` (what
    Spark's own Parquet reader does for ``isAdjustedToUTC=false``); dictionaries become their
    value type; ``uint64`` becomes ``decimal(20,0)``.

    Raises:
        SchemaMismatch: the type has no Spark equivalent (``name`` says which column).
    """
    if isinstance(arrow_type, pa.ExtensionType):
        return arrow_to_spark_type(arrow_type.storage_type, name=name)
    if pat.is_dictionary(arrow_type):
        return arrow_to_spark_type(arrow_type.value_type, name=name)
    for test, spark_type in _SIMPLE_TO_SPARK:
        if test(arrow_type):  # type: ignore[operator]
            return spark_type
    if pat.is_uint64(arrow_type):
        return st.DecimalType(20, 0)
    if pat.is_decimal(arrow_type):
        if arrow_type.precision > 38:
            raise SchemaMismatch(f"column {name!r}: {arrow_type} exceeds Spark's decimal(38)")
        return st.DecimalType(arrow_type.precision, arrow_type.scale)
    if pat.is_timestamp(arrow_type):
        return st.TimestampType() if arrow_type.tz is not None else st.TimestampNTZType()
    if pat.is_duration(arrow_type):
        return st.DayTimeIntervalType()
    if (
        pat.is_list(arrow_type)
        or pat.is_large_list(arrow_type)
        or pat.is_fixed_size_list(arrow_type)
    ):
        element = arrow_to_spark_type(arrow_type.value_type, name=f"{name}.element")
        return st.ArrayType(element, containsNull=True)
    if pat.is_map(arrow_type):
        key = arrow_to_spark_type(arrow_type.key_type, name=f"{name}.key")
        value = arrow_to_spark_type(arrow_type.item_type, name=f"{name}.value")
        return st.MapType(key, value, valueContainsNull=True)
    if pat.is_struct(arrow_type):
        children = [arrow_type.field(i) for i in range(arrow_type.num_fields)]
        fields = [
            st.StructField(c.name, arrow_to_spark_type(c.type, name=f"{name}.{c.name}"), True)
            for c in children
        ]
        return st.StructType(fields)
    raise SchemaMismatch(f"column {name!r}: Arrow type {arrow_type} has no Spark equivalent")


def arrow_to_spark_schema(schema: pa.Schema) -> st.StructType:
    """The Spark schema of a dataset; every field nullable (Spark reads data as nullable)."""
    return st.StructType(
        [
            st.StructField(field.name, arrow_to_spark_type(field.type, name=field.name), True)
            for field in schema
        ]
    )


def spark_to_arrow_type(spark_type: st.DataType) -> pa.DataType:
    """The Arrow type Spark exchanges for ``spark_type`` (timestamps in µs, UTC)."""
    simple: dict[type[st.DataType], pa.DataType] = {
        st.BooleanType: pa.bool_(),
        st.ByteType: pa.int8(),
        st.ShortType: pa.int16(),
        st.IntegerType: pa.int32(),
        st.LongType: pa.int64(),
        st.FloatType: pa.float32(),
        st.DoubleType: pa.float64(),
        st.StringType: pa.string(),
        st.BinaryType: pa.binary(),
        st.DateType: pa.date32(),
        st.TimestampType: pa.timestamp("us", tz="UTC"),
        st.TimestampNTZType: pa.timestamp("us"),
        st.DayTimeIntervalType: pa.duration("us"),
        st.NullType: pa.null(),
    }
    for spark_class, arrow_type in simple.items():
        if isinstance(spark_type, spark_class):
            return arrow_type
    if isinstance(spark_type, st.DecimalType):
        return pa.decimal128(spark_type.precision, spark_type.scale)
    if isinstance(spark_type, st.ArrayType):
        element = spark_to_arrow_type(spark_type.elementType)
        return pa.list_(pa.field("element", element, nullable=spark_type.containsNull))
    if isinstance(spark_type, st.MapType):
        return pa.map_(
            pa.field("key", spark_to_arrow_type(spark_type.keyType), nullable=False),
            pa.field(
                "value",
                spark_to_arrow_type(spark_type.valueType),
                nullable=spark_type.valueContainsNull,
            ),
        )
    if isinstance(spark_type, st.StructType):
        return pa.struct(
            [
                pa.field(f.name, spark_to_arrow_type(f.dataType), nullable=f.nullable)
                for f in spark_type.fields
            ]
        )
    raise SchemaMismatch(f"Spark type {spark_type.simpleString()} is not supported by parquetry")


def spark_to_arrow_schema(schema: st.StructType) -> pa.Schema:
    """The exact Arrow schema Spark expects for batches of ``schema``."""
    return pa.schema(
        [pa.field(f.name, spark_to_arrow_type(f.dataType), nullable=f.nullable) for f in schema]
    )


def _decode_dictionaries(array: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    if pat.is_dictionary(array.type):
        return pc.cast(array, array.type.value_type)
    return array


def cast_to_spark(table: pa.Table, target: pa.Schema) -> pa.Table:
    """Cast ``table`` to ``target`` (from :func:`spark_to_arrow_schema`), columns by name.

    Timestamps are truncated to µs (Spark's precision) and moved to UTC; dictionaries decoded.

    Raises:
        SchemaMismatch: a target column is missing or a column cannot be cast.
    """
    columns = []
    for field in target:
        if field.name not in table.column_names:
            raise SchemaMismatch(f"column {field.name!r} is missing from the data read")
        column = _decode_dictionaries(table.column(field.name))
        if column.type != field.type:
            try:
                column = pc.cast(
                    column,
                    options=pc.CastOptions(
                        field.type, allow_time_truncate=True, allow_time_overflow=False
                    ),
                )
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                raise SchemaMismatch(
                    f"column {field.name!r}: cannot cast {column.type} to Spark's {field.type}: "
                    f"{exc}"
                ) from exc
        columns.append(column)
    return pa.Table.from_arrays(columns, schema=target)


def _storable(arrow_type: pa.DataType) -> pa.DataType:
    if pat.is_timestamp(arrow_type) and arrow_type.tz not in (None, "UTC"):
        return pa.timestamp(arrow_type.unit, tz="UTC")
    if pat.is_list(arrow_type):
        return pa.list_(_storable_field(arrow_type.value_field))
    if pat.is_map(arrow_type):
        return pa.map_(arrow_type.key_field, _storable_field(arrow_type.item_field))
    if pat.is_struct(arrow_type):
        return pa.struct(
            [_storable_field(arrow_type.field(i)) for i in range(arrow_type.num_fields)]
        )
    return arrow_type


def _storable_field(field: pa.Field) -> pa.Field:
    return field.with_type(_storable(field.type)).with_nullable(True)


def utc_schema(schema: pa.Schema) -> pa.Schema:
    """The schema parquetry stores for data Spark hands over: zoned timestamps in UTC, and
    nested fields nullable (Spark marks a struct's children non-null even where the struct
    itself is null, which Parquet writers reject)."""
    fields = [field.with_type(_storable(field.type)) for field in schema]
    return pa.schema(fields, metadata=schema.metadata)


def normalize_written(batch: pa.RecordBatch) -> pa.RecordBatch:
    """Normalise a batch Spark hands to a writer: timestamps with a zone are stored in UTC."""
    target = utc_schema(batch.schema)
    return batch if target.equals(batch.schema) else batch.cast(target)
