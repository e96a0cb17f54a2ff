"""A compaction writing several bins at once (compact_pipeline.py) SIGKILLed at moments
spread over its run (the child signals once its imports are done, the kill follows after a
delay): the dataset reads exactly the rows before (or after, once committed), the index
agrees with a scan, GC leaves only files of versions that open or of open intents, every
temporary file the killed writers left is removable (no live writer holds one) and the
compaction then completes."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from parquetry.dataset import Dataset
from parquetry.store import LocalStore
from parquetry.store.temporaries import remove_stale_temporaries

SRC = Path(__file__).resolve().parents[2] / "src"

CHILD = """
import sys
from parquetry.dataset import Dataset
from parquetry.store import LocalStore

root, target = sys.argv[1], int(sys.argv[2])
ds = Dataset.open(LocalStore(root), "c")
print("ready", flush=True)
ds.compact(target_file_size=target)
print("done", flush=True)
"""


def _chunk(start: int, n: int) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table(
        {
            "p": pa.array([i % 2 for i in ids], pa.int64()),
            "id": pa.array(ids, pa.int64()),
            "tag": [f"t{i % 5}" for i in ids],
            "v": [float(i) / 3 for i in ids],
        }
    )


def _template(root: Path) -> int:
    ds = Dataset.create(
        LocalStore(root), "c", _chunk(0, 2000), partition_on=["p"], secondary_indices=["tag"]
    )
    for i in range(1, 8):
        ds = ds.append(_chunk(i * 2000, 2000))
    return 2 * max(f.size or 0 for f in ds.plan().files) + 1


def _rows(ds: Dataset) -> pa.Table:
    t = ds.read()
    return t.select(sorted(t.column_names)).sort_by("id")


def _child(root: Path, target: int, delay: float | None) -> tuple[int, float]:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(root), str(target)],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    start = time.monotonic()
    if delay is not None:
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
    code = proc.wait(60)
    proc.stdout.close()
    return code, time.monotonic() - start


def _check(root: Path, before: pa.Table) -> None:
    store = LocalStore(root)
    ds = Dataset.open(store, "c")
    assert _rows(ds).equals(before)
    oracle = set()
    for f in ds.plan().files:
        values = pc.unique(ds.read_file(f, columns=["tag"]).column("tag")).drop_null()
        oracle |= {(v, f.label) for v in values.to_pylist()}
    t = ds.index_pairs("tag")
    assert set(zip(t.column("value").to_pylist(), t.column("label").to_pylist(), strict=True)) == (
        oracle
    )
    ds.garbage_collect(retention=0)
    ds = Dataset.open(store, "c")
    referenced = {
        f.key
        for v in ds.versions()
        for f in Dataset.open(store, "c", version=v.number).plan().files
    }
    intents: set[str] = set()
    for m in store.list("c/_intents/"):
        intents |= set(json.loads(store.get(m.key))["keys"])
    data = {m.key for m in store.list("c/table/p=")}
    assert data - referenced <= intents, data - referenced - intents
    # The killed process held no lock any more: every temporary it left is removable.
    temps = list(root.rglob(".parquetry-tmp-*"))
    for p in temps:
        os.utime(p, (time.time() - 7200, time.time() - 7200))
    removed = remove_stale_temporaries(store, "c")
    assert len(removed) == len(temps)
    assert not list(root.rglob(".parquetry-tmp-*"))
    assert _rows(Dataset.open(store, "c")).equals(before)


@pytest.mark.slow
def test_a_multi_bin_compaction_killed_at_moments_spread_over_its_run(tmp_path: Path) -> None:
    template = tmp_path / "template"
    target = _template(template)
    before = _rows(Dataset.open(LocalStore(template), "c"))
    timed = tmp_path / "timed"
    shutil.copytree(template, timed)
    code, duration = _child(timed, target, None)
    assert code == 0
    assert len(Dataset.open(LocalStore(timed), "c").plan().files) < 16
    outcomes = set()
    for i, frac in enumerate((0.05, 0.2, 0.35, 0.5, 0.65, 0.8, 0.9, 0.97)):
        root = tmp_path / f"k{i}"
        shutil.copytree(template, root)
        code, _ = _child(root, target, frac * duration)
        outcomes.add(code)
        _check(root, before)
        ds = Dataset.open(LocalStore(root), "c")
        done = ds.compact(target_file_size=target)
        assert _rows(done).equals(before)
        assert len(done.plan().files) < 16
    assert -signal.SIGKILL in outcomes
