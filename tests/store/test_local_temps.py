"""Temporary files of LocalStore writers: a SIGKILLed writer's is removed by garbage
collection; a live writer's never is, however long it has been idle."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from parquetry.cli.maintenance import DryRunStore
from parquetry.dataset import Dataset
from parquetry.errors import CapabilityNotSupported, InvalidArgument
from parquetry.store import LocalStore, MemoryStore
from parquetry.store.temporaries import remove_stale_temporaries

# A streamed writer: fills its temporary file with one piece, says so, then waits for a
# line on stdin before writing a second piece and committing.
_WRITER = textwrap.dedent(
    """
    import sys
    from parquetry.store import LocalStore
    store = LocalStore(sys.argv[1])
    w = store.open_writer(sys.argv[2])
    w.write(b"a" * (2 << 20))  # past a piece (CHUNK_BYTES): the temporary file is written
    print("written", flush=True)
    sys.stdin.readline()
    w.write(b"b")
    w.commit()
    print("committed", flush=True)
    """
)

_HOURS_AGO = time.time() - 2 * 3600


class _Writer:
    def __init__(self, root: Path, key: str):
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(root), key],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        assert self.proc.stdout.readline().strip() == "written"

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.communicate(timeout=30)  # reaps it and closes the pipes

    def finish(self) -> str:
        out, _ = self.proc.communicate("go\n", timeout=60)
        return out.strip()


@pytest.fixture
def writers() -> Iterator[list[_Writer]]:
    started: list[_Writer] = []
    yield started
    for w in started:
        if w.proc.poll() is None:
            w.kill()


def _temps(directory: Path) -> list[Path]:
    return sorted(p for p in directory.iterdir() if p.name.startswith(".parquetry-tmp-"))


def _age(paths: list[Path]) -> None:
    for p in paths:
        os.utime(p, (_HOURS_AGO, _HOURS_AGO))


def test_a_killed_writers_file_goes_a_slow_live_writers_stays(
    tmp_path: Path, writers: list[_Writer]
) -> None:
    store = LocalStore(tmp_path / "s")
    store.put("ds/t/other", b"o")
    writers.append(_Writer(store.root, "ds/t/killed"))
    killed = _temps(store.root / "ds" / "t")
    writers.append(_Writer(store.root, "ds/t/slow"))
    slow = [p for p in _temps(store.root / "ds" / "t") if p not in killed]
    assert len(killed) == len(slow) == 1
    writers[0].kill()
    # Both idle for hours: only the lock tells the live writer from the dead one.
    _age(killed + slow)
    assert remove_stale_temporaries(store, "ds", dry_run=True) == [f"ds/t/{killed[0].name}"]
    assert killed[0].exists()
    assert remove_stale_temporaries(store, "ds") == [f"ds/t/{killed[0].name}"]
    assert _temps(store.root / "ds" / "t") == slow
    assert writers[1].finish() == "committed"
    assert store.get("ds/t/slow") == b"a" * (2 << 20) + b"b"
    assert _temps(store.root / "ds" / "t") == []
    assert sorted(m.key for m in store.list()) == ["ds/t/other", "ds/t/slow"]


def test_pruning_a_directory_spares_a_slow_live_writer(
    tmp_path: Path, writers: list[_Writer]
) -> None:
    """Deleting the last object of a directory removes its old temporary files with it:
    before writers locked theirs, an idle writer's went too, the directory with it, and its
    commit failed."""
    store = LocalStore(tmp_path / "s")
    store.put("d/x", b"1")
    writers.append(_Writer(store.root, "d/slow"))
    _age(_temps(store.root / "d"))
    store.delete("d/x")
    assert len(_temps(store.root / "d")) == 1
    assert writers[0].finish() == "committed"
    assert store.get("d/slow") == b"a" * (2 << 20) + b"b"


def test_only_old_files_of_the_stores_own_pattern(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "s")
    store.put("a/b/k", b"1")
    d = store.root / "a" / "b"
    own = d / (".parquetry-tmp-" + "0" * 32)
    young = d / (".parquetry-tmp-" + "1" * 32)
    foreign = [d / ".parquetry-tmp-notours", d / ".parquetry-lock"]
    for p in [own, young, *foreign]:
        p.write_bytes(b"partial")
    _age([own, *foreign])
    (d / ("x" + own.name)).symlink_to(own)  # a link is never followed nor removed
    assert remove_stale_temporaries(store, "a", recursive=False) == []  # not in a/ itself
    assert remove_stale_temporaries(store) == [f"a/b/{own.name}"]
    assert sorted(p.name for p in d.iterdir()) == sorted(
        ["k", young.name, *(p.name for p in foreign), "x" + own.name]
    )
    # A young file is spared even unlocked (its writer may not have locked it yet)...
    assert remove_stale_temporaries(store, "a") == []
    # ...unless the caller says how young a file may be.
    assert remove_stale_temporaries(store, "a", older_than=0) == [f"a/b/{young.name}"]
    assert store.get("a/b/k") == b"1"


def test_garbage_collection_removes_a_killed_writers_file(
    tmp_path: Path, writers: list[_Writer]
) -> None:
    store = LocalStore(tmp_path / "s")
    Dataset.create(store, "ds", pa.table({"x": [1]})).append(pa.table({"x": [2]}))
    writers.append(_Writer(store.root, "ds/table/killed.parquet"))
    writers[0].kill()
    temp = _temps(store.root / "ds" / "table")
    pointer_temp = store.root / (".parquetry-tmp-" + "2" * 32)  # a killed pointer write
    pointer_temp.write_bytes(b"{")
    _age([*temp, pointer_temp])
    dry = Dataset.open(DryRunStore(store), "ds").garbage_collect(retention=0)
    assert temp[0].exists()
    report = Dataset.open(store, "ds").garbage_collect(retention=0)
    assert dry.temporaries == report.temporaries
    assert report.temporaries == (f"ds/table/{temp[0].name}", pointer_temp.name)
    assert not temp[0].exists()
    assert not pointer_temp.exists()
    assert Dataset.open(store, "ds").read().num_rows == 2


def test_stores_without_temporaries_and_bad_arguments(tmp_path: Path) -> None:
    assert remove_stale_temporaries(MemoryStore(), "a") == []
    with pytest.raises(CapabilityNotSupported):
        remove_stale_temporaries(LocalStore(tmp_path).read_only())
    for bad in (-1.0, float("nan"), "1"):
        with pytest.raises(InvalidArgument):
            remove_stale_temporaries(LocalStore(tmp_path), older_than=bad)  # type: ignore[arg-type]
