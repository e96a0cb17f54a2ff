"""Fault injection at every store call of ``write_dataset(overwrite=True)``: afterwards the
dataset reads as exactly the old or the new table, after at most one ``repair()``, and the
next write leaves nothing stale behind."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest
from snapshot_helpers import keys_under

from parquetry import DatasetIncomplete, ParquetDatasetStore, ParquetryError
from parquetry.store import LocalStore, MemoryStore, Store
from parquetry.testing import FaultyStore
from parquetry.testing.stores import KINDS

OLD = pa.table({"id": list(range(5)), "v": ["old"] * 5})
NEW = pa.table({"id": list(range(10, 14)), "v": ["new"] * 4})
LATER = pa.table({"id": [99], "v": ["later"]})


class FaultyMoves(FaultyStore):
    """FaultyStore that also fails the backend's native move (a rename on local disk)."""

    def _move(self, src: str, dst: str) -> None:
        if self.after and self._should_fail("move"):
            self.inner._move(src, dst)
            raise self.error("move", src)
        if not self.after:
            self._check("move", src)
        self.inner._move(src, dst)


class FaultyCopyDelete(FaultyStore):
    """Moves as object stores do them (copy, then delete), each step fault-injected."""

    def _move(self, src: str, dst: str) -> None:
        Store._move(self, src, dst)

    def _copy(self, src: str, dst: str) -> None:
        Store._copy(self, src, dst)


def _count_calls(make: Callable[[], Store], cls: type[FaultyStore], new_rows: int | None) -> int:
    inner = make()
    ParquetDatasetStore(inner, max_rows_per_file=2).write_dataset(OLD, "ds")
    probe = cls(inner, fail_on=None, kinds=(*KINDS, "move"))
    ParquetDatasetStore(probe, max_rows_per_file=new_rows).write_dataset(NEW, "ds", overwrite=True)
    return probe.calls


def _run_every_fault(
    make: Callable[[], Store], cls: type[FaultyStore], after: bool, new_rows: int | None
) -> None:
    total = _count_calls(make, cls, new_rows)
    assert total > 10
    outcomes = {"old": 0, "new": 0}
    for fail_on in range(1, total + 2):
        inner = make()
        ParquetDatasetStore(inner, max_rows_per_file=2).write_dataset(OLD, "ds")
        faulty = cls(inner, fail_on=fail_on, kinds=(*KINDS, "move"), after=after)
        writer = ParquetDatasetStore(faulty, max_rows_per_file=new_rows)
        try:
            writer.write_dataset(NEW, "ds", overwrite=True)
            succeeded = True
        except ParquetryError:
            succeeded = False
        clean = ParquetDatasetStore(inner)
        try:
            result = clean.read_dataset("ds")
        except DatasetIncomplete:
            assert clean.repair("ds"), f"fault {fail_on}: incomplete but nothing to repair"
            result = clean.read_dataset("ds")
        label = "new" if result.equals(NEW) else "old" if result.equals(OLD) else None
        assert label is not None, f"fault {fail_on}: read neither old nor new: {result}"
        assert not (succeeded and label == "old"), f"fault {fail_on}: success but old data"
        outcomes[label] += 1
        # The next write works and leaves exactly one clean dataset.
        clean.write_dataset(LATER, "ds", overwrite=True)
        assert clean.read_dataset("ds").equals(LATER)
        assert keys_under(inner, "ds") == ["ds/_SUCCESS", "ds/data.parquet", "ds/manifest.json"]
    assert outcomes["old"] > 0
    assert outcomes["new"] > 0


def _memory() -> Store:
    return MemoryStore(f"faults-{uuid.uuid4().hex}")


@pytest.mark.parametrize("new_rows", [3, None], ids=["multi", "single"])
@pytest.mark.parametrize("cls", [FaultyMoves, FaultyCopyDelete], ids=["rename", "copydel"])
@pytest.mark.parametrize("after", [False, True], ids=["fail", "lost-ack"])
def test_every_fault_memory(cls: type[FaultyStore], after: bool, new_rows: int | None) -> None:
    _run_every_fault(_memory, cls, after, new_rows)


@pytest.mark.parametrize("cls", [FaultyMoves, FaultyCopyDelete], ids=["rename", "copydel"])
@pytest.mark.parametrize("after", [False, True], ids=["fail", "lost-ack"])
def test_every_fault_local(tmp_path: Path, cls: type[FaultyStore], after: bool) -> None:
    def make() -> Store:
        return LocalStore(tmp_path / uuid.uuid4().hex, fsync=False)

    _run_every_fault(make, cls, after, 3)


@pytest.mark.slow
@pytest.mark.s3
@pytest.mark.parametrize("after", [False, True], ids=["fail", "lost-ack"])
def test_every_fault_s3(store_factory: Callable[[str], Store], after: bool) -> None:
    _run_every_fault(lambda: store_factory("s3"), FaultyStore, after, 3)


def test_interrupted_switch_completed_by_next_write(memory_store: Store) -> None:
    ParquetDatasetStore(memory_store, max_rows_per_file=2).write_dataset(OLD, "ds")
    # A write deletes nothing before its journal is written; the first delete is the
    # switch's own (of _SUCCESS): failing it leaves a decided but unfinished switch.
    faulty = FaultyStore(memory_store, fail_on=1, kinds=("delete",))
    with pytest.raises(ParquetryError, match="injected"):
        ParquetDatasetStore(faulty).write_dataset(NEW, "ds", overwrite=True)
    assert memory_store.exists("ds/_parquetry_switch.json")
    pds = ParquetDatasetStore(memory_store)
    assert pds.read_dataset("ds").equals(OLD)  # _SUCCESS still there: the old version
    memory_store.delete("ds/_SUCCESS")  # as if the crash came one step later
    with pytest.raises(DatasetIncomplete, match="repair"):
        pds.read_dataset("ds")
    with pytest.raises(ParquetryError, match="already exists"):
        pds.write_dataset(LATER, "ds")  # rolls the switch forward first, then refuses
    assert pds.read_dataset("ds").equals(NEW)
    assert not memory_store.exists("ds/_parquetry_switch.json")
