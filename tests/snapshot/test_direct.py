"""Direct writes on stores that cannot stage (no delete or no list): spec 042 needs only
atomic_write for a new dataset. Round trips on every backend, racing writers, a fault at
every store call, repair, and remote-store reading the result."""

from __future__ import annotations

import re
import threading
import uuid
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest
from remote_store import Store as RsStore
from remote_store.backends import LocalBackend
from remote_store.ext.parquet import ParquetDatasetStore as RsPds
from snapshot_helpers import keys_under

from parquetry import (
    AlreadyExists,
    CapabilityNotSupported,
    CommitConflict,
    DatasetIncomplete,
    NotFound,
    ParquetDatasetStore,
    ParquetryError,
)
from parquetry.store import Capability, LocalStore, MemoryStore, Store
from parquetry.testing import FaultyStore, LimitedStore

ALL = frozenset(Capability)
WRITE_ONCE = ALL - {Capability.DELETE}  # an object-lock bucket: put, never delete
UPLOAD_ONLY = ALL - {Capability.LIST}  # a credential that cannot list the bucket
NO_CONDITIONAL = ALL - {Capability.DELETE, Capability.CONDITIONAL_CREATE}
LIMITS = {"write-once": WRITE_ONCE, "upload-only": UPLOAD_ONLY, "no-conditional": NO_CONDITIONAL}

TABLE = pa.table({"id": list(range(7)), "name": [f"n{i}" for i in range(7)]})
PART = re.compile(r"part-\d{5}-[0-9a-f]+-[0-9a-f]{16}\.parquet")


def _stream(table: pa.Table) -> pa.RecordBatchReader:
    return pa.RecordBatchReader.from_batches(table.schema, table.to_batches(max_chunksize=3))


@pytest.mark.parametrize("limit", list(LIMITS), ids=list(LIMITS))
@pytest.mark.parametrize("max_rows", [None, 2], ids=["one-part", "parts"])
@pytest.mark.parametrize("streamed", [False, True], ids=["table", "stream"])
def test_direct_write_round_trips(
    any_store: Store, limit: str, max_rows: int | None, streamed: bool
) -> None:
    store = LimitedStore(any_store, LIMITS[limit])
    pds = ParquetDatasetStore(store, max_rows_per_file=max_rows)
    data = _stream(TABLE) if streamed else TABLE
    manifest = pds.write_dataset(data, "ds/direct", run_id="r1", metadata={"k": "v"})
    assert manifest.row_count == 7
    assert len(manifest.parts) == (1 if max_rows is None else 4)
    assert all(PART.fullmatch(name) for name in manifest.parts)
    assert pds.read_dataset("ds/direct").equals(TABLE)
    assert pds.read_manifest("ds/direct") == manifest
    assert pds.dataset_exists("ds/direct")
    # Exactly the parts, the manifest and the marker: no staging area, no journal.
    expected = sorted(
        [
            *(f"ds/direct/{n}" for n in manifest.parts),
            "ds/direct/_SUCCESS",
            "ds/direct/manifest.json",
        ]
    )
    assert keys_under(any_store, "ds/direct") == expected
    with pytest.raises(AlreadyExists, match="ds/direct"):
        pds.write_dataset(TABLE, "ds/direct")
    # Overwriting needs what this store lacks, and says so before any I/O.
    with pytest.raises(CapabilityNotSupported) as info:
        pds.write_dataset(TABLE, "ds/direct", overwrite=True)
    assert info.value.capability in ("delete", "list")
    assert pds.read_dataset("ds/direct").equals(TABLE)


def test_a_full_store_overwrites_a_direct_dataset(memory_store: Store) -> None:
    ParquetDatasetStore(LimitedStore(memory_store, WRITE_ONCE)).write_dataset(TABLE, "ds")
    full = ParquetDatasetStore(memory_store)
    later = TABLE.slice(0, 2)
    full.write_dataset(later, "ds", overwrite=True)
    assert full.read_dataset("ds").equals(later)
    assert keys_under(memory_store, "ds") == ["ds/_SUCCESS", "ds/data.parquet", "ds/manifest.json"]


def test_remote_store_reads_a_direct_dataset(tmp_path: Path) -> None:
    ours = ParquetDatasetStore(LimitedStore(LocalStore(tmp_path), WRITE_ONCE), max_rows_per_file=3)
    ours.write_dataset(TABLE, "x/direct")
    theirs = RsPds(RsStore(LocalBackend(str(tmp_path))))
    assert theirs.dataset_exists("x/direct")
    assert theirs.read_dataset("x/direct").equals(TABLE)


