"""A small Thrift compact-protocol reader (and writer) for Parquet footers.

pyarrow aborts the interpreter when it touches an encrypted column's metadata without
keys, and hides details (encryption, exact codec ids, page index offsets). Reading the raw
footer ourselves answers those questions before pyarrow is asked anything. Structs decode
to ``{field_id: value}``; binaries stay ``bytes``; lists become Python lists.

Given a spec from :mod:`parquetry.parquet.thrift_schema`, the reader checks each field's
wire type (and integer range) against the spec and drops fields that do not match, as
Thrift-generated readers skip them: hostile footers cannot smuggle an integer where a list
is expected. Nesting depth and every length are bounded by the bytes that remain.
"""

from __future__ import annotations

import struct
from typing import Any

from parquetry.parquet.thrift_fast import fast_decode
from parquetry.parquet.thrift_schema import Spec

__all__ = ["ThriftError", "decode_struct", "read_struct", "write_struct"]

_MAX_DEPTH = 64

# Compact-protocol type ids.
_BOOL_TRUE, _BOOL_FALSE, _BYTE, _I16, _I32, _I64 = 1, 2, 3, 4, 5, 6
_DOUBLE, _BINARY, _LIST, _SET, _MAP, _STRUCT = 7, 8, 9, 10, 11, 12

_INT_BITS = {"i8": 8, "i16": 16, "i32": 32, "i64": 64}
_INT_WIRE = {"i8": _BYTE, "i16": _I16, "i32": _I32, "i64": _I64}
_SCALAR_WIRE = {
    "bool": (_BOOL_TRUE, _BOOL_FALSE),
    "binary": (_BINARY,),
    "double": (_DOUBLE,),
    # Exact widths, as Thrift-generated readers (pyarrow's among them) skip any other.
    **{name: (wire,) for name, wire in _INT_WIRE.items()},
}


class ThriftError(ValueError):
    """The bytes are not a well-formed compact-protocol struct."""


class _Skip:
    """Marks a value whose wire type or range does not match its spec."""


_SKIP = _Skip()


def _matches(ttype: int, spec: Spec) -> bool:
    if spec is None:
        return True
    if isinstance(spec, dict):
        return ttype == _STRUCT
    if isinstance(spec, tuple):
        return ttype in (_LIST, _SET)
    return ttype in _SCALAR_WIRE[spec]


class _Reader:
    __slots__ = ("data", "dropped", "pos")

    def __init__(self, data: bytes | memoryview, pos: int = 0):
        self.data = data
        self.pos = pos
        # Values left out where other readers would see something else: list elements of
        # another type, integers out of their declared range.
        self.dropped = 0

    def remaining(self) -> int:
        return len(self.data) - self.pos

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
        if size < 0 or size > self.remaining():
            raise ThriftError(f"length {size} runs past the end of the thrift data")
        chunk = bytes(self.data[self.pos : self.pos + size])
        self.pos += size
        return chunk

    def value(self, ttype: int, depth: int, spec: Spec = None) -> Any:
        """One value; ``_SKIP`` when it is well-formed but does not fit ``spec``."""
        if depth > _MAX_DEPTH:
            raise ThriftError("thrift nesting too deep")
        matches = _matches(ttype, spec)
        nested = spec if matches else None
        if ttype in (_BOOL_TRUE, _BOOL_FALSE):
            result: Any = ttype == _BOOL_TRUE
        elif ttype == _BYTE:
            raw = self.byte()
            result = raw - 256 if raw > 127 else raw
        elif ttype in (_I16, _I32, _I64):
            result = self.zigzag()
        elif ttype == _DOUBLE:
            result = struct.unpack("<d", self.take(8))[0]
        elif ttype == _BINARY:
            result = self.take(self.varint())
        elif ttype in (_LIST, _SET):
            result = self.list(depth, nested[1] if nested else None)
        elif ttype == _MAP:
            result = self.map(depth)
        elif ttype == _STRUCT:
            result = self.struct(depth + 1, nested)
        else:
            raise ThriftError(f"unknown thrift type {ttype}")
        if not matches or result is _SKIP:
            # A struct field of another wire type is skipped by every Thrift reader alike:
            # not counted. Lists whose elements do not match were counted in list().
            return _SKIP
        if isinstance(spec, str) and spec in _INT_BITS:
            limit = 1 << (_INT_BITS[spec] - 1)
            if not -limit <= result < limit:
                self.dropped += 1
                return _SKIP
        return result

    def list(self, depth: int, element: Spec = None) -> Any:
        header = self.byte()
        size, etype = header >> 4, header & 0x0F
        if size == 15:
            size = self.varint()
        # Every element takes at least one byte: a bound that stops huge allocations.
        if size > self.remaining():
            raise ThriftError(f"list of {size} elements runs past the end")
        if etype in (_BOOL_TRUE, _BOOL_FALSE):
            bools = [self.byte() == 1 for _ in range(size)]
            if _matches(_BOOL_TRUE, element):
                return bools
            self.dropped += 1
            return _SKIP
        if not _matches(etype, element):
            # Thrift-generated readers ignore the element type and read each element as
            # declared: they see other values than we would. Counted: the footer is unsafe.
            for _ in range(size):
                self.value(etype, depth + 1)
            self.dropped += 1
            return _SKIP
        items = [self.value(etype, depth + 1, element) for _ in range(size)]
        return _SKIP if any(item is _SKIP for item in items) else items

    def map(self, depth: int) -> dict[Any, Any]:
        size = self.varint()
        if size == 0:
            return {}
        if size > self.remaining():
            raise ThriftError(f"map of {size} entries runs past the end")
        types = self.byte()
        ktype, vtype = types >> 4, types & 0x0F
        out: dict[Any, Any] = {}
        for _ in range(size):
            k = self.value(ktype, depth + 1)
            v = self.value(vtype, depth + 1)
            try:
                out[k] = v
            except TypeError:  # unhashable key (a list or struct): not Parquet's business
                raise ThriftError("unhashable thrift map key") from None
        return out

    def struct(self, depth: int, spec: dict[int, Spec] | None = None) -> dict[int, Any]:
        fields: dict[int, Any] = {}
        last_id = 0
        while True:
            header = self.byte()
            if header == 0:
                return fields
            delta, ftype = header >> 4, header & 0x0F
            field_id = last_id + delta if delta else self.zigzag()
            value = self.value(ftype, depth, spec.get(field_id) if spec else None)
            if value is not _SKIP:
                fields[field_id] = value
            last_id = field_id


