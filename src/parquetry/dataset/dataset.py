"""The :class:`Dataset` facade: one immutable version of a kartothek-format dataset.

Every write (``append``, ``update``, ``build_index``, ``restore``,
:meth:`Dataset.commit_files`) is one conflict-safe commit (see :mod:`parquetry.dataset.commit`)
returning a new ``Dataset``; the old object keeps reading its own version.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from parquetry.dataset.commit import MAX_RETRIES
from parquetry.dataset.create import Batches
from parquetry.dataset.encrypted import write_options_for
from parquetry.dataset.evolve import resolve_write_schema
from parquetry.dataset.history import DatasetDetail, HistoryEntry, dataset_detail, read_history
from parquetry.dataset.intents import abandon_files
from parquetry.dataset.maintenance import DEFAULT_RETENTION as DEFAULT_RETENTION
from parquetry.dataset.maintenance import MaintenanceOperations
from parquetry.dataset.metadata import VersionInfo
from parquetry.dataset.naming import DEFAULT_TABLE, validate_uuid
from parquetry.dataset.transact import (
    commit_change,
    commit_described_files,
    create_dataset,
    dataset_exists,
    string_parameters,
)
from parquetry.dataset.txns import applied, check_txn
from parquetry.dataset.versionargs import as_count, as_version
from parquetry.dataset.versions import (
    LoadedState,
    check_current_incarnation,
    history,
    load_latest,
    load_version,
)
from parquetry.dataset.write import FileDescription, iter_input, storage_schema, write_files
from parquetry.errors import (
    CommitConflict,
    InvalidArgument,
    UnknownColumn,
)
from parquetry.parquet import DecryptionSettings, WriteOptions
from parquetry.store import Store

if TYPE_CHECKING:
    from parquetry.dataset.changes import ChangeFeed

__all__ = ["Dataset"]


class Dataset(MaintenanceOperations):
    """One version of a kartothek-format dataset (format v4) in a store.

    Create with :meth:`create`, open with :meth:`open`. Reading methods read exactly this
    version; writing methods commit a new version and return it. The table operations
    (:mod:`parquetry.dataset.tableops`) and maintenance (:mod:`parquetry.dataset.maintenance`)
    are inherited.
    """

    # --- opening -------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        store: Store,
        uuid: str,
        *,
        version: int | None = None,
        decryption: DecryptionSettings | None = None,
    ) -> Dataset:
        """Open the newest version, or ``version`` (time travel). Raises DatasetNotFound.

        ``decryption`` (the KMS of the master keys) reads datasets written with encryption;
        without it, reading encrypted columns raises EncryptionError.
        """
        validate_uuid(uuid)
        if version is None:
            return cls(store, load_latest(store, uuid), decryption=decryption)
        version = as_version(version, "version")
        doc = load_version(store, uuid, version)
        check_current_incarnation(store, uuid, doc, version)
        state = LoadedState(doc=doc, number=version, foreign=False, pointer_format=None, requests=1)
        return cls(store, state, decryption=decryption)

    @staticmethod
    def exists(store: Store, uuid: str) -> bool:
        """Whether dataset ``uuid`` exists in ``store``."""
        return dataset_exists(store, uuid)

    def versions(self) -> list[VersionInfo]:
        """The retained history, oldest first (one GET per version)."""
        return history(self.store, self.uuid)

    def history(self, *, limit: int | None = None) -> list[HistoryEntry]:
        """What each retained commit did, newest first (Delta's ``DESCRIBE HISTORY``):
        version, time, operation, parameters and metrics. One LIST plus one GET per entry
        (``limit`` bounds them)."""
        if limit is not None:
            limit = as_count(limit, "limit")
        return read_history(self.store, self.uuid, limit=limit)

    def changes(self, since: int, until: int | None = None) -> ChangeFeed:
        """The files (partition values, rows, sizes) each commit in ``(since, until]``
        added and removed, and their rows as pyarrow (see :mod:`parquetry.dataset.changes`).
        ``until`` defaults to this version; ``since=-1`` starts before the creation.

        Raises:
            VersionExpired: a version in the range was garbage collected.
            VersionNotFound: ``until`` is not written yet.
        """
        from parquetry.dataset.changes import read_changes

        since = as_version(since, "since")
        until = self.version if until is None else as_version(until, "until")
        return read_changes(self.store, self.uuid, since, until, decryption=self._decryption)

    def detail(self) -> DatasetDetail:
        """Files, bytes, rows, partitions, schema, indices and times of this version (no
        request: all of it is in the version document; a state kartothek wrote costs one
        LIST for its version number and has no bytes or rows)."""
        return dataset_detail(self.store, self._doc, self.version)

    # --- creating ------------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        store: Store,
        uuid: str,
        data: Any,
        *,
        partition_on: Sequence[str] = (),
        secondary_indices: Sequence[str] = (),
        metadata: Mapping[str, Any] | None = None,
        metadata_format: str = "json",
        write_options: WriteOptions | None = None,
        table: str = DEFAULT_TABLE,
        pointer_policy: str | None = None,
    ) -> Dataset:
        """Write ``data`` as a new dataset (version 0). Raises AlreadyExists if it exists.

        Args:
            store: Where the dataset lives.
            uuid: Dataset uuid (``A-Z a-z 0-9 + - _``).
            data: Table, RecordBatch, RecordBatchReader, iterable of batches or any object
                with ``__arrow_c_stream__`` (pandas, Polars, DuckDB); streamed.
            partition_on: Partition columns, outermost first.
            secondary_indices: Columns to keep an inverted index for.
            metadata: User metadata (JSON values).
            metadata_format: ``"json"`` or ``"msgpack.zstd"``.
            write_options: Parquet options for the data files. Their encryption settings
                (key ids and columns, not keys) are recorded: appends keep them.
            table: Table name (kartothek's ``"table"``).
            pointer_policy: When kartothek's metadata file is rewritten: ``"auto"``
                (default), ``"every-commit"`` or ``"manual"`` (see :meth:`checkpoint`).
        """
        from parquetry.dataset.pointer import SETTING, check_pointer_mode

        settings = {}
        if pointer_policy is not None:
            settings[SETTING] = check_pointer_mode(pointer_policy)
        return cls(
            store,
            create_dataset(
                store,
                uuid,
                data,
                partition_on=partition_on,
                secondary_indices=secondary_indices,
                metadata=metadata,
                metadata_format=metadata_format,
                write_options=write_options,
                table=table,
                settings=settings,
            ),
        )

    @classmethod
    def commit_files(
        cls,
        store: Store,
        uuid: str,
        files: Sequence[FileDescription],
        *,
        mode: str = "append",
        schema: pa.Schema | None = None,
        partition_on: Sequence[str] = (),
        secondary_indices: Sequence[str] = (),
        metadata: Mapping[str, Any] | None = None,
        operation: str = "write",
        max_retries: int | None = MAX_RETRIES,
        metadata_format: str = "json",
        parameters: Mapping[str, Any] | None = None,
        merge_schema: bool = False,
        overwrite_schema: bool = False,
        txn: tuple[str, int] | None = None,
    ) -> Dataset:
        """Commit files written earlier with :func:`write_files` (one conflict-safe commit).

        ``mode``: ``"create"`` (new dataset), ``"append"`` (creates a missing dataset) or
        ``"overwrite"`` (replaces every partition; conflicts with concurrent changes).
        ``max_retries``: lost races tolerated in a row (None: no limit; losing races alone
        never fails a commit then). ``operation`` and ``parameters`` (strings, or JSON
        values) are recorded in the version and shown by :meth:`history`.
        ``schema``: the schema the files were written with; it must match the dataset's
        (SchemaMismatch otherwise) unless ``merge_schema`` evolves it (new nullable columns,
        lossless widening) or ``overwrite_schema`` (mode ``"overwrite"``) replaces it and
        the partitioning with ``schema`` and ``partition_on``.

        Before the commit point the files' write intents are claimed and every file is
        checked to exist (one HEAD each, 16 at a time): if garbage collection reaped them
        (their lease ended long ago), this raises IntentExpired and commits nothing.

        ``txn=(app_id, version)`` makes the commit idempotent (Delta's SetTransaction):
        when the dataset already recorded ``version`` or a later one for ``app_id``, the
        files are deleted and the current dataset is returned (see :meth:`append`).
        """
        return cls(
            store,
            commit_described_files(
                store,
                uuid,
                files,
                mode=mode,
                schema=schema,
                partition_on=partition_on,
                secondary_indices=secondary_indices,
                metadata=metadata,
                operation=operation,
                max_retries=max_retries,
                metadata_format=metadata_format,
                parameters=parameters,
                merge_schema=merge_schema,
                overwrite_schema=overwrite_schema,
                txn=txn,
            ),
        )

    # --- writing -------------------------------------------------------------------------

    def _write(
        self, data: Any, write_options: WriteOptions | None, merge_schema: bool
    ) -> tuple[list[FileDescription], pa.Schema]:
        """Write ``data`` after the schema-on-write check; the files and their schema."""
        # An encrypted dataset stays encrypted: recorded settings + the opener's KMS, or refuse.
        write_options = write_options_for(
            self.uuid, self._doc.encryption, write_options, self._decryption
        )
        in_schema, batches = iter_input(data)
        target = resolve_write_schema(
            self.uuid,
            self.schema,
            storage_schema(in_schema),
            merge=merge_schema,
            partition_on=self.partition_keys,
        )
        files = write_files(
            self.store,
            self.uuid,
            Batches(in_schema, batches),
            partition_on=self.partition_keys,
            secondary_indices=self.secondary_indices,
            write_options=write_options,
            schema=target,
            table=self._doc.tables[0],
            fill_missing=merge_schema,
        )
        return files, target

    def _evolution(self, written: pa.Schema, merge_schema: bool) -> dict[str, Any]:
        if written.equals(self.schema):
            return {}
        return {"written_schema": written, "merge_schema": merge_schema}

    def _commit(self, files: Sequence[FileDescription], **change: Any) -> Dataset:
        """Commit ``files`` after this version (``change``: see :func:`commit_change`)."""
        base = self._state()
        try:
            state = commit_change(self.store, base, files, verify_files=False, **change)
        except CommitConflict:
            # Known not committed (a conflict, a delete, a reaped intent): the files this
            # call wrote are nobody's; remove them now rather than at the next GC.
            abandon_files(self.store, self.uuid, files)
            raise
        return Dataset(self.store, state, decryption=self._decryption)

    def append(
        self,
        data: Any,
        *,
        write_options: WriteOptions | None = None,
        merge_schema: bool = False,
        parameters: Mapping[str, Any] | None = None,
        txn: tuple[str, int] | None = None,
    ) -> Dataset:
        """Add ``data`` as new partitions (never conflicts with other appends).

        The data must match the dataset's schema (see :mod:`parquetry.dataset.evolve`):
        otherwise SchemaMismatch names every differing column, before anything is written.
        ``merge_schema=True`` adds new columns and struct fields (nullable) and widens types
        losslessly in the same commit; older files read with nulls and widened values.

        On an encrypted dataset the new files get its recorded encryption, with the KMS the
        dataset was opened with (``decryption=``); without one this raises EncryptionError.
        ``parameters`` are recorded with the commit (see :meth:`history`).

        ``txn=(app_id, version)`` (Delta's SetTransaction): the commit records ``version``
        for ``app_id``; when the newest version already records ``version`` or a later one,
        nothing is committed and the newest dataset is returned (the files written are
        deleted). Checked inside the conflict-safe commit loop, so racing replays of one
        ``(app_id, version)`` commit exactly once. :attr:`transactions` shows the record.
        """
        string_parameters(parameters)  # refuse unrecordable ones before writing any file
        txn = check_txn(txn)
        if applied(self._doc, txn):
            latest = self.open(self.store, self.uuid, decryption=self._decryption)
            return latest  # no file written: this version already holds the transaction
        files, written = self._write(data, write_options, merge_schema)
        return self._commit(
            files,
            operation="append",
            parameters=parameters,
            txn=txn,
            **self._evolution(written, merge_schema),
        )

    @property
    def transactions(self) -> dict[str, int]:
        """Application id -> the last version committed with ``txn`` (see :meth:`append`)."""
        return dict(self._doc.txns)

    def update(
        self,
        data: Any = None,
        *,
        delete_scope: Sequence[Mapping[str, Any]] | None = None,
        write_options: WriteOptions | None = None,
        parameters: Mapping[str, Any] | None = None,
        merge_schema: bool = False,
    ) -> Dataset:
        """Replace the partitions ``delete_scope`` selects with ``data`` (kartothek semantics).

        ``delete_scope`` is a list of ``{column: value}`` dicts over partition keys and indexed
        columns; a partition is removed if it matches any dict. Conflicts (CommitConflict) if
        another commit changed which partitions the scope selects. ``merge_schema``: as in
        :meth:`append`. ``parameters`` are recorded with the commit (the ``delete_scope`` is
        recorded as parameter ``scope``).
        """
        params = {"scope": list(delete_scope)} if delete_scope else {}
        params.update(parameters or {})
        string_parameters(params)  # refuse unrecordable ones before writing any file
        if data is None:
            return self._commit(
                [], operation="update", delete_scope=delete_scope or None, parameters=params
            )
        files, written = self._write(data, write_options, merge_schema)
        return self._commit(
            files,
            operation="update",
            delete_scope=delete_scope or None,
            parameters=params,
            **self._evolution(written, merge_schema),
        )

    def build_index(self, column: str) -> Dataset:
        """Build (or rebuild) a secondary index on ``column`` over every file."""
        if column not in self.schema.names:
            raise UnknownColumn(f"column {column!r} is not in the schema", column=column)
        if column in self.partition_keys:
            raise InvalidArgument(f"{column!r} is a partition key; it needs no index")
        if column == "partition":
            raise InvalidArgument("a column named 'partition' cannot be indexed (kartothek)")
        from parquetry.dataset.indexbuild import build_on_newest

        return build_on_newest(self, column)
