"""``split_partitions`` (runs ordered without sorting every row when each partition is
one run) gives exactly what the sort of every row gave: the same partitions in the same
order, the same rows in the same order in each."""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import given, settings
from hypothesis import strategies as st

from parquetry.dataset.writeparts import split_partitions

KEYS = {
    "i": (pa.int64(), st.one_of(st.none(), st.integers(-2, 2))),
    "s": (pa.string(), st.one_of(st.none(), st.sampled_from(["a", "b", "ü", ""]))),
    "d": (pa.date32(), st.one_of(st.none(), st.sampled_from([dt.date(2020, 1, 1)]))),
    "f": (pa.float64(), st.one_of(st.none(), st.sampled_from([0.0, -0.0, 1.5, float("nan")]))),
}


def _sorted_split(
    table: pa.Table, keys: Sequence[str]
) -> list[tuple[tuple[tuple[str, Any], ...], pa.Table]]:
    """The implementation before (every row sorted), the oracle."""
    order = pc.sort_indices(table, sort_keys=[(pc.field(k), "ascending") for k in keys])
    table = table.take(order)
    n = table.num_rows
    if n == 0:
        return []
    change = None
    for k in keys:
        col = table.column(k).combine_chunks()
        after, before = col.slice(1), col.slice(0, n - 1)
        diff = pc.or_(
            pc.fill_null(pc.not_equal(after, before), False),
            pc.not_equal(pc.is_null(after), pc.is_null(before)),
        )
        change = diff if change is None else pc.or_(change, diff)
    starts = [0]
    if change is not None:
        starts += [i + 1 for i in pc.indices_nonzero(change).to_pylist()]
    payload = table.drop_columns(list(keys))
    key_cols = [table.column(k) for k in keys]
    out = []
    for s, e in itertools.pairwise([*starts, n]):
        partition = tuple((k, c[s].as_py()) for k, c in zip(keys, key_cols, strict=True))
        out.append((partition, payload.slice(s, e - s)))
    return out


@st.composite
def cases(draw: st.DrawFn) -> tuple[pa.Table, list[str]]:
    keys = draw(st.lists(st.sampled_from(list(KEYS)), min_size=1, max_size=2, unique=True))
    runs = draw(st.lists(st.tuples(*(KEYS[k][1] for k in keys)), max_size=6))
    grouped = draw(st.booleans())
    if grouped:
        runs = list(dict.fromkeys(runs))  # each partition one run (NaN: still repeated)
    columns: dict[str, list[Any]] = {k: [] for k in keys}
    payload: list[int] = []
    for values in runs:
        n = draw(st.integers(1, 4))
        for k, v in zip(keys, values, strict=True):
            columns[k] += [v] * n
        payload += range(len(payload), len(payload) + n)
    table = pa.table(
        {**{k: pa.array(v, type=KEYS[k][0]) for k, v in columns.items()}, "x": payload}
    )
    return table, keys


def _shown(runs: list[tuple[tuple[tuple[str, Any], ...], pa.Table]]) -> str:
    return repr([(p, t.to_pylist()) for p, t in runs])  # repr: NaN equals NaN


@settings(max_examples=300, deadline=None)
@given(cases())
def test_split_equals_the_sort_of_every_row(case: tuple[pa.Table, list[str]]) -> None:
    table, keys = case
    assert _shown(split_partitions(table, keys)) == _shown(_sorted_split(table, keys))


def test_many_chunks_grouped() -> None:
    parts = [pa.table({"p": [p] * 3, "x": [p * 10 + i for i in range(3)]}) for p in (3, 1, 2)]
    table = pa.concat_tables(parts)
    assert _shown(split_partitions(table, ["p"])) == _shown(_sorted_split(table, ["p"]))
