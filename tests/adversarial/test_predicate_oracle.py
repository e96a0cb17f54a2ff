"""Predicate oracle (issue 11 §6.5): planner + row filter equal a brute-force evaluation.

Hypothesis builds a dataset with a column of every filterable type (integers of each width,
floats, decimal, string, binary, bool, date, timestamps with and without a time zone) holding
edge values (type bounds, ±0.0, NaN, ±inf, nulls), partitioned on some columns, indexed on
others and written in several files, so partition pruning, index lookups, per-file statistics
and the row filter all take part. Predicates are random DNF over in-range and out-of-range
values, ``in`` lists and null tests. Properties:

* ``ds.read(predicates=p)`` holds exactly the rows a pure-Python evaluation of ``p`` over the
  input rows selects, with the documented semantics (SQL nulls; exact comparison of values
  the column cannot hold; Spark's float order: NaN = NaN, NaN above everything, -0.0 = 0.0);
* ``ds.plan(p)`` never skips a file holding a matching row;
* ``parquetry scan --where`` selects the same rows (a few examples, on a local store).

The normal suite runs a small, derandomized sample. For a large run set the number of
examples: ``PARQUETRY_ORACLE_EXAMPLES=5000 pytest tests/adversarial/test_predicate_oracle.py``
(``PARQUETRY_ORACLE_CLI_EXAMPLES`` for the CLI test; add ``--timeout=0`` beyond ~1000
examples, the suite's per-test timeout is 600 s).
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parquetry.dataset import Dataset
from parquetry.store import LocalStore, MemoryStore

EXAMPLES = int(os.environ.get("PARQUETRY_ORACLE_EXAMPLES", "60"))
CLI_EXAMPLES = int(os.environ.get("PARQUETRY_ORACLE_CLI_EXAMPLES", "8"))
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=EXAMPLES <= 500,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

UTC = dt.UTC
NAN = math.nan
PLUS5 = dt.timezone(dt.timedelta(hours=5))
DMAX = Decimal("9999.99")

# column -> (type, stored values, extra predicate values the column cannot hold)
COLUMNS: dict[str, tuple[pa.DataType, list[Any], list[Any]]] = {
    "i8": (pa.int8(), [-128, -1, 0, 1, 127], [128, -129, 1000, 2**70, -(10**400)]),
    "i16": (pa.int16(), [-(2**15), 0, 7, 2**15 - 1], [2**15, -(2**15) - 1]),
    "i32": (pa.int32(), [-(2**31), 0, 3, 2**31 - 1], [2**31, 10**400]),
    "i64": (pa.int64(), [-(2**63), -5, 0, 2**63 - 1], [2**63, -(2**63) - 1, 2**70]),
    "u8": (pa.uint8(), [0, 1, 255], [-1, 256]),
    "u64": (pa.uint64(), [0, 2**64 - 1], [-1, 2**64]),
    "f32": (
        pa.float32(),
        [0.0, -0.0, NAN, math.inf, -math.inf, 1.5, -2.5, 3.4028234663852886e38],
        [0.1, 2**24 + 1, 10**39, -(10**400)],
    ),
    "f64": (
        pa.float64(),
        [0.0, -0.0, NAN, math.inf, -math.inf, 1.5, -2.5, 5e-324, 1.7976931348623157e308],
        [2**53 + 1, 10**400, -(10**400), 0.1],
    ),
    # A float column that may be a partition key (partition values cannot be NaN).
    "fp": (
        pa.float64(),
        [0.0, -0.0, 1.5, -math.inf, math.inf, 0.1],
        [NAN, 2**53 + 1, 10**400],
    ),
    "dec": (
        pa.decimal128(6, 2),
        [-DMAX, Decimal("-0.01"), Decimal("0.00"), Decimal("1.25"), DMAX],
        [Decimal("1.255"), Decimal("-0.005"), Decimal("10000"), Decimal("-Infinity"), 10**400],
    ),
    "s": (pa.string(), ["", "a", "ab", "ü", "\U0001f600", "b/c=d%"], ["aa", "\x00", "zz"]),
    "bin": (pa.binary(), [b"", b"\x00", b"a", b"\xff\xfe"], [b"\x00\x00", b"\xff"]),
    "b": (pa.bool_(), [False, True], []),
    "d": (
        pa.date32(),
        [dt.date(1, 1, 1), dt.date(1970, 1, 1), dt.date(2024, 2, 29), dt.date(9999, 12, 31)],
        [dt.date(2024, 3, 1)],
    ),
    "ts": (
        pa.timestamp("us"),
        [dt.datetime(1, 1, 1), dt.datetime(2020, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59)],
        [dt.datetime(2020, 1, 1, 5, tzinfo=PLUS5), dt.datetime(2020, 1, 1, 0, 0, 0, 1)],
    ),
    "tstz": (
        pa.timestamp("us", tz="UTC"),
        [
            dt.datetime(1, 1, 1, tzinfo=UTC),
            dt.datetime(2020, 1, 1, tzinfo=UTC),
            dt.datetime(9999, 12, 31, tzinfo=UTC),
        ],
        [dt.datetime(2020, 1, 1, 5, tzinfo=PLUS5), dt.datetime(2020, 1, 1)],
    ),
}
PARTITIONABLE = ["i8", "u8", "s", "b", "d", "dec", "fp"]
INDEXABLE = ["i16", "i64", "f32", "f64", "s", "d", "ts", "tstz", "u64"]
OPS = ["==", "!=", "<", "<=", ">", ">=", "in", "is null", "is not null"]


# --- the brute-force oracle: the documented semantics, written without parquetry -------------


def _rank(v: Any) -> tuple[int, Any]:
    """Spark's order for floats (NaN above everything); other values as they are."""
    if isinstance(v, float) and v != v:
        return (1, 0)
    return (0, v)