@pytest.mark.parametrize("limit", ["write-once", "no-conditional"])
def test_racing_direct_writers_never_mix_parts(limit: str) -> None:
    inner = MemoryStore(f"race-{uuid.uuid4().hex}")
    tables = [pa.table({"id": [w] * (w + 1), "w": [f"writer-{w}"] * (w + 1)}) for w in range(8)]
    barrier = threading.Barrier(len(tables))
    results: list[object] = [None] * len(tables)

    def write(w: int) -> None:
        pds = ParquetDatasetStore(LimitedStore(inner, LIMITS[limit]), max_rows_per_file=2)
        barrier.wait()
        try:
            results[w] = pds.write_dataset(tables[w], "ds")
        except (AlreadyExists, CommitConflict) as exc:
            results[w] = exc

    threads = [threading.Thread(target=write, args=(w,)) for w in range(len(tables))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    read = ParquetDatasetStore(inner).read_dataset("ds")
    # Whatever interleaving happened, the dataset is exactly one writer's table.
    owners = [w for w, table in enumerate(tables) if read.equals(table)]
    assert len(owners) == 1, read
    committed = [w for w, r in enumerate(results) if not isinstance(r, Exception)]
    if limit == "write-once":  # conditional create: exactly one writer is told it won
        assert committed == owners
    else:  # last manifest wins; the owner was at least told it wrote
        assert owners[0] in committed


def _absent_or(pds: ParquetDatasetStore, key: str) -> pa.Table | None:
    try:
        return pds.read_dataset(key)
    except (DatasetIncomplete, NotFound):
        return None


def _run_every_fault(make: Callable[[], Store], after: bool) -> None:
    probe = FaultyStore(make())
    ParquetDatasetStore(LimitedStore(probe, WRITE_ONCE), max_rows_per_file=2).write_dataset(
        TABLE, "ds"
    )
    total = probe.calls
    assert total > 5
    outcomes = {"absent": 0, "new": 0}
    for fail_on in range(1, total + 2):
        inner = make()
        faulty = FaultyStore(inner, fail_on=fail_on, after=after)
        writer = ParquetDatasetStore(LimitedStore(faulty, WRITE_ONCE), max_rows_per_file=2)
        try:
            writer.write_dataset(TABLE, "ds")
            succeeded = True
        except ParquetryError:
            succeeded = False
        clean = ParquetDatasetStore(LimitedStore(inner, WRITE_ONCE))
        result = _absent_or(clean, "ds")
        if result is None:
            clean.repair("ds")  # publishes a write that committed but was not marked
            result = _absent_or(clean, "ds")
        assert result is None or result.equals(TABLE), f"fault {fail_on}: read {result}"
        assert not (succeeded and result is None), f"fault {fail_on}: success but no dataset"
        outcomes["absent" if result is None else "new"] += 1
        # The next write either finds the dataset or writes it: never a broken state.
        if result is None:
            clean.write_dataset(TABLE.slice(0, 1), "ds")
            assert clean.read_dataset("ds").equals(TABLE.slice(0, 1))
        else:
            with pytest.raises(AlreadyExists):
                clean.write_dataset(TABLE.slice(0, 1), "ds")
    assert outcomes["absent"] > 0
    assert outcomes["new"] > 0


@pytest.mark.parametrize("after", [False, True], ids=["fail", "lost-ack"])
def test_every_fault_of_a_direct_write_memory(after: bool) -> None:
    _run_every_fault(lambda: MemoryStore(f"direct-{uuid.uuid4().hex}"), after)


@pytest.mark.parametrize("after", [False, True], ids=["fail", "lost-ack"])
def test_every_fault_of_a_direct_write_local(tmp_path: Path, after: bool) -> None:
    _run_every_fault(lambda: LocalStore(tmp_path / uuid.uuid4().hex, fsync=False), after)


def test_repair_publishes_a_committed_write_and_refuses_a_broken_one(memory_store: Store) -> None:
    limited = LimitedStore(memory_store, WRITE_ONCE)
    pds = ParquetDatasetStore(limited, max_rows_per_file=3)
    manifest = pds.write_dataset(TABLE, "ds")
    memory_store.delete("ds/_SUCCESS")  # as if the writer died right after its manifest
    with pytest.raises(DatasetIncomplete):
        pds.read_dataset("ds")
    assert pds.repair("ds") is True
    assert pds.read_dataset("ds").equals(TABLE)
    assert pds.repair("ds") is False
    memory_store.delete("ds/_SUCCESS")
    memory_store.delete(f"ds/{manifest.parts[1]}")
    with pytest.raises(DatasetIncomplete, match=re.escape(manifest.parts[1])):
        pds.repair("ds")
    with pytest.raises(DatasetIncomplete):  # and a new write does not paper over it
        pds.write_dataset(TABLE, "ds")
