"""The ``parquetry`` command: the typer app, its commands and the one error policy.

Error policy: a user error (any :class:`ParquetryError`, a local file problem, a bad flag)
prints one ``error: ...`` line on stderr and exits 1 (2 for command-line usage errors),
never a traceback; ``--verbose`` adds the traceback. Anything else is a bug in parquetry and
exits 70 with a one-line hint to rerun with ``--verbose``.
"""

from __future__ import annotations

import os
import sys
import traceback
import warnings
from collections.abc import Sequence
from typing import Annotated, Any

import typer

# typer vendors its own click (typer._click); its exceptions are what commands raise.
from typer._click import exceptions as click_exc
from typer.core import TyperGroup

from parquetry.errors import ParquetryError, ParquetryWarning

__all__ = ["EXIT_INTERNAL", "app", "main"]

EXIT_USAGE = 2
EXIT_INTERNAL = 70  # EX_SOFTWARE: a bug, not the user's fault
_VERBOSE_ENV = "PARQUETRY_VERBOSE"


class _State:
    verbose = False


class ParquetryGroup(TyperGroup):
    """The root group; wraps every invocation in the error policy."""

    def main(  # type: ignore[override]
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        _State.verbose = os.environ.get(_VERBOSE_ENV, "") not in ("", "0")
        code = _guarded(
            lambda: super(ParquetryGroup, self).main(
                args, prog_name or "parquetry", complete_var, standalone_mode=False, **extra
            )
        )
        if standalone_mode:
            sys.exit(code)
        return code


def _guarded(invoke: Any) -> int:
    with warnings.catch_warnings():
        # parquetry's warnings (e.g. an unreadable pointer that was worked around) are one
        # line each on stderr, like errors; the command still succeeds.
        warnings.simplefilter("always", ParquetryWarning)
        warnings.showwarning = _show_warning
        _SHOWN.clear()
        return _guarded_inner(invoke)


def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: Any = None,
    line: str | None = None,
) -> None:
    if issubclass(category, ParquetryWarning):
        text = " ".join(str(message).split())
        if text not in _SHOWN:  # a command may open a dataset more than once
            _SHOWN.add(text)
            typer.echo(f"warning: {text}", err=True)
    else:
        _ORIGINAL_SHOWWARNING(message, category, filename, lineno, file, line)


_ORIGINAL_SHOWWARNING = warnings.showwarning
_SHOWN: set[str] = set()


def _guarded_inner(invoke: Any) -> int:
    try:
        result = invoke()
    except click_exc.NoArgsIsHelpError as exc:
        typer.echo(exc.format_message())
        return EXIT_USAGE
    except click_exc.UsageError as exc:
        path = exc.ctx.command_path if exc.ctx is not None else "parquetry"
        hint = f" (see '{path} --help')"
        _error(exc.format_message() + hint)
        return EXIT_USAGE
    except click_exc.ClickException as exc:
        _error(exc.format_message())
        return exc.exit_code
    except typer.Abort:
        _error("aborted")
        return 130
    except ParquetryError as exc:
        _error(str(exc) or type(exc).__name__, exc)
        return 1
    except OSError as exc:
        # Local files named on the command line (--output, inspect PATH): the user's to fix.
        _error(f"{exc.strerror or exc}{f': {exc.filename}' if exc.filename else ''}", exc)
        return 1
    except Exception as exc:
        _error(f"internal error: {type(exc).__name__}: {exc}", exc, internal=True)
        return EXIT_INTERNAL
    if isinstance(result, int):
        return result
    return 0


def _error(message: str, exc: BaseException | None = None, *, internal: bool = False) -> None:
    if exc is not None and _State.verbose:
        traceback.print_exception(exc, file=sys.stderr)
    lines = message.splitlines() or [""]
    first = " ".join(line.strip() for line in lines if line.strip())
    hint = " (rerun with --verbose for the traceback)" if internal and not _State.verbose else ""
    typer.echo(f"error: {first}{hint}", err=True)
    caret = getattr(exc, "caret_lines", None)
    if callable(caret):
        # A --where syntax error: show the expression and point at the bad token.
        for line in caret():
            typer.echo(f"  {line}", err=True)


app = typer.Typer(
    cls=ParquetryGroup,
    name="parquetry",
    help="Keep Parquet datasets on local disks and object stores consistent, fast and easy "
    "to query.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)


def _version(value: bool) -> None:
    if value:
        from parquetry import __version__

        typer.echo(f"parquetry {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose",
            "-v",
            help=f"Show tracebacks of errors (also: {_VERBOSE_ENV}=1).",
        ),
    ] = False,
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Keep Parquet datasets on local disks and object stores consistent, fast and easy to
    query.

    Every command takes a store URL (a directory, file:///path, s3://bucket/prefix, gs://...,
    az://...). Object-store credentials come from the environment (AWS_ACCESS_KEY_ID, ...).
    """
    _State.verbose = _State.verbose or verbose


def _register() -> None:
    # Command modules import their heavy dependencies (pyarrow, the dataset layers) inside the
    # command functions, so building the app and printing help stays fast.
    from parquetry.cli import (
        cmd_browse,
        cmd_codec,
        cmd_maintain,
        cmd_ops,
        cmd_report,
        cmd_scan,
        cmd_tools,
    )

    for module in (cmd_browse, cmd_scan, cmd_maintain, cmd_ops, cmd_report, cmd_tools, cmd_codec):
        module.register(app)


_register()


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of the ``parquetry`` script."""
    command = typer.main.get_command(app)
    command.main(args=list(argv) if argv is not None else None, prog_name="parquetry")
