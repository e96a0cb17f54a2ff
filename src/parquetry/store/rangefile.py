"""A read-only random-access file over ranged gets, which pyarrow can read Parquet from.

pyarrow reads a Parquet footer by seeking to the end and reading the last bytes, then the
column chunks it needs. Each ``read`` here is one ranged get, except that the first read
near the end pre-fetches a tail block so the footer length and the footer itself usually
cost one request together.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

from parquetry.errors import InvalidArgument

if TYPE_CHECKING:
    from parquetry.store.base import Store

__all__ = ["StoreFile", "TAIL_PREFETCH"]

#: Bytes fetched with the first read at the end of a file: most Parquet footers fit.
TAIL_PREFETCH = 64 * 1024


class StoreFile(io.RawIOBase):
    """Random-access, read-only view of one object. Pass to ``pq.ParquetFile``."""

    def __init__(self, store: Store, key: str, *, size: int | None = None):
        super().__init__()
        self._store = store
        self.key = key
        self._size = store.head(key).size if size is None else size
        self._pos = 0
        self._tail_start = self._size
        self._tail = b""

    @property
    def size(self) -> int:
        return self._size

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence == io.SEEK_SET:
            pos = offset
        elif whence == io.SEEK_CUR:
            pos = self._pos + offset
        elif whence == io.SEEK_END:
            pos = self._size + offset
        else:
            raise InvalidArgument(f"invalid whence {whence}")
        if pos < 0:
            raise InvalidArgument(f"negative seek position {pos} in {self.key!r}", key=self.key)
        self._pos = pos
        return pos

    def read(self, size: int = -1) -> bytes:
        start = self._pos
        end = self._size if size is None or size < 0 else min(self._size, start + size)
        if end <= start:
            return b""
        data = self._read_range(start, end)
        self._pos = end
        return data

    def readall(self) -> bytes:
        return self.read(-1)

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        data = self.read(len(buffer))
        n = len(data)
        memoryview(buffer)[:n] = data
        return n

    def _read_range(self, start: int, end: int) -> bytes:
        if start >= self._tail_start:
            off = start - self._tail_start
            return self._tail[off : off + (end - start)]
        if end == self._size and self._size - start <= TAIL_PREFETCH:
            # A read that reaches the end is the footer probe: fetch a whole tail block.
            tail_start = max(0, self._size - TAIL_PREFETCH)
            self._tail = self._store.get_range(self.key, tail_start, self._size)
            self._tail_start = tail_start
            return self._tail[start - tail_start :]
        return self._store.get_range(self.key, start, end)
