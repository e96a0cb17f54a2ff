"""Smoke test of ``benchmarks/bench_streaming.py`` (issue 15) at a tiny size: not a
measurement; it checks that the benchmark runs against the current API and that its
auto-compaction bounds the file count as it claims."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_streaming.py"

pytestmark = pytest.mark.slow


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_streaming", BENCH)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_streaming"] = module
    spec.loader.exec_module(module)
    return module


def test_bench_streaming_small_files_quick(tmp_path: Path) -> None:
    bench = _load()
    plain, compacted = bench.main(["--quick", "--skip-spark", "--batches", "12", "--every", "4"])
    assert plain["rows"] == compacted["rows"] == 12 * 100
    assert plain["files"] == 12 * 4  # one file per partition per micro-batch
    assert compacted["files"] == 4  # compacted after batch 12: one file per partition
    assert compacted["versions"] == plain["versions"] + 3  # three compaction commits
