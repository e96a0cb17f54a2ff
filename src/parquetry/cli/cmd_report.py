"""``report``: collect a dataset's health data and write the self-contained HTML report."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
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
    progress,
)

if TYPE_CHECKING:
    from parquetry.cli.report import ReportData
    from parquetry.cli.targets import DatasetRef
    from parquetry.store import Store

__all__ = ["collect_report", "register"]


def collect_report(
    store: Store, ref: DatasetRef, *, check: bool = True, tick: Callable[[], None] | None = None
) -> ReportData:
    """Everything the report shows, from the footers of every data file (read concurrently)."""
    from parquetry.cli.report import ColumnInfo, FileInfo, ReportData, VersionInfo
    from parquetry.cli.views import dataset_files, dataset_history, dataset_info

    tick = tick or (lambda: None)
    info = dataset_info(store, ref)
    files = dataset_files(store, ref)

    def footer(key_size: tuple[str, int | None]) -> tuple[Any, int, str | None]:
        """(pyarrow metadata or None, rows, problem): unsafe footers never reach pyarrow."""
        from parquetry.errors import NotFound, ParquetryError
        from parquetry.parquet.footer_check import safe_metadata

        key, size = key_size
        try:
            _raw, meta = safe_metadata(store, key, size)
        except NotFound:
            raise
        except ParquetryError as exc:
            tick()
            return None, _raw_rows(store, key, size), str(exc)
        tick()
        return meta, meta.num_rows, None

    results = store.map_concurrent(footer, [(f.key, f.size) for f in files])
    footers = [meta for meta, _rows, _problem in results if meta is not None]
    unreadable = [problem for _meta, _rows, problem in results if problem is not None]
    columns: dict[str, list[int]] = {}
    for meta in footers:
        for rg in range(meta.num_row_groups):
            group = meta.row_group(rg)
            for c in range(group.num_columns):
                chunk = group.column(c)
                top = chunk.path_in_schema.split(".")[0]
                acc = columns.setdefault(top, [0, 0])
                acc[0] += chunk.total_compressed_size
                acc[1] += chunk.total_uncompressed_size
    problems: list[str] = []
    if check:
        from parquetry.cli.checks import validate_dataset

        problems = validate_dataset(store, ref)
    problems += [p for p in unreadable if p not in problems]
    return ReportData(
        dataset=ref.name,
        store=store.url,
        kind=ref.kind,
        version=info.version,
        generated=dt.datetime.now(dt.UTC).replace(microsecond=0),
        schema=info.schema,
        partition_keys=info.partition_keys,
        indices=info.indices,
        files=tuple(
            FileInfo(
                key=f.key,
                partition=f.partition,
                rows=rows,
                size=f.size if f.size is not None else (meta.serialized_size if meta else 0),
            )
            for f, (meta, rows, _problem) in zip(files, results, strict=True)
        ),
        columns=tuple(
            ColumnInfo(name=n, compressed=c, uncompressed=u) for n, (c, u) in columns.items()
        ),
        versions=tuple(
            VersionInfo(
                number=v.number,
                time=v.time,
                operation=v.operation,
                rows_added=v.rows_added,
                rows_removed=v.rows_removed,
                files=v.files_added,
            )
            for v in dataset_history(store, ref)
        )
        if ref.kind == "kartothek"
        else (),
        problems=tuple(problems),
    )


def _raw_rows(store: Store, key: str, size: int | None) -> int:
    """Rows a footer pyarrow must not touch states (0 when unreadable or encrypted)."""
    from parquetry.errors import ParquetryError
    from parquetry.parquet.footer import footer_from_store

    try:
        rows = (footer_from_store(store, key, size).metadata or {}).get(3, 0)
    except ParquetryError:
        return 0
    return rows if isinstance(rows, int) and rows >= 0 else 0


def report(
    url: UrlArg,
    dataset: DatasetArg,
    output: Annotated[
        Path, typer.Option("--output", "-o", dir_okay=False, help="HTML file to write.")
    ] = Path("report.html"),
    check: Annotated[
        bool,
        typer.Option(
            "--check/--no-check",
            help="Run the validate checks and list problems in the report.",
        ),
    ] = True,
    json: Annotated[
        bool,
        typer.Option("--json", help="Print the report's data as JSON instead of writing HTML."),
    ] = False,
    endpoint: Endpoint = None,
    region: Region = None,
) -> None:
    """Write a self-contained HTML health report with charts (no network needed to view).

    Charts: file-size histogram (the small-file problem), rows and bytes per partition (skew),
    bytes per column with compression ratios, rows over the versions.
    """
    from parquetry.cli.checks import file_count
    from parquetry.cli.report import compaction_advice, render_html
    from parquetry.cli.targets import resolve_dataset

    store = open_cli_store(url, StoreOptions(endpoint=endpoint, region=region))
    ref = resolve_dataset(store, dataset)
    with progress(f"reading footers of {ref.name}", total=file_count(store, ref)) as bar:
        data = collect_report(store, ref, check=check, tick=lambda: bar.advance())
    if json:
        emit_json(data.to_json())
        return
    output.write_text(render_html(data), encoding="utf-8")
    typer.echo(f"wrote {output} ({len(data.files)} files, {len(data.problems)} problems)", err=True)
    advice = compaction_advice(data)
    if advice:
        typer.echo(f"recommended: {advice}", err=True)


def register(app: typer.Typer) -> None:
    app.command("report")(report)
