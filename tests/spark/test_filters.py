"""Spark filter translation: accepted filters evaluate exactly like Spark, and the planning
predicates keep every row Spark would keep (brute-force oracles)."""

from __future__ import annotations

import datetime
import operator
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as hs
from pyspark.sql.datasource import (
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringContains,
    StringEndsWith,
    StringStartsWith,
)

from parquetry.spark.filters import filter_table, translate_filters

UTC = datetime.UTC
SCHEMA = pa.schema(
    [
        ("i", pa.int64()),
        ("s", pa.string()),
        ("d", pa.date32()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("f", pa.float64()),
        ("dec", pa.decimal128(6, 2)),
        ("b", pa.bool_()),
    ]
)
_VALUES: dict[str, hs.SearchStrategy[Any]] = {
    "i": hs.integers(-5, 5),
    "s": hs.sampled_from(["", "a", "ab", "abc", "b", "ä", "\U0010ffff", "a\U0010ffff"]),
    "d": hs.dates(datetime.date(2024, 1, 1), datetime.date(2024, 1, 6)),
    "ts": hs.integers(0, 5).map(lambda h: datetime.datetime(2024, 1, 1, h, tzinfo=UTC)),
    "f": hs.sampled_from([0.0, 1.5, -1.0, float("nan")]),
    "dec": hs.sampled_from([Decimal("0.00"), Decimal("1.25"), Decimal("-3.10")]),
    "b": hs.booleans(),
}
_CMP: dict[type, Callable[[Any, Any], bool]] = {
    EqualTo: operator.eq,
    GreaterThan: operator.gt,
    GreaterThanOrEqual: operator.ge,
    LessThan: operator.lt,
    LessThanOrEqual: operator.le,
}


def _key(column: str, value: Any) -> Any:
    return value.encode() if column == "s" else value  # Spark compares UTF-8 bytes


def spark_truth(f: Filter, row: dict[str, Any]) -> bool:
    """Spark's semantics: a comparison with null is not true."""
    if isinstance(f, Not):
        inner = f.child
        v = row[inner.attribute[0]]
        return v is not None and not spark_truth(inner, row)
    column = f.attribute[0]
    v = row[column]
    if isinstance(f, IsNull):
        return v is None
    if isinstance(f, IsNotNull):
        return v is not None
    if isinstance(f, EqualNullSafe):
        return v == f.value if None not in (v, f.value) else v is f.value
    if v is None:
        return False
    if type(f) in _CMP:
        return _CMP[type(f)](_key(column, v), _key(column, f.value))
    if isinstance(f, In):
        return v in [x for x in f.value if x is not None]
    if isinstance(f, StringStartsWith):
        return bool(v.startswith(f.value))
    if isinstance(f, StringEndsWith):
        return bool(v.endswith(f.value))
    if isinstance(f, StringContains):
        return f.value in v
    raise AssertionError(f)


def dnf_truth(predicates: list[tuple[str, str, Any]], row: dict[str, Any]) -> bool:
    """Kartothek's conjunction semantics, the oracle for planning predicates."""
    for column, op, value in predicates:
        v = row[column]
        if op == "is null":
            ok = v is None
        elif op == "is not null":
            ok = v is not None
        elif v is None:
            ok = op == "!="
        elif op == "in":
            ok = v in value
        else:
            fn = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
                  ">": operator.gt, ">=": operator.ge}[op]  # fmt: skip
            ok = fn(_key(column, v), _key(column, value))
        if not ok:
            return False
    return True


@hs.composite
def filters(draw: hs.DrawFn) -> Filter:
    column = draw(hs.sampled_from(list(_VALUES)))
    value = draw(_VALUES[column])
    kinds: list[Callable[[], Filter]] = [
        lambda: EqualTo((column,), value),
        lambda: GreaterThan((column,), value),
        lambda: GreaterThanOrEqual((column,), value),
        lambda: LessThan((column,), value),
        lambda: LessThanOrEqual((column,), value),
        lambda: In((column,), (value, draw(_VALUES[column]), None)),
        lambda: IsNull((column,)),
        lambda: IsNotNull((column,)),
        lambda: EqualNullSafe((column,), draw(hs.none() | hs.just(value))),
        lambda: Not(EqualTo((column,), value)),
        lambda: Not(In((column,), (value,))),
    ]
    if column == "s":
        kinds += [
            lambda: StringStartsWith((column,), value),
            lambda: StringEndsWith((column,), value),
            lambda: StringContains((column,), value),
        ]
    return draw(hs.sampled_from(kinds))()


rows_strategy = hs.lists(
    hs.fixed_dictionaries({c: hs.none() | s for c, s in _VALUES.items()}), max_size=25
)


@settings(max_examples=100, deadline=None)
@given(rows_strategy, hs.lists(filters(), min_size=1, max_size=3))
def test_accepted_filters_match_spark_and_predicates_keep_a_superset(
    rows: list[dict[str, Any]], pushed: list[Filter]
) -> None:
    # Rows are compared by position: NaN != NaN would defeat comparing values.
    table = pa.Table.from_pylist(rows, schema=SCHEMA).append_column(
        "_row", pa.array(range(len(rows)))
    )
    pushdown = translate_filters(pushed, SCHEMA)
    assert set(pushdown.accepted) | set(pushdown.residual) == set(pushed)
    kept = filter_table(table, pushdown.accepted).column("_row").to_pylist()
    expected = [n for n, r in enumerate(rows) if all(spark_truth(f, r) for f in pushdown.accepted)]
    assert kept == expected
    spark_rows = {n for n, r in enumerate(rows) if all(spark_truth(f, r) for f in pushed)}
    planned = {n for n, r in enumerate(rows) if dnf_truth(list(pushdown.predicates), r)}
    assert spark_rows <= planned


def test_float_comparisons_and_nested_paths_stay_with_spark() -> None:
    pushed = [GreaterThan(("f",), 1.0), EqualTo(("a", "b"), 1), IsNotNull(("f",))]
    pushdown = translate_filters(pushed, SCHEMA)
    assert pushdown.residual == (pushed[0], pushed[1])
    assert pushdown.predicates == (("f", "is not null", None),)


def test_values_not_representable_in_the_column_type_stay_with_spark() -> None:
    pushed = [EqualTo(("i",), 1.5), EqualTo(("dec",), Decimal("1.255")), EqualTo(("i",), "x")]
    assert translate_filters(pushed, SCHEMA).accepted == ()


def test_translation_gives_typed_dnf() -> None:
    pushdown = translate_filters(
        [
            EqualTo(("d",), datetime.date(2024, 1, 2)),
            In(("i",), (3, 1, None)),
            StringStartsWith(("s",), "ab"),
        ],
        SCHEMA,
    )
    assert pushdown.dnf() == [
        [("d", "==", datetime.date(2024, 1, 2)), ("i", "in", [1, 3]), ("s", ">=", "ab"),
         ("s", "<", "ac")]
    ]  # fmt: skip
    assert translate_filters([], SCHEMA).dnf() is None
