"""Wrapper stores for tests: count requests, inject faults, take capabilities away.

A streamed object (``Store.open_writer``) is one ``put`` when it is committed; each piece
the writer hands to the backend before that is a ``write`` (see
:mod:`parquetry.store.writer`), so a fault can hit an object in the middle of its stream.
"""

from __future__ import annotations

import mmap
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from parquetry.errors import StoreUnavailable
from parquetry.store.base import Capability, ListResult, ObjectMeta, PutMode, Store
from parquetry.store.wrappers import WrapperStore
from parquetry.store.writer import Upload

__all__ = ["CountingStore", "FaultyStore", "InjectedFault", "LimitedStore"]

#: The kinds of calls the wrappers see (one per store primitive).
KINDS = (
    "get",
    "get_range",
    "head",
    "exists",
    "put",
    "delete",
    "list",
    "list_dir",
    "copy",
    "move",
    "write",
)


class CountingStore(WrapperStore):
    """Counts requests by kind (``counts``) and bytes read / written (``bytes_read``...).

    ``list`` counts one request per listing call, whatever the number of pages.
    """

    def __init__(self, inner: Store):
        super().__init__(inner)
        self._lock = threading.Lock()
        self.counts: Counter[str] = Counter()
        self.bytes_read = 0
        self.bytes_written = 0
        self.log: list[tuple[str, str]] = []

    def reset(self) -> None:
        with self._lock:
            self.counts.clear()
            self.bytes_read = 0
            self.bytes_written = 0
            self.log.clear()

    @property
    def total(self) -> int:
        """All requests counted so far."""
        return sum(self.counts.values())

    def _count(self, kind: str, key: str, read: int = 0, written: int = 0) -> None:
        with self._lock:
            self.counts[kind] += 1
            self.bytes_read += read
            self.bytes_written += written
            self.log.append((kind, key))

    def _add_read(self, n: int) -> None:
        with self._lock:
            self.bytes_read += n

    # A request counts when it is attempted, so a miss (NotFound) costs a request too.

    def _get(self, key: str) -> bytes:
        self._count("get", key)
        data = self.inner._get(key)
        self._add_read(len(data))
        return data

    def _read_buffer(self, key: str) -> bytes | mmap.mmap:
        self._count("get", key)
        data = self.inner._read_buffer(key)
        self._add_read(len(data))
        return data

    def _get_range(self, key: str, start: int, end: int) -> bytes:
        self._count("get_range", key)
        data = self.inner._get_range(key, start, end)
        self._add_read(len(data))
        return data

    def _get_ranges(self, key: str, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        for _ in ranges:
            self._count("get_range", key)
        parts = self.inner._get_ranges(key, ranges)
        self._add_read(sum(len(p) for p in parts))
        return parts

    def _head(self, key: str) -> ObjectMeta:
        self._count("head", key)
        return self.inner._head(key)

    def _exists(self, key: str) -> bool:
        self._count("exists", key)
        return self.inner._exists(key)

    def _put(
        self, key: str, data: bytes | memoryview, mode: PutMode, expected_version: str | None
    ) -> ObjectMeta:
        self._count("put", key, written=len(data))
        return self.inner._put(key, data, mode, expected_version)

    def _open_upload(self, key: str, mode: PutMode, expected_version: str | None) -> Upload:
        return _CountingUpload(self, key, self.inner._open_upload(key, mode, expected_version))

    def _delete(self, key: str, missing_ok: bool) -> None:
        self._count("delete", key)
        self.inner._delete(key, missing_ok)

    def _list(self, prefix: str) -> Iterator[ObjectMeta]:
        self._count("list", prefix)
        return self.inner._list(prefix)

    def _list_dir(self, prefix: str) -> ListResult:
        self._count("list_dir", prefix)
        return self.inner._list_dir(prefix)

    def _copy(self, src: str, dst: str) -> None:
        self._count("copy", src)
        self.inner._copy(src, dst)

    def _move(self, src: str, dst: str) -> None:
        self._count("move", src)
        self.inner._move(src, dst)

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()


class InjectedFault(StoreUnavailable):
    """The error :class:`FaultyStore` raises by default."""


class FaultyStore(WrapperStore):
    """Fails store calls on purpose.

    Args:
        inner: The store to wrap.
        fail_on: Fail the Nth call (1-based) counted over ``kinds``; ``None`` = never by count.
        kinds: Which call kinds count / fail (default: all of :data:`KINDS`).
        always: Fail every call of ``kinds`` (ignores ``fail_on``).
        error: Builds the exception to raise from ``(kind, key)``.
        after: If true, the failing write is performed first and then reported as failed
            (a lost acknowledgement: the worst case for commit protocols).

    ``calls`` counts every call seen; ``failed`` tells whether the fault fired.
    """

    def __init__(
        self,
        inner: Store,
        *,
        fail_on: int | None = None,
        kinds: tuple[str, ...] = KINDS,
        always: bool = False,
        error: Callable[[str, str], BaseException] | None = None,
        after: bool = False,
    ):
        super().__init__(inner)
        self._lock = threading.Lock()
        self.fail_on = fail_on
        self.kinds = kinds
        self.always = always
        self.after = after
        self.error = error or _injected_fault
        self.calls = 0
        self.failed = False

    def _should_fail(self, kind: str) -> bool:
        if kind not in self.kinds:
            return False
        with self._lock:
            self.calls += 1
            fire = self.always or (self.fail_on is not None and self.calls == self.fail_on)
            if fire:
                self.failed = True
            return fire

    def _check(self, kind: str, key: str) -> None:
        if self._should_fail(kind):
            raise self.error(kind, key)

    def _get(self, key: str) -> bytes:
        self._check("get", key)
        return self.inner._get(key)

    def _read_buffer(self, key: str) -> bytes | mmap.mmap:
        self._check("get", key)
        return self.inner._read_buffer(key)

    def _get_range(self, key: str, start: int, end: int) -> bytes:
        self._check("get_range", key)
        return self.inner._get_range(key, start, end)

    def _get_ranges(self, key: str, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        self._check("get_range", key)
        return self.inner._get_ranges(key, ranges)

    def _head(self, key: str) -> ObjectMeta:
        self._check("head", key)
        return self.inner._head(key)

    def _exists(self, key: str) -> bool:
        self._check("exists", key)
        return self.inner._exists(key)

    def _put(
        self, key: str, data: bytes | memoryview, mode: PutMode, expected_version: str | None
    ) -> ObjectMeta:
        if self.after and self._should_fail("put"):
            self.inner._put(key, data, mode, expected_version)
            raise self.error("put", key)
        if not self.after:
            self._check("put", key)
        return self.inner._put(key, data, mode, expected_version)

    def _open_upload(self, key: str, mode: PutMode, expected_version: str | None) -> Upload:
        return _FaultyUpload(self, key, self.inner._open_upload(key, mode, expected_version))

    def _delete(self, key: str, missing_ok: bool) -> None:
        self._check("delete", key)
        self.inner._delete(key, missing_ok)

    def _list(self, prefix: str) -> Iterator[ObjectMeta]:
        self._check("list", prefix)
        return self.inner._list(prefix)

    def _list_dir(self, prefix: str) -> ListResult:
        self._check("list_dir", prefix)
        return self.inner._list_dir(prefix)

    def _copy(self, src: str, dst: str) -> None:
        self._check("copy", src)
        self.inner._copy(src, dst)

    def _move(self, src: str, dst: str) -> None:
        self._check("move", src)
        self.inner._move(src, dst)

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()


class _CountingUpload(Upload):
    """Bytes counted as they are written; the object counts as one ``put`` at commit."""

    def __init__(self, store: CountingStore, key: str, inner: Upload):
        self.store, self.key, self.inner = store, key, inner
        self.size = 0

    def write(self, data: memoryview) -> None:
        self.size += len(data)
        self.inner.write(data)

    def commit(self) -> ObjectMeta:
        self.store._count("put", self.key, written=self.size)
        return self.inner.commit()

    def abort(self) -> None:
        self.inner.abort()


class _FaultyUpload(Upload):
    """Each piece is a ``write`` call and the commit a ``put`` call of the FaultyStore."""

    def __init__(self, store: FaultyStore, key: str, inner: Upload):
        self.store, self.key, self.inner = store, key, inner

    def write(self, data: memoryview) -> None:
        try:
            self.store._check("write", self.key)
        except BaseException:
            self.inner.abort()  # a failed piece ends the stream, as a backend failure would
            raise
        self.inner.write(data)

    def commit(self) -> ObjectMeta:
        store = self.store
        if store.after and store._should_fail("put"):
            self.inner.commit()
            raise store.error("put", self.key)
        if not store.after:
            try:
                store._check("put", self.key)
            except BaseException:
                self.inner.abort()
                raise
        return self.inner.commit()

    def abort(self) -> None:
        self.inner.abort()


def _injected_fault(kind: str, key: str) -> BaseException:
    return InjectedFault(f"injected fault on {kind} {key!r}", key=key)


class LimitedStore(WrapperStore):
    """A store that claims only ``capabilities`` (a subset of its inner store's).

    For testing code paths of weaker backends: a write-once bucket (no ``delete``), an
    upload-only credential (no ``list``), a store without conditional puts. The store's
    own methods refuse what it no longer claims, before any I/O.
    """

    def __init__(self, inner: Store, capabilities: set[Capability] | frozenset[Capability]):
        super().__init__(inner)
        self.capabilities = frozenset(capabilities) & inner.capabilities
