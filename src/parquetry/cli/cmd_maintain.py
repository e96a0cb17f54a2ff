"""``validate``, ``repair``, ``checkpoint`` and ``gc``: keep a dataset healthy."""

from __future__ import annotations

from typing import Annotated

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

__all__ = ["register"]


def validate(
    url: UrlArg,
    dataset: DatasetArg,
    json: JsonFlag = False,
    endpoint: Endpoint = None,
    region: Region = None,
) -> int:
    """Check a dataset against its files; print each problem on its own line.

    Checks that the pointer is current, that _common_metadata matches the schema, that every
    referenced file exists with the recorded size, rows and column types and reads as the
    dataset schema, that recorded statistics match the file footers and that secondary
    indices agree with the data. Exits 1 when any problem is found.
    """
    from parquetry.cli.checks import file_count, validate_dataset
    from parquetry.cli.targets import resolve_dataset

    store = open_cli_store(url, StoreOptions(endpoint=endpoint, region=region))
    ref = resolve_dataset(store, dataset)
    with progress(f"validating {ref.name}", total=file_count(store, ref)) as bar:
        problems = validate_dataset(store, ref, tick=lambda: bar.advance())
    if json:
        emit_json({"dataset": ref.name, "kind": ref.kind, "ok": not problems, "problems": problems})
    else:
        for problem in problems:
            typer.echo(problem)
        if not problems:
            typer.echo(f"{ref.name}: ok", err=True)
        else:
            typer.echo(f"{ref.name}: {len(problems)} problem(s)", err=True)
    return 1 if problems else 0


def repair(
    url: UrlArg, dataset: DatasetArg, endpoint: Endpoint = None, region: Region = None
) -> None:
    """Complete or roll back an interrupted commit or overwrite."""
    from parquetry.cli.maintenance import repair_dataset
    from parquetry.cli.targets import resolve_dataset

    store = open_cli_store(url, StoreOptions(endpoint=endpoint, region=region))
    ref = resolve_dataset(store, dataset)
    typer.echo(repair_dataset(store, ref))


PointerPolicy = Annotated[
    str | None,
    typer.Option(
        "--pointer-policy",
        help="Also set when kartothek's metadata file is rewritten from now on: auto, "
        "every-commit or manual (a settings-only commit).",
    ),
]


def checkpoint(
    url: UrlArg,
    dataset: DatasetArg,
    pointer_policy: PointerPolicy = None,
    endpoint: Endpoint = None,
    region: Region = None,
) -> None:
    """Rewrite kartothek's metadata file for the newest version (run before kartothek's
    own garbage_collect_dataset).

    A change kartothek wrote on an older version is committed first (operation
    "kartothek"). Idempotent; safe while other writers commit.
    """
    from parquetry.cli.targets import resolve_dataset
    from parquetry.dataset import Dataset
    from parquetry.errors import InvalidArgument

    store = open_cli_store(url, StoreOptions(endpoint=endpoint, region=region))
    ref = resolve_dataset(store, dataset)
    if ref.kind != "kartothek":
        raise InvalidArgument(f"{ref.name} is a {ref.kind}, not a kartothek-format dataset")
    ds = Dataset.open(store, ref.name)
    if pointer_policy is not None:
        ds = ds.set_pointer_policy(pointer_policy)
    ds = ds.checkpoint()
    typer.echo(
        f"{ref.name}: kartothek's metadata file shows version {ds.version} "
        f"(pointer policy {ds.pointer_policy})"
    )


def gc(
    url: UrlArg,
    dataset: DatasetArg,
    retention: Annotated[
        str,
        typer.Option(
            "--retention",
            help="Keep versions and unreferenced files younger than this (e.g. 7d, 12h, 30m, 0).",
        ),
    ] = "7d",
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Only print what would be deleted.")
    ] = False,
    json: JsonFlag = False,
    endpoint: Endpoint = None,
    region: Region = None,
) -> None:
    """Delete files no retained version needs, and orphans of failed writes."""
    from parquetry.cli.maintenance import collect_garbage, parse_duration
    from parquetry.cli.svg import human_bytes
    from parquetry.cli.targets import resolve_dataset

    keep = parse_duration(retention)
    store = open_cli_store(url, StoreOptions(endpoint=endpoint, region=region))
    ref = resolve_dataset(store, dataset)
    with progress(f"collecting garbage of {ref.name}"):
        result = collect_garbage(store, ref, retention=keep, dry_run=dry_run)
    if json:
        emit_json(
            {
                "dataset": ref.name,
                "dry_run": dry_run,
                "bytes": result.bytes,
                "deleted": [{"key": k, "size": s} for k, s in result.deleted],
                "expired_versions": list(result.expired_versions),
                "retained_versions": list(result.retained_versions),
                "temporaries": list(result.temporaries),
            }
        )
        return
    verb = "would delete" if dry_run else "deleted"
    for key, size in result.deleted:
        typer.echo(f"{verb} {key} ({'?' if size is None else human_bytes(size)})")
    typer.echo(
        f"{ref.name}: {verb} {len(result.deleted)} objects, "
        f"{human_bytes(result.bytes)} ({result.bytes} bytes)"
        + (f"; expired versions {list(result.expired_versions)}" if result.expired_versions else "")
        + (
            f"; {len(result.temporaries)} temporary files of killed writers"
            if result.temporaries
            else ""
        )
    )


def register(app: typer.Typer) -> None:
    app.command("validate")(validate)
    app.command("repair")(repair)
    app.command("checkpoint")(checkpoint)
    app.command("gc")(gc)
