"""O(1) planning: opening + planning costs the same few requests for 10 or 10,000 partitions."""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from parquetry.dataset import Dataset, FileDescription
from parquetry.dataset.naming import data_key, make_label
from parquetry.store import MemoryStore, PutMode
from parquetry.testing import CountingStore


def _dataset(store: MemoryStore, uuid: str, n_parts: int) -> None:
    """n_parts partitions (a, b); partition i holds customers 10*i .. 10*i+9.

    Files of equal content share bytes (only the index differs), so this builds fast.
    """
    schema = pa.schema(
        [("a", pa.int64()), ("b", pa.string()), ("customer", pa.int64()), ("v", pa.float64())]
    )
    files = []
    for i in range(n_parts):
        payload = pa.table(
            {
                "customer": pa.array(range(10 * i, 10 * i + 10), pa.int64()),
                "v": pa.array([float(i)] * 10),
            }
        )
        sink = io.BytesIO()
        pq.write_table(payload, sink)
        partition = (("a", i % 100), ("b", f"x{i // 100}"))
        label = make_label(partition, f"{i:032x}")
        key = data_key(uuid, "table", label)
        store.put(key, sink.getvalue(), mode=PutMode.CREATE)
        files.append(
            FileDescription(
                table="table",
                key=key,
                label=label,
                partition=partition,
                rows=10,
                size=len(sink.getvalue()),
                stats={"customer": [10 * i, 10 * i + 9, 0], "v": [float(i), float(i), 0]},
                index_values={"customer": payload["customer"].combine_chunks()},
            )
        )
    Dataset.commit_files(
        store,
        uuid,
        files,
        mode="create",
        schema=schema,
        partition_on=["a", "b"],
        secondary_indices=["customer"],
    )


@pytest.mark.slow
def test_open_and_plan_cost_is_independent_of_partitions() -> None:
    costs = {}
    for n in (10, 10_000):
        inner = MemoryStore()
        _dataset(inner, "big", n)
        store = CountingStore(inner)  # counts misses (the version probe) too
        target = 10 * (n - 3) + 4
        ds = Dataset.open(store, "big")
        plan = ds.plan([[("customer", "==", target)]])
        index_cost = store.total
        assert [f.partition for f in plan.files] == [
            (("a", (n - 3) % 100), ("b", f"x{(n - 3) // 100}"))
        ]
        assert plan.requests == index_cost
        store.reset()
        ds = Dataset.open(store, "big")
        ds.plan([[("a", "==", 7), ("b", "==", "x0")], [("v", "<", 1.0)]])
        costs[n] = (index_cost, store.total)
        rows = ds.read(predicates=[[("customer", "==", target)]])
        assert rows.to_pylist() == [
            {"a": (n - 3) % 100, "b": f"x{(n - 3) // 100}", "customer": target, "v": float(n - 3)}
        ]
    # Format 2: head + next-version probe + one index piece, plus the pointer HEAD on small
    # datasets (kartothek may have rewritten it). The piece's file records name the hit's
    # file: no segment GET (it was the 4th request at 10,000 partitions before them).
    # A small index (100 pairs) is inline in the head: no index GET at all.
    assert costs[10][0] == 3
    assert costs[10_000][0] == 3
    # A plan that needs every file's statistics (the second conjunction) reads every
    # segment at 10,000 partitions (5 of 2,048 entries); a small state's are in the head.
    assert costs[10][1] == 3
    assert costs[10_000][1] == 2 + 5
