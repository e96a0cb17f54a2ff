#!/usr/bin/env python
"""Run the adversarial kill and race harnesses of ``tests/adversarial`` at large sizes.

    python scripts/adversarial.py                          # both stores, defaults below
    python scripts/adversarial.py --kills 500 --writers 16 --seconds 30 --store local
    python scripts/adversarial.py --only race --store s3

Kills: every workload is killed before and after each mutating request of one operation,
then ``--kills`` more times at random moments of longer runs (spread over the workloads).
Races: appends + updates, the same with GC (retention 0.2 s), snapshot overwrites with
repair, and ``--writers`` appenders contending, each for ``--seconds`` (threads; on local
disk also processes). Prints a summary and every failure; exits 1 if anything failed.
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
if (ROOT / "src").is_dir():
    sys.path.insert(0, str(ROOT / "src"))

from adversarial.harness.kill import KillResult, random_kills, sweep_kills  # noqa: E402
from adversarial.harness.race import RaceConfig, RaceReport, run_race  # noqa: E402
from adversarial.harness.targets import StoreTarget, TargetFactory  # noqa: E402
from adversarial.harness.workloads import WORKLOADS  # noqa: E402
from parquetry.testing.moto import MotoServer, start_moto_server  # noqa: E402


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--kills", type=int, default=200, help="random kills (besides the sweeps)")
    p.add_argument("--writers", type=int, default=8, help="writers per race")
    p.add_argument("--seconds", type=float, default=10.0, help="duration of each race")
    p.add_argument("--store", choices=["local", "s3", "both"], default="both")
    p.add_argument("--only", choices=["kill", "race"], help="run one harness only")
    p.add_argument("--workloads", nargs="*", default=list(WORKLOADS), choices=list(WORKLOADS))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--ops", type=int, default=12, help="operations per randomly killed run")
    p.add_argument("--workdir", type=Path, help="keep logs here (default: a temp dir)")
    return p.parse_args(argv)


@contextmanager
def moto(needed: bool) -> Iterator[MotoServer | None]:
    server = start_moto_server() if needed else None
    try:
        yield server
    finally:
        if server is not None:
            server.stop()


def run_kills(
    args: argparse.Namespace, kind: str, make: Callable[[], StoreTarget], work: Path
) -> list[KillResult]:
    rng = random.Random(args.seed)
    results: list[KillResult] = []
    per_workload = max(1, args.kills // len(args.workloads)) if args.kills else 0
    for name in args.workloads:
        started = time.monotonic()
        batch = sweep_kills(make, name, work / f"{kind}-{name}-sweep")
        if per_workload:
            batch += random_kills(
                make,
                name,
                work / f"{kind}-{name}-random",
                kills=per_workload,
                ops=args.ops,
                rng=rng,
            )
        results += batch
        bad = sum(1 for r in batch if r.problems)
        kills = sum(1 for r in batch if r.killed)
        print(
            f"kill  {kind:5} {name:10} {kills:4} kills, {bad} failed runs "
            f"({time.monotonic() - started:.0f}s)",
            flush=True,
        )
    return results


def race_configs(args: argparse.Namespace, kind: str) -> dict[str, RaceConfig]:
    w, s = max(args.writers, 2), args.seconds
    configs = {
        "appends+updates": RaceConfig(appenders=w - w // 3, updaters=w // 3, readers=2, seconds=s),
        "appends+updates+gc": RaceConfig(
            appenders=w - w // 3, updaters=w // 3, readers=2, gc=True, seconds=s
        ),
        "snapshot-overwrites+repair": RaceConfig(
            appenders=0, updaters=0, snapshotters=w, snapshot_repair=True, seconds=s
        ),
        "snapshot-overwrites+gc": RaceConfig(
            appenders=0, updaters=0, snapshotters=w, snapshot_gc=True, seconds=s
        ),
        f"{w}-appenders": RaceConfig(appenders=w, updaters=0, readers=1, seconds=s),
    }
    for name, config in configs.items():
        configs[name] = dataclasses.replace(config, max_ops=10_000)
    if kind == "local":
        for name in ("appends+updates", "appends+updates+gc"):
            configs[f"{name} (processes)"] = dataclasses.replace(configs[name], processes=True)
    return configs


def run_races(
    args: argparse.Namespace, kind: str, make: Callable[[], StoreTarget], work: Path
) -> list[RaceReport]:
    reports = []
    for i, (name, config) in enumerate(race_configs(args, kind).items()):
        report = run_race(make(), config, work / f"{kind}-race-{i}", label=f"{name} on {kind}")
        print(f"race  {report}".splitlines()[0], flush=True)
        reports.append(report)
    return reports


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    kinds = ["local", "s3"] if args.store == "both" else [args.store]
    kill_results: list[KillResult] = []
    race_reports: list[RaceReport] = []
    with tempfile.TemporaryDirectory(prefix="parquetry-adversarial-") as tmp:
        work = args.workdir or Path(tmp)
        with moto("s3" in kinds) as server:
            for kind in kinds:
                make = TargetFactory(kind, work, server)
                if args.only in (None, "kill"):
                    kill_results += run_kills(args, kind, make, work)
                if args.only in (None, "race"):
                    race_reports += run_races(args, kind, make, work)
    failed_kills = [r for r in kill_results if r.problems]
    failed_races = [r for r in race_reports if r.failures]
    print("\n=== summary ===")
    print(
        f"kills: {sum(r.killed for r in kill_results)} in {len(kill_results)} runs, "
        f"{sum(r.acks for r in kill_results)} acknowledged commits checked, "
        f"{len(failed_kills)} runs failed"
    )
    print(
        f"races: {len(race_reports)}, {sum(r.acks for r in race_reports)} acknowledged commits "
        f"checked, {sum(r.reads for r in race_reports)} reads, {len(failed_races)} races failed"
    )
    for r in failed_kills:
        print(f"FAILED kill: {r}")
    for rr in failed_races:
        print(f"FAILED race: {rr}")
    return 1 if failed_kills or failed_races else 0


if __name__ == "__main__":
    sys.exit(main())
