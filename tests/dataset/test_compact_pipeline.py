"""Compaction bins written two at a time (compact_pipeline.py): outputs in plan order, reads
one bin after the other, and a failure in one bin while another is in flight surfaces as
that bin's error, with nothing committed, no output left and no thread left running."""

from __future__ import annotations

import threading
import time
from typing import Any

import pyarrow as pa
import pytest

from parquetry.dataset import Dataset
from parquetry.dataset.compact_pipeline import Cancelled, Turn, write_bins
from parquetry.errors import InvalidFormat, MetadataCorrupted, ParquetryError
from parquetry.store import MemoryStore
from parquetry.testing.stores import FaultyStore, InjectedFault


def _bin_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("compact-bin")]


class _Log:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.events: list[tuple[str, int]] = []

    def note(self, what: str, i: int) -> None:
        with self.lock:
            self.events.append((what, i))


def test_outputs_in_plan_order_and_reads_one_after_the_other() -> None:
    log = _Log()

    def write(i: int, turn: Turn) -> int:
        turn.begin()
        log.note("read", i)
        time.sleep(0.01 * (3 - i % 3))  # later bins would overtake earlier ones
        log.note("read-end", i)
        turn.end()
        time.sleep(0.01 * (i % 2))  # the finish: overlaps the next bin's read
        return i * 10

    assert list(write_bins(range(6), write, lambda _: None)) == [0, 10, 20, 30, 40, 50]
    reads = [e for e in log.events if e[0].startswith("read")]
    # Each bin's read starts after the previous bin's read ended, in plan order.
    assert reads == [(w, i) for i in range(6) for w in ("read", "read-end")]
    assert not _bin_threads()


@pytest.mark.parametrize("in_flight", [2, 3])
def test_a_later_bin_failing_while_an_earlier_one_finishes(in_flight: int) -> None:
    """Bin 1 fails while bin 0 is still finishing: bin 0's output is yielded (the caller
    deletes it), bin 1's error is raised, the bins after it never write, no thread is left."""
    failed = threading.Event()
    written: list[int] = []
    abandoned: list[int] = []

    def write(i: int, turn: Turn) -> int:
        turn.begin()
        turn.end()
        if i == 1:
            failed.set()
            raise InvalidFormat("data file f1 is damaged", key="f1")
        if i == 0:
            assert failed.wait(5)  # still finishing (no more reads) when bin 1 fails
            time.sleep(0.02)
        else:
            turn.check()  # a bin after the failing one stops here (or at begin)
        written.append(i)
        return i

    got: list[int] = []

    def consume() -> None:
        for out in write_bins(range(5), write, abandoned.extend, in_flight=in_flight):
            got.append(out)

    with pytest.raises(InvalidFormat, match="f1"):
        consume()
    assert got == [0]
    assert written == [0]
    assert abandoned == []
    assert not _bin_threads()


def test_an_earlier_bin_cancelled_by_a_later_failure_raises_the_later_error() -> None:
    """Bin 1 fails before bin 0 has read everything (e.g. opening its output failed):
    bin 0 stops at its next input with Cancelled, and bin 1's error is what the caller
    gets, not the Cancelled of the bin it sees first."""
    failed = threading.Event()

    def write(i: int, turn: Turn) -> int:
        if i == 1:
            failed.set()
            raise InvalidFormat("data file f1 is damaged", key="f1")
        turn.begin()
        assert failed.wait(5)
        time.sleep(0.02)
        turn.check()  # bin 0's next input
        return i

    with pytest.raises(InvalidFormat, match="f1"):
        list(write_bins(range(3), write, lambda _: None))
    assert not _bin_threads()


def test_outputs_finished_but_not_yielded_are_abandoned() -> None:
    """The caller stops (an error in its own code) while the next bin has finished: that
    bin's output is deleted by the pipeline, the caller's error propagates."""
    second_done = threading.Event()
    abandoned: list[int] = []

    def write(i: int, turn: Turn) -> int:
        turn.begin()
        turn.end()
        if i == 1:
            second_done.set()
        return i

    gen = write_bins(range(4), write, abandoned.extend)
    assert next(gen) == 0
    assert second_done.wait(5)
    time.sleep(0.05)  # bin 1's thread returns its output
    gen.close()  # GeneratorExit at the yield: bin 1 finished, never yielded
    assert abandoned == [1]
    assert not _bin_threads()


def test_a_bin_waiting_for_its_turn_is_cancelled() -> None:
    release = threading.Event()
    outcomes: dict[int, str] = {}

    def write(i: int, turn: Turn) -> int:
        if i == 0:
            turn.begin()
            assert release.wait(5)
            raise MetadataCorrupted("data file f0 is missing", key="f0")
        try:
            turn.begin()  # waits for bin 0, which fails
        except Cancelled:
            outcomes[i] = "cancelled"
            raise
        outcomes[i] = "read"
        return i

    gen = write_bins(range(2), write, lambda _: None)
    threading.Timer(0.05, release.set).start()
    with pytest.raises(MetadataCorrupted, match="f0"):
        list(gen)
    assert outcomes == {1: "cancelled"}
    assert not _bin_threads()


