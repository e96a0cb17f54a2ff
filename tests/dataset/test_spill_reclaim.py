"""Spill directories of a PairSink whose process was SIGKILLed are reclaimed by the next
sink that spills; a directory a live process holds is never touched."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pyarrow as pa
import pytest

from parquetry.dataset import spilldir
from parquetry.dataset.indexspill import PairSink, label_pairs

_CHILD = textwrap.dedent(
    """
    import sys, time
    import pyarrow as pa
    from parquetry.dataset.indexspill import PairSink, label_pairs
    sink = PairSink(pa.int64(), run_pairs=10)
    sink.add(label_pairs("f", pa.array(range(20), pa.int64()), pa.int64()))
    assert sink.spilled
    print(sink._dir.name, flush=True)
    time.sleep(600)
    """
)


def _child(tmp: Path) -> tuple[subprocess.Popen[str], str]:
    env = {**os.environ, "TMPDIR": str(tmp)}
    proc = subprocess.Popen(
        [sys.executable, "-c", _CHILD], env=env, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    assert line, "the child did not spill"
    return proc, line


def _spill_once() -> None:
    with PairSink(pa.int64(), run_pairs=10) as sink:
        sink.add(label_pairs("g", pa.array(range(20), pa.int64()), pa.int64()))
        assert sink.spilled


@pytest.mark.skipif(spilldir.fcntl is None, reason="needs flock")
def test_a_killed_sinks_directory_is_reclaimed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(spilldir, "CREATING_GRACE", 0.0)
    killed, killed_dir = _child(tmp_path)
    alive, alive_dir = _child(tmp_path)
    try:
        assert Path(killed_dir).name.startswith(f"parquetry-index-{killed.pid}-")
        killed.send_signal(signal.SIGKILL)
        killed.wait(timeout=30)
        assert Path(killed_dir).is_dir()  # SIGKILL: no cleanup ran
        _spill_once()  # a new sink spills: it reclaims the dead process's directory
        assert not Path(killed_dir).exists()
        assert Path(alive_dir).is_dir()  # held by a live process
        assert any(p.name.startswith("run") for p in Path(alive_dir).iterdir())
        # Our own sink removed its directory on close.
        assert sorted(p.name for p in tmp_path.iterdir()) == [Path(alive_dir).name]
    finally:
        for proc in (killed, alive):
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                proc.wait(timeout=30)
            if proc.stdout is not None:
                proc.stdout.close()
    assert spilldir.reclaim_spill_dirs(str(tmp_path)) == [alive_dir]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(spilldir.fcntl is None, reason="needs flock")
def test_young_unlocked_and_foreign_entries_are_left_alone(tmp_path: Path) -> None:
    # Default grace: a directory its owner may still be locking is not reclaimed.
    young = tmp_path / "parquetry-index-1-young"
    young.mkdir()
    (young / ".lock").touch()
    other = tmp_path / "parquetry-index-3-notadir"
    other.write_text("x")
    old_format = tmp_path / "parquetry-index-rr6di3zr"  # an older parquetry's: maybe in use
    old_format.mkdir()
    os.utime(old_format, (0, 0))
    link = tmp_path / "parquetry-index-2-link"
    target = tmp_path / "keep"
    target.mkdir()
    (target / ".lock").touch()
    os.utime(target / ".lock", (0, 0))
    link.symlink_to(target)
    assert spilldir.reclaim_spill_dirs(str(tmp_path)) == []
    assert young.is_dir()
    assert other.is_file()
    assert (target / ".lock").exists()
    assert old_format.is_dir()
    # Once old and unlocked, it goes.
    os.utime(young / ".lock", (0, 0))
    assert spilldir.reclaim_spill_dirs(str(tmp_path)) == [str(young)]
    # No lock file (its owner died before locking it): reclaimed once old, if its pid is
    # gone; a live pid keeps it.
    mine = tmp_path / f"parquetry-index-{os.getpid()}-nolock"
    mine.mkdir()
    os.utime(mine, (0, 0))
    assert spilldir.reclaim_spill_dirs(str(tmp_path)) == []
    assert mine.is_dir()
