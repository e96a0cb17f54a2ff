"""Smoke test of ``benchmarks/ops_cases_rowops.py`` (bench_ops' delete/update cases) at a
tiny size: both sides end with the same, expected rows; times and peak RSS come from each
side's own process. Not a measurement."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

CASES = Path(__file__).resolve().parents[1] / "benchmarks" / "ops_cases_rowops.py"

pytestmark = pytest.mark.slow


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("ops_cases_rowops", CASES)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["ops_cases_rowops"] = module
    spec.loader.exec_module(module)
    return module


def test_rowops_cases_run_and_agree_with_deltalake(tmp_path: Path) -> None:
    pytest.importorskip("deltalake")
    results = _load().case(tmp_path, True, {"rows": 4000, "partitions": 10})
    assert [r["case"] for r in results] == [
        "delete 1% by key",
        "update where v range",
        "update where p range",
    ]
    for r in results:
        assert r["build"]["parquetry_files"] == 10
        for side in ("parquetry", "deltalake"):
            got = r[side]
            assert got["correct"], (r["case"], side, got, r["expected"])
            assert got["seconds"] > 0
            assert got["peak_rss"] > 30 << 20  # its own process, with pyarrow loaded
    delete, by_v, by_p = results
    assert delete["expected"]["rows_after"] == 4000 - 40  # k < 40 of a permutation
    assert delete["parquetry"]["metrics"]["rows_deleted"] == 40
    assert by_v["parquetry"]["metrics"]["rows_updated"] == by_v["expected"]["updated_rows"]
    assert by_p["expected"]["updated_rows"] == 400  # one partition of ten
    assert by_p["parquetry"]["metrics"]["files_rewritten"] == 1
