"""Writing data files (no commit): what Spark executors and every write path call.

Files get unique names (``<uuid4hex>`` labels) and are created with create-if-absent, so a
retried task can never overwrite a file another attempt wrote. Partition columns are removed
from the files (their values live in the path). Input is streamed: partitioned input is
buffered up to ``flush_bytes`` and then split, so memory stays bounded.
"""

from __future__ import annotations

import base64
import datetime as dt
import io
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from parquetry.dataset.intents import DEFAULT_LEASE, Intent
from parquetry.dataset.naming import DEFAULT_TABLE, data_key, make_label, new_base_label
from parquetry.dataset.schema import cast_to_schema
from parquetry.dataset.stats import ColumnStats, compute_stats
from parquetry.dataset.writeparts import distinct_sorted, split_partitions
from parquetry.errors import InvalidArgument, UnknownColumn
from parquetry.parquet import WriteOptions
from parquetry.parquet.utf8 import first_invalid
from parquetry.store import PutMode, Store

__all__ = [
    "Batches",
    "FileDescription",
    "distinct_sorted",
    "iter_input",
    "storage_schema",
    "write_files",
]

FLUSH_BYTES = 128 << 20
MAX_ROWS_PER_FILE = 4_000_000


@dataclass(frozen=True, slots=True, kw_only=True)
class FileDescription:
    """One written, not yet committed data file (picklable; JSON round trip)."""

    table: str
    key: str
    label: str
    partition: tuple[tuple[str, Any], ...]
    rows: int
    size: int
    stats: dict[str, ColumnStats] = field(default_factory=dict)
    index_values: dict[str, pa.Array] = field(default_factory=dict)
    #: Id of the write intent covering this file until it is committed (None: written
    #: before intents existed, or by another tool).
    intent: str | None = None

    def to_json(self) -> dict[str, Any]:
        from parquetry.dataset.predicates import json_value

        ivals = {}
        for col, arr in self.index_values.items():
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, pa.schema([(col, arr.type)])) as w:
                w.write_batch(pa.record_batch([arr], names=[col]))
            ivals[col] = base64.b64encode(sink.getvalue().to_pybytes()).decode("ascii")
        return {
            "table": self.table,
            "key": self.key,
            "label": self.label,
            "partition": [[k, json_value(v)] for k, v in self.partition],
            "rows": self.rows,
            "size": self.size,
            "stats": self.stats,
            "index_values": ivals,
            **({"intent": self.intent} if self.intent else {}),
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> FileDescription:
        from parquetry.dataset.predicates import value_from_json

        ivals = {}
        for col, text in doc.get("index_values", {}).items():
            reader = pa.ipc.open_stream(pa.py_buffer(base64.b64decode(text)))
            ivals[col] = reader.read_all().column(0).combine_chunks()
        partition = tuple((k, value_from_json(v)) for k, v in doc["partition"])
        return cls(
            table=doc["table"],
            key=doc["key"],
            label=doc["label"],
            partition=partition,
            rows=int(doc["rows"]),
            size=int(doc["size"]),
            stats=doc.get("stats", {}),
            index_values=ivals,
            intent=doc.get("intent"),
        )


def _storage_type(t: pa.DataType) -> pa.DataType:
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return pa.string()
    if pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return pa.binary()
    if pa.types.is_timestamp(t) and t.unit == "ns":
        return pa.timestamp("us", tz=t.tz)
    if pa.types.is_dictionary(t):
        return _storage_type(t.value_type)
    return t


def storage_schema(schema: pa.Schema) -> pa.Schema:
    """The schema a dataset stores: plain strings/binaries, µs timestamps, no metadata."""
    return pa.schema([pa.field(f.name, _storage_type(f.type), f.nullable) for f in schema])


class Batches:
    """An already-opened input (schema + batch iterator) that write_files accepts again."""

    def __init__(self, schema: pa.Schema, batches: Iterator[pa.RecordBatch]):
        self.schema, self.batches = schema, batches

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
        reader = pa.RecordBatchReader.from_batches(self.schema, self.batches)
        return reader.__arrow_c_stream__(requested_schema)


def iter_input(data: Any) -> tuple[pa.Schema, Iterator[pa.RecordBatch]]:
    """Schema + batches of any supported input (Table, batch, reader, iterable, C stream)."""
    if isinstance(data, Batches):
        # Not through its C stream: an error raised while producing a batch (a value check)
        # would come back as a pyarrow ArrowInvalid instead of itself.
        return data.schema, data.batches
    if isinstance(data, pa.Table):
        return data.schema, iter(data.to_batches())
    if isinstance(data, pa.RecordBatch):
        return data.schema, iter([data])
    if isinstance(data, pa.RecordBatchReader):
        return data.schema, iter(data)
    if hasattr(data, "__arrow_c_stream__"):
        reader = pa.RecordBatchReader.from_stream(data)
        return reader.schema, iter(reader)
    if isinstance(data, Iterable) and not isinstance(data, str | bytes | dict):
        it = iter(data)
        first = next(it, None)
        if first is None:
            raise InvalidArgument("cannot infer a schema from an empty iterable of batches")
        if not isinstance(first, pa.Table | pa.RecordBatch):
            raise InvalidArgument(f"cannot write items of type {type(first).__name__}")
        return first.schema, _chain(first, it)
    raise InvalidArgument(
        f"cannot write data of type {type(data).__name__}: pass a pyarrow Table, RecordBatch, "
        "RecordBatchReader, an iterable of batches or an object with __arrow_c_stream__"
    )


def _chain(first: pa.Table | pa.RecordBatch, rest: Iterator[Any]) -> Iterator[pa.RecordBatch]:
    yield from (first.to_batches() if isinstance(first, pa.Table) else [first])
    for item in rest:
        if not isinstance(item, pa.Table | pa.RecordBatch):
            raise InvalidArgument(f"cannot write items of type {type(item).__name__}")
        yield from (item.to_batches() if isinstance(item, pa.Table) else [item])


def _check_columns(schema: pa.Schema, partition_on: Sequence[str], indices: Sequence[str]) -> None:
    for col in (*partition_on, *indices):
        if col not in schema.names:
            raise UnknownColumn(f"column {col!r} is not in the data ({schema.names})", column=col)
    both = set(partition_on) & set(indices)
    if both:
        raise InvalidArgument(f"columns {sorted(both)} cannot be partition keys and indexed")
    if "partition" in indices:
        raise InvalidArgument("a column named 'partition' cannot be indexed (kartothek format)")
    for col in indices:
        if col in (".", ".."):
            # The index file's key holds the column name as one segment.
            raise InvalidArgument(f"a column named {col!r} cannot be indexed (kartothek format)")


class _FileWriter:
    """Encodes one table into one data file and describes it."""

    def __init__(
        self,
        store: Store,
        uuid: str,
        table: str,
        indices: Sequence[str],
        opts: WriteOptions,
        intent: Intent,
    ):
        self.store, self.uuid, self.table, self.indices, self.opts = (
            store,
            uuid,
            table,
            indices,
            opts,
        )
        self.intent = intent

    def key(self, partition: tuple[tuple[str, Any], ...]) -> tuple[str, str]:
        label = make_label(partition, new_base_label())
        return label, data_key(self.uuid, self.table, label)

    def write(
        self, data: pa.Table, partition: tuple[tuple[str, Any], ...], label: str, key: str
    ) -> FileDescription:
        for name in data.column_names:
            bad = first_invalid(data.column(name))
            if bad is not None:  # refused before anything is written: no damaged file
                raise InvalidArgument(
                    f"column {name!r} of the data holds a string value that is not valid "
                    f"UTF-8 (row {bad} of the rows for partition {label!r})"
                )
        sink = io.BytesIO()
        pq.write_table(data, sink, **self.opts.writer_kwargs(data.schema), **_rg(self.opts))
        payload = sink.getvalue()
        self.store.put(key, payload, mode=PutMode.CREATE)
        ivals = {c: distinct_sorted(data.column(c)) for c in self.indices}
        return FileDescription(
            table=self.table,
            key=key,
            label=label,
            partition=partition,
            rows=data.num_rows,
            size=len(payload),
            stats=compute_stats(data),
            index_values=ivals,
            intent=self.intent.id,
        )


def _rg(opts: WriteOptions) -> dict[str, Any]:
    return {"row_group_size": opts.row_group_size} if opts.row_group_size else {}


def write_files(
    store: Store,
    uuid: str,
    data: Any,
    *,
    partition_on: Sequence[str] = (),
    secondary_indices: Sequence[str] = (),
    write_options: WriteOptions | None = None,
    schema: pa.Schema | None = None,
    table: str = DEFAULT_TABLE,
    flush_bytes: int = FLUSH_BYTES,
    max_workers: int = 4,
    lease: dt.timedelta = DEFAULT_LEASE,
    fill_missing: bool = False,
) -> list[FileDescription]:
    """Write data files for a later commit; commits nothing.

    The files are covered by a write intent (see :mod:`parquetry.dataset.intents`), created
    before the first file and renewed with every batch: garbage collection leaves them alone
    until ``lease`` plus its retention after the last renewal, and a commit of them
    (:meth:`Dataset.commit_files`) fails loudly if GC reaped them meanwhile.

    Args:
        store: Where to write.
        uuid: Dataset uuid (files go under ``<uuid>/<table>/``).
        data: A Table, RecordBatch, RecordBatchReader, iterable of batches or an object with
            ``__arrow_c_stream__``; streamed.
        partition_on: Partition columns (removed from the files).
        secondary_indices: Columns whose distinct values each file reports for indexing.
        write_options: Parquet options (default :class:`WriteOptions`).
        schema: Dataset schema to cast the data to (default: the data's own, cleaned).
        table: Table name (kartothek's default ``"table"``).
        flush_bytes: Buffered input size after which partitioned data is split and written.
        max_workers: Files encoded and uploaded concurrently.
        lease: How long the intent protects the files without renewal.
        fill_missing: Nullable columns of ``schema`` the data lacks are written as nulls
            (a ``merge_schema`` write; checked by :mod:`parquetry.dataset.evolve` first).

    Returns:
        One :class:`FileDescription` per written file.
    """
    opts = write_options or WriteOptions()
    in_schema, batches = iter_input(data)
    target = schema if schema is not None else storage_schema(in_schema)
    _check_columns(target, partition_on, secondary_indices)
    writer = _FileWriter(
        store, uuid, table, secondary_indices, opts, Intent(store, uuid, lease=lease)
    )
    out: list[FileDescription] = []
    buffered: list[pa.RecordBatch] = []
    size = 0
    seen = 0  # input rows before the buffer, for errors naming a row

    def flush() -> None:
        nonlocal size
        if not buffered:
            return
        nonlocal seen
        tbl = cast_to_schema(
            pa.Table.from_batches(buffered),
            target,
            where=f"writing {uuid}",
            row_offset=seen,
            fill_missing=fill_missing,
        )
        seen += tbl.num_rows
        buffered.clear()
        size = 0
        if partition_on:
            runs = split_partitions(tbl, partition_on)
        else:
            runs = [
                ((), tbl.slice(s, MAX_ROWS_PER_FILE))
                for s in range(0, tbl.num_rows, MAX_ROWS_PER_FILE)
            ]
        named = [(p, t, *writer.key(p)) for p, t in runs if t.num_rows]
        # Recorded before written: GC never sees a file its intent does not cover.
        writer.intent.record([key for _, _, _, key in named])
        out.extend(
            store.map_concurrent(
                lambda r: writer.write(r[1], r[0], r[2], r[3]), named, max_workers=max_workers
            )
        )

    for batch in batches:
        if batch.num_rows == 0:
            continue
        buffered.append(batch)
        size += batch.nbytes
        if size >= flush_bytes:
            flush()
    flush()
    return out
