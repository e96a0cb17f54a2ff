"""The change feed tells an expired version or file from damage by the error's class, never
by its message: a store's NotFound (whatever its text) on a data file is VersionExpired for
the feed, a dataset whose name holds "expired" still gets VersionNotFound."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pytest

from parquetry.dataset import Dataset
from parquetry.dataset.changes import files_of, state_files
from parquetry.dataset.naming import version_key
from parquetry.dataset.read import DataFileMissing
from parquetry.errors import MetadataCorrupted, NotFound, VersionExpired, VersionNotFound
from parquetry.store import MemoryStore
from parquetry.store.wrappers import WrapperStore


class VanishingStore(WrapperStore):
    """Serves the first range read of ``victim`` (its footer), then says it is gone, with
    a message of its own: a file garbage collection deletes while a reader is in it."""

    def __init__(self, inner: MemoryStore, victim: str):
        super().__init__(inner)
        self.victim = victim
        self.reads = 0

    def _seen(self, key: str) -> None:
        if key == self.victim:
            self.reads += 1
            if self.reads > 1:
                raise NotFound("object vanished (a backend's own words)", key=key)

    def _get_range(self, key: str, start: int, end: int) -> bytes:
        self._seen(key)
        return super()._get_range(key, start, end)

    def _get_ranges(self, key: str, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        self._seen(key)
        return super()._get_ranges(key, ranges)


def _big(n: int) -> pa.Table:
    # Larger than the footer read: the rows need range reads of their own.
    rng = np.random.default_rng(7)
    return pa.table({"id": np.arange(n), "x": rng.random(n), "y": rng.random(n)})


def test_a_file_vanishing_under_the_feed_is_expired_not_damaged() -> None:
    inner = MemoryStore()
    Dataset.create(inner, "d", _big(10))
    ds = Dataset.open(inner, "d").append(_big(60_000))
    added = set(files_of(ds.document)) - set(files_of(Dataset.open(inner, "d", version=0).document))
    (label,) = added
    key = files_of(ds.document)[label].key
    store = VanishingStore(inner, key)
    feed = Dataset.open(store, "d").changes(0)
    with pytest.raises(VersionExpired, match=key) as info:
        feed.read_added()
    assert info.value.key == key
    # A plain read of the live version: the file is missing (damage), named, not "unreadable".
    store.reads = 0
    with pytest.raises(DataFileMissing, match=key) as missing:
        Dataset.open(store, "d").read()
    assert isinstance(missing.value, MetadataCorrupted)


def test_a_missing_version_of_a_dataset_named_expired_is_not_found() -> None:
    store = MemoryStore()
    Dataset.create(store, "expired", pa.table({"a": [1]}))
    with pytest.raises(VersionNotFound, match="no version 7"):
        state_files(store, "expired", 7)
    Dataset.open(store, "expired").append(pa.table({"a": [2]}))
    store.delete(version_key("expired", 1))
    with pytest.raises(VersionNotFound):
        state_files(store, "expired", 1)
