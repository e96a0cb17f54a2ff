"""After the commit point: checkpoint, pointer and head of a committed version.

After the commit point the pointer (the kartothek metadata file) is rewritten. Pointer
writes are unconditional (kartothek writes it the same way), so a slow writer could put an
older state back; the last writer of the pointer therefore probes for the next version
after publishing and republishes the newest one (:func:`publish_pointer`). Under
contention a writer that sees a newer version leaves the pointer and the head to that
version's writer (:func:`finish_commit`). Readers also probe ahead of the head, so a
commit whose pointer or head update failed is still visible.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from parquetry.dataset.checkpoint import write_checkpoint
from parquetry.dataset.head import Lineage, encode_head, write_head
from parquetry.dataset.indexwire import PLACEHOLDER, parse_states, pointer_document
from parquetry.dataset.metadata import DatasetDocument, encode_document
from parquetry.dataset.naming import metadata_key, version_key
from parquetry.dataset.pointer import (
    RECONCILE_OPERATION,
    commit_writes_pointer,
    effective_mode,
    every_commit_bytes,
    pointer_mode,
)
from parquetry.dataset.versions import roll_forward
from parquetry.errors import ParquetryError
from parquetry.store import ObjectMeta, Store

__all__ = [
    "Published",
    "checkpoint_state",
    "finish_commit",
    "others_publish",
    "publish_pointer",
    "with_root_indices",
]


def finish_commit(
    store: Store,
    uuid: str,
    doc: DatasetDocument,
    body: dict[str, Any],
    size: int,
    number: int,
    fmt: str,
    stale_format: str | None = None,
    *,
    contended: bool = False,
) -> DatasetDocument:
    """After the commit point of version ``number`` (entry ``body`` of ``size`` bytes):
    a checkpoint if due, the pointer if the policy says so, then the head. Best effort:
    each step only speeds readers up (they probe past the head, list checkpoints).

    A newer version's writer publishes the pointer and the head after its own commit
    point (both cover this version), so once one is known to exist this writer leaves
    them to it: under contention most writers skip both. ``contended`` (the commit lost
    a race) makes it look first (one GET), before the pointer's PUTs."""
    lineage: Lineage | None = doc.lineage
    if lineage is not None:
        lineage = lineage.extended(body, size)
    pointer: dict[str, Any] = dict(lineage.pointer) if lineage is not None else {}
    checkpointed = False
    if lineage is None or lineage.checkpoint_due():
        try:
            root = write_checkpoint(store, doc)
            lineage = Lineage(number, root, (), 0, pointer)
            checkpointed = True
            doc = with_root_indices(doc, root)
        except ParquetryError:
            lineage = None if lineage is None or lineage.checkpoint is None else lineage
    newest = number
    if commit_writes_pointer(doc, pointer, number, checkpointed):
        written = publish_pointer(
            store,
            uuid,
            doc,
            None,
            number,
            fmt,
            stale_format,
            look_first=contended and stale_format is None and others_publish(doc, pointer),
        )
        if written is not None:
            newest = written.newest
            if written.meta is not None:
                pointer = written.bookkeeping(doc)
    if lineage is None:
        return doc.evolve(change=None, lineage=None)
    lineage = Lineage(lineage.checkpoint, lineage.root, lineage.tail, lineage.tail_bytes, pointer)
    if newest == number or checkpointed or not others_publish(doc, pointer):
        assert doc.version is not None
        write_head(store, uuid, number, encode_head(number, doc.version.to_json(), lineage))
    return doc.evolve(change=None, lineage=lineage)


def others_publish(doc: DatasetDocument, last: Mapping[str, Any]) -> bool:
    """Whether the next commit of ``doc``'s dataset rewrites the pointer too (``last``: the
    bookkeeping of the last pointer write), so a writer that sees one may leave the
    pointer and the head to it: mode ``every-commit``, or ``auto`` below its threshold. A
    commit replacing kartothek's document publishes itself (kartothek's write must leave
    the pointer exactly once)."""
    if doc.version is not None and doc.version.operation == RECONCILE_OPERATION:
        return False
    mode = pointer_mode(doc)
    size = last.get("bytes")
    return mode == "every-commit" or (
        mode == "auto" and isinstance(size, int) and size <= every_commit_bytes()
    )


