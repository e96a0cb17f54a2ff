"""The race harness: writers, garbage collection and readers at once, then everything checked.

Writers (Dataset appends, Dataset updates of the partition each owns, snapshot overwrites)
run as threads of this process or, for cross-process races on local disk, as forkserver
processes. A maintenance thread collects the dataset's garbage with a short retention (and
optionally repairs the snapshot and runs ``parquetry gc`` on it) in a loop. Reader threads
open the newest dataset version and a few retained older ones, and the snapshot, and check
each against two ledgers:
everything acknowledged before the reader opened must be visible, nothing that had not at
least begun by the time it was done may be.

A reader may fail only with the clear error of a version garbage collection expired (also
when it expired while being read: the version is then a tombstone). A snapshot reader may
get DatasetIncomplete while a switch is in progress (counted as ``busy``). Everything else
is a failure, as is any writer error but a snapshot writer's CommitConflict. After the
race, the checks of :func:`adversarial.harness.verify.verify_after` run, and every
snapshot a reader saw must be an acknowledged write.
"""

from __future__ import annotations

import datetime as dt
import random
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from adversarial.harness.checks import (
    commit_visible,
    dataset_rows_problems,
    is_expired,
    missing_files,
    snapshot_tag,
)
from adversarial.harness.child import context, race_writer
from adversarial.harness.records import AckLog, Ledger, read_records
from adversarial.harness.targets import StoreTarget
from adversarial.harness.verify import verify_after
from adversarial.harness.workloads import (
    DATASET,
    GRACE,
    SNAPSHOT,
    setup_dataset,
    setup_snapshot,
    snapshots,
    writer_loop,
)
from parquetry.dataset import Dataset
from parquetry.errors import DatasetIncomplete, ParquetryError
from parquetry.store import Store

__all__ = ["RaceConfig", "RaceReport", "run_race"]


@dataclass(frozen=True)
class RaceConfig:
    """How many of each, for how long; ``processes``: writers in separate processes."""

    appenders: int = 2
    updaters: int = 1
    snapshotters: int = 0
    readers: int = 2
    gc: bool = False
    retention: float = 0.2
    snapshot_repair: bool = False
    snapshot_gc: bool = False
    seconds: float = 3.0
    max_ops: int = 30
    processes: bool = False

    @property
    def roles(self) -> list[str]:
        return (
            ["append"] * self.appenders
            + ["update"] * self.updaters
            + ["snapshot"] * self.snapshotters
        )

    @property
    def dataset(self) -> bool:
        return self.appenders + self.updaters > 0 or self.gc

    @property
    def snapshot(self) -> bool:
        return self.snapshotters > 0 or self.snapshot_repair or self.snapshot_gc


@dataclass
class RaceReport:
    """What a race did and what went wrong (``failures`` empty: it held)."""

    label: str
    acks: int = 0
    reads: int = 0
    expired_reads: int = 0
    busy_reads: int = 0
    conflicts: int = 0
    gc_runs: int = 0
    refusals: int = 0
    last_refusal: str = ""
    failures: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def fail(self, problem: str) -> None:
        with self._lock:
            self.failures.append(problem)

    def count(self, attr: str) -> None:
        with self._lock:
            setattr(self, attr, getattr(self, attr) + 1)

    def __str__(self) -> str:
        head = (
            f"{self.label}: {self.acks} acknowledged writes, {self.reads} reads "
            f"({self.expired_reads} of expired versions, {self.busy_reads} during a switch), "
            f"{self.conflicts} snapshot conflicts, {self.gc_runs} GC runs, "
            f"{self.refusals} maintenance refusals, {len(self.failures)} failures"
        )
        if self.refusals:
            head += f" (last refusal: {self.last_refusal[:200]})"
        return "\n    ".join([head, *self.grouped()[:15]])

    def grouped(self) -> list[str]:
        """Distinct failures (numbers and ids folded), most frequent first, with counts."""
        counts: Counter[str] = Counter()
        first: dict[str, str] = {}
        for failure in self.failures:
            shape = re.sub(r"[0-9a-f]{16,}|\d+", "N", failure)
            counts[shape] += 1
            first.setdefault(shape, failure)
        return [f"{n}x {first[shape]}" for shape, n in counts.most_common()]


