"""``parquetry inspect``: everything a Parquet footer says, fetched from the tail only.

:func:`inspect_file` reads the last 64 KiB of an object (one more ranged read for a
larger footer), decodes the footer with parquetry's own Thrift reader — never pyarrow, so
encrypted columns are reported instead of aborting the process — and returns a frozen
:class:`FileReport` with a stable JSON form. :func:`render` turns a report into rich
renderables (rich is imported only there).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from parquetry.errors import InvalidFormat
from parquetry.parquet.footer import RawFooter, footer_from_store
from parquetry.parquet.footer_types import (
    CODECS,
    CONVERTED_TYPES,
    ENCODINGS,
    PHYSICAL_TYPES,
    REPETITIONS,
    decode_stat,
    logical_type_name,
)
from parquetry.parquet.inspect_lint import count_findings, lint, type_findings

if TYPE_CHECKING:
    from parquetry.store.base import Store

__all__ = [
    "ChunkReport",
    "ColumnSummary",
    "EncryptionReport",
    "FileReport",
    "REPORT_FORMAT",
    "RowGroupReport",
    "SchemaColumn",
    "inspect_file",
    "render",
]

#: Version tag of the JSON document; bump when a field changes meaning.
REPORT_FORMAT = "parquetry.inspect/1"


@dataclass(frozen=True, slots=True, kw_only=True)
class SchemaColumn:
    path: str
    physical_type: str
    logical_type: str | None
    converted_type: str | None
    repetition: str
    max_repetition_level: int
    max_definition_level: int
    field_id: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class ChunkReport:
    path: str
    codec: str | None
    encodings: tuple[str, ...]
    num_values: int | None
    compressed_size: int | None
    uncompressed_size: int | None
    null_count: int | None
    min: str | None
    max: str | None
    has_dictionary_page: bool
    has_column_index: bool
    has_offset_index: bool
    has_bloom_filter: bool
    dictionary_fallback: bool  # some data pages dictionary-encoded, some PLAIN
    encrypted: bool
    # False when min/max of a binary DECIMAL come from the deprecated Statistics fields or a
    # file without column orders: old writers compared those bytes as signed (PARQUET-686).
    min_max_trusted: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class RowGroupReport:
    index: int
    rows: int
    total_byte_size: int
    compressed_size: int
    sorting_columns: tuple[str, ...]
    chunks: tuple[ChunkReport, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ColumnSummary:
    path: str
    compressed_size: int
    uncompressed_size: int
    compression_ratio: float | None  # uncompressed / compressed
    share_of_file: float
    null_count: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class EncryptionReport:
    encrypted_footer: bool
    algorithm: str | None
    encrypted_columns: tuple[tuple[str, str | None], ...]  # (path, master key id)


@dataclass(frozen=True, slots=True, kw_only=True)
class FileReport:
    """What one Parquet file's footer says. ``rows`` etc. are None for encrypted footers."""

    key: str
    file_size: int
    footer_size: int
    rows: int | None
    created_by: str | None
    format_version: int | None
    key_value_metadata: tuple[tuple[str, int], ...]  # (key, value size in bytes)
    schema: tuple[SchemaColumn, ...]
    row_groups: tuple[RowGroupReport, ...]
    columns: tuple[ColumnSummary, ...]
    encryption: EncryptionReport | None
    warnings: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """A stable JSON document (keys never renamed within :data:`REPORT_FORMAT`)."""
        from dataclasses import asdict

        doc: dict[str, Any] = _jsonable(asdict(self))
        doc["format"] = REPORT_FORMAT
        return doc


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


def inspect_file(store: Store, key: str) -> FileReport:
    """Report on ``key`` from its footer only (a head and one or two ranged reads).

    Raises:
        InvalidFormat: not a Parquet file, truncated, or a corrupted footer.
        NotFound: no such key.
    """
    raw = footer_from_store(store, key)
    return build_report(raw, key)


