"""Secondary (inverted) indices: value -> partition labels, one Parquet file per version.

(Format 1. Format-2 versions keep an :class:`~parquetry.dataset.indexstate.IndexState` per
column, incremental pieces; :meth:`IndexLookup.from_state` plans with either.)

File schema (kartothek): ``<column>: <normalised type>``, ``partition: list<string>``; one
row per distinct non-null value. Index files are written under a new, unique key every time
(create-if-absent), never overwritten.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from parquetry.dataset.indexfile import INDEX_ROW_GROUP, IndexFooter, footer_of, ranged_table
from parquetry.dataset.naming import index_key, parse_partition_value
from parquetry.dataset.predicates import Literal, eval_array
from parquetry.dataset.schema import normalise_type
from parquetry.errors import (
    AlreadyExists,
    MetadataCorrupted,
    NotFound,
    ParquetryError,
    out_of_memory,
)
from parquetry.store import PutMode, Store

if TYPE_CHECKING:
    from parquetry.dataset.indexstate import IndexState

#: Appends up to this many (value, label) rows merge incrementally into an existing index.
INCREMENTAL_MAX_ROWS = 100_000

__all__ = [
    "IndexData",
    "IndexLookup",
    "build_pairs",
    "load_index",
    "merge_index",
    "write_index",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class IndexData:
    """A loaded index: parallel arrays of distinct values and their label lists."""

    column: str
    values: pa.Array
    labels: pa.Array  # list<string>

    def lookup(self, lit: Literal) -> set[str]:
        """Labels of partitions holding at least one value satisfying ``lit``."""
        mask = eval_array(lit, self.values)
        chosen = pc.filter(self.labels, mask)
        flat = pc.list_flatten(chosen)
        return set(pc.unique(flat).to_pylist())

    def all_labels(self) -> set[str]:
        return set(pc.unique(pc.list_flatten(self.labels)).to_pylist())

    def pairs(self) -> pa.Table:
        """``(value, label)`` rows, one per occurrence."""
        flat = pc.list_flatten(self.labels)
        parents = pc.list_parent_indices(self.labels)
        return pa.table({"value": self.values.take(parents), "label": flat})


def _from_table(column: str, table: pa.Table, key: str, t: pa.DataType | None) -> IndexData:
    if column not in table.column_names or "partition" not in table.column_names:
        raise MetadataCorrupted(
            f"{key}: an index file needs columns {column!r} and 'partition', has "
            f"{table.column_names}",
            key=key,
        )
    values = table.column(column).combine_chunks()
    labels = table.column("partition").combine_chunks()
    if not (pa.types.is_list(labels.type) or pa.types.is_large_list(labels.type)):
        raise MetadataCorrupted(f"{key}: index column 'partition' is {labels.type}", key=key)
    # "item" (pyarrow <= 12) and "element" list naming both land here as list<string>.
    try:
        labels = labels.cast(pa.list_(pa.string()))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        raise MetadataCorrupted(
            f"{key}: index column 'partition' is {labels.type}", key=key
        ) from None
    if t is not None and values.type != t:
        with contextlib.suppress(pa.ArrowInvalid, pa.ArrowNotImplementedError):
            values = values.cast(t)
    return IndexData(column=column, values=values, labels=labels)


def load_index(
    store: Store, column: str, ref: str | Mapping[str, list[str]], t: pa.DataType
) -> IndexData:
    """Load an index referenced by key, or decode a legacy embedded ``{value: [labels]}``."""
    if isinstance(ref, Mapping):
        values = [parse_partition_value(v, t) for v in ref]
        return IndexData(
            column=column,
            values=pa.array(values, type=t),
            labels=pa.array([list(v) for v in ref.values()], type=pa.list_(pa.string())),
        )
    try:
        data = store.get(ref)
    except NotFound:
        raise MetadataCorrupted(
            f"index file {ref!r} of column {column!r} is missing", key=ref
        ) from None
    try:
        # One thread: an Arrow worker that frees this Python-owned buffer after the interpreter
        # began to exit aborts the process (apache/arrow#34314); index files are small.
        table = pq.ParquetFile(pa.BufferReader(data)).read(use_threads=False)
    except MemoryError as exc:
        raise out_of_memory(exc, f"reading index file {ref}", key=ref) from None
    except (pa.ArrowException, OSError, ValueError, EOFError, IndexError) as exc:
        raise MetadataCorrupted(f"{ref}: not a Parquet index file: {exc}", key=ref) from None
    return _from_table(column, table, ref, t)


def build_pairs(values_by_label: Iterable[tuple[str, pa.Array]], t: pa.DataType) -> pa.Table:
    """``(value, label)`` rows from per-file distinct values."""
    values, labels = [], []
    for label, arr in values_by_label:
        values.append(arr.cast(t) if arr.type != t else arr)
        labels.append(pa.array([label] * len(arr), type=pa.string()))
    if not values:
        return pa.table({"value": pa.array([], type=t), "label": pa.array([], pa.string())})
    return pa.table({"value": pa.concat_arrays(values), "label": pa.concat_arrays(labels)})


def merge_index(
    column: str,
    base: IndexData | None,
    added: pa.Table,
    removed_labels: set[str],
    t: pa.DataType,
) -> IndexData:
    """The index after removing ``removed_labels`` and adding ``(value, label)`` rows."""
    added = added.select(["value", "label"]).cast(pa.schema([("value", t), ("label", pa.string())]))
    if base is not None and not removed_labels and added.num_rows <= INCREMENTAL_MAX_ROWS:
        return _merge_small(column, base, added, t)
    parts = [added]
    if base is not None:
        old = base.pairs()
        if old.column("value").type != t:
            old = old.set_column(0, "value", old.column("value").cast(t))
        parts.append(old)
    pairs = pa.concat_tables(
        [p.cast(pa.schema([("value", t), ("label", pa.string())])) for p in parts]
    )
    if removed_labels:
        keep = pc.invert(pc.is_in(pairs.column("label"), pa.array(list(removed_labels))))
        pairs = pairs.filter(keep)
    pairs = pairs.filter(pc.is_valid(pairs.column("value")))
    grouped = pairs.group_by("value", use_threads=False).aggregate([("label", "distinct")])
    return IndexData(
        column=column,
        values=grouped.column("value").combine_chunks(),
        labels=grouped.column("label_distinct").combine_chunks().cast(pa.list_(pa.string())),
    )


def _merge_small(column: str, base: IndexData, added: pa.Table, t: pa.DataType) -> IndexData:
    """Append-only merge touching just the appended values (the index can have millions)."""
    added = added.filter(pc.is_valid(added.column("value")))
    values = base.values.cast(t) if base.values.type != t else base.values
    if added.num_rows == 0:
        return IndexData(column=column, values=values, labels=base.labels)
    fresh = added.group_by("value", use_threads=False).aggregate([("label", "distinct")])
    new_values = fresh.column("value").combine_chunks()
    new_lists = fresh.column("label_distinct").to_pylist()
    positions = pc.index_in(new_values, value_set=values).to_pylist()
    touched = [p for p in positions if p is not None]
    merged_lists = []
    for pos, extra in zip(positions, new_lists, strict=True):
        old = base.labels[pos].as_py() if pos is not None else []
        merged_lists.append(old + [lbl for lbl in extra if lbl not in old])
    keep = pc.invert(
        pc.is_in(pa.array(range(len(values)), pa.int64()), value_set=pa.array(touched, pa.int64()))
    )
    return IndexData(
        column=column,
        values=pa.concat_arrays([values.filter(keep), new_values]),
        labels=pa.concat_arrays(
            [base.labels.filter(keep), pa.array(merged_lists, type=pa.list_(pa.string()))]
        ),
    )


def write_index(store: Store, uuid: str, index: IndexData) -> IndexFooter:
    """Write ``index`` sorted by value under a new unique key (create-if-absent)."""
    t = normalise_type(index.values.type)
    values = index.values.cast(t) if index.values.type != t else index.values
    table = pa.table({index.column: values, "partition": index.labels})
    # By the array, not the name: pyarrow reads a name like ".x" as a nested field path.
    table = table.take(pc.sort_indices(table.column(index.column)))
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="snappy", row_group_size=INDEX_ROW_GROUP)
    data = sink.getvalue()
    created = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    for _ in range(100):
        key = index_key(uuid, index.column, created)
        try:
            store.put(key, data, mode=PutMode.CREATE)
            return footer_of(key, data)
        except AlreadyExists:
            created += dt.timedelta(microseconds=1)
    raise MetadataCorrupted(f"could not find a free index file name for {index.column!r}")


class IndexLookup:
    """Answers index lookups for one column, by ranged reads when the footer is known.

    ``requests`` / ``keys`` record the store requests made so far (for plans).
    """

    def __init__(
        self,
        store: Store,
        column: str,
        ref: str | Mapping[str, list[str]],
        footer: IndexFooter | None,
        t: pa.DataType,
    ):
        self.store, self.column, self.ref, self.t = store, column, ref, t
        self.footer = footer if footer is not None and footer.key == ref else None
        self.requests = 0
        self.keys: list[str] = []
        self._full: IndexData | None = None
        self._state: IndexState | None = None
        #: label -> (file record text, piece key) of labels found in pieces so far
        #: (piecefiles.py).
        self.files: dict[str, tuple[str, str]] = {}

    @classmethod
    def from_state(cls, store: Store, state: IndexState) -> IndexLookup:
        """Lookups on a format-2 index (pieces + tail + dead labels)."""
        lookup = cls(store, state.column, {}, None, state.type)
        lookup._state = state
        return lookup

    def lookup(self, lit: Literal) -> set[str]:
        try:
            return self._lookup(lit)
        except UnicodeDecodeError as exc:
            # Labels of an index file another tool wrote (or a damaged page) that are not
            # UTF-8: decoded by Arrow only when turned into Python strings.
            key = self.ref if isinstance(self.ref, str) else f"index of {self.column!r}"
            raise MetadataCorrupted(
                f"{key}: a label of the index of column {self.column!r} is not UTF-8 ({exc})",
                key=key,
            ) from None

    def _lookup(self, lit: Literal) -> set[str]:
        if self._state is not None and self._full is None:
            labels, keys, files = self._state.search_files(self.store, lit)
            self.requests += len(keys)
            self.keys.extend(keys)
            self.files.update(files)
            return labels
        if self._full is None and self.footer is not None:
            got = self._ranged(self.footer, lit)
            if got is not None:
                table, used = got
                self.requests += used
                self.keys.extend([self.footer.key] * used)
                return _from_table(self.column, table, self.footer.key, self.t).lookup(lit)
        if self._full is None and isinstance(self.ref, str) and lit.op not in ("==", "in"):
            # A lookup matching most values (!=, is not null, a wide range) scans the file
            # a row group at a time instead of loading it whole (indexscan.py).
            return self._scan(self.ref, lit)
        return self.full().lookup(lit)

    def _scan(self, ref: str, lit: Literal) -> set[str]:
        from parquetry.dataset.indexscan import fetch_footer
        from parquetry.dataset.indexstate import IndexState

        footer = self.footer
        if footer is None:
            footer, used = fetch_footer(self.store, self.column, ref)
            self.requests += used
            self.keys.extend([ref] * used)
        state = IndexState.legacy(self.store, self.column, ref, footer, self.t)
        labels, keys, _ = state.search_files(self.store, lit)
        self.requests += len(keys)
        self.keys.extend(keys)
        return labels

    def _ranged(self, footer: IndexFooter, lit: Literal) -> tuple[pa.Table, int] | None:
        try:
            return ranged_table(self.store, footer, lit)
        except NotFound:
            raise MetadataCorrupted(
                f"index file {footer.key!r} of column {self.column!r} is missing", key=footer.key
            ) from None
        except MemoryError as exc:
            raise out_of_memory(exc, f"reading index file {footer.key}", key=footer.key) from None
        except (pa.ArrowException, OSError, ValueError, EOFError, IndexError, struct.error) as exc:
            if isinstance(exc, ParquetryError):
                raise
            detail = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
            raise MetadataCorrupted(
                f"{footer.key}: index file of column {self.column!r} is unreadable ({detail})",
                key=footer.key,
            ) from None

    def full(self) -> IndexData:
        if self._full is None and self._state is not None:
            keys = sorted(self._state.piece_keys())
            self._full = self._state.full(self.store)
            self.requests += len(keys)
            self.keys.extend(keys)
        if self._full is None:
            self._full = load_index(self.store, self.column, self.ref, self.t)
            if isinstance(self.ref, str):
                self.requests += 1
                self.keys.append(self.ref)
        return self._full
