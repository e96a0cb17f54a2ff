"""Dataset.replace_where (replaceWhere) and null / empty partition values."""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parquetry.dataset import Dataset
from parquetry.dataset.predicates import validate_predicates
from parquetry.dataset.replace import partitions_predicate, row_mask
from parquetry.errors import (
    CommitConflict,
    InvalidArgument,
    ParquetryError,
    ReplaceConditionViolated,
)
from parquetry.store import MemoryStore
from parquetry.testing import FaultyStore

SCHEMA = pa.schema([("p", pa.string()), ("q", pa.int64()), ("v", pa.int64())])


def _rows(table: pa.Table) -> Counter[tuple[Any, ...]]:
    return Counter(zip(*(table.column(n).to_pylist() for n in SCHEMA.names), strict=True))


def _matching(table: pa.Table, predicates: Any) -> pa.Array:
    dnf = validate_predicates(predicates, SCHEMA)
    assert dnf is not None
    return row_mask(table.select(SCHEMA.names), dnf)


def test_replace_rewrites_partly_matching_files_and_keeps_the_rest() -> None:
    store = MemoryStore()
    base = pa.table({"p": ["a", "a", "b", "b"], "q": [1, 2, 3, 4], "v": [0, 0, 0, 0]})
    ds = Dataset.create(store, "r", base, partition_on=["p"], secondary_indices=["q"])
    new = pa.table({"p": ["a"], "q": [9], "v": [1]})
    out = ds.replace_where([[("q", ">=", 2), ("p", "==", "a")]], new)
    assert _rows(out.read()) == Counter([("a", 1, 0), ("a", 9, 1), ("b", 3, 0), ("b", 4, 0)])
    info = out.info
    assert info is not None
    assert (info.operation, info.files_removed, info.rows_removed) == ("replace", 1, 2)
    # the partition b file was not touched: same key as before
    assert {k for k in out.document.partitions if k.startswith("p=b")} == {
        k for k in ds.document.partitions if k.startswith("p=b")
    }
    assert out.read(predicates=[[("q", "==", 2)]]).num_rows == 0  # the index follows
    assert out.read(predicates=[[("q", "==", 9)]]).num_rows == 1
    # data=None deletes the matching rows
    gone = out.replace_where([[("p", "==", "b")]])
    assert _rows(gone.read()) == Counter([("a", 1, 0), ("a", 9, 1)])


def test_rows_outside_the_condition_are_refused_and_nothing_commits() -> None:
    store = MemoryStore()
    ds = Dataset.create(store, "r", pa.table({"p": ["a"], "q": [1], "v": [0]}), partition_on=["p"])
    bad = pa.table({"p": ["b", "a", "b"], "q": [1, 2, None], "v": [0, 0, 0]})
    with pytest.raises(ReplaceConditionViolated, match=r"p == 'b'.*1 of 3 rows.*row 1") as err:
        ds.replace_where([[("p", "==", "b")]], bad)
    assert err.value.predicate == "(p == 'b')"
    # a null never satisfies a comparison: q = NULL is outside q >= 0
    with pytest.raises(ReplaceConditionViolated, match="1 of 3 rows"):
        ds.replace_where([[("q", ">=", 0)]], bad)
    assert Dataset.open(store, "r").version == 0
    # checked before any file was written
    assert len([m for m in store.list("r/table") if m.key.endswith(".parquet")]) == 1
    with pytest.raises(InvalidArgument, match="needs a predicate"):
        ds.replace_where(None, bad)


def test_replace_conflicts_when_a_concurrent_commit_adds_matching_rows() -> None:
    store = MemoryStore()
    ds = Dataset.create(store, "r", pa.table({"p": ["a"], "q": [1], "v": [0]}), partition_on=["p"])
    ds.append(pa.table({"p": ["a"], "q": [5], "v": [0]}))  # lands in what ds replaces
    with pytest.raises(CommitConflict, match="concurrent commit"):
        ds.replace_where([[("p", "==", "a")]], pa.table({"p": ["a"], "q": [7], "v": [1]}))
    # a concurrent commit elsewhere is re-applied on top
    ds = Dataset.open(store, "r")
    ds.append(pa.table({"p": ["z"], "q": [5], "v": [0]}))
    out = ds.replace_where([[("p", "==", "a")]], pa.table({"p": ["a"], "q": [7], "v": [1]}))
    assert _rows(out.read()) == Counter([("a", 7, 1), ("z", 5, 0)])


values = st.tuples(st.sampled_from(["a", "b", "", None]), st.integers(0, 5), st.integers(0, 3))
literals = st.one_of(
    st.tuples(st.just("p"), st.sampled_from(["==", "!="]), st.sampled_from(["a", "b", ""])),
    st.tuples(st.just("p"), st.sampled_from(["is null", "is not null"]), st.none()),
    st.tuples(st.just("q"), st.sampled_from(["<", ">=", "=="]), st.integers(0, 5)),
    st.tuples(st.just("v"), st.just("in"), st.lists(st.integers(0, 3), min_size=1, max_size=2)),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    base=st.lists(values, max_size=12),
    more=st.lists(values, max_size=6),
    new=st.lists(values, max_size=6),
    predicates=st.lists(st.lists(literals, min_size=1, max_size=2), min_size=1, max_size=2),
    partitioned=st.booleans(),
)
def test_replace_is_old_rows_outside_plus_new_rows(
    base: list[tuple[Any, ...]],
    more: list[tuple[Any, ...]],
    new: list[tuple[Any, ...]],
    predicates: list[list[tuple[str, str, Any]]],
    partitioned: bool,
) -> None:
    """Oracle: replace_where(P, rows) == (old rows not matching P) + rows, as multisets."""
    store = MemoryStore(uuid.uuid4().hex)
    old = pa.Table.from_pylist([dict(zip(SCHEMA.names, r, strict=True)) for r in base], SCHEMA)
    ds = Dataset.create(
        store, "h", old, partition_on=["p"] if partitioned else [], secondary_indices=["v"]
    )
    if more:  # a second file per partition, so some files match only partly
        ds = ds.append(
            pa.Table.from_pylist([dict(zip(SCHEMA.names, r, strict=True)) for r in more], SCHEMA)
        )
    before = ds.read()
    data = pa.Table.from_pylist([dict(zip(SCHEMA.names, r, strict=True)) for r in new], SCHEMA)
    conforming = data.filter(_matching(data, predicates))
    if conforming.num_rows < data.num_rows:
        with pytest.raises(ReplaceConditionViolated):
            ds.replace_where(predicates, data)
        assert Dataset.open(store, "h").version == ds.version
    out = ds.replace_where(predicates, conforming)
    kept = before.filter(pa.compute.invert(_matching(before, predicates)))
    assert _rows(out.read()) == _rows(kept) + _rows(conforming)
    assert out.read(predicates=predicates).num_rows == conforming.num_rows


