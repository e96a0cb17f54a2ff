"""``parquetry compact`` and ``parquetry restore``: table maintenance commands.

Registered by :func:`parquetry.cli.cmd_ops.register` (same layout and helpers as
``delete``): ``--dry-run`` prints the files it would touch, ``--json`` a document, a rich
progress bar goes to stderr on a terminal, and each command ends with a summary (files
before/after, bytes).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated, Any

import typer

from parquetry.cli.cmd_ops import DryRun, _files_progress, _open_versioned, _print_files
from parquetry.cli.common import (
    DatasetArg,
    Endpoint,
    JsonFlag,
    Region,
    StoreOptions,
    UrlArg,
    emit_json,
    open_cli_store,
)
from parquetry.errors import InvalidArgument

if TYPE_CHECKING:
    from parquetry.dataset.compact_plan import CompactionPlan
    from parquetry.dataset.compact_write import BinaryCopy

__all__ = ["parse_size", "register"]

_UNITS = {
    "": 1,
    "b": 1,
    "kb": 1000,
    "kib": 1 << 10,
    "mb": 1000**2,
    "mib": 1 << 20,
    "gb": 1000**3,
    "gib": 1 << 30,
}


def parse_size(text: str) -> int:
    """``"128MiB"``, ``"64 MB"``, ``"1048576"`` as bytes."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*", text)
    unit = m.group(2).lower() if m else ""
    if m is None or unit not in _UNITS:
        raise InvalidArgument(
            f"--target-size: cannot read {text!r} as a size (e.g. 128MiB, 64MB, 1048576)"
        )
    return int(float(m.group(1)) * _UNITS[unit])


def _human(n: int) -> str:
    from parquetry.cli.svg import human_bytes

    return human_bytes(n)


def compact(
    url: UrlArg,
    dataset: DatasetArg,
    target_size: Annotated[
        str,
        typer.Option("--target-size", help="Output file size to aim for (e.g. 128MiB, 64MB)."),
    ] = "128MiB",
    where: Annotated[
        str | None,
        typer.Option(
            "--where",
            "-w",
            show_default=False,
            help="Partitions to compact (partition keys only), in the syntax of "
            "'parquetry scan --where': \"country = 'DE'\".",
        ),
    ] = None,
    sort_by: Annotated[
        list[str] | None,
        typer.Option("--sort-by", help="Sort each output file by this column (repeatable)."),
    ] = None,
    binary_copy: Annotated[
        str,
        typer.Option(
            "--binary-copy",
            help="auto: copy matching row groups without decoding, re-encoding small "
            "dictionary-encoded ones; always: copy those too (faster, outputs read slower); "
            "never: decode and re-encode every row.",
        ),
    ] = "auto",
    dry_run: DryRun = False,
    json: JsonFlag = False,
    endpoint: Endpoint = None,
    region: Region = None,
) -> None:
    """Bin-pack each partition's small files into files near --target-size (one commit,
    operation "compact"). Files at or above the target and partitions with a single small
    file are left alone; rows do not change. A concurrent append never conflicts; a
    concurrent commit that removed one of the inputs makes it fail (nothing committed).
    """
    from parquetry.cli.where import where_to_predicates

    target = parse_size(target_size)
    modes: dict[str, BinaryCopy] = {"auto": "auto", "always": True, "never": False}
    if binary_copy not in modes:
        raise InvalidArgument(f"--binary-copy must be auto, always or never, got {binary_copy!r}")
    predicates = where_to_predicates(where) if where else None
    store = open_cli_store(url, StoreOptions(endpoint=endpoint, region=region))
    ds = _open_versioned(store, dataset, "compact")
    plan = ds.compact(target_file_size=target, partitions=predicates, dry_run=True)
    version = ds.version
    if not dry_run and plan.bins:
        with _files_progress(f"compacting {ds.uuid}") as tick:
            out = ds.compact(
                target_file_size=target,
                partitions=predicates,
                sort_by=sort_by,
                progress=tick,
                binary_copy=modes[binary_copy],
            )
        version = out.version
    _report_compact(ds.uuid, version, dry_run, plan, json)


def _report_compact(
    name: str, version: int, dry_run: bool, plan: CompactionPlan, as_json: bool
) -> None:
    inputs = [f.key for b in plan.bins for f in b.files]
    summary = plan.summary()
    if as_json:
        emit_json(
            {
                "dataset": name,
                "dry_run": dry_run,
                "version": version,
                "target_file_size": plan.target_file_size,
                **summary,
                "files": inputs,
            }
        )
        return
    if not plan.bins:
        typer.echo(
            f"{name}: nothing to compact at target {_human(plan.target_file_size)} "
            f"({summary['files_before']:,} files; version {version} unchanged)"
        )
        return
    verb = "would compact" if dry_run else "compacted"
    where = f"version {version}" if dry_run else f"new version {version}"
    typer.echo(
        f"{name}: {verb} {summary['files_compacted']:,} files "
        f"({_human(summary['bytes_compacted'])}) in {summary['partitions']:,} partitions "
        f"into {summary['files_added']:,} ({where}); files {summary['files_before']:,} → "
        f"{summary['files_after']:,}"
    )
    _print_files("files to compact" if dry_run else "files compacted", inputs)


def restore(
    url: UrlArg,
    dataset: DatasetArg,
    version: Annotated[int, typer.Argument(help="The version whose state to restore.")],
    dry_run: DryRun = False,
    json: JsonFlag = False,
    endpoint: Endpoint = None,
    region: Region = None,
) -> None:
    """Commit a new version whose state equals VERSION (operation "restore"; metadata only:
    the old files are referenced again). Fails, committing nothing, if VERSION expired or
    lost a file to garbage collection, or if another commit lands meanwhile."""
    from parquetry.dataset.restore import plan_restore

    store = open_cli_store(url, StoreOptions(endpoint=endpoint, region=region))
    ds = _open_versioned(store, dataset, "restore")
    plan = plan_restore(store, ds._state(), version)
    new_version = ds.version
    if not dry_run:
        with _files_progress(f"restoring {ds.uuid} to version {version}") as tick:
            tick(0, 1)
            new_version = ds.restore(version).version
            tick(1, 1)
    _report_restore(ds.uuid, version, new_version, dry_run, plan, json)


def _report_restore(
    name: str, to: int, version: int, dry_run: bool, plan: dict[str, Any], as_json: bool
) -> None:
    if as_json:
        emit_json({"dataset": name, "dry_run": dry_run, "restored": to, "version": version, **plan})
        return
    head = (
        f"{name}: would restore version {to} on top of version {version}"
        if dry_run
        else f"{name}: restored version {to} as version {version}"
    )
    typer.echo(
        f"{head}: files {plan['files_before']:,} → {plan['files_after']:,} "
        f"(+{len(plan['files_added']):,} {_human(plan['bytes_added'])}, "
        f"-{len(plan['files_removed']):,} {_human(plan['bytes_removed'])})"
    )
    _print_files("files referenced again", plan["files_added"])
    _print_files("files no longer referenced", plan["files_removed"])


def register(app: typer.Typer) -> None:
    app.command("compact")(compact)
    app.command("restore")(restore)
