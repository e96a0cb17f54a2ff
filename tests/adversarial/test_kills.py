"""Kill harness (issue 11 §6.1), small: writers SIGKILLed mid-operation on local disk and S3.

Each workload is killed before and after every mutating store request of one operation
(the sweep) and at random moments of a few operations; after each kill every acknowledged
commit must be readable, repair must converge and a new write must work. The harness lives
in :mod:`adversarial.harness.kill`; ``scripts/adversarial.py`` runs it with hundreds of kills.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from adversarial.harness.kill import KillResult, random_kills, sweep_kills
from adversarial.harness.targets import TargetFactory

WORKLOADS = ["append", "update", "snapshot", "gc", "cli-repair"]
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
    # On S3 (slower, and a move is two requests there) and for the CLI (two datasets to set
    # up per run) kill before the odd requests and after the even ones: every request is
    # still a kill point; scripts/adversarial.py does both everywhere.
    alternate = make_target.kind == "s3" or workload == "cli-repair"
    results = sweep_kills(make_target, workload, tmp_path / "runs", alternate=alternate)
    kills = [r for r in results if r.killed]
    assert len(kills) == len(results) - 1, "every run but the traced one must be killed"
    assert len(kills) >= 2
    assert not _report(results), _report(results)


@pytest.mark.parametrize("make_target", STORES, indirect=True)
@pytest.mark.parametrize("workload", WORKLOADS)
def test_kill_at_random_moments(make_target: TargetFactory, workload: str, tmp_path: Path) -> None:
    rng = random.Random(f"{workload}-{make_target.kind}")
    results = random_kills(make_target, workload, tmp_path / "runs", kills=3, ops=4, rng=rng)
    assert not _report(results), _report(results)


@pytest.mark.parametrize("make_target", ["local"], indirect=True)
def test_the_harness_catches_a_repair_that_does_nothing(
    make_target: TargetFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The checks can fail: with a repair that leaves interrupted switches alone, a kill
    after the switch journal is written leaves a snapshot nobody can read."""
    from parquetry.snapshot import ParquetDatasetStore

    monkeypatch.setattr(ParquetDatasetStore, "repair", lambda self, key: False)
    results = sweep_kills(make_target, "snapshot", tmp_path / "runs", alternate=True)
    found = [p for r in results for p in r.problems if "after repair: snapshot unreadable" in p]
    assert found, _report(results)
