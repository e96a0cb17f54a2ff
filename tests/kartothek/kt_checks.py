"""Checks shared by the kartothek compatibility tests on the sample dataset (kt_sample_data):
the standard queries as driver ops, and both tools' answers compared with the oracle."""

from __future__ import annotations

from typing import Any

from kt_sample_data import COLUMNS, PRUNABLE, SCHEMA, queries
from kt_support import (
    Predicates,
    label_partition,
    oracle,
    rows_of_kartothek,
    rows_of_table,
    to_driver_predicates,
)

from parquetry import Dataset

Records = list[dict[str, Any]]


def read_ops(uuid: str, special: str) -> list[dict[str, Any]]:
    """kt_driver ``read`` ops for every standard query (``special``: the odd partition value)."""
    return [
        {"op": "read", "uuid": uuid, "predicates": to_driver_predicates(p)}
        for p in queries(special)
    ]


def check_kartothek_reads(
    results: list[Any],
    records: Records,
    special: str,
    partitions: dict[str, Any] | None = None,
    prunable: tuple[int, ...] = PRUNABLE,
) -> None:
    """kartothek's answers to :func:`read_ops` equal the oracle's; for queries on partition keys
    and indices only (``prunable``), kartothek plans only partitions of cells holding matches
    (given ``partitions``, its labels)."""
    for position, (predicates, result) in enumerate(zip(queries(special), results, strict=True)):
        expected = oracle(records, predicates, COLUMNS, SCHEMA)
        got = rows_of_kartothek(result, COLUMNS, SCHEMA)
        assert got == expected, (
            f"kartothek read {predicates}: {len(got)} rows, want {len(expected)}"
        )
        if partitions is None or position not in prunable:
            continue
        ids = {row[0] for row in expected}
        cells = {(r["country"], str(r["year"])) for r in records if r["id"] in ids}
        in_cells = [
            label for label in partitions if tuple(v for _, v in label_partition(label)) in cells
        ]
        planned = result["planned_partitions"]
        assert len(cells) <= planned <= len(in_cells), (
            f"kartothek planned {planned} partitions for {predicates}; "
            f"{len(cells)}..{len(in_cells)} hold matches"
        )


def parquetry_rows(ds: Dataset, predicates: Predicates | None = None) -> list[tuple[Any, ...]]:
    """Sorted canonical rows parquetry reads (exactly the sample's columns, no index levels)."""
    table = ds.read(predicates=predicates)
    assert sorted(table.column_names) == sorted(COLUMNS), "parquetry read unexpected columns"
    return rows_of_table(table, COLUMNS, SCHEMA)


def check_parquetry_reads(ds: Dataset, records: Records, special: str, name: str) -> None:
    """parquetry's answers to all rows and every standard query equal the oracle's."""
    assert parquetry_rows(ds) == oracle(records, None, COLUMNS, SCHEMA), name
    for predicates in queries(special):
        got = parquetry_rows(ds, predicates)
        want = oracle(records, predicates, COLUMNS, SCHEMA)
        assert got == want, (
            f"{name}: parquetry read {predicates}: {len(got)} rows, want {len(want)}"
        )
