"""Writers of the ``parquetry`` data source.

Executors only ever add new, uniquely named files and report them in commit messages; the
driver-side ``commit()`` makes them visible in one conflict-safe commit. Spark passes
``commit()`` the messages of the successful attempts only, so a retried task never duplicates
rows; files of failed attempts are unreferenced orphans that garbage collection removes.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from parquetry.dataset import FileDescription
from parquetry.parquet import WriteOptions
from parquetry.spark.history import write_operation, write_parameters
from parquetry.spark.options import SourceOptions
from parquetry.spark.types import normalize_written, spark_to_arrow_schema, utc_schema
from parquetry.spark.write_modes import (
    check_condition,
    commit_new,
    commit_selective,
    replace_condition,
    txn_recorded,
    txn_version,
)

__all__ = [
    "DatasetArrowWriter",
    "DatasetWriteMessage",
    "SnapshotArrowWriter",
    "SnapshotWriteMessage",
    "chunks_of_rows",
    "schema_on_write",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class DatasetWriteMessage(WriterCommitMessage):
    """What one successful task wrote: ``FileDescription.to_json()`` documents."""

    partition_id: int
    attempt: int
    files: tuple[dict[str, Any], ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class SnapshotWriteMessage(WriterCommitMessage):
    """What one successful task staged: ``StagedPart.to_json()`` texts, in row order."""

    partition_id: int
    attempt: int
    parts: tuple[str, ...]


CHUNK_BYTES = 256 << 20


def _task_identity() -> tuple[int, int]:
    context = TaskContext.get()
    if context is None:
        return 0, 0
    return context.partitionId(), context.attemptNumber()


def chunks_of_rows(
    batches: Iterator[pa.RecordBatch], rows: int, max_bytes: int = CHUNK_BYTES
) -> Iterator[pa.Table]:
    """Tables of about ``rows`` rows (or ``max_bytes``) from Spark's small batches."""
    pending: list[pa.RecordBatch] = []
    count = size = 0
    for batch in batches:
        if batch.num_rows == 0:
            continue
        pending.append(normalize_written(batch))
        count += batch.num_rows
        size += batch.nbytes
        if count >= rows or size >= max_bytes:
            yield pa.Table.from_batches(pending)
            pending, count, size = [], 0, 0
    if pending:
        yield pa.Table.from_batches(pending)


def _with_dataset_layout(options: SourceOptions, existing: Any) -> SourceOptions:
    """Options completed with an existing dataset's partition keys and indices.

    An append that names none must still split rows the way the dataset is partitioned.
    """
    from dataclasses import replace

    if existing is None or (options.partition_on and options.secondary_indices):
        return options
    if options.overwrite_schema and options.partition_on:
        return options  # a new layout: the old indices need not exist in the new schema
    return replace(
        options,
        partition_on=options.partition_on or existing.partition_keys,
        secondary_indices=options.secondary_indices or existing.secondary_indices,
    )


def schema_on_write(
    options: SourceOptions, existing: Any, data: pa.Schema, overwrite: bool
) -> pa.Schema:
    """The schema the tasks write (and the commit records), checked on the driver before any
    task runs: the dataset's own (or, with ``mergeSchema``, the merged one) when the dataset
    exists, the DataFrame's otherwise or with ``overwriteSchema`` (see
    :mod:`parquetry.dataset.evolve`).

    Raises:
        SchemaMismatch: the DataFrame's columns differ from the dataset's in a way the rules
            refuse; the message names each column with both types.
        InvalidArgument: ``overwriteSchema`` without ``mode("overwrite")``.
    """
    from parquetry.dataset.evolve import resolve_write_schema
    from parquetry.errors import InvalidArgument

    if options.overwrite_schema and not overwrite:
        raise InvalidArgument('option overwriteSchema=true needs mode("overwrite")')
    assert options.dataset is not None
    if options.overwrite_schema or existing is None:
        return data
    return resolve_write_schema(
        options.dataset,
        existing.schema,
        data,
        merge=options.merge_schema,
        partition_on=existing.partition_keys,
    )


