"""Read a committed snapshot dataset: concurrently, and with ``columns=`` only the footers
and the projected column chunks (ranged gets) on stores that can read ranges.

A read is checked twice: before (``_SUCCESS``, manifest, every part present, footers
agreeing with the manifest's ``row_count`` and ``schema_hash``) and after (``_SUCCESS``
still there and ``manifest.json`` byte-identical). A switch that ran in between changes
one of the two, so the read is retried instead of returning a mix.
"""

from __future__ import annotations

import base64
import mmap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from parquetry.errors import (
    DatasetIncomplete,
    InvalidFormat,
    ManifestCorrupted,
    NotFound,
    ParquetryError,
    UnknownColumn,
    out_of_memory,
)
from parquetry.parquet.files import check_readable
from parquetry.parquet.footer import RawFooter, footer_from_bytes, footer_from_file
from parquetry.parquet.footer_check import check_plaintext_footer
from parquetry.snapshot.layout import journal_key, manifest_key, part_key, success_key
from parquetry.snapshot.manifest import DatasetManifest, schema_hash
from parquetry.store.base import Capability, Store

__all__ = ["parse_manifest", "read_snapshot"]

#: Reads retried when a switch ran during the read (a switch takes a few requests).
_ATTEMPTS = 3


@dataclass(frozen=True, slots=True, kw_only=True)
class _Part:
    key: str
    size: int


def parse_manifest(raw: bytes, key: str) -> DatasetManifest:
    """Parse ``manifest.json`` bytes of dataset ``key``; every failure is ManifestCorrupted."""
    where = manifest_key(key)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ManifestCorrupted(
            f"{where} is not valid UTF-8 ({exc.reason} at byte {exc.start})",
            reason="manifest is not UTF-8",
            key=key,
        ) from None
    try:
        return DatasetManifest.from_json(text)
    except ManifestCorrupted as exc:
        raise ManifestCorrupted(f"{where}: {exc.message}", reason=exc.reason, key=key) from None


def read_snapshot(
    store: Store, key: str, columns: Sequence[str] | None, *, max_workers: int
) -> pa.Table:
    """The dataset's rows, checked against its manifest (see the module docstring)."""
    for _ in range(_ATTEMPTS):
        raw = _committed_manifest(store, key)
        try:
            table = _read_version(store, key, parse_manifest(raw, key), columns, max_workers)
        except ParquetryError:
            # A part replaced or gone mid-read looks like corruption; it is a race if the
            # dataset changed meanwhile, and then a retry sees the new version whole.
            if _unchanged(store, key, raw):
                raise
            continue
        if _unchanged(store, key, raw):
            return table
    raise DatasetIncomplete(
        f"dataset {key!r} kept changing while being read ({_ATTEMPTS} attempts)", key=key
    )


def _read_version(
    store: Store,
    key: str,
    manifest: DatasetManifest,
    columns: Sequence[str] | None,
    max_workers: int,
) -> pa.Table:
    parts = _present_parts(store, key, manifest, max_workers)
    if columns is None or not store.supports(Capability.RANGE_READ):
        files = store.map_concurrent(lambda p: _fetch(store, p), parts, max_workers=max_workers)
    else:
        files = store.map_concurrent(lambda p: _open(store, p), parts, max_workers=max_workers)
    _check_footers(key, manifest, parts, files, columns)
    tables = store.map_concurrent(
        lambda at: _read(parts[at], files[at], columns), range(len(files)), max_workers=max_workers
    )
    return pa.concat_tables(tables)


def _committed_manifest(store: Store, key: str) -> bytes:
    if not store.exists(success_key(key)):
        hint = ""
        if store.exists(journal_key(key)):
            hint = (
                "; a switch to a new version is running or was interrupted: repair() completes it"
            )
        raise DatasetIncomplete(
            f"dataset {key!r} is incomplete: _SUCCESS marker missing{hint}", key=key
        )
    try:
        return store.get(manifest_key(key))
    except NotFound:
        raise DatasetIncomplete(
            f"dataset {key!r} is incomplete: _SUCCESS present but manifest.json missing", key=key
        ) from None


def _plain_name(name: str) -> bool:
    """A part name that is one key segment (lone surrogates cannot name a file)."""
    if not name or "/" in name or "\\" in name or name in (".", "..") or "\0" in name:
        return False
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _present_parts(
    store: Store, key: str, manifest: DatasetManifest, max_workers: int
) -> list[_Part]:
    names = manifest.parts
    if not names:
        raise ManifestCorrupted(
            f"{manifest_key(key)} lists no parts", reason="empty parts", key=key
        )
    bad = [n for n in names if not _plain_name(n)]
    if bad:
        raise ManifestCorrupted(
            f"{manifest_key(key)} lists invalid part names {bad}",
            reason="invalid part names",
            key=key,
        )
    if len(set(names)) != len(names):
        raise ManifestCorrupted(
            f"{manifest_key(key)} lists a part twice: {names}", reason="duplicate parts", key=key
        )

    def size(name: str) -> int | None:
        try:
            return store.head(part_key(key, name)).size
        except NotFound:
            return None

    sizes = store.map_concurrent(size, names, max_workers=max_workers)
    missing = [n for n, s in zip(names, sizes, strict=True) if s is None]
    if missing:
        raise DatasetIncomplete(f"dataset {key!r} is incomplete: missing parts {missing}", key=key)
    return [
        _Part(key=part_key(key, n), size=s)
        for n, s in zip(names, sizes, strict=True)
        if s is not None
    ]


