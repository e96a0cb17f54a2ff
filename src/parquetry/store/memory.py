"""An in-process store: a dict under a lock. For tests, demos and scratch work.

Instances with the same name share their objects (``memory://name``), so a memory store
survives pickling inside one process, which is what local Spark tests and the CLI need.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from datetime import UTC, datetime

from parquetry.errors import AlreadyExists, NotFound, PreconditionFailed
from parquetry.store.base import Capability, ObjectMeta, PutMode, Store

__all__ = ["MemoryStore"]


class _Bucket:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.objects: dict[str, tuple[bytes, str, datetime]] = {}
        self.counter = 0


_BUCKETS: dict[str, _Bucket] = {}
_BUCKETS_LOCK = threading.Lock()


def _bucket(name: str) -> _Bucket:
    with _BUCKETS_LOCK:
        return _BUCKETS.setdefault(name, _Bucket())


class MemoryStore(Store):
    """A store in memory. ``MemoryStore()`` is private; ``MemoryStore("x")`` is shared by name."""

    capabilities = frozenset(Capability)

    def __init__(self, name: str | None = None):
        if name is None:
            name = f"anon-{id(self):x}-{hashlib.sha1(str(datetime.now(UTC)).encode()).hexdigest()[:8]}"
        self.name = name
        self._b = _bucket(name)

    @property
    def url(self) -> str:
        return f"memory://{self.name}"

    def __reduce__(self) -> tuple[type[MemoryStore], tuple[str]]:
        return (MemoryStore, (self.name,))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MemoryStore) and other.name == self.name

    def __hash__(self) -> int:
        return hash(("memory", self.name))

    def _entry(self, key: str) -> tuple[bytes, str, datetime]:
        try:
            return self._b.objects[key]
        except KeyError:
            raise NotFound(f"{key!r} not found in {self.url}", key=key, store=self.url) from None

    def _get(self, key: str) -> bytes:
        return self._entry(key)[0]

    def _get_range(self, key: str, start: int, end: int) -> bytes:
        return self._entry(key)[0][start:end]

    def _head(self, key: str) -> ObjectMeta:
        data, version, modified = self._entry(key)
        return ObjectMeta(key=key, size=len(data), version=version, modified=modified)

    def _exists(self, key: str) -> bool:
        return key in self._b.objects

    def _put(
        self, key: str, data: bytes | memoryview, mode: PutMode, expected_version: str | None
    ) -> ObjectMeta:
        payload = bytes(data)
        with self._b.lock:
            current = self._b.objects.get(key)
            if mode is PutMode.CREATE and current is not None:
                raise AlreadyExists(f"{key!r} already exists in {self.url}", key=key,
                                    store=self.url)
            if mode is PutMode.UPDATE:
                if current is None:
                    raise NotFound(f"{key!r} not found in {self.url}", key=key, store=self.url)
                if current[1] != expected_version:
                    raise PreconditionFailed(
                        f"{key!r} changed: expected version {expected_version}, "
                        f"found {current[1]}",
                        key=key, store=self.url, expected=expected_version, found=current[1],
                    )
            self._b.counter += 1
            version = str(self._b.counter)
            modified = datetime.now(UTC)
            self._b.objects[key] = (payload, version, modified)
        return ObjectMeta(key=key, size=len(payload), version=version, modified=modified)

    def _delete(self, key: str, missing_ok: bool) -> None:
        with self._b.lock:
            if self._b.objects.pop(key, None) is None and not missing_ok:
                raise NotFound(f"{key!r} not found in {self.url}", key=key, store=self.url)

    def _list(self, prefix: str) -> Iterator[ObjectMeta]:
        with self._b.lock:
            items = list(self._b.objects.items())
        start = prefix + "/" if prefix else ""
        for key, (data, version, modified) in items:
            if key.startswith(start):
                yield ObjectMeta(key=key, size=len(data), version=version, modified=modified)
