"""Adopting what kartothek wrote: its schema, statistics of its files, a dataset it created
again.

kartothek 5.3.0 accepts updates whose frames widen a column or type one it saw only as
nulls, and rewrites ``_common_metadata``: :func:`reconciled_schema` merges that schema
into parquetry's by ``merge_schema``'s rules, or refuses naming the column.

kartothek 5.3.0 records no per-file statistics; parquetry plans by min/max, so the files a
reconcile adopts get them from their Parquet footers (:func:`footer_stats`: the footer is
read anyway for the row count, no data).

kartothek's ``delete_dataset`` deletes the pointer, ``_common_metadata``, the data and its
index files, but not parquetry's head, entries and incarnation markers. When kartothek then
creates a dataset under the same uuid, its pointer belongs to none of parquetry's versions:
it has no marker of the version it was based on (``metadata.POINTER_MARKER``, which every
pointer parquetry writes carries and kartothek keeps) and another ``creation_time``
(kartothek keeps it verbatim on updates and sets a new one on create).
:func:`is_recreated` tells; :func:`adopt_recreated` commits kartothek's whole document as a
new incarnation (self-contained entry, epoch = its number, like a parquetry create of a
deleted uuid), so nothing is built on the stale head.
"""

from __future__ import annotations

import math
import uuid as uuid_module
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from parquetry.dataset.metadata import POINTER_MARKER, DatasetDocument, FileInfo, VersionInfo
from parquetry.dataset.naming import incarnation_key
from parquetry.dataset.stats import ColumnStats, encode_value
from parquetry.errors import ParquetryError, SchemaMismatch
from parquetry.parquet.footer_check import safe_metadata
from parquetry.store import PutMode, Store

__all__ = ["adopt_recreated", "footer_stats", "is_recreated", "reconciled_schema"]


def _stat_type(t: pa.DataType) -> bool:
    """Types whose footer min/max mean what parquetry's statistics mean. Floats are left
    out: Parquet writers leave NaN out of min/max, parquetry orders NaN above infinity
    (a file holding NaN must not be pruned by ``x > 1e300``)."""
    return bool(
        pa.types.is_signed_integer(t)
        or pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_date(t)
        or pa.types.is_boolean(t)
        or pa.types.is_timestamp(t)
    )


def _bound(value: Any, t: pa.DataType) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if pa.types.is_timestamp(t) and hasattr(value, "tzinfo"):
        # Footers give naive UTC datetimes for tz-aware columns.
        if t.tz is not None and value.tzinfo is None:
            import datetime as dt

            value = value.replace(tzinfo=dt.UTC)
        elif t.tz is None and value.tzinfo is not None:
            return None
    if isinstance(value, bytes):
        return None
    return encode_value(value, t)


def footer_stats(md: pq.FileMetaData, schema: pa.Schema) -> dict[str, ColumnStats]:
    """``{column: [min, max, nulls]}`` from a file's footer for the columns of ``schema``
    it holds (row groups combined). A column without statistics in some row group, or of
    a type whose footer bounds parquetry does not trust, gets unknown bounds and its null
    count when every row group has one; a column the file lacks is left out (unknown)."""
    out: dict[str, ColumnStats] = {}
    positions = {md.schema.column(i).path: i for i in range(md.num_columns)}
    for name in schema.names:
        j = positions.get(name)
        if j is None:
            continue
        t = schema.field(name).type
        if pa.types.is_dictionary(t):
            t = t.value_type
        lo: Any = None
        hi: Any = None
        nulls: int | None = 0
        bounded = _stat_type(t)
        try:
            for i in range(md.num_row_groups):
                st = md.row_group(i).column(j).statistics
                if st is None:
                    nulls = None
                    bounded = False
                    break
                if nulls is not None:
                    nulls = nulls + st.null_count if st.has_null_count else None
                if not bounded or md.row_group(i).num_rows == st.null_count:
                    continue  # all null: no bounds to combine
                if not st.has_min_max:
                    bounded = False
                    continue
                a, b = _bound(st.min, t), _bound(st.max, t)
                if a is None or b is None:
                    bounded = False
                    continue
                lo = st.min if lo is None or st.min < lo else lo
                hi = st.max if hi is None or st.max > hi else hi
        except (pa.ArrowException, TypeError, ValueError, OverflowError):
            continue  # an odd footer: leave the column unknown
        if nulls is None:
            continue
        if bounded and lo is not None:
            out[name] = [_bound(lo, t), _bound(hi, t), nulls]
        else:
            out[name] = [None, None, nulls]
    return out


