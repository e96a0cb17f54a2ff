"""Attacks on schema evolution, replace_where, null/empty partition values and restore/history.

Properties (hypothesis, small and derandomized): ``replace_where`` equals a pure-Python
oracle (SQL null semantics) for random DNF over partition and non-partition columns, null
and empty-string partition values, and a column added by ``merge_schema``; after a random
sequence of append/update/replace/merge_schema/restore every version reads back what it
read when it was newest (rows and schema), ``restore(v)`` reads as version ``v`` and the
history lists the operations in order. Fault injection fails each store call of a
``merge_schema`` append, a ``replace_where`` and a ``restore`` in turn: the dataset then
reads as the old or the new version, and after ``repair`` its ``_common_metadata`` holds
the newest version's schema. Hostile inputs must fail with a ParquetryError naming what is
wrong and write nothing. Races: concurrent ``merge_schema`` appends, ``replace_where``
against an append.
"""

from __future__ import annotations

import contextlib
import os
import threading
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parquetry.dataset import Dataset, write_files
from parquetry.dataset.naming import common_metadata_key
from parquetry.dataset.schema import read_common_metadata
from parquetry.errors import (
    CommitConflict,
    DatasetNotFound,
    InvalidArgument,
    ParquetryError,
    PredicateError,
    SchemaMismatch,
)
from parquetry.store import MemoryStore, Store
from parquetry.testing import FaultyStore

# A larger run: PARQUETRY_NEW_FEATURES_EXAMPLES=500 pytest tests/adversarial/test_new_features.py
EXAMPLES = int(os.environ.get("PARQUETRY_NEW_FEATURES_EXAMPLES", "25"))
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=EXAMPLES <= 100,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

PVALUES = [None, "", "a", "/", "=", "%", "é☃", "b c"]
QVALUES = [None, "", "x", "yy"]


def rows_of(table: pa.Table) -> list[tuple[Any, ...]]:
    """Rows in a canonical order (None sorts first), for multiset comparison."""
    rows = [tuple(r.values()) for r in table.to_pylist()]
    return sorted(rows, key=lambda r: [(v is not None, repr(v)) for v in r])


def keys_of(store: Store, uuid: str) -> list[str]:
    return sorted(m.key for m in store.list(uuid))


# --- replace_where oracle -------------------------------------------------------------------


def holds(lit: tuple[str, str, Any], row: dict[str, Any]) -> bool:
    col, op, value = lit
    v = row.get(col)
    if op == "is null":
        return v is None
    if op == "is not null":
        return v is not None
    if v is None:
        return False  # SQL: a comparison with null is not satisfied
    if op == "in":
        return v in value
    return {
        "==": v == value,
        "!=": v != value,
        "<": v < value,
        ">": v > value,
    }[op]


def matches(dnf: list[list[tuple[str, str, Any]]], row: dict[str, Any]) -> bool:
    return any(all(holds(lit, row) for lit in conj) for conj in dnf)


row_st = st.fixed_dictionaries(
    {
        "p": st.sampled_from(PVALUES),
        "q": st.sampled_from(QVALUES),
        "x": st.integers(-3, 3),
    }
)


def literal_st(evolved: bool) -> st.SearchStrategy[tuple[str, str, Any]]:
    def on(col: str, values: list[Any]) -> st.SearchStrategy[tuple[str, str, Any]]:
        present = [v for v in values if v is not None]
        return st.one_of(
            st.tuples(st.just(col), st.sampled_from(["is null", "is not null"]), st.none()),
            st.tuples(
                st.just(col), st.sampled_from(["==", "!=", "<", ">"]), st.sampled_from(present)
            ),
            st.tuples(
                st.just(col),
                st.just("in"),
                st.lists(st.sampled_from(present), min_size=1, max_size=3),
            ),
        )

    options = [on("p", PVALUES), on("q", QVALUES), on("x", list(range(-3, 4)))]
    if evolved:
        options.append(on("y", [None, 0, 1, 2]))
    return st.one_of(*options)


