"""Offsets of the ``parquetry`` streaming source and its admission control.

Offsets are dataset versions. ``{"version": n}`` means every commit up to ``n`` was read;
``{"version": n, "files": k}`` means the commits before ``n`` and the first ``k`` files
version ``n`` added (a big commit split over micro-batches by admission control);
``"snapshot": true`` marks the files of the *state* of version ``n`` (the first batch of a
stream without a starting version reads the whole current version, as Delta does). The
reader (:mod:`parquetry.spark.stream_source`) may add ``"from"`` to a first batch's end.

Admission control follows Spark's read limits (files, bytes, rows per micro-batch), capped
by the stream's own ``maxFilesPerTrigger``/``maxBytesPerTrigger``; the first file of a
batch is always admitted, so every batch makes progress.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    ReadMaxFiles,
    ReadMaxRows,
)

from parquetry.spark.stream_options import StreamOptions

__all__ = ["Limits", "limits_of", "make_offset", "parse_offset"]


class Limits:
    """What one micro-batch may still take (None: no limit of that kind)."""

    def __init__(self, files: int | None, size: int | None, rows: int | None):
        self.files, self.size, self.rows = files, size, rows
        self.taken_files = self.taken_bytes = self.taken_rows = 0

    def admits(self, f: Any) -> bool:
        """Whether ``f`` still fits; the first file of a batch always does (progress)."""
        if self.taken_files == 0:
            return True
        return not (
            (self.files is not None and self.taken_files + 1 > self.files)
            or (self.size is not None and self.taken_bytes + (f.size or 0) > self.size)
            or (self.rows is not None and self.taken_rows + (f.rows or 0) > self.rows)
        )

    def take(self, f: Any) -> None:
        self.taken_files += 1
        self.taken_bytes += f.size or 0
        self.taken_rows += f.rows or 0


def limits_of(limit: ReadLimit, stream: StreamOptions) -> Limits:
    """The :class:`Limits` of one micro-batch under Spark's ``limit``."""
    if isinstance(limit, ReadAllAvailable):
        return Limits(None, None, None)
    files, size, rows = stream.max_files, stream.max_bytes, None
    if isinstance(limit, ReadMaxFiles):
        files = min(limit.max_files, files) if files else limit.max_files
    elif isinstance(limit, ReadMaxBytes):
        size = min(limit.max_bytes, size) if size else limit.max_bytes
    elif isinstance(limit, ReadMaxRows):
        rows = limit.max_rows
    return Limits(files, size, rows)


def parse_offset(offset: dict[str, Any]) -> tuple[int, bool, int | None]:
    """(version, snapshot, files read of it; None = the whole version read)."""
    from parquetry.errors import InvalidArgument

    try:
        version = int(offset["version"])
        files = offset.get("files")
        return version, bool(offset.get("snapshot", False)), None if files is None else int(files)
    except (KeyError, TypeError, ValueError):
        raise InvalidArgument(
            f"stream offset {offset!r} is not a parquetry offset ({{'version': n}}): the "
            "checkpoint belongs to another source"
        ) from None


def make_offset(version: int, snapshot: bool, files: int | None) -> dict[str, Any]:
    """The offset :func:`parse_offset` reads back as ``(version, snapshot, files)``."""
    out: dict[str, Any] = {"version": version}
    if files is not None:
        out["files"] = files
    if snapshot:
        out["snapshot"] = True
    return out
