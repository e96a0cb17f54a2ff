"""Segments: sorted runs of file entries a checkpoint root lists, loaded on demand.

A segment object ``<uuid>/_segments/<id>.msgpack.zst`` is a zstd-compressed msgpack list of
``[label, {table: key}, info]`` sorted by label (``info``: the FileInfo JSON text, or None
for a partition another tool wrote). ``id`` is the SHA-256 of the uncompressed content
(first 32 hex digits), so two writers checkpointing the same state write the same object
(create-if-absent; a lost race is fine).

A root lists segments as ``{"key", "count", "first", "last"}`` or, for small states,
``{"inline": [...entries...]}``. Segments written together form a *run*: their label
ranges do not overlap, so a lookup loads at most one segment per run; runs may overlap.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import msgpack
import zstandard

from parquetry.dataset.naming import segment_key, segments_prefix
from parquetry.errors import AlreadyExists, MetadataCorrupted, NotFound
from parquetry.store import PutMode, Store

__all__ = [
    "SEGMENT_ENTRIES",
    "SegmentSet",
    "decode_segment",
    "encode_segment",
    "segments_prefix",
    "write_run",
]

#: Entries per segment object: a point lookup reads one segment per run (~100-300 KB).
SEGMENT_ENTRIES = 2048


def encode_segment(entries: Sequence[Sequence[Any]]) -> tuple[str, bytes]:
    """(id, stored bytes) of a segment holding ``entries`` (already sorted by label)."""
    packed = msgpack.packb([list(e) for e in entries], use_bin_type=True)
    ident = hashlib.sha256(packed).hexdigest()[:32]
    return ident, zstandard.ZstdCompressor(write_content_size=True).compress(packed)


def decode_segment(data: bytes, key: str) -> dict[str, tuple[dict[str, str], Any]]:
    try:
        raw = msgpack.unpackb(zstandard.ZstdDecompressor().decompress(data), raw=False)
        out = {}
        for label, files, info in raw:
            if not isinstance(label, str) or not isinstance(files, dict):
                raise ValueError("bad entry")
            if info is not None and not isinstance(info, str):
                raise ValueError("bad statistics")
            out[label] = (files, info)
        return out
    except (ValueError, TypeError, msgpack.UnpackException, zstandard.ZstdError) as exc:
        raise MetadataCorrupted(f"segment {key} is unreadable ({exc})", key=key) from None


def write_run(store: Store, uuid: str, entries: list[list[Any]]) -> list[dict[str, Any]]:
    """Write sorted ``entries`` as one run of segments; their descriptors."""
    out: list[dict[str, Any]] = []
    chunks = [entries[i : i + SEGMENT_ENTRIES] for i in range(0, len(entries), SEGMENT_ENTRIES)]

    def put(chunk: list[list[Any]]) -> dict[str, Any]:
        ident, data = encode_segment(chunk)
        key = segment_key(uuid, ident)
        with contextlib.suppress(AlreadyExists):  # the same content (the key is its hash)
            store.put(key, data, mode=PutMode.CREATE)
        return {"key": key, "count": len(chunk), "first": chunk[0][0], "last": chunk[-1][0]}

    out = list(store.map_concurrent(put, chunks, max_workers=8)) if chunks else []
    return out


class SegmentSet:
    """The segments of one root, each loaded at most once (thread-safe)."""

    __slots__ = ("_loaded", "_lock", "descriptors", "keys", "loads", "store", "tables")

    def __init__(
        self, store: Store, descriptors: Sequence[dict[str, Any]], tables: Sequence[str] = ()
    ):
        self.store = store
        #: The tables every partition has (from the root), so naming them needs no GET.
        self.tables = tuple(tables)
        self.descriptors = list(descriptors)
        self._loaded: dict[int, dict[str, tuple[dict[str, str], Any]]] = {}
        self._lock = threading.Lock()
        self.loads = 0
        #: Keys of the segments loaded so far, in order (what planning reports).
        self.keys: list[str] = []

    @property
    def count(self) -> int:
        return sum(len(d["inline"]) if "inline" in d else int(d["count"]) for d in self.descriptors)

    def _segment(self, i: int) -> dict[str, tuple[dict[str, str], Any]]:
        seg = self._loaded.get(i)
        if seg is not None:
            return seg
        d = self.descriptors[i]
        if "inline" in d:
            seg = {label: (files, info) for label, files, info in d["inline"]}
        else:
            key = d["key"]
            try:
                data = self.store.get(key)
            except NotFound:
                raise MetadataCorrupted(f"segment {key} is missing", key=key) from None
            seg = decode_segment(data, key)
            with self._lock:
                self.loads += 1
                self.keys.append(key)
        self._loaded[i] = seg
        return seg

    def get(self, label: str) -> tuple[dict[str, str], Any] | None:
        for i, d in enumerate(self.descriptors):
            if "inline" not in d and not (d["first"] <= label <= d["last"]):
                continue
            rec = self._segment(i).get(label)
            if rec is not None:
                return rec
        return None

    def holds(self, i: int, labels: set[str]) -> bool:
        """Whether segment ``i`` holds any of ``labels`` (loading it only if its range may)."""
        d = self.descriptors[i]
        if "inline" not in d and not any(d["first"] <= lbl <= d["last"] for lbl in labels):
            return False
        return any(lbl in self._segment(i) for lbl in labels)

    def entries(self, i: int) -> dict[str, tuple[dict[str, str], Any]]:
        return self._segment(i)

    def items(self) -> Iterator[tuple[str, tuple[dict[str, str], Any]]]:
        if len(self.descriptors) > 1:
            # Fetch every segment concurrently first (a full scan), then yield in order.
            todo = [i for i in range(len(self.descriptors)) if i not in self._loaded]
            if todo:
                list(self.store.map_concurrent(self._segment, todo, max_workers=16))
        for i in range(len(self.descriptors)):
            yield from self._segment(i).items()
