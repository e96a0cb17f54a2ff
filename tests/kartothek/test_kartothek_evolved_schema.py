"""What kartothek 5.3.0 does with a dataset whose schema parquetry evolved (merge_schema).

Documented in docs/concepts.md ("kartothek and evolved schemas"): kartothek reads it
(schema from ``_common_metadata``: added columns null in old files, widened ints), appends
in the new schema, refuses an update in the old schema, and fails on a predicate over an
added column when a file lacks it (its row-group pushdown looks the column up by name).
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from kt_harness import Kartothek, KartothekError

from parquetry import Dataset
from parquetry.store import LocalStore

pytestmark = pytest.mark.kartothek


def _evolved(root: Path) -> Dataset:
    store = LocalStore(root)
    ds = Dataset.create(
        store,
        "ev",
        pa.table({"p": ["a", "b"], "n": pa.array([1, 2], pa.int32()), "x": [0.5, 1.5]}),
        partition_on=["p"],
    )
    return ds.append(
        pa.table({"p": ["b"], "n": pa.array([2**40], pa.int64()), "x": [2.5], "tag": ["t"]}),
        merge_schema=True,
    )


def test_kartothek_reads_and_appends_an_evolved_dataset(
    kartothek: Kartothek, tmp_path: Path
) -> None:
    ds = _evolved(tmp_path)
    assert ds.version == 1
    inspect, full = kartothek.run(
        tmp_path, [{"op": "inspect", "uuid": "ev"}, {"op": "read", "uuid": "ev"}]
    )
    assert inspect["schema"] == [
        ["p", "string"],
        ["n", "int64"],
        ["tag", "string"],
        ["x", "double"],
    ]
    assert full["dtypes"] == {"p": "object", "n": "int64", "tag": "object", "x": "float64"}
    assert sorted(full["rows"], key=lambda r: r[1]) == [
        ["a", 1, None, 0.5],
        ["b", 2, None, 1.5],
        ["b", 2**40, "t", 2.5],
    ]
    # A predicate on the added column: kartothek fails on the files that lack it.
    with pytest.raises(KartothekError, match="KeyError: b'tag'"):
        kartothek.one(tmp_path, {"op": "read", "uuid": "ev", "predicates": [[["tag", "==", "t"]]]})
    assert ds.read(predicates=[[("tag", "==", "t")]]).column("n").to_pylist() == [2**40]

    new_shape = [["p", "string"], ["n", "int64"], ["x", "float64"], ["tag", "string"]]
    kartothek.one(
        tmp_path,
        {
            "op": "update",
            "uuid": "ev",
            "partition_on": ["p"],
            "frames": [{"schema": new_shape, "rows": [["c", 5, 1.0, "k"]]}],
        },
    )
    # The old shape (without 'tag') is refused by kartothek's schema check.
    with pytest.raises(KartothekError, match="Schemas for table 'table' of dataset 'ev' are not"):
        kartothek.one(
            tmp_path,
            {
                "op": "update",
                "uuid": "ev",
                "partition_on": ["p"],
                "frames": [{"schema": new_shape[:3], "rows": [["d", 6, 1.0]]}],
            },
        )
    after = Dataset.open(LocalStore(tmp_path), "ev")
    rows = sorted(after.read().to_pylist(), key=lambda r: r["n"])
    assert rows == [
        {"p": "a", "n": 1, "tag": None, "x": 0.5},
        {"p": "b", "n": 2, "tag": None, "x": 1.5},
        {"p": "c", "n": 5, "tag": "k", "x": 1.0},
        {"p": "b", "n": 2**40, "tag": "t", "x": 2.5},
    ]
    assert after.schema.field("n").type == pa.int64()
    # parquetry appends on top of kartothek's commit, in the evolved schema.
    after = after.append(pa.table({"p": ["e"], "n": [7], "x": [0.0], "tag": [None]}))
    assert after.read().num_rows == 5
