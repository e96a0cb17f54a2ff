"""``ls``, ``show`` and ``history``: what is in a store, what a dataset holds, how it got there."""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Annotated, Any

import typer

from parquetry.cli.common import (
    DatasetArg,
    Endpoint,
    JsonFlag,
    Region,
    StoreOptions,
    UrlArg,
    emit_json,
    open_cli_store,
    out_console,
)
from parquetry.errors import ParquetryError

if TYPE_CHECKING:
    from rich.table import Table

    from parquetry.cli.views import DatasetInfo, FileRow

__all__ = ["register"]

VersionOpt = Annotated[
    int | None,
    typer.Option(
        "--version", min=0, help="Version to read (kartothek-format datasets).", show_default=False
    ),
]
#: ``show`` lists at most this many partitions in its table (``--json`` lists all).
MAX_PARTITION_ROWS = 50


def _size(value: int | None) -> str:
    from parquetry.cli.svg import human_bytes

    return "-" if value is None else human_bytes(value)


def _count(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


def _when(info: DatasetInfo) -> str:
    return info.last_commit.strftime("%Y-%m-%d %H:%M:%S") if info.last_commit else "-"


def _table(*columns: str, right: tuple[str, ...] = ()) -> Table:
    from rich import box
    from rich.table import Table

    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    for col in columns:
        table.add_column(col, justify="right" if col in right else "left")
    return table


def ls(
    url: UrlArg, json: JsonFlag = False, endpoint: Endpoint = None, region: Region = None
) -> int:
    """List the datasets in a store: kind, version, rows, bytes and last commit."""
    from parquetry.cli.targets import find_datasets
    from parquetry.cli.views import dataset_info

    store = open_cli_store(url, StoreOptions(endpoint=endpoint, region=region))
    infos: list[DatasetInfo] = []
    broken: list[tuple[str, str, str]] = []
    for ref in find_datasets(store):
        try:
            infos.append(dataset_info(store, ref, detail=False))
        except ParquetryError as exc:
            broken.append((ref.name, ref.kind, str(exc)))
    if json:
        emit_json(
            {
                "store": store.url,
                "datasets": [_ls_json(i) for i in infos]
                + [{"name": n, "kind": k, "error": e} for n, k, e in broken],
            }
        )
    else:
        table = _table(
            "dataset",
            "kind",
            "version",
            "rows",
            "bytes",
            "files",
            "last commit",
            right=("version", "rows", "bytes", "files"),
        )
        for i in infos:
            table.add_row(
                i.name,
                i.kind,
                "-" if i.version is None else str(i.version),
                _count(i.rows),
                _size(i.bytes),
                _count(i.files),
                _when(i),
            )
        for name, kind, _ in broken:
            table.add_row(name, kind, "?", "?", "?", "?", "unreadable")
        if infos or broken:
            out_console().print(table)
        else:
            typer.echo(f"no datasets in {store.url}", err=True)
    for name, _, message in broken:
        typer.echo(f"error: {name}: {message}", err=True)
    return 1 if broken else 0


def _ls_json(info: DatasetInfo) -> dict[str, Any]:
    doc = info.to_json()
    for key in ("schema", "partition_keys", "indices", "metadata"):
        doc.pop(key)
    return doc


def _partitions(files: list[FileRow]) -> list[tuple[str, int, int | None, int | None]]:
    acc: dict[str, list[Any]] = defaultdict(lambda: [0, 0, 0])
    for f in files:
        entry = acc[f.partition]
        entry[0] += 1
        entry[1] = None if entry[1] is None or f.rows is None else entry[1] + f.rows
        entry[2] = None if entry[2] is None or f.size is None else entry[2] + f.size
    return [(p, n, r, b) for p, (n, r, b) in sorted(acc.items())]


def show(
    url: UrlArg,
    dataset: DatasetArg,
    version: VersionOpt = None,
    json: JsonFlag = False,
    endpoint: Endpoint = None,
    region: Region = None,
) -> None:
    """Show a dataset: schema, partition keys, indices, partitions and files, metadata."""
    from parquetry.cli.targets import resolve_dataset
    from parquetry.cli.views import dataset_files, dataset_info

    store = open_cli_store(url, StoreOptions(endpoint=endpoint, region=region))
    ref = resolve_dataset(store, dataset)
    info = dataset_info(store, ref, version=version)
    parts = _partitions(dataset_files(store, ref, version=version))
    if json:
        doc = info.to_json()
        doc["partition_list"] = [
            {"partition": p, "files": n, "rows": r, "bytes": b} for p, n, r, b in parts
        ]
        emit_json(doc)
        return
    console = out_console()
    console.print(f"[bold]{info.name}[/bold] ({info.kind} dataset in {store.url})")
    summary = _table("", "")
    summary.show_header = False
    for label, value in (
        ("version", "-" if info.version is None else str(info.version)),
        ("last commit", _when(info)),
        ("rows", _count(info.rows)),
        ("bytes", _size(info.bytes)),
        ("files", _count(info.files)),
        ("partitions", _count(info.partitions)),
        ("partition keys", ", ".join(info.partition_keys) or "-"),
        ("secondary indices", ", ".join(info.indices) or "-"),
    ):
        summary.add_row(label, value)
    console.print(summary)
    schema = _table("column", "type", "role")
    for name, type_ in info.schema:
        role = ("partition key" if name in info.partition_keys
                else "indexed" if name in info.indices else "")  # fmt: skip
        schema.add_row(name, type_, role)
    console.print(schema)
    if info.partition_keys:
        ptable = _table("partition", "files", "rows", "bytes", right=("files", "rows", "bytes"))
        for p, n, r, b in parts[:MAX_PARTITION_ROWS]:
            ptable.add_row(p or "(none)", _count(n), _count(r), _size(b))
        console.print(ptable)
        if len(parts) > MAX_PARTITION_ROWS:
            console.print(
                f"... and {len(parts) - MAX_PARTITION_ROWS:,} more partitions (--json lists all)"
            )
    if info.metadata:
        meta = _table("metadata", "value")
        for key, value in sorted(info.metadata.items()):
            meta.add_row(str(key), str(value))
        console.print(meta)


def history(
    url: UrlArg,
    dataset: DatasetArg,
    json: JsonFlag = False,
    endpoint: Endpoint = None,
    region: Region = None,
) -> None:
    """Show the committed versions: number, time, operation, rows and files added/removed,
    and the operation's parameters."""
    from parquetry.cli.targets import resolve_dataset
    from parquetry.cli.views import dataset_history

    store = open_cli_store(url, StoreOptions(endpoint=endpoint, region=region))
    ref = resolve_dataset(store, dataset)
    rows = dataset_history(store, ref)
    if json:
        emit_json({"dataset": ref.name, "kind": ref.kind, "versions": [v.to_json() for v in rows]})
        return
    table = _table(
        "version",
        "time",
        "operation",
        "rows added",
        "rows removed",
        "files added",
        "files removed",
        "parameters",
        right=("version", "rows added", "rows removed", "files added", "files removed"),
    )
    for v in rows:
        table.add_row(
            str(v.number),
            v.time.strftime("%Y-%m-%d %H:%M:%S") if v.time else "-",
            v.operation,
            _count(v.rows_added),
            _count(v.rows_removed),
            _count(v.files_added),
            _count(v.files_removed),
            ", ".join(f"{k}={val}" for k, val in sorted(v.parameters.items())),
        )
    out_console().print(table)


def register(app: typer.Typer) -> None:
    app.command("ls")(ls)
    app.command("show")(show)
    app.command("history")(history)
