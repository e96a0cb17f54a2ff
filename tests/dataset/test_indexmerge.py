"""The piece-at-a-time merge (indexmerge.py) against the merge it replaced: a sink that
spilled writes the same pieces (same keys, so the same bytes, in the same order, with the
same pair counts) as the old chunk merge cut into pieces, for every value type whose
order it handles itself (numbers, times, booleans) or leaves to Arrow (text, binary)."""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterator

import hypothesis.strategies as st
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings

from parquetry.dataset.indexfile import IndexFooter
from parquetry.dataset.indexmerge import merged_pieces
from parquetry.dataset.indexpieces import write_piece
from parquetry.dataset.indexspill import PairSink, _by_value, _merge, _read_run
from parquetry.store import MemoryStore

_VALUES = {
    "int": (pa.int64(), st.integers(-6, 6)),
    "uint": (pa.uint64(), st.sampled_from([0, 1, 2, 2**63, 2**64 - 1])),
    "float": (pa.float64(), st.sampled_from([0.0, -0.0, 1.5, -2.0, math.nan, math.inf])),
    "str": (pa.string(), st.text("ab\u00e9", max_size=3)),
    "bin": (pa.binary(), st.binary(max_size=2)),
    "ts": (pa.timestamp("us"), st.integers(-3, 3).map(lambda d: dt.datetime(2020, 1, 5 + d))),
    "date": (pa.date32(), st.integers(-3, 3).map(lambda d: dt.date(2020, 1, 5 + d))),
    "bool": (pa.bool_(), st.booleans()),
}


def _old_cut(values: pa.Array, n: int) -> int | None:
    """indexspill._cut before the piece-at-a-time merge (kept here as the oracle)."""
    if pa.types.is_floating(values.type):
        v = values.to_numpy(zero_copy_only=False)
        change = (v[1:] != v[:-1]) & ~(np.isnan(v[1:]) & np.isnan(v[:-1]))
    else:
        import pyarrow.compute as pc

        change = pc.not_equal(values[1:], values[:-1]).to_numpy(zero_copy_only=False)
    starts = np.flatnonzero(change) + 1
    if len(starts) == 0:
        return None
    at = int(np.searchsorted(starts, n, side="right"))
    return int(starts[at - 1]) if at else int(starts[0])


def _old_pieces(chunks: Iterator[pa.Table], max_pairs: int) -> Iterator[pa.Table]:
    """PairSink.write's loop before the piece-at-a-time merge: chunks into pieces."""
    held, parts = 0, []
    for chunk in chunks:
        ordered = False
        while held + chunk.num_rows > max_pairs:
            if not ordered:
                chunk, ordered = _by_value(chunk), True
            room = max_pairs - held
            cut = _old_cut(chunk.column("value").combine_chunks(), room)
            if cut is not None and cut <= room:
                parts.append(chunk.slice(0, cut))
                chunk = chunk.slice(cut)
            elif held:
                pass
            elif cut is not None:
                parts.append(chunk.slice(0, cut))
                chunk = chunk.slice(cut)
            else:
                break
            yield pa.concat_tables(parts)
            parts, held = [], 0
        if chunk.num_rows:
            parts.append(chunk)
            held += chunk.num_rows
    if held:
        yield pa.concat_tables(parts)


def _written(store: MemoryStore, pieces: Iterator[pa.Table]) -> list[tuple[IndexFooter, int]]:
    return [(write_piece(store, "u", "c", p), p.num_rows) for p in pieces]


def _keys(written: list[tuple[IndexFooter, int]]) -> list[tuple[str, int]]:
    return [(f.key, n) for f, n in written]


@st.composite
def _case(draw: st.DrawFn) -> tuple[pa.DataType, list[list[tuple[object, str]]]]:
    t, values = _VALUES[draw(st.sampled_from(sorted(_VALUES)))]
    pairs = st.tuples(values, st.sampled_from("pqrst"))
    return t, draw(st.lists(st.lists(pairs, max_size=14), max_size=10))