@st.composite
def replace_case(draw: st.DrawFn) -> tuple[Any, ...]:
    first = draw(st.lists(row_st, min_size=1, max_size=12))
    evolved = draw(st.booleans())
    second = draw(st.lists(row_st, min_size=0 if not evolved else 1, max_size=8))
    if evolved:
        second = [{**r, "y": draw(st.sampled_from([None, 0, 1, 2]))} for r in second]
    lit = literal_st(evolved)
    dnf = draw(
        st.lists(st.lists(lit, min_size=1, max_size=2), min_size=1, max_size=2).map(
            lambda d: [[(c, o, list(v) if o == "in" else v) for c, o, v in conj] for conj in d]
        )
    )
    candidates = draw(st.lists(row_st, max_size=8))
    if evolved:
        candidates = [{**r, "y": draw(st.sampled_from([None, 0, 1, 2]))} for r in candidates]
    return first, evolved, second, dnf, candidates, draw(st.booleans())


SCHEMA = pa.schema([("p", pa.string()), ("q", pa.string()), ("x", pa.int64())])
EVOLVED = SCHEMA.append(pa.field("y", pa.int64()))


@SETTINGS
@given(replace_case())
def test_replace_where_equals_oracle(case: tuple[Any, ...]) -> None:
    first, evolved, second, dnf, candidates, delete = case
    store = MemoryStore()
    # q is indexed: index lookups take part in planning which files may match.
    table = pa.Table.from_pylist(first, schema=SCHEMA)
    ds = Dataset.create(store, "rw", table, partition_on=["p"], secondary_indices=["q"])
    if second:
        schema = EVOLVED if evolved else SCHEMA
        ds = ds.append(pa.Table.from_pylist(second, schema=schema), merge_schema=evolved)
    schema = ds.schema
    before = [{**dict.fromkeys(schema.names), **r} for r in first + second]
    data = [] if delete else [r for r in candidates if matches(dnf, r)]
    table = pa.Table.from_pylist(data, schema=schema) if data else None
    after = ds.replace_where(dnf, table)
    expected = [r for r in before if not matches(dnf, r)] + [
        {**dict.fromkeys(schema.names), **r} for r in data
    ]
    got = Dataset.open(store, "rw").read()
    assert got.schema.names == schema.names
    assert rows_of(got) == rows_of(pa.Table.from_pylist(expected, schema=schema)), dnf
    assert after.history()[0].operation == "replace"
    # The predicate reads back the same rows as the oracle selects.
    selected = [r for r in expected if matches(dnf, r)]
    assert rows_of(
        got.select(schema.names).filter(
            pa.array([matches(dnf, r) for r in got.to_pylist()], pa.bool_())
        )
    ) == rows_of(pa.Table.from_pylist(selected, schema=schema))


# --- random histories: time travel, restore, history ----------------------------------------

step_st = st.one_of(
    st.tuples(st.just("append"), st.lists(row_st, min_size=1, max_size=4)),
    st.tuples(
        st.just("merge"), st.sampled_from(["c1", "c2"]), st.lists(row_st, min_size=1, max_size=3)
    ),
    st.tuples(st.just("update"), st.sampled_from(PVALUES[1:]), st.lists(row_st, max_size=3)),
    st.tuples(st.just("replace"), literal_st(False)),
    st.tuples(st.just("restore"), st.integers(0, 30)),
)


