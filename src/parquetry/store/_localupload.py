"""Streaming writes of :class:`~parquetry.store.local.LocalStore`.

The object is written into a temporary file of its directory (``.parquetry-tmp-<uuid>``,
never listed) as the pieces arrive, and published at commit exactly as ``put`` publishes:
fsync (unless ``fsync=False``), then ``link()`` for create-if-absent, a rename under the
directory lock for overwrite and compare-and-swap. Abort, or a failed commit, unlinks the
temporary file. A killed process leaves its temporary file behind: invisible, it costs
disk space until garbage collection (or the pruning of its directory) removes it: it is
locked while its writer lives (:mod:`parquetry.store._localtemps`). Memory: one piece
(:data:`~parquetry.store.writer.CHUNK_BYTES`).
"""

from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING

from parquetry.errors import ParquetryError, StoreUnavailable
from parquetry.store._localfs import meta, unlink_quietly
from parquetry.store._localtemps import open_temp
from parquetry.store._localwalk import RETRIES
from parquetry.store.base import ObjectMeta, PutMode
from parquetry.store.writer import Upload

if TYPE_CHECKING:
    from parquetry.store.local import LocalStore

__all__ = ["LocalUpload"]


class LocalUpload(Upload):
    """One temporary file, opened at the first write (or at commit, for an empty object)."""

    def __init__(self, store: LocalStore, key: str, mode: PutMode, expected: str | None):
        self.store, self.key, self.mode, self.expected = store, key, mode, expected
        self.parent, _, self.name = key.rpartition("/")
        self.dir_fd: int | None = None
        self.fd: int | None = None
        self.tmp = ""

    def _open(self) -> tuple[int, int]:
        if self.dir_fd is not None and self.fd is not None:
            return self.dir_fd, self.fd
        for _attempt in range(RETRIES):
            dir_fd = self.store._open_dir(self.parent, self.key, create=True)
            try:
                tmp, fd = open_temp(dir_fd)
            except FileNotFoundError:
                os.close(dir_fd)
                continue  # the directory was pruned after we opened it: start again
            except BaseException:
                os.close(dir_fd)
                raise
            # Our temporary file now keeps the directory from being pruned.
            self.dir_fd, self.fd, self.tmp = dir_fd, fd, tmp
            return dir_fd, fd
        raise StoreUnavailable(
            f"directory of {self.key!r} keeps vanishing in {self.store.url}", key=self.key
        )

    def write(self, data: memoryview) -> None:
        try:
            _, fd = self._open()
            view = data.cast("B")
            while view:
                view = view[os.write(fd, view) :]
        except ParquetryError:
            self.abort()
            raise
        except OSError as exc:
            self.abort()
            raise self.store._os_error(self.key, exc, "writing") from exc

    def commit(self) -> ObjectMeta:
        try:
            dir_fd, fd = self._open()
            if self.store.fsync:
                os.fsync(fd)
            st = self.store._publish(
                dir_fd, fd, self.tmp, self.name, self.key, self.mode, self.expected
            )
        except BaseException as exc:
            self.abort()
            if isinstance(exc, OSError) and not isinstance(exc, ParquetryError):
                raise self.store._os_error(self.key, exc, "writing") from exc
            raise
        try:
            # The temporary name goes before the fd (and its lock: _localtemps.py).
            if self.mode is PutMode.CREATE:  # published by link: the temporary name remains
                unlink_quietly(self.tmp, dir_fd)
            os.close(fd)
            self.fd = None
            if self.store.fsync:
                os.fsync(dir_fd)
        except OSError as exc:  # published already: only the durability step failed
            raise self.store._os_error(self.key, exc, "writing") from exc
        finally:
            self._close()
        return meta(self.key, st)

    def abort(self) -> None:
        opened = self.dir_fd is not None
        if self.dir_fd is not None:
            with contextlib.suppress(OSError):
                unlink_quietly(self.tmp, self.dir_fd)
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = None
        self._close()
        if opened:
            # A directory made for this object only must vanish again, as on object stores.
            with contextlib.suppress(OSError, ParquetryError):
                self.store._prune_empty_dirs(self.parent)

    def _close(self) -> None:
        if self.dir_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.dir_fd)
            self.dir_fd = None
