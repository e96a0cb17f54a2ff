"""The child process of the kill harness: :func:`main` in a ``forkserver`` process.

The forkserver imports pyarrow and parquetry once (``PRELOAD``) and forks every child from
that state, before any pyarrow thread exists, so a child costs milliseconds, not an
interpreter start. (``python -m adversarial.harness.child SPEC`` runs one by hand.)

SPEC is a dict: ``target`` (a :class:`StoreTarget` as JSON), ``workload``, ``log`` (the ack
log), ``ops`` (how many operations), and optionally ``kill_at`` / ``when`` (the kill
switch) and ``trace`` (log every mutating request). The child logs ``ready`` once imports
are done (random kills are timed from then), then ``done`` after its last operation; the
process leaves with ``os._exit`` so pyarrow's exit-time teardown cannot abort it after the
fact. ``env`` holds environment variables to set first (the CLI's credentials).
"""

from __future__ import annotations

import json
import multiprocessing
import multiprocessing.context
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

PRELOAD = [
    "pyarrow",
    "pyarrow.parquet",
    "parquetry.dataset",
    "parquetry.snapshot",
    "parquetry.store",
    "adversarial.harness.workloads",
    "parquetry.cli.app",
    "parquetry.cli.cmd_maintain",
    "parquetry.cli.maintenance",
    "parquetry.cli.targets",
    "typer",
    "rich.console",
]


def main(spec: dict[str, Any]) -> int:
    from adversarial.harness.killstore import KillSwitch
    from adversarial.harness.records import AckLog
    from adversarial.harness.targets import StoreTarget
    from adversarial.harness.workloads import WORKLOADS

    # What the CLI prints is not the harness's business; the process never closes it.
    sys.stdout = open(os.devnull, "w")  # noqa: SIM115
    os.environ.update(spec.get("env") or {})
    target = StoreTarget.from_json(spec["target"])
    workload = WORKLOADS[spec["workload"]]
    log = AckLog(Path(spec["log"]))
    trace = spec.get("trace")
    switch = KillSwitch(
        kill_at=spec.get("kill_at"),
        when=spec.get("when", "before"),
        trace=Path(trace) if trace else None,
    )
    store = switch.wrap(target.open())
    log.event("ready")
    try:
        for i in range(spec["ops"]):
            workload.run(store, target, switch.wrap, log, i)
    except BaseException:
        log.event("error", detail=traceback.format_exc()[-2000:])
        return 1
    log.event("done")
    return 0


def race_writer(spec: dict[str, Any]) -> None:
    """The target of a race writer process (see :func:`adversarial.harness.race.run_race`)."""
    from adversarial.harness.records import AckLog
    from adversarial.harness.targets import StoreTarget
    from adversarial.harness.workloads import writer_loop

    store = StoreTarget.from_json(spec["target"]).open()
    log = AckLog(Path(spec["log"]))
    writer_loop(
        store,
        spec["role"],
        spec["writer"],
        log,
        deadline=time.time() + spec["seconds"],  # from this process's start on
        max_ops=spec["max_ops"],
    )
    os._exit(0)


def context() -> multiprocessing.context.ForkServerContext:
    """The forkserver every harness child comes from (started once, with PRELOAD)."""
    global _CONTEXT
    if _CONTEXT is None:
        tests_dir = str(Path(__file__).resolve().parents[2])
        if tests_dir not in sys.path:  # the forkserver imports the harness by name
            sys.path.insert(0, tests_dir)
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(PRELOAD)
        _CONTEXT = ctx
    return _CONTEXT


_CONTEXT: multiprocessing.context.ForkServerContext | None = None


def run(spec: dict[str, Any]) -> None:
    """The target of a forkserver process: exit code 0 done, 1 failed (killed: -9)."""
    code = main(spec)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    run(json.loads(sys.argv[1]))
