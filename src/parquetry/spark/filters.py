"""Spark pushed filters -> parquetry DNF predicates (for planning) and exact row filters.

Spark trusts every filter a reader accepts and drops it from the plan, so a filter is accepted
only when it can be evaluated row by row with exactly Spark's semantics (nulls never match,
strings compare bytewise). Accepted filters are (a) turned into a DNF conjunction that the
planner uses to skip partitions and files (a superset of the matching files) and (b) applied
to every batch read. Anything else is returned to Spark as a residual filter.

Not used by the reader on Spark 4.1-4.3: there a reader's accepted filters leak into other
scans of the same relation (see :mod:`parquetry.spark.reader` and docs/spark.md), so the
reader takes no filters. Kept, with its tests, for a Spark whose reads are scan-scoped.

Floating-point comparisons stay with Spark: Spark orders NaN above every number and treats
NaN = NaN as true, Arrow does not.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.types as pat
from pyspark.sql.datasource import (
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringContains,
    StringEndsWith,
    StringStartsWith,
)

__all__ = ["Pushdown", "filter_mask", "filter_table", "translate_filters"]

Conjunction = list[tuple[str, str, Any]]

_COMPARISONS: dict[type[Filter], str] = {
    EqualTo: "==",
    GreaterThan: ">",
    GreaterThanOrEqual: ">=",
    LessThan: "<",
    LessThanOrEqual: "<=",
}
_ARROW_COMPARE = {
    "==": pc.equal,
    "!=": pc.not_equal,
    ">": pc.greater,
    ">=": pc.greater_equal,
    "<": pc.less,
    "<=": pc.less_equal,
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Pushdown:
    """The outcome of translating Spark's pushed filters against one dataset schema."""

    accepted: tuple[Filter, ...]
    residual: tuple[Filter, ...]
    predicates: tuple[tuple[str, str, Any], ...]

    def dnf(self) -> list[Conjunction] | None:
        """The planning predicates as kartothek DNF, or ``None`` when nothing prunes."""
        return [list(self.predicates)] if self.predicates else None


def _column_type(schema: pa.Schema, path: tuple[str, ...]) -> pa.DataType | None:
    if len(path) != 1 or path[0] not in schema.names:
        return None
    arrow_type = schema.field(path[0]).type
    return arrow_type.value_type if pat.is_dictionary(arrow_type) else arrow_type


def _orderable(arrow_type: pa.DataType) -> bool:
    """Types whose comparisons Arrow evaluates exactly like Spark (not floats: NaN)."""
    return bool(
        pat.is_integer(arrow_type)
        or pat.is_string(arrow_type)
        or pat.is_large_string(arrow_type)
        or pat.is_binary(arrow_type)
        or pat.is_large_binary(arrow_type)
        or pat.is_boolean(arrow_type)
        or pat.is_date(arrow_type)
        or pat.is_timestamp(arrow_type)
        or pat.is_decimal(arrow_type)
    )


def _literal(value: Any, arrow_type: pa.DataType) -> Any:
    """``value`` as a Python value of the column type, or ``None`` if not exactly representable."""
    if value is None or isinstance(value, float):
        return None
    if isinstance(value, bool) != pat.is_boolean(arrow_type):
        return None
    if isinstance(value, bytearray):
        value = bytes(value)
    if isinstance(value, datetime.datetime) and pat.is_timestamp(arrow_type):
        if value.tzinfo is None:
            value = value.replace(tzinfo=datetime.UTC)
        value = value.astimezone(datetime.UTC)
        if arrow_type.tz is None:
            value = value.replace(tzinfo=None)
    elif isinstance(value, datetime.datetime) or (
        isinstance(value, datetime.date) and not pat.is_date(arrow_type)
    ):
        return None
    if isinstance(value, Decimal) and not pat.is_decimal(arrow_type):
        return None
    try:
        scalar = pa.scalar(value, type=arrow_type)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
        return None
    result = scalar.as_py()
    return result if result == value else None


def _next_prefix(prefix: str) -> str | None:
    """The smallest string greater than every string starting with ``prefix``."""
    for i in range(len(prefix) - 1, -1, -1):
        code = ord(prefix[i])
        if code < 0x10FFFF and not 0xD7FF <= code < 0xE000:
            return prefix[:i] + chr(code + 1)
    return None


