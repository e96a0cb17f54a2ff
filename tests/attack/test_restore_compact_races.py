"""Restore, compaction, appends, checkpoints and garbage collection (retention 0) racing in
threads on one local dataset with a secondary index. Oracle, version by version (for the
versions GC left): a compaction holds exactly the rows of its parent, a restore exactly the
rows of the version it restored, an append its parent's rows plus its batch; no row id
appears twice; the newest index equals one rebuilt from the data. Every failure is a
ParquetryError other than MetadataCorrupted (GC is not damage)."""

from __future__ import annotations

import datetime as dt
import random
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from parquetry.dataset import Dataset
from parquetry.dataset.gc import garbage_collect
from parquetry.errors import MetadataCorrupted, ParquetryError, VersionExpired
from parquetry.store import LocalStore, MemoryStore, PutMode
from parquetry.store.base import ObjectMeta
from parquetry.store.wrappers import WrapperStore


def _batch(start: int, n: int) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table(
        {
            "p": pa.array([i % 3 for i in ids], pa.int64()),
            "id": pa.array(ids, pa.int64()),
            "k": pa.array([i % 11 for i in ids], pa.int64()),
        }
    )


def _rows(ds: Dataset) -> Counter[tuple[Any, ...]]:
    t = ds.read(columns=["p", "id", "k"])
    return Counter(zip(*(t.column(c).to_pylist() for c in ("p", "id", "k")), strict=True))


def _open(store: LocalStore, version: int) -> Dataset | None:
    try:
        return Dataset.open(store, "ds", version=version)
    except VersionExpired:
        return None


def test_restore_compact_append_and_gc_racing_keep_every_version_exact(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    Dataset.create(store, "ds", _batch(0, 12), partition_on=["p"], secondary_indices=["k"])
    batches: dict[int, pa.Table] = {}
    failures: list[BaseException] = []
    errors: Counter[str] = Counter()
    lock = threading.Lock()

    def run(name: str, step: Callable[[int, random.Random], None], n: int) -> None:
        rng = random.Random(name)
        for i in range(n):
            try:
                step(i, rng)
            except MetadataCorrupted as exc:
                failures.append(exc)
            except ParquetryError as exc:
                errors[f"{name}: {type(exc).__name__}"] += 1
            except BaseException as exc:
                failures.append(exc)
                return

    def append(i: int, rng: random.Random) -> None:
        batch = _batch(1000 * (i + 1), 4)
        ds = Dataset.open(store, "ds").append(batch)
        with lock:
            batches[ds.version] = batch

    def restore(i: int, rng: random.Random) -> None:
        ds = Dataset.open(store, "ds")
        ds.restore(max(0, ds.version - rng.randint(1, 3)))

    def compact(i: int, rng: random.Random) -> None:
        Dataset.open(store, "ds").compact()

    def gc(i: int, rng: random.Random) -> None:
        ds = Dataset.open(store, "ds")
        if i % 2:
            ds.checkpoint()
        ds.garbage_collect(retention=0)

    threads = [
        threading.Thread(target=run, args=("append", append, 8)),
        threading.Thread(target=run, args=("restore", restore, 5)),
        threading.Thread(target=run, args=("compact", compact, 5)),
        threading.Thread(target=run, args=("gc", gc, 5)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not failures, failures

    newest = Dataset.open(store, "ds")
    checked = 0
    for v in range(1, newest.version + 1):
        ds = _open(store, v)
        parent = _open(store, v - 1)
        if ds is None:
            continue
        rows = _rows(ds)
        assert max(Counter(i for _, i, _ in rows.elements()).values(), default=1) == 1, v
        info = ds.info
        assert info is not None
        if info.operation == "restore":
            target = _open(store, int(info.parameters["version"]))
            if target is not None:
                assert rows == _rows(target), f"restore {v}"
                checked += 1
        if parent is None:
            continue
        if info.operation == "compact":
            assert rows == _rows(parent), f"compact {v}"
            checked += 1
        elif info.operation == "append":
            added = batches[v]
            want = _rows(parent) + Counter(
                zip(*(added.column(c).to_pylist() for c in ("p", "id", "k")), strict=True)
            )
            assert rows == want, f"append {v}"
            checked += 1
    assert checked, "no version left to check"
    pairs = newest.index_pairs("k")
    got = set(
        zip(pairs.column("value").to_pylist(), pairs.column("label").to_pylist(), strict=True)
    )
    want: set[tuple[Any, str]] = set()
    for planned in newest.plan(None).files:
        values = pc.unique(newest.read_file(planned, ["k"]).column("k"))
        want |= {(v, planned.label) for v in values.to_pylist()}
    assert got == want


class _GCAfterIntent(WrapperStore):
    """Runs one GC (retention 0) right after the restore wrote its intent."""

    def __init__(self, inner: MemoryStore) -> None:
        super().__init__(inner)
        self.ran = False

    def _put(
        self, key: str, data: bytes | memoryview, mode: PutMode, expected: str | None
    ) -> ObjectMeta:
        meta = super()._put(key, data, mode, expected)
        if "/_intents/" in key and not self.ran:
            self.ran = True
            garbage_collect(self.inner, "ds", retention=dt.timedelta(0))
        return meta


def test_a_restore_whose_target_gc_expires_meanwhile_says_it_expired() -> None:
    # It raised the generic DatasetNotFound, which a caller cannot tell from a dataset that
    # does not exist; VersionExpired (its subclass) is what reads of an expired version say.
    store = MemoryStore()
    Dataset.create(store, "ds", _batch(0, 3)).append(_batch(10, 3))
    racing = _GCAfterIntent(store)
    with pytest.raises(VersionExpired, match="expired it while the restore ran"):
        Dataset.open(racing, "ds").restore(0)
    assert racing.ran
    assert Dataset.open(store, "ds").version == 1
