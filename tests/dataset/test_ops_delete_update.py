"""Dataset.delete_where / update_where: oracle, indices, concurrency, faults, memory."""

from __future__ import annotations

import operator
import threading
import uuid
from collections import Counter
from collections.abc import Callable
from functools import partial
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parquetry.dataset import Dataset
from parquetry.dataset.rowops import plan_delete, plan_update
from parquetry.errors import (
    CommitConflict,
    InvalidArgument,
    ParquetryError,
    SchemaMismatch,
    UnknownColumn,
)
from parquetry.store import MemoryStore
from parquetry.testing import CountingStore, FaultyStore

from .ops_oracle import assert_index_exact, orphan_data_files, rows

SCHEMA = pa.schema([("p", pa.string()), ("k", pa.int64()), ("v", pa.int64())])
Row = tuple[Any, ...]
_CMP: dict[str, Callable[[Any, Any], bool]] = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


def _holds(term: tuple[Any, ...], row: dict[str, Any]) -> bool:
    """The oracle's own reading of a kartothek literal (a null satisfies no comparison)."""
    col, op = term[0], term[1]
    x = row[col]
    if op == "is null":
        return x is None
    if op == "is not null":
        return x is not None
    if x is None:
        return False
    if op == "in":
        return x in term[2]
    return _CMP[op](x, term[2])


def _matches(predicates: list[list[tuple[Any, ...]]], row: dict[str, Any]) -> bool:
    return any(all(_holds(t, row) for t in conj) for conj in predicates)


def _table(values: list[Row]) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(SCHEMA.names, r, strict=True)) for r in values], SCHEMA)


def _create(store: Any, batches: list[list[Row]], partitioned: bool, name: str = "d") -> Dataset:
    keys = ["p"] if partitioned else []
    ds = Dataset.create(store, name, _table(batches[0]), partition_on=keys, secondary_indices=["k"])
    for more in batches[1:]:
        ds = ds.append(_table(more))
    return ds


values = st.tuples(
    st.sampled_from(["a", "b", None]),
    st.one_of(st.none(), st.integers(0, 6)),
    st.integers(0, 9),
)
literals = st.one_of(
    st.tuples(st.just("p"), st.sampled_from(["==", "!="]), st.sampled_from(["a", "b"])),
    st.tuples(st.just("p"), st.sampled_from(["is null", "is not null"])),
    st.tuples(st.just("k"), st.sampled_from(["<", ">=", "==", "!="]), st.integers(0, 6)),
    st.tuples(st.just("k"), st.just("in"), st.lists(st.integers(0, 6), min_size=1, max_size=3)),
    st.tuples(st.just("k"), st.sampled_from(["is null", "is not null"])),
    st.tuples(st.just("v"), st.sampled_from(["<=", ">"]), st.integers(0, 9)),
)
# (set= mapping, the oracle's new row from the old)
UPDATES: list[tuple[dict[str, Any], Callable[[dict[str, Any]], dict[str, Any]]]] = [
    ({"v": 99}, lambda r: {**r, "v": 99}),
    ({"v": pc.field("v") + 1, "k": pc.field("v")}, lambda r: {**r, "v": r["v"] + 1, "k": r["v"]}),
    ({"k": None}, lambda r: {**r, "k": None}),
    ({"p": "b"}, lambda r: {**r, "p": "b"}),  # a partition key: rows move
]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    batches=st.lists(st.lists(values, min_size=1, max_size=8), min_size=1, max_size=3),
    predicates=st.lists(st.lists(literals, min_size=1, max_size=2), min_size=1, max_size=2),
    partitioned=st.booleans(),
    update=st.one_of(st.none(), st.integers(0, len(UPDATES) - 1)),
)
def test_delete_and_update_match_a_pyarrow_oracle(
    batches: list[list[Row]],
    predicates: list[list[tuple[Any, ...]]],
    partitioned: bool,
    update: int | None,
) -> None:
    store = MemoryStore()
    ds = _create(store, batches, partitioned)
    old = [dict(zip(SCHEMA.names, r, strict=True)) for b in batches for r in b]
    hits = sum(_matches(predicates, r) for r in old)
    if update is None:
        out = ds.delete_where(predicates)
        want = [r for r in old if not _matches(predicates, r)]
        counted = "rows_deleted"
    else:
        assignments, change = UPDATES[update]
        out = ds.update_where(predicates, set=assignments)
        want = [change(r) if _matches(predicates, r) else r for r in old]
        counted = "rows_updated"
    assert rows(out.read(), SCHEMA.names) == Counter(tuple(r.values()) for r in want)
    assert_index_exact(out, "k")
    if not hits:
        assert out.version == ds.version  # nothing matched: no commit
        return
    assert out.version == ds.version + 1
    assert out.info is not None
    assert out.info.extra[counted] == hits
    assert out.info.operation == ("delete" if update is None else "update_where")
    assert out.info.parameters["predicate"].startswith("(")
    assert out.read().schema == SCHEMA
    assert orphan_data_files(store, "d") == set()


