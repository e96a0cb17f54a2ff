"""Upsert keys: the source's key table, its checks, and which files may hold its keys.

Pure helpers of :mod:`parquetry.dataset.upsert`: prepare the source (schema checked like
``append``, duplicate keys refused), choose candidate files (partition values, a secondary
index, file statistics) and match one file's keys against the source's.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from parquetry.dataset.evolve import resolve_write_schema
from parquetry.dataset.indexgroups import may_hold
from parquetry.dataset.indexlookup import lookup_values
from parquetry.dataset.indexwire import index_state
from parquetry.dataset.metadata import DatasetDocument
from parquetry.dataset.plan import PlannedFile
from parquetry.dataset.read import read_planned_file
from parquetry.dataset.schema import cast_to_schema
from parquetry.dataset.stats import decode_stats
from parquetry.dataset.write import iter_input, storage_schema
from parquetry.errors import InvalidArgument, UnknownColumn

if TYPE_CHECKING:
    from parquetry.dataset.dataset import Dataset

__all__ = [
    "DATA_ROW",
    "Candidates",
    "FILE_ROW",
    "added_holding_keys",
    "candidate_labels",
    "key_table",
    "match_rows",
    "planned_file",
    "source_table",
]

#: Row-number columns added to join a file's keys with the source's (never dataset names:
#: a dataset column cannot start with "__parquetry").
FILE_ROW = "__parquetry_file_row"
DATA_ROW = "__parquetry_data_row"


def check_on(ds: Dataset, on: Sequence[str]) -> tuple[str, ...]:
    if isinstance(on, str):
        on = [on]
    try:
        keys = tuple(on)
    except TypeError:
        raise InvalidArgument(f"upsert on= must name key columns, got {on!r}") from None
    if not all(isinstance(c, str) for c in keys):
        raise InvalidArgument(f"upsert on= must name key columns (strings), got {keys!r}")
    if not keys:
        raise InvalidArgument("upsert needs at least one key column in on=")
    if len(set(keys)) != len(keys):
        raise InvalidArgument(f"upsert key columns repeat a column: {list(keys)}")
    for c in keys:
        if c not in ds.schema.names:
            raise UnknownColumn(f"upsert key column {c!r} is not in dataset {ds.uuid!r}", column=c)
    return keys


def source_table(ds: Dataset, data: Any, merge_schema: bool) -> tuple[pa.Table, pa.Schema]:
    """``data`` in memory in the schema the upsert writes (checked like ``append``)."""
    in_schema, batches = iter_input(data)
    target = resolve_write_schema(
        ds.uuid,
        ds.schema,
        storage_schema(in_schema),
        merge=merge_schema,
        partition_on=ds.partition_keys,
    )
    table = pa.Table.from_batches(list(batches), schema=in_schema)
    table = cast_to_schema(
        table, target, where=f"upserting into {ds.uuid}", fill_missing=merge_schema
    )
    return table.combine_chunks(), target


def _canonical(keys: pa.Table, on: Sequence[str]) -> pa.Table:
    """``keys`` with float key columns in one bit pattern per value the predicates call
    equal: -0.0 as 0.0 and every NaN as one NaN. Hash matching and grouping compare bits,
    so a data key -0.0 would miss a stored 0.0 and insert a second row for the key."""
    for c in on:
        i = keys.schema.get_field_index(c)
        col = keys.column(i)
        if not pa.types.is_floating(col.type):
            continue
        zero = pa.scalar(0, col.type)
        col = pc.if_else(pc.equal(col, zero), zero, col)  # -0.0 == 0.0
        col = pc.if_else(pc.is_nan(col), pa.scalar(float("nan"), col.type), col)
        keys = keys.set_column(i, keys.field(i), col)
    return keys


def key_table(source: pa.Table, on: Sequence[str]) -> pa.Table:
    """The source's keys with their row numbers, rows with a NULL key left out (as in SQL
    MERGE a NULL never equals anything: such rows never match and are inserted).

    Raises:
        InvalidArgument: two rows share a key (naming it and how often it appears).
    """
    keys = _canonical(source.select(list(on)), on).append_column(
        DATA_ROW, pa.array(np.arange(source.num_rows, dtype=np.int64))
    )
    valid = None
    for c in on:
        ok = pc.is_valid(keys.column(c))
        valid = ok if valid is None else pc.and_(valid, ok)
    keys = keys.filter(valid)
    try:
        counts = keys.group_by(list(on), use_threads=False).aggregate([([], "count_all")])
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise InvalidArgument(f"upsert key columns {list(on)} cannot be matched: {exc}") from None
    dup = counts.filter(pc.greater(counts.column("count_all"), 1))
    if dup.num_rows:
        first = {c: dup.column(c)[0].as_py() for c in on}
        raise InvalidArgument(
            f"upsert into {', '.join(on)}: key {first} appears "
            f"{dup.column('count_all')[0].as_py()} times in the data ({dup.num_rows} duplicate "
            "keys in all); each key may appear once (which row would win?)"
        )
    return keys


def planned_file(ds: Dataset, label: str) -> PlannedFile:
    doc = ds.document
    table = doc.tables[0]
    info = doc.files.get(label, None)
    return PlannedFile(
        label=label,
        key=doc.partitions[label][table],
        table=table,
        partition=ds._values_of(label),
        rows=info.rows if info else None,
        size=info.size if info else None,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Candidates:
    """Files that may hold a key of the source, and how they were found.

    ``exact``: when the index alone decides the matches (every key column is the indexed
    column or a partition key), ``matched`` maps each label holding a key to its matching
    dataset row count being unknown (-1) and ``hit`` marks the source rows that match; the
    files' key columns need not be read."""

    labels: list[str]
    how: str
    exact: bool = False
    hit: np.ndarray | None = None


