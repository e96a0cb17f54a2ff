"""Hypothesis oracle: read(predicates=p) equals a brute-force filter of all rows."""

from __future__ import annotations

import datetime as dt
import math
import operator
import uuid
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parquetry.dataset import Dataset
from parquetry.dataset.predicates import dnf_from_json, dnf_to_json
from parquetry.errors import PredicateError
from parquetry.store import MemoryStore

COLUMNS = {
    "i": (pa.int64(), st.integers(-3, 3)),
    "s": (pa.string(), st.sampled_from(["a", "b/c", "d=e", "%", "ü"])),
    "f": (pa.float64(), st.sampled_from([-1.5, 0.0, 2.25, 7.0])),
    "b": (pa.bool_(), st.booleans()),
    "d": (pa.date32(), st.sampled_from([dt.date(2020, 1, 1), dt.date(2021, 6, 30)])),
}
PARTITIONABLE = ["i", "s", "b", "d"]
OPS = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[pa.Table, list[str], list[str], list[list[tuple]]]:
    n = draw(st.integers(0, 25))
    data: dict[str, list[Any]] = {}
    partition_on = draw(st.lists(st.sampled_from(PARTITIONABLE), unique=True, max_size=2))
    for name, (_, values) in COLUMNS.items():
        nullable = name not in partition_on
        elem = st.one_of(st.none(), values) if nullable else values
        data[name] = draw(st.lists(elem, min_size=n, max_size=n))
    table = pa.table({k: pa.array(v, type=COLUMNS[k][0]) for k, v in data.items()})
    rest = [c for c in COLUMNS if c not in partition_on]
    indices = draw(st.lists(st.sampled_from(rest), unique=True, max_size=2))

    def literal() -> st.SearchStrategy[tuple]:
        col = draw(st.sampled_from(list(COLUMNS)))
        op = draw(st.sampled_from([*OPS, "in", "is null", "is not null"]))
        values = COLUMNS[col][1]
        if op == "in":
            return st.just((col, op, draw(st.lists(values, max_size=3))))
        if op.startswith("is"):
            return st.just((col, op, None))
        if col == "b" and op not in ("==", "!="):
            op = "=="
        return st.just((col, op, draw(values)))

    dnf = [
        [draw(literal()) for _ in range(draw(st.integers(1, 3)))]
        for _ in range(draw(st.integers(1, 3)))
    ]
    return table, partition_on, indices, dnf


