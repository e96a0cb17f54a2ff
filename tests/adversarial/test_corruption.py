"""Corruption fuzzer (issue 11, §6.3): every stored object kind of a kartothek-format Dataset
is truncated, bit-flipped, deeply nested, wrongly typed, emptied or given huge/non-finite
numbers; every public operation and CLI command must then work or raise a ParquetryError
subclass (CLI: exit 1 with one line on stderr, never 70 nor a traceback).

The cases run in one worker subprocess per object kind (``corruption_cases.py``): a
corrupted footer that made pyarrow abort the process fails its own case instead of the
test run. ``PARQUETRY_FUZZ_RANDOM=N`` adds N random wrong-type and N random bit-flip
mutations per kind (default 2) for a large run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from .corruption_cases import KINDS, mutation_names

N_RANDOM = int(os.environ.get("PARQUETRY_FUZZ_RANDOM", "2"))
MUTATIONS = mutation_names(N_RANDOM)
ROOT = Path(__file__).resolve().parents[2]
WORKER_TIMEOUT = 900 + 60 * N_RANDOM
#: Workers running at once (as many as there are CPUs, at most four).
WORKERS = max(1, min(4, os.cpu_count() or 1))
#: The first test runs every worker (a few minutes on a loaded 2-core machine, where it took
#: 330 s of the suite's 600 s per-test timeout): its bound is that of the workers.
FIRST_TEST_TIMEOUT = -(-len(KINDS) // WORKERS) * WORKER_TIMEOUT + 120

_results: dict[str, dict[str, list[dict[str, Any]]]] = {}


def _run_kind(kind: str) -> dict[str, list[dict[str, Any]]]:
    """Outcomes per mutation of one object kind (the workers of all kinds run on first use,
    as many at a time as there are CPUs, at most four)."""
    if not _results:
        with ThreadPoolExecutor(max_workers=WORKERS) as pool:
            _results.update(zip(KINDS, pool.map(_run_worker, KINDS), strict=True))
    return _results[kind]


def _run_worker(kind: str) -> dict[str, list[dict[str, Any]]]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT / "tests")])
    proc = subprocess.run(
        [sys.executable, "-m", "adversarial.corruption_cases", kind, *MUTATIONS],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=WORKER_TIMEOUT,
        check=False,
    )
    by_case: dict[str, list[dict[str, Any]]] = {}
    for line in proc.stdout.splitlines():
        row = json.loads(line)
        by_case.setdefault(row["case"], []).append(row)
    if proc.returncode != 0:
        # The process died (pyarrow abort, crash in the harness): blame the running op.
        last = next(
            (rows[-1] for rows in reversed(list(by_case.values())) if rows),
            {"case": "?", "op": "?"},
        )
        by_case.setdefault(last["case"], []).append(
            {
                "case": last["case"],
                "op": last["op"],
                "outcome": "bad",
                "detail": f"worker exited {proc.returncode}: {proc.stderr[-1500:]}",
            }
        )
    return by_case


@pytest.mark.timeout(FIRST_TEST_TIMEOUT)
@pytest.mark.parametrize("mutation", MUTATIONS)
@pytest.mark.parametrize("kind", KINDS)
def test_corruption_is_an_error_not_a_crash(kind: str, mutation: str) -> None:
    rows = _run_kind(kind).get(mutation)
    assert rows, f"the worker did not reach mutation {mutation!r} of {kind}"
    finished = [r for r in rows if r["outcome"] not in ("started", "begin")]
    bad = [f"{r['op']}: {r['detail']}" for r in finished if r["outcome"] == "bad"]
    assert not bad, f"{kind}/{mutation}:\n" + "\n\n".join(bad)
    started = [r["op"] for r in rows if r["outcome"] == "started"]
    done = [r["op"] for r in finished]
    assert started == done, f"operations that never finished: {set(started) - set(done)}"


def test_every_object_kind_is_actually_corrupted() -> None:
    """The harness is honest: a broken version or data file makes reads fail, and a broken
    pointer (read around through the version documents) is a problem for validate."""
    cases = (("pointer_json", "cli_validate"), ("old_version", "open_v1"), ("data", "read"))
    for kind, op in cases:
        rows = _run_kind(kind)["truncate_half"]
        read = [r for r in rows if r["op"] == op and r["outcome"] != "started"]
        assert read, kind
        assert read[0]["outcome"] == "error", (kind, read)
