"""Compaction outputs written two at a time: one bin's encode overlaps the next bin's reads.

Writing one output has two kinds of work. Reading its inputs (fetch, footer parse and
checks, staging copy) is Python that holds the GIL; decoding the staged row groups and
encoding the output (pyarrow: decode, dictionary choice, compression, statistics) releases
it. Done one bin after the other, one of the two cores idles through each. Here each bin is
written in its own thread, at most :data:`BINS_IN_FLIGHT` at once, and the bins *read* one
after the other in plan order (a :class:`Turn` each): bin N+1 reads its inputs while bin N
finishes its last row groups in pyarrow. Reads are not run side by side because they would
only share the GIL (and hold two bins' inputs at once). Nor are two bins' last row groups
decoded and encoded side by side (:meth:`Turn.finish`): reads take less time than that
pyarrow work, so the next bin would catch up and both would hold their decoded rows and
encoder buffers at once (pyarrow's peak allocation doubled, 57 to 106 MiB, in the bench).

Memory: one more bin in flight is at most what a bin holds while it reads (its inputs read
ahead and the small row groups waiting to be decoded: under one output row group) on top of
what the finishing bin holds.

Failures: a bin that raises cancels the others (a bin waiting for its turn, or reading,
stops at its next input); the outputs are yielded in plan order, so the first failing bin
in plan order is the error raised, after every thread has ended and every output not yet
yielded has been deleted (the caller deletes the ones it was given). Nothing is committed:
the commit happens after the last output, in the caller.
"""

from __future__ import annotations

import contextlib
import threading
from collections import deque
from collections.abc import Callable, Generator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

from parquetry.errors import ParquetryError

__all__ = ["BINS_IN_FLIGHT", "NO_TURN", "Cancelled", "Turn", "write_bins"]

#: Bins written at once (one reading, one finishing: two cores).
BINS_IN_FLIGHT = 2

B = TypeVar("B")
R = TypeVar("R")


class Cancelled(ParquetryError):
    """Another bin of the same compaction failed (internal: never raised to the caller,
    who gets that bin's error)."""


class Turn:
    """A bin's turn to read its inputs; this base class never waits (one bin alone)."""

    def begin(self) -> None:
        """Wait until the bins before this one have read their inputs."""

    def check(self) -> None:
        """Raise :class:`Cancelled` when another bin failed."""

    def end(self) -> None:
        """This bin has read its inputs (idempotent)."""

    def finish(self) -> None:
        """Wait until the bin before this one is written (its decode and encode done)."""


NO_TURN = Turn()


class _Turns:
    """Which bin may read (plan order), and whether the compaction is cancelled."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.next = 0
        self.written: set[int] = set()
        self.cancelled = False

    def write_done(self, index: int) -> None:
        with self.cond:
            self.written.add(index)
            self.cond.notify_all()

    def cancel(self) -> None:
        with self.cond:
            self.cancelled = True
            self.cond.notify_all()


class _BinTurn(Turn):
    def __init__(self, turns: _Turns, index: int):
        self.turns, self.index = turns, index

    def begin(self) -> None:
        t = self.turns
        with t.cond:
            while t.next < self.index and not t.cancelled:
                t.cond.wait()
        self.check()

    def finish(self) -> None:
        t = self.turns
        with t.cond:
            while self.index > 0 and self.index - 1 not in t.written and not t.cancelled:
                t.cond.wait()
        self.check()

    def check(self) -> None:
        if self.turns.cancelled:
            raise Cancelled(f"bin {self.index} of the compaction stopped: another bin failed")

    def end(self) -> None:
        t = self.turns
        with t.cond:
            if t.next <= self.index:
                t.next = self.index + 1
                t.cond.notify_all()


def write_bins(
    bins: Sequence[B],
    write: Callable[[B, Turn], R],
    abandon: Callable[[list[R]], None],
    in_flight: int | None = None,
) -> Generator[R, None, None]:
    """``write(bin, turn)`` of every bin, yielded in order (see the module doc);
    ``abandon(outputs)`` deletes outputs written but not yielded when the pipeline fails;
    ``in_flight``: bins at once (default :data:`BINS_IN_FLIGHT`, read at each call; 1: one
    after the other, on the caller's thread)."""
    if in_flight is None:
        in_flight = BINS_IN_FLIGHT
    if in_flight <= 1 or len(bins) <= 1:
        for b in bins:
            yield write(b, NO_TURN)
        return
    turns = _Turns()

    def run(index: int) -> R:
        turn = _BinTurn(turns, index)
        try:
            return write(bins[index], turn)
        except BaseException:
            turns.cancel()  # the others stop at their next input
            raise
        finally:
            turn.end()
            turns.write_done(index)

    pool = ThreadPoolExecutor(max_workers=in_flight, thread_name_prefix="compact-bin")
    running: deque[Future[R]] = deque()
    submitted = 0
    try:
        while submitted < len(bins) or running:
            while submitted < len(bins) and len(running) < in_flight:
                running.append(pool.submit(run, submitted))
                submitted += 1
            result = running.popleft().result()  # the bin's error, in plan order
            yield result
    except Cancelled:
        # This bin stopped because a later one failed: that failure is the error to raise.
        turns.cancel()
        raise _drain(running, abandon) from None
    except BaseException:
        # Also GeneratorExit (the caller stopped) and KeyboardInterrupt: stop the others,
        # wait for every thread, delete what they wrote.
        turns.cancel()
        _drain(running, abandon)
        raise
    finally:
        pool.shutdown(wait=True)


def _drain(running: deque[Future[R]], abandon: Callable[[list[R]], None]) -> BaseException:
    """Wait for the bins still in flight, delete the outputs of those that finished; the
    first error that is not :class:`Cancelled` (in plan order), or a Cancelled."""
    finished: list[R] = []
    error: BaseException | None = None
    for fut in running:
        exc = fut.exception()  # waits
        if exc is None:
            finished.append(fut.result())
        elif error is None and not isinstance(exc, Cancelled):
            error = exc
    if finished:
        with contextlib.suppress(ParquetryError):  # best effort; GC covers the rest
            abandon(finished)
    return error or Cancelled("the compaction was cancelled")
