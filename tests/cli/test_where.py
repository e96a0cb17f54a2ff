"""The ``--where`` parser: syntax, errors pointing at the bad token, DNF meaning."""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parquetry.cli.where import (
    And,
    Comparison,
    Expr,
    InList,
    IsNull,
    Not,
    Or,
    WhereSyntaxError,
    format_expr,
    parse_where,
    to_dnf,
    where_to_predicates,
)
from parquetry.errors import ParquetryError, PredicateError

UTC = dt.UTC


# --- examples --------------------------------------------------------------------------------


def test_issue_example() -> None:
    text = "country = 'DE' and product_id in (1, 2) or day >= date '2021-01-02'"
    assert where_to_predicates(text) == [
        [("country", "==", "DE"), ("product_id", "in", [1, 2])],
        [("day", ">=", dt.date(2021, 1, 2))],
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a = 1", [[("a", "==", 1)]]),
        ("a == -1", [[("a", "==", -1)]]),
        ("a <> 2.5", [[("a", "!=", 2.5)]]),
        ("a != 'x'", [[("a", "!=", "x")]]),
        ("a < 1e3", [[("a", "<", 1000.0)]]),
        ("a <= 1 and b > 2 and c >= 3", [[("a", "<=", 1), ("b", ">", 2), ("c", ">=", 3)]]),
        ("s = 'it''s'", [[("s", "==", "it's")]]),
        ("b = TRUE or b = false", [[("b", "==", True)], [("b", "==", False)]]),
        ("x IS NULL", [[("x", "is null", None)]]),
        ("x is not null", [[("x", "is not null", None)]]),
        ("not x is null", [[("x", "is not null", None)]]),
        ("not (a < 1)", [[("a", ">=", 1)]]),
        ("not (a = 1)", [[("a", "!=", 1)]]),
        ("a not in (1, 2)", [[("a", "!=", 1), ("a", "!=", 2)]]),
        ("not not a in (1)", [[("a", "in", [1])]]),
        ('"my col" = 1', [[("my col", "==", 1)]]),
        ('"or" = 1', [[("or", "==", 1)]]),
        ('"a""b" = 1', [[('a"b', "==", 1)]]),
        ("d = decimal '1.50'", [[("d", "==", decimal.Decimal("1.50"))]]),
        (
            "t < timestamp '2021-01-02 03:04:05.5'",
            [[("t", "<", dt.datetime(2021, 1, 2, 3, 4, 5, 500000, tzinfo=UTC))]],
        ),
        (
            "t >= timestamp '2021-01-02T03:00:00+02:00'",
            [[("t", ">=", dt.datetime(2021, 1, 2, 1, 0, tzinfo=UTC))]],
        ),
        (
            "(a = 1 or a = 2) and (b = 3 or b = 4)",
            [
                [("a", "==", 1), ("b", "==", 3)],
                [("a", "==", 1), ("b", "==", 4)],
                [("a", "==", 2), ("b", "==", 3)],
                [("a", "==", 2), ("b", "==", 4)],
            ],
        ),
        ("not (a = 1 or b < 2)", [[("a", "!=", 1), ("b", ">=", 2)]]),
    ],
)
def test_examples(text: str, expected: list[list[tuple[str, str, Any]]]) -> None:
    assert where_to_predicates(text) == expected


@pytest.mark.parametrize(
    ("text", "message", "column"),
    [
        ("", "expected a condition", 1),
        ("a =", "expected a value after '=', found the end of the expression", 4),
        ("a = )", "expected a value after '=', found ')'", 5),
        ("a = 1 and", "expected a column name, found the end", 10),
        ("a = 1 b = 2", "expected 'and', 'or' or the end of the expression, found 'b'", 7),
        ("a in ()", "expected at least one value in the list, found ')'", 7),
        ("a in (1, 2", "expected ',' or ')' to close the list", 11),
        ("a in 1", "expected '(' to open the list, found '1'", 6),
        ("a is 1", "expected 'null' after 'is', found '1'", 6),
        ("a = null", "use 'is null'", 5),
        ("(a = 1", "expected ')'", 7),
        ("a = 'abc", "unterminated string", 5),
        ('"abc = 1', "unterminated quoted column name", 1),
        ("a = 1 & b = 2", "unexpected character '&'", 7),
        ("a ~ 1", "unexpected character '~'", 3),
        ("a 1", "expected a comparison", 3),
        ("and = 1", 'quote it as "and"', 1),
        ("d = date '2021-13-01'", "invalid date '2021-13-01'", 10),
        ("d = date 2021", "expected a quoted date after 'date'", 10),
        ("t = timestamp 'yesterday'", "invalid timestamp 'yesterday'", 15),
        ("a not 1", "expected 'in' after 'not'", 7),
    ],
)
def test_errors_point_at_the_bad_token(text: str, message: str, column: int) -> None:
    with pytest.raises(WhereSyntaxError) as info:
        parse_where(text)
    err = info.value
    assert isinstance(err, ParquetryError)
    assert isinstance(err, PredicateError)
    assert message in str(err)
    assert str(err).endswith(f"at column {column}")
    assert err.position == column - 1
    assert "\n" not in str(err)
    expr_line, caret_line = err.caret_lines()
    assert expr_line == text
    assert caret_line == " " * (column - 1) + "^"


