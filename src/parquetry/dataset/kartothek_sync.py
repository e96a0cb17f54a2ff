"""kartothek's writes on the pointer, and ``checkpoint``.

:func:`kartothek_wrote` tells a commit that kartothek rewrote the pointer since parquetry
last wrote it (one HEAD of the pointer against the etag the head recorded; a GET only when
it changed); :func:`reconcile` then commits kartothek's change as a version of its own
(operation ``kartothek``, see :mod:`parquetry.dataset.reconcile` for how the version
kartothek read is found and diffed). Readers of an ``every-commit`` dataset get the same
state in memory (:func:`foreign_state`), writing nothing. :func:`checkpoint` rewrites the
pointer for the newest version after reconciling, and on format 2 writes that version's
checkpoint and records the pointer write in the head.
"""

from __future__ import annotations

import contextvars
from collections.abc import Mapping
from typing import Any

from parquetry.dataset.kartothek_adopt import adopt_recreated, reconciled_schema
from parquetry.dataset.metadata import DatasetDocument, encode_document
from parquetry.dataset.naming import metadata_key
from parquetry.dataset.pointer import RECONCILE_OPERATION, effective_mode
from parquetry.dataset.reconcile import (
    KartothekDiff,
    added_files,
    find_base,
    kartothek_diff,
    kartothek_indices,
    reconciled_doc,
)
from parquetry.dataset.versions import LoadedState, list_version_numbers, read_pointer
from parquetry.dataset.write import FileDescription
from parquetry.errors import DatasetDeleted, MetadataCorrupted, NotFound, ParquetryError
from parquetry.store import Store

__all__ = ["checkpoint", "foreign_state", "kartothek_wrote", "reconcile"]


def foreign_state(
    store: Store,
    uuid: str,
    foreign: DatasetDocument,
    fmt: str,
    requests: int,
    *,
    hint: int | None = None,
) -> LoadedState:
    """What a reader sees when the pointer was written by kartothek (``foreign`` already
    carries the schema): the newest parquetry version with kartothek's change applied, in
    memory. Without parquetry versions, kartothek's document itself."""
    numbers = list_version_numbers(store, uuid)
    requests += 1
    found = find_base(store, uuid, foreign, numbers, hint=hint) if numbers else None
    if found is None:
        return LoadedState(
            doc=foreign, number=-1, foreign=True, pointer_format=fmt, requests=requests
        )
    base_number, base, known, used = found
    newest_number, newest = _newest(store, uuid, numbers, base_number, base)
    diff = kartothek_diff(base_number, base, foreign, known)
    doc = reconciled_doc(newest, foreign, diff, store)
    return LoadedState(
        doc=doc, number=newest_number, foreign=True, pointer_format=fmt, requests=requests + used
    )


def _newest(
    store: Store, uuid: str, numbers: list[int], number: int, doc: DatasetDocument
) -> tuple[int, DatasetDocument]:
    from parquetry.dataset.versions import load_version_or_none

    for n in reversed(numbers):
        if n == number:
            return number, doc
        found = load_version_or_none(store, uuid, n)
        if found is not None and found.version is not None:
            return n, found
    return number, doc


#: Set while :func:`reconcile` commits, so its own commit does not look again.
_RECONCILING: contextvars.ContextVar[bool] = contextvars.ContextVar("reconciling", default=False)


def _last_pointer(doc: DatasetDocument) -> Mapping[str, Any]:
    lineage = doc.lineage
    pointer = getattr(lineage, "pointer", None)
    return pointer if isinstance(pointer, Mapping) else {}


def _head_pointer(store: Store, uuid: str) -> dict[str, Any]:
    """The head's bookkeeping of the last pointer write ({} without a head)."""
    from parquetry.dataset.head import decode_head, head_key

    key = head_key(uuid)
    try:
        pointer = decode_head(store.get(key), key).get("pointer")
    except ParquetryError:
        return {}
    if not isinstance(pointer, dict):
        return {}
    return {k: v for k, v in pointer.items() if k != "number" or isinstance(v, int)}


def kartothek_wrote(store: Store, uuid: str, base: DatasetDocument) -> bool:
    """Whether a commit on ``base`` must first reconcile a kartothek write: ``base`` is
    kartothek's document, or the pointer is no longer the one parquetry last wrote and
    has no parquetry extension (one HEAD; a GET only when the pointer changed)."""
    if _RECONCILING.get():
        return False
    if base.version is None:
        return True
    last = _last_pointer(base)
    etag = last.get("etag")
    if not etag:
        return False  # format 1: the pointer follows every commit; readers saw it
    fmt = str(last.get("format") or "json")
    try:
        # kartothek updating a msgpack dataset writes JSON beside it (readers prefer it).
        json_beside = fmt != "json" and store.exists(metadata_key(uuid, "json"))
        if not json_beside and store.head(metadata_key(uuid, fmt)).version == etag:
            return False
        pointer, _, _ = read_pointer(store, uuid)
    except NotFound:
        if any(store.exists(metadata_key(uuid, f)) for f in ("json", "msgpack.zstd")):
            return False
        # parquetry wrote a pointer and it is gone: deleted (kartothek's delete_dataset
        # leaves parquetry's head and versions); building on them would resurrect a
        # dataset whose files are gone.
        raise DatasetDeleted(
            f"dataset {uuid!r} was deleted: its metadata file is gone; nothing is committed",
            key=metadata_key(uuid, fmt),
        ) from None
    except ParquetryError:
        return False  # unreadable: nothing of kartothek's to keep
    return pointer.version is None


