"""A multi-bin compaction (bins in flight) racing appends, delete_where and GC
(retention 0) in another thread on a LocalStore: whatever commits, the dataset then reads
exactly the rows of the appends that succeeded minus the deleted ones, the index agrees
with a scan, and a failed compaction is a CommitConflict (BaseCollected included), never
a raw or corruption error."""

from __future__ import annotations

import threading
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from parquetry.dataset import Dataset
from parquetry.errors import CommitConflict
from parquetry.store import LocalStore


def _chunk(start: int, n: int) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table(
        {
            "p": pa.array([i % 2 for i in ids], pa.int64()),
            "id": pa.array(ids, pa.int64()),
            "tag": [f"t{i % 5}" for i in ids],
        }
    )


def _writer(store: LocalStore, base: int, expected: set[int], errors: list[BaseException]) -> None:
    """Appends, deletes (run again on a CommitConflict: a compaction rewrote its files)
    and GC with retention 0."""
    try:
        for j in range(4):
            Dataset.open(store, "c").append(_chunk(base + 10 * j, 10))
            expected.update(range(base + 10 * j, base + 10 * j + 10))
            low = 30 * j
            for _ in range(20):
                try:
                    Dataset.open(store, "c").delete_where(
                        [[("id", ">=", low), ("id", "<", low + 5)]]
                    )
                    break
                except CommitConflict:
                    continue
            else:
                raise AssertionError("delete_where never committed")
            expected.difference_update(range(low, low + 5))
            Dataset.open(store, "c").garbage_collect(retention=0)
    except BaseException as exc:  # reported by the test
        errors.append(exc)


def test_compaction_racing_appends_deletes_and_gc(tmp_path: Path) -> None:
    for round_ in range(3):
        store = LocalStore(tmp_path / f"r{round_}")
        ds = Dataset.create(
            store, "c", _chunk(0, 30), partition_on=["p"], secondary_indices=["tag"]
        )
        for i in range(1, 6):
            ds = ds.append(_chunk(i * 30, 30))
        expected = set(range(180))
        target = 2 * max(f.size or 0 for f in ds.plan().files) + 1
        errors: list[BaseException] = []

        t = threading.Thread(target=_writer, args=(store, 1000 + 40 * round_, expected, errors))
        t.start()
        outcomes = []
        for _ in range(3):
            try:
                Dataset.open(store, "c").compact(target_file_size=target)
                outcomes.append("ok")
            except CommitConflict as exc:
                outcomes.append(type(exc).__name__)
        t.join(60)
        assert not errors, errors
        now = Dataset.open(store, "c")
        ids = now.read().column("id").to_pylist()
        assert sorted(ids) == sorted(expected), outcomes
        oracle = set()
        for f in now.plan().files:
            values = pc.unique(now.read_file(f, columns=["tag"]).column("tag")).drop_null()
            oracle |= {(v, f.label) for v in values.to_pylist()}
        pairs = now.index_pairs("tag")
        assert (
            set(
                zip(
                    pairs.column("value").to_pylist(),
                    pairs.column("label").to_pylist(),
                    strict=True,
                )
            )
            == oracle
        )
        now.garbage_collect(retention=0)
        assert sorted(Dataset.open(store, "c").read().column("id").to_pylist()) == sorted(expected)
