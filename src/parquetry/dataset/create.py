"""Creating a dataset: schema file, version 0 (create-if-absent) and the pointer."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from parquetry.dataset.commit import now_iso, publish_pointer
from parquetry.dataset.metadata import DatasetDocument, encode_document
from parquetry.dataset.naming import common_metadata_key, version_key
from parquetry.dataset.ops import apply_change
from parquetry.dataset.schema import common_metadata_bytes
from parquetry.dataset.versions import LoadedState
from parquetry.dataset.write import FileDescription
from parquetry.errors import AlreadyExists, InvalidArgument, UnknownColumn
from parquetry.store import PutMode, Store

__all__ = ["Batches", "create_from_files", "schema_from_files"]


def create_from_files(
    store: Store,
    uuid: str,
    files: Sequence[FileDescription],
    *,
    schema: pa.Schema,
    partition_on: Sequence[str],
    secondary_indices: Sequence[str],
    metadata: Mapping[str, Any] | None,
    metadata_format: str,
    table: str,
    operation: str = "create",
) -> LoadedState:
    for col in (*partition_on, *secondary_indices):
        if col not in schema.names:
            raise UnknownColumn(f"column {col!r} is not in the schema", column=col)
    put_common_metadata(store, uuid, table, schema, partition_on)
    user = dict(metadata or {})
    creation = dt.datetime.now(dt.UTC).replace(tzinfo=None, microsecond=0).isoformat()
    empty = DatasetDocument(
        uuid=uuid,
        partitions={},
        partition_keys=tuple(partition_on),
        metadata={"creation_time": creation},
        schema=schema,
        metadata_format=metadata_format,
    )
    doc = apply_change(
        store,
        empty,
        number=0,
        parent=None,
        committed_at=now_iso(),
        operation=operation,
        schema=schema,
        add=files,
        new_indices=secondary_indices,
        metadata=user,
    )
    data = encode_document(doc, "json")
    try:
        store.put(version_key(uuid, 0), data, mode=PutMode.CREATE)
    except AlreadyExists:
        raise AlreadyExists(
            f"dataset {uuid!r} was created concurrently (or a deleted dataset left "
            f"version files under {uuid}/_versions)",
            key=version_key(uuid, 0),
        ) from None
    publish_pointer(store, uuid, doc, data, 0, metadata_format)
    return LoadedState(doc=doc, number=0, foreign=False, pointer_format=metadata_format, requests=0)


class Batches:
    """An already-opened input (schema + batch iterator) that write_files accepts again."""

    def __init__(self, schema: pa.Schema, batches: Iterator[pa.RecordBatch]):
        self.schema, self.batches = schema, batches

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
        reader = pa.RecordBatchReader.from_batches(self.schema, self.batches)
        return reader.__arrow_c_stream__(requested_schema)


def put_common_metadata(
    store: Store, uuid: str, table: str, schema: pa.Schema, partition_on: Sequence[str]
) -> None:
    key = common_metadata_key(uuid, table)
    data = common_metadata_bytes(schema, partition_on)
    try:
        store.put(key, data, mode=PutMode.CREATE)
    except AlreadyExists:
        if store.get(key) != data:
            raise AlreadyExists(
                f"{key} already exists with another schema (a concurrent create, or leftovers "
                "of a deleted dataset)",
                key=key,
            ) from None


def schema_from_files(
    store: Store, files: Sequence[FileDescription], partition_on: Sequence[str]
) -> pa.Schema:
    if not files:
        raise InvalidArgument("creating a dataset from no files needs an explicit schema")
    first = files[0]
    payload = pq.ParquetFile(store.open(first.key, size=first.size)).schema_arrow
    fields = [pa.field(k, pa.array([v]).type) for k, v in first.partition]
    return pa.schema(fields + list(payload.remove_metadata()))