@SETTINGS
@given(st.lists(row_st, min_size=1, max_size=5), st.lists(step_st, min_size=1, max_size=6))
def test_versions_restore_and_history_follow_the_sequence(
    first: list[dict[str, Any]], steps: list[tuple[Any, ...]]
) -> None:
    store = MemoryStore()
    ds = Dataset.create(store, "h", pa.Table.from_pylist(first, schema=SCHEMA), partition_on=["p"])
    seen = [(ds.schema, rows_of(ds.read()))]
    ops = ["create"]
    for step in steps:
        kind = step[0]
        if kind == "append":
            ds = ds.append(pa.Table.from_pylist(step[1], schema=ds.schema))
        elif kind == "merge":
            col = step[1]
            schema = (
                ds.schema if col in ds.schema.names else ds.schema.append(pa.field(col, pa.int64()))
            )
            rows = [{**r, col: i} for i, r in enumerate(step[2])]
            ds = ds.append(pa.Table.from_pylist(rows, schema=schema), merge_schema=True)
            kind = "append"
        elif kind == "update":
            rows = [{**r, "p": step[1]} for r in step[2]]
            data = pa.Table.from_pylist(rows, schema=ds.schema) if rows else None
            ds = ds.update(data, delete_scope=[{"p": step[1]}])
        elif kind == "replace":
            ds = ds.replace_where([[step[1]]])
        else:
            target = step[1] % len(seen)
            ds = ds.restore(target)
            assert rows_of(ds.read()) == seen[target][1]
            assert ds.schema.equals(seen[target][0])
        seen.append((ds.schema, rows_of(ds.read())))
        ops.append(kind)
    for number, (schema, rows) in enumerate(seen):
        old = Dataset.open(store, "h", version=number)
        table = old.read()
        assert table.schema.names == schema.names, number
        assert old.schema.equals(schema), number
        assert rows_of(table) == rows, number
    history = ds.history()
    assert [h.version for h in history] == list(range(len(seen)))[::-1]
    got_ops = [h.operation for h in history][::-1]
    assert got_ops[1:] == ops[1:]
    for h, step in zip(history[::-1][1:], steps, strict=True):
        if step[0] == "restore":
            assert h.parameters["version"] == str(step[1] % (h.version))
        if step[0] == "replace":
            assert step[1][0] in h.parameters["predicate"]
    key = common_metadata_key("h")
    assert sorted(read_common_metadata(store.get(key), key).names) == sorted(ds.schema.names)


# --- fault injection ------------------------------------------------------------------------


def _base(store: Store) -> Dataset:
    ds = Dataset.create(
        store,
        "f",
        pa.table({"p": ["a", None, "", "b"], "q": ["x", None, "y", "x"], "x": [1, 2, 3, 4]}),
        partition_on=["p"],
    )
    return ds.append(pa.table({"p": ["b", "a"], "q": ["z", "x"], "x": [5, 6]}))


def _evolved(store: Store) -> Dataset:
    return _base(store).append(
        pa.table({"p": ["c"], "q": ["n"], "x": [7], "y": [2]}), merge_schema=True
    )


def _overwrite_schema(ds: Dataset) -> Dataset:
    data = pa.table({"k": ["u", None], "v": [1.5, 2.5]})
    files = write_files(ds.store, ds.uuid, data, partition_on=["k"])
    return Dataset.commit_files(
        ds.store,
        ds.uuid,
        files,
        mode="overwrite",
        schema=data.schema,
        partition_on=["k"],
        overwrite_schema=True,
    )


# name -> (the dataset before, the operation under attack: one commit)
OPERATIONS = {
    "merge_append": (
        _base,
        lambda ds: ds.append(
            pa.table({"p": ["c", None], "q": ["n", "m"], "x": [7, 8], "y": [1.5, None]}),
            merge_schema=True,
        ),
    ),
    "replace_where": (
        _evolved,
        lambda ds: ds.replace_where(
            [[("q", "==", "x")], [("p", "is null", None)], [("y", "==", 2)]],
            pa.table({"p": ["a"], "q": ["x"], "x": [9], "y": [2]}),
        ),
    ),
    # Back to a schema without y: _common_metadata must follow.
    "restore_before_merge": (_evolved, lambda ds: ds.restore(0)),
    "update_merge": (
        _base,
        lambda ds: ds.update(
            pa.table({"p": ["b"], "q": ["n"], "x": [7], "w": [True]}),
            delete_scope=[{"p": "b"}],
            merge_schema=True,
        ),
    ),
    # A new schema and partitioning (files written first, as the Spark source does).
    "overwrite_schema": (_evolved, _overwrite_schema),
}


