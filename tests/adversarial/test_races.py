"""Race harness (issue 11 §6.2), small: writers + GC + readers at once, local disk and S3.

Writers (appends, partition updates, snapshot overwrites) race each other, a GC loop with a
0.2 s retention and readers that check every version they open; no acknowledged commit may
be lost and no reader may fail except on a version GC expired. The harness lives in
:mod:`adversarial.harness.race`; ``scripts/adversarial.py`` runs it with more writers and
for longer.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from adversarial.harness.race import RaceConfig, run_race
from adversarial.harness.targets import TargetFactory

SECONDS = 1.5
CASES = {
    "appends+updates": RaceConfig(appenders=3, updaters=1, readers=2, seconds=SECONDS),
    "appends+updates+gc": RaceConfig(appenders=2, updaters=1, readers=2, gc=True, seconds=SECONDS),
    "snapshot+readers": RaceConfig(appenders=0, updaters=0, snapshotters=1, seconds=SECONDS),
    "snapshot-overwrites+repair": RaceConfig(
        appenders=0, updaters=0, snapshotters=4, snapshot_repair=True, seconds=SECONDS
    ),
    "snapshot+gc": RaceConfig(
        appenders=0, updaters=0, snapshotters=1, snapshot_gc=True, seconds=SECONDS
    ),
    "16-appenders": RaceConfig(appenders=16, updaters=0, readers=1, seconds=1.0, max_ops=5),
}


def _case(name: str, store: str, *, processes: bool = False, marks: tuple = ()) -> object:
    return pytest.param(
        name, store, processes, marks=marks, id=f"{name}-{store}{'-processes' if processes else ''}"
    )


@pytest.mark.parametrize(
    ("case", "store", "processes"),
    [
        _case("appends+updates", "local"),
        _case("appends+updates", "s3", marks=(pytest.mark.s3,)),
        _case("appends+updates", "local", processes=True),
        _case("snapshot+readers", "local"),
        _case("snapshot+readers", "s3", marks=(pytest.mark.s3,)),
        _case("appends+updates+gc", "local"),
        _case("appends+updates+gc", "s3", marks=(pytest.mark.s3,)),
        _case("appends+updates+gc", "local", processes=True),
        _case("snapshot-overwrites+repair", "local"),
        _case("snapshot-overwrites+repair", "s3", marks=(pytest.mark.s3,)),
        _case("snapshot+gc", "local"),
        _case("16-appenders", "local"),
    ],
)
def test_race(
    case: str, store: str, processes: bool, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    server = request.getfixturevalue("moto_server") if store == "s3" else None
    target = TargetFactory(store, tmp_path, server)()
    config = dataclasses.replace(CASES[case], processes=processes)
    report = run_race(target, config, tmp_path / "work", label=f"{case} on {store}")
    assert not report.failures, str(report)
    # A race that did nothing proves nothing.
    assert report.acks > len(config.roles), str(report)
    assert report.reads > 0, str(report)
