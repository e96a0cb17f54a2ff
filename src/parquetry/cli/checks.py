"""``validate``: every way a dataset's metadata can disagree with its files, one line each.

Checks, for a kartothek-format dataset at its current version: the pointer is not behind
the newest version document; ``_common_metadata`` exists and matches the dataset schema;
the per-file statistics decode; each referenced file exists with the recorded size; its
footer holds the recorded rows and columns whose types fit the dataset schema; every row
group reads as the dataset schema (one at a time); recorded per-file statistics (null
counts, min/max) match the footer's; each secondary index maps every value present in a
file to that file's partition, and nothing else. For a snapshot: ``_SUCCESS`` is there, the
manifest parses, every part exists and the parts' rows and schema agree with the manifest.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from parquetry.errors import NotFound, ParquetryError, PointerCorruptedWarning

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from parquetry.cli.targets import DatasetRef
    from parquetry.store import Store

__all__ = ["validate_dataset"]

Tick = Callable[[], None]
#: Problems reported per index before summarising the rest.
MAX_INDEX_PROBLEMS = 10


def validate_dataset(store: Store, ref: DatasetRef, tick: Tick | None = None) -> list[str]:
    """Problems found (empty when the dataset is healthy); ``tick`` is called per file."""
    tick = tick or (lambda: None)
    if ref.kind == "snapshot":
        return _validate_snapshot(store, ref.name, tick)
    return _validate_kartothek(store, ref.name, tick)


def file_count(store: Store, ref: DatasetRef) -> int | None:
    """Files ``validate_dataset`` will visit (for a progress bar), or None if unknown."""
    from parquetry.cli.views import dataset_files

    try:
        return len(dataset_files(store, ref))
    except ParquetryError:
        return None


def open_footer(store: Store, key: str, size: int | None) -> pq.ParquetFile:
    """The file, after the raw footer check: a malformed or encrypted footer raises a
    ParquetryError (InvalidFormat, EncryptionError) instead of reaching pyarrow, which can
    abort the process on column metadata it cannot decode."""
    from parquetry.parquet.files import open_parquet
    from parquetry.parquet.footer_check import safe_metadata

    # pyarrow aborts the process on metadata it cannot decode (encrypted columns, corrupted
    # statistics): the raw footer decides first, raising EncryptionError or InvalidFormat.
    safe_metadata(store, key, size)
    parquet_file, _, _ = open_parquet(store.open(key, size=size), pre_buffer=False)
    return parquet_file


# --- snapshots -----------------------------------------------------------------------------


def _validate_snapshot(store: Store, key: str, tick: Tick) -> list[str]:
    from parquetry.snapshot import ParquetDatasetStore, schema_hash

    problems: list[str] = []
    if store.exists(f"{key}/_parquetry_switch.json"):
        problems.append(f"{key}: an overwrite was interrupted; run 'parquetry repair'")
    if not store.exists(f"{key}/_SUCCESS"):
        problems.append(f"{key}/_SUCCESS is missing: the dataset is not committed")
    try:
        manifest = ParquetDatasetStore(store).read_manifest(key)
    except ParquetryError as exc:
        return [*problems, f"{key}/manifest.json: {exc}"]
    if not manifest.parts:
        problems.append(f"{key}/manifest.json lists no parts")
    rows = 0
    for part in manifest.parts:
        tick()
        part_key = f"{key}/{part}"
        try:
            pf = open_footer(store, part_key, None)
        except NotFound:
            problems.append(f"{part_key} is missing (listed in manifest.json)")
            continue
        except ParquetryError as exc:
            problems.append(str(exc))
            continue
        rows += pf.metadata.num_rows
        read_hash = schema_hash(pf.schema_arrow)
        if manifest.schema_hash not in (read_hash, _stored_hash(pf)):
            problems.append(
                f"{part_key}: schema hash {read_hash} differs from "
                f"manifest.json's {manifest.schema_hash}"
            )
    if not any("is missing (listed" in p for p in problems) and rows != manifest.row_count:
        problems.append(
            f"{key}/manifest.json says {manifest.row_count} rows, the parts hold {rows}"
        )
    return problems


def _stored_hash(pf: pq.ParquetFile) -> str | None:
    """Hash of the Arrow schema the writer stored (pyarrow may read types back differently)."""
    import base64

    import pyarrow as pa

    from parquetry.snapshot import schema_hash

    stored = (pf.metadata.metadata or {}).get(b"ARROW:schema")
    if stored is None:
        return None
    try:
        return schema_hash(pa.ipc.read_schema(pa.py_buffer(base64.b64decode(stored))))
    except (ValueError, pa.ArrowInvalid):
        return None


# --- kartothek-format datasets -------------------------------------------------------------


def _validate_kartothek(store: Store, uuid: str, tick: Tick) -> list[str]:
    from parquetry.dataset import Dataset
    from parquetry.errors import MetadataCorrupted

    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", PointerCorruptedWarning)
            ds = Dataset.open(store, uuid)
        plan = ds.plan(None)
    except ParquetryError as exc:
        return [f"{uuid}: {exc}"]
    doc = ds.document
    # An unreadable pointer that was worked around is reported by _check_pointer.
    for w in caught:
        if not issubclass(w.category, PointerCorruptedWarning):
            warnings.warn(w.message, w.category, stacklevel=2)
    problems: list[str] = _check_pointer(store, uuid) + _check_common_metadata(store, ds)
    problems += doc.files.problems()
    present: dict[str, Any] = {}  # label -> footer, for the index check
    for pf in plan.files:
        tick()
        try:
            info = doc.files.get(pf.label)
        except MetadataCorrupted:
            info = None  # reported by doc.files.problems()
        try:
            meta = store.head(pf.key)
        except NotFound:
            problems.append(f"{pf.key} is missing (referenced by partition {pf.label})")
            continue
        if info is not None and info.size != meta.size:
            problems.append(f"{pf.key}: {meta.size} bytes, the metadata records {info.size}")
        try:
            footer = open_footer(store, pf.key, meta.size)
        except ParquetryError as exc:
            problems.append(str(exc))
            continue
        # The index check reads the file as it is (a size or row count mismatch is reported
        # here: the read path refuses a file whose rows differ from the record).
        present[pf.label] = (dataclasses.replace(pf, size=meta.size, rows=None), footer)
        found = _check_file(pf.key, footer, ds.schema, ds.partition_keys, info)
        problems += found + _check_readable(ds, pf)
    for column in ds.secondary_indices:
        problems += _check_index(store, ds, column, present)
    return problems


def _check_pointer(store: Store, uuid: str) -> list[str]:
    """A pointer behind the newest version document (readers roll forward; repair fixes it)."""
    from parquetry.dataset.versions import latest_version_number, read_pointer

    try:
        pointer, fmt, _ = read_pointer(store, uuid)
    except ParquetryError as exc:
        return [f"{uuid}: the pointer is unreadable: {exc}"]
    if pointer.version is None:
        return []  # written by kartothek: no version number to compare
    newest = latest_version_number(store, uuid)
    if pointer.version.number < newest:
        return [
            f"{uuid}: the pointer ({fmt}) shows version {pointer.version.number}, the newest "
            f"version document is {newest}; run 'parquetry repair'"
        ]
    return []


def _check_common_metadata(store: Store, ds: Any) -> list[str]:
    """``_common_metadata`` (what kartothek reads the schema from) exists and matches."""
    from parquetry.dataset.naming import common_metadata_key
    from parquetry.dataset.schema import common_metadata_bytes, read_common_metadata

    key = common_metadata_key(ds.uuid, ds.document.tables[0])
    try:
        found = read_common_metadata(store.get(key), key)
    except NotFound:
        return [f"{key} is missing: kartothek cannot read the dataset"]
    except ParquetryError as exc:
        return [str(exc)]
    expected = read_common_metadata(common_metadata_bytes(ds.schema, ds.partition_keys), key)
    problems = []
    for field in expected:
        if field.name not in found.names:
            problems.append(f"{key}: column {field.name!r} of the dataset schema is missing")
        elif _type_class(found.field(field.name).type) != _type_class(field.type):
            problems.append(
                f"{key}: column {field.name!r} is {found.field(field.name).type}, the dataset "
                f"schema says {field.type}"
            )
    extra = [n for n in found.names if n not in expected.names]
    if extra:
        problems.append(f"{key}: columns {extra} are not in the dataset schema")
    return problems


def _check_readable(ds: Any, planned: Any) -> list[str]:
    """Read every row group (one at a time) as a read would: corrupt pages, values that do
    not cast to the dataset schema and undecodable chunks show up here."""
    from parquetry.dataset.read import scan_plan

    try:
        for _ in scan_plan(ds.store, ds.schema, _single(planned), None):
            pass
    except ParquetryError as exc:
        return [f"{planned.key}: cannot be read: {str(exc).removeprefix(planned.key + ': ')}"]
    return []


def _single(planned: Any) -> Any:
    from parquetry.dataset.plan import ScanPlan

    return ScanPlan(version=None, predicates=None, files=(planned,), pruned=(), requests=0)


def _type_class(t: pa.DataType) -> str:
    import pyarrow as pa

    for name, test in (
        ("integer", pa.types.is_integer),
        ("float", pa.types.is_floating),
        ("string", lambda x: pa.types.is_string(x) or pa.types.is_large_string(x)),
        ("binary", lambda x: pa.types.is_binary(x) or pa.types.is_large_binary(x)),
        ("timestamp", pa.types.is_timestamp),
        ("date", pa.types.is_date),
        ("decimal", pa.types.is_decimal),
        ("bool", pa.types.is_boolean),
    ):
        if test(t):
            return name
    if pa.types.is_dictionary(t):
        return _type_class(t.value_type)
    return str(t)


def _check_file(
    key: str, footer: pq.ParquetFile, schema: pa.Schema, partition_keys: tuple[str, ...], info: Any
) -> list[str]:
    problems = []
    arrow = footer.schema_arrow
    if info is not None and footer.metadata.num_rows != info.rows:
        problems.append(f"{key}: {footer.metadata.num_rows} rows, the metadata records {info.rows}")
    for field in schema:
        if field.name in partition_keys:
            continue
        if field.name not in arrow.names:
            problems.append(f"{key}: column {field.name!r} of the dataset schema is missing")
            continue
        found = arrow.field(field.name).type
        if _type_class(found) != _type_class(field.type):
            problems.append(
                f"{key}: column {field.name!r} is {found}, the dataset schema says {field.type}"
            )
    if info is not None:
        problems += _check_stats(key, footer, schema, info.stats)
    return problems


def _footer_stats(footer: pq.ParquetFile, column: str) -> tuple[Any, Any, int] | None:
    """(min, max, nulls) over the row groups, or None when the footer lacks statistics."""
    meta = footer.metadata
    names = [meta.schema.column(i).path for i in range(meta.num_columns)]
    if column not in names:
        return None
    idx = names.index(column)
    lo = hi = None
    nulls = 0
    for rg in range(meta.num_row_groups):
        stats = meta.row_group(rg).column(idx).statistics
        if stats is None or not stats.has_null_count:
            return None
        nulls += stats.null_count
        if stats.has_min_max:
            lo = stats.min if lo is None else min(lo, stats.min)
            hi = stats.max if hi is None else max(hi, stats.max)
    return lo, hi, nulls


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, dt.datetime) and isinstance(b, dt.datetime):

        def utc(x: dt.datetime) -> dt.datetime:
            return x.astimezone(dt.UTC).replace(tzinfo=None) if x.tzinfo else x

        return utc(a) == utc(b)
    return bool(a == b)


def _check_stats(key: str, footer: pq.ParquetFile, schema: pa.Schema, stats: Any) -> list[str]:
    from parquetry.dataset.stats import decode_stats

    problems = []
    for column in sorted(stats):
        if column not in schema.names:
            problems.append(f"{key}: statistics recorded for unknown column {column!r}")
            continue
        recorded = decode_stats(stats, column, schema.field(column).type)
        try:
            found = _footer_stats(footer, column)
        except (ValueError, OverflowError) as exc:  # e.g. a timestamp min beyond year 9999
            problems.append(f"{key}: column {column!r}: footer statistics unreadable ({exc})")
            continue
        if recorded is None or found is None:
            continue
        (rlo, rhi, rnulls), (flo, fhi, fnulls) = recorded, found
        if rnulls != fnulls:
            problems.append(
                f"{key}: column {column!r} has {fnulls} nulls, the statistics record {rnulls}"
            )
        for what, rec, foot in (("min", rlo, flo), ("max", rhi, fhi)):
            if rec is not None and foot is not None and not _same(rec, foot):
                problems.append(
                    f"{key}: column {column!r} {what} is {foot!r}, the statistics record {rec!r}"
                )
    return problems


def _check_index(store: Store, ds: Any, column: str, present: dict[str, Any]) -> list[str]:
    import pyarrow.compute as pc

    from parquetry.dataset.read import read_planned_file

    try:
        pairs = ds.index_pairs(column)
    except ParquetryError as exc:
        return [f"index on {column!r}: {exc}"]
    indexed: set[tuple[Any, str]] = {(row["value"], row["label"]) for row in pairs.to_pylist()}
    actual: set[tuple[Any, str]] = set()
    unreadable: set[str] = set()
    for label, (pf, _footer) in present.items():
        if column in ds.partition_keys:
            continue
        try:
            values = read_planned_file(store, ds.schema, pf, columns=[column])
        except ParquetryError:
            unreadable.add(label)  # reported by the file checks
            continue
        distinct = pc.unique(values.column(column).combine_chunks().drop_null()).to_pylist()
        actual |= {(v, label) for v in distinct}
    labels = set(present) - unreadable
    problems = []
    for value, label in sorted(actual - indexed, key=repr):
        problems.append(f"index on {column!r} lacks value {value!r} of partition {label}")
    for value, label in sorted(indexed - actual, key=repr):
        if label in labels:
            problems.append(
                f"index on {column!r} maps {value!r} to partition {label}, which does not hold it"
            )
    if len(problems) > MAX_INDEX_PROBLEMS:
        more = len(problems) - MAX_INDEX_PROBLEMS
        problems = [
            *problems[:MAX_INDEX_PROBLEMS],
            f"index on {column!r}: ... and {more} more problems",
        ]
    return problems
