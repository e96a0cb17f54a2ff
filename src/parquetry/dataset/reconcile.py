"""kartothek writes on a stale pointer: find the version kartothek saw, diff, re-apply.

kartothek 5.3.0 updates a dataset by reading the pointer (``<uuid>.by-dataset-metadata.json``),
changing it and writing it back without parquetry's extension. When the pointer showed
version ``p`` while parquetry had committed ``p+1 .. n`` since (the pointer lags under the
``auto`` and ``manual`` policies, or a slow kartothek job read it long ago), adopting that
document wholesale would drop every row parquetry committed after ``p``. Instead:

1. **Base.** Every pointer parquetry writes carries, in its user metadata, the number of
   the version it shows (``metadata.POINTER_MARKER``); kartothek keeps user metadata
   verbatim, so its document names the version ``p`` it read exactly. Without the marker
   (a pointer written before it existed, or metadata kartothek's user replaced), ``p`` is
   found from the labels: kartothek keeps the entries of untouched partitions verbatim and
   names new partitions with fresh uuids. Starting from the newest version the pointer can
   have shown and going back: a version that added a partition the foreign document holds
   is ``p``; a version that added nothing and removed nothing the foreign document still
   holds is taken as ``p``; a version whose additions are all missing from the foreign
   document came after ``p``, so the walk goes on (ambiguous only when kartothek deleted
   *every* partition of the version it read: that deletion is then missed, nothing is
   lost). A walk reaching the creation stops there: kartothek replaced every partition it
   saw, and the partitions parquetry committed later stay. A document with neither the
   marker nor the newest version's ``creation_time`` is a dataset kartothek created again
   after deleting it (``kartothek_adopt``): there is no base. This step lives in
   :mod:`parquetry.dataset.kartothek_base` (re-exported here).
2. **Diff** against ``p``: labels added (with their files and, from kartothek's index files,
   their index values), labels removed, user metadata keys changed, index columns
   kartothek built (``build_dataset_indices``), and the schema of kartothek's
   ``_common_metadata`` merged by ``merge_schema``'s rules (``kartothek_adopt.reconciled_schema``).
   Files kartothek added get statistics from their footers.
3. **Re-apply** on the newest version ``n`` as one commit with operation ``"kartothek"``:
   removed labels that a later parquetry commit already removed are skipped (no conflict),
   parquetry's partitions added after ``p`` stay even when kartothek's ``delete_scope``
   would have matched them (kartothek never saw them). Readers get the same state in
   memory (:func:`reconciled_read_state`) without writing anything.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from parquetry.dataset.kartothek_adopt import footer_stats, reconciled_schema
from parquetry.dataset.kartothek_base import BASE_SCAN_LIMIT, find_base
from parquetry.dataset.metadata import POINTER_MARKER, DatasetDocument
from parquetry.dataset.naming import parse_label, parse_partition_value
from parquetry.dataset.schema import normalise_type
from parquetry.dataset.write import FileDescription
from parquetry.errors import InvalidFormat, MetadataCorrupted, out_of_memory
from parquetry.parquet.footer_check import safe_metadata
from parquetry.store import Store

__all__ = [
    "BASE_SCAN_LIMIT",
    "KartothekDiff",
    "added_files",
    "find_base",
    "kartothek_diff",
    "kartothek_indices",
    "reconciled_doc",
]


@dataclass(frozen=True, slots=True)
class KartothekDiff:
    """What kartothek changed relative to the parquetry version ``base`` it read."""

    base: int
    added: Mapping[str, str]  # label -> data key (the dataset's table)
    removed: frozenset[str]
    metadata: Mapping[str, Any]  # user metadata keys kartothek set to a new value
    built: tuple[str, ...]  # index columns kartothek built that ``base`` had not

    @property
    def empty(self) -> bool:
        return not (self.added or self.removed or self.metadata or self.built)


def kartothek_diff(
    base_number: int, base: DatasetDocument, foreign: DatasetDocument, known: frozenset[str]
) -> KartothekDiff:
    """kartothek's change relative to ``base``. ``known``: labels parquetry versions hold;
    a label of the foreign document among them that ``base`` lacks is one a later
    parquetry commit removed, not one kartothek added."""
    table = base.tables[0]
    added = {
        label: files.get(table) or next(iter(files.values()))
        for label, files in foreign.partitions.items()
        if label not in base.partitions and label not in known
    }
    removed = frozenset(base.partitions.keys() - foreign.partitions.keys())
    metadata = {
        k: v
        for k, v in foreign.metadata.items()
        if k != POINTER_MARKER and base.metadata.get(k, _MISSING) != v
    }
    built = tuple(sorted(set(foreign.indices) - set(base.indices)))
    return KartothekDiff(base_number, added, removed, metadata, built)


_MISSING = object()


def added_files(
    store: Store,
    newest: DatasetDocument,
    read: DatasetDocument,
    foreign: DatasetDocument,
    diff: KartothekDiff,
) -> list[FileDescription]:
    """The files kartothek added, described for a commit on ``newest``: rows and size from
    the footer, index values from the index files kartothek rewrote (no data read). An index
    kartothek left as it was in ``read`` (the version it read) is not trusted for the new
    files: their values are read from the files by the commit."""
    assert newest.schema is not None
    schema = newest.schema
    table = newest.tables[0]
    index_values: dict[str, dict[str, pa.Array]] = {}
    for col in newest.indices:
        ref = foreign.indices.get(col)
        if ref is None or ref == read.indices.get(col) or col not in schema.names:
            continue
        from parquetry.dataset.indices import load_index

        t = normalise_type(schema.field(col).type)
        pairs = load_index(store, col, ref, t).pairs()
        mask = pc.is_in(pairs.column("label"), value_set=pa.array(list(diff.added), pa.string()))
        chosen = pairs.filter(mask)
        per: dict[str, list[Any]] = {}
        for value, label in zip(
            chosen.column("value").to_pylist(), chosen.column("label").to_pylist(), strict=True
        ):
            per.setdefault(label, []).append(value)
        index_values[col] = {lbl: pa.array(v, type=t) for lbl, v in per.items()}

    def describe(item: tuple[str, str]) -> FileDescription:
        label, key = item
        size = store.head(key).size
        try:
            # The footer (one ranged GET of the tail) gives the rows and the statistics
            # planning prunes by, as for parquetry's own writes; checked by parquetry's
            # reader first (safe_metadata): pyarrow aborts on some footers' statistics.
            _, footer = safe_metadata(store, key, size)
            rows = footer.num_rows
            stats = footer_stats(footer, schema)
        except (InvalidFormat, pa.ArrowException, OSError, ValueError) as exc:
            raise MetadataCorrupted(
                f"{key}: a data file kartothek added is not readable Parquet: {exc}", key=key
            ) from None
        partition = tuple(
            (k, parse_partition_value(raw, schema.field(k).type))
            for k, raw in parse_label(label)
            if k in schema.names
        )
        values = {}
        for col, per_label in index_values.items():
            # A label kartothek's index file does not name (the file was left alone): the
            # commit reads the values from the file itself.
            if label in per_label:
                values[col] = per_label[label]
        return FileDescription(
            table=table,
            key=key,
            label=label,
            partition=partition,
            rows=rows,
            size=size,
            stats=stats,
            index_values=values,
        )

    items = sorted(diff.added.items())
    return list(store.map_concurrent(describe, items))


def _file_pairs(store: Store, key: str, label: str, column: str, t: pa.DataType) -> pa.Table:
    """The ``(value, label)`` pairs of one data file's column (its distinct non-null values)."""
    from parquetry.parquet.files import read_table

    try:
        table = read_table(store.open(key), columns=[column])
    except MemoryError as exc:
        raise out_of_memory(exc, f"reading {key}", key=key) from None
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise MetadataCorrupted(
            f"{key}: a data file kartothek added is not readable Parquet: {exc}", key=key
        ) from None
    values = pc.unique(table.column(column).combine_chunks().drop_null())
    if values.type != t:
        values = values.cast(t)
    return pa.table({"value": values, "label": pa.array([label] * len(values), pa.string())})


