"""The crash-safe switch from the old dataset (if any) to a fully staged new one.

Protocol (each step idempotent, so a rerun completes a half-done switch). Steps 1-6 run
only while holding the journal as a lock (:mod:`parquetry.snapshot.lock`):

0. Before the switch, every new part is staged under ``{key}/_staging/{write_id}/``; the
   old dataset is untouched.
1. The journal ``{key}/_parquetry_switch.json`` is created (put-if-absent): from here on
   the write is decided and nobody else changes the dataset.
2. Verification: every staged part the journal names exists with its size (or, once
   ``_SUCCESS`` is gone, was moved). If not, or if the write must not replace an existing
   dataset and one exists, the journal is discarded and the dataset stays as it is.
   Nothing committed is deleted before this check passes.
3. ``_SUCCESS`` is deleted, then ``manifest.json``: readers now get DatasetIncomplete
   instead of a mix (remote-store readers too, except one that already holds the old
   manifest).
4. Staged parts are moved to their final names (a rename on local disk, copy + delete on
   object stores). A staged part already gone must have been moved: its final file must
   exist with the staged size.
5. Every other file directly under ``{key}/`` is deleted (never anything in a
   sub-directory: other datasets may live there): old parts the new dataset does not reuse
   and leftovers of crashed writes never stay next to the new dataset.
6. The new ``manifest.json``, then an empty ``_SUCCESS``: the new dataset is committed.
7. Best effort: the write's own staging and staging abandoned longer than the grace period
   are deleted, then the journal (releasing the lock).
"""

from __future__ import annotations

import contextlib
from collections import defaultdict
from datetime import UTC, datetime
from typing import Literal

from parquetry.errors import DatasetIncomplete, NotFound, ParquetryError
from parquetry.snapshot.journal import SWITCH, PartMove, SwitchJournal
from parquetry.snapshot.layout import (
    journal_key,
    manifest_key,
    part_key,
    staged_key,
    staging_prefix,
    success_key,
)
from parquetry.snapshot.lock import Held
from parquetry.store.base import Store

__all__ = ["Outcome", "complete", "stale_staging", "verify"]


def verify(store: Store, key: str, journal: SwitchJournal, *, max_workers: int) -> bool:
    """Whether the switch ``journal`` describes can be completed (step 2)."""
    committed = store.exists(success_key(key))

    def ready(m: PartMove) -> bool:
        try:
            return store.head(staged_key(key, journal.write_id, m.staged)).size == m.size
        except NotFound:
            pass
        if committed:
            # Moves start only after _SUCCESS is deleted: with _SUCCESS present, a missing
            # staged part was removed, not moved.
            return False
        try:
            return store.head(part_key(key, m.final)).size == m.size
        except NotFound:
            return False

    return all(store.map_concurrent(ready, journal.moves, max_workers=max_workers))


#: What :func:`complete` did: rolled forward, or discarded the journal because a staged
#: part is missing, because the dataset exists and the write must not replace it, or
#: because the journal was a maintenance lock.
Outcome = Literal["committed", "missing", "exists", "lock"]


def complete(held: Held, *, max_workers: int, grace: float) -> Outcome:
    """As the holder: roll the journal forward or discard it, then unlock.

    Raises what the store raises; the journal is then released for the next actor.
    """
    store, key, journal = held.store, held.key, held.journal
    outcome: Outcome = "committed"
    try:
        if journal.kind != SWITCH:
            outcome = "lock"
        elif not journal.overwrite and store.exists(success_key(key)):
            outcome = "exists"
        elif not verify(store, key, journal, max_workers=max_workers):
            outcome = "missing"
        else:
            _roll_forward(held, max_workers=max_workers)
    except BaseException:
        held.release()
        raise
    # Committed or discarded. What follows only tidies up; a failure there changes
    # nothing readers see.
    with contextlib.suppress(ParquetryError):
        _tidy(store, key, journal.write_id, grace)
    held.finish()
    return outcome


def _roll_forward(held: Held, *, max_workers: int) -> None:
    store, key, journal = held.store, held.key, held.journal
    store.delete(success_key(key), missing_ok=True)
    store.delete(manifest_key(key), missing_ok=True)

    def move(m: PartMove) -> None:
        source = staged_key(key, journal.write_id, m.staged)
        target = part_key(key, m.final)
        try:
            store.move(source, target)
            return
        except NotFound:
            pass
        try:
            size = store.head(target).size
        except NotFound:
            raise DatasetIncomplete(
                f"cannot complete the switch of dataset {key!r}: staged part {source!r} and "
                f"its target {target!r} are both missing",
                key=key,
            ) from None
        if size != m.size:
            raise DatasetIncomplete(
                f"cannot complete the switch of dataset {key!r}: staged part {source!r} is "
                f"gone and {target!r} has {size} bytes, not the staged {m.size}",
                key=key,
            )

    store.map_concurrent(move, journal.moves, max_workers=max_workers)
    held.check()  # moves of large parts take time: still ours?
    keep = {part_key(key, m.final) for m in journal.moves} | {journal_key(key)}
    stale = [o.key for o in store.list_dir(key).objects if o.key not in keep]
    store.delete_many(stale, missing_ok=True)
    store.put(manifest_key(key), journal.manifest_json.encode("utf-8"))
    store.put(success_key(key), b"")


def _tidy(store: Store, key: str, write_id: str, grace: float) -> None:
    """Delete the staging of ``write_id`` and staging abandoned for ``grace`` seconds."""
    store.delete_many(stale_staging(store, key, grace, also=write_id), missing_ok=True)


def stale_staging(store: Store, key: str, grace: float, *, also: str | None = None) -> list[str]:
    """Keys of staged writes whose newest object is at least ``grace`` seconds old (and of
    write ``also``, whatever its age).

    A write's staging is judged as a whole: an executor still staging parts keeps its
    whole write alive. Call this while holding the lock (a journal's own staging must not
    be judged by age while its switch runs).
    """
    groups: dict[str, list[str]] = defaultdict(list)
    newest: dict[str, datetime] = {}
    unknown: set[str] = set()  # an object without a modification time: never judged old
    prefix = staging_prefix(key)
    for meta in store.list(prefix):
        write_id = meta.key[len(prefix) + 1 :].split("/", 1)[0]
        groups[write_id].append(meta.key)
        if meta.modified is None:
            unknown.add(write_id)
        elif write_id not in newest or meta.modified > newest[write_id]:
            newest[write_id] = meta.modified
    now = datetime.now(UTC)
    doomed: list[str] = []
    for write_id, keys in sorted(groups.items()):
        old = write_id not in unknown and (now - newest[write_id]).total_seconds() >= grace
        if old or write_id == also:
            doomed.extend(sorted(keys))
    return doomed
