"""The raw Parquet footer: fetched from the tail only, decoded without pyarrow.

A Parquet file ends with ``FileMetaData`` (Thrift compact), its 4-byte little-endian length
and the magic ``PAR1`` (``PARE`` when the footer itself is encrypted). Reading this first
lets callers check format and encryption safely: pyarrow aborts the process when it touches
an encrypted column's metadata without keys.
"""

from __future__ import annotations

import io
import json
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any

from parquetry.errors import InvalidFormat
from parquetry.parquet.thrift import ThriftError, decode_struct
from parquetry.parquet.thrift_schema import FILE_CRYPTO_META_DATA, FILE_META_DATA

if TYPE_CHECKING:
    from parquetry.store.base import Store

__all__ = [
    "MAGIC",
    "MAGIC_ENCRYPTED",
    "TAIL_BYTES",
    "EncryptedColumn",
    "RawFooter",
    "footer_from_bytes",
    "footer_from_tail",
    "footer_from_file",
    "footer_from_store",
]

MAGIC = b"PAR1"
MAGIC_ENCRYPTED = b"PARE"
#: First tail read; most footers fit, a larger one costs exactly one more read.
TAIL_BYTES = 64 * 1024
_TRAILER = 8


@dataclass(frozen=True, slots=True, kw_only=True)
class EncryptedColumn:
    """One encrypted column chunk's column (path), and the master key id when known."""

    path: str
    key_id: str | None  # master key id parsed from key material; never the key itself
    footer_key: bool  # encrypted with the footer key rather than a column key


@dataclass(frozen=True, slots=True, kw_only=True)
class RawFooter:
    """What the tail of a Parquet file says, decoded without pyarrow."""

    file_size: int
    footer_length: int
    encrypted_footer: bool
    metadata: dict[int, Any] | None  # FileMetaData fields by id; None if the footer is encrypted
    crypto: dict[int, Any] | None  # FileCryptoMetaData, for encrypted footers
    tail: bytes  # footer + length + magic: what ``pq.read_metadata`` needs
    #: Values other Thrift readers would decode differently (see ``decode_struct``).
    dropped_fields: int = 0

    @property
    def encrypted(self) -> bool:
        return self.encrypted_footer or (self.metadata is not None and 8 in self.metadata)

    def leaf_paths(self) -> list[str]:
        """Dotted paths of the leaf columns, in schema order."""
        return leaf_paths(self.metadata.get(2, []) if self.metadata else [])

    def encrypted_columns(self) -> tuple[EncryptedColumn, ...]:
        """Encrypted columns seen in any row group (empty for an encrypted footer)."""
        if self.metadata is None:
            return ()
        paths = self.leaf_paths()
        found: dict[str, EncryptedColumn] = {}
        for row_group in self.metadata.get(4, []):
            for position, chunk in enumerate(row_group.get(1, [])):
                column = _encrypted_column(chunk, paths, position)
                if column is not None:
                    found.setdefault(column.path, column)
        return tuple(found.values())


def _encrypted_column(
    chunk: dict[int, Any], paths: list[str], position: int
) -> EncryptedColumn | None:
    crypto = chunk.get(8)
    if crypto is None and 9 not in chunk:
        return None
    path = paths[position] if position < len(paths) else f"#{position}"
    if crypto is not None and 2 in crypto:
        with_key = crypto[2]
        if with_key.get(1):
            path = ".".join(p.decode("utf-8", "replace") for p in with_key[1])
        return EncryptedColumn(path=path, key_id=_key_id(with_key.get(2)), footer_key=False)
    return EncryptedColumn(path=path, key_id=None, footer_key=True)


def _key_id(key_metadata: bytes | None) -> str | None:
    """The master key id from pyarrow/parquet-java key material (JSON); nothing secret."""
    if not key_metadata:
        return None
    try:
        doc = json.loads(key_metadata)
    except (ValueError, UnicodeDecodeError):
        return None
    key_id = doc.get("masterKeyID") if isinstance(doc, dict) else None
    return str(key_id) if key_id is not None else None


