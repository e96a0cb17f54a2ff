"""``--where``: a small SQL-like boolean expression parsed into parquetry DNF predicates.

Grammar (keywords are case-insensitive)::

    expr       := or_expr
    or_expr    := and_expr ("or" and_expr)*
    and_expr   := not_expr ("and" not_expr)*
    not_expr   := "not" not_expr | primary
    primary    := "(" expr ")" | condition
    condition  := column ( cmp_op literal
                         | ["not"] "in" "(" literal ("," literal)* ")"
                         | "is" ["not"] "null" )
    cmp_op     := "=" | "==" | "!=" | "<>" | "<" | "<=" | ">" | ">="
    column     := identifier | '"' chars with "" for a quote '"'
    literal    := integer | float | 'string' ('' for a quote) | true | false
                | date 'YYYY-MM-DD' | timestamp 'YYYY-MM-DD[ HH:MM:SS[.ffffff]][+HH:MM]'
                | decimal '123.45'

Comparisons follow SQL's three-valued logic: a comparison with a null value is unknown, and a
row is kept only when the whole expression is true. :func:`to_dnf` keeps that meaning exactly:
a negated condition becomes its complement (``not a < 1`` is ``a >= 1``: both are unknown for a
null ``a``), which relies on parquetry's predicates following the same rule (a null satisfies no
comparison, ``!=`` included; see :mod:`parquetry.dataset.predicates`).

The parser lives in the CLI package because the command line is its only producer; it has no
dependency on typer or rich.
"""

from __future__ import annotations

import datetime as dt
import decimal
import re
from dataclasses import dataclass
from typing import TypeAlias

from parquetry.errors import PredicateError

__all__ = [
    "And",
    "Comparison",
    "Condition",
    "Expr",
    "InList",
    "IsNull",
    "Not",
    "Or",
    "Scalar",
    "WhereSyntaxError",
    "format_expr",
    "format_literal",
    "parse_where",
    "to_dnf",
    "where_to_predicates",
]

Scalar: TypeAlias = int | float | str | bool | dt.date | dt.datetime | decimal.Decimal
Literal3: TypeAlias = tuple[str, str, object]
DNF: TypeAlias = list[list[Literal3]]

#: Expressions whose DNF would exceed this many conjunctions are refused, not expanded.
MAX_CONJUNCTIONS = 256

