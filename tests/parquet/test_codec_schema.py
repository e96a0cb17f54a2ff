"""Schema construction rules of the record codec (Lode tests 1, 14-17, plus DECIMAL/DATE)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from parquetry.codec import (
    ParquetCodec,
    ParquetCompression,
    ParquetField,
    ParquetSchema,
    ParquetType,
    SchemaViolation,
)
from parquetry.errors import ParquetryError


def test_empty_schema_is_valid_and_named_parquet() -> None:
    codec = ParquetCodec(ParquetSchema())
    assert codec.name == "parquet"
    assert codec.compression is ParquetCompression.SNAPPY


@pytest.mark.parametrize(
    "bad_type",
    [999, -1, "int64", None, ParquetType("int128"), ParquetType("int64", precision=3)],
)
def test_invalid_type_is_a_schema_violation(bad_type: object) -> None:
    with pytest.raises(SchemaViolation) as info:
        ParquetCodec(ParquetSchema([ParquetField("x", bad_type)]))  # type: ignore[arg-type]
    assert info.value.field == "x"
    assert isinstance(info.value, ParquetryError)


def test_empty_name_is_a_schema_violation() -> None:
    with pytest.raises(SchemaViolation, match="empty"):
        ParquetCodec(ParquetSchema([ParquetField("", ParquetType.INT64)]))


def test_duplicate_name_is_a_schema_violation() -> None:
    schema = ParquetSchema(
        [ParquetField("id", ParquetType.INT64), ParquetField("id", ParquetType.STRING)]
    )
    with pytest.raises(SchemaViolation, match="duplicate") as info:
        ParquetCodec(schema)
    assert info.value.field == "id"


@pytest.mark.parametrize(("precision", "scale"), [(0, 0), (39, 0), (5, 6), (5, -1), (True, 0)])
def test_invalid_decimal_is_rejected(precision: int, scale: int) -> None:
    with pytest.raises(SchemaViolation):
        ParquetType.DECIMAL(precision, scale)


def test_decimal_and_date_types_map_to_arrow() -> None:
    schema = ParquetSchema(
        [
            ParquetField("d", ParquetType.DECIMAL(38, 10)),
            ParquetField("day", ParquetType.DATE, nullable=True),
            ParquetField("ts", ParquetType.TIMESTAMP),
        ]
    )
    arrow = schema.arrow_schema()
    assert str(arrow.field("d").type) == "decimal128(38, 10)"
    assert str(arrow.field("day").type) == "date32[day]"
    assert str(arrow.field("ts").type) == "timestamp[us, tz=UTC]"
    assert not arrow.field("d").nullable
    assert arrow.field("day").nullable


def test_schema_json_round_trip() -> None:
    schema = ParquetSchema(
        [
            ParquetField("a", ParquetType.DECIMAL(12, 3), nullable=True),
            ParquetField("b", ParquetType.TIMESTAMP),
        ]
    )
    assert ParquetSchema.from_json(schema.to_json()) == schema
    assert ParquetType.from_json("decimal(12,3)") == ParquetType.DECIMAL(12, 3)
    with pytest.raises(SchemaViolation):
        ParquetType.from_json("decimal(x,1)")


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ([], "a schema document is"),
        ({"fields": "id"}, "a schema document is"),
        ({"fields": [{"name": "id"}]}, "schema field 0 must be an object with a name and a type"),
        ({"fields": ["id"]}, "schema field 0 must be an object"),
        ({"fields": [{"type": "int64"}]}, "schema field 0 needs a string name"),
        ({"fields": [{"name": "a", "type": "int64", "nullable": "no"}]}, "boolean nullable"),
        ({"fields": [{"name": "a", "type": "int99"}]}, "invalid type 'int99'"),
        ({"fields": [{"name": "a", "type": "int64"}, {"name": "a", "type": "bool"}]}, "duplicate"),
    ],
)
def test_malformed_schema_documents_are_violations(document: Any, message: str) -> None:
    with pytest.raises(SchemaViolation, match=re.escape(message)):
        ParquetSchema.from_json(document)
