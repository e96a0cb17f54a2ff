"""Temporary files of :class:`~parquetry.store.local.LocalStore`: how a writer makes one,
and how the ones a killed writer left behind are removed without touching a live one.

Every write (``put`` and streamed ``open_writer``) fills ``.parquetry-tmp-<32 hex>`` in the
target's directory and publishes it by ``link``/``rename``. The writer holds an exclusive
``flock`` on its temporary file from the moment it exists until its name is gone (published
or unlinked): a lock dies with its process, so a temporary file whose lock can be taken has
no live writer, however slow. A file younger than the age limit is left alone as well: its
writer may be between creating and locking it, or be an older parquetry that did not lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import stat
import time
import uuid

from parquetry.store._localfs import FILE_FLAGS, HIDDEN, dir_entries, is_object_name, open_subdir

__all__ = ["STALE_TEMP_SECONDS", "TEMP_NAME", "open_temp", "remove_stale_temps"]

#: The store's own temporary names (nothing else in a directory is ever removed as one).
TEMP_NAME = re.compile(re.escape(f"{HIDDEN}tmp-") + r"[0-9a-f]{32}")
#: Temporary files younger than this are never removed (locked or not).
STALE_TEMP_SECONDS = 3600.0

_TMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)


def open_temp(dir_fd: int) -> tuple[str, int]:
    """A new temporary file in ``dir_fd``, locked by this process: (its name, its fd).

    Raises FileNotFoundError if the directory was pruned meanwhile (the caller retries).
    The writer must unlink or publish the name *before* closing the fd, so the name is
    never unlocked while it is still the writer's."""
    name = f"{HIDDEN}tmp-{uuid.uuid4().hex}"
    fd = os.open(name, _TMP_FLAGS, 0o644, dir_fd=dir_fd)
    # A file system without flock (ENOLCK) still writes: the age limit protects the file.
    with contextlib.suppress(OSError):
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return name, fd


def remove_stale_temps(
    dir_fd: int,
    *,
    older_than: float = STALE_TEMP_SECONDS,
    rel: str = "",
    recursive: bool = False,
    remove: bool = True,
) -> list[str]:
    """Remove the abandoned temporary files in ``dir_fd`` (and its sub-directories when
    ``recursive``; links are not followed); returns their paths (``rel``-relative). With
    ``remove=False`` only says which it would remove. Never raises OSError."""
    found: list[str] = []
    cutoff = time.time() - older_than
    frames = [(dir_fd, rel)]
    while frames:
        fd, path = frames.pop()
        try:
            for entry in dir_entries(fd):
                where = f"{path}/{entry.name}" if path else entry.name
                if TEMP_NAME.fullmatch(entry.name):
                    if _remove_if_abandoned(fd, entry.name, cutoff, remove):
                        found.append(where)
                elif recursive and is_object_name(entry.name):
                    with contextlib.suppress(OSError):
                        if entry.is_dir(follow_symlinks=False):
                            sub = open_subdir(entry.name, fd)
                            if sub is not None:
                                frames.append((sub, where))
        except OSError:
            pass
        finally:
            if fd != dir_fd:
                os.close(fd)
    return sorted(found)


def _remove_if_abandoned(dir_fd: int, name: str, cutoff: float, remove: bool) -> bool:
    try:
        fd = os.open(name, FILE_FLAGS, dir_fd=dir_fd)
    except OSError:
        return False  # gone (published, removed) or a link
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_mtime >= cutoff:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False  # its writer is alive
        # Still the same file under that name (its writer may have published it since)?
        now = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        if (now.st_ino, now.st_dev) != (st.st_ino, st.st_dev):
            return False
        if remove:
            os.unlink(name, dir_fd=dir_fd)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
