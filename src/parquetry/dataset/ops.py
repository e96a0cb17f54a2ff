"""Commits as data: pure-ish functions building the next document from a base.

``apply_change`` is what every write commits: remove some partitions, add written files,
keep every secondary index consistent (format 2: index deltas of the added files' pairs
and removed labels, never a rewrite; see :mod:`parquetry.dataset.indexwire`). The caller's
commit loop decides whether the result becomes a version.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from parquetry.dataset.commit import now_iso
from parquetry.dataset.entry import Change, catalog_of, with_catalog
from parquetry.dataset.indexsinks import IndexSinks, checked_values
from parquetry.dataset.indexspill import PairSink, label_pairs
from parquetry.dataset.indexstate import IndexState
from parquetry.dataset.indexwire import (
    PLACEHOLDER,
    all_records,
    state_of_pairs,
    states_form,
    states_of,
)
from parquetry.dataset.indices import IndexData
from parquetry.dataset.metadata import DatasetDocument, FileInfo, VersionInfo
from parquetry.dataset.naming import is_index_piece_key
from parquetry.dataset.piecefiles import encode_record, record_table
from parquetry.dataset.schema import normalise_type
from parquetry.dataset.scope import labels_in_scope, partition_values_of
from parquetry.dataset.write import FileDescription
from parquetry.errors import CommitConflict, InvalidArgument
from parquetry.parquet.files import read_table
from parquetry.store import Store

__all__ = [
    "apply_change",
    "change_maker",
    "fit_concurrent_schema",
    "labels_in_scope",
    "partition_values_of",
]


def _file_index_values(store: Store, fd: FileDescription, column: str) -> pa.Array:
    # A foreign file (commit_files) is not checked when written: a value that is not UTF-8
    # would be committed into the index delta, which every open then rejects.
    return checked_values(fd, column, _index_values(store, fd, column))


def _index_values(store: Store, fd: FileDescription, column: str) -> pa.Array:
    if column in fd.index_values:
        return fd.index_values[column]
    part = dict(fd.partition)
    if column in part:
        return pa.array([part[column]])
    table = read_table(store.open(fd.key, size=fd.size), columns=[column])
    if column not in table.column_names:
        # A file without the column (a nullable one its schema lacks, committed with
        # merge_schema): it reads as null there, and nulls are not indexed.
        return pa.array([], pa.null())
    return pc.unique(table.column(column).combine_chunks().drop_null())


def apply_change(
    store: Store,
    base: DatasetDocument,
    *,
    number: int,
    parent: int | None,
    committed_at: str,
    operation: str,
    schema: pa.Schema,
    add: Sequence[FileDescription] = (),
    remove: set[str] | frozenset[str] = frozenset(),
    new_indices: Sequence[str] = (),
    metadata: Mapping[str, Any] | None = None,
    index_override: Mapping[str, IndexData] | None = None,
    epoch: int | None = None,
    incarnation: str | None = None,
    parameters: Mapping[str, str] | None = None,
    index_sinks: IndexSinks | None = None,
) -> DatasetDocument:
    """The document after removing partitions ``remove`` and adding files ``add``.

    Costs O(change): only the removed and added labels are looked up in the base's
    catalog; the result records its :class:`~parquetry.dataset.entry.Change`, which the
    commit writes as its entry. ``index_sinks``: the index pairs of ``add``, collected as
    the files were written (their descriptions then carry no values: indexsinks.py).
    """
    cat = catalog_of(base)
    table = base.tables[0] if cat.count else (add[0].table if add else "table")
    removing = tuple(lbl for lbl in sorted(remove) if cat.lookup(lbl) is not None)
    rows_removed = sum(base.files[lbl].rows for lbl in removing if lbl in base.files)
    bytes_removed = sum(base.files[lbl].size for lbl in removing if lbl in base.files)
    gone = set(removing)
    added: dict[str, Any] = {}
    for fd in add:
        if fd.label in added or (fd.label not in gone and cat.lookup(fd.label) is not None):
            raise InvalidArgument(f"partition label {fd.label!r} is already in the dataset")
        if fd.table != table:
            raise InvalidArgument(f"file {fd.key} is for table {fd.table!r}, expected {table!r}")
        added[fd.label] = ({fd.table: fd.key}, FileInfo(rows=fd.rows, size=fd.size, stats=fd.stats))
    replace_all = bool(removing) and len(removing) == cat.count and base.version is not None
    new_cat = cat.changed(removing, added, replace_all=replace_all)
    states, deltas, index_set = _index_changes(
        store,
        base,
        schema,
        add,
        removing,
        replace_all,
        new_indices,
        index_override,
        cat.count,
        index_sinks,
    )
    meta = dict(base.metadata)
    meta.update(metadata or {})
    return with_catalog(
        base,
        new_cat,
        change=Change(removing, added, replace_all, deltas, index_set),
        indices=dict.fromkeys(states, PLACEHOLDER),
        index_footers={},
        index_states=states,
        metadata=meta,
        explicit_partitions=True,
        schema=schema,
        version=VersionInfo(
            number=number,
            parent=parent,
            committed_at=committed_at,
            operation=operation,
            rows_added=sum(fd.rows for fd in add),
            rows_removed=rows_removed,
            files_added=len(add),
            files_removed=len(removing),
            bytes_added=sum(fd.size for fd in add),
            bytes_removed=bytes_removed,
            parameters=dict(parameters or {}),
            epoch=epoch if epoch is not None else (base.version.epoch if base.version else 0),
            incarnation=incarnation
            if incarnation is not None
            else (base.version.incarnation if base.version else ""),
        ),
    )


def _index_changes(
    store: Store,
    base: DatasetDocument,
    schema: pa.Schema,
    add: Sequence[FileDescription],
    removing: tuple[str, ...],
    replace_all: bool,
    new_indices: Sequence[str],
    index_override: Mapping[str, IndexData] | None,
    count: int,
    index_sinks: IndexSinks | None = None,
) -> tuple[dict[str, IndexState], dict[str, Any], dict[str, Any] | None]:
    """(new index states, the entry's deltas, its ``set.indices`` or None).

    Never reads or rewrites an index: removed labels join the states' dead labels, added
    files' ``(value, label)`` pairs become an inline delta (or pieces when large, written
    in bounded memory)."""
    columns = sorted(set(base.indices) | set(new_indices))
    override = dict(index_override or {})
    for col in columns:
        if col not in base.indices and count and col not in override:
            raise InvalidArgument(
                f"column {col!r} has no index yet; build it with build_index({col!r})"
            )
    old = states_of(store, base) if base.indices else {}
    states: dict[str, IndexState] = {}
    before: dict[str, IndexState] = {}
    deltas: dict[str, Any] = {}
    moved = False
    for col in columns:
        t = normalise_type(schema.field(col).type)
        if col in override:
            pairs = override[col].pairs()
            states[col] = before[col] = state_of_pairs(
                store, base.uuid, col, t, pairs, files=lambda: all_records(base)
            )
            continue
        state = old[col] if col in old else IndexState.empty(col, t)
        if any(not is_index_piece_key(base.uuid, f.key) for f in state.pieces):
            # An adopted kartothek/format-1 index file: kartothek's GC deletes it as soon as
            # its pointer names another, so a format-2 entry never refers to it (moved once,
            # O(index), recorded by the entry's set.indices).
            state = state.checkpoint(store, base.uuid)
            moved = True
        if replace_all:
            state = state.reset()
        elif removing:
            state = state.without_labels(removing)
        before[col] = state
        # File by file into a sink that spills sorted runs: a rewrite of every file of a
        # large dataset re-adds all its keys, more than memory holds (indexspill.py). A
        # rewrite filled one as it wrote the files (indexsinks.py); it outlives this commit
        # attempt (a retry on a newer base encodes it again).
        given = index_sinks.sink(col, t, add) if index_sinks is not None else None
        with contextlib.ExitStack() as own:
            sink = given
            if sink is None:
                sink = own.enter_context(PairSink(t))
                for fd in add:
                    sink.add(label_pairs(fd.label, _file_index_values(store, fd, col), t))
            if sink.total:
                deltas[col] = delta = state.encode_sink(
                    store, base.uuid, sink, files=lambda: _file_records(base.uuid, add)
                )
                state = state.with_delta(delta, key=f"{base.uuid} index {col!r}")
        states[col] = state
    changed_map = set(columns) != set(base.indices) or bool(override) or moved
    return states, deltas, (states_form(before) if changed_map else None)


def _file_records(uuid: str, add: Sequence[FileDescription]) -> pa.Table:
    """The added files' records, stored with a large delta's index piece (piecefiles.py)."""
    return record_table(
        {
            fd.label: encode_record(uuid, fd.label, {fd.table: fd.key}, fd.rows, fd.size)
            for fd in add
        }
    )


def fit_concurrent_schema(
    base: DatasetDocument, written: pa.Schema, *, merge: bool, what: str
) -> pa.Schema:
    """The schema a commit of files ``written`` in that schema gets on ``base``, whose schema
    another writer changed meanwhile: the merge of both (``merge``), else ``base``'s own.

    Raises:
        CommitConflict: the files do not fit ``base``'s schema (nor, with ``merge``, a merge).
    """
    from parquetry.dataset.evolve import resolve_write_schema
    from parquetry.errors import SchemaMismatch

    assert base.schema is not None
    try:
        out = resolve_write_schema(
            base.uuid, base.schema, written, merge=True, partition_on=base.partition_keys
        )
    except SchemaMismatch as exc:
        raise CommitConflict(f"a concurrent commit changed the schema: {exc}") from None
    if not merge and not out.equals(base.schema):
        raise CommitConflict(
            f"dataset {base.uuid!r}: a concurrent commit changed the schema to one this "
            f"{what}'s files do not fit; nothing is committed"
        )
    return out


def change_maker(
    store: Store,
    schema: pa.Schema,
    files: Sequence[FileDescription],
    *,
    operation: str,
    delete_scope: Sequence[Mapping[str, Any]] | None = None,
    remove_all: bool = False,
    metadata: Mapping[str, Any] | None = None,
    new_indices: Sequence[str] = (),
    index_builder: Callable[[DatasetDocument], dict[str, IndexData]] | None = None,
    parameters: Mapping[str, str] | None = None,
    restore_to: DatasetDocument | None = None,
    written_schema: pa.Schema | None = None,
    merge_schema: bool = False,
    replace_layout: tuple[str, ...] | None = None,
) -> Callable[[DatasetDocument | None, int], DatasetDocument]:
    """The ``make`` function of one commit: re-applied to each newer base after a lost race.

    Adding files never conflicts. Removing partitions (``delete_scope``, overwrite)
    conflicts when a concurrent commit changed which partitions would be removed.

    ``written_schema``: the schema the files were written with, when it differs from
    ``schema`` (the base's at the start): a ``merge_schema`` evolution, or with
    ``replace_layout`` (the new partition keys) an ``overwrite_schema`` replacement.
    """
    first_removed: list[set[str]] = []

    def schema_of(base: DatasetDocument) -> pa.Schema:
        assert base.schema is not None
        if replace_layout is not None and written_schema is not None:
            return written_schema
        written = written_schema if written_schema is not None else schema
        if base.schema.equals(schema):
            return written
        return fit_concurrent_schema(base, written, merge=merge_schema, what="write")

    def make(base: DatasetDocument | None, number: int) -> DatasetDocument:
        assert base is not None
        target = schema_of(base)
        remove: set[str] = set()
        if delete_scope is not None:
            remove = labels_in_scope(store, base, schema, delete_scope)
        elif remove_all:
            remove = set(base.partitions)
        if first_removed and remove != first_removed[0]:
            gone = sorted(first_removed[0] ^ remove)
            raise CommitConflict(
                f"dataset {base.uuid!r}: a concurrent commit changed the partitions this "
                f"{operation} removes ({len(gone)} differ, e.g. {gone[:3]})"
            )
        first_removed.append(remove)
        if replace_layout is not None:
            return _replace_all(base, number, target, replace_layout)
        return apply_change(
            store,
            base,
            number=number,
            parent=number - 1,
            committed_at=now_iso(),
            operation=operation,
            schema=target,
            add=files,
            remove=remove,
            new_indices=new_indices,
            metadata=metadata,
            index_override=index_builder(base) if index_builder else None,
            parameters=parameters,
        )

    def _replace_all(
        base: DatasetDocument, number: int, target: pa.Schema, keys: tuple[str, ...]
    ) -> DatasetDocument:
        # A new schema (and layout): nothing of the base survives but its metadata and
        # history, so the change applies to an emptied base; the metrics count the removal.
        from parquetry.dataset.metadata import FileInfos

        emptied = base.evolve(
            partitions={},
            files=FileInfos(),
            indices={},
            index_footers={},
            index_states={},
            partition_keys=keys,
        )
        doc = apply_change(
            store,
            emptied,
            number=number,
            parent=number - 1,
            committed_at=now_iso(),
            operation=operation,
            schema=target,
            add=files,
            new_indices=new_indices,
            metadata=metadata,
            parameters=parameters,
        )
        assert doc.version is not None
        removed = [lbl for lbl in base.partitions if lbl in base.files]
        return doc.evolve(
            change=Change(
                (),
                doc.change.add,
                True,
                doc.change.index,
                doc.change.index_set if doc.change.index_set is not None else {},
            ),
            version=replace(
                doc.version,
                rows_removed=sum(base.files[lbl].rows for lbl in removed),
                files_removed=len(base.partitions),
            ),
        )

    return make
