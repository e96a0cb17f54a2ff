"""``inspect`` (one Parquet file's footer) and ``demo`` (the end-to-end Spark pipeline)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any
from urllib.parse import urlsplit

import typer

from parquetry.cli.common import Endpoint, JsonFlag, Region, StoreOptions, emit_json, progress

if TYPE_CHECKING:
    from parquetry.store import Store

__all__ = ["register", "split_file_url"]

_OBJECT_SCHEMES = ("s3", "gs", "gcs", "az", "abfs")


def split_file_url(
    target: str, options: StoreOptions, *, must_exist: bool = True
) -> tuple[Store, str]:
    """A store holding the file and the file's key in it.

    Local paths open a store on the file's directory (which must exist; the file too when
    ``must_exist``); ``s3://bucket/a/b.parquet`` opens the bucket (the same for gs:// and
    az://); ``memory://name/key`` the named memory store.
    """
    from parquetry.cli.common import open_cli_store

    parts = urlsplit(target)
    scheme = parts.scheme.lower()
    if scheme in _OBJECT_SCHEMES:
        key = parts.path.lstrip("/")
        return open_cli_store(f"{scheme}://{parts.netloc}", options), key
    if scheme == "memory":
        return open_cli_store(f"memory://{parts.netloc}", options), parts.path.lstrip("/")
    # A path the user typed is theirs to follow: resolve links before the store (which
    # refuses links inside its root) sees it.
    path = Path(parts.path if scheme == "file" else target).resolve()
    if path.is_dir() or (must_exist and not path.is_file()):
        from parquetry.errors import NotFound

        raise NotFound(f"no such file: {path}", key=str(path))
    return open_cli_store(str(path.parent), options), path.name


def inspect(
    target: Annotated[
        str,
        typer.Argument(
            metavar="PATH_OR_URL",
            show_default=False,
            help="A local Parquet file, or a URL such as s3://bucket/key.parquet.",
        ),
    ],
    json: JsonFlag = False,
    endpoint: Endpoint = None,
    region: Region = None,
) -> None:
    """Show a Parquet file's footer: schema, row groups, column chunks, statistics.

    Reads only the footer (a few ranged reads), whatever the file's size.
    """
    from parquetry.parquet.inspect import inspect_file, render

    store, key = split_file_url(target, StoreOptions(endpoint=endpoint, region=region))
    report = inspect_file(store, key)
    if json:
        emit_json(report.to_json())
        return
    from parquetry.cli.common import out_console

    console = out_console()
    for item in render(report):
        console.print(item)


def demo(
    rows: Annotated[int, typer.Option("--rows", min=1, help="Orders to generate.")] = 1_000_000,
    store: Annotated[
        str,
        typer.Option(
            "--store",
            help="Where to build the lake: a directory or an object-store URL.",
        ),
    ] = "./demo-lake",
    streaming: Annotated[
        bool,
        typer.Option(
            "--streaming",
            help="Instead: stream files into an indexed dataset, kill the Spark driver "
            "midway, restart it from its checkpoint and check every row is there once.",
        ),
    ] = False,
    batches: Annotated[
        int, typer.Option("--batches", min=4, help="--streaming: input files (micro-batches).")
    ] = 12,
) -> None:
    """Run the end-to-end Spark pipeline: write, append, query, aggregate, inspect.

    With --streaming: a Structured Streaming job into a partitioned, indexed dataset,
    queried while it grows, killed (SIGKILL) and restarted, with the row count still exact.
    """
    if streaming:
        _streaming_demo(store, batches, rows)
        return
    from parquetry.demo import run_demo  # type: ignore[import-untyped,unused-ignore]

    with progress("demo", total=None) as bar:

        def report(message: str, *_: Any) -> None:
            bar.update(description=str(message))

        run_demo(rows=rows, store_url=store, progress=report, out=typer.echo)


def _streaming_demo(store: str, batches: int, rows: int) -> None:
    from pathlib import Path

    from parquetry.demo_stream import run_streaming_demo

    lake = Path(store).resolve() if "://" not in store else None
    url = lake.as_uri() if lake is not None else store
    # The file source and the checkpoint live on local disk beside the lake.
    work = (lake.parent if lake is not None else Path.cwd()) / "demo-stream-work"
    per_batch = max(1, min(rows, 60_000) // batches)
    result = run_streaming_demo(
        store_url=url, work=work, batches=batches, rows=per_batch, out=typer.echo
    )
    if not result.rows == result.distinct_ids == result.expected:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("inspect")(inspect)
    app.command("demo")(demo)
