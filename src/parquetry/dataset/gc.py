"""Garbage collection with a retention period, driven by versions and write intents.

A version is *retained* while it is the newest one or was current at some point within the
retention period (its successor was committed less than ``retention`` ago): a reader may
still be using it. So is the version the kartothek pointer names (a stale pointer, whose
publication failed after its commit): kartothek readers use it. GC

1. reaps write intents (:mod:`parquetry.dataset.intents`) whose lease ended more than
   ``retention`` (plus the clock-skew allowance) ago: a compare-and-swap marks each one
   reaped, so a commit still holding it fails instead of acknowledging;
2. reads every version document (after the reaping, so a commit that claimed its intent
   first is seen) and turns expired ones into tombstones (nobody can open them any more,
   while the version numbers stay taken);
3. deletes the files of reaped intents and of expired versions that no retained version (nor
   the current pointer) references, then the reaped intents themselves;
4. *sweeps* only where no intent information exists: when the dataset still has versions
   written before write intents, or its pointer was written by another tool (kartothek),
   or ``sweep=True``. The sweep lists the dataset and deletes files that nothing references,
   that no intent covers and that are older than the retention period (the only rule files
   without intents can have: a write in flight of another tool is protected by age alone);
   index files, which commits write without intents a moment before their commit point,
   only when also older than the intent lease.

Files of live intents are never deleted, however old; steps 1-3 list only ``_intents`` and
``_versions``, never the data files. Last, temporary files that killed writers left in the
dataset's directories are removed (a local store's: :mod:`parquetry.store.temporaries`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass

from parquetry.dataset.format2 import Version, load_state, parse_version, read_version, version_info
from parquetry.dataset.gc_metadata import collect_metadata, keep_chains
from parquetry.dataset.gc_metadata import head_keys as _head_keys  # its old name here
from parquetry.dataset.head import head_key
from parquetry.dataset.indexwire import entry_piece_keys
from parquetry.dataset.intents import DEFAULT_LEASE, IntentState, list_intents, reap
from parquetry.dataset.metadata import DatasetDocument
from parquetry.dataset.naming import (
    common_metadata_key,
    intents_prefix,
    metadata_key,
    version_key,
    version_number_from_key,
    versions_prefix,
)
from parquetry.dataset.versions import read_pointer, tombstone_bytes
from parquetry.errors import InvalidArgument, MetadataCorrupted, NotFound
from parquetry.store import Store
from parquetry.store.temporaries import remove_stale_temporaries

__all__ = ["GCReport", "as_retention", "garbage_collect", "referenced_keys"]


@dataclass(frozen=True, slots=True, kw_only=True)
class GCReport:
    """What a garbage collection removed."""

    deleted: tuple[str, ...]
    expired_versions: tuple[int, ...]
    retained_versions: tuple[int, ...]
    reaped_intents: tuple[str, ...] = ()
    swept: bool = False
    #: Temporary files of killed writers removed (paths in the store; a local store's).
    temporaries: tuple[str, ...] = ()


def referenced_keys(doc: DatasetDocument) -> set[str]:
    keys = {key for files in doc.partitions.values() for key in files.values()}
    keys |= {ref for ref in doc.indices.values() if isinstance(ref, str)}
    for state in doc.index_states.values():
        keys |= state.piece_keys()
    keys |= {common_metadata_key(doc.uuid, t) for t in doc.tables}
    return keys


def _parse_time(text: str) -> dt.datetime:
    value = dt.datetime.fromisoformat(text)
    return value if value.tzinfo else value.replace(tzinfo=dt.UTC)


def _intent_keys(
    store: Store, uuid: str, now: dt.datetime, retention: dt.timedelta
) -> tuple[set[str], dict[str, tuple[str, ...]]]:
    """(keys covered by live intents, reaped intent key -> its file keys)."""
    live: set[str] = set()
    reaped: dict[str, tuple[str, ...]] = {}
    for meta in list_intents(store, uuid):
        state, is_reaped = reap(store, uuid, meta.key, now, retention)
        if state is None:
            continue
        if is_reaped:
            reaped[meta.key] = state.keys
        else:
            live |= set(state.keys)
    return live, reaped


def _live_intent_keys(store: Store, uuid: str) -> set[str]:
    """Keys of the intents there now that are not reaped (a read, no compare-and-swap)."""
    keys: set[str] = set()
    for meta in list_intents(store, uuid):
        try:
            state = IntentState.from_bytes(store.get(meta.key), meta.key)
        except (NotFound, MetadataCorrupted):
            continue
        if state.state != "reaped":
            keys |= set(state.keys)
    return keys


def _read_versions(store: Store, uuid: str) -> dict[int, Version]:
    out: dict[int, Version] = {}
    for meta in store.list(versions_prefix(uuid)):
        n = version_number_from_key(meta.key)
        if n is not None:
            out[n] = parse_version(store.get(meta.key), meta.key)
    return out


def _version_keys(v: Version) -> set[str]:
    """Keys an entry adds (its state's other keys are its predecessor's)."""
    kind, value, _ = v
    if kind == "doc":
        return referenced_keys(value)
    if kind != "entry":
        return set()
    keys = {key for _, files, _ in value["add"] for key in files.values()}
    return keys | entry_piece_keys(value)


def _keys_of_range(store: Store, uuid: str, vs: dict[int, Version], numbers: list[int]) -> set[str]:
    """Every key the states of ``numbers`` (consecutive live versions) reference."""
    if not numbers:
        return set()
    first = numbers[0]
    kind = vs[first][0]
    try:
        keys = referenced_keys(load_state(store, uuid, first)) if kind == "entry" else set()
    except (NotFound, MetadataCorrupted):
        keys = set()
    for n in numbers:
        keys |= _version_keys(vs[n])
    return keys


def _pointer_keys(store: Store, uuid: str) -> tuple[set[str], bool, int | None]:
    """(keys the pointer references, whether another tool wrote it, its version)."""
    try:
        pointer, _, _ = read_pointer(store, uuid)
    except (NotFound, MetadataCorrupted):
        return set(), False, None
    number = pointer.version.number if pointer.version is not None else None
    return referenced_keys(pointer), pointer.version is None, number


def as_retention(retention: object) -> dt.timedelta:
    """``retention`` (a timedelta or seconds) as a timedelta.

    Raises:
        InvalidArgument: not a number of seconds a timedelta holds (NaN, infinite, a
            string), or negative.
    """
    if not isinstance(retention, dt.timedelta):
        try:
            retention = dt.timedelta(seconds=float(retention))  # type: ignore[arg-type]
        except (TypeError, ValueError, OverflowError):
            raise InvalidArgument(
                f"retention must be a timedelta or a finite number of seconds, got {retention!r}"
            ) from None
    if retention < dt.timedelta(0):
        raise InvalidArgument(f"retention must not be negative, got {retention}")
    return retention


def garbage_collect(
    store: Store,
    uuid: str,
    *,
    retention: dt.timedelta | float,
    now: dt.datetime | None = None,
    sweep: bool | None = None,
) -> GCReport:
    """Collect garbage of dataset ``uuid`` (see the module docstring for the rules).

    ``sweep``: None = list the whole dataset only where files may lack intents (legacy
    versions, a foreign pointer); True/False force it on/off.
    """
    retention = as_retention(retention)
    now = now or dt.datetime.now(dt.UTC)
    try:
        # Refused rather than clamped: a retention reaching before year 1 is a mistake (a
        # unit error), and a day of margin keeps later arithmetic on the cutoff in range.
        cutoff = now - retention
        cutoff - dt.timedelta(days=1)
    except OverflowError:
        raise InvalidArgument(
            f"retention {retention} is longer than the calendar holds (back to year 1)"
        ) from None
    live_intent_keys, reaped = _intent_keys(store, uuid, now, retention)
    vs = _read_versions(store, uuid)
    infos = {n: version_info(v) for n, v in vs.items()}
    live = sorted(n for n, v in vs.items() if v[0] != "tombstone")
    pointer_keys, foreign, pointer_version = _pointer_keys(store, uuid)
    retained: list[int] = []
    expired: list[int] = []
    for i, n in enumerate(live):
        successor = infos[live[i + 1]] if i + 1 < len(live) else None
        # The version a stale pointer names (its publication failed after the commit) stays
        # until the pointer moves on: its files are kept for kartothek readers, and a
        # tombstone would forget them, so no later GC could collect them. So does every
        # later version: retained versions are one consecutive range (their keys are the
        # first one's state plus the later ones' changes, their chains run from the
        # first), and expiring those between the pointer's and the head deleted files the
        # head still has and entries its state is replayed through.
        if (
            successor is None
            or _parse_time(successor.committed_at) > cutoff
            or (pointer_version is not None and n >= pointer_version)
        ):
            retained.append(n)
        else:
            expired.append(n)
    keep = _keys_of_range(store, uuid, vs, retained)
    keep |= pointer_keys
    dropped = _keys_of_range(store, uuid, vs, expired)
    for files in reaped.values():
        dropped |= set(files)
    meta_keep, old_pieces = keep_chains(store, uuid, vs, retained, expired)
    dropped |= old_pieces
    keep |= _head_keys(store, uuid)
    stamp = now.isoformat()
    # Newest first: an expired version not tombstoned yet (GC interrupted) is still whole,
    # as the entries its state is replayed from are older.
    for n in reversed(expired):
        store.put(version_key(uuid, n), tombstone_bytes(n, stamp))
    # Read the intents again after the tombstones: a restore covers the files it references
    # again with an intent *before* checking that its version is not a tombstone, so either
    # it saw a tombstone (and fails) or its intent is visible now.
    live_intent_keys |= _live_intent_keys(store, uuid)
    victims = sorted(dropped - keep - meta_keep - live_intent_keys)
    _delete_all(store, victims)
    # Only after their files: an interrupted GC finds the reaped intents again.
    _delete_all(store, reaped)
    legacy = any(
        v[0] == "doc" and (infos[n] is None or not infos[n].incarnation)  # type: ignore[union-attr]
        for n, v in vs.items()
    )
    swept = sweep if sweep is not None else (legacy or foreign)
    deleted = list(victims)
    format2 = any(v[0] == "entry" for v in vs.values())
    # Index directories are listed only where some version (or a kept root) has an index.
    indexed = any(
        (v[0] == "entry" and bool(v[1].get("index") or v[1].get("set", {}).get("indices")))
        or (v[0] == "doc" and bool(v[1].indices))
        for v in vs.values()
    ) or any("/_indices/" in k or "/indices/" in k for k in meta_keep | keep)
    deleted += collect_metadata(
        store, uuid, meta_keep | keep | live_intent_keys, now, format2=format2, indexed=indexed
    )
    if swept:
        deleted += _sweep(store, uuid, keep, max(vs, default=-1), cutoff, now)
    deleted += _delete_stale_pointer(store, uuid)
    # The dataset's directories, and the one of its pointer (not below: other datasets').
    temporaries = remove_stale_temporaries(store, uuid)
    temporaries += remove_stale_temporaries(store, uuid.rpartition("/")[0], recursive=False)
    return GCReport(
        deleted=tuple(sorted(set(deleted))),
        expired_versions=tuple(expired),
        retained_versions=tuple(retained),
        reaped_intents=tuple(sorted(k.rsplit("/", 1)[-1].removesuffix(".json") for k in reaped)),
        swept=swept,
        temporaries=tuple(temporaries),
    )


def _sweep(
    store: Store, uuid: str, keep: set[str], newest: int, cutoff: dt.datetime, now: dt.datetime
) -> list[str]:
    """Delete old unreferenced files no intent covers (the rule for files without intents).

    Order matters: a file is listed first; the intents are read after it (a writer records
    a key before writing it, so its intent - if still there - is seen), and then versions
    committed since step 2 (an intent is deleted only after its commit point).
    """
    listed = list(store.list(uuid))
    covered: set[str] = set()
    for meta in list_intents(store, uuid):
        try:
            covered |= set(IntentState.from_bytes(store.get(meta.key), meta.key).keys)
        except (NotFound, MetadataCorrupted):
            continue
    n = newest
    while True:
        v = read_version(store, uuid, n + 1)
        if v is None:
            break
        n += 1
        keep = keep | _version_keys(v)
    internal = (
        versions_prefix(uuid) + "/",
        intents_prefix(uuid) + "/",
        f"{uuid}/_checkpoints/",
        f"{uuid}/_segments/",
        f"{uuid}/_indices/",
        head_key(uuid),
    )
    index_dir = f"{uuid}/indices/"
    victims = []
    for meta in listed:
        key = meta.key
        if key in keep or key in covered or key.startswith(internal):
            continue
        if key.endswith("/_common_metadata"):
            continue
        # Index files are written by a commit attempt a moment before its commit point and
        # carry no intent: a young one may be in flight, whatever the retention.
        young = cutoff if not key.startswith(index_dir) else min(cutoff, now - DEFAULT_LEASE)
        if meta.modified is not None and meta.modified < young:
            victims.append(key)
    _delete_all(store, victims)
    return victims


def _delete_all(store: Store, keys: Iterable[str]) -> None:
    store.delete_many(list(keys), missing_ok=True)


def _delete_stale_pointer(store: Store, uuid: str) -> list[str]:
    """kartothek reads JSON first: a msgpack pointer beside a JSON one is stale."""
    stale = metadata_key(uuid, "msgpack.zstd")
    if store.exists(metadata_key(uuid, "json")) and store.exists(stale):
        store.delete(stale, missing_ok=True)
        return [stale]
    return []