def test_files_matched_by_partition_keys_are_dropped_unread() -> None:
    counting = CountingStore(MemoryStore())
    ds = _create(
        counting, [[("a", 1, 1), ("a", 2, 2), ("b", 3, 3), ("b", 5, 5), (None, 4, 4)]], True
    )
    dropped = {f.key for f in ds.plan([[("p", "==", "a")]]).files}
    other = {f.key for f in ds.plan([[("p", "==", "b")]]).files}
    counting.reset()
    plan = plan_delete(ds, [[("p", "==", "a")], [("p", "is null"), ("k", "==", 4)]])
    assert len(plan.dropped) == 1
    assert len(plan.rewritten) == 1
    assert dict(plan.metrics)["rows_deleted"] == 3
    counting.reset()
    out = ds.delete_where([[("p", "==", "a")], [("p", "==", "b"), ("v", "==", 4)]])
    read = {key for kind, key in counting.log if kind in ("get", "get_range", "open")}
    assert not read & dropped  # never read
    assert read & other  # read to evaluate v == 4 (its statistics allow it), left as it was
    assert rows(out.read()) == Counter([("b", 3, 3), ("b", 5, 5), (None, 4, 4)])
    assert out.info is not None
    assert dict(out.info.extra) == {"rows_deleted": 2, "rows_copied": 0, "files_rewritten": 0}
    assert (out.info.files_removed, out.info.files_added) == (1, 0)
    assert out.history(limit=1)[0].metrics["rows_deleted"] == 2


def test_update_values_are_checked_before_any_write() -> None:
    counting = CountingStore(MemoryStore())
    ds = Dataset.create(
        counting,
        "d",
        pa.table(
            {"p": ["a"], "k": pa.array([1], pa.int32()), "v": [1.5]},
            schema=pa.schema([("p", pa.string()), ("k", pa.int32(), False), ("v", pa.float64())]),
        ),
        partition_on=["p"],
    )
    where = [[("k", "==", 1)]]
    counting.reset()
    cases: list[tuple[dict[str, Any], type[ParquetryError], str]] = [
        ({"k": 1.5}, SchemaMismatch, "'k'.*int32"),
        ({"k": 2**40}, SchemaMismatch, "'k'"),
        ({"k": "1"}, SchemaMismatch, "'k'"),
        ({"k": None}, SchemaMismatch, "'k' is not nullable"),
        ({"p": b"x"}, SchemaMismatch, "'p'"),
        ({"nope": 1}, UnknownColumn, "'nope'"),
        ({"k": pc.field("v")}, SchemaMismatch, "'k' gives double"),
        ({"k": pc.field("zz")}, SchemaMismatch, "'k' cannot be evaluated"),
        ({}, InvalidArgument, "set="),
    ]
    for assignments, error, message in cases:
        with pytest.raises(error, match=message):
            ds.update_where(where, set=assignments)
    with pytest.raises(InvalidArgument, match="needs a predicate"):
        ds.delete_where(None)
    assert not any(k in counting.counts for k in ("put", "delete", "delete_many"))
    # an expression overflowing on a row is found while rewriting: nothing committed
    with pytest.raises(SchemaMismatch, match="'k'"):
        ds.update_where(where, set={"k": pc.field("k") + 2**40})
    assert Dataset.open(counting, "d").version == 0
    assert orphan_data_files(counting, "d") == set()
    out = ds.update_where(where, set={"k": pc.field("k") * 3, "v": 2})
    assert out.read().to_pylist() == [{"p": "a", "k": 3, "v": 2.0}]
    assert out.info is not None
    assert out.info.parameters["set"] == '{"k": "multiply_checked(k, 3)", "v": "2.0"}'
    plan = plan_update(out, [[("k", "==", 3)]], {"v": 0})
    assert (plan.metrics["rows_updated"], len(plan.rewritten)) == (1, 1)


def test_updating_a_partition_key_moves_rows_and_keeps_the_index_exact() -> None:
    store = MemoryStore()
    ds = _create(store, [[("a", 1, 1), ("a", 2, 2), ("b", 3, 3)]], True)
    out = ds.update_where([[("k", "==", 2)]], set={"p": None, "k": 5})
    labels = sorted(lbl.split("/")[0] for lbl in out.document.partitions)
    assert labels == ["p=__HIVE_DEFAULT_PARTITION__", "p=a", "p=b"]
    assert rows(out.read(predicates=[[("p", "is null")]])) == Counter([(None, 5, 2)])
    assert rows(out.read()) == Counter([("a", 1, 1), (None, 5, 2), ("b", 3, 3)])
    assert_index_exact(out, "k")
    assert out.read(predicates=[[("k", "==", 2)]]).num_rows == 0


BASE = [("a", i % 5, i) for i in range(10)] + [("b", i % 5, i) for i in range(10, 20)]


