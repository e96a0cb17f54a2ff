"""Row-level ``delete_where`` and ``update_where`` on the rewrite engine.

Both take a kartothek DNF predicate (``[[(column, op, value), ...], ...]``, validated by
:func:`parquetry.dataset.predicates.validate_predicates`; a null never satisfies a
comparison, only ``is null``). The candidates are the files ``Dataset.plan`` keeps
(partition values, secondary indices and statistics prune the rest, unread). Each
candidate is handed to :func:`parquetry.dataset.rewrite.rewrite_files`, which reads one
file at a time and commits once (memory, conflicts and failures: see there).

- ``delete_where``: a candidate whose partition values alone satisfy one conjunction
  (every literal of it on a partition key) loses all its rows: it is dropped **unread**.
  Others are read; a file without matches stays, a file with some is rewritten with the
  others, a file whose rows all match is dropped. Operation ``delete``.
- ``update_where``: matching rows get the ``set`` values, every ``set`` value evaluated on
  the row as it was (like SQL ``UPDATE ... SET a = b, b = a``). A value is a Python value
  or a pyarrow scalar, cast strictly to the column type, or a ``pyarrow.compute``
  expression over the old row, cast strictly per file. An unknown column, a lossy cast, a
  null into a non-nullable column or an invalid expression is refused **before any
  write**, naming the column (an expression's value overflowing on some row is found
  while rewriting: nothing is committed then, and the files written so far are
  deleted). Updating a **partition key moves the rows** to their new partition (written as
  new files there; the old file is rewritten without them). Operation ``update_where``.

Neither commits when nothing matches (the same version is returned).
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads

from parquetry.dataset.commit import MAX_RETRIES
from parquetry.dataset.predicates import DNF, eval_scalar, validate_predicates
from parquetry.dataset.replace import describe_dnf
from parquetry.dataset.rewrite import (
    CONCURRENCY,
    FileEdit,
    Progress,
    RewritePlan,
    RewriteResult,
    plan_rewrite,
    rewrite,
)
from parquetry.dataset.rowmask import RowMask
from parquetry.dataset.staleread import base_reads
from parquetry.errors import InvalidArgument, SchemaMismatch, UnknownColumn
from parquetry.parquet import WriteOptions

if TYPE_CHECKING:
    from parquetry.dataset.dataset import Dataset

# The per-file decisions (required_dnf ... set_parameter) are shared with the Spark engine
# (parquetry.spark.operations), so both engines give the same rows and parameters.
__all__ = [
    "CONCURRENCY",
    "RowMask",
    "checked_set",
    "delete_edit",
    "delete_targets",
    "delete_where",
    "dnf_as_tuples",
    "plan_delete",
    "plan_update",
    "required_dnf",
    "set_parameter",
    "update_edit",
    "update_where",
]


def required_dnf(ds: Dataset, predicates: Any, what: str) -> DNF:
    """``predicates`` validated against the schema; None is refused (operation ``what``)."""
    if predicates is None:
        raise InvalidArgument(
            f"{what} on dataset {ds.uuid!r} needs a predicate (kartothek DNF); to remove "
            "every row, say so: e.g. [[(<column>, 'is null')], [(<column>, 'is not null')]]"
        )
    dnf = validate_predicates(predicates, ds.schema)
    assert dnf is not None
    return dnf


def dnf_as_tuples(dnf: DNF) -> list[list[tuple[Any, ...]]]:
    """``dnf`` in kartothek's tuple form (what ``Dataset.plan`` takes)."""
    return [[lit.as_tuple() for lit in conj] for conj in dnf]


# --- delete ------------------------------------------------------------------------------


def delete_targets(ds: Dataset, dnf: DNF) -> tuple[list[str], list[str], int]:
    """(labels to read, labels to drop unread, rows of the dropped)."""
    keys = set(ds.partition_keys)
    whole = [conj for conj in dnf if all(lit.column in keys for lit in conj)]
    read: list[str] = []
    drop: list[str] = []
    dropped_rows = 0
    for planned in ds.plan(dnf_as_tuples(dnf)).files:
        values = dict(planned.partition)
        matches_all = any(all(eval_scalar(lit, values.get(lit.column)) for lit in c) for c in whole)
        if matches_all and planned.rows is not None:
            drop.append(planned.label)
            dropped_rows += planned.rows
        else:
            read.append(planned.label)  # rows unknown (written by kartothek): read to count
    return read, drop, dropped_rows


def delete_edit(dnf: DNF) -> Any:
    """The per-file edit of a delete: drop the rows matching ``dnf``."""
    row_mask = RowMask(dnf)

    def edit(label: str, table: pa.Table) -> FileEdit | None:
        mask = row_mask(table)
        hits = mask.true_count
        if not hits:
            return None
        keep = table.filter(pc.invert(mask)) if hits < table.num_rows else None
        return FileEdit(label, keep, rows_removed=hits)

    return edit


