"""Upsert (SQL ``MERGE``): apply a table of changes to a dataset by key, in one commit.

``upsert(ds, data, on=[keys])``: a row of ``data`` whose key equals the key of rows of the
dataset *matches* them; ``when_matched`` says what happens to those dataset rows
(``"update"``: replaced by the data row; ``"delete"``: removed; ``"ignore"``: left alone),
``when_not_matched`` what happens to a data row that matches nothing (``"insert"`` or
``"ignore"``). A key is all of ``on``; a row with a NULL in a key column never matches
(SQL: NULL equals nothing), so it is inserted (or ignored). Two data rows with the same key
are refused (InvalidArgument naming the key) before anything is read or written.

How it reads as little as it can:

1. Candidate files: partition keys among ``on`` keep the partitions whose values occur in
   the data; the secondary index on a key column (if any) names the files holding each key,
   looked up for all keys at once (:func:`~parquetry.dataset.indexlookup.lookup_values`);
   file statistics (min/max) of the other key columns prune the rest.
2. Each candidate's **key columns** are read (one file at a time) and joined with the
   data's keys: a file without a match is never read whole nor rewritten.
3. The files with a match are rewritten by the shared engine
   (:func:`~parquetry.dataset.rewrite.rewrite_files`): each is read whole once, its matched
   rows removed (``delete``) or replaced by their data rows (``update``: written through the
   dataset's partitioning, so a row whose partition value changed moves), the rest copied.
   Data rows matching nothing are written as new files (``add=``) first; one commit.

Memory: ``data`` is held in memory (with its keys), plus the engine's bound (its table,
the kept rows and the encoded output: about 3-4x the largest file rewritten, or of the
small files rewritten two at a time, see :mod:`parquetry.dataset.rewrite`),
plus the key columns of one candidate file and the matches found so far (two integers per
matched row).

Concurrency (serializable in commit order, per key): when another writer committed first,

- a concurrent commit that **removed** a file this upsert rewrites (another upsert, a
  delete, an update or a compaction of it): CommitConflict naming the files (the engine's
  rule: the input changed), nothing committed;
- a concurrent commit that **added** files holding one of the upsert's keys (another
  upsert's insert, an append, an update that moved or re-keyed rows): the plan is stale
  (it would insert a key that now exists, or leave a row not updated), so the upsert runs
  again on the newest version (up to ``max_retries`` times, then CommitConflict naming
  the files). Which added files hold a key is decided with the cheapest evidence first:
  partition values, min/max statistics, then the added files' key columns
  (:func:`~parquetry.dataset.upsertkeys.added_holding_keys`);
- a file the upsert reads was garbage collected while it ran (a newer version removed
  it): :class:`~parquetry.dataset.staleread.BaseCollected`, the upsert runs again on the
  newest version (counted in ``max_retries``);
- otherwise the engine re-applies the upsert on the newer version.

So the result equals running the committed upserts one after another in commit order:
two upserts of the same new key leave it once. A row appended *after* the upsert committed
is the append's business (append does not look at keys).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from parquetry.dataset.commit import MAX_RETRIES
from parquetry.dataset.metadata import DatasetDocument
from parquetry.dataset.rewrite import CONCURRENCY, FileEdit, Progress, rewrite_files
from parquetry.dataset.staleread import BaseCollected, base_reads, read_base_file
from parquetry.dataset.upsert_evolve import evolved_for_write
from parquetry.dataset.upsertkeys import (
    DATA_ROW,
    FILE_ROW,
    added_holding_keys,
    candidate_labels,
    check_on,
    key_table,
    match_rows,
    planned_file,
    source_table,
)
from parquetry.dataset.versions import LoadedState
from parquetry.errors import CommitConflict, InvalidArgument
from parquetry.parquet import WriteOptions

if TYPE_CHECKING:
    from parquetry.dataset.dataset import Dataset

__all__ = ["WHEN_MATCHED", "WHEN_NOT_MATCHED", "UpsertPlan", "plan_upsert", "upsert"]

WHEN_MATCHED = ("update", "delete", "ignore")
WHEN_NOT_MATCHED = ("insert", "ignore")


@dataclass(frozen=True, slots=True, kw_only=True)
class UpsertPlan:
    """Which files an upsert reads and rewrites, and how many rows it changes."""

    candidates: tuple[str, ...]  # labels whose key columns were read
    matched: dict[str, int]  # label -> dataset rows matching a data row (-1: not counted)
    chosen_by: str  # how the candidates were found
    rows_matched: int  # data rows matching at least one dataset row
    rows_not_matched: int  # data rows matching nothing (NULL keys included)


def _check_modes(when_matched: str, when_not_matched: str) -> None:
    if when_matched not in WHEN_MATCHED:
        raise InvalidArgument(f"when_matched must be one of {WHEN_MATCHED}, got {when_matched!r}")
    if when_not_matched not in WHEN_NOT_MATCHED:
        raise InvalidArgument(
            f"when_not_matched must be one of {WHEN_NOT_MATCHED}, got {when_not_matched!r}"
        )


def _scan(
    ds: Dataset, keys: pa.Table, on: Sequence[str], data_rows: int
) -> tuple[UpsertPlan, np.ndarray]:
    """Step 1 and 2: candidates, then each candidate's key columns joined with ``keys``
    (not needed when the index decided exactly). Also returns which data rows matched."""
    found = candidate_labels(ds, keys, on, data_rows)
    matched: dict[str, int] = {}
    if found.exact:
        assert found.hit is not None
        hit = found.hit
        matched = dict.fromkeys(found.labels, -1)  # counted when the file is rewritten
    else:
        hit = np.zeros(data_rows, dtype=bool)
        for label in found.labels:
            file_keys = read_base_file(ds, planned_file(ds, label), "upsert", list(on))
            pairs = match_rows(file_keys, keys, on)
            del file_keys
            if pairs.num_rows:
                matched[label] = pairs.num_rows
                hit[pairs.column(DATA_ROW).to_numpy()] = True
    plan = UpsertPlan(
        candidates=tuple(found.labels),
        matched=matched,
        chosen_by=found.how,
        rows_matched=int(hit.sum()),
        rows_not_matched=int(data_rows - hit.sum()),
    )
    return plan, hit


def plan_upsert(
    ds: Dataset, data: Any, on: Sequence[str], *, merge_schema: bool = False
) -> UpsertPlan:
    """The dry run: which files an upsert of ``data`` would read and rewrite (no write)."""
    keys_on = check_on(ds, on)
    source, _ = source_table(ds, data, merge_schema)
    keys = key_table(source, keys_on)
    return _scan(ds, keys, keys_on, source.num_rows)[0]


def _editor(source: pa.Table, keys: pa.Table, on: Sequence[str], when_matched: str) -> Any:
    def edit(label: str, table: pa.Table) -> FileEdit | None:
        pairs = match_rows(table.select(list(on)), keys, on)
        if pairs.num_rows == 0:
            return None  # a concurrent change cannot reach here: the file is immutable
        gone = np.zeros(table.num_rows, dtype=bool)
        gone[pairs.column(FILE_ROW).to_numpy()] = True
        kept = table.filter(pa.array(~gone))
        if when_matched == "delete":
            return FileEdit(label=label, keep=kept, rows_removed=int(gone.sum()))
        # Each matched dataset row becomes its data row (SQL MERGE UPDATE SET *).
        new = source.take(pairs.column(DATA_ROW)).select(kept.schema.names).cast(kept.schema)
        return FileEdit(
            label=label, keep=pa.concat_tables([kept, new]), rows_updated=pairs.num_rows
        )

    return edit


class _KeysAdded(CommitConflict):
    """A concurrent commit added files holding keys of this upsert: its plan is stale."""

    def __init__(self, message: str, *, key: str, labels: list[str]):
        super().__init__(message, key=key)
        self.labels = labels


def _check_added(
    ds: Dataset, keys: pa.Table, on: Sequence[str]
) -> Callable[[DatasetDocument, list[str]], None]:
    def check(base: DatasetDocument, labels: list[str]) -> None:
        hit = added_holding_keys(ds, base, labels, keys, on)
        if hit:
            files = [base.partitions[lbl][base.tables[0]] for lbl in hit[:3]]
            raise _KeysAdded(
                f"dataset {ds.uuid!r}: a concurrent commit added {len(hit)} file(s) holding "
                f"keys of this upsert, e.g. {hit[:3]} (files {files}); nothing is committed",
                key=files[0],
                labels=hit,
            )

    return check


def upsert(
    ds: Dataset,
    data: Any,
    on: Sequence[str],
    *,
    when_matched: str = "update",
    when_not_matched: str = "insert",
    merge_schema: bool = False,
    write_options: WriteOptions | None = None,
    max_retries: int | None = MAX_RETRIES,
    progress: Progress | None = None,
    concurrency: int = CONCURRENCY,
) -> LoadedState:
    """The body of :meth:`Dataset.upsert` (see the module docstring).

    A concurrent commit that added files holding keys of ``data`` makes this upsert's plan
    stale (it would insert a key that now exists, or miss a row to update): the upsert is
    run again on the newest version, up to ``max_retries`` times (None: no limit), then
    raises CommitConflict naming the files."""
    from parquetry.dataset.dataset import Dataset
    from parquetry.dataset.write import iter_input

    if not isinstance(data, pa.Table | pa.RecordBatch):
        # A reader or an iterator is consumed by the first attempt: a re-run read no rows
        # and committed nothing (the rows were lost, and the upsert reported success).
        # Held in memory anyway (source_table), so read once.
        schema, batches = iter_input(data)
        data = pa.Table.from_batches(list(batches), schema=schema)
    attempt = 0
    while True:
        try:
            return _upsert_once(
                ds,
                data,
                on,
                when_matched=when_matched,
                when_not_matched=when_not_matched,
                merge_schema=merge_schema,
                write_options=write_options,
                max_retries=max_retries,
                progress=progress,
                concurrency=concurrency,
            )
        except (_KeysAdded, BaseCollected):
            # Nothing committed and ``data`` is complete: the plan is made again.
            attempt += 1
            if max_retries is not None and attempt > max_retries:
                raise
        ds = Dataset.open(ds.store, ds.uuid, decryption=ds._decryption)
        if not merge_schema:
            data = _with_added_columns(data, ds.schema)


def _with_added_columns(data: pa.Table | pa.RecordBatch, schema: pa.Schema) -> pa.Table:
    """``data`` with a null column for each nullable column of ``schema`` it lacks.

    Before a re-run only: ``data`` fitted the schema of the version the upsert was called
    on, so a column it lacks now was added by a concurrent commit (evolve_schema, a
    merge_schema write). Without it the re-run raised SchemaMismatch ("column 'c' is
    missing from the data"), though the same upsert succeeds when its keys do not collide
    with the concurrent files (the engine's re-apply accepts files lacking a nullable
    column added meanwhile, as append does)."""
    table = data if isinstance(data, pa.Table) else pa.Table.from_batches([data])
    for field in schema:
        if field.nullable and field.name not in table.column_names:
            table = table.append_column(field, pa.nulls(table.num_rows, field.type))
    return table


def _upsert_once(
    ds: Dataset,
    data: Any,
    on: Sequence[str],
    *,
    when_matched: str,
    when_not_matched: str,
    merge_schema: bool,
    write_options: WriteOptions | None,
    max_retries: int | None,
    progress: Progress | None,
    concurrency: int,
) -> LoadedState:
    _check_modes(when_matched, when_not_matched)
    keys_on = check_on(ds, on)
    source, target = source_table(ds, data, merge_schema)
    if not target.equals(ds.schema):
        # merge_schema: read, write and commit (once, with the files) the evolved schema.
        ds = evolved_for_write(ds, target)
    keys = key_table(source, keys_on)
    with base_reads(ds, "upsert"):  # an index piece collected: re-run like a lost race
        plan, hit = _scan(ds, keys, keys_on, source.num_rows)
    insert = source.filter(pa.array(~hit)) if when_not_matched == "insert" else None
    if insert is not None and insert.num_rows == 0:
        insert = None
    added = ds._write(insert, write_options, merge_schema=False)[0] if insert is not None else []
    rewrite = sorted(plan.matched) if when_matched != "ignore" else []
    parameters = {
        "on": list(keys_on),
        "when_matched": when_matched,
        "when_not_matched": when_not_matched,
        "chosen_by": plan.chosen_by,
    }
    return rewrite_files(
        ds,
        rewrite,
        _editor(source, keys, keys_on, when_matched),
        add=added,
        operation="upsert",
        parameters=parameters,
        # Zeros given so every upsert records all five counts (the engine adds its own).
        metrics={
            "rows_inserted": insert.num_rows if insert is not None else 0,
            "rows_updated": 0,
            "rows_deleted": 0,
            "rows_copied": 0,
            "files_rewritten": 0,
        },
        write_options=write_options,
        max_retries=max_retries,
        progress=progress,
        check_added=_check_added(ds, keys, keys_on),
        concurrency=concurrency,
    )