def test_too_many_alternatives_refused() -> None:
    text = " and ".join(f"(c{i} = 1 or c{i} = 2)" for i in range(10))  # 2**10 conjunctions
    with pytest.raises(PredicateError, match="more than 256 alternatives"):
        where_to_predicates(text)


# --- properties ------------------------------------------------------------------------------

# Column name -> strategy of values of that column's type (no NaN: it has no literal).
COLUMN_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "i": st.integers(-5, 5),
    "f": st.sampled_from([-1.5, 0.0, 0.25, 2.0, 1e16, -3e-05]),
    "s": st.sampled_from(["", "a", "it's", 'b"c', "ü", "or"]),
    "b": st.booleans(),
    "d": st.dates(dt.date(1999, 12, 30), dt.date(2000, 1, 3)),
    "t": st.sampled_from(
        [dt.datetime(2021, 1, 1, tzinfo=UTC), dt.datetime(2021, 1, 1, 0, 0, 0, 1, tzinfo=UTC)]
    ),
    "my col": st.integers(0, 2),
    "and": st.integers(0, 2),
}
OPS = ["==", "!=", "<", "<=", ">", ">="]


@st.composite
def conditions(draw: st.DrawFn) -> Expr:
    column = draw(st.sampled_from(sorted(COLUMN_VALUES)))
    values = COLUMN_VALUES[column]
    kind = draw(st.sampled_from(["cmp", "cmp", "in", "null"]))
    if kind == "cmp":
        return Comparison(column=column, op=draw(st.sampled_from(OPS)), value=draw(values))
    if kind == "in":
        vals = tuple(draw(st.lists(values, min_size=1, max_size=3)))
        return InList(column=column, values=vals, negated=draw(st.booleans()))
    return IsNull(column=column, negated=draw(st.booleans()))


def _extend(children: st.SearchStrategy[Expr]) -> st.SearchStrategy[Expr]:
    return st.one_of(
        children.map(lambda e: Not(operand=e)),
        st.lists(children, min_size=2, max_size=3).map(lambda ops: _flatten(And, ops)),
        st.lists(children, min_size=2, max_size=3).map(lambda ops: _flatten(Or, ops)),
    )


def _flatten(cls: type[And] | type[Or], ops: list[Expr]) -> Expr:
    flat: list[Expr] = []
    for op in ops:
        flat.extend(op.operands if isinstance(op, cls) else (op,))
    return cls(operands=tuple(flat))


expressions = st.recursive(conditions(), _extend, max_leaves=6)


def _typed(expr: Expr) -> Any:
    """The tree with each value's type attached: ``True == 1`` must not pass for equal."""
    if isinstance(expr, Comparison):
        return ("cmp", expr.column, expr.op, type(expr.value), expr.value)
    if isinstance(expr, InList):
        return ("in", expr.column, expr.negated, tuple((type(v), v) for v in expr.values))
    if isinstance(expr, IsNull):
        return ("null", expr.column, expr.negated)
    if isinstance(expr, Not):
        return ("not", _typed(expr.operand))
    return (type(expr).__name__, tuple(_typed(op) for op in expr.operands))


@settings(max_examples=100, deadline=None)
@given(expressions)
def test_print_parse_round_trip(expr: Expr) -> None:
    text = format_expr(expr)
    assert _typed(parse_where(text)) == _typed(expr)


def _sql_eval(expr: Expr, row: dict[str, Any]) -> bool | None:
    """SQL three-valued logic, straight from the tree."""
    if isinstance(expr, IsNull):
        return (row[expr.column] is None) != expr.negated
    if isinstance(expr, Comparison):
        value = row[expr.column]
        return None if value is None else _compare(value, expr.op, expr.value)
    if isinstance(expr, InList):
        value = row[expr.column]
        if value is None:
            return None
        found = any(value == v for v in expr.values)
        return found != expr.negated
    if isinstance(expr, Not):
        inner = _sql_eval(expr.operand, row)
        return None if inner is None else not inner
    results = [_sql_eval(op, row) for op in expr.operands]
    if isinstance(expr, And):
        if False in results:
            return False
        return None if None in results else True
    if True in results:
        return True
    return None if None in results else False


