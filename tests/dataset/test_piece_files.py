"""File records in index pieces (docs/format.md, "Secondary indices"): an indexed point
lookup plans from the row group it reads, without a segment GET."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parquetry.dataset import Dataset
from parquetry.dataset import head as head_module
from parquetry.dataset.indexpieces import write_piece
from parquetry.dataset.indexstate import IndexState
from parquetry.dataset.piecefiles import decode_record, encode_record
from parquetry.errors import MetadataCorrupted
from parquetry.store import MemoryStore
from parquetry.testing import CountingStore


def _batch(start: int, n: int) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table({"p": ids, "c": [7 * i for i in ids], "v": ids})


def _dataset(n_batches: int = 3, per_batch: int = 1_000) -> MemoryStore:
    """Partitions of one file each, a piece per batch (> 512 tail pairs at a checkpoint)."""
    store = MemoryStore()
    ds = Dataset.create(store, "ds", _batch(0, 10), partition_on=["p"], secondary_indices=["c"])
    for j in range(n_batches):
        ds = ds.append(_batch(10 + j * per_batch, per_batch)).checkpoint()
    return store


def _expected(ds: Dataset, value: int) -> list[tuple[str, str, int | None, int | None]]:
    """The oracle: the full (non-lazy) plan of the catalog, filtered by the index pairs."""
    pairs = ds.index_pairs("c")
    labels = {lbl for v, lbl in zip(*pairs.to_pydict().values(), strict=True) if v == value}
    doc = ds.document
    out = []
    for label in sorted(labels):
        info = doc.files.get(label)
        key = doc.partitions[label][doc.tables[0]]
        out.append((label, key, info.rows if info else None, info.size if info else None))
    return out


def _planned(ds: Dataset, value: int) -> list[tuple[str, str, int | None, int | None]]:
    plan = ds.plan([[("c", "==", value)]])
    return [(f.label, f.key, f.rows, f.size) for f in plan.files]


def test_a_point_lookup_reads_no_segment_and_plans_what_the_catalog_says(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    inner = _dataset()
    pieces = [m.key for m in inner.list("ds/_indices/")]
    assert pieces
    for key in pieces:
        table = pq.read_table(pa.BufferReader(inner.get(key)))
        assert table.column_names == ["c", "partition", "files"], key
    # A root too big for the head (the 100,000-partition case): head, probe, root, piece.
    monkeypatch.setattr(head_module, "ROOT_INLINE_BYTES", 0)
    Dataset.open(inner, "ds").checkpoint()
    store = CountingStore(inner)
    for value in (7 * 5, 7 * 500, 7 * 2_999, 7 * 1_000_000):
        store.reset()
        ds = Dataset.open(store, "ds")
        plan = ds.plan([[("c", "==", value)]])
        assert not [k for k in plan.request_keys if "/_segments/" in k], plan.request_keys
        assert not [k for _, k in store.log if "/_segments/" in k], store.log
        assert plan.requests <= 4, plan.request_keys
        got = [(f.label, f.key, f.rows, f.size) for f in plan.files]
        assert got == _expected(Dataset.open(inner, "ds"), value)
        rows = ds.read(predicates=[[("c", "==", value)]]).column("v").to_pylist()
        assert rows == ([value // 7] if value < 7 * 10_000 else [])


def test_pieces_without_records_still_plan_through_the_segments() -> None:
    """Pieces written before the column existed (or a build_index piece) have no records:
    the plan reads the segment, as before."""
    inner = _dataset(n_batches=1)
    ds = Dataset.open(inner, "ds")
    state = ds.document.index_states["c"]
    bare = write_piece(inner, "ds", "c", state.full(inner).pairs())
    table = pq.read_table(pa.BufferReader(inner.get(bare.key)))
    assert table.column_names == ["c", "partition"]
    old = IndexState(column="c", type=state.type, pieces=(bare,))
    labels, _, files = old.search_files(inner, _lit(ds, 7 * 500))
    assert len(labels) == 1
    assert files == {}
    labels2, _, files2 = state.search_files(inner, _lit(ds, 7 * 500))
    assert labels2 == labels
    assert set(files2) == labels
    (text, piece), *_ = files2.values()
    assert piece in {f.key for f in state.pieces}
    assert text.startswith("[1,")


def _lit(ds: Dataset, value: int):  # type: ignore[no-untyped-def]
    from parquetry.dataset.predicates import validate_predicates

    dnf = validate_predicates([[("c", "==", value)]], ds.schema)
    assert dnf is not None
    return dnf[0][0]


def test_records_round_trip_and_a_bad_record_is_metadata_corrupted() -> None:
    text = encode_record("u", "p=1/a", {"table": "u/table/p=1/a.parquet"}, 3, 40)
    assert text == "[3,40]"
    rec = decode_record("u", "p=1/a", text, ["table"], key="k")
    assert (dict(rec.keys), rec.rows, rec.size) == ({"table": "u/table/p=1/a.parquet"}, 3, 40)
    odd = encode_record("u", "p=1/a", {"table": "elsewhere.parquet"}, 3, 40)
    rec = decode_record("u", "p=1/a", odd, ["table"], key="k")
    assert dict(rec.keys) == {"table": "elsewhere.parquet"}
    for bad in ("", "[1]", "[1,-2]", '[1,2,{"t":3}]', "[true,2]", "{}", "[1,2,3,4]"):
        with pytest.raises(MetadataCorrupted, match="piece-key"):
            decode_record("u", "p=1/a", bad, ["table"], key="piece-key")


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ops=st.lists(
        st.tuples(st.sampled_from(["append", "delete", "checkpoint"]), st.integers(0, 40)),
        min_size=1,
        max_size=8,
    ),
    probes=st.lists(st.integers(0, 660), min_size=1, max_size=5),
)
def test_plans_from_records_match_the_catalog_through_any_commits(
    ops: list[tuple[str, int]], probes: list[int]
) -> None:
    """Appends (a value may land in several partitions), partition deletions (dead labels)
    and checkpoints (merges carry records over): every planned file's key, rows and size
    are what the catalog says, whether they came from a record or a segment."""
    store = MemoryStore()
    ds = Dataset.create(store, "h", _small(0, 0), partition_on=["p"], secondary_indices=["c"])
    for i, (op, x) in enumerate(ops):
        if op == "append":
            ds = ds.append(_small(x % 7, x))
        elif op == "delete":
            ds = ds.update(delete_scope=[{"p": x % 7}]) if x % 7 in _ps(ds) else ds
        else:
            ds = ds.checkpoint()
        if i % 3 == 2:
            ds = Dataset.open(store, "h")
    ds = Dataset.open(store, "h")
    for v in probes:
        assert _planned(ds, v) == _expected(ds, v), v


def _small(p: int, start: int) -> pa.Table:
    # 600 values: a checkpoint turns the tail (> 512 pairs) into a piece with records.
    values = [start + i for i in range(600)]
    return pa.table({"p": [p] * 600, "c": values, "v": list(range(600))})


def _ps(ds: Dataset) -> set[int]:
    return {dict(f.partition)["p"] for f in ds.plan(None).files}


def test_a_bad_record_in_a_piece_fails_the_plan_naming_the_piece() -> None:
    from parquetry.dataset.indices import IndexLookup
    from parquetry.dataset.piecefiles import record_table
    from parquetry.dataset.plan import make_plan

    inner = _dataset(n_batches=1)
    ds = Dataset.open(inner, "ds")
    state = ds.document.index_states["c"]
    pairs = state.full(inner).pairs()
    labels = set(pairs.column("label").to_pylist())
    bad = write_piece(inner, "ds", "c", pairs, record_table(dict.fromkeys(labels, "[1,")))
    lookup = IndexLookup.from_state(inner, IndexState(column="c", type=state.type, pieces=(bad,)))
    dnf = [[_lit(ds, 7 * 500)]]
    with pytest.raises(MetadataCorrupted, match=bad.key):
        make_plan(
            ds.document,
            ds.schema,
            dnf,  # type: ignore[arg-type]
            ds._values_of,
            {"c": lookup},
            version=None,
            requests=0,
            request_keys=(),
        )
