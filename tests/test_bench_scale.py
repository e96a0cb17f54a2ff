"""Smoke test of ``benchmarks/bench_scale.py`` (issue 13's benchmark) at a tiny size.

Not a measurement: it checks that the benchmark still runs against the current API and
measures what it claims (the build's files read back, the planned lookup finds its row,
appends and commits happen, bytes are attributed to the right kinds of objects).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_scale.py"

pytestmark = pytest.mark.slow


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_scale", BENCH)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_scale"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def test_bench_scale_runs_and_measures_what_it_says(tmp_path: Path) -> None:
    bench = _load()
    try:
        import deltalake  # noqa: F401

        delta = True
    except ImportError:
        delta = False
    args = ["--sizes", "60", "--files-per-partition", "2", "--appends", "6", "--commits", "12"]
    args += ["--delta-appends", "2", "--dir", str(tmp_path), "--json", str(tmp_path / "r.json")]
    results = bench.main(args if delta else [*args, "--no-delta"])

    (size,) = results["sizes"]
    assert size["build"]["files"] == 120
    assert size["build"]["index_values"] == 1200
    appends = size["appends"]
    assert appends["n"] == 6
    assert not appends["budget_hit"]
    # Every append writes a version entry (both formats): metadata > 0, and the data file
    # itself is not counted as metadata.
    assert appends["meta_bytes"] > 0
    assert "data" not in appends["by_kind"]
    assert appends["by_kind"]["entry"] > 0
    assert sum(appends["by_kind"].values()) == pytest.approx(appends["meta_bytes"])
    assert appends["median_s"] <= appends["p90_s"]
    for key in ("open", "open_before_appends"):
        opened = size[key]
        assert opened["matched_files"] == 1  # the index narrows k == x to one file
        assert opened["requests"] >= 2  # at least the pointer and one index read
        assert opened["bytes_read"] > 0
    names = [row[0] for row in size["targets"]]
    assert "append commit latency, median" in names
    assert all(isinstance(row[3], bool) for row in size["targets"])
    assert results["many"]["commits"] == 12
    assert results["many"]["open_s"] > 0
    if delta:
        assert size["delta"]["appends"] == 2
        assert results["delta_many"]["commits"] == 12
        assert len(results["many_targets"]) == 3
    assert (tmp_path / "r.json").exists()
    # The temporary tables are removed unless --keep.
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_file_template_writes_the_values_it_is_given() -> None:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    bench = _load()
    template = bench.FileTemplate()
    ks = np.array([9, 1, 8, 2, 7, 3, 6, 4, 5, 0], dtype=np.int64)
    vs = np.arange(100, 110, dtype=np.int64)
    got = pq.read_table(pa.BufferReader(template.file(ks, vs)))
    assert got["k"].to_pylist() == ks.tolist()
    assert got["v"].to_pylist() == vs.tolist()


def test_sizes_none_runs_only_the_many_commits_phase_with_its_own_budget(
    tmp_path: Path,
) -> None:
    bench = _load()
    assert bench.parse_sizes("none") == []
    assert bench.parse_sizes("1k, 5") == [("1k", 1000), ("5", 5)]
    args = ["--sizes", "none", "--commits", "5", "--many-budget", "600", "--no-delta"]
    results = bench.main([*args, "--dir", str(tmp_path)])
    assert results["sizes"] == []
    assert results["many"]["commits"] == 5
    assert not results["many"]["budget_hit"]
