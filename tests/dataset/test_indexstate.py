"""IndexState: incremental index maintenance (issue 13), costs counted on real stores."""

from __future__ import annotations

import datetime as dt
import json
import math
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

from parquetry.dataset.indexpieces import PIECE_ROW_GROUP, piece_metadata, piece_pairs
from parquetry.dataset.indexstate import (
    INLINE_INDEX_PAIRS,
    ROOT_INLINE_PAIRS,
    IndexState,
    MergePolicy,
)
from parquetry.dataset.indices import IndexData, IndexLookup, merge_index, write_index
from parquetry.dataset.predicates import Literal
from parquetry.errors import MetadataCorrupted
from parquetry.store import MemoryStore, Store
from parquetry.testing import CountingStore

UUID = "ds"
#: Tail pairs always become a piece (the default keeps up to ROOT_INLINE_PAIRS inline).
WRITE = MergePolicy(inline_pairs=0)
INT64 = pa.int64()


def pairs(values: list[Any], labels: list[str], t: pa.DataType = INT64) -> pa.Table:
    return pa.table({"value": pa.array(values, t), "label": pa.array(labels, pa.string())})


def eq(value: Any, t: pa.DataType = INT64, op: str = "==") -> Literal:
    return Literal(column="c", op=op, value=value, type=t)


def label(i: int) -> str:
    return f"p={i % 1000}/{i:032x}"


def test_equality_costs_one_ranged_get_per_piece_that_may_hold_the_value() -> None:
    store = CountingStore(MemoryStore())
    state = IndexState.empty("c", pa.int32())
    for base in (0, 100, 200):  # three pieces with disjoint ranges (none small: no merge)
        state = state.with_pairs(pairs(list(range(base, base + 50)), ["x"] * 50))
        state = state.with_pairs(pairs([base + 7], [f"hit{base}"]))
        state = state.checkpoint(store, UUID, policy=WRITE)
    assert len(state.pieces) == 3
    state = state.with_pairs(pairs([1000], ["tail"]))
    store.reset()
    assert state.lookup(store, eq(107)) == {"x", "hit100"}
    assert store.counts == {"get_range": 1}
    assert store.log == [("get_range", state.pieces[1].key)]
    store.reset()
    assert state.lookup(store, eq(1000)) == {"tail"}  # the tail costs nothing
    assert state.lookup(store, eq(75)) == set()  # between pieces: no request either
    assert state.lookup(store, eq(None, op="is null")) == set()  # no nulls in an index
    assert store.total == 0
    labels, keys = state.search(store, eq(7))
    assert labels == {"x", "hit0"}
    assert keys == [state.pieces[0].key]


def test_checkpoint_after_a_one_row_append_costs_the_tail_not_the_index() -> None:
    """A 200k-value index: checkpoints after small appends read nothing and write O(tail)
    (nothing while the tail fits inline in the root), whatever the size of the index."""
    n = 200_000
    store = CountingStore(MemoryStore())
    state = IndexState.empty("c", pa.int64()).with_pairs(
        pairs(list(range(n)), [label(i) for i in range(n)])
    )
    state = state.checkpoint(store, UUID)
    big = store.bytes_written
    assert big > 500_000
    assert piece_metadata(state.pieces[0]).num_row_groups == math.ceil(n / PIECE_ROW_GROUP)
    assert len(json.dumps(state.to_root())) < 4 * 1024  # footers are cached in the root
    for i in range(3):  # a 1-row append per checkpoint: the pair stays in the root
        store.reset()
        state = state.with_pairs(pairs([n + i], [label(n + i)])).checkpoint(store, UUID)
        assert store.total == 0
        assert state.tail.num_rows == i + 1
    assert len(json.dumps(state.to_root())) < 5 * 1024
    for i in range(3):  # forced to a piece: one small write
        store.reset()
        state = state.with_pairs(pairs([n + 10 + i], [label(n + 10 + i)]))
        state = state.checkpoint(store, UUID, policy=WRITE)
        assert store.counts == {"put": 1}
        assert store.bytes_written < min(2_000, big / 300)
        assert store.bytes_read == 0
    assert len(state.pieces) == 4
    store.reset()  # past ROOT_INLINE_PAIRS, the tail becomes a piece of its own
    extra = ROOT_INLINE_PAIRS + 1
    state = state.with_pairs(pairs(list(range(-extra, 0)), [label(i) for i in range(extra)]))
    state = state.checkpoint(store, UUID)
    assert store.counts == {"put": 1}
    assert store.bytes_written < 40 * extra
    assert store.bytes_read == 0
    assert state.tail.num_rows == 0
    store.reset()
    assert state.lookup(store, eq(n + 11)) == {label(n + 11)}
    assert state.lookup(store, eq(12_345)) == {label(12_345)}
    assert state.lookup(store, eq(-1)) == {label(extra - 1)}
    assert store.counts == {"get_range": 3}
    # One inline delta of a 1-row append stays small in the entry.
    delta = json.dumps(state.encode_delta(store, UUID, pairs([5], [label(5)])))
    assert len(delta) < 1_000


