"""Options of ``spark.readStream.format("parquetry")`` (Delta's names and defaults).

Kept apart from :class:`~parquetry.spark.options.SourceOptions` (the store/dataset options a
stream shares with batch reads) and free of pyspark imports, so the option check of
:mod:`parquetry.spark.options` knows these keys without importing the stream reader.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping
from dataclasses import dataclass

from parquetry.errors import InvalidArgument

__all__ = ["DEFAULT_MAX_FILES", "STREAM_KEYS", "StreamOptions"]

#: The stream-only option keys (matched case-insensitively: Spark lower-cases keys).
STREAM_KEYS = (
    "startingVersion",
    "startingTimestamp",
    "maxFilesPerTrigger",
    "maxBytesPerTrigger",
    "ignoreChanges",
    "ignoreDeletes",
    "skipChangeCommits",
)

#: Delta's default ``maxFilesPerTrigger``.
DEFAULT_MAX_FILES = 1000

_SIZE = re.compile(r"^\s*(\d+)\s*([kmgt]?)b?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def _get(options: Mapping[str, str], name: str) -> str | None:
    lowered = {str(k).lower(): v for k, v in options.items() if v is not None}
    value = lowered.get(name.lower())
    return None if value is None or str(value).strip() == "" else str(value).strip()


def _flag(options: Mapping[str, str], name: str) -> bool:
    raw = _get(options, name)
    if raw is None:
        return False
    if raw.lower() not in ("true", "false"):
        raise InvalidArgument(f"option {name!r} must be true or false, got {raw!r}")
    return raw.lower() == "true"


def _positive(options: Mapping[str, str], name: str, raw: str) -> int:
    match = _SIZE.match(raw) if name == "maxBytesPerTrigger" else None
    try:
        value = int(match.group(1)) * _UNITS[match.group(2).lower()] if match else int(raw)
    except ValueError:
        value = 0
    if value <= 0:
        raise InvalidArgument(
            f"option {name!r} must be a positive integer"
            + (" or a size such as 64m" if name == "maxBytesPerTrigger" else "")
            + f", got {raw!r}"
        )
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamOptions:
    """What a stream read is told beyond the store and dataset."""

    #: First version whose commits are read (inclusive); -1 with ``latest``: only new ones.
    starting_version: int | None = None
    starting_latest: bool = False
    starting_timestamp: datetime.datetime | None = None
    max_files: int | None = DEFAULT_MAX_FILES
    max_bytes: int | None = None
    #: Whether maxFilesPerTrigger was given (else only maxBytesPerTrigger limits, if given).
    max_files_given: bool = False
    ignore_changes: bool = False
    ignore_deletes: bool = False
    skip_change_commits: bool = False

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> StreamOptions:
        """Raises InvalidArgument naming the option for a malformed value or a conflict."""
        from parquetry.spark.option_names import parse_timestamp

        version = _get(options, "startingVersion")
        stamp = _get(options, "startingTimestamp")
        if version is not None and stamp is not None:
            raise InvalidArgument(
                "options 'startingVersion' and 'startingTimestamp' exclude each other"
            )
        starting: int | None = None
        latest = version is not None and version.lower() == "latest"
        if version is not None and not latest:
            try:
                starting = int(version)
            except ValueError:
                starting = -1
            if starting < 0:
                raise InvalidArgument(
                    f"option 'startingVersion' must be a version number >= 0 or 'latest', "
                    f"got {version!r}"
                )
        timestamp = None
        if stamp is not None:
            try:
                timestamp = parse_timestamp(stamp)
            except InvalidArgument:
                raise InvalidArgument(
                    "option 'startingTimestamp' must be an ISO timestamp or date such as "
                    f"2026-11-24T08:00:00Z, got {stamp!r}"
                ) from None
        raw_files = _get(options, "maxFilesPerTrigger")
        raw_bytes = _get(options, "maxBytesPerTrigger")
        max_files = (
            _positive(options, "maxFilesPerTrigger", raw_files) if raw_files else DEFAULT_MAX_FILES
        )
        max_bytes = _positive(options, "maxBytesPerTrigger", raw_bytes) if raw_bytes else None
        return cls(
            starting_version=starting,
            starting_latest=latest,
            starting_timestamp=timestamp,
            max_files=max_files if (raw_files or not raw_bytes) else None,
            max_bytes=max_bytes,
            max_files_given=raw_files is not None,
            ignore_changes=_flag(options, "ignoreChanges"),
            ignore_deletes=_flag(options, "ignoreDeletes"),
            skip_change_commits=_flag(options, "skipChangeCommits"),
        )
