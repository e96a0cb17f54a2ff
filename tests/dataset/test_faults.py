"""Fault injection at every store call of every write path: old version or new, never broken."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pyarrow as pa
import pytest

from parquetry.dataset import Dataset
from parquetry.errors import DatasetNotFound, ParquetryError
from parquetry.store import MemoryStore, Store
from parquetry.testing import FaultyStore
from parquetry.testing.stores import KINDS

BASE = pa.table({"p": ["x", "y", "y"], "c": [1, 2, 3], "v": [1.0, 2.0, 3.0]})
MORE = pa.table({"p": ["y", "z"], "c": [2, 9], "v": [4.0, 5.0]})


def _rows(store: Store) -> list[tuple] | None:
    try:
        table = Dataset.open(store, "f").read()
    except DatasetNotFound:
        return None
    return sorted(
        zip(table["p"].to_pylist(), table["c"].to_pylist(), table["v"].to_pylist(), strict=True)
    )


def _expected(table: pa.Table | None) -> list[tuple] | None:
    if table is None:
        return None
    return sorted(
        zip(table["p"].to_pylist(), table["c"].to_pylist(), table["v"].to_pylist(), strict=True)
    )


def _setup(store: Store, with_base: bool) -> None:
    if with_base:
        ds = Dataset.create(store, "f", BASE, partition_on=["p"], secondary_indices=["c"])
        ds.update(MORE.slice(0, 1), delete_scope=[{"p": "y"}]).update(delete_scope=[{"p": "zz"}])


AFTER_BASE = pa.concat_tables([BASE.slice(0, 1), MORE.slice(0, 1)])

# name -> (needs a base dataset, operation, rows before, rows after)
OPERATIONS: dict[str, tuple[bool, Callable[[Store], object], pa.Table | None, pa.Table]] = {
    "create": (
        False,
        lambda s: Dataset.create(s, "f", BASE, partition_on=["p"], secondary_indices=["c"]),
        None,
        BASE,
    ),
    "append": (
        True,
        lambda s: Dataset.open(s, "f").append(MORE),
        AFTER_BASE,
        pa.concat_tables([AFTER_BASE, MORE]),
    ),
    "update": (
        True,
        lambda s: Dataset.open(s, "f").update(MORE, delete_scope=[{"p": "y"}]),
        AFTER_BASE,
        pa.concat_tables([AFTER_BASE.slice(0, 1), MORE]),
    ),
    "build_index": (True, lambda s: Dataset.open(s, "f").build_index("v"), AFTER_BASE, AFTER_BASE),
    "restore": (True, lambda s: Dataset.open(s, "f").restore(0), AFTER_BASE, BASE),
    "garbage_collect": (
        True,
        lambda s: Dataset.open(s, "f").garbage_collect(retention=0),
        AFTER_BASE,
        AFTER_BASE,
    ),
}


def _count_calls(name: str) -> int:
    needs_base, op, _, _ = OPERATIONS[name]
    inner = MemoryStore(uuid.uuid4().hex)
    _setup(inner, needs_base)
    counter = FaultyStore(inner)
    op(counter)
    return counter.calls


@pytest.mark.parametrize("after", [False, True], ids=["fail", "lost-ack"])
@pytest.mark.parametrize("name", list(OPERATIONS))
def test_every_call_failing_leaves_old_or_new_version(name: str, after: bool) -> None:
    needs_base, op, before, after_rows = OPERATIONS[name]
    total = _count_calls(name)
    assert total > 3
    outcomes = set()
    for n in range(1, total + 1):
        inner = MemoryStore(uuid.uuid4().hex)
        _setup(inner, needs_base)
        kinds = ("put",) if after else KINDS
        faulty = FaultyStore(inner, fail_on=n, after=after, kinds=kinds)
        try:
            op(faulty)
            outcomes.add("ok")
        except ParquetryError:
            outcomes.add("failed")
        got = _rows(inner)
        assert got in (_expected(before), _expected(after_rows)), (name, n)
        if got is not None:  # the dataset stays writable and fully readable after the fault
            ds = Dataset.open(inner, "f")
            assert ds.append(MORE.slice(1, 1)).read().num_rows == len(got) + 1
            for v in ds.versions():
                if name != "garbage_collect":
                    Dataset.open(inner, "f", version=v.number).read()
    assert "failed" in outcomes


def test_repair_moves_the_pointer_to_an_interrupted_commit() -> None:
    import pyarrow as pa

    from parquetry.dataset import Dataset
    from parquetry.dataset.versions import read_pointer
    from parquetry.errors import StoreUnavailable
    from parquetry.store import MemoryStore
    from parquetry.store.base import ObjectMeta, PutMode
    from parquetry.store.wrappers import WrapperStore

    class PointerWritesFail(WrapperStore):
        def _put(
            self, key: str, data: bytes | memoryview, mode: PutMode, expected: str | None
        ) -> ObjectMeta:
            if key.endswith(".by-dataset-metadata.json"):
                raise StoreUnavailable("pointer write refused", key=key)
            return super()._put(key, data, mode, expected)

    store = MemoryStore()
    Dataset.create(store, "r", pa.table({"v": [1, 2]}))
    Dataset.open(PointerWritesFail(store), "r").append(pa.table({"v": [3]}))
    pointer, _, _ = read_pointer(store, "r")
    assert pointer.version is not None
    assert pointer.version.number == 0  # the commit happened, its pointer update did not
    assert Dataset.open(store, "r").read().num_rows == 3  # readers roll forward anyway
    with pytest.raises(StoreUnavailable, match="could not move"):
        Dataset.repair(PointerWritesFail(store), "r")
    assert "moved from version 0 to 1" in Dataset.repair(store, "r")
    pointer, _, _ = read_pointer(store, "r")
    assert pointer.version is not None
    assert pointer.version.number == 1
    assert "nothing to repair" in Dataset.repair(store, "r")
