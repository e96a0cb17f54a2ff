"""A store on the local file system, with atomic and conditional writes safe across processes.

- Every write goes to a temporary file in the target directory (fsynced unless
  ``fsync=False``) and is then published by a rename, so readers see the old or the new
  content, never a torn file.
- Create-if-absent publishes with ``link()``, which fails atomically if the target exists.
- Overwrite, compare-and-swap, delete and move publish while holding an exclusive ``flock``
  on the target's *directory*. Every operation that can replace or remove an existing file
  takes that lock, so a compare-and-swap's check and rename are one step for every other
  writer, in this process or another. Locking the directory (not a per-key lock file) means
  no lock files to clean up, and a directory removed while someone waits for it makes their
  ``*at()`` calls fail with ENOENT, which they retry on a fresh directory.
- A version is ``inode-mtime_ns-size``. Each write stamps its file with the current time in
  nanoseconds and, under the lock, a time strictly greater than the file it replaces; a
  reused inode therefore never carries an old version again (this relies on a file system
  with nanosecond timestamps: ext4, xfs, btrfs, tmpfs, APFS).

Names starting with ``.parquetry-`` are reserved (temporary files); listings never show them
and a temporary file left by a crashed writer changes nothing but disk usage.
"""

from __future__ import annotations

import errno
import mmap
import os
import stat
import uuid
from collections.abc import Iterator
from pathlib import Path

from parquetry.errors import (
    AlreadyExists,
    InvalidKey,
    NotFound,
    ParquetryError,
    PreconditionFailed,
    StoreUnavailable,
)
from parquetry.store._localfs import (
    HIDDEN,
    DirLock,
    check_visible,
    list_level,
    meta,
    remove_stale_temps,
    stamp,
    unlink_quietly,
    version,
    walk_objects,
)
from parquetry.store.base import Capability, ListResult, ObjectMeta, PutMode, Store

__all__ = ["LocalStore"]

_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
_TMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
_RETRIES = 20  # attempts when a directory vanishes under us (pruned by a concurrent delete)


