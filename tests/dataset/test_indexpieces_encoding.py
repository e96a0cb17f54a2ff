"""Index pieces' column encodings (issue 14): integer-like values DELTA_BINARY_PACKED and
uncompressed, every other leaf zstd; pieces written before (values PLAIN + zstd) still read.

Every reader of a piece (the whole-piece read, the batch lookup, the point lookup) is
checked against a brute-force oracle of the pairs, for pieces in both encodings."""

from __future__ import annotations

from typing import Any

import hypothesis.strategies as st
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings

from parquetry.dataset import indexpieces
from parquetry.dataset.indexlookup import lookup_values
from parquetry.dataset.indexpieces import (
    iter_piece_tables,
    normalise_pairs,
    piece_metadata,
    read_piece,
    write_piece,
)
from parquetry.dataset.indexstate import IndexState
from parquetry.dataset.predicates import Literal
from parquetry.store import MemoryStore

I64 = (-(2**63), 2**63 - 1)
# (type, how an integer becomes a value of it, the integers drawn)
TYPES: dict[str, tuple[pa.DataType, Any, Any]] = {
    "int64": (pa.int64(), None, st.integers(-20, 60) | st.sampled_from(I64)),
    "int8": (pa.int8(), None, st.integers(-128, 127)),
    "uint64": (pa.uint64(), None, st.integers(0, 60) | st.sampled_from([2**63, 2**64 - 1])),
    "timestamp": (pa.timestamp("us", "UTC"), pa.int64(), st.integers(-(10**12), 10**12)),
    "date32": (pa.date32(), pa.int32(), st.integers(-1000, 1000)),
    "time64": (pa.time64("us"), pa.int64(), st.integers(0, 86_400 * 10**6 - 1)),
    "string": (pa.string(), str, st.integers(-20, 60)),
    "float64": (pa.float64(), float, st.integers(-20, 60)),
}
DELTA = {"int64", "int8", "uint64", "timestamp", "date32", "time64"}


def _values(kind: str, ints: list[int]) -> pa.Array:
    t, via, _ = TYPES[kind]
    if via is None:
        return pa.array(ints, t)
    if isinstance(via, pa.DataType):
        return pa.array(ints, via).cast(t)
    return pa.array([via(i) for i in ints], t)


@st.composite
def _case(draw: Any) -> tuple[str, list[int], list[str], list[int]]:
    kind = draw(st.sampled_from(sorted(TYPES)))
    ints = draw(st.lists(TYPES[kind][2], min_size=1, max_size=40))
    # Few labels: values in several files (a list of labels per value), duplicate pairs.
    labels = draw(
        st.lists(
            st.sampled_from([f"p={i}/{i:032x}" for i in range(4)]),
            min_size=len(ints),
            max_size=len(ints),
        )
    )
    wanted = draw(st.lists(st.sampled_from(ints) | TYPES[kind][2], max_size=12))
    return kind, ints, labels, wanted


def _write(
    store: MemoryStore, kind: str, ints: list[int], labels: list[str]
) -> tuple[IndexState, Any]:
    t = TYPES[kind][0]
    pairs = normalise_pairs(pa.table({"value": _values(kind, ints), "label": labels}), t)
    footer = write_piece(store, "u", "c", pairs)
    return IndexState.empty("c", t).with_piece(footer, pairs.num_rows), footer


_DELTA = indexpieces._delta_values


@settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(case=_case(), old=st.booleans(), group_rows=st.integers(1, 6))
def test_pieces_of_either_encoding_read_as_the_oracle(
    case: tuple[str, list[int], list[str], list[int]],
    old: bool,
    group_rows: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    kind, ints, labels, wanted = case
    monkeypatch.setattr(indexpieces, "PIECE_ROW_GROUP", group_rows)
    # A piece written before: the values PLAIN and zstd-compressed, as the old code wrote.
    monkeypatch.setattr(indexpieces, "_delta_values", lambda t: False if old else _DELTA(t))
    store = MemoryStore()
    state, footer = _write(store, kind, ints, labels)
    values = _values(kind, ints).to_pylist()
    oracle: dict[Any, set[str]] = {}
    for v, lbl in zip(values, labels, strict=True):
        oracle.setdefault(v, set()).add(lbl)

    md = piece_metadata(footer)
    for g in range(md.num_row_groups):
        chunk = md.row_group(g).column(0)
        assert ("DELTA_BINARY_PACKED" in chunk.encodings) == (kind in DELTA and not old)
        assert chunk.compression == ("UNCOMPRESSED" if kind in DELTA and not old else "ZSTD")
        # Labels compressed (a codec left out of the writer's mapping is "none").
        assert md.row_group(g).column(1).compression == "ZSTD"

    t = TYPES[kind][0]
    whole = read_piece(store, "c", footer, t)
    got: dict[Any, set[str]] = {}
    for v, lbls in zip(whole.values.to_pylist(), whole.labels.to_pylist(), strict=True):
        got.setdefault(v, set()).update(lbls)
    assert got == oracle
    assert sum(tb.num_rows for tb in iter_piece_tables(store, "c", footer)) == len(oracle)

    want = _values(kind, wanted)
    found = lookup_values(store, state, want).mapping()
    assert found == {v: oracle[v] for v in set(want.to_pylist()) if v in oracle}
    for v in set(want.to_pylist()[:4]):
        lit = Literal(column="c", op="==", value=v, type=t)
        assert state.lookup(store, lit) == oracle.get(v, set())


def test_int64_extremes_round_trip_delta_encoded() -> None:
    """Deltas between int64's extremes overflow 64 bits (the encoding wraps them)."""
    store = MemoryStore()
    ints = [I64[0], -1, 0, 1, I64[1], I64[1] - 1, I64[0] + 1]
    labels = [f"p={i}" for i in range(len(ints))]
    state, footer = _write(store, "int64", ints, labels)
    assert "DELTA_BINARY_PACKED" in piece_metadata(footer).row_group(0).column(0).encodings
    got = lookup_values(store, state, pa.array(ints, pa.int64())).mapping()
    assert got == {v: {lbl} for v, lbl in zip(ints, labels, strict=True)}
