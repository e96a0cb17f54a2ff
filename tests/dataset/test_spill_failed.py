"""A spill directory (or a run in it) that cannot be created raises SpillFailed, an OSError
naming the path and the reason, not the bare root error; nothing is left behind."""

from __future__ import annotations

import errno
import os
import pickle
import shutil
import tempfile
from pathlib import Path

import pyarrow as pa
import pytest

from parquetry.dataset.indexspill import PairSink, label_pairs
from parquetry.dataset.spilldir import SpillDir
from parquetry.errors import ParquetryError, SpillFailed


def _spill(sink: PairSink, label: str) -> None:
    sink.add(label_pairs(label, pa.array(range(20), pa.int64()), pa.int64()))


def test_a_temporary_directory_under_a_regular_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "file").write_bytes(b"x")
    parent = str(tmp_path / "file" / "tmp")
    monkeypatch.setattr(tempfile, "tempdir", parent)
    with PairSink(pa.int64(), run_pairs=10) as sink, pytest.raises(SpillFailed) as info:
        _spill(sink, "f")
    err = info.value
    assert isinstance(err, OSError)
    assert isinstance(err, ParquetryError)
    assert err.path == parent
    assert parent in str(err)
    assert err.errno == errno.ENOTDIR
    assert err.reason in str(err)
    # Crosses process boundaries (Spark executors) with its attributes.
    again = pickle.loads(pickle.dumps(err))
    assert (type(again), again.path, again.reason, str(again)) == (
        SpillFailed,
        err.path,
        err.reason,
        str(err),
    )


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_a_read_only_temporary_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    monkeypatch.setattr(tempfile, "tempdir", str(ro))
    try:
        with pytest.raises(SpillFailed) as info:
            SpillDir()
        assert info.value.path == str(ro)
        assert str(ro) in str(info.value)
        assert info.value.errno == errno.EACCES
        assert list(ro.iterdir()) == []
    finally:
        ro.chmod(0o700)


def test_a_run_that_cannot_be_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with PairSink(pa.int64(), run_pairs=10) as sink:
        _spill(sink, "f")
        assert sink._dir is not None
        spill = sink._dir.name
        # The directory vanished under the sink (a tmp cleaner) and a file took its name.
        shutil.rmtree(spill)
        Path(spill).write_bytes(b"x")
        with pytest.raises(SpillFailed) as info:
            _spill(sink, "g")
        run = os.path.join(spill, "run1.arrow")
        assert info.value.path == run
        assert run in str(info.value)
        os.remove(spill)
