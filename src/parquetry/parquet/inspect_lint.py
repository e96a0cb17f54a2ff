"""Warnings ``parquetry inspect`` prints about a file: what breaks readers or wastes bytes.

Based on the interop matrix in the project's Parquet fact sheet: Spark 4 cannot read
TIMESTAMP(NANOS), TIME, FLOAT16, UUID or brotli; Spark's vectorised reader and fastparquet
reject BYTE_STREAM_SPLIT and DELTA_* encodings; INT96 is deprecated.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from parquetry.parquet.inspect import RowGroupReport, SchemaColumn

__all__ = ["count_findings", "lint", "type_findings"]

#: Row groups smaller than this (in a multi-group file) cost footer bytes and requests.
SMALL_ROW_GROUP = 10_000
_SPARK_UNREADABLE = ("TIMESTAMP(NANOS", "TIME(", "FLOAT16", "UUID")
_PICKY_ENCODINGS = (
    "BYTE_STREAM_SPLIT",
    "DELTA_BINARY_PACKED",
    "DELTA_LENGTH_BYTE_ARRAY",
    "DELTA_BYTE_ARRAY",
)


def lint(schema: tuple[SchemaColumn, ...], groups: tuple[RowGroupReport, ...]) -> tuple[str, ...]:
    """Human-readable warnings, most important first, each naming the column at fault."""
    out: list[str] = []
    for column in schema:
        logical = column.logical_type or ""
        if column.physical_type == "INT96":
            out.append(f"{column.path}: INT96 timestamps are deprecated (write INT64 micros)")
        if logical.startswith(_SPARK_UNREADABLE):
            out.append(f"{column.path}: Spark cannot read the {logical} type")
        if logical.startswith("INT(64,unsigned"):
            out.append(f"{column.path}: uint64 reads as decimal(20,0) in Spark")
    # INT96 has no defined sort order, so writers leave out its min/max on purpose.
    unordered = {c.path for c in schema if c.physical_type == "INT96"}
    seen: set[tuple[str, str]] = set()
    for group in groups:
        for chunk in group.chunks:
            notes = []
            if chunk.codec == "BROTLI":
                notes.append("brotli compression: Spark cannot read it")
            picky = [e for e in chunk.encodings if e in _PICKY_ENCODINGS]
            if picky:
                notes.append(f"{'/'.join(picky)}: Spark's vectorised reader rejects it")
            if chunk.dictionary_fallback:
                notes.append("dictionary fell back to PLAIN: a high-cardinality column")
            has_values = chunk.null_count != chunk.num_values
            if (
                not chunk.encrypted
                and chunk.min is None
                and has_values
                and chunk.path not in unordered
            ):
                notes.append("no min/max statistics (values over 4 KiB, or stats disabled)")
            for note in notes:
                if (chunk.path, note) not in seen:
                    seen.add((chunk.path, note))
                    out.append(f"{chunk.path}: {note}")
    small = [g for g in groups[:-1] if g.rows < SMALL_ROW_GROUP]
    if small:
        out.append(
            f"{len(small)} row group(s) under {SMALL_ROW_GROUP:,} rows: more footer bytes and "
            "requests per row read"
        )
    return tuple(out)


def type_findings(schema: tuple[SchemaColumn, ...], leaves: list[dict[int, Any]]) -> list[str]:
    """Type ids the Parquet format does not define (shown as ``?``)."""
    out = []
    for column, leaf in zip(schema, leaves, strict=True):
        if column.physical_type == "?":
            out.append(f"{column.path}: unknown physical type id {leaf.get(1)} (shown as ?)")
        if column.repetition == "?":
            out.append(f"{column.path}: unknown repetition id {leaf.get(3)} (shown as ?)")
    return out


def count_findings(rows: int | None, groups: tuple[RowGroupReport, ...], columns: int) -> list[str]:
    """Counts that contradict each other or cannot be: the footer is corrupted or lies."""
    out = []
    if rows is None:
        out.append("the footer does not state the number of rows")
    elif rows < 0:
        out.append(f"the footer states a negative number of rows ({rows})")
    total = sum(g.rows for g in groups)
    if rows is not None and total != rows:
        out.append(f"the row groups hold {total} rows, the footer states {rows}")
    for group in groups:
        if group.rows < 0:
            out.append(f"row group {group.index} states a negative number of rows ({group.rows})")
        if len(group.chunks) != columns:
            out.append(
                f"row group {group.index} has {len(group.chunks)} column chunks for "
                f"{columns} columns"
            )
        for chunk in group.chunks:
            for what, value in (
                ("values", chunk.num_values),
                ("compressed bytes", chunk.compressed_size),
                ("uncompressed bytes", chunk.uncompressed_size),
                ("nulls", chunk.null_count),
            ):
                if value is not None and value < 0:
                    out.append(
                        f"{chunk.path}: row group {group.index} states negative {what} ({value})"
                    )
            if chunk.codec == "?":
                out.append(
                    f"{chunk.path}: row group {group.index} has an unknown codec (shown as ?)"
                )
            if not chunk.min_max_trusted:
                out.append(
                    f"{chunk.path}: DECIMAL min/max from an old writer (deprecated statistics "
                    "or no column order) are untrustworthy"
                )
    return list(dict.fromkeys(out))  # one line per distinct finding
