"""kartothek 5.3.0 next to parquetry's write intents (``<uuid>/_intents/``) and incarnation
markers (``<uuid>/_versions/incarnation-*``): it reads and updates a dataset with a parquetry
write in flight, that write then commits; kartothek's GC deletes in-flight files it does not
know about, and the parquetry commit of them then fails instead of acknowledging."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from kt_harness import Kartothek
from kt_support import frame

from parquetry import Dataset
from parquetry.dataset import write_files
from parquetry.errors import IntentExpired
from parquetry.store import LocalStore

pytestmark = pytest.mark.kartothek


def _table(values: list[int]) -> pa.Table:
    return pa.table({"p": pa.array([v % 2 for v in values], pa.int64()), "v": values})


def _read(kartothek: Kartothek, root: Path) -> list[int]:
    (result,) = kartothek.run(root, [{"op": "read", "uuid": "it", "columns": ["v"]}])
    return sorted(row[0] for row in result["rows"])


def test_kartothek_works_beside_a_parquetry_write_in_flight(
    kartothek: Kartothek, tmp_path: Path
) -> None:
    root = tmp_path / "store"
    store = LocalStore(root)
    Dataset.create(store, "it", _table([1, 2]), partition_on=["p"], secondary_indices=["v"])
    pending = write_files(
        store, "it", _table([10, 11]), partition_on=["p"], secondary_indices=["v"]
    )
    assert list(store.list("it/_intents"))
    results = kartothek.run(
        root,
        [
            {"op": "read", "uuid": "it", "columns": ["v"]},
            {"op": "update", "uuid": "it", "frames": [frame(_table([20]))], "partition_on": ["p"]},
            {"op": "read", "uuid": "it", "columns": ["v"], "predicates": [[["v", "==", 20]]]},
        ],
    )
    assert sorted(r[0] for r in results[0]["rows"]) == [1, 2]
    assert [r[0] for r in results[2]["rows"]] == [20]
    Dataset.commit_files(store, "it", pending)
    assert sorted(Dataset.open(store, "it").read()["v"].to_pylist()) == [1, 2, 10, 11, 20]
    assert _read(kartothek, root) == [1, 2, 10, 11, 20]


def test_kartothek_gc_of_in_flight_files_makes_the_commit_fail(
    kartothek: Kartothek, tmp_path: Path
) -> None:
    root = tmp_path / "store"
    store = LocalStore(root)
    Dataset.create(store, "it", _table([1, 2]), partition_on=["p"])
    pending = write_files(store, "it", _table([10]), partition_on=["p"])
    kartothek.run(root, [{"op": "gc", "uuid": "it"}])
    with pytest.raises(IntentExpired, match="missing"):
        Dataset.commit_files(store, "it", pending)
    assert sorted(Dataset.open(store, "it").read()["v"].to_pylist()) == [1, 2]
    assert _read(kartothek, root) == [1, 2]
