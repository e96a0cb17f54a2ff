"""Small helpers shared by the dataset tests."""

from __future__ import annotations

import pyarrow as pa


def sample_table(n: int = 40, offset: int = 0) -> pa.Table:
    ids = list(range(offset, offset + n))
    return pa.table(
        {
            "country": [["DE", "FR", "NL", "a/b=c%"][i % 4] for i in ids],
            "day": pa.array([i % 3 for i in ids], pa.int32()),
            "customer": pa.array([(i * 7919) % 97 if i % 11 else None for i in ids], pa.int64()),
            "value": [float(i) for i in ids],
            "name": [f"n{i}" for i in ids],
        }
    )


def sort_rows(table: pa.Table) -> list[dict[str, object]]:
    return sorted(table.to_pylist(), key=repr)
