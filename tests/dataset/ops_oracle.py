"""Oracles shared by the table-operation tests (delete/update/upsert/compact).

- :func:`rebuilt_index_pairs`: a secondary index computed from the data files themselves,
  to compare with ``Dataset.index_pairs`` after an operation (indices stay exact).
- :func:`orphan_data_files`: data files in the store that no version references (an
  operation that failed or lost must leave none behind, its intents are abandoned).
- :func:`rows`: a table as a multiset of rows, order-free.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from parquetry.dataset import Dataset
from parquetry.store import Store

__all__ = ["assert_index_exact", "orphan_data_files", "rebuilt_index_pairs", "rows"]


def rows(table: pa.Table, names: list[str] | None = None) -> Counter[tuple[Any, ...]]:
    names = names or table.schema.names
    return Counter(zip(*(table.column(n).to_pylist() for n in names), strict=True))


def rebuilt_index_pairs(ds: Dataset, column: str) -> set[tuple[Any, str]]:
    """``(value, label)`` for every non-null value of ``column`` in every file of ``ds``."""
    out: set[tuple[Any, str]] = set()
    for planned in ds.plan(None).files:
        values = pc.unique(ds.read_file(planned, [column]).column(column).drop_null())
        out |= {(v, planned.label) for v in values.to_pylist()}
    return out


def assert_index_exact(ds: Dataset, column: str) -> None:
    pairs = ds.index_pairs(column)
    got = set(
        zip(pairs.column("value").to_pylist(), pairs.column("label").to_pylist(), strict=True)
    )
    assert got == rebuilt_index_pairs(ds, column), f"index on {column!r} is not exact"


def orphan_data_files(store: Store, uuid: str) -> set[str]:
    """Parquet files under ``uuid`` that no version of the dataset references."""
    latest = Dataset.open(store, uuid)
    referenced: set[str] = set()
    for n in range(latest.version + 1):
        doc = Dataset.open(store, uuid, version=n).document
        referenced |= {key for files in doc.partitions.values() for key in files.values()}
    table = latest.document.tables[0]
    present = {m.key for m in store.list(f"{uuid}/{table}/") if m.key.endswith(".parquet")}
    return present - referenced
