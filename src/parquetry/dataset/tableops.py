"""Table operations of a :class:`~parquetry.dataset.dataset.Dataset`: row-level deletes and
updates, upserts, compaction, restore and schema evolution (docs/operations.md).

Each method is a thin entry point; the work lives in the module it names. Kept apart from
``dataset.py`` so the facade stays readable.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, cast, overload

import pyarrow as pa

from parquetry.dataset.compact_plan import DEFAULT_TARGET_SIZE, CompactionPlan
from parquetry.dataset.reading import VersionReader
from parquetry.dataset.transact import string_parameters
from parquetry.dataset.versions import LoadedState
from parquetry.parquet import WriteOptions

if TYPE_CHECKING:
    from parquetry.dataset.dataset import Dataset

__all__ = ["TableOperations"]


class TableOperations(VersionReader):
    """The table operations; each commits once and returns the new :class:`Dataset`."""

    def _self(self) -> Dataset:
        # Only Dataset derives from this class; the operations' modules take a Dataset.
        return cast("Dataset", self)

    def _successor(self, state: LoadedState) -> Dataset:
        from parquetry.dataset.dataset import Dataset

        return Dataset(self.store, state, decryption=self._decryption)

    def replace_where(
        self,
        predicates: Any,
        data: Any = None,
        *,
        write_options: WriteOptions | None = None,
    ) -> Dataset:
        """Replace the rows matching ``predicates`` (kartothek DNF) with ``data``, in one commit.

        Every row of ``data`` must satisfy the predicate, or ReplaceConditionViolated names
        it and nothing is committed. Files whose rows all match are removed; files with some
        matching rows are rewritten with the others; ``data=None`` deletes the matching rows.
        Raises CommitConflict if a concurrent commit changed the files that may match.
        """
        from parquetry.dataset.replace import replace_where

        state = replace_where(self._self(), predicates, data, write_options=write_options)
        return self._successor(state)

    @overload
    def compact(
        self,
        *,
        target_file_size: int = ...,
        partitions: Any = ...,
        sort_by: Any = ...,
        min_files: int = ...,
        dry_run: Literal[False] = ...,
        write_options: WriteOptions | None = ...,
        progress: Callable[[int, int], None] | None = ...,
        binary_copy: bool | Literal["auto"] = ...,
    ) -> Dataset: ...
    @overload
    def compact(
        self,
        *,
        target_file_size: int = ...,
        partitions: Any = ...,
        sort_by: Any = ...,
        min_files: int = ...,
        dry_run: Literal[True],
        write_options: WriteOptions | None = ...,
        progress: Callable[[int, int], None] | None = ...,
        binary_copy: bool | Literal["auto"] = ...,
    ) -> CompactionPlan: ...
    def compact(
        self,
        *,
        target_file_size: int = DEFAULT_TARGET_SIZE,
        partitions: Any = None,
        sort_by: Any = None,
        min_files: int = 2,
        dry_run: bool = False,
        write_options: WriteOptions | None = None,
        progress: Callable[[int, int], None] | None = None,
        binary_copy: bool | Literal["auto"] = "auto",
    ) -> Dataset | CompactionPlan:
        """Bin-pack each partition's files smaller than ``target_file_size`` into files near
        it (see :mod:`parquetry.dataset.compact`); one commit, operation ``"compact"``.

        ``partitions``: a DNF over partition keys selecting the partitions to compact.
        ``sort_by``: column(s) (or ``(column, "descending")``) each output is sorted by.
        ``min_files``: partitions with fewer small files are left alone. ``dry_run``: return
        the :class:`CompactionPlan` (which files become which) without writing.
        ``binary_copy``: copy the inputs' row groups without decoding where their schema
        matches (see :mod:`parquetry.dataset.compact_copy`); ``True`` also keeps small
        dictionary-encoded row groups as they are, ``False`` re-encodes everything. Returns this
        dataset when there is nothing to compact. Never conflicts with appends; raises
        CommitConflict naming the files if a concurrent commit removed one of its inputs.
        """
        from parquetry.dataset.compact import compact, sort_keys
        from parquetry.dataset.compact_plan import plan_compaction

        sort_keys(self._self(), sort_by)  # refuse bad arguments before planning
        plan = plan_compaction(
            self._self(),
            target_file_size=target_file_size,
            partitions=partitions,
            min_files=min_files,
        )
        if dry_run:
            return plan
        state = compact(
            self._self(),
            plan=plan,
            partitions=partitions,
            sort_by=sort_by,
            min_files=min_files,
            write_options=write_options,
            progress=progress,
            binary_copy=binary_copy,
        )
        return self._self() if state is None else self._successor(state)

    def evolve_schema(
        self,
        *,
        add: Sequence[pa.Field] = (),
        widen: Mapping[str, pa.DataType] | None = None,
        parameters: Mapping[str, Any] | None = None,
    ) -> Dataset:
        """Add nullable columns and widen types losslessly, without rewriting any file (see
        :mod:`parquetry.dataset.evolution`); operation ``"evolve_schema"``. Old files read
        with nulls for the added columns and widened values. A non-nullable addition raises
        InvalidArgument, a lossy widening SchemaMismatch, both naming the column. Returns
        this dataset when nothing changes."""
        from parquetry.dataset.evolution import evolve_schema

        state = evolve_schema(self._self(), add, widen or {}, parameters)
        return self._self() if state is None else self._successor(state)

    def upsert(
        self,
        data: Any,
        on: Sequence[str],
        *,
        when_matched: str = "update",
        when_not_matched: str = "insert",
        merge_schema: bool = False,
        write_options: WriteOptions | None = None,
    ) -> Dataset:
        """MERGE ``data`` into the dataset by the key columns ``on``, in one commit.

        A dataset row whose key equals a data row's is updated (``when_matched="update"``),
        deleted (``"delete"``) or left alone (``"ignore"``); a data row matching none is
        inserted (``when_not_matched="insert"``) or dropped (``"ignore"``). A NULL key
        never matches. Duplicate keys in ``data`` raise InvalidArgument. Only the files
        that may hold a key are read (partition keys, secondary index, statistics) and only
        those with a match are rewritten. See :mod:`parquetry.dataset.upsert`.
        """
        from parquetry.dataset.upsert import upsert

        state = upsert(
            self._self(),
            data,
            on,
            when_matched=when_matched,
            when_not_matched=when_not_matched,
            merge_schema=merge_schema,
            write_options=write_options,
        )
        return self._successor(state)

    def delete_where(self, predicates: Any, **options: Any) -> Dataset:
        """Delete the rows matching ``predicates`` (kartothek DNF), in one commit
        (operation ``delete``); ``delete()`` removes the whole dataset instead.

        Files that cannot match are not read, files whose partition values match are dropped
        unread, others are rewritten one at a time (see :mod:`parquetry.dataset.rowops`).
        ``options``: ``write_options``, ``parameters``, ``max_retries``, ``progress``.
        Raises CommitConflict if a concurrent commit removed a file this delete rewrites.
        """
        from parquetry.dataset.rowops import delete_where

        done = delete_where(self._self(), predicates, **options)
        return self._successor(done.state)

    def update_where(
        self,
        predicates: Any,
        set: Mapping[str, Any],
        **options: Any,
    ) -> Dataset:
        """Set columns of the rows matching ``predicates`` (kartothek DNF), in one commit
        (operation ``update_where``): ``set={column: value or pyarrow.compute expression}``,
        each evaluated on the old row and cast strictly (refused before any write, naming
        the column). Updating a partition key moves the rows to their new partition.
        ``options``: as :meth:`delete_where` (see :mod:`parquetry.dataset.rowops`).
        """
        from parquetry.dataset.rowops import update_where

        done = update_where(self._self(), predicates, set, **options)
        return self._successor(done.state)

    def restore(self, version: int, *, parameters: Mapping[str, Any] | None = None) -> Dataset:
        """Commit a new version whose state equals ``version`` (metadata only: the files
        are referenced again, after one HEAD each; see :mod:`parquetry.dataset.restore`).

        Raises DatasetNotFound (nothing committed) if ``version`` expired or lost a file to
        garbage collection, CommitConflict if another commit landed after this version.
        """
        from parquetry.dataset.restore import restore_version

        base = self._state()
        params = string_parameters(parameters)
        state = restore_version(self.store, base, version, parameters=params)
        return self._successor(state)
