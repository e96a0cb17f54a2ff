"""Content-addressed index pieces (``<uuid>/_indices/<col>/<sha>.parquet``): a failed
commit's cleanup never deletes one a committed version references, and garbage collection
deletes those only expired versions referenced (found from the metadata)."""

from __future__ import annotations

import datetime as dt
import uuid as uuid_module

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parquetry import Dataset
from parquetry.dataset import write_files
from parquetry.dataset.gc import garbage_collect
from parquetry.errors import ParquetryError
from parquetry.store import MemoryStore, Store
from parquetry.testing import FaultyStore
from parquetry.testing.stores import KINDS

ROWS = 10_050  # more (value, label) pairs than an entry keeps inline: the index is a piece


def _table(first: int, n: int) -> pa.Table:
    return pa.table({"p": ["a"] * n, "id": pa.array(range(first, first + n), pa.int64())})


def _pieces(store: Store, uuid: str) -> set[str]:
    return {m.key for m in store.list(f"{uuid}/_indices/")}


def _lookups(store: Store, version: int | None = None) -> list[int]:
    ds = Dataset.open(store, "g", version=version)
    return [
        *ds.read(predicates=[[("id", "==", 7)]]).column("id").to_pylist(),
        *ds.read(predicates=[[("id", "==", ROWS - 1)]]).column("id").to_pylist(),
    ]


def _setup() -> MemoryStore:
    store = MemoryStore(uuid_module.uuid4().hex)
    Dataset.create(store, "g", _table(0, ROWS), partition_on=["p"], secondary_indices=["id"])
    assert _pieces(store, "g"), "the create wrote its index delta as a piece"
    return store


def test_lost_attempt_keeps_the_piece_committed_versions_share() -> None:
    """A rebuild on a stale version writes the very piece version 0 references (same
    content, same key), loses the race and retries: cleaning up the lost attempt deleted
    the piece versions 0 and 1 still need (lookups failed: "index piece ... is missing")."""
    store = _setup()
    stale = Dataset.open(store, "g")
    Dataset.open(store, "g").append(_table(ROWS, 3))
    stale.build_index("id")
    for v in (0, 1, 2):
        assert _lookups(store, v) == [7, ROWS - 1], v
    # Left to GC: once versions 0 and 1 expire, their piece goes; the rebuilt one stays.
    # (The pointer, larger than 24 KiB, still names version 0, which GC then keeps: a
    # checkpoint moves it to the newest version.)
    assert len(_pieces(store, "g")) == 2
    Dataset.open(store, "g").checkpoint()
    later = dt.datetime.now(dt.UTC) + dt.timedelta(hours=2)
    garbage_collect(store, "g", retention=dt.timedelta(0), now=later)
    assert len(_pieces(store, "g")) == 1
    assert _lookups(store) == [7, ROWS - 1]


@pytest.mark.parametrize("after", [False, True], ids=["fail", "lost-ack"])
def test_failed_rebuild_keeps_the_piece_committed_versions_share(after: bool) -> None:
    """The same piece under a fault at every call of the rebuilding commit: every committed
    version still answers its index lookups, and the dataset opens."""
    counter = FaultyStore(_setup())
    Dataset.open(counter, "g").build_index("id")
    total = counter.calls
    assert total > 3
    failed = 0
    for n in range(1, total + 1):
        store = _setup()
        kinds = ("put",) if after else KINDS
        try:
            faulty = FaultyStore(store, fail_on=n, after=after, kinds=kinds)
            Dataset.open(faulty, "g").build_index("id")
        except ParquetryError:
            failed += 1
        ds = Dataset.open(store, "g")
        assert _lookups(store) == [7, ROWS - 1], n
        for v in ds.versions():
            assert _lookups(store, v.number) == [7, ROWS - 1], (n, v.number)
        assert ds.read().num_rows == ROWS, n
    assert failed