def _compare(left: Any, op: str, right: Any) -> bool:
    return {
        "==": left == right,
        "!=": left != right,
        "<": left < right,
        "<=": left <= right,
        ">": left > right,
        ">=": left >= right,
    }[op]


def _dnf_eval(dnf: list[list[tuple[str, str, Any]]], row: dict[str, Any]) -> bool:
    """parquetry's DNF meaning: a null satisfies no comparison (``!=`` included)."""

    def literal(column: str, op: str, value: Any) -> bool:
        cell = row[column]
        if op == "is null":
            return cell is None
        if op == "is not null":
            return cell is not None
        if cell is None:
            return False
        if op == "in":
            return any(cell == v for v in value)
        return _compare(cell, op, value)

    return any(all(literal(*lit) for lit in conj) for conj in dnf)


@st.composite
def rows(draw: st.DrawFn) -> dict[str, Any]:
    return {col: draw(st.one_of(st.none(), values)) for col, values in COLUMN_VALUES.items()}


@settings(max_examples=100, deadline=None)
@given(expressions, st.lists(rows(), min_size=1, max_size=8))
def test_dnf_keeps_the_sql_meaning(expr: Expr, sample: list[dict[str, Any]]) -> None:
    dnf = to_dnf(expr)
    for row in sample:
        expected = _sql_eval(expr, row) is True
        assert _dnf_eval(dnf, row) == expected


@settings(max_examples=50, deadline=None)
@given(expressions)
def test_dnf_is_kartothek_shaped(expr: Expr) -> None:
    dnf = to_dnf(expr)
    assert dnf
    assert all(conj for conj in dnf)
    for conj in dnf:
        for column, op, value in conj:
            assert column in COLUMN_VALUES
            assert op in {"==", "!=", "<", "<=", ">", ">=", "in", "is null", "is not null"}
            if op == "in":
                assert isinstance(value, list)
                assert value
            if op.startswith("is"):
                assert value is None


def _arrow_schema() -> Any:
    import pyarrow as pa

    return pa.schema(
        [
            ("i", pa.int64()),
            ("f", pa.float64()),
            ("s", pa.string()),
            ("b", pa.bool_()),
            ("d", pa.date32()),
            ("t", pa.timestamp("us", tz="UTC")),
            ("my col", pa.int32()),
            ("and", pa.int8()),
        ]
    )


@settings(max_examples=60, deadline=None)
@given(expressions, st.lists(rows(), min_size=1, max_size=8))
def test_dnf_filters_like_sql_in_the_dataset_layer(
    expr: Expr, sample: list[dict[str, Any]]
) -> None:
    """The oracle end to end: parquetry's own predicate evaluation on an Arrow table."""
    import pyarrow as pa

    from parquetry.dataset.predicates import to_expression, validate_predicates

    schema = _arrow_schema()
    table = pa.Table.from_pylist(sample, schema=schema)
    dnf = validate_predicates(to_dnf(expr), schema)
    assert dnf is not None
    kept = table.filter(to_expression(dnf)).to_pylist()
    assert kept == [row for row in table.to_pylist() if _sql_eval(expr, row) is True]


# --- hostile input: every user error is a WhereSyntaxError / exit 1 ----------------------------

HOSTILE = [
    ("(" * 5000 + "a = 1" + ")" * 5000, "nested deeper than 100"),
    ("not " * 5000 + "a = 1", "nested deeper than 100"),
    ("a = " + "9" * 5000, "5000 digits is too long"),
    ("a in (1, -" + "9" * 4301 + ")", "4301 digits is too long"),
    ("a = 1e999", "too large for a floating-point value"),
    ("a = -" + "9" * 400 + ".5", "too large for a floating-point value"),
    ("t < timestamp '9999-12-31 23:59:59-05:00'", "outside the years 1-9999"),
    ("t > timestamp '0001-01-01 00:00:00+05:00'", "outside the years 1-9999"),
]


@pytest.mark.parametrize(("text", "message"), HOSTILE)
def test_hostile_expressions_are_syntax_errors(text: str, message: str) -> None:
    """Regression: RecursionError, ValueError (int digits) and OverflowError escaped."""
    with pytest.raises(WhereSyntaxError, match=message):
        where_to_predicates(text)


