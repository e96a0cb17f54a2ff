"""Arrow <-> Spark type mapping agrees with what Spark itself checks."""

from __future__ import annotations

import datetime
from decimal import Decimal

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs
from pyspark.sql import types as st
from pyspark.sql.pandas.types import to_arrow_schema

from parquetry.errors import SchemaMismatch
from parquetry.spark.types import (
    arrow_to_spark_schema,
    arrow_to_spark_type,
    cast_to_spark,
    spark_to_arrow_schema,
)

_ATOMS = [
    st.BooleanType(), st.ByteType(), st.ShortType(), st.IntegerType(), st.LongType(),
    st.FloatType(), st.DoubleType(), st.StringType(), st.BinaryType(), st.DateType(),
    st.TimestampType(), st.TimestampNTZType(), st.DecimalType(10, 2), st.DecimalType(38, 0),
]  # fmt: skip


def _spark_types() -> hs.SearchStrategy[st.DataType]:
    return hs.recursive(
        hs.sampled_from(_ATOMS),
        lambda inner: hs.one_of(
            hs.builds(st.ArrayType, inner, hs.booleans()),
            hs.builds(st.MapType, hs.sampled_from(_ATOMS[:10]), inner, hs.booleans()),
            hs.lists(inner, min_size=1, max_size=3).map(
                lambda ts: st.StructType(
                    [st.StructField(f"f{i}", t, i % 2 == 0) for i, t in enumerate(ts)]
                )
            ),
        ),
        max_leaves=6,
    )


@settings(max_examples=80, deadline=None)
@given(hs.lists(hs.tuples(_spark_types(), hs.booleans()), min_size=1, max_size=4))
def test_spark_to_arrow_matches_what_spark_compares(fields: list[tuple[st.DataType, bool]]) -> None:
    schema = st.StructType([st.StructField(f"c{i}", t, n) for i, (t, n) in enumerate(fields)])
    assert spark_to_arrow_schema(schema).equals(to_arrow_schema(schema, timezone="UTC"))


@pytest.mark.parametrize(
    ("arrow_type", "spark_type"),
    [
        (pa.large_string(), st.StringType()),
        (pa.dictionary(pa.int32(), pa.string()), st.StringType()),
        (pa.timestamp("ns", tz="Europe/Madrid"), st.TimestampType()),
        (pa.timestamp("ms"), st.TimestampNTZType()),
        (pa.uint64(), st.DecimalType(20, 0)),
        (pa.binary(16), st.BinaryType()),
        (pa.large_list(pa.int32()), st.ArrayType(st.IntegerType(), True)),
        (pa.map_(pa.string(), pa.float64()), st.MapType(st.StringType(), st.DoubleType(), True)),
    ],
)
def test_arrow_to_spark_type(arrow_type: pa.DataType, spark_type: st.DataType) -> None:
    assert arrow_to_spark_type(arrow_type) == spark_type


def test_unsupported_type_names_the_column() -> None:
    with pytest.raises(SchemaMismatch, match=r"'c\.element'"):
        arrow_to_spark_type(pa.list_(pa.time32("s")), name="c")


def test_cast_gives_exactly_spark_schema_for_awkward_arrow_data() -> None:
    table = pa.table(
        {
            "s": pa.array(["a", None, "b"]).dictionary_encode(),
            "l": pa.array(["x", "y", None], pa.large_string()),
            "ts": pa.array([1, 2, None], pa.timestamp("ns", tz="Europe/Madrid")),
            "ntz": pa.array([datetime.datetime(2020, 1, 1)] * 3, pa.timestamp("ns")),
            "n": pa.array([[1], [], None], pa.large_list(pa.field("x", pa.int32(), False))),
            "m": pa.array([[("k", 1.5)], None, []], pa.map_(pa.string(), pa.float64())),
            "d": pa.array([Decimal("1.25"), None, Decimal("0")], pa.decimal128(5, 2)),
            "st": pa.array([{"a": 1, "b": "x"}] * 3),
        }
    )
    spark_schema = arrow_to_spark_schema(table.schema)
    target = spark_to_arrow_schema(spark_schema)
    cast = cast_to_spark(table, target)
    assert cast.schema.equals(to_arrow_schema(spark_schema, timezone="UTC"))
    assert cast.column("s").to_pylist() == ["a", None, "b"]
    assert cast.column("n").to_pylist() == [[1], [], None]
    assert cast.column("ts").to_pylist()[2] is None


def test_cast_reports_missing_column() -> None:
    target = pa.schema([pa.field("x", pa.int64())])
    with pytest.raises(SchemaMismatch, match="'x'"):
        cast_to_spark(pa.table({"y": [1]}), target)
