"""Stores that wrap another store: read-only views and the test helpers built on them."""

from __future__ import annotations

import mmap
from collections.abc import Iterator, Sequence
from typing import Any

from parquetry.store.base import (
    WRITE_CAPABILITIES,
    ListResult,
    ObjectMeta,
    PutMode,
    Store,
)
from parquetry.store.writer import BufferedUpload, Upload

__all__ = ["ReadOnlyStore", "WrapperStore"]


class WrapperStore(Store):
    """Delegates every primitive to ``inner``; subclasses override what they change."""

    def __init__(self, inner: Store):
        self.inner = inner
        self.capabilities = inner.capabilities

    @property
    def url(self) -> str:
        return self.inner.url

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.inner == self.inner

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.inner))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.inner!r})"

    def _get(self, key: str) -> bytes:
        return self.inner._get(key)

    def _read_buffer(self, key: str) -> bytes | mmap.mmap:
        return self.inner._read_buffer(key)

    def _get_range(self, key: str, start: int, end: int) -> bytes:
        return self.inner._get_range(key, start, end)

    def _get_ranges(self, key: str, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        return self.inner._get_ranges(key, ranges)

    def _head(self, key: str) -> ObjectMeta:
        return self.inner._head(key)

    def _exists(self, key: str) -> bool:
        return self.inner._exists(key)

    def _put(
        self, key: str, data: bytes | memoryview, mode: PutMode, expected_version: str | None
    ) -> ObjectMeta:
        return self.inner._put(key, data, mode, expected_version)

    def _open_upload(self, key: str, mode: PutMode, expected_version: str | None) -> Upload:
        if type(self)._put is not WrapperStore._put:
            # A wrapper that changes puts (records, fails, pretends them) must see streamed
            # objects too: they are gathered and published through its own _put, which costs
            # the object's size in memory. Wrappers that can stream override this method.
            return BufferedUpload(self, key, mode, expected_version)
        return self.inner._open_upload(key, mode, expected_version)

    def _delete(self, key: str, missing_ok: bool) -> None:
        self.inner._delete(key, missing_ok)

    def _list(self, prefix: str) -> Iterator[ObjectMeta]:
        return self.inner._list(prefix)

    def _copy(self, src: str, dst: str) -> None:
        self.inner._copy(src, dst)

    def _move(self, src: str, dst: str) -> None:
        self.inner._move(src, dst)

    def _list_dir(self, prefix: str) -> ListResult:
        return self.inner._list_dir(prefix)

    def _remove_stale_temporaries(
        self, prefix: str, older_than: float | None, recursive: bool, remove: bool
    ) -> list[str]:
        # Not a primitive of every store (parquetry.store.temporaries): delegated if the
        # wrapped store has it.
        inner = getattr(self.inner, "_remove_stale_temporaries", None)
        if inner is None:
            return []
        found: list[str] = inner(prefix, older_than, recursive, remove)
        return found

    def __getstate__(self) -> dict[str, Any]:
        # Locks cannot be pickled; subclasses recreate theirs in __setstate__.
        return {k: v for k, v in self.__dict__.items() if k != "_lock"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)


class ReadOnlyStore(WrapperStore):
    """A view of a store without write capabilities: writes fail before any I/O."""

    def __init__(self, inner: Store):
        super().__init__(inner)
        self.capabilities = inner.capabilities - WRITE_CAPABILITIES

    def read_only(self) -> Store:
        return self
