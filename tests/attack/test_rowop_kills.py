"""Row operations (upsert, delete_where, update_where) and restore SIGKILLed at every
mutating request (before the odd ones, after the even ones), then garbage collected with
retention 0 and read: the dataset holds exactly the rows before or exactly the rows after
the operation (never a mix, never lost or duplicated rows), and the operation then runs to
completion on it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest

from parquetry.dataset import Dataset
from parquetry.store import LocalStore

SRC = Path(__file__).resolve().parents[2] / "src"
TESTS = Path(__file__).resolve().parents[1]

OPS = {
    "upsert": "ds.upsert(pa.table({'p': pa.array([0, 1, 2], pa.int64()), "
    "'id': pa.array([3, 4, 100], pa.int64()), 'v': pa.array([7, 7, 7], pa.int64())}), on=['id'])",
    "delete": "ds.delete_where([[('id', '<', 8)]])",
    "update": "ds.update_where([[('p', '==', 1)]], {'v': 9})",
    "restore": "ds.restore(1)",
}

CHILD = """
import sys
from pathlib import Path
import pyarrow as pa
from adversarial.harness.killstore import KillSwitch
from parquetry.dataset import Dataset
from parquetry.store import LocalStore

root, kill_at, when, trace = sys.argv[1:5]
switch = KillSwitch(kill_at=int(kill_at) or None, when=when, trace=Path(trace) if trace else None)
ds = Dataset.open(switch.wrap(LocalStore(root)), "ds")
OP
"""


def _child(op: str, root: Path, kill_at: int, when: str, trace: Path | None) -> int:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), str(TESTS)])}
    code = CHILD.replace("OP", OPS[op])
    args = [str(root), str(kill_at), when, str(trace or "")]
    return subprocess.run([sys.executable, "-c", code, *args], env=env, check=False).returncode


def _rows(ds: Dataset) -> Counter[tuple[int, int, int]]:
    t = ds.read()
    cols = [t.column(c).to_pylist() for c in ("p", "id", "v")]
    return Counter(zip(*cols, strict=True))


def _template(root: Path) -> None:
    def chunk(ids: range) -> pa.Table:
        return pa.table(
            {
                "p": pa.array([i % 3 for i in ids], pa.int64()),
                "id": pa.array(list(ids), pa.int64()),
                "v": pa.array([0] * len(ids), pa.int64()),
            }
        )

    ds = Dataset.create(LocalStore(root), "ds", chunk(range(10)), partition_on=["p"])
    ds.append(chunk(range(10, 20))).append(chunk(range(20, 24)))


@pytest.mark.slow
@pytest.mark.parametrize("op", sorted(OPS))
def test_a_row_operation_killed_anywhere_then_gc_leaves_before_or_after(
    op: str, tmp_path: Path
) -> None:
    template = tmp_path / "template"
    _template(template)
    before = _rows(Dataset.open(LocalStore(template), "ds"))
    traced = tmp_path / "traced"
    shutil.copytree(template, traced)
    trace = tmp_path / "trace"
    assert _child(op, traced, 0, "before", trace) == 0
    after = _rows(Dataset.open(LocalStore(traced), "ds"))
    assert after != before
    requests = len(trace.read_text().splitlines())
    # Four kill points (the suite stays fast; every request was swept once by hand): the
    # first, one in the middle, and the last two, where the commit point and the cleanup
    # after it are.
    kills = sorted({1, requests // 2, requests - 1, requests} - {0})
    for k in kills:
        root = tmp_path / f"k{k}"
        shutil.copytree(template, root)
        when = "before" if k % 2 else "after"
        assert _child(op, root, k, when, None) == -9
        store = LocalStore(root)
        Dataset.open(store, "ds").garbage_collect(retention=0)
        got = _rows(Dataset.open(store, "ds"))
        assert got in (before, after), f"killed {when} request {k} of {op}"
        Dataset.repair(store, "ds")
        Dataset.open(store, "ds").garbage_collect(retention=0)
        assert _rows(Dataset.open(store, "ds")) == got
        if got == before and op != "restore":  # run again, it completes (version 1 of a
            # restore expired in the GC above)
            assert _child(op, root, 0, "before", None) == 0
            assert _rows(Dataset.open(store, "ds")) == after
