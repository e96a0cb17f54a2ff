"""``in`` lookups in an index piece read only the row groups whose statistics may hold a
wanted value, in at most MAX_RANGED_REQUESTS ranged GETs per piece (indexfile.py); before,
touching more than a quarter of the row groups read the whole piece."""

from __future__ import annotations

from typing import Any
from unittest import mock

import hypothesis.strategies as st
import pyarrow as pa
import pytest
from hypothesis import given, settings

from parquetry.dataset import indexpieces
from parquetry.dataset.indexfile import MAX_RANGED_REQUESTS, coalesce
from parquetry.dataset.indexpieces import write_piece
from parquetry.dataset.indexstate import IndexState
from parquetry.dataset.predicates import Literal
from parquetry.store import MemoryStore
from parquetry.testing import CountingStore


def _state(store: CountingStore, pairs: list[tuple[Any, str]], t: pa.DataType) -> IndexState:
    table = pa.table(
        {
            "value": pa.array([v for v, _ in pairs], t),
            "label": pa.array([lbl for _, lbl in pairs], pa.string()),
        }
    )
    with mock.patch.object(indexpieces, "PIECE_ROW_GROUP", 4):
        footer = write_piece(store, "u", "c", table)
    store.reset()
    return IndexState.empty("c", t).with_piece(footer, table.num_rows)


def test_in_lookup_over_many_row_groups_reads_only_those_groups() -> None:
    store = CountingStore(MemoryStore())
    pairs = [(v, f"p={v % 7}/{v:032x}") for v in range(4_000)]
    state = _state(store, pairs, pa.int64())
    size = state.tail_pieces[0].footer.size
    # 1,200 values in 300 of the 1,000 row groups (four runs): more than the quarter of
    # the groups that made a lookup read the whole piece.
    wanted = [v for start in (0, 1_000, 2_000, 3_000) for v in range(start, start + 300)]
    lit = Literal(column="c", op="in", value=tuple(wanted), type=pa.int64())
    labels, keys = state.search(store, lit)
    assert labels == {f"p={v % 7}/{v:032x}" for v in wanted}
    assert store.counts["get"] == 0
    assert 1 <= store.counts["get_range"] == len(keys) <= MAX_RANGED_REQUESTS
    assert store.bytes_read < size * 0.5


def test_in_lookup_hitting_every_row_group_reads_the_piece_once() -> None:
    store = CountingStore(MemoryStore())
    pairs = [(v, f"p={v % 7}/{v:032x}") for v in range(400)]
    state = _state(store, pairs, pa.int64())
    lit = Literal(column="c", op="in", value=tuple(range(0, 400, 3)), type=pa.int64())
    labels, keys = state.search(store, lit)
    assert labels == {f"p={v % 7}/{v:032x}" for v in range(0, 400, 3)}
    assert len(keys) == 1
    assert store.total == 1


@pytest.mark.parametrize(
    ("ranges", "most", "expected"),
    [
        ([(10, 20), (0, 5), (5, 10)], 4, [(0, 20)]),
        ([(0, 1), (3, 4), (10, 11), (12, 13)], 2, [(0, 4), (10, 13)]),
        ([(0, 1), (3, 4), (10, 11)], 1, [(0, 11)]),
        ([(0, 9), (2, 3)], 3, [(0, 9)]),
    ],
)
def test_coalesce_joins_adjacent_then_smallest_gaps(
    ranges: list[tuple[int, int]], most: int, expected: list[tuple[int, int]]
) -> None:
    assert coalesce(ranges, most) == expected


INTS = st.integers(-50, 50)
TEXTS = st.sampled_from(["", "a", "ab", "b", "ba", "c", "é", "zz", "zzz", "~"])


@given(data=st.data(), as_text=st.booleans())
@settings(max_examples=150, deadline=None)
def test_in_lookup_equals_a_brute_force_filter(data: st.DataObject, as_text: bool) -> None:
    values = TEXTS if as_text else INTS
    t = pa.string() if as_text else pa.int64()
    pairs = data.draw(
        st.lists(
            st.tuples(values, st.sampled_from([f"p={i}/x{i}" for i in range(5)])),
            min_size=1,
            max_size=60,
        )
    )
    wanted = data.draw(st.lists(values, min_size=1, max_size=20))
    store = CountingStore(MemoryStore())
    state = _state(store, pairs, t)
    dead = data.draw(st.sets(st.sampled_from([f"p={i}/x{i}" for i in range(5)]), max_size=2))
    state = state.without_labels(dead)
    lit = Literal(column="c", op="in", value=tuple(wanted), type=t)
    labels, keys = state.search(store, lit)
    assert labels == {lbl for v, lbl in pairs if v in wanted and lbl not in dead}
    # Within the budget: one whole GET, or at most MAX_RANGED_REQUESTS ranged GETs.
    assert len(keys) == store.total
    assert store.counts["get"] + store.counts["get_range"] == store.total
    assert store.counts["get"] <= 1
    assert store.counts["get_range"] <= MAX_RANGED_REQUESTS
    assert not (store.counts["get"] and store.counts["get_range"])


@given(
    bounds=st.lists(st.integers(-20, 20), min_size=2, max_size=24).map(sorted),
    wanted=st.lists(st.integers(-25, 25), min_size=1, max_size=6),
    as_text=st.booleans(),
)
@settings(max_examples=200, deadline=None)
def test_bisected_in_row_groups_equal_the_scan_of_every_group(
    bounds: list[int], wanted: list[int], as_text: bool
) -> None:
    """``in`` on a sorted piece bisects each value; the scan of every group is the oracle."""
    from parquetry.dataset.indexfile import _candidate_groups, _FooterInfo

    def conv(x: int) -> Any:
        return f"{x + 50:03d}" if as_text else x

    pairs = [(conv(bounds[i]), conv(bounds[i + 1])) for i in range(0, len(bounds) - 1, 2)]
    mins, maxs = [a for a, _ in pairs], [b for _, b in pairs]
    t = pa.string() if as_text else pa.int64()
    lit = Literal(column="c", op="in", value=tuple(conv(v) for v in wanted), type=t)
    rows = [3] * len(mins)
    fast = _FooterInfo(None, True, mins, maxs, rows, True)  # type: ignore[arg-type]
    scan = _FooterInfo(None, True, mins, maxs, rows, False)  # type: ignore[arg-type]
    assert _candidate_groups(fast, lit) == _candidate_groups(scan, lit)
