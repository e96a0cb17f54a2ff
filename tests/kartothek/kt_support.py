"""Helpers shared by the kartothek compatibility tests: frames for the driver, an oracle, rows.

Rows travel as tuples in a fixed column order; values are canonical Python objects (int, float,
bool, str, bytes, date, naive datetime, None) so rows read by kartothek (pandas) and by parquetry
(Arrow) compare equal when they hold the same data.
"""

from __future__ import annotations

import base64
import datetime as dt
import operator
from collections.abc import Callable, Iterable, Sequence
from typing import Any
from urllib.parse import unquote

import pyarrow as pa

Row = tuple[Any, ...]
Predicates = list[list[tuple[str, str, Any]]]


def encode(value: Any) -> Any:
    """Python value -> the driver's tagged JSON."""
    if isinstance(value, dt.datetime):
        # naive UTC: kartothek 5.3.0's row-group pushdown raises comparing a tz-aware value
        # with footer statistics ("Cannot compare tz-naive and tz-aware timestamps"), even on
        # datasets it wrote itself; naive values are taken as UTC on tz-aware columns.
        return {"$ts": _naive_utc(value).isoformat()}
    if isinstance(value, dt.date):
        return {"$date": value.isoformat()}
    if isinstance(value, bytes):
        return {"$bytes": base64.b64encode(value).decode("ascii")}
    if isinstance(value, list | tuple):
        return [encode(v) for v in value]
    return value


def decode(value: Any) -> Any:
    """The driver's tagged JSON -> Python value (timestamps naive UTC)."""
    if isinstance(value, dict):
        if "$date" in value:
            return dt.date.fromisoformat(value["$date"])
        if "$ts" in value:
            parsed = dt.datetime.fromisoformat(value["$ts"])
            if parsed.tzinfo is not None:
                parsed = parsed.astimezone(dt.UTC).replace(tzinfo=None)
            return parsed
        if "$bytes" in value:
            return base64.b64decode(value["$bytes"])
    return value


_DRIVER_TYPES: list[tuple[Callable[[pa.DataType], bool], str]] = [
    (lambda t: t == pa.int64(), "int64"),
    (lambda t: t == pa.int32(), "int32"),
    (lambda t: t == pa.int16(), "int16"),
    (lambda t: t == pa.int8(), "int8"),
    (lambda t: t == pa.uint16(), "uint16"),
    (lambda t: t == pa.uint64(), "uint64"),
    (lambda t: t == pa.float32(), "float32"),
    (pa.types.is_floating, "float64"),
    (pa.types.is_boolean, "bool"),
    (lambda t: pa.types.is_string(t) or pa.types.is_large_string(t), "string"),
    (pa.types.is_dictionary, "category"),
    (pa.types.is_binary, "bytes"),
    (pa.types.is_date, "date"),
    (lambda t: pa.types.is_timestamp(t) and t.tz is None, "timestamp"),
    (lambda t: pa.types.is_timestamp(t) and t.tz is not None, "timestamp_utc"),
]


def driver_type(t: pa.DataType) -> str:
    for matches, name in _DRIVER_TYPES:
        if matches(t):
            return name
    raise TypeError(f"no kt_driver column type for {t}")


def frame(table: pa.Table) -> dict[str, Any]:
    """A pa.Table as a kt_driver frame spec."""
    schema = [[f.name, driver_type(f.type)] for f in table.schema]
    rows = [[encode(v) for v in row.values()] for row in table.to_pylist()]
    return {"schema": schema, "rows": rows}


def canonical(value: Any, t: pa.DataType) -> Any:
    """One value as the oracle holds it, given the column's logical type."""
    if value is None:
        return None
    if isinstance(value, float) and value != value:
        return None
    if pa.types.is_integer(t):
        # pandas turns an int column with nulls into float64
        return int(value)
    if pa.types.is_floating(t):
        return float(value)
    if pa.types.is_boolean(t):
        return bool(value)
    if pa.types.is_timestamp(t) and isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.UTC).replace(tzinfo=None)
    if pa.types.is_date(t) and isinstance(value, dt.datetime):
        return value.date()
    return value