def candidate_labels(ds: Dataset, keys: pa.Table, on: Sequence[str], data_rows: int) -> Candidates:
    """Labels of the files that may hold a key of ``keys`` and how they were chosen.

    The secondary index on a key column (the first indexed one) names the files holding
    each value (one batch lookup); partition keys among ``on`` keep the partitions whose
    values occur in ``keys``; file statistics (min/max) of the other key columns prune the
    rest."""
    doc = ds.document
    pkeys = [k for k in ds.partition_keys if k in on]
    others = [c for c in on if c not in ds.partition_keys]
    indexed = [c for c in others if c in doc.indices]
    how = []
    labels: Iterable[str]
    if keys.num_rows == 0:
        return Candidates(labels=[], how="no keys")
    if indexed:
        state = index_state(ds.store, doc, indexed[0])
        found = lookup_values(ds.store, state, keys.column(indexed[0]))
        live = [x in doc.partitions for x in found.pairs.column("label").to_pylist()]
        pairs = found.pairs.filter(pa.array(live, pa.bool_()))
        if len(others) == 1:
            return _exact(ds, keys, indexed[0], pkeys, pairs, data_rows)
        labels = sorted(set(pairs.column("label").to_pylist()))
        how.append(f"secondary index on {indexed[0]!r}")
    else:
        labels = doc.partitions
    if pkeys:
        wanted = set(zip(*(keys.column(k).to_pylist() for k in pkeys), strict=True))
        labels = [x for x in labels if _pvalues(ds, x, pkeys) in wanted]
        how.append("partition keys " + ", ".join(map(repr, pkeys)))
    distinct = {c: pc.unique(keys.column(c).combine_chunks()) for c in others}
    types = {c: ds.schema.field(c).type for c in others}
    out = []
    for label in labels:
        info = doc.files.get(label, None)
        keep = True
        for c in others:
            st = decode_stats(info.stats, c, types[c]) if info is not None else None
            if st is not None and st[0] is not None and st[1] is not None:
                keep = may_hold(distinct[c], st[0], st[1], types[c])
            if not keep:
                break
        if keep:
            out.append(label)
    if others:
        how.append("statistics")
    return Candidates(labels=out, how=" + ".join(how))


def _pvalues(ds: Dataset, label: str, pkeys: Sequence[str]) -> tuple[Any, ...]:
    values = dict(ds._values_of(label))
    return tuple(values.get(k) for k in pkeys)


