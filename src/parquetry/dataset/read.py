"""Reading planned files: payload columns from Parquet, typed partition columns restored.

Payload files may use any type whose normalised form matches the schema (kartothek writes
int32 payloads under an int64 schema), may carry pandas ``__index_level_N__`` columns, and
old pyarrow files may hold UTC-adjusted timestamps; everything is cast to the dataset
schema. Row groups are pruned with the footer statistics through the row filter.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.parquet as pq

from parquetry.dataset.plan import PlannedFile, ScanPlan
from parquetry.dataset.predicates import to_expression
from parquetry.errors import (
    EncryptionError,
    InvalidFormat,
    MetadataCorrupted,
    NotFound,
    SchemaMismatch,
)
from parquetry.parquet.encryption import DecryptionSettings
from parquetry.parquet.files import open_parquet, read_failure
from parquetry.parquet.footer import RawFooter, footer_from_bytes
from parquetry.parquet.footer_check import footer_rows, pyarrow_hazard
from parquetry.parquet.footer_memo import FooterMemo
from parquetry.parquet.utf8 import check_utf8
from parquetry.store import Store

__all__ = [
    "DataFileMissing",
    "read_planned_file",
    "read_plan",
    "read_row_groups",
    "read_whole_file",
    "scan_plan",
]

Decryption = DecryptionSettings | None
READ_ERRORS = (pa.ArrowException, OSError, ValueError, EOFError)

#: Files read concurrently at a time (bounded memory: one table per file in flight).
READ_BATCH_FILES = 64


class DataFileMissing(MetadataCorrupted):
    """A data file the version names is not in the store (the store said NotFound).

    Damage for the version being read, unless garbage collection expired it: a caller that
    knows the version may be old (the change feed) turns it into VersionExpired by this
    class, never by the message."""


def _missing(planned: PlannedFile) -> DataFileMissing:
    return DataFileMissing(
        f"data file {planned.key} of partition {planned.label!r} is missing", key=planned.key
    )


def _cast_column(arr: pa.ChunkedArray, t: pa.DataType, name: str, key: str) -> pa.ChunkedArray:
    if arr.type == t:
        return arr
    utc_adjusted = pa.types.is_timestamp(arr.type) and arr.type.tz is not None
    if utc_adjusted and pa.types.is_timestamp(t) and t.tz is None:
        # Old pyarrow wrote isAdjustedToUTC timestamps for naive data: same instant.
        arr = arr.cast(pa.timestamp(arr.type.unit, tz="UTC")).cast(pa.timestamp(arr.type.unit))
    try:
        return arr.cast(t)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise SchemaMismatch(
            f"{key}: column {name!r} is {arr.type}, the dataset has {t}: {exc}", key=key
        ) from None


def _open(
    store: Store, planned: PlannedFile, columns: Sequence[str], decryption: Decryption
) -> tuple[pq.ParquetFile, RawFooter]:
    """The file after a raw footer check: corrupt bytes and missing keys become errors
    naming the key (InvalidFormat, EncryptionError), never a raw pyarrow error."""
    try:
        f = store.open(planned.key, size=planned.size)
        pf, raw, _ = open_parquet(
            f, columns=columns, decryption=decryption, pre_buffer=False, rows=planned.rows
        )
    except NotFound:
        raise _missing(planned) from None
    return pf, raw


def _read(raw: RawFooter | None, planned: PlannedFile, read: Callable[[], pa.Table]) -> pa.Table:
    key = planned.key
    try:
        return read()
    except EncryptionError:
        raise
    except NotFound:
        # Deleted after its footer was read (garbage collection): not a damaged file.
        raise _missing(planned) from None
    except (*READ_ERRORS, KeyError, IndexError) as exc:
        if raw is None:
            raise  # an unchecked reader: its caller falls back to the checked path
        raise read_failure(raw, key, exc) from None


class _FileReader:
    """Reads one planned file (whole or by row group) as tables with the dataset schema."""

    def __init__(
        self,
        store: Store,
        schema: pa.Schema,
        planned: PlannedFile,
        names: list[str],
        filter_columns: Sequence[str],
        decryption: Decryption,
        opened: pq.ParquetFile | None = None,
    ):
        self.schema, self.planned, self.names = schema, planned, names
        self.partition = dict(planned.partition)
        self.wanted = set(names) | set(filter_columns)
        payload = [n for n in schema.names if n in self.wanted and n not in self.partition]
        self.raw: RawFooter | None = None
        if opened is None:
            self.pf, self.raw = _open(store, planned, payload, decryption)
        else:
            self.pf = opened  # unchecked: its caller falls back to the checked path on errors
        held = self.pf.metadata.num_rows
        if planned.rows is not None and held != planned.rows:
            # Another file under the committed name (replaced, even by one of the same size).
            raise InvalidFormat(
                f"data file {planned.key} of partition {planned.label!r} holds {held} rows, "
                f"the version records {planned.rows}: it is not the file committed",
                key=planned.key,
            )
        present = set(self.pf.schema_arrow.names)
        self.available = [n for n in payload if n in present]
        self.missing = {n for n in payload if n not in present}

    @property
    def row_groups(self) -> int:
        return int(self.pf.metadata.num_row_groups)

    def read(self, group: int | None, row_filter: pc.Expression | None) -> pa.Table:
        cols = self.available
        if group is None:
            table = _read(self.raw, self.planned, lambda: self.pf.read(cols, use_threads=False))
        else:
            table = _read(
                self.raw,
                self.planned,
                lambda: self.pf.read_row_group(group, cols, use_threads=False),
            )
        self.check_rows(table, group)
        return self._typed(table, row_filter)

    def check_rows(self, table: pa.Table, group: int | None) -> None:
        """InvalidFormat unless the decoded rows are the footer's count: rows that went
        missing between the pages and the table must not pass silently."""
        meta = self.pf.metadata
        groups = range(meta.num_row_groups) if group is None else (group,)
        expected = sum(meta.row_group(g).num_rows for g in groups)
        if table.num_rows != expected:
            where = "" if group is None else f" row group {group}"
            raise InvalidFormat(
                f"{self.planned.key}:{where} decoded {table.num_rows} rows, its footer says "
                f"{expected}",
                key=self.planned.key,
            )

    def _typed(self, table: pa.Table, row_filter: pc.Expression | None) -> pa.Table:
        arrays: dict[str, Any] = {}
        n = table.num_rows
        for name in self.schema.names:
            if name not in self.wanted:
                continue
            t = self.schema.field(name).type
            if name in self.partition:
                value = pa.scalar(self.partition[name], type=t)
                arrays[name] = pa.chunked_array([pa.repeat(value, n)])
            elif name in self.missing:
                arrays[name] = pa.chunked_array([pa.nulls(n, type=t)], type=t)
            else:
                column = table.column(name)
                # pyarrow does not check UTF-8: a damaged value would fail later, raw.
                check_utf8(column, self.planned.key, name)
                arrays[name] = _cast_column(column, t, name, self.planned.key)
        fields = [self.schema.field(k) for k in arrays]
        out = pa.table(list(arrays.values()), schema=pa.schema(fields))
        if row_filter is not None:
            out = pads.dataset(out).to_table(filter=row_filter)
        return out.select(self.names)


def read_planned_file(
    store: Store,
    schema: pa.Schema,
    planned: PlannedFile,
    *,
    columns: Sequence[str] | None = None,
    row_filter: pc.Expression | None = None,
    filter_columns: Sequence[str] = (),
    decryption: Decryption = None,
) -> pa.Table:
    """One file as a table with ``schema`` (projected to ``columns``), filtered by rows."""
    names = list(columns) if columns is not None else schema.names
    reader = _FileReader(store, schema, planned, names, filter_columns, decryption)
    return reader.read(None, row_filter)


def read_row_groups(
    store: Store,
    schema: pa.Schema,
    planned: PlannedFile,
    columns: Sequence[str],
    decryption: Decryption = None,
) -> Iterator[pa.Table]:
    """One file's row groups, one table each (cast to ``schema``, projected to ``columns``):
    a rewrite of the file holds one decoded row group at a time."""
    reader = _FileReader(store, schema, planned, list(columns), (), decryption)
    for group in range(reader.row_groups):
        yield reader.read(group, None)


def read_whole_file(
    store: Store,
    schema: pa.Schema,
    planned: PlannedFile,
    columns: Sequence[str],
    decryption: Decryption = None,
    data: bytes | None = None,
    checked: bool = False,
    memo: FooterMemo | None = None,
) -> list[pa.Table]:
    """Every row group of one (small) file as tables, like :func:`read_row_groups`, with
    one GET (none when the caller already holds the file's bytes ``data``). The footer is
    still checked (parquetry's Thrift reader, on the bytes already read) before pyarrow
    sees it: pyarrow aborts the process on some malformed footers
    (:mod:`parquetry.parquet.footer_check`), so a corrupted or encrypted file takes the
    checked path, which raises the error naming it. Encrypted reads always take that path.
    ``memo``: decode the footer through these templates (files written alike, e.g. the
    files a row operation rewrites: :mod:`parquetry.parquet.footer_memo`), exactly what the
    Thrift reader would return, in a third of its time; the same check follows.
    """
    if decryption is None:
        try:
            data = store.get(planned.key) if data is None else data
        except NotFound:
            raise _missing(planned) from None
        try:
            # ``checked``: the caller parsed this footer and found it safe (compaction).
            if checked:
                raw = None
            elif memo is not None:
                raw = memo.footer(data, planned.key)
            else:
                raw = footer_from_bytes(data, planned.key)
            unsafe = raw is not None and (
                raw.encrypted
                or pyarrow_hazard(raw) is not None
                or (
                    planned.rows is not None
                    and raw.metadata is not None
                    and footer_rows(raw) != planned.rows
                )
            )
        except (InvalidFormat, RecursionError):
            unsafe = True
        if unsafe:
            return list(read_row_groups(store, schema, planned, columns, decryption))
        try:
            pf = pq.ParquetFile(
                pa.BufferReader(data),
                coerce_int96_timestamp_unit="us",
                page_checksum_verification=True,  # as open_parquet: a CRC mismatch raises
            )
            reader = _FileReader(store, schema, planned, list(columns), (), None, opened=pf)
            whole = reader.pf.read(reader.available, use_threads=False)
            # The checked path below raises the error naming the file (InvalidFormat is a
            # ValueError, so a mismatch found here also lands there).
            reader.check_rows(whole, None)
            if planned.rows is not None and whole.num_rows != planned.rows:
                raise InvalidFormat(f"{planned.key}: row count", key=planned.key)
            return [reader._typed(whole, None)]
        except (*READ_ERRORS, KeyError, IndexError):
            pass  # corrupt, encrypted or a wrong row count: the checked path below says which
    return list(read_row_groups(store, schema, planned, columns, decryption))


def _filter_of(plan: ScanPlan) -> tuple[pc.Expression | None, list[str]]:
    expr = to_expression(plan.predicates) if plan.predicates else None
    return expr, sorted({lit.column for conj in plan.predicates or () for lit in conj})


def read_plan(
    store: Store,
    schema: pa.Schema,
    plan: ScanPlan,
    columns: Sequence[str] | None,
    decryption: Decryption = None,
) -> Iterator[pa.Table]:
    """The planned files' rows matching the plan's predicates, file by file, in plan order
    (up to :data:`READ_BATCH_FILES` files read concurrently)."""
    expr, filter_columns = _filter_of(plan)

    def read(planned: PlannedFile) -> pa.Table:
        return read_planned_file(
            store,
            schema,
            planned,
            columns=columns,
            row_filter=expr,
            filter_columns=filter_columns,
            decryption=decryption,
        )

    for i in range(0, len(plan.files), READ_BATCH_FILES):
        yield from store.map_concurrent(read, plan.files[i : i + READ_BATCH_FILES])


def scan_plan(
    store: Store,
    schema: pa.Schema,
    plan: ScanPlan,
    columns: Sequence[str] | None,
    decryption: Decryption = None,
) -> Iterator[pa.RecordBatch]:
    """Record batches of the plan in plan order, holding one row group at a time.

    Files are opened one after the other and read one row group per step (only the
    footer of the current file and the decoded row group are in memory), so peak memory
    is bounded by the largest row group, not by the files or the dataset.
    """
    expr, filter_columns = _filter_of(plan)
    names = list(columns) if columns is not None else schema.names
    for planned in plan.files:
        reader = _FileReader(store, schema, planned, names, filter_columns, decryption)
        for group in range(reader.row_groups):
            table = reader.read(group, expr)
            yield from table.to_batches()
            del table