def build_report(raw: RawFooter, key: str) -> FileReport:
    """The report of an already-fetched footer."""
    footer_size = raw.footer_length + 8
    if raw.metadata is None:
        crypto = raw.crypto or {}
        return FileReport(
            key=key,
            file_size=raw.file_size,
            footer_size=footer_size,
            rows=None,
            created_by=None,
            format_version=None,
            key_value_metadata=(),
            schema=(),
            row_groups=(),
            columns=(),
            encryption=EncryptionReport(
                encrypted_footer=True, algorithm=_algorithm(crypto.get(1)), encrypted_columns=()
            ),
        )
    meta = raw.metadata
    elements = meta.get(2, [])
    findings: list[str] = []
    schema, leaves = _schema(elements, key)
    findings += type_findings(schema, leaves)
    ordered = bool(meta.get(7))
    row_groups = tuple(
        _row_group(i, rg, schema, leaves, raw.file_size, key, ordered)
        for i, rg in enumerate(meta.get(4, []))
    )
    findings += count_findings(meta.get(3), row_groups, len(schema))
    encryption = None
    if raw.encrypted:
        encryption = EncryptionReport(
            encrypted_footer=False,
            algorithm=_algorithm(meta.get(8)),
            encrypted_columns=tuple((c.path, c.key_id) for c in raw.encrypted_columns()),
        )
    created_by = meta.get(6)
    columns = _summaries(schema, row_groups, raw.file_size)
    return FileReport(
        key=key,
        file_size=raw.file_size,
        footer_size=footer_size,
        rows=meta.get(3),
        created_by=created_by.decode("utf-8", "replace") if created_by else None,
        format_version=meta.get(1),
        key_value_metadata=tuple(
            (kv.get(1, b"").decode("utf-8", "replace"), len(kv.get(2) or b""))
            for kv in meta.get(5, [])
        ),
        schema=schema,
        row_groups=row_groups,
        columns=columns,
        encryption=encryption,
        warnings=(*findings, *lint(schema, row_groups)),
    )


def _algorithm(union: dict[int, Any] | None) -> str | None:
    if not union:
        return None
    return {1: "AES_GCM_V1", 2: "AES_GCM_CTR_V1"}.get(next(iter(union)), "unknown")


def _schema(
    elements: list[dict[int, Any]], key: str
) -> tuple[tuple[SchemaColumn, ...], list[dict[int, Any]]]:
    columns: list[SchemaColumn] = []
    leaves: list[dict[int, Any]] = []

    def walk(index: int, prefix: tuple[str, ...], rep: int, definition: int) -> int:
        if index >= len(elements):
            raise InvalidFormat(f"{key}: the footer's schema is truncated", key=key)
        element = elements[index]
        repetition = element.get(3, 0)
        if index:
            rep += repetition == 2
            definition += repetition in (1, 2)
            prefix = (*prefix, element.get(4, b"").decode("utf-8", "replace"))
        index += 1
        children = element.get(5, 0)
        if index > 1 and not children:
            leaves.append(element)
            columns.append(
                SchemaColumn(
                    path=".".join(prefix),
                    physical_type=PHYSICAL_TYPES.get(element.get(1, -1), "?"),
                    logical_type=logical_type_name(element),
                    converted_type=CONVERTED_TYPES.get(element.get(6, -1)),
                    repetition=REPETITIONS.get(repetition, "?"),
                    max_repetition_level=rep,
                    max_definition_level=definition,
                    field_id=element.get(9),
                )
            )
        for _ in range(children):
            index = walk(index, prefix, rep, definition)
        return index

    if elements:
        walk(0, (), 0, 0)
    return tuple(columns), leaves


def _row_group(
    index: int,
    group: dict[int, Any],
    schema: tuple[SchemaColumn, ...],
    leaves: list[dict[int, Any]],
    file_size: int,
    key: str,
    ordered: bool,
) -> RowGroupReport:
    chunks = []
    for position, chunk in enumerate(group.get(1, [])):
        if position >= len(schema):
            raise InvalidFormat(
                f"{key}: row group {index} has more columns than the schema", key=key
            )
        path, leaf = schema[position].path, leaves[position]
        chunks.append(_chunk(chunk, path, leaf, file_size, key, ordered))
    sorting = tuple(
        f"{schema[s.get(1, 0)].path} {'desc' if s.get(2) else 'asc'}"
        for s in group.get(4, [])
        if 0 <= s.get(1, 0) < len(schema)
    )
    compressed = group.get(6) or sum(c.compressed_size or 0 for c in chunks)
    return RowGroupReport(
        index=index,
        rows=group.get(3, 0),
        total_byte_size=group.get(2, 0),
        compressed_size=compressed,
        sorting_columns=sorting,
        chunks=tuple(chunks),
    )


