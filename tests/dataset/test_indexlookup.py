"""Batch index lookups (many values at once) against a brute-force oracle, requests counted."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from typing import Any

import hypothesis.strategies as st
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings

from parquetry.dataset import indexlookup, indexpieces
from parquetry.dataset.indexlookup import lookup_values
from parquetry.dataset.indexpieces import piece_metadata
from parquetry.dataset.indexstate import IndexState, MergePolicy
from parquetry.errors import InvalidArgument, MetadataCorrupted
from parquetry.store import MemoryStore
from parquetry.testing import CountingStore

WRITE = MergePolicy(inline_pairs=0, max_small_pieces=100)


def _pairs(items: list[tuple[Any, str]], t: pa.DataType) -> pa.Table:
    return pa.table(
        {
            "value": pa.array([v for v, _ in items], t),
            "label": pa.array([lbl for _, lbl in items], pa.string()),
        }
    )


# Labels are unique names in a dataset: each step adds labels of its own (slot -> label
# "p=<slot>/<step>"); a removal picks among the labels added so far.
PAIRS = st.lists(st.tuples(st.integers(-20, 60), st.integers(0, 3)), min_size=1)
REMOVE = st.tuples(st.just("remove"), st.lists(st.integers(0, 50), min_size=1, max_size=3))
CHECKPOINT = st.tuples(st.just("checkpoint"), st.just([]))
# Removals and checkpoints drawn as often as additions: dead labels over pieces matter.
STEP = st.one_of(
    st.tuples(st.just("add"), PAIRS),
    st.tuples(st.just("delta"), PAIRS),
    REMOVE,
    CHECKPOINT,
    REMOVE,
    CHECKPOINT,
)


@settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    steps=st.lists(STEP, min_size=2, max_size=10),
    wanted=st.lists(st.none() | st.integers(-25, 65), max_size=30),
    group_rows=st.integers(1, 5),
    limit=st.sampled_from([1, 200, 1 << 20]),
    per_call=st.sampled_from([1, 2, 16]),
)
def test_batch_lookup_equals_a_brute_force_oracle(
    steps: list[tuple[str, Any]],
    wanted: list[int | None],
    group_rows: int,
    limit: int,
    per_call: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Tiny row groups, so pieces have many and the choice of groups is exercised; the
    # value columns of 1, 2 or 16 groups decoded by one call (hits in some groups only).
    monkeypatch.setattr(indexpieces, "PIECE_ROW_GROUP", group_rows)
    monkeypatch.setattr(indexlookup, "GROUPS_PER_CALL", per_call)
    store = CountingStore(MemoryStore())
    state = IndexState.empty("k", pa.int64())
    oracle: dict[int, set[str]] = {}
    added: list[str] = []
    for step, (kind, arg) in enumerate(steps):
        if kind in ("add", "delta"):
            arg = [(v, f"p={slot}/{step:032x}") for v, slot in arg]
            added += sorted({lbl for _, lbl in arg} - set(added))
            table = _pairs(arg, pa.int64())
            if kind == "add":
                state = state.with_pairs(table)
            else:
                doc = json.loads(json.dumps(state.encode_delta(store, "u", table, inline_max=2)))
                state = state.with_delta(doc, key="u/x")
            for v, lbl in arg:
                oracle.setdefault(v, set()).add(lbl)
        elif kind == "remove":
            arg = [added[i % len(added)] for i in arg] if added else []
            state = state.without_labels(arg)
            for held in oracle.values():
                held -= set(arg)
        else:
            state = state.checkpoint(store, "u", policy=WRITE)
    store.reset()
    got = lookup_values(store, state, pa.array(wanted, pa.int64()), max_request_bytes=limit)
    expected = {v: oracle[v] for v in set(wanted) if v is not None and oracle.get(v)}
    assert got.mapping() == expected
    assert got.labels() == set().union(*expected.values()) if expected else not got.labels()
    # Each piece: at most one GET per chosen row group, no other request.
    pieces = [*state.pieces, *(tp.footer for tp in state.tail_pieces)]
    groups = sum(piece_metadata(f).num_row_groups for f in pieces)
    assert set(store.counts) <= {"get_range"}
    assert store.total == got.requests <= groups
    assert got.requests == 0 or set(got.request_keys) <= {f.key for f in pieces}


def test_ten_thousand_keys_read_each_row_group_once_in_bounded_requests() -> None:
    """10,000 random keys into a 1M-value index (31 row groups, ~14 MiB): every group
    holds a key, each is read once, in requests of at most ``max_request_bytes``."""
    store = CountingStore(MemoryStore())
    rng = np.random.default_rng(7)
    n = 1_000_000
    values = pa.array(np.arange(n, dtype=np.int64) * 3)
    labels = pa.array([f"p={i % 1000}/{i % 1000:032x}" for i in range(n)])
    state = IndexState.empty("k", pa.int64()).with_pairs(
        pa.table({"value": values, "label": labels})
    )
    # One piece (a checkpoint would write 1M pairs as 4 bounded pieces): its row groups.
    state = state.checkpoint(store, "u", policy=replace(WRITE, piece_pairs=n))
    (piece,) = state.pieces
    md = piece_metadata(piece)
    keys = rng.choice(n * 3, size=10_000, replace=False).astype(np.int64)
    expected = {int(k): {f"p={k // 3 % 1000}/{k // 3 % 1000:032x}"} for k in keys if k % 3 == 0}
    for limit, bound in ((32 << 20, 1), (1 << 20, math.ceil(piece.size / (1 << 20)) + 1)):
        store.reset()
        got = lookup_values(store, state, pa.array(keys), max_request_bytes=limit)
        assert got.mapping() == expected
        assert got.groups_read == md.num_row_groups  # every group holds a key: each read once
        assert store.total == got.requests <= bound
        assert store.bytes_read < piece.size
    # Keys clustered in one value range touch the one or two groups covering it.
    store.reset()
    got = lookup_values(store, state, pa.array(np.arange(600_000, 610_000, dtype=np.int64)))
    assert got.groups_read <= 2
    assert store.total == 1
    assert len(got.mapping()) == len(range(600_000, 610_000, 3))


def test_strings_dead_labels_and_tail() -> None:
    store = MemoryStore()
    state = IndexState.empty("s", pa.string())
    state = state.with_pairs(_pairs([("a", "L1"), ("b", "L2"), ("c", "L3")], pa.string()))
    state = state.checkpoint(store, "u", policy=WRITE)
    state = state.without_labels(["L2"]).with_pairs(_pairs([("b", "L4"), ("z", "L5")], pa.string()))
    got = lookup_values(store, state, pa.array(["b", "z", "q", None, "b"]))
    assert got.mapping() == {"b": {"L4"}, "z": {"L5"}}
    assert lookup_values(store, state, pa.array([], pa.string())).requests == 0


def test_errors_name_the_column_or_piece() -> None:
    store = MemoryStore()
    state = IndexState.empty("k", pa.int64()).with_pairs(_pairs([(1, "L")], pa.int64()))
    state = state.checkpoint(store, "u", policy=WRITE)
    with pytest.raises(InvalidArgument, match="'k'"):
        lookup_values(store, state, pa.array(["x"]))
    with pytest.raises(InvalidArgument, match="max_request_bytes"):
        lookup_values(store, state, pa.array([1]), max_request_bytes=0)
    store.delete(state.pieces[0].key)
    with pytest.raises(MetadataCorrupted, match=state.pieces[0].key):
        lookup_values(store, state, pa.array([1]))


@settings(max_examples=150, deadline=None)
@given(
    column=st.lists(st.integers(-10, 10), max_size=40),
    wanted=st.lists(st.integers(-12, 12), max_size=15),
    sort=st.booleans(),
    as_string=st.booleans(),
)
def test_hit_rows_equals_a_brute_force_oracle(
    column: list[int], wanted: list[int], sort: bool, as_string: bool
) -> None:
    """The rows of a piece's row group whose value is looked up: the binary search of
    sorted integer groups (duplicates too, as a kartothek file may have) and the is_in
    path of unsorted groups and other types agree with a scan."""
    from parquetry.dataset.indexlookup import _hit_rows

    if sort:
        column = sorted(column)
    values = sorted(set(wanted))
    t = pa.string() if as_string else pa.int64()
    cast = (lambda xs: [str(x) for x in xs]) if as_string else (lambda xs: xs)
    got = _hit_rows(pa.array(cast(column), t), pa.array(cast(values), t))
    expected = [i for i, v in enumerate(column) if v in set(values)]
    assert got.tolist() == expected
    assert got.dtype == np.int64


@settings(max_examples=100, deadline=None)
@given(
    t=st.sampled_from([pa.int8(), pa.uint8(), pa.int64(), pa.uint64()]),
    data=st.data(),
)
def test_integer_group_choice_equals_the_statistics_check(t: pa.DataType, data: Any) -> None:
    """The binary search choosing an integer piece's row groups chooses what comparing
    every group's min/max with the values chooses (unsigned extremes, narrow types)."""
    import io

    import pyarrow.parquet as pq

    from parquetry.dataset.indexgroups import _integer_groups, may_hold

    info = np.iinfo(t.to_pandas_dtype())
    ints = st.integers(int(info.min), int(info.max))
    column = data.draw(st.lists(ints | st.integers(0, 9), min_size=1, max_size=30))
    wanted = sorted(set(data.draw(st.lists(ints | st.integers(0, 9), min_size=1, max_size=10))))
    sink = io.BytesIO()
    pq.write_table(pa.table({"k": pa.array(column, t)}), sink, row_group_size=3)
    md = pq.ParquetFile(pa.BufferReader(sink.getvalue())).metadata
    values = pa.array(wanted, t)
    expected = [
        g
        for g in range(md.num_row_groups)
        if may_hold(
            values,
            md.row_group(g).column(0).statistics.min,
            md.row_group(g).column(0).statistics.max,
            t,
        )
    ]
    assert _integer_groups(md, values) == expected


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=st.lists(
        st.tuples(st.integers(-15, 15), st.lists(st.integers(0, 4), min_size=1, max_size=3)),
        min_size=1,
        max_size=30,
    ),
    wanted=st.lists(st.integers(-17, 17), min_size=1, max_size=20),
    group_rows=st.integers(1, 4),
    per_call=st.sampled_from([1, 3, 16]),
    dictionary=st.booleans(),
    ordered=st.booleans(),
    threads=st.sampled_from([1, 2]),
)
def test_a_format1_file_of_any_order_reads_as_the_oracle(
    rows: list[tuple[int, list[int]]],
    wanted: list[int],
    group_rows: int,
    per_call: int,
    dictionary: bool,
    ordered: bool,
    threads: int,
) -> None:
    """A kartothek index file (format 1, one piece of the state) is neither sorted nor
    distinct by value and its labels may be plain: the value columns of several row
    groups read by one call, the hits mapped back to their groups, the labels of the
    groups holding one read, all against the pairs themselves. Sorted by value (as a
    piece is), the hits are found by binary search over the groups of a call."""
    import io

    import pyarrow.parquet as pq

    from parquetry.dataset.indexfile import footer_of

    if ordered:
        rows = sorted(rows)
    table = pa.table(
        {
            "k": pa.array([v for v, _ in rows], pa.int64()),
            "partition": pa.array([[f"p={i}" for i in ls] for _, ls in rows]),
        }
    )
    sink = io.BytesIO()
    pq.write_table(table, sink, row_group_size=group_rows, use_dictionary=dictionary)
    store = MemoryStore()
    store.put("u/indices/k/x.by-dataset-index.parquet", sink.getvalue())
    ref = "u/indices/k/x.by-dataset-index.parquet"
    state = IndexState.legacy(store, "k", ref, footer_of(ref, sink.getvalue()), pa.int64())
    oracle: dict[int, set[str]] = {}
    for v, ls in rows:
        if v in wanted:
            oracle.setdefault(v, set()).update(f"p={i}" for i in ls)
    old = indexlookup.GROUPS_PER_CALL, indexlookup.DECODE_THREADS
    indexlookup.GROUPS_PER_CALL, indexlookup.DECODE_THREADS = per_call, threads
    try:
        got = lookup_values(store, state, pa.array(wanted, pa.int64()))
    finally:
        indexlookup.GROUPS_PER_CALL, indexlookup.DECODE_THREADS = old
    assert got.mapping() == oracle
