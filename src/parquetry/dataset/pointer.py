"""The kartothek pointer policy: when ``<uuid>.by-dataset-metadata.json`` is rewritten.

The pointer is what kartothek 5.3.0 reads: the full kartothek document (every partition)
plus parquetry's extension naming the version it shows. Its size grows with the dataset,
so rewriting it after every commit costs O(table) per commit. The per-dataset setting
``pointer`` (kept in parquetry's extension, under ``settings``, never in the user
``metadata`` kartothek users see) says when:

- ``every-commit``: after every commit;
- ``auto`` (default): after every commit while the pointer is at most
  :data:`POINTER_EVERY_COMMIT_BYTES`; above that at a checkpoint once the commits since
  the last pointer write, times :data:`POINTER_BYTES_PER_COMMIT`, reach the pointer's size
  (the pointer then costs at most that budget, 24 KiB, per commit, amortised);
- ``manual``: only ``checkpoint`` (``Dataset.checkpoint()``, ``parquetry checkpoint``).

The commit (``publish.finish_commit``) asks :func:`commit_writes_pointer`; the head keeps
the bookkeeping of the last pointer write (version shown, size, etag, effective mode,
:func:`effective_mode`). kartothek's writes and ``checkpoint``:
:mod:`parquetry.dataset.kartothek_sync`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from parquetry.dataset.metadata import DatasetDocument, VersionInfo
from parquetry.dataset.versions import LoadedState
from parquetry.errors import InvalidArgument, MetadataCorrupted
from parquetry.store import Store

__all__ = [
    "DEFAULT_POINTER_MODE",
    "POINTER_BYTES_PER_COMMIT",
    "POINTER_EVERY_COMMIT_BYTES",
    "POINTER_MODES",
    "RECONCILE_OPERATION",
    "bytes_per_commit",
    "check_pointer_mode",
    "commit_writes_pointer",
    "effective_mode",
    "every_commit_bytes",
    "pointer_due",
    "pointer_mode",
    "set_pointer_policy",
]

POINTER_MODES = ("every-commit", "auto", "manual")
RECONCILE_OPERATION = "kartothek"
DEFAULT_POINTER_MODE = "auto"
SETTING = "pointer"
#: What ``auto`` lets kartothek's pointer (and its index files) cost per commit, amortised:
#: the issue's 64 KiB of metadata per append minus the format's own share (head, entry,
#: checkpoint, segments: up to ~35 KiB measured at 10,000 partitions with a 1M-value
#: index). Measured at 1,000 partitions, 200 1-row appends: 64 KiB -> 64.0 KiB per append
#: (pointer + index files 48.6), 32 -> 40.7, 24 -> 34.7, 16 -> 28.9; see
#: docs/compatibility.md for the choice and its cost (kartothek lag).
POINTER_BYTES_PER_COMMIT = 24 * 1024
#: ``auto`` rewrites the pointer after every commit up to this size, the same budget, so a
#: commit's pointer write never costs more than ``auto`` allows above it (was 1 MiB, then
#: 64 KiB). The environment variable ``PARQUETRY_POINTER_EVERY_COMMIT_BYTES`` overrides it
#: (tests, tuning), ``PARQUETRY_POINTER_BYTES_PER_COMMIT`` the budget above it.
POINTER_EVERY_COMMIT_BYTES = POINTER_BYTES_PER_COMMIT
THRESHOLD_ENV = "PARQUETRY_POINTER_EVERY_COMMIT_BYTES"
PER_COMMIT_ENV = "PARQUETRY_POINTER_BYTES_PER_COMMIT"


def check_pointer_mode(mode: Any) -> str:
    if mode not in POINTER_MODES:
        raise InvalidArgument(
            f"pointer policy must be one of {', '.join(POINTER_MODES)}, got {mode!r}"
        )
    return str(mode)


def every_commit_bytes() -> int:
    """The ``auto`` threshold in force (the environment variable, else the constant)."""
    return _env_int(THRESHOLD_ENV, POINTER_EVERY_COMMIT_BYTES, 0)


def bytes_per_commit() -> int:
    """The ``auto`` budget per commit above the threshold (environment variable, else the
    constant)."""
    return _env_int(PER_COMMIT_ENV, POINTER_BYTES_PER_COMMIT, 1)


def _env_int(name: str, default: int, least: int) -> int:
    text = os.environ.get(name)
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        raise InvalidArgument(f"{name} must be an integer, got {text!r}") from None
    if value < least:
        raise InvalidArgument(f"{name} must be >= {least}, got {value}")
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
    return at_checkpoint and commits_since_pointer * bytes_per_commit() >= pointer_bytes


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


# --- settings ------------------------------------------------------------------------------


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
