"""Codecs of index deltas and states: the JSON an entry or a checkpoint root holds.

Inline pairs are an Arrow IPC stream (zstd beyond a few hundred pairs) in base64; a piece
is named by its cached footer. Every defect raises MetadataCorrupted naming the object
(``key``) and the field at fault.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from parquetry.dataset.indexfile import IndexFooter
from parquetry.dataset.indexpieces import normalise_pairs, piece_metadata
from parquetry.dataset.schema import normalise_type
from parquetry.errors import MetadataCorrupted

__all__ = [
    "corrupt",
    "decode_delta",
    "decode_pairs",
    "encode_pairs",
    "parse_count",
    "parse_footer",
    "parse_labels",
    "parse_list",
]


def decode_delta(
    doc: Any, t: pa.DataType, *, key: str, column: str = ""
) -> pa.Table | list[tuple[IndexFooter, int]]:
    """An entry's index delta: the pairs, or (footer, pair count) of each of its pieces
    (``{"piece": .., "pairs": n}``, or ``{"pieces": [{"piece": .., "pairs": n}, ...]}``
    for a delta written as several pieces with disjoint value ranges)."""
    t = normalise_type(t)
    where = f"index {column!r}" if column else "index delta"
    if not isinstance(doc, Mapping):
        raise corrupt(key, where, "an object", doc)
    if "piece" in doc:
        return [
            (
                parse_footer(doc["piece"], key, f"{where}.piece"),
                parse_count(doc.get("pairs"), key, f"{where}.pairs"),
            )
        ]
    if "pieces" in doc:
        out = []
        for i, p in enumerate(parse_list(doc["pieces"], key, f"{where}.pieces")):
            at = f"{where}.pieces[{i}]"
            if not isinstance(p, Mapping):
                raise corrupt(key, at, "an object", p)
            out.append(
                (
                    parse_footer(p.get("piece"), key, f"{at}.piece"),
                    parse_count(p.get("pairs"), key, f"{at}.pairs"),
                )
            )
        return out
    if "pairs" not in doc:
        raise MetadataCorrupted(f"{key}: {where} has neither 'pairs' nor 'piece'", key=key)
    return decode_pairs(doc["pairs"], t, key, f"{where}.pairs")


def encode_pairs(pairs: pa.Table) -> str:
    sink = pa.BufferOutputStream()
    # Compression only pays off beyond a few hundred pairs; a 1-row delta stays ~0.5 KB.
    options = pa.ipc.IpcWriteOptions(compression="zstd" if pairs.num_rows > 256 else None)
    with pa.ipc.new_stream(sink, pairs.schema, options=options) as writer:
        writer.write_table(pairs.combine_chunks())  # one batch: a batch costs ~300 bytes
    return base64.b64encode(sink.getvalue().to_pybytes()).decode()


def decode_pairs(text: Any, t: pa.DataType, key: str, where: str) -> pa.Table:
    if not isinstance(text, str):
        raise corrupt(key, where, "a base64 string", text)
    try:
        data = base64.b64decode(text, validate=True)
        with pa.ipc.open_stream(data) as reader:
            table = reader.read_all()
        table.validate(full=True)
    except (binascii.Error, ValueError, pa.ArrowException, OSError) as exc:
        raise MetadataCorrupted(
            f"{key}: {where} is not an Arrow IPC stream of pairs ({str(exc)[:200]})", key=key
        ) from None
    if table.column_names != ["value", "label"]:
        raise corrupt(key, where, "columns ['value', 'label']", table.column_names)
    try:
        return normalise_pairs(table, t)
    except (pa.ArrowException, ValueError) as exc:
        raise MetadataCorrupted(
            f"{key}: {where} holds {table.schema.types}, not ({t}, string) ({str(exc)[:200]})",
            key=key,
        ) from None


def parse_footer(doc: Any, key: str, where: str) -> IndexFooter:
    try:
        footer = IndexFooter.from_json(doc)
        if not (isinstance(doc["key"], str) and doc["key"] and footer.size >= len(footer.tail)):
            raise ValueError("bad key or size")
    except (KeyError, TypeError, ValueError, binascii.Error) as exc:
        raise MetadataCorrupted(f"{key}: {where} is not an index footer ({exc})", key=key) from None
    try:
        piece_metadata(footer)
    except MetadataCorrupted as exc:
        raise MetadataCorrupted(f"{key}: {where}: {exc}", key=key) from None
    return footer


def parse_list(doc: Any, key: str, where: str) -> list[Any]:
    if not isinstance(doc, list):
        raise corrupt(key, where, "a list", doc)
    return doc


def parse_labels(doc: Any, key: str, where: str) -> frozenset[str]:
    items = parse_list(doc, key, where)
    if not all(isinstance(x, str) for x in items):
        raise corrupt(key, where, "a list of labels", doc)
    return frozenset(items)


def parse_count(doc: Any, key: str, where: str) -> int:
    if not isinstance(doc, int) or isinstance(doc, bool) or doc < 0:
        raise corrupt(key, where, "a pair count", doc)
    return doc


def corrupt(key: str, where: str, expected: str, found: Any) -> MetadataCorrupted:
    return MetadataCorrupted(f"{key}: {where} must be {expected}, found {found!r:.200}", key=key)