def test_row_groups_hold_a_bounded_number_of_pairs_whatever_the_list_lengths() -> None:
    """100 values in 1,000 partitions each: row groups of ~PIECE_ROW_GROUP pairs (33 rows),
    not of PIECE_ROW_GROUP rows (the whole piece), so a lookup reads a quarter of it."""
    store = CountingStore(MemoryStore())
    n = 100_000
    state = IndexState.empty("c", pa.int64()).with_pairs(
        pairs([i % 100 for i in range(n)], [label(i) for i in range(n)])
    )
    state = state.checkpoint(store, UUID)
    md = piece_metadata(state.pieces[0])
    assert md.num_row_groups == math.ceil(n / PIECE_ROW_GROUP)
    assert piece_pairs(state.pieces[0]) == n
    size = state.pieces[0].size
    store.reset()
    assert len(state.lookup(store, eq(50))) == 1_000
    assert store.counts == {"get_range": 1}
    assert store.bytes_read < size / 2


def test_small_tails_stay_inline_in_the_root_and_cost_no_request() -> None:
    store = CountingStore(MemoryStore())
    state = IndexState.empty("c", pa.string())
    for i in range(ROOT_INLINE_PAIRS):
        state = state.with_pairs(pairs([f"v{i}"], [label(i)], pa.string()))
        if i % 100 == 0:
            state = state.checkpoint(store, UUID)
    assert store.total == 0
    root = json.dumps(state.to_root())
    assert len(root) < 24 * 1024
    back = IndexState.from_root("c", pa.string(), json.loads(root), key="root")
    assert back.lookup(store, eq("v77", pa.string())) == {label(77)}
    assert back.without_labels([label(77)]).lookup(store, eq("v77", pa.string())) == set()
    assert store.total == 0
    state = back.with_pairs(pairs(["v-last"], ["x"], pa.string())).checkpoint(store, UUID)
    assert store.counts == {"put": 1}
    assert state.tail.num_rows == 0
    assert state.lookup(store, eq("v77", pa.string())) == {label(77)}


def test_small_pieces_merge_when_more_than_eight_and_only_they_are_read() -> None:
    store = CountingStore(MemoryStore())
    state = IndexState.empty("c", pa.int64()).with_pairs(
        pairs(list(range(1000)), [label(i) for i in range(1000)])
    )
    state = state.checkpoint(store, UUID, policy=WRITE)
    big = state.pieces[0]
    for i in range(8):
        state = state.with_pairs(pairs([5000 + i], [f"new{i}"])).checkpoint(
            store, UUID, policy=WRITE
        )
    assert len(state.pieces) == 9  # 8 small pieces: not yet "more than 8"
    store.reset()
    state = state.with_pairs(pairs([5008], ["new8"])).checkpoint(store, UUID, policy=WRITE)
    assert state.pieces[0] == big
    assert len(state.pieces) == 2
    # The small pieces (one ranged GET per row group: one each), never the big one.
    assert store.counts["get_range"] == 8
    assert store.counts["get"] == 0
    assert big.key not in {k for _, k in store.log}
    assert piece_pairs(state.pieces[1]) == 9
    for i in range(9):
        assert state.lookup(store, eq(5000 + i)) == {f"new{i}"}
    assert state.lookup(store, eq(999)) == {label(999)}


