"""File-system helpers of :class:`~parquetry.store.local.LocalStore`: locks, versions, the
reserved names of temporary files, and listings that never leave the root.

Every helper works on directory file descriptors and opens children with ``O_NOFOLLOW``
relative to them, so a symbolic link inside the root is never followed, whatever happens
to the tree concurrently: a listing skips links (they are not objects).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import time
from collections.abc import Iterator
from datetime import UTC, datetime

from parquetry.errors import InvalidKey
from parquetry.store.base import ListResult, ObjectMeta
from parquetry.store.keys import is_valid_segment

__all__ = [
    "DIR_FLAGS",
    "FILE_FLAGS",
    "HIDDEN",
    "LINK_ERRNOS",
    "DirLock",
    "check_visible",
    "dir_entries",
    "has_objects",
    "is_object_name",
    "list_level",
    "meta",
    "open_subdir",
    "stamp",
    "unlink_quietly",
    "version",
    "walk_objects",
]

#: Names starting with this are parquetry's own (temporary files): never objects.
HIDDEN = ".parquetry-"

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
#: Opens a directory, following nothing at the last component.
DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | os.O_NOFOLLOW | _CLOEXEC
#: Opens an object for reading; O_NONBLOCK keeps a FIFO planted in the root from blocking.
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0) | _CLOEXEC
#: What ``open(..., O_NOFOLLOW)`` answers for a link (Linux, macOS: ELOOP; BSD: EMLINK;
#: with O_DIRECTORY Linux says ENOTDIR, shared with "is a file": tell them apart by lstat).
LINK_ERRNOS = frozenset({errno.ELOOP, errno.EMLINK, errno.ENOTDIR})


class DirLock:
    """An exclusive ``flock`` on a directory fd we opened ourselves.

    Each caller opens its own fd (its own open file description), so the lock excludes
    other threads of this process as well as other processes.
    """

    __slots__ = ("fd",)

    def __init__(self, fd: int):
        self.fd = fd

    def __enter__(self) -> None:
        fcntl.flock(self.fd, fcntl.LOCK_EX)

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self.fd, fcntl.LOCK_UN)


def stamp(fd: int, previous_mtime_ns: int) -> os.stat_result:
    """Give the file a fresh mtime, strictly after ``previous_mtime_ns``; return its stat."""
    now = max(time.time_ns(), previous_mtime_ns + 1)
    os.utime(fd, ns=(now, now))
    return os.fstat(fd)


def check_visible(key: str) -> None:
    for segment in key.split("/"):
        if segment.startswith(HIDDEN):
            raise InvalidKey(f"store key {key!r} uses the reserved prefix {HIDDEN!r}", key=key)


def unlink_quietly(name: str, dir_fd: int) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(name, dir_fd=dir_fd)


def open_subdir(name: str, dir_fd: int) -> int | None:
    """The fd of the real directory ``name`` in ``dir_fd``; None if it is anything else (a
    link, a file) or gone."""
    try:
        return os.open(name, DIR_FLAGS, dir_fd=dir_fd)
    except OSError:
        return None


def dir_entries(dir_fd: int) -> list[os.DirEntry[str]]:
    # scandir works on its own duplicate of the fd (CPython dups it), so dir_fd stays open and
    # stays the caller's to close.
    try:
        with os.scandir(dir_fd) as it:
            return list(it)
    except (FileNotFoundError, NotADirectoryError):
        return []  # removed while listing


def is_object_name(name: str) -> bool:
    # Temporary files and names no key can spell (written by other programs) are no objects.
    return not name.startswith(HIDDEN) and is_valid_segment(name)


def has_objects(dir_fd: int) -> bool:
    """Whether the directory holds an object at any depth (links are not followed)."""
    frames = [dir_fd]
    try:
        while frames:
            fd = frames.pop()
            try:
                for entry in dir_entries(fd):
                    if not is_object_name(entry.name):
                        continue
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            sub = open_subdir(entry.name, fd)
                            if sub is not None:
                                frames.append(sub)
                        elif entry.is_file(follow_symlinks=False):
                            return True
                    except OSError:
                        continue
            finally:
                if fd != dir_fd:
                    os.close(fd)
        return False
    finally:
        for fd in frames:
            if fd != dir_fd:
                os.close(fd)


def version(st: os.stat_result) -> str:
    return f"{st.st_ino:x}-{st.st_mtime_ns:x}-{st.st_size:x}"


def meta(key: str, st: os.stat_result) -> ObjectMeta:
    return ObjectMeta(
        key=key,
        size=st.st_size,
        version=version(st),
        modified=datetime.fromtimestamp(st.st_mtime_ns / 1e9, tz=UTC),
    )


def _scan(fd: int, rel: str) -> tuple[list[ObjectMeta], list[tuple[str, str]]]:
    """The objects directly in ``fd`` and its sub-directories as (name, key) pairs."""
    objects: list[ObjectMeta] = []
    subdirs: list[tuple[str, str]] = []
    for entry in dir_entries(fd):
        if not is_object_name(entry.name):
            continue
        key = f"{rel}/{entry.name}" if rel else entry.name
        try:
            if entry.is_dir(follow_symlinks=False):
                subdirs.append((entry.name, key))
                continue
            st = entry.stat(follow_symlinks=False)
        except FileNotFoundError:
            continue  # deleted while listing
        if stat.S_ISREG(st.st_mode):
            objects.append(meta(key, st))
    return objects, subdirs


def walk_objects(dir_fd: int, prefix: str) -> Iterator[ObjectMeta]:
    """Every object under the directory ``dir_fd`` (key ``prefix``); closes ``dir_fd``.

    Depth first, holding one fd per level (never one per pending directory, which a wide
    tree would turn into thousands of open files).
    """
    objects, subdirs = _scan(dir_fd, prefix)
    frames = [(dir_fd, subdirs)]
    try:
        yield from objects
        while frames:
            fd, pending = frames[-1]
            if not pending:
                os.close(frames.pop()[0])
                continue
            name, key = pending.pop()
            sub = open_subdir(name, fd)
            if sub is None:
                continue  # replaced by a link or removed since the scan
            try:
                objects, subdirs = _scan(sub, key)
            except BaseException:
                os.close(sub)
                raise
            frames.append((sub, subdirs))
            yield from objects
    finally:
        for fd, _ in frames:
            os.close(fd)


def list_level(dir_fd: int, prefix: str) -> ListResult:
    """Objects and sub-"directories" directly under the directory ``dir_fd`` (key
    ``prefix``); does not close ``dir_fd``."""
    objects, subdirs = _scan(dir_fd, prefix)
    prefixes: list[str] = []
    for name, key in subdirs:
        sub = open_subdir(name, dir_fd)
        if sub is None:
            continue
        try:
            # A directory holding only leftover temporary files is no "prefix".
            if has_objects(sub):
                prefixes.append(key)
        finally:
            os.close(sub)
    objects.sort(key=lambda m: m.key)
    prefixes.sort()
    return ListResult(objects=tuple(objects), prefixes=tuple(prefixes))
