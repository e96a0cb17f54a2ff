"""Attacks on bounded index maintenance (indexspill.PairSink, ``{"pieces": [...]}`` deltas,
checkpoint merges and rewrites) with tiny thresholds, so that a handful of rows spill runs,
write many pieces per delta and merge them at checkpoints: after every operation (append,
delete_where, update_where of the indexed column, upsert, compact, restore, checkpoint, GC
with retention 0) the index equals one rebuilt from the data files, both read whole
(``index_pairs``) and through point and range lookups (the path that skips pieces by their
statistics). Values overlap and repeat across files and partitions."""

from __future__ import annotations

import math
import os
import random
import tempfile
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parquetry.dataset import Dataset
from parquetry.dataset.indexspill import PairSink
from parquetry.dataset.indexstate import IndexState, MergePolicy
from parquetry.dataset.predicates import Literal, eval_stats, to_expression
from parquetry.errors import VersionExpired
from parquetry.store import MemoryStore

TINY = MergePolicy(
    max_small_pieces=2,
    small_ratio=2,
    dead_floor=2,
    dead_share=0.2,
    dead_max=4,
    inline_pairs=2,
    piece_pairs=4,
)


@pytest.fixture
def tiny_thresholds(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Spill after 4 pairs, pieces of 4 pairs, deltas of more than 2 pairs as pieces, and
    a private temporary directory (to see what spills leave behind)."""
    monkeypatch.setitem(PairSink.__init__.__kwdefaults__, "run_pairs", 4)  # type: ignore[index]
    monkeypatch.setitem(PairSink.write.__kwdefaults__, "max_pairs", 4)  # type: ignore[index]
    monkeypatch.setitem(IndexState.encode_sink.__kwdefaults__, "inline_max", 2)  # type: ignore[index]
    monkeypatch.setitem(IndexState.checkpoint.__kwdefaults__, "policy", TINY)  # type: ignore[index]
    with tempfile.TemporaryDirectory(prefix="attack9-spill-") as tmp:
        monkeypatch.setattr(tempfile, "tempdir", tmp)
        yield tmp


def _chunk(start: int, n: int, width: int) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table(
        {
            "p": pa.array([i % 2 for i in ids], pa.int64()),
            "id": pa.array(ids, pa.int64()),
            # Few distinct values: each is in many files and partitions.
            "k": pa.array([None if i % 7 == 3 else (i * 5) % width for i in ids], pa.int64()),
        }
    )


OPS = st.sampled_from(
    ["append", "upsert", "update", "delete", "compact", "restore", "checkpoint", "gc"]
)


def _step(ds: Dataset, op: str, n: int, width: int) -> Dataset:
    if op == "append":
        return ds.append(_chunk(100 * n, 5, width))
    if op == "upsert":  # existing keys get new k values, new keys are inserted
        data = _chunk(100 * n, 4, width)
        data = data.set_column(1, "id", pa.array([0, 1, 100 * n + 2, 100 * n + 3], pa.int64()))
        return ds.upsert(data, on=["id"])
    if op == "update":  # changes the indexed column: old values must leave the index
        return ds.update_where([[("k", "==", n % width)]], {"k": (n + 1) % width})
    if op == "delete":
        return ds.delete_where([[("k", "==", (n * 3) % width)]])
    if op == "compact":
        return ds.compact()
    if op == "restore":
        try:
            return ds.restore(max(0, ds.version - 2))
        except VersionExpired:
            return ds
    if op == "checkpoint":
        return ds.checkpoint()
    ds.garbage_collect(retention=0)
    return Dataset.open(ds.store, ds.uuid)


def rebuilt_index_pairs(ds: Dataset, column: str) -> set[tuple[Any, str]]:
    """``(value, label)`` of every non-null value of ``column`` in every file of ``ds``."""
    out: set[tuple[Any, str]] = set()
    for planned in ds.plan(None).files:
        values = pc.unique(ds.read_file(planned, [column]).column(column).drop_null())
        out |= {(v, planned.label) for v in values.to_pylist()}
    return out


def _check(ds: Dataset, width: int) -> None:
    fresh = Dataset.open(ds.store, ds.uuid)
    expected = rebuilt_index_pairs(fresh, "k")
    pairs = fresh.index_pairs("k")
    got = set(
        zip(pairs.column("value").to_pylist(), pairs.column("label").to_pylist(), strict=True)
    )
    assert got == expected
    state = fresh.document.index_states["k"]
    t = pa.int64()
    for v in range(-1, width + 1):
        want = {label for value, label in expected if value == v}
        assert state.lookup(fresh.store, Literal(column="k", op="==", value=v, type=t)) == want, v
    for op in ("<", ">=", "!="):
        want = {label for value, label in expected if _cmp(op, value, width // 2)}
        assert (
            state.lookup(fresh.store, Literal(column="k", op=op, value=width // 2, type=t)) == want
        ), op
    want = {label for value, label in expected if value in (0, width - 1)}
    assert (
        state.lookup(fresh.store, Literal(column="k", op="in", value=(0, width - 1), type=t))
        == want
    )


def _cmp(op: str, a: Any, b: Any) -> bool:
    return {"<": a < b, ">=": a >= b, "!=": a != b}[op]


@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(ops=st.lists(OPS, min_size=1, max_size=8), width=st.integers(2, 9))
def test_index_is_exact_after_every_operation_with_many_pieces(
    tiny_thresholds: str, ops: list[str], width: int
) -> None:
    store = MemoryStore()
    ds = Dataset.create(
        store, "ds", _chunk(0, 12, width), partition_on=["p"], secondary_indices=["k"]
    )
    _check(ds, width)
    for n, op in enumerate(ops, start=1):
        ds = _step(ds, op, n, width)
        _check(ds, width)
    assert os.listdir(tiny_thresholds) == [], "spill runs left behind"


def test_a_second_gc_keeps_the_index_pieces_the_head_still_names(tiny_thresholds: str) -> None:
    # The first GC (retention 0) wrote a checkpoint of the newest version that rewrote its
    # index (many dead labels: new pieces); the head still held the older checkpoint's root
    # plus a tail. The second GC counted that older checkpoint's pieces as dropped and kept
    # only those of the newest checkpoint: the pieces the head names were deleted, and every
    # open of the newest version then failed (MetadataCorrupted: index piece missing).
    width = 2
    ds = Dataset.create(
        MemoryStore(), "ds", _chunk(0, 12, width), partition_on=["p"], secondary_indices=["k"]
    )
    for n, op in enumerate(["append"] * 8 + ["delete", "append", "gc", "gc"], start=1):
        ds = _step(ds, op, n, width)
    _check(ds, width)
    assert ds.read().num_rows == Dataset.open(ds.store, "ds", version=ds.version).read().num_rows


@settings(max_examples=40, deadline=None)
@given(
    batches=st.lists(
        st.lists(st.tuples(st.integers(0, 6), st.sampled_from("abcdef")), max_size=5),
        max_size=5,
    ),
    run_pairs=st.integers(1, 8),
    inline_max=st.integers(0, 12),
)
def test_a_sink_encodes_every_pair_whatever_its_thresholds(
    batches: list[list[tuple[int, str]]], run_pairs: int, inline_max: int
) -> None:
    # A sink that spilled at or below inline_max encoded only the pairs it still held in
    # memory as an inline delta: the spilled ones were silently dropped from the index.
    store = MemoryStore()
    state = IndexState.empty("k", pa.int64())
    with PairSink(pa.int64(), run_pairs=run_pairs) as sink:
        for batch in batches:
            sink.add(
                pa.table(
                    {
                        "value": pa.array([v for v, _ in batch], pa.int64()),
                        "label": pa.array([lbl for _, lbl in batch], pa.string()),
                    }
                )
            )
        if not sink.total:
            return
        delta = state.encode_sink(store, "u", sink, inline_max=inline_max)
    pairs = state.with_delta(delta, key="u/_versions/1.json").full(store).pairs()
    got = set(
        zip(pairs.column("value").to_pylist(), pairs.column("label").to_pylist(), strict=True)
    )
    assert got == {pair for batch in batches for pair in batch}


def test_a_float_point_lookup_reads_one_of_many_disjoint_pieces(tiny_thresholds: str) -> None:
    # Footers leave NaN out of min/max, so every float piece was taken to reach up to NaN:
    # a point lookup read every piece whose minimum is below the value (here: most of 40).
    rng = random.Random(5)
    values = [round(rng.uniform(-50, 50), 3) for _ in range(160)]
    store = MemoryStore()
    ds = Dataset.create(
        store, "ds", pa.table({"p": [0], "k": [0.5]}), partition_on=["p"], secondary_indices=["k"]
    )
    ds = ds.append(pa.table({"p": [i % 40 for i in range(160)], "k": values}))
    state = Dataset.open(store, "ds").document.index_states["k"]
    assert len(state.pieces) + len(state.tail_pieces) > 10
    expected = rebuilt_index_pairs(Dataset.open(store, "ds"), "k")
    for v in values[:40]:
        labels, keys = state.search(store, Literal(column="k", op="==", value=v, type=pa.float64()))
        assert labels == {label for value, label in expected if value == v}
        assert len(set(keys)) <= 1, (v, len(set(keys)))


@settings(max_examples=80, deadline=None)
@given(
    values=st.lists(
        st.none() | st.sampled_from([math.nan, -0.0, 0.0, math.inf, -math.inf, 1.5, -2.0]),
        min_size=1,
        max_size=8,
    ),
    op=st.sampled_from(["==", "in", "!=", "<", "<=", ">", ">="]),
    probe=st.sampled_from([math.nan, -0.0, 0.0, math.inf, -math.inf, 1.5, -2.0, 3.0]),
)
def test_float_statistics_never_exclude_a_matching_row(
    values: list[float | None], op: str, probe: float
) -> None:
    """eval_stats with the footer's statistics (NaN left out) against the rows themselves."""
    table = pa.table({"k": pa.array(values, pa.float64())})
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    md = pq.ParquetFile(pa.BufferReader(sink.getvalue())).metadata
    stats = md.row_group(0).column(0).statistics
    lo, hi = (stats.min, stats.max) if stats is not None and stats.has_min_max else (None, None)
    nulls = stats.null_count if stats is not None and stats.has_null_count else 0
    value: Any = (probe, 1.5) if op == "in" else probe
    lit = Literal(column="k", op=op, value=value, type=pa.float64())
    matches = table.filter(to_expression(((lit,),))).num_rows
    if matches:
        assert eval_stats(lit, lo, hi, nulls, table.num_rows, nan_unknown=True), (lo, hi)