def test_dead_labels_filter_pieces_until_their_share_forces_a_rewrite() -> None:
    store = CountingStore(MemoryStore())
    policy = MergePolicy(dead_floor=3, dead_share=0.1, dead_max=100, inline_pairs=0)
    state = IndexState.empty("c", pa.int64()).with_pairs(
        pairs([i % 10 for i in range(20)], [f"l{i}" for i in range(20)])
    )
    state = state.checkpoint(store, UUID, policy=policy)
    piece = state.pieces[0]
    store.reset()
    state = state.without_labels(["l0", "l1", "l10"]).checkpoint(store, UUID, policy=policy)
    assert store.total == 0  # 3 dead labels: at the threshold, nothing rewritten
    assert state.pieces == (piece,)
    assert state.dead == {"l0", "l1", "l10"}
    assert state.lookup(store, eq(0)) == set()
    assert state.lookup(store, eq(1)) == {"l11"}
    state = state.without_labels(["l2"]).checkpoint(store, UUID, policy=policy)
    assert state.dead == frozenset()
    assert state.pieces != (piece,)
    assert piece_pairs(state.pieces[0]) == 16
    assert state.lookup(store, eq(2)) == {"l12"}
    assert state.lookup(store, eq(0)) == set()


def test_the_dead_label_threshold_is_a_share_between_a_floor_and_a_cap() -> None:
    policy = MergePolicy()
    assert not policy.too_dead(100, 0)  # the floor
    assert policy.too_dead(101, 0)
    assert not policy.too_dead(5_000, 50_000)  # 10 %
    assert policy.too_dead(5_001, 50_000)
    # A 10M-pair index rewrites at 10,000 dead labels, not 1M: they live in the root.
    assert not policy.too_dead(10_000, 10_000_000)
    assert policy.too_dead(10_001, 10_000_000)
    store = CountingStore(MemoryStore())
    state = IndexState.empty("c", pa.int64()).with_pairs(
        pairs(list(range(300)), [label(i) for i in range(300)])
    )
    state = state.checkpoint(store, UUID, policy=MergePolicy(dead_max=5, inline_pairs=0))
    state = state.without_labels([label(i) for i in range(6)])
    assert state.checkpoint(store, UUID, policy=WRITE).dead == {label(i) for i in range(6)}
    assert state.checkpoint(store, UUID, policy=MergePolicy(dead_max=5)).dead == frozenset()
    root = json.dumps(state.to_root())
    assert len(root) < 2_000


def test_a_removed_label_added_again_is_live_only_with_its_new_values() -> None:
    store = MemoryStore()
    state = IndexState.empty("c", pa.int64()).with_pairs(pairs([1, 2], ["a", "b"]))
    state = state.checkpoint(store, UUID, policy=WRITE)
    state = state.without_labels(["a"]).with_pairs(pairs([3], ["a"]))
    assert state.lookup(store, eq(1)) == set()
    assert state.lookup(store, eq(3)) == {"a"}
    # A delta piece re-adding it, then removed again and re-added inline.
    big = pairs([10, 11], ["a", "c"])
    delta = state.encode_delta(store, UUID, big, inline_max=1)
    state = state.with_delta(delta, key="e").without_labels(["c"])
    for _ in ("before", "after the checkpoint"):
        assert state.lookup(store, eq(1)) == set()
        assert state.lookup(store, eq(3)) == {"a"}
        assert state.lookup(store, eq(10)) == {"a"}
        assert state.lookup(store, eq(11)) == set()
        assert state.lookup(store, eq(2)) == {"b"}
        state = state.checkpoint(store, UUID, policy=WRITE)
    assert state.dead == frozenset()  # the conflict forced a full rewrite


