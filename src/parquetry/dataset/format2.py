"""Opening format-2 states: head, checkpoints, entries (and format-1 documents among them).

``_versions/<n>.json`` holds an entry (format 2), a full document (format 1, a *full
entry*) or a tombstone. The newest state is the head's checkpoint root plus its tail,
rolled forward past entries the head does not show yet (one probe GET when it is
current). Version k is the newest checkpoint <= k plus entries up to k, or the newest
full / self-contained entry <= k plus the entries after it.
"""

from __future__ import annotations

import json
import warnings
from typing import Any

from parquetry.dataset.checkpoint import (
    checkpoint_key,
    decode_root,
    list_checkpoints,
    state_from_root,
)
from parquetry.dataset.docschema import parse_document_bytes
from parquetry.dataset.entry import (
    ENTRY_KEY,
    apply_entry,
    decode_entry,
    empty_state,
    self_contained,
)
from parquetry.dataset.head import Lineage, decode_head, head_key
from parquetry.dataset.metadata import DatasetDocument, VersionInfo
from parquetry.dataset.naming import version_key
from parquetry.errors import (
    DatasetNotFound,
    MetadataCorrupted,
    NotFound,
    ParquetryError,
    PointerCorruptedWarning,
    VersionExpired,
)
from parquetry.store import Store

__all__ = [
    "Version",
    "advance",
    "NOT_PROBED",
    "load_head_state",
    "load_state",
    "read_version",
    "roll_forward_state",
    "version_info",
]

TOMBSTONE_KEY = "parquetry_expired_version"

#: What ``_versions/<n>.json`` holds: ("tombstone", None), ("doc", full document) or
#: ("entry", entry body), and its size in bytes.
Version = tuple[str, Any, int]


def parse_version(data: bytes, key: str) -> Version:
    if data.startswith(b'{"' + TOMBSTONE_KEY.encode()):
        return ("tombstone", None, len(data))
    if data.startswith(b'{"' + ENTRY_KEY.encode()):
        # The same parser as documents: NaN/Infinity, huge numbers and deep nesting refused.
        raw = parse_document_bytes(data, "json", key=key)
        return ("entry", decode_entry(raw, key), len(data))
    raw = parse_document_bytes(data, "json", key=key)
    return ("doc", DatasetDocument.from_dict(raw, key=key), len(data))


def read_version(store: Store, uuid: str, number: int) -> Version | None:
    """The parsed ``_versions/<number>.json``, or None if it does not exist."""
    key = version_key(uuid, number)
    try:
        data = store.get(key)
    except NotFound:
        return None
    return parse_version(data, key)


def version_info(v: Version) -> VersionInfo | None:
    kind, value, _ = v
    if kind == "entry":
        return VersionInfo.from_json(value["version"])
    if kind == "doc":
        return value.version  # type: ignore[no-any-return]
    return None


def advance(
    doc: DatasetDocument | None, v: Version, key: str, store: Store | None = None
) -> DatasetDocument | None:
    """The state after version ``v`` on state ``doc`` (None: tombstone on no state)."""
    kind, value, size = v
    if kind == "tombstone":
        return doc
    if kind == "doc":
        return value  # type: ignore[no-any-return]
    if doc is None:
        if not self_contained(value):
            return None
        doc = empty_state(key.split("/", 1)[0])
    lineage: Lineage | None = doc.lineage
    new = apply_entry(doc, value, key, store)
    if lineage is not None:
        new = new.evolve(lineage=lineage.extended(value, size))
    return new


#: What :func:`load_head_state` returns as its probe when it did not probe.
NOT_PROBED = ("not probed", None, 0)


def roll_forward_state(
    store: Store,
    uuid: str,
    doc: DatasetDocument | None,
    number: int,
    probe: Version | None = NOT_PROBED,
) -> tuple[DatasetDocument | None, int, int, bool]:
    """(state, newest number, GETs, whether anything newer landed) after ``number``.

    ``doc`` is the state of ``number`` (None: unknown; then a newer delta entry can only be
    applied to the state loaded from scratch). ``probe``: ``_versions/<number + 1>`` when
    the caller read it already (None: missing)."""
    requests = 0
    moved = skipped = False
    while True:
        if probe is NOT_PROBED:
            requests += 1
            v = read_version(store, uuid, number + 1)
        else:
            v, probe = probe, NOT_PROBED
        if v is None:
            if doc is None and skipped:
                doc = load_state(store, uuid, number)  # VersionExpired: expired meanwhile
            return doc, number, requests, moved
        number += 1
        moved = True
        if v[0] == "tombstone" and doc is not None:
            # Garbage collection expired this version after ``doc`` was read: its changes
            # are gone, and skipping them would build on a wrong state (a conflict-safe
            # commit would miss what it removed, a txn replay would commit twice). The state
            # is loaded again from the checkpoint GC wrote before tombstoning.
            doc, skipped = None, True
            continue
        if doc is None and v[0] == "entry" and not self_contained(v[1]):
            doc = load_state(store, uuid, number)
            continue
        doc = advance(doc, v, version_key(uuid, number), store)


def _read_root(store: Store, uuid: str, c: int) -> dict[str, Any]:
    key = checkpoint_key(uuid, c)
    try:
        return decode_root(store.get(key), key)
    except NotFound:
        raise MetadataCorrupted(f"checkpoint {key} is missing", key=key) from None


def _from_root(store: Store, uuid: str, c: int, root: Any) -> DatasetDocument:
    if root is None:
        root = _read_root(store, uuid, c)
    doc = state_from_root(store, uuid, root, checkpoint_key(uuid, c))
    return doc.evolve(lineage=Lineage(c, root))


