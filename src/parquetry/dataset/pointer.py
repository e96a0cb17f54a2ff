"""The kartothek pointer: when it is rewritten, ``checkpoint``, and kartothek's writes on it.

The pointer ``<uuid>.by-dataset-metadata.json`` is what kartothek 5.3.0 reads: the full
kartothek document (every partition) plus parquetry's extension naming the version it
shows. Its size grows with the dataset, so rewriting it after every commit costs O(table)
per commit. The per-dataset setting ``pointer`` (kept in parquetry's extension, under
``settings``, never in the user ``metadata`` kartothek users see) says when:

- ``every-commit``: after every commit;
- ``auto`` (default): after every commit while the pointer is at most
  :data:`POINTER_EVERY_COMMIT_BYTES`; above that at a checkpoint once the commits since
  the last pointer write, times :data:`POINTER_BYTES_PER_COMMIT`, reach the pointer's size
  (the pointer then costs at most 64 KiB per commit, amortised);
- ``manual``: only :func:`checkpoint` (``Dataset.checkpoint()``, ``parquetry checkpoint``).

:func:`checkpoint` always rewrites the pointer for the newest version (after reconciling
a kartothek write, see :mod:`parquetry.dataset.reconcile`), writes that version's
checkpoint and records the pointer write in the head.

The commit (``commit.finish_commit``) asks :func:`commit_writes_pointer`; the head keeps
the bookkeeping of the last pointer write (version shown, size, etag, effective mode).
kartothek's writes are noticed by comparing the pointer's etag with the recorded one: a
reader does it (one HEAD) only in effective ``every-commit`` mode, every commit does it
(:func:`kartothek_wrote`) whatever the mode, so the next commit or checkpoint reconciles.
"""

from __future__ import annotations

import contextvars
import os
from collections.abc import Mapping
from typing import Any

from parquetry.dataset.metadata import DatasetDocument, VersionInfo, encode_document
from parquetry.dataset.naming import metadata_key
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
from parquetry.errors import InvalidArgument, MetadataCorrupted, ParquetryError
from parquetry.store import Store

__all__ = [
    "DEFAULT_POINTER_MODE",
    "POINTER_BYTES_PER_COMMIT",
    "POINTER_EVERY_COMMIT_BYTES",
    "POINTER_MODES",
    "checkpoint",
    "check_pointer_mode",
    "every_commit_bytes",
    "foreign_state",
    "pointer_due",
    "pointer_mode",
    "reconcile",
    "set_pointer_policy",
]

POINTER_MODES = ("every-commit", "auto", "manual")
RECONCILE_OPERATION = "kartothek"
DEFAULT_POINTER_MODE = "auto"
SETTING = "pointer"
#: ``auto`` rewrites the pointer after every commit up to this size (see
#: docs/compatibility.md for the measurement behind it). The environment variable
#: ``PARQUETRY_POINTER_EVERY_COMMIT_BYTES`` overrides it (tests, tuning).
POINTER_EVERY_COMMIT_BYTES = 1 << 20
THRESHOLD_ENV = "PARQUETRY_POINTER_EVERY_COMMIT_BYTES"
#: Above the threshold, each commit "earns" this many bytes of pointer rewrite.
POINTER_BYTES_PER_COMMIT = 64 * 1024


def check_pointer_mode(mode: Any) -> str:
    if mode not in POINTER_MODES:
        raise InvalidArgument(
            f"pointer policy must be one of {', '.join(POINTER_MODES)}, got {mode!r}"
        )
    return str(mode)


def every_commit_bytes() -> int:
    """The ``auto`` threshold in force (the environment variable, else the constant)."""
    text = os.environ.get(THRESHOLD_ENV)
    if text is None:
        return POINTER_EVERY_COMMIT_BYTES
    try:
        value = int(text)
    except ValueError:
        raise InvalidArgument(f"{THRESHOLD_ENV} must be an integer, got {text!r}") from None
    if value < 0:
        raise InvalidArgument(f"{THRESHOLD_ENV} must be >= 0, got {value}")
    return value


def pointer_due(
    mode: str, pointer_bytes: int, commits_since_pointer: int, at_checkpoint: bool
) -> bool:
    """Whether a commit rewrites the pointer (``checkpoint`` always does, separately).

    ``pointer_bytes``: the size the pointer would have; ``commits_since_pointer``: commits
    since the pointer was last written, this one included; ``at_checkpoint``: this commit
    writes a checkpoint.
    """
    check_pointer_mode(mode)
    if mode == "every-commit":
        return True
    if mode == "manual":
        return False
    if pointer_bytes <= every_commit_bytes():
        return True
    return at_checkpoint and commits_since_pointer * POINTER_BYTES_PER_COMMIT >= pointer_bytes