def with_root_indices(doc: DatasetDocument, root: Mapping[str, Any]) -> DatasetDocument:
    """``doc`` with the (checkpointed) index states of its checkpoint ``root``."""
    if not root.get("indices") and not doc.indices:
        return doc
    assert doc.version is not None
    states = parse_states(root.get("indices") or {}, doc.schema, f"checkpoint {doc.version.number}")
    return doc.evolve(
        indices=dict.fromkeys(states, PLACEHOLDER), index_footers={}, index_states=states
    )


class Published(NamedTuple):
    """A pointer write: its metadata, its size (with the index files it names), the
    version it shows and the newest version seen after it (> shown: a newer version's
    writer, which put the pointer after this one, publishes that)."""

    meta: ObjectMeta | None  # None: not written (a newer version's writer will)
    nbytes: int
    shown: int
    newest: int
    fmt: str

    def bookkeeping(self, doc: DatasetDocument) -> dict[str, Any]:
        """The head's record of this pointer write."""
        assert self.meta is not None
        return {
            "number": self.shown,
            "etag": self.meta.version,
            "bytes": self.nbytes,
            "format": self.fmt,
            "mode": effective_mode(doc, self.nbytes),
        }


def publish_pointer(
    store: Store,
    uuid: str,
    doc: DatasetDocument,
    data: bytes | None,
    number: int,
    fmt: str,
    stale_format: str | None = None,
    *,
    look_first: bool = False,
) -> Published | None:
    """Point the kartothek metadata file at the newest committed version.

    Pointer writes are unconditional, so a slow writer can put an older version back. The
    *last* writer of the pointer repairs that: after its PUT it probes for a newer version
    and, if one exists and the pointer is still its own (one HEAD), republishes the newest.
    If another writer put the pointer after it, that writer probes after its PUT in turn;
    and the newest version's writer puts the pointer after its commit point. So the pointer
    ends at the newest version without every writer republishing every version it sees.

    ``look_first`` (contention, and every later commit rewrites the pointer too: see
    :func:`others_publish`): probe just before the PUT, and leave the pointer to the newer
    version's writer when there is one (``meta`` None in the result).

    Failures here do not undo the commit (the version document is the commit point and
    readers roll forward to it), so they are swallowed: raising would make a caller retry
    a write that already happened. None if it failed.
    """
    key = metadata_key(uuid, fmt)
    try:
        for _ in range(16):
            shown = doc
            if look_first and store.exists(version_key(uuid, number + 1)):
                return Published(None, 0, number, number + 1, fmt)  # before the index files
            if data is None or fmt != "json":
                shown = pointer_document(store, doc)
                data = encode_document(shown, fmt)
            if look_first and store.exists(version_key(uuid, number + 1)):
                return Published(None, 0, number, number + 1, fmt)
            payload = data
            meta = store.put(key, payload)
            # The policy weighs a pointer write with the index files it names (rewritten
            # from the index states with every pointer write).
            nbytes = len(payload) + sum(f.size for f in shown.index_footers.values())
            if stale_format is not None and stale_format != fmt:
                store.delete(metadata_key(uuid, stale_format), missing_ok=True)
                stale_format = None
            # One probe, then (only if the pointer is still ours) read what landed: a writer
            # that is not the last one reads no entry.
            if not store.exists(version_key(uuid, number + 1)):
                return Published(meta, nbytes, number, number, fmt)
            if meta.version is not None and store.head(key).version != meta.version:
                return Published(meta, nbytes, number, number + 1, fmt)  # not the last
            newer, newest, _ = roll_forward(store, uuid, number, doc)
            if newer is None:  # taken back (a commit racing a delete): nothing newer
                return Published(meta, nbytes, number, number, fmt)
            doc, number, data = newer, newest, None
    except ParquetryError:
        return None
    return None


def checkpoint_state(store: Store, uuid: str, doc: DatasetDocument, fmt: str) -> DatasetDocument:
    """Checkpoint committed state ``doc`` now, rewrite the pointer and the head (what
    ``Dataset.checkpoint()`` does: the pointer is always written). Returns ``doc`` with
    its new lineage."""
    assert doc.version is not None
    number = doc.version.number
    info = doc.version.to_json()
    root = write_checkpoint(store, doc)
    doc = with_root_indices(doc, root)
    pointer: dict[str, Any] = dict(doc.lineage.pointer) if doc.lineage is not None else {}
    written = publish_pointer(store, uuid, doc, None, number, fmt)
    if written is not None:
        pointer = written.bookkeeping(doc)
    lineage = Lineage(number, root, (), 0, pointer)
    head = encode_head(number, info, lineage)
    write_head(store, uuid, number, head, same=True)
    return doc.evolve(lineage=lineage)