def run_race(target: StoreTarget, config: RaceConfig, workdir: Path, label: str = "") -> RaceReport:
    """Run one race on a fresh ``target`` and check it; never raises for what it finds."""
    report = RaceReport(label or f"race on {target.kind}")
    workdir.mkdir(parents=True, exist_ok=True)
    store = target.open()
    setup_log = AckLog(workdir / "setup.log")
    if config.dataset:
        setup_dataset(store, setup_log)
    if config.snapshot:
        setup_snapshot(store, setup_log)
    logs = [workdir / "setup.log"] + [workdir / f"w{i}.log" for i in range(len(config.roles))]
    ledger = lambda: Ledger.from_records(read_records(logs))  # noqa: E731
    done = threading.Event()
    seen_tags: set[str] = set()
    threads = [
        threading.Thread(target=_reader, args=(store, config, ledger, done, report, seen_tags))
        for _ in range(config.readers)
    ]
    threads.append(threading.Thread(target=_maintain, args=(store, config, done, report)))
    for t in threads:
        t.start()
    try:
        _run_writers(target, store, config, logs[1:])
    finally:
        done.set()
        for t in threads:
            t.join()
    _judge(store, config, workdir, read_records(logs), seen_tags, report)
    return report


def _run_writers(target: StoreTarget, store: Store, config: RaceConfig, logs: list[Path]) -> None:
    if config.processes:
        procs = [
            context().Process(
                target=race_writer,
                args=(
                    {
                        "target": target.to_json(),
                        "role": role,
                        "writer": i,
                        "log": str(logs[i]),
                        "seconds": config.seconds,
                        "max_ops": config.max_ops,
                    },
                ),
                daemon=True,
            )
            for i, role in enumerate(config.roles)
        ]
        for p in procs:
            p.start()
        for p in procs:
            p.join(config.seconds + 600)
            if p.is_alive():
                p.kill()
                p.join()
        return
    deadline = time.time() + config.seconds
    writers = [
        threading.Thread(
            target=writer_loop,
            args=(store, role, i, AckLog(logs[i])),
            kwargs={"deadline": deadline, "max_ops": config.max_ops},
        )
        for i, role in enumerate(config.roles)
    ]
    for t in writers:
        t.start()
    for t in writers:
        t.join()


def _maintain(store: Store, config: RaceConfig, done: threading.Event, report: RaceReport) -> None:
    while not done.wait(0.02):
        try:
            if config.gc:
                Dataset.open(store, DATASET).garbage_collect(retention=config.retention)
                report.count("gc_runs")
            if config.snapshot_repair:
                snapshots(store).repair(SNAPSHOT)
            if config.snapshot_gc:
                _snapshot_gc(store, config.retention)
                report.count("gc_runs")
        except ParquetryError as exc:
            # A clear refusal (e.g. gc while a switch is in progress) loses nothing; what it
            # may have broken, the readers and the final checks find.
            report.count("refusals")
            report.last_refusal = repr(exc)
        except Exception as exc:
            report.fail(f"maintenance failed with a raw error: {exc!r}")


def _snapshot_gc(store: Store, retention: float) -> None:
    """What ``parquetry gc URL snap --retention R`` does."""
    from parquetry.cli.maintenance import collect_garbage
    from parquetry.cli.targets import DatasetRef

    ref = DatasetRef(name=SNAPSHOT, kind="snapshot")
    collect_garbage(store, ref, retention=dt.timedelta(seconds=retention), dry_run=False)