def _matches(row: dict[str, Any], col: str, op: str, value: Any) -> bool:
    x = row[col]
    if op == "is null":
        return x is None
    if op == "is not null":
        return x is not None
    if x is None:
        return False
    if op == "in":
        return x in value
    return bool(OPS[op](x, value))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_read_with_predicates_equals_brute_force(scenario: tuple) -> None:
    table, partition_on, indices, dnf = scenario
    store = MemoryStore()
    name = uuid.uuid4().hex
    ds = Dataset.create(store, name, table, partition_on=partition_on, secondary_indices=indices)
    if table.num_rows:  # a second commit: indices and statistics are merged
        half = table.slice(0, table.num_rows // 2)
        ds = ds.append(half)
        table = pa.concat_tables([table, half])
    want = [
        r for r in table.to_pylist() if any(all(_matches(r, *lit) for lit in conj) for conj in dnf)
    ]
    got = ds.read(predicates=dnf).to_pylist()
    assert sorted(got, key=repr) == sorted(want, key=repr)
    planned = {f.label for f in ds.plan(dnf).files}
    assert planned <= set(ds.document.partitions)


@settings(max_examples=50, deadline=None)
@given(scenarios())
def test_predicates_json_round_trip(scenario: tuple) -> None:
    dnf = scenario[3]
    assert dnf_from_json(dnf_to_json(dnf)) == [[tuple(t) for t in conj] for conj in dnf]


# --- values outside a column's range or precision; Spark's float semantics --------------------


def _edge_dataset() -> Dataset:
    """Several files (partitioned on ``p``), an index on ``ix`` and statistics on the rest."""
    n = 12
    table = pa.table(
        {
            "p": pa.array([i % 3 for i in range(n)], pa.int8()),
            "i8": pa.array([[-128, 0, 127, None][i % 4] for i in range(n)], pa.int8()),
            "ix": pa.array([[-128, 5, 127, None][i % 4] for i in range(n)], pa.int8()),
            "i64": pa.array([[-(2**63), 0, 2**63 - 1, None][i % 4] for i in range(n)]),
            "d": pa.array(
                [
                    [Decimal("1.25"), Decimal("1.26"), Decimal("-9999.99"), None][i % 4]
                    for i in range(n)
                ],
                pa.decimal128(6, 2),
            ),
            "f": pa.array([[0.0, -0.0, math.nan, 1.5, None, -math.inf][i % 6] for i in range(n)]),
            "fx": pa.array([[0.0, -0.0, math.nan, 1.5, None, math.inf][i % 6] for i in range(n)]),
            "ts": pa.array([dt.datetime(2000, 1, 1), None] * (n // 2), pa.timestamp("us")),
            "s": pa.array(["a", "\U0001f600", None] * (n // 3)),
        }
    )
    return Dataset.create(
        MemoryStore(), "edges", table, partition_on=["p"], secondary_indices=["ix", "fx"]
    )


def _expected(ds: Dataset, col: str, op: str, value: Any) -> list[dict[str, Any]]:
    from parquetry.dataset.literals import compare

    out = []
    for row in ds.read().to_pylist():
        v = row[col]
        if op == "in":
            ok = v is not None and any(compare("==", v, x) for x in value)
        else:
            ok = v is not None and compare(op, v, value)
        if ok:
            out.append(row)
    return out


EDGE_CASES = [
    ("i8", 1000),
    ("i8", -1000),
    ("ix", 1000),
    ("ix", -(10**400)),
    ("i64", 2**70),
    ("i64", -(2**70)),
    ("p", 300),
    ("d", Decimal("1.255")),
    ("d", Decimal("-1.255")),
    ("d", Decimal("10000")),
    ("d", Decimal("Infinity")),
    ("d", 10**400),
    ("f", 10**400),
    ("f", -(10**400)),
    ("f", 2**53 + 1),
    ("f", -0.0),
    ("f", 0.0),
    ("f", math.nan),
    ("f", math.inf),
    ("fx", -0.0),
    ("fx", math.nan),
    ("fx", math.inf),
    ("ts", dt.datetime(9999, 12, 31)),
    ("ts", dt.datetime(1, 1, 1)),
]


def test_out_of_range_and_float_edges_filter_like_sql() -> None:
    """Regression: out-of-range values raised raw Arrow/Overflow errors; NaN/-0.0 disagreed."""
    ds = _edge_dataset()
    for col, value in EDGE_CASES:
        for op in [*OPS, "in"]:
            v = [value] if op == "in" else value
            got = _rows(ds.read(predicates=[[(col, op, v)]]).to_pylist())
            assert got == _rows(_expected(ds, col, op, v)), (col, op, value)


def test_out_of_range_semantics_explicitly() -> None:
    ds = _edge_dataset()
    nonnull = ds.read(predicates=[[("i8", "is not null")]]).num_rows
    assert ds.read(predicates=[[("i8", "==", 1000)]]).num_rows == 0
    assert ds.read(predicates=[[("i8", "<", 1000)]]).num_rows == nonnull
    assert ds.read(predicates=[[("i8", ">", 1000)]]).num_rows == 0
    assert ds.read(predicates=[[("p", "<", 300)]]).num_rows == 12
    assert ds.plan([[("p", ">", 300)]]).files == ()
    assert ds.read(predicates=[[("d", "==", Decimal("1.255"))]]).num_rows == 0
    below = ds.read(predicates=[[("d", "<", Decimal("1.255"))]]).column("d").to_pylist()
    assert sorted(below) == [Decimal("-9999.99")] * 3 + [Decimal("1.25")] * 3
    # Spark: -0.0 = 0.0 and NaN = NaN, for == and in alike.
    zeros = ds.read(predicates=[[("f", "==", -0.0)]]).num_rows
    assert zeros == ds.read(predicates=[[("f", "in", [-0.0])]]).num_rows == 4
    nans = ds.read(predicates=[[("f", "==", math.nan)]]).num_rows
    assert nans == ds.read(predicates=[[("f", "in", [math.nan])]]).num_rows == 2
    assert ds.read(predicates=[[("f", ">", math.inf)]]).num_rows == nans


@pytest.mark.parametrize(
    ("col", "value", "fragment"),
    [
        ("d", Decimal("NaN"), "NaN"),
        ("d", Decimal("sNaN"), "NaN"),
        ("s", "\ud800", "surrogate"),
        ("ts", dt.datetime(1, 1, 1, tzinfo=dt.timezone(dt.timedelta(hours=5))), "years"),
    ],
)
def test_unrepresentable_values_are_predicate_errors(col: str, value: Any, fragment: str) -> None:
    ds = _edge_dataset()
    for op in [*OPS, "in"]:
        v = [value] if op == "in" else value
        with pytest.raises(PredicateError, match=fragment) as info:
            ds.read(predicates=[[(col, op, v)]])
        assert info.value.column == col
        assert info.value.op == op


def _rows(rows: list[dict[str, Any]]) -> list[str]:
    """Rows as sorted reprs: NaN compares equal to itself only by spelling."""
    return sorted(repr(r) for r in rows)


def test_ranged_index_lookup_keeps_nan_above_footer_statistics(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Index files' Parquet statistics leave NaN out; NaN is above every value (Spark)."""
    monkeypatch.setattr("parquetry.dataset.indices.INDEX_ROW_GROUP", 64)
    # Several index row groups (lookups read only those that may match); NaN shares the
    # last one with finite values, so that group has min/max statistics.
    n = 3 * 64 - 10
    ds = Dataset.create(
        MemoryStore(),
        "nan",
        pa.table({"f": [float(i) for i in range(n)], "k": [0] * n}),
        secondary_indices=["f"],
    )
    ds = ds.append(pa.table({"f": [math.nan, 1.0], "k": [1, 1]}))
    assert ds.read(predicates=[[("f", ">", 1e9)]]).column("k").to_pylist() == [1]
    assert ds.read(predicates=[[("f", "==", math.nan)]]).column("k").to_pylist() == [1]
    assert ds.read(predicates=[[("f", ">=", float(n - 1))]]).num_rows == 2