def plan_delete(
    ds: Dataset,
    predicates: Any,
    *,
    progress: Progress | None = None,
    concurrency: int = CONCURRENCY,
) -> RewritePlan:
    """What :func:`delete_where` would do (reads the partly matching files, writes nothing)."""
    dnf = required_dnf(ds, predicates, "delete_where")
    with base_reads(ds, "delete_where"):
        read, drop, dropped_rows = delete_targets(ds, dnf)
    return plan_rewrite(
        ds,
        read,
        delete_edit(dnf),
        drop=drop,
        metrics=_delete_metrics(dropped_rows),
        progress=progress,
        concurrency=concurrency,
    )


def _delete_metrics(dropped_rows: int) -> dict[str, int]:
    return {"rows_deleted": dropped_rows, "rows_copied": 0, "files_rewritten": 0}


def delete_where(
    ds: Dataset,
    predicates: Any,
    *,
    write_options: WriteOptions | None = None,
    parameters: Mapping[str, Any] | None = None,
    max_retries: int | None = MAX_RETRIES,
    progress: Progress | None = None,
    concurrency: int = CONCURRENCY,
) -> RewriteResult:
    """The body of :meth:`Dataset.delete_where` (see the module docstring)."""
    dnf = required_dnf(ds, predicates, "delete_where")
    with base_reads(ds, "delete_where"):
        read, drop, dropped_rows = delete_targets(ds, dnf)
    return rewrite(
        ds,
        read,
        delete_edit(dnf),
        drop=drop,
        operation="delete",
        parameters={"predicate": describe_dnf(dnf), **(parameters or {})},
        metrics=_delete_metrics(dropped_rows),
        write_options=write_options,
        max_retries=max_retries,
        progress=progress,
        concurrency=concurrency,
    )


# --- update ------------------------------------------------------------------------------


def _same(value: Any, back: Any, t: pa.DataType) -> bool:
    """Whether the typed ``back`` holds ``value`` without loss (floats: rounding to the
    column's precision is fine, overflow to infinity is not)."""
    if pa.types.is_floating(t) and isinstance(value, float):
        return math.isnan(value) or math.isinf(value) or not math.isinf(back)
    if isinstance(value, dt.datetime) and isinstance(back, dt.datetime):
        if value.tzinfo is not None and back.tzinfo is None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        elif value.tzinfo is None and back.tzinfo is not None:
            value = value.replace(tzinfo=dt.UTC)
    if isinstance(back, str | bytes) and type(value) is not type(back):
        return False  # bytes into a string column or the reverse: no implicit decoding
    return bool(back == value)


def _strict_scalar(ds: Dataset, column: str, value: Any) -> pa.Scalar:
    field = ds.schema.field(column)
    problem = None
    try:
        if isinstance(value, pa.Scalar):
            typed = value.cast(field.type, safe=True)
        else:
            typed = pa.scalar(value, type=field.type)
            if value is not None and not _same(value, typed.as_py(), field.type):
                problem = f"it would be stored as {typed.as_py()!r}"
    except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
        problem = str(exc)
    if problem is not None:
        raise SchemaMismatch(
            f"update_where on dataset {ds.uuid!r}: value {value!r} for column {column!r} does "
            f"not fit its type {field.type} without loss: {problem}"
        )
    if not typed.is_valid and not field.nullable:
        raise SchemaMismatch(
            f"update_where on dataset {ds.uuid!r}: column {column!r} is not nullable; "
            "it cannot be set to null"
        )
    return typed


def _evaluate(ds: Dataset, column: str, expr: pc.Expression, table: pa.Table) -> pa.Array:
    """``expr`` on every row of ``table``, cast strictly to ``column``'s type."""
    field = ds.schema.field(column)
    try:
        out = pads.dataset(table).to_table(columns={"v": expr}, use_threads=False).column("v")
        values = out.combine_chunks().cast(field.type, safe=True)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
        raise SchemaMismatch(
            f"update_where on dataset {ds.uuid!r}: the expression {expr} for column "
            f"{column!r} cannot give its type {field.type}: {exc}"
        ) from None
    return values


def _family(t: pa.DataType) -> str:
    for name, test in (
        ("integer", pa.types.is_integer),
        ("floating", pa.types.is_floating),
        ("decimal", pa.types.is_decimal),
    ):
        if test(t):
            return name
    return str(t)