def read_struct(
    data: bytes | memoryview, pos: int = 0, spec: dict[int, Spec] | None = None
) -> tuple[dict[int, Any], int]:
    """Decode one struct starting at ``pos``; return it and the position after it.

    With ``spec``, fields whose wire type or range does not match are dropped.
    """
    result, end, _dropped = decode_struct(data, pos, spec)
    return result, end


def decode_struct(
    data: bytes | memoryview, pos: int = 0, spec: dict[int, Spec] | None = None
) -> tuple[dict[int, Any], int, int]:
    """:func:`read_struct`, plus how many values were dropped for not matching ``spec``.

    Other readers (pyarrow's) may decode a dropped value differently: a footer with drops
    is malformed and must not be handed to them.
    """
    if spec:
        fast = fast_decode(data, pos, spec)
        if fast is not None:  # well formed: nothing dropped (see thrift_fast)
            return fast[0], fast[1], 0
    reader = _Reader(data, pos)
    try:
        result = reader.struct(0, spec)
    except RecursionError:
        raise ThriftError("thrift nesting too deep") from None
    return result, reader.pos, reader.dropped


# --- writer ------------------------------------------------------------------------------


def _varint(out: bytearray, n: int) -> None:
    while True:
        if n < 0x80:
            out.append(n)
            return
        out.append((n & 0x7F) | 0x80)
        n >>= 7


def _zigzag(out: bytearray, n: int) -> None:
    _varint(out, (n << 1) ^ (n >> 63) if n < 0 else n << 1)


def _wire(spec: Spec, value: Any) -> int:
    if isinstance(spec, dict):
        return _STRUCT
    if isinstance(spec, tuple):
        return _LIST
    if spec == "bool":
        return _BOOL_TRUE if value else _BOOL_FALSE
    return {"binary": _BINARY, "double": _DOUBLE, **_INT_WIRE}[spec]


def _write_value(out: bytearray, spec: Spec, value: Any) -> None:
    kind = spec.__class__
    if kind is dict:
        _write_fields(out, spec, value)
    elif kind is tuple:
        element = spec[1]
        etype = _BOOL_TRUE if element == "bool" else _wire(element, None)
        if len(value) < 15:
            out.append(len(value) << 4 | etype)
        else:
            out.append(0xF0 | etype)
            _varint(out, len(value))
        for item in value:
            if element == "bool":
                out.append(1 if item else 2)
            else:
                _write_value(out, element, item)
    elif spec == "binary":
        _varint(out, len(value))
        out += value
    elif spec == "double":
        out += struct.pack("<d", value)
    elif spec == "i8":
        out.append(value & 0xFF)
    elif spec != "bool":  # bools live in the field header
        _varint(out, (value << 1) ^ (value >> 63) if value < 0 else value << 1)


# Wire type of each spec kind (bool fields carry their value in the header: see below).
_FIELD_WIRE = {"binary": _BINARY, "double": _DOUBLE, **_INT_WIRE}


def _write_fields(out: bytearray, spec: dict[int, Spec], fields: dict[int, Any]) -> None:
    # The hot loop of the footer writer (binary copy writes one footer entry per copied
    # column chunk): kept free of per-field helper calls.
    last_id = 0
    for field_id in sorted(fields):
        field_spec = spec.get(field_id)
        if field_spec is None:
            continue  # unknown to this writer: dropped (its wire type is not known)
        value = fields[field_id]
        kind = field_spec.__class__
        if kind is dict:
            wire = _STRUCT
        elif kind is tuple:
            wire = _LIST
        elif field_spec == "bool":
            wire = _BOOL_TRUE if value else _BOOL_FALSE
        else:
            wire = _FIELD_WIRE[field_spec]
        delta = field_id - last_id
        if 0 < delta <= 15:
            out.append(delta << 4 | wire)
        else:
            out.append(wire)
            _zigzag(out, field_id)
        if wire in (_I32, _I64, _I16):
            n = (value << 1) ^ (value >> 63) if value < 0 else value << 1
            while n >= 0x80:
                out.append((n & 0x7F) | 0x80)
                n >>= 7
            out.append(n)
        elif wire == _BINARY:
            _varint(out, len(value))
            out += value
        elif wire not in (_BOOL_TRUE, _BOOL_FALSE):
            _write_value(out, field_spec, value)
        last_id = field_id
    out.append(0)


def write_struct(fields: dict[int, Any], spec: dict[int, Spec]) -> bytes:
    """Encode ``fields`` (as :func:`read_struct` returns them) with ``spec``'s types.

    Fields the spec does not name are left out.
    """
    out = bytearray()
    _write_fields(out, spec, fields)
    return bytes(out)