def test_a_large_delta_is_written_as_a_piece_once() -> None:
    store = CountingStore(MemoryStore())
    state = IndexState.empty("c", pa.string())
    n = INLINE_INDEX_PAIRS + 1
    big = pairs([f"v{i}" for i in range(n)], [label(i) for i in range(n)], pa.string())
    delta = state.encode_delta(store, UUID, big)
    assert delta["pairs"] == n
    assert delta["piece"]["key"].startswith(f"{UUID}/_indices/c/")
    assert state.encode_delta(store, UUID, big) == delta  # same bytes, same key: no error
    assert store.counts["put"] == 2
    doc = json.loads(json.dumps(delta))
    assert len(json.dumps(doc)) < 4_000
    state = state.with_delta(doc, key="e").without_labels([label(3)])
    lit = eq("v3", pa.string())
    assert state.lookup(store, lit) == set()
    assert state.lookup(store, eq("v4", pa.string())) == {label(4)}
    state = state.checkpoint(store, UUID, policy=WRITE)
    assert state.pieces == (
        IndexState.empty("c", pa.string()).with_delta(doc, key="e").tail_pieces[0].footer,
    )
    assert state.lookup(store, lit) == set()
    assert state.lookup(store, eq("v4", pa.string())) == {label(4)}


def test_root_form_round_trips_through_json() -> None:
    store = MemoryStore()
    state = IndexState.empty("c", pa.int64()).with_pairs(pairs([1, 2], ["a", "b"]))
    state = (
        state.checkpoint(store, UUID, policy=WRITE)
        .without_labels(["a"])
        .with_pairs(pairs([3], ["c"]))
    )
    state = state.with_delta(
        state.encode_delta(store, UUID, pairs([4, 5], ["d", "e"]), inline_max=1), key="e"
    )
    root = json.loads(json.dumps(state.to_root()))
    assert set(root) == {"pieces", "dead", "tail", "tail_pieces"}
    back = IndexState.from_root("c", pa.int64(), root, key="root")
    assert back.to_root() == root
    assert back == state
    assert back != state.without_labels(["b"])
    assert back != state.with_pairs(pairs([9], ["z"]))
    assert back != IndexState.from_root("d", pa.int64(), root, key="root")
    for v, want in ((1, set()), (2, {"b"}), (3, {"c"}), (4, {"d"})):
        assert back.lookup(store, eq(v)) == want
    done = back.checkpoint(store, UUID, policy=WRITE).to_root()
    assert set(done) == {"pieces", "dead"}


def _format1(store: Store) -> tuple[str, Any]:
    data = merge_index("c", None, pairs([1, 2, 2], ["a", "a", "b"]), set(), pa.int64())
    footer = write_index(store, UUID, data)
    return footer.key, footer


def test_legacy_index_file_is_one_piece_moved_under_indices_at_the_first_checkpoint() -> None:
    store = CountingStore(MemoryStore())
    key, footer = _format1(store)
    store.reset()
    with_footer = IndexState.legacy(store, "c", key, footer, pa.int64())
    assert store.total == 0
    without = IndexState.legacy(store, "c", key, None, pa.int64())
    assert store.counts == {"get": 1}
    assert with_footer.pieces == without.pieces
    for state in (with_footer, without):
        assert state.lookup(store, eq(2)) == {"a", "b"}
    moved = with_footer.with_pairs(pairs([3], ["c"])).checkpoint(store, UUID)
    assert moved.piece_keys() == {moved.pieces[0].key}
    assert moved.pieces[0].key.startswith(f"{UUID}/_indices/c/")
    assert moved.lookup(store, eq(2)) == {"a", "b"}
    assert moved.lookup(store, eq(3)) == {"c"}
    embedded = IndexState.legacy(store, "c", {"1": ["a"], "2": ["a", "b"]}, None, pa.int64())
    assert embedded.pieces == ()
    assert embedded.lookup(store, eq(2)) == {"a", "b"}