@given(case=_case(), run=st.integers(1, 9), piece=st.integers(1, 12))
@settings(max_examples=200, deadline=None)
def test_the_merge_writes_the_pieces_of_the_old_merge(
    case: tuple[pa.DataType, list[list[tuple[object, str]]]], run: int, piece: int
) -> None:
    t, batches = case
    with PairSink(t, run_pairs=run) as sink:
        for batch in batches:
            values = pa.array([v for v, _ in batch], t)
            sink.add(pa.table({"value": values, "label": [lbl for _, lbl in batch]}))
        if not sink.spilled:
            return
        if sink.buffered:
            sink._spill()
        old = _written(MemoryStore(), _old_pieces(_merge([_read_run(p) for p in sink.runs]), piece))
        new = sink.write(MemoryStore(), "u", "c", max_pairs=piece)
    assert _keys(new) == _keys(old)
    assert sum(n for _, n in new) == sum(len(b) for b in batches)


@pytest.mark.parametrize("batch", [7, 8192])
def test_merging_many_runs_of_a_random_permutation_matches_the_old_merge(batch: int) -> None:
    rng = np.random.default_rng(15)
    keys = rng.permutation(6_000).astype(np.int64)
    runs = []
    for r in range(12):
        part = np.sort(keys[r * 500 : (r + 1) * 500])
        # A few values repeated across runs (several files hold them).
        part = np.sort(np.concatenate([part, np.arange(r % 3 * 7, 40, 5)]))
        table = pa.table({"value": part, "label": pa.repeat(f"p={r}/f.parquet", len(part))})
        runs.append(table)

    def sources() -> list[Iterator[pa.Table]]:
        return [iter([pa.Table.from_batches([b]) for b in t.to_batches(batch)]) for t in runs]

    for piece in (97, 1_000, 100_000):
        old = _written(MemoryStore(), _old_pieces(_merge(sources()), piece))
        new = _written(MemoryStore(), merged_pieces(sources(), pa.int64(), piece))
        assert _keys(new) == _keys(old)


def test_one_value_in_more_pairs_than_a_piece_is_a_piece_of_its_own() -> None:
    runs = [pa.table({"value": pa.array([1, 2, 2, 2, 2, 3], pa.int64()),
                      "label": [f"r{r}x{i}" for i in range(6)]}) for r in range(3)]  # fmt: skip
    pieces = list(merged_pieces([iter([t.slice(0, 2), t.slice(2)]) for t in runs], pa.int64(), 4))
    assert [sorted(set(p.column("value").to_pylist())) for p in pieces] == [[1], [2], [3]]
    assert [p.num_rows for p in pieces] == [3, 12, 3]


def _pairs(table: pa.Table) -> list[tuple[object, str]]:
    rows = zip(table.column("value").to_pylist(), table.column("label").to_pylist(), strict=True)
    return sorted((repr(v) if isinstance(v, float) else v, lbl) for v, lbl in rows)


@given(
    case=_case(),
    runs=st.integers(1, 5),
    batch=st.integers(1, 4),
    piece=st.integers(1, 12),
)
@settings(max_examples=300, deadline=None)
def test_runs_read_in_small_batches_merge_into_the_old_pieces(
    case: tuple[pa.DataType, list[list[tuple[object, str]]]], runs: int, batch: int, piece: int
) -> None:
    """Values repeated within and across runs and batch boundaries inside a value's pairs:
    the same pieces (the same pairs each) as the old merge."""
    t, batches = case
    flat = [pair for b in batches for pair in b]
    tables = []
    for r in range(runs):
        mine = flat[r::runs]
        table = pa.table({"value": pa.array([v for v, _ in mine], t),
                          "label": pa.array([lbl for _, lbl in mine], pa.string())})  # fmt: skip
        tables.append(_by_value(table))

    def sources() -> list[Iterator[pa.Table]]:
        return [iter([pa.Table.from_batches([b]) for b in x.to_batches(batch)]) for x in tables]

    old = [_pairs(p) for p in _old_pieces(_merge(sources()), piece)]
    new = [_pairs(p) for p in merged_pieces(sources(), t, piece)]
    assert new == old
