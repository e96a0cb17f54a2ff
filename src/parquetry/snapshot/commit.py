"""A staged write's commit: build its journal, take the switch lock, carry it out.

The protocol itself is in :mod:`parquetry.snapshot.switch`, the lock in
:mod:`parquetry.snapshot.lock`; this module ties them to one write.
"""

from __future__ import annotations

import contextlib
import random
import time

from parquetry.errors import (
    AlreadyExists,
    CommitConflict,
    DatasetIncomplete,
    InvalidArgument,
    NotFound,
    ParquetryError,
)
from parquetry.snapshot import layout
from parquetry.snapshot.journal import PartMove, SwitchJournal
from parquetry.snapshot.lock import Held, acquire, inspect, release_if_mine, takeover
from parquetry.snapshot.maintain import Timing, settle
from parquetry.snapshot.manifest import DatasetManifest, StagedPart
from parquetry.snapshot.switch import complete
from parquetry.store.base import Store

__all__ = ["abort_staging", "build_journal", "check_staged", "resume", "switch"]


def build_journal(
    key: str,
    write_id: str,
    parts: list[StagedPart],
    *,
    overwrite: bool,
    compression: str,
    run_id: str | None,
    metadata: dict[str, str] | None,
    txns: dict[str, int] | None = None,
) -> SwitchJournal:
    """The decision a switch carries out: parts, final names and the new manifest."""
    if len({p.schema_hash for p in parts}) != 1:
        raise InvalidArgument(f"staged parts of {key!r} have different schemas", key=key)
    names = layout.part_names(len(parts))
    manifest = DatasetManifest.for_parts(
        key, names, parts, compression=compression, run_id=run_id, metadata=metadata, txns=txns
    )
    moves = tuple(
        PartMove(staged=p.name, final=n, size=p.size) for p, n in zip(parts, names, strict=True)
    )
    return SwitchJournal(
        write_id=write_id, manifest_json=manifest.to_json(), moves=moves, overwrite=overwrite
    )


def check_staged(
    store: Store, key: str, write_id: str, parts: list[StagedPart], *, max_workers: int
) -> None:
    """Raise DatasetIncomplete naming the receipts whose staged files are missing or differ."""

    def size(part: StagedPart) -> int | None:
        try:
            return store.head(layout.staged_key(key, write_id, part.name)).size
        except NotFound:
            return None

    sizes = store.map_concurrent(size, parts, max_workers=max_workers)
    bad = [p.name for p, s in zip(parts, sizes, strict=True) if s != p.size]
    if bad:
        raise DatasetIncomplete(
            f"staged parts {bad} of write {write_id!r} to {key!r} are missing or differ "
            f"from their receipts",
            key=key,
        )


def resume(
    store: Store, key: str, write_id: str, timing: Timing, owner: str
) -> DatasetManifest | None:
    """Complete write ``write_id``'s own switch if it was interrupted (a retried commit)."""
    pending = inspect(store, key)
    if pending is None or pending.journal is None or pending.journal.write_id != write_id:
        return None
    held = takeover(store, key, pending, owner, timing.lease)
    if held is None:
        raise CommitConflict(
            f"write {write_id!r} to dataset {key!r} is being switched right now", key=key
        )
    outcome = complete(held, max_workers=timing.max_workers, grace=timing.grace)
    if outcome != "committed":
        raise CommitConflict(
            f"write {write_id!r} to dataset {key!r} was discarded ({outcome})", key=key
        )
    return held.journal.manifest


def switch(
    store: Store, key: str, journal: SwitchJournal, timing: Timing, owner: str, *, own_staging: bool
) -> DatasetManifest:
    """Take the switch lock and carry ``journal`` out; ``own_staging``: drop the write's
    staged parts when it loses before its journal exists."""
    try:
        held = _acquire_waiting(store, key, journal, timing, owner)
    except BaseException:
        # Did the journal get written (a lost acknowledgement)? Then it is released and
        # its staging belongs to whoever completes it.
        if own_staging and release_if_mine(store, key, journal.holder) is False:
            abort_staging(store, key, journal.write_id)
        raise
    if held is None:
        if own_staging:
            abort_staging(store, key, journal.write_id)
        raise CommitConflict(f"another write to dataset {key!r} is switching right now", key=key)
    outcome = complete(held, max_workers=timing.max_workers, grace=timing.grace)
    if outcome == "exists":
        raise AlreadyExists(f"Dataset already exists at {key!r}", key=key, store=store.url)
    if outcome != "committed":
        raise CommitConflict(
            f"staged parts of write {journal.write_id!r} to {key!r} were removed (by repair "
            f"or garbage collection) before its switch; the dataset is unchanged",
            key=key,
        )
    return journal.manifest


#: How long a write waits for a running switch (or cleanup) to finish before it gives up
#: with CommitConflict: switches take milliseconds to a few requests' time.
WAIT_SECONDS = 2.0


def _acquire_waiting(
    store: Store, key: str, journal: SwitchJournal, timing: Timing, owner: str
) -> Held | None:
    """Take the lock, completing an abandoned switch in the way, and waiting (bounded,
    with jittered backoff) for a live one to finish."""
    deadline = time.monotonic() + WAIT_SECONDS
    pause = 0.005
    while True:
        held = acquire(store, key, journal, timing.lease)
        if held is not None:
            return held
        if settle(store, key, timing, owner):  # an abandoned switch was in the way
            continue
        if time.monotonic() + pause > deadline:
            return None
        time.sleep(pause * (0.5 + random.random()))
        pause = min(pause * 2, 0.2)


def abort_staging(store: Store, key: str, write_id: str) -> None:
    """Best effort: delete write ``write_id``'s staged parts. What a failing store leaves
    behind is abandoned staging, cleaned after the grace period."""
    prefix = layout.write_staging_prefix(key, write_id)
    with contextlib.suppress(ParquetryError):
        store.delete_many([m.key for m in store.list(prefix)], missing_ok=True)