def leaf_paths(elements: list[dict[int, Any]]) -> list[str]:
    """Leaf paths from a flattened SchemaElement list (root first, depth-first)."""
    paths: list[str] = []

    def walk(index: int, prefix: tuple[str, ...]) -> int:
        element = elements[index]
        children = element.get(5, 0)
        name = element.get(4, b"").decode("utf-8", "replace")
        here = (*prefix, name) if index else prefix
        index += 1
        if not children:
            paths.append(".".join(here))
            return index
        for _ in range(children):
            if index >= len(elements):
                raise InvalidFormat("schema in the footer is truncated")
            index = walk(index, here)
        return index

    if elements:
        walk(0, ())
    return paths


def _parse(tail: bytes, file_size: int, name: str) -> RawFooter:
    magic = tail[-4:]
    if magic not in (MAGIC, MAGIC_ENCRYPTED):
        raise InvalidFormat(f"{name} is not a Parquet file (no PAR1 magic at the end)", key=name)
    (length,) = struct.unpack("<i", tail[-8:-4])
    if length <= 0 or length + _TRAILER + 4 > file_size:
        raise InvalidFormat(
            f"{name}: footer length {length} does not fit a {file_size}-byte file "
            "(truncated or corrupted)",
            key=name,
        )
    footer = tail[-(length + _TRAILER) : -_TRAILER]
    encrypted_footer = magic == MAGIC_ENCRYPTED
    try:
        spec = FILE_CRYPTO_META_DATA if encrypted_footer else FILE_META_DATA
        decoded, _, dropped = decode_struct(footer, 0, spec)
    except ThriftError as exc:
        raise InvalidFormat(f"{name}: corrupted Parquet footer ({exc})", key=name) from None
    if not encrypted_footer and not {1, 2, 3, 4} <= decoded.keys():
        raise InvalidFormat(f"{name}: corrupted Parquet footer (fields missing)", key=name)
    return RawFooter(
        file_size=file_size,
        footer_length=length,
        encrypted_footer=encrypted_footer,
        metadata=None if encrypted_footer else decoded,
        crypto=decoded if encrypted_footer else None,
        tail=tail[-(length + _TRAILER) :],
        dropped_fields=dropped,
    )


def _read_tail(fetch: Callable[[int, int], bytes], size: int, name: str) -> RawFooter:
    if size < 12:
        raise InvalidFormat(f"{name} is not a Parquet file ({size} bytes)", key=name)
    start = max(0, size - TAIL_BYTES)
    tail = fetch(start, size)
    if tail[-4:] in (MAGIC, MAGIC_ENCRYPTED):
        (length,) = struct.unpack("<i", tail[-8:-4])
        needed = length + _TRAILER
        if len(tail) < needed <= size - 4:
            tail = fetch(size - needed, start) + tail
    return _parse(tail, size, name)


def footer_from_tail(tail: bytes, file_size: int, name: str = "<tail>") -> RawFooter:
    """Parse a footer from the end of a ``file_size``-byte file: ``tail`` holds at least
    the footer, its length and the magic (an index file's cached tail)."""
    return _parse(tail, file_size, name)


def footer_from_bytes(data: bytes | bytearray | memoryview, name: str = "<bytes>") -> RawFooter:
    """Parse the footer of a whole file held in memory (also checks the leading magic)."""
    view = memoryview(data)
    if len(view) < 12 or bytes(view[:4]) not in (MAGIC, MAGIC_ENCRYPTED):
        raise InvalidFormat(f"{name} is not a Parquet file (no PAR1 magic at the start)", key=name)
    return _read_tail(lambda s, e: bytes(view[s:e]), len(view), name)


def footer_from_file(file: IO[bytes] | io.RawIOBase, name: str = "<file>") -> RawFooter:
    """Parse the footer of a seekable binary file; the position is restored."""
    position = file.tell()
    try:
        size = file.seek(0, io.SEEK_END)

        def fetch(start: int, end: int) -> bytes:
            file.seek(start)
            return file.read(end - start) or b""

        return _read_tail(fetch, size, name)
    finally:
        file.seek(position)


def footer_from_store(store: Store, key: str, size: int | None = None) -> RawFooter:
    """Parse the footer of ``key`` with one ranged read (two for a footer over 64 KiB)."""
    if size is None:
        size = store.head(key).size
    return _read_tail(lambda s, e: store.get_range(key, s, e), size, key)
