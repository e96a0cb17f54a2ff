"""parquetry writes -> kartothek 5.3.0 reads with predicates and updates (append + delete_scope +
GC) -> parquetry reads kartothek's result and appends -> kartothek reads again."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pytest
from kt_checks import check_kartothek_reads, parquetry_rows, read_ops
from kt_harness import Kartothek
from kt_sample_data import (
    COLUMNS,
    INDEXED,
    NAME_QUERY,
    PARTITION_ON,
    PRUNABLE,
    SCHEMA,
    SLASHED,
    SPECIAL,
    queries,
    sample_table,
)
from kt_support import (
    canonical_records,
    check_index,
    frame,
    oracle,
    rows_of_kartothek,
    to_driver_predicates,
    to_driver_scope,
)

from parquetry import Dataset
from parquetry.dataset import write_files
from parquetry.errors import ParquetryError
from parquetry.store import LocalStore

pytestmark = pytest.mark.kartothek

COUNTRIES = ("DE", "FR", SLASHED, SPECIAL)
# kartothek's normalised view of SCHEMA: partition keys first, the rest sorted, int32 -> int64
KARTOTHEK_SCHEMA = [
    ["country", "string"],
    ["year", "int64"],
    ["amount", "double"],
    ["customer", "int64"],
    ["day", "date32[day]"],
    ["flag", "bool"],
    ["id", "int64"],
    ["name", "string"],
    ["small", "int64"],
    ["ts", "timestamp[ns]"],
]


@pytest.mark.parametrize("metadata_format", ["json", "msgpack.zstd"])
def test_kartothek_reads_and_updates_parquetry_dataset(
    kartothek: Kartothek, tmp_path: Path, metadata_format: str
) -> None:
    root = tmp_path / "store"
    store = LocalStore(root)
    first = sample_table(64, seed=11, countries=COUNTRIES)
    Dataset.create(
        store,
        "pq",
        first,
        partition_on=PARTITION_ON,
        secondary_indices=INDEXED,
        metadata={"owner": "parquetry"},
        metadata_format=metadata_format,
    )
    added = sample_table(16, seed=12, countries=("DE", "NL"), years=(2021, 2022), first_id=1000)
    scope = [{"country": "FR"}, {"country": SLASHED, "year": 2020}]
    n_queries = len(queries(SLASHED))
    results = kartothek.run(
        root,
        [
            {"op": "inspect", "uuid": "pq"},
            *read_ops("pq", SLASHED),
            {"op": "read", "uuid": "pq", "predicates": [[["country", "==", SPECIAL]]]},
            {
                "op": "update",
                "uuid": "pq",
                "frames": [frame(added)],
                "delete_scope": to_driver_scope(scope),
                "partition_on": PARTITION_ON,
                "metadata": {"updated_by": "kartothek"},
            },
            {"op": "gc", "uuid": "pq"},
            {"op": "inspect", "uuid": "pq"},
            {"op": "read", "uuid": "pq"},
        ],
    )
    inspected = results[0]
    assert inspected["partition_keys"] == PARTITION_ON
    assert inspected["schema"] == KARTOTHEK_SCHEMA
    assert inspected["schema_has_pandas"], "_common_metadata needs a pandas entry for updates"
    assert inspected["metadata"]["owner"] == "parquetry"
    records = canonical_records(first)
    check_index(inspected, records, SCHEMA, INDEXED)
    check_kartothek_reads(results[1 : 1 + n_queries], records, SLASHED, inspected["partitions"])
    special = results[1 + n_queries]
    assert rows_of_kartothek(special, COLUMNS, SCHEMA) == oracle(
        records, [[("country", "==", SPECIAL)]], COLUMNS, SCHEMA
    )

    kept = [
        r
        for r in records
        if r["country"] != "FR" and not (r["country"] == SLASHED and r["year"] == 2020)
    ]
    after_update = kept + canonical_records(added)
    updated = results[-2]
    assert updated["metadata"]["updated_by"] == "kartothek"
    check_index(updated, after_update, SCHEMA, INDEXED)
    assert rows_of_kartothek(results[-1], COLUMNS, SCHEMA) == oracle(
        after_update, None, COLUMNS, SCHEMA
    )

    # parquetry sees kartothek's update (and GC) exactly
    ds = Dataset.open(store, "pq")
    assert parquetry_rows(ds) == oracle(after_update, None, COLUMNS, SCHEMA)
    for predicates in queries(SLASHED):
        assert parquetry_rows(ds, predicates) == oracle(
            after_update, predicates, COLUMNS, SCHEMA
        ), predicates
    # parquetry's own version 0 is still listed, but kartothek's GC deleted the FR files it
    # needs: reading it must fail naming the missing file, never return partial data
    assert [v.number for v in ds.versions()][:1] == [0]
    with pytest.raises(ParquetryError, match=r"\.parquet"):
        Dataset.open(store, "pq", version=0).read()

    # parquetry appends on top of kartothek's commit; kartothek reads everything
    more = sample_table(24, seed=13, countries=(SLASHED, "NL"), years=(2022,), first_id=2000)
    ds = ds.append(more)
    final = after_update + canonical_records(more)
    assert parquetry_rows(Dataset.open(store, "pq")) == oracle(final, None, COLUMNS, SCHEMA)
    results = kartothek.run(
        root,
        [{"op": "inspect", "uuid": "pq"}, {"op": "read", "uuid": "pq"}, *read_ops("pq", SLASHED)],
    )
    check_index(results[0], final, SCHEMA, INDEXED)
    assert rows_of_kartothek(results[1], COLUMNS, SCHEMA) == oracle(final, None, COLUMNS, SCHEMA)
    check_kartothek_reads(results[2:], final, SLASHED, results[0]["partitions"])


def test_kartothek_reads_after_parquetry_maintenance(kartothek: Kartothek, tmp_path: Path) -> None:
    """build_index, update(delete_scope) + append and GC by parquetry; kartothek reads the result,
    prunes with the late-built index and can still update it."""
    root = tmp_path / "store"
    store = LocalStore(root)
    first = sample_table(48, seed=21, countries=COUNTRIES)
    ds = Dataset.create(store, "maint", first, partition_on=PARTITION_ON)
    ds = ds.build_index("customer")
    replacement = sample_table(8, seed=22, countries=("DE",), years=(2020,), first_id=500)
    ds = ds.update(replacement, delete_scope=[{"country": "DE", "year": 2020}])
    appended = sample_table(8, seed=23, countries=(SPECIAL,), first_id=700)
    ds = ds.append(appended)
    ds.garbage_collect(retention=dt.timedelta(0))
    records = [
        r for r in canonical_records(first) if not (r["country"] == "DE" and r["year"] == 2020)
    ]
    records += canonical_records(replacement) + canonical_records(appended)
    assert parquetry_rows(Dataset.open(store, "maint")) == oracle(records, None, COLUMNS, SCHEMA)

    extra = sample_table(6, seed=24, countries=("NL",), first_id=900)
    results = kartothek.run(
        root,
        [
            {"op": "inspect", "uuid": "maint"},
            *read_ops("maint", SLASHED),
            {
                "op": "update",
                "uuid": "maint",
                "frames": [frame(extra)],
                "partition_on": PARTITION_ON,
            },
            {"op": "read", "uuid": "maint", "predicates": [[["customer", "==", 3]]]},
        ],
    )
    check_index(results[0], records, SCHEMA, ["customer"])
    # "name" has no index here: its query is not prunable
    prunable = tuple(p for p in PRUNABLE if p != NAME_QUERY)
    check_kartothek_reads(results[1:-2], records, SLASHED, results[0]["partitions"], prunable)
    final = records + canonical_records(extra)
    assert rows_of_kartothek(results[-1], COLUMNS, SCHEMA) == oracle(
        final, [[("customer", "==", 3)]], COLUMNS, SCHEMA
    )
    assert parquetry_rows(Dataset.open(store, "maint")) == oracle(final, None, COLUMNS, SCHEMA)


def test_partition_values_kartothek_cannot_write_round_trip(
    kartothek: Kartothek, tmp_path: Path
) -> None:
    """``/``, ``=``, ``%``, spaces and non-ASCII in string partition values: kartothek reads
    parquetry's escaped labels back to the exact values and filters on them."""
    values = ["a/b", "x=y", "50%", "/lead", "trail/", "ü ß/€", "%2F", "a//b"]
    table = pa.table(
        {
            "key": pa.array(values, pa.string()),
            "n": pa.array(range(len(values)), pa.int64()),
        }
    )
    root = tmp_path / "store"
    Dataset.create(LocalStore(root), "odd", table, partition_on=["key"])
    results = kartothek.run(
        root,
        [
            {"op": "read", "uuid": "odd"},
            *[{"op": "read", "uuid": "odd", "predicates": [[["key", "==", v]]]} for v in values],
        ],
    )
    columns = ["key", "n"]
    assert rows_of_kartothek(results[0], columns, table.schema) == sorted(
        zip(values, range(len(values)), strict=True)
    )
    for n, (value, result) in enumerate(zip(values, results[1:], strict=True)):
        assert rows_of_kartothek(result, columns, table.schema) == [(value, n)], value
        assert result["planned_partitions"] == 1, value


