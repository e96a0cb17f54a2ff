"""kartothek writes on a stale pointer: find the version kartothek saw, diff, re-apply.

kartothek 5.3.0 updates a dataset by reading the pointer (``<uuid>.by-dataset-metadata.json``),
changing it and writing it back without parquetry's extension. When the pointer showed
version ``p`` while parquetry had committed ``p+1 .. n`` since (the pointer lags under the
``auto`` and ``manual`` policies, or a slow kartothek job read it long ago), adopting that
document wholesale would drop every row parquetry committed after ``p``. Instead:

1. **Base.** The version ``p`` kartothek read is found from the labels: kartothek keeps the
   entries of untouched partitions verbatim and names new partitions with fresh uuids, so
   the foreign document's labels that any retained version knows (``kept``) are all
   partitions of ``p``. Among the retained versions of the current incarnation holding every
   ``kept`` label, ``p`` is the one kartothek deleted the fewest partitions from, then the
   one whose user metadata differs from the foreign document's in the fewest keys, then the
   newest. Ties left after that differ in nothing the diff uses, so any of them gives the
   same result. If no version holds them all (kartothek rewrote everything, or the
   versions belong to another dataset), the newest version is the base: kartothek's
   document replaces its partitions (what ``overwrite`` means).
2. **Diff** against ``p``: labels added (with their files and, from kartothek's index files,
   their index values), labels removed, user metadata keys changed, index columns
   kartothek built (``build_dataset_indices``).
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
import pyarrow.parquet as pq

from parquetry.dataset.metadata import DatasetDocument
from parquetry.dataset.naming import parse_label, parse_partition_value
from parquetry.dataset.schema import normalise_type
from parquetry.dataset.write import FileDescription
from parquetry.errors import DatasetNotFound, MetadataCorrupted
from parquetry.store import Store

__all__ = ["KartothekDiff", "find_base", "kartothek_diff", "reconciled_doc"]

#: Versions examined (newest first) when looking for the one kartothek read.
BASE_SCAN_LIMIT = 256


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


def _metadata_mismatch(a: Mapping[str, Any], b: Mapping[str, Any]) -> int:
    return sum(1 for k in set(a) | set(b) if a.get(k) != b.get(k))


def find_base(
    store: Store,
    uuid: str,
    foreign: DatasetDocument,
    numbers: list[int],
    *,
    hint: int | None = None,
) -> tuple[int, DatasetDocument, frozenset[str], int] | None:
    """(number and document of the version kartothek read, labels the scanned versions
    know, GETs used), or None when the dataset has no parquetry version.

    ``numbers``: the retained version numbers (ascending). ``hint``: the version the pointer
    showed when parquetry last wrote it (format 2's head), tried first. The scan goes from
    the newest version back and stops at a version kartothek deleted nothing from and whose
    metadata it left alone (the usual case: the pointer was current), else after
    ``BASE_SCAN_LIMIT`` versions.
    """
    from parquetry.dataset.versions import load_version

    labels = set(foreign.partitions)
    order = list(reversed(numbers))
    if hint is not None and hint in numbers:
        order.remove(hint)
        order.insert(0, hint)
    docs: list[tuple[int, DatasetDocument]] = []
    seen: set[str] = set()
    requests = 0
    incarnation: str | None = None
    for n in order[:BASE_SCAN_LIMIT]:
        requests += 1
        try:
            doc = load_version(store, uuid, n)
        except (DatasetNotFound, MetadataCorrupted):
            continue
        if doc.version is None:
            continue
        if incarnation is None:
            incarnation = doc.version.incarnation
        elif doc.version.incarnation != incarnation:
            continue  # an earlier dataset of the same uuid
        docs.append((n, doc))
        seen.update(doc.partitions)
        if _score(doc, n, labels, foreign)[:2] == (0, 0) and (n == hint or n == order[0]):
            break
    if not docs:
        return None
    kept = labels & seen
    fits = [(n, d) for n, d in docs if kept <= d.partitions.keys()]
    if not fits:
        newest = max(docs, key=lambda item: item[0])
        return newest[0], newest[1], frozenset(seen), requests
    n, doc = min(fits, key=lambda item: _score(item[1], item[0], labels, foreign))
    return n, doc, frozenset(seen), requests


def _score(
    doc: DatasetDocument, number: int, labels: set[str], foreign: DatasetDocument
) -> tuple[int, int, int]:
    """Partitions kartothek would have deleted, metadata keys it would have changed, age."""
    deleted = len(doc.partitions.keys() - labels)
    return deleted, _metadata_mismatch(doc.metadata, foreign.metadata), -number


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
    metadata = {k: v for k, v in foreign.metadata.items() if base.metadata.get(k, _MISSING) != v}
    built = tuple(sorted(set(foreign.indices) - set(base.indices)))
    return KartothekDiff(base_number, added, removed, metadata, built)


_MISSING = object()


def added_files(
    store: Store, base: DatasetDocument, foreign: DatasetDocument, diff: KartothekDiff
) -> list[FileDescription]:
    """The files kartothek added, described for a commit: rows and size from the footer,
    index values from kartothek's own index files (no data read)."""
    assert base.schema is not None
    schema = base.schema
    table = base.tables[0]
    index_values: dict[str, dict[str, pa.Array]] = {}
    for col in base.indices:
        ref = foreign.indices.get(col)
        if ref is None or col not in schema.names:
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
            rows = pq.ParquetFile(store.open(key, size=size)).metadata.num_rows
        except (pa.ArrowException, OSError, ValueError) as exc:
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
            t = normalise_type(schema.field(col).type)
            values[col] = per_label.get(label, pa.array([], type=t))
        return FileDescription(
            table=table,
            key=key,
            label=label,
            partition=partition,
            rows=rows,
            size=size,
            index_values=values,
        )

    items = sorted(diff.added.items())
    return list(store.map_concurrent(describe, items))


def reconciled_doc(
    base: DatasetDocument, foreign: DatasetDocument, diff: KartothekDiff
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
    return base.evolve(
        partitions=partitions,
        files=base.files.changed(set(diff.removed), {}),
        indices=indices,
        index_footers=footers,
        metadata=meta,
        version=None,
    )
