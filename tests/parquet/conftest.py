"""Fixtures of the Parquet file layer tests: one small local SparkSession for the package."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


def pytest_configure(config: pytest.Config) -> None:
    # pyspark 4.x warns about pandas 3 on import; not ours to fix.
    config.addinivalue_line(
        "filterwarnings", "ignore:PySpark does not yet fully support pandas:FutureWarning"
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # The shared any_store/store_factory fixtures reach S3 (moto) without a marker of their own.
    for item in items:
        if "tests/parquet/" not in str(item.fspath).replace("\\", "/"):
            continue
        params = getattr(getattr(item, "callspec", None), "params", {})
        if "s3" in params.values() or "moto_server" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.s3)


@pytest.fixture(scope="session")
def parquet_spark() -> Iterator[Any]:
    """A local[2] SparkSession with 1 GiB of driver memory, UTC session time, no UI."""
    pytest.importorskip("pyspark")
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("parquetry-parquet-tests")
        .config("spark.driver.memory", "1g")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()
