"""Turns (issue 13, commit latency under contention): the writer that waited longest goes next.

The claim in ``_turn.json`` is advisory: a waiter respects an older writer's claim only for a
bounded time, never replaces the claim of a writer that is ahead with a taken number, and no
failure reading or writing it fails a commit or loses a row.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import parquetry.dataset.turns as turns
from parquetry.dataset import Dataset
from parquetry.dataset.naming import turn_key, version_key
from parquetry.dataset.turns import Turn
from parquetry.errors import StoreUnavailable
from parquetry.store import LocalStore, MemoryStore, Store
from parquetry.store.base import ObjectMeta, PutMode
from parquetry.store.wrappers import WrapperStore

UUID = "turns"


def _row(value: int) -> pa.Table:
    return pa.table({"p": [value % 3], "k": [value % 13], "w": [value]})


def _create(store: Store) -> None:
    Dataset.create(store, UUID, _row(-1), partition_on=["p"], secondary_indices=["k"])


def _claim(store: Store, number: int, owner: str, since: float) -> None:
    body = {"number": number, "owner": owner, "since": since}
    store.put(turn_key(UUID), json.dumps(body).encode())


@pytest.fixture(autouse=True)
def _forget_contention() -> Iterator[None]:
    """Contention is remembered per process: every test starts without it."""
    turns._contended.clear()
    yield
    turns._contended.clear()


class _Logged(WrapperStore):
    """Logs this writer's requests (rivals use the inner store)."""

    def __init__(self, inner: Store):
        super().__init__(inner)
        self.log: list[tuple[str, str]] = []

    def _get(self, key: str) -> bytes:
        self.log.append(("get", key))
        return super()._get(key)

    def _put(
        self, key: str, data: bytes | memoryview, mode: PutMode, expected: str | None
    ) -> ObjectMeta:
        self.log.append(("put", key))
        return super()._put(key, data, mode, expected)


class _Rival(WrapperStore):
    @property
    def url(self) -> str:
        return self.inner.url + "#rival"


def test_an_uncontended_writer_never_touches_the_turn(tmp_path: Path) -> None:
    inner = LocalStore(tmp_path, fsync=False)
    _create(inner)
    writer = _Logged(inner)
    for i in range(3):
        Dataset.open(writer, UUID).append(_row(i))
    assert not [k for _, k in writer.log if k == turn_key(UUID)]
    assert not inner.exists(turn_key(UUID))


