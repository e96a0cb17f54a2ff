"""Smoke test of ``benchmarks/bench_ops.py`` (issue 14's benchmark) at a tiny size.

Not a measurement: it checks that the benchmark still runs against the current API and
measures what it claims (both sides upsert the same rows and end with the same result,
times and peak RSS come from each side's own process, the tables are cleaned up).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_ops.py"

pytestmark = pytest.mark.slow


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_ops", BENCH)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_ops"] = module
    spec.loader.exec_module(module)
    return module


def test_bench_ops_upsert_runs_and_measures_what_it_says(tmp_path: Path) -> None:
    pytest.importorskip("deltalake")
    bench = _load()
    out = tmp_path / "r.json"
    args = ["--cases", "upsert", "--size", "4000,10,200", "--dir", str(tmp_path)]
    results = bench.main([*args, "--json", str(out)])
    assert [r["case"] for r in results] == ["upsert (recent)", "upsert (spread)"]
    for r in results:
        assert r["build"]["parquetry_files"] == 10  # one file per partition
        for side in ("parquetry", "deltalake"):
            got = r[side]
            assert got["correct"], (r["case"], side, got)
            assert got["rows_after"] == 4000 + 100  # half the source rows are new keys
            assert got["seconds"] > 0
            # Each side measured in its own process: a Python with pyarrow loaded, not 0.
            assert got["peak_rss"] > 30 << 20
        m = r["parquetry"]["metrics"]
        assert (m["rows_updated"], m["rows_inserted"]) == (100, 100)
    # "recent": the updated keys lie in the last partition, one file rewritten; "spread":
    # updates in (almost) every partition.
    assert results[0]["parquetry"]["metrics"]["files_rewritten"] == 1
    assert results[1]["parquetry"]["metrics"]["files_rewritten"] > 5
    assert out.exists()
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]
