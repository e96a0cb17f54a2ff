"""File-system helpers of :class:`~parquetry.store.local.LocalStore`: locks, versions, and
the reserved names of temporary files."""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from parquetry.errors import InvalidKey
from parquetry.store.base import ListResult, ObjectMeta

__all__ = [
    "HIDDEN",
    "STALE_TEMP_SECONDS",
    "DirLock",
    "check_visible",
    "has_objects",
    "list_level",
    "meta",
    "remove_stale_temps",
    "stamp",
    "unlink_quietly",
    "version",
    "walk_objects",
]

#: Names starting with this are parquetry's own (temporary files): never objects.
HIDDEN = ".parquetry-"
#: Temporary files older than this are leftovers of a crashed writer and may be removed.
STALE_TEMP_SECONDS = 3600.0


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


def remove_stale_temps(directory: Path) -> None:
    """Remove temporary files a crashed writer left behind (old enough to be abandoned)."""
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return
    if any(not e.name.startswith(HIDDEN) for e in entries):
        return  # not going to be empty anyway
    cutoff = time.time() - STALE_TEMP_SECONDS
    for entry in entries:
        try:
            if entry.name.startswith(f"{HIDDEN}tmp-") and entry.stat().st_mtime < cutoff:
                os.unlink(entry.path)
        except OSError:
            continue


def has_objects(directory: str) -> bool:
    stack = [directory]
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for entry in entries:
            if entry.name.startswith(HIDDEN):
                continue
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                elif entry.is_file(follow_symlinks=False):
                    return True
            except OSError:
                continue
    return False


def version(st: os.stat_result) -> str:
    return f"{st.st_ino:x}-{st.st_mtime_ns:x}-{st.st_size:x}"


def meta(key: str, st: os.stat_result) -> ObjectMeta:
    return ObjectMeta(
        key=key,
        size=st.st_size,
        version=version(st),
        modified=datetime.fromtimestamp(st.st_mtime_ns / 1e9, tz=UTC),
    )


def walk_objects(base: str, prefix: str) -> Iterator[ObjectMeta]:
    """Every object under the directory ``base``, whose key is ``prefix``."""
    stack = [(base, prefix)]
    while stack:
        directory, rel = stack.pop()
        try:
            entries = list(os.scandir(directory))
        except (FileNotFoundError, NotADirectoryError):
            continue  # missing, or removed while listing
        for entry in entries:
            if entry.name.startswith(HIDDEN):
                continue
            key = f"{rel}/{entry.name}" if rel else entry.name
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append((entry.path, key))
                    continue
                st = entry.stat()
            except FileNotFoundError:
                continue  # deleted while listing
            if stat.S_ISREG(st.st_mode):
                yield meta(key, st)


def list_level(base: str, prefix: str) -> ListResult:
    """Objects and sub-"directories" directly under the directory ``base`` (key ``prefix``)."""
    objects: list[ObjectMeta] = []
    prefixes: list[str] = []
    try:
        entries = list(os.scandir(base))
    except (FileNotFoundError, NotADirectoryError):
        return ListResult()
    for entry in entries:
        if entry.name.startswith(HIDDEN):
            continue
        key = f"{prefix}/{entry.name}" if prefix else entry.name
        try:
            if entry.is_dir(follow_symlinks=False):
                # A directory holding only leftover temporary files is no "prefix".
                if has_objects(entry.path):
                    prefixes.append(key)
                continue
            st = entry.stat()
        except FileNotFoundError:
            continue
        if stat.S_ISREG(st.st_mode):
            objects.append(meta(key, st))
    objects.sort(key=lambda m: m.key)
    prefixes.sort()
    return ListResult(objects=tuple(objects), prefixes=tuple(prefixes))
