"""``parquetry demo --streaming``: a real Spark stream killed midway and restarted, exactly once."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from parquetry import Dataset
from parquetry.cli.app import app
from parquetry.store import LocalStore

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_streaming_demo_survives_a_killed_driver(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    args = ["demo", "--streaming", "--store", str(lake), "--batches", "6", "--rows", "600"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "killed the driver" in result.output
    assert "exactly once: 600 events in, 600 rows out" in result.output
    clicks = Dataset.open(LocalStore(lake), "clicks")
    ids = clicks.read(columns=["id"]).column("id").to_pylist()
    assert sorted(ids) == list(range(600))
    assert clicks.partition_keys == ("day",)
    users = clicks.read(columns=["user"], predicates=[[("user", "==", 42)]])
    assert users.num_rows == sum(1 for i in range(600) if i % 997 == 42)
    (query_id,) = clicks.transactions  # one stream, its batches recorded once each
    assert clicks.transactions[query_id] >= 5
