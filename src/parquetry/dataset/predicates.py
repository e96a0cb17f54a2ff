"""Predicates in kartothek's disjunctive normal form, validated against a schema.

``[[(col, op, value), ...], ...]``: the outer list is OR, each inner list an AND of literals.
Operators: ``== != < <= > >= in`` plus ``is null`` / ``is not null``. Comparisons follow
SQL semantics: a null never satisfies a comparison; values a column cannot hold compare
exactly (:mod:`parquetry.dataset.literals`); floats follow Spark (NaN = NaN, NaN above
everything, -0.0 = 0.0). The same literal is evaluated in four places that must agree: on
typed partition values, on index values, on per-file statistics (may-match) and row by row
as an Arrow expression; index values and rows share one expression.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import math
from collections.abc import Iterable
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads

from parquetry.dataset.literals import Gap, compare, is_nan, representation
from parquetry.dataset.predicate_json import (  # the JSON form: re-exported
    dnf_from_json,
    dnf_to_json,
    json_value,
    value_from_json,
)
from parquetry.errors import PredicateError

__all__ = [
    "OPS",
    "DNF",
    "Literal",
    "dnf_from_json",
    "json_value",
    "value_from_json",
    "dnf_to_json",
    "eval_array",
    "eval_scalar",
    "eval_stats",
    "to_expression",
    "validate_predicates",
]

OPS = ("==", "!=", "<", "<=", ">", ">=", "in", "is null", "is not null")
_NULL_OPS = ("is null", "is not null")


@dataclass(frozen=True, slots=True, kw_only=True)
class Literal:
    """One ``(column, op, value)`` term; ``value`` is typed for the column (a tuple for in)."""

    column: str
    op: str
    value: Any
    type: pa.DataType

    def as_tuple(self) -> tuple[str, str, Any]:
        return (self.column, self.op, list(self.value) if self.op == "in" else self.value)


DNF = tuple[tuple[Literal, ...], ...]


def _type_error(col: str, op: str, value: Any, t: pa.DataType) -> PredicateError:
    return PredicateError(
        f"predicate ({col!r}, {op!r}, {value!r}): a value of type {type(value).__name__} "
        f"cannot be compared with column {col!r} of type {t}",
        column=col,
        op=op,
    )


def _unrepresentable(col: str, op: str, value: Any, t: pa.DataType, why: str) -> PredicateError:
    return PredicateError(
        f"predicate ({col!r}, {op!r}, {value!r}) on column {col!r} of type {t}: {why}",
        column=col,
        op=op,
    )


def _coerce(col: str, op: str, value: Any, t: pa.DataType) -> Any:
    """Check that a Python value fits the column type class; return it in canonical form."""
    bad = _type_error(col, op, value, t)
    if value is None:
        raise PredicateError(
            f"predicate ({col!r}, {op!r}, None): use 'is null' / 'is not null' for nulls",
            column=col,
            op=op,
        )
    if pa.types.is_boolean(t):
        if not isinstance(value, bool):
            raise bad
        return value
    if isinstance(value, bool):
        raise bad
    if pa.types.is_integer(t):
        if not isinstance(value, int):
            raise bad
        return value
    if pa.types.is_floating(t):
        if not isinstance(value, int | float):
            raise bad
        # An int stays exact: 2**53 + 1 or 10**400 compare exactly (see literals).
        return value
    if pa.types.is_decimal(t):
        if not isinstance(value, int | Decimal):
            raise bad
        if isinstance(value, Decimal) and value.is_nan():
            raise _unrepresentable(col, op, value, t, "NaN has no order among decimals")
        return Decimal(value)
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        if not isinstance(value, str):
            raise bad
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise _unrepresentable(
                col, op, value, t, "it is not valid Unicode (a lone surrogate)"
            ) from None
        return value
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        if not isinstance(value, bytes):
            raise bad
        return value
    if pa.types.is_timestamp(t):
        if not isinstance(value, dt.datetime):
            raise bad
        if t.tz is None and value.tzinfo is not None:
            try:
                return value.astimezone(dt.UTC).replace(tzinfo=None)
            except OverflowError:
                raise _unrepresentable(
                    col, op, value, t, "its UTC time is outside the supported years 1-9999"
                ) from None
        if t.tz is not None and value.tzinfo is None:
            return value.replace(tzinfo=dt.UTC)
        return value
    if pa.types.is_date(t):
        if isinstance(value, dt.datetime) or not isinstance(value, dt.date):
            raise bad
        return value
    raise PredicateError(
        f"predicate ({col!r}, {op!r}, ...): columns of type {t} cannot be filtered",
        column=col,
        op=op,
    )


def validate_predicates(predicates: Any, schema: pa.Schema) -> DNF | None:
    """Parse and type-check DNF predicates; ``None`` (no filter) stays ``None``."""
    if predicates is None:
        return None
    if not isinstance(predicates, list | tuple) or not predicates:
        raise PredicateError(f"predicates must be a non-empty list of lists, got {predicates!r}")
    out = []
    for conj in predicates:
        if not isinstance(conj, list | tuple) or not conj:
            raise PredicateError(f"each conjunction must be a non-empty list, got {conj!r}")
        lits = []
        for term in conj:
            if not isinstance(term, list | tuple) or len(term) not in (2, 3):
                raise PredicateError(f"a predicate term must be (column, op, value), got {term!r}")
            col, op = term[0], term[1]
            value = term[2] if len(term) == 3 else None
            if op not in OPS:
                raise PredicateError(
                    f"predicate on {col!r}: unknown operator {op!r} (one of {OPS})",
                    column=col,
                    op=op,
                )
            if col not in schema.names:
                raise PredicateError(
                    f"predicate on unknown column {col!r} (columns: {schema.names})",
                    column=col,
                    op=op,
                )
            t = schema.field(col).type
            if op in _NULL_OPS:
                typed: Any = None
            elif op == "in":
                if isinstance(value, str | bytes) or not isinstance(value, Iterable):
                    raise PredicateError(
                        f"predicate ({col!r}, 'in', {value!r}): value must be a list",
                        column=col,
                        op=op,
                    )
                typed = tuple(_coerce(col, op, v, t) for v in value)
            else:
                typed = _coerce(col, op, value, t)
            lits.append(Literal(column=col, op=op, value=typed, type=t))
        out.append(tuple(lits))
    return tuple(out)


def _normal(value: Any, t: pa.DataType) -> Any:
    """A typed Python value as the column holds it (float32 partition values are rounded)."""
    if pa.types.is_floating(t) and t.bit_width < 64 and isinstance(value, float):
        return pa.scalar(value, type=t).as_py()
    return value


def eval_scalar(lit: Literal, value: Any) -> bool:
    """Does a (typed) partition value satisfy the literal? ``None`` is a null."""
    if lit.op == "is null":
        return value is None
    if lit.op == "is not null":
        return value is not None
    if value is None:
        return False
    value = _normal(value, lit.type)
    if lit.op == "in":
        return any(compare("==", value, v) for v in lit.value)
    return compare(lit.op, value, lit.value)


def eval_array(lit: Literal, values: pa.Array) -> pa.Array:
    """Boolean mask of ``values`` satisfying the literal (nulls give false).

    Evaluates the same expression as the row filter, so index lookups and reads agree.
    """
    if values.type != lit.type:
        # Index files hold normalised types (int64 for an int8 column): compare in the
        # column's own type, whose range decides what an out-of-range value means.
        with contextlib.suppress(pa.ArrowInvalid, pa.ArrowNotImplementedError):
            values = values.cast(lit.type)
    table = pa.table({lit.column: values})
    mask = pads.dataset(table).to_table(
        columns={"mask": _literal_expression(lit)}, use_threads=False
    )
    return pc.fill_null(mask.column("mask").combine_chunks(), False)


def eval_stats(
    lit: Literal, lo: Any, hi: Any, nulls: int, rows: int, *, nan_unknown: bool = False
) -> bool:
    """May a file with these statistics hold a matching row? (``lo``/``hi`` None = unknown).

    ``nan_unknown``: the statistics may leave NaN out (Parquet footers do), so a float
    column may hold NaN, the greatest value, above ``hi``.
    """
    if lit.op == "is null":
        return nulls > 0
    nonnull = rows - nulls
    if lit.op == "is not null" or nonnull <= 0:
        return nonnull > 0
    if lo is None or hi is None:
        return True
    if nan_unknown and pa.types.is_floating(lit.type) and _nan_may_match(lit):
        hi = math.nan
    try:
        if lit.op == "==":
            return compare("<=", lo, lit.value) and compare("<=", lit.value, hi)
        if lit.op == "!=":
            return not (compare("==", lo, hi) and compare("==", lo, lit.value))
        if lit.op == "in":
            return any(compare("<=", lo, v) and compare("<=", v, hi) for v in lit.value)
        if lit.op in ("<", "<="):
            return compare(lit.op, lo, lit.value)
        return compare(lit.op, hi, lit.value)
    except TypeError:
        return True


def _nan_may_match(lit: Literal) -> bool:
    """Whether a NaN row may satisfy ``lit`` (NaN is the greatest float): not for ``==`` or
    ``in`` without a NaN value, so a footer leaving NaN out still excludes those (a point
    lookup in an index of many float pieces reads one, not every piece above the value)."""
    if lit.op == "==":
        return is_nan(lit.value)
    if lit.op == "in":
        return any(is_nan(v) for v in lit.value)
    return True


def _compare_expression(op: str, field: pc.Expression, value: pa.Scalar) -> pc.Expression:
    """``field op value`` for a representable non-null value, in Spark's float order."""
    floating = pa.types.is_floating(value.type)
    if floating and is_nan(value.as_py()):
        nan = pc.is_nan(field)
        return {
            "==": nan,
            "!=": field.is_valid() & ~nan,
            "<": field.is_valid() & ~nan,
            "<=": field.is_valid(),
            ">": pc.scalar(False),
            ">=": nan,
        }[op]
    expr: pc.Expression = {
        "==": field.__eq__,
        "!=": field.__ne__,
        "<": field.__lt__,
        "<=": field.__le__,
        ">": field.__gt__,
        ">=": field.__ge__,
    }[op](value)
    if floating and op in (">", ">="):
        # IEEE says NaN > x is false; Spark orders NaN above every value.
        expr = expr | pc.is_nan(field)
    return expr


