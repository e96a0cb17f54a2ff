"""Validation of stored metadata documents, once, at the boundary.

Pointer and version documents are parsed here (JSON or zstd msgpack) and checked
*completely* before a :class:`~parquetry.dataset.metadata.DatasetDocument` is built from
them: every field's type and range, index file references and footers, the encryption
entry and the user metadata. Problems are collected with their field paths into
one :class:`MetadataCorrupted` naming the key; afterwards the model is trusted (no lazy
``KeyError``/``TypeError``/``JSONDecodeError`` later).

The per-file statistics (JSON text per partition) are only checked for shape here; each
entry is checked completely by :mod:`parquetry.dataset.statscheck` when it is first decoded,
so opening a 10,000-partition dataset costs one parse plus a few milliseconds.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import json
import math
from collections.abc import Mapping
from typing import Any

import msgpack
import pyarrow as pa
import zstandard

from parquetry.dataset.statscheck import (
    INT64_MIN,
    UINT64_MAX,
    decode_file_entry,
    file_entry_problems,
    reject_constant,
    short_repr,
    stats_checkers,
)
from parquetry.errors import InvalidArgument, MetadataCorrupted

__all__ = [
    "MAX_DOCUMENT_BYTES",
    "MAX_METADATA_DEPTH",
    "check_document",
    "check_user_metadata",
    "decode_file_entry",
    "file_entry_problems",
    "metadata_problems",
    "parse_document_bytes",
    "raise_problems",
    "stats_checkers",
]

#: Largest decoded document accepted (a 10,000-partition document is about 4 MiB).
MAX_DOCUMENT_BYTES = 1 << 30
#: Deepest nesting of user metadata values.
MAX_METADATA_DEPTH = 32
#: Problems listed in one error before the rest are counted.
MAX_PROBLEMS = 20
FORMATS = ("json", "msgpack.zstd")

Problems = list[str]


def _kind(value: Any) -> str:
    return type(value).__name__


def parse_document_bytes(data: bytes, fmt: str, *, key: str) -> Any:
    """The decoded document (plain Python values); MetadataCorrupted if it cannot be."""
    try:
        if fmt == "json":
            if len(data) > MAX_DOCUMENT_BYTES:
                raise ValueError(f"{len(data)} bytes is more than {MAX_DOCUMENT_BYTES}")
            return json.loads(data, parse_constant=reject_constant)
        size = zstandard.frame_content_size(data)
        if size > MAX_DOCUMENT_BYTES:
            raise ValueError(f"it claims {size} bytes, more than {MAX_DOCUMENT_BYTES}")
        raw = zstandard.ZstdDecompressor().decompress(data, max_output_size=MAX_DOCUMENT_BYTES)
        return msgpack.unpackb(raw, raw=False, strict_map_key=True)
    except RecursionError:
        raise MetadataCorrupted(
            f"{key}: cannot decode {fmt} metadata: nested too deeply", key=key
        ) from None
    except (ValueError, TypeError, zstandard.ZstdError, msgpack.UnpackException) as exc:
        detail = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        raise MetadataCorrupted(f"{key}: cannot decode {fmt} metadata: {detail}", key=key) from None


# --- user metadata -------------------------------------------------------------------------


def _json_value_problems(value: Any, path: str, depth: int, out: Problems) -> None:
    if value is None or isinstance(value, bool | str):
        return
    if isinstance(value, int):
        if not INT64_MIN <= value <= UINT64_MAX:
            out.append(f"{path}: integer {short_repr(value)} is outside the 64-bit range")
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            out.append(f"{path}: expected a finite number, found {value!r}")
        return
    if depth >= MAX_METADATA_DEPTH and isinstance(value, dict | list | tuple):
        out.append(f"{path}: nested more than {MAX_METADATA_DEPTH} levels deep")
        return
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                out.append(f"{path}: key {short_repr(k)} is a {_kind(k)}, expected a string")
                continue
            _json_value_problems(v, f"{path}.{k}", depth + 1, out)
        return
    if isinstance(value, list | tuple):
        for i, v in enumerate(value):
            _json_value_problems(v, f"{path}[{i}]", depth + 1, out)
        return
    out.append(f"{path}: a {_kind(value)} is not a JSON value")


def metadata_problems(metadata: Any, path: str = "metadata") -> Problems:
    """Why ``metadata`` is not storable user metadata (empty list: it is)."""
    out: Problems = []
    if not isinstance(metadata, Mapping):
        return [f"{path}: expected an object, found {_kind(metadata)}"]
    _json_value_problems(dict(metadata), path, 0, out)
    return out


def check_user_metadata(metadata: Mapping[str, Any] | None) -> None:
    """Refuse user metadata that could not be stored and read back (before any write).

    User metadata must be an object with string keys and JSON values: finite numbers,
    64-bit integers, at most :data:`MAX_METADATA_DEPTH` levels of nesting.
    """
    if metadata is None:
        return
    problems = metadata_problems(metadata)
    if problems:
        raise InvalidArgument("invalid user metadata: " + "; ".join(problems[:MAX_PROBLEMS]))


# --- the document --------------------------------------------------------------------------


def _int(value: Any, path: str, out: Problems, *, minimum: int = 0, none: bool = False) -> None:
    if value is None and none:
        return
    if type(value) is not int or not minimum <= value < 2**63:
        out.append(f"{path}: expected an integer >= {minimum}, found {short_repr(value)}")


def _str(value: Any, path: str, out: Problems) -> bool:
    if not isinstance(value, str):
        out.append(f"{path}: expected a string, found {short_repr(value)}")
        return False
    return True


def _obj(value: Any, path: str, out: Problems) -> bool:
    if not isinstance(value, dict):
        out.append(f"{path}: expected an object, found {_kind(value)}")
        return False
    return True


def _partitions(parts: Any, out: Problems) -> None:
    if not _obj(parts, "partitions", out):
        return
    tables = None
    for label, entry in parts.items():
        # Paths are only formatted for problems: this loop runs once per partition.
        files = entry.get("files") if type(entry) is dict else None
        if type(files) is not dict or not files:
            out.append(f"partitions[{label!r}].files: expected an object of table -> key")
            continue
        if tables is None:
            tables = files.keys()
        elif files.keys() != tables:
            out.append(f"partitions[{label!r}].files: tables {sorted(files)} differ")
        for v in files.values():
            if type(v) is not str:
                out.append(f"partitions[{label!r}].files: key {short_repr(v)} is not a string")


def _indices(indices: Any, out: Problems) -> None:
    if not _obj(indices, "indices", out):
        return
    for column, ref in indices.items():
        path = f"indices[{column!r}]"
        if isinstance(ref, str):
            continue
        if not isinstance(ref, dict):
            out.append(f"{path}: expected an index file key, found {short_repr(ref)}")
            continue
        for value, labels in ref.items():
            if not isinstance(labels, list) or not all(isinstance(x, str) for x in labels):
                out.append(
                    f"{path}[{value!r}]: expected a list of labels, found {short_repr(labels)}"
                )


def _version(info: Any, out: Problems) -> None:
    if not _obj(info, "parquetry.version", out):
        return
    p = "parquetry.version"
    _int(info.get("number"), f"{p}.number", out)
    _int(info.get("parent"), f"{p}.parent", out, none=True)
    for name in (
        "rows_added",
        "rows_removed",
        "files_added",
        "files_removed",
        "epoch",
        "bytes_added",
        "bytes_removed",
    ):
        if name in info:
            _int(info[name], f"{p}.{name}", out)
    params = info.get("parameters", {})
    if _obj(params, f"{p}.parameters", out):
        for k, v in params.items():
            if not isinstance(v, str):
                out.append(f"{p}.parameters[{k!r}]: expected a string, found {short_repr(v)}")
    metrics = info.get("metrics", {})
    if _obj(metrics, f"{p}.metrics", out):
        for k, v in metrics.items():
            _int(v, f"{p}.metrics[{k!r}]", out)
    _str(info.get("operation"), f"{p}.operation", out)
    when = info.get("committed_at")
    if _str(when, f"{p}.committed_at", out):
        try:
            dt.datetime.fromisoformat(when)
        except ValueError:
            out.append(f"{p}.committed_at: {short_repr(when)} is not an ISO timestamp")


def _footers(footers: Any, out: Problems) -> None:
    if not _obj(footers, "parquetry.index_footers", out):
        return
    for column, f in footers.items():
        path = f"parquetry.index_footers[{column!r}]"
        if not _obj(f, path, out):
            continue
        _str(f.get("key"), f"{path}.key", out)
        _int(f.get("size"), f"{path}.size", out)
        tail = f.get("tail")
        if not _str(tail, f"{path}.tail", out):
            continue
        try:
            raw = base64.b64decode(tail, validate=True)
        except (binascii.Error, ValueError):
            out.append(f"{path}.tail: not base64")
            continue
        size = f.get("size")
        if len(raw) < 12 or raw[-4:] != b"PAR1" or (type(size) is int and len(raw) > size):
            out.append(f"{path}.tail: not the tail of a Parquet file of {short_repr(size)} bytes")


def _encryption(enc: Any, out: Problems) -> None:
    p = "parquetry.encryption"
    if not _obj(enc, p, out):
        return
    _str(enc.get("footer_key"), f"{p}.footer_key", out)
    keys = enc.get("column_keys", {})
    if not isinstance(keys, dict) or not all(
        isinstance(v, list) and all(isinstance(c, str) for c in v) for v in keys.values()
    ):
        out.append(f"{p}.column_keys: expected key id -> list of columns, found {short_repr(keys)}")
    for name in ("plaintext_footer", "uniform", "double_wrapping"):
        if name in enc and type(enc[name]) is not bool:
            out.append(f"{p}.{name}: expected a boolean, found {short_repr(enc[name])}")
    if "algorithm" in enc:
        _str(enc["algorithm"], f"{p}.algorithm", out)


def _files(files: Any, out: Problems) -> None:
    # Only the shape here: each entry's statistics are checked completely when first decoded
    # (FileInfos), which keeps opening a 10,000-partition dataset as cheap as one parse.
    # Entries are JSON text; older documents held the decoded lists.
    if not _obj(files, "parquetry.files", out):
        return
    if not all(type(v) is str or type(v) is list for v in files.values()):
        bad = next(k for k, v in files.items() if type(v) is not str and type(v) is not list)
        found = short_repr(files[bad])
        out.append(f"parquetry.files[{bad!r}]: expected statistics text, found {found}")


# --- everything ------------------------------------------------------------------------------


def check_document(doc: Any, schema: pa.Schema | None) -> Problems:
    """Problems of a decoded document, each with its field path.

    ``schema`` is the schema decoded from the document's parquetry entry (None if absent
    or invalid: the statistics' values are then checked for shape only).
    """
    out: Problems = []
    if not isinstance(doc, dict):
        return [f"(document): expected an object, found {_kind(doc)}"]
    version = doc.get("dataset_metadata_version")
    if type(version) is not int or version != 4:
        out.append(f"dataset_metadata_version: expected 4, found {short_repr(version)}")
    _str(doc.get("dataset_uuid"), "dataset_uuid", out)
    if "partitions" in doc:
        _partitions(doc["partitions"], out)
    keys = doc.get("partition_keys")
    if keys is not None and (
        not isinstance(keys, list) or not all(isinstance(k, str) for k in keys)
    ):
        out.append(f"partition_keys: expected a list of strings, found {short_repr(keys)}")
    if doc.get("indices") is not None:
        _indices(doc["indices"], out)
    if doc.get("metadata") is not None:
        out += metadata_problems(doc["metadata"])
    ext = doc.get("parquetry")
    if isinstance(ext, dict) and ext.get("format") == 1:
        _str(ext.get("schema"), "parquetry.schema", out)
        _version(ext.get("version"), out)
        fmt = ext.get("metadata_format", "json")
        if fmt not in FORMATS:
            out.append(
                f"parquetry.metadata_format: expected one of {FORMATS}, found {short_repr(fmt)}"
            )
        _footers(ext.get("index_footers", {}), out)
        _files(ext.get("files"), out)
        if ext.get("encryption") is not None:
            _encryption(ext["encryption"], out)
        if schema is not None:
            out += _schema_references(doc, schema)
    elif ext is not None and not isinstance(ext, dict):
        out.append(f"parquetry: expected an object, found {_kind(ext)}")
    elif ext is not None:
        out.append(f"parquetry.format: expected 1, found {short_repr(ext.get('format'))}")
    return out


def _schema_references(doc: dict[str, Any], schema: pa.Schema) -> Problems:
    out = []
    names = set(schema.names)
    keys = doc.get("partition_keys")
    for k in keys if isinstance(keys, list) else ():
        if isinstance(k, str) and k not in names:
            out.append(f"partition_keys: {k!r} is not a column of the schema")
    indices = doc.get("indices")
    for column in indices if isinstance(indices, dict) else ():
        if column not in names:
            out.append(f"indices: {column!r} is not a column of the schema")
    return out


def raise_problems(problems: Problems, key: str) -> None:
    """One MetadataCorrupted listing ``problems`` (the first :data:`MAX_PROBLEMS`)."""
    if not problems:
        return
    shown = problems[:MAX_PROBLEMS]
    more = f"; ... and {len(problems) - len(shown)} more" if len(problems) > len(shown) else ""
    raise MetadataCorrupted(f"{key}: invalid dataset metadata: {'; '.join(shown)}{more}", key=key)