def reconcile(store: Store, uuid: str) -> tuple[DatasetDocument, int, str] | None:
    """Commit kartothek's change found in the pointer on top of the newest version.

    Returns the state to build on: (document, its number, the pointer's format). When the
    pointer is parquetry's (nothing to do) that is the newest version. None when the
    dataset has no parquetry version (only kartothek wrote it: a commit adopts the
    kartothek document it read, as before). Raises what a commit raises.
    """
    from parquetry.dataset.commit import commit, now_iso
    from parquetry.dataset.versions import _complete_foreign, load_latest

    try:
        pointer, fmt, _ = read_pointer(store, uuid)
    except MetadataCorrupted as exc:
        # Unreadable: nothing of kartothek's to keep; the newest version replaces it.
        state = load_latest(store, uuid)
        fmt = "msgpack.zstd" if (exc.key or "").endswith(".zstd") else "json"
        return state.doc, state.number, fmt
    if pointer.version is not None:
        state = load_latest(store, uuid)
        return state.doc, state.number, fmt
    numbers = list_version_numbers(store, uuid)
    if not numbers:
        return None
    foreign, _ = _complete_foreign(store, pointer)
    found = find_base(store, uuid, foreign, numbers, hint=_head_pointer(store, uuid).get("number"))
    if found is None:
        # kartothek deleted the dataset and created it again: a new incarnation, not a
        # change to build on parquetry's (stale) head.
        doc = _adopt(store, uuid, foreign, fmt)
        assert doc.version is not None
        return doc, doc.version.number, fmt
    base_number, base, known, _ = found
    newest_number, newest = _newest(store, uuid, numbers, base_number, base)
    diff = kartothek_diff(base_number, base, foreign, known)
    if diff.empty:
        # kartothek rewrote the pointer without a change: ours again, so it is not read
        # again by every commit.
        doc, number, _ = _publish(store, uuid, newest, newest_number, fmt)
        return doc, number, fmt
    assert newest.schema is not None
    reconciled_schema(newest.schema, foreign)  # refuses an unmergeable schema up front
    files = added_files(store, newest, base, foreign, diff)
    try:
        etag = store.head(metadata_key(uuid, fmt)).version or ""
    except ParquetryError:
        etag = ""

    def make(current: DatasetDocument | None, number: int) -> DatasetDocument:
        from parquetry.dataset.indexbuild import index_builder
        from parquetry.dataset.ops import apply_change

        assert current is not None
        assert current.schema is not None
        if _already_applied(current, diff, files):
            raise _Reconciled(current, number - 1)  # another writer committed it first
        if etag and number - 1 > newest_number:
            _check_not_reconciled(store, uuid, newest_number + 1, number, etag, current)
        override = {}
        if current.version is not None and current.version.number == diff.base:
            # kartothek read this very version: its index files are exactly the new state's
            # (and kartothek's own GC may already have deleted the ones they replace).
            override = kartothek_indices(store, current, foreign)
        elif diff.built:
            target = reconciled_doc(current, foreign, diff, store)
            for col in diff.built:
                if col in current.indices or col not in current.schema.names:
                    continue
                override.update(index_builder(store, current.schema, col)(target))
        doc = apply_change(
            store,
            current,
            number=number,
            parent=number - 1,
            committed_at=now_iso(),
            operation=RECONCILE_OPERATION,
            schema=reconciled_schema(current.schema, foreign),
            add=files,
            remove=set(diff.removed) & current.partitions.keys(),
            metadata=diff.metadata,
            index_override=override or None,
            new_indices=tuple(c for c in override if c not in current.indices),
            parameters={"base": str(base_number), "pointer": etag},
        )
        return doc

    stale = "msgpack.zstd" if fmt == "json" else "json"
    token = _RECONCILING.set(True)
    try:
        committed = commit(
            store,
            uuid,
            newest,
            newest_number,
            make,
            pointer_format=fmt,
            stale_format=stale,
        )
    except _Reconciled as done:
        return done.doc, done.number, fmt
    finally:
        _RECONCILING.reset(token)
    assert committed.version is not None
    if committed.schema is not None and not committed.schema.equals(newest.schema):
        from parquetry.dataset.transact import follow_schema

        follow_schema(store, committed)  # kartothek's columns and widenings, in our form
    return committed, committed.version.number, fmt


