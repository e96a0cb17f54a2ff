"""Explicit record schemas for the record codec: types, fields, compression choices.

A :class:`ParquetSchema` is validated once (names non-empty and unique, types known) and
maps one-to-one onto an Arrow schema whose Parquet form every common reader understands:
timestamps are ``TIMESTAMP(MICROS, isAdjustedToUTC=true)``, dates ``DATE``, decimals
``DECIMAL(p, s)``.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import pyarrow as pa

from parquetry.errors import SchemaViolation

__all__ = ["ParquetCompression", "ParquetField", "ParquetSchema", "ParquetType"]

#: Largest precision a Parquet DECIMAL stored as decimal128 can hold.
MAX_DECIMAL_PRECISION = 38

#: The kinds without parameters (each also a constant: ``ParquetType.INT64`` ...).
SIMPLE_KINDS = (
    "int32",
    "int64",
    "float32",
    "float64",
    "string",
    "bool",
    "bytes",
    "timestamp",
    "date",
)


@dataclass(frozen=True, slots=True)
class ParquetType:
    """A column type of the record codec.

    Use the constants (``ParquetType.INT64`` ...) or ``ParquetType.DECIMAL(precision, scale)``.
    Building one by hand with an unknown ``kind`` is possible but rejected by
    :class:`ParquetCodec` with :class:`SchemaViolation` (Lode's "invalid type" rule).
    """

    kind: str
    precision: int | None = None
    scale: int | None = None

    INT32: ClassVar[ParquetType]
    INT64: ClassVar[ParquetType]
    FLOAT32: ClassVar[ParquetType]
    FLOAT64: ClassVar[ParquetType]
    STRING: ClassVar[ParquetType]
    BOOL: ClassVar[ParquetType]
    BYTES: ClassVar[ParquetType]
    TIMESTAMP: ClassVar[ParquetType]
    DATE: ClassVar[ParquetType]

    @staticmethod
    def DECIMAL(precision: int, scale: int = 0) -> ParquetType:
        """A fixed-point decimal with ``precision`` digits, ``scale`` of them after the point."""
        decimal_type = ParquetType("decimal", precision, scale)
        decimal_type.validate()
        return decimal_type

    def validate(self, field: str | None = None) -> None:
        """Raise :class:`SchemaViolation` unless this is a supported type."""
        where = f" of field {field!r}" if field is not None else ""
        if self.kind in SIMPLE_KINDS:
            if self.precision is not None or self.scale is not None:
                raise SchemaViolation(f"type {self.kind}{where} takes no precision", field=field)
            return
        if self.kind != "decimal":
            raise SchemaViolation(f"invalid type {self.kind!r}{where}", field=field)
        p, s = self.precision, self.scale
        if not _is_int(p) or not 1 <= p <= MAX_DECIMAL_PRECISION:  # type: ignore[operator]
            raise SchemaViolation(
                f"decimal precision{where} must be 1..{MAX_DECIMAL_PRECISION}, got {p!r}",
                field=field,
            )
        if not _is_int(s) or not 0 <= s <= p:  # type: ignore[operator]
            raise SchemaViolation(f"decimal scale{where} must be 0..{p}, got {s!r}", field=field)

    @property
    def ordered(self) -> bool:
        """Whether min/max statistics make sense (not for bool and bytes)."""
        return self.kind not in ("bool", "bytes")

    def arrow_type(self) -> pa.DataType:
        """The Arrow type the codec writes for this type."""
        if self.kind == "decimal":
            return pa.decimal128(self.precision, self.scale)
        return _ARROW_TYPES[self.kind]

    def __str__(self) -> str:
        if self.kind == "decimal":
            return f"decimal({self.precision},{self.scale})"
        return self.kind

    def to_json(self) -> str:
        return str(self)

    @classmethod
    def from_json(cls, text: str) -> ParquetType:
        """Parse ``"int64"``, ``"decimal(10,2)"``...; unknown names raise SchemaViolation."""
        text = text.strip().lower()
        if text.startswith("decimal(") and text.endswith(")"):
            parts = text[len("decimal(") : -1].split(",")
            try:
                return cls.DECIMAL(*(int(p) for p in parts))
            except (TypeError, ValueError):
                raise SchemaViolation(f"invalid decimal type {text!r}") from None
        parsed = cls(text)
        parsed.validate()
        return parsed


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


for _kind in SIMPLE_KINDS:
    setattr(ParquetType, _kind.upper(), ParquetType(_kind))

_ARROW_TYPES: dict[str, pa.DataType] = {
    "int32": pa.int32(),
    "int64": pa.int64(),
    "float32": pa.float32(),
    "float64": pa.float64(),
    "string": pa.string(),
    "bool": pa.bool_(),
    "bytes": pa.binary(),
    "timestamp": pa.timestamp("us", tz="UTC"),
    "date": pa.date32(),
}


@dataclass(frozen=True, slots=True)
class ParquetField:
    """One column: a name, a :class:`ParquetType`, and whether nulls are allowed."""

    name: str
    type: ParquetType
    nullable: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "type": self.type.to_json(), "nullable": self.nullable}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> ParquetField:
        return cls(
            str(doc["name"]), ParquetType.from_json(doc["type"]), bool(doc.get("nullable", False))
        )


@dataclass(frozen=True, slots=True)
class ParquetSchema:
    """An ordered list of fields. An empty schema is valid (it writes zero columns)."""

    fields: tuple[ParquetField, ...] = ()

    def __init__(self, fields: Sequence[ParquetField] = ()):
        object.__setattr__(self, "fields", tuple(fields))

    def validate(self) -> None:
        """Raise :class:`SchemaViolation` for a bad type, an empty or a duplicate name."""
        seen: set[str] = set()
        for position, fld in enumerate(self.fields):
            if not isinstance(fld, ParquetField):
                raise SchemaViolation(f"schema entry {position} is not a ParquetField: {fld!r}")
            if not isinstance(fld.name, str) or not fld.name:
                raise SchemaViolation(
                    f"field {position} has an empty or non-string name", field=str(fld.name)
                )
            if fld.name in seen:
                raise SchemaViolation(f"duplicate field name {fld.name!r}", field=fld.name)
            seen.add(fld.name)
            if not isinstance(fld.type, ParquetType):
                raise SchemaViolation(
                    f"invalid type {fld.type!r} of field {fld.name!r}", field=fld.name
                )
            fld.type.validate(fld.name)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.fields)

    def arrow_schema(self) -> pa.Schema:
        """The Arrow schema the codec writes (non-nullable fields are Parquet ``required``)."""
        return pa.schema(
            [pa.field(f.name, f.type.arrow_type(), nullable=f.nullable) for f in self.fields]
        )

    def to_json(self) -> dict[str, Any]:
        return {"fields": [f.to_json() for f in self.fields]}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> ParquetSchema:
        """Parse ``{"fields": [{"name": ..., "type": ..., "nullable": ...}, ...]}``.

        Raises:
            SchemaViolation: a malformed document (naming the entry at fault), or a schema
                :meth:`validate` rejects.
        """
        if not isinstance(doc, Mapping) or not isinstance(doc.get("fields", []), list):
            raise SchemaViolation('a schema document is {"fields": [...]}')
        fields = []
        for position, entry in enumerate(doc.get("fields", [])):
            if not isinstance(entry, Mapping) or not isinstance(entry.get("type"), str):
                raise SchemaViolation(
                    f"schema field {position} must be an object with a name and a type string, "
                    f"got {entry!r}"
                )
            if not isinstance(entry.get("name"), str) or not isinstance(
                entry.get("nullable", False), bool
            ):
                raise SchemaViolation(
                    f"schema field {position} needs a string name and a boolean nullable, "
                    f"got {entry!r}"
                )
            fields.append(ParquetField.from_json(entry))
        schema = cls(fields)
        schema.validate()
        return schema


class ParquetCompression(enum.Enum):
    """Compression of the codec's column chunks (Lode's three plus zstd and lz4)."""

    NONE = "none"
    SNAPPY = "snappy"
    GZIP = "gzip"
    ZSTD = "zstd"
    LZ4 = "lz4"
