"""A snapshot touches only its own objects (issue 11): reserved names are refused in every
segment of a key, deletion spares datasets stored below the key, and a switch abandoned by
a killed writer is completed once its lease runs out, never before."""

from __future__ import annotations

import pyarrow as pa
import pytest
from snapshot_helpers import keys_under

from parquetry import DatasetIncomplete, InvalidKey, ParquetDatasetStore
from parquetry.errors import InvalidArgument
from parquetry.store import ObjectMeta, PutMode, Store
from parquetry.testing import FaultyStore

OLD = pa.table({"i": [1, 2, 3]})
NEW = pa.table({"i": [9]})


@pytest.mark.parametrize(
    ("key", "segment"),
    [
        ("a/_staging/keep", "_staging"),
        ("_staging/x", "_staging"),
        ("a/_SUCCESS/b", "_SUCCESS"),
        ("a/manifest.json/b", "manifest.json"),
        ("a/_parquetry_switch.json/b", "_parquetry_switch.json"),
        ("a/b/_staging", "_staging"),
    ],
)
def test_reserved_names_refused_in_any_segment(memory_store: Store, key: str, segment: str) -> None:
    pds = ParquetDatasetStore(memory_store)
    for call in (
        lambda: pds.write_dataset(OLD, key),
        lambda: pds.read_dataset(key),
        lambda: pds.repair(key),
        lambda: pds.delete_dataset(key),
        lambda: pds.dataset_exists(key),
    ):
        with pytest.raises(InvalidKey, match="reserved") as info:
            call()
        assert key in str(info.value)
        assert repr(segment) in str(info.value)
    assert keys_under(memory_store, "") == []


def test_delete_spares_datasets_below(memory_store: Store) -> None:
    pds = ParquetDatasetStore(memory_store)
    pds.write_dataset(OLD, "a/child")
    pds.write_dataset(NEW, "a")
    memory_store.put("a/_staging/w/00000.parquet", b"staged")
    pds.delete_dataset("a")
    assert keys_under(memory_store, "a") == sorted(m.key for m in memory_store.list("a/child"))
    assert pds.read_dataset("a/child").equals(OLD)
    with pytest.raises(DatasetIncomplete):
        pds.read_dataset("a")


class Killed(BaseException):
    """Stands for SIGKILL: nothing after it runs, not even the writer's own release."""


class KilledAfterJournal(FaultyStore):
    """The writer dies at its first delete (of ``_SUCCESS``, right after its journal)."""

    def _delete(self, key: str, missing_ok: bool) -> None:
        self.killed = True
        raise Killed(key)

    def _put(
        self, key: str, data: bytes | memoryview, mode: PutMode, expected_version: str | None
    ) -> ObjectMeta:
        if getattr(self, "killed", False):
            raise Killed(key)
        return self.inner._put(key, data, mode, expected_version)


def test_killed_writer_switch_completed_after_its_lease(memory_store: Store) -> None:
    ParquetDatasetStore(memory_store).write_dataset(OLD, "ds")
    with pytest.raises(Killed):
        ParquetDatasetStore(KilledAfterJournal(memory_store)).write_dataset(
            NEW, "ds", overwrite=True
        )
    assert memory_store.exists("ds/_parquetry_switch.json")
    live = ParquetDatasetStore(memory_store)  # default lease: the writer may be alive
    assert live.repair("ds") is False
    assert live.read_dataset("ds").equals(OLD)
    assert memory_store.exists("ds/_parquetry_switch.json")
    expired = ParquetDatasetStore(memory_store, switch_lease=0)
    assert expired.repair("ds") is True
    assert expired.read_dataset("ds").equals(NEW)
    assert keys_under(memory_store, "ds") == ["ds/_SUCCESS", "ds/data.parquet", "ds/manifest.json"]


@pytest.mark.parametrize("option", ["switch_lease", "staging_grace"])
@pytest.mark.parametrize("value", [-1, float("inf"), float("nan"), "60", True])
def test_lease_and_grace_checked(memory_store: Store, option: str, value: object) -> None:
    with pytest.raises(InvalidArgument, match=option):
        ParquetDatasetStore(memory_store, **{option: value})  # type: ignore[arg-type]
