"""``encode``: JSON lines to one Parquet file through the record codec's explicit schema."""

from __future__ import annotations

import io
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Annotated, Any

import typer

from parquetry.cli.common import Endpoint, JsonFlag, Region, StoreOptions, emit_json
from parquetry.errors import InvalidArgument, SchemaViolation

__all__ = ["register"]

#: Records validated and converted per batch (the stream writer holds one row group).
BATCH_RECORDS = 32 * 1024


def _lines(source: IO[str], first_line: int = 1) -> Iterator[tuple[int, Any]]:
    """``(line number, parsed JSON)`` of each non-blank line."""
    for number, line in enumerate(source, start=first_line):
        if not line.strip():
            continue
        try:
            yield number, json.loads(line)
        except ValueError as exc:
            raise InvalidArgument(f"line {number}: not valid JSON: {exc}") from None


def _batches(source: IO[str]) -> Iterator[tuple[list[int], list[Any]]]:
    numbers: list[int] = []
    records: list[Any] = []
    for number, record in _lines(source):
        numbers.append(number)
        records.append(record)
        if len(records) == BATCH_RECORDS:
            yield numbers, records
            numbers, records = [], []
    if records:
        yield numbers, records


def _load_schema(path: Path) -> Any:
    from parquetry.codec import ParquetSchema

    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise SchemaViolation(f"{path}: not a JSON schema document: {exc}") from None
    return ParquetSchema.from_json(document)


def encode(
    schema: Annotated[
        Path,
        typer.Argument(
            metavar="SCHEMA",
            show_default=False,
            help='The schema, as JSON: {"fields": [{"name": "id", "type": "int64", '
            '"nullable": false}, ...]}. Types: int32, int64, float32, float64, string, bool, '
            "bytes, timestamp, date, decimal(p,s).",
        ),
    ],
    source: Annotated[
        str,
        typer.Argument(
            metavar="INPUT",
            show_default=False,
            help="JSON lines, one record per line ('-' for standard input).",
        ),
    ],
    target: Annotated[
        str,
        typer.Argument(
            metavar="OUTPUT",
            show_default=False,
            help="The Parquet file to write: a local path or a URL such as "
            "s3://bucket/key.parquet.",
        ),
    ],
    compression: Annotated[
        str,
        typer.Option("--compression", help="zstd, snappy, lz4, gzip or none."),
    ] = "zstd",
    row_group_size: Annotated[
        int | None,
        typer.Option("--row-group-size", min=1, help="Rows per row group (default 131,072)."),
    ] = None,
    json_output: JsonFlag = False,
    endpoint: Endpoint = None,
    region: Region = None,
) -> None:
    """Validate JSON-lines records against SCHEMA and write them as one Parquet file.

    Every record is checked with the record codec's rules (RFC 3339 strings for timestamps,
    "YYYY-MM-DD" for dates, whole floats for ints, ...); the first bad record stops the
    command with its line number and field, and nothing is written. Memory stays bounded
    (one row group); the file appears at OUTPUT only once it is complete.
    """
    from parquetry.cli.cmd_tools import split_file_url
    from parquetry.parquet import ParquetStreamWriter, WriteOptions

    codec_schema = _load_schema(schema)
    options = WriteOptions(compression=compression, row_group_size=row_group_size)
    store, key = split_file_url(
        target, StoreOptions(endpoint=endpoint, region=region), must_exist=False
    )
    started = time.perf_counter()
    stream: IO[str] = (
        io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8")
        if source == "-"
        else Path(source).open(encoding="utf-8")  # noqa: SIM115 (closed below)
    )
    writer = ParquetStreamWriter(schema=codec_schema, options=options, store=store, key=key)
    with stream, writer:
        for numbers, records in _batches(stream):
            try:
                writer.write(records)
            except SchemaViolation as exc:
                raise _at_line(exc, numbers) from None
    meta = writer.result
    assert meta is not None
    summary = {
        "output": target,
        "rows": writer.rows_written,
        "row_groups": writer.row_groups_written,
        "bytes": meta.size,
        "seconds": round(time.perf_counter() - started, 3),
    }
    if json_output:
        emit_json(summary)
        return
    groups = summary["row_groups"]
    typer.echo(
        f"wrote {summary['rows']:,} rows in {groups} row group{'' if groups == 1 else 's'} "
        f"({summary['bytes']:,} bytes) to {target} in {summary['seconds']} s"
    )


def _at_line(exc: SchemaViolation, numbers: list[int]) -> SchemaViolation:
    """The violation with the input line instead of the record's index (every batch but
    the last is full, so the index within the batch is the index modulo the batch size)."""
    if exc.index is None:
        return exc
    position = exc.index % BATCH_RECORDS
    if position >= len(numbers):
        return exc
    line = numbers[position]
    message = str(exc).replace(f"record {exc.index}", f"line {line}", 1)
    return SchemaViolation(message, field=exc.field, index=exc.index)


def register(app: typer.Typer) -> None:
    app.command("encode")(encode)
