"""Scanning lookups (indexscan.py): ``!=``, ``is not null`` and wide ranges read an index
piece one row group at a time in ranged GETs and find exactly the labels (and file records)
of the whole piece's lookup (the oracle: the pairs themselves)."""

from __future__ import annotations

from unittest import mock

import hypothesis.strategies as st
import pyarrow as pa
import pytest
from hypothesis import given, settings

from parquetry.dataset import indexpieces
from parquetry.dataset.indexfile import footer_metadata
from parquetry.dataset.indexpieces import write_piece
from parquetry.dataset.indexscan import scan_piece
from parquetry.dataset.indexstate import IndexState
from parquetry.dataset.indices import IndexData, IndexLookup, write_index
from parquetry.dataset.piecefiles import record_table
from parquetry.dataset.predicates import Literal
from parquetry.errors import MetadataCorrupted
from parquetry.store import MemoryStore
from parquetry.testing import CountingStore

_VALUES = {
    "int": (pa.int64(), st.integers(-6, 6)),
    "str": (pa.string(), st.text("abc", max_size=2)),
}
_OPS = ["!=", "is not null", "<", ">=", "==", "in"]


def _matches(op: str, v: object, x: object) -> bool:
    if op == "is not null":
        return True
    if op == "in":
        return v in x  # type: ignore[operator]
    return bool({"!=": v != x, "<": v < x, ">=": v >= x, "==": v == x}[op])  # type: ignore[operator]


@st.composite
def _case(draw: st.DrawFn) -> tuple[pa.DataType, list[tuple[object, str]], Literal, int]:
    t, values = _VALUES[draw(st.sampled_from(sorted(_VALUES)))]
    pairs = draw(st.lists(st.tuples(values, st.sampled_from("pqrstu")), min_size=1, max_size=40))
    op = draw(st.sampled_from(_OPS))
    value: object = None
    if op == "in":
        value = tuple(draw(st.lists(values, min_size=1, max_size=3)))
    elif op != "is not null":
        value = draw(values)
    group = draw(st.integers(1, 6))
    return t, pairs, Literal(column="c", op=op, value=value, type=t), group


@given(case=_case(), request=st.sampled_from([1, 200, 1 << 21]))
@settings(max_examples=80, deadline=None)
def test_a_scan_finds_exactly_the_matching_labels_and_their_records(
    case: tuple[pa.DataType, list[tuple[object, str]], Literal, int], request: int
) -> None:
    t, pairs, lit, group = case
    store = MemoryStore()
    table = pa.table({"value": pa.array([v for v, _ in pairs], t), "label": [x for _, x in pairs]})
    records = {x: f"[{ord(x)},1]" for x in "pqr"}  # labels s, t, u have no record
    with mock.patch.object(indexpieces, "PIECE_ROW_GROUP", group):
        footer = write_piece(store, "u", "c", table, record_table(records))
    want = {x for v, x in pairs if _matches(lit.op, v, lit.value)}
    found, gets, got_records = scan_piece(store, "c", footer, lit, t, request_bytes=request)
    assert found == want
    assert got_records == {x: records[x] for x in want if x in records}
    assert gets <= footer_metadata(footer).num_row_groups
    # The lookup of a state goes the same way (a scan or, for == and in, ranged reads).
    state = IndexState.empty("c", t).with_piece(footer, len(pairs))
    assert state.lookup(store, lit) == want
    assert state.without_labels(["p"]).lookup(store, lit) == want - {"p"}


def test_a_not_equal_lookup_reads_a_large_piece_in_ranged_requests_not_whole() -> None:
    """Before, a lookup whose statistics excluded no row group downloaded the piece whole
    (and decoded it whole); now bounded ranged GETs, one row group decoded at a time."""
    store = CountingStore(MemoryStore())
    n = 4_000
    table = pa.table(
        {
            "value": pa.array(range(n), pa.int64()),
            "label": [f"part={i % 40}/{i % 40:032x}" for i in range(n)],
        }
    )
    with mock.patch.object(indexpieces, "PIECE_ROW_GROUP", 100):
        footer = write_piece(store, "u", "c", table)
    groups = footer_metadata(footer).num_row_groups
    assert groups == n // 100
    state = IndexState.empty("c", pa.int64()).with_piece(footer, n)
    labels = {f"part={i}/{i:032x}" for i in range(40)}
    for op, value in (("!=", 5), ("is not null", None), (">=", 0)):
        store.reset()
        lit = Literal(column="c", op=op, value=value, type=pa.int64())
        found, keys = state.search(store, lit)
        assert found == labels
        assert store.counts["get"] == 0, op  # never the whole piece
        assert store.counts["get_range"] == len(keys) >= 1
    # With requests of at most 4 KiB: several requests, each of adjacent groups.
    lit = Literal(column="c", op="!=", value=5, type=pa.int64())
    store.reset()
    found, gets, _ = scan_piece(store, "c", footer, lit, pa.int64(), request_bytes=4096)
    assert found == labels
    assert 1 < gets == store.counts["get_range"] <= groups


def test_a_format1_index_file_is_scanned_not_loaded_for_not_equal_lookups() -> None:
    """An index file of format 1 or kartothek (no format-2 state): ``!=``, ``is not null``
    and wide ranges scanned like pieces (footer by ranged GETs when the version has none),
    with the labels of the whole file's lookup; ``==`` keeps its path."""
    inner = MemoryStore()
    n = 20_000  # three row groups of INDEX_ROW_GROUP
    labels = [f"p={i % 7}/{i % 7:032x}" for i in range(n)]
    index = IndexData(
        column="c",
        values=pa.array(range(n), pa.int64()),
        labels=pa.array([[x] for x in labels], pa.list_(pa.string())),
    )
    written = write_index(inner, "u", index)
    assert footer_metadata(written).num_row_groups == 3
    store = CountingStore(inner)
    cases = [("!=", 3), ("is not null", None), (">=", 1), ("<", 5), ("==", 8)]
    for footer in (None, written):
        for op, value in cases:
            lit = Literal(column="c", op=op, value=value, type=pa.int64())
            want = IndexLookup(inner, "c", written.key, None, pa.int64()).full().lookup(lit)
            store.reset()
            lookup = IndexLookup(store, "c", written.key, footer, pa.int64())
            assert lookup.lookup(lit) == want, (op, footer is None)
            assert lookup.requests == store.total == len(lookup.keys)
            if op != "==" or footer is not None:
                assert store.counts["get"] == 0, (op, footer is None)  # never the whole file
    # A missing file is named, not a raw error.
    lookup = IndexLookup(inner, "c", "u/indices/c/gone.parquet", None, pa.int64())
    with pytest.raises(MetadataCorrupted, match=r"gone\.parquet"):
        lookup.lookup(Literal(column="c", op="!=", value=1, type=pa.int64()))
