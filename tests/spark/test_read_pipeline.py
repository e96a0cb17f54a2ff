"""The data source's read pipeline without a SparkSession: a task decodes its next file while
Spark takes the current one's batches (``prefetched``), in order, errors unchanged."""

from __future__ import annotations

import threading
from typing import Any

import hypothesis.strategies as hs
import pytest
from hypothesis import given, settings

from parquetry.errors import MetadataCorrupted
from parquetry.spark.reader import prefetched


@settings(max_examples=60, deadline=None)
@given(hs.lists(hs.integers(), max_size=30), hs.integers(0, 4))
def test_prefetched_yields_every_result_once_in_order(items: list[int], ahead: int) -> None:
    calls: list[int] = []

    def double(x: int) -> int:
        calls.append(x)
        return 2 * x

    assert list(prefetched(double, items, ahead)) == [2 * x for x in items]
    assert sorted(calls) == sorted(items)


def test_the_next_file_is_read_while_the_current_one_is_consumed() -> None:
    started = {i: threading.Event() for i in range(3)}

    def read(i: int) -> int:
        started[i].set()
        return i

    results = prefetched(read, [0, 1, 2], ahead=1)
    assert next(results) == 0
    # The consumer still holds item 0; item 1 is already being read on the background thread,
    # item 2 not yet (one ahead: bounded memory).
    assert started[1].wait(timeout=10)
    assert not started[2].is_set()
    assert list(results) == [1, 2]

    # ahead=0 reads strictly on demand (the behaviour before the prefetch).
    for event in started.values():
        event.clear()
    lazy = prefetched(read, [0, 1, 2], ahead=0)
    assert next(lazy) == 0
    assert not started[1].is_set()
    lazy.close()


def test_a_failed_read_raises_its_own_error_and_stopping_early_cancels_the_rest() -> None:
    def read(i: int) -> int:
        if i == 2:
            raise MetadataCorrupted(f"data file f{i} is missing", key=f"f{i}")
        return i

    results = prefetched(read, [0, 1, 2, 3], ahead=1)
    assert [next(results), next(results)] == [0, 1]
    with pytest.raises(MetadataCorrupted, match="f2 is missing"):
        next(results)

    calls: list[Any] = []
    gate = threading.Event()

    def slow(i: int) -> int:
        calls.append(i)
        gate.wait(timeout=10)
        return i

    early = prefetched(slow, list(range(50)), ahead=2)
    gate.set()
    assert next(early) == 0
    early.close()  # like a LIMIT: Spark stops reading the task
    assert len(calls) <= 4  # item 0, the two ahead, at most one more racing the close