def _reconciled_states(
    store: Store, base: DatasetDocument, foreign: DatasetDocument, diff: KartothekDiff
) -> dict[str, Any]:
    """Format 2: ``base``'s index states with kartothek's change (removed labels out, the
    added labels' pairs from kartothek's index files in). An index whose file kartothek
    dropped cannot say which values the added files hold, so it is left out (planning
    then reads those columns from the files)."""
    from parquetry.dataset.indexstate import IndexState
    from parquetry.dataset.indexwire import states_of
    from parquetry.dataset.indices import load_index

    added = pa.array(sorted(diff.added), pa.string())
    out: dict[str, Any] = {}
    for col, state in states_of(store, base).items():
        new_state = state.without_labels(diff.removed)
        if len(added):
            ref = foreign.indices.get(col)
            chosen = None
            if isinstance(ref, str):
                pairs = load_index(store, col, ref, state.type).pairs()
                chosen = pairs.filter(pc.is_in(pairs.column("label"), value_set=added))
                new_state = new_state.with_pairs(chosen)
            # Labels kartothek's index file does not name (it was left alone, or dropped):
            # their values come from the files themselves.
            named = set(chosen.column("label").to_pylist()) if chosen is not None else set()
            missing = set(diff.added) - named
            if col in base.partition_keys:
                missing = set()  # partition values live in labels, not in an index file
            for label in sorted(missing):
                new_state = new_state.with_pairs(
                    _file_pairs(store, diff.added[label], label, col, state.type)
                )
        out[col] = new_state
    current = base.version is not None and diff.base == base.version.number
    if current and base.schema is not None:
        for col in diff.built:
            ref = foreign.indices.get(col)
            if col in base.schema.names and isinstance(ref, str):
                t = normalise_type(base.schema.field(col).type)
                out[col] = IndexState.legacy(store, col, ref, None, t)
    return out