def _adopt(store: Store, uuid: str, foreign: DatasetDocument, fmt: str) -> DatasetDocument:
    try:
        etag = store.head(metadata_key(uuid, fmt)).version or ""
    except ParquetryError:
        etag = ""
    token = _RECONCILING.set(True)
    try:
        return adopt_recreated(store, uuid, foreign, fmt, RECONCILE_OPERATION, etag)
    finally:
        _RECONCILING.reset(token)


def _already_applied(
    current: DatasetDocument, diff: KartothekDiff, files: list[FileDescription]
) -> bool:
    """Whether ``current`` already holds kartothek's change: one of its new partitions
    (fresh names only a reconcile puts there), or, for a change without additions, none of
    its removals left and its metadata and indices in place."""
    if files:
        return any(f.label in current.partitions for f in files)
    return (
        not (diff.removed & current.partitions.keys())
        and all(current.metadata.get(k) == v for k, v in diff.metadata.items())
        and all(c in current.indices for c in diff.built)
    )


class _Reconciled(Exception):
    """Another writer committed this kartothek write first (same pointer etag)."""

    def __init__(self, doc: DatasetDocument, number: int):
        super().__init__(number)
        self.doc = doc
        self.number = number


def _check_not_reconciled(
    store: Store, uuid: str, first: int, number: int, etag: str, current: DatasetDocument
) -> None:
    """Raise _Reconciled when a version in ``first .. number-1`` (commits that beat ours)
    already reconciled the kartothek pointer with ``etag``."""
    from parquetry.dataset.versions import version_info_of

    for k in range(first, number):
        info = version_info_of(store, uuid, k)
        if (
            info is not None
            and info.operation == RECONCILE_OPERATION
            and info.parameters.get("pointer") == etag
        ):
            raise _Reconciled(current, number - 1)


def checkpoint(store: Store, uuid: str) -> LoadedState:
    """Rewrite the pointer for the newest version, reconciling a kartothek write first;
    on a format-2 dataset also write that version's checkpoint and record the pointer
    write in the head.

    Idempotent; safe beside concurrent commits (the pointer is republished until no newer
    version exists, like a commit's own pointer update). Errors raise (unlike a commit's
    best-effort pointer update): the caller asked for exactly this write.
    """
    from parquetry.dataset.versions import load_latest

    found = reconcile(store, uuid)
    if found is None:
        # Only kartothek ever wrote this dataset: its pointer is all there is.
        return load_latest(store, uuid)
    doc, number, fmt = found
    doc, number, lineage = _publish(store, uuid, doc, number, fmt)
    if lineage is not None:
        doc = doc.evolve(lineage=lineage)
    return LoadedState(doc=doc, number=number, foreign=False, pointer_format=fmt, requests=0)


def _publish(
    store: Store, uuid: str, doc: DatasetDocument, number: int, fmt: str
) -> tuple[DatasetDocument, int, Any]:
    """Write the pointer for the newest version (republishing while newer ones land), then
    on format 2 that version's checkpoint and the head's pointer bookkeeping. Returns the
    version shown and the new lineage (None on format 1)."""
    from parquetry.dataset.indexwire import pointer_document
    from parquetry.dataset.versions import roll_forward

    for _ in range(64):
        # Format 2 keeps index states; kartothek needs whole index files it can read.
        data = encode_document(pointer_document(store, doc), fmt)
        meta = store.put(metadata_key(uuid, fmt), data)
        newer, newest, _ = roll_forward(store, uuid, number, doc)
        if newer is None:
            break
        doc, number = newer, newest
    other = "msgpack.zstd" if fmt == "json" else "json"
    store.delete(metadata_key(uuid, other), missing_ok=True)
    pointer = {
        "number": number,
        "etag": meta.version,
        "bytes": len(data),
        "format": fmt,
        "mode": effective_mode(doc, len(data)),
    }
    return doc, number, _checkpointed(store, uuid, doc, number, pointer)


def _checkpointed(
    store: Store, uuid: str, doc: DatasetDocument, number: int, pointer: dict[str, Any]
) -> Any:
    """Format 2: the checkpoint of version ``number`` and a head naming it and the pointer
    just written (replacing a head of the same or an older version); the new lineage.
    None for a format-1 dataset (no head)."""
    from parquetry.dataset.checkpoint import write_checkpoint
    from parquetry.dataset.head import Lineage, encode_head, head_key, write_head

    if not store.exists(head_key(uuid)):
        return None
    assert doc.version is not None
    lineage = Lineage(number, write_checkpoint(store, doc), (), 0, pointer)
    write_head(store, uuid, number, encode_head(number, doc.version.to_json(), lineage), same=True)
    return lineage
