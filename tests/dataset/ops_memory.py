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

__all__ = [
    "INDEXED_ROW_BYTES",
    "ROW_BYTES",
    "big_dataset",
    "indexed_dataset",
    "run_limited",
    "uuid_dataset",
    "uuid_strings",
]

#: Decoded bytes per row of :func:`big_dataset` (three int64 columns, ``part`` included).
ROW_BYTES = 24

_PRELUDE = """
import json, resource, sys
import pyarrow as pa, pyarrow.compute as pc
from parquetry.dataset import Dataset
from parquetry.store import LocalStore
ds = Dataset.open(LocalStore(sys.argv[1]), "m")
def _vm(field="VmSize:"):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1]) * 1024
_vm0 = _vm()
_limit = _vm0 + int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_AS, (_limit, _limit))
# Not ru_maxrss: a child inherits its parent's peak across fork and exec.
_rss0 = _vm("VmRSS:")
def report(**values):
    values["peak_growth"] = _vm("VmHWM:") - _rss0
    values["vm_peak_growth"] = _vm("VmPeak:") - _vm0
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


_HEX = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)


def uuid_strings(rng: np.random.Generator, n: int) -> pa.Array:
    """n random UUID-like texts (36 characters), built as one byte buffer (no Python
    string per row)."""
    raw = rng.integers(0, 256, size=(n, 16), dtype=np.uint8)
    digits = np.empty((n, 32), dtype=np.uint8)
    digits[:, 0::2] = _HEX[raw >> 4]
    digits[:, 1::2] = _HEX[raw & 0x0F]
    text = np.full((n, 36), ord("-"), dtype=np.uint8)
    for start, stop, dst in ((0, 8, 0), (8, 12, 9), (12, 16, 14), (16, 20, 19), (20, 32, 24)):
        text[:, dst : dst + stop - start] = digits[:, start:stop]
    offsets = pa.py_buffer(np.arange(0, 36 * (n + 1), 36, dtype=np.int32).tobytes())
    return pa.Array.from_buffers(pa.string(), n, [None, offsets, pa.py_buffer(text.tobytes())])


def uuid_dataset(root: Path, files: int, rows_per_file: int) -> Dataset:
    """Columns ``part`` (the partition: one file each), ``id`` (a random UUID text per
    row, indexed) and ``v`` (``row % 1000``)."""
    schema = pa.schema([("part", pa.int64()), ("id", pa.string()), ("v", pa.int64())])
    rng = np.random.default_rng(14)
    v = pa.array(np.arange(rows_per_file, dtype=np.int64) % 1000)

    def batches() -> Any:
        for f in range(files):
            part = pa.array(np.full(rows_per_file, f))
            yield pa.record_batch([part, uuid_strings(rng, rows_per_file), v], schema=schema)

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