def _race(jobs: list[Callable[[], Any]]) -> list[Any]:
    """Run ``jobs`` in threads started together; each result or the exception raised."""
    barrier = threading.Barrier(len(jobs))
    out: list[Any] = [None] * len(jobs)

    def run(i: int) -> None:
        barrier.wait()
        try:
            out[i] = jobs[i]()
        except ParquetryError as exc:
            out[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


@pytest.mark.parametrize("op", ["delete", "update"])
def test_concurrent_appends_never_conflict_with_a_rewrite(op: str) -> None:
    for attempt in range(4):
        store = MemoryStore()
        ds = _create(store, [BASE], True)
        more = [("a", 1, 100 + attempt), ("b", 1, 200)]  # k == 1 rows the op did not see
        where = [[("k", "==", 1)]]
        if op == "delete":
            results = _race([partial(ds.delete_where, where), partial(ds.append, _table(more))])
            want = Counter(r for r in BASE if r[1] != 1) + Counter(more)
        else:
            results = _race(
                [partial(ds.update_where, where, set={"v": -1}), partial(ds.append, _table(more))]
            )
            want = Counter((p, k, -1 if k == 1 else v) for p, k, v in BASE) + Counter(more)
        assert all(isinstance(r, Dataset) for r in results), results
        final = Dataset.open(store, "d")
        assert final.version == 2
        assert rows(final.read()) == want
        assert_index_exact(final, "k")


def test_concurrent_rewrites_of_the_same_file_conflict_or_both_land() -> None:
    for _ in range(3):
        store = MemoryStore()
        ds = _create(store, [BASE], True)
        first, second = [[("k", "==", 1)]], [[("k", "==", 2)]]
        results = _race([partial(ds.delete_where, first), partial(ds.delete_where, second)])
        won = [i for i, r in enumerate(results) if isinstance(r, Dataset)]
        (lost,) = [r for r in results if not isinstance(r, Dataset)]
        assert isinstance(lost, CommitConflict)
        assert "p=a/" in str(lost)
        assert "p=b/" in str(lost)  # the labels that collided are named
        (winner,) = won
        gone = 1 if winner == 0 else 2
        final = Dataset.open(store, "d")
        assert rows(final.read()) == Counter(r for r in BASE if r[1] != gone)
        assert orphan_data_files(store, "d") == set()
        # re-run on the new version: applies on top (both deletions in the end)
        again = final.delete_where(second if winner == 0 else first)
        assert rows(again.read()) == Counter(r for r in BASE if r[1] not in (1, 2))
        assert_index_exact(again, "k")
    # disjoint files: both land
    store = MemoryStore()
    ds = _create(store, [BASE], True)
    a, b = [[("p", "==", "a"), ("k", "==", 1)]], [[("p", "==", "b"), ("k", "==", 2)]]
    results = _race([lambda: ds.delete_where(a), lambda: ds.update_where(b, set={"v": 0})])
    assert all(isinstance(r, Dataset) for r in results), results
    want = Counter((p, k, 0 if (p, k) == ("b", 2) else v) for p, k, v in BASE if (p, k) != ("a", 1))
    assert rows(Dataset.open(store, "d").read()) == want


@pytest.mark.parametrize("op", ["delete", "update"])
def test_every_failing_store_call_leaves_the_old_or_new_version(op: str) -> None:
    base = [("a", 1, 1), ("a", 2, 2), ("b", 2, 3), ("c", 4, 4)]

    def setup() -> MemoryStore:
        inner = MemoryStore(uuid.uuid4().hex)
        _create(inner, [base[:2], base[2:]], True, name="f")
        return inner

    where = [[("k", "==", 2)], [("p", "==", "c")]]

    def run(store: Any) -> None:
        ds = Dataset.open(store, "f")
        if op == "delete":
            ds.delete_where(where)
        else:
            ds.update_where(where, set={"v": pc.field("v") * 10, "k": 0})

    before = Counter(base)
    if op == "delete":
        after = Counter([("a", 1, 1)])
    else:
        after = Counter([("a", 1, 1), ("a", 0, 20), ("b", 0, 30), ("c", 0, 40)])
    counter = FaultyStore(setup())
    run(counter)
    outcomes: set[str] = set()
    for n in range(1, counter.calls + 1):
        for lost_ack in (False, True):
            inner = setup()
            kinds = {"kinds": ("put",)} if lost_ack else {}
            try:
                run(FaultyStore(inner, fail_on=n, after=lost_ack, **kinds))
                outcomes.add("ok")
            except ParquetryError:
                outcomes.add("failed")
            ds = Dataset.open(inner, "f")
            got = rows(ds.read())
            assert got in (before, after), (n, lost_ack)
            assert (ds.version == 1) == (got == before), (n, lost_ack)
            assert_index_exact(ds, "k")
            assert ds.append(_table([("d", 9, 9)])).read().num_rows == sum(got.values()) + 1
    assert outcomes == {"ok", "failed"}
