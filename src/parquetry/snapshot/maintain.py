"""Settling, cleanup, deletion and garbage collection of one snapshot dataset.

Each of them touches only the snapshot's own objects: the files directly under ``{key}/``
and everything under ``{key}/_staging/``. Datasets stored below ``{key}/`` (``{key}/sub``)
are other datasets and are never listed for deletion. Everything that deletes runs while
holding the switch lock (:mod:`parquetry.snapshot.lock`), so it never races a switch.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from parquetry.errors import CommitConflict, NotFound
from parquetry.snapshot import layout
from parquetry.snapshot.journal import MAINTENANCE, SwitchJournal
from parquetry.snapshot.lock import Held, acquire, inspect, takeover
from parquetry.snapshot.reader import parse_manifest
from parquetry.snapshot.switch import complete, stale_staging
from parquetry.store.base import Store
from parquetry.store.temporaries import remove_stale_temporaries

__all__ = ["Timing", "clean_abandoned", "collect_garbage", "delete_snapshot", "settle"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Timing:
    """How long a switch lock and an idle staged write are presumed alive (seconds)."""

    lease: float
    grace: float
    max_workers: int


def settle(store: Store, key: str, timing: Timing, owner: str) -> bool:
    """Complete (or discard) a switch whose holder failed or is presumed dead.

    Returns True if a switch was rolled forward. A live switch is left alone; a corrupt
    journal younger than the lease raises :class:`ManifestCorrupted` naming it.
    """
    pending = inspect(store, key)
    if pending is None:
        return False
    if pending.error is not None and not pending.takeable(timing.lease):
        raise pending.error
    held = takeover(store, key, pending, owner, timing.lease)
    if held is None:
        return False
    outcome = complete(held, max_workers=timing.max_workers, grace=timing.grace)
    return outcome == "committed"


def _lock(
    store: Store, key: str, timing: Timing, owner: str, what: str, *, take_over: bool
) -> Held:
    journal = SwitchJournal(write_id=owner, owner=owner, kind=MAINTENANCE)
    held = acquire(store, key, journal, timing.lease)
    if held is None and take_over:
        pending = inspect(store, key)
        if pending is not None:
            held = takeover(store, key, pending, owner, timing.lease)
    if held is None:
        raise CommitConflict(
            f"cannot {what} snapshot {key!r}: a write is switching it right now (or was "
            f"interrupted less than {timing.lease:g} s ago); retry, or run repair",
            key=key,
        )
    return held


def clean_abandoned(store: Store, key: str, timing: Timing, owner: str) -> list[str]:
    """Delete staging abandoned for the grace period; nothing if a switch holds the lock."""
    if not stale_staging(store, key, timing.grace):
        return []  # the usual case costs one listing and no lock
    journal = SwitchJournal(write_id=owner, owner=owner, kind=MAINTENANCE)
    held = acquire(store, key, journal, timing.lease)
    if held is None:
        return []  # a switch is running: it tidies up itself
    try:
        doomed = stale_staging(store, key, timing.grace)
        store.delete_many(doomed, missing_ok=True)
    finally:
        held.finish()
    return doomed


def own_keys(store: Store, key: str) -> list[str]:
    """The snapshot's objects: files directly under ``key`` and its staging (no journal)."""
    direct = [o.key for o in store.list_dir(key).objects]
    staged = [m.key for m in store.list(layout.staging_prefix(key))]
    return sorted(k for k in direct + staged if k != layout.journal_key(key))


def delete_snapshot(store: Store, key: str, timing: Timing, owner: str) -> None:
    """Delete the snapshot's own objects, ``_SUCCESS`` first so readers stop at once."""
    held = _lock(store, key, timing, owner, "delete", take_over=True)
    try:
        keys = own_keys(store, key)
        if not keys:
            raise NotFound(f"no dataset at {key!r} in {store.url}", key=key, store=store.url)
        success = layout.success_key(key)
        if success in keys:
            store.delete(success, missing_ok=True)
        store.delete_many([k for k in keys if k != success], missing_ok=True)
    finally:
        held.finish()


def collect_garbage(
    store: Store, key: str, retention: float, timing: Timing, owner: str
) -> list[str]:
    """Delete stray files older than ``retention`` seconds and staged writes idle for
    ``retention`` (at least the switch lease); returns them.

    Raises CommitConflict (naming ``key``) while a switch holds the lock.
    """
    # No take-over: an interrupted switch is completed by repair, not discarded here.
    held = _lock(store, key, timing, owner, "collect garbage of", take_over=False)
    try:
        try:
            raw = store.get(layout.manifest_key(key))
        except NotFound:
            raise NotFound(
                f"no manifest for dataset {key!r} in {store.url}", key=key, store=store.url
            ) from None
        manifest = parse_manifest(raw, key)
        keep = {layout.part_key(key, p) for p in manifest.parts} | {
            layout.manifest_key(key),
            layout.success_key(key),
            layout.journal_key(key),
        }
        now = datetime.now(UTC)
        stray = [
            o.key
            for o in store.list_dir(key).objects
            if o.key not in keep
            and (o.modified is None or (now - o.modified).total_seconds() >= retention)
        ]
        # A writer between its last staged part and its switch looks idle: staging younger
        # than the switch lease is never presumed dead, whatever the retention.
        staged = stale_staging(store, key, max(retention, timing.lease))
        doomed = sorted(stray + staged)
        store.delete_many(doomed, missing_ok=True)
        # Temporary files killed writers left in the same directories (a local store's).
        remove_stale_temporaries(store, key, recursive=False)
        remove_stale_temporaries(store, layout.staging_prefix(key))
    finally:
        held.finish()
    return doomed
