"""Local spill directories that a killed process does not leak for good.

A :class:`~parquetry.dataset.indexspill.PairSink` spills runs into a temporary directory
removed when the sink closes; a process killed meanwhile (SIGKILL, OOM killer) leaves it
behind, hundreds of MB each. Every directory is therefore named
``parquetry-index-<pid>-<random>`` and holds a ``.lock`` file its owner keeps locked
(``flock``) while the directory is in use. Creating a new one first removes the directories
of the same user whose lock can be taken: their owner is gone. The lock, not the pid, says
so: a pid may be reused by an unrelated process, a lock dies with its owner. A directory
(or lock file) younger than :data:`CREATING_GRACE` is left alone: its owner may be between
creating it and locking it.
Without ``fcntl`` (Windows) nothing is reclaimed.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
import time
from typing import Any

fcntl: Any
try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None

__all__ = ["CREATING_GRACE", "PREFIX", "SpillDir", "reclaim_spill_dirs"]

PREFIX = "parquetry-index-"
LOCK = ".lock"
#: Only directories named by this module: an older parquetry's (no pid, no lock) may be in
#: use by a process of that version and is left alone.
_NAME = re.compile(re.escape(PREFIX) + r"([0-9]+)-[A-Za-z0-9_]+")
#: Seconds a directory may lack its lock file (its owner between mkdtemp and the lock).
CREATING_GRACE = 60.0


class SpillDir:
    """A temporary directory locked by this process until :meth:`cleanup`."""

    def __init__(self) -> None:
        reclaim_spill_dirs()
        self.name = tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-")
        self._fd: int | None = os.open(os.path.join(self.name, LOCK), os.O_CREAT | os.O_RDWR)
        if fcntl is not None:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)

    def cleanup(self) -> None:
        shutil.rmtree(self.name, ignore_errors=True)
        if self._fd is not None:
            os.close(self._fd)  # releases the lock, after the directory is gone
            self._fd = None


def reclaim_spill_dirs(parent: str | None = None) -> list[str]:
    """Remove the spill directories in ``parent`` (the temporary directory) that no live
    process holds (see the module docstring); returns their paths."""
    if fcntl is None:
        return []
    parent = parent or tempfile.gettempdir()
    removed = []
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return []
    for entry in entries:
        if _NAME.fullmatch(entry.name) and _reclaim(entry):
            removed.append(entry.path)
    return removed


def _reclaim(entry: os.DirEntry[str]) -> bool:
    try:
        st = entry.stat(follow_symlinks=False)
        if not entry.is_dir(follow_symlinks=False) or st.st_uid != os.getuid():
            return False
        fd = os.open(os.path.join(entry.path, LOCK), os.O_RDWR | os.O_NOFOLLOW)
    except FileNotFoundError:
        # No lock file: being created, or its owner died before locking it.
        if time.time() - _mtime(entry) < CREATING_GRACE or _alive(entry.name):
            return False
        shutil.rmtree(entry.path, ignore_errors=True)
        return True
    except OSError:
        return False
    try:
        # A lock file this young may be one its owner has not locked yet.
        if time.time() - os.fstat(fd).st_mtime < CREATING_GRACE:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False  # its owner is alive
        shutil.rmtree(entry.path, ignore_errors=True)
        return True
    finally:
        with contextlib.suppress(OSError):
            os.close(fd)


def _alive(name: str) -> bool:
    m = _NAME.fullmatch(name)
    if m is None:
        return True
    try:
        os.kill(int(m.group(1)), 0)
    except ProcessLookupError:
        return False
    except (OSError, OverflowError):
        return True  # another user's process, or not a pid: assume alive
    return True


def _mtime(entry: os.DirEntry[str]) -> float:
    try:
        return entry.stat(follow_symlinks=False).st_mtime
    except OSError:
        return time.time()
