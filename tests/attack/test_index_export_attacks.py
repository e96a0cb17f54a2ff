"""Attacks on the streaming export of kartothek's index file at a checkpoint
(indexexport.py): many overlapping pieces (tiny thresholds, so a handful of rows spill runs
and write pieces), float values with NaN, empty and non-ASCII strings, nulls,
deletes leaving dead labels. Oracle: the exported file (value -> labels, as kartothek reads
it: one row per distinct value) equals one built by brute force from the data files of the
version, and parquetry's own lookups agree with it.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parquetry.dataset import Dataset
from parquetry.dataset.indexspill import PairSink
from parquetry.dataset.indexstate import IndexState, MergePolicy
from parquetry.dataset.versions import read_pointer
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
def tiny_thresholds(monkeypatch: pytest.MonkeyPatch) -> None:
    """Spill after 4 pairs, pieces of 4 pairs, deltas of more than 2 pairs as pieces (as
    test_index_pieces_attacks.py)."""
    monkeypatch.setitem(PairSink.__init__.__kwdefaults__, "run_pairs", 4)  # type: ignore[index]
    monkeypatch.setitem(PairSink.write.__kwdefaults__, "max_pairs", 4)  # type: ignore[index]
    monkeypatch.setitem(IndexState.encode_sink.__kwdefaults__, "inline_max", 2)  # type: ignore[index]
    monkeypatch.setitem(IndexState.checkpoint.__kwdefaults__, "policy", TINY)  # type: ignore[index]
    return


# -0.0 beside 0.0: the export once wrote them as two rows (kartothek's dict keeps one).
_FLOATS = [0.0, -0.0, 1.5, -2.25, float("nan"), float("inf"), None]
_STRINGS = ["", "a", "é", "zz", "a\x00b", "日本", None]


def _key(v: Any) -> Any:
    """Values as kartothek's dictionary keys compare them: NaN is one key, -0.0 is 0.0."""
    if isinstance(v, float) and math.isnan(v):
        return "NaN"
    if isinstance(v, float) and v == 0:
        return 0.0
    return v


def _exported(store: MemoryStore, ds: Dataset, column: str) -> dict[Any, set[str]]:
    pointer, _, _ = read_pointer(store, ds.uuid)
    table = pq.read_table(pa.BufferReader(store.get(pointer.indices[column])))
    out: dict[Any, set[str]] = {}
    for value, labels in zip(
        table.column(column).to_pylist(), table.column("partition").to_pylist(), strict=True
    ):
        assert _key(value) not in out, f"value {value!r} has two rows"
        out[_key(value)] = set(labels)
    return out


def _brute(store: MemoryStore, ds: Dataset, column: str) -> dict[Any, set[str]]:
    out: dict[Any, set[str]] = defaultdict(set)
    for label, files in ds.document.partitions.items():
        for key in files.values():
            for v in pq.read_table(pa.BufferReader(store.get(key))).column(column).to_pylist():
                if v is not None:
                    out[_key(v)].add(label)
    return dict(out)


def _rows(start: int, values: list[Any], t: pa.DataType) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(range(start, start + len(values)), pa.int64()),
            "k": pa.array(values, t),
        }
    )


@pytest.mark.usefixtures("tiny_thresholds")
@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    kind=st.sampled_from(["float", "string"]),
    batches=st.lists(st.lists(st.integers(0, 6), min_size=1, max_size=6), min_size=2, max_size=6),
    deletes=st.lists(st.integers(0, 40), max_size=4),
)
def test_the_exported_index_equals_the_data(
    kind: str, batches: list[list[int]], deletes: list[int]
) -> None:
    pool, t = (_FLOATS, pa.float64()) if kind == "float" else (_STRINGS, pa.string())
    store = MemoryStore()
    first = [pool[i % len(pool)] for i in batches[0]]
    ds = Dataset.create(store, "x", _rows(0, first, t), secondary_indices=["k"])
    start = len(first)
    for batch in batches[1:]:
        values = [pool[i % len(pool)] for i in batch]
        ds = ds.append(_rows(start, values, t))
        start += len(values)
    if deletes:
        ds = ds.delete_where([[("id", "in", deletes)]])
    ds.checkpoint()
    ds = Dataset.open(store, "x")
    expected = _brute(store, ds, "k")
    assert _exported(store, ds, "k") == expected
    pairs: dict[Any, set[str]] = defaultdict(set)
    got = ds.index_pairs("k")
    for value, label in zip(got.column(0).to_pylist(), got.column(1).to_pylist(), strict=True):
        pairs[_key(value)].add(label)
    assert dict(pairs) == expected
