"""The Store interface: few primitives with honest semantics.

A store maps ``/``-separated relative keys to immutable byte objects. Everything the layers
above need is built on: get (whole or a byte range), head, put with a mode (overwrite,
create-if-absent, update-if-version-matches), its streaming form (``open_writer``), delete
and list. The API is synchronous on purpose: Spark executors and the CLI are synchronous
callers.
"""

from __future__ import annotations

import builtins
import enum
import mmap
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from parquetry.errors import CapabilityNotSupported, InvalidArgument, resource_failure
from parquetry.store.keys import validate_key, validate_prefix

if TYPE_CHECKING:
    from parquetry.store.rangefile import StoreFile
    from parquetry.store.writer import StoreWriter, Upload

__all__ = [
    "Capability",
    "ListResult",
    "ObjectMeta",
    "PutMode",
    "Store",
    "WRITE_CAPABILITIES",
]


class Capability(enum.Enum):
    """What a store can do. Code checks a capability before any I/O."""

    READ = "read"
    WRITE = "write"
    ATOMIC_WRITE = "atomic_write"
    DELETE = "delete"
    LIST = "list"
    RANGE_READ = "range_read"
    CONDITIONAL_CREATE = "conditional_create"
    COMPARE_AND_SWAP = "compare_and_swap"

    # Members are singletons (also after unpickling): identity hashing is exact, and in C
    # it keeps the capability check on every call cheap (Enum's own hash is Python code).
    __hash__ = object.__hash__


WRITE_CAPABILITIES = frozenset(
    {
        Capability.WRITE,
        Capability.ATOMIC_WRITE,
        Capability.DELETE,
        Capability.CONDITIONAL_CREATE,
        Capability.COMPARE_AND_SWAP,
    }
)


class PutMode(enum.Enum):
    """How :meth:`Store.put` treats an existing object."""

    OVERWRITE = "overwrite"
    CREATE = "create"  # put-if-absent; the loser gets AlreadyExists
    UPDATE = "update"  # compare-and-swap on ``expected_version``; the loser gets PreconditionFailed


@dataclass(frozen=True, slots=True, kw_only=True)
class ObjectMeta:
    """What :meth:`Store.head` and listings report about one object.

    ``version`` is an opaque token (an ETag on object stores) that changes whenever the
    object's content is replaced; it is what compare-and-swap compares.
    """

    key: str
    size: int
    version: str | None
    modified: datetime | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ListResult:
    """One level of a listing: the objects directly under a prefix and its sub-"directories"."""

    objects: tuple[ObjectMeta, ...] = ()
    prefixes: tuple[str, ...] = field(default=())


