"""Checkpoint roots: the whole state of one version as settings + segments.

``<uuid>/_checkpoints/<n:020d>.json`` holds ``{"parquetry_checkpoint": root}`` where root is::

    {"format": 2, "version": <VersionInfo>, "schema": b64, "partition_keys": [...],
     "metadata": {...}, "encryption": ... | null, "metadata_format": "json",
     "settings": {...}, "txns": {app_id: version} (when any),
     "indices": {column: <IndexState root form>},
     "files": <number of partitions>, "tables": [table names every partition has],
     "segments": [{"key", "count", "first", "last", "run"} | {"inline": [[label, files, info]]}]}

Written create-if-absent (the content is a function of the state: a lost race is fine).
A new checkpoint reuses every segment of the previous root that lost no entry; the files
added since become a new *run*; segments that lost entries are rewritten in their run;
when there are more than ``MAX_RUNS`` runs the two smallest merge (write amplification
O(log n) per file over its life, like a tiered LSM tree).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from parquetry.dataset.entry import apply_sets, catalog_of, empty_state, info_text
from parquetry.dataset.entry import with_catalog as _with_catalog
from parquetry.dataset.indexwire import checkpointed_states, states_form
from parquetry.dataset.metadata import DatasetDocument, VersionInfo
from parquetry.dataset.naming import (
    checkpoint_key,
    checkpoint_number_from_key,
    checkpoints_prefix,
)
from parquetry.dataset.schema import schema_to_b64
from parquetry.dataset.segments import SegmentSet, write_run
from parquetry.dataset.state import Catalog
from parquetry.errors import AlreadyExists, MetadataCorrupted
from parquetry.store import PutMode, Store

__all__ = [
    "CHECKPOINT_KEY",
    "checkpoint_key",
    "checkpoint_number_from_key",
    "checkpoints_prefix",
    "decode_root",
    "encode_root",
    "state_from_root",
    "write_checkpoint",
]

CHECKPOINT_KEY = "parquetry_checkpoint"
#: States with at most this many partitions keep their entries inside the root.
INLINE_FILES = 64
#: Runs of segments beyond which the two smallest merge.
MAX_RUNS = 8


def encode_root(root: Mapping[str, Any]) -> bytes:
    return json.dumps({CHECKPOINT_KEY: root}, separators=(",", ":")).encode()


def decode_root(data: bytes, key: str) -> dict[str, Any]:
    try:
        root = json.loads(data)[CHECKPOINT_KEY]
        if not isinstance(root, dict) or root.get("format") != 2:
            raise ValueError("not a format-2 checkpoint")
        VersionInfo.from_json(root["version"])
        if not isinstance(root["segments"], list):
            raise ValueError("segments: expected a list")
    except (ValueError, TypeError, KeyError) as exc:
        raise MetadataCorrupted(f"{key}: invalid checkpoint ({exc})", key=key) from None
    return root


def state_from_root(store: Store, uuid: str, root: Mapping[str, Any], key: str) -> DatasetDocument:
    """The state a root describes; its segments load lazily."""
    fields = apply_sets(empty_state(uuid), root, key)
    fields["version"] = VersionInfo.from_json(root["version"])
    tables = root.get("tables") or ()
    segs = SegmentSet(store, root["segments"], tables) if root["segments"] else None
    return _with_catalog(empty_state(uuid), Catalog(segs), **fields)


def _root_fields(doc: DatasetDocument) -> dict[str, Any]:
    assert doc.version is not None
    assert doc.schema is not None
    return {
        "format": 2,
        "version": doc.version.to_json(),
        "schema": schema_to_b64(doc.schema),
        "partition_keys": list(doc.partition_keys),
        "metadata": dict(doc.metadata),
        "encryption": dict(doc.encryption) if doc.encryption is not None else None,
        "metadata_format": doc.metadata_format,
        "settings": dict(doc.settings),
        **({"txns": dict(doc.txns)} if doc.txns else {}),
    }


def _row(label: str, rec: Any) -> list[Any]:
    return [label, dict(rec[0]), info_text(rec[1])]


def _segments(store: Store, uuid: str, cat: Catalog) -> list[dict[str, Any]]:
    """The segment descriptors of ``cat``, writing only new and changed segments."""
    if cat.count <= INLINE_FILES:
        return [{"inline": sorted(_row(lbl, rec) for lbl, rec in cat)}] if cat.count else []
    kept: list[dict[str, Any]] = []
    fresh = [_row(lbl, rec) for lbl, rec in cat.adds.items()]
    segs = cat.segments
    if segs is not None:
        removed = set(cat.removed)
        for i, d in enumerate(segs.descriptors):
            if "inline" in d:
                fresh += [
                    _row(lbl, rec) for lbl, rec in segs.entries(i).items() if lbl not in removed
                ]
            elif removed and segs.holds(i, removed):
                rest = sorted(
                    _row(lbl, rec) for lbl, rec in segs.entries(i).items() if lbl not in removed
                )
                kept += [dict(s, run=d.get("run", 0)) for s in write_run(store, uuid, rest)]
            else:
                kept.append(dict(d))
    runs: dict[int, list[dict[str, Any]]] = {}
    for d in kept:
        runs.setdefault(int(d.get("run", 0)), []).append(d)
    if fresh:
        run_id = max(runs, default=-1) + 1
        runs[run_id] = write_run(store, uuid, sorted(fresh))
    while len(runs) > MAX_RUNS:
        a, b = sorted(runs, key=lambda r: sum(int(d["count"]) for d in runs[r]))[:2]
        merged = SegmentSet(store, runs.pop(a) + runs.pop(b))
        rows = sorted(_row(lbl, rec) for lbl, rec in merged.items())
        runs[min(a, b)] = write_run(store, uuid, rows)
    out: list[dict[str, Any]] = []
    for run_id, descs in sorted(runs.items()):
        for d in sorted(descs, key=lambda d: d["first"]):
            out.append({**d, "run": run_id})
    return out


def write_checkpoint(store: Store, doc: DatasetDocument) -> dict[str, Any]:
    """Write the checkpoint of state ``doc`` (its segments first); the root."""
    assert doc.version is not None
    cat = catalog_of(doc)
    root = _root_fields(doc)
    root["indices"] = states_form(checkpointed_states(store, doc))
    root["files"] = cat.count
    root["tables"] = list(doc.tables) if cat.count else []
    root["segments"] = _segments(store, doc.uuid, cat)
    key = checkpoint_key(doc.uuid, doc.version.number)
    try:
        store.put(key, encode_root(root), mode=PutMode.CREATE)
    except AlreadyExists:
        # The same state checkpointed by another writer (maybe with other segments): use
        # the stored root, so the head never names segments no stored root keeps.
        return decode_root(store.get(key), key)
    return root


def list_numbered(store: Store, prefix: str, number_of: Callable[[str], int | None]) -> list[int]:
    """The numbers ``number_of`` finds in the keys under ``prefix`` (one LIST), sorted;
    keys it does not recognise (None) are skipped. Checkpoints and versions share it."""
    numbers = (number_of(meta.key) for meta in store.list(prefix))
    return sorted(n for n in numbers if n is not None)


def list_checkpoints(store: Store, uuid: str) -> list[int]:
    return list_numbered(store, checkpoints_prefix(uuid), checkpoint_number_from_key)
