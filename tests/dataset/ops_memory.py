"""Running a table operation in a subprocess under an address-space limit (RLIMIT_AS).

:func:`big_dataset` writes a dataset whose decoded size is several times the limit (the
values are repetitive, so the files stay small on disk and writing is quick);
:func:`run_limited` runs a snippet against it in a fresh interpreter whose address space may
grow by only ``headroom`` bytes beyond what it holds after its imports. Arrow allocates
through the system allocator there (``ARROW_DEFAULT_MEMORY_POOL=system``, two malloc
arenas): mimalloc/jemalloc reserve address space up front, which the limit would then
count before the operation starts, or not at all.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from parquetry.dataset import Dataset
from parquetry.store import LocalStore

__all__ = ["INDEXED_ROW_BYTES", "ROW_BYTES", "big_dataset", "indexed_dataset", "run_limited"]

#: Decoded bytes per row of :func:`big_dataset` (three int64 columns, ``part`` included).
ROW_BYTES = 24

_PRELUDE = """
import json, resource, sys
import pyarrow as pa, pyarrow.compute as pc
from parquetry.dataset import Dataset
from parquetry.store import LocalStore
ds = Dataset.open(LocalStore(sys.argv[1]), "m")
def _vm():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
_limit = _vm() + int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_AS, (_limit, _limit))
_rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
def report(**values):
    values["peak_growth"] = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - _rss0) << 10
    print(json.dumps(values))
"""


def big_dataset(root: Path, files: int, rows_per_file: int) -> Dataset:
    """Columns ``part`` (the partition: one file each), ``k`` (``i // 1000`` plus
    ``part * 10**7``: unique per file) and ``v`` (``i % 1000``), int64."""
    schema = pa.schema([("part", pa.int64()), ("k", pa.int64()), ("v", pa.int64())])
    i = np.arange(rows_per_file, dtype=np.int64)

    def batches() -> Any:
        for f in range(files):
            yield pa.record_batch(
                [
                    pa.array(np.full(rows_per_file, f)),
                    pa.array(i // 1000 + f * 10**7),
                    pa.array(i % 1000),
                ],
                schema=schema,
            )

    reader = pa.RecordBatchReader.from_batches(schema, batches())
    return Dataset.create(LocalStore(root), "m", reader, partition_on=["part"])


#: Decoded bytes per row of :func:`indexed_dataset`.
INDEXED_ROW_BYTES = 8 * 11


def indexed_dataset(root: Path, files: int, rows_per_file: int) -> Dataset:
    """Columns ``part`` (the partition: one file each), ``id`` (unique over the dataset,
    indexed: the index holds one pair per row), ``v`` (``id % 1000``) and ``pad0``..``pad7``
    (zeros: decoded bytes that cost nothing on disk), int64."""
    names = ["part", "id", "v", *(f"pad{n}" for n in range(8))]
    schema = pa.schema([(name, pa.int64()) for name in names])
    i = np.arange(rows_per_file, dtype=np.int64)
    zeros = pa.array(np.zeros(rows_per_file, dtype=np.int64))

    def batches() -> Any:
        for f in range(files):
            ids = i + f * rows_per_file
            yield pa.record_batch(
                [pa.array(np.full(rows_per_file, f)), pa.array(ids), pa.array(ids % 1000)]
                + [zeros] * 8,
                schema=schema,
            )

    reader = pa.RecordBatchReader.from_batches(schema, batches())
    return Dataset.create(
        LocalStore(root), "m", reader, partition_on=["part"], secondary_indices=["id"]
    )


def run_limited(root: Path, code: str, headroom: int, timeout: float = 120) -> dict[str, Any]:
    """Run ``code`` (it has ``ds`` = dataset ``m`` under ``root`` and calls
    ``report(**values)``) with the address space limited; its report, or a failure."""
    env = {
        **os.environ,
        "ARROW_DEFAULT_MEMORY_POOL": "system",
        "MALLOC_ARENA_MAX": "2",
        "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
    }
    script = _PRELUDE + textwrap.dedent(code)
    proc = subprocess.run(
        [sys.executable, "-c", script, str(root), str(headroom)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {"failed": proc.returncode, "stderr": proc.stderr[-3000:]}
    out: dict[str, Any] = json.loads(lines[-1])
    return out
