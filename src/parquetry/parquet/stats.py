"""Per-file statistics of the record codec (Lode's ``FileStats``), computed with Arrow.

Min/max exist for ordered types only (not bool, not bytes); nulls and NaN are skipped, so
an all-null column has ``min = max = None``. Values have the decoded Python types
(``int``, ``float``, ``str``, ``datetime`` in UTC, ``date``, ``Decimal``); the JSON form
keeps them exact (timestamps as RFC 3339 ``Z`` strings, decimals as strings, non-finite
floats as ``"NaN"``/``"Infinity"``/``"-Infinity"``).
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from parquetry.parquet.schema import ParquetField, ParquetType

__all__ = ["ColumnStats", "FileStats", "compute_stats"]

_UTC = dt.UTC


@dataclass(frozen=True, slots=True, kw_only=True)
class ColumnStats:
    """Statistics of one column; ``distinct_count`` is reserved (always 0, as in Lode)."""

    name: str
    type: ParquetType
    min: Any = None
    max: Any = None
    null_count: int = 0
    distinct_count: int = 0

    def merge(self, other: ColumnStats) -> ColumnStats:
        """Statistics of both parts together (same column)."""
        return ColumnStats(
            name=self.name,
            type=self.type,
            min=_pick(min, self.min, other.min),
            max=_pick(max, self.max, other.max),
            null_count=self.null_count + other.null_count,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "type": self.type.to_json(),
            "min": _encode(self.min),
            "max": _encode(self.max),
            "null_count": self.null_count,
            "distinct_count": self.distinct_count,
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> ColumnStats:
        ptype = ParquetType.from_json(doc["type"])
        return cls(
            name=doc["name"],
            type=ptype,
            min=_decode(ptype, doc.get("min")),
            max=_decode(ptype, doc.get("max")),
            null_count=int(doc.get("null_count", 0)),
            distinct_count=int(doc.get("distinct_count", 0)),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class FileStats:
    """Row count and per-column statistics, columns in schema order."""

    row_count: int
    columns: tuple[ColumnStats, ...] = ()

    def column(self, name: str) -> ColumnStats:
        for stats in self.columns:
            if stats.name == name:
                return stats
        raise KeyError(name)

    def merge(self, other: FileStats) -> FileStats:
        return FileStats(
            row_count=self.row_count + other.row_count,
            columns=tuple(a.merge(b) for a, b in zip(self.columns, other.columns, strict=True)),
        )

    def to_json(self) -> dict[str, Any]:
        return {"row_count": self.row_count, "columns": [c.to_json() for c in self.columns]}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> FileStats:
        return cls(
            row_count=int(doc["row_count"]),
            columns=tuple(ColumnStats.from_json(c) for c in doc.get("columns", ())),
        )


def _pick(choose: Any, a: Any, b: Any) -> Any:
    if a is None:
        return b
    if b is None:
        return a
    return choose(a, b)


def _python(ptype: ParquetType, scalar: pa.Scalar) -> Any:
    value = scalar.as_py()
    if value is None:
        return None
    if ptype.kind == "timestamp":
        return value.replace(tzinfo=_UTC)
    if isinstance(value, float) and math.isnan(value):
        return None  # only NaN values: no ordered min/max
    return value


def compute_stats(fields: Sequence[ParquetField], table: pa.Table) -> FileStats:
    """Statistics of a table built by the codec (columns in ``fields`` order)."""
    columns = []
    for fld, column in zip(fields, table.columns, strict=True):
        low = high = None
        if fld.type.ordered and len(column) > column.null_count:
            extremes = pc.min_max(column)
            low = _python(fld.type, extremes["min"])
            high = _python(fld.type, extremes["max"])
        columns.append(
            ColumnStats(
                name=fld.name, type=fld.type, min=low, max=high, null_count=column.null_count
            )
        )
    return FileStats(row_count=table.num_rows, columns=tuple(columns))


def _encode(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return value.astimezone(_UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return value


def _decode(ptype: ParquetType, value: Any) -> Any:
    if value is None:
        return None
    kind = ptype.kind
    if kind == "timestamp":
        return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(_UTC)
    if kind == "date":
        return dt.date.fromisoformat(value)
    if kind == "decimal":
        return decimal.Decimal(value)
    if kind in ("float32", "float64"):
        return float(value)
    return value
