"""Reads of a version garbage collection expired: ``read_file`` and ``to_pyarrow_dataset``
raise VersionExpired naming the version (or file), on every store, never a raw pyarrow,
OSError or FileNotFoundError; a file the newest version needs stays MetadataCorrupted."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from parquetry.dataset import Dataset
from parquetry.dataset.gc import garbage_collect
from parquetry.errors import MetadataCorrupted, ParquetryError, VersionExpired
from parquetry.store import Store


def test_reads_of_a_collected_version_are_expired(any_store: Store) -> None:
    store = any_store
    old = Dataset.create(store, "ds", pa.table({"p": [1, 2], "a": [1, 2]}), partition_on=["p"])
    planned = {f.label.split("/")[0]: f for f in old.plan(None).files}
    # Version 1 replaces p=1; GC with retention 0 expires version 0 and collects its file.
    Dataset.open(store, "ds").update(pa.table({"p": [1], "a": [5]}), delete_scope=[{"p": 1}])
    report = garbage_collect(store, "ds", retention=dt.timedelta(0))
    assert planned["p=1"].key in report.deleted

    with pytest.raises(VersionExpired, match="version 0") as info:
        old.read_file(planned["p=1"])
    assert info.value.key == planned["p=1"].key
    with pytest.raises(VersionExpired, match="version 0 was garbage collected"):
        old.to_pyarrow_dataset()
    # The newest version reads through both.
    new = Dataset.open(store, "ds")
    assert sorted(new.to_pyarrow_dataset().to_table().column("a").to_pylist()) == [2, 5]
    assert [r["a"] for r in new.read_file(planned["p=2"]).to_pylist()] == [2]


def test_a_file_the_newest_version_needs_is_missing_not_expired(any_store: Store) -> None:
    store = any_store
    ds = Dataset.create(store, "ds", pa.table({"p": [1, 2], "a": [1, 2]}), partition_on=["p"])
    victim = ds.plan(None).files[0]
    store.delete(victim.key)
    with pytest.raises(MetadataCorrupted, match=victim.key) as info:
        ds.read_file(victim)
    assert not isinstance(info.value, VersionExpired)
    # The version is live: the pyarrow dataset is handed out; its scan names the file or
    # (local store, read by pyarrow itself) raises pyarrow's FileNotFoundError.
    with pytest.raises((ParquetryError, FileNotFoundError), match=victim.key.split("/")[-1]):
        ds.to_pyarrow_dataset().to_table()
