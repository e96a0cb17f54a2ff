"""Decoding many footers that differ from one already decoded only in some values.

The files a compaction reads were usually written by one writer with one schema: their
footers have the same length and the same bytes except a few values (offsets, sizes,
statistics). Decoding each from scratch costs about 0.3 ms in pure Python for a 1 KB
footer (:mod:`parquetry.parquet.thrift_fast`), as much as the rest of a small file's
work. :class:`FooterMemo` keeps a few decoded footers as *templates*, each with the byte
span, kind and place in the decoded tree of every value (integer, binary, double, byte).
A new footer of a template's length is compared with it byte by byte (numpy); when every
differing byte lies inside a value's span and that value decodes again to exactly the
same span, every structural byte (field and list headers, booleans) is identical at the
same position, so the Thrift decoder would walk the same tree: only the changed values
are decoded again, and the tree is rebuilt around them. Anything else (another length, a
difference in a header, a value changing its length or leaving its type's range) is
``None``: the caller decodes the footer the usual way. The result is then exactly what
:func:`~parquetry.parquet.thrift_fast.fast_decode` returns for those bytes
(``tests/parquet/test_footer_memo.py`` checks it on real and mutated footers).

Each decoded tree is built fresh (by a function generated from the template's shape), so
callers may modify it as they may a tree the Thrift reader returned.

:meth:`FooterMemo.checked_footer` adds :func:`~parquetry.parquet.footer_check.pyarrow_hazard`'s
verdict: a footer matching a template shares its structure, so the verdict is the
template's (computed once) unless one of the few values the check reads differs (schema
elements, each chunk's type and path); then the footer is checked in full.
"""

from __future__ import annotations

import struct
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from parquetry.parquet.footer import MAGIC, RawFooter, footer_from_bytes
from parquetry.parquet.footer_check import pyarrow_hazard
from parquetry.parquet.thrift_fast import fast_decode
from parquetry.parquet.thrift_schema import FILE_META_DATA, Spec

__all__ = ["FooterMemo"]

# Compact-protocol wire types.
_TRUE, _FALSE, _BYTE, _I16, _I32, _I64, _DOUBLE, _BINARY, _LIST, _SET, _STRUCT = (
    1,
    2,
    3,
    4,
    5,
    6,
    7,
    8,
    9,
    10,
    12,
)
_LIMITS = {"i16": (_I16, 1 << 15), "i32": (_I32, 1 << 31), "i64": (_I64, 1 << 63)}
# Kinds of values: zigzag varint (with its type's bound), binary, double, byte.
_INT, _BIN, _DBL, _I8 = range(4)

Path = tuple[Any, ...]
#: Footers with more values than this are not kept as templates (their generated builder
#: would be large; such footers, of many row groups, are rare among small files).
MAX_SLOTS = 4096


class _NoTemplate(Exception):
    """The footer is not one the tracer handles (the memo then keeps no template)."""


@dataclass(frozen=True, slots=True)
class _Slot:
    start: int
    end: int
    kind: int
    limit: int
    path: Path  # keys (field ids, list indices) from the root to the value


class _Tracer:
    """Decodes a well-formed struct like ``fast_decode`` and records every value's slot."""

    def __init__(self, data: bytes):
        self.data = data
        self.slots: list[_Slot] = []

    def varint(self, pos: int) -> tuple[int, int]:
        n = shift = 0
        while True:
            b = self.data[pos]
            pos += 1
            n |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return n, pos
            if shift > 70:
                raise _NoTemplate

    def value(self, pos: int, spec: Spec, wire: int, path: Path) -> tuple[Any, int]:
        if isinstance(spec, dict):
            if wire != _STRUCT:
                raise _NoTemplate
            return self.struct(pos, spec, path)
        if isinstance(spec, tuple):
            if wire not in (_LIST, _SET) or spec[1] == "bool":
                raise _NoTemplate
            return self.list(pos, spec[1], path)
        start = pos
        if spec in _LIMITS:
            expected, limit = _LIMITS[spec]
            if wire != expected:
                raise _NoTemplate
            n, pos = self.varint(pos)
            v = (n >> 1) ^ -(n & 1)
            if not -limit <= v < limit:
                raise _NoTemplate
            self.slots.append(_Slot(start, pos, _INT, limit, path))
            return v, pos
        if spec == "binary":
            if wire != _BINARY:
                raise _NoTemplate
            n, pos = self.varint(pos)
            if pos + n > len(self.data):
                raise _NoTemplate
            self.slots.append(_Slot(start, pos + n, _BIN, 0, path))
            return self.data[pos : pos + n], pos + n
        if spec == "double" and wire == _DOUBLE:
            self.slots.append(_Slot(start, pos + 8, _DBL, 0, path))
            return struct.unpack_from("<d", self.data, pos)[0], pos + 8
        if spec == "i8" and wire == _BYTE:
            raw = self.data[pos]
            self.slots.append(_Slot(start, pos + 1, _I8, 0, path))
            return (raw - 256 if raw > 127 else raw), pos + 1
        raise _NoTemplate

    def list(self, pos: int, element: Spec, path: Path) -> tuple[list[Any], int]:
        head = self.data[pos]
        pos += 1
        size, wire = head >> 4, head & 0x0F
        if size == 15:
            size, pos = self.varint(pos)
        items = []
        for i in range(size):
            item, pos = self.value(pos, element, wire, (*path, i))
            items.append(item)
        return items, pos

    def struct(self, pos: int, spec: dict[int, Spec], path: Path) -> tuple[dict[int, Any], int]:
        out: dict[int, Any] = {}
        last = 0
        while True:
            header = self.data[pos]
            pos += 1
            if header == 0:
                return out, pos
            delta, wire = header >> 4, header & 0x0F
            if not delta or last + delta not in spec:
                raise _NoTemplate
            fid = last + delta
            if spec[fid] == "bool":
                if wire not in (_TRUE, _FALSE):
                    raise _NoTemplate
                out[fid] = wire == _TRUE  # in the header: structural, never a slot
            else:
                out[fid], pos = self.value(pos, spec[fid], wire, (*path, fid))
            last = fid


