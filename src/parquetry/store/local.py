"""A store on the local file system, with atomic and conditional writes safe across processes.

- Every write goes to a temporary file in the target directory (fsynced unless
  ``fsync=False``) and is then published by a rename, so readers see the old or the new
  content, never a torn file. A streamed write (``open_writer``) fills its temporary file
  piece by piece and publishes it the same way (:mod:`parquetry.store._localupload`).
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
and a temporary file left by a crashed writer changes nothing but disk usage until garbage
collection removes it (:mod:`parquetry.store._localtemps`).

No operation reads, writes, lists or deletes outside the root. Every path is opened one
segment at a time from the root's fd with ``O_NOFOLLOW`` (``openat``, ``fstatat``,
``unlinkat``, ``renameat``, ``scandir`` on fds), so a symbolic link inside the root is never
followed, even if it appears concurrently: an operation on a key that crosses a link raises
:class:`~parquetry.errors.UnsafePath`, and listings skip links (they are not objects) as
well as names no key can spell. The root path itself may be a link.
"""

from __future__ import annotations

import contextlib
import errno
import mmap
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from parquetry.errors import (
    AlreadyExists,
    InvalidKey,
    NotFound,
    ParquetryError,
    PreconditionFailed,
    StoreUnavailable,
    UnsafePath,
)
from parquetry.store._localfs import (
    DirLock,
    check_visible,
    list_level,
    meta,
    stamp,
    unlink_quietly,
    version,
    walk_objects,
)
from parquetry.store._localtemps import open_temp
from parquetry.store._localwalk import PATH_FLAGS, RETRIES, SafeRoot
from parquetry.store.base import Capability, ListResult, ObjectMeta, PutMode, Store
from parquetry.store.keys import validate_key
from parquetry.store.writer import Upload

__all__ = ["LocalStore"]


class LocalStore(SafeRoot, Store):
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
        self._root = str(self.root)  # string paths: pathlib costs more than a read
        self._real: str | None = None  # the root with its links resolved, once needed

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
        """The file path of ``key`` (for tools that read files directly, e.g. Spark).

        Raises UnsafePath if the key crosses a symbolic link inside the root (a tool
        following the path could read outside the root); the object need not exist.
        """
        key = validate_key(key)
        parent, _, name = key.rpartition("/")
        try:
            dir_fd = self._open_dir(parent, key, create=False)
        except NotFound:
            return self.root / key
        try:
            self._lstat(name, dir_fd, key)
        except NotFound:
            pass
        finally:
            os.close(dir_fd)
        return self.root / key

    # --- reads ---------------------------------------------------------------------------

    def _get(self, key: str) -> bytes:
        fd = self._open_object(key)
        with open(fd, "rb", buffering=0) as f:
            try:
                return f.readall()
            except OSError as exc:
                raise self._os_error(key, exc) from exc

    def _read_buffer(self, key: str) -> bytes | mmap.mmap:
        # A map of the inode open now: replacing the key renames a new file over the name and
        # never writes into this one, so the map keeps this version's bytes.
        fd = self._open_object(key)
        try:
            if os.fstat(fd).st_size == 0:
                return b""
            return mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
        except OSError as exc:
            raise self._os_error(key, exc) from exc
        finally:
            os.close(fd)

    def _get_range(self, key: str, start: int, end: int) -> bytes:
        fd = self._open_object(key)
        try:
            chunks = []
            while start < end:
                chunk = os.pread(fd, end - start, start)
                if not chunk:
                    break
                chunks.append(chunk)
                start += len(chunk)
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)
        except OSError as exc:
            raise self._os_error(key, exc) from exc
        finally:
            os.close(fd)

    def _head(self, key: str) -> ObjectMeta:
        fd = self._open_verified(key, PATH_FLAGS)
        if fd is not None:
            try:
                st = os.fstat(fd)
            finally:
                os.close(fd)
            if stat.S_ISREG(st.st_mode):
                return meta(key, st)
            if not stat.S_ISLNK(st.st_mode):
                raise self._not_found(key)
        parent, _, name = key.rpartition("/")
        dir_fd = self._open_dir(parent, key, create=False)
        try:
            st = self._lstat(name, dir_fd, key)
        finally:
            os.close(dir_fd)
        if not stat.S_ISREG(st.st_mode):
            raise self._not_found(key)
        return meta(key, st)

    def _exists(self, key: str) -> bool:
        try:
            self._head(key)
        except UnsafePath:
            raise
        except NotFound:
            return False
        return True

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

    def _open_upload(self, key: str, mode: PutMode, expected_version: str | None) -> Upload:
        from parquetry.store._localupload import LocalUpload

        check_visible(key)
        return LocalUpload(self, key, mode, expected_version)

    def _put_file(
        self, key: str, data: bytes | memoryview, mode: PutMode, expected_version: str | None
    ) -> ObjectMeta:
        parent, _, name = key.rpartition("/")
        for _attempt in range(RETRIES):
            dir_fd = self._open_dir(parent, key, create=True)
            try:
                try:
                    tmp, fd = open_temp(dir_fd)
                except FileNotFoundError:
                    continue  # the directory was pruned after we opened it: start again
                # The temporary name goes before the fd (and its lock: _localtemps.py).
                try:
                    self._write_all(fd, data, key)
                    st = self._publish(dir_fd, fd, tmp, name, key, mode, expected_version)
                    if mode is PutMode.CREATE:  # published by link: the temporary name remains
                        os.unlink(tmp, dir_fd=dir_fd)
                except BaseException:
                    unlink_quietly(tmp, dir_fd)
                    raise
                finally:
                    os.close(fd)
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
                # Deleted since the link failed: it existed then, so this create lost.
                with contextlib.suppress(NotFound):
                    self._lstat(name, dir_fd, key)  # UnsafePath for a link
                raise AlreadyExists(
                    f"{key!r} already exists in {self.url}", key=key, store=self.url
                ) from None
            return st
        with DirLock(dir_fd):
            try:
                current: os.stat_result | None = self._lstat(name, dir_fd, key)
            except NotFound:
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
                    st = self._lstat(name, dir_fd, key)
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
        for _attempt in range(RETRIES):
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
            st = self._lstat(src_name, src_fd, src)
            if not stat.S_ISREG(st.st_mode):
                raise self._not_found(src)
            with contextlib.suppress(NotFound):
                self._lstat(dst_name, dst_fd, dst)  # UnsafePath for a link
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

    # --- listing -------------------------------------------------------------------------

    def _list(self, prefix: str) -> Iterator[ObjectMeta]:
        dir_fd = self._open_listed(prefix)
        return iter(()) if dir_fd is None else walk_objects(dir_fd, prefix)

    def _list_dir(self, prefix: str) -> ListResult:
        dir_fd = self._open_listed(prefix)
        if dir_fd is None:
            return ListResult()
        try:
            return list_level(dir_fd, prefix)
        finally:
            os.close(dir_fd)


def _rebuild(root: str, fsync: bool) -> LocalStore:
    return LocalStore(root, fsync=fsync)
