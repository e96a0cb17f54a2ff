"""Readers of a version that garbage collection (retention 0) expires under them: a read gets
its version's rows exactly or a clear error saying the version expired, never fewer rows and
never a claim of corruption. A version whose index had pieces (past 512 pairs at a
checkpoint) failed with MetadataCorrupted ("index piece ... is missing") when read with a
predicate on the indexed column (and so did ``plan``, ``index_pairs`` and row operations on
the stale handle): GC had collected the pieces with the version, which is not damage."""

from __future__ import annotations

import random
import threading
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest

from parquetry.dataset import Dataset
from parquetry.dataset.staleread import BaseCollected
from parquetry.errors import MetadataCorrupted, ParquetryError, VersionExpired
from parquetry.store import LocalStore, MemoryStore


def _rows(start: int, n: int) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table(
        {
            "p": pa.array([i % 2 for i in ids], pa.int64()),
            "id": pa.array(ids, pa.int64()),
            "k": pa.array([i % 700 for i in ids], pa.int64()),
        }
    )


def _stale_with_pieces() -> tuple[Dataset, Dataset]:
    """(a handle on a version whose index has pieces, the newest version after GC)."""
    store = MemoryStore()
    # 700 distinct keys per partition file: the checkpoint writes the index as a piece.
    ds = Dataset.create(store, "ds", _rows(0, 2), partition_on=["p"], secondary_indices=["k"])
    ds.append(_rows(2, 1400)).checkpoint()
    old = Dataset.open(store, "ds")
    assert old.document.index_states["k"].pieces, "the index should have pieces"
    new = old.update_where([[("k", "==", 3)]], {"k": 4}).compact().checkpoint()
    new.garbage_collect(retention=0)
    return old, Dataset.open(store, "ds")


def test_a_stale_indexed_read_says_the_version_expired() -> None:
    old, new = _stale_with_pieces()
    assert new.read(predicates=[[("k", "==", 4)]]).num_rows == 4
    for call in (
        lambda: old.read(predicates=[[("k", "==", 3)]]),
        lambda: old.read(predicates=[[("k", "in", [3, 5])]]),
        lambda: list(old.scan(predicates=[[("k", "==", 3)]])),
        lambda: old.plan([[("k", "==", 3)]]),
        lambda: old.index_pairs("k"),
    ):
        with pytest.raises(VersionExpired, match=r"garbage collected.*index piece"):
            call()
    # A row operation's base expired: a conflict (tests/dataset/test_stale_base_ops.py).
    with pytest.raises(BaseCollected, match=r"index piece.*garbage collected"):
        old.delete_where([[("k", "==", 3)]])
    assert Dataset.open(new.store, "ds").version == new.version  # nothing committed


def test_a_missing_piece_the_newest_version_needs_is_still_corruption() -> None:
    _, new = _stale_with_pieces()
    new = Dataset.open(new.store, "ds")
    piece = next(iter(new.document.index_states["k"].pieces))
    new.store.delete(piece.key)
    with pytest.raises(MetadataCorrupted, match="missing"):
        Dataset.open(new.store, "ds").read(predicates=[[("k", "==", 5)]])


def test_readers_racing_writers_and_gc_get_their_rows_or_a_clear_error(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    ds = Dataset.create(store, "ds", _rows(0, 40), partition_on=["p"], secondary_indices=["k"])
    expected: dict[int, tuple[int, int]] = {}

    def record(d: Dataset) -> None:
        table = d.read()
        expected[d.version] = (table.num_rows, table.column("k").to_pylist().count(3))

    record(ds)
    stop = threading.Event()
    seen: list[tuple[int, int, int]] = []
    errors: Counter[str] = Counter()
    raw: list[BaseException] = []
    rng = random.Random(9)

    def writer() -> None:
        d = ds
        try:
            for n in range(1, 16):
                op = n % 5
                if op == 0:
                    d = d.append(_rows(1000 * n, 20))
                elif op == 1:
                    d = d.update_where([[("k", "==", n % 40)]], {"k": 3})
                elif op == 2:
                    d = d.compact()
                elif op == 3:
                    d = d.delete_where([[("k", "==", 3)], [("id", "<", n)]])
                else:
                    d = d.checkpoint()
                record(d)
                d.garbage_collect(retention=0)
        except BaseException as exc:
            raw.append(exc)
        finally:
            stop.set()

    def reader() -> None:
        while not stop.is_set():
            try:
                r = Dataset.open(store, "ds")
                full = r.read()
                hits = r.read(predicates=[[("k", "==", 3)]])
                seen.append((r.version, full.num_rows, hits.num_rows))
            except ParquetryError as exc:
                errors[type(exc).__name__] += 1
                if not isinstance(exc, VersionExpired):
                    raw.append(exc)  # e.g. MetadataCorrupted: GC is not damage
                    return
            except BaseException as exc:
                raw.append(exc)
                return
            if rng.random() < 0.3:
                stop.wait(0.001)

    threads = [threading.Thread(target=writer)] + [
        threading.Thread(target=reader) for _ in range(2)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not raw, raw
    assert seen
    for version, rows, hits in seen:
        assert (rows, hits) == expected[version], (version, rows, hits, expected[version])