def rows_of_table(table: pa.Table, columns: Sequence[str], schema: pa.Schema) -> list[Row]:
    """Sorted canonical rows of an Arrow table (e.g. what parquetry read)."""
    missing = [c for c in columns if c not in table.column_names]
    assert not missing, f"columns {missing} missing from {table.column_names}"
    data = table.select(list(columns)).to_pylist()
    return sort_rows(tuple(canonical(r[c], schema.field(c).type) for c in columns) for r in data)


def rows_of_kartothek(
    result: dict[str, Any], columns: Sequence[str], schema: pa.Schema
) -> list[Row]:
    """Sorted canonical rows of a kt_driver ``read`` result."""
    names = result["columns"]
    missing = [c for c in columns if c not in names]
    assert not missing, f"columns {missing} missing from kartothek's result {names}"
    positions = [names.index(c) for c in columns]
    return sort_rows(
        tuple(
            canonical(decode(row[p]), schema.field(c).type)
            for p, c in zip(positions, columns, strict=True)
        )
        for row in result["rows"]
    )


def _sort_key(row: Row) -> tuple[Any, ...]:
    return tuple((v is None, str(type(v)), v if v is not None else 0) for v in row)


def sort_rows(rows: Iterable[Row]) -> list[Row]:
    return sorted(rows, key=_sort_key)


_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


def _naive_utc(value: Any) -> Any:
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.UTC).replace(tzinfo=None)
    return value


def _literal(row: dict[str, Any], column: str, op: str, value: Any) -> bool:
    cell = row[column]
    value = [_naive_utc(v) for v in value] if op == "in" else _naive_utc(value)
    if op == "is null":
        return cell is None
    if op == "is not null":
        return cell is not None
    if cell is None:
        return False
    if op == "in":
        return cell in list(value)
    return _OPS[op](cell, value)


def oracle(
    rows: Sequence[dict[str, Any]],
    predicates: Predicates | None,
    columns: Sequence[str],
    schema: pa.Schema,
) -> list[Row]:
    """Rows (dicts of canonical values) satisfying DNF ``predicates``, as sorted tuples.

    Every comparison with a null cell is false (the tests avoid ``!=`` on nullable columns,
    where pandas and SQL semantics differ).
    """
    kept = [
        r
        for r in rows
        if predicates is None or any(all(_literal(r, *lit) for lit in conj) for conj in predicates)
    ]
    return sort_rows(tuple(canonical(r[c], schema.field(c).type) for c in columns) for r in kept)


def canonical_records(table: pa.Table) -> list[dict[str, Any]]:
    return [
        {k: canonical(v, table.schema.field(k).type) for k, v in r.items()}
        for r in table.to_pylist()
    ]


def label_partition(label: str) -> tuple[tuple[str, str], ...]:
    """``k=v`` components of a partition label, unquoted as kartothek does."""
    pairs = []
    for component in label.split("/")[:-1]:
        if component.count("=") == 1:
            k, v = component.split("=")
            pairs.append((unquote(k), unquote(v)))
    return tuple(pairs)


def to_driver_predicates(predicates: Predicates | None) -> Any:
    if predicates is None:
        return None
    return [[[c, op, encode(v)] for c, op, v in conj] for conj in predicates]


def to_driver_scope(scope: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{c: encode(v) for c, v in item.items()} for item in scope]


def check_index(
    inspected: dict[str, Any],
    records: Sequence[dict[str, Any]],
    schema: pa.Schema,
    columns: Sequence[str],
    cell: Sequence[str] = ("country", "year"),
) -> None:
    """kartothek's view of each secondary index (kt_driver ``inspect``): value -> exactly the
    partition cells holding it, no null entry, no label outside the dataset."""
    assert sorted(inspected["indices"]) == sorted(columns), "secondary indices kartothek sees"
    labels = set(inspected["partitions"])
    for column in columns:
        index = inspected["indices"][column]
        assert index["dtype"] == str(schema.field(column).type), column
        got: dict[Any, set[tuple[str, ...]]] = {}
        for value, value_labels in index["values"]:
            assert set(value_labels) <= labels, f"{column} index: {value!r} names unknown labels"
            got[decode(value)] = {tuple(v for _, v in label_partition(lb)) for lb in value_labels}
        want: dict[Any, set[tuple[str, ...]]] = {}
        for r in records:
            if r[column] is not None:
                want.setdefault(r[column], set()).add(tuple(str(r[c]) for c in cell))
        assert got == want, f"kartothek's view of the {column!r} index"
