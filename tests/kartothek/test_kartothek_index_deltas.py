"""Format 2 keeps index deltas in entries; kartothek reads the whole index file the pointer
write builds from the index state (after inline appends and a delete_scope)."""

from __future__ import annotations

from pathlib import Path

import pytest
from kt_harness import Kartothek
from kt_sample_data import INDEXED, PARTITION_ON, SCHEMA, sample_table
from kt_support import canonical_records, check_index

from parquetry import Dataset
from parquetry.store import LocalStore

pytestmark = pytest.mark.kartothek

COUNTRIES = ("DE", "FR")


def test_kartothek_reads_the_index_built_from_deltas(kartothek: Kartothek, tmp_path: Path) -> None:
    root = tmp_path / "store"
    store = LocalStore(root)
    first = sample_table(24, seed=21, countries=COUNTRIES)
    ds = Dataset.create(store, "dx", first, partition_on=PARTITION_ON, secondary_indices=INDEXED)
    records = canonical_records(first)
    for i in range(4):  # each entry carries an inline delta; the pointer follows every commit
        more = sample_table(4, seed=30 + i, countries=COUNTRIES, first_id=100 * (i + 1))
        ds = ds.append(more)
        records += canonical_records(more)
    ds = ds.update(delete_scope=[{"country": "DE"}])
    records = [r for r in records if r["country"] != "DE"]
    assert ds.document.index_states  # format 2: states, not index files, per version
    (inspected,) = kartothek.run(root, [{"op": "inspect", "uuid": "dx"}])
    check_index(inspected, records, SCHEMA, INDEXED)
