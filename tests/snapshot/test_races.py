"""Concurrent overwrites of one snapshot, with concurrent ``repair()`` and garbage
collection (``parquetry gc``) calls: the snapshot always ends at the last acknowledged
write or a newer one, losers get ``CommitConflict``, and the key never needs a hand
(issue 11).

Each writer writes a table holding its own id, so the final content names the write that
won. The oracle: the winner was attempted, reads whole, and no acknowledged write started
after the winner's writer had returned (that write's switch came after the winner's).
"""

from __future__ import annotations

import itertools
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import pyarrow as pa
import pytest
from snapshot_helpers import keys_under

from parquetry import CommitConflict, DatasetIncomplete, ParquetDatasetStore, ParquetryError
from parquetry.errors import AlreadyExists
from parquetry.store import ObjectMeta, PutMode, Store
from parquetry.store.wrappers import WrapperStore
from parquetry.testing import FaultyStore

KEY = "race/ds"


def _table(write: int) -> pa.Table:
    # Sizes 1..5 rows with max_rows_per_file=2: one part (data.parquet) or several, so
    # switches between different part layouts race too.
    rows = write % 5 + 1
    return pa.table({"write": [write] * rows, "row": list(range(rows))})


class Jitter(WrapperStore):
    """Sleeps up to a millisecond before each mutating call, so that threads interleave
    inside switches (without it the GIL runs most writes one after the other)."""

    def _pause(self) -> None:
        time.sleep(random.random() / 1000)

    contended = 0  # journal creations that found another journal: the lock was contended

    def _put(
        self, key: str, data: bytes | memoryview, mode: PutMode, expected_version: str | None
    ) -> ObjectMeta:
        self._pause()
        try:
            return self.inner._put(key, data, mode, expected_version)
        except AlreadyExists:
            self.contended += 1
            raise

    def _delete(self, key: str, missing_ok: bool) -> None:
        self._pause()
        self.inner._delete(key, missing_ok)

    def _move(self, src: str, dst: str) -> None:
        self._pause()
        self.inner._move(src, dst)

    def _head(self, key: str) -> ObjectMeta:
        self._pause()
        return self.inner._head(key)


@dataclass
class _Log:
    clock: itertools.count[int] = field(default_factory=itertools.count)
    lock: threading.Lock = field(default_factory=threading.Lock)
    # write id -> (start tick, end tick, acknowledged)
    writes: dict[int, tuple[int, int, bool]] = field(default_factory=dict)
    unexpected: list[BaseException] = field(default_factory=list)

    def tick(self) -> int:
        with self.lock:
            return next(self.clock)


def _race(
    store: Store,
    writers: int,
    *,
    repair_store: Store | None = None,
    writes_each: int = 2,
    repairers: int = 2,
    allowed: tuple[type[BaseException], ...] = (CommitConflict,),
) -> _Log:
    log = _Log()
    done = threading.Event()
    # Released together: on a loaded machine a writer started first could otherwise finish
    # before the others start, and the race (jitter.contended > 0) would not happen.
    released = threading.Barrier(writers)

    def write(n: int) -> None:
        pds = ParquetDatasetStore(store, max_rows_per_file=2, max_workers=2)
        released.wait()
        for j in range(writes_each):
            write_id = n * 100 + j
            start = log.tick()
            try:
                pds.write_dataset(_table(write_id), KEY, overwrite=True)
                ok = True
            except allowed:
                ok = False
            except BaseException as exc:  # reported by the test
                log.unexpected.append(exc)
                ok = False
            log.writes[write_id] = (start, log.tick(), ok)

    def repair(n: int) -> None:
        pds = ParquetDatasetStore(repair_store or store)
        while not done.is_set():
            try:
                if n % 2:
                    # parquetry gc --retention 0, under the switch lock: stray files go,
                    # staged writes younger than the switch lease stay.
                    pds.collect_garbage(KEY, retention=0)
                    time.sleep(0.05)  # it holds the lock: back to back, writers would starve
                else:
                    pds.repair(KEY)
            except allowed:
                pass
            except BaseException as exc:  # reported by the test
                log.unexpected.append(exc)

    threads = [threading.Thread(target=write, args=(n + 1,)) for n in range(writers)]
    helpers = [threading.Thread(target=repair, args=(n,)) for n in range(repairers)]
    for t in helpers + threads:
        t.start()
    for t in threads:
        t.join()
    done.set()
    for t in helpers:
        t.join()
    return log


