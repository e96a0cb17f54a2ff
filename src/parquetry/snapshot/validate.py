"""Argument checks of ``ParquetDatasetStore``: all run before any I/O."""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from parquetry.errors import InvalidArgument

__all__ = [
    "check_columns",
    "check_compression",
    "check_metadata",
    "check_positive",
    "check_run_id",
    "check_seconds",
]

_CODECS = ("none", "snappy", "gzip", "brotli", "lz4", "lz4_raw", "zstd")


def check_compression(compression: object) -> str:
    if not isinstance(compression, str) or compression.lower() not in _CODECS:
        raise InvalidArgument(
            f"unknown compression {compression!r}; expected one of {', '.join(_CODECS)}"
        )
    if compression.lower() != "none" and not pa.Codec.is_available(compression.lower()):
        raise InvalidArgument(f"compression {compression!r} is not available in this pyarrow")
    return compression


def check_positive(name: str, value: object) -> int | None:
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise InvalidArgument(f"{name} must be a positive int or None, got {value!r}")
    return value


def check_seconds(name: str, value: object) -> float:
    if (
        not isinstance(value, int | float)
        or isinstance(value, bool)
        or not 0 <= value < float("inf")
    ):
        raise InvalidArgument(f"{name} must be a finite number of seconds >= 0, got {value!r}")
    return float(value)


def check_run_id(run_id: object) -> None:
    if run_id is not None and not isinstance(run_id, str):
        raise InvalidArgument(f"run_id must be a str or None, got {type(run_id).__name__}")


def check_metadata(metadata: object) -> None:
    if metadata is None:
        return
    if not isinstance(metadata, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()
    ):
        raise InvalidArgument("metadata must be a dict[str, str] or None")


def check_columns(columns: object) -> list[str] | None:
    if columns is None:
        return None
    if (
        isinstance(columns, str)
        or not isinstance(columns, Sequence)
        or not all(isinstance(c, str) for c in columns)
    ):
        raise InvalidArgument(f"columns must be a list of column names, got {columns!r}")
    return list(columns)