def _literal_for(col: str, value: Any) -> Any:
    """A predicate value as the column compares it: naive columns are UTC wall time."""
    t = COLUMNS[col][0]
    if isinstance(value, dt.datetime):
        if t.tz is None and value.tzinfo is not None:
            return value.astimezone(UTC).replace(tzinfo=None)
        if t.tz is not None and value.tzinfo is None:
            return value.replace(tzinfo=UTC)
    return value


def _holds(v: Any, op: str, x: Any) -> bool:
    if op == "is null":
        return v is None
    if op == "is not null":
        return v is not None
    if v is None:
        return False
    if op == "in":
        return any(_holds(v, "==", y) for y in x)
    a, b = _rank(v), _rank(x)
    return {
        "==": a == b,
        "!=": a != b,
        "<": a < b,
        "<=": a <= b,
        ">": a > b,
        ">=": a >= b,
    }[op]


def oracle(rows: list[dict[str, Any]], dnf: list[list[tuple[str, str, Any]]]) -> set[int]:
    """Ids of the rows satisfying ``dnf``."""
    out = set()
    for row in rows:
        for conj in dnf:
            if all(
                _holds(
                    row[c],
                    op,
                    [_literal_for(c, y) for y in x] if op == "in" else _literal_for(c, x),
                )
                for c, op, x in conj
            ):
                out.add(row["id"])
                break
    return out


# --- strategies --------------------------------------------------------------------------------


@st.composite
def datasets(draw: st.DrawFn) -> tuple[list[pa.Table], list[str], list[str]]:
    partition_on = draw(st.lists(st.sampled_from(PARTITIONABLE), unique=True, max_size=2))
    rest = [c for c in INDEXABLE if c not in partition_on]
    indices = draw(st.lists(st.sampled_from(rest), unique=True, max_size=3))
    chunks = []
    next_id = 0
    for _ in range(draw(st.integers(1, 3))):
        n = draw(st.integers(1, 8))
        data: dict[str, Any] = {"id": pa.array(range(next_id, next_id + n), pa.int64())}
        next_id += n
        for name, (t, values, _) in COLUMNS.items():
            elem = st.sampled_from(values)
            if name not in partition_on:
                elem = st.one_of(st.none(), elem)
            data[name] = pa.array(draw(st.lists(elem, min_size=n, max_size=n)), t)
        chunks.append(pa.table(data))
    return chunks, partition_on, indices


@st.composite
def literals(draw: st.DrawFn) -> tuple[str, str, Any]:
    col = draw(st.sampled_from(list(COLUMNS)))
    _, values, outside = COLUMNS[col]
    op = draw(st.sampled_from(OPS))
    value = st.sampled_from(values + outside)
    if op == "in":
        return (col, op, draw(st.lists(value, max_size=4)))
    if op.startswith("is"):
        return (col, op, None)
    return (col, op, draw(value))


dnfs = st.lists(st.lists(literals(), min_size=1, max_size=3), min_size=1, max_size=3)


def _create(
    store: Any, chunks: list[pa.Table], partition_on: list[str], indices: list[str]
) -> Dataset:
    ds = Dataset.create(
        store, "oracle", chunks[0], partition_on=partition_on, secondary_indices=indices
    )
    for chunk in chunks[1:]:
        ds = ds.append(chunk)
    return ds


# --- properties --------------------------------------------------------------------------------


