"""kartothek and parquetry taking turns on one dataset: indices kartothek builds, parquetry's
GC after a kartothek commit, kartothek deleting a parquetry dataset."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from kt_checks import check_kartothek_reads, parquetry_rows, read_ops
from kt_harness import Kartothek
from kt_sample_data import COLUMNS, INDEXED, PARTITION_ON, SCHEMA, SLASHED, SPECIAL, sample_table
from kt_support import (
    canonical_records,
    check_index,
    frame,
    oracle,
    rows_of_kartothek,
    to_driver_scope,
)

from parquetry import Dataset
from parquetry.store import LocalStore

pytestmark = pytest.mark.kartothek

COUNTRIES = ("DE", "FR", SLASHED, SPECIAL)


def test_parquetry_plans_with_an_index_kartothek_built(
    kartothek: Kartothek, tmp_path: Path
) -> None:
    """kartothek's build_dataset_indices on our dataset: parquetry sees and prunes with it."""
    root = tmp_path / "store"
    store = LocalStore(root)
    first = sample_table(40, seed=81, countries=COUNTRIES)
    Dataset.create(store, "late", first, partition_on=PARTITION_ON)
    kartothek.one(root, {"op": "build_index", "uuid": "late", "columns": ["customer"]})
    ds = Dataset.open(store, "late")
    assert "customer" in ds.secondary_indices
    records = canonical_records(first)
    predicates = [[("customer", "==", 3)]]
    assert parquetry_rows(ds, predicates) == oracle(records, predicates, COLUMNS, SCHEMA)
    cells = {(r["country"], r["year"]) for r in records if r["customer"] == 3}
    assert len(ds.plan(predicates).files) == len(cells), "kartothek's index did not prune"


def test_uuid_can_be_created_again_after_kartothek_delete(
    kartothek: Kartothek, tmp_path: Path
) -> None:
    """kartothek's delete_dataset leaves no dataset behind for parquetry, and the uuid can be
    created again from scratch (old version documents must not leak into the new dataset)."""
    root = tmp_path / "store"
    store = LocalStore(root)
    Dataset.create(
        store, "gone", sample_table(20, seed=83, countries=COUNTRIES), partition_on=PARTITION_ON
    )
    kartothek.one(root, {"op": "delete", "uuid": "gone"})
    assert not Dataset.exists(store, "gone")
    second = sample_table(8, seed=82, countries=("NL",), first_id=400)
    Dataset.create(store, "gone", second, partition_on=PARTITION_ON)
    again = canonical_records(second)
    ds = Dataset.open(store, "gone")
    assert parquetry_rows(ds) == oracle(again, None, COLUMNS, SCHEMA)
    assert [v.operation for v in ds.versions()] == ["create"], "history of the deleted dataset"
    results = kartothek.run(
        root, [{"op": "inspect", "uuid": "gone"}, {"op": "read", "uuid": "gone"}]
    )
    assert results[0]["indices"] == {}
    assert rows_of_kartothek(results[1], COLUMNS, SCHEMA) == oracle(again, None, COLUMNS, SCHEMA)


def test_parquetry_gc_keeps_what_a_kartothek_commit_references(
    kartothek: Kartothek, tmp_path: Path
) -> None:
    """A kartothek commit has no parquetry version document: parquetry's garbage collection
    must still treat the files (data and index) its pointer names as live."""
    root = tmp_path / "store"
    store = LocalStore(root)
    first = sample_table(30, seed=121, countries=COUNTRIES)
    Dataset.create(store, "mixed", first, partition_on=PARTITION_ON, secondary_indices=INDEXED)
    added = sample_table(10, seed=122, countries=("NL", "DE"), first_id=300)
    kartothek.one(
        root,
        {
            "op": "update",
            "uuid": "mixed",
            "frames": [frame(added)],
            "delete_scope": to_driver_scope([{"country": "FR"}]),
            "partition_on": PARTITION_ON,
        },
    )
    Dataset.open(store, "mixed").garbage_collect(retention=dt.timedelta(0))
    final = [r for r in canonical_records(first) if r["country"] != "FR"]
    final += canonical_records(added)
    assert parquetry_rows(Dataset.open(store, "mixed")) == oracle(final, None, COLUMNS, SCHEMA)
    results = kartothek.run(
        root,
        [
            {"op": "inspect", "uuid": "mixed"},
            {"op": "read", "uuid": "mixed"},
            *read_ops("mixed", SLASHED),
        ],
    )
    check_index(results[0], final, SCHEMA, INDEXED)
    assert rows_of_kartothek(results[1], COLUMNS, SCHEMA) == oracle(final, None, COLUMNS, SCHEMA)
    check_kartothek_reads(results[2:], final, SLASHED, results[0]["partitions"])
