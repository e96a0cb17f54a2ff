"""kartothek 5.3.0 reads the result of delete_where and update_where (rows, secondary
indices, a predicate on an indexed column), and parquetry continues after a kartothek write."""

from __future__ import annotations

from pathlib import Path

import pytest
from kt_checks import parquetry_rows
from kt_harness import Kartothek
from kt_sample_data import COLUMNS, INDEXED, PARTITION_ON, SCHEMA, sample_table
from kt_support import (
    canonical_records,
    check_index,
    frame,
    oracle,
    rows_of_kartothek,
    to_driver_predicates,
)

from parquetry import Dataset
from parquetry.store import LocalStore

pytestmark = pytest.mark.kartothek


def test_kartothek_reads_deleted_and_updated_rows(kartothek: Kartothek, tmp_path: Path) -> None:
    root = tmp_path / "store"
    store = LocalStore(root)
    first = sample_table(40, seed=141, countries=("DE", "FR"))
    v0 = Dataset.create(store, "t", first, partition_on=PARTITION_ON, secondary_indices=INDEXED)
    # delete: one whole partition (dropped unread) and rows by an indexed column
    v1 = v0.delete_where([[("country", "==", "FR"), ("year", "==", 2020)], [("customer", "<", 4)]])
    kept = [
        r
        for r in canonical_records(first)
        if not ((r["country"], r["year"]) == ("FR", 2020) or r["customer"] < 4)
    ]
    assert parquetry_rows(v1) == oracle(kept, None, COLUMNS, SCHEMA)
    # update: an indexed column and a partition key (rows move to year 2022)
    v2 = v1.update_where([[("customer", "==", 7)]], set={"customer": 70, "year": 2022})
    final = [{**r, "customer": 70, "year": 2022} if r["customer"] == 7 else r for r in kept]
    assert parquetry_rows(v2) == oracle(final, None, COLUMNS, SCHEMA)
    assert [h.operation for h in v2.history()] == ["update_where", "delete", "create"]

    by_customer = [[("customer", "==", 70)]]
    added = sample_table(4, seed=142, countries=("NL",), first_id=500)
    results = kartothek.run(
        root,
        [
            {"op": "inspect", "uuid": "t"},
            {"op": "read", "uuid": "t"},
            {"op": "read", "uuid": "t", "predicates": to_driver_predicates(by_customer)},
            {"op": "update", "uuid": "t", "frames": [frame(added)], "partition_on": PARTITION_ON},
        ],
    )
    check_index(results[0], final, SCHEMA, INDEXED)
    assert rows_of_kartothek(results[1], COLUMNS, SCHEMA) == oracle(final, None, COLUMNS, SCHEMA)
    want = oracle(final, by_customer, COLUMNS, SCHEMA)
    assert want
    assert rows_of_kartothek(results[2], COLUMNS, SCHEMA) == want
    # parquetry continues after kartothek's write: a delete on top of it
    after = Dataset.open(store, "t").delete_where([[("country", "==", "NL")]])
    assert parquetry_rows(after) == oracle(final, None, COLUMNS, SCHEMA)