def _check_expression(ds: Dataset, column: str, expr: pc.Expression, empty: pa.Table) -> None:
    """Refuse, before any write, an expression with unknown references or whose result
    type cannot be the column's: it must widen to it or be a number of the same family
    (integer into integer or float, float into float, decimal into decimal), where only a
    value out of range fails, on the row, while rewriting."""
    from parquetry.dataset.evolve import widens

    target = ds.schema.field(column).type
    try:
        got = pads.dataset(empty).to_table(columns={"v": expr}, use_threads=False)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
        raise SchemaMismatch(
            f"update_where on dataset {ds.uuid!r}: the expression {expr} for column "
            f"{column!r} cannot be evaluated: {exc}"
        ) from None
    t = got.schema.field("v").type
    numeric = {_family(t), _family(target)} <= {"integer", "floating", "decimal"}
    same = _family(t) == _family(target) or (_family(t) == "integer" and numeric)
    if not (widens(t, target) or (numeric and same)):
        raise SchemaMismatch(
            f"update_where on dataset {ds.uuid!r}: the expression {expr} for column "
            f"{column!r} gives {t}, which does not fit its type {target} without loss"
        )


def checked_set(ds: Dataset, assignments: Mapping[str, Any]) -> dict[str, Any]:
    """The ``set`` mapping validated against the schema (raises before any write)."""
    if not isinstance(assignments, Mapping) or not assignments:
        raise InvalidArgument(
            f"update_where on dataset {ds.uuid!r} needs set={{column: value}}, got {assignments!r}"
        )
    out: dict[str, Any] = {}
    empty = ds.schema.empty_table()
    for column, value in assignments.items():
        if not isinstance(column, str) or column not in ds.schema.names:
            raise UnknownColumn(
                f"update_where on dataset {ds.uuid!r}: column {column!r} is not in the "
                f"schema {ds.schema.names}",
                column=str(column),
            )
        if isinstance(value, pc.Expression):
            _check_expression(ds, column, value, empty)
            out[column] = value
        else:
            out[column] = _strict_scalar(ds, column, value)
    return out


def update_edit(ds: Dataset, dnf: DNF, assignments: Mapping[str, Any]) -> Any:
    """The per-file edit of an update: ``assignments`` (:func:`checked_set`) on matches."""
    row_mask = RowMask(dnf)

    def edit(label: str, table: pa.Table) -> FileEdit | None:
        mask = row_mask(table)
        hits = mask.true_count
        if not hits:
            return None
        new = table
        for column, value in assignments.items():
            if isinstance(value, pc.Expression):
                value = _evaluate(ds, column, value, table)  # on the old row, as SQL does
            old = table.column(column).combine_chunks()
            updated = pc.if_else(mask, value, old)
            if not ds.schema.field(column).nullable and updated.null_count:
                raise SchemaMismatch(
                    f"update_where on dataset {ds.uuid!r}: the new value of non-nullable "
                    f"column {column!r} is null on some row of {label!r}; nothing is committed"
                )
            new = new.set_column(new.schema.get_field_index(column), column, updated)
        return FileEdit(label, new, rows_updated=hits)

    return edit


def set_parameter(assignments: Mapping[str, Any]) -> str:
    """The ``set`` operation parameter recorded in the history (JSON, sorted)."""
    shown = {
        c: str(v) if isinstance(v, pc.Expression) else repr(v.as_py())
        for c, v in assignments.items()
    }
    return json.dumps(shown, sort_keys=True)


def plan_update(
    ds: Dataset,
    predicates: Any,
    set: Mapping[str, Any],
    *,
    progress: Progress | None = None,
    concurrency: int = CONCURRENCY,
) -> RewritePlan:
    """What :func:`update_where` would do (reads the candidate files, writes nothing)."""
    dnf = required_dnf(ds, predicates, "update_where")
    assignments = checked_set(ds, set)
    with base_reads(ds, "update_where"):
        labels = [f.label for f in ds.plan(dnf_as_tuples(dnf)).files]
    edit = update_edit(ds, dnf, assignments)
    return plan_rewrite(ds, labels, edit, progress=progress, concurrency=concurrency)


def update_where(
    ds: Dataset,
    predicates: Any,
    set: Mapping[str, Any],
    *,
    write_options: WriteOptions | None = None,
    parameters: Mapping[str, Any] | None = None,
    max_retries: int | None = MAX_RETRIES,
    progress: Progress | None = None,
    concurrency: int = CONCURRENCY,
) -> RewriteResult:
    """The body of :meth:`Dataset.update_where` (see the module docstring)."""
    dnf = required_dnf(ds, predicates, "update_where")
    assignments = checked_set(ds, set)
    with base_reads(ds, "update_where"):
        labels = [f.label for f in ds.plan(dnf_as_tuples(dnf)).files]
    return rewrite(
        ds,
        labels,
        update_edit(ds, dnf, assignments),
        operation="update_where",
        parameters={
            "predicate": describe_dnf(dnf),
            "set": set_parameter(assignments),
            **(parameters or {}),
        },
        metrics={"rows_updated": 0, "rows_copied": 0, "files_rewritten": 0},
        write_options=write_options,
        max_retries=max_retries,
        progress=progress,
        concurrency=concurrency,
    )
