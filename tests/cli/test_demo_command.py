"""``parquetry demo``: the command wired to the Spark pipeline, run end to end at small size."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from parquetry import Dataset, ParquetDatasetStore
from parquetry.cli.app import app
from parquetry.store import LocalStore

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_demo_command_builds_the_lake(spark: Any, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    result = CliRunner().invoke(app, ["demo", "--rows", "3000", "--store", lake.as_uri()])
    assert result.exit_code == 0, result.output
    assert "Revenue per day and SKU" in result.output
    store = LocalStore(lake)
    orders = Dataset.open(store, "orders")
    assert orders.read().num_rows == 3000
    assert [v.number for v in orders.versions()] == [0, 1]  # day 11 appended in a 2nd commit
    manifest = ParquetDatasetStore(store).read_manifest("revenue_per_day_sku")
    assert manifest.run_id is not None
    assert manifest.run_id.startswith("demo-")


def test_demo_command_rejects_bad_rows() -> None:
    result = CliRunner().invoke(app, ["demo", "--rows", "0"])
    assert result.exit_code != 0
    assert "Traceback" not in result.output
