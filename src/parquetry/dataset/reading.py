"""Reading one version of a kartothek-format dataset: the read half of :class:`Dataset`.

:class:`VersionReader` holds a loaded version (its document, index lookups and partition
values) and everything that reads it; :class:`~parquetry.dataset.dataset.Dataset` adds
opening, commits and maintenance on top.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any

import pyarrow as pa
import pyarrow.dataset as pads

from parquetry.dataset.arrowfs import pyarrow_dataset
from parquetry.dataset.encrypted import check_keys_for_read
from parquetry.dataset.indices import IndexLookup
from parquetry.dataset.metadata import DatasetDocument, VersionInfo
from parquetry.dataset.ops import partition_values_of
from parquetry.dataset.plan import PlannedFile, ScanPlan, make_plan
from parquetry.dataset.predicates import validate_predicates
from parquetry.dataset.read import read_plan, read_planned_file, scan_plan
from parquetry.dataset.schema import normalise_type
from parquetry.dataset.staleread import version_collected, version_expired
from parquetry.dataset.versions import LoadedState, latest_version_number
from parquetry.errors import InvalidArgument, MetadataCorrupted, UnknownColumn
from parquetry.parquet import DecryptionSettings
from parquetry.store import Store

__all__ = ["VersionReader"]


class VersionReader:
    """One loaded version of a dataset and its reads (see :class:`Dataset`)."""

    def __init__(
        self, store: Store, state: LoadedState, *, decryption: DecryptionSettings | None = None
    ):
        self.store = store
        self._decryption = decryption
        self._doc = state.doc
        self._number = state.number
        self._foreign = state.foreign
        self._pointer_format = state.pointer_format
        self._open_requests = state.requests
        self._indices: dict[str, IndexLookup] = {}
        self._pv_cache: dict[tuple[str, str], Any] = {}
        self._values_of = partition_values_of(self._doc, self.schema, self._pv_cache)

    def _state(self) -> LoadedState:
        """This version as the base of a commit."""
        return LoadedState(
            doc=self._doc,
            number=self._number,
            foreign=self._foreign,
            pointer_format=self._pointer_format,
            requests=0,
        )

    # --- properties ----------------------------------------------------------------------

    @property
    def uuid(self) -> str:
        return self._doc.uuid

    @property
    def version(self) -> int:
        """This version's number (0 = creation); for a state kartothek wrote last, the
        number of the newest parquetry version it builds on."""
        if self._number < 0:
            self._number = latest_version_number(self.store, self.uuid)
        return self._number

    @property
    def schema(self) -> pa.Schema:
        """The dataset schema, partition columns included."""
        assert self._doc.schema is not None
        return self._doc.schema

    @property
    def partition_keys(self) -> tuple[str, ...]:
        return self._doc.partition_keys

    @property
    def secondary_indices(self) -> tuple[str, ...]:
        return tuple(sorted(self._doc.indices))

    @property
    def metadata(self) -> dict[str, Any]:
        return dict(self._doc.metadata)

    @property
    def document(self) -> DatasetDocument:
        return self._doc

    @property
    def info(self) -> VersionInfo | None:
        """What the commit of this version did (None for a state kartothek wrote)."""
        return self._doc.version

    def __repr__(self) -> str:
        return (
            f"Dataset({self.uuid!r}, version={self._number}, "
            f"partitions={len(self._doc.partitions)}, store={self.store.url!r})"
        )

    # --- reading -------------------------------------------------------------------------

    def _index(self, column: str) -> IndexLookup:
        state = self._doc.index_states.get(column)
        if column not in self._indices and state is not None:
            self._indices[column] = IndexLookup.from_state(self.store, state)
        if column not in self._indices:
            t = normalise_type(self.schema.field(column).type)
            ref = self._doc.indices[column]
            footer = self._doc.index_footers.get(column)
            self._indices[column] = IndexLookup(self.store, column, ref, footer, t)
        return self._indices[column]

    def index_pairs(self, column: str) -> pa.Table:
        """The secondary index on ``column``: one ``(value, label)`` row per value and
        partition label holding it (labels as in :attr:`PlannedFile.label`)."""
        if column not in self._doc.indices:
            raise InvalidArgument(
                f"dataset {self.uuid!r} has no secondary index on {column!r}; it has "
                f"{list(self.secondary_indices)}"
            )
        try:
            return self._index(column).full().pairs()
        except MetadataCorrupted as exc:
            expired = version_collected(self, exc)
            if expired is None:
                raise
            raise expired from None

    def plan(self, predicates: Any = None) -> ScanPlan:
        """The files to read for ``predicates`` (kartothek DNF) and why others are skipped."""
        try:
            return self._plan(predicates)
        except MetadataCorrupted as exc:
            # An index piece of this version GC collected meanwhile: expired, not corrupted.
            expired = version_collected(self, exc)
            if expired is None:
                raise
            raise expired from None

    def _plan(self, predicates: Any) -> ScanPlan:
        dnf = validate_predicates(predicates, self.schema)
        columns = sorted({lit.column for conj in dnf or () for lit in conj})
        indices = {c: self._index(c) for c in columns if c in self._doc.indices}
        before = {c: (ix.requests, len(ix.keys)) for c, ix in indices.items()}
        segs = getattr(getattr(self._doc.partitions, "catalog", None), "segments", None)
        loaded = len(segs.keys) if segs is not None else 0
        plan = make_plan(
            self._doc,
            self.schema,
            dnf,
            self._values_of,
            indices,
            version=self._number,
            requests=0,
            request_keys=(),
        )
        keys = [k for c, ix in indices.items() for k in ix.keys[before[c][1] :]]
        used = sum(ix.requests - before[c][0] for c, ix in indices.items())
        if segs is not None:  # segments a lazy catalog loaded for this plan
            keys += segs.keys[loaded:]
            used += len(segs.keys) - loaded
        return replace(plan, requests=self._open_requests + used, request_keys=tuple(keys))

    def read_file(
        self,
        planned_file: PlannedFile,
        columns: Sequence[str] | None = None,
    ) -> pa.Table:
        """One planned file with typed partition columns (schema = ``schema`` projected).

        Raises:
            VersionExpired: garbage collection collected the file (this version expired).
            MetadataCorrupted: the file is missing although the newest version needs it.
        """
        try:
            return self._read_planned(planned_file, columns)
        except MetadataCorrupted as exc:
            expired = version_collected(self, exc)
            if expired is None:
                raise
            raise expired from None

    def _read_planned(self, planned: PlannedFile, columns: Sequence[str] | None) -> pa.Table:
        """:meth:`read_file` without telling a collected file from a missing one."""
        self._check_columns(columns)
        self._check_keys(columns, None)
        return read_planned_file(
            self.store, self.schema, planned, columns=columns, decryption=self._decryption
        )

    def _check_columns(self, columns: Sequence[str] | None) -> None:
        for c in columns or ():
            if c not in self.schema.names:
                raise UnknownColumn(f"column {c!r} is not in dataset {self.uuid!r}", column=c)

    def _check_keys(self, columns: Sequence[str] | None, plan: ScanPlan | None) -> None:
        """EncryptionError naming the dataset if the columns to read need keys not given."""
        if self._doc.encryption is None:
            return
        names = set(columns if columns is not None else self.schema.names)
        names |= {lit.column for conj in (plan.predicates if plan else None) or () for lit in conj}
        payload = [n for n in self.schema.names if n in names and n not in self.partition_keys]
        check_keys_for_read(self.uuid, self._doc.encryption, payload, self._decryption)

    def _read_tables(self, columns: Sequence[str] | None, predicates: Any) -> Iterator[pa.Table]:
        self._check_columns(columns)
        plan = self.plan(predicates)
        self._check_keys(columns, plan)
        return read_plan(self.store, self.schema, plan, columns, self._decryption)

    def read(self, *, columns: Sequence[str] | None = None, predicates: Any = None) -> pa.Table:
        """Rows of this version matching ``predicates``, projected to ``columns``."""
        try:
            tables = list(self._read_tables(columns, predicates))
        except MetadataCorrupted as exc:
            # A file of this version GC collected meanwhile: expired, not corrupted.
            expired = version_collected(self, exc)
            if expired is None:
                raise
            raise expired from None
        target = (
            self.schema if columns is None else pa.schema([self.schema.field(c) for c in columns])
        )
        if not tables:
            return target.empty_table()
        return pa.concat_tables(tables)

    def scan(
        self,
        *,
        columns: Sequence[str] | None = None,
        predicates: Any = None,
    ) -> Iterator[pa.RecordBatch]:
        """Record batches of :meth:`read`, one row group at a time (bounded memory).

        Files are read one after the other, one row group per step: besides the batches the
        caller keeps, at most one decoded row group (and one file footer) is in memory, so
        peak memory follows the largest row group, not the dataset. :meth:`read` reads up
        to 64 files concurrently instead.
        """
        self._check_columns(columns)
        plan = self.plan(predicates)
        self._check_keys(columns, plan)
        try:
            yield from scan_plan(self.store, self.schema, plan, columns, self._decryption)
        except MetadataCorrupted as exc:
            expired = version_collected(self, exc)
            if expired is None:
                raise
            raise expired from None

    def to_pyarrow_dataset(self) -> pads.Dataset:
        """A ``pyarrow.dataset`` over exactly this version's files (partition columns typed).

        The version is checked first (one GET of its version file): when garbage collection
        expired it, its files may be gone, and this raises VersionExpired rather than handing
        out a dataset whose scan fails. A collection while the returned dataset is scanned
        surfaces from pyarrow's scan: NotFound naming the file for object and memory stores,
        pyarrow's FileNotFoundError for a local store (pyarrow reads local files itself).

        Raises:
            VersionExpired: this version was garbage collected.
        """
        expired = version_expired(self)
        if expired is not None:
            raise expired
        files = self.plan(None).files
        return pyarrow_dataset(self.store, self.schema, files, decryption=self._decryption)
