"""Human output of ``parquetry inspect``: aligned rich tables built from a FileReport.

rich is imported inside :func:`render_report` only, so importing parquetry never loads it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from parquetry.parquet.inspect import FileReport

__all__ = ["render_report"]


def _size(n: int | None) -> str:
    if n is None:
        return "-"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"  # pragma: no cover - loop always returns


def _flags(chunk: Any) -> str:
    flags = []
    if chunk.has_dictionary_page:
        flags.append("dict")
    if chunk.has_column_index or chunk.has_offset_index:
        flags.append("page-index")
    if chunk.has_bloom_filter:
        flags.append("bloom")
    if chunk.encrypted:
        flags.append("ENCRYPTED")
    return ",".join(flags) or "-"


def render_report(report: FileReport) -> list[Any]:
    """Tables: file, encryption, schema, row groups with column chunks, per-column bytes."""
    from rich.table import Table

    out: list[Any] = []
    overview = Table(title=f"Parquet file {report.key}", show_header=False)
    overview.add_column("property", style="bold")
    overview.add_column("value")
    share = report.footer_size / report.file_size if report.file_size else 0.0
    overview.add_row("file size", f"{_size(report.file_size)} ({report.file_size} B)")
    overview.add_row("footer", f"{_size(report.footer_size)} ({share:.2%} of file)")
    overview.add_row("rows", "-" if report.rows is None else f"{report.rows:,}")
    overview.add_row("row groups", str(len(report.row_groups)))
    overview.add_row("created by", report.created_by or "-")
    overview.add_row("format version", str(report.format_version or "-"))
    for key, size in report.key_value_metadata:
        overview.add_row(f"metadata {key}", _size(size))
    out.append(overview)

    if report.encryption is not None:
        enc = report.encryption
        table = Table(title="Encryption")
        for column in ("footer", "algorithm", "encrypted columns"):
            table.add_column(column)
        columns = ", ".join(f"{p} (key {k or '?'})" for p, k in enc.encrypted_columns)
        footer = "encrypted" if enc.encrypted_footer else "plaintext (signed)"
        table.add_row(
            footer, enc.algorithm or "-", columns or ("all" if enc.encrypted_footer else "-")
        )
        out.append(table)

    if report.schema:
        schema = Table(title="Schema")
        for column in (
            "path",
            "physical",
            "logical",
            "converted",
            "repetition",
            "max rep",
            "max def",
        ):
            schema.add_column(column, justify="right" if column.startswith("max") else "left")
        for col in report.schema:
            schema.add_row(
                col.path,
                col.physical_type,
                col.logical_type or "-",
                col.converted_type or "-",
                col.repetition,
                str(col.max_repetition_level),
                str(col.max_definition_level),
            )
        out.append(schema)

    for group in report.row_groups:
        table = Table(
            title=f"Row group {group.index}: {group.rows:,} rows, "
            f"{_size(group.compressed_size)} compressed, {_size(group.total_byte_size)} raw"
            + (f", sorted by {', '.join(group.sorting_columns)}" if group.sorting_columns else "")
        )
        for column in (
            "column",
            "codec",
            "encodings",
            "compressed",
            "uncompressed",
            "nulls",
            "min",
            "max",
            "pages",
        ):
            table.add_column(
                column,
                justify="right" if column in ("compressed", "uncompressed", "nulls") else "left",
            )
        for chunk in group.chunks:
            table.add_row(
                chunk.path,
                chunk.codec or "-",
                ",".join(chunk.encodings) or "-",
                _size(chunk.compressed_size),
                _size(chunk.uncompressed_size),
                "-" if chunk.null_count is None else str(chunk.null_count),
                _clip(chunk.min) + ("" if chunk.min_max_trusted else " (untrusted)"),
                _clip(chunk.max) + ("" if chunk.min_max_trusted else " (untrusted)"),
                _flags(chunk),
            )
        out.append(table)

    if report.columns:
        summary = Table(title="Bytes per column")
        for column in ("column", "compressed", "uncompressed", "ratio", "share of file"):
            summary.add_column(column, justify="left" if column == "column" else "right")
        for total in report.columns:
            summary.add_row(
                total.path,
                _size(total.compressed_size),
                _size(total.uncompressed_size),
                "-" if total.compression_ratio is None else f"{total.compression_ratio:.2f}x",
                f"{total.share_of_file:.1%}",
            )
        out.append(summary)
    if report.warnings:
        warnings = Table(title="Warnings", show_header=False)
        warnings.add_column("warning", style="yellow")
        for warning in report.warnings:
            warnings.add_row(warning)
        out.append(warnings)
    return out


def _clip(text: str | None, width: int = 32) -> str:
    if text is None:
        return "-"
    return text if len(text) <= width else text[: width - 1] + "…"
