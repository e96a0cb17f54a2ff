"""Attacks on commit turns (``<uuid>/_turn.json``): whatever the file holds, a contended
commit lands, in bounded time, without a raw error."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parquetry.dataset import Dataset, turns
from parquetry.dataset.naming import turn_key
from parquetry.store import MemoryStore


@pytest.fixture(autouse=True)
def _forget_contention() -> Iterator[None]:
    turns._contended.clear()
    yield
    turns._contended.clear()


def _append_with_turn_file(body: bytes) -> None:
    store = MemoryStore()
    ds = Dataset.create(store, "c", pa.table({"a": [0]}))
    store.put(turn_key("c"), body)
    # As if this process had just lost a race there: its next commit takes turns.
    turns._contended[(store.url, "c")] = (time.monotonic(), 0.01)
    started = time.monotonic()
    out = ds.append(pa.table({"a": [1]}))
    assert time.monotonic() - started < turns.WAIT_BUDGET_S + 2
    assert out.version == ds.version + 1
    assert sorted(Dataset.open(store, "c").read().column("a").to_pylist()) == [0, 1]


@pytest.mark.parametrize(
    "body",
    [
        b'{"number": 1e400, "owner": "x", "since": 0}',  # int(inf): OverflowError
        b'{"number": -1e400, "owner": "x", "since": 0}',
        b"[" * 100_000 + b"]" * 100_000,  # RecursionError in json.loads
    ],
)
def test_a_hostile_turn_file_never_fails_a_commit(body: bytes) -> None:
    _append_with_turn_file(body)


_json = st.recursive(
    st.none() | st.booleans() | st.floats() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
_claim = st.fixed_dictionaries(
    {},
    optional={"number": _json | st.integers(-5, 5), "owner": _json, "since": _json},
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    body=st.one_of(
        st.binary(max_size=64),
        _claim.map(lambda d: json.dumps(d, allow_nan=True).encode()),
        _json.map(lambda d: json.dumps(d, allow_nan=True).encode()),
    )
)
def test_any_turn_file_content_never_fails_or_blocks_a_commit(body: bytes) -> None:
    turns._contended.clear()
    _append_with_turn_file(body)