class Store(ABC):
    """A synchronous object store.

    Subclasses implement the ``_``-prefixed primitives; the public methods validate keys and
    check capabilities first, so every backend gets the same argument checking for free.
    Stores are picklable and compare equal after unpickling (they travel to Spark executors);
    their ``repr`` never shows secrets.
    """

    #: Capabilities of this store; subclasses set it.
    capabilities: frozenset[Capability] = frozenset()

    # --- public API ------------------------------------------------------------------------

    @property
    @abstractmethod
    def url(self) -> str:
        """A secret-free URL that :func:`parquetry.store.open_store` can reopen (with options)."""

    def require(self, *caps: Capability) -> None:
        """Raise :class:`CapabilityNotSupported` naming the first missing capability."""
        for cap in caps:
            if cap not in self.capabilities:
                raise CapabilityNotSupported(
                    f"store {self.url} does not support {cap.value}",
                    capability=cap.value,
                    store=self.url,
                )

    def supports(self, cap: Capability) -> bool:
        return cap in self.capabilities

    def get(self, key: str) -> bytes:
        """Return the whole object. Raises NotFound."""
        self.require(Capability.READ)
        return self._get(validate_key(key))

    def read_buffer(self, key: str) -> bytes | mmap.mmap:
        """The whole object as a read-only buffer, without a copy where the backend can (a
        memory map on local disk). Its content is the object's when the call was made, even
        if the object is replaced or deleted afterwards. Raises NotFound."""
        self.require(Capability.READ)
        return self._read_buffer(validate_key(key))

    def get_range(self, key: str, start: int, end: int) -> bytes:
        """Return bytes ``[start, end)``; a range past the end is cut at the end.

        Raises NotFound if the object does not exist (even for an empty range) and
        InvalidArgument for a negative or reversed range.
        """
        self.require(Capability.READ)
        key = validate_key(key)
        _check_range(key, start, end)
        if end == start:
            self._head(key)  # an empty range of a missing object is still NotFound
            return b""
        if Capability.RANGE_READ not in self.capabilities:
            return self._get(key)[start:end]
        return self._get_range(key, start, end)

    def get_ranges(self, key: str, ranges: Sequence[tuple[int, int]]) -> builtins.list[bytes]:
        """Fetch several ranges ``[start, end)`` of one object (concurrently where the
        backend can); same rules as :meth:`get_range` for each."""
        self.require(Capability.READ)
        key = validate_key(key)
        ranges = [(int(s), int(e)) for s, e in ranges]
        for start, end in ranges:
            _check_range(key, start, end)
        if not ranges:
            return []
        if Capability.RANGE_READ not in self.capabilities:
            data = self._get(key)
            return [data[s:e] for s, e in ranges]
        return self._get_ranges(key, ranges)

    def head(self, key: str) -> ObjectMeta:
        """Size, version and modification time of an object. Raises NotFound."""
        self.require(Capability.READ)
        return self._head(validate_key(key))

    def exists(self, key: str) -> bool:
        self.require(Capability.READ)
        return self._exists(validate_key(key))

    def put(
        self,
        key: str,
        data: bytes | bytearray | memoryview,
        *,
        mode: PutMode = PutMode.OVERWRITE,
        expected_version: str | None = None,
    ) -> ObjectMeta:
        """Write an object atomically: readers see the old or the new content, never a mix.

        ``mode=CREATE`` raises AlreadyExists if the key exists; ``mode=UPDATE`` replaces the
        object only if its current version equals ``expected_version`` (else
        PreconditionFailed; NotFound if it is gone). Returns the new object's metadata.
        """
        key = validate_key(key)
        self._check_mode("put", key, mode, expected_version)
        if isinstance(data, bytearray):
            data = bytes(data)
        elif not isinstance(data, bytes | memoryview):
            try:
                # Any buffer (pa.Buffer, numpy arrays...) is bytes-like: take it without a copy.
                data = memoryview(data)
            except TypeError:
                raise InvalidArgument(
                    f"put({key!r}) needs a bytes-like object, got {type(data).__name__}",
                    key=key,
                ) from None
        if isinstance(data, memoryview) and (data.format != "B" or not data.c_contiguous):
            data = data.cast("B") if data.c_contiguous else memoryview(data.tobytes())
        return self._put(key, data, mode, expected_version)

    def open_writer(
        self,
        key: str,
        *,
        mode: PutMode = PutMode.OVERWRITE,
        expected_version: str | None = None,
    ) -> StoreWriter:
        """A binary sink that writes one object piece by piece (a streaming :meth:`put`).

        Same modes and checks as :meth:`put`, and the same atomicity: nothing is visible
        until the writer commits (a ``with`` block ending normally, ``commit()`` or
        ``close()``), and an exception leaving the block (or ``abort()``) leaves the key as
        it was. What a writer holds in memory, and what a killed process leaves behind,
        depend on the backend (see :mod:`parquetry.store.writer` and the backends' docs).
        """
        from parquetry.store.writer import StoreWriter

        key = validate_key(key)
        self._check_mode("open_writer", key, mode, expected_version)
        return StoreWriter(self.url, key, self._open_upload(key, mode, expected_version))

    def _check_mode(self, what: str, key: str, mode: PutMode, expected_version: str | None) -> None:
        if not isinstance(mode, PutMode):
            raise InvalidArgument(f"{what}({key!r}): mode must be a PutMode, got {mode!r}", key=key)
        if mode is PutMode.OVERWRITE:
            self.require(Capability.WRITE)
        elif mode is PutMode.CREATE:
            self.require(Capability.WRITE, Capability.CONDITIONAL_CREATE)
        else:
            self.require(Capability.WRITE, Capability.COMPARE_AND_SWAP)
            if expected_version is None:
                raise InvalidArgument(
                    f"{what}({key!r}, mode=UPDATE) needs expected_version", key=key
                )
        if mode is not PutMode.UPDATE and expected_version is not None:
            raise InvalidArgument(f"expected_version is only valid with mode=UPDATE ({key!r})")

    def delete(self, key: str, *, missing_ok: bool = False) -> None:
        """Delete one object. Raises NotFound unless ``missing_ok``."""
        self.require(Capability.DELETE)
        self._delete(validate_key(key), missing_ok)

    def delete_many(self, keys: Iterable[str], *, missing_ok: bool = True) -> None:
        """Delete many objects (concurrently where the backend can)."""
        for key in keys:
            self.delete(key, missing_ok=missing_ok)

    def copy(self, src: str, dst: str) -> None:
        """Copy an object within the store, replacing ``dst`` (server-side where possible)."""
        self.require(Capability.READ, Capability.WRITE)
        self._copy(validate_key(src), validate_key(dst))

    def move(self, src: str, dst: str) -> None:
        """Move an object within the store, replacing ``dst`` (a rename where possible)."""
        self.require(Capability.READ, Capability.WRITE, Capability.DELETE)
        src, dst = validate_key(src), validate_key(dst)
        if src == dst:  # copy-then-delete would lose the object
            self._head(src)
            return
        self._move(src, dst)

    def list(self, prefix: str = "") -> Iterator[ObjectMeta]:
        """Every object whose key starts with the directory ``prefix`` (recursive).

        ``prefix`` is a directory: ``"a/b"`` lists ``a/b/...``, not ``a/bc``. Order is
        unspecified; sort if you need it.
        """
        self.require(Capability.LIST)
        return self._list(validate_prefix(prefix))

    def list_dir(self, prefix: str = "") -> ListResult:
        """One level under the directory ``prefix``: objects and sub-directory prefixes."""
        self.require(Capability.LIST)
        return self._list_dir(validate_prefix(prefix))

    def open(self, key: str, *, size: int | None = None) -> StoreFile:
        """A read-only random-access file over ranged gets, for ``pyarrow.parquet``.

        Pass ``size`` if known to save the head request.
        """
        from parquetry.store.rangefile import StoreFile

        self.require(Capability.READ)
        key = validate_key(key)
        return StoreFile(self, key, size=size)

    def read_only(self) -> Store:
        """A view of this store without the write capabilities."""
        from parquetry.store.wrappers import ReadOnlyStore

        return ReadOnlyStore(self)

    def map_concurrent(
        self, fn: Any, items: Iterable[Any], *, max_workers: int = 8
    ) -> builtins.list[Any]:
        """Run ``fn`` over ``items`` on a bounded thread pool, preserving order."""
        items = list(items)
        if len(items) <= 1:
            return [fn(i) for i in items]
        try:
            with ThreadPoolExecutor(max_workers=min(max_workers, len(items))) as pool:
                return list(pool.map(fn, items))
        except RuntimeError as exc:
            exhausted = resource_failure(exc, f"{self!r}: running {len(items)} store calls")
            if exhausted is None:
                raise
            raise exhausted from None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url!r})"

    # --- primitives for backends -----------------------------------------------------------

    @abstractmethod
    def _get(self, key: str) -> bytes: ...

    def _read_buffer(self, key: str) -> bytes | mmap.mmap:
        return self._get(key)

    @abstractmethod
    def _get_range(self, key: str, start: int, end: int) -> bytes: ...

    def _get_ranges(self, key: str, ranges: Sequence[tuple[int, int]]) -> builtins.list[bytes]:
        return [self._get_range(key, s, e) if e > s else b"" for s, e in ranges]

    @abstractmethod
    def _head(self, key: str) -> ObjectMeta: ...

    def _exists(self, key: str) -> bool:
        from parquetry.errors import NotFound

        try:
            self._head(key)
        except NotFound:
            return False
        return True

    @abstractmethod
    def _put(
        self,
        key: str,
        data: bytes | memoryview,
        mode: PutMode,
        expected_version: str | None,
    ) -> ObjectMeta: ...

    def _open_upload(self, key: str, mode: PutMode, expected_version: str | None) -> Upload:
        """The backend's side of :meth:`open_writer`; by default the object is gathered in
        memory and published with ``_put`` (exact semantics, no memory bound)."""
        from parquetry.store.writer import BufferedUpload

        return BufferedUpload(self, key, mode, expected_version)

    @abstractmethod
    def _delete(self, key: str, missing_ok: bool) -> None: ...

    @abstractmethod
    def _list(self, prefix: str) -> Iterator[ObjectMeta]: ...

    def _copy(self, src: str, dst: str) -> None:
        self._put(dst, self._get(src), PutMode.OVERWRITE, None)

    def _move(self, src: str, dst: str) -> None:
        self._copy(src, dst)
        self._delete(src, False)

    def _list_dir(self, prefix: str) -> ListResult:
        """Default one-level listing derived from the recursive one."""
        objects: list[ObjectMeta] = []
        prefixes: set[str] = set()
        start = len(prefix) + 1 if prefix else 0
        for meta in self._list(prefix):
            rest = meta.key[start:]
            head, sep, _ = rest.partition("/")
            if sep:
                prefixes.add((prefix + "/" if prefix else "") + head)
            else:
                objects.append(meta)
        return ListResult(
            objects=tuple(sorted(objects, key=lambda m: m.key)), prefixes=tuple(sorted(prefixes))
        )


def _check_range(key: str, start: int, end: int) -> None:
    if start < 0 or end < start:
        raise InvalidArgument(f"invalid byte range [{start}, {end}) for {key!r}", key=key)
