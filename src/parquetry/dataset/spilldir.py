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

from parquetry.errors import SpillFailed

fcntl: Any
try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None

__all__ = ["CREATING_GRACE", "PREFIX", "SpillDir", "reclaim_spill_dirs", "spill_failed"]

PREFIX = "parquetry-index-"
LOCK = ".lock"
#: Only directories named by this module: an older parquetry's (no pid, no lock) may be in
#: use by a process of that version and is left alone.
_NAME = re.compile(re.escape(PREFIX) + r"([0-9]+)-[A-Za-z0-9_]+")
#: Seconds a directory may lack its lock file (its owner between mkdtemp and the lock).
CREATING_GRACE = 60.0


class SpillDir:
    """A temporary directory locked by this process until :meth:`cleanup`.

    Raises :class:`~parquetry.errors.SpillFailed` naming the directory when it cannot be
    created (the temporary directory is read-only, full, or not a directory)."""

    def __init__(self) -> None:
        try:
            parent = tempfile.gettempdir()
        except OSError as exc:  # no usable temporary directory at all
            raise spill_failed("finding a temporary directory to spill to", None, exc) from exc
        reclaim_spill_dirs(parent)
        try:
            self.name = tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-", dir=parent)
        except OSError as exc:
            raise spill_failed(f"creating a spill directory in {parent}", parent, exc) from exc
        lock = os.path.join(self.name, LOCK)
        fd = -1
        try:
            fd = os.open(lock, os.O_CREAT | os.O_RDWR)
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            # Not left for a later reclaim: nothing of it is in use yet.
            if fd >= 0:
                os.close(fd)
            shutil.rmtree(self.name, ignore_errors=True)
            raise spill_failed(f"locking the spill directory {self.name}", lock, exc) from exc
        self._fd: int | None = fd

    def cleanup(self) -> None:
        shutil.rmtree(self.name, ignore_errors=True)
        if self._fd is not None:
            os.close(self._fd)  # releases the lock, after the directory is gone
            self._fd = None


def spill_failed(doing: str, path: str | None, exc: OSError) -> SpillFailed:
    """The :class:`SpillFailed` for ``exc`` (keeping its ``errno``, so a full disk can be
    told from a read-only one) with a message naming ``path`` and the reason."""
    reason = exc.strerror or str(exc) or type(exc).__name__
    err = SpillFailed(f"{doing} failed: {reason}", path=path, reason=reason)
    err.errno = exc.errno
    return err


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