@SETTINGS
@given(datasets(), dnfs)
def test_read_equals_brute_force_and_plan_keeps_every_matching_file(
    dataset: tuple[list[pa.Table], list[str], list[str]], dnf: list[list[tuple[str, str, Any]]]
) -> None:
    chunks, partition_on, indices = dataset
    ds = _create(MemoryStore(), chunks, partition_on, indices)
    rows = [r for chunk in chunks for r in chunk.to_pylist()]
    expected = oracle(rows, dnf)

    got = ds.read(predicates=dnf)
    assert sorted(got.column("id").to_pylist()) == sorted(expected)
    # The rows come back with their values (partition columns restored from labels; a
    # partition key may come back as 0.0 for -0.0, which is equal).
    by_id = {r["id"]: r for r in rows}
    for row in got.to_pylist():
        want = by_id[row["id"]]
        for k, v in row.items():
            assert type(v) is type(want[k]), (k, v, want[k])
            assert v is None is want[k] or _holds(v, "==", want[k]), (k, v, want[k])

    planned = {f.label for f in ds.plan(dnf).files}
    for f in ds.plan().files:
        if f.label in planned:
            continue
        skipped = ds.read_file(f).to_pylist()
        assert not oracle(skipped, dnf), f"plan skipped {f.label} holding a match for {dnf}"


# --- the CLI path ------------------------------------------------------------------------------


def _where(dnf: list[list[tuple[str, str, Any]]]) -> str | None:
    """``--where`` text for a DNF, or None if a value has no literal (NaN, inf, bytes)."""
    from parquetry.cli.where_ast import format_column, format_literal

    def lit(v: Any) -> str | None:
        if isinstance(v, bytes) or (isinstance(v, float) and not math.isfinite(v)):
            return None
        if isinstance(v, Decimal) and not v.is_finite():
            return None
        if isinstance(v, int) and not isinstance(v, bool) and abs(v) > 10**300:
            return None
        return format_literal(v)

    conjs = []
    for conj in dnf:
        terms = []
        for c, op, x in conj:
            if op.startswith("is"):
                terms.append(f"{format_column(c)} {op}")
                continue
            if op == "in":
                if not x:
                    return None
                vals = [lit(v) for v in x]
                if None in vals:
                    return None
                terms.append(f"{format_column(c)} in ({', '.join(v for v in vals if v)})")
                continue
            text = lit(x)
            if text is None:
                return None
            terms.append(f"{format_column(c)} {'=' if op == '==' else op} {text}")
        conjs.append("(" + " and ".join(terms) + ")")
    return " or ".join(conjs)


@pytest.fixture(scope="module")
def cli_lake(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, list[dict[str, Any]]]:
    """A local dataset with every edge value of every column (partitioned and indexed)."""
    n = max(len(values) for _, values, _ in COLUMNS.values()) + 1
    data: dict[str, Any] = {"id": pa.array(range(n), pa.int64())}
    for name, (t, values, _) in COLUMNS.items():
        cells = [values[i % len(values)] for i in range(n)]
        if name not in ("s", "d"):
            cells[-1] = None
        data[name] = pa.array(cells, t)
    table = pa.table(data)
    root = tmp_path_factory.mktemp("oracle") / "lake"
    store = LocalStore(root)
    _create(store, [table.slice(0, 4), table.slice(4)], ["s", "d"], ["f64", "i64"])
    return str(root), table.to_pylist()


@settings(max_examples=CLI_EXAMPLES, deadline=None, derandomize=CLI_EXAMPLES <= 500)
@given(dnfs)
def test_cli_scan_where_equals_brute_force(
    cli_lake: tuple[str, list[dict[str, Any]]], dnf: list[list[tuple[str, str, Any]]]
) -> None:
    from typer.testing import CliRunner

    from parquetry.cli.app import app

    text = _where(dnf)
    if text is None:
        return
    root, rows = cli_lake
    args = ["scan", root, "oracle", "--where", text, "--format", "json", "--columns", "id"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, (text, result.output)
    got = {json.loads(line)["id"] for line in result.stdout.splitlines() if line.strip()}
    assert got == oracle(rows, dnf), text


def test_cli_oracle_fixture_is_not_vacuous(cli_lake: tuple[str, list[dict[str, Any]]]) -> None:
    """The CLI sample really compares rows: a known expression selects known ids."""
    from typer.testing import CliRunner

    from parquetry.cli.app import app

    root, rows = cli_lake
    text = "f64 = -0.0 or i8 > 1000 or i8 < 200"
    result = CliRunner().invoke(
        app, ["scan", root, "oracle", "--where", text, "--format", "json", "--columns", "id"]
    )
    got = {json.loads(line)["id"] for line in result.stdout.splitlines() if line.strip()}
    assert got == {r["id"] for r in rows if r["i8"] is not None or r["f64"] == 0.0}
    assert got
