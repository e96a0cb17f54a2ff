"""``Dataset.scan`` holds one row group at a time (issue 11 §5: it held up to 64 files)."""

from __future__ import annotations

import uuid

import numpy as np
import pyarrow as pa

from parquetry.dataset import Dataset
from parquetry.parquet import WriteOptions
from parquetry.store import MemoryStore

FILES = 8
ROWS_PER_FILE = 200_000
ROW_GROUP = 25_000


def _dataset() -> Dataset:
    rng = np.random.default_rng(1)
    n = FILES * ROWS_PER_FILE
    table = pa.table(
        {
            "part": pa.array(np.repeat(np.arange(FILES), ROWS_PER_FILE), pa.int64()),
            "a": pa.array(rng.integers(0, 2**60, n), pa.int64()),
            "b": pa.array(rng.random(n), pa.float64()),
        }
    )
    return Dataset.create(
        MemoryStore(f"scan-{uuid.uuid4().hex}"),
        "ds",
        table,
        partition_on=["part"],
        write_options=WriteOptions(row_group_size=ROW_GROUP, compression="none"),
    )


def test_scan_holds_one_row_group_not_many_files() -> None:
    ds = _dataset()
    assert len(ds.plan(None).files) == FILES
    file_bytes = ROWS_PER_FILE * 3 * 8  # decoded size of one file (three 8-byte columns)
    group_bytes = ROW_GROUP * 3 * 8
    base = pa.total_allocated_bytes()
    peak = 0
    rows = 0
    for batch in ds.scan():
        peak = max(peak, pa.total_allocated_bytes() - base)
        rows += batch.num_rows
        del batch
    assert rows == FILES * ROWS_PER_FILE
    # The bound the docstring states: about one decoded row group (plus Arrow's slack), far
    # below one whole file; the old scan held up to 64 files (here all eight: ~38 MB).
    assert peak < 4 * group_bytes, (peak, group_bytes)
    assert peak < file_bytes / 2, (peak, file_bytes)


def test_scan_and_read_return_the_same_rows() -> None:
    ds = _dataset()
    scanned = pa.Table.from_batches(list(ds.scan(columns=["part", "a"])))
    assert scanned.equals(ds.read(columns=["part", "a"]))
    where = [[("part", "==", 3), ("b", "<", 0.5)]]
    assert pa.Table.from_batches(list(ds.scan(predicates=where))).equals(ds.read(predicates=where))
