"""The layer rules of docs/architecture.md, checked on the source tree."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "parquetry"

# package -> parquetry packages it must not import
FORBIDDEN = {
    "errors": {"store", "parquet", "snapshot", "dataset", "spark", "cli", "demo", "testing"},
    "store": {"parquet", "snapshot", "dataset", "spark", "cli", "demo"},
    "parquet": {"snapshot", "dataset", "spark", "cli", "demo"},
    "snapshot": {"dataset", "spark", "cli", "demo"},
    "dataset": {"snapshot", "spark", "cli", "demo"},
    "testing": {"snapshot", "dataset", "spark", "cli", "demo"},
    "spark": {"cli"},
}
# third-party modules allowed only inside one place
CONFINED = {
    "obstore": {"store/objectstore.py", "store/_objectstore_errors.py", "store/_objectupload.py"},
    "pyspark": {"spark"},
    "typer": {"cli"},
}


def _modules() -> list[Path]:
    return sorted(p for p in SRC.rglob("*.py"))


def _imports(path: Path) -> list[tuple[str, bool]]:
    """(module, top_level) for every import in the file."""
    tree = ast.parse(path.read_text())
    found: list[tuple[str, bool]] = []
    top = set(map(id, tree.body))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(a.name, id(node) in top) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.module, id(node) in top))
    return found


def _package(path: Path) -> str:
    rel = path.relative_to(SRC)
    return rel.parts[0].removesuffix(".py")


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(SRC)))
def test_layers_import_only_downward(path: Path) -> None:
    package = _package(path)
    for module, _ in _imports(path):
        parts = module.split(".")
        if parts[0] == "parquetry" and len(parts) > 1:
            assert parts[1] not in FORBIDDEN.get(package, set()), (
                f"{path.relative_to(SRC)} imports {module}: {package} must not depend on {parts[1]}"
            )
        allowed = CONFINED.get(parts[0])
        if allowed is not None:
            rel = str(path.relative_to(SRC))
            assert any(rel == a or rel.startswith(a + "/") for a in allowed), (
                f"{rel} imports {module}, which is confined to {sorted(allowed)}"
            )


def test_import_parquetry_is_light() -> None:
    code = (
        "import sys, parquetry\n"
        "heavy = [m for m in ('pyspark', 'typer', 'rich', 'pandas', 'polars', 'duckdb')"
        " if m in sys.modules]\n"
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_public_names_are_pinned() -> None:
    import parquetry

    expected = {
        "AlreadyExists",
        "Capability",
        "CapabilityNotSupported",
        "CommitConflict",
        "Dataset",
        "DatasetIncomplete",
        "DatasetManifest",
        "InvalidKey",
        "LocalStore",
        "ManifestCorrupted",
        "MemoryStore",
        "NotFound",
        "ObjectStore",
        "ParquetDatasetStore",
        "ParquetryError",
        "PreconditionFailed",
        "PredicateError",
        "PutMode",
        "ScanPlan",
        "Store",
        "WriteOptions",
        "__version__",
        "open_store",
    }
    assert set(parquetry.__all__) == expected
    for name in expected:
        assert getattr(parquetry, name) is not None


def test_every_error_derives_from_the_root() -> None:
    from parquetry import errors

    for name in errors.__all__:
        cls = getattr(errors, name)
        if issubclass(cls, Warning):  # warnings have their own root
            assert issubclass(cls, errors.ParquetryWarning), name
            continue
        assert issubclass(cls, errors.ParquetryError), name
