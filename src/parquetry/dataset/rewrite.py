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
``concurrency`` tasks run at a time (default 1; ``edit`` must then be thread-safe: it is
called from worker threads, on different files). Kept rows are buffered up to
``buffer_bytes`` (default 4 MiB) and written together: many small inputs make few outputs
(one write intent, one file per partition per flush); a larger table is written at once.
Peak memory is therefore about ``concurrency`` x (one input file decoded + the rows its
edit keeps) + the buffer + one write (its sorted copy and encoded output files): **about 3-4x
the decoded size of the largest file rewritten, plus 4 MiB**, with the default
concurrency, whatever the size of the dataset (tested under RLIMIT_AS). The file
descriptions collected cost a few hundred bytes per file, plus the distinct values of
indexed columns.

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

import threading
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from parquetry.dataset.commit import MAX_RETRIES, commit, now_iso
from parquetry.dataset.intents import abandon_files, claim_for_commit
from parquetry.dataset.metadata import DatasetDocument
from parquetry.dataset.ops import apply_change, fit_concurrent_schema
from parquetry.dataset.plan import PlannedFile
from parquetry.dataset.staleread import read_base_file
from parquetry.dataset.versions import LoadedState
from parquetry.dataset.write import FileDescription
from parquetry.errors import CommitConflict, InvalidArgument
from parquetry.parquet import WriteOptions

if TYPE_CHECKING:
    from parquetry.dataset.dataset import Dataset

