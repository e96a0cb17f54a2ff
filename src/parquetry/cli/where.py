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

Limits (each a :class:`WhereSyntaxError`, so the CLI exits 1): :data:`MAX_DEPTH` levels of
parentheses and ``not`` (the parser recurses), :data:`MAX_INT_DIGITS` digits in an integer,
numbers within the range of a double, timestamps within the years 1-9999 in UTC.

Numbers, dates, timestamps and decimals are written with the ASCII digits 0-9, as
identifiers are ASCII: a digit of another script (Arabic-Indic U+0663, fullwidth U+FF13) is
refused with an error naming it rather than read as the number Python's ``int()`` would
make of it (a typo or a pasted value meaning something else must not silently select
rows). Quoted strings and quoted column names may hold any character.

The parser lives in the CLI package because the command line is its only producer; it has no
dependency on typer or rich.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import re
from dataclasses import dataclass

from parquetry.cli.where_ast import (
    CMP_OPS,
    DNF,
    IDENT,
    KEYWORDS,
    And,
    Comparison,
    Condition,
    Expr,
    InList,
    IsNull,
    Not,
    Or,
    Scalar,
    WhereSyntaxError,
    format_expr,
    format_literal,
    to_dnf,
)

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

# --- tokens --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # "ident", "qident", "keyword", "int", "float", "string", "op", "(", ")", ",", "end"
    text: str
    value: object
    pos: int


#: Integer literals up to this many digits (Python's own int/str conversion limit).
MAX_INT_DIGITS = 4300
#: Nesting of parentheses and ``not`` beyond this is refused (the parser recurses).
MAX_DEPTH = 100

# [0-9], not \d: \d, str.isdigit, int() and float() accept the digits of every script.
_NUMBER = re.compile(r"[+-]?(?:[0-9]+\.[0-9]*|\.[0-9]+|[0-9]+)(?:[eE][+-]?[0-9]+)?")
_ASCII_DIGITS = frozenset("0123456789")
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
        elif (m := _NUMBER.match(text, i)) and (ch in _ASCII_DIGITS or ch in "+-."):
            tokens.append(_number_token(m.group(), i, text))
            i = m.end()
        elif m := IDENT.match(text, i):
            word = m.group()
            kind = "keyword" if word.lower() in KEYWORDS else "ident"
            tokens.append(_Token(kind, word, word.lower() if kind == "keyword" else word, i))
            i = m.end()
        elif m := _OPERATOR.match(text, i):
            tokens.append(_Token("op", m.group(), CMP_OPS[m.group()], i))
            i = m.end()
        else:
            if ch in "+-." and text[i + 1 : i + 2].isnumeric():
                i += 1  # "-٣": the culprit is the digit, not the sign
                ch = text[i]
            hint = " (write numbers with the ASCII digits 0-9)" if ch.isnumeric() else ""
            raise WhereSyntaxError(
                f"unexpected character {ch!r}{hint}", expression=text, position=i
            )
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


def _number_token(text: str, pos: int, expression: str) -> _Token:
    if re.fullmatch(r"[+-]?[0-9]+", text):
        digits = len(text.lstrip("+-"))
        if digits > MAX_INT_DIGITS:
            raise WhereSyntaxError(
                f"integer with {digits} digits is too long (at most {MAX_INT_DIGITS})",
                expression=expression,
                position=pos,
            )
        return _Token("int", text, int(text), pos)
    value = float(text)
    if math.isinf(value):
        # 1e999 is a finite number no double can hold; rounding it to infinity would
        # change what the comparison means.
        raise WhereSyntaxError(
            f"number {text[:40]!r} is too large for a floating-point value",
            expression=expression,
            position=pos,
        )
    return _Token("float", text, value, pos)


# --- the parser ----------------------------------------------------------------------------


class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.tokens = _tokenize(text)
        self.i = 0
        self.depth = 0

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
        if self.tok.kind == "(" or (self.tok.kind == "keyword" and self.tok.value == "not"):
            if self.depth >= MAX_DEPTH:
                raise self.error(f"expression nested deeper than {MAX_DEPTH} levels")
            self.depth += 1
            try:
                if self.keyword("not"):
                    return Not(operand=self.not_expr())
                self.i += 1
                expr = self.or_expr()
                self.expect(")", "')'")
                return expr
            finally:
                self.depth -= 1
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


class _OutOfRange(ValueError):
    pass


def _typed_literal(kind: str, text: str, parser: _Parser, tok: _Token) -> Scalar:
    try:
        if kind == "date":
            if not re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", text):
                raise ValueError(text)
            return dt.date.fromisoformat(text)
        if kind == "decimal":
            if not re.fullmatch(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)", text):
                raise ValueError(text)
            return decimal.Decimal(text)
        return _parse_timestamp(text)
    except _OutOfRange as exc:
        raise WhereSyntaxError(str(exc), expression=parser.text, position=tok.pos) from None
    except ValueError:
        formats = {
            "date": "YYYY-MM-DD",
            "timestamp": "YYYY-MM-DD[ HH:MM:SS[.ffffff]][+HH:MM|Z]",
            "decimal": "digits 0-9 with an optional '.'",
        }
        raise WhereSyntaxError(
            f"invalid {kind} {text!r} (expected {formats[kind]})",
            expression=parser.text,
            position=tok.pos,
        ) from None


def _parse_timestamp(text: str) -> dt.datetime:
    if not re.fullmatch(
        r"[0-9]{4}-[0-9]{2}-[0-9]{2}([ T][0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]{1,6})?)?)?"
        r"(Z|[+-][0-9]{2}:?[0-9]{2})?",
        text,
    ):
        raise ValueError(text)
    value = dt.datetime.fromisoformat(text)
    # Timestamps in predicates are UTC; a literal without an offset already is.
    if value.tzinfo is None:
        return value.replace(tzinfo=dt.UTC)
    try:
        return value.astimezone(dt.UTC)
    except OverflowError:
        raise _OutOfRange(f"timestamp {text!r} is outside the years 1-9999 in UTC") from None


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


def where_to_predicates(text: str) -> DNF:
    """Parse ``text`` and convert it to DNF predicates in one step."""
    return to_dnf(parse_where(text))
