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
    UnsafePath,
)
from parquetry.store._localfs import (
    DIR_FLAGS,
    FILE_FLAGS,
    HIDDEN,
    LINK_ERRNOS,
    DirLock,
    check_visible,
    list_level,
    meta,
    open_subdir,
    remove_stale_temps,
    stamp,
    unlink_quietly,
    version,
    walk_objects,
)
from parquetry.store.base import Capability, ListResult, ObjectMeta, PutMode, Store
from parquetry.store.keys import validate_key

__all__ = ["LocalStore"]

#: Opens the root, following links: the root path itself is the user's choice.
_ROOT_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
#: Linux names the path an fd was opened at in /proc/self/fd: one open plus one readlink
#: prove a path crossed no link, where the segment-by-segment walk costs two calls a segment.
_FAST = os.path.isdir("/proc/self/fd") and hasattr(os, "O_PATH")
#: Opens a name itself (a link stays a link) without reading it: what head needs.
_PATH_FLAGS = getattr(os, "O_PATH", 0) | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
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

    def _open_object(self, key: str) -> int:
        """An fd of the regular file ``key``, reached without following any link."""
        fd = self._open_verified(key, FILE_FLAGS)
        if fd is None:
            fd = self._open_object_slowly(key)
        try:
            regular = stat.S_ISREG(os.fstat(fd).st_mode)
        except BaseException:
            os.close(fd)
            raise
        if not regular:  # a directory, a FIFO...: no object
            os.close(fd)
            raise self._not_found(key)
        return fd

    def _open_object_slowly(self, key: str) -> int:
        parent, _, name = key.rpartition("/")
        dir_fd = self._open_dir(parent, key, create=False)
        try:
            fd = os.open(name, FILE_FLAGS, dir_fd=dir_fd)
        except (FileNotFoundError, IsADirectoryError):
            raise self._not_found(key) from None
        except OSError as exc:
            if exc.errno in LINK_ERRNOS:
                self._lstat(name, dir_fd, key)  # raises UnsafePath for a link
            raise self._os_error(key, exc) from exc
        finally:
            os.close(dir_fd)
        return fd

    def _open_verified(self, rel: str, flags: int) -> int | None:
        """The fast path: open ``root/rel`` in one call and keep the fd only if the kernel
        resolved it to exactly ``<real root>/rel``. A link in any segment makes the resolved
        path differ, so a match proves none was crossed, and the fd (not a path) is what is
        used afterwards: no race. None means: take the walk, which also explains failures."""
        if not _FAST:
            return None
        try:
            fd = os.open(f"{self._root}/{rel}", flags)
        except OSError:
            return None
        try:
            opened = os.readlink(f"/proc/self/fd/{fd}")
            if opened == f"{self._real_root()}/{rel}":
                return fd
            if opened == f"{self._real_root(refresh=True)}/{rel}":  # the root was re-linked
                return fd
        except OSError:
            pass
        os.close(fd)
        return None

    def _real_root(self, *, refresh: bool = False) -> str:
        if self._real is None or refresh:
            self._real = os.path.realpath(self._root)
        return self._real

    def _lstat(self, name: str, dir_fd: int, key: str) -> os.stat_result:
        """The stat of ``name`` itself; NotFound if missing, UnsafePath if a link."""
        try:
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except (FileNotFoundError, NotADirectoryError):
            raise self._not_found(key) from None
        except OSError as exc:
            raise self._os_error(key, exc) from exc
        if stat.S_ISLNK(st.st_mode):
            raise self._unsafe(key, name)
        return st

    def _head(self, key: str) -> ObjectMeta:
        fd = self._open_verified(key, _PATH_FLAGS)
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

    def _open_dir(self, parent: str, key: str, *, create: bool) -> int:
        """The fd of the directory ``parent``, opened one segment at a time with
        ``O_NOFOLLOW`` from the root, so no link inside the root is ever followed (the root
        itself may be a link: the user chose it). ``create`` makes missing directories."""
        if parent:
            fast = self._open_verified(parent, DIR_FLAGS)
            if fast is not None:
                return fast
        try:
            fd = self._open_root(create)
            for segment in parent.split("/") if parent else ():
                fd = self._open_child(fd, segment, key, create)
            return fd
        except ParquetryError:
            raise
        except FileNotFoundError:
            raise self._not_found(key) from None
        except OSError as exc:
            raise StoreUnavailable(
                f"cannot open the directory of {key!r} in {self.url}: {exc}", key=key
            ) from exc

    def _open_root(self, create: bool) -> int:
        try:
            return os.open(self._root, _ROOT_FLAGS)
        except FileNotFoundError:
            if not create:
                raise
        except NotADirectoryError:
            raise StoreUnavailable(f"the root of {self.url} is not a directory") from None
        os.makedirs(self._root, exist_ok=True)
        return os.open(self._root, _ROOT_FLAGS)

    def _open_child(self, fd: int, segment: str, key: str, create: bool) -> int:
        """The fd of the directory ``segment`` in ``fd`` (which this closes)."""
        try:
            for _attempt in range(_RETRIES):
                try:
                    return os.open(segment, DIR_FLAGS, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        raise self._not_found(key) from None
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(segment, 0o777, dir_fd=fd)
                except OSError as exc:
                    if exc.errno not in LINK_ERRNOS:
                        raise
                    st = self._lstat(segment, fd, key)  # UnsafePath for a link
                    if stat.S_ISDIR(st.st_mode):
                        continue  # replaced concurrently: look again
                    if create:
                        raise InvalidKey(
                            f"cannot write {key!r} in {self.url}: a parent is a file", key=key
                        ) from None
                    raise self._not_found(key) from None
            raise StoreUnavailable(f"directory of {key!r} keeps vanishing in {self.url}", key=key)
        finally:
            os.close(fd)

    def _unsafe(self, key: str, name: str) -> UnsafePath:
        return UnsafePath(
            f"store key {key!r} crosses the symbolic link {name!r} inside {self.url}; "
            "links inside a local store's root are never followed",
            key=key,
            store=self.url,
        )

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

    def _prune_empty_dirs(self, parent: str) -> None:
        # Object stores have no directories: an emptied "directory" must vanish from listings.
        # A concurrent writer that opened the directory first sees ENOENT and retries. Best
        # effort: the object is gone already, a directory left behind lists as nothing.
        if not parent:
            return
        segments = parent.split("/")
        fds: list[int] = []
        try:
            fds.append(os.open(self._root, _ROOT_FLAGS))
            for segment in segments:
                sub = open_subdir(segment, fds[-1])
                if sub is None:
                    return
                fds.append(sub)
            for depth in range(len(segments), 0, -1):
                remove_stale_temps(fds[depth])
                os.rmdir(segments[depth - 1], dir_fd=fds[depth - 1])
        except OSError:
            return  # not empty (ENOTEMPTY), gone, replaced...: stop pruning
        finally:
            for fd in fds:
                os.close(fd)

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

    def _open_listed(self, prefix: str) -> int | None:
        """The directory ``prefix`` to list; None if there is none (nothing to list).

        Raises UnsafePath if ``prefix`` crosses a link: a listing never shows what is
        outside the root, and silently listing nothing would hide the link from callers
        (a dataset's delete would then believe the dataset empty).
        """
        try:
            return self._open_dir(prefix, prefix or ".", create=False)
        except NotFound:
            return None

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
