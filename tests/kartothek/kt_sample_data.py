"""Deterministic sample tables and queries for the kartothek compatibility tests."""

from __future__ import annotations

import datetime as dt
import random

import pyarrow as pa
from kt_support import Predicates

# A partition value with every character kartothek must quote; "/" is added only where
# parquetry writes (kartothek 5.3.0 itself does not escape "/").
SPECIAL = "x=y%z ü&"
SLASHED = "a/b=c%"

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("country", pa.string()),
        ("year", pa.int64()),
        ("customer", pa.int64()),
        ("day", pa.date32()),
        ("ts", pa.timestamp("us")),
        ("amount", pa.float64()),
        ("flag", pa.bool_()),
        ("name", pa.string()),
        ("small", pa.int32()),
    ]
)
COLUMNS = SCHEMA.names
PARTITION_ON = ["country", "year"]
INDEXED = ["customer", "name"]  # "name" holds nulls: never indexed, never lost


def sample_table(
    n: int,
    *,
    seed: int,
    countries: tuple[str, ...],
    years: tuple[int, ...] = (2020, 2021),
    first_id: int = 0,
) -> pa.Table:
    """``n`` rows covering every (country, year); nulls in ts/amount/flag/name."""
    rng = random.Random(seed)
    base_day = dt.date(2021, 1, 1)
    base_ts = dt.datetime(2021, 1, 1, 0, 0, 0)
    cells = [(c, y) for c in countries for y in years]
    rows = []
    for i in range(n):
        country, year = cells[i % len(cells)]

        def maybe(value: object) -> object:
            return None if rng.random() < 0.15 else value

        rows.append(
            {
                "id": first_id + i,
                "country": country,
                "year": year,
                "customer": rng.randrange(0, 12),
                # non-null: kartothek 5.3.0 cannot compare object date columns holding None
                "day": base_day + dt.timedelta(days=rng.randrange(0, 40)),
                "ts": maybe(
                    base_ts
                    + dt.timedelta(
                        seconds=rng.randrange(0, 40 * 86400), microseconds=rng.randrange(0, 10**6)
                    )
                ),
                "amount": maybe(round(rng.uniform(-100, 100), 3)),
                "flag": maybe(rng.random() < 0.5),
                "name": maybe(f"n{rng.randrange(0, 8)}"),
                "small": rng.randrange(-1000, 1000),
            }
        )
    return pa.Table.from_pylist(rows, schema=SCHEMA)


def queries(special: str) -> list[Predicates]:
    """DNF queries over partition keys, the index, payload columns and mixes of them."""
    return [
        [[("country", "==", "DE")]],
        [[("country", "==", special)], [("year", "==", 2021)]],
        [[("customer", "==", 7)]],
        [[("customer", "in", [1, 2, 3])], [("day", ">=", dt.date(2021, 1, 20))]],
        [[("ts", "<", dt.datetime(2021, 1, 10, 12))]],
        [[("amount", ">", 50.0), ("flag", "==", True)]],
        [[("name", "==", "n3"), ("country", "!=", "DE")]],
        [[("year", ">=", 2021), ("customer", "<=", 5), ("small", ">", 0)]],
        [[("customer", "==", 4), ("country", "==", special)]],
    ]


# queries (by position) touching only partition keys and the index: kartothek's planning must
# prune for them, so the number of planned partitions is checked exactly
PRUNABLE = (0, 1, 2, 6, 8)
NAME_QUERY = 6  # prunable only where "name" is indexed