class _Template:
    def __init__(self, data: bytes, tree: dict[int, Any], slots: list[_Slot]):
        self.data = data
        self.bytes = np.frombuffer(data, np.uint8)
        self.spans = [(s.start, s.end, s.kind, s.limit) for s in slots]
        self.values = [_reread(data, span) for span in self.spans]
        self.build = _builder(tree, slots)
        self.starts = np.array([s.start for s in slots], np.intp)
        structural = np.ones(len(data), bool)
        for slot in slots:
            structural[slot.start : slot.end] = False
        self.structural = structural
        # The slots pyarrow_hazard reads a value of (footer_check.py): every other part of
        # its verdict depends on the structure (fields present, list lengths, binary
        # lengths), which a footer matching this template shares.
        self.hazard_slots = np.array([_hazard_value(s.path) for s in slots], bool)
        self.verdict: tuple[str | None] | None = None  # pyarrow_hazard of the template


def _hazard_value(path: Path) -> bool:
    """Whether pyarrow_hazard looks at the value at ``path``: the schema's elements (names,
    types, repetitions, children), the file's and each row group's row count, and each
    column chunk's type, path in the schema and value count."""
    if path[0] in (2, 3):
        return True
    if path[0] != 4:
        return False
    if len(path) == 3:
        return bool(path[2] == 3)  # a row group's num_rows
    return len(path) >= 6 and path[2] == 1 and path[4] == 3 and path[5] in (1, 3, 5)


def _reread(data: bytes, span: tuple[int, int, int, int]) -> Any:
    """The value in the slot ``(start, end, kind, limit)`` of ``data``, or raise ValueError
    if it does not end exactly where the template's did (or leaves its type's range)."""
    pos, end, kind, limit = span
    if kind == _DBL:
        return struct.unpack_from("<d", data, pos)[0]
    if kind == _I8:
        raw = data[pos]
        return raw - 256 if raw > 127 else raw
    n = shift = 0
    while True:
        b = data[pos]
        pos += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            break
        if pos >= end:
            raise ValueError("varint runs past its slot")
    if kind == _BIN:
        if pos + n != end:
            raise ValueError("binary of another length")
        return data[pos:end]
    if pos != end:
        raise ValueError("varint of another length")
    v = (n >> 1) ^ -(n & 1)
    if not -limit <= v < limit:
        raise ValueError("integer out of range")
    return v


def _builder(tree: dict[int, Any], slots: list[_Slot]) -> Any:
    """A function building a fresh copy of ``tree`` from the values of its slots (in slot
    order): generated once per template, so that a footer costs one call that allocates its
    containers, not a walk along every changed value's path."""
    index = {slot.path: i for i, slot in enumerate(slots)}

    def expr(node: Any, path: Path) -> str:
        at = index.get(path)
        if at is not None:
            return f"v[{at}]"
        if isinstance(node, bool):
            return repr(node)
        if isinstance(node, dict):
            items = ", ".join(f"{k}: {expr(x, (*path, k))}" for k, x in node.items())
            return "{" + items + "}"
        if isinstance(node, list):
            return "[" + ", ".join(expr(x, (*path, i)) for i, x in enumerate(node)) + "]"
        raise _NoTemplate  # a value that is not a slot: cannot happen for a traced tree

    code = compile(f"lambda v: {expr(tree, ())}", "<footer template>", "eval")
    return eval(code, {"__builtins__": {}})  # code built from field ids and indices only


