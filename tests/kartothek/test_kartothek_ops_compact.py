"""kartothek 5.3.0 on datasets parquetry compacted, restored or evolved (evolve_schema).

Documented in docs/compatibility.md ("Table operations"): kartothek reads a compacted
dataset (same rows, its index gives the new files) and a restored one; after
``evolve_schema`` (no data file rewritten) it reads the added column as null and the
widened one with the new type, and appends frames in the evolved schema.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from kt_harness import Kartothek

from parquetry import Dataset
from parquetry.store import LocalStore

pytestmark = pytest.mark.kartothek


def _chunk(start: int) -> pa.Table:
    ids = list(range(start, start + 4))
    return pa.table(
        {
            "p": [["a", "b"][i % 2] for i in ids],
            "k": pa.array(ids, pa.int64()),
            "v": pa.array(ids, pa.int32()),
        }
    )


def _rows(result: dict) -> list[dict]:
    return sorted(
        (dict(zip(result["columns"], row, strict=True)) for row in result["rows"]),
        key=lambda r: r["k"],
    )


def test_kartothek_reads_compacted_restored_and_evolved(
    kartothek: Kartothek, tmp_path: Path
) -> None:
    store = LocalStore(tmp_path)
    ds = Dataset.create(store, "ops", _chunk(0), partition_on=["p"], secondary_indices=["k"])
    for i in range(1, 4):
        ds = ds.append(_chunk(4 * i))
    small = ds.version
    ds = ds.compact(target_file_size=1 << 20)
    assert len(ds.plan().files) == 2
    expect = sorted(ds.read().to_pylist(), key=lambda r: r["k"])
    inspect, full, one = kartothek.run(
        tmp_path,
        [
            {"op": "inspect", "uuid": "ops"},
            {"op": "read", "uuid": "ops"},
            {"op": "read", "uuid": "ops", "predicates": [[["k", "==", 9]]]},
        ],
    )
    assert sorted(inspect["partitions"]) == sorted(ds.document.partitions)
    assert _rows(full) == expect
    assert _rows(one) == [r for r in expect if r["k"] == 9]
    assert one["planned_partitions"] == 1  # its index names the compacted file

    ds = ds.restore(small)
    (full,) = kartothek.run(tmp_path, [{"op": "read", "uuid": "ops"}])
    assert _rows(full) == expect
    assert len(ds.plan().files) == 8

    ds = ds.evolve_schema(add=[pa.field("tag", pa.string())], widen={"v": pa.int64()})
    inspect, full = kartothek.run(
        tmp_path, [{"op": "inspect", "uuid": "ops"}, {"op": "read", "uuid": "ops"}]
    )
    assert dict(map(tuple, inspect["schema"]))["tag"] == "string"
    assert dict(map(tuple, inspect["schema"]))["v"] == "int64"
    rows = _rows(full)
    assert [r["tag"] for r in rows] == [None] * 16
    assert [r["v"] for r in rows] == [r["k"] for r in rows]
    assert full["dtypes"]["v"] == "int64"
    kartothek.one(
        tmp_path,
        {
            "op": "update",
            "uuid": "ops",
            "partition_on": ["p"],
            "frames": [
                {
                    "schema": [["p", "string"], ["k", "int64"], ["v", "int64"], ["tag", "string"]],
                    "rows": [["a", 100, 2**40, "new"]],
                }
            ],
        },
    )
    after = Dataset.open(store, "ops")
    assert after.read().num_rows == 17
    assert after.read(predicates=[[("tag", "==", "new")]]).column("k").to_pylist() == [100]