def _reader(
    store: Store,
    config: RaceConfig,
    ledger: Any,
    done: threading.Event,
    report: RaceReport,
    seen_tags: set[str],
) -> None:
    rng = random.Random()
    give_up: float | None = None
    while not done.is_set() or report.reads == 0:
        # On a loaded machine the writers may be done before any read got through (a
        # snapshot reader meeting switch after switch): a race that read nothing proves
        # nothing, so go on until one read did (or GRACE seconds pass; the test then fails).
        if done.is_set():
            give_up = give_up or time.monotonic() + GRACE
            if time.monotonic() > give_up:
                return
        if config.dataset:
            _read_dataset(store, ledger, report, rng)
        if config.snapshot:
            _read_snapshot(store, ledger, report, seen_tags)


def _read_dataset(store: Store, ledger: Any, report: RaceReport, rng: random.Random) -> None:
    before = ledger()
    try:
        ds = Dataset.open(store, DATASET)
    except ParquetryError as exc:
        report.fail(f"reader: opening the newest version failed: {exc!r}")
        return
    _read_version(store, ds, before, ledger, report, newest=True)
    try:
        retained = [v.number for v in ds.versions()]
    except ParquetryError as exc:
        report.fail(f"reader: listing versions failed: {exc!r}")
        return
    # Up to three retained versions a round: over a race, readers open most of them.
    for number in rng.sample(retained, min(3, len(retained))):
        try:
            old = Dataset.open(store, DATASET, version=number)
        except ParquetryError as exc:
            if is_expired(exc):
                report.count("expired_reads")
            else:
                report.fail(f"reader: opening retained v{number} failed: {exc!r}")
            continue
        _read_version(store, old, before, ledger, report, newest=False)


def _read_version(
    store: Store, ds: Dataset, before: Ledger, ledger: Any, report: RaceReport, *, newest: bool
) -> None:
    where = f"reader: {'newest ' if newest else ''}v{ds.version}"
    try:
        table = ds.read()
        missing = missing_files(store, ds)
    except ParquetryError as exc:
        if _expired_now(store, ds.version):
            report.count("expired_reads")  # GC expired it while we read: the retention rule
        else:
            report.fail(f"{where} unreadable although not expired: {exc!r}")
        return
    report.count("reads")
    if missing and not _expired_now(store, ds.version):
        report.fail(f"{where} references missing files {missing[:3]} and is not expired")
    event = before.versions.get(ds.version)
    if newest:
        for problem in dataset_rows_problems(table, before, ledger(), where):
            report.fail(problem)
    elif event is not None:
        for problem in commit_visible(table, event, where):
            report.fail(problem)


def _expired_now(store: Store, number: int) -> bool:
    try:
        Dataset.open(store, DATASET, version=number)
    except ParquetryError as exc:
        return is_expired(exc)
    return False


def _read_snapshot(store: Store, ledger: Any, report: RaceReport, seen: set[str]) -> None:
    try:
        table = snapshots(store).read_dataset(SNAPSHOT)
    except DatasetIncomplete:
        report.count("busy_reads")  # a switch is in progress: the documented answer
        time.sleep(0.005)
        return
    except ParquetryError as exc:
        report.fail(f"reader: snapshot unreadable: {exc!r}")
        return
    report.count("reads")
    tag, problems = snapshot_tag(table)
    for problem in problems:
        report.fail(f"reader: {problem}")
    if tag is not None:
        seen.add(tag)
        after = ledger()
        if tag not in after.begun_tags:
            report.fail(f"reader: snapshot shows {tag}, which nobody wrote")


def _judge(
    store: Store,
    config: RaceConfig,
    workdir: Path,
    records: list[dict[str, Any]],
    seen_tags: set[str],
    report: RaceReport,
) -> None:
    final = Ledger.from_records(records)
    report.acks = final.acks
    report.conflicts = len(final.lost_tags)
    for r in records:
        if r["event"] == "error":
            report.fail(f"writer {r['writer']} ({r['op']} {r['seq']}) failed: {r['detail']}")
    unacked = seen_tags - set(final.acked_tags)
    if unacked:
        report.fail(f"readers saw snapshot writes that were never acknowledged: {sorted(unacked)}")
    for problem in verify_after(
        store,
        final,
        workdir,
        dataset=config.dataset,
        snapshot=config.snapshot,
        allow_expired=config.gc,
    ):
        report.fail(f"after the race: {problem}")