@pytest.mark.parametrize("name", sorted(OPERATIONS))
@pytest.mark.parametrize("after", [False, True])
def test_a_failed_store_call_leaves_the_old_or_the_new_version(name: str, after: bool) -> None:
    prepare, operation = OPERATIONS[name]
    probe_inner = MemoryStore()
    prepare(probe_inner)
    probe = FaultyStore(probe_inner)
    new = operation(Dataset.open(probe, "f"))
    new_rows, new_schema = rows_of(new.read()), new.schema
    calls = probe.calls
    assert calls > 3
    for fail_on in range(1, calls + 1):
        inner = MemoryStore()
        old = prepare(inner)
        old_rows, old_schema = rows_of(old.read()), old.schema
        faulty = FaultyStore(inner, fail_on=fail_on, after=after)
        with contextlib.suppress(ParquetryError):
            operation(Dataset.open(faulty, "f"))
        Dataset.repair(inner, "f")
        now = Dataset.open(inner, "f")
        got = (rows_of(now.read()), now.schema.names)
        assert got in [(old_rows, old_schema.names), (new_rows, new_schema.names)], (
            name,
            fail_on,
        )
        key = common_metadata_key("f")
        stored = read_common_metadata(inner.get(key), key).names
        assert sorted(stored) == sorted(now.schema.names), fail_on
        # Every older version still reads, and a new write works.
        assert rows_of(Dataset.open(inner, "f", version=old.version).read()) == old_rows
        now.append(pa.Table.from_pylist([{"p": "w", "q": None, "x": 0}], schema=now.schema))


# --- hostile inputs -------------------------------------------------------------------------


def test_hostile_partition_values_round_trip_and_replace() -> None:
    store = MemoryStore()
    values = ["", "/", "=", "%", "é☃", "a/b=c", "%2F", None, " ", "."]
    ds = Dataset.create(
        store, "hv", pa.table({"p": values, "x": list(range(len(values)))}), partition_on=["p"]
    )
    assert rows_of(ds.read()) == rows_of(pa.table({"p": values, "x": list(range(len(values)))}))
    for i, v in enumerate(values):
        lit = ("p", "is null", None) if v is None else ("p", "==", v)
        assert Dataset.open(store, "hv").read(predicates=[[lit]]).column("x").to_pylist() == [i]
        ds = ds.replace_where([[lit]], pa.table({"p": pa.array([v], pa.string()), "x": [100 + i]}))
    assert sorted(ds.read().column("x").to_pylist()) == [100 + i for i in range(len(values))]
    # The null marker itself is reserved: refused, nothing written.
    before = keys_of(store, "hv")
    for bad in ("__HIVE_DEFAULT_PARTITION__",):
        with pytest.raises(InvalidArgument, match="reserved"):
            ds.append(pa.table({"p": [bad], "x": [1]}))
        with pytest.raises(InvalidArgument, match="reserved"):
            ds.replace_where([[("p", "==", bad)]], pa.table({"p": [bad], "x": [1]}))
    assert keys_of(store, "hv") == before


def test_hostile_schemas_are_refused_before_anything_is_written() -> None:
    store = MemoryStore()
    ds = Dataset.create(
        store, "hs", pa.table({"p": ["a"], "x": [1], "s": ["t"]}), partition_on=["p"]
    )
    before = keys_of(store, "hs")
    # Not a widening: the column is named, nothing written.
    for data, column in [
        (pa.table({"p": ["a"], "x": [1.5], "s": ["t"]}), "'x'"),
        (pa.table({"p": ["a"], "x": [1], "s": [2]}), "'s'"),
        (pa.table({"p": [1], "x": [1], "s": ["t"]}), "'p'"),
        (pa.table({"p": ["a"], "x": pa.array([1], pa.int32()), "s": [b"t"]}), "'s'"),
    ]:
        with pytest.raises(SchemaMismatch, match=column):
            ds.append(data, merge_schema=True)
    # Two columns of one name (a collision after evolution or in the data): refused.
    dup = pa.Table.from_arrays(
        [pa.array(["a"]), pa.array([1]), pa.array(["t"]), pa.array([1]), pa.array([2])],
        names=["p", "x", "s", "n", "n"],
    )
    with pytest.raises(SchemaMismatch, match="'n' appears more than once"):
        ds.append(dup, merge_schema=True)
    twice = pa.Table.from_arrays(
        [pa.array(["a"]), pa.array([1]), pa.array(["t"]), pa.array([2])], names=["p", "x", "s", "x"]
    )
    with pytest.raises(SchemaMismatch, match="'x' appears more than once"):
        ds.append(twice)
    with pytest.raises(SchemaMismatch, match="'x' appears more than once"):
        ds.replace_where([[("p", "==", "a")]], twice)
    with pytest.raises(SchemaMismatch, match="'x' appears more than once"):
        Dataset.create(store, "hs2", twice, partition_on=["p"])
    assert keys_of(store, "hs2") == []
    # overwrite_schema needs overwrite mode.
    with pytest.raises(InvalidArgument, match="overwrite"):
        Dataset.commit_files(
            store, "hs", [], schema=pa.schema([("z", pa.int8())]), overwrite_schema=True
        )
    assert keys_of(store, "hs") == before
    # A predicate on a column the version does not have (here: only a newer one has it).
    old = Dataset.open(store, "hs")
    Dataset.open(store, "hs").append(
        pa.table({"p": ["b"], "x": [2], "s": ["u"], "new": [1]}), merge_schema=True
    )
    with pytest.raises(PredicateError, match="'new'"):
        old.replace_where([[("new", "==", 1)]])
    with pytest.raises(PredicateError, match="'nope'"):
        Dataset.open(store, "hs").replace_where([[("nope", "is null", None)]])
    assert len(Dataset.open(store, "hs").history()) == 2


