"""Predicates in kartothek's disjunctive normal form, validated against a schema.

``[[(col, op, value), ...], ...]``: the outer list is OR, each inner list an AND of literals.
Operators: ``== != < <= > >= in`` plus ``is null`` / ``is not null``. Comparisons follow
Arrow (SQL) semantics: a null never satisfies a comparison. The same literal is evaluated
in four places that must agree: on typed partition values, on index values, on per-file
statistics (may-match) and row by row as an Arrow expression.
"""

from __future__ import annotations

import base64
import datetime as dt
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

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
        return float(value)
    if pa.types.is_decimal(t):
        if not isinstance(value, int | Decimal):
            raise bad
        return Decimal(value)
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        if not isinstance(value, str):
            raise bad
        return value
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        if not isinstance(value, bytes):
            raise bad
        return value
    if pa.types.is_timestamp(t):
        if not isinstance(value, dt.datetime):
            raise bad
        if t.tz is None and value.tzinfo is not None:
            return value.astimezone(dt.UTC).replace(tzinfo=None)
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


def _cmp(op: str, a: Any, b: Any) -> bool:
    if op == "==":
        return bool(a == b)
    if op == "!=":
        return bool(a != b)
    if op == "<":
        return bool(a < b)
    if op == "<=":
        return bool(a <= b)
    if op == ">":
        return bool(a > b)
    return bool(a >= b)


def eval_scalar(lit: Literal, value: Any) -> bool:
    """Does a (non-null, typed) partition value satisfy the literal?"""
    if lit.op == "is null":
        return value is None
    if lit.op == "is not null":
        return value is not None
    if value is None:
        return False
    if lit.op == "in":
        return value in lit.value
    return _cmp(lit.op, value, lit.value)


def _scalar(value: Any, t: pa.DataType) -> pa.Scalar:
    return pa.scalar(value, type=t)


def eval_array(lit: Literal, values: pa.Array) -> pa.Array:
    """Boolean mask of ``values`` satisfying the literal (nulls give false)."""
    if lit.op == "is null":
        return pc.is_null(values)
    if lit.op == "is not null":
        return pc.is_valid(values)
    if lit.op == "in":
        return pc.is_in(values, value_set=pa.array(list(lit.value), type=values.type))
    fn = {
        "==": pc.equal,
        "!=": pc.not_equal,
        "<": pc.less,
        "<=": pc.less_equal,
        ">": pc.greater,
        ">=": pc.greater_equal,
    }[lit.op]
    return pc.fill_null(fn(values, _scalar(lit.value, values.type)), False)


def eval_stats(lit: Literal, lo: Any, hi: Any, nulls: int, rows: int) -> bool:
    """May a file with these statistics hold a matching row? (``lo``/``hi`` None = unknown)."""
    if lit.op == "is null":
        return nulls > 0
    nonnull = rows - nulls
    if lit.op == "is not null" or nonnull <= 0:
        return nonnull > 0
    if lo is None or hi is None:
        return True
    try:
        if lit.op == "==":
            return bool(lo <= lit.value <= hi)
        if lit.op == "!=":
            return not (lo == hi == lit.value)
        if lit.op == "in":
            return any(lo <= v <= hi for v in lit.value)
        if lit.op in ("<", "<="):
            return _cmp(lit.op, lo, lit.value)
        return _cmp(lit.op, hi, lit.value)
    except TypeError:
        return True


def _literal_expression(lit: Literal) -> pc.Expression:
    field = pc.field(lit.column)
    if lit.op == "is null":
        return field.is_null()
    if lit.op == "is not null":
        return field.is_valid()
    if lit.op == "in":
        if not lit.value:
            return pc.scalar(False)
        return field.isin(pa.array(list(lit.value), type=lit.type))
    value = _scalar(lit.value, lit.type)
    ops = {
        "==": field.__eq__,
        "!=": field.__ne__,
        "<": field.__lt__,
        "<=": field.__le__,
        ">": field.__gt__,
        ">=": field.__ge__,
    }
    expr: pc.Expression = ops[lit.op](value)
    return expr


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


def json_value(v: Any) -> Any:
    if isinstance(v, bool | int | float | str) or v is None:
        return v
    if isinstance(v, bytes):
        return {"bytes": base64.b64encode(v).decode("ascii")}
    if isinstance(v, Decimal):
        return {"decimal": str(v)}
    if isinstance(v, dt.datetime):
        return {"datetime": v.isoformat()}
    if isinstance(v, dt.date):
        return {"date": v.isoformat()}
    if isinstance(v, list | tuple):
        return [json_value(x) for x in v]
    raise PredicateError(f"predicate value {v!r} of type {type(v).__name__} is not supported")


def value_from_json(v: Any) -> Any:
    if isinstance(v, list):
        return [value_from_json(x) for x in v]
    if isinstance(v, dict):
        ((kind, text),) = v.items()
        decoders: dict[str, Callable[[str], Any]] = {
            "bytes": base64.b64decode,
            "decimal": Decimal,
            "datetime": dt.datetime.fromisoformat,
            "date": dt.date.fromisoformat,
        }
        return decoders[kind](text)
    return v


def dnf_to_json(predicates: Sequence[Sequence[Sequence[Any]]]) -> list[list[list[Any]]]:
    """Raw DNF predicates as JSON-able lists (typed values tagged: bytes, date, ...)."""
    return [[[t[0], t[1], json_value(t[2] if len(t) > 2 else None)] for t in c] for c in predicates]


def dnf_from_json(doc: Any) -> list[list[tuple[str, str, Any]]]:
    try:
        return [[(t[0], t[1], value_from_json(t[2])) for t in c] for c in doc]
    except (TypeError, IndexError, KeyError, ValueError) as exc:
        raise PredicateError(f"invalid predicates document: {exc}") from None
