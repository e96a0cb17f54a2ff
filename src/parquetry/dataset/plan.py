"""Query planning: which files to read for a DNF predicate, and why.

Pure steps over values already loaded (the document, typed partition values, loaded
indices); the only I/O is the caller loading one index file per indexed predicate column.
Within a conjunction the candidates are intersected (index first, as it is usually the most
selective, then partition values, then per-file statistics); conjunctions are united.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from parquetry.dataset.indices import IndexLookup
from parquetry.dataset.metadata import DatasetDocument
from parquetry.dataset.piecefiles import decode_record
from parquetry.dataset.predicates import DNF, Literal, eval_scalar, eval_stats
from parquetry.dataset.stats import decode_stats

__all__ = ["PlannedFile", "PrunedPartition", "ScanPlan", "make_plan"]

BY_PARTITION = "partition key"
BY_INDEX = "secondary index"
BY_STATS = "statistics"


@dataclass(frozen=True, slots=True, kw_only=True)
class PlannedFile:
    """One file to read, with its typed partition values."""

    label: str
    key: str
    table: str
    partition: tuple[tuple[str, Any], ...]
    rows: int | None
    size: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class PrunedPartition:
    """Partitions the plan skips for one reason (the first that excluded them)."""

    reason: str  # "partition key" | "secondary index" | "statistics"
    column: str
    labels: AbstractSet[str]


class _Rest(AbstractSet[str]):
    """The labels of ``doc`` except ``exclude``, materialised only when iterated: a plan
    whose every conjunction uses an index never lists the whole (lazy) catalog."""

    def __init__(
        self, doc: DatasetDocument, exclude: set[str], known: AbstractSet[str] = frozenset()
    ):
        # known: labels already known to be in the state (no catalog lookup, no segment)
        self.doc, self.exclude, self.known = doc, exclude, known

    def __contains__(self, label: object) -> bool:
        return label not in self.exclude and label in self.doc.partitions

    def __iter__(self) -> Iterator[str]:
        return (x for x in self.doc.partitions if x not in self.exclude)

    def __len__(self) -> int:
        present = sum(1 for x in self.exclude if x in self.known or x in self.doc.partitions)
        return len(self.doc.partitions) - present


@dataclass(frozen=True, slots=True, kw_only=True)
class ScanPlan:
    """Files to read for a query, what was pruned and the store requests planning cost.

    ``requests`` counts every store request of opening the dataset and planning (pointer,
    version probe, schema, index files); ``request_keys`` lists them.
    """

    version: int | None
    predicates: DNF | None
    files: tuple[PlannedFile, ...]
    pruned: tuple[PrunedPartition, ...]
    requests: int
    request_keys: tuple[str, ...] = ()

    @property
    def rows(self) -> int | None:
        """Upper bound of the rows to read, if every file's row count is known."""
        counts = [f.rows for f in self.files]
        return None if any(c is None for c in counts) else sum(c for c in counts if c)

    def pruned_labels(self) -> dict[str, str]:
        """label -> reason, for every skipped partition."""
        return {label: p.reason for p in self.pruned for label in p.labels}

    def summary(self) -> dict[str, Any]:
        reasons: dict[str, int] = {}
        for p in self.pruned:
            reasons[p.reason] = reasons.get(p.reason, 0) + len(p.labels)
        return {"files": len(self.files), "pruned": reasons, "requests": self.requests}


def make_plan(
    doc: DatasetDocument,
    schema: pa.Schema,
    dnf: DNF | None,
    partition_values: Callable[[str], tuple[tuple[str, Any], ...]],
    indices: Mapping[str, IndexLookup],
    *,
    version: int | None,
    requests: int,
    request_keys: tuple[str, ...],
) -> ScanPlan:
    """Choose the files of ``doc`` that may hold rows matching ``dnf``.

    When every conjunction has an indexed literal, only the labels the indices return are
    looked up (a lazy catalog loads just the segments holding them)."""
    lazy = dnf is not None and all(
        any(lit.column in indices and lit.op != "is null" for lit in conj)
        or _label_prefix(doc, conj) is not None
        for conj in dnf
    )
    labels: list[str] | None = None if lazy else list(doc.partitions)
    table = doc.tables[0]
    known: dict[str, tuple[str, int, int]] = _KnownFiles(doc, indices, table) if lazy else {}
    first_reasons: list[tuple[str, str, Any]] = []
    if dnf is None:
        keep = set(labels or ())
    else:
        keep = set()
        for i, conj in enumerate(dnf):
            reasons: list[tuple[str, str, Any]] = []
            keep |= _conjunction(
                conj, labels, doc, schema, partition_values, indices, reasons, known
            )
            if i == 0:
                first_reasons = reasons
    files = []
    for label in labels if labels is not None else sorted(keep):
        if label not in keep:
            continue
        rows: int | None
        size: int | None
        if label in known:
            key, rows, size = known[label]
        else:
            info = doc.files.get(label, None)
            key = doc.partitions[label][table]
            rows, size = (info.rows, info.size) if info else (None, None)
        files.append(
            PlannedFile(
                label=label,
                key=key,
                table=table,
                partition=partition_values(label),
                rows=rows,
                size=size,
            )
        )
    pruned = []
    for reason, column, removed in first_reasons:
        gone: AbstractSet[str] = (
            _Rest(doc, removed.exclude | keep, known.keys())
            if isinstance(removed, _Rest)
            else frozenset(removed - keep)
        )
        if gone:
            pruned.append(PrunedPartition(reason=reason, column=column, labels=gone))
    return ScanPlan(
        version=version,
        predicates=dnf,
        files=tuple(files),
        pruned=tuple(pruned),
        requests=requests,
        request_keys=request_keys,
    )


