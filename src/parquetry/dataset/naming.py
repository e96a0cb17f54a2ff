"""Every storage-key rule of kartothek-format datasets, in one place.

Layout (kartothek format v4 plus parquetry's version documents)::

    <uuid>.by-dataset-metadata.json | .msgpack.zstd    the current pointer (kartothek reads it)
    <uuid>/<table>/_common_metadata                      empty Parquet file carrying the schema
    <uuid>/<table>/<k1>=<v1>/.../<base>.parquet          data files
    <uuid>/indices/<column>/<timestamp>.by-dataset-index.parquet
    <uuid>/_versions/<n>.json                            immutable version entries (ours)
    <uuid>/_head.json                                    newest version + entries since (ours)
    <uuid>/_turn.json                                    advisory claim of the next commit (ours)
    <uuid>/_checkpoints/<n>.json                         checkpoint roots (ours)
    <uuid>/_segments/<id>.msgpack.zst                    file entries of checkpoints (ours)
    <uuid>/_versions/incarnation-<id>                    marks a live incarnation (ours)
    <uuid>/_intents/<id>.json                            write intents of writes in flight (ours)

Partition values are quoted like kartothek does (``urllib.parse.quote``) but with ``/``
escaped too, so a ``/`` inside a value can never be taken for a directory separator
(kartothek 5.3.0 bug); kartothek unquotes ``%2F`` back to ``/``.
"""

from __future__ import annotations

import datetime as dt
import re
import uuid as uuid_module
from decimal import Decimal
from typing import Any
from urllib.parse import quote, unquote, unquote_to_bytes

import pyarrow as pa

from parquetry.errors import InvalidArgument, MetadataCorrupted

__all__ = [
    "DEFAULT_TABLE",
    "METADATA_FORMATS",
    "common_metadata_key",
    "data_key",
    "incarnation_key",
    "is_incarnation_key",
    "index_key",
    "intent_key",
    "intents_prefix",
    "label_from_key",
    "legacy_index_key",
    "make_label",
    "metadata_key",
    "new_base_label",
    "parse_label",
    "NULL_PARTITION",
    "parse_partition_value",
    "partition_value_string",
    "quote_component",
    "validate_uuid",
    "version_key",
    "version_number_from_key",
    "versions_prefix",
]

DEFAULT_TABLE = "table"
METADATA_FORMATS = ("json", "msgpack.zstd")
_UUID_RE = re.compile(r"^[a-zA-Z0-9+\-_]+$")
_VERSION_DIGITS = 20


def validate_uuid(uuid: str) -> str:
    """Return ``uuid`` if kartothek accepts it as a dataset uuid, else raise InvalidArgument."""
    if not isinstance(uuid, str) or not _UUID_RE.match(uuid):
        raise InvalidArgument(
            f"dataset uuid {uuid!r} must be non-empty and use only A-Z a-z 0-9 + - _"
        )
    return uuid


def metadata_key(uuid: str, fmt: str = "json") -> str:
    """Key of the v4 metadata file (the current-version pointer)."""
    if fmt not in METADATA_FORMATS:
        raise InvalidArgument(f"metadata_format must be one of {METADATA_FORMATS}, got {fmt!r}")
    return f"{uuid}.by-dataset-metadata.{fmt}"


def common_metadata_key(uuid: str, table: str = DEFAULT_TABLE) -> str:
    return f"{uuid}/{table}/_common_metadata"


def versions_prefix(uuid: str) -> str:
    return f"{uuid}/_versions"


def version_key(uuid: str, number: int) -> str:
    """Zero-padded so a listing sorts versions numerically."""
    return f"{uuid}/_versions/{number:0{_VERSION_DIGITS}d}.json"


def incarnation_key(uuid: str, incarnation: str) -> str:
    """Marker object of one incarnation: created with it, removed by ``delete``."""
    return f"{versions_prefix(uuid)}/incarnation-{incarnation}"


def is_incarnation_key(key: str) -> bool:
    return key.rsplit("/", 1)[-1].startswith("incarnation-")


def head_key(uuid: str) -> str:
    """Format 2's head: the newest version, its checkpoint and the entries since."""
    return f"{uuid}/_head.json"


def turn_key(uuid: str) -> str:
    """Which contended writer commits next (advisory: :mod:`parquetry.dataset.turns`)."""
    return f"{uuid}/_turn.json"


def checkpoints_prefix(uuid: str) -> str:
    return f"{uuid}/_checkpoints/"


def checkpoint_key(uuid: str, number: int) -> str:
    return f"{checkpoints_prefix(uuid)}{number:0{_VERSION_DIGITS}d}.json"


def checkpoint_number_from_key(key: str) -> int | None:
    name = key.rsplit("/", 1)[-1]
    if not name.endswith(".json") or not name[:-5].isdigit():
        return None
    return int(name[:-5])


def segments_prefix(uuid: str) -> str:
    return f"{uuid}/_segments/"


def segment_key(uuid: str, ident: str) -> str:
    return f"{segments_prefix(uuid)}{ident}.msgpack.zst"


