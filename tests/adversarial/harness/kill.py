"""The kill harness: a writer process SIGKILLed mid-operation, then everything checked.

One run (:func:`kill_once`) prepares a fresh store in this process, starts a child running
a workload (see :mod:`adversarial.harness.child`), kills it (at the K-th mutating request,
before or after it, or after a random delay), and then checks, in order:

1. every acknowledged commit is readable with its rows, and the dataset opens and reads
   (a snapshot may refuse reads with DatasetIncomplete until repaired: its writer may be
   alive for all a reader knows);
2. repair (``Dataset.repair``, ``ParquetDatasetStore.repair``) succeeds, after which the
   checks of 1. hold with no exception;
3. repair converges: a second repair reports nothing to do and changes no object;
4. a new write works and is visible.

:func:`sweep_kills` kills at every mutating request of one operation (learned from a traced
run), :func:`random_kills` at random moments of a longer run.
"""

from __future__ import annotations

import random
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.process import BaseProcess
from pathlib import Path

from adversarial.harness.child import context
from adversarial.harness.child import run as child_run
from adversarial.harness.killstore import read_trace
from adversarial.harness.records import AckLog, Ledger, read_records
from adversarial.harness.targets import StoreTarget
from adversarial.harness.verify import verify_after
from adversarial.harness.workloads import WORKLOADS

__all__ = ["KillResult", "kill_once", "random_kills", "sweep_kills"]


@dataclass
class KillResult:
    """One child run: what was done to it and what the checks found."""

    label: str
    killed: bool
    acks: int
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0
    child_seconds: float = 0.0

    def __str__(self) -> str:
        state = "killed" if self.killed else "not killed"
        lines = [f"{self.label} ({state}, {self.acks} acknowledgements)"]
        return "\n    ".join(lines + self.problems)


def run_child(
    target: StoreTarget,
    workload: str,
    workdir: Path,
    *,
    ops: int,
    kill_at: int | None = None,
    when: str = "before",
    trace: Path | None = None,
    delay: float | None = None,
    timeout: float = 300.0,
) -> tuple[int, float]:
    """Run one child to its end or its death: (exit code, seconds from ready to the end)."""
    log = workdir / "child.log"
    spec = {
        "target": target.to_json(),
        "workload": workload,
        "log": str(log),
        "ops": ops,
        "kill_at": kill_at,
        "when": when,
        "trace": str(trace) if trace else None,
        "env": target.cli_env(),
    }
    proc = context().Process(target=child_run, args=(spec,), daemon=True)
    proc.start()
    try:
        ready = _wait_ready(proc, log, timeout)
        if delay is not None and proc.is_alive():
            time.sleep(delay)
            proc.kill()
        proc.join(timeout)
    finally:
        if proc.is_alive():
            proc.kill()
            proc.join()
    assert proc.exitcode is not None
    return proc.exitcode, time.monotonic() - ready


def _wait_ready(proc: BaseProcess, log: Path, timeout: float) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.is_alive():
        if log.exists() and b'"ready"' in log.read_bytes():
            break
        time.sleep(0.002)
    return time.monotonic()


def kill_once(
    make_target: Callable[[], StoreTarget],
    workload: str,
    workdir: Path,
    *,
    ops: int = 1,
    kill_at: int | None = None,
    when: str = "before",
    delay: float | None = None,
    trace: Path | None = None,
    label: str = "",
) -> KillResult:
    """Prepare a fresh store, run (and kill) one child, check everything afterwards."""
    started = time.monotonic()
    work = WORKLOADS[workload]
    workdir.mkdir(parents=True, exist_ok=True)
    target = make_target()
    store = target.open()
    setup_log = AckLog(workdir / "setup.log")
    work.setup(store, setup_log)
    code, child_seconds = run_child(
        target, workload, workdir, ops=ops, kill_at=kill_at, when=when, trace=trace, delay=delay
    )
    records = read_records([workdir / "setup.log", workdir / "child.log"])
    ledger = Ledger.from_records(records)
    killed = code == -signal.SIGKILL
    problems = []
    if not killed and code != 0:
        errors = [r.get("detail", "") for r in records if r["event"] == "error"]
        problems.append(f"child failed with exit {code}: {(errors or ['no error logged'])[-1]}")
    if kill_at is not None and not killed and code == 0:
        problems.append(f"child finished without reaching mutating request {kill_at}")
    problems += verify_after(
        store,
        ledger,
        workdir,
        dataset=work.dataset,
        snapshot=work.snapshot,
        allow_expired=work.gc,
    )
    label = label or f"{workload} on {target.kind}"
    seconds = time.monotonic() - started
    return KillResult(label, killed, ledger.acks, problems, seconds, child_seconds)


def sweep_kills(
    make_target: Callable[[], StoreTarget],
    workload: str,
    workdir: Path,
    *,
    whens: tuple[str, ...] = ("before", "after"),
    alternate: bool = False,
) -> list[KillResult]:
    """Kill one operation at each of its mutating requests, before and after each one
    (``alternate``: before the odd ones and after the even ones, half the kills).

    A traced run without a kill (itself checked) says how many requests there are.
    """
    ops = WORKLOADS[workload].max_ops or 1
    trace = workdir / "trace" / "requests.log"
    trace.parent.mkdir(parents=True, exist_ok=True)
    results = [kill_once(make_target, workload, workdir / "trace", ops=ops, trace=trace)]
    requests = read_trace(trace)
    for k in range(1, len(requests) + 1):
        kind, key = requests[k - 1]
        for when in (whens[k % len(whens)],) if alternate else whens:
            label = f"{workload}: kill {when} request {k}/{len(requests)} ({kind} {key})"
            run_dir = workdir / f"k{k}-{when}"
            results.append(
                kill_once(
                    make_target, workload, run_dir, ops=ops, kill_at=k, when=when, label=label
                )
            )
    return results


def random_kills(
    make_target: Callable[[], StoreTarget],
    workload: str,
    workdir: Path,
    *,
    kills: int,
    ops: int = 6,
    rng: random.Random | None = None,
) -> list[KillResult]:
    """``kills`` runs of ``ops`` operations, each killed after a random delay.

    A first run without a kill (itself checked) measures how long the operations take.
    """
    rng = rng or random.Random(0)
    ops = min(ops, WORKLOADS[workload].max_ops or ops)
    first = kill_once(make_target, workload, workdir / "timing", ops=ops)
    results = [first]
    duration = max(first.child_seconds, 0.05)
    for i in range(kills):
        delay = rng.uniform(0.0, duration)
        label = f"{workload}: random kill after {delay:.3f}s of {ops} operations"
        run = workdir / f"r{i}"
        result = kill_once(make_target, workload, run, ops=ops, delay=delay, label=label)
        if not result.killed:
            # It finished first: the machine got faster (shared CI cores); aim shorter.
            duration = max(min(duration, result.child_seconds), 0.05)
        results.append(result)
    return results
