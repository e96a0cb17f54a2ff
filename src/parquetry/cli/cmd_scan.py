"""``scan``: read rows of a dataset with a ``--where`` filter, or ``--explain`` the plan."""

from __future__ import annotations

import enum
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from parquetry.cli.common import (
    DatasetArg,
    Endpoint,
    Region,
    StoreOptions,
    UrlArg,
    emit_json,
    open_cli_store,
    out_console,
    progress,
)
from parquetry.errors import InvalidArgument, UnknownColumn

if TYPE_CHECKING:
    import pyarrow as pa

    from parquetry.cli.targets import DatasetRef
    from parquetry.store import Store

__all__ = ["register"]

#: Rows ``--format table`` prints when no ``--limit`` is given.
TABLE_DEFAULT_LIMIT = 50


class OutputFormat(enum.StrEnum):
    table = "table"
    csv = "csv"
    json = "json"
    parquet = "parquet"


def scan(
    url: UrlArg,
    dataset: DatasetArg,
    where: Annotated[
        str | None,
        typer.Option(
            "--where",
            "-w",
            show_default=False,
            help="Filter, SQL-like: \"country = 'DE' and day >= date '2021-01-02'\". Operators: "
            "= != <> < <= > >= in (...), not in (...), is [not] null, and, or, not, parentheses. "
            "Values: 1, 2.5, 'text', true, false, date '...', timestamp '...', decimal '...'.",
        ),
    ] = None,
    columns: Annotated[
        str | None,
        typer.Option(
            "--columns",
            "-c",
            help="Comma-separated columns to return (default: all).",
            show_default=False,
        ),
    ] = None,
    version: Annotated[
        int | None,
        typer.Option(
            "--version",
            min=0,
            help="Version to read (kartothek-format datasets).",
            show_default=False,
        ),
    ] = None,
    limit: Annotated[
        int | None,
        typer.Option(
            "--limit",
            "-n",
            min=0,
            show_default=False,
            help=f"Return at most this many rows (--format table: {TABLE_DEFAULT_LIMIT} unless "
            "given).",
        ),
    ] = None,
    fmt: Annotated[
        OutputFormat,
        typer.Option(
            "--format",
            "-f",
            help="Output format; json is JSON Lines (one object per row).",
        ),
    ] = OutputFormat.table,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            dir_okay=False,
            show_default=False,
            help="Write to this file instead of stdout (required for --format parquet).",
        ),
    ] = None,
    explain: Annotated[
        bool,
        typer.Option(
            "--explain",
            help="Print the plan (files kept, partitions pruned and why, store "
            "requests) without reading data; --format json prints it as JSON.",
        ),
    ] = False,
    endpoint: Endpoint = None,
    region: Region = None,
) -> None:
    """Read rows of a dataset, filtered by --where and projected to --columns."""
    from parquetry.cli.targets import resolve_dataset
    from parquetry.cli.where import where_to_predicates

    # Parse everything the user typed before touching the store.
    predicates = where_to_predicates(where) if where is not None else None
    cols = _columns(columns)
    if fmt is OutputFormat.parquet and output is None and not explain:
        raise InvalidArgument("--format parquet needs --output FILE")
    if fmt is OutputFormat.table and output is not None:
        raise InvalidArgument("--output needs --format csv, json or parquet")
    store = open_cli_store(url, StoreOptions(endpoint=endpoint, region=region))
    ref = resolve_dataset(store, dataset)
    if explain:
        _explain(store, ref, predicates, version, as_json=fmt is OutputFormat.json)
        return
    if limit is None and fmt is OutputFormat.table:
        limit = TABLE_DEFAULT_LIMIT
    batches, schema, expected = _batches(store, ref, predicates, cols, version)
    _write(_limited(batches, limit, expected), schema, fmt, output)


def _columns(text: str | None) -> list[str] | None:
    if text is None:
        return None
    cols = [c.strip() for c in text.split(",")]
    if not all(cols):
        raise InvalidArgument(f"--columns {text!r} has an empty column name")
    return cols


