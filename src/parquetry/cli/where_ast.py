"""The ``--where`` expression tree, its SQL printer and its exact conversion to DNF.

See :mod:`parquetry.cli.where` for the grammar and the three-valued logic these keep.
"""

from __future__ import annotations

import datetime as dt
import decimal
import re
from dataclasses import dataclass
from typing import TypeAlias

from parquetry.errors import PredicateError

Scalar: TypeAlias = int | float | str | bool | dt.date | dt.datetime | decimal.Decimal
Literal3: TypeAlias = tuple[str, str, object]
DNF: TypeAlias = list[list[Literal3]]

#: Expressions whose DNF would exceed this many conjunctions are refused, not expanded.
MAX_CONJUNCTIONS = 256

IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

KEYWORDS = frozenset(
    {"and", "or", "not", "in", "is", "null", "true", "false", "date", "timestamp", "decimal"}
)
CMP_OPS = {
    "=": "==",
    "==": "==",
    "!=": "!=",
    "<>": "!=",
    "<": "<",
    "<=": "<=",
    ">": ">",
    ">=": ">=",
}
_NEGATED = {"==": "!=", "!=": "==", "<": ">=", "<=": ">", ">": "<=", ">=": "<"}


class WhereSyntaxError(PredicateError):
    """A ``--where`` expression that does not parse; ``position`` is a 0-based offset."""

    def __init__(self, message: str, *, expression: str, position: int):
        super().__init__(f"{message} at column {position + 1}")
        self.expression = expression
        self.position = position

    def caret_lines(self) -> list[str]:
        """The expression and a caret under the offending token (for a terminal)."""
        return [self.expression, " " * self.position + "^"]


# --- the expression tree -------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Comparison:
    """``column op value`` with op one of ``== != < <= > >=``."""

    column: str
    op: str
    value: Scalar


@dataclass(frozen=True, slots=True, kw_only=True)
class InList:
    """``column [not] in (v1, v2, ...)``; never empty."""

    column: str
    values: tuple[Scalar, ...]
    negated: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class IsNull:
    """``column is [not] null``."""

    column: str
    negated: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Not:
    operand: Expr


@dataclass(frozen=True, slots=True, kw_only=True)
class And:
    """Two or more operands, none of them an :class:`And` (the parser flattens chains)."""

    operands: tuple[Expr, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Or:
    """Two or more operands, none of them an :class:`Or`."""

    operands: tuple[Expr, ...]


Condition: TypeAlias = Comparison | InList | IsNull
Expr: TypeAlias = Comparison | InList | IsNull | Not | And | Or


def format_literal(value: Scalar) -> str:
    """The ``--where`` spelling of a value; ``parse`` of it gives the value back."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise PredicateError(f"{value!r} has no literal in --where")
        return repr(value)
    if isinstance(value, decimal.Decimal):
        return f"decimal '{value}'"
    if isinstance(value, dt.datetime):
        utc = value if value.tzinfo is None else value.astimezone(dt.UTC).replace(tzinfo=None)
        return f"timestamp '{utc.isoformat(sep=' ')}'"
    if isinstance(value, dt.date):
        return f"date '{value.isoformat()}'"
    return "'" + value.replace("'", "''") + "'"


def format_column(name: str) -> str:
    if IDENT.fullmatch(name) and name.lower() not in KEYWORDS:
        return name
    return '"' + name.replace('"', '""') + '"'


_SQL_OPS = {"==": "=", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}


def format_expr(expr: Expr) -> str:
    """Print an expression so that :func:`parse_where` gives the same tree back."""
    if isinstance(expr, Comparison):
        return f"{format_column(expr.column)} {_SQL_OPS[expr.op]} {format_literal(expr.value)}"
    if isinstance(expr, InList):
        values = ", ".join(format_literal(v) for v in expr.values)
        neg = "not " if expr.negated else ""
        return f"{format_column(expr.column)} {neg}in ({values})"
    if isinstance(expr, IsNull):
        return f"{format_column(expr.column)} is {'not ' if expr.negated else ''}null"
    if isinstance(expr, Not):
        return f"not ({format_expr(expr.operand)})"
    if isinstance(expr, And):
        return " and ".join(
            f"({format_expr(op)})" if isinstance(op, Or) else format_expr(op)
            for op in expr.operands
        )
    return " or ".join(format_expr(op) for op in expr.operands)


# --- conversion to DNF ---------------------------------------------------------------------


def to_dnf(expr: Expr) -> DNF:
    """Convert to kartothek DNF with the same (SQL three-valued) meaning.

    Raises:
        PredicateError: the DNF would have more than ``MAX_CONJUNCTIONS`` conjunctions.
    """
    return [list(conj) for conj in _dnf(expr, negate=False)]


def _dnf(expr: Expr, *, negate: bool) -> list[tuple[Literal3, ...]]:
    if isinstance(expr, Not):
        return _dnf(expr.operand, negate=not negate)
    if isinstance(expr, And | Or):
        # De Morgan: a negated AND is an OR of negations and vice versa.
        is_and = isinstance(expr, And) != negate
        parts = [_dnf(op, negate=negate) for op in expr.operands]
        if not is_and:
            return _limit([conj for part in parts for conj in part], expr)
        result: list[tuple[Literal3, ...]] = [()]
        for part in parts:
            result = _limit([left + right for left in result for right in part], expr)
        return result
    return [tuple(lit) for lit in _condition_dnf(expr, negate)]


def _condition_dnf(cond: Condition, negate: bool) -> list[list[Literal3]]:
    if isinstance(cond, IsNull):
        return [[(cond.column, "is null" if cond.negated == negate else "is not null", None)]]
    if isinstance(cond, Comparison):
        op = _NEGATED[cond.op] if negate else cond.op
        return [[(cond.column, op, cond.value)]]
    if cond.negated == negate:
        return [[(cond.column, "in", list(cond.values))]]
    return [[(cond.column, "!=", v) for v in cond.values]]


def _limit(conjs: list[tuple[Literal3, ...]], expr: Expr) -> list[tuple[Literal3, ...]]:
    if len(conjs) > MAX_CONJUNCTIONS:
        raise PredicateError(
            f"--where expression {format_expr(expr)!r} expands to more than "
            f"{MAX_CONJUNCTIONS} alternatives; simplify it"
        )
    return conjs
