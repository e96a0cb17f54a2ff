"""docs/cli.md is generated from the command's help and must not go stale."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "gen_cli_docs", ROOT / "scripts" / "gen-cli-docs.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cli_docs_are_current() -> None:
    script = _script()
    assert script.main(["--check"]) == 0, "run: python scripts/gen-cli-docs.py"


def test_cli_docs_cover_every_command_and_option() -> None:
    import typer

    from parquetry.cli.app import app

    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    group = typer.main.get_command(app)
    ctx = typer.Context(group, info_name="parquetry")
    for name in group.list_commands(ctx):
        assert f"## parquetry {name}\n" in text
        for param in group.get_command(ctx, name).params:
            for opt in getattr(param, "opts", []):
                if opt.startswith("-"):
                    assert f"`{opt}`" in text, (name, opt)