def _batches(
    store: Store, ref: DatasetRef, predicates: Any, cols: list[str] | None, version: int | None
) -> tuple[Iterator[pa.RecordBatch], pa.Schema, int | None]:
    if ref.kind == "snapshot":
        if version is not None:
            raise InvalidArgument(f"{ref.name!r} is a snapshot dataset: it keeps no versions")
        return _snapshot_batches(store, ref.name, predicates, cols)
    import pyarrow as pa

    from parquetry.dataset import Dataset

    ds = Dataset.open(store, ref.name, version=version)
    for c in cols or ():
        if c not in ds.schema.names:
            raise UnknownColumn(
                f"column {c!r} is not in dataset {ref.name!r} (columns: "
                f"{', '.join(ds.schema.names)})",
                column=c,
            )
    plan = ds.plan(predicates)  # validates the predicates against the schema first
    schema = ds.schema if cols is None else pa.schema([ds.schema.field(c) for c in cols])
    return ds.scan(columns=cols, predicates=predicates), schema, plan.rows


def _snapshot_batches(
    store: Store, key: str, predicates: Any, cols: list[str] | None
) -> tuple[Iterator[pa.RecordBatch], pa.Schema, int | None]:
    from parquetry.dataset.predicates import to_expression, validate_predicates
    from parquetry.snapshot import ParquetDatasetStore

    pds = ParquetDatasetStore(store)
    if predicates is None:
        table = pds.read_dataset(key, columns=cols)
    else:
        # Read the filter's columns too, then drop them after filtering.
        needed = (
            None
            if cols is None
            else sorted(set(cols) | {c for conj in predicates for c, _, _ in conj})
        )
        table = pds.read_dataset(key, columns=needed)
        dnf = validate_predicates(predicates, table.schema)
        assert dnf is not None
        table = table.filter(to_expression(dnf))
        if cols is not None:
            table = table.select(cols)
    return iter(table.to_batches()), table.schema, table.num_rows


def _limited(
    batches: Iterator[pa.RecordBatch], limit: int | None, expected: int | None
) -> Iterator[pa.RecordBatch]:
    total = expected if limit is None or expected is None else min(limit, expected)
    seen = 0
    with progress("reading rows", total=total) as bar:
        for batch in batches:
            if limit is not None and seen + batch.num_rows >= limit:
                yield batch.slice(0, limit - seen)
                bar.update(completed=limit)
                return
            seen += batch.num_rows
            bar.update(completed=seen)
            yield batch


def _write(
    batches: Iterator[pa.RecordBatch], schema: pa.Schema, fmt: OutputFormat, output: Path | None
) -> None:
    import pyarrow as pa

    if fmt is OutputFormat.table:
        table = pa.Table.from_batches(list(batches), schema=schema)
        _print_table(table)
        return
    if fmt is OutputFormat.parquet:
        import pyarrow.parquet as pq

        from parquetry.parquet import WriteOptions

        assert output is not None
        with pq.ParquetWriter(output, schema, **WriteOptions().writer_kwargs(schema)) as writer:
            for batch in batches:
                writer.write_batch(batch)
        return
    sink = open(output, "wb") if output is not None else None  # noqa: SIM115
    stream = sink or typer.get_binary_stream("stdout")
    try:
        if fmt is OutputFormat.csv:
            _write_csv(batches, schema, stream)
        else:
            _write_json_lines(batches, stream)
    finally:
        if sink is not None:
            sink.close()
        else:
            stream.flush()


def _write_csv(batches: Iterator[pa.RecordBatch], schema: pa.Schema, stream: Any) -> None:
    import pyarrow.csv as pacsv

    with pacsv.CSVWriter(stream, schema) as writer:
        for batch in batches:
            writer.write_batch(batch)


def _write_json_lines(batches: Iterator[pa.RecordBatch], stream: Any) -> None:
    import json

    from parquetry.cli.common import _json_default

    for batch in batches:
        for row in batch.to_pylist():
            line = json.dumps(row, default=_json_default, ensure_ascii=False)
            stream.write(line.encode("utf-8") + b"\n")