def reconciled_schema(ours: pa.Schema, foreign: DatasetDocument) -> pa.Schema:
    """``ours`` with the columns kartothek's ``_common_metadata`` adds and the types it
    widens losslessly, by ``merge_schema``'s rules (``dataset/evolve.py``).

    Raises:
        SchemaMismatch: kartothek's schema differs otherwise (a column of another kind);
            the message names each column and the schema file. Nothing is committed.
    """
    from parquetry.dataset.evolve import resolve_write_schema
    from parquetry.dataset.naming import common_metadata_key

    theirs = foreign.schema
    if theirs is None or theirs.remove_metadata().equals(ours.remove_metadata()):
        return ours
    key = common_metadata_key(foreign.uuid, foreign.tables[0])
    try:
        merged = resolve_write_schema(foreign.uuid, ours, theirs.remove_metadata(), merge=True)
    except SchemaMismatch as exc:
        raise SchemaMismatch(
            f"kartothek wrote the schema {key} that parquetry cannot merge into dataset "
            f"{foreign.uuid!r} (only added columns and lossless widenings are taken): {exc}"
        ) from None
    return merged.with_metadata(ours.metadata) if ours.metadata else merged


def is_recreated(foreign: DatasetDocument, newest: DatasetDocument) -> bool:
    """Whether kartothek's document belongs to a dataset created after parquetry's
    ``newest`` version (kartothek deleted the dataset and wrote a new one)."""
    if POINTER_MARKER in foreign.metadata:
        return False  # derived from a pointer parquetry wrote
    ours = newest.metadata.get("creation_time")
    theirs = foreign.metadata.get("creation_time")
    return ours is not None and theirs is not None and ours != theirs


def adopt_recreated(
    store: Store, uuid: str, foreign: DatasetDocument, fmt: str, operation: str, etag: str
) -> DatasetDocument:
    """Commit kartothek's re-created dataset ``foreign`` (schema filled in) as the first
    version of a new incarnation; returns the committed document."""
    from parquetry.dataset.commit import commit, now_iso

    incarnation = uuid_module.uuid4().hex
    store.put(incarnation_key(uuid, incarnation), b"", mode=PutMode.CREATE)
    files = _described(store, foreign)

    def make(current: DatasetDocument | None, number: int) -> DatasetDocument:
        info = VersionInfo(
            number=number,
            parent=None,
            committed_at=now_iso(),
            operation=operation,
            files_added=len(foreign.partitions),
            rows_added=sum(f.rows for f in files.values()),
            epoch=number,
            incarnation=incarnation,
            parameters={"recreated": "true", "pointer": etag},
        )
        return foreign.evolve(
            version=info, files=foreign.files.changed(set(), files), lineage=None, change=None
        )

    return commit(store, uuid, None, -1, make, pointer_format=fmt)


def _described(store: Store, doc: DatasetDocument) -> dict[str, FileInfo]:
    """FileInfo (rows, size, footer statistics) of every partition of ``doc``; a file whose
    footer cannot be read is left without (its statistics unknown)."""
    assert doc.schema is not None
    schema = doc.schema
    table = doc.tables[0]

    def one(item: tuple[str, dict[str, str]]) -> tuple[str, FileInfo | None]:
        label, tables = item
        key = tables.get(table) or next(iter(tables.values()))
        try:
            size = store.head(key).size
            # safe_metadata: parquetry's reader checks the footer first (pyarrow aborts on
            # some footers' statistics); encrypted or damaged files raise ParquetryErrors.
            _, md = safe_metadata(store, key, size)
        except (ParquetryError, pa.ArrowException, OSError, ValueError):
            # Unknown statistics; reading the file reports the problem.
            return label, None
        return label, FileInfo(rows=md.num_rows, size=size, stats=footer_stats(md, schema))

    found = store.map_concurrent(one, sorted(doc.partitions.items()))
    return {label: info for label, info in found if info is not None}