def test_kartothek_reads_distributed_writes(kartothek: Kartothek, tmp_path: Path) -> None:
    """The executor path (write_files on several workers, one commit_files) and a streamed
    create (record batches, several files per partition) stay kartothek-readable."""
    root = tmp_path / "store"
    store = LocalStore(root)
    chunks = [
        sample_table(24, seed=60 + i, countries=COUNTRIES, first_id=100 * i) for i in range(3)
    ]
    files = [
        f
        for chunk in chunks
        for f in write_files(
            store, "dist", chunk, partition_on=PARTITION_ON, secondary_indices=INDEXED
        )
    ]
    Dataset.commit_files(
        store,
        "dist",
        files,
        mode="create",
        schema=SCHEMA,
        partition_on=PARTITION_ON,
        secondary_indices=INDEXED,
    )
    later = sample_table(10, seed=70, countries=("NL", SLASHED), first_id=900)
    more = write_files(store, "dist", later, partition_on=PARTITION_ON, secondary_indices=INDEXED)
    Dataset.commit_files(store, "dist", more, mode="append")
    dist_records = [r for t in [*chunks, later] for r in canonical_records(t)]

    streamed = sample_table(60, seed=71, countries=COUNTRIES, first_id=5000)
    reader = pa.RecordBatchReader.from_batches(SCHEMA, streamed.to_batches(max_chunksize=15))
    Dataset.create(store, "streamed", reader, partition_on=PARTITION_ON, secondary_indices=INDEXED)
    streamed_records = canonical_records(streamed)

    added = sample_table(6, seed=72, countries=("DE",), first_id=8000)
    results = kartothek.run(
        root,
        [
            {"op": "inspect", "uuid": "dist"},
            *read_ops("dist", SLASHED),
            {"op": "inspect", "uuid": "streamed"},
            *read_ops("streamed", SLASHED),
            {
                "op": "update",
                "uuid": "dist",
                "frames": [frame(added)],
                "partition_on": PARTITION_ON,
            },
            {"op": "read", "uuid": "dist"},
        ],
    )
    n = len(queries(SLASHED))
    check_index(results[0], dist_records, SCHEMA, INDEXED)
    check_kartothek_reads(results[1 : 1 + n], dist_records, SLASHED, results[0]["partitions"])
    check_index(results[1 + n], streamed_records, SCHEMA, INDEXED)
    check_kartothek_reads(
        results[2 + n : 2 + 2 * n], streamed_records, SLASHED, results[1 + n]["partitions"]
    )
    final = dist_records + canonical_records(added)
    assert rows_of_kartothek(results[-1], COLUMNS, SCHEMA) == oracle(final, None, COLUMNS, SCHEMA)
    assert parquetry_rows(Dataset.open(store, "dist")) == oracle(final, None, COLUMNS, SCHEMA)


