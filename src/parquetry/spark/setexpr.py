"""``update_where(set={column: "<Spark SQL expression>"})``: a small SQL expression, turned
into a ``pyarrow.compute`` expression the rewrite tasks evaluate on each old row.

As in Delta's ``DeltaTable.update(set={...})``, a string is an SQL expression (a string
literal is quoted: ``"'gold'"``). Accepted: literals (numbers, ``'text'``, ``TRUE``/``FALSE``,
``NULL``, ``DATE '...'``, ``TIMESTAMP '...'``), column names (plain or in backticks), ``+ - *
/ %``, unary minus, ``||`` and parentheses, and the functions ``upper``, ``lower``,
``coalesce``, ``abs`` and ``concat``. ``/`` divides as Spark does (as doubles). Anything
else is refused, naming the expression, rather than guessed at. An expression that is a
literal alone becomes that Python value (cast strictly to the column like any value).
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any, TypeAlias

import pyarrow as pa
import pyarrow.compute as pc

from parquetry.errors import InvalidArgument
from parquetry.spark.condition import _date, _string, _timestamp

__all__ = ["parse_set_value"]

_TOKEN = re.compile(
    r"""\s*(?:
      (?P<str>'(?:[^'\\]|\\.|'')*')
    | (?P<ident>`(?:[^`]|``)+`|[A-Za-z_][A-Za-z0-9_]*)
    | (?P<num>(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)
    | (?P<op>\|\||[-+*/%(),])
    )""",
    re.VERBOSE,
)
_ARITH = {"+": "add_checked", "-": "subtract_checked", "*": "multiply_checked", "%": None}


class _Literal:
    """A literal not yet combined with anything (kept as a Python value)."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def expr(self) -> pc.Expression:
        return pc.scalar(self.value)


#: A parsed node: a _Literal or a pyarrow compute Expression (untyped in pyarrow's stubs).
Node: TypeAlias = Any


def _ex(node: Node) -> pc.Expression:
    return node.expr() if isinstance(node, _Literal) else node


class _Refused(Exception):
    pass


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens: list[tuple[str, str]] = []
        pos = 0
        text = text.rstrip()
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if m is None or m.end() == pos:
                raise _Refused(f"unexpected {text[pos:].lstrip()[:10]!r}")
            kind = m.lastgroup
            assert kind is not None
            self.tokens.append((kind, m.group(kind)))
            pos = m.end()
        self.pos = 0

    def peek(self, value: str) -> bool:
        return self.pos < len(self.tokens) and self.tokens[self.pos][1] == value

    def take(self) -> tuple[str, str]:
        if self.pos >= len(self.tokens):
            raise _Refused("unexpected end")
        tok = self.tokens[self.pos]
        self.pos += 1
        return tok

    def expect(self, value: str) -> None:
        if self.take()[1] != value:
            raise _Refused(f"expected {value!r}")

    def expression(self) -> Node:
        node = self.term()
        while self.peek("+") or self.peek("-") or self.peek("||"):
            op = self.take()[1]
            right = self.term()
            if op == "||":
                node = _concat([node, right])
            else:
                node = pc.Expression._call(_ARITH[op] or "", [_ex(node), _ex(right)])
        return node

    def term(self) -> Node:
        node = self.unary()
        while self.peek("*") or self.peek("/") or self.peek("%"):
            op = self.take()[1]
            right = self.unary()
            if op == "/":  # Spark divides as doubles: 7 / 2 = 3.5
                node = pc.Expression._call(
                    "divide", [_ex(node).cast(pa.float64()), _ex(right).cast(pa.float64())]
                )
            elif op == "%":
                raise _Refused("'%' is not supported")
            else:
                node = pc.Expression._call(_ARITH[op] or "", [_ex(node), _ex(right)])
        return node

    def unary(self) -> Node:
        if self.peek("-"):
            self.take()
            inner = self.unary()
            if isinstance(inner, _Literal) and isinstance(inner.value, int | float | Decimal):
                return _Literal(-inner.value)
            return pc.Expression._call("negate_checked", [_ex(inner)])
        return self.primary()

    def primary(self) -> Node:
        kind, value = self.take()
        if value == "(":
            node = self.expression()
            self.expect(")")
            return node
        if kind == "str":
            return _Literal(_string(value))
        if kind == "num":
            if re.fullmatch(r"\d+", value):
                return _Literal(int(value))
            return _Literal(float(value) if "e" in value.lower() else Decimal(value))
        if kind != "ident":
            raise _Refused(f"unexpected {value!r}")
        word = value.lower()
        if value.startswith("`"):
            return pc.field(value[1:-1].replace("``", "`"))
        if word in ("true", "false"):
            return _Literal(word == "true")
        if word == "null":
            return _Literal(None)
        literal = self.pos < len(self.tokens) and self.tokens[self.pos][0] == "str"
        if word in ("date", "timestamp") and literal:
            text = _string(self.take()[1])
            return _Literal(_date(text) if word == "date" else _timestamp(text))
        if self.peek("("):
            return self.call(word)
        return pc.field(value)

    def call(self, name: str) -> Node:
        self.expect("(")
        args: list[Node] = []
        if not self.peek(")"):
            args.append(self.expression())
            while self.peek(","):
                self.take()
                args.append(self.expression())
        self.expect(")")
        one = {"upper": "utf8_upper", "lower": "utf8_lower", "abs": "abs_checked"}
        if name in one:
            if len(args) != 1:
                raise _Refused(f"{name}() takes one argument")
            return pc.Expression._call(one[name], [_ex(args[0])])
        if name == "coalesce" and args:
            return pc.Expression._call("coalesce", [_ex(a) for a in args])
        if name == "concat" and args:
            return _concat(args)
        raise _Refused(f"function {name}() is not supported")


def _concat(args: list[Node]) -> pc.Expression:
    return pc.Expression._call("binary_join_element_wise", [*(_ex(a) for a in args), pc.scalar("")])


def _float_literal(value: Any) -> Any:
    # A decimal literal (1.5) set into a float column: Spark reads it as a double there.
    return float(value) if isinstance(value, Decimal) else value


def parse_set_value(text: str, column_type: pa.DataType | None = None) -> Any:
    """A Python value (the expression is a literal) or a ``pyarrow.compute`` expression.

    Raises:
        InvalidArgument: the expression is not one this subset expresses (quoted).
    """
    try:
        parser = _Parser(text)
        if not parser.tokens:
            raise _Refused("it is empty")
        node = parser.expression()
        if parser.pos != len(parser.tokens):
            raise _Refused(f"unexpected {parser.tokens[parser.pos][1]!r}")
    except _Refused as exc:
        raise InvalidArgument(
            f"SQL expression {text!r} is not supported: {exc}. Supported: literals, columns, "
            "+ - * / ||, parentheses, upper, lower, coalesce, abs, concat"
        ) from None
    if isinstance(node, _Literal):
        if column_type is not None and pa.types.is_floating(column_type):
            return _float_literal(node.value)
        if column_type is not None and pa.types.is_date(column_type):
            return node.value.date() if hasattr(node.value, "date") else node.value
        return node.value
    return node
