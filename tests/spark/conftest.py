"""One local[2,2] SparkSession for every Spark test (2 attempts per task, for retry tests)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("pyspark")


def pytest_configure(config: pytest.Config) -> None:
    # pyspark 4.3 warns about pandas 3 on import; not ours to fix.
    config.addinivalue_line(
        "filterwarnings", "ignore:PySpark does not yet fully support pandas:FutureWarning"
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/spark/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.spark)


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from parquetry.spark import local_session

    session = local_session("local[2,2]", app_name="parquetry-tests")
    try:
        yield session
    finally:
        session.stop()
