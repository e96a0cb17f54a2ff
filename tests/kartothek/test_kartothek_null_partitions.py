"""Empty-string and null partition values between parquetry and kartothek 5.3.0.

kartothek writes an empty string as ``k=`` and refuses nulls in partition columns; parquetry
uses ``k=`` too and spells a null ``__HIVE_DEFAULT_PARTITION__`` (Spark's spelling), which
kartothek reads back as that text.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from kt_harness import Kartothek

from parquetry import Dataset
from parquetry.store import LocalStore

pytestmark = pytest.mark.kartothek


def test_empty_and_null_partition_values_with_kartothek(
    kartothek: Kartothek, tmp_path: Path
) -> None:
    table = pa.table({"p": ["a", "", None, ""], "v": pa.array([1, 2, 3, 4], pa.int64())})
    Dataset.create(LocalStore(tmp_path), "ours", table, partition_on=["p"])
    frame = {"schema": [["p", "string"], ["v", "int64"]], "rows": [["", 5], ["b", 6]]}
    results = kartothek.run(
        tmp_path,
        [
            {"op": "read", "uuid": "ours"},
            {"op": "read", "uuid": "ours", "predicates": [[["p", "==", ""]]]},
            {"op": "write", "uuid": "theirs", "frames": [frame], "partition_on": ["p"]},
        ],
    )
    names = results[0]["columns"]
    rows = sorted((r[names.index("p")], r[names.index("v")]) for r in results[0]["rows"])
    assert rows == [("", 2), ("", 4), ("__HIVE_DEFAULT_PARTITION__", 3), ("a", 1)]
    assert sorted(r[names.index("v")] for r in results[1]["rows"]) == [2, 4]
    assert results[1]["planned_partitions"] == 1
    theirs = Dataset.open(LocalStore(tmp_path), "theirs")
    assert theirs.read(predicates=[[("p", "==", "")]])["v"].to_pylist() == [5]
    assert theirs.read(predicates=[[("p", "is null")]]).num_rows == 0
    assert sorted(theirs.read()["p"].to_pylist()) == ["", "b"]