def test_gc_collects_pieces_of_an_index_only_expired_versions_had() -> None:
    """An overwrite without the index leaves its pieces to expired versions only (and to
    the checkpoints before it); GC finds them from the metadata and deletes them."""
    store = _setup()
    # 600 pairs: the checkpoint writes them as a piece of its own, named by no entry.
    ds = Dataset.open(store, "g").append(_table(ROWS, 600)).checkpoint()
    assert len(_pieces(store, "g")) == 2
    fresh = _table(0, 5)
    files = write_files(store, "g", fresh, partition_on=["p"])
    ds = Dataset.commit_files(
        store,
        "g",
        files,
        mode="overwrite",
        schema=fresh.schema,
        partition_on=["p"],
        overwrite_schema=True,
    )
    assert ds.secondary_indices == ()
    ds = ds.append(_table(100, 3)).checkpoint()
    # GC right away (the newest pieces are young: a commit may be about to use them), then
    # once their lease is over, when no version left has an index at all.
    garbage_collect(store, "g", retention=dt.timedelta(0))
    later = dt.datetime.now(dt.UTC) + dt.timedelta(hours=2)
    garbage_collect(store, "g", retention=dt.timedelta(0), now=later)
    assert _pieces(store, "g") == set(), "pieces only expired versions referenced"
    ids = sorted(Dataset.open(store, "g").read().column("id").to_pylist())
    assert ids == [0, 1, 2, 3, 4, 100, 101, 102]


def _named(store: Store, uuid: str) -> set[str]:
    """Pieces something retained names: a retained version's state, a checkpoint root, the
    head's root (readers of the newest version start from it, while the checkpoint GC wrote
    may hold other pieces)."""
    from parquetry.dataset.checkpoint import checkpoint_key, decode_root, list_checkpoints
    from parquetry.dataset.gc import _head_keys, referenced_keys
    from parquetry.dataset.indexwire import root_piece_keys
    from parquetry.dataset.versions import load_version

    keys: set[str] = set()
    for v in Dataset.open(store, uuid).versions():
        keys |= referenced_keys(load_version(store, uuid, v.number))
    for c in list_checkpoints(store, uuid):
        key = checkpoint_key(uuid, c)
        keys |= root_piece_keys(decode_root(store.get(key), key).get("indices"))
    keys |= _head_keys(store, uuid)
    return {k for k in keys if "/_indices/" in k}


OPS = st.lists(
    st.sampled_from(["append", "checkpoint", "rebuild", "overwrite", "reindex", "gc"]),
    min_size=2,
    max_size=6,
)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(OPS)
def test_pieces_property(ops: list[str]) -> None:
    """Any sequence of appends (600-pair deltas: the checkpoint writes them as pieces),
    checkpoints, rebuilds (on a stale version too), overwrites dropping the index, index
    builds and GCs: every retained version answers index lookups like a full scan (no
    piece a committed version names is ever deleted), and after a GC past every lease no
    piece is left that nothing retained names."""
    store = MemoryStore(uuid_module.uuid4().hex)
    Dataset.create(store, "g", _table(0, 600), partition_on=["p"], secondary_indices=["id"])
    nxt = 600
    for op in ops:
        ds = Dataset.open(store, "g")
        if op == "append":
            ds.append(_table(nxt, 600))
            nxt += 600
        elif op == "checkpoint":
            ds.checkpoint()
        elif op == "rebuild" and ds.secondary_indices:
            stale = Dataset.open(store, "g")
            ds.append(_table(nxt, 3))  # the rebuild loses a race and retries
            nxt += 3
            stale.build_index("id")
        elif op == "overwrite":
            fresh = _table(nxt, 5)
            nxt += 5
            files = write_files(store, "g", fresh, partition_on=["p"])
            Dataset.commit_files(
                store,
                "g",
                files,
                mode="overwrite",
                schema=fresh.schema,
                partition_on=["p"],
                overwrite_schema=True,
            )
        elif op == "reindex" and not ds.secondary_indices:
            ds.build_index("id")
        elif op == "gc":
            # At once (the newest pieces are young), then past every lease.
            garbage_collect(store, "g", retention=dt.timedelta(0))
            later = dt.datetime.now(dt.UTC) + dt.timedelta(hours=2)
            garbage_collect(store, "g", retention=dt.timedelta(0), now=later)
            assert _pieces(store, "g") <= _named(store, "g"), "unnamed pieces left"
        for v in Dataset.open(store, "g").versions():
            old = Dataset.open(store, "g", version=v.number)
            ids = old.read().column("id").to_pylist()
            for x in (ids[0], ids[-1], -1):
                got = old.read(predicates=[[("id", "==", x)]]).column("id").to_pylist()
                assert got == [i for i in ids if i == x], (op, v.number, x)
