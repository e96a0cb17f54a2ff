"""Attacks on Dataset.commit_files with descriptions another writer built: statistics of a
column the dataset does not have were committed, and every later open of the dataset failed
(MetadataCorrupted: its document is checked when read)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from parquetry.dataset import Dataset
from parquetry.dataset.stats import compute_stats
from parquetry.dataset.write import FileDescription
from parquetry.errors import InvalidArgument
from parquetry.store import MemoryStore


def _described(store: MemoryStore, table: pa.Table, name: str) -> FileDescription:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    key = f"c/table/{name}.parquet"
    store.put(key, sink.getvalue().to_pybytes())
    return FileDescription(
        table="table",
        key=key,
        label=name,
        partition=(),
        rows=table.num_rows,
        size=len(sink.getvalue()),
        stats=compute_stats(table),
    )


@pytest.mark.parametrize("mode", ["append", "overwrite"])
def test_statistics_of_an_unknown_column_are_refused_and_the_dataset_stays_readable(
    mode: str,
) -> None:
    store = MemoryStore()
    ds = Dataset.create(store, "c", pa.table({"id": pa.array([0, 1], pa.int64())}))
    extra = pa.table({"id": pa.array([2], pa.int64()), "zz": [1]})
    with pytest.raises(InvalidArgument, match="zz"):
        Dataset.commit_files(store, "c", [_described(store, extra, "extra")], mode=mode)
    again = Dataset.open(store, "c")
    assert again.version == ds.version
    assert again.read().column("id").to_pylist() == [0, 1]
    # Without the stray statistics, the file (its extra column ignored) commits and reads.
    f = _described(store, extra, "extra2")
    f.stats.pop("zz")
    out = Dataset.commit_files(store, "c", [f], mode=mode)
    assert sorted(Dataset.open(store, "c").read().column("id").to_pylist()) == (
        [0, 1, 2] if mode == "append" else [2]
    )
    assert out.version == ds.version + 1