def test_legacy_and_pieces_missing_or_garbage_raise_metadata_corrupted() -> None:
    store = MemoryStore()
    with pytest.raises(MetadataCorrupted, match="missing") as err:
        IndexState.legacy(store, "c", "ds/indices/c/x.parquet", None, pa.int64())
    assert err.value.key == "ds/indices/c/x.parquet"
    store.put("ds/indices/c/y.parquet", b"not parquet at all")
    with pytest.raises(MetadataCorrupted) as err:
        IndexState.legacy(store, "c", "ds/indices/c/y.parquet", None, pa.int64())
    assert err.value.key == "ds/indices/c/y.parquet"
    state = (
        IndexState.empty("c", pa.int64())
        .with_pairs(pairs([1], ["a"]))
        .checkpoint(store, UUID, policy=WRITE)
    )
    key = state.pieces[0].key
    store.put(key, b"PAR1garbagePAR1")
    with pytest.raises(MetadataCorrupted) as err:
        state.lookup(store, eq(1))
    assert err.value.key == key
    store.delete(key)
    with pytest.raises(MetadataCorrupted, match="missing") as err:
        state.lookup(store, eq(1))
    assert err.value.key == key
    with pytest.raises(MetadataCorrupted) as err:
        state.full(store)
    assert err.value.key == key


def test_index_lookup_works_from_a_state_and_counts_its_requests() -> None:
    store = MemoryStore()
    state = IndexState.empty("c", pa.int64()).with_pairs(pairs([1, 2], ["a", "b"]))
    state = state.checkpoint(store, UUID, policy=WRITE).with_pairs(pairs([2], ["c"]))
    lookup = IndexLookup.from_state(store, state)
    assert lookup.lookup(eq(2)) == {"b", "c"}
    assert lookup.requests == 1
    assert lookup.keys == [state.pieces[0].key]
    full = lookup.full()
    assert lookup.requests == 2
    assert full.pairs().sort_by("label").to_pylist() == [
        {"value": 1, "label": "a"},
        {"value": 2, "label": "b"},
        {"value": 2, "label": "c"},
    ]
    assert lookup.lookup(eq(1)) == {"a"}  # answered from the loaded index now
    assert lookup.requests == 2


VALUES: list[tuple[pa.DataType, list[Any], list[Literal]]] = [
    (pa.float64(), [1.5, -0.0, math.nan, None, 7.0],
     [eq(math.nan, pa.float64()), eq(0.0, pa.float64()), eq(1.0, pa.float64(), ">")]),
    (pa.date32(), [dt.date(2024, 1, d) for d in (1, 2, 3, 3, 9)],
     [eq(dt.date(2024, 1, 3), pa.date32()), eq(dt.date(2024, 1, 2), pa.date32(), "<=")]),
    (pa.timestamp("us"), [dt.datetime(2024, 1, 1, h) for h in (0, 1, 2, 3, 4)],
     [eq(dt.datetime(2024, 1, 1, 2), pa.timestamp("us"))]),
    (pa.decimal128(10, 2), [Decimal("1.10"), Decimal("2.00"), Decimal("2.00"), None, Decimal("-3")],
     [eq(Decimal(2), pa.decimal128(10, 2)), eq(Decimal(0), pa.decimal128(10, 2), ">")]),
    (pa.bool_(), [True, False, True, None, False], [eq(True, pa.bool_())]),
    (pa.uint8(), [0, 255, 7, 7, 1],
     [eq(255, pa.uint8()), eq(256, pa.uint8()), eq(7, pa.uint8(), "!=")]),
]  # fmt: skip


