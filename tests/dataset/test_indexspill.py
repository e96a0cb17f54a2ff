"""PairSink (indexspill.py): pairs beyond a run spill to sorted runs and are merged into
pieces of disjoint value ranges that hold exactly the pairs added (the oracle: the set of
pairs), whatever the run and piece sizes."""

from __future__ import annotations

import math

import hypothesis.strategies as st
import pyarrow as pa
from hypothesis import given, settings

from parquetry.dataset.indexpieces import piece_pairs, read_piece
from parquetry.dataset.indexspill import PairSink
from parquetry.dataset.indexstate import IndexState
from parquetry.dataset.predicates import Literal
from parquetry.store import MemoryStore

_VALUES = {
    "int": (pa.int64(), st.integers(-5, 5)),
    "str": (pa.string(), st.text("abc", max_size=3)),
    "float": (pa.float64(), st.sampled_from([0.0, -0.0, 1.5, -2.0, math.nan, math.inf])),
}


@st.composite
def _case(draw: st.DrawFn) -> tuple[pa.DataType, list[list[tuple[object, str]]]]:
    t, values = _VALUES[draw(st.sampled_from(sorted(_VALUES)))]
    batches = draw(
        st.lists(st.lists(st.tuples(values, st.sampled_from("pqrs")), max_size=12), max_size=8)
    )
    return t, batches


def _key(v: object) -> object:
    # NaN != NaN: compare by text; -0.0 and 0.0 are distinct values of an index.
    return repr(v) if isinstance(v, float) else v


def _one_value(values: list[object]) -> bool:
    """A piece may exceed its size only with one value's labels (-0.0 == 0.0, NaNs one)."""
    return len({"nan" if v != v else v for v in values}) == 1


@given(case=_case(), run=st.integers(1, 9), piece=st.integers(1, 9))
@settings(max_examples=60, deadline=None)
def test_spilled_pieces_hold_exactly_the_pairs_in_disjoint_value_ranges(
    case: tuple[pa.DataType, list[list[tuple[object, str]]]], run: int, piece: int
) -> None:
    t, batches = case
    store = MemoryStore()
    expected = set()
    with PairSink(t, run_pairs=run) as sink:
        for batch in batches:
            sink.add(pa.table({"value": pa.array([v for v, _ in batch], t),
                               "label": [lbl for _, lbl in batch]}))  # fmt: skip
            expected |= {(_key(v), lbl) for v, lbl in batch}
        spilled = sink.spilled  # else all pairs fit one run: one piece, whatever its size
        written = sink.write(store, "u", "c", max_pairs=piece)
    got: list[tuple[object, str]] = []
    ranges = []
    for footer, n in written:
        index = read_piece(store, "c", footer, t)
        pairs = [(_key(p["value"]), p["label"]) for p in index.pairs().to_pylist()]
        assert piece_pairs(footer) == len(pairs) <= n
        assert n <= piece or _one_value(index.values.to_pylist()) or not spilled
        got += pairs
        ranges.append({_key(v) for v in index.values.to_pylist()})
    assert len(got) == len(set(got))
    assert set(got) == expected
    # A value lives in one piece only: a point lookup reads at most one of them.
    assert sum(len(r) for r in ranges) == len(set().union(*ranges)) if ranges else True
    state = IndexState.empty("c", t)
    for footer, n in written:
        state = state.with_piece(footer, n)
    for v, _ in {(v, lbl) for batch in batches for v, lbl in batch if v == v}:
        want = {lbl for batch in batches for x, lbl in batch if x == v}
        assert state.lookup(store, Literal(column="c", op="==", value=v, type=t)) == want


@given(
    adds=st.lists(
        st.lists(st.tuples(st.integers(0, 40), st.sampled_from("abcdefgh")), max_size=30),
        min_size=1,
        max_size=6,
    ),
    removed=st.sets(st.sampled_from("abcdefgh"), min_size=1),
    piece=st.integers(1, 20),
)
@settings(max_examples=60, deadline=None)
def test_a_checkpoint_rewrite_streams_into_bounded_disjoint_pieces(
    adds: list[list[tuple[int, str]]], removed: set[str], piece: int
) -> None:
    from parquetry.dataset.indexstate import MergePolicy
    from parquetry.testing import CountingStore

    store = CountingStore(MemoryStore())
    small = MergePolicy(piece_pairs=piece, inline_pairs=0)
    state = IndexState.empty("c", pa.int64())
    for batch in adds:  # each batch one piece written by a checkpoint
        table = pa.table({"value": pa.array([v for v, _ in batch], pa.int64()),
                          "label": pa.array([lbl for _, lbl in batch], pa.string())})  # fmt: skip
        state = state.with_pairs(table).checkpoint(store, "u", policy=small)
    state = state.without_labels(removed)
    store.reset()
    # Any dead label forces the full rewrite, read row group by row group.
    rewrite = MergePolicy(piece_pairs=piece, dead_floor=0, dead_share=0.0)
    out = state.checkpoint(store, "u", policy=rewrite)
    assert store.counts["get"] == 0
    live = {(v, lbl) for batch in adds for v, lbl in batch if lbl not in removed}
    assert out.dead == frozenset()
    got = set()
    ranges: list[set[int]] = []
    for footer in out.pieces:
        index = read_piece(store, "c", footer, pa.int64())
        values = index.values.to_pylist()
        assert piece_pairs(footer) <= piece or _one_value(values)
        got |= {(p["value"], p["label"]) for p in index.pairs().to_pylist()}
        ranges.append(set(values))
    assert got == live
    assert sum(len(r) for r in ranges) == len(set().union(*ranges, set()))
    for v in {v for v, _ in live}:
        lit = Literal(column="c", op="==", value=v, type=pa.int64())
        assert out.lookup(store, lit) == {lbl for x, lbl in live if x == v}
