"""The ``parquetry`` command line (typer + rich, imported only when the command runs)."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> None:
    """Run the ``parquetry`` command (``argv`` defaults to ``sys.argv[1:]``).

    Run as the program (no ``argv``), the process ends with ``os._exit`` once its output is
    flushed: an Arrow worker thread that frees a Python-owned buffer after the interpreter
    began to finalize aborts the process (apache/arrow#34314), which would turn a finished
    command into exit code -6. Called with ``argv`` (tests, embedding), it raises
    ``SystemExit`` as click does.
    """
    from parquetry.cli.app import main as run

    if argv is not None:
        run(argv)
        return
    try:
        run(None)
        code = 0
    except SystemExit as stop:
        code = _exit_code(stop.code)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # a closed pipe: nothing more can be said
        code = code or 1
    os._exit(code)


def _exit_code(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1
