"""Kill harness (issue 11 §6.1), small: writers SIGKILLed mid-operation on local disk and S3.

Each workload is killed at every mutating store request of one operation (the sweep; here
before the odd ones and after the even ones) and at random moments of a few operations;
after each kill every acknowledged commit must be readable, repair must converge and a new
write must work. The harness lives
in :mod:`adversarial.harness.kill`; ``scripts/adversarial.py`` runs it with hundreds of kills.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from adversarial.harness.kill import KillResult, kill_once, random_kills, sweep_kills
from adversarial.harness.killstore import read_trace
from adversarial.harness.targets import TargetFactory

WORKLOADS = ["append", "append-turns", "update", "snapshot", "gc", "cli-repair"]
STORES = ["local", pytest.param("s3", marks=pytest.mark.s3)]


@pytest.fixture
def make_target(request: pytest.FixtureRequest, tmp_path: Path) -> TargetFactory:
    """A fresh store (local root or S3 bucket) per call: every kill starts clean."""
    kind = request.param
    server = request.getfixturevalue("moto_server") if kind == "s3" else None
    return TargetFactory(kind, tmp_path, server)


def _report(results: list[KillResult]) -> str:
    return "\n".join(str(r) for r in results if r.problems)


@pytest.mark.parametrize("make_target", STORES, indirect=True)
@pytest.mark.parametrize("workload", WORKLOADS)
def test_kill_at_every_mutating_request(
    make_target: TargetFactory, workload: str, tmp_path: Path
) -> None:
    # Kill before the odd requests and after the even ones: every request is a kill point,
    # at half the cost; scripts/adversarial.py kills before and after each one.
    results = sweep_kills(make_target, workload, tmp_path / "runs", alternate=True)
    kills = [r for r in results if r.killed]
    assert len(kills) == len(results) - 1, "every run but the traced one must be killed"
    assert len(kills) >= 2
    assert not _report(results), _report(results)


@pytest.mark.parametrize("make_target", STORES, indirect=True)
@pytest.mark.parametrize("workload", WORKLOADS)
def test_kill_at_random_moments(make_target: TargetFactory, workload: str, tmp_path: Path) -> None:
    rng = random.Random(f"{workload}-{make_target.kind}")
    results = random_kills(make_target, workload, tmp_path / "runs", kills=2, ops=4, rng=rng)
    assert not _report(results), _report(results)


@pytest.mark.parametrize("make_target", ["local"], indirect=True)
def test_the_harness_catches_a_repair_that_does_nothing(
    make_target: TargetFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The checks can fail: with a repair that leaves interrupted switches alone, a kill
    after the switch removed the old ``_SUCCESS`` leaves a snapshot nobody can read."""
    from parquetry.snapshot import ParquetDatasetStore

    monkeypatch.setattr(ParquetDatasetStore, "repair", lambda self, key: False)
    trace = tmp_path / "requests.log"
    kill_once(make_target, "snapshot", tmp_path / "traced", trace=trace)
    requests = read_trace(trace)
    k = requests.index(("delete", "snap/_SUCCESS")) + 1
    result = kill_once(make_target, "snapshot", tmp_path / "killed", kill_at=k, when="after")
    assert result.killed
    assert any("after repair: snapshot unreadable" in p for p in result.problems), str(result)