def _translate_one(f: Filter, schema: pa.Schema) -> list[tuple[str, str, Any]] | None:
    """The planning predicates for one filter, or None if it is not exactly evaluable."""
    inner = f.child if isinstance(f, Not) else f
    path: tuple[str, ...] = tuple(getattr(inner, "attribute", ()))
    arrow_type = _column_type(schema, path)
    if arrow_type is None:
        return None
    col = path[0]
    if isinstance(f, IsNull) or (isinstance(f, EqualNullSafe) and f.value is None):
        return [(col, "is null", None)]
    if isinstance(f, IsNotNull):
        return [(col, "is not null", None)]
    if not _orderable(arrow_type):
        return None
    is_string = pat.is_string(arrow_type) or pat.is_large_string(arrow_type)
    if isinstance(f, Not):
        if isinstance(inner, EqualTo):
            value = _literal(inner.value, arrow_type)
            return None if value is None else [(col, "!=", value)]
        return None
    if isinstance(f, EqualNullSafe):
        value = _literal(f.value, arrow_type)
        return None if value is None else [(col, "==", value)]
    if type(f) in _COMPARISONS:
        value = _literal(f.value, arrow_type)  # type: ignore[attr-defined]
        return None if value is None else [(col, _COMPARISONS[type(f)], value)]
    if isinstance(f, In):
        values = [_literal(v, arrow_type) for v in f.value if v is not None]
        if any(v is None for v in values):
            return None
        return [(col, "in", sorted(set(values)))] if values else None
    if isinstance(f, StringStartsWith) and is_string:
        bounds: list[tuple[str, str, Any]] = [(col, ">=", f.value)]
        upper = _next_prefix(f.value)
        return [*bounds, (col, "<", upper)] if upper is not None else bounds
    if isinstance(f, StringEndsWith | StringContains) and is_string:
        return [(col, "is not null", None)]
    return None


def translate_filters(filters: Sequence[Filter], schema: pa.Schema) -> Pushdown:
    """Split Spark's pushed filters into accepted (with planning predicates) and residual.

    Args:
        filters: what Spark passes to ``DataSourceReader.pushFilters`` (AND-ed).
        schema: the dataset's Arrow schema, partition columns included.
    """
    accepted: list[Filter] = []
    residual: list[Filter] = []
    predicates: list[tuple[str, str, Any]] = []
    for f in filters:
        translated = _translate_one(f, schema)
        if translated is None:
            residual.append(f)
        else:
            accepted.append(f)
            predicates.extend(p for p in translated if p not in predicates)
    return Pushdown(
        accepted=tuple(accepted), residual=tuple(residual), predicates=tuple(predicates)
    )


def _scalar(value: Any, column: pa.ChunkedArray | pa.Array) -> pa.Scalar:
    arrow_type = column.type.value_type if pat.is_dictionary(column.type) else column.type
    return pa.scalar(_literal(value, arrow_type), type=arrow_type)


def filter_mask(f: Filter, table: pa.Table) -> pa.ChunkedArray | pa.Array:
    """Spark's truth value of an accepted filter over ``table`` (null means "no match")."""
    inner = f.child if isinstance(f, Not) else f
    column = table.column(inner.attribute[0])  # type: ignore[attr-defined]
    if pat.is_dictionary(column.type):
        column = pc.cast(column, column.type.value_type)
    if isinstance(f, Not):
        return pc.not_equal(column, _scalar(inner.value, column))  # type: ignore[attr-defined]
    if isinstance(f, IsNull) or (isinstance(f, EqualNullSafe) and f.value is None):
        return pc.is_null(column)
    if isinstance(f, IsNotNull):
        return pc.is_valid(column)
    if isinstance(f, EqualNullSafe):
        return pc.fill_null(pc.equal(column, _scalar(f.value, column)), False)
    if type(f) in _COMPARISONS:
        op = _ARROW_COMPARE[_COMPARISONS[type(f)]]
        return op(column, _scalar(f.value, column))  # type: ignore[attr-defined]
    if isinstance(f, In):
        values = pa.array(
            [_literal(v, column.type) for v in f.value if v is not None], type=column.type
        )
        return pc.is_in(column, value_set=values, skip_nulls=True)
    if isinstance(f, StringStartsWith):
        return pc.starts_with(column, f.value)
    if isinstance(f, StringEndsWith):
        return pc.ends_with(column, f.value)
    if isinstance(f, StringContains):
        return pc.match_substring(column, f.value)
    raise TypeError(f"filter {f!r} was not accepted for pushdown")


def filter_table(table: pa.Table, filters: Sequence[Filter]) -> pa.Table:
    """Keep the rows of ``table`` for which every accepted filter is true."""
    if not filters or table.num_rows == 0:
        return table
    mask = filter_mask(filters[0], table)
    for f in filters[1:]:
        mask = pc.and_kleene(mask, filter_mask(f, table))
    return table.filter(mask, null_selection_behavior="drop")