def test_hostile_restore_versions_and_parameters() -> None:
    store = MemoryStore()
    ds = Dataset.create(store, "hr", pa.table({"p": ["a"], "x": [1]}), partition_on=["p"])
    ds = ds.append(pa.table({"p": ["b"], "x": [2]}))
    for bad in ["0", 0.5, True, None, -1]:
        with pytest.raises(InvalidArgument, match="version"):
            ds.restore(bad)  # type: ignore[arg-type]
    for missing in [2, 99, 2**70]:
        with pytest.raises(DatasetNotFound, match=str(missing)):
            ds.restore(missing)
    deep: list[Any] = []
    for _ in range(5000):
        deep = [deep]
    loop: dict[str, Any] = {}
    loop["self"] = loop
    before = keys_of(store, "hr")
    for bad_params in [{"a": deep}, {"b": loop}, {3: "x"}]:
        with pytest.raises(InvalidArgument, match="parameter"):
            ds.append(pa.table({"p": ["c"], "x": [3]}), parameters=bad_params)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgument, match="parameter"):
            ds.restore(0, parameters=bad_params)  # type: ignore[arg-type]
    assert keys_of(store, "hr") == before
    huge = "v" * 200_000
    ds = ds.append(
        pa.table({"p": ["c"], "x": [3]}),
        parameters={"huge": huge, "n": 2**70, "f": float("nan"), "o": object(), "u": "é☃"},
    )
    params = Dataset.open(store, "hr").history()[0].parameters
    assert params["huge"] == huge
    assert params["n"] == str(2**70)
    assert params["u"] == "é☃"
    assert params["f"] == "NaN"
    assert params["o"].startswith('"<object')
    ds = ds.restore(0, parameters={"why": ["x", 1]})
    entry = ds.history()[0]
    assert entry.operation == "restore"
    assert entry.parameters == {"version": "0", "why": '["x", 1]'}
    assert rows_of(ds.read()) == [("a", 1)]


# --- races ----------------------------------------------------------------------------------


