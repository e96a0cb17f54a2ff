"""kartothek loads an index file into a dict, where -0.0 and 0.0 are one key: the index
file parquetry writes at a checkpoint must hold them as one row with both values' labels,
or kartothek keeps one row and loses the other's partitions."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from kt_harness import Kartothek
from kt_support import label_partition

from parquetry import Dataset
from parquetry.store import LocalStore

pytestmark = pytest.mark.kartothek


def test_kartothek_sees_both_partitions_of_signed_zeros(
    kartothek: Kartothek, tmp_path: Path
) -> None:
    root = tmp_path / "store"
    table = pa.table(
        {
            "p": ["a", "b", "b", "c"],
            "f": pa.array([-0.0, 0.0, 1.5, -0.0], pa.float64()),
        }
    )
    ds = Dataset.create(LocalStore(root), "z", table, partition_on=["p"], secondary_indices=["f"])
    ds.checkpoint()
    (inspected,) = kartothek.run(root, [{"op": "inspect", "uuid": "z"}])
    values = inspected["indices"]["f"]["values"]
    zeros = [labels for value, labels in values if value == 0]
    assert len(zeros) == 1, values
    cells = {label_partition(lb) for lb in zeros[0]}
    assert cells == {(("p", "a"),), (("p", "b"),), (("p", "c"),)}