class FooterMemo:
    """Templates of recently seen footers (see the module doc), at most ``size``."""

    def __init__(self, spec: dict[int, Spec] = FILE_META_DATA, size: int = 4):
        self.spec = spec
        self.size = size
        self.templates: dict[int, _Template] = {}  # by footer length
        self.hits = self.misses = 0
        self._lock = threading.Lock()  # learn() from several reading threads

    def decode(self, footer: bytes) -> dict[int, Any] | None:
        """The decoded struct, when ``footer`` differs from a template only in values."""
        match = self._match(footer)
        return None if match is None else match[0]

    def _match(self, footer: bytes) -> tuple[dict[int, Any], _Template, list[int]] | None:
        """The decoded struct, its template and the slots whose value differs from it."""
        template = self.templates.get(len(footer))
        if template is None:
            self.misses += 1
            return None
        differs = np.frombuffer(footer, np.uint8) != template.bytes
        if differs[template.structural].any():
            self.misses += 1
            return None  # a structural byte differs
        # Bytes between slots are structural (equal, checked above): each segment from one
        # slot's start to the next one's differs only if that slot's value does.
        changed = np.flatnonzero(np.logical_or.reduceat(differs, template.starts)).tolist()
        values = template.values.copy()
        spans = template.spans
        try:
            for i in changed:
                values[i] = _reread(footer, spans[i])
        except (ValueError, IndexError):
            self.misses += 1
            return None
        self.hits += 1
        tree: dict[int, Any] = template.build(values)
        return tree, template, changed

    def learn(self, footer: bytes) -> None:
        """Keep ``footer`` (well formed, decoded by the fast path) as a template."""
        if type(footer) is not bytes or len(footer) in self.templates:
            return
        fast = fast_decode(footer, 0, self.spec)
        if fast is None or fast[1] != len(footer):
            return
        tracer = _Tracer(footer)
        try:
            tree, end = tracer.struct(0, self.spec, ())
        except (_NoTemplate, IndexError, RecursionError):
            return
        if end != len(footer) or tree != fast[0] or not 0 < len(tracer.slots) <= MAX_SLOTS:
            return
        template = _Template(footer, tree, tracer.slots)
        with self._lock:
            if len(self.templates) >= self.size:
                self.templates.pop(next(iter(self.templates)))
            self.templates[len(footer)] = template

    def footer(self, data: bytes, name: str) -> RawFooter:
        """:func:`~parquetry.parquet.footer.footer_from_bytes` of a whole file, through the
        memo when its (plaintext) footer matches a template; else decoded as usual (and
        kept as a template when it is well formed)."""
        return self._footer(data, name)[0]

    def checked_footer(self, data: bytes, name: str) -> tuple[RawFooter, str | None]:
        """:meth:`footer`, and :func:`~parquetry.parquet.footer_check.pyarrow_hazard` of it
        (for an unencrypted footer; None otherwise). For a footer matching a template, the
        verdict is the template's when no value the check reads differs (it is computed
        once per template: ~30 us a footer saved, 10,000 footers a compaction)."""
        raw, match = self._footer(data, name)
        if match is None or raw.encrypted:
            return raw, None if raw.encrypted else pyarrow_hazard(raw)
        template, changed = match
        if changed and template.hazard_slots[changed].any():
            return raw, pyarrow_hazard(raw)
        if template.verdict is None:
            verdict = pyarrow_hazard(_raw_of(template))
            if verdict is not None and "too deep" in verdict:
                return raw, pyarrow_hazard(raw)  # a RecursionError depends on the stack
            template.verdict = (verdict,)
        return raw, template.verdict[0]

    def _footer(
        self, data: bytes, name: str
    ) -> tuple[RawFooter, tuple[_Template, list[int]] | None]:
        size = len(data)
        if size >= 12 and type(data) is bytes and data[:4] == MAGIC and data[-4:] == MAGIC:
            length = int.from_bytes(data[-8:-4], "little", signed=True)
            if length > 0 and length + 12 <= size:
                footer = data[size - 8 - length : size - 8]
                match = self._match(footer)
                if match is not None and {1, 2, 3, 4} <= match[0].keys():
                    raw = RawFooter(
                        file_size=size,
                        footer_length=length,
                        encrypted_footer=False,
                        metadata=match[0],
                        crypto=None,
                        tail=data[size - 8 - length :],
                    )
                    return raw, match[1:]
                raw = footer_from_bytes(data, name)
                if raw.metadata is not None and not raw.dropped_fields:
                    self.learn(footer)
                return raw, None
        return footer_from_bytes(data, name), None


def _raw_of(template: _Template) -> RawFooter:
    """The template's own footer, as the check sees it (metadata, nothing dropped)."""
    size = len(template.data) + 12
    return RawFooter(
        file_size=size,
        footer_length=len(template.data),
        encrypted_footer=False,
        metadata=template.build(template.values),
        crypto=None,
        tail=template.data,  # not read by the check
    )