_KEYWORDS = frozenset(
    {"and", "or", "not", "in", "is", "null", "true", "false", "date", "timestamp", "decimal"}
)
_CMP_OPS = {
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


# --- tokens --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # "ident", "qident", "keyword", "int", "float", "string", "op", "(", ")", ",", "end"
    text: str
    value: object
    pos: int


_NUMBER = re.compile(r"[+-]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_OPERATOR = re.compile(r"==|!=|<>|<=|>=|=|<|>")


def _tokenize(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch.isspace():
            i += 1
        elif ch in "(),":
            tokens.append(_Token(ch, ch, None, i))
            i += 1
        elif ch in "'\"":
            value, end = _quoted(text, i)
            kind = "string" if ch == "'" else "qident"
            tokens.append(_Token(kind, text[i:end], value, i))
            i = end
        elif (m := _NUMBER.match(text, i)) and (ch.isdigit() or ch in "+-."):
            tokens.append(_number_token(m.group(), i))
            i = m.end()
        elif m := _IDENT.match(text, i):
            word = m.group()
            kind = "keyword" if word.lower() in _KEYWORDS else "ident"
            tokens.append(_Token(kind, word, word.lower() if kind == "keyword" else word, i))
            i = m.end()
        elif m := _OPERATOR.match(text, i):
            tokens.append(_Token("op", m.group(), _CMP_OPS[m.group()], i))
            i = m.end()
        else:
            raise WhereSyntaxError(f"unexpected character {ch!r}", expression=text, position=i)
    tokens.append(_Token("end", "", None, len(text)))
    return tokens


def _quoted(text: str, start: int) -> tuple[str, int]:
    quote = text[start]
    out: list[str] = []
    i = start + 1
    while i < len(text):
        if text[i] == quote:
            if text.startswith(quote * 2, i):
                out.append(quote)
                i += 2
                continue
            return "".join(out), i + 1
        out.append(text[i])
        i += 1
    what = "string" if quote == "'" else "quoted column name"
    raise WhereSyntaxError(f"unterminated {what}", expression=text, position=start)


def _number_token(text: str, pos: int) -> _Token:
    if re.fullmatch(r"[+-]?\d+", text):
        return _Token("int", text, int(text), pos)
    return _Token("float", text, float(text), pos)


# --- the parser ----------------------------------------------------------------------------


class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.tokens = _tokenize(text)
        self.i = 0

    @property
    def tok(self) -> _Token:
        return self.tokens[self.i]

    def error(self, message: str, tok: _Token | None = None) -> WhereSyntaxError:
        tok = tok or self.tok
        found = "the end of the expression" if tok.kind == "end" else repr(tok.text)
        return WhereSyntaxError(f"{message}, found {found}", expression=self.text, position=tok.pos)

    def keyword(self, *words: str) -> bool:
        if self.tok.kind == "keyword" and self.tok.value in words:
            self.i += 1
            return True
        return False

    def expect(self, kind: str, what: str) -> _Token:
        if self.tok.kind != kind:
            raise self.error(f"expected {what}")
        tok = self.tok
        self.i += 1
        return tok

    def parse(self) -> Expr:
        if self.tok.kind == "end":
            raise self.error('expected a condition such as "col = 1"')
        expr = self.or_expr()
        if self.tok.kind != "end":
            raise self.error("expected 'and', 'or' or the end of the expression")
        return expr

    def or_expr(self) -> Expr:
        operands = [self.and_expr()]
        while self.keyword("or"):
            operands.append(self.and_expr())
        return _flat(Or, operands)

    def and_expr(self) -> Expr:
        operands = [self.not_expr()]
        while self.keyword("and"):
            operands.append(self.not_expr())
        return _flat(And, operands)

    def not_expr(self) -> Expr:
        if self.keyword("not"):
            return Not(operand=self.not_expr())
        if self.tok.kind == "(":
            self.i += 1
            expr = self.or_expr()
            self.expect(")", "')'")
            return expr
        return self.condition()

    def condition(self) -> Condition:
        if self.tok.kind not in ("ident", "qident"):
            if self.tok.kind == "keyword":
                hint = f' (quote it as "{self.tok.text}" if it is a column)'
                raise self.error(f"expected a column name{hint}")
            raise self.error("expected a column name")
        column = str(self.tok.value)
        self.i += 1
        if self.tok.kind == "op":
            op_tok = self.tok
            self.i += 1
            value = self.literal(after=op_tok.text)
            return Comparison(column=column, op=str(op_tok.value), value=value)
        if self.keyword("is"):
            negated = self.keyword("not")
            if not self.keyword("null"):
                raise self.error("expected 'null' after 'is'" + (" not" if negated else ""))
            return IsNull(column=column, negated=negated)
        negated = self.keyword("not")
        if self.keyword("in"):
            return InList(column=column, values=self.literal_list(), negated=negated)
        if negated:
            raise self.error("expected 'in' after 'not'")
        raise self.error(f"expected a comparison (=, !=, <, <=, >, >=, in, is) after {column!r}")

    def literal_list(self) -> tuple[Scalar, ...]:
        self.expect("(", "'(' to open the list")
        if self.tok.kind == ")":
            raise self.error("expected at least one value in the list")
        values = [self.literal(after="in")]
        while self.tok.kind == ",":
            self.i += 1
            values.append(self.literal(after=","))
        self.expect(")", "',' or ')' to close the list")
        return tuple(values)

    def literal(self, *, after: str) -> Scalar:
        tok = self.tok
        if tok.kind in ("int", "float", "string"):
            self.i += 1
            assert isinstance(tok.value, int | float | str)
            return tok.value
        if tok.kind == "keyword" and tok.value in ("true", "false"):
            self.i += 1
            return tok.value == "true"
        if tok.kind == "keyword" and tok.value in ("date", "timestamp", "decimal"):
            self.i += 1
            text_tok = self.expect("string", f"a quoted {tok.value} after {tok.text!r}")
            return _typed_literal(str(tok.value), str(text_tok.value), self, text_tok)
        if tok.kind == "keyword" and tok.value == "null":
            raise self.error("null cannot be compared; use 'is null' or 'is not null'")
        raise self.error(f"expected a value after {after!r}")


def _typed_literal(kind: str, text: str, parser: _Parser, tok: _Token) -> Scalar:
    try:
        if kind == "date":
            if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
                raise ValueError(text)
            return dt.date.fromisoformat(text)
        if kind == "decimal":
            if not re.fullmatch(r"[+-]?(\d+\.?\d*|\.\d+)", text):
                raise ValueError(text)
            return decimal.Decimal(text)
        return _parse_timestamp(text)
    except ValueError:
        formats = {
            "date": "YYYY-MM-DD",
            "timestamp": "YYYY-MM-DD[ HH:MM:SS[.ffffff]][+HH:MM|Z]",
            "decimal": "digits with an optional '.'",
        }
        raise WhereSyntaxError(
            f"invalid {kind} {text!r} (expected {formats[kind]})",
            expression=parser.text,
            position=tok.pos,
        ) from None


def _parse_timestamp(text: str) -> dt.datetime:
    if not re.fullmatch(
        r"\d{4}-\d{2}-\d{2}([ T]\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?)?"
        r"(Z|[+-]\d{2}:?\d{2})?",
        text,
    ):
        raise ValueError(text)
    value = dt.datetime.fromisoformat(text)
    # Timestamps in predicates are UTC; a literal without an offset already is.
    if value.tzinfo is None:
        return value.replace(tzinfo=dt.UTC)
    return value.astimezone(dt.UTC)


def _flat(cls: type[And] | type[Or], operands: list[Expr]) -> Expr:
    if len(operands) == 1:
        return operands[0]
    flat: list[Expr] = []
    for op in operands:
        flat.extend(op.operands if isinstance(op, cls) else (op,))
    return cls(operands=tuple(flat))


def parse_where(text: str) -> Expr:
    """Parse a ``--where`` expression.

    Raises:
        WhereSyntaxError: naming the bad token and its column (1-based).
    """
    return _Parser(text).parse()


# --- printing ------------------------------------------------------------------------------


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
    if _IDENT.fullmatch(name) and name.lower() not in _KEYWORDS:
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


def where_to_predicates(text: str) -> DNF:
    """Parse ``text`` and convert it to DNF predicates in one step."""
    return to_dnf(parse_where(text))