__all__ = [
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

#: Kept rows buffered before they are written (small files are written together).
BUFFER_BYTES = 4 << 20
#: The counts the engine keeps itself (see the module docstring).
ENGINE_METRICS = ("rows_deleted", "rows_updated", "rows_copied", "files_rewritten")


@dataclass(frozen=True, slots=True)
class FileEdit:
    """What an ``edit`` function decided for one file (label).

    ``keep``: the rows to write back in place of the file (dataset schema, partition
    columns included); None or empty removes the file without a replacement.
    ``rows_removed`` / ``rows_updated``: for the metrics (the engine does not diff tables).
    """

    label: str
    keep: pa.Table | None
    rows_removed: int = 0
    rows_updated: int = 0


#: ``edit(label, table) -> FileEdit | None`` (None: the file stays as it is).
Edit = Callable[[str, pa.Table], FileEdit | None]
#: ``progress(done_files, total_files)``.
Progress = Callable[[int, int], None]
#: ``check_added(base, labels)``: called before committing on a newer version ``base`` with
#: the labels it has that this rewrite's version had not (files concurrent commits added);
#: raises (a CommitConflict) when they may change what the operation decided.
CheckAdded = Callable[[DatasetDocument, list[str]], None]


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


def _planned(ds: Dataset, label: str) -> PlannedFile:
    doc = ds.document
    files = doc.partitions.get(label)
    if files is None:
        raise InvalidArgument(f"dataset {ds.uuid!r} has no partition label {label!r}")
    table = doc.tables[0]
    info = doc.files.get(label)
    return PlannedFile(
        label=label,
        key=files[table],
        table=table,
        partition=ds._values_of(label),
        rows=info.rows if info else None,
        size=info.size if info else None,
    )


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


def _check_edit(edit: FileEdit | None, label: str, ds: Dataset) -> FileEdit | None:
    if edit is None:
        return None
    if not isinstance(edit, FileEdit) or edit.label != label:
        raise InvalidArgument(
            f"dataset {ds.uuid!r}: the edit of {label!r} returned {edit!r}, expected "
            f"FileEdit(label={label!r}, ...) or None"
        )
    return edit


class _Writer:
    """Writes the rows edits keep as new files (thread-safe). Tables are buffered until
    ``buffer_bytes``: many small inputs make few outputs (one ``_write``, one write intent,
    one file per partition per flush); a table at least that large is written at once."""

    def __init__(
        self,
        ds: Dataset,
        write_options: WriteOptions | None,
        buffer_bytes: int,
        added: list[FileDescription],
    ):
        self.ds, self.write_options, self.limit, self.added = ds, write_options, buffer_bytes, added
        self.lock = threading.Lock()
        self.buffer: list[pa.Table] = []
        self.size = 0

    def add(self, decided: FileEdit) -> None:
        table = decided.keep
        if table is None or not table.num_rows:
            return
        batches: list[list[pa.Table]] = []
        with self.lock:
            if self.buffer and not table.schema.equals(self.buffer[0].schema):
                batches.append(self.buffer)  # written apart: one schema per write
                self.buffer, self.size = [], 0
            self.buffer.append(table)
            self.size += table.nbytes
            if self.size >= self.limit:
                batches.append(self.buffer)
                self.buffer, self.size = [], 0
        for tables in batches:
            self._write(tables)

    def _write(self, tables: list[pa.Table]) -> None:
        if not tables:
            return
        data = tables[0] if len(tables) == 1 else pa.concat_tables(tables)
        files = self.ds._write(data, self.write_options, merge_schema=False)[0]
        with self.lock:
            self.added.extend(files)

    def flush(self) -> None:
        """Write what is buffered (after the last edit)."""
        with self.lock:
            rest, self.buffer, self.size = self.buffer, [], 0
        self._write(rest)


@dataclass(frozen=True, slots=True)
class _Done:
    """What one file's edit did, without its tables (they are gone once written)."""

    label: str
    changed: bool
    rows_removed: int = 0
    rows_updated: int = 0
    kept: int = 0


class _Counts:
    def __init__(self) -> None:
        self.values = dict.fromkeys(ENGINE_METRICS, 0)

    def add(self, done: _Done) -> None:
        self.values["rows_deleted"] += done.rows_removed
        self.values["rows_updated"] += done.rows_updated
        self.values["rows_copied"] += max(done.kept - done.rows_updated, 0)
        self.values["files_rewritten"] += 1 if done.kept else 0

    def merged(self, given: Mapping[str, int]) -> dict[str, int]:
        out = {k: v for k, v in self.values.items() if v}
        for key, value in given.items():
            if not isinstance(value, int) or isinstance(value, bool):
                raise InvalidArgument(f"metric {key!r} must be an int, got {value!r}")
            out[key] = out.get(key, 0) + value
        return out


def _walk(
    ds: Dataset,
    read: Sequence[str],
    edit: Edit,
    progress: Progress | None,
    on_edit: Callable[[FileEdit], None],
    concurrency: int = 1,
    operation: str = "rewrite",
) -> tuple[list[str], list[str], list[str], _Counts]:
    """Read ``read``, at most ``concurrency`` files at a time, each read, edited and
    written (``on_edit``) by one task; results are taken in order, so the outcome does
    not depend on timing. On an error no new file is started, the running ones finish
    (their files are recorded for abandonment) and the first error is raised."""
    if concurrency < 1:
        raise InvalidArgument(f"concurrency must be >= 1, got {concurrency}")

    def one(label: str) -> _Done:
        # A file garbage collected meanwhile is a stale base (BaseCollected), not corruption.
        table = read_base_file(ds, _planned(ds, label), operation)
        decided = _check_edit(edit(label, table), label, ds)
        del table  # the input is not needed while its output is written
        if decided is None:
            return _Done(label, changed=False)
        kept = decided.keep.num_rows if decided.keep is not None else 0
        on_edit(decided)
        return _Done(label, True, decided.rows_removed, decided.rows_updated, kept)

    counts = _Counts()
    rewritten: list[str] = []
    unchanged: list[str] = []
    emptied: list[str] = []
    total = len(read)

    def collect(done: _Done) -> None:
        if not done.changed:
            unchanged.append(done.label)
        else:
            counts.add(done)
            rewritten.append(done.label)
            if not done.kept:
                emptied.append(done.label)
        if progress is not None:
            progress(len(rewritten) + len(unchanged), total)

    if progress is not None:
        progress(0, total)
    if concurrency == 1 or total <= 1:
        for label in read:
            collect(one(label))
        return rewritten, unchanged, emptied, counts
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        pending: deque[Future[_Done]] = deque()
        try:
            for label in read:
                if len(pending) >= concurrency:
                    collect(pending.popleft().result())
                pending.append(pool.submit(one, label))
            while pending:
                collect(pending.popleft().result())
        except BaseException:
            for future in pending:
                future.cancel()
            wait(pending)
            raise
    return rewritten, unchanged, emptied, counts


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
    rewritten, unchanged, emptied, counts = _walk(
        ds, read, edit, progress, lambda _: None, concurrency
    )
    return RewritePlan(
        rewritten=tuple(rewritten),
        dropped=tuple(dropped),
        unchanged=tuple(unchanged),
        metrics=counts.merged(metrics or {}),
        emptied=tuple(emptied),
    )


def _schema_after(base: DatasetDocument, schema: pa.Schema, merge: bool = False) -> pa.Schema:
    assert base.schema is not None
    if base.schema.equals(schema):
        return schema
    return fit_concurrent_schema(base, schema, merge=merge, what="rewrite")


def _gone(base: DatasetDocument, doc: DatasetDocument, removed: Sequence[str]) -> list[str]:
    """The labels of ``removed`` that ``base`` no longer has with the same file."""
    out = []
    for label in removed:
        now = base.partitions.get(label)
        if now is None or dict(now) != dict(doc.partitions[label]):
            out.append(label)
    return out


def _added(base: DatasetDocument, doc: DatasetDocument) -> list[str]:
    """The labels of ``base`` that ``doc`` does not have with the same file."""
    out = []
    for label, files in base.partitions.items():
        old = doc.partitions.get(label)
        if old is None or dict(old) != dict(files):
            out.append(label)
    return out


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
) -> RewriteResult:
    """:func:`rewrite_files`, also saying what it did (for reports such as the CLI's)."""
    from parquetry.dataset.transact import string_parameters

    added: list[FileDescription] = list(add)
    try:
        params = string_parameters(parameters)
        read, dropped = _labels(ds, labels, drop)
        writer = _Writer(ds, write_options, buffer_bytes, added)
        rewritten, unchanged, emptied, counts = _walk(
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
    state = _commit(
        ds, plan.removed, added, operation, params, recorded, metadata, max_retries, check_added
    )
    return RewriteResult(state=state, plan=plan, committed=True)


def _commit(
    ds: Dataset,
    removed: Sequence[str],
    added: list[FileDescription],
    operation: str,
    params: Mapping[str, str],
    recorded: Mapping[str, int],
    metadata: Mapping[str, Any] | None,
    max_retries: int | None,
    check_added: CheckAdded | None = None,
) -> LoadedState:
    from parquetry.dataset.upsert_evolve import origin_of

    # A handle evolved by merge_schema (upsert_evolve) commits on the version it stands
    # for, so that the new version records the schema change (merged with a concurrent one).
    schema = ds.schema
    origin = origin_of(ds)
    evolving = origin is not ds
    store, doc = ds.store, origin.document
    remove = frozenset(removed)
    try:
        described = [(f.key, f.size, f.intent) for f in added]
        claim, work = claim_for_commit(store, doc.uuid, described, verify=False)
    except BaseException:
        abandon_files(store, doc.uuid, added)
        raise

    def make(base: DatasetDocument | None, number: int) -> DatasetDocument:
        assert base is not None
        if base is not doc:
            gone = _gone(base, doc, removed)
            if gone:
                keys = [doc.partitions[lbl][doc.tables[0]] for lbl in gone[:3]]
                raise CommitConflict(
                    f"dataset {doc.uuid!r}: a concurrent commit removed {len(gone)} of the "
                    f"files this {operation} rewrites or removes, e.g. {gone[:3]} "
                    f"(files {keys}); nothing is committed",
                    key=keys[0],
                )
            if check_added is not None:
                new_labels = _added(base, doc)
                if new_labels:
                    check_added(base, new_labels)
        new = apply_change(
            work,
            base,
            number=number,
            parent=number - 1,
            committed_at=now_iso(),
            operation=operation,
            schema=_schema_after(base, schema, merge=evolving),
            add=added,
            remove=remove,
            metadata=metadata,
            parameters=params,
        )
        assert new.version is not None
        return new.evolve(version=replace(new.version, extra=dict(recorded)))

    fmt = ds._pointer_format or doc.metadata_format
    stale = None
    if ds._foreign:
        stale = "msgpack.zstd" if ds._pointer_format == "json" else "json"
    try:
        committed = commit(
            store,
            doc.uuid,
            doc,
            origin._number,
            make,
            max_retries=max_retries,
            pointer_format=fmt,
            stale_format=stale,
            claim=claim,
        )
    except CommitConflict:
        # Known not committed: the files are nobody's.
        abandon_files(store, doc.uuid, added)
        raise
    return LoadedState.committed(committed, fmt)
