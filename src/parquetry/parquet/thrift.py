"""A small Thrift compact-protocol reader for Parquet footers.

pyarrow aborts the interpreter when it touches an encrypted column's metadata without
keys, and hides details (encryption, exact codec ids, page index offsets). Reading the raw
footer ourselves answers those questions before pyarrow is asked anything. Structs decode
to ``{field_id: value}``; binaries stay ``bytes``; lists become Python lists.
"""

from __future__ import annotations

import struct
from typing import Any

__all__ = ["ThriftError", "read_struct"]

_MAX_DEPTH = 64

# Compact-protocol type ids.
_BOOL_TRUE, _BOOL_FALSE, _BYTE, _I16, _I32, _I64 = 1, 2, 3, 4, 5, 6
_DOUBLE, _BINARY, _LIST, _SET, _MAP, _STRUCT = 7, 8, 9, 10, 11, 12


class ThriftError(ValueError):
    """The bytes are not a well-formed compact-protocol struct."""


class _Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes | memoryview, pos: int = 0):
        self.data = data
        self.pos = pos

    def byte(self) -> int:
        if self.pos >= len(self.data):
            raise ThriftError("unexpected end of thrift data")
        value = self.data[self.pos]
        self.pos += 1
        return value

    def varint(self) -> int:
        result = shift = 0
        while True:
            b = self.byte()
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
            if shift > 70:
                raise ThriftError("varint too long")

    def zigzag(self) -> int:
        n = self.varint()
        return (n >> 1) ^ -(n & 1)

    def take(self, size: int) -> bytes:
        if size < 0 or self.pos + size > len(self.data):
            raise ThriftError(f"length {size} runs past the end of the thrift data")
        chunk = bytes(self.data[self.pos : self.pos + size])
        self.pos += size
        return chunk

    def value(self, ttype: int, depth: int) -> Any:
        if depth > _MAX_DEPTH:
            raise ThriftError("thrift nesting too deep")
        if ttype in (_BOOL_TRUE, _BOOL_FALSE):
            return ttype == _BOOL_TRUE
        if ttype == _BYTE:
            raw = self.byte()
            return raw - 256 if raw > 127 else raw
        if ttype in (_I16, _I32, _I64):
            return self.zigzag()
        if ttype == _DOUBLE:
            return struct.unpack("<d", self.take(8))[0]
        if ttype == _BINARY:
            return self.take(self.varint())
        if ttype in (_LIST, _SET):
            return self.list(depth)
        if ttype == _MAP:
            return self.map(depth)
        if ttype == _STRUCT:
            return self.struct(depth + 1)
        raise ThriftError(f"unknown thrift type {ttype}")

    def list(self, depth: int) -> list[Any]:
        header = self.byte()
        size, etype = header >> 4, header & 0x0F
        if size == 15:
            size = self.varint()
        if size > len(self.data) - self.pos:
            raise ThriftError(f"list of {size} elements runs past the end")
        if etype in (_BOOL_TRUE, _BOOL_FALSE):
            return [self.byte() == 1 for _ in range(size)]
        return [self.value(etype, depth + 1) for _ in range(size)]

    def map(self, depth: int) -> dict[Any, Any]:
        size = self.varint()
        if size == 0:
            return {}
        types = self.byte()
        ktype, vtype = types >> 4, types & 0x0F
        return {self.value(ktype, depth + 1): self.value(vtype, depth + 1) for _ in range(size)}

    def struct(self, depth: int) -> dict[int, Any]:
        fields: dict[int, Any] = {}
        last_id = 0
        while True:
            header = self.byte()
            if header == 0:
                return fields
            delta, ftype = header >> 4, header & 0x0F
            field_id = last_id + delta if delta else self.zigzag()
            fields[field_id] = self.value(ftype, depth)
            last_id = field_id


def read_struct(data: bytes | memoryview, pos: int = 0) -> tuple[dict[int, Any], int]:
    """Decode one struct starting at ``pos``; return it and the position after it."""
    reader = _Reader(data, pos)
    try:
        result = reader.struct(0)
    except RecursionError:
        raise ThriftError("thrift nesting too deep") from None
    return result, reader.pos