def test_dynamic_partitions_predicate_selects_written_partitions() -> None:
    store = MemoryStore()
    base = pa.table({"p": ["a", None, "", "b"], "q": [1, 2, 3, 4], "v": [0, 0, 0, 0]})
    ds = Dataset.create(store, "d", base, partition_on=["p"])
    new = ds.schema.empty_table()
    from parquetry.dataset import write_files

    files = write_files(
        store,
        "d",
        pa.table({"p": [None, ""], "q": [7, 8], "v": [1, 1]}),
        partition_on=["p"],
        schema=ds.schema,
    )
    assert partitions_predicate(files, ["p"]) in (
        [[("p", "is null", None)], [("p", "==", "")]],
        [[("p", "==", "")], [("p", "is null", None)]],
    )
    assert partitions_predicate(files, []) is None
    from parquetry.dataset.replace import commit_replace

    state = commit_replace(ds, partitions_predicate(files, ["p"]), files)
    out = Dataset(store, state)
    assert _rows(out.read()) == Counter([("a", 1, 0), ("b", 4, 0), (None, 7, 1), ("", 8, 1)])
    assert new.num_rows == 0


def test_null_and_empty_partition_values_round_trip_with_exact_predicates() -> None:
    store = MemoryStore()
    t = pa.table(
        {
            "p": ["a", None, "", "b", None],
            "q": pa.array([1, None, 2, None, 1], pa.int64()),
            "v": [1, 2, 3, 4, 5],
        }
    )
    ds = Dataset.create(store, "n", t, partition_on=["p", "q"])
    assert _rows(ds.read()) == _rows(t)
    assert sorted(ds.read(predicates=[[("p", "is null")]])["v"].to_pylist()) == [2, 5]
    assert ds.read(predicates=[[("p", "==", "")]])["v"].to_pylist() == [3]
    assert sorted(ds.read(predicates=[[("q", "is null")]])["v"].to_pylist()) == [2, 4]
    assert sorted(ds.read(predicates=[[("p", "!=", "a")]])["v"].to_pylist()) == [3, 4]
    assert sorted(ds.read(predicates=[[("p", "is not null")]])["v"].to_pylist()) == [1, 3, 4]
    assert len(ds.plan([[("p", "is null"), ("q", "is null")]]).files) == 1
    assert any(
        "p=__HIVE_DEFAULT_PARTITION__/q=__HIVE_DEFAULT_PARTITION__/" in k
        for k in ds.document.partitions
    )
    assert any(k.startswith("p=/q=2/") for k in ds.document.partitions)
    ds = ds.append(pa.table({"p": [None], "q": [None], "v": [6]}, schema=ds.schema))
    assert sorted(ds.read(predicates=[[("p", "is null"), ("q", "is null")]])["v"].to_pylist()) == [
        2,
        6,
    ]
    # the spelling of a null cannot be written as a value: it would read back as null
    with pytest.raises(InvalidArgument, match="reserved for nulls"):
        ds.append(pa.table({"p": ["__HIVE_DEFAULT_PARTITION__"], "q": [1], "v": [0]}))


def _replace_op(store: Any) -> None:
    Dataset.open(store, "f").replace_where(
        [[("q", ">=", 2)]], pa.table({"p": ["a"], "q": [7], "v": [1]})
    )


def test_every_failing_store_call_during_a_replace_leaves_old_or_new_rows() -> None:
    base = pa.table({"p": ["a", "a", "b"], "q": [1, 2, 3], "v": [0, 0, 0]})
    before = _rows(base)
    after = Counter([("a", 1, 0), ("a", 7, 1)])

    def setup() -> MemoryStore:
        inner = MemoryStore(uuid.uuid4().hex)
        Dataset.create(inner, "f", base, partition_on=["p"], secondary_indices=["v"])
        return inner

    counter = FaultyStore(setup())
    _replace_op(counter)
    total = counter.calls
    assert total > 5
    outcomes = set()
    for n in range(1, total + 1):
        for lost_ack in (False, True):
            inner = setup()
            faulty = FaultyStore(
                inner, fail_on=n, after=lost_ack, **({"kinds": ("put",)} if lost_ack else {})
            )
            try:
                _replace_op(faulty)
                outcomes.add("ok")
            except ParquetryError:
                outcomes.add("failed")
            ds = Dataset.open(inner, "f")
            got = _rows(ds.read())
            assert got in (before, after), (n, lost_ack)
            if got == before:
                assert ds.version == 0
            assert ds.append(pa.table({"p": ["c"], "q": [0], "v": [0]})).read().num_rows == (
                sum(got.values()) + 1
            )
    assert outcomes == {"ok", "failed"}