class DatasetArrowWriter(DataSourceArrowWriter):
    """Writes kartothek-format data files per task; ``commit`` adds them in one commit."""

    def __init__(self, options: SourceOptions, schema: StructType, overwrite: bool) -> None:
        from parquetry.dataset import Dataset

        assert options.dataset is not None
        store = options.open_store()
        existing = (
            Dataset.open(store, options.dataset) if Dataset.exists(store, options.dataset) else None
        )
        self.options = _with_dataset_layout(options, existing)
        self.overwrite = overwrite
        self.arrow_schema = spark_to_arrow_schema(schema)
        #: What the tasks write and the commit records (schema on write, checked here).
        self.target_schema = schema_on_write(
            self.options, existing, utc_schema(self.arrow_schema), overwrite
        )
        options = self.options
        missing = [
            c
            for c in (*options.partition_on, *options.secondary_indices)
            if c not in self.target_schema.names
        ]
        if missing:
            from parquetry.errors import UnknownColumn

            raise UnknownColumn(
                f"columns {missing} named in partition_on/secondary_indices are not in the "
                f"DataFrame (columns: {self.arrow_schema.names})",
                column=missing[0],
            )
        self.condition = replace_condition(self.options, self.arrow_schema, overwrite)
        if (
            options.txn is not None
            and overwrite
            and (options.replace_where is not None or options.partition_overwrite_mode == "dynamic")
        ):
            from parquetry.errors import InvalidArgument

            # Those commits do not record a transaction: a replay would commit again.
            raise InvalidArgument(
                "options 'txnAppId'/'txnVersion' work with mode('append') and a full "
                "mode('overwrite'), not with 'replaceWhere' or partitionOverwriteMode=dynamic"
            )

    def write(self, iterator: Iterator[pa.RecordBatch]) -> DatasetWriteMessage:
        from parquetry.dataset import write_files

        partition_id, attempt = _task_identity()
        store = self.options.open_store()
        assert self.options.dataset is not None
        # Spark hands over 10k-row batches; chunks of rows_per_file rows (or ~256 MB) make
        # large row groups with bounded memory.
        files = []
        for table in chunks_of_rows(iterator, self.options.rows_per_file):
            check_condition(self.condition, table, partition_id)
            files += write_files(
                store,
                self.options.dataset,
                table,
                partition_on=self.options.partition_on,
                secondary_indices=self.options.secondary_indices,
                write_options=WriteOptions(compression=self.options.compression),
                schema=self.target_schema,
                fill_missing=self.options.merge_schema,
            )
        return DatasetWriteMessage(
            partition_id=partition_id, attempt=attempt, files=tuple(f.to_json() for f in files)
        )

    def _files(self, messages: list[WriterCommitMessage | None]) -> list[FileDescription]:

        ordered = sorted(
            (m for m in messages if isinstance(m, DatasetWriteMessage)),
            key=lambda m: m.partition_id,
        )
        return [FileDescription.from_json(text) for m in ordered for text in m.files]

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        self.commit_files(self._files(messages), self.options.txn)

    def commit_files(self, files: list[FileDescription], txn: tuple[str, int] | None) -> bool:
        """Commit the tasks' ``files``; with ``txn`` (app id, version) a version already
        recorded commits nothing and deletes them. Whether anything was committed."""
        from parquetry.dataset import Dataset
        from parquetry.dataset.intents import abandon_files

        assert self.options.dataset is not None
        store = self.options.open_store()
        if txn is not None and txn_recorded(store, self.options.dataset, txn):
            abandon_files(store, self.options.dataset, files)
            return False
        if self.options.save_mode is not None:
            commit_new(self.options, store, files, utc_schema(self.arrow_schema), txn)
            return True
        if self.overwrite and commit_selective(self.options, self.condition, store, files):
            return True  # no txn here: __init__ refuses txn options for these modes
        before = txn_version(store, self.options.dataset, txn)
        after = Dataset.commit_files(
            store,
            self.options.dataset,
            files,
            mode="overwrite" if self.overwrite else "append",
            schema=self.target_schema,
            partition_on=self.options.partition_on,
            secondary_indices=self.options.secondary_indices,
            operation=write_operation(self.overwrite),
            parameters=write_parameters(self.options, self.overwrite),
            merge_schema=self.options.merge_schema,
            overwrite_schema=self.options.overwrite_schema,
            txn=txn,
        )
        return txn is None or after.transactions.get(txn[0]) != before

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        # Files reported by successful tasks are deleted now, then their write intents;
        # those of failed attempts are unknown here and wait for garbage collection.
        from parquetry.dataset.intents import abandon_files

        assert self.options.dataset is not None
        abandon_files(self.options.open_store(), self.options.dataset, self._files(messages))


class SnapshotArrowWriter(DataSourceArrowWriter):
    """Stages snapshot parts per task; ``commit`` switches the snapshot in one step."""

    def __init__(self, options: SourceOptions, schema: StructType, overwrite: bool) -> None:
        from parquetry.snapshot import ParquetDatasetStore

        self.options = options
        self.overwrite = overwrite
        self.arrow_schema = spark_to_arrow_schema(schema)
        self.write_id = ParquetDatasetStore(options.open_store()).new_write_id()

    def _pds(self) -> object:
        from parquetry.snapshot import ParquetDatasetStore

        return ParquetDatasetStore(self.options.open_store(), compression=self.options.compression)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SnapshotWriteMessage:
        partition_id, attempt = _task_identity()
        pds = self._pds()
        assert self.options.key is not None
        token = uuid.uuid4().hex[:8]
        staged: list[str] = []
        for seq, table in enumerate(chunks_of_rows(iterator, self.options.rows_per_file)):
            name = f"part-{partition_id:05d}-{seq:04d}-a{attempt}-{token}.parquet"
            part = pds.write_part(self.options.key, self.write_id, name, table)  # type: ignore[attr-defined]
            staged.append(part.to_json())
        return SnapshotWriteMessage(partition_id=partition_id, attempt=attempt, parts=tuple(staged))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        self.commit_txn(messages, self.options.txn)

    def commit_txn(
        self, messages: list[WriterCommitMessage | None], txn: tuple[str, int] | None
    ) -> None:
        """Switch the snapshot to the tasks' parts; with ``txn`` a version the manifest
        already records switches nothing (the parts are deleted)."""
        from parquetry.snapshot import StagedPart

        ordered = sorted(
            (m for m in messages if isinstance(m, SnapshotWriteMessage)),
            key=lambda m: m.partition_id,
        )
        parts = [StagedPart.from_json(text) for m in ordered for text in m.parts]
        if not parts:  # an empty DataFrame still commits a (one empty part) snapshot
            parts = [
                self._pds().write_part(  # type: ignore[attr-defined]
                    self.options.key,
                    self.write_id,
                    "part-empty.parquet",
                    utc_schema(self.arrow_schema).empty_table(),
                )
            ]
        self._pds().commit_write(  # type: ignore[attr-defined]
            self.options.key,
            self.write_id,
            parts,
            overwrite=self.overwrite,
            run_id=self.options.run_id,
            txn=txn,
        )

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        self._pds().abort_write(self.options.key, self.write_id)  # type: ignore[attr-defined]
