"""The operations writers perform, each logged as begun and then acknowledged.

One function per kind of write (Dataset append and update, snapshot overwrite, Dataset GC,
snapshot repair, ``parquetry repair``). The kill harness runs them in a child process that
may die at any moment; the race harness runs many of them at once. An ``ack`` is logged only
after the operation returned: exactly what a caller of the library would have been told.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from adversarial.harness.records import (
    ROWS,
    UPDATE_PARTITION_BASE,
    AckLog,
    append_rows,
    snapshot_rows,
    update_rows,
)
from adversarial.harness.targets import StoreTarget
from parquetry.dataset import Dataset
from parquetry.errors import CommitConflict
from parquetry.snapshot import ParquetDatasetStore
from parquetry.store import ObjectMeta, PutMode, Store, WrapperStore

__all__ = [
    "DATASET",
    "SETUP_WRITER",
    "SNAPSHOT",
    "WORKLOADS",
    "Workload",
    "op_append",
    "op_gc",
    "op_snapshot",
    "op_update",
    "writer_loop",
]

DATASET = "ds"
SNAPSHOT = "snap"
#: Writer ids of the parent's setup writes (children and race writers count from 0).
SETUP_WRITER = 900
INTERRUPTED_WRITER = 901


def snapshots(store: Store, *, switch_lease: float = 60.0) -> ParquetDatasetStore:
    # Two parts per generation and one thread: the switch moves several parts, in order.
    return ParquetDatasetStore(
        store, max_rows_per_file=ROWS, max_workers=1, switch_lease=switch_lease
    )


def op_append(store: Store, log: AckLog, writer: int, seq: int) -> None:
    log.event("begin", op="append", writer=writer, seq=seq)
    ds = Dataset.open(store, DATASET).append(append_rows(writer, seq))
    log.event("ack", op="append", writer=writer, seq=seq, version=ds.version)


def op_update(store: Store, log: AckLog, writer: int, seq: int) -> None:
    log.event("begin", op="update", writer=writer, seq=seq)
    scope = [{"p": UPDATE_PARTITION_BASE + writer}]
    ds = Dataset.open(store, DATASET).update(update_rows(writer, seq), delete_scope=scope)
    log.event("ack", op="update", writer=writer, seq=seq, version=ds.version)


def op_snapshot(store: Store, log: AckLog, writer: int, seq: int) -> None:
    log.event("begin", op="snapshot", writer=writer, seq=seq)
    try:
        snapshots(store).write_dataset(snapshot_rows(writer, seq), SNAPSHOT, overwrite=True)
    except CommitConflict:
        # The documented outcome of losing a race: logged, and it must not be visible.
        log.event("conflict", op="snapshot", writer=writer, seq=seq)
        raise
    log.event("ack", op="snapshot", writer=writer, seq=seq)


def op_gc(store: Store, log: AckLog, writer: int, seq: int, retention: float = 0.0) -> None:
    log.event("begin", op="gc", writer=writer, seq=seq)
    report = Dataset.open(store, DATASET).garbage_collect(retention=retention)
    log.event("ack", op="gc", writer=writer, seq=seq, expired=list(report.expired_versions))


def op_snapshot_repair(store: Store, log: AckLog, writer: int, seq: int) -> None:
    log.event("begin", op="repair", writer=writer, seq=seq)
    snapshots(store).repair(SNAPSHOT)
    log.event("ack", op="repair", writer=writer, seq=seq)


def op_cli_repair(
    target: StoreTarget, wrap: Callable[[Store], Store], log: AckLog, name: str, seq: int
) -> None:
    """``parquetry repair URL NAME`` run in this process, its store wrapped by ``wrap``."""
    import parquetry.cli.cmd_maintain as cmd
    from parquetry.cli.app import app
    from parquetry.cli.common import open_cli_store

    # The command opens its store from the URL; hand it the wrapped one (the kill switch).
    cmd.open_cli_store = lambda url, options, **kw: wrap(open_cli_store(url, options, **kw))  # type: ignore[assignment]
    import typer

    log.event("begin", op="cli-repair", writer=0, seq=seq, name=name)
    code = typer.main.get_command(app).main(
        args=["repair", *target.cli_args()[:1], name, *target.cli_args()[1:]],
        prog_name="parquetry",
        standalone_mode=False,
    )
    if code not in (0, None):
        raise RuntimeError(f"parquetry repair {name} exited with {code}")
    log.event("ack", op="cli-repair", writer=0, seq=seq, name=name)


# --- race writers ---------------------------------------------------------------------------

ROLES: dict[str, Callable[[Store, AckLog, int, int], None]] = {
    "append": op_append,
    "update": op_update,
    "snapshot": op_snapshot,
}


MIN_ACKS = 2
GRACE = 60.0


def writer_loop(
    store: Store, role: str, writer: int, log: AckLog, *, deadline: float, max_ops: int
) -> None:
    """Write until ``deadline`` (``time.time()``) or ``max_ops``; log every failure.

    A writer goes on past ``deadline`` until it has :data:`MIN_ACKS` acknowledged writes (or
    :data:`GRACE` more seconds pass): on a loaded machine a race that did almost nothing
    proves nothing, and a fixed time budget alone made that depend on the machine.

    A snapshot writer that loses a race (CommitConflict) is told so and goes on; any other
    failure, and any CommitConflict of an append or update (they never conflict: appends
    add partitions, each updater owns its partition), is an ``error`` event.
    """
    op = ROLES[role]
    acked = 0
    for seq in range(max_ops):
        now = time.time()
        if now > deadline and (acked >= MIN_ACKS or now > deadline + GRACE):
            return
        try:
            op(store, log, writer, seq)
            acked += 1
        except CommitConflict:
            if role != "snapshot":
                log.event("error", op=role, writer=writer, seq=seq, detail="CommitConflict")
        except Exception as exc:
            log.event("error", op=role, writer=writer, seq=seq, detail=repr(exc)[:1000])
            time.sleep(0.05)  # a wedged dataset fails fast: do not spin on it


# --- setups (run by the parent, before the child) -------------------------------------------


def setup_dataset(store: Store, log: AckLog) -> None:
    log.event("begin", op="append", writer=SETUP_WRITER, seq=0)
    ds = Dataset.create(store, DATASET, append_rows(SETUP_WRITER, 0), partition_on=["p"])
    log.event("ack", op="append", writer=SETUP_WRITER, seq=0, version=ds.version)


def setup_snapshot(store: Store, log: AckLog) -> None:
    op_snapshot(store, log, SETUP_WRITER, 0)


def setup_history(store: Store, log: AckLog) -> None:
    """A dataset with a few versions, so GC has versions to expire and files to delete."""
    setup_dataset(store, log)
    op_append(store, log, SETUP_WRITER, 1)
    op_update(store, log, SETUP_WRITER, 2)
    op_update(store, log, SETUP_WRITER, 3)


class _Crash(BaseException):
    """A simulated crash: nothing in parquetry catches a BaseException it does not know."""


class _CrashAfter(WrapperStore):
    """Raises :class:`_Crash` right after the first put whose key contains ``marker``."""

    def __init__(self, inner: Store, marker: str):
        super().__init__(inner)
        self.marker = marker

    def _put(
        self, key: str, data: bytes | memoryview, mode: PutMode, expected_version: str | None
    ) -> ObjectMeta:
        meta = self.inner._put(key, data, mode, expected_version)
        if self.marker in key:
            raise _Crash(key)
        return meta


def setup_interrupted(store: Store, log: AckLog) -> None:
    """A snapshot stopped after its switch journal, a commit stopped after its version
    document: the states ``parquetry repair`` exists for."""
    setup_dataset(store, log)
    setup_snapshot(store, log)
    try:
        op_snapshot(_CrashAfter(store, "_parquetry_switch.json"), log, INTERRUPTED_WRITER, 1)
    except _Crash:
        pass
    else:
        raise AssertionError("the interrupted snapshot write did not reach its journal")
    try:
        op_append(_CrashAfter(store, "_versions/"), log, INTERRUPTED_WRITER, 2)
    except _Crash:
        pass
    else:
        raise AssertionError("the interrupted append did not reach its version document")


# --- workloads of the kill harness ----------------------------------------------------------


@dataclass(frozen=True)
class Workload:
    """A child's job: ``run(store, target, wrap, log, i)`` is its ``i``-th operation.

    ``setup`` prepares the store in the parent; ``dataset`` / ``snapshot`` say which checks
    apply afterwards; ``gc`` says that versions may legitimately expire; ``max_ops`` bounds
    a run (``parquetry repair`` has only so much to do).
    """

    name: str
    setup: Callable[[Store, AckLog], None]
    run: Callable[[Store, StoreTarget, Callable[[Store], Store], AckLog, int], None]
    dataset: bool
    snapshot: bool
    gc: bool = False
    max_ops: int | None = None


def _gc_or_append(store: Store, _t: StoreTarget, _w: Any, log: AckLog, i: int) -> None:
    # Even operations collect garbage (retention 0: expire everything but the newest),
    # odd ones append, so there is always something new to collect.
    if i % 2 == 0:
        op_gc(store, log, 0, i)
    else:
        op_append(store, log, 0, i)


def _append_taking_turns(store: Store, _t: StoreTarget, _w: Any, log: AckLog, i: int) -> None:
    # As a process that lost a race here a moment ago: the append claims the turn (one more
    # mutating request, killed before and after like every other; the checks then write
    # beside the claim a killed writer left).
    from parquetry.dataset.turns import Turn

    Turn(store, DATASET).contended(0.001)
    op_append(store, log, 0, i)


def _cli_repair(store: Store, target: StoreTarget, wrap: Any, log: AckLog, i: int) -> None:
    op_cli_repair(target, wrap, log, (SNAPSHOT, DATASET)[i % 2], i)


WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in (
        Workload(
            "append",
            setup_dataset,
            lambda s, _t, _w, log, i: op_append(s, log, 0, i),
            dataset=True,
            snapshot=False,
        ),
        Workload(
            "append-turns",
            setup_dataset,
            _append_taking_turns,
            dataset=True,
            snapshot=False,
        ),
        Workload(
            "update",
            setup_dataset,
            lambda s, _t, _w, log, i: op_update(s, log, 0, i),
            dataset=True,
            snapshot=False,
        ),
        Workload(
            "snapshot",
            setup_snapshot,
            lambda s, _t, _w, log, i: op_snapshot(s, log, 0, i),
            dataset=False,
            snapshot=True,
        ),
        Workload("gc", setup_history, _gc_or_append, dataset=True, snapshot=False, gc=True),
        Workload(
            "cli-repair", setup_interrupted, _cli_repair, dataset=True, snapshot=True, max_ops=2
        ),
    )
}
