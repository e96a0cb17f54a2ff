"""Fixtures for the snapshot-dataset tests."""

from __future__ import annotations

import pyarrow as pa
import pytest

from parquetry.snapshot import ParquetDatasetStore
from parquetry.store import Store


@pytest.fixture
def sample_table() -> pa.Table:
    """remote-store's upstream fixture table."""
    return pa.table({"id": [1, 2, 3], "name": ["a", "b", "c"], "value": [1.0, 2.0, 3.0]})


@pytest.fixture
def pds(any_store: Store) -> ParquetDatasetStore:
    return ParquetDatasetStore(any_store)
