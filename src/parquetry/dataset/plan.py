"""Query planning: which files to read for a DNF predicate, and why.

Pure steps over values already loaded (the document, typed partition values, loaded
indices); the only I/O is the caller loading one index file per indexed predicate column.
Within a conjunction the candidates are intersected (index first, as it is usually the most
selective, then partition values, then per-file statistics); conjunctions are united.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from parquetry.dataset.indices import IndexLookup
from parquetry.dataset.metadata import DatasetDocument
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
    labels: frozenset[str]


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
    """Choose the files of ``doc`` that may hold rows matching ``dnf``."""
    labels = list(doc.partitions)
    table = doc.tables[0]
    first_reasons: list[tuple[str, str, set[str]]] = []
    if dnf is None:
        keep = set(labels)
    else:
        keep = set()
        for i, conj in enumerate(dnf):
            reasons: list[tuple[str, str, set[str]]] = []
            keep |= _conjunction(conj, labels, doc, schema, partition_values, indices, reasons)
            if i == 0:
                first_reasons = reasons
    files = []
    for label in labels:
        if label not in keep:
            continue
        info = doc.files.get(label, None)
        files.append(
            PlannedFile(
                label=label,
                key=doc.partitions[label][table],
                table=table,
                partition=partition_values(label),
                rows=info.rows if info else None,
                size=info.size if info else None,
            )
        )
    pruned = []
    for reason, column, removed in first_reasons:
        gone = frozenset(removed - keep)
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


def _conjunction(
    conj: tuple[Literal, ...],
    labels: list[str],
    doc: DatasetDocument,
    schema: pa.Schema,
    partition_values: Callable[[str], tuple[tuple[str, Any], ...]],
    indices: Mapping[str, IndexLookup],
    reasons: list[tuple[str, str, set[str]]],
) -> set[str]:
    """Labels satisfying one conjunction; ``reasons`` gets (reason, column, removed) steps."""
    keys = set(doc.partition_keys)
    current = set(labels)
    for lit in conj:
        if lit.column in indices and lit.op != "is null":
            hits = indices[lit.column].lookup(lit)
            reasons.append((BY_INDEX, lit.column, current - hits))
            current &= hits
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
        for label in current:
            info = doc.files.get(label, None)
            st = decode_stats(info.stats, lit.column, t) if info else None
            if info is None or st is None or eval_stats(lit, st[0], st[1], st[2], info.rows):
                kept.add(label)
        reasons.append((BY_STATS, lit.column, current - kept))
        current = kept
    return current