def intents_prefix(uuid: str) -> str:
    return f"{uuid}/_intents"


def intent_key(uuid: str, intent: str) -> str:
    return f"{intents_prefix(uuid)}/{intent}.json"


def version_number_from_key(key: str) -> int | None:
    name = key.rsplit("/", 1)[-1]
    stem = name.removesuffix(".json")
    return int(stem) if stem != name and stem.isdigit() else None


def index_key(uuid: str, column: str, created: dt.datetime) -> str:
    """Key of a secondary index file; ``created`` is naive UTC (kartothek's isoformat)."""
    stamp = quote(created.isoformat(), safe="")
    return f"{uuid}/indices/{quote(column, safe='')}/{stamp}.by-dataset-index.parquet"


def legacy_index_key(uuid: str, column: str) -> str:
    return f"{uuid}.{column}.by-dataset-index.parquet"


def index_piece_key(uuid: str, column: str, piece_id: str) -> str:
    """Key of a format-2 index piece: outside ``indices/``, so kartothek's garbage
    collection (which deletes index files its pointer does not name) never sees it."""
    return f"{uuid}/_indices/{quote(column, safe='')}/{piece_id}.parquet"


def is_index_piece_key(uuid: str, key: str) -> bool:
    return key.startswith(f"{uuid}/_indices/")


def new_base_label() -> str:
    return uuid_module.uuid4().hex


def quote_component(text: str | bytes) -> str:
    # safe="" (kartothek uses safe="/"): escaping "/" is the bug fix; the result only ever
    # contains A-Z a-z 0-9 _ . - ~ and %XX.
    return quote(text, safe="")


# A null partition value: kartothek 5.3.0 refuses nulls in partition columns, so Spark's
# (Hive's) spelling is used; kartothek reads it back as this string (or fails to parse it
# for a non-string column). An empty string is kartothek's own "k=" directory.
NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"


def partition_value_string(value: Any) -> str | bytes:
    """How kartothek spells a partition value (``str()`` of the pandas/numpy scalar)."""
    if value is None:
        return NULL_PARTITION
    if value in (NULL_PARTITION, NULL_PARTITION.encode()):
        # It would read back as a null.
        raise InvalidArgument(f"partition value {NULL_PARTITION!r} is reserved for nulls")
    if isinstance(value, bytes):
        return value
    if isinstance(value, float) and value != value:
        raise InvalidArgument("partition values cannot be NaN")
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            return str(value.astimezone(dt.UTC))
        return str(value)
    return str(value)


def make_label(partition: tuple[tuple[str, Any], ...], base: str) -> str:
    """``k1=v1/k2=v2/<base>`` with every key and value quoted."""
    parts = [
        f"{quote_component(k)}={quote_component(partition_value_string(v))}" for k, v in partition
    ]
    parts.append(base)
    return "/".join(parts)


def data_key(uuid: str, table: str, label: str) -> str:
    return f"{uuid}/{table}/{label}.parquet"


def label_from_key(uuid: str, table: str, key: str) -> str:
    prefix = f"{uuid}/{table}/"
    if not key.startswith(prefix) or not key.endswith(".parquet"):
        raise MetadataCorrupted(f"data file key {key!r} is not under {prefix!r}", key=key)
    return key[len(prefix) : -len(".parquet")]


def parse_label(label: str) -> list[tuple[str, str]]:
    """The quoted ``(key, value)`` pairs of a label, still as raw (quoted) value strings."""
    pairs = []
    for component in label.split("/")[:-1]:
        if component.count("=") != 1:
            continue
        k, v = component.split("=")
        pairs.append((unquote(k), v))
    return pairs


def parse_partition_value(raw: str, type_: pa.DataType) -> Any:
    """Type a quoted partition value from the label with the schema's type."""
    try:
        if pa.types.is_binary(type_) or pa.types.is_large_binary(type_):
            return unquote_to_bytes(raw)
        text = unquote(raw)
        if pa.types.is_string(type_) or pa.types.is_large_string(type_):
            return text
        if pa.types.is_boolean(type_):
            # kartothek 5.3.0 reads "False" back as True (np.bool_("False")): be explicit.
            low = text.lower()
            if low not in ("true", "false"):
                raise ValueError(f"not a bool: {text!r}")
            return low == "true"
        if pa.types.is_integer(type_):
            return int(text)
        if pa.types.is_floating(type_):
            return float(text)
        if pa.types.is_decimal(type_):
            return Decimal(text)
        if pa.types.is_date(type_):
            return dt.date.fromisoformat(text[:10])
        if pa.types.is_timestamp(type_):
            value = dt.datetime.fromisoformat(text)
            if type_.tz is not None and value.tzinfo is None:
                value = value.replace(tzinfo=dt.UTC)
            if type_.tz is None and value.tzinfo is not None:
                value = value.astimezone(dt.UTC).replace(tzinfo=None)
            return value
    except ValueError as exc:
        raise MetadataCorrupted(f"partition value {raw!r} is not a valid {type_}: {exc}") from None
    raise MetadataCorrupted(f"partition columns of type {type_} are not supported ({raw!r})")
