"""What must hold after writers stopped (killed, or done racing): shared by both harnesses."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from adversarial.harness.checks import check_dataset, fingerprint, snapshot_problems
from adversarial.harness.records import AckLog, Ledger, read_records
from adversarial.harness.workloads import DATASET, SNAPSHOT, op_append, op_snapshot, snapshots
from parquetry.dataset import Dataset
from parquetry.errors import ParquetryError
from parquetry.store import Store

__all__ = ["AFTER_WRITER", "verify_after"]

#: Writer id of the write that proves the store still takes writes after the checks.
AFTER_WRITER = 950


@dataclass(frozen=True)
class _Scope:
    dataset: bool
    snapshot: bool
    allow_expired: bool


def verify_after(
    store: Store,
    ledger: Ledger,
    workdir: Path,
    *,
    dataset: bool,
    snapshot: bool,
    allow_expired: bool,
) -> list[str]:
    """Check the dataset / snapshot after the writers stopped; the problems found.

    1. every acknowledged commit is readable with its rows, and the dataset opens and
       reads (a snapshot may refuse reads with DatasetIncomplete until repaired: for all a
       reader knows, its writer is still switching);
    2. repair succeeds, after which 1. holds with no exception;
    3. repair converges: a second one has nothing to do and changes no object;
    4. a new write works and is visible.
    """
    work = _Scope(dataset, snapshot, allow_expired)
    problems = [f"before repair: {p}" for p in _state_problems(store, work, ledger, False)]
    try:
        _repair(store, work)
    except ParquetryError as exc:
        return [*problems, f"repair failed: {exc!r}"]
    problems += [f"after repair: {p}" for p in _state_problems(store, work, ledger, True)]
    before = fingerprint(store)
    try:
        second = _repair(store, work)
    except ParquetryError as exc:
        return [*problems, f"second repair failed: {exc!r}"]
    if second:
        problems.append(f"second repair still had work to do: {second}")
    after = fingerprint(store)
    if after != before:
        changed = sorted(set(before.items()) ^ set(after.items()))[:5]
        problems.append(f"second repair changed objects: {changed}")
    return problems + _new_write_works(store, work, ledger, workdir)


def _state_problems(store: Store, work: _Scope, ledger: Ledger, settled: bool) -> list[str]:
    problems = []
    if work.dataset:
        problems += check_dataset(store, ledger, allow_expired=work.allow_expired)
    if work.snapshot:
        problems += snapshot_problems(store, ledger, settled=settled)
    return problems


def _repair(store: Store, work: _Scope) -> list[str]:
    """Repair what the workload touches; what still needed doing (empty: nothing)."""
    done = []
    if work.dataset:
        message = Dataset.repair(store, DATASET)
        if "nothing to repair" not in message:
            done.append(message)
    # The killed writer is known dead: repair need not wait out its switch lease (60 s), as
    # an operator who knows it would not (a live writer's switch is never taken over).
    if work.snapshot and snapshots(store, switch_lease=0.0).repair(SNAPSHOT):
        done.append(f"{SNAPSHOT}: completed an interrupted overwrite")
    return done


def _new_write_works(store: Store, work: _Scope, ledger: Ledger, workdir: Path) -> list[str]:
    log = AckLog(workdir / "after.log")
    try:
        if work.dataset:
            op_append(store, log, AFTER_WRITER, 0)
        if work.snapshot:
            op_snapshot(store, log, AFTER_WRITER, 0)
    except ParquetryError as exc:
        return [f"a new write after repair failed: {exc!r}"]
    for r in read_records([workdir / "after.log"]):
        ledger.add(r)
    return [f"after a new write: {p}" for p in _state_problems(store, work, ledger, True)]
