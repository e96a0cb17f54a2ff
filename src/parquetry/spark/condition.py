"""Option ``replaceWhere``: a Spark SQL condition, turned into kartothek DNF.

The condition runs in two places that must agree: every written row is checked against it
(in the tasks) and the dataset layer removes the rows matching it. Both evaluate the same
DNF, so only what DNF expresses is accepted: ``column <op> literal`` (``= == != <> < <= > >=``),
``[NOT] IN (...)``, ``[NOT] BETWEEN a AND b``, ``IS [NOT] NULL``, ``AND``, ``OR`` and
parentheses, literals ``'text'``, numbers, ``TRUE``/``FALSE``, ``DATE '...'`` and
``TIMESTAMP '...'``. Anything else (functions, arithmetic, ``NOT (...)``, comparing columns)
is refused with an error naming the condition, rather than guessed at.
"""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal
from typing import Any

import pyarrow as pa

from parquetry.errors import InvalidArgument

__all__ = ["MAX_CONJUNCTIONS", "parse_condition", "typed_condition"]

MAX_CONJUNCTIONS = 256

Conj = list[tuple[str, str, Any]]

_TOKEN = re.compile(
    r"""\s*(?:
      (?P<str>'(?:[^'\\]|\\.|'')*')
    | (?P<ident>`(?:[^`]|``)+`|[A-Za-z_][A-Za-z0-9_]*)
    | (?P<num>-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)
    | (?P<op><=>|==|!=|<>|<=|>=|=|<|>)
    | (?P<punct>[(),])
    )""",
    re.VERBOSE,
)
_OPS = {"=": "==", "==": "==", "!=": "!=", "<>": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}
_KEYWORDS = {
    "and",
    "or",
    "not",
    "in",
    "is",
    "null",
    "between",
    "true",
    "false",
    "date",
    "timestamp",
}


class _Refused(Exception):
    pass


def _tokens(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise _Refused(f"unexpected text at {text[pos:].strip()[:20]!r}")
        kind = m.lastgroup
        assert kind is not None
        value = m.group(kind)
        if kind == "ident" and not value.startswith("`") and value.lower() in _KEYWORDS:
            kind, value = "kw", value.lower()
        out.append((kind, value))
        pos = m.end()
    return out


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = _tokens(text)
        self.pos = 0

    def peek(self, kind: str, value: str | None = None) -> bool:
        if self.pos >= len(self.tokens):
            return False
        k, v = self.tokens[self.pos]
        return k == kind and (value is None or v == value)

    def take(self, kind: str, value: str | None = None) -> str:
        if not self.peek(kind, value):
            found = self.tokens[self.pos][1] if self.pos < len(self.tokens) else "the end"
            raise _Refused(f"expected {value or kind}, found {found!r}")
        self.pos += 1
        return self.tokens[self.pos - 1][1]

    def condition(self) -> list[Conj]:
        out = self.conjunction()
        while self.peek("kw", "or"):
            self.take("kw", "or")
            out = out + self.conjunction()
            _check_size(out)
        return out

    def conjunction(self) -> list[Conj]:
        out = self.atom()
        while self.peek("kw", "and"):
            self.take("kw", "and")
            right = self.atom()
            out = [a + b for a in out for b in right]
            _check_size(out)
        return out

    def atom(self) -> list[Conj]:
        if self.peek("punct", "("):
            self.take("punct", "(")
            inner = self.condition()
            self.take("punct", ")")
            return inner
        if self.peek("kw", "not"):
            raise _Refused("NOT (...) is not supported; use !=, NOT IN or IS NOT NULL")
        column = self.column()
        if self.peek("op"):
            op = self.take("op")
            if op not in _OPS:
                raise _Refused(f"operator {op} is not supported")
            if self.peek("kw", "null"):
                raise _Refused(f"{column} {op} NULL is never true; use IS NULL / IS NOT NULL")
            return [[(column, _OPS[op], self.literal())]]
        if self.peek("kw", "is"):
            self.take("kw", "is")
            negated = self.peek("kw", "not")
            if negated:
                self.take("kw", "not")
            self.take("kw", "null")
            return [[(column, "is not null" if negated else "is null", None)]]
        negated = self.peek("kw", "not")
        if negated:
            self.take("kw", "not")
        if self.peek("kw", "in"):
            self.take("kw", "in")
            self.take("punct", "(")
            values = [self.literal()]
            while self.peek("punct", ","):
                self.take("punct", ",")
                values.append(self.literal())
            self.take("punct", ")")
            if negated:  # x NOT IN (a, b) is x != a AND x != b, nulls included
                return [[(column, "!=", v) for v in values]]
            return [[(column, "in", values)]]
        if self.peek("kw", "between"):
            self.take("kw", "between")
            lo = self.literal()
            self.take("kw", "and")
            hi = self.literal()
            if negated:
                return [[(column, "<", lo)], [(column, ">", hi)]]
            return [[(column, ">=", lo), (column, "<=", hi)]]
        found = self.tokens[self.pos][1] if self.pos < len(self.tokens) else "the end"
        raise _Refused(f"expected a comparison after {column!r}, found {found!r}")

    def column(self) -> str:
        if not self.peek("ident"):
            found = self.tokens[self.pos][1] if self.pos < len(self.tokens) else "the end"
            raise _Refused(f"expected a column name, found {found!r}")
        name = self.take("ident")
        if name.startswith("`"):
            return name[1:-1].replace("``", "`")
        if self.peek("punct", "("):
            raise _Refused(f"function {name}(...) is not supported")
        return name

    def literal(self) -> Any:
        if self.peek("str"):
            return _string(self.take("str"))
        if self.peek("num"):
            raw = self.take("num")
            if re.fullmatch(r"-?\d+", raw):
                return int(raw)
            return float(raw) if "e" in raw.lower() else Decimal(raw)
        if self.peek("kw", "true") or self.peek("kw", "false"):
            return self.take("kw") == "true"
        for kind, parse in (("date", _date), ("timestamp", _timestamp)):
            if self.peek("kw", kind):
                self.take("kw", kind)
                return parse(_string(self.take("str")))
        if self.peek("kw", "null"):
            raise _Refused("NULL in a list or range matches nothing; use IS NULL")
        found = self.tokens[self.pos][1] if self.pos < len(self.tokens) else "the end"
        raise _Refused(f"expected a literal, found {found!r}")


def _string(raw: str) -> str:
    body = raw[1:-1].replace("''", "'")
    return re.sub(r"\\(.)", r"\1", body)


def _date(text: str) -> dt.date:
    try:
        return dt.date.fromisoformat(text.strip())
    except ValueError:
        raise _Refused(f"DATE {text!r} is not a date (YYYY-MM-DD)") from None


def _timestamp(text: str) -> dt.datetime:
    try:
        value = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise _Refused(f"TIMESTAMP {text!r} is not a timestamp") from None
    # Spark reads a zone-less timestamp literal in the session time zone; parquetry's
    # sessions use UTC (local_session), so a naive value is taken as UTC.
    return value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)