def _root_and_probe(
    store: Store, uuid: str, c: int, number: int
) -> tuple[dict[str, Any], Version | None]:
    """The root of checkpoint ``c`` and ``_versions/<number + 1>``, read concurrently (an
    open whose head does not inline the root waits for one round trip, not two)."""

    def fetch(i: int) -> Any:
        if i == 0:
            return _read_root(store, uuid, c)
        try:
            return read_version(store, uuid, number + 1)
        except ParquetryError:
            return NOT_PROBED  # the roll forward reads it again and reports the error

    root, probe = store.map_concurrent(fetch, [0, 1], max_workers=2)
    return root, probe


def load_head_state(
    store: Store, uuid: str, *, probe: bool = False
) -> tuple[DatasetDocument, dict[str, Any], int, Version | None] | None:
    """(state of the head, head body, requests, probe), or None when there is no head; a
    corrupted head (or one naming a lost checkpoint) falls back to listing, with a warning.

    ``probe``: when the root must be read, also read ``_versions/<head number + 1>`` at
    the same time and return it (None: missing); else the probe is ``NOT_PROBED``."""
    key = head_key(uuid)
    try:
        data = store.get(key)
    except NotFound:
        return None
    probed: Version | None = NOT_PROBED
    try:
        head = decode_head(data, key)
        c = head["checkpoint"]
        requests = 1
        if c is None:
            doc: DatasetDocument | None = None
            lineage = Lineage(None, None)
        else:
            root = head["root"]
            if root is None:
                if probe:
                    root, probed = _root_and_probe(store, uuid, c, head["number"])
                    requests += 1
                else:
                    root = _read_root(store, uuid, c)
                requests += 1
            doc = _from_root(store, uuid, c, root)
            lineage = doc.lineage
        for body in head["tail"]:
            n = body["version"]["number"]
            size = len(json.dumps(body, separators=(",", ":")))
            if doc is None:
                doc = empty_state(uuid).evolve(lineage=lineage)
            doc = advance(doc, ("entry", decode_entry({ENTRY_KEY: body}, key), size), key, store)
            assert doc is not None
            _ = n
        if doc is None:
            raise MetadataCorrupted(f"{key}: empty head", key=key)
        lineage = doc.lineage and _with_pointer(doc.lineage, head)
        return doc.evolve(lineage=lineage), head, requests, probed
    except MetadataCorrupted as exc:
        found = _newest_by_listing(store, uuid)
        if found is None:
            raise
        warnings.warn(
            PointerCorruptedWarning(
                f"the head {key} of dataset {uuid!r} is unreadable ({exc}); using checkpoint "
                f"and entries found by listing (run repair to rewrite it)"
            ),
            stacklevel=4,
        )
        return found, {"pointer": {}}, 3, NOT_PROBED


def _with_pointer(lineage: Lineage, head: dict[str, Any]) -> Lineage:
    pointer = head.get("pointer") or {}
    return Lineage(lineage.checkpoint, lineage.root, lineage.tail, lineage.tail_bytes, pointer)


def _newest_by_listing(store: Store, uuid: str) -> DatasetDocument | None:
    for c in reversed(list_checkpoints(store, uuid)):
        try:
            doc = _from_root(store, uuid, c, None)
        except MetadataCorrupted:
            continue
        newer, _, _, _ = roll_forward_state(store, uuid, doc, c)
        return newer
    return None


def load_state(store: Store, uuid: str, number: int) -> DatasetDocument:
    """The state of version ``number`` (DatasetNotFound if it does not exist, its subclass
    VersionExpired if garbage collection expired it)."""
    key = version_key(uuid, number)
    v = read_version(store, uuid, number)
    if v is None:
        raise DatasetNotFound(f"dataset {uuid!r} has no version {number}", key=key)
    if v[0] == "tombstone":
        raise VersionExpired(
            f"version {number} of dataset {uuid!r} expired (garbage collected)", key=key
        )
    if v[0] == "doc" or self_contained(v[1]):
        doc = advance(None, v, key, store)
        assert doc is not None
        return doc
    # GC writes the checkpoint of the oldest version it keeps before it tombstones the entries
    # older than it. A walk that meets a tombstone may have listed the checkpoints before
    # that write: listing once more then finds it (a second miss is a real gap).
    for attempt in (0, 1):
        checkpoints = [c for c in list_checkpoints(store, uuid) if c <= number]
        if checkpoints and checkpoints[-1] == number:
            return _from_root(store, uuid, number, None)
        chain: list[Version] = [v]
        base: DatasetDocument | None = None
        start = checkpoints[-1] if checkpoints else -1
        n = number - 1
        gone = False
        while n > start:
            prev = read_version(store, uuid, n)
            if prev is None or prev[0] == "tombstone":
                gone = True
                break
            chain.append(prev)
            if prev[0] == "doc" or self_contained(prev[1]):
                break
            n -= 1
        else:
            if start >= 0:
                base = _from_root(store, uuid, start, None)
        if not gone:
            break
        if attempt:
            now = read_version(store, uuid, number)
            if now is not None and now[0] == "tombstone":  # expired while this walked
                raise VersionExpired(
                    f"version {number} of dataset {uuid!r} expired (garbage collected)", key=key
                )
            raise MetadataCorrupted(
                f"version {number} of dataset {uuid!r} needs version {n}, which is gone",
                key=version_key(uuid, n),
            )
    chain.reverse()
    first = number - len(chain) + 1
    for i, ver in enumerate(chain):
        base = advance(base, ver, version_key(uuid, first + i), store)
    if base is None:
        raise MetadataCorrupted(f"version {number} of dataset {uuid!r} has no base", key=key)
    return base
