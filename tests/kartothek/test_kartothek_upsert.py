"""kartothek 5.3.0 reads what Dataset.upsert committed: rows, partition pruning, indices."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kt_checks import check_kartothek_reads, read_ops
from kt_harness import Kartothek
from kt_sample_data import INDEXED, PARTITION_ON, SCHEMA, SPECIAL, sample_table
from kt_support import canonical_records, check_index

from parquetry import Dataset
from parquetry.store import LocalStore

pytestmark = pytest.mark.kartothek

COUNTRIES = ("DE", "FR", SPECIAL)


def merge(records: list[dict[str, Any]], data: list[dict[str, Any]], delete: bool) -> list[Any]:
    by_id = {r["id"]: r for r in data}
    out = [r for r in records if r["id"] not in by_id]
    if not delete:
        out += list(by_id.values())
    return out


def test_kartothek_reads_an_upserted_dataset(kartothek: Kartothek, tmp_path: Path) -> None:
    root = tmp_path / "store"
    store = LocalStore(root)
    first = sample_table(36, seed=5, countries=COUNTRIES)
    ds = Dataset.create(store, "up", first, partition_on=PARTITION_ON, secondary_indices=INDEXED)
    records = canonical_records(first)
    # Existing ids get new values (other customers: the index changes; other countries: rows
    # move partitions), new ids are inserted; then some ids are deleted by upsert.
    changes = sample_table(12, seed=6, countries=COUNTRIES, first_id=30)  # ids 30..41
    ds = ds.upsert(changes, on=["id"])
    records = merge(records, canonical_records(changes), delete=False)
    gone = sample_table(5, seed=7, countries=COUNTRIES, first_id=0)  # ids 0..4
    ds = ds.upsert(gone, on=["id"], when_matched="delete", when_not_matched="ignore")
    records = merge(records, canonical_records(gone), delete=True)
    assert ds.history(limit=1)[0].metrics["rows_deleted"] == 5
    ops = [*read_ops("up", SPECIAL), {"op": "inspect", "uuid": "up"}]
    *results, inspected = kartothek.run(root, ops)
    check_kartothek_reads(results, records, SPECIAL, partitions=ds.document.partitions)
    check_index(inspected, records, SCHEMA, INDEXED)
