"""Writing and committing: the path every write of a :class:`Dataset` takes.

Data files are written first (:func:`~parquetry.dataset.write.write_files`); a commit then
records them in a new version, conflict-safe (:mod:`parquetry.dataset.commit`), or creates
version 0. These functions return the committed :class:`LoadedState`; the ``Dataset``
facade wraps it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from parquetry.dataset.commit import MAX_RETRIES, commit
from parquetry.dataset.create import Batches, create_from_files, schema_from_files
from parquetry.dataset.docschema import check_user_metadata
from parquetry.dataset.evolve import resolve_write_schema
from parquetry.dataset.intents import abandon_files, claim_for_commit
from parquetry.dataset.metadata import DatasetDocument
from parquetry.dataset.naming import DEFAULT_TABLE, METADATA_FORMATS, metadata_key, validate_uuid
from parquetry.dataset.ops import change_maker
from parquetry.dataset.txns import Txn, TxnApplied, applied, check_txn
from parquetry.dataset.versions import LoadedState, load_latest
from parquetry.dataset.write import FileDescription, iter_input, storage_schema, write_files
from parquetry.errors import AlreadyExists, InvalidArgument
from parquetry.parquet import WriteOptions
from parquetry.store import Store

__all__ = [
    "commit_change",
    "commit_described_files",
    "create_dataset",
    "dataset_exists",
    "follow_schema",
    "string_parameters",
]

COMMIT_MODES = ("create", "append", "overwrite")


def string_parameters(parameters: Mapping[str, Any] | None) -> dict[str, str]:
    """A commit's ``parameters`` as recorded: string keys and values (non-strings as JSON,
    like Delta's ``operationParameters``). None values are left out."""
    import json

    out: dict[str, str] = {}
    for key, value in (parameters or {}).items():
        if not isinstance(key, str):
            raise InvalidArgument(f"parameter names must be strings, got {key!r}")
        if value is None:
            continue
        if isinstance(value, str):
            out[key] = value
            continue
        try:
            out[key] = json.dumps(value, sort_keys=True, default=str)
        except (TypeError, ValueError, RecursionError) as exc:
            # RecursionError: a value nested too deeply (or referring to itself) for JSON.
            raise InvalidArgument(f"parameter {key!r} cannot be recorded: {exc}") from None
    return out


def dataset_exists(store: Store, uuid: str) -> bool:
    """Whether a pointer (metadata file) of ``uuid`` exists in either format."""
    validate_uuid(uuid)
    return any(store.exists(metadata_key(uuid, fmt)) for fmt in METADATA_FORMATS)


def create_dataset(
    store: Store,
    uuid: str,
    data: Any,
    *,
    partition_on: Sequence[str],
    secondary_indices: Sequence[str],
    metadata: Mapping[str, Any] | None,
    metadata_format: str,
    write_options: WriteOptions | None,
    table: str,
    settings: Mapping[str, Any] | None = None,
) -> LoadedState:
    """The body of :meth:`Dataset.create` (see there): write ``data``, then version 0."""
    validate_uuid(uuid)
    check_user_metadata(metadata)
    metadata_key(uuid, metadata_format)
    if dataset_exists(store, uuid):
        raise AlreadyExists(
            f"dataset {uuid!r} already exists in {store.url}", key=metadata_key(uuid)
        )
    in_schema, batches = iter_input(data)
    schema = storage_schema(in_schema)
    # The same duplicate-column check as every later write (nothing else differs here).
    resolve_write_schema(uuid, schema, schema)
    files = write_files(
        store,
        uuid,
        Batches(in_schema, batches),
        partition_on=partition_on,
        secondary_indices=secondary_indices,
        write_options=write_options,
        schema=schema,
        table=table,
    )
    return create_from_files(
        store,
        uuid,
        files,
        schema=schema,
        partition_on=partition_on,
        secondary_indices=secondary_indices,
        metadata=metadata,
        metadata_format=metadata_format,
        table=table,
        encryption=write_options.encryption.to_json()
        if write_options is not None and write_options.encryption is not None
        else None,
        settings=settings,
    )


def commit_change(
    store: Store,
    base: LoadedState,
    files: Sequence[FileDescription],
    *,
    operation: str,
    delete_scope: Sequence[Mapping[str, Any]] | None = None,
    remove_all: bool = False,
    metadata: Mapping[str, Any] | None = None,
    new_indices: Sequence[str] = (),
    index_builder: Any = None,
    max_retries: int | None = MAX_RETRIES,
    verify_files: bool = True,
    parameters: Mapping[str, Any] | None = None,
    written_schema: pa.Schema | None = None,
    merge_schema: bool = False,
    replace_layout: tuple[str, ...] | None = None,
    txn: Txn | None = None,
) -> LoadedState:
    """Commit ``files`` (and removals) as the version after ``base``.

    ``txn`` (app id, version): when the newest state already holds it, commit nothing,
    delete ``files`` and return that state (see :mod:`parquetry.dataset.txns`).

    ``verify_files=False``: the caller has just written ``files`` itself; skip the HEADs.
    ``written_schema``/``merge_schema``/``replace_layout``: a schema evolution or
    replacement (see :func:`~parquetry.dataset.ops.change_maker`); ``_common_metadata``
    follows the committed schema.
    """
    check_user_metadata(metadata)
    params = string_parameters(parameters)  # invalid ones fail before any write
    doc = base.doc
    assert doc.schema is not None
    txn = check_txn(txn)
    if applied(doc, txn):
        abandon_files(store, doc.uuid, files)
        return base
    described = [(f.key, f.size, f.intent) for f in files]
    claim, work = claim_for_commit(store, doc.uuid, described, verify=verify_files)
    make = change_maker(
        work,
        doc.schema,
        files,
        operation=operation,
        delete_scope=delete_scope,
        remove_all=remove_all,
        metadata=metadata,
        new_indices=new_indices,
        index_builder=index_builder,
        parameters=params,
        written_schema=written_schema,
        merge_schema=merge_schema,
        replace_layout=replace_layout,
    )
    stale = None
    if base.foreign:
        # kartothek may have left a pointer of the other format beside the one we read.
        stale = "msgpack.zstd" if base.pointer_format == "json" else "json"
    fmt = base.pointer_format or doc.metadata_format
    try:
        committed = commit(
            store,
            doc.uuid,
            doc,
            base.number,
            make,
            max_retries=max_retries,
            pointer_format=fmt,
            stale_format=stale,
            claim=claim,
            txn=txn,
        )
    except TxnApplied as done:
        # A racing replay of the same transaction committed first: ours is a no-op.
        abandon_files(store, doc.uuid, files)
        return LoadedState.committed(done.doc, fmt)
    if committed.schema is not None and (
        not committed.schema.equals(doc.schema) or committed.partition_keys != doc.partition_keys
    ):
        follow_schema(store, committed)
    return LoadedState.committed(committed, fmt)