def test_nesting_up_to_the_limit_parses() -> None:
    assert where_to_predicates("(" * 99 + "not " + "a = 1" + ")" * 99) == [[("a", "!=", 1)]]
    assert where_to_predicates("a = -" + "9" * 4300)[0][0][2] == -int("9" * 4300)


_TOKENS = st.sampled_from(
    [
        "(",
        ")",
        ",",
        "not",
        "and",
        "or",
        "in",
        "is",
        "null",
        "=",
        "<",
        ">=",
        "<>",
        "i",
        "f",
        "s",
        "t",
        "d",
        '"my col"',
        "'x'",
        "1",
        "-0.0",
        "1e308",
        "1e309",
        "9" * 4301,
        "date '2021-02-30'",
        "date '0001-01-01'",
        "timestamp '9999-12-31 23:59:59.999999-14:00'",
        "timestamp '0001-01-01+14:00'",
        "timestamp '2262-04-12'",
        "decimal '" + "9" * 50 + "'",
        "'\ud800'",
    ]
)
garbage = st.one_of(
    st.text(max_size=40),
    st.lists(_TOKENS, max_size=25).map(" ".join),
    st.integers(1, 3000).map(lambda n: "(" * n + "i = 1" + ")" * n),
    st.integers(1, 3000).map(lambda n: "not " * n + "i = 1"),
)


@settings(max_examples=200, deadline=None)
@given(garbage)
def test_any_text_parses_or_is_a_syntax_error(text: str) -> None:
    with contextlib.suppress(ParquetryError):
        where_to_predicates(text)


EXTREME_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "i": st.one_of(st.integers(-(2**70), 2**70), st.just(10**400), st.just(-(10**4000))),
    "f": st.one_of(
        st.floats(allow_nan=False, allow_infinity=False), st.integers(-(10**400), 10**400)
    ),
    "s": st.text(max_size=4),
    "b": st.booleans(),
    "d": st.dates(),
    "t": st.datetimes(timezones=st.just(UTC)),
    "my col": st.integers(-(2**40), 2**40),
    "and": st.integers(-1000, 1000),
}


@st.composite
def extreme_conditions(draw: st.DrawFn) -> Expr:
    column = draw(st.sampled_from(sorted(EXTREME_VALUES)))
    # Any column with any value: type mismatches are user errors too.
    values = EXTREME_VALUES[draw(st.sampled_from([column, *EXTREME_VALUES]))]
    if draw(st.booleans()):
        return Comparison(column=column, op=draw(st.sampled_from(OPS)), value=draw(values))
    vals = tuple(draw(st.lists(values, min_size=1, max_size=3)))
    return InList(column=column, values=vals, negated=draw(st.booleans()))


extreme_expressions = st.recursive(extreme_conditions(), _extend, max_leaves=4)