class LocalStore(Store):
    """Objects as files under ``root`` (created on the first write).

    Args:
        root: Directory holding the objects.
        fsync: Flush each write (file and directory) to disk before it is acknowledged
            (default). Turning it off keeps atomicity against concurrent readers and the
            conditional-write guarantees, but not durability across a power loss.
    """

    capabilities = frozenset(Capability)

    def __init__(self, root: str | os.PathLike[str], *, fsync: bool = True):
        self.root = Path(root).absolute()
        self.fsync = fsync
        self._prefix = f"{self.root}{os.sep}"  # string paths: pathlib costs more than a read

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
            with open(self._prefix + key, "rb") as f:
                return f.read()
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            raise self._not_found(key) from None
        except OSError as exc:
            raise self._os_error(key, exc) from exc

    def _read_buffer(self, key: str) -> bytes | mmap.mmap:
        # A map of the inode open now: replacing the key renames a new file over the name and
        # never writes into this one, so the map keeps this version's bytes.
        try:
            with open(self._prefix + key, "rb") as f:
                if os.fstat(f.fileno()).st_size == 0:
                    return b""
                return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            raise self._not_found(key) from None
        except OSError as exc:
            raise self._os_error(key, exc) from exc

    def _get_range(self, key: str, start: int, end: int) -> bytes:
        try:
            fd = os.open(self._prefix + key, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except (FileNotFoundError, NotADirectoryError):
            raise self._not_found(key) from None
        except OSError as exc:
            raise self._os_error(key, exc) from exc
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise self._not_found(key)
            chunks = []
            while start < end:
                chunk = os.pread(fd, end - start, start)
                if not chunk:
                    break
                chunks.append(chunk)
                start += len(chunk)
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)
        finally:
            os.close(fd)

    def _head(self, key: str) -> ObjectMeta:
        try:
            st = os.stat(self._prefix + key)
        except (FileNotFoundError, NotADirectoryError):
            raise self._not_found(key) from None
        except OSError as exc:
            raise self._os_error(key, exc) from exc
        if not stat.S_ISREG(st.st_mode):
            raise self._not_found(key)
        return meta(key, st)

    def _exists(self, key: str) -> bool:
        try:
            return stat.S_ISREG(os.stat(self._prefix + key).st_mode)
        except (FileNotFoundError, NotADirectoryError):
            return False
        except OSError as exc:
            raise self._os_error(key, exc) from exc

    # --- writes --------------------------------------------------------------------------

    def _put(
        self, key: str, data: bytes | memoryview, mode: PutMode, expected_version: str | None
    ) -> ObjectMeta:
        check_visible(key)
        try:
            return self._put_file(key, data, mode, expected_version)
        except ParquetryError:
            raise
        except OSError as exc:
            raise self._os_error(key, exc, "writing") from exc

    def _put_file(
        self, key: str, data: bytes | memoryview, mode: PutMode, expected_version: str | None
    ) -> ObjectMeta:
        parent, _, name = key.rpartition("/")
        for _attempt in range(_RETRIES):
            dir_fd = self._open_dir(parent, key, create=True)
            try:
                tmp = f"{HIDDEN}tmp-{uuid.uuid4().hex}"
                try:
                    fd = os.open(tmp, _TMP_FLAGS, 0o644, dir_fd=dir_fd)
                except FileNotFoundError:
                    continue  # the directory was pruned after we opened it: start again
                try:
                    self._write_all(fd, data, key)
                    st = self._publish(dir_fd, fd, tmp, name, key, mode, expected_version)
                except BaseException:
                    os.close(fd)
                    unlink_quietly(tmp, dir_fd)
                    raise
                os.close(fd)
                if mode is PutMode.CREATE:  # published by link: the temporary name remains
                    os.unlink(tmp, dir_fd=dir_fd)
                if self.fsync:
                    os.fsync(dir_fd)
                return meta(key, st)
            finally:
                os.close(dir_fd)
        raise StoreUnavailable(f"directory of {key!r} keeps vanishing in {self.url}", key=key)

    def _write_all(self, fd: int, data: bytes | memoryview, key: str) -> None:
        try:
            view = memoryview(data).cast("B")
            while view:
                view = view[os.write(fd, view) :]
            if self.fsync:
                os.fsync(fd)
        except OSError as exc:
            raise StoreUnavailable(f"writing {key!r} to {self.url} failed: {exc}", key=key) from exc

    def _publish(
        self,
        dir_fd: int,
        fd: int,
        tmp: str,
        name: str,
        key: str,
        mode: PutMode,
        expected: str | None,
    ) -> os.stat_result:
        """Make the temporary file ``tmp`` the object ``name``; return its stat."""
        if mode is PutMode.CREATE:
            st = stamp(fd, 0)
            try:
                os.link(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            except FileExistsError:
                raise AlreadyExists(
                    f"{key!r} already exists in {self.url}", key=key, store=self.url
                ) from None
            return st
        with DirLock(dir_fd):
            try:
                current: os.stat_result | None = os.stat(name, dir_fd=dir_fd)
            except FileNotFoundError:
                current = None
            if current is not None and stat.S_ISDIR(current.st_mode):
                raise InvalidKey(f"cannot write {key!r}: it is a directory", key=key)
            if mode is PutMode.UPDATE:
                if current is None:
                    raise self._not_found(key)
                found = version(current)
                if found != expected:
                    raise PreconditionFailed(
                        f"{key!r} changed: expected version {expected}, found {found}",
                        key=key,
                        store=self.url,
                        expected=expected,
                        found=found,
                    )
            st = stamp(fd, current.st_mtime_ns if current is not None else 0)
            os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            return st

    def _open_dir(self, parent: str, key: str, *, create: bool) -> int:
        directory = self._prefix + parent if parent else str(self.root)
        try:
            try:
                return os.open(directory, _DIR_FLAGS)
            except FileNotFoundError:
                if not create:
                    raise
                os.makedirs(directory, exist_ok=True)
                return os.open(directory, _DIR_FLAGS)
        except (FileExistsError, NotADirectoryError):
            if not create:
                raise self._not_found(key) from None
            raise InvalidKey(
                f"cannot write {key!r} in {self.url}: a parent is a file", key=key
            ) from None
        except FileNotFoundError:
            raise self._not_found(key) from None
        except OSError as exc:
            raise StoreUnavailable(
                f"cannot open the directory of {key!r} in {self.url}: {exc}", key=key
            ) from exc

    def _delete(self, key: str, missing_ok: bool) -> None:
        parent, _, name = key.rpartition("/")
        try:
            dir_fd = self._open_dir(parent, key, create=False)
        except NotFound:
            if missing_ok:
                return
            raise self._not_found(key) from None
        try:
            with DirLock(dir_fd):
                try:
                    st = os.stat(name, dir_fd=dir_fd)
                    if not stat.S_ISREG(st.st_mode):
                        raise FileNotFoundError(key)
                    os.unlink(name, dir_fd=dir_fd)
                except FileNotFoundError:
                    if missing_ok:
                        return
                    raise self._not_found(key) from None
        finally:
            os.close(dir_fd)
        self._prune_empty_dirs(parent)

    def _move(self, src: str, dst: str) -> None:
        check_visible(dst)
        if src == dst:
            self._head(src)
            return
        src_parent, _, src_name = src.rpartition("/")
        dst_parent, _, dst_name = dst.rpartition("/")
        for _attempt in range(_RETRIES):
            src_fd = self._open_dir(src_parent, src, create=False)
            try:
                dst_fd = self._open_dir(dst_parent, dst, create=True)
                try:
                    if self._rename_locked(src_fd, src_name, dst_fd, dst_name, src, dst):
                        if self.fsync:
                            os.fsync(dst_fd)
                            os.fsync(src_fd)
                        break
                finally:
                    os.close(dst_fd)
            finally:
                os.close(src_fd)
        else:
            raise StoreUnavailable(f"directory of {dst!r} keeps vanishing in {self.url}", key=dst)
        self._prune_empty_dirs(src_parent)

    def _rename_locked(
        self, src_fd: int, src_name: str, dst_fd: int, dst_name: str, src: str, dst: str
    ) -> bool:
        """Rename under both directory locks (taken in inode order: no deadlock)."""
        same = os.path.samestat(os.fstat(src_fd), os.fstat(dst_fd))
        fds = [src_fd] if same else sorted((src_fd, dst_fd), key=lambda f: os.fstat(f).st_ino)
        locks = [DirLock(f) for f in fds]
        for lock in locks:
            lock.__enter__()
        try:
            try:
                st = os.stat(src_name, dir_fd=src_fd)
            except FileNotFoundError:
                raise self._not_found(src) from None
            if not stat.S_ISREG(st.st_mode):
                raise self._not_found(src)
            try:
                os.replace(src_name, dst_name, src_dir_fd=src_fd, dst_dir_fd=dst_fd)
            except FileNotFoundError:
                return False  # the destination directory was pruned: retry
            except (IsADirectoryError, OSError) as exc:
                if exc.errno in (errno.EISDIR, errno.ENOTEMPTY, errno.EEXIST):
                    raise InvalidKey(
                        f"cannot move to {dst!r}: it is a directory", key=dst
                    ) from None
                raise
            return True
        finally:
            for lock in reversed(locks):
                lock.__exit__()

    def _prune_empty_dirs(self, parent: str) -> None:
        # Object stores have no directories: an emptied "directory" must vanish from listings.
        # A concurrent writer that opened the directory first sees ENOENT and retries.
        while parent:
            directory = self.root / parent
            remove_stale_temps(directory)
            try:
                directory.rmdir()
            except OSError as exc:
                if exc.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOENT, errno.EBUSY):
                    return
                raise
            parent = parent.rpartition("/")[0]

    # --- listing -------------------------------------------------------------------------

    def _list(self, prefix: str) -> Iterator[ObjectMeta]:
        return walk_objects(self._prefix + prefix if prefix else str(self.root), prefix)

    def _list_dir(self, prefix: str) -> ListResult:
        return list_level(self._prefix + prefix if prefix else str(self.root), prefix)

    def _os_error(
        self, key: str, exc: OSError, doing: str = "reading"
    ) -> InvalidKey | StoreUnavailable:
        if exc.errno == errno.ENAMETOOLONG:
            return InvalidKey(f"store key {key!r} is too long for {self.url}", key=key)
        return StoreUnavailable(f"{doing} {key!r} in {self.url} failed: {exc}", key=key)

    def _not_found(self, key: str) -> NotFound:
        return NotFound(f"{key!r} not found in {self.url}", key=key, store=self.url)


def _rebuild(root: str, fsync: bool) -> LocalStore:
    return LocalStore(root, fsync=fsync)