def _gap_expression(op: str, field: pc.Expression, gap: Gap) -> pc.Expression:
    """``field op v`` for a value ``v`` strictly between two values of the column type."""
    if op == "==":
        return pc.scalar(False)
    if op == "!=":
        return field.is_valid()
    if op in ("<", "<="):
        return (
            pc.scalar(False) if gap.below is None else _compare_expression("<=", field, gap.below)
        )
    return pc.scalar(False) if gap.above is None else _compare_expression(">=", field, gap.above)


def _in_expression(lit: Literal, field: pc.Expression) -> pc.Expression:
    exact = [r for r in (representation(v, lit.type) for v in lit.value) if not isinstance(r, Gap)]
    floating = pa.types.is_floating(lit.type)
    # The scalars themselves, not their Python values: a timestamp of year 1 in a zone west
    # of UTC has no Python datetime (as_py raised a raw OverflowError).
    values: list[Any] = list(exact)
    nan = False
    if floating:
        # Arrow's is_in compares bit patterns: -0.0 misses 0.0, NaN matches NaN.
        values = [r.as_py() for r in exact]
        nan = any(is_nan(v) for v in values)
        values = [v for v in values if not is_nan(v)]
        if any(v == 0 for v in values):
            values += [0.0, -0.0]
    expr: pc.Expression = pc.scalar(False)
    if values:
        expr = field.isin(pa.array(values, type=lit.type))
    if nan:
        expr = expr | pc.is_nan(field)
    return expr


def _literal_expression(lit: Literal) -> pc.Expression:
    field = pc.field(lit.column)
    if pa.types.is_float16(lit.type):
        # Arrow has no float16 comparison kernels; float32 holds every float16 exactly.
        field = field.cast(pa.float32())
        lit = replace(lit, type=pa.float32())
    if lit.op == "is null":
        return field.is_null()
    if lit.op == "is not null":
        return field.is_valid()
    if lit.op == "in":
        return _in_expression(lit, field)
    rep = representation(lit.value, lit.type)
    if isinstance(rep, Gap):
        return _gap_expression(lit.op, field, rep)
    return _compare_expression(lit.op, field, rep)


def to_expression(dnf: DNF) -> pc.Expression:
    """The row filter of a DNF as an Arrow expression."""
    disjuncts = []
    for conj in dnf:
        expr = _literal_expression(conj[0])
        for lit in conj[1:]:
            expr = expr & _literal_expression(lit)
        disjuncts.append(expr)
    out = disjuncts[0]
    for expr in disjuncts[1:]:
        out = out | expr
    return out
