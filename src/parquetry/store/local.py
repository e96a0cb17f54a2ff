"""A store on the local file system, with atomic and conditional writes.

- Every write goes to a temporary file in the target directory, is fsynced and renamed into
  place, so readers see the old or the new content, never a torn file.
- Create-if-absent publishes the temporary file with ``link()``, which fails atomically if
  the target exists (no check-then-write window).
- Compare-and-swap holds an ``flock`` on a per-key lock file while it compares and renames,
  so it is safe across threads and processes. A version is ``inode-mtime_ns-size``; under the
  lock each swap sets an mtime strictly greater than the previous one, so a reused inode can
  never make an old version look current.

Temporary and lock files start with ``.parquetry-`` and are hidden from listings.
"""

from __future__ import annotations

import errno
import fcntl
import os
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from parquetry.errors import (
    AlreadyExists,
    InvalidKey,
    NotFound,
    PreconditionFailed,
    StoreUnavailable,
)
from parquetry.store.base import Capability, ListResult, ObjectMeta, PutMode, Store

__all__ = ["LocalStore"]

_HIDDEN = ".parquetry-"


class LocalStore(Store):
    """Objects as files under ``root`` (created if missing).

    Args:
        root: Directory holding the objects.
        fsync: Flush each write to disk before it becomes visible (default). Turning it off
            keeps atomicity against concurrent readers but not against power loss.
    """

    capabilities = frozenset(Capability)

    def __init__(self, root: str | os.PathLike[str], *, fsync: bool = True):
        self.root = Path(root).absolute()
        self.fsync = fsync
        self._thread_locks: dict[str, threading.Lock] = {}
        self._thread_locks_guard = threading.Lock()

    @property
    def url(self) -> str:
        return self.root.as_uri()

    def __reduce__(self) -> tuple[object, tuple[str, bool]]:
        return (_rebuild, (str(self.root), self.fsync))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LocalStore) and other.root == self.root

    def __hash__(self) -> int:
        return hash(("local", self.root))

    def path(self, key: str) -> Path:
        """The file path of ``key`` (for tools that read files directly, e.g. Spark)."""
        return self.root / key

    # --- reads ---------------------------------------------------------------------------

    def _get(self, key: str) -> bytes:
        try:
            with open(self.root / key, "rb") as f:
                return f.read()
        except (FileNotFoundError, NotADirectoryError):
            raise self._not_found(key) from None
        except IsADirectoryError:
            raise self._not_found(key) from None

    def _get_range(self, key: str, start: int, end: int) -> bytes:
        try:
            with open(self.root / key, "rb") as f:
                f.seek(start)
                return f.read(end - start)
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            raise self._not_found(key) from None

    def _head(self, key: str) -> ObjectMeta:
        try:
            st = os.stat(self.root / key)
        except (FileNotFoundError, NotADirectoryError):
            raise self._not_found(key) from None
        if not os.path.isfile(self.root / key):
            raise self._not_found(key)
        return _meta(key, st)

    def _exists(self, key: str) -> bool:
        return (self.root / key).is_file()

    # --- writes --------------------------------------------------------------------------

    def _put(
        self, key: str, data: bytes | memoryview, mode: PutMode, expected_version: str | None
    ) -> ObjectMeta:
        target = self.root / key
        if _HIDDEN in target.name:
            raise InvalidKey(f"store key {key!r} uses the reserved name part {_HIDDEN!r}", key=key)
        tmp = self._write_temp(target, data)
        try:
            if mode is PutMode.OVERWRITE:
                self._replace(tmp, target, key)
            elif mode is PutMode.CREATE:
                self._link_new(tmp, target, key)
            else:
                assert expected_version is not None
                self._swap(tmp, target, key, expected_version)
        finally:
            tmp.unlink(missing_ok=True)
        return _meta(key, os.stat(target))

    def _write_temp(self, target: Path, data: bytes | memoryview) -> Path:
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError):
            raise InvalidKey(
                f"cannot write {target.relative_to(self.root)}: a parent is a file", key=str(target)
            ) from None
        tmp = target.parent / f"{_HIDDEN}tmp-{uuid.uuid4().hex}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            if self.fsync:
                os.fsync(fd)
        except OSError as exc:
            os.close(fd)
            tmp.unlink(missing_ok=True)
            raise StoreUnavailable(f"writing {target} failed: {exc}", key=str(target)) from exc
        os.close(fd)
        return tmp

    def _replace(self, tmp: Path, target: Path, key: str) -> None:
        if target.is_dir():
            raise InvalidKey(f"cannot write {key!r}: it is a directory", key=key)
        os.replace(tmp, target)
        self._sync_dir(target.parent)

    def _link_new(self, tmp: Path, target: Path, key: str) -> None:
        try:
            os.link(tmp, target)
        except FileExistsError:
            raise AlreadyExists(f"{key!r} already exists in {self.url}", key=key,
                                store=self.url) from None
        self._sync_dir(target.parent)

    def _swap(self, tmp: Path, target: Path, key: str, expected: str) -> None:
        with self._key_lock(target):
            try:
                st = os.stat(target)
            except FileNotFoundError:
                raise self._not_found(key) from None
            found = _version(st)
            if found != expected:
                raise PreconditionFailed(
                    f"{key!r} changed: expected version {expected}, found {found}",
                    key=key, store=self.url, expected=expected, found=found,
                )
            # Strictly increasing mtime: the new version differs even if the inode is reused.
            mtime = max(time.time_ns(), st.st_mtime_ns + 1)
            os.utime(tmp, ns=(mtime, mtime))
            os.replace(tmp, target)
            self._sync_dir(target.parent)

    def _key_lock(self, target: Path) -> _FileLock:
        lock_path = target.parent / f"{_HIDDEN}lock-{target.name}"
        with self._thread_locks_guard:
            tlock = self._thread_locks.setdefault(str(lock_path), threading.Lock())
        return _FileLock(lock_path, tlock)

    def _sync_dir(self, directory: Path) -> None:
        if not self.fsync:
            return
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def _move(self, src: str, dst: str) -> None:
        source, target = self.root / src, self.root / dst
        if not source.is_file():
            raise self._not_found(src)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(source, target)
        self._sync_dir(target.parent)
        self._prune_empty_dirs(source.parent)

    def _delete(self, key: str, missing_ok: bool) -> None:
        target = self.root / key
        try:
            if target.is_dir():
                raise FileNotFoundError(key)
            target.unlink()
        except (FileNotFoundError, NotADirectoryError):
            if not missing_ok:
                raise self._not_found(key) from None
            return
        (target.parent / f"{_HIDDEN}lock-{target.name}").unlink(missing_ok=True)
        self._prune_empty_dirs(target.parent)

    def _prune_empty_dirs(self, directory: Path) -> None:
        # Object stores have no directories: an emptied "directory" must vanish from listings.
        while directory != self.root and self.root in directory.parents:
            try:
                directory.rmdir()
            except OSError as exc:
                if exc.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOENT):
                    return
                raise
            directory = directory.parent

    # --- listing -------------------------------------------------------------------------

    def _list(self, prefix: str) -> Iterator[ObjectMeta]:
        base = self.root / prefix if prefix else self.root
        if not base.is_dir():
            return
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = [d for d in dirnames if not d.startswith(_HIDDEN)]
            rel_dir = os.path.relpath(dirpath, self.root)
            for name in filenames:
                if name.startswith(_HIDDEN):
                    continue
                key = name if rel_dir == "." else f"{rel_dir}/{name}"
                try:
                    st = os.stat(os.path.join(dirpath, name))
                except FileNotFoundError:
                    continue  # deleted while listing
                yield _meta(key.replace(os.sep, "/"), st)

    def _list_dir(self, prefix: str) -> ListResult:
        base = self.root / prefix if prefix else self.root
        if not base.is_dir():
            return ListResult()
        objects: list[ObjectMeta] = []
        prefixes: list[str] = []
        with os.scandir(base) as entries:
            for entry in entries:
                if entry.name.startswith(_HIDDEN):
                    continue
                key = f"{prefix}/{entry.name}" if prefix else entry.name
                if entry.is_dir():
                    prefixes.append(key)
                else:
                    objects.append(_meta(key, entry.stat()))
        objects.sort(key=lambda m: m.key)
        prefixes.sort()
        return ListResult(objects=tuple(objects), prefixes=tuple(prefixes))

    def _not_found(self, key: str) -> NotFound:
        return NotFound(f"{key!r} not found in {self.url}", key=key, store=self.url)


class _FileLock:
    """An exclusive ``flock`` (across processes) plus a thread lock (flock is per process
    on some systems when the same file is opened twice)."""

    def __init__(self, path: Path, thread_lock: threading.Lock):
        self.path = path
        self.thread_lock = thread_lock
        self.fd = -1

    def __enter__(self) -> _FileLock:
        self.thread_lock.acquire()
        try:
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            fcntl.flock(self.fd, fcntl.LOCK_EX)
        except BaseException:
            if self.fd >= 0:
                os.close(self.fd)
            self.thread_lock.release()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
        finally:
            self.thread_lock.release()


def _version(st: os.stat_result) -> str:
    return f"{st.st_ino:x}-{st.st_mtime_ns:x}-{st.st_size:x}"


def _meta(key: str, st: os.stat_result) -> ObjectMeta:
    return ObjectMeta(
        key=key,
        size=st.st_size,
        version=_version(st),
        modified=datetime.fromtimestamp(st.st_mtime_ns / 1e9, tz=UTC),
    )


def _rebuild(root: str, fsync: bool) -> LocalStore:
    return LocalStore(root, fsync=fsync)
