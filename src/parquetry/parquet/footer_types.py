"""Names and value decoding for raw Parquet footer structures (parquet.thrift ids)."""

from __future__ import annotations

import datetime as dt
import struct
from typing import Any

__all__ = [
    "CODECS",
    "CONVERTED_TYPES",
    "ENCODINGS",
    "PHYSICAL_TYPES",
    "REPETITIONS",
    "decode_stat",
    "logical_type_name",
]

PHYSICAL_TYPES = {
    0: "BOOLEAN",
    1: "INT32",
    2: "INT64",
    3: "INT96",
    4: "FLOAT",
    5: "DOUBLE",
    6: "BYTE_ARRAY",
    7: "FIXED_LEN_BYTE_ARRAY",
}
REPETITIONS = {0: "REQUIRED", 1: "OPTIONAL", 2: "REPEATED"}
CODECS = {
    0: "UNCOMPRESSED",
    1: "SNAPPY",
    2: "GZIP",
    3: "LZO",
    4: "BROTLI",
    5: "LZ4",
    6: "ZSTD",
    7: "LZ4_RAW",
}
ENCODINGS = {
    0: "PLAIN",
    2: "PLAIN_DICTIONARY",
    3: "RLE",
    4: "BIT_PACKED",
    5: "DELTA_BINARY_PACKED",
    6: "DELTA_LENGTH_BYTE_ARRAY",
    7: "DELTA_BYTE_ARRAY",
    8: "RLE_DICTIONARY",
    9: "BYTE_STREAM_SPLIT",
}
CONVERTED_TYPES = {
    0: "UTF8",
    1: "MAP",
    2: "MAP_KEY_VALUE",
    3: "LIST",
    4: "ENUM",
    5: "DECIMAL",
    6: "DATE",
    7: "TIME_MILLIS",
    8: "TIME_MICROS",
    9: "TIMESTAMP_MILLIS",
    10: "TIMESTAMP_MICROS",
    11: "UINT_8",
    12: "UINT_16",
    13: "UINT_32",
    14: "UINT_64",
    15: "INT_8",
    16: "INT_16",
    17: "INT_32",
    18: "INT_64",
    19: "JSON",
    20: "BSON",
    21: "INTERVAL",
}
_SIMPLE_LOGICAL = {
    1: "STRING",
    2: "MAP",
    3: "LIST",
    4: "ENUM",
    6: "DATE",
    11: "UNKNOWN",
    12: "JSON",
    13: "BSON",
    14: "UUID",
    15: "FLOAT16",
    16: "VARIANT",
    17: "GEOMETRY",
    18: "GEOGRAPHY",
}
_TIME_UNITS = {1: "MILLIS", 2: "MICROS", 3: "NANOS"}
#: Scales beyond any real decimal (76 digits) are shown raw instead of padded with zeros.
_MAX_SCALE = 76


def _unit(unit: dict[int, Any]) -> str:
    return next((_TIME_UNITS[k] for k in unit if k in _TIME_UNITS), "?")


def logical_type_name(element: dict[int, Any]) -> str | None:
    """A compact name for a SchemaElement's logical type, e.g. ``TIMESTAMP(MICROS,UTC)``."""
    logical = element.get(10)
    if not logical:
        return None
    (kind, body), *_ = logical.items()
    if kind in _SIMPLE_LOGICAL:
        return _SIMPLE_LOGICAL[kind]
    if kind == 5:
        return f"DECIMAL({body.get(2)},{body.get(1)})"
    if kind in (7, 8):
        name = "TIME" if kind == 7 else "TIMESTAMP"
        zone = "UTC" if body.get(1) else "local"
        return f"{name}({_unit(body.get(2, {}))},{zone})"
    if kind == 10:
        return f"INT({body.get(1)},{'signed' if body.get(2) else 'unsigned'})"
    return f"LOGICAL#{kind}"


def decode_stat(raw: bytes | None, element: dict[int, Any]) -> str | None:
    """A statistics value as readable text, typed by the column's schema element."""
    if raw is None:
        return None
    physical = element.get(1)
    logical = logical_type_name(element) or ""
    converted = CONVERTED_TYPES.get(element.get(6, -1), "")
    try:
        return _decode(raw, physical, logical, converted, element)
    except (struct.error, ValueError, OverflowError, IndexError):
        # Hostile or truncated statistics (an empty BOOLEAN min, a scale of 2**30): raw bytes.
        return "0x" + raw.hex()


def _decode(
    raw: bytes, physical: Any, logical: str, converted: str, element: dict[int, Any]
) -> str:
    if logical.startswith("DECIMAL") or converted == "DECIMAL":
        unscaled = int.from_bytes(raw, "little" if physical in (1, 2) else "big", signed=True)
        scale = element.get(7) or 0
        if not 0 <= scale <= _MAX_SCALE:
            raise ValueError(f"decimal scale {scale}")
        return _scaled(unscaled, scale)
    if physical == 0:
        return str(bool(raw[0]))
    if physical in (1, 2):
        signed = "unsigned" not in logical and not converted.startswith("UINT")
        number = int.from_bytes(raw, "little", signed=signed)
        if logical == "DATE" or converted == "DATE":
            return (dt.date(1970, 1, 1) + dt.timedelta(days=number)).isoformat()
        if logical.startswith("TIMESTAMP") or converted.startswith("TIMESTAMP"):
            return _timestamp(number, logical or converted)
        return str(number)
    if physical == 4:
        return repr(struct.unpack("<f", raw)[0])
    if physical == 5:
        return repr(struct.unpack("<d", raw)[0])
    if logical in ("STRING", "ENUM", "JSON") or converted in ("UTF8", "ENUM", "JSON"):
        return raw.decode("utf-8", "replace")
    return "0x" + raw.hex()


def _scaled(unscaled: int, scale: int) -> str:
    sign = "-" if unscaled < 0 else ""
    digits = str(abs(unscaled)).rjust(scale + 1, "0")
    return f"{sign}{digits[:-scale]}.{digits[-scale:]}" if scale else f"{sign}{digits}"


def _timestamp(number: int, kind: str) -> str:
    per_second = 1_000 if "MILLIS" in kind else 1_000_000_000 if "NANOS" in kind else 1_000_000
    seconds, fraction = divmod(number, per_second)
    moment = dt.datetime(1970, 1, 1) + dt.timedelta(seconds=seconds)
    width = len(str(per_second)) - 1
    suffix = "Z" if "UTC" in kind or "TIMESTAMP_" in kind else ""
    return f"{moment.isoformat()}.{fraction:0{width}d}{suffix}"
