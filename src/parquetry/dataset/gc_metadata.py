"""What garbage collection keeps and deletes of a dataset's own metadata: checkpoints,
segments and index pieces (the part of :mod:`parquetry.dataset.gc` that is not about
versions and data files).

Expired entries become tombstones only after the oldest retained version no longer needs
them (:func:`keep_chains` writes its checkpoint first); checkpoints, segments and index
pieces nothing retained needs are deleted once older than the intent lease
(:func:`collect_metadata`): a young one may belong to a commit or checkpoint in flight.
"""

from __future__ import annotations

import datetime as dt
import json

from parquetry.dataset.checkpoint import decode_root
from parquetry.dataset.entry import self_contained
from parquetry.dataset.format2 import Version, load_state
from parquetry.dataset.head import head_key
from parquetry.dataset.indexwire import root_piece_keys
from parquetry.dataset.intents import DEFAULT_LEASE
from parquetry.errors import MetadataCorrupted, NotFound
from parquetry.store import Store

__all__ = ["collect_metadata", "head_keys", "keep_chains"]


def keep_chains(
    store: Store, uuid: str, vs: dict[int, Version], retained: list[int], expired: list[int]
) -> tuple[set[str], set[str]]:
    """Before expired entries become tombstones: make sure the oldest retained version does
    not need them (write its checkpoint if its chain runs through them). Returns (the
    checkpoint, segment and index piece keys retained versions need, the index pieces the
    older checkpoints reference: pieces a checkpoint merged are named by no entry, so
    this is how those of expired versions are found, e.g. of an index an overwrite
    dropped)."""
    from parquetry.dataset.checkpoint import checkpoint_key, list_checkpoints, write_checkpoint

    checkpoints = list_checkpoints(store, uuid)
    if retained:
        k0 = retained[0]
        below = [c for c in checkpoints if c <= k0]
        c0 = below[-1] if below else -1
        needs = vs[k0][0] == "entry" and not self_contained(vs[k0][1])
        if needs and expired and c0 < max(expired):
            write_checkpoint(store, load_state(store, uuid, k0))
            checkpoints = sorted({*checkpoints, k0})
            c0 = k0
    else:
        c0 = max(checkpoints, default=-1)
    keep = {checkpoint_key(uuid, c) for c in checkpoints if c >= c0}
    old_pieces: set[str] = set()
    for c in checkpoints:
        key = checkpoint_key(uuid, c)
        try:
            root = decode_root(store.get(key), key)
        except (NotFound, MetadataCorrupted):
            continue
        if c < c0:
            old_pieces |= root_piece_keys(root.get("indices"))
            continue
        keep |= {d["key"] for d in root["segments"] if "key" in d}
        keep |= root_piece_keys(root.get("indices"))
    return keep, old_pieces


def collect_metadata(
    store: Store,
    uuid: str,
    keep: set[str],
    now: dt.datetime,
    *,
    format2: bool = False,
    indexed: bool = False,
) -> list[str]:
    """Old checkpoints and segments nothing retained needs (young segments may belong to a
    checkpoint being written)."""
    from parquetry.dataset.checkpoint import checkpoints_prefix
    from parquetry.dataset.segments import segments_prefix

    keep = keep | head_keys(store, uuid)
    young = now - DEFAULT_LEASE
    victims = []
    # Index pieces (deltas written a moment before a commit point, pieces of a checkpoint
    # being written) and the pointer's kartothek index files (old ones are garbage once the
    # pointer moved on; a kartothek reader may still read one for a moment) are protected
    # by age too.
    prefixes = [checkpoints_prefix(uuid), segments_prefix(uuid)]
    if indexed:
        prefixes.append(f"{uuid}/_indices/")
        if format2:
            prefixes.append(f"{uuid}/indices/")
    for prefix in prefixes:
        for meta in store.list(prefix):
            if meta.key in keep:
                continue
            if meta.modified is not None and meta.modified > young:
                continue
            victims.append(meta.key)
    store.delete_many(victims, missing_ok=True)
    return victims


def head_keys(store: Store, uuid: str) -> set[str]:
    """The segments and index pieces of the head's root: readers of the newest version use
    them (the head's checkpoint root plus its tail), while the newest checkpoint (the one
    GC itself wrote) may hold other pieces: a checkpoint rewrites an index with many dead
    labels."""
    try:
        head = store.get(head_key(uuid))
        root = json.loads(head).get("parquetry_head", {}).get("root") or {}
        keys = {d["key"] for d in root.get("segments", []) if "key" in d}
        return keys | root_piece_keys(root.get("indices"))
    except (NotFound, ValueError, AttributeError, TypeError):
        return set()
