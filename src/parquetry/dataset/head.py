"""The head ``<uuid>/_head.json``: where opening the newest version starts.

``{"parquetry_head": {"format": 2, "number": n, "incarnation": id, "epoch": e,
"checkpoint": c | null, "root": <root of c> | null, "tail": [entry c+1, ..., entry n],
"pointer": {"number": p, "etag": ..., "mode": ..., "bytes": ...}}}``

The root is inline when its JSON is at most ``ROOT_INLINE_BYTES``; ``checkpoint`` is null
only before a dataset's first checkpoint (the tail then starts with its self-contained
creating entry). The head is a cache of what ``_versions`` and ``_checkpoints`` hold:
readers probe past it, so a head write that failed or lags loses nothing. It only moves
forward: a writer replaces it (compare-and-swap) only while the stored number is lower.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from parquetry.dataset.naming import head_key
from parquetry.errors import (
    AlreadyExists,
    MetadataCorrupted,
    NotFound,
    ParquetryError,
    PreconditionFailed,
)
from parquetry.store import Capability, PutMode, Store

__all__ = [
    "CHECKPOINT_ENTRIES",
    "CHECKPOINT_TAIL_BYTES",
    "HEAD_KEY",
    "ROOT_INLINE_BYTES",
    "Lineage",
    "decode_head",
    "encode_head",
    "head_key",
    "root_bytes",
    "write_head",
]

HEAD_KEY = "parquetry_head"
#: A checkpoint is written once this many entries follow the last one ...
CHECKPOINT_ENTRIES = 100
#: ... or once the entries since it (the head's tail) are this big (bounds the head) ...
CHECKPOINT_TAIL_BYTES = 32 * 1024
#: ... or once the tail has cost the heads since the checkpoint as many bytes as a
#: checkpoint costs: its root, and at least this much (rent or buy, see
#: :meth:`Lineage.checkpoint_due`).
CHECKPOINT_MIN_COST = 32 * 1024
#: Roots up to this size are copied into the head (no GET of the checkpoint to open): a
#: head then costs a commit the root + ~2 sqrt(C e / 2) of tail and checkpoints, <= ~60 KiB
#: for 1 KiB entries (measured at 10,000 partitions x 10 files, 1M index values: the root
#: grows from 19 to 33 KiB as the index tail fills up to 512 pairs; 32 KiB here cost that
#: size a 5th open request). Bigger roots (100,000 partitions: ~200 KiB) are read with the
#: probe.
ROOT_INLINE_BYTES = 48 * 1024

_root_sizes: dict[int, tuple[Mapping[str, Any], int]] = {}


def root_bytes(root: Mapping[str, Any] | None) -> int:
    """The size of ``root``'s JSON (0 for None), cached for the few roots in use (every
    commit asks: whether to inline it, whether a checkpoint is due)."""
    if root is None:
        return 0
    hit = _root_sizes.get(id(root))
    if hit is not None and hit[0] is root:
        return hit[1]
    size = len(json.dumps(root, separators=(",", ":")))
    if len(_root_sizes) >= 8:
        _root_sizes.clear()
    _root_sizes[id(root)] = (root, size)
    return size


@dataclass(frozen=True, slots=True)
class Lineage:
    """How a format-2 state is reached: checkpoint ``checkpoint`` (its root when known) and
    the entry bodies after it (``tail``), plus the pointer bookkeeping."""

    checkpoint: int | None
    root: Mapping[str, Any] | None
    tail: tuple[Mapping[str, Any], ...] = ()
    tail_bytes: int = 0
    pointer: Mapping[str, Any] = field(default_factory=dict)

    def extended(self, body: Mapping[str, Any], size: int) -> Lineage:
        return Lineage(
            self.checkpoint, self.root, (*self.tail, body), self.tail_bytes + size, self.pointer
        )

    def checkpoint_due(self) -> bool:
        """Whether the commit that made this lineage writes a checkpoint.

        Every commit rewrites the head, tail included: since the last checkpoint the heads
        have carried about ``tail_bytes * (len(tail) + 1) / 2`` bytes of tail. A checkpoint
        writes the root once (its new segments are what the tail added) and empties the
        tail, so it is due once those bytes reach the checkpoint's cost *C* (the root's
        size, at least ``CHECKPOINT_MIN_COST``): with entries of *e* bytes, every
        ~sqrt(2C/e) commits, and tail + checkpoint cost ~2 sqrt(Ce/2) per commit,
        amortised (~20 KiB for a 180 KiB root). The bounds on entries and tail bytes cap
        the head whatever the sizes."""
        n = len(self.tail)
        if n >= CHECKPOINT_ENTRIES or self.tail_bytes >= CHECKPOINT_TAIL_BYTES:
            return True
        cost = max(root_bytes(self.root), CHECKPOINT_MIN_COST)
        return self.tail_bytes * (n + 1) >= 2 * cost


def encode_head(number: int, info: Mapping[str, Any], lineage: Lineage) -> bytes:
    root = lineage.root
    if root_bytes(root) > ROOT_INLINE_BYTES:
        root = None
    body = {
        "format": 2,
        "number": number,
        "incarnation": info.get("incarnation", ""),
        "epoch": info.get("epoch", 0),
        "checkpoint": lineage.checkpoint,
        "root": root,
        "tail": list(lineage.tail),
        "pointer": dict(lineage.pointer),
    }
    return json.dumps({HEAD_KEY: body}, separators=(",", ":")).encode()


def decode_head(data: bytes, key: str) -> dict[str, Any]:
    """The checked head body; MetadataCorrupted when it is not one."""
    try:
        body = json.loads(data)[HEAD_KEY]
        if not isinstance(body, dict) or body.get("format") != 2:
            raise ValueError("not a format-2 head")
        number, c, tail = body["number"], body["checkpoint"], body["tail"]
        if not isinstance(number, int) or not isinstance(tail, list):
            raise ValueError("bad number or tail")
        first = (c + 1) if c is not None else number - len(tail) + 1
        if c is not None and number != c + len(tail):
            raise ValueError(f"tail of {len(tail)} entries does not lead from {c} to {number}")
        for i, entry in enumerate(tail):
            if entry["version"]["number"] != first + i:
                raise ValueError("tail entries out of order")
        if c is None and (not tail or not tail[0].get("replace_all")):
            raise ValueError("no checkpoint and no creating entry")
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise MetadataCorrupted(f"{key}: invalid head ({exc})", key=key) from None
    return body


def _stored_number(store: Store, key: str) -> int | None:
    try:
        return int(decode_head(store.get(key), key)["number"])
    except (NotFound, MetadataCorrupted):
        return None


def write_head(store: Store, uuid: str, number: int, data: bytes, *, same: bool = False) -> None:
    """Replace the head by ``data`` (version ``number``) unless a newer one is stored
    (``same``: also replace a head of the same number, e.g. by one with a new checkpoint).

    Best effort after the commit point: failures are swallowed (readers probe past a
    lagging head; a corrupted or missing one makes them list ``_checkpoints``).
    """
    key = head_key(uuid)
    try:
        if not store.supports(Capability.COMPARE_AND_SWAP):
            stored = _stored_number(store, key)
            if stored is None or stored < number or (same and stored == number):
                store.put(key, data)
            return
        for _ in range(64):
            try:
                meta = store.head(key)
            except NotFound:
                try:
                    store.put(key, data, mode=PutMode.CREATE)
                    return
                except AlreadyExists:
                    continue
            stored = _stored_number(store, key)
            if stored is not None and (stored > number or (stored == number and not same)):
                return  # a later commit's head includes ours
            if meta.version is None:
                store.put(key, data)
                return
            try:
                store.put(key, data, mode=PutMode.UPDATE, expected_version=meta.version)
                return
            except (PreconditionFailed, NotFound):
                continue
    except ParquetryError:
        return
