"""Compaction: bin-pack the small files of each partition into files near a target size.

``compact`` plans bins (:mod:`parquetry.dataset.compact_plan`), streams each bin into one new
file of the same partition (:mod:`parquetry.dataset.compact_write`: about two target files
of memory), then commits once: the inputs' labels are removed, the outputs added, every
secondary index kept exact by :func:`~parquetry.dataset.ops.apply_change` (the removed
labels become dead labels, the outputs' pairs a delta).

Conflicts: rows do not change, so a compaction never conflicts with a commit that left its
inputs alone (appends, replaces of other partitions, index builds: a lost race is
re-applied on the newer version). If a concurrent commit removed or replaced any input,
the compaction would resurrect or duplicate rows: it raises :class:`CommitConflict` naming
those files, deletes its outputs and commits nothing. The commit is the rewrite engine's
(:func:`~parquetry.dataset.rewrite.rewrite_files`: inputs dropped unread, outputs added),
which records the metrics (``files_compacted``, ``files_added``, ``bytes_compacted``,
``bytes_added``, ``partitions_compacted``) in the version.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from parquetry.dataset.commit import MAX_RETRIES
from parquetry.dataset.compact_pipeline import Turn, write_bins
from parquetry.dataset.compact_plan import CompactionBin, CompactionPlan
from parquetry.dataset.compact_write import BinaryCopy, BinWriter
from parquetry.dataset.encrypted import write_options_for
from parquetry.dataset.indexsinks import IndexSinks
from parquetry.dataset.intents import abandon_files
from parquetry.dataset.rewrite import rewrite_files
from parquetry.dataset.staleread import base_reads
from parquetry.dataset.versions import LoadedState
from parquetry.dataset.write import FileDescription
from parquetry.errors import InvalidArgument, ParquetryError, UnknownColumn
from parquetry.parquet import WriteOptions

if TYPE_CHECKING:
    from parquetry.dataset.dataset import Dataset

__all__ = ["compact", "compaction_metrics", "sort_keys"]

Progress = Callable[[int, int], None]


def sort_keys(ds: Dataset, sort_by: Any) -> list[tuple[str, str]] | None:
    """``sort_by`` (a column, columns, or ``(column, "ascending"|"descending")`` pairs) as
    pyarrow sort keys; partition keys are constant within an output and refused."""
    if sort_by is None:
        return None
    items = [sort_by] if isinstance(sort_by, str) else list(sort_by)
    if not items:
        return None
    out: list[tuple[str, str]] = []
    for item in items:
        col, order = (item, "ascending") if isinstance(item, str) else tuple(item)
        if order not in ("ascending", "descending"):
            raise InvalidArgument(f"sort order of {col!r} must be ascending or descending")
        if col not in ds.schema.names:
            raise UnknownColumn(f"sort_by column {col!r} is not in dataset {ds.uuid!r}", column=col)
        if col in ds.partition_keys:
            raise InvalidArgument(f"sort_by column {col!r} is a partition key (constant per file)")
        out.append((col, order))
    return out


def compaction_metrics(plan: CompactionPlan, outputs: Sequence[FileDescription]) -> dict[str, int]:
    """Delta-like metrics recorded with the commit."""
    return {
        "files_compacted": plan.files_removed,
        "files_added": len(outputs),
        "bytes_compacted": plan.bytes_compacted,
        "bytes_added": sum(f.size for f in outputs),
        "partitions_compacted": len({b.partition for b in plan.bins}),
    }


def _parameters(
    ds: Dataset,
    plan: CompactionPlan,
    partitions: Any,
    sort_by: list[tuple[str, str]] | None,
    min_files: int,
) -> dict[str, str]:
    from parquetry.dataset.predicates import validate_predicates
    from parquetry.dataset.replace import describe_dnf

    params = {"target_file_size": str(plan.target_file_size), "min_files": str(min_files)}
    dnf = validate_predicates(partitions, ds.schema) if partitions else None
    if dnf:
        params["partitions"] = describe_dnf(dnf)
    if sort_by:
        params["sort_by"] = ", ".join(
            f"{c} {'ASC' if o == 'ascending' else 'DESC'}" for c, o in sort_by
        )
    return params


def _write_outputs(
    ds: Dataset,
    plan: CompactionPlan,
    sort_by: list[tuple[str, str]] | None,
    write_options: WriteOptions | None,
    progress: Progress | None,
    binary_copy: BinaryCopy = "auto",
    sinks: IndexSinks | None = None,
) -> list[FileDescription]:
    opts = write_options_for(ds.uuid, ds.document.encryption, write_options, ds._decryption)
    writer = BinWriter(
        ds.store,
        ds.uuid,
        ds.document.tables[0],
        ds.schema,
        ds.partition_keys,
        ds.secondary_indices,
        opts or WriteOptions(),
        ds._decryption,
        sort_by,
        target=plan.target_file_size,
        binary_copy=binary_copy,
        files=ds.document.files,
    )
    total, done = plan.files_removed, 0
    outputs: list[FileDescription] = []
    if progress is not None:
        progress(0, total)

    def write(b: CompactionBin, turn: Turn) -> FileDescription:
        return writer.write(b.partition, b.files, turn)

    def abandon(files: list[FileDescription]) -> None:
        abandon_files(ds.store, ds.uuid, files)

    try:
        # Two bins at a time: one reads its inputs while the other is encoded
        # (compact_pipeline.py); outputs come back in plan order.
        # closing: an error here stops the bins in flight (and deletes what they wrote)
        # before the outputs already taken are deleted below.
        with contextlib.closing(write_bins(plan.bins, write, abandon)) as written:
            for output, b in zip(written, plan.bins, strict=True):
                outputs.append(output)
                if sinks is not None:
                    # The output's index values go to the commit's spilling sinks now, not
                    # held until the commit (indexsinks.py).
                    outputs[-1:] = sinks.take(outputs[-1:])
                done += len(b.files)
                if progress is not None:
                    progress(done, total)
    except BaseException:
        # Nobody will commit these: delete them now (best effort; GC covers the rest).
        with contextlib.suppress(ParquetryError):
            abandon_files(ds.store, ds.uuid, outputs)
        raise
    return outputs


def compact(
    ds: Dataset,
    *,
    plan: CompactionPlan,
    partitions: Any = None,
    sort_by: Any = None,
    min_files: int = 2,
    write_options: WriteOptions | None = None,
    max_retries: int | None = MAX_RETRIES,
    progress: Progress | None = None,
    metadata: Mapping[str, Any] | None = None,
    binary_copy: BinaryCopy = "auto",
) -> LoadedState | None:
    """Carry out ``plan`` (see the module doc); None when it has nothing to do."""
    keys = sort_keys(ds, sort_by)
    if not plan.bins:
        return None
    params = _parameters(ds, plan, partitions, keys, min_files)
    if binary_copy not in (True, False, "auto"):
        raise InvalidArgument(f"binary_copy must be True, False or 'auto', got {binary_copy!r}")
    sinks = IndexSinks()
    try:
        # An input GC collected under the compaction (a newer compaction dropped it) makes
        # this compaction stale, like a lost race: BaseCollected, not a corruption claim.
        with base_reads(ds, "compact"):
            outputs = _write_outputs(ds, plan, keys, write_options, progress, binary_copy, sinks)
    except BaseException:
        sinks.close()
        raise
    # Inputs dropped unread, outputs added: the engine commits once, re-applies on a newer
    # version that still has every input, raises CommitConflict naming them otherwise, and
    # abandons the outputs when the commit is known not to happen (and closes the sinks).
    return rewrite_files(
        ds,
        (),
        _unused_edit,
        drop=sorted(plan.labels),
        add=outputs,
        operation="compact",
        parameters=params,
        metrics=compaction_metrics(plan, outputs),
        max_retries=max_retries,
        metadata=metadata,
        index_sinks=sinks,
    )


def _unused_edit(label: str, table: Any) -> None:  # no file is read: nothing to edit
    return None
