"""LocalStore temporaries (store/_localtemps.py) a garbage collection must leave alone, in
cases the process-level tests do not reach: a live writer in the *same* process (flock
locks conflict between open file descriptions, not only between processes), a writer
forked into a child that still runs, and the temporary name a CREATE writer killed
between its link and its unlink leaves (a second name of the committed object: removing
it must leave the object intact)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from parquetry.store import LocalStore, PutMode
from parquetry.store.temporaries import remove_stale_temporaries
from parquetry.store.writer import CHUNK_BYTES

OLD = time.time() - 7200


def _temps(root: Path) -> list[Path]:
    return sorted(root.rglob(".parquetry-tmp-*"))


def test_a_live_writer_of_this_process_keeps_its_old_temporary(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    with store.open_writer("d/obj", mode=PutMode.CREATE) as w:
        w.write(b"x" * CHUNK_BYTES)  # handed over: the temporary file exists
        (temp,) = _temps(tmp_path)
        os.utime(temp, (OLD, OLD))
        assert remove_stale_temporaries(store, "", older_than=0) == []
        assert remove_stale_temporaries(store, "d") == []
        w.write(b"y" * 1000)
    assert store.get("d/obj") == b"x" * CHUNK_BYTES + b"y" * 1000
    assert _temps(tmp_path) == []


# Python 3.12+ warns when a multi-threaded process forks (the suite may hold threads).
@pytest.mark.filterwarnings("ignore:.*fork.*:DeprecationWarning")
def test_a_forked_writer_keeps_its_temporary(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    r, w_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child writes, reports, waits, then commits
        try:
            os.close(r)
            with store.open_writer("d/obj") as w:
                w.write(b"c" * CHUNK_BYTES)
                os.write(w_fd, b"1")
                time.sleep(1.0)
                w.write(b"!")
            os._exit(0)
        except BaseException:
            os._exit(1)
    os.close(w_fd)
    assert os.read(r, 1) == b"1"
    (temp,) = _temps(tmp_path)
    os.utime(temp, (OLD, OLD))
    assert remove_stale_temporaries(store, "d", older_than=0) == []
    _, status = os.waitpid(pid, 0)
    os.close(r)
    assert os.waitstatus_to_exitcode(status) == 0
    assert store.get("d/obj") == b"c" * CHUNK_BYTES + b"!"


def test_a_killed_create_writers_second_name_goes_the_object_stays(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    store.put("d/obj", b"committed", mode=PutMode.CREATE)
    # What a CREATE writer killed after link() and before unlink() leaves behind.
    os.link(tmp_path / "d" / "obj", tmp_path / "d" / f".parquetry-tmp-{'ab' * 16}")
    os.utime(tmp_path / "d" / "obj", (OLD, OLD))
    assert remove_stale_temporaries(store, "d") == [f"d/.parquetry-tmp-{'ab' * 16}"]
    assert store.get("d/obj") == b"committed"
    assert [m.key for m in store.list("")] == ["d/obj"]