@pytest.fixture(scope="module")
def typed_lake(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A local store with dataset ``typed`` holding every column of :func:`_arrow_schema`."""
    import pyarrow as pa

    from parquetry.dataset import Dataset
    from parquetry.store import LocalStore

    root = tmp_path_factory.mktemp("typed") / "lake"
    rows = [
        {
            "i": 1,
            "f": -0.0,
            "s": "a",
            "b": True,
            "d": dt.date(2000, 1, 1),
            "t": dt.datetime(2021, 1, 1, tzinfo=UTC),
            "my col": 1,
            "and": 2,
        },
        {
            "i": None,
            "f": float("nan"),
            "s": None,
            "b": None,
            "d": None,
            "t": None,
            "my col": None,
            "and": 3,
        },
    ]
    table = pa.Table.from_pylist(rows, schema=_arrow_schema())
    Dataset.create(LocalStore(root), "typed", table, partition_on=["and"], secondary_indices=["i"])
    return str(root)


def _scan(lake: str, text: str) -> Any:
    from typer.testing import CliRunner

    from parquetry.cli.app import app

    return CliRunner().invoke(app, ["scan", lake, "typed", "--where", text, "--format", "json"])


def _assert_user_error_or_success(result: Any, text: str) -> None:
    assert result.exit_code in (0, 1), (text[:200], result.exit_code, result.output[-2000:])
    if result.exit_code == 1:
        errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
        assert len(errors) == 1, result.stderr[-2000:]
        assert "internal error" not in errors[0]


@pytest.mark.parametrize(("text", "message"), HOSTILE)
def test_cli_hostile_expressions_exit_1(typed_lake: str, text: str, message: str) -> None:
    """Regression: these exited 70 (internal error)."""
    result = _scan(typed_lake, text)
    assert result.exit_code == 1
    assert message in result.stderr


@pytest.mark.parametrize(
    "text",
    [
        "i = " + "9" * 4300,
        "i < " + "9" * 4300,
        "i > -" + "9" * 400,
        "f < " + "9" * 400,
        "d < date '9999-12-31'",
        "t > timestamp '0001-01-01'",
        "t < timestamp '9999-12-31 23:59:59.999999'",
        "s = 'x' or f in (1e308, -0.0)",
    ],
)
def test_cli_extreme_values_have_sql_meaning(typed_lake: str, text: str) -> None:
    import json

    result = _scan(typed_lake, text)
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    wanted = {
        "i = " + "9" * 4300: 0,
        "i < " + "9" * 4300: 1,
        "i > -" + "9" * 400: 1,
        "f < " + "9" * 400: 1,
    }.get(text, 1)
    assert len(rows) == wanted


@settings(max_examples=40, deadline=None)
@given(st.one_of(garbage, extreme_expressions.map(format_expr)))
def test_cli_scan_never_exits_70(typed_lake: str, text: str) -> None:
    _assert_user_error_or_success(_scan(typed_lake, text), text)


# --- digits of other scripts -----------------------------------------------------------------

#: Characters int()/float()/Decimal() read as digits although they are not ASCII 0-9.
_FOREIGN_DIGITS = st.characters(categories=["Nd"]).filter(lambda c: c not in "0123456789")


@pytest.mark.parametrize(
    ("text", "bad", "column"),
    [
        ("i = \u0663", "\u0663", 5),  # Arabic-Indic three: int() reads 3
        ("i = \uff13", "\uff13", 5),  # fullwidth three
        ("i = 1\u0663", "\u0663", 6),  # was read as 13
        ("f in (\u0663.\u0665)", "\u0663", 7),  # was read as 3.5
        ("f = 1e\u0663", "\u0663", 7),
        ("i = -\u0967", "\u0967", 6),  # Devanagari one after a sign
    ],
)
def test_digits_of_other_scripts_are_refused(text: str, bad: str, column: int) -> None:
    with pytest.raises(WhereSyntaxError) as info:
        parse_where(text)
    assert f"{bad!r}" in str(info.value)
    assert str(info.value).endswith(f"at column {column}")


@pytest.mark.parametrize("kind", ["decimal", "date", "timestamp"])
def test_typed_literals_with_other_digits_are_refused(kind: str) -> None:
    text = {"decimal": "\u0663", "date": "\u0662\u0660\u0662\u0660-01-01"}.get(
        kind, "2020-01-0\u0661"
    )
    with pytest.raises(WhereSyntaxError, match=f"invalid {kind} '{text}'"):
        parse_where(f"x = {kind} '{text}'")


@settings(max_examples=100, deadline=None)
@given(
    digits=st.lists(st.one_of(_FOREIGN_DIGITS, st.sampled_from("0123456789")), min_size=1),
    sign=st.sampled_from(["", "-", "+"]),
    dot=st.booleans(),
)
def test_a_number_with_any_foreign_digit_is_refused(
    digits: list[str], sign: str, dot: bool
) -> None:
    number = "".join(digits) + (".5" if dot else "")
    text = f"i = {sign}{number}"
    if all(c in "0123456789" for c in digits):
        parse_where(text)
        return
    first = next(i for i, c in enumerate(text) if c.isnumeric() and c not in "0123456789")
    with pytest.raises(WhereSyntaxError, match="ASCII digits 0-9") as info:
        parse_where(text)
    # The error names the first foreign digit, at its position.
    assert repr(text[first]) in str(info.value)
    assert info.value.position == first


@settings(max_examples=40, deadline=None)
@given(
    st.one_of(
        st.text(max_size=12).map(lambda t: "i = " + t),
        st.text(st.characters(categories=["Nd", "No", "Nl", "Zs"]), max_size=8).map(
            lambda t: "f in (" + t + ")"
        ),
        st.text(max_size=20),
    )
)
def test_cli_any_unicode_where_exits_0_or_1_with_one_message(typed_lake: str, text: str) -> None:
    result = _scan(typed_lake, text)
    _assert_user_error_or_success(result, text)
    assert "Traceback" not in result.output
    if any(c.isnumeric() and c not in "0123456789" for c in text) and "'" not in text:
        # No quoted string can hold the foreign digit: it must be refused, not read.
        assert result.exit_code == 1, (text, result.output)