def pointer_mode(doc: DatasetDocument) -> str:
    """The dataset's pointer policy (the default when never set)."""
    mode = doc.settings.get(SETTING, DEFAULT_POINTER_MODE)
    if mode not in POINTER_MODES:
        raise MetadataCorrupted(
            f"dataset {doc.uuid!r}: parquetry.settings.pointer must be one of "
            f"{list(POINTER_MODES)}, found {mode!r}"
        )
    return str(mode)


def effective_mode(doc: DatasetDocument, pointer_bytes: int) -> str:
    """What the setting means for a pointer of ``pointer_bytes``: ``auto`` below the
    threshold is ``every-commit`` (recorded in the head: readers of an ``every-commit``
    dataset check the pointer for kartothek's writes, one HEAD)."""
    mode = pointer_mode(doc)
    if mode == "auto" and pointer_bytes <= every_commit_bytes():
        return "every-commit"
    return mode


def commit_writes_pointer(
    doc: DatasetDocument, last: Mapping[str, Any], number: int, at_checkpoint: bool
) -> bool:
    """Whether the commit of ``doc`` (version ``number``) rewrites the pointer. ``last``:
    the head's bookkeeping of the last pointer write (size, version shown), empty when
    unknown (then the pointer is written, whatever the mode). A commit reconciling
    kartothek's write always does, so kartothek's document is replaced exactly once."""
    if doc.version is not None and doc.version.operation == RECONCILE_OPERATION:
        return True
    size = last.get("bytes")
    shown = last.get("number")
    if not isinstance(size, int) or not isinstance(shown, int):
        return True  # a create (the pointer is what makes the dataset exist) or unknown
    return pointer_due(pointer_mode(doc), size, number - shown, at_checkpoint)


def with_pointer_mode(doc: DatasetDocument, mode: str) -> DatasetDocument:
    return doc.evolve(settings={**doc.settings, SETTING: check_pointer_mode(mode)})


# --- kartothek's writes --------------------------------------------------------------------


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
    doc = reconciled_doc(newest, foreign, diff)
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
    except ParquetryError:
        return False  # missing or unreadable: nothing of kartothek's to keep
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
        return None
    base_number, base, known, _ = found
    newest_number, newest = _newest(store, uuid, numbers, base_number, base)
    diff = kartothek_diff(base_number, base, foreign, known)
    if diff.empty:
        # kartothek rewrote the pointer without a change: ours again, so it is not read
        # again by every commit.
        doc, number, _ = _publish(store, uuid, newest, newest_number, fmt)
        return doc, number, fmt
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
            target = reconciled_doc(current, foreign, diff)
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
            schema=current.schema,
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
    return committed, committed.version.number, fmt


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


# --- checkpoint and settings -----------------------------------------------------------------


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
    from parquetry.dataset.versions import roll_forward

    for _ in range(64):
        data = encode_document(doc, fmt)
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
    from parquetry.dataset.head import Lineage, decode_head, encode_head, head_key
    from parquetry.errors import NotFound, PreconditionFailed
    from parquetry.store import Capability, PutMode

    key = head_key(uuid)
    if not store.exists(key):
        return None
    assert doc.version is not None
    lineage = Lineage(number, write_checkpoint(store, doc), (), 0, pointer)
    data = encode_head(number, doc.version.to_json(), lineage)
    cas = store.supports(Capability.COMPARE_AND_SWAP)
    for _ in range(16):
        try:
            stored = store.head(key)
            if int(decode_head(store.get(key), key)["number"]) > number:
                return lineage  # a newer commit's head (its pointer bookkeeping is newer)
        except (NotFound, MetadataCorrupted):
            stored = None
        if not cas or stored is None or stored.version is None:
            store.put(key, data)
            return lineage
        try:
            store.put(key, data, mode=PutMode.UPDATE, expected_version=stored.version)
            return lineage
        except (PreconditionFailed, NotFound):
            continue
    return lineage


def set_pointer_policy(store: Store, state: LoadedState, mode: str) -> LoadedState:
    """Commit ``mode`` as the dataset's pointer policy (a settings-only version); no commit
    when it is already in force."""
    from parquetry.dataset.commit import commit, now_iso

    check_pointer_mode(mode)
    doc = state.doc
    if doc.version is not None and doc.settings.get(SETTING) == mode:
        return state

    def make(base: DatasetDocument | None, number: int) -> DatasetDocument:
        assert base is not None
        assert base.version is not None
        info = VersionInfo(
            number=number,
            parent=number - 1,
            committed_at=now_iso(),
            operation="set pointer policy",
            epoch=base.version.epoch,
            incarnation=base.version.incarnation,
            parameters={"pointer": mode},
        )
        return with_pointer_mode(base, mode).evolve(version=info)

    fmt = state.pointer_format or doc.metadata_format
    committed = commit(store, doc.uuid, doc, state.number, make, pointer_format=fmt)
    return LoadedState.committed(committed, fmt)
