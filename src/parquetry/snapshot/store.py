"""``ParquetDatasetStore``: snapshot datasets as spec 042 / RFC-0008 define them, built on
parquetry's Store, but crash-safe, parallel, range-reading and streaming."""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence

import pyarrow as pa

from parquetry.errors import InvalidArgument, NotFound
from parquetry.parquet.options import WriteOptions
from parquetry.snapshot import commit, layout, maintain
from parquetry.snapshot.direct import can_stage, settle_direct, write_direct
from parquetry.snapshot.inputs import as_arrow_input
from parquetry.snapshot.journal import SwitchJournal
from parquetry.snapshot.manifest import DatasetManifest, StagedPart
from parquetry.snapshot.preconditions import (
    DIRECT_CAPS,
    WRITE_CAPS,
    refuse_existing,
    require_write,
    txns_after,
)
from parquetry.snapshot.reader import parse_manifest, read_snapshot
from parquetry.snapshot.stage import PartStager
from parquetry.snapshot.validate import (
    check_columns,
    check_compression,
    check_metadata,
    check_positive,
    check_run_id,
    check_seconds,
)
from parquetry.store.base import Capability, Store

__all__ = ["ParquetDatasetStore"]


class ParquetDatasetStore:
    """Parquet snapshot datasets (parts + ``manifest.json`` + ``_SUCCESS``) on a Store.

    The layout and manifest are byte-compatible with remote-store 0.33.0. Unlike it, a
    write stages every part before touching the old dataset and switches with a journal,
    so a failed overwrite never loses the old data; see :mod:`parquetry.snapshot.switch`.

    Args:
        store: Where the datasets live.
        compression: Parquet codec: ``zstd`` (default), ``snappy``, ``gzip``, ``brotli``,
            ``lz4``, ``lz4_raw`` or ``none``; echoed as given in manifests.
        row_group_size: Rows per row group (``None``: pyarrow's default, 1Mi rows).
        max_rows_per_file: Split datasets into parts of at most this many rows
            (``None``: one part).
        max_workers: Threads encoding, uploading and reading parts concurrently.
        switch_lease: Seconds a write may hold the switch lock without renewing it; a
            switch older than that is presumed dead and completed by the next write or
            :meth:`repair` (a writer that fails releases its switch at once).
        staging_grace: Seconds a staged write may sit idle before cleanup presumes it
            abandoned and deletes its parts (commits, :meth:`repair`).

    Raises:
        InvalidArgument: a bad option (checked here; the constructor does no I/O).
    """

    def __init__(
        self,
        store: Store,
        *,
        compression: str = "zstd",
        row_group_size: int | None = None,
        max_rows_per_file: int | None = None,
        max_workers: int = 8,
        switch_lease: float = 60.0,
        staging_grace: float = 3600.0,
    ) -> None:
        if not isinstance(store, Store):
            raise InvalidArgument(f"store must be a parquetry Store, got {type(store).__name__}")
        self._store = store
        self._compression = check_compression(compression)
        self._row_group_size = check_positive("row_group_size", row_group_size)
        self._max_rows_per_file = check_positive("max_rows_per_file", max_rows_per_file)
        self._max_workers = check_positive("max_workers", max_workers) or 1
        self._options = WriteOptions(compression=compression.lower(), row_group_size=row_group_size)
        self._timing = maintain.Timing(
            lease=check_seconds("switch_lease", switch_lease),
            grace=check_seconds("staging_grace", staging_grace),
            max_workers=self._max_workers,
        )

    @property
    def store(self) -> Store:
        """The underlying store."""
        return self._store

    @property
    def compression(self) -> str:
        """The Parquet codec name, as given."""
        return self._compression

    @property
    def row_group_size(self) -> int | None:
        """Rows per row group, or ``None`` for pyarrow's default."""
        return self._row_group_size

    @property
    def max_rows_per_file(self) -> int | None:
        """Rows per part at most, or ``None`` for one part."""
        return self._max_rows_per_file

    def __repr__(self) -> str:
        return (
            f"ParquetDatasetStore({self._store!r}, compression={self._compression!r}, "
            f"max_rows_per_file={self._max_rows_per_file!r})"
        )

    # --- the spec 042 API ------------------------------------------------------------------

    def write_dataset(
        self,
        table: object,
        key: str,
        *,
        overwrite: bool = False,
        run_id: str | None = None,
        metadata: dict[str, str] | None = None,
    ) -> DatasetManifest:
        """Write ``table`` as the dataset ``key`` and return its manifest.

        ``table`` may also be a RecordBatch, a RecordBatchReader, an iterable of record
        batches, a pandas or Polars DataFrame or any ``__arrow_c_stream__`` object; streams
        are written part by part as they fill (about two parts in memory).

        Raises:
            CapabilityNotSupported: the store lacks ``atomic_write`` (or ``delete`` when
                ``overwrite``), or another capability staging needs; before any I/O. A
                store that cannot delete or list gets a direct write instead of staging
                (:mod:`parquetry.snapshot.direct`) when ``overwrite`` is false.
            InvalidKey, InvalidArgument: bad key, input or argument; before any I/O.
            AlreadyExists: the dataset exists and ``overwrite`` is false.
        """
        direct = not overwrite and not can_stage(self._store)
        require_write(self._store, key, overwrite=overwrite, staging=not direct)
        layout.check_dataset_key(key)
        check_run_id(run_id)
        check_metadata(metadata)
        source = as_arrow_input(table)
        if direct:
            return write_direct(
                self._store,
                key,
                source,
                self._options,
                write_id=self.new_write_id(),
                max_rows=self._max_rows_per_file,
                max_workers=self._max_workers,
                compression=self._compression,
                run_id=run_id,
                metadata=metadata,
            )
        self._settle(key)
        refuse_existing(self._store, key, overwrite)
        write_id = self.new_write_id()
        stager = PartStager(
            self._store, key, write_id, self._options, max_workers=self._max_workers
        )
        try:
            staged = stager.stage_input(source, self._max_rows_per_file)
            journal = self._journal(key, write_id, staged, overwrite, run_id, metadata)
        except BaseException:
            commit.abort_staging(self._store, key, write_id)
            raise
        return self._switch(key, journal, own_staging=True)

    def read_dataset(self, key: str, *, columns: Sequence[str] | None = None) -> pa.Table:
        """The dataset's rows (only ``columns``, in that order, if given).

        Raises:
            DatasetIncomplete: ``_SUCCESS`` or a listed part is missing (checked before any
                part is read), or a switch is in progress.
            ManifestCorrupted: the manifest is unreadable or disagrees with the parts.
            UnknownColumn: a requested column is not in the dataset.
        """
        layout.check_dataset_key(key)
        cols = check_columns(columns)
        self._store.require(Capability.READ)
        return read_snapshot(self._store, key, cols, max_workers=self._max_workers)

    def read_manifest(self, key: str) -> DatasetManifest:
        """Parse ``{key}/manifest.json``.

        Raises:
            NotFound: no manifest. ManifestCorrupted: it cannot be parsed.
        """
        layout.check_dataset_key(key)
        try:
            raw = self._store.get(layout.manifest_key(key))
        except NotFound:
            raise NotFound(
                f"no manifest for dataset {key!r} in {self._store.url}",
                key=key,
                store=self._store.url,
            ) from None
        return parse_manifest(raw, key)

    def dataset_exists(self, key: str) -> bool:
        """Whether ``{key}/_SUCCESS`` exists."""
        layout.check_dataset_key(key)
        return self._store.exists(layout.success_key(key))

    def delete_dataset(self, key: str) -> None:
        """Delete the dataset's own objects (``_SUCCESS`` first, so readers stop at once):
        the files directly under ``{key}/`` and its staged writes, never datasets stored
        below ``{key}/``.

        Raises:
            NotFound: nothing of the dataset is stored under ``key``.
            CommitConflict: a write is switching the dataset right now.
        """
        layout.check_dataset_key(key)
        self._store.require(Capability.DELETE, Capability.LIST)
        maintain.delete_snapshot(self._store, key, self._timing, self.new_write_id())

    def repair(self, key: str) -> bool:
        """Complete an interrupted switch of ``key`` and drop abandoned staged writes.

        A switch whose writer failed (and released it) or that is older than
        ``switch_lease`` is completed, or discarded if its staged parts are gone; a live
        one is left to its writer. Staged writes idle for ``staging_grace`` are deleted.
        On a store that cannot delete or list, completes a direct write that stopped
        between its manifest and ``_SUCCESS`` (see :mod:`parquetry.snapshot.direct`).

        Returns:
            True if an interrupted switch (or direct write) was found and completed.

        Raises:
            ManifestCorrupted: the switch journal is corrupt and younger than the lease.
        """
        layout.check_dataset_key(key)
        if not can_stage(self._store):
            self._store.require(Capability.ATOMIC_WRITE, *DIRECT_CAPS)
            return settle_direct(self._store, key)
        self._store.require(Capability.ATOMIC_WRITE, *WRITE_CAPS)
        completed = self._settle(key)
        maintain.clean_abandoned(self._store, key, self._timing, self.new_write_id())
        return completed

    def collect_garbage(self, key: str, *, retention: float) -> list[str]:
        """Delete files directly under ``{key}/`` that the manifest does not list, older than
        ``retention`` seconds, and staged writes idle for ``retention`` (never less than
        ``switch_lease``: a writer may be between staging and switching); returns the
        deleted keys.

        Raises:
            NotFound: no manifest. CommitConflict: a write is switching the dataset, or
                one was interrupted (run :meth:`repair` first).
        """
        layout.check_dataset_key(key)
        self._store.require(Capability.DELETE, Capability.LIST)
        seconds = check_seconds("retention", retention)
        return maintain.collect_garbage(
            self._store, key, seconds, self._timing, self.new_write_id()
        )

    # --- the executor contract -------------------------------------------------------------

    def new_write_id(self) -> str:
        """A unique id for a write whose parts are staged separately (e.g. by executors)."""
        return f"{time.time_ns():x}-{uuid.uuid4().hex[:16]}"

    def write_part(self, key: str, write_id: str, name: str, table: object) -> StagedPart:
        """Stage one part of write ``write_id``; the dataset is not touched."""
        require_write(self._store, key, overwrite=False)
        layout.check_dataset_key(key)
        layout.check_name("write_id", write_id)
        layout.check_name("part name", name)
        source = as_arrow_input(table)
        stager = PartStager(self._store, key, write_id, self._options, max_workers=1)
        if source.table is not None:
            return stager.stage_table(name, source.table)
        assert source.batches is not None
        return stager.stage_batches(name, source.schema, source.batches)

    def commit_write(
        self,
        key: str,
        write_id: str,
        staged_parts: Sequence[StagedPart],
        *,
        overwrite: bool = False,
        run_id: str | None = None,
        metadata: dict[str, str] | None = None,
        txn: tuple[str, int] | None = None,
    ) -> DatasetManifest:
        """Commit staged parts as the dataset ``key`` (in the order given), crash-safely.

        Committing the same ``write_id`` again after a lost acknowledgement returns the
        same manifest. On an error before the switch starts the staged parts stay; call
        :meth:`abort_write`.

        ``txn=(app_id, version)``: the manifest records it (with the earlier manifest's
        transactions); when the current manifest already records ``version`` or a later
        one for ``app_id``, the staged parts are deleted and the current manifest is
        returned unchanged (a replayed streaming batch). The check runs before the switch
        lock is taken: two replays racing each other can both switch (the snapshot then
        holds the replayed data once: a switch replaces the whole snapshot).
        """
        require_write(self._store, key, overwrite=overwrite)
        layout.check_dataset_key(key)
        layout.check_name("write_id", write_id)
        check_run_id(run_id)
        check_metadata(metadata)
        parts = list(staged_parts)
        if not parts or not all(isinstance(p, StagedPart) for p in parts):
            raise InvalidArgument("commit_write needs a non-empty list of StagedPart", key=key)
        retried = self._resume(key, write_id)
        if retried is not None:
            return retried
        self._settle(key)
        txns = txns_after(self._store, key, txn)
        if txns is None:
            commit.abort_staging(self._store, key, write_id)
            return self.read_manifest(key)
        refuse_existing(self._store, key, overwrite)
        commit.check_staged(self._store, key, write_id, parts, max_workers=self._max_workers)
        journal = self._journal(key, write_id, parts, overwrite, run_id, metadata, txns)
        return self._switch(key, journal, own_staging=False)

    def abort_write(self, key: str, write_id: str) -> None:
        """Delete the staged parts of write ``write_id``.

        A write whose switch already started cannot be undone; it is completed instead.
        """
        layout.check_dataset_key(key)
        layout.check_name("write_id", write_id)
        self._store.require(Capability.DELETE, Capability.LIST)
        if self._resume(key, write_id) is not None:
            return
        commit.abort_staging(self._store, key, write_id)

    # --- internals -------------------------------------------------------------------------

    def _settle(self, key: str) -> bool:
        """Complete a switch whose writer failed or died; True if one was completed."""
        return maintain.settle(self._store, key, self._timing, self.new_write_id())

    def _resume(self, key: str, write_id: str) -> DatasetManifest | None:
        return commit.resume(self._store, key, write_id, self._timing, self.new_write_id())

    def _journal(
        self,
        key: str,
        write_id: str,
        parts: list[StagedPart],
        overwrite: bool,
        run_id: str | None,
        metadata: dict[str, str] | None,
        txns: dict[str, int] | None = None,
    ) -> SwitchJournal:
        return commit.build_journal(
            key,
            write_id,
            parts,
            overwrite=overwrite,
            compression=self._compression,
            run_id=run_id,
            metadata=metadata,
            txns=txns,
        )

    def _switch(self, key: str, journal: SwitchJournal, *, own_staging: bool) -> DatasetManifest:
        return commit.switch(
            self._store, key, journal, self._timing, self.new_write_id(), own_staging=own_staging
        )
