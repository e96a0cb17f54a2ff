"""The rewrite engine: copy-on-write of some files of one version, committed once.

Every row-level table operation (``delete_where``, ``update_where``, ``upsert``,
``compact``) is the same transaction: read some files, decide per file what to keep, write
that back as new files, and commit "remove these labels, add those files". This module is
that transaction; the operations only supply the per-file decision.

Interface
=========
``rewrite_files(ds, labels, edit, *, drop=(), add=(), operation, parameters, metrics={},
write_options=None, max_retries=MAX_RETRIES, progress=None, metadata=None) -> LoadedState``
(:func:`rewrite`: the same, returning a :class:`RewriteResult` with the plan it carried out;
both also take ``concurrency=1`` and ``buffer_bytes=BUFFER_BYTES``, see the memory bound)

- ``labels``: partition labels of ``ds`` to read, **one file at a time** (``ds.read_file``,
  every column, partition columns typed). For each, ``edit(label, table)`` returns
  ``None`` (the file stays as it is: not removed, not rewritten) or a :class:`FileEdit`:
  the label is removed and ``keep`` (None or empty: nothing) is written as new file(s)
  through ``ds._write`` (partitioned by the dataset's partition keys: rows whose partition
  values ``edit`` changed land in their new partition; index values and statistics
  collected). Kept rows are buffered up to ``buffer_bytes`` only (see the memory bound).
- ``drop``: labels removed **without reading them** (all their rows go: a delete whose
  predicate holds for a whole file, a compaction's inputs).
- ``add``: files the caller wrote already (upsert's inserts, compaction's outputs), added
  by the same commit. The engine owns them from the call on: it abandons them (deletes
  the files and their intents) with its own when the commit is known not to happen.
  ``index_sinks``: an :class:`~parquetry.dataset.indexsinks.IndexSinks` that took ``add``
  as the caller wrote them (so their index values were not held until the commit); the
  engine takes its own files into it too and closes it.
- ``operation`` / ``parameters`` (strings, or JSON values) / ``metrics`` are recorded in the
  version (see :meth:`Dataset.history`). The engine counts ``rows_deleted`` (sum of
  ``FileEdit.rows_removed``), ``rows_updated``, ``rows_copied`` (kept rows not updated) and
  ``files_rewritten`` (edited files with rows kept); ``metrics`` given by the caller are
  **added** to those counts and always recorded (even 0), the engine's own only when
  non-zero. ``files_added`` / ``files_removed`` / ``rows_added`` / ``rows_removed`` are
  recorded for every commit anyway (:class:`VersionInfo`).
- ``progress(done_files, total_files)``: called with ``(0, n)`` first, then after each of
  the ``n`` files of ``labels`` is handled.
- Nothing changes (no edit, nothing dropped or added): no commit, ``ds``'s own state is
  returned.

:func:`plan_rewrite` is the dry run: the same reads and edits, no write, no commit; it says
which files would be rewritten, dropped or left alone, with the metrics.

Memory bound
============
Each file is read, edited and its kept rows handed to the writer by one task;
``concurrency`` tasks run at a time (default 1 here, :data:`CONCURRENCY` = 2 for the table
operations; ``edit`` must then be thread-safe: it is called from worker threads, on
different files), and beyond the first only while the files in flight add up to
``PARALLEL_BYTES`` (4 MiB decoded, estimated from their rows): a large file is rewritten
alone. Kept rows are buffered up to ``buffer_bytes`` (default 4 MiB) and written together:
many small inputs make few outputs (one write intent, one file per partition per flush); a
larger table is written at once. Peak memory is therefore about (one input file decoded +
the rows its edit keeps, or those of the small files in flight) + the buffer + one write
(its sorted copy and encoded output files) per task: **about 3-4x the decoded size of the
largest file rewritten (or of 4 MiB of small files), plus 4 MiB**, whatever the size of
the dataset (tested under RLIMIT_AS). The file descriptions collected cost a few hundred
bytes per file; the distinct values of indexed columns of each file written go right away
into the commit's sinks (:mod:`parquetry.dataset.indexsinks`), which spill sorted runs to
local temporary files past 262,144 pairs per column: about 25 MB at most for UUID texts.

Results are taken in the order of ``labels`` whatever the concurrency, so the outcome (the
plan, the metrics) does not depend on timing; ``progress`` is called from the calling thread.

Conflicts
=========
The commit uses :func:`parquetry.dataset.commit.commit`. When another writer committed
first, the change is re-applied on the newer version if **every label this rewrite removes
(edited or dropped) is still there with the same file**: appends and every other commit
that did not touch those files never conflict (rows a concurrent append added are not
seen by this rewrite: they stay, as with Delta's WriteSerializable isolation). Otherwise
:class:`CommitConflict` names the labels (and files) a concurrent commit removed. A
concurrent schema change is taken when this rewrite's files fit it
(:func:`parquetry.dataset.ops.fit_concurrent_schema`), else it conflicts too.
``check_added(base, labels)`` (optional) is then called with the labels the newer version
has that this rewrite's did not (the files concurrent commits added) and may raise a
CommitConflict (upsert: files holding its keys; it then runs again on the new version).
A file this rewrite reads that is gone while the newest version no longer references it
(a newer version removed it and garbage collection deleted it meanwhile) raises
:class:`~parquetry.dataset.staleread.BaseCollected`, a CommitConflict, not
MetadataCorrupted: the base is stale, nothing is corrupted.

Failures
========
Files written by this rewrite (and ``add``) are covered by write intents. If anything
fails before the commit point, or the commit is refused (CommitConflict: known not
committed), they are deleted with their intents right away. A failure of the commit itself
whose outcome is unknown (e.g. a lost acknowledgement) leaves them to garbage collection:
they may be committed. Either way the dataset is at the old or the new version.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from parquetry.dataset.commit import MAX_RETRIES
from parquetry.dataset.indexsinks import IndexSinks
from parquetry.dataset.intents import abandon_files
from parquetry.dataset.rewrite_commit import CheckAdded, commit_rewrite
from parquetry.dataset.rewrite_walk import (
    BUFFER_BYTES,
    CONCURRENCY,
    ENGINE_METRICS,
    Edit,
    FileEdit,
    Progress,
    Writer,
    walk,
)
from parquetry.dataset.versions import LoadedState
from parquetry.dataset.write import FileDescription
from parquetry.errors import InvalidArgument
from parquetry.parquet import WriteOptions

if TYPE_CHECKING:
    from parquetry.dataset.dataset import Dataset

__all__ = [
    "BUFFER_BYTES",
    "CONCURRENCY",
    "ENGINE_METRICS",
    "CheckAdded",
    "Edit",
    "FileEdit",
    "Progress",
    "RewritePlan",
    "RewriteResult",
    "plan_rewrite",
    "rewrite",
    "rewrite_files",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class RewritePlan:
    """What a rewrite does (or would do, for a dry run) to its base version."""

    rewritten: tuple[str, ...]  # labels read and edited: removed, their ``keep`` written
    dropped: tuple[str, ...]  # labels removed unread
    unchanged: tuple[str, ...]  # labels read whose edit returned None
    metrics: Mapping[str, int]
    #: The labels of ``rewritten`` whose edit kept no row (removed without a replacement).
    emptied: tuple[str, ...] = ()

    @property
    def removed(self) -> tuple[str, ...]:
        """Every label the commit removes."""
        return (*self.rewritten, *self.dropped)


@dataclass(frozen=True, slots=True, kw_only=True)
class RewriteResult:
    """What :func:`rewrite` committed: the new state (``ds``'s own when nothing changed)
    and what it did to the base it read (labels of ``ds``'s version)."""

    state: LoadedState
    plan: RewritePlan
    committed: bool


def _labels(ds: Dataset, labels: Iterable[str], drop: Iterable[str]) -> tuple[list[str], list[str]]:
    read = list(dict.fromkeys(labels))
    dropped = list(dict.fromkeys(drop))
    both = set(read) & set(dropped)
    if both:
        raise InvalidArgument(
            f"dataset {ds.uuid!r}: labels {sorted(both)[:3]} are both rewritten and dropped"
        )
    for label in dropped:
        if label not in ds.document.partitions:
            raise InvalidArgument(f"dataset {ds.uuid!r} has no partition label {label!r}")
    return read, dropped


def plan_rewrite(
    ds: Dataset,
    labels: Iterable[str],
    edit: Edit,
    *,
    drop: Iterable[str] = (),
    metrics: Mapping[str, int] | None = None,
    progress: Progress | None = None,
    concurrency: int = 1,
) -> RewritePlan:
    """The dry run of :func:`rewrite_files`: the same reads and edits, nothing written."""
    read, dropped = _labels(ds, labels, drop)
    rewritten, unchanged, emptied, counts = walk(
        ds, read, edit, progress, lambda _: None, concurrency
    )
    return RewritePlan(
        rewritten=tuple(rewritten),
        dropped=tuple(dropped),
        unchanged=tuple(unchanged),
        metrics=counts.merged(metrics or {}),
        emptied=tuple(emptied),
    )


def rewrite_files(
    ds: Dataset,
    labels: Iterable[str],
    edit: Edit,
    *,
    drop: Iterable[str] = (),
    add: Sequence[FileDescription] = (),
    operation: str,
    parameters: Mapping[str, Any] | None = None,
    metrics: Mapping[str, int] | None = None,
    write_options: WriteOptions | None = None,
    max_retries: int | None = MAX_RETRIES,
    progress: Progress | None = None,
    metadata: Mapping[str, Any] | None = None,
    concurrency: int = 1,
    buffer_bytes: int = BUFFER_BYTES,
    check_added: CheckAdded | None = None,
    index_sinks: IndexSinks | None = None,
) -> LoadedState:
    """Rewrite files of ``ds`` and commit once (see the module docstring); the new state.

    Raises:
        CommitConflict: a concurrent commit removed a file this rewrite removes.
        InvalidArgument: an unknown label, a label both read and dropped, a bad edit.
    """
    return rewrite(
        ds,
        labels,
        edit,
        drop=drop,
        add=add,
        operation=operation,
        parameters=parameters,
        metrics=metrics,
        write_options=write_options,
        max_retries=max_retries,
        progress=progress,
        metadata=metadata,
        concurrency=concurrency,
        buffer_bytes=buffer_bytes,
        check_added=check_added,
        index_sinks=index_sinks,
    ).state


def rewrite(
    ds: Dataset,
    labels: Iterable[str],
    edit: Edit,
    *,
    drop: Iterable[str] = (),
    add: Sequence[FileDescription] = (),
    operation: str,
    parameters: Mapping[str, Any] | None = None,
    metrics: Mapping[str, int] | None = None,
    write_options: WriteOptions | None = None,
    max_retries: int | None = MAX_RETRIES,
    progress: Progress | None = None,
    metadata: Mapping[str, Any] | None = None,
    concurrency: int = 1,
    buffer_bytes: int = BUFFER_BYTES,
    check_added: CheckAdded | None = None,
    index_sinks: IndexSinks | None = None,
) -> RewriteResult:
    """:func:`rewrite_files`, also saying what it did (for reports such as the CLI's)."""
    from parquetry.dataset.transact import string_parameters

    added: list[FileDescription] = list(add)
    # Every added file's index values go into sinks that spill (indexsinks.py) as the file
    # is written, not held with its description until the commit. A caller that wrote
    # ``add`` may have taken them into its own sinks already (compaction): the engine's.
    with index_sinks if index_sinks is not None else IndexSinks() as sinks:
        try:
            added[:] = sinks.take(added)
            params = string_parameters(parameters)
            read, dropped = _labels(ds, labels, drop)
            writer = Writer(ds, write_options, buffer_bytes, added, sinks)
            rewritten, unchanged, emptied, counts = walk(
                ds, read, edit, progress, writer.add, concurrency, operation
            )
            writer.flush()
            recorded = counts.merged(metrics or {})
        except BaseException:
            abandon_files(ds.store, ds.uuid, added)
            raise
        plan = RewritePlan(
            rewritten=tuple(rewritten),
            dropped=tuple(dropped),
            unchanged=tuple(unchanged),
            metrics=recorded,
            emptied=tuple(emptied),
        )
        if not plan.removed and not added:
            return RewriteResult(state=ds._state(), plan=plan, committed=False)
        state = commit_rewrite(
            ds,
            plan.removed,
            added,
            operation,
            params,
            recorded,
            metadata,
            max_retries,
            check_added,
            index_sinks=sinks,
        )
    return RewriteResult(state=state, plan=plan, committed=True)
