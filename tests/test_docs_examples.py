"""Every code example in README.md and docs/*.md runs here, so the docs stay true.

Conventions for writers of the docs (the fence's info string picks what happens):

- ```` ```python ```` blocks run, in order, in one namespace per Markdown file, with a fresh
  temporary directory as the working directory (relative paths like ``"lake"`` land there).
- ```` ```python no-run ```` blocks are shown but not run (use sparingly: real S3 credentials,
  a whole demo run...). ```` ```python spark ```` blocks run only where pyspark works; the
  file's test is then marked ``spark`` and ``slow``.
- ```` ```console ```` blocks: each line ``$ parquetry ARGS`` runs in-process (``CliRunner``) in
  the same directory, after the file's preceding Python blocks. It must exit 0, unless the
  lines shown after it contain ``error:``, then it must fail and print that error line.
  Other ``$`` lines (``make demo``, ``pip install``) are not run. ```` ```console no-run ````
  skips the whole block.
- Any other language (``json``, ``text``, ``sh``...) is illustration only.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
_FENCE = re.compile(r"^```([A-Za-z0-9_+-]*)([^\n]*)\n(.*?)^```[ \t]*$", re.M | re.S)


@dataclass(frozen=True, slots=True, kw_only=True)
class Block:
    language: str
    flags: frozenset[str]
    code: str
    line: int  # 1-based line of the opening fence


def doc_files() -> list[Path]:
    files = [ROOT / "README.md"] if (ROOT / "README.md").exists() else []
    return files + sorted((ROOT / "docs").glob("*.md"))


def blocks(path: Path) -> list[Block]:
    text = path.read_text(encoding="utf-8")
    return [
        Block(
            language=m.group(1).lower(),
            flags=frozenset(m.group(2).split()),
            code=m.group(3),
            line=text.count("\n", 0, m.start()) + 1,
        )
        for m in _FENCE.finditer(text)
    ]


def _params() -> list[Any]:
    params = []
    for path in doc_files():
        needs_spark = any("spark" in b.flags and "no-run" not in b.flags for b in blocks(path))
        marks = [pytest.mark.spark, pytest.mark.slow] if needs_spark else []
        params.append(pytest.param(path, id=str(path.relative_to(ROOT)), marks=marks))
    return params


@contextmanager
def _chdir(path: Path) -> Iterator[None]:
    old = Path.cwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)


def _run_python(block: Block, path: Path, namespace: dict[str, Any]) -> None:
    where = f"{path.relative_to(ROOT)}:{block.line}"
    code = compile(block.code, where, "exec")
    exec(code, namespace)


def _run_console(block: Block, path: Path) -> int:
    from typer.testing import CliRunner

    from parquetry.cli.app import app

    runner = CliRunner()
    lines = block.code.splitlines()
    ran = 0
    for i, line in enumerate(lines):
        if not line.startswith("$ parquetry"):
            continue
        shown = []
        for later in lines[i + 1 :]:
            if later.startswith("$ "):
                break
            shown.append(later)
        args = shlex.split(line.removeprefix("$ parquetry"))
        result = runner.invoke(app, args)
        where = f"{path.relative_to(ROOT)}:{block.line + 1 + i}: {line}"
        errors = [s for s in shown if s.startswith("error:")]
        if errors:
            assert result.exit_code != 0, f"{where} was expected to fail"
            for err in errors:
                assert err in result.stderr, f"{where}: {result.stderr!r} lacks {err!r}"
        else:
            assert result.exit_code == 0, f"{where} failed: {result.stderr or result.stdout}"
        ran += 1
    return ran


@pytest.mark.parametrize("path", _params())
def test_doc_examples_run(path: Path, tmp_path: Path) -> None:
    namespace: dict[str, Any] = {"__name__": "__docs__"}
    with _chdir(tmp_path):
        for block in blocks(path):
            if "no-run" in block.flags:
                continue
            if "spark" in block.flags:
                pytest.importorskip("pyspark")
            if block.language == "python":
                _run_python(block, path, namespace)
            elif block.language == "console":
                _run_console(block, path)


def test_the_runner_finds_and_checks_blocks(tmp_path: Path) -> None:
    """The conventions themselves: what runs, what is skipped, what must fail."""
    doc = tmp_path / "x.md"
    doc.write_text(
        "# t\n\n```python\nx = 1\n```\n\n```python no-run\nraise SystemExit\n```\n\n"
        "```console\n$ parquetry --version\nparquetry 0.1.0\n"
        "$ parquetry ls does-not-exist\nerror: store directory\n$ make demo\n```\n",
        encoding="utf-8",
    )
    found = blocks(doc)
    assert [(b.language, sorted(b.flags), b.line) for b in found] == [
        ("python", [], 3),
        ("python", ["no-run"], 7),
        ("console", [], 11),
    ]
    namespace: dict[str, Any] = {}
    _run_python(found[0], ROOT / "x.md", namespace)
    assert namespace["x"] == 1
    with _chdir(tmp_path):
        assert _run_console(found[2], ROOT / "x.md") == 2
