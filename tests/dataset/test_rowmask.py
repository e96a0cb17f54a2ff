"""``RowMask`` (a row operation's predicate, evaluated by an Acero projection) selects
exactly the rows ``replace.row_mask`` (a dataset scan) selects: random tables with nulls,
NaN, strings, dates and timestamps, random DNFs of every operator; and the rows
``delete_where`` / ``update_where`` change are the pyarrow-filtered oracle."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parquetry.dataset import Dataset
from parquetry.dataset.predicates import validate_predicates
from parquetry.dataset.replace import row_mask
from parquetry.dataset.rowmask import RowMask
from parquetry.store import MemoryStore

from .test_oracle import COLUMNS, OPS

EXTRA = {
    "t": (
        pa.timestamp("us"),
        st.sampled_from([dt.datetime(2020, 1, 1, 12), dt.datetime(1969, 12, 31, 23, 59)]),
    ),
    "n": (pa.float64(), st.sampled_from([float("nan"), -0.0, 0.0, float("inf"), 3.5])),
}
ALL = {**COLUMNS, **EXTRA}


@st.composite
def tables_and_dnfs(draw: st.DrawFn) -> tuple[pa.Table, list[list[tuple[Any, ...]]]]:
    n = draw(st.integers(0, 40))
    data = {
        name: pa.array(draw(st.lists(st.one_of(st.none(), values), min_size=n, max_size=n)), type=t)
        for name, (t, values) in ALL.items()
    }
    table = pa.table(data)
    chunks = draw(st.integers(1, 3))
    if n and chunks > 1:  # several record batches, as a concatenation of files has
        step = max(1, n // chunks)
        table = pa.concat_tables([table.slice(i, step) for i in range(0, n, step)])

    def literal() -> tuple[Any, ...]:
        col = draw(st.sampled_from(list(ALL)))
        op = draw(st.sampled_from([*OPS, "in", "is null", "is not null"]))
        values = ALL[col][1]
        if op == "in":
            return (col, op, draw(st.lists(values, max_size=3)))
        if op.startswith("is"):
            return (col, op, None)
        if col == "b" and op not in ("==", "!="):
            op = "=="
        return (col, op, draw(values))

    dnf = [
        [literal() for _ in range(draw(st.integers(1, 3)))] for _ in range(draw(st.integers(1, 3)))
    ]
    return table, dnf


@settings(max_examples=150, deadline=None)
@given(tables_and_dnfs())
def test_row_mask_equals_the_scanner_mask(case: tuple[pa.Table, list[list[tuple]]]) -> None:
    table, predicates = case
    dnf = validate_predicates(predicates, table.schema)
    assert dnf is not None
    expected = row_mask(table, dnf)
    got = RowMask(dnf)(table)
    assert got.type == pa.bool_()
    assert got.null_count == 0
    assert got.equals(expected)


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(tables_and_dnfs(), st.booleans())
def test_delete_and_update_rows_are_the_pyarrow_oracle(
    case: tuple[pa.Table, list[list[tuple]]], delete: bool
) -> None:
    table, predicates = case
    table = table.append_column("id", pa.array(range(table.num_rows), pa.int64()))
    store = MemoryStore()
    ds = Dataset.create(store, "d", table.slice(0, table.num_rows // 2))
    ds = ds.append(table.slice(table.num_rows // 2))
    dnf = validate_predicates(predicates, table.schema)
    assert dnf is not None
    hit = row_mask(table, dnf)  # the old evaluation is the oracle's
    if delete:
        out = ds.delete_where(predicates)
        expected = table.filter(pc.invert(hit))
    else:
        out = ds.update_where(predicates, set={"i": 99})
        i = pc.if_else(hit, pa.scalar(99, pa.int64()), table.column("i"))
        expected = table.set_column(table.schema.get_field_index("i"), "i", i)
    got = out.read().sort_by("id").select(expected.column_names)
    assert repr(got.to_pylist()) == repr(expected.to_pylist())  # repr: NaN equals NaN
