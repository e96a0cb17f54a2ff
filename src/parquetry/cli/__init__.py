"""The ``parquetry`` command line (typer + rich, imported only when the command runs)."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> None:
    """Run the ``parquetry`` command (``argv`` defaults to ``sys.argv[1:]``)."""
    from parquetry.cli.app import main as run

    run(argv)
