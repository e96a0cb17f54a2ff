"""Table operations on kartothek-format datasets: ``delete`` (row-level, copy-on-write).

Layout (other operations, e.g. ``compact`` and ``restore``, join the same way):

- one module-level function per command, its options typed with ``Annotated`` like the
  other ``cmd_*`` modules, heavy imports inside the function (help stays fast);
- :func:`_open_versioned` opens the dataset (refusing snapshot datasets: they keep no
  versions to rewrite), :func:`_files_progress` adapts a rich progress bar to the rewrite
  engine's ``progress(done, total)`` callback, :func:`_print_files` lists touched files;
- :func:`register` adds every command to the app (called by ``cli/app.py``).

Every command has ``--dry-run`` (plan: the files it would touch, nothing written) and
``--json``; progress goes to stderr on a terminal, results to stdout.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated

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
    progress,
)
from parquetry.errors import InvalidArgument

if TYPE_CHECKING:
    from parquetry.dataset import Dataset
    from parquetry.store import Store

__all__ = ["register"]

#: Files listed one per line before "... and N more".
SHOWN_FILES = 20

DryRun = Annotated[
    bool,
    typer.Option("--dry-run", help="Only print the files it would touch; write nothing."),
]


def _open_versioned(store: Store, name: str, command: str) -> Dataset:
    from parquetry.cli.targets import resolve_dataset
    from parquetry.dataset import Dataset

    ref = resolve_dataset(store, name)
    if ref.kind != "kartothek":
        raise InvalidArgument(
            f"{command}: {ref.name} is a {ref.kind} dataset; table operations need a "
            "kartothek-format dataset (versioned)"
        )
    return Dataset.open(store, ref.name)


@contextmanager
def _files_progress(description: str) -> Iterator[Callable[[int, int], None]]:
    """A rich bar on stderr (terminals only) fed by the engine's ``progress(done, total)``."""
    with progress(description) as bar:

        def tick(done: int, total: int) -> None:
            bar.update(completed=done, total=total)

        yield tick


def _print_files(title: str, keys: Sequence[str]) -> None:
    typer.echo(f"{title}: {len(keys):,}")
    for key in keys[:SHOWN_FILES]:
        typer.echo(f"  {key}")
    if len(keys) > SHOWN_FILES:
        typer.echo(f"  ... and {len(keys) - SHOWN_FILES:,} more")


def _keys(ds: Dataset, labels: Sequence[str]) -> list[str]:
    doc = ds.document
    table = doc.tables[0]
    return [doc.partitions[label][table] for label in labels]


def delete(
    url: UrlArg,
    dataset: DatasetArg,
    where: Annotated[
        str,
        typer.Option(
            "--where",
            "-w",
            show_default=False,
            help="Rows to delete, in the syntax of 'parquetry scan --where': "
            "\"country = 'DE' and day < date '2021-01-02'\".",
        ),
    ],
    dry_run: DryRun = False,
    json: JsonFlag = False,
    endpoint: Endpoint = None,
    region: Region = None,
) -> None:
    """Delete the rows matching --where, in one commit (operation "delete").

    Files that cannot hold matches (partition values, secondary indices, statistics) are
    not read; files whose partition values match are removed unread; the others are
    rewritten one at a time without the matching rows. A concurrent append never conflicts;
    a concurrent commit that removed a file this delete rewrites makes it fail (nothing
    committed). Prints the rows deleted and the files touched: "rewritten" (written back
    without the matching rows) and "removed" (every row matched).
    """
    from parquetry.cli.where import where_to_predicates
    from parquetry.dataset.rowops import delete_where, plan_delete

    predicates = where_to_predicates(where)  # syntax errors before touching the store
    store = open_cli_store(url, StoreOptions(endpoint=endpoint, region=region))
    ds = _open_versioned(store, dataset, "delete")
    if dry_run:
        with _files_progress(f"planning the delete on {ds.uuid}") as tick:
            plan = plan_delete(ds, predicates, progress=tick)
        version = ds.version
    else:
        with _files_progress(f"deleting from {ds.uuid}") as tick:
            done = delete_where(ds, predicates, progress=tick)
        plan, version = done.plan, done.state.number
    rows = plan.metrics.get("rows_deleted", 0)
    emptied = set(plan.emptied)
    rewritten = _keys(ds, [lbl for lbl in plan.rewritten if lbl not in emptied])
    dropped = _keys(ds, [*plan.emptied, *plan.dropped])
    _report_delete(ds.uuid, version, dry_run, rows, rewritten, dropped, as_json=json)


def _report_delete(
    name: str,
    version: int,
    dry_run: bool,
    rows: int,
    rewritten: list[str],
    dropped: list[str],
    as_json: bool,
) -> None:
    if as_json:
        emit_json(
            {
                "dataset": name,
                "dry_run": dry_run,
                "version": version,
                "rows_deleted": rows,
                "files_rewritten": rewritten,
                "files_removed": dropped,
            }
        )
        return
    touched = len(rewritten) + len(dropped)
    if dry_run:
        typer.echo(
            f"{name}: would delete {rows:,} rows from version {version}, touching {touched:,} "
            f"files ({len(rewritten):,} rewritten, {len(dropped):,} removed)"
        )
    elif touched:
        typer.echo(
            f"{name}: deleted {rows:,} rows in version {version}, touching {touched:,} files "
            f"({len(rewritten):,} rewritten, {len(dropped):,} removed)"
        )
    else:
        typer.echo(f"{name}: no row matches; nothing deleted (version {version} unchanged)")
        return
    _print_files("files rewritten" if not dry_run else "files to rewrite", rewritten)
    _print_files("files removed" if not dry_run else "files to remove", dropped)


def register(app: typer.Typer) -> None:
    from parquetry.cli import cmd_ops_maint

    app.command("delete")(delete)
    cmd_ops_maint.register(app)  # compact, restore
