"""Format-2 secondary indices wired into commits: deltas per entry, never a rewrite.

The oracle of every lookup is the data itself: the labels a ``c == v`` plan selects must be
exactly the files that hold ``v`` (read back whole).
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import given, settings
from hypothesis import strategies as st

from parquetry.dataset import Dataset
from parquetry.store import MemoryStore
from parquetry.testing import CountingStore


def _oracle(ds: Dataset) -> dict[object, set[str]]:
    """value -> labels of the files holding it, from the files themselves."""
    out: dict[object, set[str]] = {}
    for f in ds.plan(None).files:
        for v in pc.unique(ds.read_file(f, columns=["c"]).column("c")).to_pylist():
            if v is not None:
                out.setdefault(v, set()).add(f.label)
    return out


def _check_lookups(ds: Dataset, probes: list[int]) -> None:
    want = _oracle(ds)
    for v in sorted(set(probes) | set(list(want)[:20])):
        got = {f.label for f in ds.plan([[("c", "==", v)]]).files}
        assert got == want.get(v, set()), (ds.version, v)
    # The whole index (what kartothek's file is written from) agrees too.
    pairs = ds.index_pairs("c")
    whole: dict[object, set[str]] = {}
    for v, lbl in zip(
        pairs.column("value").to_pylist(), pairs.column("label").to_pylist(), strict=True
    ):
        whole.setdefault(v, set()).add(lbl)
    assert whole == want


def _rows(start: int, n: int, p: int) -> pa.Table:
    return pa.table({"p": [p] * n, "c": list(range(start, start + n))})


def test_lookups_stay_exact_through_every_kind_of_commit() -> None:
    store = MemoryStore()
    ds = Dataset.create(store, "ox", _rows(0, 30, 0), partition_on=["p"], secondary_indices=["c"])
    for i in range(1, 6):  # inline deltas in the head's tail
        ds = ds.append(pa.table({"p": [i % 3], "c": [5 * i]}))
    _check_lookups(ds, [0, 5, 10, 25, 29, 99])
    ds = ds.update(delete_scope=[{"c": 5}])  # removes the partitions holding c == 5
    _check_lookups(ds, [5, 10, 0])
    ds = ds.append(pa.table({"p": [1, 1], "c": [5, 7]}))
    ds = ds.replace_where([[("p", "==", 1)]], pa.table({"p": [1], "c": [1000]}))
    _check_lookups(ds, [5, 7, 1000])
    v_before = ds.version
    # Removing every partition: the entry empties every index (replace_all).
    ds = ds.update(pa.table({"p": [7, 8], "c": [1, 2]}), delete_scope=[{"p": p} for p in range(3)])
    assert ds.info is not None
    assert ds.info.files_removed > 0
    _check_lookups(ds, [1, 2, 5, 1000])
    ds = ds.restore(v_before)
    _check_lookups(ds, [1, 5, 7, 1000])
    ds = ds.build_index("c")
    _check_lookups(ds, [1, 5, 7, 1000])
    again = Dataset.open(store, "ox")
    _check_lookups(again, [1, 5, 7, 1000])
    # An old version replays from its checkpoint and entries with its own index.
    old = Dataset.open(store, "ox", version=3)
    _check_lookups(old, [5, 10, 15])


def test_many_appends_then_checkpoint_keep_lookups_exact() -> None:
    store = MemoryStore()
    ds = Dataset.create(store, "ap", _rows(0, 50, 0), partition_on=["p"], secondary_indices=["c"])
    for i in range(101):  # passes a checkpoint (every 100 entries)
        ds = ds.append(pa.table({"p": [i % 4], "c": [i % 60]}))
    _check_lookups(Dataset.open(store, "ap"), [0, 1, 59, 42, 77])


def _big(store: CountingStore | MemoryStore, uuid: str, n: int) -> Dataset:
    table = pa.table({"p": [i % 20 for i in range(n)], "c": list(range(n))})
    return Dataset.create(store, uuid, table, partition_on=["p"], secondary_indices=["c"])


def test_one_row_append_writes_no_index_bytes_whatever_the_index_size() -> None:
    """A 1-row append writes an entry with an inline delta and the head: neither the index
    pieces nor a kartothek index file, so its bytes do not depend on the index size."""
    written = {}
    for n in (200_000, 400_000):
        inner = MemoryStore()
        _big(inner, "big", n)
        store = CountingStore(inner)
        ds = Dataset.open(store, "big")
        store.reset()
        ds = ds.append(pa.table({"p": [3], "c": [n + 7]}))
        keys = [k for kind, k in store.log if kind.startswith("put")]
        assert not [k for k in keys if "/indices/" in k or "/_indices/" in k], keys
        # The head is rewritten whole: it holds the index footers (~230 bytes per row
        # group of 32,768 pairs, to plan a lookup with no extra GET), capped by the
        # 64 KiB root inline limit. Everything else must not depend on the index.
        head = len(inner.get("big/_head.json"))
        assert head <= 64 * 1024 + 16 * 1024
        written[n] = store.bytes_written - head
        print(n, "values: 1-row append wrote", store.bytes_written, "bytes in",
              len(keys), "puts; head", head)  # fmt: skip
        assert {f.label for f in ds.plan([[("c", "==", n + 7)]]).files} == {
            f.label for f in ds.plan(None).files if f.label.startswith("p=3/") and f.rows == 1
        }
    # The same writes (data file, entry, head) for both sizes, apart from a few digits.
    assert abs(written[200_000] - written[400_000]) < 256, written


def test_gc_keeps_pieces_of_retained_versions_and_collects_the_others() -> None:
    import datetime as dt

    from parquetry.dataset.gc import garbage_collect

    store = MemoryStore()
    ds = Dataset.create(store, "gx", _rows(0, 10, 0), partition_on=["p"], secondary_indices=["c"])
    ds = ds.append(_rows(100, 12_000, 1))  # > 10,000 pairs: the delta is a piece
    (old_piece,) = [m.key for m in store.list("gx/_indices")]
    # Removing every partition resets the index: nothing newer needs the piece.
    ds = ds.update(_rows(50_000, 11_000, 2), delete_scope=[{"p": 0}, {"p": 1}])
    pieces = {m.key for m in store.list("gx/_indices")}
    (new_piece,) = pieces - {old_piece}
    # The pointer (above 24 KiB) names an older version, which GC keeps while it does: a
    # checkpoint moves it to the newest one.
    Dataset.open(store, "gx").checkpoint()
    later = dt.datetime.now(dt.UTC) + dt.timedelta(days=2)
    report = garbage_collect(store, "gx", retention=0, now=later)
    assert old_piece in report.deleted
    assert {m.key for m in store.list("gx/_indices")} == {new_piece}
    again = Dataset.open(store, "gx")
    _check_lookups(again, [50_000, 55_555, 100, 5])
    # The pointer's kartothek index file survives; superseded ones are collected.
    from parquetry.dataset.versions import read_pointer

    named = set(read_pointer(store, "gx")[0].indices.values())
    assert {m.key for m in store.list("gx/indices")} == named


def test_a_failed_commit_leaves_its_index_piece_to_gc() -> None:
    """A delta written as a piece before the commit point stays when the commit fails (a
    piece is content-addressed: the same key may be a committed version's, see
    test_gc_pieces.py); no version names it, and GC deletes it once the lease is over."""
    import datetime as dt
    from typing import ClassVar

    import pytest

    from parquetry.errors import CommitConflict
    from parquetry.store import ObjectMeta, PutMode
    from parquetry.store.wrappers import WrapperStore

    class RivalFirst(WrapperStore):
        done = False
        pieces: ClassVar[list[str]] = []

        def _put(
            self, key: str, data: bytes | memoryview, mode: PutMode, expected: str | None
        ) -> ObjectMeta:
            if "/_indices/" in key:
                self.pieces.append(key)
            if mode is PutMode.CREATE and "/_versions/" in key and not self.done:
                self.done = True  # a rival adds a partition the delete_scope selects
                Dataset.open(self.inner, "fx").append(pa.table({"p": [0], "c": [-1]}))
            return super()._put(key, data, mode, expected)

    store = MemoryStore()
    Dataset.create(store, "fx", _rows(0, 10, 0), partition_on=["p"], secondary_indices=["c"])
    racing = RivalFirst(store)
    with pytest.raises(CommitConflict):
        Dataset.open(racing, "fx").update(_rows(100, 12_000, 1), delete_scope=[{"p": 0}])
    assert racing.pieces  # the 12,000-pair delta was written as a piece ...
    assert {m.key for m in store.list("fx/_indices")} == set(racing.pieces)  # ... left
    _check_lookups(Dataset.open(store, "fx"), [-1, 0, 100])
    from parquetry.dataset.gc import garbage_collect

    garbage_collect(store, "fx", retention=dt.timedelta(days=1))
    assert {m.key for m in store.list("fx/_indices")} == set(racing.pieces), "young: kept"
    later = dt.datetime.now(dt.UTC) + dt.timedelta(hours=2)
    garbage_collect(store, "fx", retention=dt.timedelta(days=1), now=later)
    assert list(store.list("fx/_indices")) == [], "... and collected by GC"
    _check_lookups(Dataset.open(store, "fx"), [-1, 0, 100])


_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(0, 3), st.lists(st.integers(0, 9), min_size=1)),
        st.tuples(st.just("delete"), st.integers(0, 9), st.just([])),
        st.tuples(st.just("replace_p"), st.integers(0, 3), st.lists(st.integers(0, 9), min_size=1)),
        st.tuples(st.just("restore"), st.integers(0, 6), st.just([])),
        st.tuples(st.just("build"), st.just(0), st.just([])),
    ),
    min_size=1,
    max_size=6,
)


@settings(max_examples=25, deadline=None)
@given(ops=_OPS)
def test_random_commits_keep_every_lookup_exact(ops: list[tuple[str, int, list[int]]]) -> None:
    store = MemoryStore()
    ds = Dataset.create(
        store,
        "hx",
        pa.table({"p": [0, 1], "c": [0, 1]}),
        partition_on=["p"],
        secondary_indices=["c"],
    )
    for op, x, values in ops:
        if op == "append":
            ds = ds.append(pa.table({"p": [x] * len(values), "c": values}))
        elif op == "delete":
            ds = ds.update(delete_scope=[{"c": x}])
        elif op == "replace_p":
            ds = ds.replace_where(
                [[("p", "==", x)]], pa.table({"p": [x] * len(values), "c": values})
            )
        elif op == "restore":
            ds = ds.restore(min(x, ds.version))
        else:
            ds = ds.build_index("c")
        _check_lookups(ds, list(range(10)))
    _check_lookups(Dataset.open(store, "hx"), list(range(10)))