class _KnownFiles(dict[str, tuple[str, int, int]]):
    """label -> (key, rows, size) of the labels whose index pieces carry file records
    (piecefiles.py): planning them needs no segment. :meth:`refresh` decodes what the
    index lookups collected; :func:`_conjunction` calls it after each lookup."""

    def __init__(self, doc: DatasetDocument, indices: Mapping[str, IndexLookup], table: str):
        super().__init__()
        self.doc, self.indices, self.table = doc, indices, table

    def refresh(self) -> None:
        for ix in self.indices.values():
            for label, (text, piece) in ix.files.items():
                if label in self:
                    continue
                rec = decode_record(self.doc.uuid, label, text, self.doc.tables, key=piece)
                if self.table in rec.keys:
                    self[label] = (rec.keys[self.table], rec.rows, rec.size)


def _label_prefix(doc: DatasetDocument, conj: tuple[Literal, ...]) -> str | None:
    """``k=v/`` when ``conj`` fixes the leading partition key ``k`` to an integer or string
    ``v`` (spelled one way only in labels): its labels are one range of the sorted catalog."""
    from parquetry.dataset.naming import quote_component

    if not doc.partition_keys or not hasattr(doc.partitions, "with_prefix"):
        return None
    key = doc.partition_keys[0]
    for lit in conj:
        if lit.column != key or lit.op != "==" or lit.value is None:
            continue
        t = lit.type
        if (pa.types.is_integer(t) and isinstance(lit.value, int)) or (
            pa.types.is_string(t) and isinstance(lit.value, str) and lit.value
        ):
            return f"{quote_component(key)}={quote_component(str(lit.value))}/"
    return None


def _with_prefix(doc: DatasetDocument, prefix: str) -> list[str]:
    return list(doc.partitions.with_prefix(prefix))  # type: ignore[attr-defined]


def _conjunction(
    conj: tuple[Literal, ...],
    labels: list[str] | None,
    doc: DatasetDocument,
    schema: pa.Schema,
    partition_values: Callable[[str], tuple[tuple[str, Any], ...]],
    indices: Mapping[str, IndexLookup],
    reasons: list[tuple[str, str, Any]],
    known: Mapping[str, tuple[str, int, int]],
) -> set[str]:
    """Labels satisfying one conjunction; ``reasons`` gets (reason, column, removed) steps.

    ``known``: labels an index piece gave a file record for (lazy plans): they are in the
    state (a piece's live labels are) and their indexed literals need no statistics."""
    keys = set(doc.partition_keys)
    current: set[str] | None = set(labels) if labels is not None else None
    for lit in conj:
        if lit.column in indices and lit.op != "is null":
            hits = indices[lit.column].lookup(lit)
            if isinstance(known, _KnownFiles):
                known.refresh()
            if current is None:  # lazy: the index's labels that are in the state
                current = {x for x in hits if x in known or x in doc.partitions}
                reasons.append((BY_INDEX, lit.column, _Rest(doc, set(current))))
                continue
            reasons.append((BY_INDEX, lit.column, current - hits))
            current &= hits
    if current is None:  # lazy without an index: the labels under the leading key's value
        prefix = _label_prefix(doc, conj)
        assert prefix is not None
        current = set(_with_prefix(doc, prefix))
        reasons.append((BY_PARTITION, doc.partition_keys[0], _Rest(doc, set(current))))
    for lit in conj:
        if lit.column in keys:
            kept = {x for x in current if eval_scalar(lit, dict(partition_values(x))[lit.column])}
            reasons.append((BY_PARTITION, lit.column, current - kept))
            current = kept
    for lit in conj:
        if lit.column in keys:
            continue
        t = schema.field(lit.column).type
        kept = set()
        by_index = lit.column in indices and lit.op != "is null"
        for label in current:
            if by_index and label in known:
                kept.add(label)  # the index found the value in this file
                continue
            info = doc.files.get(label, None)
            st = decode_stats(info.stats, lit.column, t) if info else None
            if info is None or st is None or eval_stats(lit, st[0], st[1], st[2], info.rows):
                kept.add(label)
        reasons.append((BY_STATS, lit.column, current - kept))
        current = kept
    return current