def _check_winner(store: Store, log: _Log) -> int:
    pds = ParquetDatasetStore(store)
    try:
        table = pds.read_dataset(KEY)
    except DatasetIncomplete:
        pds.repair(KEY)  # a writer that failed mid-switch released its journal
        table = pds.read_dataset(KEY)
    ids = set(table.column("write").to_pylist())
    assert len(ids) == 1, f"a mix of writes: {table}"
    (winner,) = ids
    assert table.equals(_table(winner)), table
    if winner == 0:  # the initial write: only if nothing was acknowledged
        acknowledged = [w for w, (_, _, ok) in log.writes.items() if ok]
        assert not acknowledged, f"initial data survived acknowledged writes {acknowledged}"
        return winner
    assert winner in log.writes, f"unknown winner {winner}"
    _, winner_end, _ = log.writes[winner]
    newer = [w for w, (start, _, ok) in log.writes.items() if ok and start > winner_end]
    assert not newer, f"write {winner} won over writes acknowledged after it: {newer}"
    return winner


def _then_usable(store: Store) -> None:
    pds = ParquetDatasetStore(store, max_rows_per_file=2)
    pds.write_dataset(_table(5), KEY, overwrite=True)
    pds.repair(KEY)
    assert pds.read_dataset(KEY).equals(_table(5))


def _setup(store: Store) -> None:
    ParquetDatasetStore(store, max_rows_per_file=2).write_dataset(_table(0), KEY)


@pytest.mark.parametrize("writers", [4, 8, 16])
def test_concurrent_overwrites_and_repairs(any_store: Store, writers: int) -> None:
    _setup(any_store)
    jitter = Jitter(any_store)
    log = _race(jitter, writers)
    assert not log.unexpected, log.unexpected
    assert any(ok for _, _, ok in log.writes.values()), "no write was acknowledged"
    assert jitter.contended > 0, "no switch met another: the test did not race"
    _check_winner(any_store, log)
    _then_usable(any_store)
    # Losers removed their staged parts; the switch leaves nothing else behind.
    assert keys_under(any_store, KEY) == [
        f"{KEY}/_SUCCESS",
        f"{KEY}/data.parquet",
        f"{KEY}/manifest.json",
    ]


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("kind", ["memory", "local", "s3"])
def test_concurrent_overwrites_with_a_fault(
    store_factory: Callable[[str], Store], kind: str, seed: int
) -> None:
    rng = random.Random(seed)
    inner = store_factory(kind)
    _setup(inner)
    jitter = Jitter(inner)
    # Writers go through the faulty store, repairs do not: the fault hits a write.
    faulty = FaultyStore(jitter, fail_on=rng.randint(1, 150), after=rng.random() < 0.5)
    log = _race(faulty, 8, repair_store=jitter, allowed=(ParquetryError,))
    assert not log.unexpected, log.unexpected
    assert faulty.failed
    _check_winner(inner, log)
    _then_usable(inner)


def test_a_switching_write_makes_others_conflict(memory_store: Store) -> None:
    """A writer that finds another write switching gets CommitConflict naming the key."""
    _setup(memory_store)
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    class Slow(FaultyStore):
        def _delete(self, key: str, missing_ok: bool) -> None:
            if key.endswith("_SUCCESS") and threading.current_thread().name == "first":
                barrier.wait(120)  # the first writer holds the switch ...
                barrier.wait(120)  # ... until the second one has tried
            self.inner._delete(key, missing_ok)

    store = Slow(memory_store)

    def first() -> None:
        ParquetDatasetStore(store).write_dataset(_table(1), KEY, overwrite=True)

    thread = threading.Thread(target=first, name="first")
    thread.start()
    barrier.wait(120)
    try:
        ParquetDatasetStore(store).write_dataset(_table(2), KEY, overwrite=True)
    except CommitConflict as exc:
        errors.append(exc)
    finally:
        barrier.wait(120)
        thread.join()
    assert len(errors) == 1
    assert KEY in str(errors[0])
    assert ParquetDatasetStore(memory_store).read_dataset(KEY).equals(_table(1))
    assert keys_under(memory_store, f"{KEY}/_staging") == []
