"""Which partitions an equality ``delete_scope`` selects (kartothek's list of dicts), and
the typed partition values of a label (shared by reads and replaces)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from parquetry.dataset.indexstate import IndexState
from parquetry.dataset.indexwire import index_state
from parquetry.dataset.metadata import DatasetDocument
from parquetry.dataset.predicates import Literal, eval_scalar
from parquetry.errors import PredicateError
from parquetry.store import Store

__all__ = ["labels_in_scope", "partition_values_of"]


def partition_values_of(
    doc: DatasetDocument, schema: pa.Schema, cache: dict[tuple[str, str], Any]
) -> Any:
    """A function label -> typed partition values, caching each distinct raw value."""
    from parquetry.dataset.naming import NULL_PARTITION, parse_label, parse_partition_value

    types = {k: schema.field(k).type for k in doc.partition_keys if k in schema.names}

    def values(label: str) -> tuple[tuple[str, Any], ...]:
        out = []
        for k, raw in parse_label(label):
            if k not in types:
                continue
            ck = (k, raw)
            if ck not in cache:
                cache[ck] = None if raw == NULL_PARTITION else parse_partition_value(raw, types[k])
            out.append((k, cache[ck]))
        return tuple(out)

    return values


def labels_in_scope(
    store: Store,
    doc: DatasetDocument,
    schema: pa.Schema,
    delete_scope: Sequence[Mapping[str, Any]],
) -> set[str]:
    """Partitions an equality ``delete_scope`` (kartothek's list of dicts) selects.

    A column that is neither a partition key nor indexed cannot select partitions: that is
    an error here (kartothek 5.3.0 silently selected every partition).
    """
    from parquetry.dataset.predicates import validate_predicates

    cache: dict[tuple[str, str], Any] = {}
    values_of = partition_values_of(doc, schema, cache)
    loaded: dict[str, IndexState] = {}
    out: set[str] = set()
    for scope in delete_scope:
        if not isinstance(scope, Mapping) or not scope:
            raise PredicateError(f"each delete_scope entry must be a non-empty dict: {scope!r}")
        for col in scope:
            if col not in doc.partition_keys and col not in doc.indices:
                raise PredicateError(
                    f"delete_scope column {col!r} is neither a partition key "
                    f"{list(doc.partition_keys)} nor indexed {sorted(doc.indices)}",
                    column=col,
                    op="==",
                )
            if scope[col] is None and col not in doc.partition_keys:
                raise PredicateError(
                    f"delete_scope {{{col!r}: None}}: an index holds no nulls, so a null "
                    "selects partitions only on a partition key",
                    column=col,
                    op="is null",
                )
        # None selects the null partition (p=__HIVE_DEFAULT_PARTITION__): "== None" never holds.
        terms = [(c, "is null") if v is None else (c, "==", v) for c, v in scope.items()]
        dnf = validate_predicates([terms], schema)
        assert dnf is not None
        (conj,) = dnf
        candidates = set(doc.partitions)
        for lit in conj:
            candidates &= _select(store, doc, lit, values_of, loaded)
        out |= candidates
    return out


def _select(
    store: Store,
    doc: DatasetDocument,
    lit: Literal,
    values_of: Any,
    loaded: dict[str, IndexState],
) -> set[str]:
    if lit.column in doc.partition_keys:
        return {lbl for lbl in doc.partitions if eval_scalar(lit, dict(values_of(lbl))[lit.column])}
    if lit.column not in loaded:
        loaded[lit.column] = index_state(store, doc, lit.column)
    return loaded[lit.column].lookup(store, lit)
