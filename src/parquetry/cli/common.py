"""What every command shares: option types, opening the store, printing, progress bars.

Data goes to stdout, everything else (progress, notes, errors) to stderr, so that
``parquetry scan ... --format csv > out.csv`` gives a clean file.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any
from urllib.parse import urlsplit

import typer

from parquetry.errors import NotFound

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress, TaskID

    from parquetry.store import Store

__all__ = [
    "DatasetArg",
    "Endpoint",
    "JsonFlag",
    "Region",
    "StoreOptions",
    "UrlArg",
    "emit_json",
    "err_console",
    "note",
    "open_cli_store",
    "out_console",
    "progress",
]

UrlArg = Annotated[
    str,
    typer.Argument(
        metavar="URL",
        help="Store URL: a local directory, file:///path, s3://bucket/prefix, gs://..., az://...",
        show_default=False,
    ),
]
DatasetArg = Annotated[
    str,
    typer.Argument(
        metavar="DATASET",
        help="Dataset uuid (kartothek format) or snapshot key, relative to URL.",
        show_default=False,
    ),
]
Endpoint = Annotated[
    str | None,
    typer.Option(
        "--endpoint",
        envvar=["PARQUETRY_ENDPOINT", "AWS_ENDPOINT_URL"],
        show_envvar=True,
        help="Object store endpoint (S3-compatible servers such as MinIO or moto).",
        show_default=False,
    ),
]
Region = Annotated[
    str | None,
    typer.Option(
        "--region",
        envvar=["PARQUETRY_REGION", "AWS_REGION", "AWS_DEFAULT_REGION"],
        show_envvar=True,
        help="Object store region.",
        show_default=False,
    ),
]
JsonFlag = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]

_OBJECT_SCHEMES = frozenset({"s3", "gs", "gcs", "az", "abfs"})


@dataclass(frozen=True, slots=True, kw_only=True)
class StoreOptions:
    """The store flags of one command line (credentials come from the environment)."""

    endpoint: str | None = None
    region: str | None = None


def open_cli_store(url: str, options: StoreOptions, *, must_exist: bool = True) -> Store:
    """Open the store at ``url``; object-store flags apply to object-store URLs only.

    Raises:
        NotFound: a local directory that does not exist (when ``must_exist``).
    """
    from parquetry.store import LocalStore, open_store

    try:
        scheme = urlsplit(url).scheme.lower()
    except ValueError:
        scheme = ""  # a malformed URL ("s3://b[", "http://[::1"): open_store names it
    extra: dict[str, Any] = {}
    if scheme in _OBJECT_SCHEMES:
        # Credentials stay in the environment (AWS_ACCESS_KEY_ID...), where the backend reads
        # them; they never appear on a command line.
        extra = {"endpoint": options.endpoint, "region": options.region}
    store = open_store(url, **extra)
    if must_exist and isinstance(store, LocalStore) and not store.root.is_dir():
        raise NotFound(f"store directory {store.root} does not exist", store=store.url)
    return store


def out_console() -> Console:
    from rich.console import Console

    console = Console(highlight=False)
    if not console.is_terminal:
        # Piped or captured output: wide enough that tables never wrap their cells.
        console = Console(highlight=False, width=240, no_color=True)
    return console


def err_console() -> Console:
    from rich.console import Console

    return Console(stderr=True, highlight=False)


def note(message: str) -> None:
    """A human note on stderr (never mixed into data output)."""
    typer.echo(message, err=True)


def _json_default(value: object) -> object:
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.hex()
    return str(value)


def emit_json(document: object) -> None:
    """Print ``document`` as indented JSON on stdout (dates as ISO strings)."""
    typer.echo(json.dumps(document, indent=2, sort_keys=False, default=_json_default))


class Bar:
    """One progress bar: ``advance()`` by one, or ``update(completed=, description=)``."""

    def __init__(self, progress: Progress, task: TaskID):
        self._progress = progress
        self._task = task

    def advance(self, amount: float = 1) -> None:
        self._progress.advance(self._task, amount)

    def update(
        self,
        *,
        completed: float | None = None,
        description: str | None = None,
        total: float | None = None,
    ) -> None:
        self._progress.update(self._task, completed=completed, description=description, total=total)


@contextmanager
def progress(description: str, total: float | None = None) -> Iterator[Bar]:
    """A rich progress bar on stderr, shown only when stderr is a terminal."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    console = err_console()
    bar = Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,
    )
    with bar:
        yield Bar(bar, bar.add_task(description, total=total))
