"""Property tests of IndexState: a dict oracle {value: labels} and garbage deltas."""

from __future__ import annotations

import base64
import json
import math
from typing import Any

import hypothesis.strategies as st
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from parquetry.dataset.indexstate import IndexState, MergePolicy, decode_delta
from parquetry.dataset.predicates import Literal
from parquetry.errors import MetadataCorrupted
from parquetry.store import MemoryStore
from parquetry.testing import CountingStore

LABELS = st.sampled_from([f"p={i}/{i:032x}" for i in range(6)])
# Small thresholds, so that short runs merge, rewrite and write delta pieces.
POLICY = MergePolicy(
    max_small_pieces=2, small_ratio=2, dead_floor=2, dead_share=0.2, dead_max=4, inline_pairs=2
)
INLINE_MAX = 3
OPS = ["==", "!=", "in", "<", "<=", ">", ">=", "is null", "is not null"]


class IndexModel(RuleBasedStateMachine):
    """with_pairs / without_labels / deltas / checkpoint / reset against a dict oracle."""

    type: pa.DataType = pa.int64()
    values: st.SearchStrategy[Any] = st.integers(-3, 12)

    def __init__(self) -> None:
        super().__init__()
        self.store = CountingStore(MemoryStore())
        self.state = IndexState.empty("c", self.type)
        self.oracle: dict[Any, set[str]] = {}

    def _add(self, pairs: list[tuple[Any, str]]) -> None:
        for v, label in pairs:
            if v is not None:
                self.oracle.setdefault(v, set()).add(label)

    @staticmethod
    def _table(pairs: list[tuple[Any, str]], t: pa.DataType) -> pa.Table:
        return pa.table(
            {
                "value": pa.array([v for v, _ in pairs], t),
                "label": pa.array([lbl for _, lbl in pairs], pa.string()),
            }
        )

    @rule(data=st.data())
    def with_pairs(self, data: st.DataObject) -> None:
        pairs = data.draw(st.lists(st.tuples(st.none() | self.values, LABELS), max_size=6))
        self.state = self.state.with_pairs(self._table(pairs, self.type))
        self._add(pairs)

    @rule(data=st.data())
    def delta(self, data: st.DataObject) -> None:
        """Through an entry: inline pairs or a piece written first, then decoded."""
        pairs = data.draw(st.lists(st.tuples(self.values, LABELS), max_size=8))
        doc = self.state.encode_delta(
            self.store, "u", self._table(pairs, self.type), inline_max=INLINE_MAX
        )
        doc = json.loads(json.dumps(doc))
        assert ("piece" in doc) == (len(pairs) > INLINE_MAX)
        self.state = self.state.with_delta(doc, key="u/_versions/x.json")
        self._add(pairs)

    @rule(labels=st.lists(LABELS, max_size=3))
    def without_labels(self, labels: list[str]) -> None:
        self.state = self.state.without_labels(labels)
        for held in self.oracle.values():
            held -= set(labels)

    @rule()
    def checkpoint(self) -> None:
        before = self.state
        self.state = self.state.checkpoint(self.store, "u", policy=POLICY)
        assert self.state.tail.num_rows <= POLICY.inline_pairs
        assert not self.state.tail_pieces
        assert len(self.state.pieces) <= len(before.pieces) + len(before.tail_pieces) + 1

    @rule()
    def reset(self) -> None:
        self.state = self.state.reset()
        self.oracle.clear()

    @rule()
    def root_round_trip(self) -> None:
        doc = json.loads(json.dumps(self.state.to_root()))
        self.state = IndexState.from_root("c", self.type, doc, key="root")

    @invariant()
    def lookups_agree(self) -> None:
        data = self.draw_values()
        for op in OPS:
            for v in data:
                value = tuple(data[:2]) if op == "in" else v
                lit = Literal(column="c", op=op, value=value, type=self.type)
                expected = {
                    lbl
                    for x, labels in self.oracle.items()
                    for lbl in labels
                    if _holds(op, x, value)
                }
                assert self.state.lookup(self.store, lit) == expected, (op, value)
                if op in ("in", "is null", "is not null"):
                    break
        full = self.state.full(self.store)
        got = {
            v: set(lbls)
            for v, lbls in zip(full.values.to_pylist(), full.labels.to_pylist(), strict=True)
        }
        assert {v: s for v, s in got.items() if s} == {v: s for v, s in self.oracle.items() if s}

    def draw_values(self) -> list[Any]:
        return [-3, 5, 13]


class StringIndexModel(IndexModel):
    type = pa.string()
    values = st.sampled_from(["", "a", "ab", "b", "é", "zz"])

    def draw_values(self) -> list[Any]:
        return ["", "ab", "é"]


def _holds(op: str, x: Any, v: Any) -> bool:
    if op == "is null":
        return False  # an index holds no nulls
    if op == "is not null":
        return True
    if op == "in":
        return x in v
    return bool(
        {
            "==": x == v,
            "!=": x != v,
            "<": x < v,
            "<=": x <= v,
            ">": x > v,
            ">=": x >= v,
        }[op]
    )


_SETTINGS = settings(
    max_examples=30,
    stateful_step_count=10,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestIndexModel = IndexModel.TestCase
TestIndexModel.settings = _SETTINGS
TestStringIndexModel = StringIndexModel.TestCase
TestStringIndexModel.settings = _SETTINGS


# --- garbage deltas and roots ----------------------------------------------------------------

JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=8,
)


@given(garbage=st.binary(max_size=300))
@settings(max_examples=200, deadline=None)
def test_garbage_inline_pairs_raise_metadata_corrupted(garbage: bytes) -> None:
    doc = {"pairs": base64.b64encode(garbage).decode()}
    with pytest.raises(MetadataCorrupted) as err:
        decode_delta(doc, pa.int64(), key="u/_versions/7.json", column="c")
    assert err.value.key == "u/_versions/7.json"
    assert "'c'.pairs" in str(err.value)


