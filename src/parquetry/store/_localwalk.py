"""How :class:`~parquetry.store.local.LocalStore` reaches a path without following a link,
prunes the directories a delete emptied and removes the temporary files killed writers left.

Every path is opened from the root's fd one segment at a time with ``O_NOFOLLOW``, or, on
Linux, in one call whose resolved path (``/proc/self/fd``) proves that no link was crossed.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat

from parquetry.errors import InvalidKey, NotFound, ParquetryError, StoreUnavailable, UnsafePath
from parquetry.store._localfs import (
    DIR_FLAGS,
    FILE_FLAGS,
    LINK_ERRNOS,
    open_subdir,
)
from parquetry.store._localtemps import STALE_TEMP_SECONDS, remove_stale_temps

__all__ = ["PATH_FLAGS", "RETRIES", "ROOT_FLAGS", "SafeRoot"]

#: Opens the root, following links: the root path itself is the user's choice.
ROOT_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
#: Linux names the path an fd was opened at in /proc/self/fd: one open plus one readlink
#: prove a path crossed no link, where the segment-by-segment walk costs two calls a segment.
_FAST = os.path.isdir("/proc/self/fd") and hasattr(os, "O_PATH")
#: Opens a name itself (a link stays a link) without reading it: what head needs.
PATH_FLAGS = getattr(os, "O_PATH", 0) | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
RETRIES = 20  # attempts when a directory vanishes under us (pruned by a concurrent delete)


class SafeRoot:
    """Opening files and directories under ``_root`` without crossing a link."""

    _root: str
    _real: str | None

    @property
    def url(self) -> str:
        raise NotImplementedError

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
            return os.open(self._root, ROOT_FLAGS)
        except FileNotFoundError:
            if not create:
                raise
        except NotADirectoryError:
            raise StoreUnavailable(f"the root of {self.url} is not a directory") from None
        os.makedirs(self._root, exist_ok=True)
        return os.open(self._root, ROOT_FLAGS)

    def _open_child(self, fd: int, segment: str, key: str, create: bool) -> int:
        """The fd of the directory ``segment`` in ``fd`` (which this closes)."""
        try:
            for _attempt in range(RETRIES):
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

    def _prune_empty_dirs(self, parent: str) -> None:
        # Object stores have no directories: an emptied "directory" must vanish from listings.
        # A concurrent writer that opened the directory first sees ENOENT and retries. Best
        # effort: the object is gone already, a directory left behind lists as nothing.
        if not parent:
            return
        segments = parent.split("/")
        fds: list[int] = []
        try:
            fds.append(os.open(self._root, ROOT_FLAGS))
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

    def _remove_stale_temporaries(
        self, prefix: str, older_than: float | None, recursive: bool, remove: bool
    ) -> list[str]:
        """See :func:`parquetry.store.temporaries.remove_stale_temporaries`."""
        dir_fd = self._open_listed(prefix)
        if dir_fd is None:
            return []
        age = STALE_TEMP_SECONDS if older_than is None else older_than
        try:
            return remove_stale_temps(
                dir_fd, older_than=age, rel=prefix, recursive=recursive, remove=remove
            )
        finally:
            os.close(dir_fd)
