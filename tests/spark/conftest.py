"""Spark tests: the shared session fixture ``spark`` lives in tests/conftest.py."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/spark/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.spark)