def reconciled_doc(
    base: DatasetDocument,
    foreign: DatasetDocument,
    diff: KartothekDiff,
    store: Store | None = None,
) -> DatasetDocument:
    """The newest version ``base`` with kartothek's change applied, for reading only.

    Index columns kartothek changed are dropped unless kartothek read the newest version
    itself (then its index files are complete): planning reads footers for those columns
    until the next commit reconciles for good.
    """
    partitions = {k: v for k, v in base.partitions.items() if k not in diff.removed}
    table = base.tables[0]
    for label, key in diff.added.items():
        partitions[label] = {table: key}
    current = base.version is not None and diff.base == base.version.number
    indices: dict[str, Any] = {}
    footers = {}
    for col, ref in base.indices.items():
        theirs = foreign.indices.get(col)
        if theirs is None or theirs == ref:
            indices[col] = ref
            if col in base.index_footers:
                footers[col] = base.index_footers[col]
        elif current:
            indices[col] = theirs
    if current:
        for col in diff.built:
            indices[col] = foreign.indices[col]
    meta = dict(base.metadata)
    meta.update(diff.metadata)
    states: dict[str, Any] = {}
    if store is not None and base.index_states:
        from parquetry.dataset.indexwire import PLACEHOLDER

        states = _reconciled_states(store, base, foreign, diff)
        indices = dict.fromkeys(states, PLACEHOLDER)
        footers = {}
    return base.evolve(
        schema=reconciled_schema(base.schema, foreign) if base.schema is not None else None,
        partitions=partitions,
        files=base.files.changed(set(diff.removed), {}),
        indices=indices,
        index_footers=footers,
        index_states=states,
        metadata=meta,
        version=None,
    )


def kartothek_indices(
    store: Store, base: DatasetDocument, foreign: DatasetDocument
) -> dict[str, Any]:
    """The index columns kartothek rewrote, loaded from its files (``IndexData``), for a
    reconcile on the very version kartothek read."""
    from parquetry.dataset.indices import load_index

    assert base.schema is not None
    out: dict[str, Any] = {}
    for col, ref in foreign.indices.items():
        if ref == base.indices.get(col) or col not in base.schema.names:
            continue
        t = normalise_type(base.schema.field(col).type)
        out[col] = load_index(store, col, ref, t)
    return out
