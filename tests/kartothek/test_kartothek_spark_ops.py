"""kartothek 5.3.0 reads a dataset Spark rewrote through ParquetryTable (delete_where,
update_where, a DataFrame upsert, compact): rows, partition pruning, indices."""

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

pytestmark = [pytest.mark.kartothek, pytest.mark.spark]

COUNTRIES = ("DE", "FR", SPECIAL)


def test_kartothek_reads_a_spark_rewritten_dataset(
    kartothek: Kartothek, spark: Any, tmp_path: Path
) -> None:
    from parquetry.spark import ParquetryTable

    root = tmp_path / "store"
    store = LocalStore(root)
    first = sample_table(36, seed=15, countries=COUNTRIES)
    ds = Dataset.create(store, "sp", first, partition_on=PARTITION_ON, secondary_indices=INDEXED)
    ds.append(sample_table(12, seed=16, countries=COUNTRIES, first_id=36))
    table = ParquetryTable.for_path(spark, f"{root.as_uri()}/sp")
    table.delete_where("id < 4")
    table.update_where("id >= 40", set={"customer": "customer + 1000"})
    changes = sample_table(6, seed=17, countries=COUNTRIES, first_id=30)  # ids 30..35
    # A pyarrow source: the handle makes it a DataFrame with parquetry's type mapping.
    table.upsert(changes, on=["id"])
    table.compact(target_file_size=1 << 20)
    got = table.dataset()
    assert [h.operation for h in got.history(limit=4)] == [
        "compact",
        "upsert",
        "update_where",
        "delete",
    ]
    records = canonical_records(got.read())
    # Independent of the read: ids 0..3 deleted, 30..35 updated in place, 40.. shifted.
    assert sorted(r["id"] for r in records) == list(range(4, 48))
    by_id = {r["id"]: r for r in records}
    new = {r["id"]: r for r in canonical_records(changes)}
    assert all(by_id[i] == new[i] for i in range(30, 36))
    assert all(by_id[i]["customer"] >= 1000 for i in range(40, 48))
    ops = [*read_ops("sp", SPECIAL), {"op": "inspect", "uuid": "sp"}]
    *results, inspected = kartothek.run(root, ops)
    check_kartothek_reads(results, records, SPECIAL, partitions=got.document.partitions)
    check_index(inspected, records, SCHEMA, INDEXED)
