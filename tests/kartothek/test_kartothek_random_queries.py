"""Random DNF queries (seeded) over the same rows in a kartothek-written and a parquetry-written
dataset: kartothek and parquetry answer every query on both datasets like the oracle. Range
operators on partition keys and secondary indices exercise each tool's index evaluation on the
other's index files."""

from __future__ import annotations

import datetime as dt
import random
from pathlib import Path
from typing import Any

import pytest
from kt_harness import Kartothek
from kt_sample_data import COLUMNS, INDEXED, PARTITION_ON, SCHEMA, SPECIAL, sample_table
from kt_support import (
    Predicates,
    canonical_records,
    frame,
    oracle,
    rows_of_kartothek,
    rows_of_table,
    to_driver_predicates,
)

from parquetry import Dataset
from parquetry.store import LocalStore

pytestmark = pytest.mark.kartothek

COUNTRIES = ("DE", "FR", "NL", SPECIAL)
NULLABLE = {"ts", "amount", "flag", "name"}
# kartothek 5.3.0 cannot order object columns holding None (TypeError in filter_array_like)
OBJECT_WITH_NULLS = {"flag", "name"}
OPS = ("==", "!=", "<", "<=", ">", ">=", "in")


def _value(rng: random.Random, column: str, records: list[dict[str, Any]]) -> Any:
    present = [r[column] for r in records if r[column] is not None]
    if column == "amount" and rng.random() < 0.5:
        return round(rng.uniform(-100, 100), 2)
    if column == "day" and rng.random() < 0.3:
        return dt.date(2021, 1, 1) + dt.timedelta(days=rng.randrange(-5, 45))
    return rng.choice(present)


def random_queries(n: int, seed: int, records: list[dict[str, Any]]) -> list[Predicates]:
    rng = random.Random(seed)
    columns = [c for c in COLUMNS if c != "id"]
    queries: list[Predicates] = []
    for _ in range(n):
        dnf: Predicates = []
        for _ in range(rng.randint(1, 3)):
            conj = []
            for column in rng.sample(columns, rng.randint(1, 3)):
                ops = [o for o in OPS if not (o == "!=" and column in NULLABLE)]
                if column in OBJECT_WITH_NULLS:
                    ops = ["==", "in"]
                op = rng.choice(ops)
                if op == "in":
                    value: Any = [_value(rng, column, records) for _ in range(rng.randint(0, 3))]
                else:
                    value = _value(rng, column, records)
                conj.append((column, op, value))
            dnf.append(conj)
        queries.append(dnf)
    return queries


def test_random_queries_agree_across_tools(kartothek: Kartothek, tmp_path: Path) -> None:
    root = tmp_path / "store"
    store = LocalStore(root)
    table = sample_table(120, seed=111, countries=COUNTRIES)
    records = canonical_records(table)
    Dataset.create(
        store, "by_parquetry", table, partition_on=PARTITION_ON, secondary_indices=INDEXED
    )
    queries = random_queries(30, seed=112, records=records)
    reads = [
        {"op": "read", "uuid": uuid, "predicates": to_driver_predicates(q)}
        for uuid in ("by_kartothek", "by_parquetry")
        for q in queries
    ]
    write = {
        "op": "write",
        "uuid": "by_kartothek",
        "frames": [frame(table)],
        "partition_on": PARTITION_ON,
        "secondary_indices": INDEXED,
    }
    results = kartothek.run(root, [write, *reads])[1:]
    by_kartothek = Dataset.open(store, "by_kartothek")
    by_parquetry = Dataset.open(store, "by_parquetry")
    for position, predicates in enumerate(queries):
        want = oracle(records, predicates, COLUMNS, SCHEMA)
        for name, result in (
            ("kartothek on its own dataset", results[position]),
            ("kartothek on parquetry's dataset", results[len(queries) + position]),
        ):
            assert rows_of_kartothek(result, COLUMNS, SCHEMA) == want, (name, predicates)
        for name, ds in (("parquetry on kartothek's", by_kartothek), ("parquetry", by_parquetry)):
            got = rows_of_table(ds.read(predicates=predicates), COLUMNS, SCHEMA)
            assert got == want, (name, predicates)


def test_null_semantics_differ_from_kartothek(kartothek: Kartothek, tmp_path: Path) -> None:
    """Documented difference: kartothek (pandas) lets ``!=`` match nulls; parquetry follows
    Arrow/SQL (a null never satisfies a comparison) and asks for ``is null`` explicitly."""
    root = tmp_path / "store"
    table = sample_table(40, seed=113, countries=("DE",))
    Dataset.create(LocalStore(root), "nulls", table, partition_on=PARTITION_ON)
    predicates = [[("name", "!=", "n3")]]
    result = kartothek.one(
        root, {"op": "read", "uuid": "nulls", "predicates": to_driver_predicates(predicates)}
    )
    records = canonical_records(table)
    nulls = [r for r in records if r["name"] is None]
    assert nulls, "the sample must hold null names"
    non_null = oracle(records, predicates, COLUMNS, SCHEMA)
    assert rows_of_kartothek(result, COLUMNS, SCHEMA) == sorted(
        non_null + oracle(nulls, None, COLUMNS, SCHEMA)
    )
    ds = Dataset.open(LocalStore(root), "nulls")
    assert rows_of_table(ds.read(predicates=predicates), COLUMNS, SCHEMA) == non_null
    either = [[("name", "!=", "n3")], [("name", "is null", None)]]
    assert rows_of_table(ds.read(predicates=either), COLUMNS, SCHEMA) == rows_of_kartothek(
        result, COLUMNS, SCHEMA
    )