def follow_schema(store: Store, committed: DatasetDocument) -> None:
    """Rewrite ``_common_metadata`` (kartothek's schema) for the newest committed version.

    Written after the commit point, as the pointer is: a writer that evolved the schema
    concurrently may have put its own meanwhile, so this repeats until the newest version's
    schema is the one written. ``parquetry validate`` reports a stale one; ``repair`` is
    not needed for reads (parquetry reads the schema of the version document).
    """
    from parquetry.dataset.create import put_common_metadata

    doc = committed
    for _ in range(8):
        assert doc.schema is not None
        assert doc.version is not None
        put_common_metadata(
            store, doc.uuid, doc.tables[0], doc.schema, doc.partition_keys, replace_stale=True
        )
        newest = load_latest(store, doc.uuid)
        if newest.number == doc.version.number or newest.doc.schema is None:
            return
        if newest.doc.schema.equals(doc.schema) and newest.doc.partition_keys == doc.partition_keys:
            return
        doc = newest.doc


def _check_stats_columns(
    uuid: str, files: Sequence[FileDescription], schema: pa.Schema | None
) -> None:
    """Refuse statistics of columns the dataset's schema does not have: committed, they made
    every later open of the dataset fail (its document is checked when read)."""
    if schema is None:
        return
    names = set(schema.names)
    for f in files:
        unknown = sorted(set(f.stats) - names)
        if unknown:
            raise InvalidArgument(
                f"file {f.key} of dataset {uuid!r} has statistics of columns not in the "
                f"schema: {unknown[:3]} (a file may hold more columns, not their statistics)",
                key=f.key,
            )


def commit_described_files(
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
    txn: Txn | None = None,
) -> LoadedState:
    """The body of :meth:`Dataset.commit_files` (see there)."""
    if mode not in COMMIT_MODES:
        raise InvalidArgument(f"mode must be create, append or overwrite, got {mode!r}")
    if overwrite_schema and mode != "overwrite":
        raise InvalidArgument("overwrite_schema (overwriteSchema) needs mode overwrite")
    validate_uuid(uuid)
    check_user_metadata(metadata)
    txn = check_txn(txn)
    layouts = {tuple(k for k, _ in f.partition) for f in files}
    if len(layouts) > 1:
        raise InvalidArgument(f"files of {uuid!r} mix partition layouts {sorted(layouts)}")
    if not partition_on and layouts:
        partition_on = layouts.pop()
    if mode == "create" or not dataset_exists(store, uuid):
        if schema is None:
            schema = schema_from_files(store, files, partition_on)
        _check_stats_columns(uuid, files, schema)
        return create_from_files(
            store,
            uuid,
            files,
            schema=schema,
            partition_on=partition_on,
            secondary_indices=secondary_indices,
            metadata=metadata,
            metadata_format=metadata_format,
            table=files[0].table if files else DEFAULT_TABLE,
            operation=operation,
            parameters=string_parameters(parameters),
            txns=dict([txn]) if txn is not None else None,
        )
    base = load_latest(store, uuid)
    if overwrite_schema:
        if schema is None:
            schema = schema_from_files(store, files, partition_on)
        _check_stats_columns(uuid, files, schema)
        return commit_change(
            store,
            base,
            files,
            remove_all=True,
            operation=operation,
            metadata=metadata,
            new_indices=secondary_indices,
            max_retries=max_retries,
            written_schema=storage_schema(schema),
            replace_layout=tuple(partition_on),
            parameters=parameters,
            txn=txn,
        )
    keys = base.doc.partition_keys
    written = None
    if schema is not None:
        assert base.doc.schema is not None
        target = resolve_write_schema(
            uuid, base.doc.schema, schema, merge=merge_schema, partition_on=keys
        )
        written = None if target.equals(base.doc.schema) else target
    _check_stats_columns(uuid, files, written if written is not None else base.doc.schema)
    if partition_on and tuple(partition_on) != keys:
        raise InvalidArgument(
            f"dataset {uuid!r} is partitioned on {keys}, not {tuple(partition_on)}"
        )
    for f in files:
        file_keys = tuple(k for k, _ in f.partition)
        if file_keys != keys:
            raise InvalidArgument(
                f"file {f.key} is partitioned on {file_keys}, but dataset {uuid!r} is "
                f"partitioned on {keys}",
                key=f.key,
            )
    return commit_change(
        store,
        base,
        files,
        remove_all=mode == "overwrite",
        operation=operation,
        metadata=metadata,
        new_indices=secondary_indices,
        max_retries=max_retries,
        parameters=parameters,
        written_schema=written,
        merge_schema=merge_schema,
        txn=txn,
    )