def _chunk(
    chunk: dict[int, Any],
    path: str,
    element: dict[int, Any],
    file_size: int,
    key: str,
    ordered: bool,
) -> ChunkReport:
    encrypted = 8 in chunk or 9 in chunk
    meta = chunk.get(3) or {}
    stats = {} if encrypted else meta.get(12) or {}
    start = meta.get(11) or meta.get(9)
    size = meta.get(7)
    if start is not None and size is not None and start + size > file_size:
        raise InvalidFormat(
            f"{key}: column {path!r} ends at byte {start + size}, past the end of the "
            f"{file_size}-byte file (truncated)",
            key=key,
        )
    return ChunkReport(
        path=path,
        codec=CODECS.get(meta[4], "?") if 4 in meta else None,
        encodings=tuple(ENCODINGS.get(e, str(e)) for e in meta.get(2, [])),
        num_values=meta.get(5),
        compressed_size=size,
        uncompressed_size=meta.get(6),
        null_count=stats.get(3),
        min=decode_stat(stats.get(6, stats.get(2)), element),
        max=decode_stat(stats.get(5, stats.get(1)), element),
        has_dictionary_page=meta.get(11) is not None,
        has_column_index=chunk.get(6) is not None,
        has_offset_index=chunk.get(4) is not None,
        has_bloom_filter=meta.get(14) is not None,
        dictionary_fallback=_fell_back(meta.get(13) or []),
        encrypted=encrypted,
        min_max_trusted=_trusted(stats, element, ordered),
    )


def _trusted(stats: dict[int, Any], element: dict[int, Any], ordered: bool) -> bool:
    """Whether min/max can be believed (see ChunkReport.min_max_trusted)."""
    decimal = 5 in (element.get(10) or {}) or element.get(6) == 5
    if not decimal or element.get(1) not in (6, 7):  # BYTE_ARRAY, FIXED_LEN_BYTE_ARRAY
        return True
    deprecated = (1 in stats or 2 in stats) and not (5 in stats or 6 in stats)
    return not deprecated and (ordered or not (5 in stats or 6 in stats))


def _fell_back(encoding_stats: list[dict[int, Any]]) -> bool:
    """PageEncodingStats: data pages (types 0 and 3) both dictionary-encoded and not."""
    data_encodings = {s.get(2) for s in encoding_stats if s.get(1) in (0, 3) and s.get(3, 0)}
    return bool(data_encodings & {2, 8}) and bool(data_encodings - {2, 8})


def _summaries(
    schema: tuple[SchemaColumn, ...], groups: tuple[RowGroupReport, ...], file_size: int
) -> tuple[ColumnSummary, ...]:
    out = []
    for position, column in enumerate(schema):
        chunks = [g.chunks[position] for g in groups if position < len(g.chunks)]
        compressed = sum(c.compressed_size or 0 for c in chunks)
        uncompressed = sum(c.uncompressed_size or 0 for c in chunks)
        nulls = [c.null_count for c in chunks]
        out.append(
            ColumnSummary(
                path=column.path,
                compressed_size=compressed,
                uncompressed_size=uncompressed,
                compression_ratio=round(uncompressed / compressed, 3) if compressed else None,
                share_of_file=round(compressed / file_size, 4) if file_size else 0.0,
                null_count=None if any(n is None for n in nulls) else sum(n or 0 for n in nulls),
            )
        )
    return tuple(out)


def render(report: FileReport) -> list[Any]:
    """Rich renderables for a report (imports rich lazily)."""
    from parquetry.parquet.inspect_render import render_report

    return render_report(report)