def test_cancelled_is_a_parquetry_error() -> None:
    assert issubclass(Cancelled, ParquetryError)


# --- real compactions ----------------------------------------------------------------------


def _rows(start: int, n: int = 40) -> pa.Table:
    ids = range(start, start + n)
    return pa.table(
        {
            "p": pa.array([i % 4 for i in ids], pa.int64()),
            "id": pa.array(ids, pa.int64()),
            "s": [f"v{i % 3}" for i in ids],
        }
    )


def _dataset(store: Any) -> Dataset:
    ds = Dataset.create(store, "c", _rows(0), partition_on=["p"])
    for k in range(1, 4):
        ds = ds.append(_rows(40 * k))
    return ds


def _data_keys(store: Any) -> set[str]:
    return {m.key for m in store.list("c/table") if m.key.endswith(".parquet")}


@pytest.mark.parametrize("mode", ["auto", True, False])
def test_compaction_of_several_bins_reads_as_before(mode: Any) -> None:
    store = MemoryStore()
    ds = _dataset(store)
    before = sorted(ds.read().to_pylist(), key=lambda r: r["id"])
    out = ds.compact(target_file_size=1 << 20, binary_copy=mode)
    assert out is not None
    assert len(out.document.files) == 4  # one output per partition: four bins
    assert sorted(out.read().to_pylist(), key=lambda r: r["id"]) == before
    assert not _bin_threads()


@pytest.mark.parametrize("mode", ["auto", True, False])
def test_a_damaged_input_in_a_later_bin_commits_nothing(mode: Any) -> None:
    """The third bin's input is garbage while other bins are in flight: InvalidFormat
    naming it, the version unchanged, every output deleted, no thread left running."""
    store = MemoryStore()
    ds = _dataset(store)
    keys_before = _data_keys(store)
    plan = ds.compact(target_file_size=1 << 20, dry_run=True)
    victim = plan.bins[2].files[1]
    store.put(victim.key, b"PAR1 this is not a parquet file PAR1")
    with pytest.raises(InvalidFormat) as err:
        ds.compact(target_file_size=1 << 20, binary_copy=mode)
    assert victim.key in str(err.value)
    assert Dataset.open(store, "c").version == ds.version
    assert _data_keys(store) == keys_before
    assert not _bin_threads()


def test_a_store_failure_in_a_later_bin_commits_nothing() -> None:
    """A GET failing in the second bin while the first is finishing: the store's error
    surfaces, nothing is committed, the first bin's output is deleted."""
    inner = MemoryStore()
    ds = _dataset(inner)
    keys_before = _data_keys(inner)
    plan = ds.compact(target_file_size=1 << 20, dry_run=True)
    victim = plan.bins[1].files[0].key

    def error(kind: str, key: str) -> BaseException:
        return InjectedFault(f"injected {kind} of {key}")

    class OneKeyFaulty(FaultyStore):
        def _get(self, key: str) -> bytes:
            if key == victim:
                raise error("get", key)
            return self.inner._get(key)

    store = OneKeyFaulty(inner)
    with pytest.raises(InjectedFault, match=victim):
        Dataset.open(store, "c").compact(target_file_size=1 << 20)
    assert Dataset.open(inner, "c").version == ds.version
    assert _data_keys(inner) == keys_before
    assert not _bin_threads()


def test_the_callers_error_after_the_first_output_deletes_every_output() -> None:
    """The progress callback raises after the first output (the next bin is in flight):
    its error propagates, nothing is committed, no output is left, no thread runs."""
    store = MemoryStore()
    ds = _dataset(store)
    keys_before = _data_keys(store)

    class Stop(Exception):
        pass

    def progress(done: int, total: int) -> None:
        if done:
            raise Stop

    with pytest.raises(Stop):
        ds.compact(target_file_size=1 << 20, progress=progress)
    assert Dataset.open(store, "c").version == ds.version
    assert _data_keys(store) == keys_before
    assert not _bin_threads()


def test_one_bin_in_flight_writes_on_the_callers_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """``BINS_IN_FLIGHT = 1`` (read at each call) switches the pipeline off."""
    from parquetry.dataset import compact_pipeline

    monkeypatch.setattr(compact_pipeline, "BINS_IN_FLIGHT", 1)
    threads: set[str] = set()

    def write(i: int, turn: Turn) -> int:
        threads.add(threading.current_thread().name)
        return i

    assert list(write_bins(range(3), write, lambda _: None)) == [0, 1, 2]
    assert threads == {threading.current_thread().name}
