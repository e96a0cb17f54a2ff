"""Types beyond the basics, both ways: bool/date partitions, tz-aware timestamps, small and
unsigned ints (kartothek normalises them to 64 bit), float32, categoricals, binary, uint64
values above 2**63, indices on a timestamp and a categorical column."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from kt_harness import Kartothek
from kt_support import (
    Predicates,
    canonical_records,
    check_index,
    frame,
    oracle,
    rows_of_kartothek,
    rows_of_table,
    to_driver_predicates,
)

from parquetry import Dataset, WriteOptions
from parquetry.parquet.options import BloomFilter
from parquetry.store import LocalStore

pytestmark = pytest.mark.kartothek

UTC = dt.UTC
BIG = 2**63
SCHEMA = pa.schema(
    [
        ("d", pa.date32()),
        ("b", pa.bool_()),
        ("tsu", pa.timestamp("us")),
        ("tz", pa.timestamp("us", tz="UTC")),
        ("i8", pa.int8()),
        ("u16", pa.uint16()),
        ("u64", pa.uint64()),
        ("f32", pa.float32()),
        ("cat", pa.dictionary(pa.int32(), pa.string())),
        ("by", pa.binary()),
        ("s", pa.string()),
    ]
)
COLUMNS = SCHEMA.names
INDEXED = ["tsu", "cat"]


def types_table(n: int = 24, offset: int = 0) -> pa.Table:
    rows = []
    for i in range(offset, offset + n):
        rows.append(
            {
                "d": dt.date(2021, 1, 1 + i % 3),
                "b": i % 2 == 0,
                "tsu": dt.datetime(2021, 1, 1, 8 + i % 4, 30, 0, 250 * (i % 2)),
                "tz": None if i % 7 == 3 else dt.datetime(2021, 3, 1, i % 24, 15, tzinfo=UTC),
                "i8": (i * 37) % 256 - 128,
                "u16": 60000 + i,
                "u64": BIG + i if i % 3 == 0 else i,
                "f32": i * 0.25 - 2.5,
                "cat": "xyz"[i % 3],
                "by": None if i % 5 == 4 else bytes([0, 255 - i % 256, i % 256]),
                "s": f"s{i % 4}",
            }
        )
    return pa.Table.from_pylist(rows, schema=SCHEMA)


def type_queries() -> list[Predicates]:
    return [
        [[("b", "==", False)]],
        [[("d", "==", dt.date(2021, 1, 2))], [("d", ">", dt.date(2021, 1, 2))]],
        [[("tsu", "==", dt.datetime(2021, 1, 1, 10, 30, 0, 0))]],
        [[("cat", "==", "y")]],
        [[("tz", ">=", dt.datetime(2021, 3, 1, 12, 0, tzinfo=UTC))]],
        [[("u64", ">", BIG)]],
        [[("i8", "<", 0)], [("f32", "==", 1.5)]],
        [[("u16", "in", [60001, 60005, 61000]), ("cat", "!=", "x")]],
    ]


def parquetry_rows(ds: Dataset, predicates: Predicates | None = None) -> list[tuple[Any, ...]]:
    return rows_of_table(ds.read(predicates=predicates), COLUMNS, SCHEMA)


def test_parquetry_reads_kartothek_types(kartothek: Kartothek, tmp_path: Path) -> None:
    root = tmp_path / "store"
    table = types_table()
    kartothek.one(
        root,
        {
            "op": "write",
            "uuid": "types",
            "frames": [frame(table)],
            "partition_on": ["d", "b"],
            "secondary_indices": INDEXED,
        },
    )
    ds = Dataset.open(LocalStore(root), "types")
    assert list(ds.partition_keys) == ["d", "b"]
    records = canonical_records(table)
    assert parquetry_rows(ds) == oracle(records, None, COLUMNS, SCHEMA)
    for predicates in type_queries():
        assert parquetry_rows(ds, predicates) == oracle(records, predicates, COLUMNS, SCHEMA), (
            predicates
        )
    # a bool partition "b=False" must come back False (kartothek 5.3.0 itself reads it as True)
    falses = ds.read(predicates=[[("b", "==", False)]]).column("b").to_pylist()
    assert falses
    assert not any(falses)


def test_kartothek_reads_and_updates_parquetry_types(kartothek: Kartothek, tmp_path: Path) -> None:
    root = tmp_path / "store"
    store = LocalStore(root)
    table = types_table()
    # no bool partition key here: kartothek 5.3.0 cannot read those back correctly
    Dataset.create(store, "types", table, partition_on=["d"], secondary_indices=INDEXED)
    # kartothek 5.3.0 cannot update any dataset with a tz-aware column (its own included: the
    # new frame has timestamp[ns, tz=UTC], _common_metadata reads back as [us, tz=UTC]), so
    # the update runs on a copy without one
    no_tz = table.drop_columns(["tz"])
    Dataset.create(store, "types_no_tz", no_tz, partition_on=["d"], secondary_indices=INDEXED)
    added = types_table(6, offset=100).drop_columns(["tz"])
    results = kartothek.run(
        root,
        [
            {"op": "inspect", "uuid": "types"},
            {"op": "read", "uuid": "types"},
            *[
                {"op": "read", "uuid": "types", "predicates": to_driver_predicates(p)}
                for p in type_queries()
            ],
            {
                "op": "update",
                "uuid": "types_no_tz",
                "frames": [frame(added)],
                "partition_on": ["d"],
            },
            {"op": "read", "uuid": "types_no_tz"},
        ],
    )
    inspected = results[0]
    assert inspected["schema"] == [
        ["d", "date32[day]"],
        ["b", "bool"],
        ["by", "binary"],
        ["cat", "string"],
        ["f32", "double"],
        ["i8", "int64"],
        ["s", "string"],
        ["tsu", "timestamp[ns]"],
        ["tz", "timestamp[us, tz=UTC]"],  # as kartothek reads its own: no ns re-alignment
        ["u16", "uint64"],
        ["u64", "uint64"],
    ]
    records = canonical_records(table)
    index_schema = pa.schema([("tsu", pa.timestamp("ns")), ("cat", pa.string())])
    check_index(inspected, records, index_schema, INDEXED, cell=["d"])
    assert rows_of_kartothek(results[1], COLUMNS, SCHEMA) == oracle(records, None, COLUMNS, SCHEMA)
    for predicates, result in zip(type_queries(), results[2:-2], strict=True):
        assert rows_of_kartothek(result, COLUMNS, SCHEMA) == oracle(
            records, predicates, COLUMNS, SCHEMA
        ), predicates

    columns = no_tz.column_names
    final = canonical_records(no_tz) + canonical_records(added)
    assert rows_of_kartothek(results[-1], columns, SCHEMA) == oracle(final, None, columns, SCHEMA)
    ds = Dataset.open(store, "types_no_tz")
    for predicates in [
        None,
        *[q for q in type_queries() if all(c != "tz" for conj in q for c, _, _ in conj)],
    ]:
        got = rows_of_table(ds.read(predicates=predicates), columns, SCHEMA)
        assert got == oracle(final, predicates, columns, SCHEMA), predicates


def test_kartothek_reads_files_written_with_each_write_option(
    kartothek: Kartothek, tmp_path: Path
) -> None:
    """Every compression codec and the page index / bloom filter / dictionary / sorting
    options keep files readable by kartothek 5.3.0 (pyarrow 6). Not listed on purpose:
    ``data_page_version="2.0"``: pyarrow 6 cannot decode the RLE-encoded booleans of V2 pages
    ("OSError: Unknown encoding type")."""
    root = tmp_path / "store"
    store = LocalStore(root)
    variants = {
        "zstd_default": WriteOptions(),
        "snappy": WriteOptions(compression="snappy"),
        "gzip": WriteOptions(compression="gzip"),
        "brotli": WriteOptions(compression="brotli"),
        "lz4": WriteOptions(compression="lz4"),
        "none": WriteOptions(compression="none"),
        "bloom": WriteOptions(bloom_filters=(BloomFilter(column="s"),)),
        "no_page_index": WriteOptions(write_page_index=False),
        "dictionary": WriteOptions(dictionary=True),
        "sorted": WriteOptions(sorting_columns=(("u16", "ascending"),), row_group_size=5),
    }
    table = types_table()
    for uuid, options in variants.items():
        Dataset.create(store, uuid, table, partition_on=["d"], write_options=options)
    predicates = [[("u16", ">=", 60010), ("b", "==", True)]]
    results = kartothek.run(
        root,
        [
            {"op": "read", "uuid": uuid, "predicates": to_driver_predicates(predicates)}
            for uuid in variants
        ],
    )
    records = canonical_records(table)
    want = oracle(records, predicates, COLUMNS, SCHEMA)
    assert want
    for uuid, result in zip(variants, results, strict=True):
        assert rows_of_kartothek(result, COLUMNS, SCHEMA) == want, uuid