def _together(*jobs: Any) -> list[BaseException | None]:
    barrier = threading.Barrier(len(jobs))
    out: list[BaseException | None] = [None] * len(jobs)

    def run(i: int) -> None:
        barrier.wait()
        try:
            jobs[i]()
        except BaseException as exc:
            out[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def test_stale_replace_where_keeps_a_concurrent_merge_schema() -> None:
    """Regression: a replace re-applied after a merge_schema commit recorded its own, older
    schema: the merged column vanished and the dataset no longer opened (statistics of a
    column not in the schema)."""
    store = MemoryStore()
    Dataset.create(store, "st", pa.table({"p": ["a", "b"], "x": [1, 2]}), partition_on=["p"])
    stale = Dataset.open(store, "st")
    Dataset.open(store, "st").append(pa.table({"p": ["c"], "x": [3], "y": [7]}), merge_schema=True)
    after = stale.replace_where([[("p", "==", "a")]], pa.table({"p": ["a"], "x": [10]}))
    assert after.schema.names == ["p", "x", "y"]
    got = Dataset.open(store, "st").read()
    assert rows_of(got) == [("a", 10, None), ("b", 2, None), ("c", 3, 7)]
    # A concurrent change of a column's type the replace's files cannot take: a conflict.
    store = MemoryStore()
    Dataset.create(
        store, "st", pa.table({"p": ["a"], "x": pa.array([1], pa.int32())}), partition_on=["p"]
    )
    stale = Dataset.open(store, "st")
    Dataset.open(store, "st").append(
        pa.table({"p": ["c"], "x": pa.array([3], pa.int64())}), merge_schema=True
    )
    after = stale.replace_where(
        [[("p", "==", "a")]], pa.table({"p": ["a"], "x": pa.array([5], pa.int32())})
    )
    assert after.schema.field("x").type == pa.int64()
    assert rows_of(Dataset.open(store, "st").read()) == [("a", 5), ("c", 3)]


def test_concurrent_merge_schema_appends_keep_both_columns() -> None:
    for round_ in range(6):
        store = MemoryStore()
        Dataset.create(store, "m", pa.table({"p": ["a"], "x": [0]}), partition_on=["p"])
        errors = _together(
            lambda store=store: Dataset.open(store, "m").append(
                pa.table({"p": ["b"], "x": [1], "left": ["l"]}), merge_schema=True
            ),
            lambda store=store: Dataset.open(store, "m").append(
                pa.table({"p": ["c"], "x": [2], "right": [2.5]}), merge_schema=True
            ),
        )
        assert errors == [None, None], round_
        ds = Dataset.open(store, "m")
        assert sorted(ds.schema.names) == ["left", "p", "right", "x"]
        got = {r["x"]: r for r in ds.read().to_pylist()}
        assert got[1]["left"] == "l"
        assert got[1]["right"] is None
        assert got[2]["right"] == 2.5
        assert got[2]["left"] is None
        assert got[0]["left"] is None
        key = common_metadata_key("m")
        assert sorted(read_common_metadata(store.get(key), key).names) == sorted(ds.schema.names)


def test_replace_where_racing_an_append_never_loses_the_append() -> None:
    for round_ in range(8):
        store = MemoryStore()
        Dataset.create(
            store, "r", pa.table({"p": ["a", "b", None], "x": [1, 2, 3]}), partition_on=["p"]
        )
        # Odd rounds: the append goes to a partition the replace selects.
        target = "a" if round_ % 2 else "z"
        bases: list[int] = []

        def replace(store: Store = store, bases: list[int] = bases) -> None:
            ds = Dataset.open(store, "r")
            bases.append(ds.version)
            ds.replace_where(
                [[("p", "==", "a")], [("x", "==", 3)]], pa.table({"p": ["a"], "x": [10]})
            )

        errors = _together(
            replace,
            lambda store=store, target=target: Dataset.open(store, "r").append(
                pa.table({"p": [target, "y"], "x": [20, 21]})
            ),
        )
        assert errors[1] is None, errors
        assert errors[0] is None or isinstance(errors[0], CommitConflict), errors
        newest = Dataset.open(store, "r")
        xs = sorted(newest.read().column("x").to_pylist())
        assert 21 in xs
        assert 2 in xs
        appended = next(h.version for h in newest.history() if h.operation == "append")
        if errors[0] is None:
            assert 10 in xs
            assert 1 not in xs
            assert 3 not in xs
            # The append's row in a replaced partition goes only if the replace saw it
            # (opened after the append committed); never by re-applying over it.
            assert (20 in xs) == (target == "z" or bases[0] < appended), (round_, bases, xs)
        else:
            assert bases[0] < appended, (round_, bases)
            assert xs == [1, 2, 3, 20, 21]
    # The deterministic forms: the append landed first (in a selected partition: conflict;
    # elsewhere: the replace is re-applied).
    store = MemoryStore()
    Dataset.create(store, "r", pa.table({"p": ["a", "b"], "x": [1, 2]}), partition_on=["p"])
    stale = Dataset.open(store, "r")
    Dataset.open(store, "r").append(pa.table({"p": ["a"], "x": [20]}))
    with pytest.raises(CommitConflict):
        stale.replace_where([[("p", "==", "a")]], pa.table({"p": ["a"], "x": [10]}))
    Dataset.open(store, "r").append(pa.table({"p": ["q"], "x": [30]}))
    stale = Dataset.open(store, "r", version=2)
    Dataset.open(store, "r").append(pa.table({"p": ["z"], "x": [40]}))
    stale.replace_where([[("p", "==", "a")]], pa.table({"p": ["a"], "x": [10]}))
    assert sorted(Dataset.open(store, "r").read().column("x").to_pylist()) == [2, 10, 30, 40]


def test_vacuum_refuses_unusable_retentions_and_restore_of_vacuumed_versions() -> None:
    """Regression: NaN, infinite or non-numeric retentions raised raw ValueError or
    OverflowError from vacuum and garbage_collect."""
    store = MemoryStore()
    ds = Dataset.create(store, "v", pa.table({"p": ["a", None], "x": [1, 2]}), partition_on=["p"])
    ds = ds.replace_where([[("p", "is null", None)]], pa.table({"p": [None], "x": [3]}))
    before = keys_of(store, "v")
    for bad in [float("nan"), float("inf"), "x", None, 1e300, -5]:
        with pytest.raises(InvalidArgument, match="retention"):
            ds.vacuum(bad, force=True)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgument, match="retention"):
            ds.garbage_collect(retention=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="force=True"):
        ds.vacuum(0)
    assert keys_of(store, "v") == before
    ds.vacuum(0, force=True)
    with pytest.raises(DatasetNotFound, match="version 0"):
        ds.restore(0)
    with pytest.raises(DatasetNotFound, match="version 0"):
        Dataset.open(store, "v", version=0)
    assert rows_of(Dataset.open(store, "v").read()) == [(None, 3), ("a", 1)]
    assert [h.operation for h in Dataset.open(store, "v").history()] == ["replace"]


