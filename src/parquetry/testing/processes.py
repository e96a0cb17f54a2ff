"""Store races across processes (for ``multiprocessing`` with the spawn start method).

The functions here are importable by a freshly spawned interpreter, which is what a
cross-process race needs: every worker opens the store from its URL, waits at a barrier,
then races.
"""

from __future__ import annotations

import multiprocessing
from multiprocessing.synchronize import Barrier
from typing import Any

from parquetry.errors import AlreadyExists
from parquetry.store import PutMode, open_store

__all__ = ["cas_worker", "create_worker", "run_processes"]


def cas_worker(url: str, key: str, rounds: int, threads: int, barrier: Barrier) -> tuple[int, int]:
    """Run ``threads`` threads, each making ``rounds`` CAS increments of ``key``."""
    from parquetry.testing._conformance_races import cas_increment, race

    store = open_store(url)
    barrier.wait()
    results = race(threads, lambda _i: cas_increment(store, key, rounds))
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return sum(r[0] for r in results), sum(r[1] for r in results)


def create_worker(url: str, key: str, payload: bytes, barrier: Barrier) -> bool:
    """Try to create ``key``; True if this process won."""
    store = open_store(url)
    barrier.wait()
    try:
        store.put(key, payload, mode=PutMode.CREATE)
    except AlreadyExists:
        return False
    return True


def _run(queue: Any, index: int, fn: Any, args: tuple[Any, ...]) -> None:
    try:
        queue.put((index, fn(*args), None))
    except BaseException as exc:  # reported to the parent, which re-raises
        queue.put((index, None, repr(exc)))


def run_processes(fn: Any, args_list: list[tuple[Any, ...]], timeout: float = 120.0) -> list[Any]:
    """Run ``fn(*args, barrier)`` in one spawned process per ``args``; return the results."""
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(len(args_list))
    queue = ctx.Queue()
    procs = [
        ctx.Process(target=_run, args=(queue, i, fn, (*args, barrier)))
        for i, args in enumerate(args_list)
    ]
    for p in procs:
        p.start()
    results: list[Any] = [None] * len(procs)
    try:
        for _ in procs:
            index, value, error = queue.get(timeout=timeout)
            if error is not None:
                raise RuntimeError(f"worker {index} failed: {error}")
            results[index] = value
    finally:
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()
                p.join()
    return results
