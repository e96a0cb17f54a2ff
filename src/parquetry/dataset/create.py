"""Creating a dataset: schema file, version 0 (create-if-absent) and the pointer."""

from __future__ import annotations

import datetime as dt
import uuid as uuid_module
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from parquetry.dataset.commit import committed_keys, now_iso
from parquetry.dataset.entry import encode_entry, entry_of
from parquetry.dataset.format2 import read_version, version_info
from parquetry.dataset.head import Lineage
from parquetry.dataset.intents import claim_for_commit
from parquetry.dataset.metadata import DatasetDocument
from parquetry.dataset.naming import common_metadata_key, incarnation_key, version_key
from parquetry.dataset.ops import apply_change
from parquetry.dataset.publish import finish_commit
from parquetry.dataset.schema import common_metadata_bytes
from parquetry.dataset.versions import LoadedState
from parquetry.dataset.write import Batches, FileDescription
from parquetry.errors import AlreadyExists, InvalidArgument, MetadataCorrupted, UnknownColumn
from parquetry.parquet.footer import footer_from_store
from parquetry.parquet.footer_check import check_plaintext_footer
from parquetry.store import PutMode, Store

__all__ = ["Batches", "create_from_files", "schema_from_files"]

LEFTOVER_GRACE = dt.timedelta(minutes=1)


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
    encryption: Mapping[str, Any] | None = None,
    parameters: Mapping[str, str] | None = None,
    settings: Mapping[str, Any] | None = None,
    txns: Mapping[str, int] | None = None,
) -> LoadedState:
    for col in (*partition_on, *secondary_indices):
        if col not in schema.names:
            raise UnknownColumn(f"column {col!r} is not in the schema", column=col)
    number = _first_version_number(store, uuid, table)
    claim, work = claim_for_commit(store, uuid, [(f.key, f.size, f.intent) for f in files])
    put_common_metadata(store, uuid, table, schema, partition_on, replace_stale=number > 0)
    # The marker exists before version 0: a commit checks that its incarnation still does.
    incarnation = uuid_module.uuid4().hex
    store.put(incarnation_key(uuid, incarnation), b"", mode=PutMode.CREATE)
    user = dict(metadata or {})
    creation = dt.datetime.now(dt.UTC).replace(tzinfo=None, microsecond=0).isoformat()
    empty = DatasetDocument(
        uuid=uuid,
        partitions={},
        partition_keys=tuple(partition_on),
        metadata={"creation_time": creation},
        schema=schema,
        metadata_format=metadata_format,
        encryption=encryption,
        settings=dict(settings or {}),
        txns=dict(txns or {}),
        lineage=Lineage(None, None),  # the creating entry is self-contained: no checkpoint
    )
    doc = apply_change(
        work,
        empty,
        number=number,
        parent=None,
        committed_at=now_iso(),
        operation=operation,
        schema=schema,
        add=files,
        new_indices=secondary_indices,
        metadata=user,
        epoch=number,
        incarnation=incarnation,
        parameters=parameters,
    )
    body = entry_of(None, doc)
    data = encode_entry(body)
    try:
        store.put(version_key(uuid, number), data, mode=PutMode.CREATE)
    except AlreadyExists:
        claim.discard()
        raise AlreadyExists(
            f"dataset {uuid!r} was created concurrently", key=version_key(uuid, number)
        ) from None
    doc = finish_commit(store, uuid, doc, body, len(data), number, metadata_format)
    claim.release(committed_keys(doc, body))
    return LoadedState(
        doc=doc, number=number, foreign=False, pointer_format=metadata_format, requests=0
    )


def _first_version_number(store: Store, uuid: str, table: str) -> int:
    """0, or the number after the versions a deleted incarnation of ``uuid`` left behind.

    kartothek's ``delete_dataset`` (and an interrupted delete) leave ``<uuid>/_versions``.
    Version numbers are never reused, so a new incarnation starts after them. Recent
    leftovers whose schema file still exists may be a concurrent create that has not
    published its pointer yet (a create writes the schema file before version 0; every
    delete removes it).
    """
    if not store.exists(version_key(uuid, 0)):
        return 0
    number = 0
    while store.exists(version_key(uuid, number + 1)):
        number += 1
    try:
        found = read_version(store, uuid, number)
    except MetadataCorrupted:
        found = None
    info = version_info(found) if found is not None else None
    alive = store.exists(common_metadata_key(uuid, table))
    if alive and info is not None:
        committed = dt.datetime.fromisoformat(info.committed_at)
        if dt.datetime.now(dt.UTC) - committed < LEFTOVER_GRACE:
            raise AlreadyExists(
                f"dataset {uuid!r} is being created or changed concurrently "
                f"(version {number} is {LEFTOVER_GRACE.total_seconds():.0f}s old at most)",
                key=version_key(uuid, number),
            )
    return number + 1


def put_common_metadata(
    store: Store,
    uuid: str,
    table: str,
    schema: pa.Schema,
    partition_on: Sequence[str],
    *,
    replace_stale: bool = False,
) -> None:
    key = common_metadata_key(uuid, table)
    data = common_metadata_bytes(schema, partition_on)
    try:
        store.put(key, data, mode=PutMode.CREATE)
    except AlreadyExists:
        if replace_stale:
            store.put(key, data)
        elif store.get(key) != data:
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
    # The footer is checked by parquetry's reader before pyarrow parses it (footer_check).
    check_plaintext_footer(footer_from_store(store, first.key, first.size), first.key)
    payload = pq.ParquetFile(store.open(first.key, size=first.size)).schema_arrow
    fields = [pa.field(k, pa.array([v]).type) for k, v in first.partition]
    return pa.schema(fields + list(payload.remove_metadata()))
