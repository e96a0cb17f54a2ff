"""Fixtures of the Parquet file layer tests: one small local SparkSession for the package."""

from __future__ import annotations

from typing import Any

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # The shared any_store/store_factory fixtures reach S3 (moto) without a marker of their own.
    for item in items:
        if "tests/parquet/" not in str(item.fspath).replace("\\", "/"):
            continue
        params = getattr(getattr(item, "callspec", None), "params", {})
        if "s3" in params.values() or "moto_server" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.s3)


@pytest.fixture(scope="session")
def parquet_spark(spark: Any) -> Any:
    """The run's shared local SparkSession (UTC session time, see tests/conftest.py)."""
    return spark
