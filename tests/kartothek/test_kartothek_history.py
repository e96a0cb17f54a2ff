"""kartothek 5.3.0 on datasets whose versions record parameters and byte metrics, and after a
restore: it reads them, updates them, and parquetry's history continues afterwards."""

from __future__ import annotations

from pathlib import Path

import pytest
from kt_checks import parquetry_rows
from kt_harness import Kartothek
from kt_sample_data import COLUMNS, INDEXED, PARTITION_ON, SCHEMA, sample_table
from kt_support import canonical_records, check_index, frame, oracle, rows_of_kartothek

from parquetry import Dataset
from parquetry.store import LocalStore

pytestmark = pytest.mark.kartothek


def test_kartothek_reads_and_updates_after_parameters_and_restore(
    kartothek: Kartothek, tmp_path: Path
) -> None:
    root = tmp_path / "store"
    store = LocalStore(root)
    first = sample_table(30, seed=131, countries=("DE", "FR"))
    more = sample_table(10, seed=132, countries=("NL",), first_id=300)
    v0 = Dataset.create(store, "h", first, partition_on=PARTITION_ON, secondary_indices=INDEXED)
    v1 = v0.append(more, parameters={"job": "nightly", "rows": 10})
    v2 = v1.update(delete_scope=[{"country": "DE"}])
    v3 = v2.restore(1, parameters={"ticket": "OPS-7"})
    assert [h.operation for h in v3.history()] == ["restore", "update", "append", "create"]
    assert v3.history()[2].parameters == {"job": "nightly", "rows": "10"}
    expected = canonical_records(first) + canonical_records(more)
    assert parquetry_rows(v3) == oracle(expected, None, COLUMNS, SCHEMA)

    added = sample_table(6, seed=133, countries=("IT",), first_id=600)
    results = kartothek.run(
        root,
        [
            {"op": "inspect", "uuid": "h"},
            {"op": "read", "uuid": "h"},
            {
                "op": "update",
                "uuid": "h",
                "frames": [frame(added)],
                "delete_scope": [{"country": "FR"}],
                "partition_on": PARTITION_ON,
            },
            {"op": "read", "uuid": "h"},
        ],
    )
    check_index(results[0], expected, SCHEMA, INDEXED)
    assert rows_of_kartothek(results[1], COLUMNS, SCHEMA) == oracle(expected, None, COLUMNS, SCHEMA)
    final = [r for r in expected if r["country"] != "FR"] + canonical_records(added)
    assert rows_of_kartothek(results[3], COLUMNS, SCHEMA) == oracle(final, None, COLUMNS, SCHEMA)
    # parquetry continues after kartothek's commit: reads it, restores over it, keeps history.
    after = Dataset.open(store, "h")
    assert parquetry_rows(after) == oracle(final, None, COLUMNS, SCHEMA)
    back = after.restore(3)
    assert parquetry_rows(back) == oracle(expected, None, COLUMNS, SCHEMA)
    # kartothek's update is a version of its own (committed before the restore).
    assert [h.operation for h in back.history()][:3] == ["restore", "kartothek", "restore"]
    again = kartothek.run(root, [{"op": "read", "uuid": "h"}])
    assert rows_of_kartothek(again[0], COLUMNS, SCHEMA) == oracle(expected, None, COLUMNS, SCHEMA)