def _print_table(table: pa.Table) -> None:
    from rich import box
    from rich.table import Table

    view = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    for name in table.column_names:
        view.add_column(name, overflow="fold")
    for row in table.to_pylist():
        view.add_row(*("null" if v is None else str(v) for v in row.values()))
    console = out_console()
    console.print(view)
    console.print(f"{table.num_rows:,} rows", style="dim")


def _explain(
    store: Store, ref: DatasetRef, predicates: Any, version: int | None, *, as_json: bool
) -> None:
    from parquetry.cli.where import format_literal

    if ref.kind == "snapshot":
        from parquetry.cli.views import dataset_files

        if version is not None:
            raise InvalidArgument(f"{ref.name!r} is a snapshot dataset: it keeps no versions")
        files = dataset_files(store, ref)
        doc: dict[str, Any] = {
            "dataset": ref.name,
            "kind": "snapshot",
            "version": None,
            "predicates": predicates,
            "files": [f.key for f in files],
            "rows": None,
            "bytes": sum(f.size or 0 for f in files),
            "pruned": [],
            "requests": None,
            "note": "snapshot datasets are read whole; the filter applies to every row",
        }
    else:
        from parquetry.dataset import Dataset

        ds = Dataset.open(store, ref.name, version=version)
        plan = ds.plan(predicates)
        doc = {
            "dataset": ref.name,
            "kind": "kartothek",
            "version": plan.version,
            "predicates": predicates,
            "files": [f.key for f in plan.files],
            "rows": plan.rows,
            "bytes": sum(f.size or 0 for f in plan.files),
            "pruned": [
                {"partition": label, "reason": p.reason, "column": p.column}
                for p in plan.pruned
                for label in sorted(p.labels)
            ],
            "requests": plan.requests,
            "request_keys": list(plan.request_keys),
        }
    if as_json:
        from parquetry.dataset.predicates import dnf_to_json

        emit_json({**doc, "predicates": dnf_to_json(predicates) if predicates else None})
        return
    _print_explain(doc, format_literal)


def _print_explain(doc: dict[str, Any], format_literal: Any) -> None:
    from parquetry.cli.svg import human_bytes

    echo = typer.echo
    version = "-" if doc["version"] is None else doc["version"]
    echo(f"dataset {doc['dataset']} ({doc['kind']}), version {version}")
    if doc["predicates"]:
        echo("predicates (OR of AND):")
        for conj in doc["predicates"]:
            terms = [
                f"{c} {op}"
                if op.startswith("is")
                else f"{c} {op} [{', '.join(format_literal(v) for v in val)}]"
                if op == "in"
                else f"{c} {op} {format_literal(val)}"
                for c, op, val in conj
            ]
            echo("  " + " and ".join(terms))
    rows = "unknown" if doc["rows"] is None else f"{doc['rows']:,}"
    echo(f"files to read: {len(doc['files']):,} ({human_bytes(doc['bytes'])}, rows: {rows})")
    for key in doc["files"][:20]:
        echo(f"  {key}")
    if len(doc["files"]) > 20:
        echo(f"  ... and {len(doc['files']) - 20:,} more")
    reasons = Counter(p["reason"] for p in doc["pruned"])
    echo(
        f"partitions pruned: {len(doc['pruned']):,}"
        + (
            f" ({', '.join(f'{n:,} by {r}' for r, n in sorted(reasons.items()))})"
            if reasons
            else ""
        )
    )
    for p in doc["pruned"][:20]:
        echo(f"  {p['partition']}: {p['reason']} on {p['column']}")
    if len(doc["pruned"]) > 20:
        echo(f"  ... and {len(doc['pruned']) - 20:,} more")
    if doc.get("note"):
        echo(f"note: {doc['note']}")
    if doc["requests"] is not None:
        echo(f"store requests to open and plan: {doc['requests']}")
    sys.stdout.flush()


def register(app: typer.Typer) -> None:
    app.command("scan")(scan)
