"""Hypothesis oracle: read(predicates=p) equals a brute-force filter of all rows."""

from __future__ import annotations

import datetime as dt
import operator
import uuid
from typing import Any

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parquetry.dataset import Dataset
from parquetry.dataset.predicates import dnf_from_json, dnf_to_json
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
