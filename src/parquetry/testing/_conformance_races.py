"""Conformance checks for concurrent conditional writes and Parquet reads over ranged gets."""

from __future__ import annotations

import io
import threading
from collections.abc import Callable
from typing import Any

import pytest

from parquetry.errors import AlreadyExists, PreconditionFailed
from parquetry.store import Capability, ObjectMeta, PutMode, Store
from parquetry.testing._conformance_writes import need
from parquetry.testing.stores import CountingStore

__all__ = ["RaceChecks", "cas_increment", "race"]


def race(n: int, fn: Callable[[int], Any]) -> list[Any]:
    """Run ``fn(0..n-1)`` on ``n`` threads released together; return results or exceptions."""
    barrier = threading.Barrier(n)
    results: list[Any] = [None] * n

    def run(i: int) -> None:
        barrier.wait()
        try:
            results[i] = fn(i)
        except BaseException as exc:  # returned to the caller, who asserts on it
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def cas_increment(store: Store, key: str, rounds: int) -> tuple[int, int]:
    """Increment the integer at ``key`` ``rounds`` times by read-modify-compare-and-swap.

    The version is read *before* the value: if the value changes in between, the swap
    fails and is retried. Returns (successful swaps, lost swaps).
    """
    won = lost = 0
    while won < rounds:
        version = store.head(key).version
        assert version is not None
        value = int(store.get(key))
        try:
            store.put(key, str(value + 1).encode(), mode=PutMode.UPDATE, expected_version=version)
        except PreconditionFailed:
            lost += 1
            continue
        won += 1
    return won, lost


class RaceChecks:
    """16 threads racing on one key; a Parquet file read through ranged gets."""

    race_threads: int
    cas_rounds: int

    def test_create_race_has_one_winner(self, store: Store) -> None:
        need(store, Capability.CONDITIONAL_CREATE)
        for round_ in range(3):
            key = f"race/{round_}"

            def create(i: int, key: str = key) -> ObjectMeta:
                return store.put(key, f"writer-{i}".encode(), mode=PutMode.CREATE)

            results = race(self.race_threads, create)
            winners = [i for i, r in enumerate(results) if not isinstance(r, BaseException)]
            losers = [r for r in results if isinstance(r, BaseException)]
            assert len(winners) == 1, results
            assert all(isinstance(r, AlreadyExists) for r in losers), losers
            assert store.get(key) == f"writer-{winners[0]}".encode()
            assert results[winners[0]].version == store.head(key).version

    def test_cas_counter_race(self, store: Store) -> None:
        need(store, Capability.COMPARE_AND_SWAP)
        store.put("counter", b"0")
        results = race(
            self.race_threads, lambda _i: cas_increment(store, "counter", self.cas_rounds)
        )
        errors = [r for r in results if isinstance(r, BaseException)]
        assert not errors, errors
        swaps = sum(won for won, _ in results)
        assert swaps == self.race_threads * self.cas_rounds
        assert int(store.get("counter")) == swaps

    def test_parquet_through_open(self, store: Store, writer: Store) -> None:
        pa = pytest.importorskip("pyarrow")
        pq = pytest.importorskip("pyarrow.parquet")
        n = 200_000
        table = pa.table(
            {
                "a": pa.array(range(n), pa.int64()),
                "b": pa.array([float(i) * 0.5 for i in range(n)]),
                "c": pa.array([f"s{i % 977}" for i in range(n)]),
            }
        )
        buf = io.BytesIO()
        pq.write_table(table, buf, row_group_size=n // 2, compression="none")
        writer.put("pq/file.parquet", buf.getvalue())

        whole = pq.ParquetFile(store.open("pq/file.parquet")).read()
        assert whole.equals(table)

        counting = CountingStore(store)
        pf = pq.ParquetFile(counting.open("pq/file.parquet"))
        md = pf.metadata
        column_bytes = sum(
            md.row_group(g).column(0).total_compressed_size for g in range(md.num_row_groups)
        )
        footer = md.serialized_size + 8
        read = pf.read(columns=["a"])
        assert read.column("a").equals(table.column("a"))
        assert counting.counts["get"] == 0  # only ranged reads
        assert counting.bytes_read <= 1.2 * column_bytes + footer, (
            counting.bytes_read,
            column_bytes,
            footer,
        )
        assert counting.bytes_read < 0.5 * len(buf.getvalue())