def test_kartothek_reads_unpartitioned_and_empty_parquetry_datasets(
    kartothek: Kartothek, tmp_path: Path
) -> None:
    root = tmp_path / "store"
    store = LocalStore(root)
    flat = sample_table(30, seed=91, countries=COUNTRIES)
    Dataset.create(store, "flat", flat, secondary_indices=["country"])
    Dataset.create(store, "empty", SCHEMA.empty_table(), partition_on=PARTITION_ON)
    added = sample_table(8, seed=92, countries=("DE", SLASHED), first_id=100)
    special = [[("country", "==", SLASHED)]]
    # no "/" in partition values kartothek writes: it does not escape them
    into_empty = sample_table(4, seed=93, countries=("DE", "NL"), first_id=200)
    results = kartothek.run(
        root,
        [
            {"op": "inspect", "uuid": "flat"},
            {"op": "read", "uuid": "flat", "predicates": to_driver_predicates(special)},
            {"op": "update", "uuid": "flat", "frames": [frame(added)]},
            {"op": "read", "uuid": "empty"},
            {
                "op": "update",
                "uuid": "empty",
                "frames": [frame(into_empty)],
                "partition_on": PARTITION_ON,
            },
        ],
    )
    records = canonical_records(flat)
    assert results[0]["partition_keys"] == []
    check_index(results[0], records, SCHEMA, ["country"], cell=())
    assert rows_of_kartothek(results[1], COLUMNS, SCHEMA) == oracle(
        records, special, COLUMNS, SCHEMA
    )
    assert results[1]["planned_partitions"] == 1
    assert results[3]["rows"] == []
    assert sorted(results[3]["columns"]) == sorted(COLUMNS)
    final = records + canonical_records(added)
    assert parquetry_rows(Dataset.open(store, "flat")) == oracle(final, None, COLUMNS, SCHEMA)
    assert parquetry_rows(Dataset.open(store, "flat"), special) == oracle(
        final, special, COLUMNS, SCHEMA
    )
    assert parquetry_rows(Dataset.open(store, "empty")) == oracle(
        canonical_records(into_empty), None, COLUMNS, SCHEMA
    )