def _check_size(dnf: list[Conj]) -> None:
    if len(dnf) > MAX_CONJUNCTIONS:
        raise _Refused(f"it expands to more than {MAX_CONJUNCTIONS} OR-ed conjunctions")


def parse_condition(text: str) -> list[Conj]:
    """The DNF of a Spark SQL condition (values not yet typed for columns).

    Raises:
        InvalidArgument: the condition is not one DNF can express; the message quotes it.
    """
    if not text or not text.strip():
        raise InvalidArgument("option 'replaceWhere' is empty")
    try:
        parser = _Parser(text)
        dnf = parser.condition()
        if parser.pos != len(parser.tokens):
            raise _Refused(f"unexpected {parser.tokens[parser.pos][1]!r}")
    except _Refused as exc:
        raise InvalidArgument(
            f"option 'replaceWhere' {text!r} is not supported: {exc}. Supported: column <op> "
            "literal, IN, BETWEEN, IS [NOT] NULL, AND, OR, parentheses"
        ) from None
    return dnf


def _typed(value: Any, t: pa.DataType) -> Any:
    """A literal as Spark would cast it for a column of type ``t``."""
    if isinstance(value, Decimal) and pa.types.is_floating(t):
        return float(value)
    if isinstance(value, float) and pa.types.is_decimal(t):
        return Decimal(repr(value))
    if isinstance(value, str) and pa.types.is_date(t):
        return _date(value)
    if isinstance(value, str) and pa.types.is_timestamp(t):
        return _timestamp(value)
    if isinstance(value, dt.datetime) and pa.types.is_date(t):
        return value.date() if value.time() == dt.time() else value
    is_day = isinstance(value, dt.date) and not isinstance(value, dt.datetime)
    if is_day and pa.types.is_timestamp(t):
        return dt.datetime.combine(value, dt.time(), tzinfo=dt.UTC)
    return value


def typed_condition(text: str, schema: pa.Schema) -> list[Conj]:
    """:func:`parse_condition`, with literals cast to the columns' types where Spark would
    (``'2025-01-01'`` for a date column, ``1.5`` for a double); the DNF is then checked by
    ``validate_predicates`` against the same schema by its user.

    Raises:
        InvalidArgument: as :func:`parse_condition`.
    """
    try:
        dnf = parse_condition(text)
        out = []
        for conj in dnf:
            terms = []
            for column, op, value in conj:
                t = schema.field(column).type if column in schema.names else None
                if t is not None and op == "in":
                    value = [_typed(v, t) for v in value]
                elif t is not None and op not in ("is null", "is not null"):
                    value = _typed(value, t)
                terms.append((column, op, value))
            out.append(terms)
    except _Refused as exc:
        raise InvalidArgument(f"option 'replaceWhere' {text!r}: {exc}") from None
    return out
