"""Compaction streams its inputs and its outputs: under an address-space limit (RLIMIT_AS,
the system allocator: ops_memory.run_limited) smaller than the dataset's decoded size, both
the re-encoding and the binary-copy path compact 40 files (~80 MB encoded, 240 MB decoded)
into files of a 32 MiB target, rows unchanged.

The limits fail the code that held each encoded output whole until one put (measured on
this dataset: the re-encoding path needed 160 MiB, failing at 144; the binary copy 112 MiB,
failing at 104) and pass the streamed outputs (Store.open_writer: re-encoding passes at
120 MiB, binary copy at 64 MiB)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from parquetry.dataset import Dataset
from parquetry.store import LocalStore

from .ops_memory import ROW_BYTES, run_limited

FILES = 40
ROWS = 250_000  # per file: 6 MB decoded; the dataset: 240 MB
TARGET = 32 << 20
#: Address space beyond the process's start, per path (see the module doc for the margins).
HEADROOM = {False: 136 << 20, True: 80 << 20}


def _small_files(root: Path) -> Dataset:
    """``FILES`` appends of ``ROWS`` rows, one partition: every file is a compaction input;
    ``v`` random, so a file's encoded size (~2 MB) is a real share of its decoded size."""
    i = np.arange(ROWS, dtype=np.int64)
    rng = np.random.default_rng(5)
    ds = None
    for f in range(FILES):
        v = rng.random(ROWS)
        t = pa.table({"part": np.full(ROWS, 0), "k": i // 1000 + f * 10**7, "v": v})
        ds = Dataset.create(LocalStore(root), "m", t) if ds is None else ds.append(t)
    assert ds is not None
    return ds


@pytest.mark.slow
@pytest.mark.parametrize("binary_copy", [False, True])
def test_compaction_fits_an_address_space_limit(tmp_path: Path, binary_copy: bool) -> None:
    _small_files(tmp_path)
    headroom = HEADROOM[binary_copy]
    assert headroom < FILES * ROWS * ROW_BYTES
    code = f"""
    before = len(ds.plan().files)
    out = ds.compact(target_file_size={TARGET}, binary_copy={binary_copy})
    report(before=before, after=len(out.plan().files),
           compacted=out.info.extra.get("files_compacted"))
    """
    got = run_limited(tmp_path, code, headroom, timeout=300)
    assert "failed" not in got, got
    assert got["before"] == FILES
    assert got["compacted"] == FILES
    assert 2 <= got["after"] < FILES // 4  # outputs near the target, not one file
    assert got["peak_growth"] < headroom
    ds = Dataset.open(LocalStore(tmp_path), "m")
    table = ds.read(columns=["k"])
    assert table.num_rows == FILES * ROWS
    assert pa.compute.count_distinct(table.column("k")).as_py() == FILES * ROWS // 1000