@given(tail=st.binary(max_size=200), size=st.integers(-5, 10**6))
@settings(max_examples=100, deadline=None)
def test_garbage_piece_footer_raises_metadata_corrupted(tail: bytes, size: int) -> None:
    doc = {"piece": {"key": "u/_indices/c/x.parquet", "size": size,
                     "tail": base64.b64encode(tail).decode()}, "pairs": 5}  # fmt: skip
    with pytest.raises(MetadataCorrupted) as err:
        decode_delta(doc, pa.string(), key="u/_versions/8.json", column="c")
    assert err.value.key == "u/_versions/8.json"
    assert "'c'.piece" in str(err.value)


@given(doc=JSONISH)
@settings(max_examples=100, deadline=None)
def test_any_json_delta_or_root_parses_or_raises_metadata_corrupted(doc: Any) -> None:
    for parse in (
        lambda: decode_delta(doc, pa.int64(), key="k.json", column="c"),
        lambda: IndexState.from_root("c", pa.int64(), doc, key="k.json"),
        lambda: decode_delta({"pairs": doc}, pa.int64(), key="k.json"),
        lambda: decode_delta({"piece": doc, "pairs": 1}, pa.int64(), key="k.json"),
        lambda: IndexState.from_root("c", pa.int64(), {"pieces": [doc]}, key="k.json"),
        lambda: IndexState.from_root("c", pa.int64(), {"dead": doc}, key="k.json"),
        lambda: IndexState.from_root("c", pa.int64(), {"tail_pieces": [doc]}, key="k.json"),
    ):
        keys = []
        try:
            parse()
        except MetadataCorrupted as exc:
            keys.append(exc.key)
        assert keys in ([], ["k.json"])


@given(
    pairs=st.lists(st.tuples(st.integers(-(2**63), 2**63 - 1), st.text(max_size=5)), max_size=20)
)
@settings(max_examples=50, deadline=None)
def test_inline_delta_round_trips(pairs: list[tuple[int, str]]) -> None:
    state = IndexState.empty("c", pa.int64())
    table = pa.table({"value": [v for v, _ in pairs], "label": [lbl for _, lbl in pairs]},
                     schema=pa.schema([("value", pa.int64()), ("label", pa.string())]))  # fmt: skip
    doc = json.loads(json.dumps(state.encode_delta(MemoryStore(), "u", table)))
    got = decode_delta(doc, pa.int64(), key="k")
    assert isinstance(got, pa.Table)
    assert got.to_pylist() == table.to_pylist()


@given(
    bounds=st.lists(st.integers(-20, 20), min_size=2, max_size=24).map(sorted),
    value=st.integers(-25, 25),
    as_text=st.booleans(),
)
@settings(max_examples=200, deadline=None)
def test_bisected_row_groups_equal_the_scan_of_every_group(
    bounds: list[int], value: int, as_text: bool
) -> None:
    """Equality on a sorted piece bisects its row groups; the scan is the oracle."""
    from parquetry.dataset.indexfile import _candidate_groups, _FooterInfo

    def conv(x: int) -> Any:
        return f"{x + 50:03d}" if as_text else x

    pairs_ = [(conv(bounds[i]), conv(bounds[i + 1])) for i in range(0, len(bounds) - 1, 2)]
    mins, maxs = [a for a, _ in pairs_], [b for _, b in pairs_]
    t = pa.string() if as_text else pa.int64()
    lit = Literal(column="c", op="==", value=conv(value), type=t)
    rows = [3] * len(mins)
    fast = _FooterInfo(None, True, mins, maxs, rows, True)  # type: ignore[arg-type]
    scan = _FooterInfo(None, True, mins, maxs, rows, False)  # type: ignore[arg-type]
    assert _candidate_groups(fast, lit) == _candidate_groups(scan, lit)


@given(
    rows=st.lists(
        st.tuples(
            st.one_of(st.integers(-3, 3), st.sampled_from([0.0, -0.0, math.nan, 1.5, -2.0])),
            st.sampled_from(["a", "b", "c"]),
        ),
        max_size=30,
    ),
    floats=st.booleans(),
)
@settings(max_examples=100, deadline=None)
def test_a_written_piece_holds_each_distinct_value_once_with_its_sorted_labels(
    rows: list[tuple[Any, str]], floats: bool
) -> None:
    from parquetry.dataset.indexpieces import piece_pairs, read_piece, write_piece

    t = pa.float64() if floats else pa.int64()
    if floats:
        rows = [(float(v), lbl) for v, lbl in rows]
    else:
        rows = [(int(v), lbl) for v, lbl in rows if not math.isnan(v) and v == int(v)]
    store = MemoryStore()
    table = pa.table({"value": pa.array([v for v, _ in rows], t), "label": [x for _, x in rows]})
    footer = write_piece(store, "u", "c", table)
    got = read_piece(store, "c", footer, t)
    want: dict[Any, set[str]] = {}
    for v, lbl in rows:  # exact values: -0.0 apart from 0.0, every NaN one value
        key = "nan" if v != v else (v, math.copysign(1, v)) if floats else v
        want.setdefault(key, set()).add(lbl)
    values = got.values.to_pylist()
    keys = ["nan" if v != v else (v, math.copysign(1, v)) if floats else v for v in values]
    labels = got.labels.to_pylist()
    assert len(keys) == len(set(keys))
    assert {k: set(lbls) for k, lbls in zip(keys, labels, strict=True)} == want
    assert all(lbls == sorted(set(lbls)) for lbls in labels)
    assert piece_pairs(footer) == sum(len(s) for s in want.values())
