"""Invariants of a dataset and a snapshot against a :class:`Ledger` of acknowledgements.

Every check returns a list of problems (strings naming what broke) instead of asserting,
so a large run collects them all and reports them together.

Races are judged with two ledgers: ``before`` (read before the reader opened the dataset:
everything acknowledged in it must be visible) and ``after`` (read after the reader was
done: nothing may be visible that had not at least begun by then).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pyarrow as pa

from adversarial.harness.records import (
    ROWS,
    UPDATE_PARTITION_BASE,
    Ledger,
    append_rows,
    row_ids,
    snapshot_rows,
    update_rows,
)
from adversarial.harness.workloads import DATASET, SNAPSHOT, snapshots
from parquetry.dataset import Dataset
from parquetry.errors import DatasetIncomplete, DatasetNotFound, ParquetryError
from parquetry.store import Store

__all__ = [
    "dataset_rows_problems",
    "fingerprint",
    "commit_visible",
    "is_expired",
    "missing_files",
    "snapshot_problems",
    "snapshot_tag",
]


def dataset_rows_problems(table: pa.Table, before: Ledger, after: Ledger, where: str) -> list[str]:
    """The rows of one dataset version against what was acknowledged / begun."""
    problems = []
    ids = [int(v) for v in table.column("id").to_pylist()]
    dup = [i for i, n in Counter(ids).items() if n > 1]
    if dup:
        problems.append(f"{where}: duplicated rows {sorted(dup)[:5]}")
    got = set(ids)
    appended_ids = before.acked_ids - _update_ids(before)
    lost = appended_ids - got
    if lost:
        problems.append(f"{where}: lost {len(lost)} acknowledged appended rows {sorted(lost)[:5]}")
    foreign = got - after.begun_ids - _update_ids(after)
    if foreign:
        problems.append(f"{where}: rows no writer wrote {sorted(foreign)[:5]}")
    parts = table.column("p").to_pylist()
    gens = table.column("g").to_pylist()
    for p, begun in after.begun_gens.items():
        seen = {g for q, g in zip(parts, gens, strict=True) if q == p}
        acked = before.acked_gens.get(p, [])
        allowed = set(begun[begun.index(acked[-1]) :] if acked else begun)
        if acked and not seen:
            problems.append(f"{where}: partition {p} lost its acknowledged update {acked[-1]}")
        elif len(seen) > 1 or not seen <= allowed:
            problems.append(
                f"{where}: partition {p} holds generations {sorted(seen)}, "
                f"allowed {sorted(allowed)}"
            )
    return problems


def _update_ids(ledger: Ledger) -> set[int]:
    # Updated partitions are judged by generation: an update replaces the rows it wrote before.
    return {
        i
        for p, gens in ledger.begun_gens.items()
        for g in gens
        for i in row_ids(update_rows(p - UPDATE_PARTITION_BASE, g))
    }


def is_expired(exc: BaseException) -> bool:
    """Whether ``exc`` is the clear error of opening a version GC expired."""
    return isinstance(exc, DatasetNotFound) and "expired" in str(exc)


def missing_files(store: Store, ds: Dataset) -> list[str]:
    keys = [k for files in ds.document.partitions.values() for k in files.values()]
    return [k for k in keys if not store.exists(k)]


def check_dataset(store: Store, ledger: Ledger, *, allow_expired: bool) -> list[str]:
    """The newest version and every acknowledged version, after writers stopped."""
    problems: list[str] = []
    try:
        ds = Dataset.open(store, DATASET)
        table = ds.read()
    except ParquetryError as exc:
        return [f"newest version unreadable: {exc!r}"]
    problems += [
        f"newest version v{ds.version} references missing {k}" for k in missing_files(store, ds)
    ]
    problems += dataset_rows_problems(table, ledger, ledger, f"newest v{ds.version}")
    for version, event in sorted(ledger.versions.items()):
        where = f"acknowledged v{version} ({event['op']} {event['writer']}:{event['seq']})"
        try:
            old = Dataset.open(store, DATASET, version=version).read()
        except ParquetryError as exc:
            if not (allow_expired and is_expired(exc)):
                problems.append(f"{where} unreadable: {exc!r}")
            continue
        problems += commit_visible(old, event, where)
    return problems


def commit_visible(table: pa.Table, event: dict[str, Any], where: str) -> list[str]:
    """The version an acknowledged commit produced shows that commit."""
    if event["op"] == "append":
        missing = set(row_ids(append_rows(event["writer"], event["seq"])))
        missing -= {int(v) for v in table.column("id").to_pylist()}
        return [f"{where}: misses its own rows {sorted(missing)[:5]}"] if missing else []
    p = UPDATE_PARTITION_BASE + event["writer"]
    gens = [
        g for q, g in zip(table["p"].to_pylist(), table["g"].to_pylist(), strict=True) if q == p
    ]
    if gens != [event["seq"]] * ROWS:
        return [f"{where}: partition {p} holds generations {gens}, not its own update"]
    return []


def snapshot_tag(table: pa.Table) -> tuple[str | None, list[str]]:
    """The generation a snapshot read shows, and problems if it is not one whole write."""
    tags = set(table.column("tag").to_pylist())
    if len(tags) != 1:
        return None, [f"snapshot mixes writes {sorted(tags)[:5]}"]
    tag = tags.pop()
    writer, seq = (int(x) for x in tag.split(":"))
    expected = snapshot_rows(writer, seq)
    if table.sort_by("i").select(["tag", "i"]).to_pydict() != expected.to_pydict():
        return tag, [f"snapshot {tag} is not the table that write wrote ({table.num_rows} rows)"]
    return tag, []


def snapshot_problems(store: Store, ledger: Ledger, *, settled: bool) -> list[str]:
    """The snapshot shows one whole write that began, did not lose, and is not older than
    a write acknowledged after it (per writer: a writer's writes are ordered).

    Before repair (``settled`` false) a switch the kill interrupted may make reads fail
    with DatasetIncomplete; after repair the snapshot must read.
    """
    try:
        table = snapshots(store).read_dataset(SNAPSHOT)
    except DatasetIncomplete as exc:
        return [f"snapshot unreadable after repair: {exc!r}"] if settled else []
    except ParquetryError as exc:
        return [f"snapshot unreadable: {exc!r}"]
    tag, problems = snapshot_tag(table)
    if tag is None or problems:
        return problems
    if tag not in ledger.begun_tags:
        return [f"snapshot shows {tag}, which nobody wrote"]
    if tag in ledger.lost_tags:
        return [f"snapshot shows {tag}, whose writer was told it lost (CommitConflict)"]
    writer, seq = (int(x) for x in tag.split(":"))
    later = [t for t in ledger.acked_tags if _newer(t, writer, seq)]
    if later:
        return [f"snapshot went back to {tag} after {later[-1]} was acknowledged"]
    return []


def _newer(acked: str, writer: int, seq: int) -> bool:
    """Whether ``acked`` happened after write ``writer:seq`` was done: a later write of the
    same writer, or a write of a later phase (setup, then the writers, then the new write
    the checks make)."""
    w, s = (int(x) for x in acked.split(":"))
    if w == writer:
        return s > seq
    return _phase(w) > _phase(writer)


def _phase(writer: int) -> int:
    from adversarial.harness.verify import AFTER_WRITER

    if writer == AFTER_WRITER:
        return 2
    return 0 if writer >= 900 else 1


def fingerprint(store: Store) -> dict[str, int]:
    """Every object and its size: what a repair that changes nothing leaves unchanged."""
    return {m.key: m.size for m in store.list("")}
