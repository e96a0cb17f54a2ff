"""The crash-safe switch from the old dataset (if any) to a fully staged new one.

Protocol (each step idempotent, so a rerun completes a half-done switch):

0. Before the switch, every new part is staged and verified; the old dataset is untouched.
1. The journal ``{key}/_parquetry_switch.json`` is written. From here on the write is
   decided: whoever finds the journal (the next write, :meth:`repair`) rolls it forward.
2. ``_SUCCESS`` is deleted, then ``manifest.json``: readers now get DatasetIncomplete
   instead of a mix (remote-store readers too, except one that already holds the old
   manifest).
3. Staged parts are moved to their final names (a rename on local disk, copy + delete on
   object stores). A staged part already gone must have been moved: its final file must
   exist with the staged size.
4. Every other file directly under ``{key}/`` is deleted: old parts the new dataset does
   not reuse and leftovers of crashed writes never stay next to the new dataset.
5. The new ``manifest.json``, then an empty ``_SUCCESS``: the new dataset is committed.
6. Best effort: the journal and everything under ``{key}/_staging/`` are deleted.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass

from parquetry.errors import DatasetIncomplete, ManifestCorrupted, NotFound, ParquetryError
from parquetry.snapshot.layout import (
    journal_key,
    manifest_key,
    part_key,
    staged_key,
    staging_prefix,
    success_key,
)
from parquetry.snapshot.manifest import DatasetManifest
from parquetry.store.base import Store

__all__ = ["PartMove", "SwitchJournal", "clean_staging", "read_journal", "roll_forward"]

_FORMAT = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class PartMove:
    """One staged part and the final name it gets."""

    staged: str
    final: str
    size: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SwitchJournal:
    """The decided outcome of a write: written before anything committed is touched."""

    write_id: str
    manifest_json: str
    moves: tuple[PartMove, ...]
    format_version: int = _FORMAT

    @property
    def manifest(self) -> DatasetManifest:
        return DatasetManifest.from_json(self.manifest_json)

    def to_json(self) -> str:
        return json.dumps(
            {
                "format_version": self.format_version,
                "write_id": self.write_id,
                "manifest": self.manifest_json,
                "moves": [[m.staged, m.final, m.size] for m in self.moves],
            },
            sort_keys=True,
            indent=2,
        )

    @classmethod
    def from_json(cls, text: bytes | str, *, key: str) -> SwitchJournal:
        try:
            data = json.loads(text)
            if data["format_version"] != _FORMAT:
                raise ValueError(f"unknown format_version {data['format_version']!r}")
            moves = tuple(
                PartMove(staged=str(s), final=str(f), size=int(n)) for s, f, n in data["moves"]
            )
            journal = cls(
                write_id=str(data["write_id"]), manifest_json=str(data["manifest"]), moves=moves
            )
        except (ValueError, TypeError, KeyError) as exc:
            raise ManifestCorrupted(
                f"switch journal {key!r} is corrupt ({exc}); delete it to keep the dataset "
                f"as it is",
                reason=f"corrupt switch journal: {exc}",
                key=key,
            ) from None
        journal.manifest  # noqa: B018 - validates the embedded manifest
        return journal


def read_journal(store: Store, key: str) -> SwitchJournal | None:
    """The pending switch of dataset ``key``, if any."""
    jkey = journal_key(key)
    try:
        raw = store.get(jkey)
    except NotFound:
        return None
    return SwitchJournal.from_json(raw, key=jkey)


def roll_forward(store: Store, key: str, journal: SwitchJournal, *, max_workers: int) -> None:
    """Complete the switch ``journal`` describes (steps 2-6 of the module docstring)."""
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
    keep = {part_key(key, m.final) for m in journal.moves} | {journal_key(key)}
    stale = [o.key for o in store.list_dir(key).objects if o.key not in keep]
    store.delete_many(stale, missing_ok=True)
    store.put(manifest_key(key), journal.manifest_json.encode("utf-8"))
    store.put(success_key(key), b"")
    # Committed. What follows only tidies up; a failure there changes nothing readers see.
    with contextlib.suppress(ParquetryError):
        store.delete(journal_key(key), missing_ok=True)
        clean_staging(store, key)


def clean_staging(store: Store, key: str, write_id: str | None = None) -> None:
    """Delete staged files: of one write, or of every write when ``write_id`` is None."""
    prefix = staging_prefix(key) if write_id is None else f"{staging_prefix(key)}/{write_id}"
    store.delete_many([o.key for o in store.list(prefix)], missing_ok=True)