def _exact(
    ds: Dataset,
    keys: pa.Table,
    column: str,
    pkeys: Sequence[str],
    pairs: pa.Table,
    data_rows: int,
) -> Candidates:
    """The matches from the index alone: a key ``(column, *pkeys)`` matches where the
    index has its value under a label with the key's partition values."""
    labels = pairs.column("label").to_pylist()
    table = pa.table(
        {
            column: pairs.column("value"),
            "__parquetry_label": pa.array(labels, pa.string()),
            **{
                k: pa.array([_pvalues(ds, x, [k])[0] for x in labels], ds.schema.field(k).type)
                for k in pkeys
            },
        }
    )
    keyed = keys.select([column, *pkeys, DATA_ROW])
    keyed = keyed.cast(
        pa.schema(
            [
                table.schema.field(column),
                *(table.schema.field(k) for k in pkeys),
                keyed.schema.field(DATA_ROW),
            ]
        )
    )
    joined = table.join(keyed, keys=[column, *pkeys], join_type="inner", use_threads=False)
    hit = np.zeros(data_rows, dtype=bool)
    hit[joined.column(DATA_ROW).to_numpy()] = True
    chosen = sorted(set(joined.column("__parquetry_label").to_pylist()))
    how = f"secondary index on {column!r} (exact)"
    return Candidates(labels=chosen, how=how, exact=True, hit=hit)


def match_rows(file_keys: pa.Table, keys: pa.Table, on: Sequence[str]) -> pa.Table:
    """``(FILE_ROW, DATA_ROW)`` of every file row whose key equals a source key."""
    left = file_keys.select(list(on))
    left = _canonical(left.cast(keys.select(list(on)).schema), on)
    if len(on) == 1:
        # One key column, unique in the source: a hash lookup is exact and ~10x faster
        # than a join (which the multi-column case needs).
        at = pc.index_in(left.column(0), value_set=keys.column(0))
        if isinstance(at, pa.ChunkedArray):
            at = at.combine_chunks()
        found = pc.is_valid(at)
        rows = pa.array(np.flatnonzero(found.to_numpy(zero_copy_only=False)), pa.int64())
        data_rows = keys.column(DATA_ROW).combine_chunks().take(at.filter(found))
        return pa.table({FILE_ROW: rows, DATA_ROW: data_rows})
    left = left.append_column(FILE_ROW, pa.array(np.arange(left.num_rows, dtype=np.int64)))
    try:
        joined = left.join(keys, keys=list(on), join_type="inner", use_threads=False)
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise InvalidArgument(f"upsert key columns {list(on)} cannot be matched: {exc}") from None
    return joined.select([FILE_ROW, DATA_ROW]).sort_by(FILE_ROW)


def added_holding_keys(
    ds: Dataset, base: DatasetDocument, labels: Sequence[str], keys: pa.Table, on: Sequence[str]
) -> list[str]:
    """The labels among ``labels`` (files of ``base`` that ``ds``'s version did not have:
    concurrent commits added them) holding a key of ``keys``.

    Cheapest evidence first: a file whose partition values (partition keys among ``on``)
    or min/max statistics (the other key columns) exclude every key is left unread; the
    key columns of the rest are read and matched exactly (``match_rows``). NULL keys never
    match (``keys`` has none)."""
    if keys.num_rows == 0:
        return []
    pkeys = [k for k in ds.partition_keys if k in on]
    others = [c for c in on if c not in ds.partition_keys]
    wanted = set(zip(*(keys.column(k).to_pylist() for k in pkeys), strict=True)) if pkeys else None
    distinct = {c: pc.unique(keys.column(c).combine_chunks()) for c in others}
    schema = base.schema if base.schema is not None else ds.schema
    types = {c: schema.field(c).type for c in others}
    table = base.tables[0]
    out = []
    for label in labels:
        if wanted is not None and _pvalues(ds, label, pkeys) not in wanted:
            continue
        info = base.files.get(label, None)
        if info is not None and info.rows == 0:
            continue
        keep = True
        for c in others:
            st = decode_stats(info.stats, c, types[c]) if info is not None else None
            if st is not None and st[0] is not None and st[1] is not None:
                keep = may_hold(distinct[c], st[0], st[1], types[c])
            if not keep:
                break
        if not keep:
            continue
        planned = PlannedFile(
            label=label,
            key=base.partitions[label][table],
            table=table,
            partition=ds._values_of(label),
            rows=info.rows if info else None,
            size=info.size if info else None,
        )
        file_keys = read_planned_file(
            ds.store, schema, planned, columns=list(on), decryption=ds._decryption
        )
        if match_rows(file_keys, keys, on).num_rows:
            out.append(label)
    return out