def _common_names(store: Store, uuid: str) -> list[str]:
    key = common_metadata_key(uuid)
    return sorted(read_common_metadata(store.get(key), key).names)


def test_a_conflicting_restore_keeps_a_concurrent_evolution_in_common_metadata() -> None:
    """Regression: a restore that lost to a concurrent merge_schema commit put its own
    base's schema back into _common_metadata, hiding the other writer's new column from
    kartothek until a repair."""
    store = MemoryStore()
    Dataset.create(store, "cr", pa.table({"p": ["a"], "x": [1]}), partition_on=["p"])
    Dataset.open(store, "cr").append(pa.table({"p": ["b"], "x": [2], "y": [1]}), merge_schema=True)
    stale = Dataset.open(store, "cr")
    Dataset.open(store, "cr").append(pa.table({"p": ["c"], "x": [3], "z": [1]}), merge_schema=True)
    with pytest.raises(CommitConflict):
        stale.restore(0)
    assert _common_names(store, "cr") == ["p", "x", "y", "z"]
    # Raced for real: whichever wins, _common_metadata ends at the newest version's schema.
    for round_ in range(6):
        store = MemoryStore()
        Dataset.create(store, "cr", pa.table({"p": ["a"], "x": [1]}), partition_on=["p"])
        Dataset.open(store, "cr").append(
            pa.table({"p": ["b"], "x": [2], "y": [1]}), merge_schema=True
        )
        errors = _together(
            lambda store=store: Dataset.open(store, "cr").restore(0),
            lambda store=store: Dataset.open(store, "cr").append(
                pa.table({"p": ["c"], "x": [3], "z": [1]}), merge_schema=True
            ),
        )
        assert errors[1] is None, errors
        assert errors[0] is None or isinstance(errors[0], CommitConflict), errors
        newest = Dataset.open(store, "cr")
        xs = sorted(newest.read().column("x").to_pylist())
        # The restore ran last (it opened after the append committed), or the append did.
        last = newest.history()[0].operation
        assert xs == ([1] if last == "restore" else [*xs[:-1], 3]), (round_, xs, last)
        assert 3 in xs or last == "restore"
        assert _common_names(store, "cr") == sorted(newest.schema.names), round_