def test_a_waiter_lets_an_older_claimant_take_its_number(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A contended writer about to try version 1, held by an older writer, waits until the
    older one committed it and takes version 2: it never attempts the held number."""
    # However slow the rival is on a loaded machine, the claim is respected meanwhile.
    monkeypatch.setattr(turns, "HOLD_MIN_S", 60.0)
    monkeypatch.setattr(turns, "HOLD_MAX_S", 60.0)
    inner = LocalStore(tmp_path, fsync=False)
    _create(inner)
    _claim(inner, 1, "older", time.time() - 60)
    Turn(inner, UUID).contended(0.2)  # this process lost a race here a moment ago

    def rival() -> None:
        time.sleep(0.3)
        # The claimant (it commits the version it claimed without checking turns: its
        # store's url differs, so this process's memory of contention does not apply).
        Dataset.open(_Rival(inner), UUID).append(_row(100))

    thread = threading.Thread(target=rival)
    writer = _Logged(inner)
    thread.start()
    started = time.monotonic()
    committed = Dataset.open(writer, UUID).append(_row(7))
    thread.join()
    assert committed.version == 2
    assert time.monotonic() - started >= 0.25
    puts = [k for op, k in writer.log if op == "put" and "/_versions/0" in k]
    assert puts == [version_key(UUID, 2)]
    # It claimed version 2 once it was next, and the data is whole.
    assert json.loads(inner.get(turn_key(UUID)))["number"] == 2
    assert sorted(Dataset.open(inner, UUID).read()["w"].to_pylist()) == [-1, 7, 100]


def test_a_dead_claimants_turn_is_respected_only_for_a_bounded_time(tmp_path: Path) -> None:
    """The claimant was killed: its claim delays a waiter by at most the hold, once."""
    inner = LocalStore(tmp_path, fsync=False)
    _create(inner)
    _claim(inner, 1, "killed", time.time() - 60)
    Turn(inner, UUID).contended(0.001)  # hold: HOLD_MIN_S
    started = time.monotonic()
    committed = Dataset.open(inner, UUID).append(_row(7))
    took = time.monotonic() - started
    assert committed.version == 1
    assert turns.HOLD_MIN_S <= took < turns.HOLD_MIN_S + 5
    assert json.loads(inner.get(turn_key(UUID)))["owner"] != "killed"


def test_a_younger_claim_is_replaced_and_a_claim_ahead_is_kept() -> None:
    store = MemoryStore()
    _create(store)
    old, young = Turn(store, UUID), Turn(store, UUID)
    old.since, young.since = 1.0, 2.0
    old.waiting = young.waiting = True
    assert young.check(1) is False  # claims 1
    assert json.loads(store.get(turn_key(UUID)))["owner"] == young.owner
    assert old.check(1) is False  # older: replaces the younger claim
    assert json.loads(store.get(turn_key(UUID)))["owner"] == old.owner
    young.attempt_s = 0.0  # hold HOLD_MIN_S: it waits that long (version 1 never lands)
    started = time.monotonic()
    assert young.check(1) is True
    assert time.monotonic() - started >= turns.HOLD_MIN_S * 0.9
    # A writer that is behind (version 0 exists, the claim is on 1) keeps the claim.
    behind = Turn(store, UUID)
    behind.waiting = True
    assert behind.check(0) is True
    assert json.loads(store.get(turn_key(UUID)))["owner"] == old.owner
    # A garbled claim is replaced, a claim far ahead of every version too.
    store.put(turn_key(UUID), b"{not json")
    assert behind.check(1) is False
    _claim(store, 99, "ahead", 0.0)
    assert behind.check(1) is False
    assert json.loads(store.get(turn_key(UUID)))["owner"] == behind.owner
    # A commit that ends without its number gives its claim back.
    behind.release()
    assert not store.exists(turn_key(UUID))


def test_a_writer_waits_for_turns_only_within_its_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """Claims that keep changing (claimants losing to writers that do not take turns) delay
    a commit by at most WAIT_BUDGET_S in all, then it goes without waiting."""
    monkeypatch.setattr(turns, "WAIT_BUDGET_S", 0.3)
    monkeypatch.setattr(turns, "HOLD_MIN_S", 0.2)
    store = MemoryStore()
    _create(store)
    young = Turn(store, UUID)
    young.waiting, young.attempt_s = True, 0.0
    waits = 0
    for number in range(1, 10):
        _claim(store, number, f"older-{number}", 0.0)
        waits += young.check(number)
    assert waits == 2  # 0.2 s each: the budget of 0.3 s is used up after the second
    assert young.check(10) is False
    assert not young.active


@settings(max_examples=40, deadline=None)
@given(ages=st.lists(st.floats(0, 100, allow_nan=False), min_size=1, max_size=6, unique=True))
def test_racing_claims_converge_to_the_oldest_waiter(ages: list[float]) -> None:
    """Whatever order waiters check a number in, once each checked, the oldest holds it
    (every younger one that checks again waits)."""
    store = MemoryStore()
    writers = []
    for age in ages:
        t = Turn(store, UUID)
        t.since, t.waiting = age, True
        writers.append(t)
    for t in writers:
        t._older_holds(1)
    oldest = min(writers, key=lambda t: t.since)
    assert json.loads(store.get(turn_key(UUID)))["owner"] == oldest.owner
    for t in writers:
        assert t._older_holds(1) == ("go" if t is oldest else "wait")


@pytest.mark.parametrize("fail_on", range(1, 16))
def test_a_failing_turn_request_never_fails_a_commit(fail_on: int) -> None:
    """FaultyStore fails the Nth request on the turn: the commit goes through regardless."""
    inner = MemoryStore()
    _create(inner)
    _claim(inner, 1, "killed", time.time() - 60)
    Turn(inner, UUID).contended(0.001)
    # Only the turn's requests count (a failure elsewhere is the fault suite's business).
    store = _TurnFaults(inner, fail_on)
    committed = Dataset.open(store, UUID).append(_row(7))
    assert committed.version == 1
    assert sorted(Dataset.open(inner, UUID).read()["w"].to_pylist()) == [-1, 7]


class _TurnFaults(WrapperStore):
    """Fails the ``fail_on``-th request on the turn object (counted here)."""

    def __init__(self, inner: Store, fail_on: int):
        super().__init__(inner)
        self.fail_on = fail_on
        self.seen = 0

    def _fault(self, key: str) -> None:
        if key == turn_key(UUID):
            self.seen += 1
            if self.seen == self.fail_on:
                raise StoreUnavailable(f"injected failure on {key}", key=key)

    def _get(self, key: str) -> bytes:
        self._fault(key)
        return super()._get(key)

    def _head(self, key: str) -> ObjectMeta:
        self._fault(key)
        return super()._head(key)

    def _put(
        self, key: str, data: bytes | memoryview, mode: PutMode, expected: str | None
    ) -> ObjectMeta:
        self._fault(key)
        return super()._put(key, data, mode, expected)

    def _delete(self, key: str, missing_ok: bool) -> None:
        self._fault(key)
        super()._delete(key, missing_ok)