def _fetch(store: Store, part: _Part) -> pq.ParquetFile:
    """Whole-object get: one request per part when every column is read anyway."""

    def source() -> tuple[Any, RawFooter]:
        data = _get(store, part.key)
        return pa.BufferReader(pa.py_buffer(data)), footer_from_bytes(memoryview(data), part.key)

    return _parse(part, source)


def _open(store: Store, part: _Part) -> pq.ParquetFile:
    """Footer only; column chunks are fetched by ranged gets when read."""

    def source() -> tuple[Any, RawFooter]:
        handle = store.open(part.key, size=part.size)
        return handle, footer_from_file(handle, part.key)

    return _parse(part, source)


def _get(store: Store, key: str) -> bytes | mmap.mmap:
    try:
        # Zero-copy on local disk (a memory map), a plain get elsewhere.
        return store.read_buffer(key)
    except NotFound:
        raise DatasetIncomplete(f"part {key!r} vanished while being read", key=key) from None


def _parse(part: _Part, source: Callable[[], tuple[Any, RawFooter]]) -> pq.ParquetFile:
    """The part opened by pyarrow once parquetry's own reader checked its footer: pyarrow
    aborts the process on some footers, misreads others (``footer_check``), and an
    encrypted part (snapshots write none) cannot be read without keys."""
    try:
        file, raw = source()
        check_readable(raw, part.key, None, None)
        check_plaintext_footer(raw, part.key)
        return pq.ParquetFile(file)
    except NotFound:
        raise DatasetIncomplete(
            f"part {part.key!r} vanished while being read", key=part.key
        ) from None
    except MemoryError as exc:
        raise out_of_memory(exc, f"reading part {part.key!r}", key=part.key) from None
    except (pa.ArrowException, OSError) as exc:
        raise InvalidFormat(
            f"part {part.key!r} is not a valid Parquet file: {exc}", key=part.key
        ) from None


def _stored_schema_hash(pf: pq.ParquetFile) -> str:
    # The writer's own Arrow schema (what remote-store hashed) is kept in the footer; the
    # schema rebuilt from Parquet types can differ (list item names, date64...).
    stored = (pf.metadata.metadata or {}).get(b"ARROW:schema")
    if stored is not None:
        try:
            return schema_hash(pa.ipc.read_schema(pa.py_buffer(base64.b64decode(stored))))
        except (pa.ArrowException, ValueError):
            pass
    return schema_hash(pf.schema_arrow)


def _check_footers(
    key: str,
    manifest: DatasetManifest,
    parts: list[_Part],
    files: list[pq.ParquetFile],
    columns: Sequence[str] | None,
) -> None:
    rows = sum(pf.metadata.num_rows for pf in files)
    if rows != manifest.row_count:
        raise ManifestCorrupted(
            f"{manifest_key(key)} says row_count {manifest.row_count} but its parts hold "
            f"{rows} rows",
            reason="row_count does not match the parts",
            key=key,
        )
    for part, pf in zip(parts, files, strict=True):
        found = _stored_schema_hash(pf)
        if found != manifest.schema_hash:
            raise ManifestCorrupted(
                f"{manifest_key(key)} says schema_hash {manifest.schema_hash!r} but part "
                f"{part.key!r} has schema hash {found!r}",
                reason="schema_hash does not match the parts",
                key=key,
            )
    if columns:
        names = set(files[0].schema_arrow.names)
        unknown = [c for c in columns if c not in names]
        if unknown:
            raise UnknownColumn(
                f"dataset {key!r} has no column(s) {unknown}; it has {files[0].schema_arrow.names}",
                column=unknown[0],
                key=key,
            )


def _read(part: _Part, pf: pq.ParquetFile, columns: Sequence[str] | None) -> pa.Table:
    try:
        table = pf.read(columns=list(columns) if columns is not None else None, use_threads=True)
    except MemoryError as exc:
        raise out_of_memory(exc, f"decoding part {part.key!r}", key=part.key) from None
    except (pa.ArrowException, OSError) as exc:
        if isinstance(exc, NotFound):
            raise DatasetIncomplete(
                f"part {part.key!r} vanished while being read: {exc}", key=part.key
            ) from None
        raise InvalidFormat(f"cannot decode part {part.key!r}: {exc}", key=part.key) from None
    if table.num_rows != pf.metadata.num_rows:
        # Rows lost between the pages and the table must not pass silently.
        raise InvalidFormat(
            f"part {part.key!r} decoded {table.num_rows} rows, its footer says "
            f"{pf.metadata.num_rows}",
            key=part.key,
        )
    return table


def _unchanged(store: Store, key: str, raw: bytes) -> bool:
    if not store.exists(success_key(key)):
        return False
    try:
        return store.get(manifest_key(key)) == raw
    except NotFound:
        return False
