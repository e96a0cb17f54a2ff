"""Streaming writes: one object written piece by piece, published whole or not at all.

:meth:`Store.open_writer <parquetry.store.Store.open_writer>` returns a :class:`StoreWriter`,
a binary sink (``write``, ``tell``; pyarrow's ``ParquetWriter`` writes into it) with the
semantics of :meth:`~parquetry.store.Store.put`: the object is invisible until
:meth:`StoreWriter.commit` (or a ``with`` block that ends normally, or ``close``), the
write modes are put's, and :meth:`StoreWriter.abort` (or an exception leaving the ``with``
block) leaves nothing behind. The writer hands the backend pieces of at least
:data:`CHUNK_BYTES` (pyarrow writes page headers of a few dozen bytes), so a writer holds
that much plus what its backend buffers (see each backend).

A backend implements :class:`Upload` (``write`` / ``commit`` / ``abort``) in
``Store._open_upload``; the default, :class:`BufferedUpload`, keeps the whole object in
memory and publishes it with the store's ``_put`` (exact put semantics, no memory bound).
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from types import TracebackType
from typing import TYPE_CHECKING, Self

from parquetry.errors import InvalidArgument

if TYPE_CHECKING:
    from parquetry.store.base import ObjectMeta, PutMode, Store

__all__ = ["CHUNK_BYTES", "BufferedUpload", "PublishOnExit", "StoreWriter", "Upload"]

#: Bytes the writer gathers before handing them to the backend.
CHUNK_BYTES = 1 << 20


class Upload(ABC):
    """A backend's side of one streamed object (not thread-safe: one writer owns it)."""

    @abstractmethod
    def write(self, data: memoryview) -> None:
        """Append ``data`` (not visible until :meth:`commit`)."""

    @abstractmethod
    def commit(self) -> ObjectMeta:
        """Publish everything written, with the write's mode; return the object's metadata.
        On failure nothing is published and the upload is aborted."""

    @abstractmethod
    def abort(self) -> None:
        """Discard everything written (best effort, never raises for a backend failure)."""


class BufferedUpload(Upload):
    """The whole object in memory, published by ``store._put`` at commit."""

    def __init__(self, store: Store, key: str, mode: PutMode, expected_version: str | None):
        self.store, self.key, self.mode, self.expected = store, key, mode, expected_version
        self.parts: list[bytes] = []

    def write(self, data: memoryview) -> None:
        self.parts.append(bytes(data))

    def commit(self) -> ObjectMeta:
        data, self.parts = b"".join(self.parts), []
        return self.store._put(self.key, data, self.mode, self.expected)

    def abort(self) -> None:
        self.parts = []


class PublishOnExit(ABC):
    """The ``with`` protocol of a writer of one object (:class:`StoreWriter`, and the
    Parquet layer's stream writer): a block that ends normally publishes, one an exception
    leaves discards, so a half-written object is never published."""

    @abstractmethod
    def _publish_on_exit(self) -> object:
        """What a normal end of the block does (``commit``, ``close``)."""

    @abstractmethod
    def abort(self) -> None: ...

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self._publish_on_exit()
        else:
            self.abort()


class StoreWriter(PublishOnExit):
    """A write-only binary stream for one object (see the module doc).

    Use it as a context manager: the object is published when the block ends normally and
    discarded when an exception leaves it. ``commit()`` publishes explicitly (returning the
    object's :class:`~parquetry.store.ObjectMeta`), ``close()`` is ``commit()`` for code
    that treats the writer as a file, ``abort()`` discards. After any of them the writer
    refuses writes; a second ``commit``/``close`` returns the first result, ``abort`` after
    a commit does nothing.
    """

    def __init__(self, store_url: str, key: str, upload: Upload):
        self.key = key
        self._url = store_url
        self._upload = upload
        self._buffer = bytearray()
        self._written = 0
        self._meta: ObjectMeta | None = None
        self._done = False

    # --- the file-like surface ---------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._done

    def writable(self) -> bool:
        return True

    def readable(self) -> bool:
        return False

    def seekable(self) -> bool:
        return False

    def tell(self) -> int:
        """Bytes written so far."""
        return self._written

    def flush(self) -> None:
        """Nothing to do: written bytes become visible only at commit."""

    def write(self, data: bytes | bytearray | memoryview) -> int:
        if self._done:
            raise InvalidArgument(f"writer of {self.key!r} in {self._url} is closed", key=self.key)
        try:
            view = memoryview(data).cast("B")
        except TypeError:
            raise InvalidArgument(
                f"writing {self.key!r} needs a bytes-like object, got {type(data).__name__}",
                key=self.key,
            ) from None
        n = len(view)
        if not self._buffer and n >= CHUNK_BYTES:
            self._hand_over(view)  # large pieces go straight through, without a copy
        else:
            self._buffer += view
            if len(self._buffer) >= CHUNK_BYTES:
                self._hand_over(memoryview(self._buffer))
                self._buffer = bytearray()
        self._written += n
        return n

    # --- publishing --------------------------------------------------------------------

    def _hand_over(self, view: memoryview) -> None:
        try:
            self._upload.write(view)
        except BaseException:
            self.abort()
            raise

    def commit(self) -> ObjectMeta:
        """Publish the object (with the writer's mode); nothing is published on failure."""
        if self._meta is not None:
            return self._meta
        if self._done:
            raise InvalidArgument(
                f"writer of {self.key!r} in {self._url} was aborted: nothing to commit",
                key=self.key,
            )
        if self._buffer:
            self._hand_over(memoryview(self._buffer))
            self._buffer = bytearray()
        self._done = True
        try:
            self._meta = self._upload.commit()
        except BaseException:
            with contextlib.suppress(Exception):
                self._upload.abort()
            raise
        return self._meta

    def close(self) -> None:
        if not self._done:
            self.commit()

    def abort(self) -> None:
        """Discard what was written; the key is left as it was."""
        if self._done:
            return
        self._done = True
        self._buffer = bytearray()
        with contextlib.suppress(Exception):
            self._upload.abort()

    def _publish_on_exit(self) -> ObjectMeta:
        return self.commit()  # not close(): a block that aborted must not end silently

    def __del__(self) -> None:
        # Dropped without commit or abort (a caller's bug or an interrupted frame): discard,
        # so a local temporary file or an object store's multipart upload does not linger.
        if not getattr(self, "_done", True):
            self.abort()

    def __repr__(self) -> str:
        state = "committed" if self._meta else "closed" if self._done else "open"
        return f"StoreWriter({self._url!r}, {self.key!r}, {state}, {self._written} bytes)"