@pytest.mark.parametrize(("t", "values", "lits"), VALUES, ids=lambda x: str(x)[:12])
def test_lookups_agree_with_the_format1_index_for_every_type(
    t: pa.DataType, values: list[Any], lits: list[Literal]
) -> None:
    store = MemoryStore()
    labels = [f"l{i}" for i in range(len(values))]
    table = pairs(values, labels, t)
    want: IndexData = merge_index("c", None, table, set(), IndexState.empty("c", t).type)
    first = IndexState.empty("c", t).with_pairs(table.slice(0, 2))
    state = first.checkpoint(store, UUID, policy=WRITE).with_pairs(table.slice(2))
    for current in (state, state.checkpoint(store, UUID, policy=WRITE)):
        for lit in [*lits, eq(None, t, "is not null"), eq(None, t, "is null")]:
            assert current.lookup(store, lit) == want.lookup(lit), lit


def test_plans_from_an_index_state_equal_plans_from_the_format1_index() -> None:
    """The planner through IndexLookup.from_state (what format-2 versions use) picks the
    same files as through the format-1 index file, at one ranged GET per equality."""
    from parquetry.dataset import Dataset
    from parquetry.dataset.ops import partition_values_of
    from parquetry.dataset.plan import make_plan
    from parquetry.dataset.predicates import validate_predicates
    from parquetry.dataset.versions import read_pointer

    inner = MemoryStore()
    table = pa.table({"p": [i % 4 for i in range(400)], "c": [(i * 37) % 150 for i in range(400)]})
    Dataset.create(inner, "ix", table, partition_on=["p"], secondary_indices=["c"])
    ds = Dataset.open(inner, "ix")
    doc = read_pointer(inner, "ix")[0]  # format 1 (what kartothek reads): an index file
    t = ds.schema.field("c").type
    legacy = IndexState.legacy(inner, "c", doc.indices["c"], doc.index_footers.get("c"), t)
    states = {"legacy": legacy, "checkpointed": legacy.checkpoint(inner, doc.uuid, policy=WRITE)}
    assert states["checkpointed"].pieces[0].key.startswith("ix/_indices/c/")
    values = partition_values_of(doc, ds.schema, {})
    store = CountingStore(inner)
    for preds in ([[("c", "==", 37)]], [[("c", "in", [1, 2, 3])], [("p", "==", 2)]],
                  [[("c", "<", 10), ("p", ">=", 1)]], [[("c", "==", 1000)]]):  # fmt: skip
        dnf = validate_predicates(preds, ds.schema)
        format1 = IndexLookup(store, "c", doc.indices["c"], doc.index_footers.get("c"), t)
        old = make_plan(doc, ds.schema, dnf, values, {"c": format1},
                        version=0, requests=0, request_keys=())  # fmt: skip
        for name, state in states.items():
            store.reset()
            lookup = IndexLookup.from_state(store, state)
            new = make_plan(doc, ds.schema, dnf, values, {"c": lookup},
                            version=0, requests=0, request_keys=())  # fmt: skip
            assert {f.label for f in new.files} == {f.label for f in old.files}, (name, preds)
            assert new.pruned_labels() == old.pruned_labels()
            assert lookup.requests == store.total <= 1


def test_pieces_on_every_store_one_ranged_get_and_idempotent_writes(any_store: Store) -> None:
    store = CountingStore(any_store)
    n = 3 * PIECE_ROW_GROUP
    big = pairs([f"k{i:06d}" for i in range(n)], [label(i) for i in range(n)], pa.string())
    state = IndexState.empty("c", pa.string())
    delta = state.encode_delta(store, UUID, big)
    assert state.encode_delta(store, UUID, big) == delta  # create-if-absent lost: same piece
    state = state.with_delta(delta, key="e").with_pairs(pairs(["k000007"], ["x"], pa.string()))
    state = state.checkpoint(store, UUID)
    assert state.pieces[0].key == delta["piece"]["key"]
    for value, want in (("k012345", {label(12_345)}), ("k000007", {label(7), "x"})):
        store.reset()
        assert state.lookup(store, eq(value, pa.string())) == want
        assert store.counts == {"get_range": 1}
        assert store.bytes_read < state.pieces[0].size / 2  # one row group of three
