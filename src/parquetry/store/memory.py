"""An in-process store: a dict under a lock. For tests, demos and scratch work.

Instances with the same name share their objects (``memory://name``), so a memory store
survives pickling inside one process, which is what local Spark tests and the CLI need.
"""

from __future__ import annotations

import threading
import uuid
import weakref
from collections.abc import Iterator
from datetime import UTC, datetime

from parquetry.errors import AlreadyExists, NotFound, PreconditionFailed
from parquetry.store.base import Capability, ObjectMeta, PutMode, Store

__all__ = ["MemoryStore"]

_PRIVATE_PREFIX = "private-"


class _Bucket:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.objects: dict[str, tuple[bytes, str, datetime]] = {}
        self.counter = 0


# Named buckets live for the whole process (``memory://name`` can be reopened at any time);
# a private bucket lives as long as a store instance refers to it.
_BUCKETS: dict[str, _Bucket] = {}
_PRIVATE_BUCKETS: weakref.WeakValueDictionary[str, _Bucket] = weakref.WeakValueDictionary()
_BUCKETS_LOCK = threading.Lock()


def _bucket(name: str, private: bool) -> _Bucket:
    with _BUCKETS_LOCK:
        table = _PRIVATE_BUCKETS if private else _BUCKETS
        bucket = table.get(name)
        if bucket is None:
            bucket = table[name] = _Bucket()
        return bucket


class MemoryStore(Store):
    """A store in memory.

    ``MemoryStore("x")`` (``memory://x``) is shared by name within the process and lives
    until the process ends. ``MemoryStore()`` is private: its objects are freed with the
    last instance referring to them (an unpickled copy is such an instance).
    """

    capabilities = frozenset(Capability)

    def __init__(self, name: str | None = None):
        if name is None:
            name = f"{_PRIVATE_PREFIX}{uuid.uuid4().hex}"
        self.name = name
        self._b = _bucket(name, private=name.startswith(_PRIVATE_PREFIX))

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
                raise AlreadyExists(
                    f"{key!r} already exists in {self.url}", key=key, store=self.url
                )
            if mode is PutMode.UPDATE:
                if current is None:
                    raise NotFound(f"{key!r} not found in {self.url}", key=key, store=self.url)
                if current[1] != expected_version:
                    raise PreconditionFailed(
                        f"{key!r} changed: expected version {expected_version}, found {current[1]}",
                        key=key,
                        store=self.url,
                        expected=expected_version,
                        found=current[1],
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
